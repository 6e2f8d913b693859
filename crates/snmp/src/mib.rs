//! The MIB objects served, as a sorted map from instance OID to value.
//!
//! A [`Model`] is what the module read from the daemon (one row per port,
//! plus the bridge BRIDGE-MIB describes); [`View::build`] turns it into
//! every instance of IF-MIB `ifNumber`, `ifTable`, `ifXTable` and
//! BRIDGE-MIB `dot1dBase`, keyed by OID. Sub-identifier vectors compare
//! the way SNMP orders OIDs (lexicographically, a prefix first), so a
//! `BTreeMap` answers GetNext with one range lookup, across columns and
//! tables alike.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::pdu::{Body, Oid, SearchRange, Value, VarBind};

/// IF-MIB `ifNumber` (scalar; instance `.0`).
pub const IF_NUMBER: &[u32] = &[1, 3, 6, 1, 2, 1, 2, 1];
/// IF-MIB `ifTable`.
pub const IF_TABLE: &[u32] = &[1, 3, 6, 1, 2, 1, 2, 2];
/// IF-MIB `ifEntry`.
pub const IF_ENTRY: &[u32] = &[1, 3, 6, 1, 2, 1, 2, 2, 1];
/// IF-MIB `ifXTable`.
pub const IF_X_TABLE: &[u32] = &[1, 3, 6, 1, 2, 1, 31, 1, 1];
/// IF-MIB `ifXEntry`.
pub const IF_X_ENTRY: &[u32] = &[1, 3, 6, 1, 2, 1, 31, 1, 1, 1];
/// BRIDGE-MIB `dot1dBase`.
pub const DOT1D_BASE: &[u32] = &[1, 3, 6, 1, 2, 1, 17, 1];
/// BRIDGE-MIB `dot1dBasePortEntry`.
pub const DOT1D_BASE_PORT_ENTRY: &[u32] = &[1, 3, 6, 1, 2, 1, 17, 1, 4, 1];

/// BRIDGE-MIB `dot1dTpFdbTable`.
pub const DOT1D_TP_FDB_TABLE: &[u32] = &[1, 3, 6, 1, 2, 1, 17, 4, 3];
/// BRIDGE-MIB `dot1dTpFdbEntry`.
pub const DOT1D_TP_FDB_ENTRY: &[u32] = &[1, 3, 6, 1, 2, 1, 17, 4, 3, 1];

/// The subtrees registered with the master, each as snmpd registers its
/// own IF-MIB (so that a registration priority can decide between them).
pub const SUBTREES: &[&[u32]] = &[
    IF_NUMBER,
    IF_TABLE,
    IF_X_TABLE,
    DOT1D_BASE,
    DOT1D_TP_FDB_TABLE,
];

/// `ifTable` columns served (RFC 2863): ifIndex, ifDescr, ifType, ifMtu,
/// ifSpeed, ifPhysAddress, ifAdminStatus, ifOperStatus, ifLastChange,
/// ifInOctets, ifInUcastPkts, ifInDiscards, ifInErrors,
/// ifInUnknownProtos, ifOutOctets, ifOutUcastPkts, ifOutDiscards,
/// ifOutErrors. (Not: the deprecated ifInNUcastPkts, ifOutNUcastPkts,
/// ifOutQLen, ifSpecific.)
const IF_COLUMNS: &[u32] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 19, 20,
];
/// `ifXTable` columns served: ifName, ifHCInOctets, ifHCInUcastPkts,
/// ifHCOutOctets, ifHCOutUcastPkts, ifLinkUpDownTrapEnable, ifHighSpeed,
/// ifPromiscuousMode, ifConnectorPresent, ifAlias,
/// ifCounterDiscontinuityTime. (Not the multicast and broadcast counters:
/// OpenFlow port statistics do not split packets by destination.)
const IF_X_COLUMNS: &[u32] = &[1, 6, 7, 10, 11, 14, 15, 16, 17, 18, 19];
/// `dot1dTpFdbTable` columns: dot1dTpFdbAddress, dot1dTpFdbPort,
/// dot1dTpFdbStatus.
const DOT1D_FDB_COLUMNS: &[u32] = &[1, 2, 3];
/// `dot1dBasePortTable` columns: dot1dBasePort, dot1dBasePortIfIndex,
/// dot1dBasePortCircuit, dot1dBasePortDelayExceededDiscards,
/// dot1dBasePortMtuExceededDiscards.
const DOT1D_PORT_COLUMNS: &[u32] = &[1, 2, 3, 4, 5];

/// SNMPv2-MIB `snmpTrapOID.0`.
pub const SNMP_TRAP_OID: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0];
/// IF-MIB `linkDown`.
pub const LINK_DOWN: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 5, 3];
/// IF-MIB `linkUp`.
pub const LINK_UP: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 5, 4];

/// Most varbinds one GetBulk answer holds.
pub const MAX_BULK_VARBINDS: usize = 1024;

/// One port as read from the daemon.
#[derive(Clone, Debug, PartialEq)]
pub struct PortRow {
    pub if_index: u32,
    pub bridge: String,
    pub ofport: u32,
    /// Interface name (`patch:BRIDGE:PORT` for a patch port).
    pub interface: String,
    pub patch: bool,
    /// The port's OpenFlow description (`None`: not open).
    pub desc: Option<ofp::Port>,
    /// Its OpenFlow statistics (`None`: none reported).
    pub stats: Option<ofp::stats::PortStats>,
    pub mtu: u32,
    /// When its operational status last changed (TimeTicks since the
    /// module started).
    pub last_change: u32,
    /// When its counters started (TimeTicks since the module started).
    pub discontinuity: u32,
}

impl PortRow {
    /// Administratively up (no `OFPPC_PORT_DOWN`).
    pub fn admin_up(&self) -> bool {
        self.desc
            .as_ref()
            .is_some_and(|d| d.config & ofp::port::port_config::PORT_DOWN == 0)
    }

    /// ifOperStatus: up(1), down(2), notPresent(6).
    pub fn oper_status(&self) -> i32 {
        match &self.desc {
            None => 6,
            Some(d) if d.state & ofp::port::port_state::LINK_DOWN == 0 && self.admin_up() => 1,
            Some(_) => 2,
        }
    }

    /// ifAdminStatus: up(1), down(2).
    pub fn admin_status(&self) -> i32 {
        if self.admin_up() {
            1
        } else {
            2
        }
    }
}

/// The bridge `dot1dBase` describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dot1d {
    pub dpid: u64,
    /// (OpenFlow port number, ifIndex) of each of its ports.
    pub ports: Vec<(u32, u32)>,
    /// What NORMAL learnt: (address, OpenFlow port number).
    pub fdb: Vec<([u8; 6], u32)>,
}

/// What the module read from the daemon.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    pub ports: Vec<PortRow>,
    pub dot1d: Option<Dot1d>,
}

/// Every instance served, by OID.
#[derive(Clone, Debug, Default)]
pub struct View {
    map: BTreeMap<Oid, Value>,
}

fn oid(base: &[u32], tail: &[u32]) -> Oid {
    let mut o = Vec::with_capacity(base.len() + tail.len());
    o.extend_from_slice(base);
    o.extend_from_slice(tail);
    o
}

fn c32(n: u64) -> Value {
    Value::Counter32(n as u32)
}

fn truth(b: bool) -> Value {
    Value::Integer(if b { 1 } else { 2 })
}

impl View {
    /// Every instance of `m`.
    pub fn build(m: &Model) -> View {
        let mut map = BTreeMap::new();
        map.insert(oid(IF_NUMBER, &[0]), Value::Integer(m.ports.len() as i32));
        for p in &m.ports {
            let i = p.if_index;
            let mut col = |entry: &[u32], c: u32, v: Value| {
                map.insert(oid(entry, &[c, i]), v);
            };
            let speed_kbps = p.desc.as_ref().map_or(0, |d| d.curr_speed as u64);
            col(IF_ENTRY, 1, Value::Integer(i as i32));
            col(
                IF_ENTRY,
                2,
                Value::OctetString(
                    format!("fulmar {} port {} {}", p.bridge, p.ofport, p.interface).into_bytes(),
                ),
            );
            // ethernetCsmacd(6); propVirtual(53) for a patch port.
            col(IF_ENTRY, 3, Value::Integer(if p.patch { 53 } else { 6 }));
            col(
                IF_ENTRY,
                4,
                Value::Integer(p.mtu.min(i32::MAX as u32) as i32),
            );
            col(
                IF_ENTRY,
                5,
                Value::Gauge32((speed_kbps * 1000).min(u32::MAX as u64) as u32),
            );
            col(
                IF_ENTRY,
                6,
                Value::OctetString(p.desc.as_ref().map_or(vec![], |d| d.hw_addr.0.to_vec())),
            );
            col(IF_ENTRY, 7, Value::Integer(p.admin_status()));
            col(IF_ENTRY, 8, Value::Integer(p.oper_status()));
            col(IF_ENTRY, 9, Value::TimeTicks(p.last_change));
            if let Some(s) = &p.stats {
                col(IF_ENTRY, 10, c32(s.rx_bytes));
                col(IF_ENTRY, 11, c32(s.rx_packets));
                col(IF_ENTRY, 13, c32(s.rx_dropped));
                col(IF_ENTRY, 14, c32(s.rx_errors));
                col(IF_ENTRY, 15, Value::Counter32(0));
                col(IF_ENTRY, 16, c32(s.tx_bytes));
                col(IF_ENTRY, 17, c32(s.tx_packets));
                col(IF_ENTRY, 19, c32(s.tx_dropped));
                col(IF_ENTRY, 20, c32(s.tx_errors));
                col(IF_X_ENTRY, 6, Value::Counter64(s.rx_bytes));
                col(IF_X_ENTRY, 7, Value::Counter64(s.rx_packets));
                col(IF_X_ENTRY, 10, Value::Counter64(s.tx_bytes));
                col(IF_X_ENTRY, 11, Value::Counter64(s.tx_packets));
            }
            col(
                IF_X_ENTRY,
                1,
                Value::OctetString(p.interface.clone().into_bytes()),
            );
            col(IF_X_ENTRY, 14, Value::Integer(1)); // enabled
            col(
                IF_X_ENTRY,
                15,
                Value::Gauge32((speed_kbps / 1000).min(u32::MAX as u64) as u32),
            );
            col(IF_X_ENTRY, 16, truth(!p.patch));
            col(IF_X_ENTRY, 17, truth(!p.patch));
            col(IF_X_ENTRY, 18, Value::OctetString(vec![]));
            col(IF_X_ENTRY, 19, Value::TimeTicks(p.discontinuity));
        }
        if let Some(d) = &m.dot1d {
            let mac = d.dpid.to_be_bytes()[2..].to_vec();
            map.insert(oid(DOT1D_BASE, &[1, 0]), Value::OctetString(mac));
            map.insert(
                oid(DOT1D_BASE, &[2, 0]),
                Value::Integer(d.ports.len() as i32),
            );
            // unknown(1): an OpenFlow bridge forwards by its flow tables,
            // neither transparent nor source-route.
            map.insert(oid(DOT1D_BASE, &[3, 0]), Value::Integer(1));
            for &(port, if_index) in &d.ports {
                // dot1dBasePort is 1..65535.
                if port == 0 || port > 65535 {
                    continue;
                }
                let mut col = |c: u32, v: Value| {
                    map.insert(oid(DOT1D_BASE_PORT_ENTRY, &[c, port]), v);
                };
                col(1, Value::Integer(port as i32));
                col(2, Value::Integer(if_index as i32));
                col(3, Value::Oid(vec![0, 0]));
                col(4, Value::Counter32(0));
                col(5, Value::Counter32(0));
            }
            for (mac, port) in &d.fdb {
                let index: Vec<u32> = mac.iter().map(|b| u32::from(*b)).collect();
                let mut col = |c: u32, v: Value| {
                    let mut tail = vec![c];
                    tail.extend_from_slice(&index);
                    map.insert(oid(DOT1D_TP_FDB_ENTRY, &tail), v);
                };
                col(1, Value::OctetString(mac.to_vec()));
                // dot1dTpFdbPort: the dot1dBasePort (the OpenFlow number
                // where it fits), 0 when it does not (OFPP_LOCAL).
                let base_port = if (1..=65535).contains(port) { *port } else { 0 };
                col(2, Value::Integer(base_port as i32));
                col(3, Value::Integer(3)); // learned(3)
            }
        }
        View { map }
    }

    /// The number of instances.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Get: the value, or noSuchInstance under an object served, or
    /// noSuchObject.
    pub fn get(&self, name: &[u32]) -> Value {
        if let Some(v) = self.map.get(name) {
            return v.clone();
        }
        if is_object_instance(name) {
            Value::NoSuchInstance
        } else {
            Value::NoSuchObject
        }
    }

    /// GetNext over one search range: the first instance after `start`
    /// (or at it when `include`) and before `end` (when not empty), else
    /// endOfMibView named `start`.
    pub fn next(&self, r: &SearchRange) -> VarBind {
        let lower = if r.include {
            Bound::Included(r.start.as_slice())
        } else {
            Bound::Excluded(r.start.as_slice())
        };
        let found = self
            .map
            .range::<[u32], _>((lower, Bound::Unbounded))
            .next()
            .filter(|(k, _)| r.end.is_empty() || k.as_slice() < r.end.as_slice());
        match found {
            Some((k, v)) => VarBind {
                name: k.clone(),
                value: v.clone(),
            },
            None => VarBind {
                name: r.start.clone(),
                value: Value::EndOfMibView,
            },
        }
    }

    /// The varbinds answering a Get, GetNext or GetBulk (RFC 2741
    /// §7.2.3); `None` for another PDU.
    pub fn answer(&self, body: &Body) -> Option<Vec<VarBind>> {
        match body {
            Body::Get(ranges) => Some(
                ranges
                    .iter()
                    .map(|r| VarBind {
                        name: r.start.clone(),
                        value: self.get(&r.start),
                    })
                    .collect(),
            ),
            Body::GetNext(ranges) => Some(ranges.iter().map(|r| self.next(r)).collect()),
            Body::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges,
            } => Some(self.bulk(*non_repeaters as usize, *max_repetitions as usize, ranges)),
            _ => None,
        }
    }

    fn bulk(&self, non_repeaters: usize, max_rep: usize, ranges: &[SearchRange]) -> Vec<VarBind> {
        let n = non_repeaters.min(ranges.len());
        let mut out: Vec<VarBind> = ranges[..n].iter().map(|r| self.next(r)).collect();
        let mut repeaters: Vec<SearchRange> = ranges[n..].to_vec();
        if repeaters.is_empty() {
            return out;
        }
        for _ in 0..max_rep {
            if out.len() + repeaters.len() > MAX_BULK_VARBINDS.max(n + repeaters.len()) {
                break;
            }
            let mut all_ended = true;
            for r in repeaters.iter_mut() {
                let vb = self.next(r);
                if vb.value != Value::EndOfMibView {
                    all_ended = false;
                    r.start = vb.name.clone();
                    r.include = false;
                }
                out.push(vb);
            }
            if all_ended {
                break;
            }
        }
        out
    }
}

/// Whether `name` lies under an object served (a column or a scalar):
/// then a missing instance is noSuchInstance, not noSuchObject.
fn is_object_instance(name: &[u32]) -> bool {
    let under = |base: &[u32], cols: &[u32]| {
        name.len() > base.len() + 1 && name.starts_with(base) && cols.contains(&name[base.len()])
    };
    (name.len() > IF_NUMBER.len() && name.starts_with(IF_NUMBER))
        || under(IF_ENTRY, IF_COLUMNS)
        || under(IF_X_ENTRY, IF_X_COLUMNS)
        || under(DOT1D_BASE_PORT_ENTRY, DOT1D_PORT_COLUMNS)
        || under(DOT1D_TP_FDB_ENTRY, DOT1D_FDB_COLUMNS)
        || under(DOT1D_BASE, &[1, 2, 3]) && name.len() == DOT1D_BASE.len() + 2
}

/// The varbinds of a linkUp or linkDown notification for `p`: the
/// snmpTrapOID.0 first, then ifIndex, ifAdminStatus, ifOperStatus (the
/// master adds sysUpTime.0).
pub fn link_notification(p: &PortRow) -> Vec<VarBind> {
    let i = p.if_index;
    let oper = p.oper_status();
    vec![
        VarBind {
            name: SNMP_TRAP_OID.to_vec(),
            value: Value::Oid(if oper == 1 { LINK_UP } else { LINK_DOWN }.to_vec()),
        },
        VarBind {
            name: oid(IF_ENTRY, &[1, i]),
            value: Value::Integer(i as i32),
        },
        VarBind {
            name: oid(IF_ENTRY, &[7, i]),
            value: Value::Integer(p.admin_status()),
        },
        VarBind {
            name: oid(IF_ENTRY, &[8, i]),
            value: Value::Integer(oper),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(if_index: u32, bridge: &str, ofport: u32, link_up: bool, rx_bytes: u64) -> PortRow {
        PortRow {
            if_index,
            bridge: bridge.into(),
            ofport,
            interface: format!("{bridge}-p{ofport}"),
            patch: false,
            desc: Some(ofp::Port {
                port_no: ofport,
                hw_addr: ofp::oxm::MacAddr([2, 0, 0, 0, 0, ofport as u8]),
                name: format!("{bridge}-p{ofport}"),
                config: 0,
                state: if link_up {
                    0
                } else {
                    ofp::port::port_state::LINK_DOWN
                },
                curr: 0,
                advertised: 0,
                supported: 0,
                peer: 0,
                curr_speed: 10_000_000,
                max_speed: 0,
            }),
            stats: Some(ofp::stats::PortStats {
                port_no: ofport,
                rx_bytes,
                rx_packets: 3,
                tx_bytes: 5_000_000_000,
                tx_packets: 4,
                ..Default::default()
            }),
            mtu: 1500,
            last_change: 0,
            discontinuity: 0,
        }
    }

    fn model() -> Model {
        Model {
            ports: vec![
                row(1, "br0", 1, true, 100),
                row(2, "br0", 2, false, 200),
                row(3, "br1", 1, true, 300),
            ],
            dot1d: Some(Dot1d {
                dpid: 0x0000_0200_0000_00ab,
                ports: vec![(1, 1), (2, 2)],
                fdb: vec![
                    ([2, 0, 0, 0, 0, 7], 2),
                    ([0x0a, 0, 0, 0, 0, 1], port_no_local()),
                ],
            }),
        }
    }

    fn port_no_local() -> u32 {
        0xffff_fffe
    }

    #[test]
    fn the_fdb_table_lists_learnt_addresses_by_address() {
        let v = View::build(&model());
        let at = |c: u32, mac: [u32; 6]| {
            let mut t = vec![c];
            t.extend_from_slice(&mac);
            o(&t, DOT1D_TP_FDB_ENTRY)
        };
        assert_eq!(
            v.get(&at(1, [2, 0, 0, 0, 0, 7])),
            Value::OctetString(vec![2, 0, 0, 0, 0, 7])
        );
        assert_eq!(v.get(&at(2, [2, 0, 0, 0, 0, 7])), Value::Integer(2));
        assert_eq!(v.get(&at(3, [2, 0, 0, 0, 0, 7])), Value::Integer(3));
        // LOCAL has no dot1dBasePort: 0.
        assert_eq!(v.get(&at(2, [10, 0, 0, 0, 0, 1])), Value::Integer(0));
        assert_eq!(v.get(&at(2, [2, 0, 0, 0, 0, 8])), Value::NoSuchInstance);
        // A walk goes address by address within a column.
        let next = v.next(&SearchRange {
            start: at(1, [2, 0, 0, 0, 0, 7]),
            include: false,
            end: vec![],
        });
        assert_eq!(next.name, at(1, [10, 0, 0, 0, 0, 1]));
    }

    fn o(tail: &[u32], base: &[u32]) -> Oid {
        oid(base, tail)
    }

    #[test]
    fn get_values_and_missing_ones() {
        let v = View::build(&model());
        assert_eq!(v.get(&o(&[0], IF_NUMBER)), Value::Integer(3));
        assert_eq!(v.get(&o(&[3, 2], IF_ENTRY)), Value::Integer(6));
        assert_eq!(v.get(&o(&[8, 2], IF_ENTRY)), Value::Integer(2));
        assert_eq!(v.get(&o(&[8, 1], IF_ENTRY)), Value::Integer(1));
        assert_eq!(v.get(&o(&[5, 1], IF_ENTRY)), Value::Gauge32(u32::MAX));
        assert_eq!(v.get(&o(&[15, 1], IF_X_ENTRY)), Value::Gauge32(10_000));
        assert_eq!(v.get(&o(&[16, 3], IF_ENTRY)), Value::Counter32(705_032_704));
        assert_eq!(
            v.get(&o(&[10, 3], IF_X_ENTRY)),
            Value::Counter64(5_000_000_000)
        );
        assert_eq!(v.get(&o(&[6, 3], IF_X_ENTRY)), Value::Counter64(300));
        assert_eq!(
            v.get(&o(&[1, 3], IF_X_ENTRY)),
            Value::OctetString(b"br1-p1".to_vec())
        );
        assert_eq!(
            v.get(&o(&[1, 0], DOT1D_BASE)),
            Value::OctetString(vec![2, 0, 0, 0, 0, 0xab])
        );
        assert_eq!(v.get(&o(&[4, 1, 2, 2], DOT1D_BASE)), Value::Integer(2));
        // No row 9; a column not served; something not ours.
        assert_eq!(v.get(&o(&[2, 9], IF_ENTRY)), Value::NoSuchInstance);
        assert_eq!(v.get(&o(&[1], IF_NUMBER)), Value::NoSuchInstance);
        assert_eq!(v.get(&o(&[22, 1], IF_ENTRY)), Value::NoSuchObject);
        assert_eq!(v.get(&o(&[2], IF_ENTRY)), Value::NoSuchObject);
        assert_eq!(v.get(&[1, 3, 6, 1, 2, 1, 1, 1, 0]), Value::NoSuchObject);
    }

    /// A walk from the root with GetNext visits every instance once, in
    /// order, across the tables, and ends in endOfMibView.
    #[test]
    fn get_next_walks_across_tables_in_order() {
        let v = View::build(&model());
        let mut r = SearchRange {
            start: vec![1, 3, 6, 1, 2, 1, 2],
            include: false,
            end: vec![],
        };
        let mut seen = Vec::new();
        loop {
            let vb = v.next(&r);
            if vb.value == Value::EndOfMibView {
                assert_eq!(vb.name, r.start);
                break;
            }
            assert!(vb.name > r.start);
            r.start = vb.name.clone();
            seen.push(vb.name);
        }
        assert_eq!(seen.len(), v.len());
        assert_eq!(seen[0], o(&[0], IF_NUMBER));
        assert_eq!(seen[1], o(&[1, 1], IF_ENTRY));
        assert_eq!(seen[2], o(&[1, 2], IF_ENTRY));
        assert_eq!(seen[3], o(&[1, 3], IF_ENTRY));
        assert_eq!(seen[4], o(&[2, 1], IF_ENTRY));
        // ifTable, then dot1dBase (17) before ifXTable (31).
        let first_dot1d = seen.iter().position(|s| s.starts_with(DOT1D_BASE)).unwrap();
        let first_x = seen.iter().position(|s| s.starts_with(IF_X_TABLE)).unwrap();
        assert!(first_dot1d < first_x);
        assert_eq!(seen.last().unwrap(), &o(&[19, 3], IF_X_ENTRY));
    }

    #[test]
    fn get_next_honours_include_and_end() {
        let v = View::build(&model());
        let at = o(&[2, 1], IF_ENTRY);
        let r = SearchRange {
            start: at.clone(),
            include: true,
            end: vec![],
        };
        assert_eq!(v.next(&r).name, at);
        let r = SearchRange {
            start: at.clone(),
            include: false,
            end: vec![],
        };
        assert_eq!(v.next(&r).name, o(&[2, 2], IF_ENTRY));
        // The end of the ifTable registration stops the walk there.
        let r = SearchRange {
            start: o(&[20, 3], IF_ENTRY),
            include: false,
            end: vec![1, 3, 6, 1, 2, 1, 2, 3],
        };
        assert_eq!(v.next(&r).value, Value::EndOfMibView);
        // A start inside a gap (ifInNUcastPkts, not served) goes on to the
        // next column.
        let r = SearchRange {
            start: o(&[12], IF_ENTRY),
            include: false,
            end: vec![],
        };
        assert_eq!(v.next(&r).name, o(&[13, 1], IF_ENTRY));
    }

    #[test]
    fn get_bulk_repeats_and_stops_at_the_end() {
        let v = View::build(&model());
        let body = Body::GetBulk {
            non_repeaters: 1,
            max_repetitions: 4,
            ranges: vec![
                SearchRange {
                    start: IF_NUMBER.to_vec(),
                    include: false,
                    end: vec![],
                },
                SearchRange {
                    start: o(&[1], IF_ENTRY),
                    include: false,
                    end: vec![],
                },
                SearchRange {
                    start: o(&[19, 2], IF_X_ENTRY),
                    include: false,
                    end: vec![],
                },
            ],
        };
        let out = v.answer(&body).unwrap();
        assert_eq!(out[0].name, o(&[0], IF_NUMBER));
        // Repetitions interleave the two repeaters.
        assert_eq!(out[1].name, o(&[1, 1], IF_ENTRY));
        assert_eq!(out[2].name, o(&[19, 3], IF_X_ENTRY));
        assert_eq!(out[3].name, o(&[1, 2], IF_ENTRY));
        assert_eq!(out[4].value, Value::EndOfMibView);
        assert_eq!(out.len(), 1 + 2 * 4);
        // Only repeaters at the end: one repetition of endOfMibView.
        let body = Body::GetBulk {
            non_repeaters: 0,
            max_repetitions: 60000,
            ranges: vec![SearchRange {
                start: o(&[19, 3], IF_X_ENTRY),
                include: false,
                end: vec![],
            }],
        };
        assert_eq!(v.answer(&body).unwrap().len(), 1);
        // A huge request is bounded.
        let body = Body::GetBulk {
            non_repeaters: 0,
            max_repetitions: 60000,
            ranges: vec![SearchRange {
                start: vec![1],
                include: false,
                end: vec![],
            }],
        };
        assert!(v.answer(&body).unwrap().len() <= MAX_BULK_VARBINDS);
        // More non-repeaters than ranges.
        let body = Body::GetBulk {
            non_repeaters: 9,
            max_repetitions: 9,
            ranges: vec![],
        };
        assert!(v.answer(&body).unwrap().is_empty());
    }

    #[test]
    fn a_notification_names_the_port() {
        let m = model();
        let vbs = link_notification(&m.ports[1]);
        assert_eq!(vbs[0].value, Value::Oid(LINK_DOWN.to_vec()));
        assert_eq!(vbs[1].name, o(&[1, 2], IF_ENTRY));
        assert_eq!(vbs[3].value, Value::Integer(2));
        assert_eq!(
            link_notification(&m.ports[0])[0].value,
            Value::Oid(LINK_UP.to_vec())
        );
    }
}
