//! The AF_PACKET backend: a port on a Linux network interface, receiving
//! through a TPACKET_V3 mmap ring and sending with `sendmmsg`.
//!
//! # Receive: TPACKET_V3 ring, frames lent without copying
//!
//! The RX socket shares a ring of `block_count` blocks of `block_size` bytes
//! with the kernel. The kernel fills a block with frames and hands the whole
//! block over by setting `TP_STATUS_USER` in its descriptor (or when
//! `block_timeout_ms` passes with the block partly filled). The port walks
//! blocks in ring order and lends each frame as a [`PacketBuf`] pointing
//! straight into the ring (see `port` for lent buffers). A block goes back to
//! the kernel (`TP_STATUS_KERNEL`) when its last lent frame is dropped: each
//! block has a count of outstanding holds (one per lent frame plus one for
//! the reader while it walks the block), and whoever drops the count to zero
//! returns the block. A per-block `lent` flag, cleared only after the status
//! store, stops the reader from re-reading a block whose frames from the
//! previous lap are still held.
//!
//! The region lent with a frame runs from its `tpacket3_hdr` to the next
//! frame's header (or the end of the block), so the dead ring header plus
//! `PACKET_RESERVE` bytes are the frame's headroom and pushes are in place.
//!
//! While frames are held their block cannot be refilled; if the holders are
//! slow the kernel runs out of blocks and drops, which the port reports as
//! `rx_drops.ring_full` (from `PACKET_STATISTICS`). Frames larger than the
//! ring's frame limit arrive truncated; the port drops them and counts
//! `rx_drops.truncated`.
//!
//! A mapped ring cannot shrink, so under a time bound ([`crate::delay`],
//! set by the reading thread through [`PortBackend::set_rx_bound`]) the
//! reader drops by age instead (head drop): ages are measured against the
//! newest frame waiting in the ring (the newest `ts_last_pkt` of the
//! blocks ready to read), so a frame that only waited for the reader to
//! wake or for its block to be retired is never stale. A block whose
//! newest frame is older than that by more than the bound goes back to
//! the kernel unread, and such a frame in a younger block is skipped;
//! both count as `rx_drops.queue_delay`.
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
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use crate::port::{
    BufferLender, LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, SendOnly, Transmit,
    TxBurst,
};
use crate::sys;

/// Smallest frame the port sends (an Ethernet header).
const MIN_FRAME: usize = 14;

/// `enum tpacket_versions`: TPACKET_V3.
const TPACKET_V3: libc::c_int = 2;

/// Most packets handed to one `sendmmsg` call.
const TX_BATCH: usize = 64;

/// Byte offsets inside `struct tpacket_block_desc` (version, offset_to_priv,
/// then `struct tpacket_hdr_v1`).
mod block {
    pub const STATUS: usize = 8;
    pub const NUM_PKTS: usize = 12;
    pub const FIRST_PKT: usize = 16;
    /// `ts_last_pkt`: seconds, then nanoseconds.
    pub const TS_LAST_SEC: usize = 40;
    pub const TS_LAST_NSEC: usize = 44;
    /// Size of the descriptor; frames start after it, so a lent frame never
    /// overlaps the status word the release path writes.
    pub const HDR_LEN: usize = 48;
}

/// Byte offsets inside `struct tpacket3_hdr`.
mod frame {
    pub const NEXT_OFFSET: usize = 0;
    pub const SEC: usize = 4;
    pub const NSEC: usize = 8;
    pub const SNAPLEN: usize = 12;
    pub const LEN: usize = 16;
    pub const MAC: usize = 24;
    /// `tp_status`.
    pub const STATUS: usize = 20;
    /// `hv1.tp_vlan_tci` and `hv1.tp_vlan_tpid`.
    pub const VLAN_TCI: usize = 32;
    /// See `VLAN_TCI`.
    pub const VLAN_TPID: usize = 36;
    /// `TP_STATUS_VLAN_VALID`, `TP_STATUS_VLAN_TPID_VALID`.
    pub const STATUS_VLAN_VALID: u32 = 1 << 4;
    /// See `STATUS_VLAN_VALID`.
    pub const STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
    /// Header bytes the reader needs before trusting the fields above.
    pub const MIN_HDR: usize = 40;
}

/// Ring and socket options for an [`AfPacketPort`].
#[derive(Clone, Debug)]
pub struct AfPacketConfig {
    /// Bytes per ring block; a multiple of the page size (default 256 KiB).
    pub block_size: usize,
    /// Number of blocks (default 32, so 8 MiB of ring).
    pub block_count: usize,
    /// Nominal frame size used to size the ring (default 2048).
    pub frame_size: usize,
    /// How long the kernel keeps a partly filled block before handing it
    /// over, in milliseconds; bounds the added latency at low rates
    /// (default 1).
    pub block_timeout_ms: u32,
    /// Extra headroom in front of every received frame (`PACKET_RESERVE`,
    /// default 64); the ring header already gives about 80 bytes.
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
            block_count: 32,
            frame_size: 2048,
            block_timeout_ms: 1,
            reserve: 64,
            promiscuous: true,
            qdisc_bypass: true,
        }
    }
}

/// The mmap'ed RX ring, shared by the port and every frame it lent.
struct RxRing {
    base: NonNull<u8>,
    map_len: usize,
    block_size: usize,
    /// Outstanding holds per block: lent frames plus the reader's own.
    holds: Box<[AtomicU32]>,
    /// True from when the reader takes a block until it is back with the
    /// kernel; set only by the reader, cleared only by the last releaser.
    lent: Box<[AtomicBool]>,
    /// The RX socket; closed after the ring is unmapped.
    fd: OwnedFd,
}

// SAFETY: `base` points at a shared mapping that lives as long as the RxRing;
// all cross-thread access to ring state goes through the atomics (block status
// words are accessed as AtomicU32), and frame regions are touched only by the
// one PacketBuf they were lent to.
unsafe impl Send for RxRing {}
// SAFETY: as above.
unsafe impl Sync for RxRing {}

impl RxRing {
    /// The status word of block `blk`, shared with the kernel.
    fn status(&self, blk: usize) -> &AtomicU32 {
        // SAFETY: blk < block_count (callers index within the ring), the
        // status word is 4-byte aligned inside a page-aligned block, and the
        // mapping outlives &self. The kernel writes it too; treating it as an
        // atomic is how the packet_mmap protocol is meant to be used.
        unsafe {
            AtomicU32::from_ptr(
                self.base
                    .as_ptr()
                    .add(blk * self.block_size + block::STATUS) as *mut u32,
            )
        }
    }

    /// Reads a u32 at `off` within block `blk`, or `None` if it would leave
    /// the block.
    /// The block's `ts_last_pkt` in ns (0 if unreadable).
    fn newest_ns(&self, blk: usize) -> u64 {
        u64::from(self.read::<u32>(blk, block::TS_LAST_SEC).unwrap_or(0)) * 1_000_000_000
            + u64::from(self.read::<u32>(blk, block::TS_LAST_NSEC).unwrap_or(0))
    }

    /// A `T` (`u16` or `u32`) at `off` in block `blk`, if in bounds.
    fn read<T: Copy>(&self, blk: usize, off: usize) -> Option<T> {
        if off.checked_add(std::mem::size_of::<T>())? > self.block_size {
            return None;
        }
        // SAFETY: in bounds of block `blk` (checked above); the block is owned
        // by user space (status USER, observed with Acquire) so the kernel is
        // not writing it; unaligned read because kernel data is not trusted;
        // `T` is one of the plain integers the callers name.
        Some(unsafe {
            std::ptr::read_unaligned(self.base.as_ptr().add(blk * self.block_size + off) as *const T)
        })
    }
}

impl BufferLender for RxRing {
    fn release(&self, token: usize) {
        let (Some(holds), Some(lent)) = (self.holds.get(token), self.lent.get(token)) else {
            return;
        };
        if holds.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Last hold: give the block back, then let the reader take it again.
            self.status(token)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            lent.store(false, Ordering::Release);
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

/// Where the reader is in the ring.
#[derive(Default)]
struct Reader {
    block: usize,
    in_block: bool,
    pkts_left: u32,
    offset: usize,
}

/// A port on a network interface through AF_PACKET.
pub struct AfPacketPort {
    name: String,
    ring: Arc<RxRing>,
    reader: Reader,
    tx: Sender,
    ifindex: u32,
    qdisc_bypass: bool,
    counters: PortCounters,
    /// Kernel drop count accumulated from PACKET_STATISTICS (which resets on read).
    kernel_drops: Cell<u64>,
    /// The oldest a frame may be when read, if bounded.
    max_age: Option<std::time::Duration>,
}

/// Why a frame was not lent.
enum Skip {
    /// Longer than the ring's frame limit.
    Truncated,
    /// Older than the time bound.
    Stale,
}

/// The realtime clock in nanoseconds (the kernel's frame timestamps).
impl AfPacketPort {
    /// The kernel's timestamp (realtime, ns) of the newest frame handed
    /// to user space and not yet read: the newest of the blocks ready
    /// from the reader's on (the block being read included).
    fn newest_ready_ns(&self) -> u64 {
        let blocks = self.ring.holds.len();
        let mut newest = 0;
        for i in 0..blocks {
            let b = (self.reader.block + i) % blocks;
            if !(i == 0 && self.reader.in_block) {
                match self.ring.lent.get(b) {
                    Some(lent) if !lent.load(Ordering::Acquire) => {}
                    _ => break,
                }
                if self.ring.status(b).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                    break;
                }
            }
            newest = newest.max(self.ring.newest_ns(b));
        }
        newest
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
        Ok(AfPacketPort {
            name: ifname.to_string(),
            ring: Arc::new(ring),
            reader: Reader::default(),
            tx: Sender::new(tx),
            ifindex,
            qdisc_bypass: cfg.qdisc_bypass,
            counters: PortCounters::default(),
            kernel_drops: Cell::new(0),
            max_age: None,
        })
    }

    fn open_rx(ifname: &str, ifindex: u32, cfg: &AfPacketConfig) -> io::Result<RxRing> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        if cfg.block_size == 0
            || !cfg.block_size.is_multiple_of(page)
            || cfg.frame_size < 64
            || !cfg.frame_size.is_multiple_of(16)
            || !cfg.block_size.is_multiple_of(cfg.frame_size)
            || cfg.block_count == 0
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "bad ring geometry: block_size {} must be a multiple of the page size {page} and of frame_size {} (a multiple of 16, at least 64), block_count {} > 0",
                    cfg.block_size, cfg.frame_size, cfg.block_count
                ),
            ));
        }
        let map_len = cfg
            .block_size
            .checked_mul(cfg.block_count)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring size overflows"))?;
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)?;
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3)
            .map_err(|e| sys::context(e, "PACKET_VERSION TPACKET_V3"))?;
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RESERVE, &cfg.reserve)
            .map_err(|e| sys::context(e, "PACKET_RESERVE"))?;
        set_flag(&fd, libc::PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING")?;
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size as u32,
            tp_block_nr: cfg.block_count as u32,
            tp_frame_size: cfg.frame_size as u32,
            tp_frame_nr: (cfg.block_size / cfg.frame_size * cfg.block_count) as u32,
            tp_retire_blk_tov: cfg.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
            .map_err(|e| sys::context(e, "PACKET_RX_RING"))?;
        // SAFETY: mapping the ring the kernel just allocated for this socket,
        // at a kernel-chosen address, of exactly its size.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        let base = if base == libc::MAP_FAILED {
            // MAP_LOCKED can fail under a small RLIMIT_MEMLOCK; retry without.
            // SAFETY: as above.
            let retry = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_POPULATE,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if retry == libc::MAP_FAILED {
                return Err(sys::context(
                    io::Error::last_os_error(),
                    "mmap of the RX ring",
                ));
            }
            retry
        } else {
            base
        };
        let ring = RxRing {
            base: NonNull::new(base as *mut u8)
                .ok_or_else(|| io::Error::other("mmap returned null"))?,
            map_len,
            block_size: cfg.block_size,
            holds: (0..cfg.block_count).map(|_| AtomicU32::new(0)).collect(),
            lent: (0..cfg.block_count)
                .map(|_| AtomicBool::new(false))
                .collect(),
            fd,
        };
        if cfg.promiscuous {
            set_promiscuous(&ring.fd, ifname, ifindex)?;
        }
        bind(&ring.fd, ifindex, libc::ETH_P_ALL as u16)?;
        Ok(ring)
    }

    /// Reads the next frame of the current block; `None` when the block's
    /// headers are inconsistent (the rest of the block is then skipped).
    /// Frames stamped before `cutoff_ns` are skipped as stale.
    fn next_frame(&mut self, blk: usize, cutoff_ns: u64) -> Option<Result<PacketBuf, Skip>> {
        let ring = &self.ring;
        let off = self.reader.offset;
        if off < block::HDR_LEN || off.checked_add(frame::MIN_HDR)? > ring.block_size {
            return None;
        }
        let next = ring.read::<u32>(blk, off + frame::NEXT_OFFSET)? as usize;
        let sec = ring.read::<u32>(blk, off + frame::SEC)?;
        let nsec = ring.read::<u32>(blk, off + frame::NSEC)?;
        let snaplen = ring.read::<u32>(blk, off + frame::SNAPLEN)? as usize;
        let wire_len = ring.read::<u32>(blk, off + frame::LEN)?;
        let mac = usize::from(ring.read::<u16>(blk, off + frame::MAC)?);
        let last = self.reader.pkts_left <= 1;
        let region_end = if last {
            ring.block_size
        } else {
            off.checked_add(next)?
        };
        if (!last && next == 0)
            || region_end > ring.block_size
            || off.checked_add(mac)?.checked_add(snaplen)? > region_end
        {
            return None;
        }
        self.reader.offset = region_end;
        if (snaplen as u64) < u64::from(wire_len) {
            return Some(Err(Skip::Truncated));
        }
        let stamp = u64::from(sec) * 1_000_000_000 + u64::from(nsec);
        if stamp < cutoff_ns {
            return Some(Err(Skip::Stale));
        }
        ring.holds.get(blk)?.fetch_add(1, Ordering::Relaxed);
        let lender: Arc<dyn BufferLender> = ring.clone();
        // SAFETY: base + blk*block_size + off is inside the mapping; the
        // region [off, region_end) belongs to this frame alone (frames do not
        // overlap, and the reader never revisits it until the block has been
        // returned and refilled, which needs this buffer's hold released);
        // mac + snaplen <= region_end - off was checked above.
        let pkt = unsafe {
            let start = NonNull::new_unchecked(ring.base.as_ptr().add(blk * ring.block_size + off));
            PacketBuf::from_slot(start, region_end - off, mac, snaplen, lender, blk)
        };
        let mut pkt = pkt;
        pkt.meta.timestamp_ns = stamp;
        pkt.meta.wire_len = wire_len;
        // The kernel strips an outer VLAN tag into the frame header before
        // packet sockets see the frame; put it back so the switch sees the
        // frame as it was on the wire.
        let status = ring.read::<u32>(blk, off + frame::STATUS).unwrap_or(0);
        if status & frame::STATUS_VLAN_VALID != 0 {
            let tci = ring.read::<u32>(blk, off + frame::VLAN_TCI).unwrap_or(0) as u16;
            let tpid = match ring.read::<u16>(blk, off + frame::VLAN_TPID) {
                Some(t) if status & frame::STATUS_VLAN_TPID_VALID != 0 && t != 0 => t,
                _ => 0x8100,
            };
            pkt.insert_vlan_tag(tpid, tci);
            pkt.meta.wire_len = wire_len.saturating_add(4);
        }
        Some(Ok(pkt))
    }
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
        let blocks = self.ring.holds.len();
        // Frames stamped more than the bound before the newest frame
        // waiting are stale: they sat behind a backlog. A frame that only
        // waited for the reader to wake, or for its block to be retired
        // at a low rate, is the newest itself and goes through.
        let cutoff_ns = match self.max_age {
            Some(age) => self
                .newest_ready_ns()
                .saturating_sub(u64::try_from(age.as_nanos()).unwrap_or(0)),
            None => 0,
        };
        while out.room() > 0 {
            let blk = self.reader.block;
            if !self.reader.in_block {
                let (Some(lent), Some(holds)) = (self.ring.lent.get(blk), self.ring.holds.get(blk))
                else {
                    break;
                };
                if lent.load(Ordering::Acquire) {
                    break; // still held from the previous lap
                }
                if self.ring.status(blk).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                    break; // the kernel is still filling it
                }
                let num = self.ring.read::<u32>(blk, block::NUM_PKTS).unwrap_or(0);
                let first = self.ring.read::<u32>(blk, block::FIRST_PKT).unwrap_or(0) as usize;
                lent.store(true, Ordering::Relaxed);
                holds.store(1, Ordering::Relaxed);
                if self.ring.newest_ns(blk) < cutoff_ns {
                    // Every frame in it is stale: back to the kernel unread.
                    self.counters.rx_drops.queue_delay += u64::from(num);
                    self.reader.block = (blk + 1) % blocks;
                    self.ring.release(blk);
                    continue;
                }
                self.reader.in_block = true;
                self.reader.pkts_left = num;
                self.reader.offset = first;
            }
            while self.reader.pkts_left > 0 && out.room() > 0 {
                match self.next_frame(blk, cutoff_ns) {
                    Some(Ok(pkt)) => {
                        self.counters.rx_packets += 1;
                        self.counters.rx_bytes += pkt.len() as u64;
                        let _ = out.push(pkt);
                        got += 1;
                        self.reader.pkts_left -= 1;
                    }
                    Some(Err(skip)) => {
                        match skip {
                            Skip::Truncated => self.counters.rx_drops.truncated += 1,
                            Skip::Stale => self.counters.rx_drops.queue_delay += 1,
                        }
                        self.reader.pkts_left -= 1;
                    }
                    None => {
                        self.counters.rx_drops.malformed += u64::from(self.reader.pkts_left);
                        self.reader.pkts_left = 0;
                    }
                }
            }
            if self.reader.pkts_left == 0 {
                self.reader.in_block = false;
                self.reader.block = (blk + 1) % blocks;
                self.ring.release(blk); // the reader's own hold
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
        if let Ok(st) = sys::getsockopt::<TpacketStatsV3>(
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
        self.max_age = bound.map(|b| b.delay);
    }
}

/// `struct tpacket_stats_v3` with a `Default`.
#[repr(C)]
#[derive(Default)]
struct TpacketStatsV3 {
    tp_packets: u32,
    tp_drops: u32,
    tp_freeze_q_cnt: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::Burst;
    use crate::testnet::{
        in_veth_ns, is_test_frame, rx_test_frames, test_frame, NetNs, RawSocket, TEST_ETHERTYPE,
    };
    use std::time::{Duration, Instant};

    /// A port on `ifname` with a ring of `blocks` one-page blocks.
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
                assert!(p.meta.timestamp_ns > 0);
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
            for seq in 0..10u32 {
                peer.send(&test_frame(2, seq, 64));
            }
            assert_eq!(
                rx_test_frames(&mut port, 10, Duration::from_secs(5)).len(),
                10
            );
            // Frames that waited longer than the bound are not lent: the
            // bound is 1 ms and they wait at least 50 ms before the read.
            port.set_rx_bound(Some(crate::delay::RxBound {
                packets: 64,
                delay: Duration::from_millis(1),
            }));
            for seq in 0..50u32 {
                peer.send(&test_frame(2, seq, 64));
            }
            // A frame 50 ms younger behind them: the 50 waited behind a
            // backlog longer than the bound (ages count from the newest
            // frame waiting, not from the read).
            std::thread::sleep(Duration::from_millis(50));
            peer.send(&test_frame(2, 50, 64));
            std::thread::sleep(Duration::from_millis(20));
            let mut burst = Burst::with_limit(64);
            let mut lent = 0;
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while port.stats().rx_drops.queue_delay < 50 && std::time::Instant::now() < deadline {
                burst.clear();
                port.rx_burst(&mut burst).unwrap();
                // (Frames the host itself sends on the link may arrive fresh.)
                lent += burst
                    .iter()
                    .filter(|p| is_test_frame(p.data()))
                    .filter(|p| {
                        p.data()
                            .get(14..18)
                            .is_some_and(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) < 50)
                    })
                    .count();
            }
            let c = port.stats();
            assert_eq!(lent, 0, "{c:?}");
            assert!(c.rx_drops.queue_delay >= 50, "{c:?}");
            assert_eq!(c.rx_drops.ring_full, 0, "{c:?}");
        });
    }

    #[test]
    fn lent_frames_hold_blocks_until_dropped_as_root() {
        in_veth_ns("afp-hold", "ha", "hb", || {
            // A tiny ring: 2 blocks of one page, so held frames starve it.
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
            std::thread::sleep(Duration::from_millis(20));
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
            let got = rx_test_frames(&mut port, 30, Duration::from_secs(1));
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
                    .map(|p| {
                        u32::from_be_bytes([p.data()[14], p.data()[15], p.data()[16], p.data()[17]])
                    })
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
            // One-page blocks: a 6000-byte frame cannot fit and arrives truncated.
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
}
