//! The running bridges, each behind a handle ([`BridgeId`]).
//!
//! A bridge is found by its handle in one hash lookup; its name is
//! resolved to the handle in one place ([`Running::id`]; the runtime's
//! `no_bridge` is the one error, "no bridge named X runs"). Handles are
//! never reused: one kept past its bridge's removal finds nothing, never a
//! later bridge of the same name. What the runtime knows of a bridge
//! beyond the bridge itself (why it has no local port) lives in its entry
//! and goes with it. The bridges are kept in the order they started
//! (configuration order at start, then the order of addition), which the
//! names, reports and the final stop follow.

use std::collections::HashMap;
use std::sync::Arc;

use crate::bridge::BridgeRt;

/// A running bridge's handle (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BridgeId(u64);

/// A running bridge and what the runtime keeps beside it.
struct Entry {
    bridge: Arc<BridgeRt>,
    /// Why the bridge, configured with a local port, has none.
    local_error: Option<String>,
}

/// The running bridges by handle, their names' handles, and their order.
#[derive(Default)]
pub(crate) struct Running {
    by_id: HashMap<BridgeId, Entry>,
    by_name: HashMap<String, BridgeId>,
    order: Vec<BridgeId>,
    next: u64,
}

impl Running {
    /// The handle of the bridge named `name`.
    pub(crate) fn id(&self, name: &str) -> Option<BridgeId> {
        self.by_name.get(name).copied()
    }

    /// The bridge named `name` and its handle.
    pub(crate) fn named(&self, name: &str) -> Option<(BridgeId, &Arc<BridgeRt>)> {
        let id = self.id(name)?;
        Some((id, self.get(id)?))
    }

    /// The bridge behind `id`.
    pub(crate) fn get(&self, id: BridgeId) -> Option<&Arc<BridgeRt>> {
        Some(&self.by_id.get(&id)?.bridge)
    }

    /// Why the bridge behind `id` has no local port although asked for one.
    pub(crate) fn local_error(&self, id: BridgeId) -> Option<&str> {
        self.by_id.get(&id)?.local_error.as_deref()
    }

    /// Adds `bridge` last and returns its handle; when a bridge of its
    /// name runs already, that one is left as it is and `bridge` handed
    /// back.
    pub(crate) fn insert(
        &mut self,
        bridge: Arc<BridgeRt>,
        local_error: Option<String>,
    ) -> Result<BridgeId, Arc<BridgeRt>> {
        if self.by_name.contains_key(&bridge.name) {
            return Err(bridge);
        }
        let id = BridgeId(self.next);
        self.next += 1;
        self.by_name.insert(bridge.name.clone(), id);
        self.by_id.insert(
            id,
            Entry {
                bridge,
                local_error,
            },
        );
        self.order.push(id);
        Ok(id)
    }

    /// Forgets the bridge behind `id` and returns it.
    pub(crate) fn remove(&mut self, id: BridgeId) -> Option<Arc<BridgeRt>> {
        let e = self.by_id.remove(&id)?;
        self.by_name.remove(&e.bridge.name);
        self.order.retain(|o| *o != id);
        Some(e.bridge)
    }

    /// Every bridge, in order.
    pub(crate) fn all(&self) -> Vec<Arc<BridgeRt>> {
        self.order
            .iter()
            .filter_map(|id| self.get(*id).cloned())
            .collect()
    }

    /// Every bridge's name, in order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.order
            .iter()
            .filter_map(|id| Some(self.get(*id)?.name.clone()))
            .collect()
    }

    /// Forgets every bridge and returns them, in order (handles given
    /// before stay unused).
    pub(crate) fn take_all(&mut self) -> Vec<Arc<BridgeRt>> {
        let all = self.all();
        *self = Running {
            next: self.next,
            ..Running::default()
        };
        all
    }
}
