//! Opening the ports a configuration names: every port of every bridge is
//! opened before any thread starts, and every failure is reported (each
//! naming bridge, port, interface and backend), so the switch never runs
//! half-configured.

use std::collections::HashMap;
use std::fmt;
use std::io;

use dataplane::afpacket::{AfPacketConfig, AfPacketPort};
use dataplane::afxdp::{AfXdpConfig, AfXdpPort};
use dataplane::patch::{self, PatchPort};
use dataplane::pcap::{PcapCapture, PcapReplay};
use dataplane::rawsock::RawSocketPort;
use dataplane::tap::{TapConfig, TapPort};
use dataplane::tunnel::{TunnelConfig, TunnelKind, TunnelPort};
use dataplane::{LinkState, PortBackend, PortCounters, RxBurst, TxBurst};
use datastore::{Backend, Config, PcapRate, PortKind};

/// Slots of each direction of a patch link or memory port.
pub const PATCH_RING: usize = 4096;

/// A port that could not be opened.
#[derive(Debug)]
pub struct PortError {
    /// Bridge name.
    pub bridge: String,
    /// OpenFlow port number.
    pub port: u32,
    /// Interface (or patch peer) name.
    pub interface: String,
    /// Backend kind.
    pub backend: &'static str,
    /// Why.
    pub error: io::Error,
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bridge {} port {}: cannot open {} interface {:?}: {}",
            self.bridge, self.port, self.backend, self.interface, self.error
        )
    }
}

/// How `afpacket` ports receive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AfPacketMode {
    /// A TPACKET_V2 ring (default): no RX system call per burst and no
    /// copy; every frame handed over at once; deep, with the time bound
    /// kept by dropping stale frames in user space, sparse ones (pings)
    /// spared (see `dataplane::afpacket`).
    #[default]
    Ring,
    /// A plain packet socket (`recvmmsg`), its receive buffer bounded in
    /// bytes: the kernel tail-drops beyond the bound, pings included.
    Socket,
}

/// Backend options.
#[derive(Clone, Debug, Default)]
pub struct BackendOptions {
    /// How `afpacket` ports receive.
    pub afpacket_mode: AfPacketMode,
    /// AF_PACKET ring and socket settings (ring mode).
    pub afpacket: AfPacketConfig,
    /// Socket mode: the receive buffer each port asks for (None: the
    /// backend's default, 8 MiB).
    pub afpacket_rcvbuf: Option<usize>,
    /// AF_XDP settings.
    pub afxdp: AfXdpConfig,
    /// How DPDK starts and how many queues its ports get (the runtime
    /// fills it from the configuration).
    pub dpdk: DpdkOptions,
}

/// What opening a DPDK port needs beyond the port's own settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DpdkOptions {
    /// The EAL's arguments (`[dpdk] eal_args`).
    pub eal_args: Vec<String>,
    /// Threads that read ports: each gets a receive queue unless the port
    /// says how many it has (workers, or RX threads in rx-worker-tx).
    pub readers: u16,
    /// Threads that send to one port: one transmit queue each (workers in
    /// run-to-completion, one TX thread in rx-worker-tx).
    pub writers: u16,
}

impl DpdkOptions {
    /// From a configuration's `[dpdk]` and `[dataplane]`.
    pub fn of(config: &Config) -> DpdkOptions {
        let d = &config.dataplane;
        let (readers, writers) = match d.mode {
            datastore::ThreadMode::RunToCompletion => (d.worker_threads, d.worker_threads),
            datastore::ThreadMode::RxWorkerTx => (d.rx_threads, 1),
        };
        DpdkOptions {
            eal_args: config.dpdk.eal_args.clone(),
            readers: u16::try_from(readers.max(1)).unwrap_or(u16::MAX),
            writers: u16::try_from(writers.max(1)).unwrap_or(u16::MAX),
        }
    }
}

/// An opened port, not yet handed to threads.
pub struct OpenPort {
    /// OpenFlow port number.
    pub number: u32,
    /// Interface name (for a patch port: `patch:PEER_BRIDGE:PEER_PORT`).
    pub interface: String,
    /// True for kernel interfaces whose link state the netlink watcher
    /// follows.
    pub kernel: bool,
    /// The backend.
    pub backend: Box<dyn PortBackend>,
    /// The CPU of the thread that should read each receive queue (DPDK
    /// ports' `rx_queue_cores`).
    pub rx_queue_cores: Option<Vec<usize>>,
    /// The CPU of the TX thread that should send to it (`tx_core`).
    pub tx_core: Option<usize>,
    /// How NORMAL carries VLANs on it.
    pub vlan: pipeline::normal::PortVlan,
}

/// A pcap port: replays one file and/or writes another.
struct PcapPort {
    name: String,
    replay: Option<PcapReplay>,
    capture: Option<PcapCapture>,
}

impl PortBackend for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        match &mut self.replay {
            Some(r) => r.rx_burst(out),
            None => Ok(0),
        }
    }
    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        match &mut self.capture {
            Some(c) => c.tx_burst(pkts),
            None => {
                let n = pkts.len();
                pkts.clear();
                Ok(n)
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.capture {
            Some(c) => c.flush(),
            None => Ok(()),
        }
    }
    fn link_state(&self) -> LinkState {
        LinkState::Unknown
    }
    fn stats(&self) -> PortCounters {
        let a = self.replay.as_ref().map(|r| r.stats()).unwrap_or_default();
        let b = self.capture.as_ref().map(|c| c.stats()).unwrap_or_default();
        a.merged(&b)
    }
}

fn open_interface(name: &str, backend: &Backend, opts: &BackendOptions) -> io::Result<OpenPort> {
    let (b, kernel): (Box<dyn PortBackend>, bool) = match backend {
        Backend::AfPacket => match opts.afpacket_mode {
            AfPacketMode::Ring => (
                Box::new(AfPacketPort::open_with(name, &opts.afpacket)?),
                true,
            ),
            AfPacketMode::Socket => (
                Box::new(match opts.afpacket_rcvbuf {
                    Some(b) => RawSocketPort::open_with_rcvbuf(name, b)?,
                    None => RawSocketPort::open(name)?,
                }),
                true,
            ),
        },
        Backend::AfXdp => (Box::new(AfXdpPort::open_with(name, &opts.afxdp)?), true),
        Backend::Tap => {
            let t = TapPort::open(name)?;
            t.set_up(true)?;
            (Box::new(t), true)
        }
        Backend::Pcap(p) => {
            let replay = match &p.read {
                Some(path) => {
                    let r = PcapReplay::open(path).map_err(|e| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("{}: {e}", path.display()),
                        )
                    })?;
                    Some(match p.rate {
                        PcapRate::Max => r,
                        PcapRate::Pps(n) => r.with_rate(n as f64),
                    })
                }
                None => None,
            };
            let capture = match &p.write {
                Some(path) => Some(PcapCapture::create(path)?),
                None => None,
            };
            (
                Box::new(PcapPort {
                    name: name.to_string(),
                    replay,
                    capture,
                }),
                false,
            )
        }
        Backend::Vxlan(t) | Backend::Gre(t) => {
            let kind = match backend {
                Backend::Vxlan(_) => TunnelKind::Vxlan,
                _ => TunnelKind::Gre,
            };
            let remote = t.remote_ip.ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "the tunnel has no remote_ip")
            })?;
            let cfg = TunnelConfig {
                kind,
                remote,
                local: t.local_ip,
                key: t.key,
                key_flow: t.key_flow,
                dst_port: t.dst_port,
            };
            (Box::new(TunnelPort::open(name, &cfg)?), false)
        }
        // Memory ports are made by `open_all` (they need a far end).
        Backend::Memory => {
            return Err(io::Error::other("memory ports are opened by open_all"));
        }
        Backend::Dpdk(d) => {
            let port = open_dpdk(d, &opts.dpdk)?;
            return Ok(OpenPort {
                number: 0,
                interface: name.to_string(),
                kernel: false,
                backend: port,
                rx_queue_cores: d.rx_queue_cores.clone(),
                tx_core: d.tx_core,
                vlan: Default::default(),
            });
        }
    };
    Ok(OpenPort {
        number: 0,
        interface: name.to_string(),
        kernel,
        backend: b,
        rx_queue_cores: None,
        tx_core: None,
        vlan: Default::default(),
    })
}

/// Starts the EAL (once) and opens a DPDK port with one receive queue per
/// reading thread (unless the port says) and one transmit queue per
/// sending thread.
#[cfg(feature = "dpdk")]
fn open_dpdk(d: &datastore::DpdkBackend, o: &DpdkOptions) -> io::Result<Box<dyn PortBackend>> {
    use dataplane::dpdk::{DpdkConfig, DpdkPort};
    dataplane::dpdk::init(&o.eal_args)?;
    let cfg = DpdkConfig {
        devargs: d.devargs.clone(),
        rx_queues: d.rx_queues.unwrap_or(o.readers).max(1),
        exact_rx_queues: d.rx_queues.is_some(),
        tx_queues: o.writers.max(1),
        rx_desc: d.rx_desc,
        tx_desc: d.tx_desc,
        mbufs: d.mbufs,
        mtu: d.mtu,
        ..DpdkConfig::default()
    };
    Ok(Box::new(DpdkPort::open(&cfg)?))
}

#[cfg(not(feature = "dpdk"))]
fn open_dpdk(_: &datastore::DpdkBackend, _: &DpdkOptions) -> io::Result<Box<dyn PortBackend>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "this fulmar was built without DPDK (build with `--features dpdk`)",
    ))
}

/// Every bridge's ports (in config order), plus the far ends of memory
/// ports by interface name.
pub struct Opened {
    /// Per bridge, its ports.
    pub bridges: Vec<Vec<OpenPort>>,
    /// Far ends of `memory` ports, for tests to inject and collect.
    pub memory: HashMap<String, PatchPort>,
}

/// Opens one port of bridge `bridge`. A memory port's far end goes into
/// `memory`; a patch port takes its end from `patch_ends` (both ends of a
/// link are made together, so patch ports are opened with their link).
pub fn open_port(
    bridge: &str,
    p: &datastore::Port,
    opts: &BackendOptions,
    memory: &mut HashMap<String, PatchPort>,
    patch_ends: &mut HashMap<(String, u32), PatchPort>,
) -> Result<OpenPort, PortError> {
    let opened = match &p.kind {
        PortKind::Interface {
            name,
            backend: Backend::Memory,
        } => {
            let (sw, far) = patch::pair(name, &format!("{name}-far"), PATCH_RING);
            memory.insert(name.clone(), far);
            Ok(OpenPort {
                number: 0,
                interface: name.clone(),
                kernel: false,
                backend: Box::new(sw),
                rx_queue_cores: None,
                tx_core: None,
                vlan: Default::default(),
            })
        }
        PortKind::Interface { name, backend } => {
            open_interface(name, backend, opts).map_err(|error| PortError {
                bridge: bridge.to_string(),
                port: p.number,
                interface: name.clone(),
                backend: backend.kind_str(),
                error,
            })
        }
        PortKind::Patch {
            peer_bridge,
            peer_port,
        } => match patch_ends.remove(&(bridge.to_string(), p.number)) {
            Some(end) => Ok(OpenPort {
                number: 0,
                interface: format!("patch:{peer_bridge}:{peer_port}"),
                kernel: false,
                backend: Box::new(end),
                rx_queue_cores: None,
                tx_core: None,
                vlan: Default::default(),
            }),
            None => Err(PortError {
                bridge: bridge.to_string(),
                port: p.number,
                interface: format!("patch:{peer_bridge}:{peer_port}"),
                backend: "patch",
                error: io::Error::new(io::ErrorKind::NotFound, "no patch link names it"),
            }),
        },
    };
    opened.map(|mut o| {
        o.number = p.number;
        // A model holds only settings that resolve.
        o.vlan = p.vlan.resolve().unwrap_or_default();
        o
    })
}

/// Opens every port of `config`; all errors are returned together.
pub fn open_all(config: &Config, opts: &BackendOptions) -> Result<Opened, Vec<PortError>> {
    let mut errors = Vec::new();
    let mut memory = HashMap::new();
    // Patch ends, keyed by (bridge, port).
    let mut patch_ends: HashMap<(String, u32), PatchPort> = HashMap::new();
    for link in &config.patch_links {
        let (a, b) = patch::pair(
            &format!("patch:{}:{}", link.b.0, link.b.1),
            &format!("patch:{}:{}", link.a.0, link.a.1),
            PATCH_RING,
        );
        patch_ends.insert(link.a.clone(), a);
        patch_ends.insert(link.b.clone(), b);
    }
    let mut bridges = Vec::new();
    for br in &config.bridges {
        let mut ports = Vec::new();
        for p in &br.ports {
            match open_port(&br.name, p, opts, &mut memory, &mut patch_ends) {
                Ok(o) => ports.push(o),
                Err(e) => errors.push(e),
            }
        }
        bridges.push(ports);
    }
    if errors.is_empty() {
        Ok(Opened { bridges, memory })
    } else {
        // Everything opened so far is dropped (closed) here.
        Err(errors)
    }
}

/// Opens bridge `br`'s local port (`OFPP_LOCAL`): the TAP interface named
/// after the bridge, in the daemon's network namespace. It is left
/// administratively down, as Open vSwitch leaves a bridge's internal port:
/// `ip link set BRIDGE up` brings it up. `None` when the bridge has no
/// local port (`local_port = false`); an error says why the TAP could not
/// be made (no `CAP_NET_ADMIN`, a name longer than 15 bytes, an interface
/// of that name that is no free TAP).
pub fn open_local(br: &datastore::Bridge) -> Option<Result<OpenPort, String>> {
    if !br.local_port {
        return None;
    }
    let opened = TapPort::open_with(&br.name, &TapConfig { up: false });
    Some(match opened {
        Ok(t) => Ok(OpenPort {
            number: ofp::consts::port_no::LOCAL,
            interface: br.name.clone(),
            kernel: true,
            backend: Box::new(t),
            rx_queue_cores: None,
            tx_core: None,
            // A trunk of every VLAN, as Open vSwitch's internal port.
            vlan: Default::default(),
        }),
        Err(e) => Err(format!(
            "the local port (TAP interface {:?}) could not be made: {e}; \
             the bridge runs without it",
            br.name
        )),
    })
}
