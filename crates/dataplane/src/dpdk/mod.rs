//! The DPDK backend (cargo feature `dpdk`): ports on any DPDK ethdev — a
//! NIC by PCI address or any virtual device (`net_pcap`, `net_null`,
//! `net_ring`, `net_memif`, `net_tap`, `net_af_packet`, `net_af_xdp`,
//! `net_virtio_user` …) — against Debian's DPDK 22.11 through the in-tree
//! `dpdk-sys` bindings.
//!
//! # Pieces
//!
//! - [`eal`]: the EAL, started once per process with the configuration's
//!   arguments; threads registered as lcores on first use.
//! - [`DpdkPort`]: one handle on a device. [`DpdkPort::open`] probes the
//!   device (unless the EAL arguments made it), configures `rx_queues`
//!   receive and `tx_queues` transmit queues (RSS over the receive queues
//!   when there are several), creates the port's mbuf pool and starts it;
//!   the handle it returns reads queue 0. [`PortBackend::split_receivers`]
//!   gives a handle per further receive queue, [`PortBackend::split_sender`]
//!   one per transmit queue, so each thread has queues of its own and no
//!   lock is taken on the packet path.
//! - [`ring_pipe`]: two ethdevs joined back to back over rings, for a
//!   generator in the same process.
//!
//! # Mbufs, in place
//!
//! `rx_burst` lends each received mbuf's data room to a [`PacketBuf`] as a
//! [`packet::buffer::Lent`] region whose token is the mbuf (no copy): the
//! frame is where the device wrote it, with the mbuf's headroom (128
//! bytes) in front for pushes. The pipeline works on that region
//! (`runtime::worker`), and `tx_burst` recognises a region lent by this
//! backend ([`Lent::is_from`](packet::buffer::Lent::is_from)), takes the
//! mbuf back, sets its data offset and length from the buffer and hands it
//! to the device — whichever DPDK port received it. Anything else (a frame
//! from another backend, a copy the pipeline made for a second output) is
//! copied into a fresh mbuf from the sending port's pool. A buffer dropped
//! anywhere frees its mbuf (`rte_pktmbuf_free`, from any thread). Chained
//! or shared mbufs are copied out into owned buffers on receive.
//!
//! What `rte_eth_tx_burst` leaves (the device queue was full) goes back to
//! the front of the caller's burst, still in its mbufs, as the
//! [`PortBackend::tx_burst`] contract asks.
//!
//! # Counters
//!
//! Each handle counts what it received and sent; the handle of queue 0
//! adds the device's own drops (`imissed` and `rx_nombuf` as
//! `rx_drops.ring_full`, `ierrors`, `oerrors`). A frame too large for an
//! mbuf is `tx_drops.oversize`, a runt `tx_drops.runt`, an empty pool
//! `tx_errors`.
//!
//! # Closing
//!
//! The device is stopped, closed and (if fulmar probed it) removed when
//! its last handle is dropped; its pool is freed once no mbuf of it is
//! lent out any more.
//!
//! [`PortBackend::split_receivers`]: crate::port::PortBackend::split_receivers
//! [`PortBackend::split_sender`]: crate::port::PortBackend::split_sender
//! [`PortBackend::tx_burst`]: crate::port::PortBackend::tx_burst
//! [`PacketBuf`]: crate::port::PacketBuf

pub mod eal;
mod pipe;
mod port;

pub use eal::{init, is_running, lcore_id, running_args};
pub use pipe::ring_pipe;
pub use port::{DpdkConfig, DpdkPort};

#[cfg(test)]
mod tests;
