//! The ports the pipeline can send to, as the pipeline sees them: number,
//! config bits (`OFPPC_*`) and state bits (`OFPPS_*`). The dataplane or the
//! agent keeps this table current (port-status, port-mod).
//!
//! Rules used by the executor:
//! - a port is *live* (fast-failover, spec §6.5) when it exists, is not
//!   administratively down (`OFPPC_PORT_DOWN`) and its link is up (no
//!   `OFPPS_LINK_DOWN`);
//! - a port *can send* when it is live and not `OFPPC_NO_FWD`;
//! - FLOOD also skips ports in `OFPPS_BLOCKED` (spanning tree).
//!
//! Ports are kept in a B-tree (ordered, for ALL and FLOOD) and, for
//! numbers below `DENSE_PORTS`, in a vector too, which answers the
//! per-packet questions (`can_send`, `receives`).

use crate::normal::PortVlan;
use ofp::port::{port_config, port_state};
use std::collections::BTreeMap;

/// One port's config and state bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortInfo {
    /// `OFPPC_*` bits.
    pub config: u32,
    /// `OFPPS_*` bits.
    pub state: u32,
}

/// Ports numbered below this are also kept in a vector indexed by number:
/// the executor asks about the output port of every packet, and a B-tree
/// search there was 5% of the gateway benchmark.
const DENSE_PORTS: u32 = 1024;

/// The port table, ordered by port number so ALL and FLOOD emit in a
/// deterministic order.
#[derive(Clone, Debug, Default)]
pub struct Ports {
    ports: BTreeMap<u32, PortInfo>,
    /// `ports` again for numbers below [`DENSE_PORTS`].
    dense: Vec<Option<PortInfo>>,
    /// VLAN settings of the ports NORMAL does not treat as trunks of
    /// every VLAN (the default); read only by NORMAL.
    vlans: BTreeMap<u32, PortVlan>,
}

impl PartialEq for Ports {
    fn eq(&self, other: &Self) -> bool {
        self.ports == other.ports && self.vlans == other.vlans
    }
}

impl Eq for Ports {}

impl Ports {
    /// Ports `1..=n`, all up.
    pub fn with_range(n: u32) -> Ports {
        let mut p = Ports::default();
        for i in 1..=n {
            p.set(i, PortInfo::default());
        }
        p
    }

    /// Adds or replaces a port.
    pub fn set(&mut self, port_no: u32, info: PortInfo) {
        self.ports.insert(port_no, info);
        if port_no < DENSE_PORTS {
            let i = port_no as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, None);
            }
            if let Some(d) = self.dense.get_mut(i) {
                *d = Some(info);
            }
        }
    }

    /// Sets a port's VLAN settings for NORMAL (the default, a trunk of
    /// every VLAN, takes no room).
    pub fn set_vlan(&mut self, port_no: u32, vlan: PortVlan) {
        if vlan.is_default() {
            self.vlans.remove(&port_no);
        } else {
            self.vlans.insert(port_no, vlan);
        }
    }

    /// A port's VLAN settings (the default for a port without any).
    #[inline]
    pub fn vlan(&self, port_no: u32) -> &PortVlan {
        static TRUNK: std::sync::OnceLock<PortVlan> = std::sync::OnceLock::new();
        self.vlans
            .get(&port_no)
            .unwrap_or_else(|| TRUNK.get_or_init(PortVlan::default))
    }

    /// Removes a port (its VLAN settings with it).
    pub fn remove(&mut self, port_no: u32) {
        self.vlans.remove(&port_no);
        self.ports.remove(&port_no);
        if let Some(d) = self.dense.get_mut(port_no as usize) {
            *d = None;
        }
    }

    /// A port's bits.
    #[inline]
    pub fn get(&self, port_no: u32) -> Option<PortInfo> {
        if port_no < DENSE_PORTS {
            return self.dense.get(port_no as usize).copied().flatten();
        }
        self.ports.get(&port_no).copied()
    }

    /// Every port number, ascending.
    pub fn numbers(&self) -> impl Iterator<Item = u32> + '_ {
        self.ports.keys().copied()
    }

    /// Whether the port exists, is not down and its link is up.
    #[inline]
    pub fn is_live(&self, port_no: u32) -> bool {
        self.get(port_no).is_some_and(|p| {
            p.config & port_config::PORT_DOWN == 0 && p.state & port_state::LINK_DOWN == 0
        })
    }

    /// Whether a packet may be sent out of the port.
    #[inline]
    pub fn can_send(&self, port_no: u32) -> bool {
        self.is_live(port_no)
            && self
                .get(port_no)
                .is_some_and(|p| p.config & port_config::NO_FWD == 0)
    }

    /// Whether FLOOD sends out of the port (as `can_send`, and not blocked).
    pub fn floods_to(&self, port_no: u32) -> bool {
        self.can_send(port_no)
            && self
                .get(port_no)
                .is_some_and(|p| p.state & port_state::BLOCKED == 0)
    }

    /// Whether packets received on the port are processed (no `NO_RECV`).
    /// A port the table does not know (the controller, LOCAL) receives.
    pub fn receives(&self, port_no: u32) -> bool {
        self.get(port_no)
            .is_none_or(|p| p.config & port_config::NO_RECV == 0)
    }

    /// Whether packet-ins for packets from this port are allowed (no
    /// `NO_PACKET_IN`).
    pub fn packet_in_allowed(&self, port_no: u32) -> bool {
        self.get(port_no)
            .is_none_or(|p| p.config & port_config::NO_PACKET_IN == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_and_forwarding_rules() {
        let mut p = Ports::with_range(4);
        p.set(
            2,
            PortInfo {
                config: port_config::PORT_DOWN,
                state: 0,
            },
        );
        p.set(
            3,
            PortInfo {
                config: port_config::NO_FWD,
                state: port_state::BLOCKED,
            },
        );
        p.set(
            4,
            PortInfo {
                config: 0,
                state: port_state::LINK_DOWN | port_state::BLOCKED,
            },
        );
        assert!(p.is_live(1) && p.can_send(1) && p.floods_to(1));
        assert!(!p.is_live(2) && !p.can_send(2));
        assert!(p.is_live(3) && !p.can_send(3) && !p.floods_to(3));
        assert!(!p.is_live(4));
        assert!(!p.is_live(9));
        assert!(p.receives(9) && p.receives(1));
        assert_eq!(p.numbers().collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        // Small and large numbers, set and removed.
        p.set(5000, PortInfo::default());
        assert!(p.can_send(5000) && !p.can_send(5001));
        p.remove(1);
        p.remove(5000);
        p.remove(7000);
        assert!(!p.is_live(1) && !p.is_live(5000));
        assert_eq!(p.numbers().collect::<Vec<_>>(), vec![2, 3, 4]);
        assert_eq!(p, {
            let mut q = Ports::with_range(4);
            q.remove(1);
            q.set(2, p.get(2).unwrap());
            q.set(3, p.get(3).unwrap());
            q.set(4, p.get(4).unwrap());
            q
        });
    }
}
