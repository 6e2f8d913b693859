//! ifIndex numbering.
//!
//! The rule: a port is known by (bridge name, OpenFlow port number,
//! interface name). The first time the module sees a key it gives it the
//! next unused ifIndex, counting from 1; the key keeps that number for as
//! long as the switch runs, also across a delete and re-add of the same
//! port, and no other key ever gets it. At start the ports are numbered
//! in configuration order (bridges as written, each bridge's ports by port
//! number), so a switch restarted with the same configuration numbers its
//! ports the same way. Two bridges may both have a port 1: the bridge name
//! in the key keeps them apart. A port whose interface changes (port 3
//! re-created on another interface) is a new interface and gets a new
//! ifIndex, as RFC 2863 §3.1.5 asks.

use std::collections::HashMap;

/// The key of a port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PortKey {
    pub bridge: String,
    pub ofport: u32,
    pub interface: String,
}

/// The numbering (see the module comment).
#[derive(Debug, Default)]
pub struct IfIndexMap {
    by_key: HashMap<PortKey, u32>,
    next: u32,
}

impl IfIndexMap {
    /// The ifIndex of `key`, given now if it has none. `None` once the
    /// 2^31 - 1 numbers IF-MIB allows are spent.
    pub fn index(&mut self, key: &PortKey) -> Option<u32> {
        if let Some(i) = self.by_key.get(key) {
            return Some(*i);
        }
        let i = self.next.checked_add(1).filter(|i| *i <= i32::MAX as u32)?;
        self.next = i;
        self.by_key.insert(key.clone(), i);
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(b: &str, p: u32, i: &str) -> PortKey {
        PortKey {
            bridge: b.into(),
            ofport: p,
            interface: i.into(),
        }
    }

    #[test]
    fn numbers_are_stable_and_never_reused() {
        let mut m = IfIndexMap::default();
        assert_eq!(m.index(&k("br0", 1, "a")), Some(1));
        assert_eq!(m.index(&k("br0", 2, "b")), Some(2));
        // Same port number on another bridge: another ifIndex.
        assert_eq!(m.index(&k("br1", 1, "c")), Some(3));
        // Seen again (also after a delete and re-add): the same.
        assert_eq!(m.index(&k("br0", 1, "a")), Some(1));
        // Port 1 re-made on another interface: a new interface.
        assert_eq!(m.index(&k("br0", 1, "d")), Some(4));
        assert_eq!(m.index(&k("br0", 2, "b")), Some(2));
    }

    #[test]
    fn the_range_ends_at_i32_max() {
        let mut m = IfIndexMap {
            next: i32::MAX as u32 - 1,
            ..Default::default()
        };
        assert_eq!(m.index(&k("b", 1, "x")), Some(i32::MAX as u32));
        assert_eq!(m.index(&k("b", 2, "y")), None);
        assert_eq!(m.index(&k("b", 1, "x")), Some(i32::MAX as u32));
    }
}
