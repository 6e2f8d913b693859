//! The data side of fulmar: ports and their backends, the rings that carry
//! bursts of packets between threads, and (later) the RX/worker/TX threads.
//!
//! This crate moves packets; it does not know OpenFlow. The pipeline hands it
//! bursts to send and receives bursts it has read, through [`port::PortBackend`]
//! and [`spsc`] rings.
//!
//! Backends:
//! - [`memory`]: generator and sink ports for tests and benchmarks;
//! - [`afpacket`]: Linux AF_PACKET with a TPACKET_V3 mmap RX ring;
//! - [`afxdp`]: AF_XDP on one interface queue (raw syscalls, own XDP program);
//! - [`pcap`]: replay a capture file (RX) and write one (TX);
//! - [`tap`]: a TAP device toward the host stack (the LOCAL port);
//! - [`link`]: a netlink watcher for link up/down events.

pub mod afpacket;
pub mod afxdp;
pub mod link;
pub mod memory;
pub mod pcap;
pub mod port;
pub mod spsc;
pub mod tap;

mod sys;

#[cfg(test)]
mod testnet;

pub use port::{
    Burst, LinkState, PacketBuf, PacketMeta, PortBackend, PortCounters, RxBurst, TxBurst,
};
