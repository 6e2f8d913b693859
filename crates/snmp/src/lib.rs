//! The SNMP module: an AgentX subagent (RFC 2741) that serves the switch's
//! ports to a master agent such as net-snmp's `snmpd`, which answers the
//! SNMP managers (`snmpget`, `snmpwalk`, any NMS) and sends the traps.
//!
//! # Starting it
//!
//! In `snmpd.conf`:
//!
//! ```text
//! master agentx
//! agentXSocket /var/agentx/master        # the default; or tcp:localhost:705
//! rocommunity public 127.0.0.1
//! trap2sink NMS-HOST public               # where linkUp/linkDown go
//! ```
//!
//! (A fulmar not running as root needs access to the socket:
//! `agentXPerms 0660 0755 root GROUP`.) snmpd serves the host's own
//! interfaces in IF-MIB; the switch's ports take their place in one of
//! three ways, chosen by the operator:
//!
//! 1. snmpd without its interface modules (what most tests do): start it
//!    with `-I -ifTable,ifXTable,interface` (on Debian, in the
//!    `ExecStart` of a `snmpd.service` override); the switch's ports are
//!    then the agent's IF-MIB. Without these fulmar's registrations are
//!    refused (duplicateRegistration, logged).
//! 2. A higher registration priority: `--agentx-priority 1` (1 is the
//!    highest; snmpd's own modules register at 127) makes snmpd answer
//!    ifNumber, ifTable and ifXTable from fulmar while its own modules stay
//!    loaded (leave snmpd's `linkUpDownNotifications` off: it would
//!    report host interfaces under fulmar's ifIndex numbers).
//! 3. A context: `--agentx-context fulmar` registers everything in the
//!    SNMP context `fulmar`, beside the host's IF-MIB in the default one:
//!    SNMPv3 managers ask with `-n fulmar`; for v2c, map a community to
//!    the context:
//!
//!    ```text
//!    com2sec -Cn fulmar switchsec 10.0.0.0/8 switch
//!    group   switchgroup v2c switchsec
//!    view    all included .1
//!    access  switchgroup fulmar any noauth exact all none none
//!    ```
//!
//! Then `fulmar run ... --agentx /var/agentx/master` (or
//! `--agentx tcp:localhost:705`). The subagent connects, opens a session,
//! registers its subtrees and reconnects (250 ms doubling to 5 s) whenever
//! the master goes away or restarts; a Ping every `--agentx-ping` seconds
//! finds a master that stopped answering.
//!
//! # What it serves
//!
//! - IF-MIB `ifNumber`, `ifTable` (ifIndex, ifDescr, ifType
//!   ethernetCsmacd(6) or propVirtual(53) for patch ports, ifMtu, ifSpeed,
//!   ifPhysAddress, ifAdminStatus, ifOperStatus, ifLastChange, the octet,
//!   unicast packet, discard and error counters, ifInUnknownProtos 0) and
//!   `ifXTable` (ifName, the 64-bit ifHC octet and unicast packet counters,
//!   ifLinkUpDownTrapEnable, ifHighSpeed, ifPromiscuousMode,
//!   ifConnectorPresent, ifAlias, ifCounterDiscontinuityTime) for every
//!   port of every bridge.
//! - BRIDGE-MIB `dot1dBase` (dot1dBaseBridgeAddress: the low 48 bits of
//!   the datapath id, dot1dBaseNumPorts, dot1dBaseType unknown(1),
//!   dot1dBasePortTable indexed by OpenFlow port number) and
//!   `dot1dTpFdbTable` (the addresses NORMAL learnt: dot1dTpFdbAddress,
//!   dot1dTpFdbPort, dot1dTpFdbStatus learned(3); one row per address, the
//!   port it was seen on last, whatever its VLAN) for one bridge:
//!   `--agentx-bridge NAME`, by default the first.
//! - linkDown and linkUp notifications (snmpTrapOID.0, ifIndex,
//!   ifAdminStatus, ifOperStatus) when a port's operational status goes
//!   down or comes back, found by reading the switch every second.
//!
//! Counters are OpenFlow's port statistics, the numbers PORT_STATS
//! answers (`ovs-ofctl dump-ports`): ifHCInOctets is `rx_bytes`,
//! ifHCInUcastPkts `rx_packets`, the 32-bit counters are the same numbers
//! modulo 2^32. Values are read from the switch per request, or from a
//! reading at most 0.5 s old. ifIndex numbering: see [`ifindex`].
//! ifLastChange and ifCounterDiscontinuityTime are the master's sysUpTime
//! at the change (learnt from its Responses; 0 for a change before the
//! master started).
//!
//! # What it does not
//!
//! - No SET: every object is read-only (TestSet answers notWritable), so
//!   ifAdminStatus and ifAlias cannot be changed over SNMP (use OpenFlow
//!   port-mod or `fulmar ctl`); ifAlias is empty.
//! - No multicast/broadcast counters (OpenFlow does not split packets by
//!   destination: the unicast counters count every packet), no
//!   ifStackTable, ifRcvAddressTable, the rest of dot1dTp (aging time,
//!   port counters), dot1dStp or Q-BRIDGE-MIB (per-VLAN forwarding
//!   tables).
//! - One bridge in dot1dBase (BRIDGE-MIB's per-bridge contexts are not
//!   registered).
//! - Notifications raised while no session is open are dropped; the
//!   master's sysUpTime stamps them. No coldStart (snmpd sends its own).
//!
//! # Layout
//!
//! [`pdu`] is the AgentX codec (hand-written; see Cargo.toml), [`mib`]
//! the objects as a sorted map, [`collect`] reads the daemon, [`session`]
//! runs the connection.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use runtime::daemon::Daemon;

pub mod collect;
pub mod ifindex;
pub mod mib;
pub mod pdu;
pub mod session;

/// The module's `fulmar run` flags.
#[derive(clap::Args, Debug, Clone, Default)]
#[group(id = "snmp-module")]
pub struct Args {
    /// Serve IF-MIB and BRIDGE-MIB as an AgentX subagent of this master agent (a unix socket path such as /var/agentx/master, or tcp:HOST:PORT)
    #[arg(long = "agentx", value_name = "MASTER")]
    pub agentx: Option<String>,
    /// AgentX registration priority, 1 (highest) to 255; below snmpd's 127 takes IF-MIB over from snmpd's own modules
    #[arg(long = "agentx-priority", value_name = "N", default_value_t = 127,
          value_parser = clap::value_parser!(u8).range(1..))]
    pub agentx_priority: u8,
    /// Register in this SNMP context instead of the default one
    #[arg(long = "agentx-context", value_name = "NAME")]
    pub agentx_context: Option<String>,
    /// Seconds between AgentX Pings to the master
    #[arg(long = "agentx-ping", value_name = "SECONDS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub agentx_ping: u64,
    /// The bridge BRIDGE-MIB dot1dBase describes (default: the first)
    #[arg(long = "agentx-bridge", value_name = "BRIDGE")]
    pub agentx_bridge: Option<String>,
}

impl Args {
    /// The module was asked for.
    pub fn enabled(&self) -> bool {
        self.agentx.is_some()
    }
}

/// The running module; dropping it (or [`Service::stop`]) stops it.
pub struct Service {
    stop: Option<tokio::sync::watch::Sender<bool>>,
    session_done: Option<std::sync::mpsc::Receiver<()>>,
    poller: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Service {
    /// Stops the module: Close to the master (waiting up to 2 s for it to
    /// go out), then the poller.
    pub fn stop(mut self) {
        self.halt(true);
    }

    fn halt(&mut self, wait: bool) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(true);
        }
        if let Some(done) = self.session_done.take() {
            if wait {
                let _ = done.recv_timeout(Duration::from_secs(2));
            }
        }
        if let Some((tx, handle)) = self.poller.take() {
            drop(tx);
            if wait {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.halt(false);
    }
}

/// Starts the module on `rt` when `args` ask for it.
pub fn start(
    daemon: Arc<Daemon>,
    rt: &tokio::runtime::Handle,
    args: &Args,
) -> Result<Option<Service>, String> {
    let Some(master) = &args.agentx else {
        return Ok(None);
    };
    let opts = session::Options {
        target: session::Target::parse(master)?,
        priority: args.agentx_priority,
        context: args.agentx_context.as_ref().map(|c| c.as_bytes().to_vec()),
        ping: Duration::from_secs(args.agentx_ping),
    };
    if let Some(b) = &args.agentx_bridge {
        if !daemon.config().0.bridges.iter().any(|x| &x.name == b) {
            tracing::warn!(
                "--agentx-bridge {b}: no such bridge now; dot1dBase is empty until it exists"
            );
        }
    }
    let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
    let collector = collect::Collector::new(daemon, args.agentx_bridge.clone(), events_tx);
    let clock = collector.clock();
    let collector = Arc::new(Mutex::new(collector));
    // The poller: a reading every second finds link changes.
    let (poll_stop, poll_rx) = std::sync::mpsc::channel::<()>();
    let c = collector.clone();
    let poller = std::thread::Builder::new()
        .name("snmp-poll".into())
        .spawn(move || loop {
            c.lock()
                .unwrap_or_else(|e| e.into_inner())
                .view(Duration::ZERO);
            match poll_rx.recv_timeout(Duration::from_secs(1)) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
        })
        .map_err(|e| format!("--agentx: cannot start the poller thread: {e}"))?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        session::run(collector, clock, opts, events_rx, stop_rx).await;
        let _ = done_tx.send(());
    });
    Ok(Some(Service {
        stop: Some(stop_tx),
        session_done: Some(done_rx),
        poller: Some((poll_stop, poller)),
    }))
}
