//! The OVSDB module: fulmar as a client of the stock `ovsdb-server`
//! holding Open vSwitch's `vswitch.ovsschema`, the way `ovs-vswitchd` is,
//! so that `ovs-vsctl` (and the tools built on OVSDB) manage the switch.
//!
//! # Starting it
//!
//! ```text
//! ovsdb-tool create /var/lib/fulmar/conf.db /usr/share/openvswitch/vswitch.ovsschema
//! ovsdb-server /var/lib/fulmar/conf.db --remote=punix:/run/fulmar/db.sock --detach
//! fulmar run --ovsdb unix:/run/fulmar/db.sock [--config switch.toml]
//! ovs-vsctl --db=unix:/run/fulmar/db.sock add-br br0
//! ```
//!
//! `--ovsdb` takes `unix:PATH` or `tcp:IP:PORT`. fulmar monitors the
//! Open_vSwitch, Bridge, Port, Interface, Controller and Manager tables
//! (RFC 7047 `monitor`), answers the server's echo requests, and when the
//! server goes away reconnects (backoff 0.2 s doubling to 2 s) and monitors
//! again: the state is read whole again, so nothing is lost.
//! `--ovsdb-stats-interval` sets how often `Interface.statistics` is
//! refreshed (default 5 s).
//!
//! # What it covers
//!
//! * Configuration from the database ([`view`] has the mapping): bridges
//!   (`name`, `fail_mode`, `controller`, `ports`,
//!   `other_config:datapath-id`), ports of one interface with `type` ""/
//!   "system" (AF_PACKET), "afxdp", "tap", "memory", "pcap", and
//!   `ofport_request`; controller targets (`tcp:`, `ssl:`, `ptcp:`,
//!   `pssl:`). Each bridge, port, fail mode and controller list is its own
//!   datastore transaction, so one bad row (an interface that does not
//!   exist) does not stop the others; its failure is written into the row,
//!   and it is tried again every 5 s (an interface that appears later is
//!   picked up).
//! * Written back (`writeback.rs`): `Open_vSwitch.cur_cfg` once a
//!   `next_cfg` is in force (so `ovs-vsctl` without `--no-wait` returns),
//!   `Bridge.datapath_id`, `Interface.ofport` (-1 when the interface could
//!   not be used), `error`, `link_state`, `admin_state`, `statistics`
//!   (OpenFlow port statistics: rx/tx packets, bytes, dropped, errors,
//!   ...), `Controller.is_connected`, `role`, `status:last_error`. Only
//!   changed columns are written; link state and controller connections
//!   within about a second.
//! * The other direction ([`sync`] has the rule): a change made with
//!   `fulmar ctl` (or the `--config` bridges at start) is written into the
//!   database. Per item (bridge, port, fail mode, controller list), the
//!   side that changed since the last agreement wins; when both changed,
//!   the database wins. An empty database (no Open_vSwitch row) is filled
//!   from the switch.
//!
//! # What it does not cover
//!
//! * Interface types "internal" other than the one `ovs-vsctl add-br`
//!   makes (that one, named after its bridge, is the bridge's local port,
//!   `ofport` 65534; see [`view`]), "patch" (patch links are made in the
//!   configuration file and are not shown in the database), "dpdk" and
//!   tunnels other than "vxlan" and "gre" (IPv4, a fixed key or `key=flow`); bonds; VLAN settings on ports (`tag`, `trunks`,
//!   `vlan_mode`): such a port is refused with the reason in its
//!   interfaces' `error`.
//! * Ignored, and said so in the row: `mtu_request`, `mac`,
//!   `ingress_policing_rate`, `bfd`, interface `options` other than pcap's
//!   and the tunnels' (`remote_ip`, `local_ip`, `key`, `dst_port`)
//!   (in `Interface.error`, the port still works); STP, RSTP, multicast
//!   snooping, mirrors, NetFlow, sFlow, IPFIX (in
//!   `Bridge.status:fulmar_ignored`). Not read at all: QoS, queues,
//!   `Bridge.protocols` (fulmar speaks OpenFlow 1.3), `datapath_type`,
//!   `Controller` timers and connection modes, `Open_vSwitch.ssl` (TLS
//!   controllers take fulmar's `[tls]` files), `external_ids`. `Manager`
//!   rows are ovsdb-server's own business (`--remote=db:...`).
//! * `ssl:` connections to ovsdb-server; `monitor_cond`; clustered
//!   databases.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use runtime::daemon::Daemon;

mod client;
mod datum;
mod jsonrpc;
mod replica;
pub mod sync;
#[cfg(test)]
mod tunnel_tests;
pub mod view;
mod writeback;

/// The module's `fulmar run` flags.
#[derive(clap::Args, Debug, Clone, Default)]
#[group(id = "ovsdb-module")]
pub struct Args {
    /// Take the configuration from an ovsdb-server holding vswitch.ovsschema and write the switch's state back (unix:PATH or tcp:IP:PORT)
    #[arg(long = "ovsdb", value_name = "TARGET")]
    pub ovsdb: Option<String>,
    /// Seconds between refreshes of Interface.statistics in the OVSDB database (1..=3600)
    #[arg(long = "ovsdb-stats-interval", value_name = "SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub ovsdb_stats_interval: u64,
}

impl Args {
    /// The module was asked for.
    pub fn enabled(&self) -> bool {
        self.ovsdb.is_some()
    }
}

/// The running module; dropping it (or [`Service::stop`]) stops it.
pub struct Service {
    stop: Arc<AtomicBool>,
    tx: Sender<client::Event>,
    threads: Vec<JoinHandle<()>>,
}

impl Service {
    /// Stops the module (within about a second).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.tx.send(client::Event::Stop);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Starts the module when `args` ask for it. It runs on its own threads
/// (every daemon call blocks), so `_rt` is not used.
pub fn start(
    daemon: Arc<Daemon>,
    _rt: &tokio::runtime::Handle,
    args: &Args,
) -> Result<Option<Service>, String> {
    let Some(t) = &args.ovsdb else {
        return Ok(None);
    };
    let target = client::Target::parse(t)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let mut threads = Vec::new();
    let spawn_err = |e: std::io::Error| format!("--ovsdb: cannot start a thread: {e}");
    {
        let (d, tx, stop) = (daemon.clone(), tx.clone(), stop.clone());
        threads.push(
            std::thread::Builder::new()
                .name("fulmar-ovsdb-watch".into())
                .spawn(move || client::watch(d, tx, stop))
                .map_err(spawn_err)?,
        );
    }
    let c = client::Client::new(
        daemon,
        target,
        rx,
        stop.clone(),
        Duration::from_secs(args.ovsdb_stats_interval),
    );
    let tx2 = tx.clone();
    let main = std::thread::Builder::new()
        .name("fulmar-ovsdb".into())
        .spawn(move || c.run(tx2));
    match main {
        Ok(h) => threads.push(h),
        Err(e) => {
            // The watcher stops with the service.
            drop(Service { stop, tx, threads });
            return Err(spawn_err(e));
        }
    }
    tracing::info!("ovsdb: following {t}");
    Ok(Some(Service { stop, tx, threads }))
}

/// For the fuzz target (`fuzz/fuzz_targets/ovsdb_stream.rs`): bytes as a
/// server might send them go through the framer (split in two at the
/// first byte's value), message classification, the replica (every value
/// taken as a monitor update) and the view the switch is configured from.
/// Whatever the bytes, this returns: errors are values, never panics.
#[doc(hidden)]
pub fn fuzz_server_bytes(data: &[u8]) {
    let cut = data.first().map_or(0, |&b| usize::from(b).min(data.len()));
    let mut framer = jsonrpc::Framer::default();
    let mut replica = replica::Replica::default();
    for piece in [&data[..cut], &data[cut..]] {
        let Ok(values) = framer.push(piece) else {
            return;
        };
        for v in values {
            if let Some(jsonrpc::Message::Notification { params, .. }) =
                jsonrpc::Message::parse(v.clone())
            {
                if let Some(u) = params.get(1) {
                    let _ = replica.apply(u);
                }
            }
            let _ = replica.apply(&v);
            let _ = view::DbView::read(&replica);
        }
    }
}
