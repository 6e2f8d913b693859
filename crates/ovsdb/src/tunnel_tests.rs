//! VXLAN and GRE interfaces through the database: `ovs-vsctl add-port br0
//! vx0 -- set interface vx0 type=vxlan options:remote_ip=... options:key=...`
//! becomes a tunnel port, and the model's own view of that port agrees
//! with the row (so a round does not fight over it).

use serde_json::json;

use crate::replica::Replica;
use crate::sync::{agree, model_items, Key, Sync, Val};
use crate::view::DbView;

fn with_iface(iface: serde_json::Value) -> Replica {
    let mut r = Replica::default();
    r.apply(&json!({
        "Open_vSwitch": {"o": {"new": {"bridges": ["set", [["uuid", "b0"]]]}}},
        "Bridge": {"b0": {"new": {"name": "br0", "ports": ["set", [["uuid", "p0"]]]}}},
        "Port": {"p0": {"new": {"name": "vx0", "interfaces": ["uuid", "i0"]}}},
        "Interface": {"i0": {"new": iface}},
    }))
    .unwrap();
    r
}

/// The switch model after applying what the database asks for, as the
/// client does.
fn applied(view: &DbView) -> datastore::Config {
    let base = datastore::Config::from_str_for("", "t.toml", datastore::Host { cpus: 2 }).unwrap();
    let mut sync = Sync::default();
    let model = model_items(&base);
    let plan = sync.plan(&view.wanted, &model);
    let mut ops = Vec::new();
    for (k, d) in &plan.to_switch {
        ops.extend(crate::client::switch_ops(
            k,
            d.as_ref(),
            &view.wanted,
            &model,
        ));
    }
    base.apply(&ops, datastore::Host { cpus: 2 })
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn vxlan_and_gre_rows_become_tunnel_ports_that_agree_with_the_model() {
    for (ty, opts, backend) in [
        (
            "vxlan",
            json!([
                "map",
                [
                    ["remote_ip", "192.0.2.2"],
                    ["key", "0x2a"],
                    ["dst_port", "4789"]
                ]
            ]),
            "vxlan",
        ),
        (
            "gre",
            json!([
                "map",
                [
                    ["remote_ip", "192.0.2.3"],
                    ["local_ip", "192.0.2.1"],
                    ["key", "7"]
                ]
            ]),
            "gre",
        ),
        (
            "vxlan",
            json!(["map", [["remote_ip", "192.0.2.4"], ["key", "flow"]]]),
            "vxlan",
        ),
        (
            "gre",
            json!(["map", [["remote_ip", "192.0.2.5"], ["key", "flow"]]]),
            "gre",
        ),
    ] {
        let r = with_iface(json!({"name": "vx0", "type": ty, "options": opts}));
        let v = DbView::read(&r);
        let row = v.ifaces.iter().find(|i| i.name == "vx0").unwrap();
        assert_eq!((&row.refused, &row.ignored), (&None, &Vec::new()), "{ty}");
        let key = Key::Port("br0".into(), "vx0".into());
        let Some(Val::Port(spec)) = v.wanted.get(&key) else {
            panic!("{ty}: {:?}", v.wanted);
        };
        assert_eq!(spec.kind, backend);
        let cfg = applied(&v);
        let port = &cfg.bridge("br0").unwrap().ports[0];
        let datastore::PortKind::Interface { backend: b, .. } = &port.kind else {
            panic!("{port:?}");
        };
        assert_eq!(b.kind_str(), backend);
        let flow = opts.to_string().contains("flow");
        let (datastore::Backend::Vxlan(t) | datastore::Backend::Gre(t)) = b else {
            panic!("{b:?}");
        };
        assert_eq!(t.key_flow, flow, "{ty}");
        let m = model_items(&cfg);
        assert!(
            agree(v.wanted.get(&key), m.get(&key)),
            "{ty}: {:?} vs {:?}",
            v.wanted.get(&key),
            m.get(&key)
        );
    }
}

#[test]
fn bad_tunnel_rows_are_refused_with_the_reason() {
    for (opts, want) in [
        (json!(["map", [["key", "42"]]]), "needs options:remote_ip"),
        (
            json!(["map", [["remote_ip", "192.0.2.2"], ["key", "flaw"]]]),
            "not a number",
        ),
        (json!(["map", [["remote_ip", "2001:db8::1"]]]), "IPv6"),
        (
            json!(["map", [["remote_ip", "192.0.2.2"], ["dst_port", "0"]]]),
            "dst_port",
        ),
    ] {
        let r = with_iface(json!({"name": "vx0", "type": "vxlan", "options": opts}));
        let v = DbView::read(&r);
        let row = v.ifaces.iter().find(|i| i.name == "vx0").unwrap();
        let why = row.refused.clone().unwrap_or_default();
        assert!(why.contains(want), "{why}");
        assert!(!v
            .wanted
            .contains_key(&Key::Port("br0".into(), "vx0".into())));
    }
}
