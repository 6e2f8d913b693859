//! Who gives a ring slot back to the kernel once its frame was lent: the
//! buffer's release, or the reader when it passes a slot it lent ahead of
//! order (see the module comment of `afpacket`, "Sparse frames first").
//!
//! A slot lent in order goes back when its buffer is dropped. A slot lent
//! ahead must stay the user's until the reader has passed it too (the
//! kernel would otherwise fill it out of turn), so whichever of the two
//! comes second gives it back: one compare-and-swap on the slot's state
//! decides, and exactly one side is told to.

use std::sync::atomic::{AtomicU8, Ordering};

/// Not lent: the kernel's, or a frame waiting for the reader.
const FREE: u8 = 0;
/// Lent in order (or lent ahead and passed since): the release gives it
/// back.
const IN_ORDER: u8 = 1;
/// Lent ahead of the reader, which has not passed it yet.
const AHEAD: u8 = 2;
/// Lent ahead and already dropped: the reader gives it back as it passes.
const DONE: u8 = 3;

/// A slot's lending state.
#[derive(Debug, Default)]
pub(super) struct SlotLend(AtomicU8);

impl SlotLend {
    /// Whether the slot's frame is not lent (the reader may take it).
    #[inline]
    pub(super) fn is_free(&self) -> bool {
        self.0.load(Ordering::Acquire) == FREE
    }

    /// The reader lends the slot's frame, in order or ahead of it.
    #[inline]
    pub(super) fn lend(&self, ahead: bool) {
        self.0
            .store(if ahead { AHEAD } else { IN_ORDER }, Ordering::Release);
    }

    /// The lent buffer is dropped. True when the caller must now give the
    /// slot back (and then [`SlotLend::free`] it); false when it was lent
    /// ahead and the reader has not passed it: the reader will.
    #[inline]
    pub(super) fn release(&self) -> bool {
        self.0
            .compare_exchange(AHEAD, DONE, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    }

    /// The reader passes a slot it lent ahead. True when the buffer was
    /// dropped meanwhile and the reader must give the slot back (and then
    /// free it); false when it is still held: its release will.
    #[inline]
    pub(super) fn pass(&self) -> bool {
        match self
            .0
            .compare_exchange(AHEAD, IN_ORDER, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => false,
            Err(was) => {
                debug_assert_eq!(was, DONE, "a slot passed as lent ahead was not");
                true
            }
        }
    }

    /// The slot was given back: the reader may take it when the kernel
    /// fills it again (stored after the status, with Release, so a reader
    /// that sees it free sees the status too).
    #[inline]
    pub(super) fn free(&self) {
        self.0.store(FREE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn in_order_goes_back_on_release() {
        let s = SlotLend::default();
        assert!(s.is_free());
        s.lend(false);
        assert!(!s.is_free());
        assert!(s.release());
        s.free();
        assert!(s.is_free());
    }

    #[test]
    fn ahead_goes_back_on_whichever_comes_second() {
        // Dropped first: the reader gives it back.
        let s = SlotLend::default();
        s.lend(true);
        assert!(!s.release());
        assert!(
            !s.is_free(),
            "the kernel must not have it before the reader passes"
        );
        assert!(s.pass());
        s.free();
        assert!(s.is_free());
        // Passed first: the release gives it back.
        s.lend(true);
        assert!(!s.pass());
        assert!(!s.is_free());
        assert!(s.release());
        s.free();
        assert!(s.is_free());
    }

    /// The buffer's release and the reader's pass race on another thread:
    /// exactly one of them gives the slot back, every time.
    #[test]
    fn a_race_gives_the_slot_back_exactly_once() {
        let rounds = if cfg!(miri) { 40 } else { 20_000 };
        let s = SlotLend::default();
        let given = AtomicUsize::new(0);
        for _ in 0..rounds {
            s.lend(true);
            std::thread::scope(|t| {
                t.spawn(|| {
                    if s.release() {
                        given.fetch_add(1, Ordering::Relaxed);
                    }
                });
                if s.pass() {
                    given.fetch_add(1, Ordering::Relaxed);
                }
            });
            s.free();
        }
        assert_eq!(given.load(Ordering::Relaxed), rounds);
    }
}
