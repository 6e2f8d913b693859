//! [`Controllers`]: what the connections of one switch share — each
//! connection's role, the generation id of the last MASTER/SLAVE request
//! (spec 1.3.5 §6.3.7), and how many controllers are connected (for the
//! fail modes, see [`crate::FailMode`]).
//!
//! Invariants: at most one connection is MASTER (a new MASTER turns the
//! old one into SLAVE); the generation id, once defined, only moves forward
//! in the spec's wrap-around order (`(int64)(new - cached) >= 0`).

use ofp::error::RoleRequestFailedCode;
use ofp::role::controller_role;
use ofp::OfpError;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::watch;

/// Identifies one controller connection within an agent.
pub type ConnId = u64;

#[derive(Default)]
struct Inner {
    generation: Option<u64>,
    roles: HashMap<ConnId, u32>,
    next_id: ConnId,
}

/// Roles and liveness of all controller connections of one switch.
pub struct Controllers {
    inner: Mutex<Inner>,
    connected: watch::Sender<usize>,
}

impl Default for Controllers {
    fn default() -> Self {
        Controllers {
            inner: Mutex::new(Inner::default()),
            connected: watch::Sender::new(0),
        }
    }
}

/// True when `new` is not older than `cached` in the spec's wrap-around
/// comparison of generation ids.
pub fn generation_is_current(new: u64, cached: u64) -> bool {
    (new.wrapping_sub(cached) as i64) >= 0
}

impl Controllers {
    /// No connections yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh connection id (not yet counted as connected).
    pub fn allocate(&self) -> ConnId {
        let mut inner = self.lock();
        inner.next_id += 1;
        inner.next_id
    }

    /// Counts `id` as a connected controller with role EQUAL (after its
    /// HELLO exchange succeeded).
    pub fn register(&self, id: ConnId) {
        let n = {
            let mut inner = self.lock();
            inner.roles.insert(id, controller_role::EQUAL);
            inner.roles.len()
        };
        self.connected.send_replace(n);
    }

    /// Forgets `id` (its channel closed). Idempotent.
    pub fn unregister(&self, id: ConnId) {
        let n = {
            let mut inner = self.lock();
            if inner.roles.remove(&id).is_none() {
                return;
            }
            inner.roles.len()
        };
        self.connected.send_replace(n);
    }

    /// The role of `id` (EQUAL for an unknown id).
    pub fn role(&self, id: ConnId) -> u32 {
        self.lock()
            .roles
            .get(&id)
            .copied()
            .unwrap_or(controller_role::EQUAL)
    }

    /// The cached generation id, if a MASTER/SLAVE request defined one.
    pub fn generation(&self) -> Option<u64> {
        self.lock().generation
    }

    /// Handles a ROLE_REQUEST from `id` and returns the role and
    /// generation id for the reply. NOCHANGE only reads; EQUAL needs no
    /// generation check; MASTER and SLAVE are refused with
    /// `ROLE_REQUEST_FAILED/STALE` when `generation_id` is older than the
    /// cached one. An undefined role is `ROLE_REQUEST_FAILED/BAD_ROLE`.
    pub fn request_role(
        &self,
        id: ConnId,
        role: u32,
        generation_id: u64,
    ) -> Result<(u32, u64), OfpError> {
        use controller_role as r;
        let mut inner = self.lock();
        match role {
            r::NOCHANGE => {}
            r::EQUAL => {
                inner.roles.insert(id, r::EQUAL);
            }
            r::MASTER | r::SLAVE => {
                if let Some(cached) = inner.generation {
                    if !generation_is_current(generation_id, cached) {
                        return Err(OfpError::RoleRequestFailed(RoleRequestFailedCode::Stale));
                    }
                }
                inner.generation = Some(generation_id);
                if role == r::MASTER {
                    for (other, other_role) in inner.roles.iter_mut() {
                        if *other != id && *other_role == r::MASTER {
                            *other_role = r::SLAVE;
                        }
                    }
                }
                inner.roles.insert(id, role);
            }
            _ => return Err(OfpError::RoleRequestFailed(RoleRequestFailedCode::BadRole)),
        }
        let current = inner.roles.get(&id).copied().unwrap_or(r::EQUAL);
        // The reply carries the cached generation id when one is defined,
        // otherwise the request's.
        Ok((current, inner.generation.unwrap_or(generation_id)))
    }

    /// How many controllers are connected now.
    pub fn connected(&self) -> usize {
        *self.connected.borrow()
    }

    /// A receiver of the number of connected controllers.
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.connected.subscribe()
    }

    /// Resolves when no controller is connected (at once if none is now).
    /// The runtime enters its fail mode then, and leaves it when
    /// [`Controllers::any_controller_connected`] resolves.
    pub async fn all_controllers_gone(&self) {
        let mut rx = self.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Resolves when at least one controller is connected.
    pub async fn any_controller_connected(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|n| *n > 0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use controller_role as r;

    #[test]
    fn wrap_around_comparison() {
        assert!(generation_is_current(5, 5));
        assert!(generation_is_current(6, 5));
        assert!(!generation_is_current(4, 5));
        assert!(generation_is_current(0, u64::MAX));
        assert!(!generation_is_current(u64::MAX, 0));
        assert!(generation_is_current(1 << 63, 1));
        assert!(!generation_is_current(1 << 63, 0));
    }

    #[test]
    fn one_master_and_stale_generations() {
        let c = Controllers::new();
        let (a, b) = (c.allocate(), c.allocate());
        c.register(a);
        c.register(b);
        assert_eq!(c.connected(), 2);
        assert_eq!(c.request_role(a, r::MASTER, 10), Ok((r::MASTER, 10)));
        assert_eq!(c.request_role(b, r::MASTER, 11), Ok((r::MASTER, 11)));
        assert_eq!(c.role(a), r::SLAVE);
        assert_eq!(
            c.request_role(a, r::MASTER, 10),
            Err(OfpError::RoleRequestFailed(RoleRequestFailedCode::Stale))
        );
        assert_eq!(c.request_role(a, r::NOCHANGE, 0), Ok((r::SLAVE, 11)));
        assert_eq!(c.request_role(a, r::EQUAL, 0), Ok((r::EQUAL, 11)));
        assert_eq!(
            c.request_role(a, 4, 0),
            Err(OfpError::RoleRequestFailed(RoleRequestFailedCode::BadRole))
        );
        c.unregister(a);
        c.unregister(a);
        assert_eq!(c.connected(), 1);
    }
}
