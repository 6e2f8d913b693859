//! Following kernel link state: a netlink watcher thread sets the link
//! bit of the ports whose interface went down or up, publishes, and
//! queues a [`PortStatusEvent`] (and the bridge's agent gets an
//! OFPT_PORT_STATUS).
//!
//! Which interface belongs to which ports is a registry the control side
//! changes as ports are added and removed; the watcher reads it per event
//! (it is never on the packet path).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use dataplane::link::{LinkChange, LinkWatcher};
use dataplane::LinkState;

use crate::bridge::BridgeRt;
use crate::PortStatusEvent;

/// Interface name → the (bridge, port) pairs it backs.
type ByName = HashMap<String, Vec<(Weak<BridgeRt>, u32)>>;

/// Which ports each kernel interface backs.
#[derive(Default)]
pub(crate) struct LinkRegistry {
    by_name: Mutex<ByName>,
}

impl LinkRegistry {
    fn map(&self) -> std::sync::MutexGuard<'_, ByName> {
        self.by_name.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows `interface` for port `port` of `b`.
    pub(crate) fn add(&self, interface: &str, b: &Arc<BridgeRt>, port: u32) {
        self.map()
            .entry(interface.to_string())
            .or_default()
            .push((Arc::downgrade(b), port));
    }

    /// Follows the kernel interfaces of every port of `b`.
    pub(crate) fn add_bridge(&self, b: &Arc<BridgeRt>) {
        for (no, e) in b.port_entries().iter() {
            if e.kernel {
                self.add(&e.interface, b, *no);
            }
        }
    }

    /// Stops following the interfaces of bridge `b` (of its port `port`
    /// only when given).
    pub(crate) fn remove(&self, b: &BridgeRt, port: Option<u32>) {
        self.map().retain(|_, v| {
            v.retain(|(w, p)| {
                let gone = (w.strong_count() == 0 || std::ptr::eq(w.as_ptr(), b))
                    && port.is_none_or(|n| n == *p);
                !gone
            });
            !v.is_empty()
        });
    }

    fn targets(&self, interface: &str) -> Vec<(Arc<BridgeRt>, u32)> {
        self.map()
            .get(interface)
            .map(|v| {
                v.iter()
                    .filter_map(|(w, p)| Some((w.upgrade()?, *p)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Starts the watcher thread; `None` (with a warning) where netlink is
/// not available.
pub(crate) fn spawn_watcher(
    registry: Arc<LinkRegistry>,
    events: Sender<PortStatusEvent>,
    stop: Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    let mut watcher = match LinkWatcher::new() {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("link watcher unavailable, port states stay as at start: {e}");
            return None;
        }
    };
    std::thread::Builder::new()
        .name("fulmar-links".into())
        .spawn(move || {
            let mut known: HashMap<String, bool> = HashMap::new();
            let mut evs = Vec::new();
            while !stop.load(Ordering::Acquire) {
                evs.clear();
                if watcher.poll(&mut evs).unwrap_or(0) == 0 {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                for ev in &evs {
                    let Some(name) = &ev.name else { continue };
                    let targets = registry.targets(name);
                    if targets.is_empty() {
                        continue;
                    }
                    let up = ev.change == LinkChange::Present && ev.state == LinkState::Up;
                    if known.insert(name.clone(), up) == Some(up) {
                        continue;
                    }
                    for (b, port) in targets {
                        b.set_link(port, up);
                        tracing::info!(bridge = %b.name, port, interface = %name, up, "link changed");
                        let _ = events.send(PortStatusEvent {
                            bridge: b.name.clone(),
                            port,
                            interface: name.clone(),
                            up,
                        });
                    }
                }
            }
        })
        .ok()
}
