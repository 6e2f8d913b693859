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

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use super::frame::{now_ns, Direction, Frame};
use super::pcapng::PcapngWriter;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::pcapng::tests::frame;
    use crate::capture::read;

    /// Each packet of capture file `out`: its first byte (the fill) and its
    /// pcapng flags (the direction).
    fn fills_and_flags(out: &[u8]) -> Vec<(u8, Option<u32>)> {
        read::parse(out)
            .packets
            .iter()
            .map(|p| (p.data[0], p.flags))
            .collect()
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
        assert_eq!(
            fills_and_flags(&out),
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
        // The writer empties the (full) queue before frame 8 comes: waited
        // for, since a loaded machine may not have run it within a fixed
        // 20 ms (frame 8 would then be dropped as the queue is full).
        crate::testnet::eventually(Duration::from_secs(10), || c.stats().written >= 4);
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
        assert_eq!(
            fills_and_flags(&out),
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
