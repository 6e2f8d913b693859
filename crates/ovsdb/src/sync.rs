//! Which side wins: the database's wishes against the switch's model.
//!
//! Both sides are flattened into [`Items`]: one item per bridge, per port
//! (bridge, interface), per bridge fail mode and per bridge controller
//! list. [`Sync`] remembers, per item, the value both sides last agreed on
//! (the *base*). Each round compares the database's value `d`, the
//! model's value `m` and the base `s`:
//!
//! * `d` agrees with `m`: in sync; the base becomes `m`.
//! * `m` is still the base (the switch did not change it), or both
//!   changed: the database wins, `d` is applied to the switch
//!   ([`Plan::to_switch`]). If that fails, the base stays and the item is
//!   tried again next round; the failure shows in the row.
//! * `d` is still the base and `m` moved (a `fulmar ctl` change): `m` is
//!   written into the database ([`Plan::to_db`]), once — the write is
//!   remembered until the database echoes it back or refuses it.
//!
//! An item the base lacks counts as absent, so at start (empty base) the
//! bridges and ports of either side that the other lacks are added to it
//! (the database's are created in the switch, a `--config` file's are
//! written into the database), and where both sides hold an item with
//! different values, the database's wins. The base lives as long as the
//! process: after ovsdb-server restarts, what was deleted from the
//! database meanwhile is deleted from the switch. Writes never bounce: a
//! change applied to the switch makes `m` agree with `d`, and a change
//! written to the database makes `d` agree with `m`; the echo of an older
//! write of ours is recognised as such, not taken for a database change.

use std::collections::{BTreeMap, BTreeSet};

use datastore::{Backend, Config, FailMode, PcapRate, PortKind, VlanSettings};

/// An item's identity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// A bridge exists (with a datapath id).
    Bridge(String),
    /// A port of a bridge, by interface name.
    Port(String, String),
    /// A bridge's fail mode.
    FailMode(String),
    /// A bridge's controller targets.
    Controllers(String),
    /// The VLAN settings (`tag`, `trunks`, `vlan_mode`) of a port, by
    /// interface name (after [`Key::Port`], so a new port exists before
    /// its settings are set).
    PortVlan(String, String),
    /// The egress queues of a port (bridge, interface); absent: none.
    Qos(String, String),
}

impl Key {
    /// The bridge the item belongs to.
    pub fn bridge(&self) -> &str {
        match self {
            Key::Bridge(b)
            | Key::Port(b, _)
            | Key::FailMode(b)
            | Key::Controllers(b)
            | Key::PortVlan(b, _) => b,
            Key::Qos(b, _) => b,
        }
    }
}

/// A port as both sides describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    /// fulmar's backend kind (afpacket, afxdp, tap, memory, pcap).
    pub kind: String,
    /// OpenFlow number (the database: `ofport_request`, if any).
    pub number: Option<u32>,
    /// Backend options (pcap_read, pcap_write, pcap_rate).
    pub options: BTreeMap<String, String>,
}

/// An item's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// A bridge; the datapath id (the database: only when
    /// `other_config:datapath-id` asks for one).
    Bridge {
        /// Datapath id.
        dpid: Option<u64>,
    },
    /// A port.
    Port(PortSpec),
    /// A fail mode.
    FailMode(FailMode),
    /// Canonical controller targets, in order.
    Controllers(Vec<String>),
    /// A port's VLAN settings.
    Vlan(VlanSettings),
    /// A port's egress queues (queues in id order).
    Qos(datastore::PortQos),
}

/// Every item of one side.
pub type Items = BTreeMap<Key, Val>;

/// Whether the database's value `d` is satisfied by the model's `m`: equal,
/// except that what the database leaves open (a datapath id, a port
/// number) matches anything.
pub fn agree(d: Option<&Val>, m: Option<&Val>) -> bool {
    match (d, m) {
        (None, None) => true,
        (Some(Val::Bridge { dpid: a }), Some(Val::Bridge { dpid: b })) => a.is_none() || a == b,
        (Some(Val::Port(a)), Some(Val::Port(b))) => {
            a.kind == b.kind
                && a.options == b.options
                && (a.number.is_none() || a.number == b.number)
        }
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// A controller list in canonical order: the order of a bridge's
/// controllers means nothing (each is connected), and the database keeps
/// them as a set.
pub fn controllers(targets: impl IntoIterator<Item = String>) -> Val {
    let mut t: Vec<String> = targets.into_iter().collect();
    t.sort();
    t.dedup();
    Val::Controllers(t)
}

/// The model's items (patch ports are left out: they live in the
/// configuration file only).
pub fn model_items(cfg: &Config) -> Items {
    let mut out = Items::new();
    for b in &cfg.bridges {
        out.insert(
            Key::Bridge(b.name.clone()),
            Val::Bridge { dpid: Some(b.dpid) },
        );
        out.insert(Key::FailMode(b.name.clone()), Val::FailMode(b.fail_mode));
        out.insert(
            Key::Controllers(b.name.clone()),
            controllers(b.controllers.iter().map(|c| c.target.to_string())),
        );
        for p in &b.ports {
            let PortKind::Interface { name, backend } = &p.kind else {
                continue;
            };
            let mut options = BTreeMap::new();
            if let Backend::Pcap(pc) = backend {
                if let Some(r) = &pc.read {
                    options.insert("pcap_read".into(), r.to_string_lossy().into_owned());
                }
                if let Some(w) = &pc.write {
                    options.insert("pcap_write".into(), w.to_string_lossy().into_owned());
                }
                if let PcapRate::Pps(n) = pc.rate {
                    options.insert("pcap_rate".into(), n.to_string());
                }
            }
            if let Backend::Vxlan(t) | Backend::Gre(t) = backend {
                if let Some(ip) = t.remote_ip {
                    options.insert("remote_ip".into(), ip.to_string());
                }
                if let Some(ip) = t.local_ip {
                    options.insert("local_ip".into(), ip.to_string());
                }
                if let Some(k) = t.key {
                    options.insert("key".into(), k.to_string());
                }
                if t.key_flow {
                    options.insert("key".into(), "flow".into());
                }
                if matches!(backend, Backend::Vxlan(_))
                    && t.dst_port != datastore::VXLAN_DEFAULT_PORT
                {
                    options.insert("dst_port".into(), t.dst_port.to_string());
                }
            }
            if let Some(q) = b.qos.get(&p.number) {
                out.insert(Key::Qos(b.name.clone(), name.clone()), qos_val(q));
            }
            out.insert(
                Key::Port(b.name.clone(), name.clone()),
                Val::Port(PortSpec {
                    kind: backend.kind_str().to_string(),
                    number: Some(p.number),
                    options,
                }),
            );
            out.insert(
                Key::PortVlan(b.name.clone(), name.clone()),
                Val::Vlan(p.vlan.clone()),
            );
        }
    }
    out
}

/// A port's queues as an item: queue order is no difference (the
/// database keeps them as a map by id).
pub fn qos_val(q: &datastore::PortQos) -> Val {
    let mut q = q.clone();
    q.queues.sort_by_key(|c| c.id);
    Val::Qos(q)
}

/// What one round does.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Items to make so in the switch: (key, the database's value; `None`:
    /// remove).
    pub to_switch: Vec<(Key, Option<Val>)>,
    /// Items to write into the database: (key, the model's value; `None`:
    /// remove).
    pub to_db: Vec<(Key, Option<Val>)>,
}

/// The memory of the last agreement (see the module comment).
#[derive(Debug, Default)]
pub struct Sync {
    base: Items,
    /// Written to the database and not yet seen back, oldest first.
    written: BTreeMap<Key, Vec<Option<Val>>>,
}

impl Sync {
    /// Forgets the base: the next round treats both sides as new (an
    /// empty database is filled from the switch). Writes in flight stay
    /// remembered, so they are not sent twice.
    pub fn forget(&mut self) {
        self.base.clear();
    }

    /// Forgets the writes in flight (the connection dropped, or the
    /// database refused them): they are planned again.
    pub fn unwritten(&mut self, keys: &[Key]) {
        for k in keys {
            self.written.remove(k);
        }
    }

    /// Forgets every write in flight.
    pub fn unwritten_all(&mut self) {
        self.written.clear();
    }

    /// Compares the two sides (see the module comment).
    pub fn plan(&mut self, db: &Items, model: &Items) -> Plan {
        let keys: BTreeSet<Key> = db
            .keys()
            .chain(model.keys())
            .chain(self.base.keys())
            .cloned()
            .collect();
        let mut plan = Plan::default();
        let mut agreed = Vec::new();
        for k in &keys {
            let d = db.get(k);
            let m = model.get(k);
            // The database shows one of our writes: that is a point of
            // agreement (the switch may have moved on since).
            if let Some(ws) = self.written.get_mut(k) {
                if let Some(pos) = ws.iter().position(|w| agree(d, w.as_ref())) {
                    let w = ws[pos].clone();
                    ws.drain(..=pos);
                    if ws.is_empty() {
                        self.written.remove(k);
                    }
                    match w {
                        Some(v) => self.base.insert(k.clone(), v),
                        None => self.base.remove(k),
                    };
                }
            }
            let s = self.base.get(k);
            if agree(d, m) {
                agreed.push((k.clone(), m.cloned()));
                continue;
            }
            let switch_moved = m != s;
            let db_moved = !agree(d, s);
            if !switch_moved || db_moved {
                plan.to_switch.push((k.clone(), d.cloned()));
            } else if self.written.get(k).and_then(|ws| ws.last()) != Some(&m.cloned()) {
                plan.to_db.push((k.clone(), m.cloned()));
            }
        }
        for (k, m) in agreed {
            self.settle(&k, m);
        }
        plan
    }

    /// The switch now holds `m` for `k` after applying the database's
    /// wish: the new base.
    pub fn settle(&mut self, k: &Key, m: Option<Val>) {
        self.written.remove(k);
        match m {
            Some(v) => {
                self.base.insert(k.clone(), v);
            }
            None => {
                self.base.remove(k);
            }
        }
    }

    /// `m` was sent to the database for `k`.
    pub fn wrote(&mut self, k: &Key, m: Option<Val>) {
        self.written.entry(k.clone()).or_default().push(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(kind: &str, n: Option<u32>) -> Val {
        Val::Port(PortSpec {
            kind: kind.into(),
            number: n,
            options: BTreeMap::new(),
        })
    }

    fn items(v: &[(Key, Val)]) -> Items {
        v.iter().cloned().collect()
    }

    fn br(b: &str) -> (Key, Val) {
        (Key::Bridge(b.into()), Val::Bridge { dpid: None })
    }

    #[test]
    fn agreement_leaves_open_what_the_database_leaves_open() {
        assert!(agree(
            Some(&port("afpacket", None)),
            Some(&port("afpacket", Some(3)))
        ));
        assert!(agree(
            Some(&port("afpacket", Some(3))),
            Some(&port("afpacket", Some(3)))
        ));
        assert!(!agree(
            Some(&port("afpacket", Some(2))),
            Some(&port("afpacket", Some(3)))
        ));
        assert!(!agree(
            Some(&port("tap", None)),
            Some(&port("afpacket", Some(3)))
        ));
        assert!(agree(
            Some(&Val::Bridge { dpid: None }),
            Some(&Val::Bridge { dpid: Some(7) })
        ));
        assert!(!agree(Some(&port("tap", None)), None));
    }

    #[test]
    fn start_creates_the_databases_and_writes_back_the_switchs() {
        let mut s = Sync::default();
        let db = items(&[br("br0")]);
        let model = items(&[(Key::Bridge("cfg".into()), Val::Bridge { dpid: Some(1) })]);
        let p = s.plan(&db, &model);
        assert_eq!(
            p.to_switch,
            vec![(Key::Bridge("br0".into()), Some(Val::Bridge { dpid: None }))]
        );
        assert_eq!(
            p.to_db,
            vec![(
                Key::Bridge("cfg".into()),
                Some(Val::Bridge { dpid: Some(1) })
            )]
        );
    }

    #[test]
    fn a_switch_change_is_written_once_and_never_bounces() {
        let mut s = Sync::default();
        let k = Key::Port("br0".into(), "eth1".into());
        let mut db = items(&[br("br0")]);
        let mut model = items(&[(Key::Bridge("br0".into()), Val::Bridge { dpid: Some(1) })]);
        assert_eq!(s.plan(&db, &model), Plan::default());
        // fulmar ctl add-port.
        model.insert(k.clone(), port("afpacket", Some(1)));
        let p = s.plan(&db, &model);
        assert_eq!(p.to_db, vec![(k.clone(), Some(port("afpacket", Some(1))))]);
        assert!(p.to_switch.is_empty());
        s.wrote(&k, Some(port("afpacket", Some(1))));
        // Before the echo: nothing again.
        assert_eq!(s.plan(&db, &model), Plan::default());
        // The echo: in sync.
        db.insert(k.clone(), port("afpacket", Some(1)));
        assert_eq!(s.plan(&db, &model), Plan::default());
        // ovs-vsctl del-port: the database wins.
        db.remove(&k);
        let p = s.plan(&db, &model);
        assert_eq!(p.to_switch, vec![(k.clone(), None)]);
        s.settle(&k, None);
        model.remove(&k);
        assert_eq!(s.plan(&db, &model), Plan::default());
    }

    #[test]
    fn a_failed_port_is_retried_and_not_deleted_from_the_database() {
        let mut s = Sync::default();
        let k = Key::Port("br0".into(), "veth9".into());
        let db = items(&[br("br0"), (k.clone(), port("afpacket", None))]);
        let model = items(&[(Key::Bridge("br0".into()), Val::Bridge { dpid: Some(1) })]);
        for _ in 0..3 {
            let p = s.plan(&db, &model);
            assert_eq!(p.to_switch, vec![(k.clone(), Some(port("afpacket", None)))]);
            assert!(p.to_db.is_empty());
        }
    }

    #[test]
    fn when_both_sides_changed_the_database_wins() {
        let mut s = Sync::default();
        let k = Key::FailMode("br0".into());
        let db = items(&[(k.clone(), Val::FailMode(FailMode::Secure))]);
        let model = items(&[(k.clone(), Val::FailMode(FailMode::Secure))]);
        s.plan(&db, &model);
        let db = items(&[(k.clone(), Val::FailMode(FailMode::Standalone))]);
        let model2: Items = Items::new();
        let p = s.plan(&db, &model2);
        assert_eq!(
            p.to_switch,
            vec![(k, Some(Val::FailMode(FailMode::Standalone)))]
        );
    }

    #[test]
    fn the_echo_of_an_older_write_is_not_a_database_change() {
        // ctl add-br, then set-controller before the first write is seen.
        let mut s = Sync::default();
        let k = Key::Controllers("br1".into());
        let none = Val::Controllers(vec![]);
        let one = Val::Controllers(vec!["ptcp:6680:127.0.0.1".into()]);
        let mut db = Items::new();
        let mut model = items(&[(k.clone(), none.clone())]);
        let p = s.plan(&db, &model);
        s.wrote(&k, p.to_db[0].1.clone());
        model.insert(k.clone(), one.clone());
        let p = s.plan(&db, &model);
        assert_eq!(p.to_db, vec![(k.clone(), Some(one.clone()))]);
        s.wrote(&k, Some(one.clone()));
        // The first write's echo: nothing to undo, nothing to resend.
        db.insert(k.clone(), none);
        assert_eq!(s.plan(&db, &model), Plan::default());
        db.insert(k.clone(), one);
        assert_eq!(s.plan(&db, &model), Plan::default());
        assert!(s.written.is_empty());
    }

    #[test]
    fn a_refused_write_is_planned_again() {
        let mut s = Sync::default();
        let k = Key::Controllers("br0".into());
        let db = Items::new();
        let model = items(&[(k.clone(), Val::Controllers(vec!["tcp:1.2.3.4:6653".into()]))]);
        let p = s.plan(&db, &model);
        assert_eq!(p.to_db.len(), 1);
        s.wrote(&k, p.to_db[0].1.clone());
        assert!(s.plan(&db, &model).to_db.is_empty());
        s.unwritten(std::slice::from_ref(&k));
        assert_eq!(s.plan(&db, &model).to_db.len(), 1);
    }
}
