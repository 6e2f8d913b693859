//! The AF_PACKET backend: a port on a Linux network interface, receiving
//! through a TPACKET_V2 mmap ring and sending with `sendmmsg`.
//!
//! # Receive: a TPACKET_V2 ring, frames lent without copying
//!
//! The RX socket shares a ring of fixed-size frame slots with the kernel
//! (`block_count` blocks of `block_size` bytes, each cut into slots of
//! `frame_size`). The kernel writes each frame into the next slot and hands
//! it over at once by setting `TP_STATUS_USER` in the slot's header, then
//! wakes a poller: a frame never waits for company (the TPACKET_V3 ring
//! this port used before handed frames over a block at a time, and at low
//! rates a frame waited for the block's retire timer, 1.7 ms median
//! through an idle switch). The port walks the slots in ring order and
//! lends each frame as a [`PacketBuf`] pointing straight into its slot
//! (see `port` for lent buffers); the slot goes back to the kernel
//! (`TP_STATUS_KERNEL`) when the buffer is dropped. A per-slot `lent`
//! state, set by the reader and cleared by the releaser after the status
//! store, stops the reader from taking a slot whose frame from the
//! previous lap is still held.
//!
//! The region lent with a frame runs from the end of the slot's
//! `tpacket2_hdr` to the end of the slot, so the ring's own address bytes
//! plus `PACKET_RESERVE` are the frame's headroom and pushes are in place,
//! while the status word the release path writes is never part of it.
//!
//! The kernel fills slots strictly in order and drops when the next one
//! is still the user's (held, or not yet read): the port reports those as
//! `rx_drops.ring_full` (from `PACKET_STATISTICS`). A frame longer than
//! its slot arrives truncated; the port drops it and counts
//! `rx_drops.truncated`. Slots are sized from the interface's MTU when the
//! port opens (`frame_size` 0, the default); an MTU raised later truncates.
//!
//! # Bounded delay without tail drops
//!
//! The ring is deep (16 MiB, 8,192 slots at an MTU of 1,500) so that the
//! kernel never has to drop what a ping sends into a flood, even across a
//! stall of the reader: on the two-CPU test machine the VM's own agent
//! (nice -10) takes the switch's CPU for 9–12 ms about once a second,
//! 4,000–5,000 frames at the 440 kpps a saturating generator offers, which
//! overflowed the 8 MiB ring this had before. Under a time bound
//! ([`crate::delay`], set by the reading thread through
//! [`PortBackend::set_rx_bound`]) the reader drops by age instead, while
//! the port's backlog is *standing* (its smallest span over a 2 ms window
//! of visits stayed above half the bound: more arrives than the reader
//! takes) and more than two bursts wait, or whenever more than
//! [`STALE_BACKLOG`] frames (or a quarter of the ring) wait. A backlog a
//! stall of the reader leaves (off its CPU for a few milliseconds) or a
//! burst is not standing, so a light port loses nothing to its reader's
//! stalls. Ages are measured against the newest frame waiting in the ring
//! (found by a doubling, then halving, search over the slots ready from
//! the reader on: about 2 log2(slots) status loads per burst), so a frame
//! that only waited for the reader to wake is never stale. A frame stamped
//! more than the bound before that newest one sat behind a backlog: it goes back to
//! the kernel unread and counts as `rx_drops.queue_delay`, unless it is
//! *sparse* ([`crate::sparse`]: its flow sent next to nothing lately, as a
//! ping does), in which case it is lent however old. Skipping a stale
//! frame costs a status load, a header read and the meter's hash (tens of
//! nanoseconds), so the reader catches up with a backlog at many times
//! the rate it forwards.
//!
//! # Sparse frames first
//!
//! Under a bound, when more frames wait than a read takes, the reader
//! also looks ahead (up to 2,048 slots a read, each slot once: the meter
//! counts every frame once, ahead or in order) and lends sparse frames
//! *before* the backlog in front of them, marking their slots so that it
//! passes over them when it gets there. A slot lent ahead goes back to
//! the kernel only once the reader has passed it: dropped before that,
//! its buffer leaves it the user's (`lend`) and the reader gives it
//! back as it passes. Given back at once, it would be a hole the kernel
//! fills out of turn whenever the ring is full (its head then waits right
//! behind the reader): that frame, newer than the ones after it, was read
//! in their place, and the reader ended up waiting at an empty slot
//! while the kernel filled others (a saturated port forwarded 9 kpps
//! instead of 440 that way). A frame of a flow that still has a frame
//! waiting in front of it is not lent ahead (per meter bucket: the
//! position of the last frame left for the reader), so a flow's frames
//! keep their order. A ping into a flood then waits for no backlog at
//! all, whatever the bound: the bound only decides how long the flood's
//! own frames may wait, which is what TCP through a saturated switch
//! needs to be long (docs/results.md, "Veths (AF_PACKET) beside Open
//! vSwitch").
//!
//! `PACKET_IGNORE_OUTGOING` keeps frames this host sends on the interface
//! (including our own TX) out of the ring. The RX socket is created with
//! protocol 0 and bound to the interface only after the ring is set up, so it
//! never sees frames from other interfaces.
//!
//! # Send: `sendmmsg`
//!
//! TX uses a second AF_PACKET socket, bound to the same interface with
//! protocol 0 (so it receives nothing), with `PACKET_QDISC_BYPASS` when the
//! kernel has it. A burst is sent with one `sendmmsg` call whose iovecs point
//! at the buffers' bytes, so there is no user-space copy (the kernel copies
//! into its skb). This is simpler than a TX ring and costs the same one copy.
//! A full socket buffer (`EAGAIN`) leaves the rest of the burst with the
//! caller; per-packet failures are dropped and counted under their reason.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::port::{
    BufferLender, LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, SendOnly, SharedLender,
    Transmit, TxBurst,
};
use crate::sparse::FlowMeter;
use crate::sys;
use lend::SlotLend;

mod lend;

/// Smallest frame the port sends (an Ethernet header).
const MIN_FRAME: usize = 14;

/// `enum tpacket_versions`: TPACKET_V2.
const TPACKET_V2: libc::c_int = 1;

/// Most packets handed to one `sendmmsg` call.
const TX_BATCH: usize = 64;

/// Byte offsets inside `struct tpacket2_hdr`, at the start of every slot.
mod frame {
    /// `tp_status`.
    pub const STATUS: usize = 0;
    pub const LEN: usize = 4;
    pub const SNAPLEN: usize = 8;
    pub const MAC: usize = 12;
    pub const SEC: usize = 16;
    pub const NSEC: usize = 20;
    /// `tp_vlan_tci` and `tp_vlan_tpid`.
    pub const VLAN_TCI: usize = 24;
    /// See `VLAN_TCI`.
    pub const VLAN_TPID: usize = 26;
    /// The header's size: a lent frame's region starts after it.
    pub const HDR_LEN: usize = 32;
    /// `TP_STATUS_VLAN_VALID`, `TP_STATUS_VLAN_TPID_VALID`.
    pub const STATUS_VLAN_VALID: u32 = 1 << 4;
    /// See `STATUS_VLAN_VALID`.
    pub const STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
    /// Where the kernel puts the network header in a slot before
    /// `PACKET_RESERVE`: `TPACKET_ALIGN(TPACKET2_HDRLEN + 16)`, the header
    /// plus a `sockaddr_ll`, at least 16 bytes for the MAC header, rounded
    /// to 16.
    pub const NET_OFFSET: usize = 80;
}

/// Under a time bound, more frames than this waiting (or a quarter of the
/// ring, if less) are a backlog whatever the standing rule says: its
/// stale frames are dropped. The limit is a count, not a share of the
/// ring, so a deeper ring absorbs longer stalls without making a ping wait
/// behind more frames once its reader is back (1,024 frames: 2.3 ms at
/// 440 kpps, the quarter of the 8 MiB ring it was chosen with).
pub const STALE_BACKLOG: usize = 1024;

/// Ring and socket options for an [`AfPacketPort`].
#[derive(Clone, Debug)]
pub struct AfPacketConfig {
    /// Bytes per ring block; a multiple of the page size and of the frame
    /// size (default 256 KiB).
    pub block_size: usize,
    /// Number of blocks (default 64, so 16 MiB of ring).
    pub block_count: usize,
    /// Bytes per frame slot, a multiple of 16 and at least 256; 0 (the
    /// default) sizes it from the interface's MTU when the port opens: the
    /// smallest power of two, at least 2,048, that holds the slot header,
    /// the reserve, the MTU and two VLAN tags.
    pub frame_size: usize,
    /// Extra headroom in front of every received frame (`PACKET_RESERVE`,
    /// default 64); the ring header already gives about 50 bytes.
    pub reserve: u32,
    /// Put the interface in promiscuous mode (default true).
    pub promiscuous: bool,
    /// Send around the qdisc layer when the kernel allows (default true).
    pub qdisc_bypass: bool,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            block_size: 1 << 18,
            block_count: 64,
            frame_size: 0,
            reserve: 64,
            promiscuous: true,
            qdisc_bypass: true,
        }
    }
}

/// The slot size for an interface MTU (see [`AfPacketConfig::frame_size`]).
fn frame_size_for(mtu: usize, reserve: u32) -> usize {
    (frame::NET_OFFSET + reserve as usize + mtu + 8)
        .next_power_of_two()
        .max(2048)
}

/// The mmap'ed RX ring, shared by the port and every frame it lent.
struct RxRing {
    base: NonNull<u8>,
    map_len: usize,
    block_size: usize,
    frame_size: usize,
    frames_per_block: usize,
    /// Per slot: lent from when the reader lends its frame until the
    /// holder drops it (and, lent ahead, until the reader has passed it
    /// too); freed only by the one that gives the slot back, after the
    /// status store.
    lent: Box<[SlotLend]>,
    /// The RX socket; closed after the ring is unmapped.
    fd: OwnedFd,
}

// SAFETY: `base` points at a shared mapping that lives as long as the RxRing;
// all cross-thread access to ring state goes through the atomics (slot status
// words are accessed as AtomicU32), and frame regions are touched only by the
// one PacketBuf they were lent to.
unsafe impl Send for RxRing {}
// SAFETY: as above.
unsafe impl Sync for RxRing {}

impl RxRing {
    /// Number of frame slots.
    fn slots(&self) -> usize {
        self.lent.len()
    }

    /// Byte offset of slot `slot` in the mapping (slots never span blocks).
    fn offset(&self, slot: usize) -> usize {
        (slot / self.frames_per_block) * self.block_size
            + (slot % self.frames_per_block) * self.frame_size
    }

    /// The status word of slot `slot`, shared with the kernel.
    fn status(&self, slot: usize) -> &AtomicU32 {
        // SAFETY: slot < slots (callers index within the ring, and
        // `offset` stays inside the mapping for those), the status word is
        // the first word of a 16-byte-aligned slot, and the mapping
        // outlives &self. The kernel writes it too; treating it as an
        // atomic is how the packet_mmap protocol is meant to be used.
        unsafe {
            AtomicU32::from_ptr(
                self.base.as_ptr().add(self.offset(slot) + frame::STATUS) as *mut u32
            )
        }
    }

    /// Whether slot `slot` holds a frame for the reader: the kernel handed
    /// it over and it is not lent from an earlier lap.
    fn ready(&self, slot: usize) -> bool {
        match self.lent.get(slot) {
            Some(lent) if lent.is_free() => {
                self.status(slot).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
            }
            _ => false,
        }
    }

    /// Hands slot `slot` back to the kernel.
    fn give_back(&self, slot: usize) {
        self.status(slot)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }

    /// Gives slot `slot` back to the kernel and frees `lent`, its state,
    /// for the reader (in that order: a reader that sees it free sees the
    /// status too).
    fn give_back_and_free(&self, slot: usize, lent: &SlotLend) {
        self.give_back(slot);
        lent.free();
    }

    /// The reader passes slot `slot`, whose frame it lent ahead: gives it
    /// back if its buffer was dropped meanwhile ([`SlotLend::pass`]).
    fn pass_lent_ahead(&self, slot: usize) {
        if let Some(lent) = self.lent.get(slot).filter(|l| l.pass()) {
            self.give_back_and_free(slot, lent);
        }
    }

    /// A `T` (`u16` or `u32`) at `off` in slot `slot`'s header, if in
    /// bounds.
    fn read<T: Copy>(&self, slot: usize, off: usize) -> Option<T> {
        if slot >= self.slots() || off.checked_add(std::mem::size_of::<T>())? > frame::HDR_LEN {
            return None;
        }
        // SAFETY: inside slot `slot`'s header (checked above); the caller
        // saw the slot ready (status USER, loaded with Acquire), so the
        // kernel is not writing it; unaligned read because kernel data is
        // not trusted; `T` is one of the plain integers the callers name.
        Some(unsafe {
            std::ptr::read_unaligned(self.base.as_ptr().add(self.offset(slot) + off) as *const T)
        })
    }

    /// The kernel's timestamp of the frame in ready slot `slot` (realtime,
    /// ns).
    fn stamp_ns(&self, slot: usize) -> u64 {
        u64::from(self.read::<u32>(slot, frame::SEC).unwrap_or(0)) * 1_000_000_000
            + u64::from(self.read::<u32>(slot, frame::NSEC).unwrap_or(0))
    }
}

impl BufferLender for RxRing {
    fn release(&self, token: usize) {
        // Lent ahead and not yet passed, it stays the user's: the kernel
        // must not fill it before the slots in front of it.
        if let Some(lent) = self.lent.get(token).filter(|l| l.release()) {
            self.give_back_and_free(token, lent);
        }
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: base/map_len are exactly what mmap returned; no PacketBuf
        // can point into the ring any more (each holds an Arc to it).
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.map_len) };
        // `fd` closes after this.
    }
}

/// A port on a network interface through AF_PACKET.
pub struct AfPacketPort {
    name: String,
    ring: Arc<RxRing>,
    /// The ring as the lender of the slots it lends ([`SharedLender`]).
    lender: SharedLender,
    /// The next slot to read.
    next: usize,
    /// Tells sparse frames from a flood's while the port is bounded.
    meter: FlowMeter,
    tx: Sender,
    ifindex: u32,
    qdisc_bypass: bool,
    counters: PortCounters,
    /// Kernel drop count accumulated from PACKET_STATISTICS (which resets on read).
    kernel_drops: Cell<u64>,
    /// The time bound in nanoseconds, if bounded (only the bound's delay
    /// matters here: see `rx_burst` for why not its packet count).
    max_age_ns: Option<u64>,
    /// Whether the port has a standing backlog (see [`Standing`]).
    standing: Standing,
    /// Per slot, what looking ahead of the reader found (see
    /// `lend_sparse_ahead`).
    ahead: Vec<Ahead>,
    /// How many slots from `next` on were looked at ahead.
    scanned: usize,
    /// Slots the reader has passed since the port opened.
    passed: u64,
    /// Per meter bucket: one past the position (in `passed` terms) of the
    /// last frame looked at ahead and left for the reader; a later frame
    /// of the bucket is not lent ahead of it (a flow's order is kept).
    held: Box<[u64; crate::sparse::BUCKETS]>,
}

/// What looking ahead of the reader found in a slot.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ahead {
    /// Not looked at (or the reader has passed it).
    No,
    /// Lent ahead of the reader: the reader passes over it.
    Lent,
    /// Metered: sparse, but behind a frame of its flow still waiting.
    Sparse,
    /// Metered: not sparse.
    Dense,
}

/// How long a window of visits is over which the port's smallest backlog
/// decides whether it is overloaded (kernel-stamp nanoseconds).
const STANDING_WINDOW_NS: u64 = 2_000_000;

/// Tells a standing backlog (more arrives than the reader takes: the age
/// drop applies) from a transient one (the reader was off its CPU for a
/// while, or a burst came in: nothing is dropped), by the smallest backlog
/// the reader found over a window of visits, as CoDel judges a queue by
/// its smallest delay over an interval rather than its latest.
#[derive(Clone, Copy, Debug)]
struct Standing {
    /// The age drop applies during this window.
    overloaded: bool,
    /// When this window began (the newest frame's stamp then).
    since_ns: u64,
    /// The smallest backlog span (newest stamp minus oldest) found at a
    /// visit in this window.
    min_span_ns: u64,
}

impl Default for Standing {
    fn default() -> Self {
        Standing {
            overloaded: false,
            since_ns: 0,
            min_span_ns: u64::MAX,
        }
    }
}

impl Standing {
    /// One visit that found a backlog spanning `oldest_ns..=newest_ns`
    /// (`None`: nothing waiting); says whether the age drop applies.
    fn visit(&mut self, span: Option<(u64, u64)>, delay_ns: u64) -> bool {
        let Some((oldest, newest)) = span else {
            self.min_span_ns = 0;
            return false;
        };
        self.min_span_ns = self.min_span_ns.min(newest.saturating_sub(oldest));
        if newest.saturating_sub(self.since_ns) >= STANDING_WINDOW_NS {
            // A backlog that never fell to half the bound in a whole
            // window is standing.
            self.overloaded = self.min_span_ns > delay_ns / 2;
            self.since_ns = newest;
            self.min_span_ns = u64::MAX;
        }
        self.overloaded
    }
}

/// Why a frame was not lent.
enum Skip {
    /// Longer than its slot.
    Truncated,
    /// Older than the time bound, and not sparse.
    Stale,
    /// A slot header that does not describe a frame inside the slot.
    Malformed,
    /// Looked at ahead of the reader and not lent: it stays in its slot
    /// for the reader (not given back, not counted), sparse or not.
    Later(Ahead),
}

/// How [`AfPacketPort::take`] treats a frame.
#[derive(Clone, Copy)]
enum Take {
    /// In order at the reader: stale (stamped before `cutoff_ns`) unless
    /// sparse; `seen` is what looking ahead found (`Ahead::No`: meter it
    /// now).
    InOrder { cutoff_ns: u64, seen: Ahead },
    /// Ahead of the reader: lent only if sparse.
    SparseOnly,
}

/// The most slots the reader looks ahead for sparse frames in one read
/// (each slot is looked at once, ahead or in order).
const SCAN_AHEAD: usize = 2048;

impl AfPacketPort {
    /// Moves the reader past slots whose frames were lent early, giving
    /// back those whose buffers are already dropped
    /// ([`RxRing::pass_lent_ahead`]).
    fn pass_early(&mut self) {
        let n = self.ahead.len();
        for _ in 0..n {
            let slot = self.next;
            if self.ahead[slot] != Ahead::Lent {
                return;
            }
            self.ring.pass_lent_ahead(slot);
            self.ahead[slot] = Ahead::No;
            self.next = (slot + 1) % n;
            self.passed += 1;
            self.scanned = self.scanned.saturating_sub(1);
        }
    }

    /// Looks at up to [`SCAN_AHEAD`] of the `waiting` frames beyond those
    /// already looked at, metering each once, and lends the sparse ones
    /// into `out` ahead of the backlog in front of them (marked
    /// `Ahead::Lent` for the reader to pass over), unless a frame of the
    /// same flow waits in front (a flow's frames keep their order).
    /// Returns how many it lent.
    fn lend_sparse_ahead(&mut self, waiting: usize, out: &mut RxBurst) -> usize {
        let n = self.ahead.len();
        let end = waiting.min(self.scanned + SCAN_AHEAD);
        let mut lent = 0;
        while self.scanned < end && out.room() > 0 {
            let slot = (self.next + self.scanned) % n;
            self.scanned += 1;
            if self.ahead[slot] != Ahead::No || !self.ring.ready(slot) {
                continue;
            }
            match self.take(slot, Take::SparseOnly) {
                Ok(pkt) => {
                    self.ahead[slot] = Ahead::Lent;
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += pkt.len() as u64;
                    let _ = out.push(pkt);
                    lent += 1;
                }
                Err(Skip::Later(seen)) => self.ahead[slot] = seen,
                // Counted by the reader when it gets there.
                Err(_) => {}
            }
        }
        lent
    }

    /// How many frames the kernel handed over that are not yet read, and
    /// the timestamp (realtime, ns) of the newest of them ((0, 0) if
    /// none). The ready slots from the reader on are one run (the kernel
    /// fills slots in order and stops at the first that is not its own),
    /// so the run's end is found by doubling the distance, then halving it.
    fn ready_run(&self) -> (usize, u64) {
        let ring = &self.ring;
        let n = ring.slots();
        let at = |d: usize| (self.next + d) % n;
        // A slot lent early is part of the run (the reader has not passed
        // it yet).
        let filled = |slot: usize| self.ahead[slot] == Ahead::Lent || ring.ready(slot);
        if !filled(at(0)) {
            return (0, 0);
        }
        // `lo` is ready; `hi` is not (or the end of the ring).
        let (mut lo, mut step) = (0, 1);
        let mut hi = loop {
            let d = lo + step;
            if d >= n {
                break n;
            }
            if !filled(at(d)) {
                break d;
            }
            lo = d;
            step *= 2;
        };
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if filled(at(mid)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (lo + 1, ring.stamp_ns(at(lo)))
    }

    /// Opens interface `ifname` with the default configuration.
    pub fn open(ifname: &str) -> io::Result<Self> {
        Self::open_with(ifname, &AfPacketConfig::default())
    }

    /// Opens interface `ifname` (in the calling thread's network namespace).
    /// A missing interface is a `NotFound` error naming it.
    pub fn open_with(ifname: &str, cfg: &AfPacketConfig) -> io::Result<Self> {
        let ifindex = sys::if_index(ifname)?;
        let ctx = |what: &str| format!("AF_PACKET port {ifname:?}: {what}");
        let ring =
            Self::open_rx(ifname, ifindex, cfg).map_err(|e| sys::context(e, ctx("RX ring")))?;
        let tx = open_tx_socket(ifindex, cfg.qdisc_bypass)
            .map_err(|e| sys::context(e, ctx("TX socket")))?;
        let ring = Arc::new(ring);
        Ok(AfPacketPort {
            name: ifname.to_string(),
            ahead: vec![Ahead::No; ring.slots()],
            scanned: 0,
            passed: 0,
            held: Box::new([0; crate::sparse::BUCKETS]),
            lender: SharedLender::new(ring.clone()),
            ring,
            next: 0,
            meter: FlowMeter::default(),
            tx: Sender::new(tx),
            ifindex,
            qdisc_bypass: cfg.qdisc_bypass,
            counters: PortCounters::default(),
            kernel_drops: Cell::new(0),
            max_age_ns: None,
            standing: Standing::default(),
        })
    }

    fn open_rx(ifname: &str, ifindex: u32, cfg: &AfPacketConfig) -> io::Result<RxRing> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)?;
        let (frame_size, block_size) = if cfg.frame_size == 0 {
            let mtu = sys::if_mtu(fd.as_raw_fd(), ifname)?;
            let f = frame_size_for(mtu, cfg.reserve);
            (f, cfg.block_size.max(f))
        } else {
            (cfg.frame_size, cfg.block_size)
        };
        if block_size == 0
            || !block_size.is_multiple_of(page)
            || frame_size < 256
            || !frame_size.is_multiple_of(16)
            || !block_size.is_multiple_of(frame_size)
            || cfg.block_count == 0
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "bad ring geometry: block_size {block_size} must be a multiple of the page size {page} and of frame_size {frame_size} (a multiple of 16, at least 256), block_count {} > 0",
                    cfg.block_count
                ),
            ));
        }
        let map_len = block_size
            .checked_mul(cfg.block_count)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring size overflows"))?;
        let frames_per_block = block_size / frame_size;
        let slots = frames_per_block * cfg.block_count;
        let too_big = || io::Error::new(io::ErrorKind::InvalidInput, "ring too large");
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V2)
            .map_err(|e| sys::context(e, "PACKET_VERSION TPACKET_V2"))?;
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RESERVE, &cfg.reserve)
            .map_err(|e| sys::context(e, "PACKET_RESERVE"))?;
        set_flag(&fd, libc::PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING")?;
        let req = libc::tpacket_req {
            tp_block_size: u32::try_from(block_size).map_err(|_| too_big())?,
            tp_block_nr: u32::try_from(cfg.block_count).map_err(|_| too_big())?,
            tp_frame_size: u32::try_from(frame_size).map_err(|_| too_big())?,
            tp_frame_nr: u32::try_from(slots).map_err(|_| too_big())?,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
            .map_err(|e| sys::context(e, "PACKET_RX_RING"))?;
        let base = map_ring(&fd, map_len)?;
        let ring = RxRing {
            base: NonNull::new(base).ok_or_else(|| io::Error::other("mmap returned null"))?,
            map_len,
            block_size,
            frame_size,
            frames_per_block,
            lent: (0..slots).map(|_| SlotLend::default()).collect(),
            fd,
        };
        if cfg.promiscuous {
            set_promiscuous(&ring.fd, ifname, ifindex)?;
        }
        bind(&ring.fd, ifindex, libc::ETH_P_ALL as u16)?;
        Ok(ring)
    }

    /// Takes the frame in ready slot `slot`: lends it, or says why not
    /// (the caller then gives the slot back, but for `Skip::Later`). Under
    /// a bound every frame is metered once, and one stamped before the
    /// cutoff is stale unless sparse.
    fn take(&mut self, slot: usize, how: Take) -> Result<PacketBuf, Skip> {
        let ring = &self.ring;
        let hdr = |off| ring.read::<u32>(slot, off).ok_or(Skip::Malformed);
        let status = hdr(frame::STATUS)?;
        let wire_len = hdr(frame::LEN)?;
        let snaplen = hdr(frame::SNAPLEN)? as usize;
        let mac = usize::from(ring.read::<u16>(slot, frame::MAC).ok_or(Skip::Malformed)?);
        if mac < frame::HDR_LEN || mac.saturating_add(snaplen) > ring.frame_size {
            return Err(Skip::Malformed);
        }
        if (snaplen as u64) < u64::from(wire_len) {
            return Err(Skip::Truncated);
        }
        let stamp = ring.stamp_ns(slot);
        // SAFETY: the frame's bytes [mac, mac + snaplen) lie inside slot
        // `slot` (checked above), which the kernel handed over (status USER,
        // loaded with Acquire by `ready`) and nobody else holds (not lent):
        // nothing writes them while this shared view lives.
        let region = unsafe { ring.base.as_ptr().add(ring.offset(slot)) };
        if self.max_age_ns.is_some() {
            let sparse = match how {
                Take::InOrder {
                    seen: seen @ (Ahead::Sparse | Ahead::Dense),
                    ..
                } => seen == Ahead::Sparse,
                _ => {
                    // SAFETY: as above; the view ends before the slot is lent.
                    let bytes = unsafe { std::slice::from_raw_parts(region.add(mac), snaplen) };
                    let flow = self.meter.observe(bytes);
                    if let Take::SparseOnly = how {
                        // Lent ahead only if sparse and no frame of its
                        // flow waits in front of it.
                        let behind = self.held[flow.bucket] > self.passed;
                        if !flow.sparse || behind {
                            self.held[flow.bucket] = self.passed + self.scanned as u64;
                            let seen = if flow.sparse {
                                Ahead::Sparse
                            } else {
                                Ahead::Dense
                            };
                            return Err(Skip::Later(seen));
                        }
                    }
                    flow.sparse
                }
            };
            if let Take::InOrder { cutoff_ns, .. } = how {
                if stamp < cutoff_ns && !sparse {
                    return Err(Skip::Stale);
                }
            }
        } else if let Take::SparseOnly = how {
            return Err(Skip::Later(Ahead::No));
        }
        ring.lent[slot].lend(matches!(how, Take::SparseOnly));
        let lender = self.lender.clone();
        // SAFETY: the region after the slot header to the slot's end belongs
        // to this frame alone (slots do not overlap, and the reader does not
        // take the slot again until this buffer's release clears `lent`);
        // the frame lies inside it (checked above).
        let mut pkt = unsafe {
            PacketBuf::from_slot(
                NonNull::new_unchecked(region.add(frame::HDR_LEN)),
                ring.frame_size - frame::HDR_LEN,
                mac - frame::HDR_LEN,
                snaplen,
                lender,
                slot,
            )
        };
        pkt.meta.set_timestamp_ns(stamp);
        pkt.meta.wire_len = wire_len;
        // The kernel strips an outer VLAN tag into the frame header before
        // packet sockets see the frame; put it back so the switch sees the
        // frame as it was on the wire.
        if status & frame::STATUS_VLAN_VALID != 0 {
            let tci = ring.read::<u16>(slot, frame::VLAN_TCI).unwrap_or(0);
            let tpid = match ring.read::<u16>(slot, frame::VLAN_TPID) {
                Some(t) if status & frame::STATUS_VLAN_TPID_VALID != 0 && t != 0 => t,
                _ => 0x8100,
            };
            pkt.insert_vlan_tag(tpid, tci);
            pkt.meta.wire_len = wire_len.saturating_add(4);
        }
        Ok(pkt)
    }
}

/// Maps the RX ring of packet socket `fd` (`map_len` bytes), locked in
/// memory when the limits allow.
fn map_ring(fd: &OwnedFd, map_len: usize) -> io::Result<*mut u8> {
    for flags in [
        libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
        libc::MAP_SHARED | libc::MAP_POPULATE,
    ] {
        // SAFETY: mapping the ring the kernel just allocated for this
        // socket, at a kernel-chosen address, of exactly its size.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd.as_raw_fd(),
                0,
            )
        };
        // MAP_LOCKED can fail under a small RLIMIT_MEMLOCK; retry without.
        if base != libc::MAP_FAILED {
            return Ok(base as *mut u8);
        }
    }
    Err(sys::context(
        io::Error::last_os_error(),
        "mmap of the RX ring",
    ))
}

/// The sending socket of an AF_PACKET port and what it counted; the one
/// sender of both AF_PACKET backends (this ring and [`crate::rawsock`]).
pub(crate) struct Sender {
    fd: OwnedFd,
    /// Only the `tx_*` fields are used.
    pub(crate) counters: PortCounters,
}

impl Sender {
    fn new(fd: OwnedFd) -> Self {
        Sender {
            fd,
            counters: PortCounters::default(),
        }
    }

    /// A sender on its own TX socket bound to `ifindex`.
    pub(crate) fn open(ifindex: u32, qdisc_bypass: bool) -> io::Result<Self> {
        open_tx_socket(ifindex, qdisc_bypass).map(Sender::new)
    }

    /// Sends the leading packets of `pkts` (at most [`TX_BATCH`], none a
    /// runt) with one `sendmmsg`; returns how many the kernel took, or the
    /// error of the first one.
    fn send_batch(&self, pkts: &TxBurst, n: usize) -> io::Result<usize> {
        // SAFETY: iovec and mmsghdr are plain data; all-zero is valid.
        let mut iov: [libc::iovec; TX_BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; TX_BATCH] = unsafe { std::mem::zeroed() };
        let n = n.min(TX_BATCH);
        for ((p, v), m) in pkts.iter().take(n).zip(iov.iter_mut()).zip(msgs.iter_mut()) {
            let data = p.data();
            v.iov_base = data.as_ptr() as *mut libc::c_void;
            v.iov_len = data.len();
            m.msg_hdr.msg_iov = v as *mut libc::iovec;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs[..n] point at iovecs in `iov`, which point at packet
        // bytes borrowed from `pkts`; all outlive the call, and the kernel
        // only reads them.
        let rc = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc as usize)
        }
    }

    /// Sends from the front of `pkts`; the [`PortBackend::tx_burst`] contract.
    pub(crate) fn send(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        let mut taken = 0;
        loop {
            while pkts.pkts().first().is_some_and(|p| p.len() < MIN_FRAME) {
                pkts.drain_front(1);
                self.counters.tx_drops.runt += 1;
                taken += 1;
            }
            let n = pkts
                .pkts()
                .iter()
                .take(TX_BATCH)
                .take_while(|p| p.len() >= MIN_FRAME)
                .count();
            if n == 0 {
                break;
            }
            match self.send_batch(pkts, n) {
                Ok(0) => break,
                Ok(sent) => {
                    for p in pkts.drain_front(sent) {
                        self.counters.count_tx(p.len());
                    }
                    taken += sent;
                }
                Err(e) => {
                    let d = &mut self.counters.tx_drops;
                    match e.raw_os_error() {
                        Some(libc::EAGAIN) => break,
                        Some(libc::EINTR) => continue,
                        Some(libc::EMSGSIZE) => d.oversize += 1,
                        Some(libc::ENETDOWN) | Some(libc::ENXIO) => d.link_down += 1,
                        Some(libc::ENOBUFS) => d.queue_full += 1,
                        Some(libc::EBADF) | Some(libc::ENOTSOCK) => return Err(e),
                        _ => self.counters.tx_errors += 1,
                    }
                    pkts.drain_front(1);
                    taken += 1;
                }
            }
        }
        Ok(taken)
    }
}

/// A TX socket bound to `ifindex` with protocol 0, so it receives nothing.
fn open_tx_socket(ifindex: u32, qdisc_bypass: bool) -> io::Result<OwnedFd> {
    let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)?;
    if qdisc_bypass {
        // Older kernels lack it; sending through the qdisc still works.
        let _ = set_flag(&fd, libc::PACKET_QDISC_BYPASS, "PACKET_QDISC_BYPASS");
    }
    bind(&fd, ifindex, 0)?;
    Ok(fd)
}

impl Transmit for Sender {
    fn send(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        Sender::send(self, pkts)
    }

    fn link_state(&self, name: &str) -> LinkState {
        sys::link_state_of(self.fd.as_raw_fd(), name)
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// A second sender on the interface of AF_PACKET port `name` (either
/// backend), made by [`PortBackend::split_sender`]: its own TX socket.
pub(crate) fn split_sender(
    name: &str,
    ifindex: u32,
    qdisc_bypass: bool,
) -> io::Result<Option<Box<dyn PortBackend>>> {
    let tx = Sender::open(ifindex, qdisc_bypass)
        .map_err(|e| sys::context(e, format!("AF_PACKET port {name:?}: TX socket")))?;
    Ok(Some(Box::new(SendOnly::new(name, tx))))
}

/// Turns on the `SOL_PACKET` option `opt` (named `what` in an error) of
/// packet socket `fd`.
pub(crate) fn set_flag(fd: &OwnedFd, opt: libc::c_int, what: &str) -> io::Result<()> {
    sys::setsockopt(fd, libc::SOL_PACKET, opt, &(1 as libc::c_int))
        .map_err(|e| sys::context(e, what))
}

/// Makes packet socket `fd` see every frame on interface `ifname`
/// (`ifindex`), not only those addressed to it.
pub(crate) fn set_promiscuous(fd: &OwnedFd, ifname: &str, ifindex: u32) -> io::Result<()> {
    // SAFETY: packet_mreq is plain data; all-zero is valid.
    let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mreq.mr_ifindex = ifindex as libc::c_int;
    mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
    sys::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
        .map_err(|e| sys::context(e, format!("promiscuous mode on {ifname:?}")))
}

/// Binds packet socket `fd` to `ifindex` and `protocol`.
pub(crate) fn bind(fd: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    let addr = sys::sockaddr_ll(ifindex, protocol);
    // SAFETY: `addr` is a valid sockaddr_ll of the size passed.
    sys::cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map_err(|e| sys::context(e, "bind"))?;
    Ok(())
}

impl PortBackend for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        let mut got = 0;
        let n = self.ring.slots();
        // While the port has a standing backlog and more than two bursts
        // wait, frames stamped more than the bound's delay before the
        // newest frame waiting are stale: they sat behind the backlog. A
        // frame that only waited for the reader to wake is the newest
        // itself and goes through, and a backlog left by a stall of the
        // reader (off its CPU for a few milliseconds) or by a burst is not
        // standing: nothing of it is dropped. (Not the bound's packet
        // count: that is the reader's own drain rate, which in split mode
        // is the RX thread's, many times what the workers behind it
        // forward.) More than STALE_BACKLOG frames waiting are stale
        // either way.
        self.pass_early();
        let cutoff_ns = match self.max_age_ns {
            Some(delay_ns) => {
                let (waiting, newest) = self.ready_run();
                // More waits than this read takes: frames of sparse flows
                // further back go first, so a ping waits for no backlog.
                if waiting > out.room() {
                    got += self.lend_sparse_ahead(waiting, out);
                }
                let span = (waiting > 0).then(|| (self.ring.stamp_ns(self.next), newest));
                let overloaded = self.standing.visit(span, delay_ns);
                // A long backlog is one however it came: the kernel must
                // never fill the ring (it would drop pings with the rest),
                // and a ping behind it would wait for all of it.
                if (overloaded && waiting > crate::delay::MIN_BOUND_PACKETS)
                    || waiting > STALE_BACKLOG.min(n / 4)
                {
                    newest.saturating_sub(delay_ns)
                } else {
                    0
                }
            }
            None => 0,
        };
        while out.room() > 0 {
            self.pass_early();
            let slot = self.next;
            if !self.ring.ready(slot) {
                break; // the kernel has not filled it, or it is still lent
            }
            self.next = (slot + 1) % n;
            self.passed += 1;
            self.scanned = self.scanned.saturating_sub(1);
            // (`pass_early` passed every slot lent ahead: the kernel
            // cannot fill one again before that.)
            let seen = std::mem::replace(&mut self.ahead[slot], Ahead::No);
            debug_assert!(
                seen != Ahead::Lent,
                "slot {slot} read after it was lent ahead"
            );
            match self.take(slot, Take::InOrder { cutoff_ns, seen }) {
                Ok(pkt) => {
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += pkt.len() as u64;
                    let _ = out.push(pkt);
                    got += 1;
                }
                Err(skip) => {
                    self.ring.give_back(slot);
                    let d = &mut self.counters.rx_drops;
                    match skip {
                        Skip::Truncated => d.truncated += 1,
                        Skip::Stale => d.queue_delay += 1,
                        Skip::Malformed | Skip::Later(_) => d.malformed += 1,
                    }
                }
            }
        }
        Ok(got)
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        self.tx.send(pkts)
    }

    fn split_sender(&self) -> io::Result<Option<Box<dyn PortBackend>>> {
        split_sender(&self.name, self.ifindex, self.qdisc_bypass)
    }

    fn link_state(&self) -> LinkState {
        sys::link_state_of(self.tx.fd.as_raw_fd(), &self.name)
    }

    fn stats(&self) -> PortCounters {
        if let Ok(st) = sys::getsockopt::<TpacketStats>(
            self.ring.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
        ) {
            self.kernel_drops
                .set(self.kernel_drops.get() + u64::from(st.tp_drops));
        }
        let mut c = self.counters;
        c.rx_drops.ring_full = self.kernel_drops.get();
        let t = &self.tx.counters;
        (c.tx_packets, c.tx_bytes, c.tx_drops, c.tx_errors) =
            (t.tx_packets, t.tx_bytes, t.tx_drops, t.tx_errors);
        c
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.ring.fd.as_raw_fd())
    }

    fn set_rx_bound(&mut self, bound: Option<crate::delay::RxBound>) {
        self.max_age_ns = bound.map(|b| u64::try_from(b.delay.as_nanos()).unwrap_or(u64::MAX));
    }
}

/// `struct tpacket_stats` (TPACKET_V2) with a `Default`.
#[repr(C)]
#[derive(Default)]
struct TpacketStats {
    tp_packets: u32,
    tp_drops: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::Burst;
    use crate::testnet::{
        eventually, in_veth_ns, is_test_frame, rx_test_frames, test_frame, test_frame_id, NetNs,
        RawSocket, TEST_ETHERTYPE,
    };
    use std::time::{Duration, Instant};

    /// A port on `ifname` with a ring of `blocks` one-page blocks of two
    /// 2,048-byte slots.
    fn open_one_page_blocks(ifname: &str, blocks: usize) -> AfPacketPort {
        let cfg = AfPacketConfig {
            block_size: 4096,
            block_count: blocks,
            frame_size: 2048,
            ..AfPacketConfig::default()
        };
        AfPacketPort::open_with(ifname, &cfg).unwrap()
    }

    #[test]
    fn missing_interface_is_a_clear_error() {
        // Needs no root: the name lookup fails before any socket is opened.
        let err = AfPacketPort::open("nosuch-if0").err().expect("must fail");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("nosuch-if0"), "{err}");
    }

    #[test]
    fn bad_geometry_is_rejected_as_root() {
        in_veth_ns("afp-geom", "ga", "gb", || {
            let cfg = AfPacketConfig {
                block_size: 1000,
                ..AfPacketConfig::default()
            };
            let err = AfPacketPort::open_with("ga", &cfg)
                .err()
                .expect("must fail");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains("ga"), "{err}");
        });
    }

    #[test]
    fn port_sends_to_peer_as_root() {
        in_veth_ns("afp-tx", "txa", "txb", || {
            let mut port = AfPacketPort::open("txa").unwrap();
            assert_eq!(port.link_state(), LinkState::Up);
            let peer = RawSocket::bind("txb");
            let mut b = Burst::with_limit(100);
            for seq in 0..100u32 {
                b.push(PacketBuf::from_slice(&test_frame(
                    1,
                    seq,
                    60 + seq as usize,
                )))
                .unwrap();
            }
            // A runt is dropped and counted, not sent.
            let mut runt = Burst::new();
            runt.push(PacketBuf::from_slice(&[1, 2, 3])).unwrap();
            assert_eq!(port.tx_burst(&mut runt).unwrap(), 1);
            let mut sent = 0;
            let deadline = Instant::now() + Duration::from_secs(5);
            while !b.is_empty() && Instant::now() < deadline {
                sent += port.tx_burst(&mut b).unwrap();
            }
            assert_eq!(sent, 100);
            let got = peer.recv_matching(TEST_ETHERTYPE, 100, Duration::from_secs(5));
            assert_eq!(got.len(), 100);
            for (seq, f) in got.iter().enumerate() {
                assert_eq!(f, &test_frame(1, seq as u32, 60 + seq), "frame {seq}");
            }
            let c = port.stats();
            assert_eq!(c.tx_packets, 100);
            assert_eq!(c.tx_bytes, (0..100).map(|s| 60 + s as u64).sum::<u64>());
            assert_eq!(c.tx_drops.runt, 1);
            assert_eq!(c.tx_dropped(), 1);
            // Our own transmissions are not received back (PACKET_IGNORE_OUTGOING).
            assert!(rx_test_frames(&mut port, 1, Duration::from_millis(100)).is_empty());
        });
    }

    #[test]
    fn port_receives_from_peer_zero_copy_as_root() {
        in_veth_ns("afp-rx", "rxa", "rxb", || {
            let mut port = AfPacketPort::open("rxa").unwrap();
            let peer = RawSocket::bind("rxb");
            for seq in 0..200u32 {
                peer.send(&test_frame(2, seq, 64 + (seq as usize % 1400)));
            }
            let got = rx_test_frames(&mut port, 200, Duration::from_secs(5));
            assert_eq!(got.len(), 200);
            for (seq, p) in got.iter().enumerate() {
                assert!(p.is_lent(), "RX frames are lent from the ring");
                assert!(p.headroom() >= 64, "headroom {}", p.headroom());
                assert_eq!(
                    p.data(),
                    &test_frame(2, seq as u32, 64 + seq % 1400)[..],
                    "frame {seq}"
                );
                assert_eq!(p.meta.wire_len as usize, p.len());
                assert!(p.meta.timestamp_ns() > 0);
            }
            let c = port.stats();
            assert!(c.rx_packets >= 200);
            assert_eq!(c.rx_dropped(), 0);
        });
    }

    #[test]
    fn frames_older_than_the_bound_are_dropped_by_name_as_root() {
        in_veth_ns("afp-age", "aga", "agb", || {
            let mut port = AfPacketPort::open("aga").unwrap();
            let peer = RawSocket::bind("agb");
            // Fresh frames go through under the bound.
            port.set_rx_bound(Some(crate::delay::RxBound {
                packets: 64,
                delay: Duration::from_secs(60),
            }));
            pass_through(&mut port, &peer, 2, 10);
            port.set_rx_bound(Some(crate::delay::RxBound {
                packets: 10,
                delay: Duration::from_millis(1),
            }));
            // A few frames (fewer than two bursts) that waited out a stall
            // of the reader all go through, however old.
            for seq in 0..10u32 {
                peer.send(&test_frame(2, seq, 64));
            }
            std::thread::sleep(Duration::from_millis(50));
            peer.send(&test_frame(2, 10, 64));
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(
                rx_test_frames(&mut port, 11, Duration::from_secs(5)).len(),
                11
            );
            assert_eq!(port.stats().rx_drops.queue_delay, 0);
            // A standing backlog of frames that waited longer than the
            // bound is not lent: the bound is 1 ms and they wait at least
            // 50 ms. (Standing: as if its smallest span over a window had
            // been above half the bound; `Standing` is tested alone.)
            pin_standing(&mut port);
            for seq in 0..100u32 {
                peer.send(&test_frame(2, seq, 64));
            }
            // A frame 50 ms younger behind them: the 100 waited behind a
            // backlog longer than the bound (ages count from the newest
            // frame waiting, not from the read).
            wait_waiting(&port, 100);
            std::thread::sleep(Duration::from_millis(50));
            peer.send(&test_frame(2, 100, 64));
            wait_waiting(&port, 101);
            let mut burst = Burst::with_limit(64);
            let mut lent = 0;
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while port.stats().rx_drops.queue_delay < 100 && std::time::Instant::now() < deadline {
                burst.clear();
                port.rx_burst(&mut burst).unwrap();
                // (Frames the host itself sends on the link may arrive fresh.)
                lent += burst
                    .iter()
                    .filter(|p| is_test_frame(p.data()))
                    .filter(|p| test_frame_id(p.data()).is_some_and(|(_, seq)| seq < 100))
                    .count();
            }
            let c = port.stats();
            assert_eq!(lent, 0, "{c:?}");
            assert!(c.rx_drops.queue_delay >= 100, "{c:?}");
            assert_eq!(c.rx_drops.ring_full, 0, "{c:?}");
        });
    }

    #[test]
    fn a_sparse_frame_is_read_ahead_of_the_backlog_in_front_of_it_as_root() {
        in_veth_ns("afp-ahead", "aha", "ahb", || {
            let mut port = AfPacketPort::open("aha").unwrap();
            let peer = RawSocket::bind("ahb");
            // A bound long enough that nothing here is stale.
            port.set_rx_bound(Some(crate::delay::RxBound {
                packets: 10,
                delay: Duration::from_secs(60),
            }));
            // A flood (source 7) the meter has seen plenty of...
            pass_through(&mut port, &peer, 7, 100);
            // ...then 300 of its frames waiting, a ping (source 8) behind
            // them, and 20 more of the flood behind the ping.
            for seq in 0..300u32 {
                peer.send(&test_frame(7, 1000 + seq, 64));
            }
            peer.send(&test_frame(8, 1, 64));
            for seq in 300..320u32 {
                peer.send(&test_frame(7, 1000 + seq, 64));
            }
            // A second ping of the same light flow further back: it must
            // not overtake the first (it is lent ahead too, after it).
            peer.send(&test_frame(8, 2, 64));
            wait_waiting(&port, 322);
            let mut burst = Burst::with_limit(32);
            let mut got: Vec<(u8, u32)> = Vec::new();
            let mut first_burst = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(5);
            while got.iter().filter(|f| f.0 == 7).count() < 320 && Instant::now() < deadline {
                burst.clear();
                port.rx_burst(&mut burst).unwrap();
                let ids: Vec<(u8, u32)> = burst
                    .iter()
                    .filter(|p| is_test_frame(p.data()))
                    .filter_map(|p| test_frame_id(p.data()))
                    .collect();
                if first_burst.is_empty() {
                    first_burst = ids.clone();
                }
                got.extend(ids);
            }
            let c = port.stats();
            // The pings came first, in their order, with the first burst.
            assert_eq!(first_burst.get(..2), Some(&[(8, 1), (8, 2)][..]), "{c:?}");
            // Nothing lost, and the flood in its order.
            let flood: Vec<u32> = got.iter().filter(|f| f.0 == 7).map(|f| f.1).collect();
            assert_eq!(flood, (1000..1320).collect::<Vec<u32>>(), "{c:?}");
            assert_eq!(got.iter().filter(|f| f.0 == 8).count(), 2);
            assert_eq!(c.rx_drops, crate::port::RxDrops::default(), "{c:?}");
            // The slots lent ahead were passed over, not read twice: more
            // of the flood still goes through.
            pass_through(&mut port, &peer, 7, 10);
        });
    }

    /// A frame lent ahead and dropped before the reader passes its slot
    /// must not give the slot back: in a full ring the kernel's head waits
    /// right behind the reader and would fill that hole out of turn, so
    /// the reader would read a newer frame before older ones (and then
    /// wait at an empty slot while the kernel fills others: a saturated
    /// port once forwarded 9 kpps instead of 440 that way).
    #[test]
    fn a_slot_lent_ahead_is_refilled_only_after_the_reader_passes_it_as_root() {
        in_veth_ns("afp-hole", "hla", "hlb", || {
            // No IPv6 neighbour discovery in this tiny ring.
            for dev in ["hla", "hlb"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
            }
            // 4 slots.
            let mut port = open_one_page_blocks("hla", 2);
            let peer = RawSocket::bind("hlb");
            port.set_rx_bound(Some(crate::delay::RxBound {
                packets: 10,
                delay: Duration::from_secs(60),
            }));
            // One frame at a time: the meter learns that source 7 floods.
            let mut seq = 0u32;
            for _ in 0..100 {
                peer.send(&test_frame(7, seq, 64));
                seq += 1;
                assert_eq!(
                    rx_test_frames(&mut port, 1, Duration::from_secs(5)).len(),
                    1
                );
            }
            let mut order: Vec<(u8, u32)> = Vec::new();
            let read = |port: &mut AfPacketPort, limit: usize, order: &mut Vec<(u8, u32)>| {
                let mut b = Burst::with_limit(limit);
                port.rx_burst(&mut b).unwrap();
                order.extend(
                    b.iter()
                        .filter(|p| is_test_frame(p.data()))
                        .filter_map(|p| test_frame_id(p.data())),
                );
                // The burst drops here: every slot it lent is released.
            };
            // The ring full: two of the flood, a ping, one more of the flood.
            for f in [
                test_frame(7, seq, 64),
                test_frame(7, seq + 1, 64),
                test_frame(8, 1, 64),
                test_frame(7, seq + 2, 64),
            ] {
                peer.send(&f);
            }
            seq += 3;
            wait_waiting(&port, 4);
            // The ping is lent ahead of the two in front of it, and dropped.
            read(&mut port, 1, &mut order);
            assert_eq!(order, [(8, 1)]);
            // Read one at a time, send one more each time: the kernel's head
            // follows the reader round the ring and reaches the ping's slot
            // before the reader does.
            let sent_after = seq;
            for _ in 0..6 {
                read(&mut port, 1, &mut order);
                for _ in 0..2 {
                    let (waiting, drops) = (port.ready_run().0, port.stats().rx_drops.ring_full);
                    peer.send(&test_frame(7, seq, 64));
                    seq += 1;
                    // Landed, or dropped by the kernel (the next slot is
                    // not its own yet): either way it has arrived.
                    eventually(Duration::from_secs(5), || {
                        port.ready_run().0 > waiting || port.stats().rx_drops.ring_full > drops
                    });
                }
            }
            // What is left, then more one at a time: nothing stalls.
            for _ in 0..8 {
                read(&mut port, 4, &mut order);
            }
            for _ in 0..20 {
                peer.send(&test_frame(7, seq, 64));
                seq += 1;
                let want = order.len() + 1;
                eventually(Duration::from_secs(5), || {
                    read(&mut port, 4, &mut order);
                    order.len() >= want
                });
                assert_eq!(order.len(), want, "the reader stalled: {order:?}");
            }
            // The flood's frames came in the order they were sent.
            let flood: Vec<u32> = order.iter().filter(|f| f.0 == 7).map(|f| f.1).collect();
            assert!(
                flood.windows(2).all(|w| w[0] < w[1]),
                "out of order: {flood:?}"
            );
            assert!(flood.iter().any(|&s| s >= sent_after), "{flood:?}");
        });
    }

    #[test]
    fn a_long_backlog_is_stale_even_when_not_standing_as_root() {
        in_veth_ns("afp-long", "lga", "lgb", || {
            let mut port = AfPacketPort::open("lga").unwrap();
            let peer = RawSocket::bind("lgb");
            port.set_rx_bound(Some(crate::delay::RxBound {
                packets: 10,
                delay: Duration::from_millis(1),
            }));
            // More than STALE_BACKLOG frames wait (a flood across a stall
            // of the reader), then one 50 ms younger: the backlog is not
            // standing (no visits yet), but its long tail is stale all
            // the same, and the deep ring held it all.
            let n = STALE_BACKLOG as u32 + 1000;
            for seq in 0..n {
                peer.send(&test_frame(4, seq, 64));
            }
            wait_waiting(&port, n as usize);
            std::thread::sleep(Duration::from_millis(50));
            peer.send(&test_frame(4, n, 64));
            wait_waiting(&port, n as usize + 1);
            let mut burst = Burst::with_limit(64);
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(5);
            while !got.contains(&n) && Instant::now() < deadline {
                burst.clear();
                port.rx_burst(&mut burst).unwrap();
                got.extend(
                    burst
                        .iter()
                        .filter(|p| is_test_frame(p.data()))
                        .filter_map(|p| test_frame_id(p.data()).map(|(_, seq)| seq)),
                );
            }
            let c = port.stats();
            assert!(got.contains(&n), "the fresh frame: {c:?}");
            assert!(
                c.rx_drops.queue_delay >= u64::from(n) - STALE_BACKLOG as u64,
                "{} lent, {c:?}",
                got.len()
            );
            assert_eq!(c.rx_drops.ring_full, 0, "{c:?}");
        });
    }

    #[test]
    fn lent_frames_hold_their_slots_until_dropped_as_root() {
        in_veth_ns("afp-hold", "ha", "hb", || {
            // A tiny ring: 2 blocks of one page (4 slots), so held frames
            // starve it.
            let mut port = open_one_page_blocks("ha", 2);
            let peer = RawSocket::bind("hb");
            let mut held = Vec::new();
            let mut seq = 0u32;
            // Send in small steps so each lands; keep every frame.
            let deadline = Instant::now() + Duration::from_secs(5);
            while held.len() < 2 && Instant::now() < deadline {
                peer.send(&test_frame(3, seq, 1000));
                seq += 1;
                held.extend(rx_test_frames(&mut port, 1, Duration::from_millis(50)));
            }
            assert!(held.len() >= 2, "received {}", held.len());
            // With all blocks held, more frames are dropped by the kernel.
            for _ in 0..20 {
                peer.send(&test_frame(3, seq, 1000));
                seq += 1;
            }
            // Waited for, not slept on: a loaded machine may defer the
            // delivery (softirq) past a fixed 20 ms.
            eventually(Duration::from_secs(5), || {
                port.stats().rx_drops.ring_full > 0
            });
            let drops_while_held = port.stats().rx_drops.ring_full;
            assert!(
                drops_while_held > 0,
                "kernel should drop while the ring is held"
            );
            // Rewrite a held frame in place, then release all: RX resumes.
            held[0].data_mut()[0] = 0x55;
            assert_eq!(held[0].data()[0], 0x55);
            held.clear();
            peer.send(&test_frame(3, 9999, 100));
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(5);
            while !got
                .iter()
                .any(|p: &PacketBuf| p.data() == &test_frame(3, 9999, 100)[..])
                && Instant::now() < deadline
            {
                // Read and let go (as the 1 s read of 30 frames this
                // replaces did not), so that the tiny ring keeps room.
                got = rx_test_frames(&mut port, 1, Duration::from_millis(100));
            }
            assert!(
                got.iter()
                    .any(|p| p.data() == &test_frame(3, 9999, 100)[..]),
                "RX must resume once frames are released ({} frames after release)",
                got.len()
            );
        });
    }

    #[test]
    fn frames_cross_threads_and_outlive_the_port_as_root() {
        in_veth_ns("afp-xthr", "xa", "xb", || {
            let mut port = AfPacketPort::open("xa").unwrap();
            let peer = RawSocket::bind("xb");
            for seq in 0..10 {
                peer.send(&test_frame(4, seq, 80));
            }
            let got = rx_test_frames(&mut port, 10, Duration::from_secs(5));
            assert_eq!(got.len(), 10);
            drop(port);
            // The ring stays mapped while frames live, on any thread.
            let seqs = std::thread::spawn(move || {
                got.iter()
                    .filter_map(|p| test_frame_id(p.data()).map(|(_, seq)| seq))
                    .collect::<Vec<_>>()
            })
            .join()
            .unwrap();
            assert_eq!(seqs, (0..10).collect::<Vec<_>>());
        });
    }

    #[test]
    fn split_sender_sends_while_port_receives_as_root() {
        in_veth_ns("afp-split", "spa", "spb", || {
            let mut port = AfPacketPort::open("spa").unwrap();
            let mut sender = port.split_sender().unwrap().expect("AF_PACKET can split");
            let peer = RawSocket::bind("spb");
            std::thread::scope(|s| {
                s.spawn(move || {
                    let mut b = Burst::with_limit(100);
                    for seq in 0..100 {
                        b.push(PacketBuf::from_slice(&test_frame(12, seq, 64)))
                            .unwrap();
                    }
                    while !b.is_empty() {
                        sender.tx_burst(&mut b).unwrap();
                    }
                    assert_eq!(sender.stats().tx_packets, 100);
                    assert_eq!(sender.rx_burst(&mut Burst::new()).unwrap(), 0);
                });
                for seq in 0..100 {
                    peer.send(&test_frame(13, seq, 64));
                }
                let got = rx_test_frames(&mut port, 100, Duration::from_secs(5));
                assert_eq!(got.len(), 100);
                assert!(
                    got.iter().all(|p| p.data()[11] == 13),
                    "only the peer's frames come back"
                );
            });
            let sent = peer.recv_matching(TEST_ETHERTYPE, 100, Duration::from_secs(5));
            assert_eq!(
                sent,
                (0..100).map(|s| test_frame(12, s, 64)).collect::<Vec<_>>()
            );
            assert_eq!(port.stats().tx_packets, 0, "the sender counts its own");
        });
    }

    #[test]
    fn oversize_and_truncated_frames_are_counted_as_root() {
        let Some(ns) = NetNs::for_test("afp-size") else {
            return;
        };
        ns.veth("ova", "ovb");
        ns.exec(&["ip", "link", "set", "ova", "mtu", "9000"]);
        ns.exec(&["ip", "link", "set", "ovb", "mtu", "9000"]);
        ns.run(|| {
            // 2,048-byte slots: a 6000-byte frame cannot fit and arrives truncated.
            let mut port = open_one_page_blocks("ova", 4);
            let peer = RawSocket::bind("ovb");
            peer.send(&test_frame(14, 1, 6000));
            peer.send(&test_frame(14, 2, 100));
            let got = rx_test_frames(&mut port, 1, Duration::from_secs(5));
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].data(), &test_frame(14, 2, 100)[..]);
            assert_eq!(port.stats().rx_drops.truncated, 1);
            // Larger than the 9000-byte MTU: refused and counted.
            let mut b = Burst::new();
            b.push(PacketBuf::from_slice(&test_frame(15, 1, 9100)))
                .unwrap();
            b.push(PacketBuf::from_slice(&test_frame(15, 2, 100)))
                .unwrap();
            assert_eq!(port.tx_burst(&mut b).unwrap(), 2);
            let c = port.stats();
            assert_eq!((c.tx_packets, c.tx_drops.oversize), (1, 1), "{c:?}");
            let got = peer.recv_matching(TEST_ETHERTYPE, 2, Duration::from_millis(300));
            assert_eq!(got, vec![test_frame(15, 2, 100)]);
        });
    }

    #[test]
    fn forward_between_two_ports_as_root() {
        // peer1 -> [a1 port] -> forward -> [a2 port] -> peer2, frames lent
        // from one ring and sent out of the other without a user-space copy.
        let Some(ns) = NetNs::for_test("afp-fwd") else {
            return;
        };
        ns.veth("fa1", "fb1");
        ns.veth("fa2", "fb2");
        ns.run(|| {
            let mut p1 = AfPacketPort::open("fa1").unwrap();
            let mut p2 = AfPacketPort::open("fa2").unwrap();
            let src = RawSocket::bind("fb1");
            let dst = RawSocket::bind("fb2");
            for seq in 0..50 {
                src.send(&test_frame(5, seq, 128));
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut b = Burst::new();
            let mut forwarded = 0;
            while forwarded < 50 && Instant::now() < deadline {
                p1.rx_burst(&mut b).unwrap();
                b.pkts_mut().iter_mut().for_each(|p| p.data_mut()[11] = 6); // rewrite src MAC in place
                let mut keep = Burst::new();
                for p in b.drain() {
                    if is_test_frame(p.data()) {
                        let _ = keep.push(p);
                    }
                }
                while !keep.is_empty() {
                    forwarded += p2.tx_burst(&mut keep).unwrap();
                }
            }
            let got = dst.recv_matching(TEST_ETHERTYPE, 50, Duration::from_secs(5));
            assert_eq!(got.len(), 50);
            for (seq, f) in got.iter().enumerate() {
                let mut want = test_frame(5, seq as u32, 128);
                want[11] = 6;
                assert_eq!(f, &want);
            }
            assert_eq!(p2.stats().tx_packets, 50);
        });
    }

    /// Sends `n` test frames from source `src` and reads all of them.
    fn pass_through(port: &mut AfPacketPort, peer: &RawSocket, src: u8, n: u32) {
        for seq in 0..n {
            peer.send(&test_frame(src, seq, 64));
        }
        let got = rx_test_frames(port, n as usize, Duration::from_secs(5));
        assert_eq!(got.len(), n as usize);
    }

    /// Waits (5 s at most) until at least `n` frames wait in `port`'s
    /// ring, so that what a test sent has arrived before it reads (and an
    /// age gap it sleeps for starts from the arrival, not the send).
    fn wait_waiting(port: &AfPacketPort, n: usize) {
        eventually(Duration::from_secs(5), || port.ready_run().0 >= n);
    }

    /// Makes `port` treat its backlog as standing from now on.
    fn pin_standing(port: &mut AfPacketPort) {
        port.standing = Standing {
            overloaded: true,
            since_ns: u64::MAX, // the window never ends
            min_span_ns: u64::MAX,
        };
    }

    #[test]
    fn only_a_standing_backlog_is_overloaded() {
        let ms = 1_000_000u64;
        let delay = ms / 10; // 100 µs
        let mut s = Standing::default();
        // A window of small backlogs with one 3 ms spike (a stall): the
        // next window drops nothing.
        let mut t = 0;
        s.visit(Some((t, t)), delay);
        for i in 0..200u64 {
            t += ms / 10;
            let span = if i == 50 { 3 * ms } else { 10_000 };
            s.visit(Some((t - span, t)), delay);
        }
        assert!(!s.overloaded);
        // Backlogs that never fall under half the bound for a window: the
        // age drop applies.
        for _ in 0..200u64 {
            t += ms / 10;
            assert_eq!(s.visit(Some((t - 2 * delay, t)), delay), s.overloaded);
        }
        assert!(s.overloaded);
        // An empty visit ends it at the next window.
        s.visit(None, delay);
        for _ in 0..200u64 {
            t += ms / 10;
            s.visit(Some((t - 2 * delay, t)), delay);
            if !s.overloaded {
                break;
            }
        }
        assert!(!s.overloaded);
    }

    #[test]
    fn slots_fit_the_mtu() {
        assert_eq!(frame_size_for(1500, 64), 2048);
        assert_eq!(frame_size_for(1, 0), 2048);
        assert_eq!(frame_size_for(9000, 64), 16384);
        // Header, reserve, MTU and two tags fit in what is lent after the
        // slot header.
        for mtu in [1500, 1950, 4000, 9000, 65535] {
            let f = frame_size_for(mtu, 64);
            assert!(f >= frame::NET_OFFSET + 64 + mtu + 8, "mtu {mtu}: {f}");
        }
    }

    #[test]
    fn jumbo_frames_fit_slots_sized_from_the_mtu_as_root() {
        let Some(ns) = NetNs::for_test("afp-mtu") else {
            return;
        };
        ns.veth("jma", "jmb");
        ns.exec(&["ip", "link", "set", "jma", "mtu", "9000"]);
        ns.exec(&["ip", "link", "set", "jmb", "mtu", "9000"]);
        ns.run(|| {
            let mut port = AfPacketPort::open("jma").unwrap();
            let peer = RawSocket::bind("jmb");
            peer.send(&test_frame(16, 1, 9000));
            let got = rx_test_frames(&mut port, 1, Duration::from_secs(5));
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].data(), &test_frame(16, 1, 9000)[..]);
            assert_eq!(port.stats().rx_drops.truncated, 0);
        });
    }

    #[test]
    fn a_sparse_frame_among_stale_ones_is_kept_as_root() {
        in_veth_ns("afp-sparse", "spsa", "spsb", || {
            let mut port = AfPacketPort::open("spsa").unwrap();
            let peer = RawSocket::bind("spsb");
            port.set_rx_bound(Some(crate::delay::RxBound {
                packets: 10,
                delay: Duration::from_millis(1),
            }));
            // A flood (source 7) the meter has seen plenty of...
            pass_through(&mut port, &peer, 7, 100);
            pin_standing(&mut port);
            // ...then a standing backlog of it with one frame of a new flow (source
            // 8, the ping) in the middle, all of which wait 50 ms behind a
            // newer frame.
            for seq in 0..100u32 {
                peer.send(&test_frame(7, 1000 + seq, 64));
                if seq == 50 {
                    peer.send(&test_frame(8, 1, 64));
                }
            }
            wait_waiting(&port, 101);
            std::thread::sleep(Duration::from_millis(50));
            peer.send(&test_frame(7, 2000, 64));
            wait_waiting(&port, 102);
            let got = rx_test_frames(&mut port, 2, Duration::from_secs(5));
            let srcs: Vec<(u8, u32)> = got.iter().filter_map(|p| test_frame_id(p.data())).collect();
            assert_eq!(srcs, vec![(8, 1), (7, 2000)], "{:?}", port.stats());
            assert!(
                port.stats().rx_drops.queue_delay >= 100,
                "{:?}",
                port.stats()
            );
        });
    }
}
