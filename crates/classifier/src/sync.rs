//! The atomics, `Arc` and `Mutex` that [`crate::versioned`] uses: the
//! standard library's, or loom's under `cfg(loom)` so that the loom tests
//! (`scripts/loom.sh`) explore every interleaving of the protocol.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// One turn of a wait for another thread's short write (a line's odd
/// `seq`): a spin hint, or under loom a yield, so that the model lets
/// the writer run.
#[inline]
pub(crate) fn spin() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
