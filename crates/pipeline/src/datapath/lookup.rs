//! Matching a flow entry against a packet, and the per-table lookup behind
//! a small trait: [`FastClassifier`] (the default, the `classifier`
//! crate's index kept beside every [`FlowTable`]) and [`LinearScan`] (the
//! reference it is tested against).
//!
//! A packet is described by its [`FlowKey`] (header fields parsed by the
//! `packet` crate, plus the pipeline fields IN_PORT, IN_PHY_PORT, METADATA
//! and TUNNEL_ID set by the pipeline). An entry matches when every field of
//! its [`MatchKey`] is present in the packet and equal under the entry's
//! mask; a field the packet lacks (TCP ports of a UDP packet, VLAN_PCP of
//! an untagged frame) never matches.

use crate::flow_entry::FlowEntry;
use crate::flow_table::{FlowTable, Tables};
use crate::match_key::MatchKey;
use packet::flow_key::FlowKey;

/// True when every field of `key` is present in `packet` and equal to the
/// entry's value under its mask.
pub fn matches(key: &MatchKey, packet: &FlowKey) -> bool {
    key.fields()
        .iter()
        .all(|f| match packet.get(f.field as u8) {
            Some(v) => v & f.mask == f.value,
            None => false,
        })
}

/// A per-table lookup: the entry of `table` that `packet` hits, if any.
///
/// Among matching entries the highest priority wins; among equal
/// priorities the implementation must pick deterministically (the linear
/// scan picks the oldest entry, the one with the smallest [`FlowId`]).
///
/// [`FlowId`]: crate::flow_entry::FlowId
pub trait Classifier {
    /// The entry of table `table_id` of `tables` that `packet` hits.
    fn lookup<'t>(
        &self,
        tables: &'t Tables,
        table_id: u8,
        packet: &FlowKey,
    ) -> Option<&'t FlowEntry>;

    /// True when this classifier answers exactly as each table's own
    /// index ([`FlowTable::lookup`] / [`FlowTable::lookup_burst`]), so
    /// the datapath may use the index's burst lookup and a flow cache
    /// keyed by table generations instead of calling [`Classifier::lookup`].
    fn uses_table_index(&self) -> bool {
        false
    }
}

/// The fast classifier: each table's `classifier::Table` index (hash per
/// mask, IPv4 LPM, merged tables), mirrored on every change of the table.
/// The datapath's default.
#[derive(Clone, Copy, Debug, Default)]
pub struct FastClassifier;

impl Classifier for FastClassifier {
    fn lookup<'t>(
        &self,
        tables: &'t Tables,
        table_id: u8,
        packet: &FlowKey,
    ) -> Option<&'t FlowEntry> {
        tables.table(table_id).and_then(|t| t.lookup(packet))
    }

    fn uses_table_index(&self) -> bool {
        true
    }
}

/// The simple, obviously correct classifier: scans every entry of the
/// table. O(entries) per lookup; the reference the fast classifier is
/// tested against.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinearScan;

impl LinearScan {
    /// The best entry of one table.
    pub fn lookup_table<'t>(table: &'t FlowTable, packet: &FlowKey) -> Option<&'t FlowEntry> {
        let mut best: Option<&FlowEntry> = None;
        for e in table.entries() {
            // Entries come in installation (id) order, so a strict `>`
            // keeps the oldest among equal priorities.
            if best.is_some_and(|b| e.priority <= b.priority) {
                continue;
            }
            if matches(&e.key, packet) {
                best = Some(e);
            }
        }
        best
    }
}

impl Classifier for LinearScan {
    fn lookup<'t>(
        &self,
        tables: &'t Tables,
        table_id: u8,
        packet: &FlowKey,
    ) -> Option<&'t FlowEntry> {
        tables
            .table(table_id)
            .and_then(|t| Self::lookup_table(t, packet))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::{Match, Oxm, OxmField, OxmValue};

    fn key(fields: Vec<Oxm>) -> MatchKey {
        MatchKey::new(&Match { fields }).unwrap()
    }

    fn udp_key() -> FlowKey {
        let mut k = FlowKey::default();
        k.set_metadata_fields(3, 3, 0xff00, 0);
        k.present |= (1 << 5) | (1 << 10) | (1 << 15) | (1 << 16);
        k.eth_type = 0x0800;
        k.ip_proto = 17;
        k.tp_src = 53;
        k.tp_dst = 1000;
        k
    }

    #[test]
    fn exact_masked_and_absent_fields() {
        let p = udp_key();
        assert!(matches(&key(vec![]), &p));
        assert!(matches(
            &key(vec![Oxm::basic(OxmField::InPort, OxmValue::U32(3))]),
            &p
        ));
        assert!(!matches(
            &key(vec![Oxm::basic(OxmField::InPort, OxmValue::U32(4))]),
            &p
        ));
        assert!(matches(
            &key(vec![Oxm::masked(
                OxmField::Metadata,
                OxmValue::U64(0x0f00),
                OxmValue::U64(0x0f00)
            )]),
            &p
        ));
        assert!(!matches(
            &key(vec![Oxm::masked(
                OxmField::Metadata,
                OxmValue::U64(0x00f0),
                OxmValue::U64(0x00f0)
            )]),
            &p
        ));
        let udp = key(vec![
            Oxm::basic(OxmField::EthType, OxmValue::U16(0x0800)),
            Oxm::basic(OxmField::IpProto, OxmValue::U8(17)),
            Oxm::basic(OxmField::UdpSrc, OxmValue::U16(53)),
        ]);
        assert!(matches(&udp, &p));
        let tcp = key(vec![
            Oxm::basic(OxmField::EthType, OxmValue::U16(0x0800)),
            Oxm::basic(OxmField::IpProto, OxmValue::U8(6)),
            Oxm::basic(OxmField::TcpSrc, OxmValue::U16(53)),
        ]);
        assert!(!matches(&tcp, &p), "TCP fields are absent from UDP");
    }
}
