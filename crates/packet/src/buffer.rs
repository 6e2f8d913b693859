//! A packet buffer with headroom, and the OpenFlow 1.3 push/pop actions
//! (push_vlan/pop_vlan, push_mpls/pop_mpls, push_pbb/pop_pbb).
//!
//! Why headroom: every push inserts bytes near the front of the packet and
//! every pop removes bytes there. [`PacketBuf`] keeps the packet at
//! `data[start..]` inside a `Vec<u8>` with free space before `start`, so a
//! push moves only the few header bytes that precede the insertion point
//! (12 to ~30 bytes) into the headroom, and a pop moves them forward; the
//! payload never moves. Only when the headroom runs out does a push
//! reallocate (once, adding [`DEFAULT_HEADROOM`] more).
//!
//! Field initialisation follows OpenFlow 1.3.5 §5.12 (table "existing
//! fields that may be copied into new fields"): a new tag takes its values
//! from the existing outermost tag of the same kind, else zero:
//! - push_vlan: VID and PCP from the outer VLAN tag if any, else 0 (DEI 0).
//!   The tag goes right after the Ethernet addresses, before other tags.
//! - push_mpls: label, TC and TTL from the outer MPLS label if any (BOS 0);
//!   otherwise label 0, TC 0, BOS 1 and the TTL from the IPv4 TTL / IPv6
//!   hop limit (0 if not IP). The label goes after the Ethernet header and
//!   VLAN tags, and the EtherType there becomes the action's EtherType.
//!   (OpenFlow 1.3 §5.12 words it as "immediately after the Ethernet header
//!   and before other tags"; read literally that would put the VLAN tag
//!   inside the MPLS payload, which no receiver can parse, so VLAN tags are
//!   treated as part of the Ethernet header here, as 802.1Q does and as
//!   the Linux/OVS datapath push_mpls does.)
//! - push_pbb: a backbone header is inserted after the Ethernet addresses:
//!   EtherType 0x88e7, an I-TAG with I-SID from an existing I-TAG (else 0)
//!   and I-PCP from the outer VLAN PCP (else 0), then C-DA/C-SA copied from
//!   the frame's addresses. The outer (backbone) addresses keep their
//!   values until the controller sets them; existing VLAN tags now belong to
//!   the customer frame.
//! - pop_vlan removes the outer tag; pop_mpls removes the outer label and
//!   writes the action's EtherType; pop_pbb removes the backbone addresses,
//!   any backbone VLAN tags and the I-TAG, leaving the customer frame.
//!
//! # Lent storage
//!
//! The bytes normally live in a `Vec<u8>` the buffer owns. A packet I/O
//! backend that has its own buffers (a DPDK mbuf's data room) can instead
//! lend one as a [`Lent`] region ([`PacketBuf::from_lent`]): the packet is
//! then processed where the device put it, pushes use the region's own
//! headroom, and [`PacketBuf::into_frame`] hands the region back to the
//! backend for sending with the packet's new offset and length. Only what
//! does not fit moves the packet into an owned vector (one copy; the
//! region goes back to its owner at once): a push past the headroom, a pad
//! past the region's end, and a [`Clone`] (a region is never shared).
//!
//! A frame a port receives into a ring slot it shares with the kernel (an
//! AF_PACKET block, an AF_XDP UMEM frame) is lent the same way, through a
//! reference-counted [`BufferLender`] instead of a static owner
//! ([`PacketBuf::from_slot`], the lender held as a thin [`SharedLender`]);
//! the worker copies such a frame into pooled storage before the pipeline
//! sees it ([`PacketBuf::copy_out_of_slot`]), so a slow flow cannot pin the
//! kernel's ring.
//!
//! # One cache line
//!
//! A buffer is built and moved once per packet on the fast path (a DPDK
//! receive builds it where it lands in the burst), so it is one cache line:
//! 64 bytes, aligned to 64. The storage is kept as raw parts (a pointer,
//! the vector's capacity or the region's token, the region's owner as one
//! tagged word, and 32-bit capacity, end and start; see [`PacketBuf`]),
//! the floor is a bit of the owner word, and [`PacketMeta`] is seven
//! 32-bit words. Offsets are 32-bit: a buffer holds at most
//! [`MAX_STORAGE`] bytes, which no frame comes near.
//!
//! # One buffer from the port to the pipeline and back
//!
//! This is the only packet buffer: the dataplane's ports fill bursts of
//! it, the pipeline rewrites it in place, and ports send it, with no
//! conversion between. What travels with the bytes is [`PacketMeta`]
//! (the port it came in on, its receive time and wire length, the egress
//! queue and tunnel key the pipeline chose, and the output port of a
//! packet the control side injects). An owned buffer's vector comes from
//! and goes back to [`pool`] (a per-thread free list), so steady-state
//! forwarding allocates nothing per packet.
//!
//! A frame never leaves shorter than it may: if the buffer was made from a
//! frame of Ethernet's minimum size ([`MIN_FRAME_LEN`], 60 bytes without
//! the FCS) or more, and pops left it shorter, [`PacketBuf::pad_to_floor`]
//! appends zeros up to 60 when the frame is emitted (output, packet-in),
//! as an 802.1Q bridge pads a frame that untagging leaves too short. So a
//! 60-byte MPLS/IPv4/ICMP echo popped and sent leaves as a 60-byte IPv4
//! frame (os-ken's switch tests expect this), not 56 bytes. The padding is
//! added at emission, not by the pop, so pop-then-push in one action list
//! gives the same bytes whichever order of steps reaches them (and the
//! fused gateway rewrites of the datapath, which never change the length,
//! agree with the step-by-step path). A frame that arrived shorter
//! (possible on veth or TAP ports) is never padded, and push-then-pop
//! gives back exactly the frame it started from.

use core::fmt;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use crate::ethernet::ethertype;
use crate::flow_key::{field, FlowKey};
use crate::{be16, be32, put16, put32, ActionError};

mod lent;
mod outbox;
pub mod pool;

pub use lent::{BufferLender, Lent, LentOwner, SharedLender};
pub use outbox::Outbox;

/// Headroom given to a new buffer (and added when a push runs out).
pub const DEFAULT_HEADROOM: usize = 64;

/// Ethernet's minimum frame length, without the frame check sequence.
pub const MIN_FRAME_LEN: usize = 60;

/// The most bytes a buffer's storage holds (headroom and frame): offsets
/// are 32-bit so that a [`PacketBuf`] fits in a cache line. Frames are far
/// shorter (an OpenFlow message, a capture record or an MTU bounds every
/// source); a constructor given more cuts the frame to fit, and a lent
/// region larger than this is used up to this size.
pub const MAX_STORAGE: usize = u32::MAX as usize;

/// An empty vector with room for `cap` bytes: a recycled one when a pooled
/// vector holds that many, else a new allocation.
fn room_for(cap: usize) -> Vec<u8> {
    if cap <= pool::BUF_CAPACITY {
        pool::take()
    } else {
        Vec::with_capacity(cap)
    }
}

/// Metadata that travels with a packet from the port that received it
/// (or the control side that injected it) to the port that sends it.
///
/// Seven 32-bit words, so that a [`PacketBuf`] fits in a cache line: the
/// receive time is split in two, and whether the tunnel key and the output
/// port are set takes the two top bits of the time (a time is below
/// [`PacketMeta::MAX_TIMESTAMP_NS`], the year 2116). Hence the accessors
/// for those three fields.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// The port number the dispatcher assigned to the port the packet came
    /// in on (backends leave it 0; the RX thread sets it).
    pub in_port: u32,
    /// Length of the frame on the wire; larger than the buffer's length when
    /// the backend captured only part of it.
    pub wire_len: u32,
    /// The egress queue the pipeline chose (`set_queue`; 0: none). A port
    /// with queues configured sends it through that queue; other ports
    /// ignore it.
    pub queue_id: u32,
    /// [`PacketMeta::tunnel_id`]'s value (0 when unset).
    tunnel: u32,
    /// [`PacketMeta::out_port`]'s value (0 when unset).
    out: u32,
    /// The receive time's low 32 bits.
    time_lo: u32,
    /// The receive time's high 30 bits, and [`TUNNEL_SET`] and
    /// [`OUT_SET`].
    time_hi: u32,
}

/// In [`PacketMeta`]'s `time_hi`: the tunnel key is set.
const TUNNEL_SET: u32 = 1 << 31;
/// In [`PacketMeta`]'s `time_hi`: the output port is set.
const OUT_SET: u32 = 1 << 30;
/// In [`PacketMeta`]'s `time_hi`: the bits of the time.
const TIME_HI: u32 = OUT_SET - 1;

impl PacketMeta {
    /// The metadata of a new `len`-byte frame: its wire length (`u32::MAX`
    /// for a longer one), nothing else set.
    #[inline(always)]
    pub fn for_frame(len: usize) -> Self {
        PacketMeta {
            wire_len: u32::try_from(len).unwrap_or(u32::MAX),
            ..PacketMeta::default()
        }
    }

    /// The latest receive time a buffer holds (2^62 - 1 ns after the Unix
    /// epoch, in the year 2116); a later one is kept as this.
    pub const MAX_TIMESTAMP_NS: u64 = (1 << 62) - 1;

    /// Receive time in nanoseconds since the Unix epoch, when the backend
    /// knows it (0 otherwise).
    #[inline]
    pub fn timestamp_ns(&self) -> u64 {
        (u64::from(self.time_hi & TIME_HI) << 32) | u64::from(self.time_lo)
    }

    /// Sets [`Self::timestamp_ns`] (at most [`Self::MAX_TIMESTAMP_NS`]).
    #[inline]
    pub fn set_timestamp_ns(&mut self, ns: u64) {
        let ns = ns.min(Self::MAX_TIMESTAMP_NS);
        self.time_lo = ns as u32;
        self.time_hi = (self.time_hi & !TIME_HI) | (ns >> 32) as u32;
    }

    /// Tunnel ports: on receive, the VNI (VXLAN) or key (GRE; 0 without
    /// one) the frame came in with, `Some` on every frame a tunnel port
    /// receives and `None` on every other port's (a patch link clears it),
    /// so the first frame of a burst says whether the burst is a tunnel
    /// port's; on output, the key a `key=flow` tunnel port wraps the frame
    /// in (the low 32 bits of the flow's `tunnel_id`, all a VNI or GRE key
    /// holds; set when not 0, `None` is 0). Other ports ignore it. 32 bits,
    /// not the match field's 64, to keep the buffer in a cache line.
    #[inline]
    pub fn tunnel_id(&self) -> Option<u32> {
        (self.time_hi & TUNNEL_SET != 0).then_some(self.tunnel)
    }

    /// Sets [`Self::tunnel_id`].
    #[inline]
    pub fn set_tunnel_id(&mut self, id: Option<u32>) {
        self.tunnel = id.unwrap_or(0);
        self.time_hi = (self.time_hi & !TUNNEL_SET) | if id.is_some() { TUNNEL_SET } else { 0 };
    }

    /// A packet the control side injects (a packet-out's result): the
    /// port the worker sends it to, without running the pipeline. `None`
    /// on every received packet; a worker clears it when it sends one.
    #[inline]
    pub fn out_port(&self) -> Option<u32> {
        (self.time_hi & OUT_SET != 0).then_some(self.out)
    }

    /// Sets [`Self::out_port`].
    #[inline]
    pub fn set_out_port(&mut self, port: Option<u32>) {
        self.out = port.unwrap_or(0);
        self.time_hi = (self.time_hi & !OUT_SET) | if port.is_some() { OUT_SET } else { 0 };
    }

    /// [`Self::out_port`], cleared.
    #[inline]
    pub fn take_out_port(&mut self) -> Option<u32> {
        let port = self.out_port();
        self.set_out_port(None);
        port
    }
}

impl fmt::Debug for PacketMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketMeta")
            .field("in_port", &self.in_port)
            .field("timestamp_ns", &self.timestamp_ns())
            .field("wire_len", &self.wire_len)
            .field("queue_id", &self.queue_id)
            .field("tunnel_id", &self.tunnel_id())
            .field("out_port", &self.out_port())
            .finish()
    }
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

/// A packet in a `Vec<u8>` or a [`Lent`] region, with headroom in front,
/// and its metadata (see the module comment).
///
/// One cache line (64 bytes, aligned to 64): the storage is kept as raw
/// parts, not as a `Vec` or a [`Lent`] beside a tag, and is one of
///
/// - owned: `tag`'s address part is null, and `(ptr, end, word)` are the
///   pointer, length and capacity of a `Vec<u8>` the buffer owns (given
///   back to [`pool`] when it is dropped); `cap` is unused;
/// - lent: `tag`'s address part is a [`Lent`]'s owner word, and
///   `(ptr, cap, word, owner word)` are the base, capacity, token and owner
///   of a [`Lent`] the buffer owns (`Lent::into_raw`), with `end <= cap`.
///
/// In both, `start <= end <= MAX_STORAGE`, and bit `FLOOR` of `tag` is
/// the floor ([`PacketBuf::pad_to_floor`]).
#[repr(align(64))]
pub struct PacketBuf {
    /// The vector's pointer, or the lent region's base.
    ptr: NonNull<u8>,
    /// The vector's capacity, or the lent region's token.
    word: usize,
    /// The lent region's owner word (null for an owned vector), and
    /// [`FLOOR`].
    tag: *const u8,
    /// The lent region's capacity (at most [`MAX_STORAGE`]).
    cap: u32,
    /// Where the packet ends in the storage.
    end: u32,
    /// Where the packet starts in the storage (the headroom).
    start: u32,
    /// What travels with the packet (set by the backend, the dispatcher,
    /// the pipeline and the control side).
    pub meta: PacketMeta,
}

/// In a [`PacketBuf`]'s `tag`: the packet may not leave shorter than
/// [`MIN_FRAME_LEN`] (it was made from a frame at least that long); clear:
/// no floor. Bit 1, which an owner word leaves free ([`lent::LOW_BITS`]).
const FLOOR: usize = 2;
const _: () = assert!(FLOOR & lent::LOW_BITS == FLOOR && FLOOR & lent::SHARED == 0);

// SAFETY: a buffer's storage is an owned `Vec<u8>` (Send and Sync) or a
// `Lent` (Send and Sync, see its impls) kept as raw parts; `tag` is an
// owner word, a `Lent`'s part; nothing is tied to a thread.
unsafe impl Send for PacketBuf {}
// SAFETY: as for Send; shared references only read.
unsafe impl Sync for PacketBuf {}

/// The floor bit for a buffer made from a `len`-byte frame (see the module
/// comment).
#[inline(always)]
fn floor_bit(len: usize) -> usize {
    if len >= MIN_FRAME_LEN {
        FLOOR
    } else {
        0
    }
}

/// A value for `tag`: the owner word `owner` (null: owned) with the floor
/// bit `floor`.
#[inline(always)]
fn tag_of(owner: *const u8, floor: usize) -> *const u8 {
    owner.wrapping_add(floor)
}

impl Clone for PacketBuf {
    /// An owned copy with the same headroom and metadata (a lent region
    /// is never shared between two buffers).
    fn clone(&self) -> Self {
        let region = self.region();
        let mut v = room_for(region.len());
        v.extend_from_slice(region);
        PacketBuf::owned(v, self.start(), self.floor_bits(), self.meta)
    }
}

impl Drop for PacketBuf {
    #[inline]
    fn drop(&mut self) {
        if let Some(lent) = self.take_lent() {
            drop(lent);
        } else if self.word != 0 {
            pool::give(self.take_vec());
        }
    }
}

impl PartialEq for PacketBuf {
    /// Same bytes (headroom included), same offset, same floor (the
    /// metadata is not compared).
    fn eq(&self, other: &Self) -> bool {
        self.start == other.start
            && self.floor_bits() == other.floor_bits()
            && self.region() == other.region()
    }
}

impl Eq for PacketBuf {}

impl fmt::Debug for PacketBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketBuf")
            .field("data", &self.as_slice())
            .field("headroom", &self.start)
            .field("floor", &self.floor())
            .field("lent", &self.is_lent())
            .field("meta", &self.meta)
            .finish()
    }
}

impl PacketBuf {
    /// A buffer owning `v`, the packet at `v[start..]` (see [`MAX_STORAGE`]
    /// for a longer vector), with the floor bit `floor`.
    #[inline]
    fn owned(v: Vec<u8>, start: usize, floor: usize, meta: PacketMeta) -> Self {
        let mut b = PacketBuf {
            ptr: NonNull::dangling(),
            word: 0,
            tag: tag_of(core::ptr::null(), floor),
            cap: 0,
            end: 0,
            start: 0,
            meta,
        };
        b.put_vec(v, start);
        b
    }

    /// Takes out an owned buffer's vector, leaving it an empty one.
    #[inline]
    fn take_vec(&mut self) -> Vec<u8> {
        debug_assert!(!self.is_lent());
        // SAFETY: an owned buffer's (ptr, end, word) are the parts of a
        // vector it owns (the type's invariant); it is left holding none
        // (a dangling pointer, capacity 0), so the vector has one owner.
        let v = unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.end as usize, self.word) };
        self.ptr = NonNull::dangling();
        self.word = 0;
        self.end = 0;
        self.start = 0;
        v
    }

    /// Makes an empty owned buffer ([`Self::take_vec`], [`Self::take_lent`])
    /// own `v`, the packet at `v[start..]`. A vector longer than
    /// [`MAX_STORAGE`] is cut to it (no source makes one), and `start` to
    /// its end.
    #[inline]
    fn put_vec(&mut self, v: Vec<u8>, start: usize) {
        debug_assert!(!self.is_lent() && self.word == 0);
        let mut v = ManuallyDrop::new(v);
        v.truncate(MAX_STORAGE);
        // SAFETY: a vector's pointer is never null (dangling, not null,
        // without capacity).
        self.ptr = unsafe { NonNull::new_unchecked(v.as_mut_ptr()) };
        self.word = v.capacity();
        self.end = v.len() as u32;
        self.start = start.min(v.len()) as u32;
    }

    /// Takes out a lent buffer's region, leaving an empty owned buffer with
    /// the same floor; `None` for an owned buffer.
    #[inline(always)]
    fn take_lent(&mut self) -> Option<Lent> {
        let floor = self.floor_bits();
        let owner = NonNull::new(self.tag.wrapping_sub(floor).cast_mut())?;
        // SAFETY: a lent buffer's (ptr, cap, word, owner word) are the
        // parts of a `Lent` it owns (the type's invariant); it is left
        // owned and empty, so the `Lent` has one owner.
        let lent = unsafe { Lent::from_raw(self.ptr, self.cap as usize, self.word, owner) };
        self.ptr = NonNull::dangling();
        self.word = 0;
        self.tag = tag_of(core::ptr::null(), floor);
        self.cap = 0;
        self.end = 0;
        self.start = 0;
        Some(lent)
    }

    /// The floor bit ([`FLOOR`] or 0).
    #[inline(always)]
    fn floor_bits(&self) -> usize {
        self.tag as usize & FLOOR
    }

    /// The shortest the packet may leave: [`MIN_FRAME_LEN`] if the buffer
    /// was made from a frame at least that long, else 0.
    #[inline]
    fn floor(&self) -> usize {
        if self.floor_bits() != 0 {
            MIN_FRAME_LEN
        } else {
            0
        }
    }

    /// Where the packet starts in the storage.
    #[inline(always)]
    fn start(&self) -> usize {
        self.start as usize
    }

    /// Copies `pkt` into a new buffer with `headroom` bytes in front (a
    /// frame longer than [`MAX_STORAGE`] allows is cut).
    pub fn with_headroom(pkt: &[u8], headroom: usize) -> Self {
        let headroom = headroom.min(MAX_STORAGE);
        let pkt = &pkt[..pkt.len().min(MAX_STORAGE - headroom)];
        let mut data = room_for(headroom + pkt.len());
        data.resize(headroom, 0);
        data.extend_from_slice(pkt);
        PacketBuf::owned(data, headroom, floor_bit(pkt.len()), meta_for(pkt.len()))
    }

    /// An empty owned buffer with `headroom` bytes in front and room for a
    /// frame of `capacity` bytes after it.
    pub fn new(headroom: usize, capacity: usize) -> Self {
        let headroom = headroom.min(MAX_STORAGE);
        let mut data = room_for(headroom.saturating_add(capacity));
        data.resize(headroom, 0);
        PacketBuf::owned(data, headroom, 0, PacketMeta::default())
    }

    /// Copies `pkt` into a new buffer with [`DEFAULT_HEADROOM`].
    pub fn from_slice(pkt: &[u8]) -> Self {
        Self::with_headroom(pkt, DEFAULT_HEADROOM)
    }

    /// Takes a vector holding a packet (no headroom: the first push
    /// reallocates; one longer than [`MAX_STORAGE`] is cut).
    pub fn from_vec(v: Vec<u8>) -> Self {
        let len = v.len().min(MAX_STORAGE);
        PacketBuf::owned(v, 0, floor_bit(len), meta_for(len))
    }

    /// The storage up to the packet's end (headroom included).
    #[inline]
    fn region(&self) -> &[u8] {
        // SAFETY: owned, `ptr` holds `end` initialised bytes (a vector's
        // pointer and length); lent, `end <= cap` bytes of the region,
        // which is the buffer's until its `Lent` is dropped (the type's
        // invariant).
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.end as usize) }
    }

    /// The storage up to the packet's end, writable.
    #[inline]
    fn region_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `region`; `&mut self` makes this the only live
        // reference into the storage.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.end as usize) }
    }

    /// Where the packet ends in the storage.
    #[inline]
    fn end(&self) -> usize {
        self.end as usize
    }

    /// The packet bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        let s = self.start();
        &self.region()[s..]
    }

    /// The packet bytes, mutable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let s = self.start();
        &mut self.region_mut()[s..]
    }

    /// Packet length.
    #[inline]
    pub fn len(&self) -> usize {
        self.end() - self.start()
    }

    /// True when the bytes are in a region lent by a backend.
    #[inline]
    pub fn is_lent(&self) -> bool {
        self.tag as usize & !lent::LOW_BITS != 0
    }

    /// Replaces the storage with `v` (the packet at `v[start..]`): a lent
    /// region goes back to its owner, an owned vector to the pool.
    fn replace_storage(&mut self, v: Vec<u8>, start: usize) {
        if let Some(lent) = self.take_lent() {
            drop(lent);
        } else {
            pool::give(self.take_vec());
        }
        self.put_vec(v, start);
    }

    /// Moves a lent packet into an owned vector with `headroom` in front
    /// (the region goes back to its owner); an owned one stays as it is.
    fn own(&mut self, headroom: usize) {
        if self.is_lent() {
            let headroom = headroom.min(MAX_STORAGE - self.len());
            let mut v = room_for(headroom + self.len() + 4);
            v.resize(headroom, 0);
            v.extend_from_slice(self.as_slice());
            self.replace_storage(v, headroom);
        }
    }

    /// True for an empty packet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free bytes in front of the packet.
    pub fn headroom(&self) -> usize {
        self.start()
    }

    /// The packet as a vector (moves the bytes down if there is headroom;
    /// copies them out of a lent region).
    pub fn into_vec(mut self) -> Vec<u8> {
        if self.is_lent() {
            return self.as_slice().to_vec();
        }
        let start = self.start();
        let mut v = self.take_vec();
        v.drain(..start);
        v
    }

    /// Appends zeros up to the shortest length the frame may leave with
    /// (see the module comment): call it when the frame is emitted.
    #[inline]
    pub fn pad_to_floor(&mut self) {
        self.pad_to_floor_from(self.len());
    }

    /// [`PacketBuf::pad_to_floor`] given the packet's length `len`
    /// ([`PacketBuf::len`], read once by a caller that needs it too);
    /// returns the length it leaves with.
    #[inline]
    pub fn pad_to_floor_from(&mut self, len: usize) -> usize {
        if len < self.floor() {
            self.pad();
            return self.len();
        }
        len
    }

    #[cold]
    fn pad(&mut self) {
        // Zeros in the region's tailroom, else in an owned copy.
        let n = self.floor().saturating_sub(self.len());
        self.push_back(n).fill(0);
    }

    /// The length the frame leaves with once padded ([`Self::pad_to_floor`]).
    #[inline]
    pub fn padded_len(&self) -> usize {
        self.len().max(self.floor())
    }

    /// A packet in the lent region `mem`, at `mem.bytes()[start..end]`
    /// (bounds past the region, or past [`MAX_STORAGE`], are cut to it);
    /// the bytes before `start` are headroom. The floor is set from the
    /// length as the copying constructors set it.
    #[inline]
    pub fn from_lent(mem: Lent, start: usize, end: usize) -> Self {
        let (base, cap, token, owner) = mem.into_raw();
        let cap = cap.min(MAX_STORAGE);
        let (start, end) = lent_bounds(start, end, cap);
        PacketBuf {
            ptr: base,
            word: token,
            tag: tag_of(owner.as_ptr(), floor_bit(end - start)),
            cap: cap as u32,
            end: end as u32,
            start: start as u32,
            meta: meta_for(end - start),
        }
    }

    /// Opens `n` bytes at packet offset `at` (`at <= len`) by moving the
    /// first `at` bytes into the headroom; returns the gap's range in the
    /// packet.
    fn open_gap(&mut self, at: usize, n: usize) -> core::ops::Range<usize> {
        if self.start() < n {
            let extra = n + DEFAULT_HEADROOM;
            let region = self.region();
            let mut v = room_for(region.len() + extra);
            v.resize(extra, 0);
            v.extend_from_slice(region);
            // A lent region goes back to its owner here.
            let start = self.start() + extra;
            self.replace_storage(v, start);
        }
        let s = self.start();
        self.region_mut().copy_within(s..s + at, s - n);
        self.start = (s - n) as u32;
        at..at + n
    }

    /// Removes `n` bytes at packet offset `at` (`at + n <= len`) by moving
    /// the first `at` bytes forward.
    fn close_gap(&mut self, at: usize, n: usize) {
        let s = self.start();
        self.region_mut().copy_within(s..s + at, s + n);
        self.start = (s + n) as u32;
    }

    /// OpenFlow push_vlan: pushes a new outermost tag with TPID `tpid`
    /// (0x8100 or 0x88a8).
    pub fn push_vlan(&mut self, tpid: u16) -> Result<(), ActionError> {
        if !ethertype::is_vlan(tpid) {
            return Err(ActionError::BadArgument);
        }
        let p = self.as_slice();
        if p.len() < 14 {
            return Err(ActionError::Truncated);
        }
        let tci = if ethertype::is_vlan(be16(p, 12)) && p.len() >= 16 {
            be16(p, 14) & 0xefff // VID and PCP; DEI starts clear
        } else {
            0
        };
        let g = self.open_gap(12, 4);
        let b = self.as_mut_slice();
        put16(b, g.start, tpid);
        put16(b, g.start + 2, tci);
        Ok(())
    }

    /// OpenFlow pop_vlan: removes the outermost tag.
    pub fn pop_vlan(&mut self) -> Result<(), ActionError> {
        let p = self.as_slice();
        if p.len() < 14 || !ethertype::is_vlan(be16(p, 12)) {
            return Err(if p.len() < 14 {
                ActionError::Truncated
            } else {
                ActionError::MissingHeader
            });
        }
        if p.len() < 18 {
            return Err(ActionError::Truncated);
        }
        self.close_gap(12, 4);
        Ok(())
    }

    /// OpenFlow push_mpls: pushes a new outermost label; `ethertype` is
    /// 0x8847 or 0x8848.
    pub fn push_mpls(&mut self, ethertype: u16) -> Result<(), ActionError> {
        let k = FlowKey::parse(self.as_slice());
        self.push_mpls_with_key(ethertype, &k)
    }

    /// [`PacketBuf::push_mpls`] with the packet's key already parsed (`k`
    /// must describe the current bytes).
    pub fn push_mpls_with_key(&mut self, ethertype: u16, k: &FlowKey) -> Result<(), ActionError> {
        if !ethertype::is_mpls(ethertype) {
            return Err(ActionError::BadArgument);
        }
        if k.packet_len as usize != self.len() {
            return Err(ActionError::Truncated);
        }
        if !k.has(field::ETH_TYPE) {
            return Err(ActionError::Truncated);
        }
        let lse = if k.has(field::MPLS_LABEL) {
            // Copy label, TC and TTL from the current outer label; BOS 0.
            be32(self.as_slice(), k.l3_offset as usize) & !0x100
        } else {
            let ttl = if k.has(field::IPV4_SRC) || k.has(field::IPV6_SRC) {
                k.ip_ttl
            } else {
                0
            };
            0x100 | u32::from(ttl)
        };
        let et_off = k.ethertype_offset as usize;
        let g = self.open_gap(et_off + 2, 4);
        let b = self.as_mut_slice();
        put32(b, g.start, lse);
        put16(b, et_off, ethertype);
        Ok(())
    }

    /// OpenFlow pop_mpls: removes the outermost label and sets the
    /// EtherType to `ethertype`.
    pub fn pop_mpls(&mut self, ethertype: u16) -> Result<(), ActionError> {
        let k = FlowKey::parse(self.as_slice());
        self.pop_mpls_with_key(ethertype, &k)
    }

    /// [`PacketBuf::pop_mpls`] with the packet's key already parsed (`k`
    /// must describe the current bytes).
    pub fn pop_mpls_with_key(&mut self, ethertype: u16, k: &FlowKey) -> Result<(), ActionError> {
        if k.packet_len as usize != self.len() {
            return Err(ActionError::Truncated);
        }
        if !k.has(field::MPLS_LABEL) {
            return Err(
                if k.has(field::ETH_TYPE) && !ethertype::is_mpls(k.eth_type) {
                    ActionError::MissingHeader
                } else {
                    ActionError::Truncated
                },
            );
        }
        let et_off = k.ethertype_offset as usize;
        self.close_gap(et_off + 2, 4);
        // The EtherType moved 4 bytes forward with the bytes before it.
        put16(self.as_mut_slice(), et_off, ethertype);
        Ok(())
    }

    /// OpenFlow push_pbb: encapsulates the frame behind a backbone header;
    /// `ethertype` must be 0x88e7.
    pub fn push_pbb(&mut self, ethertype: u16) -> Result<(), ActionError> {
        if ethertype != ethertype::PBB {
            return Err(ActionError::BadArgument);
        }
        let k = FlowKey::parse(self.as_slice());
        if self.len() < 14 {
            return Err(ActionError::Truncated);
        }
        let isid = if k.has(field::PBB_ISID) {
            k.pbb_isid
        } else {
            0
        };
        let pcp = if k.has(field::VLAN_PCP) {
            k.vlan_pcp
        } else {
            0
        };
        let tci = (u32::from(pcp & 7) << 29) | (isid & 0x00ff_ffff);
        let g = self.open_gap(12, 18);
        let b = self.as_mut_slice();
        put16(b, g.start, ethertype::PBB);
        put32(b, g.start + 2, tci);
        b.copy_within(0..12, g.start + 6);
        Ok(())
    }

    /// OpenFlow pop_pbb: removes the backbone header, leaving the customer
    /// frame (C-DA, C-SA, ...).
    pub fn pop_pbb(&mut self) -> Result<(), ActionError> {
        let k = FlowKey::parse(self.as_slice());
        if !k.has(field::PBB_ISID) {
            return Err(if k.has(field::ETH_TYPE) && k.eth_type != ethertype::PBB {
                ActionError::MissingHeader
            } else {
                ActionError::Truncated
            });
        }
        let itag_end = k.l3_offset as usize + 4;
        if self.len() < itag_end + 14 {
            return Err(ActionError::Truncated);
        }
        self.close_gap(0, itag_end);
        Ok(())
    }

    // What the ports and threads of the dataplane use.

    /// The frame's bytes ([`Self::as_slice`]).
    #[inline]
    pub fn data(&self) -> &[u8] {
        self.as_slice()
    }

    /// The frame's bytes, writable ([`Self::as_mut_slice`]).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }

    /// Bytes free after the frame in its storage.
    pub fn tailroom(&self) -> usize {
        if self.is_lent() {
            (self.cap - self.end) as usize
        } else {
            self.word - self.end()
        }
    }

    /// A buffer over a ring slot lent by `lender`: the frame is `len`
    /// bytes at offset `head` of the `cap`-byte region at `ptr` (see
    /// [`Lent::shared`]).
    ///
    /// # Safety
    ///
    /// - `ptr..ptr+cap` is valid for reads and writes, and nothing else
    ///   reads or writes it, until `lender`'s `release(token)` is called
    ///   (which the buffer does once, when its region is dropped);
    /// - `head + len <= cap`.
    pub unsafe fn from_slot(
        ptr: NonNull<u8>,
        cap: usize,
        head: usize,
        len: usize,
        lender: SharedLender,
        token: usize,
    ) -> Self {
        debug_assert!(head.checked_add(len).is_some_and(|end| end <= cap));
        Self::from_lent(
            Lent::shared(ptr, cap, token, lender),
            head,
            head.saturating_add(len),
        )
    }

    /// A buffer over the region `mem`: the frame is `len` bytes at offset
    /// `head` ([`Self::from_lent`] by length).
    #[inline]
    pub fn from_frame(mem: Lent, head: usize, len: usize) -> Self {
        Self::from_lent(mem, head, head.saturating_add(len))
    }

    /// Appends to `v` a buffer over a static owner's region, as
    /// [`Lent::new`]`(base, cap, token, owner)` and [`Self::from_frame`]
    /// `(head, len)` would make it, but written field by field where it
    /// lands. A buffer made first and then pushed was written to the stack
    /// and copied in 16-byte words that read those stores back before they
    /// had left the store buffer: a stall of most of a DPDK receive's
    /// time (`perf annotate`).
    ///
    /// # Safety
    ///
    /// As [`Lent::new`].
    #[inline(always)]
    pub unsafe fn push_lent_frame(
        v: &mut Vec<PacketBuf>,
        base: NonNull<u8>,
        cap: usize,
        token: usize,
        owner: &'static LentOwner,
        head: usize,
        len: usize,
    ) {
        let cap = cap.min(MAX_STORAGE);
        let (start, end) = lent_bounds(head, head.saturating_add(len), cap);
        v.reserve(1);
        let at = v.len();
        // SAFETY: `reserve` made room for one more; every field of the
        // slot is written before the length covers it, and nothing reads
        // the slot before. The fields are those `from_lent` makes of
        // `Lent::new(base, cap, token, owner)`: the region's duty is the
        // caller's (`Lent::new`) until the buffer takes it.
        unsafe {
            let p = v.as_mut_ptr().add(at);
            core::ptr::addr_of_mut!((*p).ptr).write(base);
            core::ptr::addr_of_mut!((*p).word).write(token);
            core::ptr::addr_of_mut!((*p).tag).write(tag_of(
                lent::static_owner(owner).as_ptr(),
                floor_bit(end - start),
            ));
            core::ptr::addr_of_mut!((*p).cap).write(cap as u32);
            core::ptr::addr_of_mut!((*p).end).write(end as u32);
            core::ptr::addr_of_mut!((*p).start).write(start as u32);
            core::ptr::addr_of_mut!((*p).meta).write(meta_for(end - start));
            v.set_len(at + 1);
        }
    }

    /// A lent buffer taken apart: the region, the frame's offset in it and
    /// its length (the metadata is dropped); an owned buffer is handed back
    /// as it is (`Err`).
    #[inline]
    pub fn into_frame(self) -> Result<(Lent, usize, usize), PacketBuf> {
        if !self.is_lent() {
            return Err(self);
        }
        let me = ManuallyDrop::new(self);
        let owner = me.tag.wrapping_sub(me.floor_bits()).cast_mut();
        // SAFETY: a lent buffer's (ptr, cap, word, owner word) are the
        // parts of a `Lent` it owns, whose owner word is not null; `me` is
        // never dropped, so the `Lent` has one owner.
        let mem = unsafe {
            Lent::from_raw(
                me.ptr,
                me.cap as usize,
                me.word,
                NonNull::new_unchecked(owner),
            )
        };
        Ok((mem, me.start(), me.len()))
    }

    /// Whether the bytes are in a ring slot lent through a
    /// [`BufferLender`] ([`Self::from_slot`]).
    #[inline]
    pub fn in_slot(&self) -> bool {
        // Only a lent buffer's owner word has the bit set.
        self.tag as usize & lent::SHARED != 0
    }

    /// A frame in a ring slot ([`Self::in_slot`]) copied into pooled
    /// storage with `headroom` in front, the slot given back at once;
    /// any other buffer is left as it is.
    #[inline]
    pub fn copy_out_of_slot(&mut self, headroom: usize) {
        if self.in_slot() {
            self.own(headroom);
        }
    }

    /// Copies a lent frame into owned storage (with at least
    /// [`DEFAULT_HEADROOM`]) and gives the region back. Does nothing for
    /// owned buffers.
    pub fn make_owned(&mut self) {
        self.own(self.start().max(DEFAULT_HEADROOM));
    }

    /// Sets the floor ([`Self::pad_to_floor`]) from the packet's length
    /// now, as a constructor does: the pipeline takes a packet with the
    /// length it arrived with.
    #[inline]
    pub fn reset_floor(&mut self) {
        let owner = self.tag.wrapping_sub(self.floor_bits());
        self.tag = tag_of(owner, floor_bit(self.len()));
    }

    /// Grows the frame by `n` bytes at the front and returns them (zeroed
    /// only if freshly allocated; otherwise they hold stale bytes the
    /// caller overwrites). Moves the frame to a larger owned buffer (one
    /// copy) when the headroom is too small.
    pub fn push_front(&mut self, n: usize) -> &mut [u8] {
        self.open_gap(0, n);
        &mut self.as_mut_slice()[..n]
    }

    /// Removes `n` bytes from the front of the frame (they become headroom).
    pub fn pull_front(&mut self, n: usize) -> Result<(), BufError> {
        let len = self.len();
        if n > len {
            return Err(BufError::TooShort { wanted: n, len });
        }
        self.start += n as u32;
        Ok(())
    }

    /// Grows the frame by `n` bytes at the back and returns them (zeroed
    /// in owned storage; stale bytes of a lent region otherwise). A lent
    /// frame without the room moves to an owned buffer (one copy).
    pub fn push_back(&mut self, n: usize) -> &mut [u8] {
        let at = self.len();
        if self.is_lent() && self.tailroom() >= n {
            self.end += n as u32;
            return &mut self.as_mut_slice()[at..];
        }
        self.own(self.start());
        let start = self.start();
        let mut v = self.take_vec();
        let want = v.len() + n;
        v.resize(want, 0);
        self.put_vec(v, start);
        &mut self.as_mut_slice()[at..]
    }

    /// Shortens the frame to `len` bytes (no effect if it is already
    /// shorter).
    pub fn truncate(&mut self, len: usize) {
        // A vector of bytes is truncated by its length alone.
        self.end = (self.start() + len.min(self.len())) as u32;
    }

    /// Inserts an 802.1Q/802.1ad tag (`tpid`, `tci`) after the Ethernet
    /// addresses (for backends whose kernel stripped it into metadata).
    /// Frames shorter than the two addresses are left alone.
    pub fn insert_vlan_tag(&mut self, tpid: u16, tci: u16) {
        if self.len() < 12 {
            return;
        }
        let g = self.open_gap(12, 4);
        let b = self.as_mut_slice();
        put16(b, g.start, tpid);
        put16(b, g.start + 2, tci);
    }

    /// Appends a copy of `bytes` to the frame.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.push_back(bytes.len()).copy_from_slice(bytes);
    }
}

/// A lent frame's bounds `start..end` cut to a region of `cap` bytes.
#[inline]
fn lent_bounds(start: usize, end: usize, cap: usize) -> (usize, usize) {
    let end = end.min(cap);
    (start.min(end), end)
}

/// The metadata of a new buffer holding a `len`-byte frame.
#[inline(always)]
fn meta_for(len: usize) -> PacketMeta {
    PacketMeta::for_frame(len)
}

impl AsRef<[u8]> for PacketBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsMut<[u8]> for PacketBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixup::verify_checksums;
    use crate::testutil::*;

    #[test]
    fn with_headroom_keeps_headroom_and_bytes() {
        let mut b = PacketBuf::with_headroom(&[1, 2, 3], 8);
        b.as_mut_slice()[0] = 9;
        assert_eq!((b.headroom(), b.as_slice()), (8, &[9, 2, 3][..]));
    }

    #[test]
    fn push_vlan_untagged_and_tagged() {
        let p = eth_ipv4_tcp();
        let mut b = PacketBuf::from_slice(&p);
        let room = b.headroom();
        b.push_vlan(0x8100).unwrap();
        assert_eq!(b.headroom(), room - 4);
        assert_eq!(b.as_slice(), &with_tags(&p, &[(0x8100, 0)])[..]);
        let k = FlowKey::parse(b.as_slice());
        assert_eq!(k.vlan_vid, 0x1000);
        assert!(k.has(field::TCP_SRC));
        assert_eq!(verify_checksums(b.as_slice()), Ok(()));
        // Push over a tag copies VID and PCP (not DEI).
        let t = with_tags(&p, &[(0x8100, 0xb123)]);
        let mut b = PacketBuf::from_slice(&t);
        b.push_vlan(0x88a8).unwrap();
        assert_eq!(
            b.as_slice(),
            &with_tags(&p, &[(0x88a8, 0xa123), (0x8100, 0xb123)])[..]
        );
        b.pop_vlan().unwrap();
        assert_eq!(b.as_slice(), &t[..]);
        b.pop_vlan().unwrap();
        assert_eq!(b.as_slice(), &p[..]);
        assert_eq!(b.pop_vlan(), Err(ActionError::MissingHeader));
        assert_eq!(b.push_vlan(0x0800), Err(ActionError::BadArgument));
        assert_eq!(b.as_slice(), &p[..]);
    }

    #[test]
    fn push_mpls_initialisation() {
        // From IPv4: label 0, BOS, TTL from IP (64).
        let p = eth_ipv4_udp();
        let mut b = PacketBuf::from_slice(&p);
        b.push_mpls(0x8847).unwrap();
        let k = FlowKey::parse(b.as_slice());
        assert_eq!(k.eth_type, 0x8847);
        assert_eq!(
            (k.mpls_label, k.mpls_tc, k.mpls_bos, k.mpls_ttl),
            (0, 0, 1, 64)
        );
        assert_eq!(&b.as_slice()[18..], &p[14..]);
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(b.as_slice(), &p[..]);
        // From IPv6: hop limit 255.
        let mut b = PacketBuf::from_slice(&eth_ipv6_udp());
        b.push_mpls(0x8848).unwrap();
        let k = FlowKey::parse(b.as_slice());
        assert_eq!((k.eth_type, k.mpls_bos, k.mpls_ttl), (0x8848, 1, 255));
        // Over MPLS: copy label/TC/TTL, BOS 0.
        let m = eth_mpls2_ipv4();
        let mut b = PacketBuf::from_slice(&m);
        b.push_mpls(0x8847).unwrap();
        let k = FlowKey::parse(b.as_slice());
        assert_eq!(
            (k.mpls_label, k.mpls_tc, k.mpls_bos, k.mpls_ttl),
            (100, 3, 0, 20)
        );
        assert_eq!(&b.as_slice()[18..], &m[14..]);
        b.pop_mpls(0x8847).unwrap();
        assert_eq!(b.as_slice(), &m[..]);
        // Non-IP: TTL 0. ARP.
        let mut b = PacketBuf::from_slice(&eth_arp());
        b.push_mpls(0x8847).unwrap();
        assert_eq!(FlowKey::parse(b.as_slice()).mpls_ttl, 0);
        // Behind VLAN tags.
        let v = with_tags(&eth_ipv4_udp(), &[(0x8100, 0x0064)]);
        let mut b = PacketBuf::from_slice(&v);
        b.push_mpls(0x8847).unwrap();
        let k = FlowKey::parse(b.as_slice());
        assert_eq!((k.vlan_vid, k.eth_type, k.l3_offset), (0x1064, 0x8847, 18));
        assert_eq!(&b.as_slice()[..16], &v[..16]);
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(b.as_slice(), &v[..]);
        assert_eq!(b.pop_mpls(0x0800), Err(ActionError::MissingHeader));
        assert_eq!(b.push_mpls(0x0800), Err(ActionError::BadArgument));
    }

    #[test]
    fn pop_mpls_to_ip_is_parseable() {
        let mut b = PacketBuf::from_slice(&eth_mpls1_ipv4());
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(b.padded_len(), 60);
        b.pad_to_floor();
        // 56 bytes of frame, padded back to the 60 the frame had.
        let want = eth_ipv4_udp();
        assert_eq!(&b.as_slice()[..want.len()], &want[..]);
        assert_eq!(b.as_slice()[want.len()..], [0; 4]);
        assert_eq!(verify_checksums(b.as_slice()), Ok(()));
    }

    #[test]
    fn push_pop_pbb() {
        let p = with_tags(&eth_ipv4_udp(), &[(0x8100, 0xa005)]);
        let mut b = PacketBuf::from_slice(&p);
        b.push_pbb(0x88e7).unwrap();
        let s = b.as_slice();
        assert_eq!(s.len(), p.len() + 18);
        assert_eq!(&s[..12], &p[..12]);
        assert_eq!(be16(s, 12), 0x88e7);
        assert_eq!(be32(s, 14), 5 << 29); // I-PCP from the VLAN PCP, I-SID 0
        assert_eq!(&s[18..30], &p[..12]); // C-DA, C-SA
        assert_eq!(&s[30..], &p[12..]); // the customer's tags and payload
        let k = FlowKey::parse(s);
        assert_eq!((k.eth_type, k.pbb_isid, k.vlan_vid), (0x88e7, 0, 0));
        b.pop_pbb().unwrap();
        assert_eq!(b.as_slice(), &p[..]);
        // Push over PBB copies the I-SID.
        let q = eth_pbb();
        let mut b = PacketBuf::from_slice(&q);
        b.push_pbb(0x88e7).unwrap();
        assert_eq!(FlowKey::parse(b.as_slice()).pbb_isid, 0x0abcde);
        b.pop_pbb().unwrap();
        assert_eq!(b.as_slice(), &q[..]);
        b.pop_pbb().unwrap();
        assert_eq!(b.as_slice()[..12], [[0xc1u8; 6], [0xc2; 6]].concat()[..]);
        assert_eq!(b.len(), 56);
        b.pad_to_floor();
        // The 56-byte customer frame, padded to Ethernet's 60.
        let inner = eth_ipv4_udp();
        assert_eq!(&b.as_slice()[12..inner.len()], &inner[12..]);
        assert_eq!(b.as_slice()[inner.len()..], [0; 4]);
        assert_eq!(b.pop_pbb(), Err(ActionError::MissingHeader));
        assert_eq!(b.push_pbb(0x8100), Err(ActionError::BadArgument));
    }

    #[test]
    fn headroom_runs_out_and_grows() {
        let p = eth_ipv4_tcp();
        let mut b = PacketBuf::from_vec(p.clone());
        assert_eq!(b.headroom(), 0);
        for _ in 0..30 {
            b.push_vlan(0x8100).unwrap();
        }
        assert_eq!(b.len(), p.len() + 120);
        for _ in 0..30 {
            b.pop_vlan().unwrap();
        }
        assert_eq!(b.clone().into_vec(), p);
        assert!(!b.is_empty());
    }

    /// Emission pads a frame that was at least 60 bytes and lost bytes to
    /// a pop back to 60, and leaves a runt or a frame still long enough
    /// alone; pop-then-push is not padded in between.
    #[test]
    fn pops_keep_the_ethernet_minimum() {
        // Ethernet/MPLS/IPv4/ICMP echo, 54 bytes and 6 of padding.
        let icmp: Vec<u8> = [
            &[0x22; 6][..],
            &[
                0x12, 0x11, 0x11, 0x11, 0x11, 0x11, 0x88, 0x47, 0x00, 0x06, 0x47, 0x40,
            ],
            &[0x45, 0x20, 0x00, 0x24, 0, 0, 0, 0, 0x40, 0x01, 0xdb, 0x4a],
            &[
                192, 168, 10, 10, 192, 168, 20, 20, 8, 0, 0x59, 0xda, 0, 0, 0, 0,
            ],
            &[
                0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 0, 0, 0, 0, 0,
            ],
        ]
        .concat();
        assert_eq!(icmp.len(), MIN_FRAME_LEN);
        let mut b = PacketBuf::from_slice(&icmp);
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(b.len(), 56);
        let mut again = b.clone();
        again.push_vlan(0x8100).unwrap();
        again.pad_to_floor();
        assert_eq!(again.len(), MIN_FRAME_LEN);
        b.pad_to_floor();
        assert_eq!(b.len(), MIN_FRAME_LEN);
        assert_eq!(b.as_slice()[12..14], [0x08, 0x00]);
        assert_eq!(b.as_slice()[14..56], icmp[18..60]);
        assert_eq!(b.as_slice()[56..], [0; 4]);
        assert_eq!(verify_checksums(b.as_slice()), Ok(()));
        // A frame that arrived shorter is not padded.
        let mut r = PacketBuf::from_slice(&icmp[..56]);
        r.pop_mpls(0x0800).unwrap();
        r.pad_to_floor();
        assert_eq!(r.as_slice(), &b.as_slice()[..52]);
        let mut r = PacketBuf::from_slice(&icmp[..56]);
        r.push_vlan(0x8100).unwrap();
        r.pop_vlan().unwrap();
        assert_eq!(r.as_slice(), &icmp[..56]);
        // Long enough after the pop: nothing appended.
        let t = with_tags(&eth_ipv4_tcp(), &[(0x8100, 0x0064)]);
        let mut v = PacketBuf::from_slice(&t);
        v.pop_vlan().unwrap();
        v.pad_to_floor();
        assert_eq!(v.len(), t.len() - 4);
    }

    #[test]
    // Owned storage only: no unsafe code on this path for Miri to check
    // (it spent 45 of the test command's seconds here).
    #[cfg_attr(miri, ignore)]
    fn truncated_prefixes_never_panic() {
        type Act = fn(&mut PacketBuf) -> Result<(), ActionError>;
        let acts: [Act; 6] = [
            |b| b.push_vlan(0x8100),
            |b| b.pop_vlan(),
            |b| b.push_mpls(0x8847),
            |b| b.pop_mpls(0x0800),
            |b| b.push_pbb(0x88e7),
            |b| b.pop_pbb(),
        ];
        for (name, p) in samples() {
            for n in 0..=p.len() {
                for (i, act) in acts.iter().enumerate() {
                    let mut b = PacketBuf::from_slice(&p[..n]);
                    match act(&mut b) {
                        // A failed action leaves the packet alone.
                        Err(_) => assert_eq!(b.as_slice(), &p[..n], "{name} {n} {i}"),
                        Ok(()) => assert!(n >= 14, "{name} {n} {i}"),
                    }
                }
            }
        }
    }

    #[test]
    fn a_popped_minimum_frame_pads_back_and_a_runt_keeps_no_floor() {
        // A tagged minimum-size frame: after the tag is popped it leaves
        // padded back to 60, the headroom grown by the tag.
        let mut t = with_tags(&eth_ipv4_tcp(), &[(0x8100, 5)]);
        t.truncate(MIN_FRAME_LEN);
        let mut copied = PacketBuf::with_headroom(&t, 16);
        assert_eq!((copied.headroom(), copied.as_slice()), (16, &t[..]));
        copied.pop_vlan().unwrap();
        copied.pad_to_floor();
        assert_eq!(copied.len(), MIN_FRAME_LEN);
        assert_eq!(copied.headroom(), 20);
        // A runt keeps no floor.
        let mut short = PacketBuf::with_headroom(&[1, 2, 3], 2);
        assert_eq!(short.as_slice(), &[1, 2, 3]);
        short.pad_to_floor();
        assert_eq!(short.len(), 3);
    }

    mod lent {
        use super::super::*;
        use crate::testutil::*;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Mutex;

        /// Tokens given back, for one test at a time.
        static RELEASED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        static SERIAL: Mutex<()> = Mutex::new(());

        fn give_back(token: usize) {
            CALLS.fetch_add(1, Ordering::SeqCst);
            RELEASED.lock().unwrap().push(token);
        }

        static OWNER: LentOwner = LentOwner {
            name: "test",
            release: give_back,
        };
        static OTHER: LentOwner = LentOwner {
            name: "other",
            release: give_back,
        };

        fn lend(region: &mut [u8], token: usize) -> Lent {
            // SAFETY: every test keeps `region` alive and untouched until
            // the Lent (or the buffer holding it) is dropped or its token
            // taken back.
            unsafe {
                Lent::new(
                    NonNull::new(region.as_mut_ptr()).unwrap(),
                    region.len(),
                    token,
                    &OWNER,
                )
            }
        }

        fn released() -> Vec<usize> {
            std::mem::take(&mut *RELEASED.lock().unwrap())
        }

        #[test]
        fn a_frame_pushed_in_place_is_the_frame_made_and_pushed() {
            let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
            released();
            let mut r1 = vec![5u8; 128];
            let mut r2 = r1.clone();
            let mut v = Vec::new();
            for (head, len) in [(64, 60), (10, 20), (100, 60)] {
                v.clear();
                released();
                let made = PacketBuf::from_frame(lend(&mut r1, 1), head, len);
                let base = NonNull::new(r2.as_mut_ptr()).unwrap();
                // SAFETY: r2 outlives the buffer, untouched meanwhile.
                unsafe { PacketBuf::push_lent_frame(&mut v, base, 128, 2, &OWNER, head, len) };
                let pushed = &v[0];
                assert_eq!(pushed.as_slice(), made.as_slice(), "{head}+{len}");
                assert_eq!(pushed.headroom(), made.headroom());
                assert_eq!(pushed.meta, made.meta);
                assert_eq!(pushed.floor(), made.floor());
                assert!(pushed.is_lent() && pushed.in_slot() == made.in_slot());
                drop(made);
                v.clear();
                assert_eq!(released(), vec![1, 2], "each region went back once");
            }
        }

        #[test]
        fn pushes_within_the_headroom_stay_in_the_region() {
            let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
            released();
            let frame = with_tags(&eth_ipv4_tcp(), &[(0x8100, 7)]);
            let mut region = vec![0u8; 256];
            region[64..64 + frame.len()].copy_from_slice(&frame);
            let mut b = PacketBuf::from_lent(lend(&mut region, 9), 64, 64 + frame.len());
            assert!(b.is_lent());
            let mut owned = PacketBuf::with_headroom(&frame, 64);
            for p in [&mut b, &mut owned] {
                p.pop_vlan().unwrap();
                p.push_mpls(0x8847).unwrap();
                p.push_vlan(0x8100).unwrap();
            }
            assert!(b.is_lent(), "no push needed more than the headroom");
            assert_eq!(b.as_slice(), owned.as_slice());
            assert_eq!(b, owned.clone(), "equal to its owned twin");
            let c = b.clone();
            assert!(!c.is_lent() && c.as_slice() == b.as_slice());
            let Ok((mem, start, len)) = b.into_frame() else {
                panic!("a lent frame expected");
            };
            assert!(mem.is_from(&OWNER) && !mem.is_from(&OTHER));
            assert_eq!((start, len), (60, owned.len()));
            assert_eq!(&mem.bytes()[start..start + len], owned.as_slice());
            assert_eq!(mem.into_token(), 9);
            assert!(
                released().is_empty(),
                "handing the token back releases nothing"
            );
            assert_eq!(
                &region[60..60 + owned.len()],
                owned.as_slice(),
                "written in place"
            );
        }

        #[test]
        fn a_push_past_the_headroom_copies_once_and_releases_the_region() {
            let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
            released();
            let frame = eth_ipv4_tcp();
            let mut region = vec![0u8; 200];
            region[2..2 + frame.len()].copy_from_slice(&frame);
            let mut b = PacketBuf::from_lent(lend(&mut region, 5), 2, 2 + frame.len());
            b.push_vlan(0x8100).unwrap();
            assert!(!b.is_lent());
            assert_eq!(released(), vec![5]);
            assert_eq!(&b.as_slice()[16..], &frame[12..]);
            drop(b);
            assert!(released().is_empty(), "released exactly once");
        }

        #[test]
        fn padding_uses_the_tailroom_or_moves_out() {
            let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
            released();
            let mut t = with_tags(&eth_ipv4_tcp(), &[(0x8100, 5)]);
            t.truncate(MIN_FRAME_LEN);
            let mut region = vec![0xeeu8; 128];
            region[16..16 + t.len()].copy_from_slice(&t);
            let mut b = PacketBuf::from_lent(lend(&mut region, 1), 16, 16 + t.len());
            b.pop_vlan().unwrap();
            b.pad_to_floor();
            assert!(b.is_lent());
            assert_eq!(b.len(), MIN_FRAME_LEN);
            assert_eq!(&b.as_slice()[56..], &[0; 4]);
            // A region that ends at the frame: the pad moves it out.
            let mut tight = t.clone();
            let mut b2 = PacketBuf::from_lent(lend(&mut tight, 2), 0, t.len());
            b2.pop_vlan().unwrap();
            b2.pad_to_floor();
            assert!(!b2.is_lent());
            assert_eq!(b2.as_slice(), b.as_slice());
            assert_eq!(released(), vec![2]);
            assert_eq!(b.into_vec(), b2.into_vec());
            assert_eq!(released(), vec![1], "into_vec copies out and releases");
            // Bounds past the region are cut to it.
            let mut small = vec![1u8; 8];
            let odd = PacketBuf::from_lent(lend(&mut small, 3), 6, 100);
            assert_eq!(odd.as_slice(), &[1, 1]);
            assert_eq!(odd.headroom(), 6);
            assert_eq!(odd.into_vec(), vec![1, 1]);
            assert_eq!(released(), vec![3]);
            assert!(CALLS.load(Ordering::SeqCst) >= 3);
        }
    }

    // The dataplane's side of the buffer: ports, slots, metadata, the pool.

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
    fn with_headroom_sets_headroom_frame_and_wire_len() {
        let p = PacketBuf::with_headroom(&[7, 8], 2);
        assert_eq!(
            (p.data(), p.headroom(), p.meta.wire_len),
            (&[7, 8][..], 2, 2)
        );
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

    #[test]
    fn clone_keeps_meta_and_reset_floor_follows_the_length() {
        let mut p = PacketBuf::from_slice(&[0; 60]);
        p.meta.in_port = 3;
        p.meta.set_out_port(Some(9));
        assert_eq!(p.clone().meta, p.meta);
        p.truncate(50);
        p.pad_to_floor();
        assert_eq!(p.len(), 60, "made from 60 bytes: padded back");
        p.truncate(50);
        p.reset_floor();
        p.pad_to_floor();
        assert_eq!(p.len(), 50, "taken at 50 bytes: left as it is");
    }

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A lender that records which tokens came back.
    struct Recorder {
        released: std::sync::Mutex<Vec<usize>>,
        count: AtomicUsize,
    }

    impl BufferLender for Recorder {
        fn release(&self, token: usize) {
            self.count.fetch_add(1, Ordering::SeqCst);
            self.released.lock().unwrap().push(token);
        }
    }

    fn recorder() -> Arc<Recorder> {
        Arc::new(Recorder {
            released: std::sync::Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        })
    }

    fn slot(
        region: &mut [u8],
        lender: &Arc<Recorder>,
        token: usize,
        head: usize,
        len: usize,
    ) -> PacketBuf {
        let l = SharedLender::new(lender.clone());
        // SAFETY: the test keeps `region` alive and untouched until the buffer
        // is dropped, and head + len <= region.len().
        unsafe {
            PacketBuf::from_slot(
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
    fn slot_released_once_on_drop_and_writes_in_place() {
        let rec = recorder();
        let mut region = vec![0u8; 64];
        region[16..20].copy_from_slice(&[1, 2, 3, 4]);
        {
            let mut p = slot(&mut region, &rec, 7, 16, 4);
            assert!(p.is_lent() && p.in_slot());
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
    fn slot_released_when_moved_to_owned() {
        let rec = recorder();
        let mut region = vec![5u8; 32];
        let mut p = slot(&mut region, &rec, 3, 2, 10);
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
        let mut q = slot(&mut region2, &rec, 4, 0, 4);
        q.make_owned();
        assert!(!q.is_lent());
        assert_eq!(q.data(), &[6; 4]);
        let mut region3 = vec![7u8; 32];
        let mut r = slot(&mut region3, &rec, 5, 2, 6);
        r.meta.in_port = 4;
        r.copy_out_of_slot(20);
        assert!(!r.is_lent() && r.headroom() == 20 && r.data() == [7; 6]);
        assert_eq!(r.meta.in_port, 4, "the metadata stays");
        assert_eq!(*rec.released.lock().unwrap(), vec![3, 4, 5]);
    }

    #[test]
    fn a_slot_is_no_frame_for_a_static_owner_and_into_token_releases_nothing() {
        let rec = recorder();
        let mut region = vec![9u8; 32];
        let l = slot(&mut region, &rec, 5, 4, 6);
        let (mem, head, len) = l.into_frame().unwrap();
        assert!((head, len) == (4, 6) && mem.is_shared());
        static NOBODY: LentOwner = LentOwner {
            name: "nobody",
            release: |_| {},
        };
        assert!(!mem.is_from(&NOBODY));
        assert_eq!(mem.into_token(), 5);
        assert_eq!(rec.count.load(Ordering::SeqCst), 0, "the duty went back");
        assert_eq!(Arc::strong_count(&rec), 1, "the lender's count went down");
        let owned = PacketBuf::from_slice(&[1, 2]);
        assert!(owned.into_frame().unwrap_err().data() == [1, 2]);
    }

    #[test]
    fn a_buffer_is_one_cache_line() {
        use core::mem::{align_of, size_of};
        assert!(size_of::<PacketBuf>() <= 64, "{}", size_of::<PacketBuf>());
        assert_eq!(align_of::<PacketBuf>(), 64);
        assert_eq!(size_of::<Option<PacketBuf>>(), size_of::<PacketBuf>());
        assert!(size_of::<PacketMeta>() <= 28, "{}", size_of::<PacketMeta>());
        assert!(size_of::<Lent>() <= 32, "{}", size_of::<Lent>());
    }

    #[test]
    fn meta_fields_keep_their_values_apart() {
        let mut m = PacketMeta::default();
        assert_eq!(
            (m.tunnel_id(), m.out_port(), m.timestamp_ns()),
            (None, None, 0)
        );
        m.set_timestamp_ns(u64::MAX);
        assert_eq!(m.timestamp_ns(), PacketMeta::MAX_TIMESTAMP_NS);
        assert_eq!((m.tunnel_id(), m.out_port()), (None, None));
        for id in [Some(0), Some(u32::MAX), None, Some(7)] {
            for port in [None, Some(u32::MAX), Some(0), Some(3)] {
                for ns in [
                    0,
                    1,
                    1_700_000_000_123_456_789,
                    PacketMeta::MAX_TIMESTAMP_NS,
                ] {
                    m.set_tunnel_id(id);
                    m.set_out_port(port);
                    m.set_timestamp_ns(ns);
                    assert_eq!(
                        (m.tunnel_id(), m.out_port(), m.timestamp_ns()),
                        (id, port, ns)
                    );
                    let mut n = PacketMeta::default();
                    n.set_timestamp_ns(ns);
                    n.set_out_port(port);
                    n.set_tunnel_id(id);
                    assert_eq!(n, m, "equal whatever the order of setting");
                }
            }
        }
        assert_eq!(m.take_out_port(), Some(3));
        assert_eq!((m.out_port(), m.tunnel_id()), (None, Some(7)));
        assert_ne!(
            m,
            PacketMeta { tunnel: 0, ..m },
            "a set key of 0 differs from none"
        );
        m.set_tunnel_id(None);
        m.set_timestamp_ns(0);
        assert_eq!(m, PacketMeta::default(), "cleared fields compare as unset");
        let shown = format!(
            "{:?}",
            PacketMeta {
                in_port: 2,
                ..PacketMeta::default()
            }
        );
        assert!(
            shown.contains("in_port: 2") && shown.contains("tunnel_id: None"),
            "{shown}"
        );
    }

    #[test]
    fn owned_storage_grows_and_shrinks_in_place_of_a_vector() {
        let mut p = PacketBuf::from_vec(vec![1, 2, 3]);
        assert_eq!((p.headroom(), p.tailroom()), (0, 0));
        p.extend_from_slice(&[4; 100]);
        assert_eq!(p.len(), 103);
        p.push_front(2).copy_from_slice(&[9, 9]);
        assert_eq!(&p.data()[..5], &[9, 9, 1, 2, 3]);
        p.truncate(4);
        assert!(p.tailroom() >= 101);
        let floorless = PacketBuf::new(8, 0);
        assert_eq!((floorless.len(), floorless.headroom()), (0, 8));
        assert_eq!(p.clone().into_vec(), vec![9, 9, 1, 2]);
        let q = PacketBuf::from_vec(Vec::new());
        assert!(q.is_empty() && !q.is_lent() && q.tailroom() == 0);
        let mut r = PacketBuf::from_vec(vec![0; 64]);
        r.truncate(10);
        r.pad_to_floor();
        assert_eq!(r.into_vec(), vec![0; MIN_FRAME_LEN]);
    }

    #[test]
    fn a_slot_keeps_its_floor_beside_its_lender_in_one_word() {
        let rec = recorder();
        let mut region = vec![3u8; 128];
        let mut p = slot(&mut region, &rec, 8, 16, 64);
        assert!(p.in_slot() && p.floor() == MIN_FRAME_LEN);
        p.truncate(50);
        p.pad_to_floor();
        assert!(p.in_slot(), "padded in the slot's tailroom");
        assert_eq!((p.len(), &p.data()[50..]), (MIN_FRAME_LEN, &[0; 10][..]));
        p.truncate(50);
        p.copy_out_of_slot(8);
        assert!(!p.is_lent() && !p.in_slot() && p.headroom() == 8);
        p.pad_to_floor();
        assert_eq!(p.len(), MIN_FRAME_LEN, "the floor stayed with the copy");
        assert_eq!(*rec.released.lock().unwrap(), vec![8]);
        let mut other = vec![4u8; 64];
        let q = slot(&mut other, &rec, 9, 4, 60);
        let (mem, head, len) = q.into_frame().unwrap();
        assert!(mem.is_shared() && (head, len) == (4, 60) && mem.token() == 9);
        drop(mem);
        assert_eq!(*rec.released.lock().unwrap(), vec![8, 9]);
        assert_eq!(Arc::strong_count(&rec), 1, "no count left behind");
    }

    #[test]
    fn owned_storage_is_recycled_on_drop() {
        // Runs on its own thread, but the buffer's first take may bring a
        // batch from the shared list that another test thread overflowed
        // into: the count is taken relative to what the list holds after it.
        std::thread::spawn(|| {
            let b = PacketBuf::from_slice(&[7; 60]);
            let held = pool::local_len();
            let p = b.data().as_ptr();
            drop(b);
            assert_eq!(pool::local_len(), held + 1);
            let again = PacketBuf::from_slice(&[8; 100]);
            assert_eq!(again.data().as_ptr(), p, "the dropped storage came back");
            assert_eq!(again.data(), &[8; 100][..]);
            assert_eq!(again.headroom(), DEFAULT_HEADROOM);
        })
        .join()
        .unwrap();
    }
}
