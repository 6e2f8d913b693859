use datastore::{ControllerTarget, FailMode, Op, PortQos, PortRef, QueueConf};

use crate::error::RpcError;

use super::render::{parse_queue_rid, permille};
use super::snapshot::{dpid_text, parse_dpid, CtlSnap, PortSnap};
use super::*;
use crate::xml::parse;

fn snap() -> Snapshot {
    Snapshot {
        bridges: vec![BridgeSnap {
            name: "br0".into(),
            dpid: 1,
            fail_mode: FailMode::Secure,
            controllers: vec![CtlSnap {
                target: ControllerTarget::parse_target("tcp:10.0.0.1:6653").unwrap(),
                live: None,
            }],
            ports: vec![
                PortSnap {
                    name: "eth1".into(),
                    number: 1,
                    live: None,
                    qos: None,
                },
                PortSnap {
                    name: "eth2".into(),
                    number: 2,
                    live: Some(PortLive {
                        config: 1,
                        state: 1,
                        curr_speed: 10_000_000,
                        max_speed: 0,
                    }),
                    qos: Some(PortQos {
                        kind: Default::default(),
                        max_rate: 10_000_000,
                        queues: vec![
                            QueueConf {
                                id: 1,
                                min_rate: 1_000_000,
                                max_rate: 0,
                                priority: 0,
                            },
                            QueueConf {
                                id: 2,
                                min_rate: 0,
                                max_rate: 3_333_333,
                                priority: 1,
                            },
                        ],
                    }),
                },
            ],
        }],
    }
}

fn edit(body: &str, default: EditOp) -> Result<Vec<Op>, RpcError> {
    let doc = format!(
        r#"<capable-switch xmlns="{NS}" xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><id>fulmar</id>{body}</capable-switch>"#
    );
    edit_ops(&snap(), &parse(doc.as_bytes()).unwrap(), default)
}

fn ls(body: &str) -> String {
    format!("<logical-switches>{body}</logical-switches>")
}

#[test]
fn dpid_both_ways() {
    assert_eq!(dpid_text(0x0102), "00:00:00:00:00:00:01:02");
    assert_eq!(parse_dpid("00:00:00:00:00:00:01:02"), Some(0x0102));
    assert_eq!(parse_dpid("0000000000000102"), Some(0x0102));
    for bad in [
        "",
        "00:00",
        "0:00:00:00:00:00:001:02",
        "zz:00:00:00:00:00:00:00",
    ] {
        assert_eq!(parse_dpid(bad), None, "{bad}");
    }
}

#[test]
fn renders_config_and_state() {
    let mut out = String::new();
    crate::xml::write(&render(&snap(), false), None, &mut out);
    assert!(out.starts_with(r#"<capable-switch xmlns="urn:onf:config:yang"><id>fulmar</id>"#));
    assert!(out.contains("<port><resource-id>eth1</resource-id><number>1</number><name>eth1</name><configuration><admin-state>up</admin-state>"));
    assert!(out.contains("<datapath-id>00:00:00:00:00:00:00:01</datapath-id>"));
    assert!(out.contains("<lost-connection-behavior>failSecureMode</lost-connection-behavior>"));
    assert!(out.contains("<controller><id>tcp:10.0.0.1:6653</id><ip-address>10.0.0.1</ip-address><port>6653</port><protocol>tcp</protocol></controller>"));
    assert!(out.contains("<resources><port>eth1</port><port>eth2</port><queue>eth2:1</queue><queue>eth2:2</queue></resources>"));
    // Queue resources after the ports: rates in tenths of a percent
    // of the port's max_rate, rounded down; a zero rate left out.
    assert!(out.contains("</port><queue><resource-id>eth2:1</resource-id><id>1</id><port>eth2</port><properties><min-rate>100</min-rate></properties></queue><queue><resource-id>eth2:2</resource-id><id>2</id><port>eth2</port><properties><max-rate>333</max-rate></properties></queue></resources><logical-switches>"));
    assert!(!out.contains("<state>") && !out.contains("current-rate"));
    assert!(out.contains("<name>eth2</name><configuration><admin-state>down</admin-state>"));
    let mut out = String::new();
    crate::xml::write(&render(&snap(), true), None, &mut out);
    assert!(out.contains(
        "<current-rate>10000000</current-rate><configuration><admin-state>down</admin-state>"
    ));
    assert!(out.contains(
        "<state><oper-state>down</oper-state><blocked>false</blocked><live>false</live></state>"
    ));
}

#[test]
fn subtree_filters() {
    let tree = render(&snap(), false);
    let f = parse(
        format!(r#"<capable-switch xmlns="{NS}"><logical-switches/></capable-switch>"#).as_bytes(),
    )
    .unwrap();
    let got = subtree(&tree, &f).unwrap();
    assert_eq!(got.children.len(), 1);
    assert_eq!(got.children[0].name, "logical-switches");
    // Content match on a list key: that entry only.
    let f = parse(format!(r#"<capable-switch xmlns="{NS}"><resources><port><resource-id>eth2</resource-id></port></resources></capable-switch>"#).as_bytes()).unwrap();
    let got = subtree(&tree, &f).unwrap();
    let ports: Vec<_> = got.children[0].children_named("port").collect();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].child_text("number"), Some("2"));
    let f = parse(br#"<capable-switch xmlns="urn:other"/>"#).unwrap();
    assert!(subtree(&tree, &f).is_none());
}

#[test]
fn new_switch_with_everything() {
    let ops = edit(
        &ls("<switch><id>br1</id><datapath-id>00:00:00:00:00:00:00:0a</datapath-id><lost-connection-behavior>failStandaloneMode</lost-connection-behavior><controllers><controller><id>c</id><ip-address>10.0.0.9</ip-address><port>6633</port><protocol>tls</protocol></controller></controllers><resources><port>eth9</port></resources></switch>"),
        EditOp::Merge,
    )
    .unwrap();
    assert_eq!(
        ops,
        vec![
            Op::AddBridge {
                name: "br1".into(),
                dpid: Some(10),
                fail_mode: Some(FailMode::Standalone)
            },
            Op::SetController {
                bridge: "br1".into(),
                targets: vec!["tls:10.0.0.9:6633".into()]
            },
            Op::AddPort {
                bridge: "br1".into(),
                interface: "eth9".into(),
                number: None,
                options: vec![]
            },
        ]
    );
}

#[test]
fn merge_into_existing_switch() {
    let ops = edit(
        &format!(
            r#"<resources><port><resource-id>eth3</resource-id><number>7</number></port></resources>{}"#,
            ls("<switch><id>br0</id><datapath-id>00:00:00:00:00:00:00:02</datapath-id><lost-connection-behavior>failStandaloneMode</lost-connection-behavior><controllers><controller><id>x</id><ip-address>10.0.0.2</ip-address></controller></controllers><resources><port>eth3</port><port>eth1</port></resources></switch>")
        ),
        EditOp::Merge,
    )
    .unwrap();
    assert_eq!(
        ops,
        vec![
            Op::Set {
                object: "bridge:br0".into(),
                key: "other_config:datapath-id".into(),
                value: "0000000000000002".into()
            },
            Op::SetFailMode {
                bridge: "br0".into(),
                mode: FailMode::Standalone
            },
            Op::SetController {
                bridge: "br0".into(),
                targets: vec!["tcp:10.0.0.1:6653".into(), "tls:10.0.0.2:6633".into()]
            },
            Op::AddPort {
                bridge: "br0".into(),
                interface: "eth3".into(),
                number: Some(7),
                options: vec![]
            },
        ]
    );
    // The same values again: nothing to do.
    let same = ls("<switch><id>br0</id><datapath-id>00:00:00:00:00:00:00:01</datapath-id><controllers><controller><id>tcp:10.0.0.1:6653</id></controller></controllers><resources><port>eth1</port></resources></switch>");
    assert_eq!(edit(&same, EditOp::Merge).unwrap(), vec![]);
}

#[test]
fn get_config_sent_back_changes_nothing() {
    let tree = render(&snap(), false);
    for default in [EditOp::Merge, EditOp::Replace] {
        assert_eq!(
            edit_ops(&snap(), &tree, default).unwrap(),
            vec![],
            "{default:?}"
        );
    }
    // Renumbering an attached port (eth1: eth2 has queues, see
    // renumbered_port_takes_its_queues_along).
    assert_eq!(
        edit(
            "<resources><port><resource-id>eth1</resource-id><number>9</number></port></resources>",
            EditOp::Merge
        )
        .unwrap(),
        vec![Op::Set {
            object: "interface:eth1".into(),
            key: "ofport".into(),
            value: "9".into()
        }]
    );
}

#[test]
fn delete_remove_and_replace() {
    let del = |body: &str| edit(&ls(body), EditOp::Merge);
    assert_eq!(
        del(r#"<switch nc:operation="delete"><id>br0</id></switch>"#).unwrap(),
        vec![Op::DelBridge { name: "br0".into() }]
    );
    assert_eq!(
        del(r#"<switch nc:operation="remove"><id>nope</id></switch>"#).unwrap(),
        vec![]
    );
    assert_eq!(
        del(r#"<switch nc:operation="delete"><id>nope</id></switch>"#)
            .unwrap_err()
            .tag,
        "data-missing"
    );
    assert_eq!(
        del(r#"<switch nc:operation="create"><id>br0</id></switch>"#)
            .unwrap_err()
            .tag,
        "data-exists"
    );
    assert_eq!(
        del(r#"<switch><id>br0</id><controllers><controller nc:operation="delete"><id>tcp:10.0.0.1:6653</id></controller></controllers><resources><port nc:operation="delete">eth2</port></resources></switch>"#).unwrap(),
        vec![
            Op::DelController { bridge: "br0".into() },
            Op::DelPort { bridge: Some("br0".into()), port: PortRef::Name("eth2".into()) },
        ]
    );
    assert_eq!(
        del(r#"<switch><id>br0</id><resources><port nc:operation="delete">eth7</port></resources></switch>"#).unwrap_err().tag,
        "data-missing"
    );
    assert_eq!(
        del(r#"<switch><id>br0</id><lost-connection-behavior nc:operation="delete"/></switch>"#)
            .unwrap(),
        vec![]
    );
    // replace: what is not listed goes.
    assert_eq!(
        edit(
            &ls("<switch><id>br0</id><resources><port>eth1</port></resources></switch>"),
            EditOp::Replace
        )
        .unwrap(),
        vec![
            Op::DelController {
                bridge: "br0".into()
            },
            Op::DelPort {
                bridge: Some("br0".into()),
                port: PortRef::Name("eth2".into())
            },
        ]
    );
    assert_eq!(
        edit(&ls("<switch><id>br5</id></switch>"), EditOp::Replace).unwrap(),
        vec![
            Op::AddBridge {
                name: "br5".into(),
                dpid: None,
                fail_mode: None
            },
            Op::DelBridge { name: "br0".into() },
        ]
    );
    // none: only descend; a missing switch is an error.
    assert_eq!(
        edit(&ls("<switch><id>br0</id></switch>"), EditOp::None).unwrap(),
        vec![]
    );
    assert_eq!(
        edit(&ls("<switch><id>br9</id></switch>"), EditOp::None)
            .unwrap_err()
            .tag,
        "data-missing"
    );
    assert_eq!(
        edit(r#"<resources><port nc:operation="delete"><resource-id>eth1</resource-id></port></resources>"#, EditOp::Merge).unwrap(),
        vec![Op::DelPort { bridge: Some("br0".into()), port: PortRef::Name("eth1".into()) }]
    );
}

#[test]
fn bad_edits_are_rpc_errors() {
    for (body, tag) in [
        (ls("<switch><id>br0</id><bogus/></switch>"), "unknown-element"),
        (ls("<switch><bogus/></switch>"), "missing-element"),
        (ls("<switch><datapath-id>00:00:00:00:00:00:00:01</datapath-id></switch>"), "missing-element"),
        (ls("<switch><id>br0</id><datapath-id>1</datapath-id></switch>"), "invalid-value"),
        (ls("<switch><id>br0</id><enabled>maybe</enabled></switch>"), "invalid-value"),
        (ls("<switch><id>br0</id><enabled>false</enabled></switch>"), "operation-not-supported"),
        (ls("<switch><id>br0</id><lost-connection-behavior>x</lost-connection-behavior></switch>"), "invalid-value"),
        (ls("<switch><id>br0</id><controllers><controller><id>n</id></controller></controllers></switch>"), "missing-element"),
        (ls("<switch><id>br0</id><controllers><controller><id>n</id><ip-address>x</ip-address></controller></controllers></switch>"), "invalid-value"),
        (ls("<switch><id>br0</id><controllers><controller><id>n</id><ip-address>1.2.3.4</ip-address><port>70000</port></controller></controllers></switch>"), "invalid-value"),
        (ls("<switch><id>br0</id><controllers><controller><id>n</id><ip-address>1.2.3.4</ip-address><protocol>udp</protocol></controller></controllers></switch>"), "invalid-value"),
        (ls(r#"<switch nc:operation="frobnicate"><id>br0</id></switch>"#), "bad-attribute"),
        (ls("<switch><id>br0</id><resources><queue>q</queue></resources></switch>"), "invalid-value"),
        ("<resources><port><resource-id>eth1</resource-id><configuration><admin-state>down</admin-state></configuration></port></resources>".into(), "operation-not-supported"),
        ("<resources><port><resource-id>eth2</resource-id><configuration><admin-state>up</admin-state></configuration></port></resources>".into(), "operation-not-supported"),
        ("<resources><port><resource-id>eth2</resource-id><configuration><no-forward>maybe</no-forward></configuration></port></resources>".into(), "invalid-value"),
        ("<resources><port><resource-id>eth2</resource-id><configuration><speed/></configuration></port></resources>".into(), "unknown-element"),
        ("<resources><port><resource-id>eth1</resource-id><number>0</number></port></resources>".into(), "invalid-value"),
        ("<resources><port><resource-id>eth8</resource-id></port></resources>".into(), "operation-not-supported"),
        ("<other/>".into(), "unknown-element"),
        (r#"<logical-switches><switch xmlns="urn:x"/></logical-switches>"#.into(), "unknown-namespace"),
    ] {
        assert_eq!(edit(&body, EditOp::Merge).unwrap_err().tag, tag, "{body}");
    }
    let wrong_id = parse(
        format!(r#"<capable-switch xmlns="{NS}"><id>other</id></capable-switch>"#).as_bytes(),
    )
    .unwrap();
    assert_eq!(
        edit_ops(&snap(), &wrong_id, EditOp::Merge).unwrap_err().tag,
        "invalid-value"
    );
}

fn queues(body: &str) -> String {
    format!("<resources>{body}</resources>")
}

fn eth2_qos(queues: Vec<QueueConf>) -> Op {
    Op::SetQos {
        bridge: "br0".into(),
        port: PortRef::Name("eth2".into()),
        qos: Some(PortQos {
            kind: Default::default(),
            max_rate: 10_000_000,
            queues,
        }),
    }
}

const Q1: QueueConf = QueueConf {
    id: 1,
    min_rate: 1_000_000,
    max_rate: 0,
    priority: 0,
};
const Q2: QueueConf = QueueConf {
    id: 2,
    min_rate: 0,
    max_rate: 3_333_333,
    priority: 1,
};

#[test]
fn queue_permille_and_resource_ids() {
    assert_eq!(permille(0, 10), None);
    assert_eq!(permille(5, 0), None);
    assert_eq!(permille(3_333_333, 10_000_000), Some(333));
    assert_eq!(permille(u64::MAX, 1), Some(1000));
    assert_eq!(parse_queue_rid("eth1:2"), Some(("eth1", 2)));
    assert_eq!(parse_queue_rid("a:b:7"), Some(("a:b", 7)));
    for bad in [
        "eth1",
        ":2",
        "eth1:",
        "eth1:x",
        "eth1:02",
        "eth1:4294967295",
        "eth1:+2",
    ] {
        assert_eq!(parse_queue_rid(bad), None, "{bad}");
    }
}

#[test]
fn queue_edits_set_the_ports_queues() {
    // Create a queue: tenths of a percent of the port's max_rate.
    let ops = edit(
        &queues("<queue><resource-id>eth2:5</resource-id><id>5</id><port>eth2</port><properties><min-rate>250</min-rate><max-rate>500</max-rate></properties></queue>"),
        EditOp::Merge,
    )
    .unwrap();
    let q5 = QueueConf {
        id: 5,
        min_rate: 2_500_000,
        max_rate: 5_000_000,
        priority: 0,
    };
    assert_eq!(ops, vec![eth2_qos(vec![Q1, Q2, q5])]);
    // create of an existing one; delete of a missing one.
    assert_eq!(
        edit(
            &queues(r#"<queue nc:operation="create"><resource-id>eth2:1</resource-id></queue>"#),
            EditOp::Merge
        )
        .unwrap_err()
        .tag,
        "data-exists"
    );
    assert_eq!(
        edit(
            &queues(r#"<queue nc:operation="delete"><resource-id>eth2:9</resource-id></queue>"#),
            EditOp::Merge
        )
        .unwrap_err()
        .tag,
        "data-missing"
    );
    assert_eq!(
        edit(
            &queues(r#"<queue nc:operation="remove"><resource-id>eth2:9</resource-id></queue>"#),
            EditOp::Merge
        )
        .unwrap(),
        vec![]
    );
    // Merge changes only what it names; priority is kept.
    assert_eq!(
        edit(&queues("<queue><resource-id>eth2:2</resource-id><properties><min-rate>100</min-rate></properties></queue>"), EditOp::Merge).unwrap(),
        vec![eth2_qos(vec![Q1, QueueConf { min_rate: 1_000_000, ..Q2 }])]
    );
    // Replace of a queue: rates not given are none.
    assert_eq!(
        edit(&queues(r#"<queue nc:operation="replace"><resource-id>eth2:2</resource-id><properties><min-rate>100</min-rate></properties></queue>"#), EditOp::Merge).unwrap(),
        vec![eth2_qos(vec![Q1, QueueConf { min_rate: 1_000_000, max_rate: 0, ..Q2 }])]
    );
    // A rate leaf deleted.
    assert_eq!(
        edit(&queues(r#"<queue><resource-id>eth2:1</resource-id><properties><min-rate nc:operation="delete"/></properties></queue>"#), EditOp::Merge).unwrap(),
        vec![eth2_qos(vec![QueueConf { min_rate: 0, ..Q1 }, Q2])]
    );
    // Delete: one SetQos with the rest.
    assert_eq!(
        edit(
            &queues(r#"<queue nc:operation="delete"><resource-id>eth2:1</resource-id></queue>"#),
            EditOp::Merge
        )
        .unwrap(),
        vec![eth2_qos(vec![Q2])]
    );
    // Through the logical switch's reference too.
    assert_eq!(
        edit(&ls(r#"<switch><id>br0</id><resources><queue nc:operation="delete">eth2:2</queue></resources></switch>"#), EditOp::Merge).unwrap(),
        vec![eth2_qos(vec![Q1])]
    );
    // A new queue on a port without queues, no rates: the port gets
    // queues (no max_rate, so no rates can be given).
    assert_eq!(
        edit(
            &queues("<queue><resource-id>eth1:0</resource-id></queue>"),
            EditOp::Merge
        )
        .unwrap(),
        vec![Op::SetQos {
            bridge: "br0".into(),
            port: PortRef::Name("eth1".into()),
            qos: Some(PortQos {
                kind: Default::default(),
                max_rate: 0,
                queues: vec![QueueConf {
                    id: 0,
                    min_rate: 0,
                    max_rate: 0,
                    priority: 0
                }],
            }),
        }]
    );
    // The resources replaced: queues not listed go.
    assert_eq!(
        edit(r#"<resources nc:operation="replace"><port><resource-id>eth1</resource-id></port><port><resource-id>eth2</resource-id></port><queue><resource-id>eth2:2</resource-id><properties><max-rate>333</max-rate></properties></queue></resources>"#, EditOp::Merge).unwrap(),
        vec![eth2_qos(vec![Q2])]
    );
    // A switch replaced with only its ports: its queues go; the port
    // deleted in the same edit gets no SetQos.
    assert_eq!(
        edit(&ls("<switch><id>br0</id><controllers><controller><id>tcp:10.0.0.1:6653</id><ip-address>10.0.0.1</ip-address><port>6653</port><protocol>tcp</protocol></controller></controllers><resources><port>eth1</port><port>eth2</port></resources></switch>"), EditOp::Replace).unwrap(),
        vec![eth2_qos(vec![])]
    );
    assert_eq!(
        edit(&ls("<switch><id>br0</id><controllers><controller><id>tcp:10.0.0.1:6653</id><ip-address>10.0.0.1</ip-address><port>6653</port><protocol>tcp</protocol></controller></controllers><resources><port>eth1</port></resources></switch>"), EditOp::Replace).unwrap(),
        vec![Op::DelPort { bridge: Some("br0".into()), port: PortRef::Name("eth2".into()) }]
    );
}

#[test]
fn renumbered_port_takes_its_queues_along() {
    assert_eq!(
        edit(
            "<resources><port><resource-id>eth2</resource-id><number>9</number></port></resources>",
            EditOp::Merge
        )
        .unwrap(),
        vec![
            Op::Set {
                object: "interface:eth2".into(),
                key: "ofport".into(),
                value: "9".into()
            },
            eth2_qos(vec![Q1, Q2]),
        ]
    );
    // default-operation none: a rate without its own operation is
    // left alone.
    assert_eq!(
        edit(
            &queues("<queue><resource-id>eth2:1</resource-id><properties><min-rate>900</min-rate></properties></queue>"),
            EditOp::None
        )
        .unwrap(),
        vec![]
    );
}

#[test]
fn last_queue_of_a_port_without_ceiling_clears_its_qos() {
    let mut s = snap();
    s.bridges[0].ports[1].qos.as_mut().unwrap().max_rate = 0;
    let doc = format!(
        r#"<capable-switch xmlns="{NS}" xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><resources><queue nc:operation="delete"><resource-id>eth2:1</resource-id></queue><queue nc:operation="delete"><resource-id>eth2:2</resource-id></queue></resources></capable-switch>"#
    );
    assert_eq!(
        edit_ops(&s, &parse(doc.as_bytes()).unwrap(), EditOp::Merge).unwrap(),
        vec![Op::SetQos {
            bridge: "br0".into(),
            port: PortRef::Name("eth2".into()),
            qos: None
        }]
    );
    // Rates it cannot show are not dropped by a replace that omits them.
    let tree = render(&s, false);
    assert_eq!(edit_ops(&s, &tree, EditOp::Replace).unwrap(), vec![]);
    let doc = format!(
        r#"<capable-switch xmlns="{NS}"><resources><queue><resource-id>eth2:1</resource-id><properties><min-rate>5</min-rate></properties></queue></resources></capable-switch>"#
    );
    let e = edit_ops(&s, &parse(doc.as_bytes()).unwrap(), EditOp::Merge).unwrap_err();
    assert_eq!(e.tag, "invalid-value");
}

#[test]
fn bad_queue_edits_are_rpc_errors() {
    for (body, tag) in [
        (queues("<queue><resource-id>q1</resource-id></queue>"), "invalid-value"),
        (queues("<queue><id>1</id></queue>"), "missing-element"),
        (queues("<queue><resource-id>eth2:1</resource-id><id>2</id></queue>"), "invalid-value"),
        (queues("<queue><resource-id>eth2:1</resource-id><port>eth1</port></queue>"), "invalid-value"),
        (queues("<queue><resource-id>eth9:1</resource-id></queue>"), "data-missing"),
        (queues("<queue><resource-id>eth2:1</resource-id><bogus/></queue>"), "unknown-element"),
        (queues("<queue><resource-id>eth2:1</resource-id><properties><min-rate>1001</min-rate></properties></queue>"), "invalid-value"),
        (queues("<queue><resource-id>eth2:1</resource-id><properties><max-rate>-1</max-rate></properties></queue>"), "invalid-value"),
        (queues("<queue><resource-id>eth2:1</resource-id><properties><experimenter>7</experimenter></properties></queue>"), "operation-not-supported"),
        (queues("<queue><resource-id>eth2:1</resource-id><properties><weight>7</weight></properties></queue>"), "unknown-element"),
        // min above max (the datastore's check, before any transaction).
        (queues("<queue><resource-id>eth2:1</resource-id><properties><min-rate>500</min-rate><max-rate>100</max-rate></properties></queue>"), "invalid-value"),
        (ls("<switch><id>br0</id><resources><queue>eth2:9</queue></resources></switch>"), "data-missing"),
        (ls("<switch><id>br0</id><resources><queue>eth7:1</queue></resources></switch>"), "data-missing"),
        (ls(r#"<switch><id>br0</id><resources><queue nc:operation="create">eth2:1</queue></resources></switch>"#), "data-exists"),
    ] {
        assert_eq!(edit(&body, EditOp::Merge).unwrap_err().tag, tag, "{body}");
    }
    // A queue and its reference in one edit.
    assert!(edit(
        &format!(
            "{}{}",
            queues("<queue><resource-id>eth2:7</resource-id></queue>"),
            ls("<switch><id>br0</id><resources><queue>eth2:7</queue></resources></switch>")
        ),
        EditOp::Merge
    )
    .is_ok());
}
