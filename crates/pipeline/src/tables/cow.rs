//! Multi-buffered copy-on-write for the structures published to the
//! workers (see "Publishing" in the module comment of [`super`]).

use std::sync::Arc;

/// A structure changed only through replayable operations, so that a
/// second copy can be caught up by replaying them (see [`Dual`]).
pub(super) trait Replay: Clone {
    /// One change.
    type Op;
    /// What applying a change answers.
    type Out;
    /// Applies one change.
    fn apply(&mut self, op: &Self::Op) -> Self::Out;
    /// Applies one change the caller no longer needs (the control side's
    /// copy, after logging): may move out of it instead of cloning.
    fn apply_owned(&mut self, op: Self::Op) -> Self::Out {
        self.apply(&op)
    }
    /// Number of elements a full copy clones (sizes the log, see `Dual`).
    fn size(&self) -> usize;
}

/// Most logged operations (per structure) kept for catching up old
/// copies; beyond it they are dropped (the next write after a publish
/// copies instead).
pub(super) const MAX_LOG: usize = 1 << 16;

/// The log may also grow to a structure's size over this: replaying
/// that many operations costs about what a full copy does (measured:
/// `bulk_install_with_publishes` below), so a long bulk install with
/// publishes in between catches spares up instead of copying the growing
/// table at every publish.
pub(super) const LOG_PER_COPY: usize = 2;

/// Most old copies a [`Dual`] keeps for reuse.
pub(super) const MAX_SPARES: usize = 2;

/// Multi-buffered copy-on-write (see the module comment, "Publishing"):
/// `cur` is the control side's copy, kept by the caller (a table's place
/// in [`super::TableSet`]) and shared with published snapshots after a
/// publish; the `Dual` is the rest, which only the control side sees:
/// `spares` are copies earlier publishes left behind, each
/// with the number of operations it has seen; `log` holds the operations
/// from number `log_start` on, `applied` counts those `cur` has seen.
/// When `cur` is shared, a write takes a spare no snapshot holds anymore,
/// replays the operations it missed and swaps it in: O(changes since
/// that spare's publish) instead of O(structure). Keeping two spares lets
/// a worker still hold the previous snapshot while the one before it is
/// reused.
#[derive(Debug)]
pub(super) struct Dual<T: Replay> {
    pub(super) spares: Vec<(Arc<T>, usize)>,
    pub(super) log: std::collections::VecDeque<T::Op>,
    pub(super) log_start: usize,
    pub(super) applied: usize,
}

impl<T: Replay> Clone for Dual<T> {
    /// A clone keeps no spare (they belong to the original's snapshots).
    fn clone(&self) -> Self {
        Dual::default()
    }
}

impl<T: Replay> Default for Dual<T> {
    fn default() -> Self {
        Dual {
            spares: Vec::new(),
            log: Default::default(),
            log_start: 0,
            applied: 0,
        }
    }
}

impl<T: Replay> Dual<T>
where
    T::Op: Clone,
{
    /// Applies `op` to the control side's copy `cur` (which the caller
    /// keeps; published snapshots share it).
    pub(super) fn write(&mut self, cur: &mut Arc<T>, op: T::Op) -> T::Out {
        if Arc::get_mut(cur).is_none() {
            // Published: reuse a spare nothing reads anymore, else copy.
            let free = self
                .spares
                .iter_mut()
                .position(|(c, _)| Arc::get_mut(c).is_some());
            let fresh = match free {
                Some(i) => {
                    let (mut copy, at) = self.spares.swap_remove(i);
                    if let Some(c) = Arc::get_mut(&mut copy) {
                        for o in self.log.iter().skip(at.saturating_sub(self.log_start)) {
                            c.apply(o);
                        }
                    }
                    copy
                }
                None => Arc::new(T::clone(cur)),
            };
            let old = std::mem::replace(cur, fresh);
            self.spares.push((old, self.applied));
            if self.spares.len() > MAX_SPARES {
                // Drop the copy that lags most.
                if let Some(i) = (0..self.spares.len()).min_by_key(|&i| self.spares[i].1) {
                    self.spares.swap_remove(i);
                }
            }
        }
        self.applied += 1;
        if self.spares.is_empty() || self.log.len() >= MAX_LOG.max(cur.size() / LOG_PER_COPY) {
            self.spares.clear();
            self.log.clear();
            self.log_start = self.applied;
        } else {
            self.log.push_back(op.clone());
            // Forget operations every spare has seen.
            let oldest = self
                .spares
                .iter()
                .map(|s| s.1)
                .min()
                .unwrap_or(self.applied);
            while self.log_start < oldest && self.log.pop_front().is_some() {
                self.log_start += 1;
            }
        }
        match Arc::get_mut(cur) {
            Some(c) => c.apply_owned(op),
            // Unreachable: `cur` was made unique above.
            None => Arc::make_mut(cur).apply_owned(op),
        }
    }
}
