//! The validated configuration model: what a [`Config`](crate::Config)
//! holds once the file (or the flags) passed every check. Every value here
//! is in range and every cross reference resolves; the runtime can take it
//! as is.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Diagnostic;
pub use dataplane::dispatch::{ClassRule, DispatchKey};
pub use dataplane::flush::FlushPolicy;
pub use dataplane::placement::CoreAssign;
pub use dataplane::threads::{BurstSizes, ThreadMode};
pub use ofp::channel::{FailMode, Transport};
use ofp::{FlowMod, GroupMod, MeterMod};
pub use pipeline::normal::vlan::MAX_VID;
pub use pipeline::normal::{PortVlan, VlanMode};

/// A traffic class given a worker of its own (`priority-class`
/// dispatch): the dataplane's [`ClassRule`]. Every condition given must
/// hold; at least one is given; `tcp_*` and `udp_*` do not mix.
pub type PriorityClassRule = ClassRule;

/// The default burst size.
pub const DEFAULT_BURST: usize = 32;
/// The largest burst size.
pub const MAX_BURST: usize = 1024;

/// One OpenFlow switch instance: its identity, its ports, the controllers
/// it talks to and the flows, groups and meters it starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bridge {
    /// Unique in the process; letters, digits, `_`, `-`, `.`; 1 to 32
    /// characters.
    pub name: String,
    /// Datapath id; unique in the process. Default: the bridge's position
    /// in the file, counting from 1.
    pub dpid: u64,
    /// What to do while no controller is connected.
    pub fail_mode: FailMode,
    /// Number of flow tables, 1..=254 (default 254).
    pub n_tables: u8,
    /// Bytes of a packet sent to the controller on a table miss, 0..=65535
    /// (default 128; 65535 = the whole packet, `OFPCML_NO_BUFFER`).
    pub miss_send_len: u16,
    /// Most flows one table holds, 1..=16777216 (default 16777216, the
    /// most a table's lookup index addresses: no limit below what memory
    /// holds); a flow-mod beyond it fails with `OFPFMFC_TABLE_FULL`.
    pub flow_table_capacity: u32,
    /// A memory budget for the flow entries of all tables together, in
    /// MiB (0, the default: none). An ADD that would take the estimated
    /// memory of the entries past it fails with `OFPFMFC_TABLE_FULL`.
    pub flow_memory_limit_mib: u32,
    /// Ports in the order written; numbers unique in the bridge.
    pub ports: Vec<Port>,
    /// Controllers (active connections and passive listeners).
    pub controllers: Vec<Controller>,
    /// Static flows written inline (`flows = [..]`), installed before
    /// those of `flows_file`.
    pub flows: Vec<StaticFlow>,
    /// Static groups: inline, then `groups_file`.
    pub groups: Vec<StaticGroup>,
    /// Static meters: inline, then `meters_file`.
    pub meters: Vec<StaticMeter>,
    /// The flows file as checked: where it is (resolved against the
    /// config file's directory), its digest and its flow count; its flows
    /// are read again when they are installed.
    pub flows_file: Option<FlowsFile>,
    /// The groups file, resolved.
    pub groups_file: Option<PathBuf>,
    /// The meters file, resolved.
    pub meters_file: Option<PathBuf>,
    /// The bridge-local port (`OFPP_LOCAL`): a TAP interface named after
    /// the bridge, made with it and removed with it. `add-br` turns it on;
    /// in a file it is `local_port = true` (default false).
    pub local_port: bool,
    /// Egress queues by port number (`qos = {..}` on a port; ports
    /// without are sent to directly). An entry whose port is gone is
    /// ignored and not written back.
    pub qos: std::collections::BTreeMap<u32, PortQos>,
}

/// A port's egress queues (`ovs-vsctl`'s QoS row with its Queue rows):
/// served by fulmar's own strict-priority scheduler whatever the type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PortQos {
    /// The QoS type as written (`linux-htb` or `linux-hfsc`); both mean
    /// the same scheduler here.
    pub kind: QosKind,
    /// The port's ceiling in bits per second (0: none).
    pub max_rate: u64,
    /// The queues, ids unique.
    pub queues: Vec<QueueConf>,
}

/// The QoS types accepted (Open vSwitch's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum QosKind {
    /// `linux-htb` (default).
    #[default]
    LinuxHtb,
    /// `linux-hfsc`.
    LinuxHfsc,
}

impl QosKind {
    /// The spelling in files, `fulmar ctl` and OVSDB.
    pub fn as_str(self) -> &'static str {
        match self {
            QosKind::LinuxHtb => "linux-htb",
            QosKind::LinuxHfsc => "linux-hfsc",
        }
    }

    /// The kind spelled `s`, if it is one.
    pub fn parse(s: &str) -> Option<QosKind> {
        match s {
            "linux-htb" => Some(QosKind::LinuxHtb),
            "linux-hfsc" => Some(QosKind::LinuxHfsc),
            _ => None,
        }
    }
}

/// One egress queue of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueConf {
    /// The queue id `set_queue` names, 0..=0xfffffffe (0: the default
    /// queue).
    pub id: u32,
    /// Guaranteed rate in bits per second (0: none).
    pub min_rate: u64,
    /// Ceiling in bits per second (0: none but the port's).
    pub max_rate: u64,
    /// Strict priority: a lower number is served first.
    pub priority: u32,
}

/// The most a rate may be, in bits per second (1 Tbit/s).
pub const MAX_QOS_RATE: u64 = 1_000_000_000_000;

impl PortQos {
    /// What is wrong with these queues, if anything: ids above
    /// 0xfffffffe or repeated, rates above [`MAX_QOS_RATE`], a minimum
    /// above a maximum.
    pub fn check(&self) -> Result<(), String> {
        if self.max_rate > MAX_QOS_RATE {
            return Err(format!(
                "max_rate {} is above {MAX_QOS_RATE} bits/s",
                self.max_rate
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for q in &self.queues {
            if q.id == u32::MAX {
                return Err("queue id 4294967295 is OFPQ_ALL, not a queue".into());
            }
            if !seen.insert(q.id) {
                return Err(format!("queue {} is given twice", q.id));
            }
            for (what, r) in [("min_rate", q.min_rate), ("max_rate", q.max_rate)] {
                if r > MAX_QOS_RATE {
                    return Err(format!(
                        "queue {}: {what} {r} is above {MAX_QOS_RATE} bits/s",
                        q.id
                    ));
                }
            }
            if q.max_rate != 0 && q.min_rate > q.max_rate {
                return Err(format!(
                    "queue {}: min_rate {} is above max_rate {}",
                    q.id, q.min_rate, q.max_rate
                ));
            }
        }
        Ok(())
    }
}

impl Bridge {
    /// The port with this OpenFlow number.
    pub fn port(&self, number: u32) -> Option<&Port> {
        self.ports.iter().find(|p| p.number == number)
    }
}

/// One OpenFlow port of a bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// OpenFlow port number, 1..=0xffffff00 (`OFPP_MAX`).
    pub number: u32,
    /// What the port is attached to.
    pub kind: PortKind,
    /// How NORMAL carries VLANs on it (`tag`, `trunks`, `vlan_mode`;
    /// default a trunk of every VLAN).
    pub vlan: VlanSettings,
}

/// A port's VLAN settings as written (`vlan_mode`, `tag`, `trunks`, as
/// Open vSwitch's Port table has them); a model holds only settings that
/// [`VlanSettings::resolve`] accepts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct VlanSettings {
    /// The mode; None: access when `tag` is set, else trunk.
    pub mode: Option<VlanMode>,
    /// The access or native VLAN.
    pub tag: Option<u16>,
    /// Trunked VLANs, ascending, no repeats; empty: all.
    pub trunks: Vec<u16>,
}

impl VlanSettings {
    /// What NORMAL reads, or why these settings do not go together.
    pub fn resolve(&self) -> Result<PortVlan, String> {
        PortVlan::new(self.mode, self.tag, &self.trunks)
    }

    /// Nothing set (a trunk of every VLAN).
    pub fn is_default(&self) -> bool {
        *self == VlanSettings::default()
    }
}

/// What a port sends to and receives from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// A network interface (or, for `pcap`/`memory`, a named stand-in for
    /// one) opened through a backend. An interface name belongs to at most
    /// one port in the process.
    Interface {
        /// Interface name (at most 15 bytes for kernel-backed backends).
        name: String,
        /// How packets are read and written.
        backend: Backend,
    },
    /// One end of a patch link: what is output here enters `peer_bridge`
    /// on `peer_port`, with no interface in between.
    Patch {
        /// The bridge at the other end.
        peer_bridge: String,
        /// The port number at the other end.
        peer_port: u32,
    },
}

/// The packet I/O backend of an interface port.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// `AF_PACKET` sockets (TPACKET ring): works on any Linux interface
    /// (default).
    #[default]
    AfPacket,
    /// `AF_XDP` sockets.
    AfXdp,
    /// A tap device that fulmar creates.
    Tap,
    /// Packets read from and/or written to pcap files.
    Pcap(PcapBackend),
    /// In-process queues, for tests.
    Memory,
    /// A DPDK ethdev (a NIC or a virtual device); needs the `dpdk` build.
    Dpdk(DpdkBackend),
    /// A VXLAN tunnel over IPv4 (RFC 7348); the interface name is only a
    /// label.
    Vxlan(TunnelBackend),
    /// A GRE tunnel over IPv4 carrying Ethernet frames (RFC 2784/2890,
    /// protocol 0x6558); the interface name is only a label.
    Gre(TunnelBackend),
}

impl Backend {
    /// The config-file spelling of the kind (`afpacket`, `afxdp`, `tap`,
    /// `pcap`, `memory`).
    pub fn kind_str(&self) -> &'static str {
        match self {
            Backend::AfPacket => "afpacket",
            Backend::AfXdp => "afxdp",
            Backend::Tap => "tap",
            Backend::Pcap(_) => "pcap",
            Backend::Memory => "memory",
            Backend::Dpdk(_) => "dpdk",
            Backend::Vxlan(_) => "vxlan",
            Backend::Gre(_) => "gre",
        }
    }

    /// Whether the interface name is a kernel interface name (and so
    /// limited to 15 bytes).
    pub fn is_kernel(&self) -> bool {
        matches!(self, Backend::AfPacket | Backend::AfXdp | Backend::Tap)
    }
}

/// A DPDK port: the device and how its queues are set up and placed.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DpdkBackend {
    /// What DPDK opens: a vdev with its arguments
    /// (`net_pcap0,rx_pcap=in.pcap`), a PCI address, or the name of a
    /// device the EAL arguments create. Paths in it are taken as DPDK
    /// takes them (relative to the working directory). Default: the
    /// interface name.
    pub devargs: String,
    /// Receive queues (1..=1024), spread by RSS; `None`: one per thread
    /// that reads ports (workers, or RX threads in rx-worker-tx).
    pub rx_queues: Option<u16>,
    /// Descriptors per receive queue (64..=32768, default 1024).
    pub rx_desc: u16,
    /// Descriptors per transmit queue (64..=32768, default 1024).
    pub tx_desc: u16,
    /// Mbufs of the port's pool (0: the queues' descriptors plus 8192;
    /// else 1023..=16777215).
    pub mbufs: u32,
    /// MTU to set (68..=65535), if given.
    pub mtu: Option<u16>,
    /// The CPU of the thread that reads each receive queue, queue `q` on
    /// entry `q` (Lagopus's `(port, queue, lcore)`); the reading threads
    /// must be pinned there (`*_cores` or `core_assign`).
    pub rx_queue_cores: Option<Vec<usize>>,
    /// rx-worker-tx: the CPU of the TX thread that sends to the port
    /// (Lagopus's `(port, lcore)`).
    pub tx_core: Option<usize>,
}

/// A tunnel port's settings: the IPv4 underlay endpoints and the key.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TunnelBackend {
    /// The peer's address (required; `None` only while a transaction is
    /// being built, validation refuses it).
    pub remote_ip: Option<Ipv4Addr>,
    /// This end's address: the source of what is sent and the address
    /// received on; `None`: the kernel's choice by route, any address.
    pub local_ip: Option<Ipv4Addr>,
    /// VXLAN: the VNI (0..=16777215, `None`: 0); GRE: the key written
    /// and required on receive (`None`: no key). `None` with `key_flow`.
    pub key: Option<u32>,
    /// `key = "flow"`: the key is the flow's `tunnel_id` (any key is
    /// received and becomes the packet's `tunnel_id`; what is sent is
    /// wrapped in the packet's `tunnel_id`); `key` is `None` then.
    pub key_flow: bool,
    /// VXLAN: the UDP destination port (and the port received on);
    /// GRE: unused (0).
    pub dst_port: u16,
}

/// The UDP port VXLAN uses unless told otherwise (IANA, RFC 7348).
pub const VXLAN_DEFAULT_PORT: u16 = 4789;

/// Largest VXLAN network identifier (24 bits).
pub const VXLAN_MAX_VNI: u32 = 0xff_ffff;

/// Default descriptors per DPDK queue.
pub const DPDK_DEFAULT_DESC: u16 = 1024;

impl DpdkBackend {
    /// A port on `devargs` with the defaults.
    pub fn new(devargs: impl Into<String>) -> DpdkBackend {
        DpdkBackend {
            devargs: devargs.into(),
            rx_desc: DPDK_DEFAULT_DESC,
            tx_desc: DPDK_DEFAULT_DESC,
            ..DpdkBackend::default()
        }
    }

    /// The device's name: the devargs up to the first comma.
    pub fn device_name(&self) -> &str {
        self.devargs.split(',').next().unwrap_or("").trim()
    }
}

/// The `[dpdk]` section: how DPDK's EAL starts (once per process, when
/// the first DPDK port opens).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DpdkSettings {
    /// The EAL's command line, without the program name (`-l N` with the
    /// first usable CPU is added when no lcores are named).
    pub eal_args: Vec<String>,
}

/// A pcap-file port: packets come from `read` at `rate`, and what the
/// switch outputs goes to `write`. At least one of the two is set.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PcapBackend {
    /// File whose packets are received on the port (resolved path).
    pub read: Option<PathBuf>,
    /// File the port's output is written to (resolved path).
    pub write: Option<PathBuf>,
    /// Replay rate of `read`.
    pub rate: PcapRate,
}

/// How fast a pcap file is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PcapRate {
    /// As fast as the switch takes them (default; config `"max"`).
    #[default]
    Max,
    /// This many packets per second (1..=1_000_000_000).
    Pps(u64),
}

/// Both ends of a patch link between two bridges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchLink {
    /// One end: (bridge name, port number).
    pub a: (String, u32),
    /// The other end.
    pub b: (String, u32),
}

/// One controller connection of a bridge, with its liveness timers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Controller {
    /// Where to connect or listen.
    pub target: ControllerTarget,
    /// Send an echo request after this long without traffic, ms
    /// (100..=3600000, default 5000).
    pub echo_interval_ms: u32,
    /// Drop the connection after this long without traffic, ms; more than
    /// `echo_interval_ms` (default 15000, at most 3600000).
    pub dead_peer_timeout_ms: u32,
    /// First reconnect delay of an active connection, ms (1..=3600000,
    /// default 1000); doubled after each failure up to `backoff_max_ms`.
    pub backoff_min_ms: u32,
    /// Largest reconnect delay, ms (`backoff_min_ms`..=3600000, default
    /// 8000).
    pub backoff_max_ms: u32,
}

/// Default echo interval, ms.
pub const DEFAULT_ECHO_INTERVAL_MS: u32 = 5000;
/// Default dead-peer timeout, ms.
pub const DEFAULT_DEAD_PEER_TIMEOUT_MS: u32 = 15000;
/// Default first reconnect delay, ms.
pub const DEFAULT_BACKOFF_MIN_MS: u32 = 1000;
/// Default largest reconnect delay, ms.
pub const DEFAULT_BACKOFF_MAX_MS: u32 = 8000;
/// The IANA OpenFlow port, used when a target leaves the port out.
pub const OPENFLOW_PORT: u16 = 6653;

impl Controller {
    /// A controller with the default timers.
    pub fn new(target: ControllerTarget) -> Controller {
        Controller {
            target,
            echo_interval_ms: DEFAULT_ECHO_INTERVAL_MS,
            dead_peer_timeout_ms: DEFAULT_DEAD_PEER_TIMEOUT_MS,
            backoff_min_ms: DEFAULT_BACKOFF_MIN_MS,
            backoff_max_ms: DEFAULT_BACKOFF_MAX_MS,
        }
    }
}

/// A controller connection: the switch connects out (`tcp:HOST[:PORT]`,
/// `tls:HOST[:PORT]`) or listens (`ptcp:[PORT][:ADDR]`,
/// `ptls:[PORT][:ADDR]`). See [`ControllerTarget::parse_target`] and
/// [`ControllerTarget::parse_listen`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ControllerTarget {
    /// The switch connects to a controller.
    Connect {
        /// TCP or TLS.
        transport: Transport,
        /// IP literal or host name (IPv6 without brackets).
        host: String,
        /// TCP port.
        port: u16,
    },
    /// The switch listens for controllers.
    Listen {
        /// TCP or TLS.
        transport: Transport,
        /// Local address to bind.
        addr: IpAddr,
        /// TCP port (0: any free port).
        port: u16,
    },
}

impl ControllerTarget {
    /// The transport of either kind.
    pub fn transport(&self) -> Transport {
        match self {
            ControllerTarget::Connect { transport, .. }
            | ControllerTarget::Listen { transport, .. } => *transport,
        }
    }
}

impl fmt::Display for ControllerTarget {
    /// The canonical `ovs-vsctl set-controller` form: `tcp:HOST:PORT`,
    /// `tls:[V6]:PORT`, `ptcp:PORT:ADDR`, `ptls:PORT:[V6]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControllerTarget::Connect {
                transport,
                host,
                port,
            } => {
                let scheme = transport.scheme(false);
                if host.contains(':') {
                    write!(f, "{scheme}:[{host}]:{port}")
                } else {
                    write!(f, "{scheme}:{host}:{port}")
                }
            }
            ControllerTarget::Listen {
                transport,
                addr,
                port,
            } => {
                let scheme = transport.scheme(true);
                match addr {
                    IpAddr::V4(a) => write!(f, "{scheme}:{port}:{a}"),
                    IpAddr::V6(a) => write!(f, "{scheme}:{port}:[{a}]"),
                }
            }
        }
    }
}

/// The TLS files shared by every `tls:`/`ptls:` controller (paths resolved
/// against the config file's directory; their existence is the runtime's
/// to check).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM private key of the switch.
    pub private_key: PathBuf,
    /// PEM certificate of the switch.
    pub certificate: PathBuf,
    /// PEM CA certificate that controllers' certificates must chain to.
    pub ca_cert: PathBuf,
}

/// A bridge's flows file as checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowsFile {
    /// The file, resolved against the config file's directory.
    pub path: PathBuf,
    /// SHA-256 of its bytes when it was checked.
    pub sha256: [u8; 32],
    /// How many flows it held (lines neither blank nor comments).
    pub flows: usize,
}

/// What a bridge's tables hold before its flows file's flows: its sizes,
/// its static meters and groups, and its inline flows (installed in that
/// order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TablesHead {
    /// The bridge.
    pub bridge: String,
    /// [`Bridge::n_tables`](Bridge::n_tables).
    pub n_tables: u8,
    /// [`Bridge::flow_table_capacity`](Bridge::flow_table_capacity).
    pub flow_table_capacity: u32,
    /// [`Bridge::flow_memory_limit_mib`](Bridge::flow_memory_limit_mib).
    pub flow_memory_limit_mib: u32,
    /// Static meters.
    pub meters: Vec<StaticMeter>,
    /// Static groups.
    pub groups: Vec<StaticGroup>,
    /// Inline static flows.
    pub flows: Vec<StaticFlow>,
}

impl Bridge {
    /// What the bridge's tables hold before its flows file's flows.
    pub fn tables_head(&self) -> TablesHead {
        TablesHead {
            bridge: self.name.clone(),
            n_tables: self.n_tables,
            flow_table_capacity: self.flow_table_capacity,
            flow_memory_limit_mib: self.flow_memory_limit_mib,
            meters: self.meters.clone(),
            groups: self.groups.clone(),
            flows: self.flows.clone(),
        }
    }
}

/// A flow written inline in the configuration, installed when the bridge
/// starts (a flows file's flows are not kept: [`FlowsFile`]).
///
/// Only the text is kept, not its parse (a FLOW_MOD is about 600 bytes).
/// The text was parsed and checked when the configuration was validated;
/// [`StaticFlow::flow_mod`] parses it again for whoever installs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticFlow {
    /// The text as written (trimmed).
    pub text: String,
    /// Where it was written.
    pub source: Source,
}

impl StaticFlow {
    /// The FLOW_MOD the text stands for (it parsed when the configuration
    /// was validated, so an error here means the text was changed since).
    pub fn flow_mod(&self) -> Result<FlowMod, flowtext::ParseError> {
        flowtext::parse_flow(&self.text)
    }
}

/// A group installed when the bridge starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticGroup {
    /// The text as written (trimmed).
    pub text: String,
    /// Its parse.
    pub group_mod: GroupMod,
    /// Where it was written.
    pub source: Source,
}

/// A meter installed when the bridge starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticMeter {
    /// The text as written (trimmed).
    pub text: String,
    /// Its parse.
    pub meter_mod: MeterMod,
    /// Where it was written.
    pub source: Source,
}

/// Where a static flow, group or meter was written, for messages when the
/// runtime refuses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The config file (inline) or the flows/groups/meters file (shared:
    /// every line of a file names the same one).
    pub file: Arc<Path>,
    /// 1-based line in `file` (0 when given on the command line with no
    /// file).
    pub line: usize,
    /// Whether the text was inline in the config file (an array string)
    /// rather than a line of a `*_file`.
    pub inline: bool,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// Entries of the rings between thread stages (`rx-worker-tx` mode):
/// powers of two in 64..=65536, default 1024, each at least the bursts
/// written to and read from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingSizes {
    /// Each RX → worker ring.
    pub rx_ring: u32,
    /// Each worker → TX ring.
    pub tx_ring: u32,
}

impl Default for RingSizes {
    fn default() -> Self {
        RingSizes {
            rx_ring: 1024,
            tx_ring: 1024,
        }
    }
}

/// RX dispatch: the key, and for `priority-class` its rules and the key
/// for packets no rule takes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Dispatch {
    /// The key.
    pub key: DispatchKey,
    /// For [`DispatchKey::PriorityClass`]: the key that spreads unclassified
    /// packets over the workers no rule names (all workers if every one is
    /// named). Never `PriorityClass`. Default `5tuple`.
    pub fallback: DispatchKey,
    /// First match wins. Empty unless the key is `PriorityClass`.
    pub rules: Vec<PriorityClassRule>,
}

/// The dataplane threads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dataplane {
    /// Thread arrangement.
    pub mode: ThreadMode,
    /// RX threads (`rx-worker-tx`: 1..=256, default 1; 0 in
    /// `run-to-completion`).
    pub rx_threads: usize,
    /// Worker threads (1..=256, default 1); in `run-to-completion` these
    /// are the only threads.
    pub worker_threads: usize,
    /// TX threads (as `rx_threads`).
    pub tx_threads: usize,
    /// Cores the RX threads are pinned to, one per thread, if given.
    pub rx_cores: Option<Vec<usize>>,
    /// Cores of the worker threads, one per thread, if given.
    pub worker_cores: Option<Vec<usize>>,
    /// Cores of the TX threads, one per thread, if given.
    pub tx_cores: Option<Vec<usize>>,
    /// The six burst sizes.
    pub burst: BurstSizes,
    /// Partial-burst flushing.
    pub flush: FlushPolicy,
    /// Ring sizes.
    pub rings: RingSizes,
    /// RX dispatch.
    pub dispatch: Dispatch,
    /// Places the threads on CPUs by a policy instead of `*_cores`.
    pub core_assign: Option<CoreAssign>,
    /// Longest a packet may wait in the queues between a port and a
    /// worker, in µs at the rate they drain (0..=1000000, default
    /// [`DEFAULT_MAX_QUEUE_DELAY_US`]); 0: deep, byte-sized queues.
    pub max_queue_delay_us: u32,
    /// The nice value the control side runs at while a controller's FLOW
    /// statistics reply of several pages is written, so that a reply over
    /// many flows yields a CPU it shares with busy dataplane threads (0..=19, default
    /// [`DEFAULT_BULK_REPLY_NICE`]; 0: at the control side's own priority).
    pub bulk_reply_nice: u8,
}

/// The default of `bulk_reply_nice`: while a worker sharing its CPU is
/// busy, a reply gets about a quarter of that CPU (the fair scheduler's
/// weights: 335 at nice 5 against 1024 at nice 0), and all of it when the
/// worker sleeps. Nice 10 (a tenth) kept more forwarding but stretched a
/// 1M-flow reply to 3–4 s here, beyond Open vSwitch's time.
pub const DEFAULT_BULK_REPLY_NICE: u8 = 5;

/// The default of `max_queue_delay_us`: the dataplane's own default
/// bound, in µs (one definition: `dataplane::delay::DEFAULT_QUEUE_DELAY`).
pub const DEFAULT_MAX_QUEUE_DELAY_US: u32 = {
    let us = dataplane::delay::DEFAULT_QUEUE_DELAY.as_micros();
    assert!(us <= u32::MAX as u128);
    us as u32
};

/// Most threads of one kind.
pub const MAX_THREADS: usize = 256;

impl Default for Dataplane {
    /// One run-to-completion thread, no pinning, default bursts, flushing,
    /// rings and dispatch.
    fn default() -> Self {
        Dataplane {
            mode: ThreadMode::RunToCompletion,
            rx_threads: 0,
            worker_threads: 1,
            tx_threads: 0,
            rx_cores: None,
            worker_cores: None,
            tx_cores: None,
            burst: BurstSizes::default(),
            flush: FlushPolicy::default(),
            rings: RingSizes::default(),
            dispatch: Dispatch::default(),
            core_assign: None,
            max_queue_delay_us: DEFAULT_MAX_QUEUE_DELAY_US,
            bulk_reply_nice: DEFAULT_BULK_REPLY_NICE,
        }
    }
}

/// Facts about the machine that validation checks against, passed in so
/// that validation reads nothing from the system itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// Number of CPUs; pinned core ids must be below it.
    pub cpus: usize,
}

impl Host {
    /// This machine, by `std::thread::available_parallelism` (1 if it
    /// cannot tell).
    pub fn detect() -> Host {
        Host {
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }
}

/// A validated configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The bridges, in the order written.
    pub bridges: Vec<Bridge>,
    /// Patch links between bridges.
    pub patch_links: Vec<PatchLink>,
    /// Dataplane threads.
    pub dataplane: Dataplane,
    /// TLS files, if any controller uses TLS (or the file gave them).
    pub tls: Option<TlsFiles>,
    /// How DPDK starts (used only when a port has backend `dpdk`).
    pub dpdk: DpdkSettings,
    /// What was found but does not stop the configuration from loading
    /// (undefined groups or meters referred to by static flows, outputs to
    /// ports the bridge lacks, shared cores, ignored settings).
    pub warnings: Vec<Diagnostic>,
}
