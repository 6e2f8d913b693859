//! The port abstraction: packet buffers, bursts of them, per-port counters and
//! the [`PortBackend`] trait every backend (memory, AF_PACKET, pcap, TAP, and
//! later AF_XDP and DPDK) implements.
//!
//! # Packet buffers and who owns the bytes
//!
//! A [`PacketBuf`] is one frame plus its metadata. Its bytes live in one of two
//! kinds of storage:
//!
//! - **owned**: a heap slice the buffer owns outright. Memory, pcap and TAP
//!   ports produce these; so does any code that builds a packet from scratch.
//! - **lent**: memory that belongs to a backend — a slot of an AF_PACKET mmap
//!   ring or an AF_XDP UMEM frame. The buffer holds a raw
//!   pointer to the slot plus a [`BufferLender`] handle and a token; when the
//!   buffer is dropped it calls [`BufferLender::release`] exactly once with
//!   that token, and only then may the backend reuse the slot. The lender is
//!   reference counted, so the memory stays mapped even if the port itself is
//!   dropped first.
//! - **a frame**: a [`packet::buffer::Lent`] region (a DPDK mbuf's data
//!   room), given back through its static owner without reference
//!   counting. It is the same type the pipeline's buffers hold, so such a
//!   packet goes from the port through the pipeline and back to a port
//!   without a copy ([`PacketBuf::from_frame`], [`PacketBuf::into_frame`]).
//!
//! A buffer is therefore `'static` and `Send`: it can cross an SPSC ring to a
//! worker thread and on to a TX thread without copying and without a lifetime
//! tying it to the port that read it. The price is that a backend's slot is
//! held as long as the buffer lives, so a consumer that hoards buffers starves
//! the backend's ring (the kernel then drops and counts it, which shows up as
//! `rx_drops.ring_full`).
//!
//! Both kinds have **headroom** in front of the frame so pushing a header
//! (VLAN, MPLS, PBB) is a pointer move, not a copy. Lent AF_PACKET slots get
//! their headroom from `PACKET_RESERVE` plus the ring's own frame header, which
//! is dead once the frame has been handed out.
//!
//! Copies happen only where stated:
//! - [`PacketBuf::push_front`] with too little headroom moves the frame into a
//!   new owned buffer (one copy, then the buffer is owned);
//! - [`PacketBuf::push_back`] past the end of the storage does the same;
//! - a backend that cannot send from arbitrary memory copies on TX (the
//!   AF_PACKET backend hands the kernel an iovec and the kernel copies into
//!   its skb — no user-space copy).
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

use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;

use packet::buffer::Lent;

use crate::pool;

/// Default number of buffers in a burst.
pub const DEFAULT_BURST: usize = 32;

/// Default bytes of headroom in front of a frame in owned buffers: room for
/// several pushed headers (PBB is 18 bytes, a VLAN tag 4, an MPLS label 4).
pub const DEFAULT_HEADROOM: usize = 128;

/// Something that lends memory to [`PacketBuf`]s and wants it back.
///
/// Implementations are backend ring managers: the AF_PACKET RX ring, later a
/// DPDK mempool or an AF_XDP fill ring.
pub trait BufferLender: Send + Sync {
    /// Called exactly once for each buffer built by [`PacketBuf::from_lent`]
    /// with this lender, when that buffer is dropped. After this call the
    /// buffer never touches the memory again.
    fn release(&self, token: usize);
}

/// A heap vector that goes back to [`crate::pool`] when dropped.
struct Pooled(Vec<u8>);

impl Pooled {
    /// The vector, taken out without recycling it.
    fn into_inner(self) -> Vec<u8> {
        let mut me = std::mem::ManuallyDrop::new(self);
        std::mem::take(&mut me.0)
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.0));
    }
}

/// Where a buffer's bytes live. The buffer itself has no `Drop`: each
/// kind gives its memory back by its own (a pooled vector, a lease, a
/// frame), so taking a buffer apart is a plain move.
enum Storage {
    /// A heap vector the buffer owns (all of its length is the region;
    /// it goes back to [`crate::pool`] when the buffer dies).
    Owned(Pooled),
    /// Memory lent by a backend; returned through `lender.release(token)`.
    Lent {
        ptr: NonNull<u8>,
        cap: usize,
        /// Held only for its `Drop`, which gives the region back.
        #[allow(dead_code)]
        lease: Lease,
    },
    /// A region lent through a static owner (a DPDK mbuf); dropping it
    /// gives it back.
    Frame(Lent),
}

/// The right to use a lent region; dropping it gives the region back. Kept
/// apart from [`PacketBuf`] so that replacing the storage (a reallocation)
/// releases the slot at once, not when the buffer dies.
struct Lease {
    lender: Arc<dyn BufferLender>,
    token: usize,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.lender.release(self.token);
    }
}

/// A [`PacketBuf`] taken apart ([`PacketBuf::into_parts`]).
pub enum BufParts {
    /// An owned vector and the frame's offset in it (the frame runs to
    /// the vector's end).
    Vec(Vec<u8>, usize),
    /// A frame region, the frame's offset in it and its length.
    Frame(Lent, usize, usize),
    /// A slot lent through a [`BufferLender`], still in its buffer.
    Slot(PacketBuf),
}

/// Metadata that travels with a packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// The port number the dispatcher assigned to the port the packet came
    /// in on (backends leave it 0; the RX thread sets it).
    pub in_port: u32,
    /// Receive time in nanoseconds since the Unix epoch, when the backend
    /// knows it (0 otherwise).
    pub timestamp_ns: u64,
    /// Length of the frame on the wire; larger than the buffer's length when
    /// the backend captured only part of it.
    pub wire_len: u32,
    /// The egress queue the pipeline chose (`set_queue`; 0: none). A port
    /// with queues configured sends it through that queue ([`crate::qos`]);
    /// other ports ignore it.
    pub queue_id: u32,
    /// Tunnel ports: on receive, the VNI (VXLAN) or key (GRE; 0 without
    /// one) the frame came in with, `Some` on every frame a tunnel port
    /// receives and `None` on every other port's (a patch link clears it),
    /// so the first frame of a burst says whether the burst is a tunnel
    /// port's; on output, the key a `key=flow` tunnel port wraps the frame
    /// in (the low 32 bits of the flow's `tunnel_id`, all a VNI or GRE key
    /// holds; set when not 0, `None` is 0). Other ports ignore it. 32 bits,
    /// not the match field's 64: this way the field grows every buffer by
    /// 8 bytes, not 16.
    pub tunnel_id: Option<u32>,
}

/// Error from a buffer operation that would leave the frame's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufError {
    /// Asked to remove `wanted` bytes from a frame of only `len` bytes.
    TooShort {
        /// Bytes requested.
        wanted: usize,
        /// Bytes in the frame.
        len: usize,
    },
}

impl fmt::Display for BufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufError::TooShort { wanted, len } => {
                write!(f, "cannot remove {wanted} bytes from a {len}-byte frame")
            }
        }
    }
}

impl std::error::Error for BufError {}

/// One packet: a frame in owned or lent storage, with headroom and metadata.
///
/// Invariant: `head + len <= capacity of the storage`.
pub struct PacketBuf {
    storage: Storage,
    head: usize,
    len: usize,
    /// Metadata set by the backend and the dispatcher.
    pub meta: PacketMeta,
}

// SAFETY: owned storage is a Box (Send). Lent storage points at memory that
// `from_lent`'s contract makes exclusive to this buffer until release, and the
// lender is `Send + Sync`; nothing in the buffer is tied to the creating thread.
unsafe impl Send for PacketBuf {}

impl PacketBuf {
    /// An empty owned buffer with `headroom` bytes in front and room for a
    /// frame of `capacity` bytes after it.
    pub fn new(headroom: usize, capacity: usize) -> Self {
        PacketBuf {
            storage: Storage::Owned(Pooled(zeroed(headroom.saturating_add(capacity)))),
            head: headroom,
            len: 0,
            meta: PacketMeta::default(),
        }
    }

    /// An owned buffer holding a copy of `frame`, with [`DEFAULT_HEADROOM`].
    pub fn from_slice(frame: &[u8]) -> Self {
        Self::with_headroom(frame, DEFAULT_HEADROOM)
    }

    /// An owned buffer holding a copy of `frame` after `headroom` bytes.
    pub fn with_headroom(frame: &[u8], headroom: usize) -> Self {
        PacketBuf {
            storage: Storage::Owned(Pooled(copied(headroom, frame, 0))),
            head: headroom,
            len: frame.len(),
            meta: PacketMeta {
                wire_len: u32::try_from(frame.len()).unwrap_or(u32::MAX),
                ..PacketMeta::default()
            },
        }
    }

    /// An owned buffer over `storage` whose frame starts at `head` (the
    /// bytes before it are headroom) and runs to the end. Takes the vector
    /// over without copying its bytes (a `head` past the end gives an empty
    /// frame).
    pub fn from_vec(storage: Vec<u8>, head: usize) -> Self {
        let head = head.min(storage.len());
        let len = storage.len() - head;
        PacketBuf {
            storage: Storage::Owned(Pooled(storage)),
            head,
            len,
            meta: PacketMeta {
                wire_len: u32::try_from(len).unwrap_or(u32::MAX),
                ..PacketMeta::default()
            },
        }
    }

    /// A buffer over memory lent by a backend; the frame is `len` bytes at
    /// offset `head` of the `cap`-byte region at `ptr`.
    ///
    /// # Safety
    ///
    /// - `ptr..ptr+cap` is valid for reads and writes, and nothing else reads
    ///   or writes it, until `lender.release(token)` is called (which the
    ///   buffer does once, on drop);
    /// - `head + len <= cap`.
    pub unsafe fn from_lent(
        ptr: NonNull<u8>,
        cap: usize,
        head: usize,
        len: usize,
        lender: Arc<dyn BufferLender>,
        token: usize,
    ) -> Self {
        debug_assert!(head.checked_add(len).is_some_and(|end| end <= cap));
        PacketBuf {
            storage: Storage::Lent {
                ptr,
                cap,
                lease: Lease { lender, token },
            },
            head,
            len,
            meta: PacketMeta {
                wire_len: u32::try_from(len).unwrap_or(u32::MAX),
                ..PacketMeta::default()
            },
        }
    }

    fn storage(&self) -> &[u8] {
        match &self.storage {
            Storage::Owned(b) => &b.0,
            Storage::Frame(f) => f.bytes(),
            // SAFETY: `from_lent`'s contract: the region is valid and ours
            // until release, which only happens in Drop.
            Storage::Lent { ptr, cap, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *cap)
            },
        }
    }

    fn storage_mut(&mut self) -> &mut [u8] {
        match &mut self.storage {
            Storage::Owned(b) => &mut b.0,
            Storage::Frame(f) => f.bytes_mut(),
            // SAFETY: as in `storage`, and `&mut self` makes this the only
            // live reference into the region.
            Storage::Lent { ptr, cap, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *cap)
            },
        }
    }

    /// The frame's bytes.
    pub fn data(&self) -> &[u8] {
        let (head, len) = (self.head, self.len);
        self.storage().get(head..head + len).unwrap_or(&[])
    }

    /// The frame's bytes, writable (header rewrites happen in place).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (head, len) = (self.head, self.len);
        self.storage_mut()
            .get_mut(head..head + len)
            .unwrap_or(&mut [])
    }

    /// Length of the frame in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the frame has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes free in front of the frame.
    pub fn headroom(&self) -> usize {
        self.head
    }

    /// Bytes free after the frame.
    pub fn tailroom(&self) -> usize {
        self.storage().len().saturating_sub(self.head + self.len)
    }

    /// True when the bytes are lent by a backend rather than owned.
    pub fn is_lent(&self) -> bool {
        matches!(self.storage, Storage::Lent { .. } | Storage::Frame(_))
    }

    /// A buffer over the region `mem`: the frame is `len` bytes at offset
    /// `head` (bounds past the region are cut to it).
    #[inline]
    pub fn from_frame(mem: Lent, head: usize, len: usize) -> Self {
        let head = head.min(mem.capacity());
        let len = len.min(mem.capacity() - head);
        PacketBuf {
            storage: Storage::Frame(mem),
            head,
            len,
            meta: PacketMeta {
                wire_len: u32::try_from(len).unwrap_or(u32::MAX),
                ..PacketMeta::default()
            },
        }
    }

    /// A region-backed buffer taken apart: the region, the frame's offset
    /// in it and its length (the metadata is dropped); any other buffer
    /// is handed back as it is (`Err`).
    #[inline]
    pub fn into_frame(self) -> Result<(Lent, usize, usize), PacketBuf> {
        match self.storage {
            Storage::Frame(mem) => Ok((mem, self.head, self.len)),
            storage => Err(PacketBuf { storage, ..self }),
        }
    }

    /// Moves the frame into a new owned buffer with `headroom` in front and
    /// `tailroom` behind; a lent slot is given back to its backend.
    fn reallocate(&mut self, headroom: usize, tailroom: usize) {
        let storage = copied(headroom, self.data(), tailroom);
        // Dropping the old storage releases a lent slot (or recycles an
        // owned vector).
        self.storage = Storage::Owned(Pooled(storage));
        self.head = headroom;
    }

    /// An owned buffer's storage and the frame's offset in it, the vector
    /// cut to the frame's end (`head <= len`), for a buffer type that takes
    /// the bytes over without copying; a lent buffer is handed back as it
    /// is (`Err`), its slot still held.
    #[inline]
    pub fn into_vec_parts(self) -> Result<(Vec<u8>, usize), PacketBuf> {
        match self.storage {
            Storage::Owned(v) => {
                let mut v = v.into_inner();
                v.truncate(self.head + self.len);
                Ok((v, self.head))
            }
            storage => Err(PacketBuf { storage, ..self }),
        }
    }

    /// The buffer taken apart for another buffer type, in one step: an
    /// owned vector (cut to the frame's end) with the frame's offset, a
    /// frame region with the frame's offset and length, or — for a slot
    /// lent through a [`BufferLender`] — the buffer itself.
    #[inline]
    pub fn into_parts(self) -> BufParts {
        match self.storage {
            Storage::Owned(v) => {
                let mut v = v.into_inner();
                v.truncate(self.head + self.len);
                BufParts::Vec(v, self.head)
            }
            Storage::Frame(mem) => BufParts::Frame(mem, self.head, self.len),
            storage => BufParts::Slot(PacketBuf { storage, ..self }),
        }
    }

    /// Copies a lent frame into owned storage (keeping the headroom size) and
    /// gives the slot back to the backend. Does nothing for owned buffers.
    pub fn make_owned(&mut self) {
        if self.is_lent() {
            let (h, t) = (self.head.max(DEFAULT_HEADROOM), self.tailroom());
            self.reallocate(h, t);
        }
    }

    /// Grows the frame by `n` bytes at the front and returns them (zeroed
    /// only if freshly allocated; otherwise they hold stale bytes the caller
    /// overwrites). Moves the frame to a larger owned buffer (one copy) when
    /// the headroom is too small.
    pub fn push_front(&mut self, n: usize) -> &mut [u8] {
        if n > self.head {
            let t = self.tailroom();
            self.reallocate(n.saturating_add(DEFAULT_HEADROOM), t);
        }
        self.head -= n;
        self.len += n;
        let head = self.head;
        self.storage_mut()
            .get_mut(head..head + n)
            .unwrap_or(&mut [])
    }

    /// Removes `n` bytes from the front of the frame (they become headroom).
    pub fn pull_front(&mut self, n: usize) -> Result<(), BufError> {
        if n > self.len {
            return Err(BufError::TooShort {
                wanted: n,
                len: self.len,
            });
        }
        self.head += n;
        self.len -= n;
        Ok(())
    }

    /// Grows the frame by `n` bytes at the back and returns them; moves the
    /// frame to a larger owned buffer (one copy) when the tailroom is too small.
    pub fn push_back(&mut self, n: usize) -> &mut [u8] {
        if n > self.tailroom() {
            let h = self.head;
            self.reallocate(h, n);
        }
        let start = self.head + self.len;
        self.len += n;
        self.storage_mut()
            .get_mut(start..start + n)
            .unwrap_or(&mut [])
    }

    /// Shortens the frame to `len` bytes (no effect if it is already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Inserts an 802.1Q/802.1ad tag (`tpid`, `tci`) after the Ethernet
    /// addresses (for backends whose kernel stripped it into metadata).
    /// Frames shorter than the two addresses are left alone.
    pub fn insert_vlan_tag(&mut self, tpid: u16, tci: u16) {
        if self.len < 12 {
            return;
        }
        self.push_front(4);
        let d = self.data_mut();
        d.copy_within(4..16, 0);
        if let Some(tag) = d.get_mut(12..16) {
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&tci.to_be_bytes());
        }
    }

    /// Appends a copy of `bytes` to the frame.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.push_back(bytes.len()).copy_from_slice(bytes);
    }
}

/// A zeroed vector of `len` bytes, recycled from the pool when it fits.
fn zeroed(len: usize) -> Vec<u8> {
    let mut v = if len <= pool::BUF_CAPACITY {
        pool::take()
    } else {
        Vec::with_capacity(len)
    };
    v.resize(len, 0);
    v
}

/// A vector of `headroom` zeros, `frame` and `tailroom` zeros, recycled
/// from the pool when it fits.
fn copied(headroom: usize, frame: &[u8], tailroom: usize) -> Vec<u8> {
    let len = headroom
        .saturating_add(frame.len())
        .saturating_add(tailroom);
    let mut v = if len <= pool::BUF_CAPACITY {
        pool::take()
    } else {
        Vec::with_capacity(len)
    };
    v.resize(headroom, 0);
    v.extend_from_slice(frame);
    v.resize(len, 0);
    v
}

impl Clone for PacketBuf {
    /// Clones into an owned buffer with the same headroom (a copy; a lent
    /// slot is never shared between two buffers).
    fn clone(&self) -> Self {
        let mut copy = PacketBuf::with_headroom(self.data(), self.head);
        copy.meta = self.meta;
        copy
    }
}

impl fmt::Debug for PacketBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketBuf")
            .field("len", &self.len)
            .field("headroom", &self.head)
            .field("lent", &self.is_lent())
            .field("meta", &self.meta)
            .finish()
    }
}

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

    /// Field-by-field sum, e.g. a port and its split sender, or several
    /// queues of one port.
    pub fn merged(&self, other: &PortCounters) -> PortCounters {
        let (a, b) = (self, other);
        PortCounters {
            rx_packets: a.rx_packets + b.rx_packets,
            rx_bytes: a.rx_bytes + b.rx_bytes,
            rx_drops: RxDrops {
                ring_full: a.rx_drops.ring_full + b.rx_drops.ring_full,
                truncated: a.rx_drops.truncated + b.rx_drops.truncated,
                malformed: a.rx_drops.malformed + b.rx_drops.malformed,
                tunnel_malformed: a.rx_drops.tunnel_malformed + b.rx_drops.tunnel_malformed,
                tunnel_mismatch: a.rx_drops.tunnel_mismatch + b.rx_drops.tunnel_mismatch,
                queue_delay: a.rx_drops.queue_delay + b.rx_drops.queue_delay,
            },
            rx_errors: a.rx_errors + b.rx_errors,
            tx_packets: a.tx_packets + b.tx_packets,
            tx_bytes: a.tx_bytes + b.tx_bytes,
            tx_drops: TxDrops {
                oversize: a.tx_drops.oversize + b.tx_drops.oversize,
                link_down: a.tx_drops.link_down + b.tx_drops.link_down,
                queue_full: a.tx_drops.queue_full + b.tx_drops.queue_full,
                runt: a.tx_drops.runt + b.tx_drops.runt,
            },
            tx_errors: a.tx_errors + b.tx_errors,
        }
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
    /// many it appended.
    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize>;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    #[test]
    fn owned_push_pull_keeps_bytes() {
        let mut p = PacketBuf::from_slice(&[1, 2, 3, 4]);
        assert_eq!(p.headroom(), DEFAULT_HEADROOM);
        p.push_front(2).copy_from_slice(&[9, 8]);
        assert_eq!(p.data(), &[9, 8, 1, 2, 3, 4]);
        assert_eq!(p.headroom(), DEFAULT_HEADROOM - 2);
        p.pull_front(3).unwrap();
        assert_eq!(p.data(), &[2, 3, 4]);
        assert_eq!(
            p.pull_front(4),
            Err(BufError::TooShort { wanted: 4, len: 3 })
        );
        p.extend_from_slice(&[5, 6]);
        assert_eq!(p.data(), &[2, 3, 4, 5, 6]);
        p.truncate(1);
        assert_eq!(p.data(), &[2]);
        p.truncate(10);
        assert_eq!(p.data(), &[2]);
    }

    #[test]
    fn vlan_tag_inserted_after_addresses() {
        let mut p = PacketBuf::from_slice(&[1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 8, 0, 0x45]);
        p.insert_vlan_tag(0x8100, 0x000a);
        assert_eq!(
            p.data(),
            &[1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0x81, 0, 0, 10, 8, 0, 0x45]
        );
        let mut short = PacketBuf::from_slice(&[1; 11]);
        short.insert_vlan_tag(0x8100, 1);
        assert_eq!(short.len(), 11);
    }

    #[test]
    fn from_vec_takes_headroom_and_frame() {
        let p = PacketBuf::from_vec(vec![0, 0, 7, 8], 2);
        assert_eq!(
            (p.data(), p.headroom(), p.meta.wire_len),
            (&[7, 8][..], 2, 2)
        );
        assert!(PacketBuf::from_vec(vec![1], 5).is_empty());
    }

    #[test]
    fn push_front_without_headroom_reallocates() {
        let mut p = PacketBuf::with_headroom(&[1, 2], 1);
        p.push_front(4).copy_from_slice(&[5, 6, 7, 8]);
        assert_eq!(p.data(), &[5, 6, 7, 8, 1, 2]);
        assert!(p.headroom() >= DEFAULT_HEADROOM);
        let mut q = PacketBuf::new(0, 0);
        assert!(q.is_empty());
        q.push_back(3).copy_from_slice(&[1, 2, 3]);
        assert_eq!(q.data(), &[1, 2, 3]);
    }

    /// A lender that records which tokens came back.
    struct Recorder {
        released: Mutex<Vec<usize>>,
        count: AtomicUsize,
    }

    impl BufferLender for Recorder {
        fn release(&self, token: usize) {
            self.count.fetch_add(1, Ordering::SeqCst);
            self.released.lock().unwrap().push(token);
        }
    }

    fn lent(
        region: &mut [u8],
        lender: &Arc<Recorder>,
        token: usize,
        head: usize,
        len: usize,
    ) -> PacketBuf {
        let l: Arc<dyn BufferLender> = lender.clone();
        // SAFETY: the test keeps `region` alive and untouched until the buffer
        // is dropped, and head + len <= region.len().
        unsafe {
            PacketBuf::from_lent(
                NonNull::new(region.as_mut_ptr()).unwrap(),
                region.len(),
                head,
                len,
                l,
                token,
            )
        }
    }

    #[test]
    fn lent_buffer_released_once_on_drop_and_writes_in_place() {
        let rec = Arc::new(Recorder {
            released: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        });
        let mut region = vec![0u8; 64];
        region[16..20].copy_from_slice(&[1, 2, 3, 4]);
        {
            let mut p = lent(&mut region, &rec, 7, 16, 4);
            assert!(p.is_lent());
            assert_eq!(p.data(), &[1, 2, 3, 4]);
            assert_eq!(p.headroom(), 16);
            assert_eq!(p.tailroom(), 44);
            p.push_front(4).copy_from_slice(&[0xaa; 4]);
            p.data_mut()[4] = 0x11;
            assert!(p.is_lent(), "push within headroom must not copy");
            let c = p.clone();
            assert!(!c.is_lent());
            assert_eq!(c.data(), &[0xaa, 0xaa, 0xaa, 0xaa, 0x11, 2, 3, 4]);
            drop(c);
            assert_eq!(rec.count.load(Ordering::SeqCst), 0);
        }
        assert_eq!(*rec.released.lock().unwrap(), vec![7]);
        assert_eq!(&region[12..20], &[0xaa, 0xaa, 0xaa, 0xaa, 0x11, 2, 3, 4]);
    }

    #[test]
    fn lent_buffer_released_when_moved_to_owned() {
        let rec = Arc::new(Recorder {
            released: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        });
        let mut region = vec![5u8; 32];
        let mut p = lent(&mut region, &rec, 3, 2, 10);
        p.push_front(8).fill(1);
        assert!(!p.is_lent());
        assert_eq!(
            rec.count.load(Ordering::SeqCst),
            1,
            "slot released at reallocation"
        );
        assert_eq!(p.len(), 18);
        assert_eq!(&p.data()[8..], &[5; 10]);
        drop(p);
        assert_eq!(rec.count.load(Ordering::SeqCst), 1, "released exactly once");

        let mut region2 = vec![6u8; 32];
        let mut q = lent(&mut region2, &rec, 4, 0, 4);
        q.make_owned();
        assert!(!q.is_lent());
        assert_eq!(q.data(), &[6; 4]);
        assert_eq!(*rec.released.lock().unwrap(), vec![3, 4]);
    }

    #[test]
    fn into_vec_parts_hands_owned_storage_over_and_keeps_lent_slots() {
        let mut v = vec![0u8; 8];
        v.extend_from_slice(&[1, 2, 3, 4, 5]);
        let p = v.as_ptr();
        let mut b = PacketBuf::from_vec(v, 8);
        b.truncate(3);
        let (v, head) = b.into_vec_parts().unwrap();
        assert_eq!((v.as_ptr(), head, &v[head..]), (p, 8, &[1, 2, 3][..]));

        let rec = Arc::new(Recorder {
            released: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        });
        let mut region = vec![9u8; 32];
        let l = lent(&mut region, &rec, 5, 4, 6);
        let back = l.into_vec_parts().unwrap_err();
        assert!(back.is_lent() && back.data() == [9; 6]);
        assert_eq!(rec.count.load(Ordering::SeqCst), 0, "slot still held");
        drop(back);
        assert_eq!(*rec.released.lock().unwrap(), vec![5]);
    }

    #[test]
    fn owned_storage_is_recycled_on_drop() {
        // Runs on its own test thread, whose pool starts empty.
        std::thread::spawn(|| {
            let b = PacketBuf::from_slice(&[7; 60]);
            let p = b.data().as_ptr();
            drop(b);
            assert_eq!(pool::local_len(), 1);
            let again = PacketBuf::from_slice(&[8; 100]);
            assert_eq!(again.data().as_ptr(), p, "the dropped storage came back");
            assert_eq!(again.data(), &[8; 100][..]);
            assert_eq!(again.headroom(), DEFAULT_HEADROOM);
        })
        .join()
        .unwrap();
    }

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
