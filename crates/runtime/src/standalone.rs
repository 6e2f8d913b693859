//! Fail-standalone: a bridge in fail mode standalone forwards as
//! Open vSwitch's does, with the switch's own learning bridge
//! ([`pipeline::normal`], the NORMAL output):
//!
//! - **no controller configured**: the flow tables are in force and a
//!   table-0 miss goes to NORMAL (`DatapathConfig::miss_normal`; Open
//!   vSwitch installs `priority=0,actions=NORMAL` on such a bridge), so a
//!   bridge made with `add-br` and two `add-port`s switches at once, and
//!   flows a user adds beside it take precedence;
//! - **controllers configured, none connected** (unreachable from the
//!   start, or all gone): fail-open. While [`Standalone`] is active every
//!   worker hands each burst to NORMAL instead of to the flow tables
//!   ([`pipeline::datapath::WorkerState::process_burst_normal`]); the
//!   tables are bypassed, not changed, so they are in force again the
//!   moment a controller connects. It is active from the bridge's start
//!   until a controller connects: the first frame is switched, with no
//!   wait for a connection attempt to fail.
//!
//! Fail mode secure needs nothing here: the tables stay, misses are
//! dropped, packet-ins find no channel (`packet_in_no_controller`).
//!
//! The learnt addresses are forgotten each time the bridge turns
//! fail-open, so addresses learnt in an earlier spell do not outlive the
//! flows that ran in between. The control side only flips an atomic
//! ([`Standalone::set_active`]); workers read it once per burst and never
//! wait for control code (DESIGN.md).
//!
//! [`follow_controllers`] switches a bridge in and out of fail-open as an
//! agent's controllers come and go.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use pipeline::normal::NormalHandle;

/// Counters of a bridge's fail-open spells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StandaloneCounters {
    /// Frames sent to a learnt port.
    pub forwarded: u64,
    /// Frames flooded (broadcast, multicast or unknown destination).
    pub flooded: u64,
}

/// Whether a bridge is fail-open now, and what it forwarded so.
#[derive(Debug, Default)]
pub struct Standalone {
    active: AtomicBool,
    normal: NormalHandle,
    forwarded: AtomicU64,
    flooded: AtomicU64,
}

impl Standalone {
    /// An inactive follower over the bridge's NORMAL table.
    pub fn new(normal: NormalHandle) -> Standalone {
        Standalone {
            normal,
            ..Standalone::default()
        }
    }

    /// Whether the bridge bypasses its tables for NORMAL now (one load
    /// per burst on the workers' path).
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Turns fail-open on (forgetting what an earlier spell learnt) or
    /// off (back to the flow tables). Returns whether this changed
    /// anything.
    pub fn set_active(&self, on: bool) -> bool {
        let changed = self.active.swap(on, Ordering::AcqRel) != on;
        if on && changed {
            self.normal.flush();
        }
        changed
    }

    /// Adds one burst's figures (a worker, once per burst).
    pub fn count(&self, forwarded: u64, flooded: u64) {
        if forwarded > 0 {
            self.forwarded.fetch_add(forwarded, Ordering::Relaxed);
        }
        if flooded > 0 {
            self.flooded.fetch_add(flooded, Ordering::Relaxed);
        }
    }

    /// The counters now.
    pub fn counters(&self) -> StandaloneCounters {
        StandaloneCounters {
            forwarded: self.forwarded.load(Ordering::Relaxed),
            flooded: self.flooded.load(Ordering::Relaxed),
        }
    }
}

/// Keeps `standalone` active exactly while `agent` has no controller
/// connected (runs until the agent's runtime stops). `bridge` names the
/// bridge in the log lines.
pub async fn follow_controllers<S: agent::Switch>(
    agent: Arc<agent::Agent<S>>,
    standalone: Arc<Standalone>,
    bridge: String,
) {
    loop {
        agent.all_controllers_gone().await;
        if standalone.set_active(true) {
            tracing::warn!(
                bridge,
                "no controller: acting as a learning switch (fail mode standalone)"
            );
        }
        agent.controllers().any_controller_connected().await;
        if standalone.set_active(false) {
            tracing::info!(bridge, "a controller is connected: back to the flow tables");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::Time;

    #[test]
    fn turning_fail_open_forgets_and_is_reported_once() {
        let normal = NormalHandle::default();
        let s = Standalone::new(normal.clone());
        assert!(!s.is_active());
        normal.learn(0, [2, 0, 0, 0, 0, 1], 1, Time(1));
        assert!(s.set_active(true));
        assert!(!s.set_active(true), "already active");
        assert_eq!(normal.len(Time(1)), 0, "a new spell forgets");
        s.count(2, 3);
        s.count(0, 1);
        assert_eq!(
            s.counters(),
            StandaloneCounters {
                forwarded: 2,
                flooded: 4
            }
        );
        assert!(s.set_active(false));
    }
}
