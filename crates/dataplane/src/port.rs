//! The port abstraction: packet buffers, bursts of them, per-port counters and
//! the [`PortBackend`] trait every backend (memory, AF_PACKET, pcap, TAP, and
//! later AF_XDP and DPDK) implements.
//!
//! # Packet buffers
//!
//! A [`PacketBuf`] is one frame plus its metadata ([`PacketMeta`]): the one
//! buffer type of the switch, defined in [`packet::buffer`] and used as it
//! is from the port through the pipeline and back to a port. Its bytes are
//! owned (a vector recycled through [`crate::pool`]: memory, pcap, TAP,
//! socket ports and anything built from scratch), in a slot of a ring a
//! backend shares with the kernel (an AF_PACKET block, an AF_XDP UMEM
//! frame: [`PacketBuf::from_slot`], given back through a reference-counted
//! [`BufferLender`] exactly once, so the memory stays mapped even if the
//! port is dropped first), or in a DPDK mbuf's data room
//! ([`PacketBuf::from_frame`], [`PacketBuf::into_frame`]).
//!
//! A buffer is `'static` and `Send`: it crosses an SPSC ring to a worker
//! and on to a TX thread without copying. A slot is held as long as the
//! buffer lives, so a consumer that hoards buffers starves the backend's
//! ring (the kernel then drops and counts it, as `rx_drops.ring_full`);
//! the pipeline's worker copies a slot's frame out before processing it.
//! Every kind has **headroom** in front of the frame so pushing a header
//! (VLAN, MPLS, PBB) is a pointer move, not a copy; only a push past the
//! headroom or the end of a lent region copies the frame into owned
//! storage.
//!
//! # Bursts
//!
//! A [`Burst`] is a bounded vector of buffers (default [`DEFAULT_BURST`]). RX
//! appends up to [`Burst::room`] buffers; TX consumes buffers from the front.
//!
//! # Threads
//!
//! A backend is `Send` and used through `&mut`, so one thread drives it at a
//! time. For an RX thread and a TX thread on the same port,
//! [`PortBackend::split_sender`] makes a second handle with its own socket or
//! descriptor that only sends (AF_PACKET, TAP, the memory sink and DPDK — a
//! transmit queue each — can; others answer `None`). A port with several
//! receive queues (DPDK with RSS) hands out a handle per further queue with
//! [`PortBackend::split_receivers`], each read by its own thread.
//!
//! # Counters
//!
//! [`PortCounters`] counts packets and bytes each way, plus every drop under a
//! name: a packet the port lost is in exactly one of the `rx_drops`/`tx_drops`
//! fields or in `rx_errors`/`tx_errors`, never silently gone.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// Default number of buffers in a burst.
pub const DEFAULT_BURST: usize = 32;

/// Default bytes of headroom in front of a frame in owned buffers: room for
/// several pushed headers (PBB is 18 bytes, a VLAN tag 4, an MPLS label 4).
pub const DEFAULT_HEADROOM: usize = 128;

pub use packet::buffer::{BufError, BufferLender, Outbox, PacketBuf, PacketMeta, SharedLender};

/// A bounded batch of packets moving through a port or a ring.
#[derive(Debug)]
pub struct Burst {
    pkts: Vec<PacketBuf>,
    limit: usize,
}

impl Default for Burst {
    /// An empty burst of [`DEFAULT_BURST`] packets.
    fn default() -> Self {
        Burst::new()
    }
}

/// A burst being filled by [`PortBackend::rx_burst`].
pub type RxBurst = Burst;
/// A burst being consumed by [`PortBackend::tx_burst`].
pub type TxBurst = Burst;

impl Burst {
    /// An empty burst that holds at most `limit` packets.
    pub fn with_limit(limit: usize) -> Self {
        Burst {
            pkts: Vec::with_capacity(limit),
            limit,
        }
    }

    /// An empty burst of [`DEFAULT_BURST`] packets.
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_BURST)
    }

    /// The most packets this burst holds.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Number of packets in the burst.
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// True when the burst holds no packets.
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// How many more packets fit.
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.pkts.len())
    }

    /// True when no more packets fit.
    pub fn is_full(&self) -> bool {
        self.room() == 0
    }

    /// Appends a packet; gives it back when the burst is full.
    pub fn push(&mut self, pkt: PacketBuf) -> Result<(), PacketBuf> {
        if self.is_full() {
            return Err(pkt);
        }
        self.pkts.push(pkt);
        Ok(())
    }

    /// Appends a buffer over a static owner's region, made where it
    /// lands ([`PacketBuf::push_lent_frame`]); a full burst leaves the
    /// region with the caller (`false`).
    ///
    /// # Safety
    ///
    /// As [`packet::buffer::Lent::new`].
    #[inline(always)]
    #[must_use]
    pub unsafe fn push_lent_frame(
        &mut self,
        base: std::ptr::NonNull<u8>,
        cap: usize,
        token: usize,
        owner: &'static packet::buffer::LentOwner,
        head: usize,
        len: usize,
    ) -> bool {
        if self.is_full() {
            return false;
        }
        // SAFETY: the caller's.
        unsafe { PacketBuf::push_lent_frame(&mut self.pkts, base, cap, token, owner, head, len) };
        true
    }

    /// The packets, in order.
    pub fn pkts(&self) -> &[PacketBuf] {
        &self.pkts
    }

    /// The packets, in order, writable.
    pub fn pkts_mut(&mut self) -> &mut [PacketBuf] {
        &mut self.pkts
    }

    /// Iterates over the packets.
    pub fn iter(&self) -> std::slice::Iter<'_, PacketBuf> {
        self.pkts.iter()
    }

    /// Removes the first `n` packets (all of them if fewer) and returns them.
    pub fn drain_front(&mut self, n: usize) -> std::vec::Drain<'_, PacketBuf> {
        let n = n.min(self.pkts.len());
        self.pkts.drain(..n)
    }

    /// Puts packets back in front of the others, in order: those a port
    /// took out of the burst but then could not send.
    pub fn put_back_front(&mut self, pkts: impl IntoIterator<Item = PacketBuf>) {
        self.pkts.splice(0..0, pkts);
    }

    /// Removes and returns every packet.
    pub fn drain(&mut self) -> std::vec::Drain<'_, PacketBuf> {
        self.pkts.drain(..)
    }

    /// Drops every packet.
    pub fn clear(&mut self) {
        self.pkts.clear();
    }

    /// Exchanges the burst's packets with `pkts`'s (the limit stays): a
    /// whole burst handed on without moving a buffer. The caller keeps
    /// `pkts` within the limit.
    pub fn swap_pkts(&mut self, pkts: &mut Vec<PacketBuf>) {
        std::mem::swap(&mut self.pkts, pkts);
    }

    /// Takes `out`'s packets (all leaving by one port,
    /// [`Outbox::single_port`]) by exchanging vectors; the burst must be
    /// empty and its limit at least `out.len()`.
    pub fn take_outbox(&mut self, out: &mut Outbox) {
        debug_assert!(self.is_empty() && out.len() <= self.limit);
        out.exchange_pkts(&mut self.pkts);
    }
}

/// Whether a port's link can carry packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Administratively up with carrier.
    Up,
    /// Down (administratively, or no carrier).
    Down,
    /// The backend cannot tell (pcap files, memory ports report `Up`).
    Unknown,
}

/// Why received packets were lost; each field is one named reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxDrops {
    /// The receive ring/queue had no free slot (for AF_PACKET: counted by
    /// the kernel, `PACKET_STATISTICS` `tp_drops`).
    pub ring_full: u64,
    /// The frame did not fit the buffer and was dropped.
    pub truncated: u64,
    /// The source handed over something that is not a frame (a corrupt pcap
    /// record, a runt).
    pub malformed: u64,
    /// A tunnel port got an encapsulated packet too short for its headers
    /// or with headers it cannot take (VXLAN without the I flag, GRE with
    /// routing, another version, a runt inner frame).
    pub tunnel_malformed: u64,
    /// A tunnel port got a packet from its peer (or on its own UDP port)
    /// for another tunnel: another VNI/key, another GRE protocol, or a
    /// VXLAN sender that is not the peer.
    pub tunnel_mismatch: u64,
    /// The receive queue held its time bound's worth of packets
    /// ([`crate::delay`]): dropped early so that the packets it keeps
    /// wait at most the configured delay.
    pub queue_delay: u64,
}

/// Why packets given to the port for sending were lost; each field is one
/// named reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxDrops {
    /// Larger than the link can carry (`EMSGSIZE`).
    pub oversize: u64,
    /// The link was down.
    pub link_down: u64,
    /// The device queue was full and the kernel/device dropped the packet
    /// (`ENOBUFS`). Packets the port merely did not accept stay with the
    /// caller instead; see [`PortBackend::tx_burst`].
    pub queue_full: u64,
    /// Runts the port refused to send (shorter than an Ethernet header).
    pub runt: u64,
}

/// `+` for a struct of counters: the field-by-field sum (the struct
/// literal makes the compiler check that every field is named).
macro_rules! add_fields {
    ($t:ident { $($f:ident),+ $(,)? }) => {
        impl std::ops::Add for $t {
            type Output = $t;
            fn add(self, o: $t) -> $t {
                $t { $($f: self.$f + o.$f),+ }
            }
        }
    };
}

add_fields!(RxDrops {
    ring_full,
    truncated,
    malformed,
    tunnel_malformed,
    tunnel_mismatch,
    queue_delay
});
add_fields!(TxDrops {
    oversize,
    link_down,
    queue_full,
    runt
});
add_fields!(PortCounters {
    rx_packets,
    rx_bytes,
    rx_drops,
    rx_errors,
    tx_packets,
    tx_bytes,
    tx_drops,
    tx_errors
});

/// Per-port counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Packets handed out by `rx_burst`.
    pub rx_packets: u64,
    /// Bytes (frame lengths) handed out by `rx_burst`.
    pub rx_bytes: u64,
    /// Packets lost on receive, by reason.
    pub rx_drops: RxDrops,
    /// Receive errors (the packet was lost because of an I/O error).
    pub rx_errors: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets lost on send, by reason.
    pub tx_drops: TxDrops,
    /// Send errors (the packet was lost because of an unexpected I/O error).
    pub tx_errors: u64,
}

impl PortCounters {
    /// Total packets lost on receive, all reasons.
    pub fn rx_dropped(&self) -> u64 {
        let d = &self.rx_drops;
        d.ring_full
            + d.truncated
            + d.malformed
            + d.tunnel_malformed
            + d.tunnel_mismatch
            + d.queue_delay
    }

    /// Total packets lost on send, all reasons.
    pub fn tx_dropped(&self) -> u64 {
        let d = &self.tx_drops;
        d.oversize + d.link_down + d.queue_full + d.runt
    }

    /// Counts one packet of `len` bytes as sent.
    #[inline]
    pub fn count_tx(&mut self, len: usize) {
        self.tx_packets += 1;
        self.tx_bytes += len as u64;
    }

    /// Takes every packet of `pkts`, counting each as sent: the
    /// [`PortBackend::tx_burst`] of a port with nowhere to send.
    pub fn discard_as_sent(&mut self, pkts: &mut TxBurst) -> usize {
        let n = pkts.len();
        for p in pkts.drain() {
            self.count_tx(p.len());
        }
        n
    }

    /// Field-by-field sum, e.g. a port and its split sender, or several
    /// queues of one port.
    pub fn merged(&self, other: &PortCounters) -> PortCounters {
        *self + *other
    }
}

/// A port backend: moves bursts of packets between the switch and a device,
/// socket, file or memory.
///
/// Calls never block; "nothing to do right now" is `Ok(0)`. `Err` means the
/// port itself failed (its socket was closed under it, the file is gone) and
/// is not a per-packet outcome.
pub trait PortBackend: Send {
    /// A human-readable name (the interface name, the file path).
    fn name(&self) -> &str;

    /// Appends up to `out.room()` received packets to `out` and returns how
    /// many it appended. The default receives nothing: a port that only
    /// sends (a sink, a capture file, a split sender) leaves it out.
    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        let _ = out;
        Ok(0)
    }

    /// Sends packets from the front of `pkts`. Every packet the port took —
    /// sent, or dropped and counted in `tx_drops`/`tx_errors` — is removed
    /// from `pkts`; the return value is how many were removed. Packets left
    /// in `pkts` found no room (the socket/device queue is full right now):
    /// the caller retries later or drops them and counts the drop itself.
    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize>;

    /// Pushes out anything the port has buffered (files, TX rings).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Current link state.
    fn link_state(&self) -> LinkState;

    /// A snapshot of the port's counters.
    fn stats(&self) -> PortCounters;

    /// A file descriptor that becomes readable when `rx_burst` may return
    /// packets, for threads that sleep instead of polling; `None` if the
    /// backend has none.
    fn rx_fd(&self) -> Option<RawFd> {
        None
    }

    /// A second, independent handle that sends out of the same port, so a
    /// TX thread can send while another thread receives (both calls need
    /// `&mut`). The sender's `rx_burst` returns nothing and its counters
    /// count only what it sent: add them to this port's for the totals.
    /// `Ok(None)` when the backend cannot send from two handles.
    fn split_sender(&self) -> io::Result<Option<Box<dyn PortBackend>>> {
        Ok(None)
    }

    /// Handles that read the port's further receive queues (a DPDK port
    /// with several queues spread by RSS), one per queue, for other
    /// threads; this handle keeps reading its own. Each handle's
    /// counters count only what it read and sent. Empty (the default)
    /// for single-queue backends.
    fn split_receivers(&mut self) -> io::Result<Vec<Box<dyn PortBackend>>> {
        Ok(Vec::new())
    }

    /// For backends with no [`rx_fd`](Self::rx_fd) that can tell when
    /// packets arrive (in-process ports): ring `bell` after each arrival
    /// and answer true, so the polling thread may sleep instead of polling.
    /// The default answers false (the thread then polls the port).
    fn attach_doorbell(&mut self, bell: Arc<crate::wake::Doorbell>) -> bool {
        let _ = bell;
        false
    }

    /// Bounds the receive queue the backend owns (a kernel socket buffer,
    /// a ring) to `bound`, or gives it back its full size (`None`); see
    /// [`crate::delay`]. Called by the reading thread every few
    /// milliseconds, so a backend skips the work when little changed.
    /// The default does nothing (backends whose queue is the caller's).
    fn set_rx_bound(&mut self, bound: Option<crate::delay::RxBound>) {
        let _ = bound;
    }
}

/// The sending half of a port, which [`SendOnly`] makes a port of: what a
/// backend's [`PortBackend::split_sender`] hands out.
pub trait Transmit: Send {
    /// The [`PortBackend::tx_burst`] contract.
    fn send(&mut self, pkts: &mut TxBurst) -> io::Result<usize>;

    /// The link state of the port named `name`.
    fn link_state(&self, name: &str) -> LinkState;

    /// What this half counted (only the `tx_*` fields).
    fn counters(&self) -> PortCounters;
}

/// A port that only sends, through a [`Transmit`]: a second sender on a
/// port, for a TX thread apart from the RX thread. It receives nothing and
/// counts only what it sends.
pub struct SendOnly<T> {
    name: String,
    tx: T,
}

impl<T: Transmit> SendOnly<T> {
    /// A port named `name` sending through `tx`.
    pub fn new(name: &str, tx: T) -> Self {
        SendOnly {
            name: name.to_string(),
            tx,
        }
    }
}

impl<T: Transmit> PortBackend for SendOnly<T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        self.tx.send(pkts)
    }

    fn link_state(&self) -> LinkState {
        self.tx.link_state(&self.name)
    }

    fn stats(&self) -> PortCounters {
        self.tx.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_limits_and_drains_from_front() {
        let mut b = Burst::with_limit(2);
        assert_eq!(b.room(), 2);
        b.push(PacketBuf::from_slice(&[1])).unwrap();
        b.push(PacketBuf::from_slice(&[2])).unwrap();
        assert!(b.is_full());
        let back = b.push(PacketBuf::from_slice(&[3])).unwrap_err();
        assert_eq!(back.data(), &[3]);
        let first: Vec<_> = b.drain_front(1).collect();
        assert_eq!(first[0].data(), &[1]);
        assert_eq!(b.pkts()[0].data(), &[2]);
        assert_eq!(b.drain_front(5).count(), 1);
        assert!(b.is_empty());
    }

    #[test]
    fn counters_sum_named_drops() {
        let c = PortCounters {
            rx_drops: RxDrops {
                ring_full: 1,
                truncated: 2,
                malformed: 3,
                ..Default::default()
            },
            tx_drops: TxDrops {
                oversize: 1,
                link_down: 1,
                queue_full: 1,
                runt: 2,
            },
            ..Default::default()
        };
        assert_eq!(c.rx_dropped(), 6);
        assert_eq!(c.tx_dropped(), 5);
        let other = PortCounters {
            rx_packets: 4,
            tx_bytes: 9,
            tx_errors: 1,
            ..c
        };
        let m = c.merged(&other);
        assert_eq!((m.rx_packets, m.tx_bytes, m.tx_errors), (4, 9, 1));
        assert_eq!((m.rx_dropped(), m.tx_dropped()), (12, 10));
        assert_eq!(m.rx_drops.truncated, 4);
        assert_eq!(Burst::default().limit(), DEFAULT_BURST);
    }
}
