//! Recycled packet storage: vectors of owned buffers go back to a pool
//! when a [`PacketBuf`](super::PacketBuf) dies and come out again for the
//! next received or copied frame, so steady-state forwarding makes no heap
//! allocation per packet.
//!
//! Each thread keeps a free list of up to [`LOCAL_MAX`] vectors (no lock,
//! no atomics). Storage usually dies on another thread than the one that
//! made it (in RX / worker / TX mode it is made by an RX thread or a worker
//! and dropped by a TX thread), so a thread whose list overflows moves
//! [`BATCH`] vectors to a shared list, and a thread whose list is empty
//! takes a batch back: one lock per [`BATCH`] packets. The shared lock is
//! only ever tried (`try_lock`); a thread that finds it busy allocates or
//! frees as if there were no pool, so no dataplane thread waits on it.
//!
//! Only vectors of at least [`BUF_CAPACITY`] and at most
//! [`MAX_CAPACITY`] bytes are kept, so a vector taken from the pool holds
//! any standard frame with headroom without growing, and jumbo storage is
//! not hoarded. The pool holds at most `LOCAL_MAX` vectors per thread plus
//! `SHARED_MAX_BATCHES * BATCH` shared ones.

use std::cell::RefCell;
use std::sync::Mutex;

/// Capacity of the vectors the pool hands out: a 1518-byte frame, a few
/// pushed headers and 128 bytes of headroom.
pub const BUF_CAPACITY: usize = 2048;

/// Largest vector the pool keeps.
pub const MAX_CAPACITY: usize = 4 * BUF_CAPACITY;

/// Vectors moved to or from the shared list at a time.
pub const BATCH: usize = 64;

/// Vectors a thread keeps for itself.
pub const LOCAL_MAX: usize = 4 * BATCH;

/// Batches the shared list keeps.
const SHARED_MAX_BATCHES: usize = 32;

thread_local! {
    static LOCAL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Batches of [`BATCH`] vectors passed between threads, and the emptied
/// containers of batches taken (kept so that handing over allocates
/// nothing).
struct Shared {
    full: Vec<Vec<Vec<u8>>>,
    empty: Vec<Vec<Vec<u8>>>,
}

static SHARED: Mutex<Shared> = Mutex::new(Shared {
    full: Vec::new(),
    empty: Vec::new(),
});

/// An empty vector with room for at least [`BUF_CAPACITY`] bytes: a
/// recycled one when there is one, else a new allocation.
pub fn take() -> Vec<u8> {
    let recycled = LOCAL
        .try_with(|l| {
            let mut l = l.try_borrow_mut().ok()?;
            if l.is_empty() {
                refill(&mut l);
            }
            l.pop()
        })
        .ok()
        .flatten();
    recycled.unwrap_or_else(|| Vec::with_capacity(BUF_CAPACITY))
}

/// Moves a batch from the shared list into the (empty) local one, if the
/// lock is free and there is a batch.
fn refill(local: &mut Vec<Vec<u8>>) {
    let Ok(mut s) = SHARED.try_lock() else {
        return;
    };
    if let Some(mut batch) = s.full.pop() {
        local.reserve(LOCAL_MAX + 1);
        local.append(&mut batch);
        s.empty.push(batch);
    }
}

/// Gives `v`'s storage back to the pool (or frees it: a vector of the
/// wrong size, or a full pool).
pub fn give(mut v: Vec<u8>) {
    let cap = v.capacity();
    if !(BUF_CAPACITY..=MAX_CAPACITY).contains(&cap) {
        return;
    }
    v.clear();
    let _ = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else {
            return;
        };
        if l.len() >= LOCAL_MAX {
            spill(&mut l);
        }
        l.reserve(LOCAL_MAX + 1);
        l.push(v);
    });
}

/// Moves [`BATCH`] vectors from the (full) local list to the shared one,
/// or frees them when the lock is busy or the shared list is full.
fn spill(local: &mut Vec<Vec<u8>>) {
    let keep = local.len().saturating_sub(BATCH);
    match SHARED.try_lock() {
        Ok(mut s) if s.full.len() < SHARED_MAX_BATCHES => {
            let mut batch = s.empty.pop().unwrap_or_default();
            batch.reserve(BATCH);
            batch.extend(local.drain(keep..));
            s.full.push(batch);
        }
        _ => local.truncate(keep),
    }
}

/// Vectors held by the calling thread's free list (for tests).
pub fn local_len() -> usize {
    LOCAL.try_with(|l| l.borrow().len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_comes_back_and_wrong_sizes_are_freed() {
        // Runs on its own test thread, but its first take may bring a batch
        // from the shared list that another test thread overflowed into:
        // counts are taken relative to what the list holds after it.
        let v = take();
        assert!(v.is_empty() && v.capacity() >= BUF_CAPACITY);
        let held = local_len();
        let p = v.as_ptr();
        give(v);
        assert_eq!(local_len(), held + 1);
        let again = take();
        assert_eq!(again.as_ptr(), p, "the same storage is handed out again");
        assert_eq!(local_len(), held);
        give(Vec::with_capacity(16));
        give(Vec::with_capacity(MAX_CAPACITY + 1));
        assert_eq!(local_len(), held);
        let mut used = again;
        used.extend_from_slice(&[1, 2, 3]);
        give(used);
        assert!(take().is_empty(), "recycled vectors come back cleared");
    }

    #[test]
    fn an_overflowing_thread_hands_batches_to_others() {
        let n = LOCAL_MAX + BATCH;
        std::thread::spawn(move || {
            for _ in 0..n {
                give(Vec::with_capacity(BUF_CAPACITY));
            }
            assert!(local_len() <= LOCAL_MAX);
        })
        .join()
        .unwrap();
        // This thread's list is empty; a batch comes from the shared list
        // (unless another test thread took it first, which the pool allows).
        std::thread::spawn(|| {
            let v = take();
            assert!(v.capacity() >= BUF_CAPACITY);
            assert!(local_len() <= BATCH);
        })
        .join()
        .unwrap();
    }
}
