//! The data side of fulmar: ports and their backends, the rings that carry
//! bursts of packets between threads, and the RX/worker/TX threads.
//!
//! This crate moves packets; it does not know OpenFlow. The pipeline hands it
//! bursts to send and receives bursts it has read, through [`port::PortBackend`]
//! and [`spsc`] rings.
//!
//! Backends:
//! - [`memory`]: generator and sink ports for tests and benchmarks;
//! - [`afpacket`]: Linux AF_PACKET with a TPACKET_V2 mmap RX ring (the
//!   default);
//! - [`rawsock`]: Linux AF_PACKET without a ring (`recvmmsg`/`sendmmsg`);
//! - [`afxdp`]: AF_XDP on one interface queue (raw syscalls, own XDP program);
//! - `dpdk` (cargo feature `dpdk`): DPDK ethdevs, NICs and virtual devices,
//!   with mbufs lent to the pipeline in place;
//! - [`pcap`]: replay a capture file, classic pcap or pcapng (RX), and
//!   write one (TX);
//! - [`tap`]: a TAP device toward the host stack (the LOCAL port);
//! - [`link`]: a netlink watcher for link up/down events;
//! - [`patch`]: in-process port pairs (patch links between bridges);
//! - [`tunnel`]: VXLAN and GRE ports over an IPv4 underlay (raw IPv4
//!   sockets; the kernel routes the outer packets).
//!
//! [`capture`] holds the capture formats and writes what a port receives
//! and sends as a pcapng file.
//!
//! Threads: [`threads`] (run-to-completion or RX/worker/TX over rings),
//! [`dispatch`] (which worker gets a packet), [`flush`] (when partial
//! bursts leave, idle back-off), [`wake`] (sleeping and waking, pinning),
//! [`snapshot`] (publishing new table versions to running workers),
//! [`pool`] (recycled storage for owned packet buffers), [`qos`] (egress
//! queues: strict priority under rates), [`placement`]
//! (which CPU each thread runs on), [`delay`] (every queue toward a worker
//! bounded in time, not bytes); [`settings`] spells the thread
//! settings (mode, dispatch key, placement policy) as the configuration
//! writes them.

pub mod afpacket;
pub mod afxdp;
pub mod capture;
pub mod delay;
pub mod dispatch;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod flush;
pub mod link;
pub mod memory;
pub mod patch;
pub mod pcap;
pub mod placement;
pub mod pool;
pub mod port;
pub mod qos;
pub mod rawsock;
pub mod settings;
pub mod snapshot;
pub mod sparse;
pub mod spsc;
pub mod tap;
pub mod threads;
pub mod tunnel;
pub mod wake;

mod sys;

#[cfg(test)]
mod testnet;

pub use port::{
    Burst, LinkState, Outbox, PacketBuf, PacketMeta, PortBackend, PortCounters, RxBurst, TxBurst,
};
