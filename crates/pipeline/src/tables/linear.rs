//! The reference lookup: an entry matches a packet when every field of
//! its [`MatchKey`] is present in the packet's [`FlowKey`] and equal under
//! the entry's mask (a field the packet lacks — TCP ports of a UDP packet,
//! VLAN_PCP of an untagged frame — never matches); the best entry of a
//! table is found by scanning them all. Obviously correct and O(entries):
//! what the classifier index is tested against, and what a table falls
//! back to if its index ever refused a rule.

use crate::model::flow_entry::FlowEntry;
use crate::model::match_key::MatchKey;
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

/// The best entry among `entries` (in any order) for `packet`: the
/// highest priority, then the oldest (smallest id).
pub fn best<'a>(
    entries: impl Iterator<Item = &'a FlowEntry>,
    packet: &FlowKey,
) -> Option<&'a FlowEntry> {
    let mut best: Option<&FlowEntry> = None;
    for e in entries {
        let better = best.is_none_or(|b| {
            (e.priority, std::cmp::Reverse(e.id)) > (b.priority, std::cmp::Reverse(b.id))
        });
        if better && matches(&e.key, packet) {
            best = Some(e);
        }
    }
    best
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
