//! Capturing what a port receives and sends, as a pcapng file: tcpdump
//! cannot see the traffic of AF_XDP or DPDK ports, so the switch copies it
//! out itself (`fulmar ctl capture PORT [--count N] FILE`).
//!
//! # Shape
//!
//! A [`Capture`] is shared (`Arc`) by the control side and the dataplane
//! threads that read or send the port ([`crate::threads::Threads::start_capture`]).
//! Each such thread holds a [`Tap`] in its own per-port state: after a
//! burst is read it copies the frames (truncated to the snap length) and
//! pushes them into the capture's queue; before a burst is handed to the
//! port's `tx_burst` it copies the frames not yet copied, and after the
//! call pushes those the port took. A port without a capture costs its
//! threads one branch per burst (`Option<Tap>` is `None`), nothing per
//! packet.
//!
//! The control side drives the writer ([`Capture::drain_to`], or
//! [`Capture::drain_into`] step by step): it swaps the queue out and writes
//! it as Enhanced Packet Blocks, until the frame limit is reached or the
//! capture is stopped ([`Capture::stop`]) and the queue is empty.
//!
//! # The queue, and why a mutex
//!
//! One `Mutex<VecDeque<Frame>>` per capture, bounded in frames and bytes.
//! Several threads produce (the port's reader and every thread that sends
//! to it: all workers when run to completion), so a single SPSC ring would
//! not do, and a ring per producer would need registering producers as
//! taps come and go — more machinery for a diagnostic tool. The lock is
//! never waited for by a dataplane thread: a producer `try_lock`s a few
//! times (a handful of nanoseconds apart) and, still finding it busy,
//! counts the burst as `dropped_busy`. Everything that can take time
//! happens outside the lock: producers copy frames before locking, the
//! writer swaps the whole queue out (`O(1)`) and writes after unlocking.
//! So the lock is held for a swap or an append of one burst, and a busy
//! lock is rare. A full queue (the writer cannot keep up) counts the
//! frames that do not fit as `dropped_full`. Frame storage comes from and
//! goes back to [`crate::pool`], so a running capture does not allocate
//! per packet in steady state either.
//!
//! The frame limit is counted under the lock: frames lost to a busy or
//! full queue do not count toward it, and a capture of N frames holds
//! exactly N once they have passed.
//!
//! # pcapng
//!
//! Written by hand after the pcapng specification draft
//! (draft-ietf-opsawg-pcapng). Every block is a 32-bit block type, a 32-bit
//! total length (of the whole block, both length fields included), a body,
//! and the total length again, so a reader can walk forward and backward;
//! bodies are padded to a multiple of 4 bytes. Options are a list of
//! (16-bit code, 16-bit value length, value padded to 4 bytes) ended by
//! code 0 length 0. All integers are in the writer's byte order, which the
//! reader learns from the section header; this writer uses little-endian.
//!
//! - Section Header Block (type `0x0A0D0D0A`): byte-order magic
//!   `0x1A2B3C4D`, version 1.0 (two 16-bit fields), section length as a
//!   64-bit signed integer (-1: not given), options (none here). 28 bytes.
//! - Interface Description Block (type 1): link type (16 bits; 1 is
//!   Ethernet), 16 reserved bits, snap length (32 bits), options:
//!   `if_name` (code 2, UTF-8, the port's name) and `if_tsresol` (code 9,
//!   one byte: 9 means timestamps count 10^-9 s). Packets refer to
//!   interfaces by their order in the section, so this one is interface 0.
//! - Enhanced Packet Block (type 6): interface id (32 bits), timestamp as
//!   two 32-bit halves (high then low) of a 64-bit count of `if_tsresol`
//!   units since 1970, captured length, original length, the captured
//!   bytes padded to 4, options: `epb_flags` (code 2, 32 bits; the low two
//!   bits are the direction, 1 inbound, 2 outbound).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::pcapng::{
    BYTE_ORDER_MAGIC, EPB_TYPE, IDB_TYPE, LINKTYPE_ETHERNET, OPT_END, OPT_EPB_FLAGS, OPT_IF_NAME,
    OPT_IF_TSRESOL, SHB_TYPE,
};
use crate::pool;
use crate::port::PacketBuf;

/// Bytes kept of each frame unless told otherwise (tcpdump's default).
pub const DEFAULT_SNAPLEN: usize = 65535;
/// Frames the queue holds between two passes of the writer.
pub const DEFAULT_QUEUE_FRAMES: usize = 8192;
/// Captured bytes the queue holds between two passes of the writer.
pub const DEFAULT_QUEUE_BYTES: usize = 32 << 20;

/// How often a producer tries a busy queue lock before it counts the
/// burst lost.
const BUSY_TRIES: usize = 8;
/// How long [`Capture::drain_to`] sleeps when it found nothing to write.
const DRAIN_POLL: Duration = Duration::from_millis(1);

/// Which way a frame went through the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Received by the port (before the pipeline saw it).
    Inbound,
    /// Sent by the port (what the switch handed to it).
    Outbound,
}

impl Direction {
    /// The `epb_flags` value: direction bits only.
    pub fn epb_flags(self) -> u32 {
        match self {
            Direction::Inbound => 1,
            Direction::Outbound => 2,
        }
    }
}

/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// When it was read or handed to the port, in nanoseconds since 1970.
    pub ts_ns: u64,
    /// Which way it went.
    pub direction: Direction,
    /// Its length on the wire.
    pub orig_len: u32,
    /// Its first bytes (up to the snap length).
    pub bytes: Vec<u8>,
}

impl Frame {
    /// A copy of `data`'s first `snaplen` bytes (storage from the pool).
    pub fn copy_of(data: &[u8], snaplen: usize, ts_ns: u64, direction: Direction) -> Frame {
        let keep = data.get(..snaplen).unwrap_or(data);
        let mut bytes = if keep.len() <= pool::BUF_CAPACITY {
            pool::take()
        } else {
            Vec::with_capacity(keep.len())
        };
        bytes.extend_from_slice(keep);
        Frame {
            ts_ns,
            direction,
            orig_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            bytes,
        }
    }

    /// Gives the storage back to the pool.
    fn recycle(self) {
        pool::give(self.bytes);
    }
}

/// Nanoseconds since 1970 now (0 before it).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Writes a pcapng section with one Ethernet interface, then a block per
/// frame. Each block is assembled in a buffer and written with one call.
pub struct PcapngWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    frames: u64,
}

fn put16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// Pads `b` with zeros to a multiple of 4 bytes.
fn pad4(b: &mut Vec<u8>) {
    while !b.len().is_multiple_of(4) {
        b.push(0);
    }
}

/// An option: code, length, value padded to 4 bytes.
fn put_option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    put16(b, code);
    put16(b, u16::try_from(value.len()).unwrap_or(u16::MAX));
    b.extend_from_slice(value.get(..usize::from(u16::MAX)).unwrap_or(value));
    pad4(b);
}

/// Starts a block of `kind` in `b` (cleared); [`end_block`] fills in the
/// lengths.
fn begin_block(b: &mut Vec<u8>, kind: u32) {
    b.clear();
    put32(b, kind);
    put32(b, 0);
}

fn end_block(b: &mut Vec<u8>) {
    pad4(b);
    let total = u32::try_from(b.len() + 4).unwrap_or(u32::MAX);
    put32(b, total);
    if let Some(len) = b.get_mut(4..8) {
        len.copy_from_slice(&total.to_le_bytes());
    }
}

impl<W: Write> PcapngWriter<W> {
    /// Writes the Section Header Block and the Interface Description Block
    /// of interface 0 (Ethernet, named `if_name`, nanosecond timestamps).
    pub fn new(out: W, if_name: &str, snaplen: usize) -> io::Result<PcapngWriter<W>> {
        let mut w = PcapngWriter {
            out,
            buf: Vec::with_capacity(2048),
            frames: 0,
        };
        let b = &mut w.buf;
        begin_block(b, SHB_TYPE);
        put32(b, BYTE_ORDER_MAGIC);
        put16(b, 1);
        put16(b, 0);
        b.extend_from_slice(&(-1i64).to_le_bytes());
        end_block(b);
        w.out.write_all(&w.buf)?;

        let b = &mut w.buf;
        begin_block(b, IDB_TYPE);
        put16(b, LINKTYPE_ETHERNET);
        put16(b, 0);
        put32(b, u32::try_from(snaplen).unwrap_or(u32::MAX));
        if !if_name.is_empty() {
            put_option(b, OPT_IF_NAME, if_name.as_bytes());
        }
        put_option(b, OPT_IF_TSRESOL, &[9]);
        put_option(b, OPT_END, &[]);
        end_block(b);
        w.out.write_all(&w.buf)?;
        Ok(w)
    }

    /// Writes `f` as an Enhanced Packet Block on interface 0.
    pub fn write_frame(&mut self, f: &Frame) -> io::Result<()> {
        let b = &mut self.buf;
        begin_block(b, EPB_TYPE);
        put32(b, 0);
        put32(b, (f.ts_ns >> 32) as u32);
        put32(b, f.ts_ns as u32);
        put32(b, u32::try_from(f.bytes.len()).unwrap_or(u32::MAX));
        put32(b, f.orig_len);
        b.extend_from_slice(&f.bytes);
        pad4(b);
        put_option(b, OPT_EPB_FLAGS, &f.direction.epb_flags().to_le_bytes());
        put_option(b, OPT_END, &[]);
        end_block(b);
        self.out.write_all(&self.buf)?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// A capture's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Frames taken into the queue (at most the frame limit).
    pub captured: u64,
    /// Frames lost because the queue was full (the writer fell behind).
    pub dropped_full: u64,
    /// Frames lost because the queue's lock was busy.
    pub dropped_busy: u64,
    /// Frames written out so far.
    pub written: u64,
}

impl CaptureStats {
    /// Frames lost, all reasons.
    pub fn dropped(&self) -> u64 {
        self.dropped_full + self.dropped_busy
    }
}

/// The queue and what is counted under its lock.
struct Queue {
    frames: VecDeque<Frame>,
    bytes: usize,
    /// Frames taken so far (toward the limit).
    accepted: u64,
    /// No more frames are taken (limit reached or stopped).
    closed: bool,
}

/// A capture of one port: where the dataplane threads put copies of the
/// frames, and where the control side takes them to write.
pub struct Capture {
    if_name: String,
    snaplen: usize,
    limit: Option<u64>,
    max_frames: usize,
    max_bytes: usize,
    queue: Mutex<Queue>,
    /// The writer's side of the swap (only the control side locks it).
    out: Mutex<VecDeque<Frame>>,
    /// Set with `Queue::closed`, read without the lock.
    finished: AtomicBool,
    captured: AtomicU64,
    dropped_full: AtomicU64,
    dropped_busy: AtomicU64,
    written: AtomicU64,
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Capture {
    /// A capture of the port named `if_name` (the pcapng `if_name`),
    /// without a frame limit, keeping [`DEFAULT_SNAPLEN`] bytes of each
    /// frame, with a queue of [`DEFAULT_QUEUE_FRAMES`] frames and
    /// [`DEFAULT_QUEUE_BYTES`] bytes.
    pub fn new(if_name: impl Into<String>) -> Capture {
        Capture {
            if_name: if_name.into(),
            snaplen: DEFAULT_SNAPLEN,
            limit: None,
            max_frames: DEFAULT_QUEUE_FRAMES,
            max_bytes: DEFAULT_QUEUE_BYTES,
            queue: Mutex::new(Queue {
                frames: VecDeque::new(),
                bytes: 0,
                accepted: 0,
                closed: false,
            }),
            out: Mutex::new(VecDeque::new()),
            finished: AtomicBool::new(false),
            captured: AtomicU64::new(0),
            dropped_full: AtomicU64::new(0),
            dropped_busy: AtomicU64::new(0),
            written: AtomicU64::new(0),
        }
    }

    /// Ends the capture after `n` frames (`--count N`; 0 takes none).
    pub fn with_count(mut self, n: u64) -> Capture {
        self.limit = Some(n);
        if n == 0 {
            *self.finished.get_mut() = true;
            self.queue
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .closed = true;
        }
        self
    }

    /// Keeps at most `snaplen` bytes of each frame (at least 1).
    pub fn with_snaplen(mut self, snaplen: usize) -> Capture {
        self.snaplen = snaplen.max(1);
        self
    }

    /// Bounds the queue to `frames` frames and `bytes` captured bytes (at
    /// least one frame of any size fits).
    pub fn with_queue(mut self, frames: usize, bytes: usize) -> Capture {
        self.max_frames = frames.max(1);
        self.max_bytes = bytes;
        self
    }

    /// The port's name, as written in the file.
    pub fn if_name(&self) -> &str {
        &self.if_name
    }

    /// The snap length.
    pub fn snaplen(&self) -> usize {
        self.snaplen
    }

    /// The frame limit, if any.
    pub fn count(&self) -> Option<u64> {
        self.limit
    }

    /// Ends the capture: no frame is taken after this returns; the writer
    /// writes what is queued and ends. Control side (it may wait for the
    /// lock).
    pub fn stop(&self) {
        let mut q = relock(&self.queue);
        q.closed = true;
        self.finished.store(true, Ordering::Release);
    }

    /// Whether the capture takes no more frames (limit reached, or
    /// stopped). One atomic load.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// The counters now.
    pub fn stats(&self) -> CaptureStats {
        CaptureStats {
            captured: self.captured.load(Ordering::Relaxed),
            dropped_full: self.dropped_full.load(Ordering::Relaxed),
            dropped_busy: self.dropped_busy.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
        }
    }

    /// Dataplane side: takes every frame out of `frames` into the queue, up
    /// to the limit; what the queue has no room for counts as
    /// `dropped_full`, a burst that finds the lock busy (after a few tries)
    /// as `dropped_busy`. Never waits. Returns whether the capture still
    /// takes frames (false: the caller may forget it).
    pub fn push(&self, frames: &mut Vec<Frame>) -> bool {
        if self.is_finished() {
            frames.drain(..).for_each(Frame::recycle);
            return false;
        }
        if frames.is_empty() {
            return true;
        }
        let Some(mut q) = self.try_queue() else {
            bump(&self.dropped_busy, frames.len());
            frames.drain(..).for_each(Frame::recycle);
            return true;
        };
        if q.closed {
            drop(q);
            frames.drain(..).for_each(Frame::recycle);
            return false;
        }
        let want = match self.limit {
            Some(l) => frames
                .len()
                .min(usize::try_from(l.saturating_sub(q.accepted)).unwrap_or(usize::MAX)),
            None => frames.len(),
        };
        let mut full = 0;
        for f in frames.drain(..want) {
            let fits = q.frames.len() < self.max_frames
                && (q.frames.is_empty() || q.bytes + f.bytes.len() <= self.max_bytes);
            if fits {
                q.bytes += f.bytes.len();
                q.accepted += 1;
                q.frames.push_back(f);
            } else {
                full += 1;
                f.recycle();
            }
        }
        let accepted = q.accepted;
        let open = self.limit.is_none_or(|l| accepted < l);
        if !open {
            q.closed = true;
            self.finished.store(true, Ordering::Release);
        }
        drop(q);
        self.captured.store(accepted, Ordering::Relaxed);
        bump(&self.dropped_full, full);
        // Beyond the limit: not lost, just not wanted.
        frames.drain(..).for_each(Frame::recycle);
        open
    }

    fn try_queue(&self) -> Option<MutexGuard<'_, Queue>> {
        for _ in 0..BUSY_TRIES {
            match self.queue.try_lock() {
                Ok(q) => return Some(q),
                Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(TryLockError::WouldBlock) => std::hint::spin_loop(),
            }
        }
        None
    }

    /// Control side, one step: writes what is queued now to `w` and
    /// returns how many frames that was, and whether more may come (false
    /// once the capture is finished and everything it took is written).
    pub fn drain_into<W: Write>(&self, w: &mut PcapngWriter<W>) -> io::Result<(usize, bool)> {
        let mut out = relock(&self.out);
        let more = {
            let mut q = relock(&self.queue);
            std::mem::swap(&mut q.frames, &mut *out);
            q.bytes = 0;
            !q.closed
        };
        let n = out.len();
        let mut result = Ok(());
        for f in out.drain(..) {
            if result.is_ok() {
                result = w.write_frame(&f);
                if result.is_ok() {
                    self.written.fetch_add(1, Ordering::Relaxed);
                }
            }
            f.recycle();
        }
        result.map(|()| (n, more))
    }

    /// Control side: writes a pcapng file of the capture to `out` — the
    /// header now, then the frames as they come, until the capture is
    /// finished (limit reached or [`Capture::stop`], perhaps called from
    /// another thread) and all it took is written; flushes `out` and
    /// returns the counters. A write error stops the capture.
    pub fn drain_to(&self, out: &mut impl Write) -> io::Result<CaptureStats> {
        let result = self.write_all(out);
        if result.is_err() {
            self.stop();
        }
        result.map(|()| self.stats())
    }

    fn write_all(&self, out: &mut impl Write) -> io::Result<()> {
        let mut w = PcapngWriter::new(out, &self.if_name, self.snaplen)?;
        loop {
            let (n, more) = self.drain_into(&mut w)?;
            if !more {
                break;
            }
            if n == 0 {
                w.flush()?;
                std::thread::sleep(DRAIN_POLL);
            }
        }
        w.flush()
    }
}

fn bump(c: &AtomicU64, n: usize) {
    if n > 0 {
        c.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// A dataplane thread's hold on a capture, kept in its state of the port
/// (`Option<Tap>`: `None` costs one branch per burst). For sending, it
/// holds copies of the front of the port's pending burst that are not yet
/// pushed: a frame the port refuses is copied once and pushed only when
/// the port takes it.
pub(crate) struct Tap {
    sink: Arc<Capture>,
    /// Copies of the first `staged.len()` pending packets (sending side).
    staged: Vec<Frame>,
    /// Frames on their way into the queue.
    ready: Vec<Frame>,
}

impl Tap {
    pub(crate) fn new(sink: Arc<Capture>) -> Tap {
        Tap {
            sink,
            staged: Vec::new(),
            ready: Vec::new(),
        }
    }

    /// Copies and pushes a received burst. False: the capture has ended
    /// (forget the tap).
    pub(crate) fn received(&mut self, pkts: &[PacketBuf]) -> bool {
        if self.sink.is_finished() {
            return false;
        }
        let ts = now_ns();
        let snap = self.sink.snaplen;
        self.ready.extend(
            pkts.iter()
                .map(|p| Frame::copy_of(p.data(), snap, ts, Direction::Inbound)),
        );
        self.sink.push(&mut self.ready)
    }

    /// Before `pending` is handed to the port: copies those packets not
    /// copied yet.
    pub(crate) fn sending(&mut self, pending: &[PacketBuf]) {
        if self.sink.is_finished() {
            return;
        }
        let Some(new) = pending.get(self.staged.len()..) else {
            return;
        };
        let ts = now_ns();
        let snap = self.sink.snaplen;
        self.staged.extend(
            new.iter()
                .map(|p| Frame::copy_of(p.data(), snap, ts, Direction::Outbound)),
        );
    }

    /// After the port took the first `taken` pending packets: pushes their
    /// copies. False: the capture has ended (forget the tap).
    pub(crate) fn sent(&mut self, taken: usize) -> bool {
        let taken = taken.min(self.staged.len());
        self.ready.extend(self.staged.drain(..taken));
        self.sink.push(&mut self.ready)
    }

    /// The pending packets were dropped: forgets their copies.
    pub(crate) fn unsent(&mut self) {
        self.staged.drain(..).for_each(Frame::recycle);
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.unsent();
    }
}

/// A strict pcapng reader for the tests (written from the layouts above,
/// checking every length, padding and the trailing lengths).
#[cfg(test)]
pub(crate) mod read {
    /// What a file holds.
    #[derive(Debug, Default)]
    pub(crate) struct File {
        pub byte_order_magic: u32,
        pub version: (u16, u16),
        pub linktype: u16,
        pub snaplen: u32,
        pub if_name: Option<String>,
        pub if_tsresol: Option<u8>,
        pub packets: Vec<Packet>,
    }

    #[derive(Debug)]
    pub(crate) struct Packet {
        pub interface: u32,
        pub ts: u64,
        pub cap_len: u32,
        pub orig_len: u32,
        pub data: Vec<u8>,
        pub flags: Option<u32>,
    }

    fn u16_at(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
    }

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// (code, value) of the options in `b`, which must end with
    /// opt_endofopt exactly at its end.
    fn options(mut b: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        loop {
            assert!(b.len() >= 4, "options run past the block");
            let (code, len) = (u16_at(b, 0), usize::from(u16_at(b, 2)));
            if code == 0 {
                assert_eq!(len, 0, "opt_endofopt has a length");
                assert_eq!(b.len(), 4, "bytes after opt_endofopt");
                return out;
            }
            let padded = len.div_ceil(4) * 4;
            assert!(b.len() >= 4 + padded, "option {code} runs past the block");
            assert!(b[4 + len..4 + padded].iter().all(|&x| x == 0), "padding");
            out.push((code, b[4..4 + len].to_vec()));
            b = &b[4 + padded..];
        }
    }

    /// Parses a little-endian pcapng file with one section and one
    /// interface; panics at anything else.
    pub(crate) fn parse(mut b: &[u8]) -> File {
        let mut f = File::default();
        let mut first = true;
        let mut interfaces = 0;
        while !b.is_empty() {
            assert!(b.len() >= 12, "truncated block");
            let (kind, total) = (u32_at(b, 0), u32_at(b, 4) as usize);
            assert!(
                total % 4 == 0 && total >= 12 && total <= b.len(),
                "length {total}"
            );
            assert_eq!(u32_at(b, total - 4) as usize, total, "trailing length");
            let body = &b[8..total - 4];
            if first {
                assert_eq!(kind, 0x0A0D_0D0A, "first block is not a section header");
            }
            match kind {
                0x0A0D_0D0A => {
                    assert!(first, "one section only");
                    f.byte_order_magic = u32_at(body, 0);
                    f.version = (u16_at(body, 4), u16_at(body, 6));
                    assert_eq!(i64::from_le_bytes(body[8..16].try_into().unwrap()), -1);
                    assert_eq!(body.len(), 16, "no SHB options expected");
                }
                1 => {
                    interfaces += 1;
                    f.linktype = u16_at(body, 0);
                    assert_eq!(u16_at(body, 2), 0, "reserved");
                    f.snaplen = u32_at(body, 4);
                    for (code, v) in options(&body[8..]) {
                        match code {
                            2 => f.if_name = Some(String::from_utf8(v).unwrap()),
                            9 => f.if_tsresol = Some(v[0]),
                            _ => panic!("unexpected IDB option {code}"),
                        }
                    }
                }
                6 => {
                    assert_eq!(interfaces, 1, "packet before its interface");
                    let cap_len = u32_at(body, 12);
                    let data_end = 20 + cap_len as usize;
                    let padded = 20 + (cap_len as usize).div_ceil(4) * 4;
                    assert!(padded <= body.len());
                    assert!(body[data_end..padded].iter().all(|&x| x == 0), "padding");
                    let mut flags = None;
                    for (code, v) in options(&body[padded..]) {
                        assert_eq!(code, 2, "unexpected EPB option");
                        flags = Some(u32::from_le_bytes(v.try_into().unwrap()));
                    }
                    f.packets.push(Packet {
                        interface: u32_at(body, 0),
                        ts: (u64::from(u32_at(body, 4)) << 32) | u64::from(u32_at(body, 8)),
                        cap_len,
                        orig_len: u32_at(body, 16),
                        data: body[20..data_end].to_vec(),
                        flags,
                    });
                }
                other => panic!("unexpected block type {other:#x}"),
            }
            first = false;
            b = &b[total..];
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize, fill: u8, direction: Direction, ts_ns: u64) -> Frame {
        Frame {
            ts_ns,
            direction,
            orig_len: n as u32,
            bytes: vec![fill; n],
        }
    }

    #[test]
    fn writer_lays_out_the_blocks_of_the_spec() {
        let mut w = PcapngWriter::new(Vec::new(), "port-2", 65535).unwrap();
        // 28-byte SHB, then the IDB: 8 + 8 + if_name (4 + 8) + if_tsresol
        // (4 + 4) + end (4) + 4 = 44 bytes.
        let header = w.out.len();
        assert_eq!(header, 28 + 44);
        let ts = 1_700_000_000_123_456_789u64;
        w.write_frame(&frame(61, 0xab, Direction::Inbound, ts))
            .unwrap();
        w.write_frame(&frame(64, 0xcd, Direction::Outbound, ts + 1))
            .unwrap();
        assert_eq!(w.frames(), 2);
        let bytes = w.into_inner();
        // EPB: 8 + 20 + data padded + epb_flags (8) + end (4) + 4.
        assert_eq!(bytes.len(), header + (44 + 64) + (44 + 64));
        // The first bytes, spelled out.
        assert_eq!(
            bytes[..28],
            [
                0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff,
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 28, 0, 0, 0
            ]
        );
        let f = read::parse(&bytes);
        assert_eq!(f.byte_order_magic, 0x1A2B_3C4D);
        assert_eq!(f.version, (1, 0));
        assert_eq!(f.linktype, 1);
        assert_eq!(f.snaplen, 65535);
        assert_eq!(f.if_name.as_deref(), Some("port-2"));
        assert_eq!(f.if_tsresol, Some(9));
        assert_eq!(f.packets.len(), 2);
        let (a, b) = (&f.packets[0], &f.packets[1]);
        assert_eq!((a.interface, a.ts, a.cap_len, a.orig_len), (0, ts, 61, 61));
        assert_eq!(a.data, vec![0xab; 61]);
        assert_eq!(a.flags, Some(1));
        assert_eq!((b.ts, b.cap_len, b.orig_len), (ts + 1, 64, 64));
        assert_eq!(b.data, vec![0xcd; 64]);
        assert_eq!(b.flags, Some(2));
    }

    #[test]
    fn frames_are_cut_to_the_snap_length() {
        let data: Vec<u8> = (0..200u8).collect();
        let f = Frame::copy_of(&data, 100, 5, Direction::Outbound);
        assert_eq!((f.orig_len, f.bytes.len()), (200, 100));
        assert_eq!(f.bytes[..], data[..100]);
        let mut w = PcapngWriter::new(Vec::new(), "", 100).unwrap();
        w.write_frame(&f).unwrap();
        let p = read::parse(&w.into_inner());
        assert_eq!(p.if_name, None);
        assert_eq!(p.snaplen, 100);
        assert_eq!((p.packets[0].cap_len, p.packets[0].orig_len), (100, 200));
    }

    #[test]
    fn the_limit_ends_the_capture_and_the_writer() {
        let c = Arc::new(Capture::new("p").with_count(5));
        let mut batch: Vec<Frame> = (0..3)
            .map(|i| frame(60, i, Direction::Inbound, u64::from(i)))
            .collect();
        assert!(c.push(&mut batch));
        assert!(batch.is_empty());
        let mut batch: Vec<Frame> = (3..7)
            .map(|i| frame(60, i, Direction::Outbound, u64::from(i)))
            .collect();
        assert!(!c.push(&mut batch), "the limit was reached");
        assert!(c.is_finished());
        let mut more = vec![frame(60, 9, Direction::Inbound, 9)];
        assert!(!c.push(&mut more));
        let mut out = Vec::new();
        let s = c.drain_to(&mut out).unwrap();
        assert_eq!(
            s,
            CaptureStats {
                captured: 5,
                dropped_full: 0,
                dropped_busy: 0,
                written: 5
            }
        );
        let f = read::parse(&out);
        let fills: Vec<(u8, Option<u32>)> =
            f.packets.iter().map(|p| (p.data[0], p.flags)).collect();
        assert_eq!(
            fills,
            [
                (0, Some(1)),
                (1, Some(1)),
                (2, Some(1)),
                (3, Some(2)),
                (4, Some(2))
            ]
        );
    }

    #[test]
    fn a_full_or_busy_queue_counts_its_losses_and_stop_ends_the_writer() {
        let c = Arc::new(Capture::new("p").with_queue(4, 1 << 20));
        let mut batch: Vec<Frame> = (0..6)
            .map(|i| frame(60, i, Direction::Inbound, 0))
            .collect();
        assert!(c.push(&mut batch));
        assert_eq!(c.stats().captured, 4);
        assert_eq!(c.stats().dropped_full, 2);
        {
            let _held = c.queue.lock().unwrap();
            let mut batch = vec![frame(60, 7, Direction::Inbound, 0)];
            assert!(c.push(&mut batch), "busy is not the end");
            assert!(batch.is_empty());
        }
        assert_eq!(c.stats().dropped_busy, 1);
        let writer = {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let s = c.drain_to(&mut out).unwrap();
                (s, out)
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        let mut batch = vec![frame(60, 8, Direction::Outbound, 0)];
        assert!(c.push(&mut batch));
        c.stop();
        let mut batch = vec![frame(60, 9, Direction::Outbound, 0)];
        assert!(!c.push(&mut batch), "stopped");
        let (s, out) = writer.join().unwrap();
        assert_eq!((s.captured, s.written, s.dropped()), (5, 5, 3));
        let fills: Vec<u8> = read::parse(&out)
            .packets
            .iter()
            .map(|p| p.data[0])
            .collect();
        assert_eq!(fills, [0, 1, 2, 3, 8]);
    }

    #[test]
    fn a_tap_pushes_only_what_the_port_took() {
        let c = Arc::new(Capture::new("p"));
        let mut tap = Tap::new(c.clone());
        let pkts: Vec<PacketBuf> = (0..4u8).map(|i| PacketBuf::from_slice(&[i; 60])).collect();
        tap.sending(&pkts);
        assert!(tap.sent(1));
        // The port kept 3; one more packet joins the burst.
        let mut rest: Vec<PacketBuf> = pkts[1..].to_vec();
        rest.push(PacketBuf::from_slice(&[4; 60]));
        tap.sending(&rest);
        assert!(tap.sent(4));
        tap.sending(&[PacketBuf::from_slice(&[5; 60])]);
        tap.unsent();
        assert!(tap.received(&[PacketBuf::from_slice(&[6; 60])]));
        c.stop();
        let mut out = Vec::new();
        c.drain_to(&mut out).unwrap();
        let got: Vec<(u8, Option<u32>)> = read::parse(&out)
            .packets
            .iter()
            .map(|p| (p.data[0], p.flags))
            .collect();
        assert_eq!(
            got,
            [
                (0, Some(2)),
                (1, Some(2)),
                (2, Some(2)),
                (3, Some(2)),
                (4, Some(2)),
                (6, Some(1))
            ]
        );
    }
}
