//! The OF-CONFIG 1.2 module: a NETCONF server (RFC 6241) over SSH
//! (RFC 6242, the `netconf` subsystem) for the capable-switch model
//! (namespace `urn:onf:config:yang`), a client of the datastore like every
//! management module.
//!
//! # Starting it
//!
//! ```text
//! fulmar run -i eth1 -i eth2 --netconf 830 \
//!     --netconf-host-key /etc/fulmar/netconf_host_key \
//!     --netconf-authorized-keys /etc/fulmar/netconf_authorized_keys
//! ```
//!
//! `--netconf ADDR:PORT` (a bare port listens on 127.0.0.1). The host key is
//! read from `--netconf-host-key` (OpenSSH format), or an Ed25519 key is
//! created there with mode 0600 (default `netconf_host_key` in the current
//! directory). Clients authenticate by public key only, against the
//! OpenSSH `authorized_keys`-style file `--netconf-authorized-keys` (re-read
//! at each attempt, so keys can be added while running; any user name).
//! No password authentication: a password file would be one more secret
//! on disk for no gain over keys, and ncclient/paramiko do keys.
//!
//! # What it covers
//!
//! * hello with base:1.0 and base:1.1; `]]>]]>` framing, chunked framing
//!   when both sides announce base:1.1; messages up to 4 MiB;
//! * get (configuration and state), get-config (running), edit-config
//!   (running; default-operation merge/replace/none; operation attributes
//!   merge/replace/create/delete/remove; test-option test-only validates
//!   without applying; every error-option behaves as rollback-on-error),
//!   validate, subtree filters, lock/unlock of running (released when its
//!   session ends), close-session, kill-session;
//! * capable-switch `id` (`fulmar`); `resources/port` (resource-id and name
//!   = interface name, number, current-rate and max-rate when known,
//!   configuration admin-state/no-receive/no-forward/no-packet-in, and in
//!   get the state oper-state/blocked/live); `logical-switches/switch`
//!   (id = bridge name, datapath-id, enabled, lost-connection-behavior =
//!   fail mode, controllers with id/role/ip-address/port/protocol and in
//!   get their connection-state, resources/port and queue references);
//! * `resources/queue`: a port's egress queues (resource-id `PORT:ID`, id,
//!   port, properties min-rate/max-rate in tenths of a percent of the
//!   port's QoS max_rate); an edit of queues is one `set-qos` of each port
//!   whose queues change (see `model` for the mapping);
//! * one edit-config is one datastore transaction, all or nothing: a new
//!   switch is `add-br`, a removed one `del-br`, the controller list
//!   `set-controller` (or `del-controller`), lost-connection-behavior
//!   `set-fail-mode`, a port reference under a switch `add-port`/`del-port`
//!   (interface = resource-id, afpacket backend, number from the port
//!   resource's `number` or `requested-number` in the same edit), a new
//!   `number` for an attached port renumbers it, datapath-id sets the
//!   bridge's dpid. A get-config sent back unchanged changes nothing.
//!   Errors are rpc-errors (malformed-message, unknown-element,
//!   unknown-namespace, missing-element, bad-attribute, invalid-value,
//!   data-missing, data-exists, operation-not-supported, operation-failed
//!   with the datastore's text, in-use, lock-denied) and change nothing.
//!
//! # What it does not cover
//!
//! * queue names other than `PORT:ID`, queue experimenter properties,
//!   queue priorities and the port's QoS max_rate (`fulmar ctl set-qos`
//!   sets them; a new queue gets priority 0), owned certificates, flow-table resources,
//!   capabilities (not shown), port features, tunnels, configuration
//!   points; changing a port's `configuration` (its bits are OpenFlow
//!   port-mod's and are shown as the port has them; a different value is
//!   operation-not-supported); a port resource no logical switch references
//!   (fulmar has no unattached ports); disabling a switch (`enabled` false);
//! * candidate and startup datastores (the running one is persisted by the
//!   datastore), confirmed commit, copy-config, delete-config, xpath
//!   filters, notifications, with-defaults, NETCONF over TLS, call home,
//!   password or keyboard-interactive authentication;
//! * a controller's `id` is its target (`tcp:10.0.0.1:6653`): the datastore
//!   stores no other name, so an id given in edit-config is matched against
//!   targets and not kept; a controller's `role` is shown live in get only;
//! * an edit naming a controller without `protocol` or `port` gets the
//!   model's defaults, `tls` and 6633 (TLS needs the switch's `[tls]` files).

//!
//! # Layout
//!
//! `framing` (RFC 6242 end-of-message and chunked framing, a plain state
//! machine), `xml` (a bounded element tree over quick-xml; no DTDs),
//! `model` (the capable-switch tree from a datastore snapshot, subtree
//! filters, edit-config to datastore ops), `rpc` (the NETCONF operations
//! behind a `Store` trait, tested without SSH), `server` (russh: host key,
//! public-key authentication, the `netconf` subsystem).

use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use runtime::daemon::Daemon;

mod error;
mod framing;
mod model;
mod rpc;
mod server;
mod xml;

/// Most SSH connections served at once (more are closed at accept).
const MAX_CONNECTIONS: usize = 64;

/// The module's `fulmar run` flags.
#[derive(clap::Args, Debug, Clone, Default)]
#[group(id = "ofconfig-module")]
pub struct Args {
    /// Serve OF-CONFIG 1.2 over NETCONF/SSH on ADDR:PORT (PORT alone: 127.0.0.1:PORT)
    #[arg(long = "netconf", value_name = "ADDR")]
    pub netconf: Option<String>,
    /// NETCONF SSH host key (OpenSSH format); an Ed25519 key is created there (0600) if missing
    #[arg(
        long = "netconf-host-key",
        value_name = "PATH",
        default_value = "netconf_host_key"
    )]
    pub netconf_host_key: PathBuf,
    /// NETCONF clients' public keys, one OpenSSH `TYPE BASE64 [COMMENT]` line each (re-read at each login)
    #[arg(
        long = "netconf-authorized-keys",
        value_name = "PATH",
        default_value = "netconf_authorized_keys"
    )]
    pub netconf_authorized_keys: PathBuf,
}

impl Args {
    /// The module was asked for.
    pub fn enabled(&self) -> bool {
        self.netconf.is_some()
    }
}

/// The running module; dropping it (or [`Service::stop`]) stops it.
pub struct Service {
    task: tokio::task::JoinHandle<()>,
}

impl Service {
    /// Stops the module.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The daemon as the operations see it.
struct DaemonStore(Arc<Daemon>);

impl rpc::Store for DaemonStore {
    fn snapshot(&self, state: bool) -> model::Snapshot {
        let (config, _) = self.0.config();
        let mut snap = model::Snapshot::from_config(&config);
        // Port configuration bits are the port's (OpenFlow port-mod sets
        // them), so get-config shows them too; controller state is get's.
        let show = state.then(|| self.0.show());
        for b in &mut snap.bridges {
            if let Some(live) = show
                .as_ref()
                .and_then(|s| s.bridges.iter().find(|s| s.name == b.name))
            {
                for c in &mut b.controllers {
                    let t = c.target.to_string();
                    if let Some(s) = live.controllers.iter().find(|s| s.target == t) {
                        c.live = Some((s.connected, s.role.clone()));
                    }
                }
            }
            let descs = self.0.runtime().port_desc(&b.name).unwrap_or_default();
            for p in &mut b.ports {
                if let Some(d) = descs.iter().find(|d| d.port_no == p.number) {
                    p.live = Some(model::PortLive {
                        config: d.config,
                        state: d.state,
                        curr_speed: d.curr_speed,
                        max_speed: d.max_speed,
                    });
                }
            }
        }
        snap
    }

    fn transact(&self, ops: &[datastore::Op], dry_run: bool) -> Result<(), String> {
        self.0
            .transact(ops, dry_run)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A datastore in memory for [`fuzz_netconf_bytes`]: one bridge with two
/// memory ports; edits are validated and applied as the daemon does.
struct MemoryStore {
    config: std::sync::Mutex<datastore::Config>,
    /// Transactions applied (not dry runs), to check one edit is one.
    applied: std::sync::atomic::AtomicUsize,
}

impl rpc::Store for MemoryStore {
    fn snapshot(&self, _state: bool) -> model::Snapshot {
        let config = self.config.lock().unwrap_or_else(|p| p.into_inner());
        model::Snapshot::from_config(&config)
    }

    fn transact(&self, ops: &[datastore::Op], dry_run: bool) -> Result<(), String> {
        let mut config = self.config.lock().unwrap_or_else(|p| p.into_inner());
        let next = config
            .apply(ops, datastore::Host { cpus: 4 })
            .map_err(|e| e.to_string())?;
        if !dry_run {
            *config = next;
            self.applied
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

/// For the `netconf` fuzz target: `data`'s first byte picks the framing,
/// the rest is what a client sends after SSH. Every message goes through
/// the framer, the hello check or the operations, against a
/// [`MemoryStore`]. Panics only where a property breaks: a reply that is
/// not one well-formed XML document, or one message that applied more than
/// one transaction. Returns the transactions applied.
#[doc(hidden)]
pub fn fuzz_netconf_bytes(data: &[u8]) -> usize {
    let Some((&mode, data)) = data.split_first() else {
        return 0;
    };
    let base = "[[bridges]]\nname = \"br0\"\n\
        [[bridges.ports]]\nport = 1\ninterface = \"a\"\nbackend = \"memory\"\n\
        [[bridges.ports]]\nport = 2\ninterface = \"b\"\nbackend = \"memory\"\n";
    let Ok(config) =
        datastore::Config::from_str_for(base, "fuzz.toml", datastore::Host { cpus: 4 })
    else {
        panic!("the fuzz target's base configuration is valid");
    };
    let store = MemoryStore {
        config: std::sync::Mutex::new(config),
        applied: std::sync::atomic::AtomicUsize::new(0),
    };
    let shared = rpc::Shared::default();
    let session = rpc::Session {
        id: 1,
        store: &store,
        shared: &shared,
    };
    let mut framer = framing::Framer::new(1 << 16);
    if mode & 1 == 1 {
        framer.set_mode(framing::Mode::Chunked);
    }
    framer.push(data);
    for n in 0..64 {
        let Ok(Some(msg)) = framer.next_message() else {
            break;
        };
        if n == 0 && mode & 2 == 2 {
            let _ = rpc::client_hello(&msg);
            continue;
        }
        let before = store.applied.load(std::sync::atomic::Ordering::Relaxed);
        let (reply, _) = session.handle(&msg);
        let after = store.applied.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            after - before <= 1,
            "one message applied {} transactions",
            after - before
        );
        if let Err(e) = xml::parse(reply.as_bytes()) {
            panic!("a reply that does not parse ({e}): {reply}");
        }
    }
    store.applied.load(std::sync::atomic::Ordering::Relaxed)
}

fn listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(p) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], p)));
    }
    s.parse()
        .map_err(|_| format!("--netconf {s}: expected ADDR:PORT or PORT"))
}

/// Starts the module on `rt` when `args` ask for it.
pub fn start(
    daemon: Arc<Daemon>,
    rt: &tokio::runtime::Handle,
    args: &Args,
) -> Result<Option<Service>, String> {
    let Some(addr) = &args.netconf else {
        return Ok(None);
    };
    let addr = listen_addr(addr)?;
    let key = server::host_key(&args.netconf_host_key)?;
    let config = Arc::new(russh::server::Config {
        keys: vec![key],
        methods: russh::MethodSet::from(&[russh::MethodKind::PublicKey][..]),
        auth_rejection_time: std::time::Duration::from_millis(300),
        auth_rejection_time_initial: Some(std::time::Duration::ZERO),
        inactivity_timeout: Some(std::time::Duration::from_secs(3600)),
        ..Default::default()
    });
    let listener = {
        let _g = rt.enter();
        let std_l =
            std::net::TcpListener::bind(addr).map_err(|e| format!("--netconf {addr}: {e}"))?;
        std_l
            .set_nonblocking(true)
            .map_err(|e| format!("--netconf {addr}: {e}"))?;
        tokio::net::TcpListener::from_std(std_l).map_err(|e| format!("--netconf {addr}: {e}"))?
    };
    let srv = Arc::new(server::Server {
        store: Arc::new(DaemonStore(daemon)),
        shared: Arc::new(rpc::Shared::default()),
        authorized: args.netconf_authorized_keys.clone(),
        next_id: AtomicU32::new(1),
    });
    tracing::info!("OF-CONFIG: NETCONF over SSH on {addr}");
    // Connections live in a JoinSet owned by the accept task: stopping the
    // module aborts it, which drops the set and every connection with it.
    let task = rt.spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            };
            let Ok((sock, _)) = accepted else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            if conns.len() >= MAX_CONNECTIONS {
                tracing::warn!("OF-CONFIG: {MAX_CONNECTIONS} connections open; refusing another");
                continue;
            }
            let _ = sock.set_nodelay(true);
            let conn = server::Conn {
                server: srv.clone(),
                channels: Default::default(),
            };
            let config = config.clone();
            conns.spawn(async move {
                match russh::server::run_stream(config, sock, conn).await {
                    Ok(s) => {
                        let _ = s.await;
                    }
                    Err(e) => tracing::debug!("netconf ssh: {e}"),
                }
            });
        }
    });
    Ok(Some(Service { task }))
}

#[cfg(test)]
mod tests {
    /// The fuzz entry point runs a real session: a hello, a get-config and
    /// an edit that applies, in both framings, and garbage, without
    /// tripping its own checks.
    #[test]
    fn fuzz_entry_runs_a_session() {
        let base = "urn:ietf:params:xml:ns:netconf:base:1.0";
        let hello = format!(
            r#"<hello xmlns="{base}"><capabilities><capability>{base}</capability></capabilities></hello>"#
        );
        let get = format!(
            r#"<rpc message-id="1" xmlns="{base}"><get-config><source><running/></source></get-config></rpc>"#
        );
        let edit = format!(
            r#"<rpc message-id="2" xmlns="{base}"><edit-config><target><running/></target><config><capable-switch xmlns="urn:onf:config:yang"><logical-switches><switch><id>br0</id><lost-connection-behavior>failStandaloneMode</lost-connection-behavior></switch></logical-switches></capable-switch></config></edit-config></rpc>"#
        );
        let mut eom = vec![2u8];
        for m in [&hello, &get, &edit] {
            eom.extend_from_slice(m.as_bytes());
            eom.extend_from_slice(b"]]>]]>");
        }
        assert_eq!(super::fuzz_netconf_bytes(&eom), 1);
        let mut chunked = vec![1u8];
        for m in [&get, &edit] {
            chunked.extend_from_slice(format!("\n#{}\n{m}\n##\n", m.len()).as_bytes());
        }
        assert_eq!(super::fuzz_netconf_bytes(&chunked), 1);
        assert_eq!(
            super::fuzz_netconf_bytes(b"\x00<rpc><<<]]>]]>\xff]]>]]>"),
            0
        );
        assert_eq!(super::fuzz_netconf_bytes(b""), 0);
    }
}
