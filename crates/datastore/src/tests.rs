//! Loading tests: defaults, every validation error with its exact message
//! (file:line:column: field: message), unknown keys, dpid forms, the
//! gateway example, flags, files of flows, round trips.

use super::*;
use std::time::Duration;

const HOST: Host = Host { cpus: 4 };

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_str_for(text, "fulmar.toml", HOST)
}

/// The flows of a bridge's flows file, read again as an installer reads
/// them: (line, text, parse).
fn file_flows(b: &Bridge) -> Vec<(usize, String, ofp::FlowMod)> {
    let mut out = Vec::new();
    b.flows_file
        .as_ref()
        .expect("a flows file")
        .for_each_flow(|line, text, fm| {
            out.push((line, text.to_string(), fm.unwrap()));
            Ok::<(), ()>(())
        })
        .unwrap();
    out
}

#[track_caller]
fn errors(text: &str) -> Vec<String> {
    match load(text) {
        Ok(_) => panic!("loaded: {text}"),
        Err(e) => e.errors.iter().map(|d| d.to_string()).collect(),
    }
}

/// The one error of `text`.
#[track_caller]
fn error(text: &str) -> String {
    let e = errors(text);
    assert_eq!(e.len(), 1, "{e:#?}");
    e.into_iter().next().unwrap_or_default()
}

#[track_caller]
fn warnings(text: &str) -> Vec<String> {
    match load(text) {
        Ok(c) => c.warnings.iter().map(|d| d.to_string()).collect(),
        Err(e) => panic!("{e}"),
    }
}

/// A fresh directory for files a test writes, removed when dropped.
fn tmpdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("datastore-test-{name}-"))
        .tempdir()
        .unwrap()
}

/// A bridge with one port on eth0, then `extra` (more keys of the bridge
/// or further tables).
fn one_bridge(extra: &str) -> String {
    format!(
        "[[bridges]]\nname = \"br0\"\n{extra}\n[[bridges.ports]]\nport = 1\ninterface = \"eth0\"\n"
    )
}

/// Clears what depends on where the text was (lines of inline flows,
/// warnings) so that models from different texts can be compared.
fn without_sources(mut c: Config) -> Config {
    for b in &mut c.bridges {
        for f in &mut b.flows {
            f.source.line = 0;
        }
        for g in &mut b.groups {
            g.source.line = 0;
        }
        for m in &mut b.meters {
            m.source.line = 0;
        }
    }
    c.warnings.clear();
    c
}

#[test]
fn defaults() {
    let c = load(&one_bridge("")).unwrap();
    assert!(c.warnings.is_empty());
    let b = &c.bridges[0];
    assert_eq!(b.name, "br0");
    assert_eq!(b.dpid, 1, "default dpid: position from 1");
    assert_eq!(b.fail_mode, FailMode::Secure);
    assert_eq!(b.n_tables, 254);
    assert_eq!(b.miss_send_len, 128);
    assert_eq!(b.flow_table_capacity, 16_777_216);
    assert_eq!(b.flow_memory_limit_mib, 0);
    assert_eq!(
        b.ports,
        vec![Port {
            number: 1,
            kind: PortKind::Interface {
                name: "eth0".into(),
                backend: Backend::AfPacket
            },
            vlan: VlanSettings::default(),
        }]
    );
    assert!(b.controllers.is_empty() && b.flows.is_empty() && b.flows_file.is_none());
    assert_eq!(c.dataplane, Dataplane::default());
    let d = &c.dataplane;
    assert_eq!(d.mode, ThreadMode::RunToCompletion);
    assert_eq!((d.rx_threads, d.worker_threads, d.tx_threads), (0, 1, 0));
    assert_eq!(d.burst.rx_read, 32);
    assert_eq!(d.burst.tx_write, 32);
    assert_eq!(d.flush.idle, Duration::ZERO);
    assert_eq!(d.flush.max_wait, Duration::ZERO);
    assert_eq!((d.rings.rx_ring, d.rings.tx_ring), (1024, 1024));
    assert_eq!(d.dispatch.key, DispatchKey::FiveTuple);
    assert!(c.tls.is_none() && c.patch_links.is_empty());

    // Pipelined mode: one thread of each kind by default.
    let c = load("[dataplane]\nmode = \"rx-worker-tx\"\n").unwrap();
    let d = &c.dataplane;
    assert_eq!((d.rx_threads, d.worker_threads, d.tx_threads), (1, 1, 1));
    assert!(c.bridges.is_empty());

    // Controller timers.
    let c = load(&one_bridge(
        "[[bridges.controllers]]\ntarget = \"tcp:10.0.0.1\"",
    ))
    .unwrap();
    assert_eq!(
        c.bridges[0].controllers,
        vec![Controller::new(ControllerTarget::Connect {
            transport: Transport::Tcp,
            host: "10.0.0.1".into(),
            port: 6653
        })]
    );
    assert_eq!(c.bridges[0].controllers[0].echo_interval_ms, 5000);
    assert_eq!(c.bridges[0].controllers[0].dead_peer_timeout_ms, 15000);
    assert_eq!(c.bridges[0].controllers[0].backoff_min_ms, 1000);
    assert_eq!(c.bridges[0].controllers[0].backoff_max_ms, 8000);
}

#[test]
fn dpid_forms() {
    let dpid = |v: &str| -> Result<u64, String> {
        match load(&format!("[[bridges]]\nname = \"b\"\ndpid = {v}\n")) {
            Ok(c) => Ok(c.bridges[0].dpid),
            Err(e) => Err(e.to_string()),
        }
    };
    assert_eq!(dpid("31"), Ok(31));
    assert_eq!(dpid("0x1f"), Ok(31), "a TOML hex integer");
    assert_eq!(dpid("\"31\""), Ok(31));
    assert_eq!(dpid("\"0x1f\""), Ok(31));
    assert_eq!(dpid("\"0X1F\""), Ok(31));
    assert_eq!(dpid("\"00:00:00:00:00:00:00:1f\""), Ok(31));
    assert_eq!(
        dpid("\"aa:bb:cc:dd:ee:ff:00:11\""),
        Ok(0xaabb_ccdd_eeff_0011)
    );
    assert_eq!(dpid("\"0xffffffffffffffff\""), Ok(u64::MAX));
    assert_eq!(dpid("\"18446744073709551615\""), Ok(u64::MAX));
    assert_eq!(dpid("0"), Ok(0));
    let bad = |s: &str| {
        format!(
            "fulmar.toml:3:8: bridges[0].dpid: dpid \"{s}\" is not valid (a number, \"0x\" and up to 16 hex digits, or 8 hex bytes as \"aa:bb:cc:dd:ee:ff:00:11\")"
        )
    };
    for s in [
        "0x",
        "0x1_0",
        "0x10000000000000000",
        "00:11",
        "00:00:00:00:00:00:00:1",
        "00:00:00:00:00:00:00:zz",
        "aa:bb:cc:dd:ee:ff:00:11:22",
        "zz",
        "",
        "18446744073709551616",
        "-1",
    ] {
        assert_eq!(dpid(&format!("\"{s}\"")), Err(bad(s)), "{s}");
    }
    assert_eq!(
        dpid("-5"),
        Err("fulmar.toml:3:8: bridges[0].dpid: dpid -5 is not valid (a datapath id is not negative)".into())
    );
}

#[test]
fn unknown_keys_name_the_key_and_where() {
    assert_eq!(
        error("bridge = 1\n"),
        "fulmar.toml:1:1: bridge: unknown field `bridge`, expected one of `bridges`, `patch_links`, `dataplane`, `tls`, `dpdk`"
    );
    assert_eq!(
        error("[[bridges]]\nname = \"br0\"\ndatapath_id = 1\n"),
        "fulmar.toml:3:1: bridges[0].datapath_id: unknown field `datapath_id`, expected one of `name`, `dpid`, `fail_mode`, `n_tables`, `miss_send_len`, `flow_table_capacity`, `flow_memory_limit_mib`, `ports`, `controllers`, `flows`, `flows_file`, `groups`, `groups_file`, `meters`, `meters_file`, `local_port`"
    );
    assert_eq!(
        error(&format!("{}speed = 10\n", one_bridge(""))),
        "fulmar.toml:7:1: bridges[0].ports[0].speed: unknown field `speed`, expected one of `port`, `interface`, `backend`, `pcap_read`, `pcap_write`, `pcap_rate`, `dpdk_devargs`, `dpdk_rx_queues`, `dpdk_rx_desc`, `dpdk_tx_desc`, `dpdk_mbufs`, `dpdk_mtu`, `rx_queue_cores`, `tx_core`, `tag`, `trunks`, `vlan_mode`, `remote_ip`, `local_ip`, `key`, `dst_port`, `qos`"
    );
    // The second bridge's port.
    let text = format!(
        "{}[[bridges]]\nname = \"br1\"\n[[bridges.ports]]\nport = 1\nifname = \"x\"\n",
        one_bridge("")
    );
    assert_eq!(
        error(&text),
        "fulmar.toml:11:1: bridges[1].ports[0].ifname: unknown field `ifname`, expected one of `port`, `interface`, `backend`, `pcap_read`, `pcap_write`, `pcap_rate`, `dpdk_devargs`, `dpdk_rx_queues`, `dpdk_rx_desc`, `dpdk_tx_desc`, `dpdk_mbufs`, `dpdk_mtu`, `rx_queue_cores`, `tx_core`, `tag`, `trunks`, `vlan_mode`, `remote_ip`, `local_ip`, `key`, `dst_port`, `qos`"
    );
    assert_eq!(
        error("[dataplane.burst]\nrx_read = 32\nrx_reed = 32\n"),
        "fulmar.toml:3:1: dataplane.burst.rx_reed: unknown field `rx_reed`, expected one of `rx_read`, `rx_write`, `worker_read`, `worker_write`, `tx_read`, `tx_write`"
    );
    assert_eq!(
        error("[dataplane]\nworkers = 2\n"),
        "fulmar.toml:2:1: dataplane.workers: unknown field `workers`, expected one of `mode`, `rx_threads`, `worker_threads`, `tx_threads`, `rx_cores`, `worker_cores`, `tx_cores`, `burst`, `flush_idle_us`, `max_batch_wait_us`, `rx_ring_size`, `tx_ring_size`, `dispatch`, `dispatch_fallback`, `priority_class`, `core_assign`, `max_queue_delay_us`, `bulk_reply_nice`"
    );
    assert_eq!(
        error("[[bridges]]\nname = \"b\"\ncontrollers = [{ target = \"tcp:1.2.3.4\", echo = 5 }]\n"),
        "fulmar.toml:3:42: bridges[0].controllers[0].echo: unknown field `echo`, expected one of `target`, `listen`, `echo_interval_ms`, `dead_peer_timeout_ms`, `backoff_min_ms`, `backoff_max_ms`"
    );
}

#[test]
fn type_and_syntax_errors() {
    assert_eq!(
        error("[[bridges]]\nname = \"b\"\nn_tables = \"4\"\n"),
        "fulmar.toml:3:12: bridges[0].n_tables: invalid type: string \"4\", expected i64"
    );
    assert_eq!(
        error("[[bridges]]\nname = 7\n"),
        "fulmar.toml:2:8: bridges[0].name: invalid type: integer `7`, expected a string"
    );
    assert_eq!(
        error("[[bridges]]\nn_tables = 4\n"),
        "fulmar.toml:1:1: bridges[0]: missing field `name`"
    );
    // A TOML syntax error: the place, no field.
    let e = error("[[bridges]]\nname = \"b\n");
    assert!(e.starts_with("fulmar.toml:2:"), "{e}");
    assert!(!e.contains("bridges[0]"), "{e}");
    let e = error("[dataplane]\nmode = \n");
    assert!(e.starts_with("fulmar.toml:2:"), "{e}");
}

#[test]
fn bridge_field_errors() {
    assert_eq!(
        error("[[bridges]]\nname = \"br 0\"\n"),
        "fulmar.toml:2:8: bridges[0].name: bridge name \"br 0\" may hold only letters, digits, '_', '-' and '.'"
    );
    assert_eq!(
        error("[[bridges]]\nname = \"\"\n"),
        "fulmar.toml:2:8: bridges[0].name: bridge name \"\" must have 1 to 32 characters"
    );
    assert_eq!(
        error("[[bridges]]\nname = \"b\"\nfail_mode = \"open\"\n"),
        "fulmar.toml:3:13: bridges[0].fail_mode: fail_mode \"open\" is not valid (secure or standalone)"
    );
    assert_eq!(
        error("[[bridges]]\nname = \"b\"\nn_tables = 255\n"),
        "fulmar.toml:3:12: bridges[0].n_tables: n_tables 255 is not valid (1..=254)"
    );
    assert_eq!(
        error("[[bridges]]\nname = \"b\"\nn_tables = 0\n"),
        "fulmar.toml:3:12: bridges[0].n_tables: n_tables 0 is not valid (1..=254)"
    );
    assert_eq!(
        error("[[bridges]]\nname = \"b\"\nmiss_send_len = 65536\n"),
        "fulmar.toml:3:17: bridges[0].miss_send_len: miss_send_len 65536 is not valid (0..=65535)"
    );
    assert_eq!(
        error("[[bridges]]\nname = \"b\"\nflow_table_capacity = 0\n"),
        "fulmar.toml:3:23: bridges[0].flow_table_capacity: flow_table_capacity 0 is not valid (1..=16777216)"
    );
    let c = load("[[bridges]]\nname = \"b\"\nfail_mode = \"standalone\"\nn_tables = 1\nmiss_send_len = 65535\nflow_table_capacity = 16777216\n").unwrap();
    let b = &c.bridges[0];
    assert_eq!(
        (
            b.fail_mode,
            b.n_tables,
            b.miss_send_len,
            b.flow_table_capacity
        ),
        (FailMode::Standalone, 1, 65535, 16_777_216)
    );
}

#[test]
fn duplicate_bridges() {
    assert_eq!(
        errors("[[bridges]]\nname = \"br0\"\n[[bridges]]\nname = \"br0\"\n"),
        vec!["fulmar.toml:4:8: bridges[1].name: bridge name \"br0\" is already used by bridges[0]"]
    );
    assert_eq!(
        errors("[[bridges]]\nname = \"a\"\ndpid = \"0x2\"\n[[bridges]]\nname = \"b\"\ndpid = \"00:00:00:00:00:00:00:02\"\n"),
        vec!["fulmar.toml:6:8: bridges[1].dpid: dpid 0x0000000000000002 is already used by bridges[0]"]
    );
    // A default dpid can clash with a given one: the message points at the
    // bridge's name.
    assert_eq!(
        errors("[[bridges]]\nname = \"a\"\ndpid = 2\n[[bridges]]\nname = \"b\"\n"),
        vec!["fulmar.toml:5:8: bridges[1].dpid: dpid 0x0000000000000002 is already used by bridges[0]"]
    );
}

#[test]
fn a_file_error_names_file_line_column_and_the_typed_field() {
    let text = "[[bridges]]\nname = \"br0\"\n[[bridges.ports]]\nport = 1\ninterface = \"eth0\"\n\n[[bridges]]\nname = \"br1\"\n[[bridges.ports]]\nport = 1\ninterface = \"eth1\"\n[[bridges.ports]]\nport = 2\ninterface = \"eth2\"\n  vlan_mode = \"sideways\"\n";
    let e = load(text).unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    let d = &e.errors[0];
    assert_eq!(d.file, std::path::Path::new("fulmar.toml"));
    // Line 15, the value after `  vlan_mode = `.
    assert_eq!((d.line, d.column), (Some(15), Some(15)));
    assert_eq!(d.field, "bridges[1].ports[1].vlan_mode");
    assert_eq!(
        d.path,
        FieldPath::bridge(Some(1), "br1")
            .port(Some(1), "eth2")
            .at("vlan_mode")
    );
    assert_eq!(d.path.render(true), "bridges.br1.ports.eth2.vlan_mode");
    assert!(
        d.to_string()
            .starts_with("fulmar.toml:15:15: bridges[1].ports[1].vlan_mode: "),
        "{d}"
    );
}

#[test]
fn port_errors() {
    // The example of the brief: line 14, column 9 (indented).
    let text = "# fulmar\n\n[dataplane]\nmode = \"run-to-completion\"\n\n[[bridges]]\nname = \"br0\"\n\n[[bridges.ports]]\nport = 1\ninterface = \"eth0\"\n\n[[bridges.ports]]\n    port = 0\ninterface = \"eth1\"\n";
    assert_eq!(
        error(text),
        "fulmar.toml:14:12: bridges[0].ports[1].port: port number 0 is not valid (1..=4294967040)"
    );
    let port = |body: &str| {
        error(&format!(
            "[[bridges]]\nname = \"b\"\n[[bridges.ports]]\n{body}\n"
        ))
    };
    assert_eq!(
        port("port = 4294967041\ninterface = \"e\""),
        "fulmar.toml:4:8: bridges[0].ports[0].port: port number 4294967041 is not valid (1..=4294967040)"
    );
    assert_eq!(
        port("port = -1\ninterface = \"e\""),
        "fulmar.toml:4:8: bridges[0].ports[0].port: port number -1 is not valid (1..=4294967040)"
    );
    assert_eq!(
        port("port = 1"),
        "fulmar.toml:4:8: bridges[0].ports[0]: the port has no interface (give interface = \"NAME\", or backend = \"patch\")"
    );
    assert_eq!(
        port("port = 1\ninterface = \"e\"\nbackend = \"vhost\""),
        "fulmar.toml:6:11: bridges[0].ports[0].backend: backend \"vhost\" is not valid (afpacket, afxdp, tap, pcap, dpdk, vxlan, gre, memory or patch)"
    );
    assert_eq!(
        port("port = 1\ninterface = \"a-very-long-name0\""),
        "fulmar.toml:5:13: bridges[0].ports[0].interface: interface name \"a-very-long-name0\" is longer than 15 bytes"
    );
    assert_eq!(
        port("port = 1\ninterface = \"eth 0\""),
        "fulmar.toml:5:13: bridges[0].ports[0].interface: interface name \"eth 0\" may not hold white space, '/' or ':'"
    );
    assert_eq!(
        port("port = 1\ninterface = \"\""),
        "fulmar.toml:5:13: bridges[0].ports[0].interface: the interface name is empty"
    );
    // A memory port's name is a label, not a kernel name.
    let c = load("[[bridges]]\nname = \"b\"\n[[bridges.ports]]\nport = 1\ninterface = \"a-very-long-name0\"\nbackend = \"memory\"\n").unwrap();
    assert_eq!(
        c.bridges[0].ports[0].kind,
        PortKind::Interface {
            name: "a-very-long-name0".into(),
            backend: Backend::Memory
        }
    );
    assert_eq!(
        port("port = 1\ninterface = \"e\"\npcap_read = \"x.pcap\""),
        "fulmar.toml:6:13: bridges[0].ports[0].pcap_read: pcap_read is only for backend = \"pcap\""
    );
    assert_eq!(
        port("port = 1\ninterface = \"e\"\nbackend = \"pcap\""),
        "fulmar.toml:6:11: bridges[0].ports[0].backend: a pcap port needs pcap_read, pcap_write or both"
    );
    assert_eq!(
        port("port = 1\ninterface = \"e\"\nbackend = \"pcap\"\npcap_read = \"in.pcap\"\npcap_rate = 0"),
        "fulmar.toml:8:13: bridges[0].ports[0].pcap_rate: pcap_rate 0 is not valid (1..=1000000000 packets per second, or \"max\")"
    );
    assert_eq!(
        port("port = 1\ninterface = \"e\"\nbackend = \"pcap\"\npcap_read = \"in.pcap\"\npcap_rate = \"fast\""),
        "fulmar.toml:8:13: bridges[0].ports[0].pcap_rate: pcap_rate \"fast\" is not valid (packets per second, or \"max\")"
    );
    assert_eq!(
        port("port = 1\nbackend = \"patch\"\ninterface = \"e\""),
        "fulmar.toml:6:13: bridges[0].ports[0].interface: a patch port has no interface (its peer is given in [[patch_links]])"
    );
}

#[test]
fn pcap_ports_resolve_paths_against_the_config_directory() {
    let text = "[[bridges]]\nname = \"b\"\n[[bridges.ports]]\nport = 1\ninterface = \"in\"\nbackend = \"pcap\"\npcap_read = \"cap/in.pcap\"\npcap_rate = 1000\n[[bridges.ports]]\nport = 2\ninterface = \"out\"\nbackend = \"pcap\"\npcap_write = \"/abs/out.pcap\"\n";
    let c = Config::from_str_for(text, "/etc/fulmar/f.toml", HOST).unwrap();
    assert_eq!(
        c.bridges[0].ports[0].kind,
        PortKind::Interface {
            name: "in".into(),
            backend: Backend::Pcap(PcapBackend {
                read: Some("/etc/fulmar/cap/in.pcap".into()),
                write: None,
                rate: PcapRate::Pps(1000)
            })
        }
    );
    assert_eq!(
        c.bridges[0].ports[1].kind,
        PortKind::Interface {
            name: "out".into(),
            backend: Backend::Pcap(PcapBackend {
                read: None,
                write: Some("/abs/out.pcap".into()),
                rate: PcapRate::Max
            })
        }
    );
    // Two ports may not write one file.
    let text = "[[bridges]]\nname = \"b\"\n[[bridges.ports]]\nport = 1\ninterface = \"a\"\nbackend = \"pcap\"\npcap_write = \"o.pcap\"\n[[bridges.ports]]\nport = 2\ninterface = \"b\"\nbackend = \"pcap\"\npcap_write = \"o.pcap\"\n";
    assert_eq!(
        error(text),
        "fulmar.toml:12:14: bridges[0].ports[1].pcap_write: o.pcap is already written by bridges[0].ports[0]"
    );
}

#[test]
fn duplicate_ports_and_interfaces() {
    let text = format!(
        "{}[[bridges.ports]]\nport = 1\ninterface = \"eth1\"\n",
        one_bridge("")
    );
    assert_eq!(
        errors(&text),
        vec!["fulmar.toml:8:8: bridges[0].ports[1].port: port number 1 is already used by bridges[0].ports[0]"]
    );
    let text = format!(
        "{}[[bridges]]\nname = \"br1\"\n[[bridges.ports]]\nport = 7\ninterface = \"eth0\"\n",
        one_bridge("")
    );
    assert_eq!(
        errors(&text),
        vec!["fulmar.toml:11:13: bridges[1].ports[0].interface: interface \"eth0\" is already used by bridges[0].ports[0]"]
    );
}

const TWO_BRIDGES: &str = "[[bridges]]\nname = \"a\"\n[[bridges.ports]]\nport = 1\ninterface = \"e1\"\n[[bridges.ports]]\nport = 9\nbackend = \"patch\"\n[[bridges]]\nname = \"b\"\n[[bridges.ports]]\nport = 1\ninterface = \"e2\"\n[[bridges.ports]]\nport = 9\nbackend = \"patch\"\n";

#[test]
fn patch_links() {
    let c = load(&format!(
        "{TWO_BRIDGES}[[patch_links]]\na = \"a:9\"\nb = \"b:9\"\n"
    ))
    .unwrap();
    assert_eq!(
        c.patch_links,
        vec![PatchLink {
            a: ("a".into(), 9),
            b: ("b".into(), 9)
        }]
    );
    assert_eq!(
        c.bridges[0].port(9).map(|p| &p.kind),
        Some(&PortKind::Patch {
            peer_bridge: "b".into(),
            peer_port: 9
        })
    );
    assert_eq!(
        c.bridges[1].port(9).map(|p| &p.kind),
        Some(&PortKind::Patch {
            peer_bridge: "a".into(),
            peer_port: 9
        })
    );
    assert_eq!(c.interfaces().len(), 2, "patch ports have no interface");

    let link = |a: &str, b: &str| {
        errors(&format!(
            "{TWO_BRIDGES}[[patch_links]]\na = \"{a}\"\nb = \"{b}\"\n"
        ))
    };
    // Line 18 is `a = ...`, 19 is `b = ...`. A failed end leaves the other
    // end's patch port unlinked, which is reported too.
    assert_eq!(
        link("c:9", "b:9"),
        vec![
            "fulmar.toml:18:5: patch_links[0].a: there is no bridge \"c\"",
            "fulmar.toml:7:8: bridges[0].ports[1].backend: patch port 9 is not in any [[patch_links]] entry",
        ]
    );
    assert_eq!(
        link("a:9", "b:8"),
        vec![
            "fulmar.toml:19:5: patch_links[0].b: bridge \"b\" has no port 8",
            "fulmar.toml:15:8: bridges[1].ports[1].backend: patch port 9 is not in any [[patch_links]] entry",
        ]
    );
    assert_eq!(
        link("a:9", "b:1"),
        vec![
            "fulmar.toml:19:5: patch_links[0].b: port 1 of bridge \"b\" is not a patch port (bridges[1].ports[0] has an interface)",
            "fulmar.toml:15:8: bridges[1].ports[1].backend: patch port 9 is not in any [[patch_links]] entry",
        ]
    );
    assert_eq!(
        link("a9", "b:9")[0],
        "fulmar.toml:18:5: patch_links[0].a: \"a9\" is not BRIDGE:PORT"
    );
    assert_eq!(
        link("a:x", "b:9")[0],
        "fulmar.toml:18:5: patch_links[0].a: \"x\" is not a port number"
    );
    // Both ends on one bridge.
    let text = "[[bridges]]\nname = \"a\"\n[[bridges.ports]]\nport = 1\nbackend = \"patch\"\n[[bridges.ports]]\nport = 2\nbackend = \"patch\"\n[[patch_links]]\na = \"a:1\"\nb = \"a:2\"\n";
    assert_eq!(
        errors(text),
        vec!["fulmar.toml:11:5: patch_links[0].b: a patch link joins two different bridges; both ends are on \"a\""]
    );
    // A port linked twice.
    let text = format!(
        "{TWO_BRIDGES}[[patch_links]]\na = \"a:9\"\nb = \"b:9\"\n[[patch_links]]\na = \"a:9\"\nb = \"b:9\"\n"
    );
    assert_eq!(
        errors(&text),
        vec![
            "fulmar.toml:21:5: patch_links[1].a: port 9 of bridge \"a\" is already linked by patch_links[0].a",
            "fulmar.toml:22:5: patch_links[1].b: port 9 of bridge \"b\" is already linked by patch_links[0].b",
        ]
    );
    // No link at all.
    assert_eq!(
        errors(TWO_BRIDGES),
        vec![
            "fulmar.toml:7:8: bridges[0].ports[1].backend: patch port 9 is not in any [[patch_links]] entry",
            "fulmar.toml:15:8: bridges[1].ports[1].backend: patch port 9 is not in any [[patch_links]] entry",
        ]
    );
}

#[test]
fn controllers() {
    let ctl = |body: &str| errors(&one_bridge(&format!("[[bridges.controllers]]\n{body}")));
    assert_eq!(
        ctl("target = \"udp:1.2.3.4\""),
        vec!["fulmar.toml:4:10: bridges[0].controllers[0].target: controller target \"udp:1.2.3.4\": unknown type \"udp\" (expected tcp, tls, ptcp or ptls)"]
    );
    assert_eq!(
        ctl("listen = \"tcp:ctl.example:6653\""),
        vec!["fulmar.toml:4:10: bridges[0].controllers[0].listen: listener \"tcp:ctl.example:6653\": \"ctl.example\" is not an IP address to listen on"]
    );
    assert_eq!(
        ctl("target = \"tcp:1.2.3.4\"\nlisten = \"ptcp:\""),
        vec!["fulmar.toml:5:10: bridges[0].controllers[0].listen: give either target or listen, not both"]
    );
    assert_eq!(
        ctl("echo_interval_ms = 1000"),
        vec!["fulmar.toml:3:1: bridges[0].controllers[0]: a controller needs target = \"tcp:HOST:PORT\" (or ptcp:, tls:, ptls:) or listen = \"tcp:ADDR:PORT\""]
    );
    assert_eq!(
        ctl("target = \"tcp:1.2.3.4\"\necho_interval_ms = 50"),
        vec!["fulmar.toml:5:20: bridges[0].controllers[0].echo_interval_ms: echo_interval_ms 50 is not valid (100..=3600000)"]
    );
    assert_eq!(
        ctl("target = \"tcp:1.2.3.4\"\necho_interval_ms = 20000"),
        vec!["fulmar.toml:5:20: bridges[0].controllers[0].dead_peer_timeout_ms: dead_peer_timeout_ms 15000 must be more than echo_interval_ms 20000"]
    );
    assert_eq!(
        ctl("target = \"tcp:1.2.3.4\"\nbackoff_min_ms = 100\nbackoff_max_ms = 50"),
        vec!["fulmar.toml:6:18: bridges[0].controllers[0].backoff_max_ms: backoff_max_ms 50 is less than backoff_min_ms 100"]
    );
    assert_eq!(
        ctl("target = \"tls:1.2.3.4\""),
        vec!["fulmar.toml:4:10: bridges[0].controllers[0]: tls:1.2.3.4:6653 needs a [tls] section (private_key, certificate, ca_cert)"]
    );
    assert_eq!(
        ctl("target = \"tcp:1.2.3.4:6653\"\n[[bridges.controllers]]\ntarget = \"tcp:1.2.3.4\""),
        vec!["fulmar.toml:6:10: bridges[0].controllers[1]: controller tcp:1.2.3.4:6653 is already given as bridges[0].controllers[0]"]
    );
    // One listening address for two bridges.
    let text = "[[bridges]]\nname = \"a\"\ncontrollers = [{ target = \"ptcp:6653\" }]\n[[bridges]]\nname = \"b\"\ncontrollers = [{ listen = \"tcp:0.0.0.0:6653\" }]\n";
    assert_eq!(
        errors(text),
        vec!["fulmar.toml:6:27: bridges[1].controllers[0]: ptcp:6653:0.0.0.0 is already listened on by bridges[0].controllers[0]"]
    );
    // The wildcard address overlaps every address of its family.
    let text = "[[bridges]]\nname = \"a\"\ncontrollers = [{ target = \"ptcp:6653:10.0.0.1\" }, { target = \"ptcp:6653:[::]\" }]\n[[bridges]]\nname = \"b\"\ncontrollers = [{ listen = \"tcp:0.0.0.0:6653\" }, { listen = \"tcp:10.0.0.1:6654\" }]\n";
    assert_eq!(
        errors(text),
        vec!["fulmar.toml:6:27: bridges[1].controllers[0]: ptcp:6653:0.0.0.0 is already listened on by bridges[0].controllers[0]"]
    );
    // A listener with a backoff: a warning.
    assert_eq!(
        warnings(&one_bridge("[[bridges.controllers]]\ntarget = \"ptcp:6653\"\nbackoff_min_ms = 10")),
        vec!["fulmar.toml:5:18: bridges[0].controllers[0]: reconnect backoff does not apply to a listener"]
    );
    // TLS with its files, relative to the config file.
    let text = format!(
        "[tls]\nprivate_key = \"k.pem\"\ncertificate = \"c.pem\"\nca_cert = \"/ca.pem\"\n{}",
        one_bridge("[[bridges.controllers]]\ntarget = \"tls:[2001:db8::1]:6653\"\ndead_peer_timeout_ms = 6000\n[[bridges.controllers]]\nlisten = \"ptls:6653\"")
    );
    let c = Config::from_str_for(&text, "/etc/fulmar/f.toml", HOST).unwrap();
    assert_eq!(
        c.tls,
        Some(TlsFiles {
            private_key: "/etc/fulmar/k.pem".into(),
            certificate: "/etc/fulmar/c.pem".into(),
            ca_cert: "/ca.pem".into()
        })
    );
    let cs = &c.bridges[0].controllers;
    assert_eq!(cs[0].target.to_string(), "tls:[2001:db8::1]:6653");
    assert_eq!(cs[0].dead_peer_timeout_ms, 6000);
    assert_eq!(cs[1].target.to_string(), "ptls:6653:0.0.0.0");
    assert_eq!(
        error("[tls]\nprivate_key = \"\"\ncertificate = \"c\"\nca_cert = \"a\"\n"),
        "fulmar.toml:2:15: tls.private_key: the path is empty"
    );
}

#[test]
fn dataplane_threads_and_cores() {
    let dp = |body: &str| errors(&format!("[dataplane]\n{body}\n"));
    assert_eq!(
        dp("mode = \"pipeline\""),
        vec!["fulmar.toml:2:8: dataplane.mode: mode \"pipeline\" is not valid (run-to-completion or rx-worker-tx)"]
    );
    assert_eq!(
        dp("rx_threads = 2"),
        vec!["fulmar.toml:2:14: dataplane.rx_threads: rx_threads is only for mode = \"rx-worker-tx\""]
    );
    assert_eq!(
        dp("tx_cores = [1]"),
        vec!["fulmar.toml:2:12: dataplane.tx_cores: tx_cores is only for mode = \"rx-worker-tx\""]
    );
    assert_eq!(
        dp("worker_threads = 0"),
        vec!["fulmar.toml:2:18: dataplane.worker_threads: worker_threads 0 is not valid (1..=256)"]
    );
    assert_eq!(
        dp("mode = \"rx-worker-tx\"\ntx_threads = 257"),
        vec!["fulmar.toml:3:14: dataplane.tx_threads: tx_threads 257 is not valid (1..=256)"]
    );
    assert_eq!(
        dp("worker_threads = 2\nworker_cores = [1]"),
        vec!["fulmar.toml:3:16: dataplane.worker_cores: 1 cores for 2 threads; give one core per thread"]
    );
    assert_eq!(
        dp("worker_threads = 2\nworker_cores = [1, 4]"),
        vec!["fulmar.toml:3:20: dataplane.worker_cores[1]: core 4 does not exist (this machine has 4 CPUs: 0..=3)"]
    );
    assert_eq!(
        dp("worker_cores = [-1]"),
        vec!["fulmar.toml:2:17: dataplane.worker_cores[0]: core -1 does not exist (this machine has 4 CPUs: 0..=3)"]
    );
    // The CPU count is a parameter.
    let text = "[dataplane]\nworker_threads = 2\nworker_cores = [1, 4]\n";
    let c = Config::from_str_for(text, "f.toml", Host { cpus: 8 }).unwrap();
    assert_eq!(c.dataplane.worker_cores, Some(vec![1, 4]));

    let text = "[dataplane]\nmode = \"rx-worker-tx\"\nrx_threads = 1\nworker_threads = 2\ntx_threads = 1\nrx_cores = [0]\nworker_cores = [1, 2]\ntx_cores = [2]\n";
    let c = load(text).unwrap();
    let d = &c.dataplane;
    assert_eq!((d.rx_threads, d.worker_threads, d.tx_threads), (1, 2, 1));
    assert_eq!(
        (&d.rx_cores, &d.worker_cores, &d.tx_cores),
        (&Some(vec![0]), &Some(vec![1, 2]), &Some(vec![2]))
    );
    assert_eq!(
        c.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        vec!["fulmar.toml:8:13: dataplane.tx_cores[0]: core 2 is also given to dataplane.worker_cores[1]; the two threads will share it"]
    );
}

#[test]
fn dataplane_bursts_flush_rings() {
    let dp = |body: &str| errors(&format!("[dataplane]\n{body}\n"));
    for (v, col) in [("48", 11), ("0", 11), ("2048", 11), ("-32", 11)] {
        assert_eq!(
            dp(&format!("[dataplane.burst]\nrx_read = {v}")),
            vec![format!("fulmar.toml:3:{col}: dataplane.burst.rx_read: burst size {v} is not valid (a power of two, 1..=1024)")]
        );
    }
    assert_eq!(
        dp("[dataplane.burst]\ntx_write = 3\nworker_read = 5"),
        vec![
            "fulmar.toml:4:15: dataplane.burst.worker_read: burst size 5 is not valid (a power of two, 1..=1024)",
            "fulmar.toml:3:12: dataplane.burst.tx_write: burst size 3 is not valid (a power of two, 1..=1024)",
        ]
    );
    let c = load("[dataplane.burst]\nrx_read = 1\nrx_write = 2\nworker_read = 64\nworker_write = 128\ntx_read = 512\ntx_write = 1024\n").unwrap();
    assert_eq!(
        c.dataplane.burst,
        BurstSizes {
            rx_read: 1,
            rx_write: 2,
            worker_read: 64,
            worker_write: 128,
            tx_read: 512,
            tx_write: 1024
        }
    );
    assert_eq!(
        dp("flush_idle_us = 1001"),
        vec![
            "fulmar.toml:2:17: dataplane.flush_idle_us: flush_idle_us 1001 is not valid (0..=1000)"
        ]
    );
    assert_eq!(
        dp("flush_idle_us = 200"),
        vec!["fulmar.toml:2:17: dataplane.max_batch_wait_us: max_batch_wait_us 0 is less than flush_idle_us 200"]
    );
    assert_eq!(
        dp("max_batch_wait_us = 10001"),
        vec!["fulmar.toml:2:21: dataplane.max_batch_wait_us: max_batch_wait_us 10001 is not valid (0..=10000)"]
    );
    let c = load("[dataplane]\nflush_idle_us = 20\nmax_batch_wait_us = 50\n").unwrap();
    assert_eq!(
        c.dataplane.flush,
        FlushPolicy {
            idle: Duration::from_micros(20),
            max_wait: Duration::from_micros(50)
        }
    );
    assert_eq!(
        dp("rx_ring_size = 100"),
        vec!["fulmar.toml:2:16: dataplane.rx_ring_size: rx_ring_size 100 is not valid (a power of two, 64..=65536)"]
    );
    assert_eq!(
        dp("tx_ring_size = 131072"),
        vec!["fulmar.toml:2:16: dataplane.tx_ring_size: tx_ring_size 131072 is not valid (a power of two, 64..=65536)"]
    );
    assert_eq!(
        dp("tx_ring_size = 64\n[dataplane.burst]\nworker_write = 128"),
        vec!["fulmar.toml:2:16: dataplane.tx_ring_size: tx_ring_size 64 is smaller than the bursts written to and read from the ring (128)"]
    );
}

#[test]
fn dispatch_and_priority_classes() {
    let piped =
        |body: &str| format!("[dataplane]\nmode = \"rx-worker-tx\"\nworker_threads = 2\n{body}\n");
    let text = piped("dispatch = \"priority-class\"\ndispatch_fallback = \"l2\"\n[[dataplane.priority_class]]\nip_dscp = 46\nworker = 0\n[[dataplane.priority_class]]\nudp_dst = 5060\nip_proto = 17\nworker = 1\n");
    let c = load(&text).unwrap();
    assert!(c.warnings.is_empty());
    assert_eq!(
        c.dataplane.dispatch,
        Dispatch {
            key: DispatchKey::PriorityClass,
            fallback: DispatchKey::L2,
            rules: vec![
                PriorityClassRule {
                    ip_dscp: Some(46),
                    worker: 0,
                    ..Default::default()
                },
                PriorityClassRule {
                    udp_dst: Some(5060),
                    ip_proto: Some(17),
                    worker: 1,
                    ..Default::default()
                },
            ]
        }
    );
    for (k, v) in [
        ("port", DispatchKey::Port),
        ("l2", DispatchKey::L2),
        ("5tuple", DispatchKey::FiveTuple),
    ] {
        let c = load(&piped(&format!("dispatch = \"{k}\""))).unwrap();
        assert_eq!(c.dataplane.dispatch.key, v);
    }
    let e = |body: &str| errors(&piped(body));
    assert_eq!(
        e("dispatch = \"hash\""),
        vec!["fulmar.toml:4:12: dataplane.dispatch: dispatch key \"hash\" is not valid (port, l2, 5tuple or priority-class)"]
    );
    assert_eq!(
        e("dispatch = \"priority-class\""),
        vec!["fulmar.toml:4:12: dataplane.dispatch: priority-class dispatch needs at least one [[dataplane.priority_class]] rule"]
    );
    assert_eq!(
        e("dispatch = \"port\"\n[[dataplane.priority_class]]\nip_dscp = 1\nworker = 0"),
        vec!["fulmar.toml:5:1: dataplane.priority_class[0]: priority_class rules need dispatch = \"priority-class\""]
    );
    assert_eq!(
        e("dispatch = \"port\"\ndispatch_fallback = \"l2\""),
        vec!["fulmar.toml:5:21: dataplane.dispatch_fallback: dispatch_fallback is only for dispatch = \"priority-class\""]
    );
    let rule = |body: &str| {
        e(&format!(
            "dispatch = \"priority-class\"\n[[dataplane.priority_class]]\n{body}"
        ))
    };
    assert_eq!(
        rule("ip_dscp = 46\nworker = 2"),
        vec!["fulmar.toml:7:10: dataplane.priority_class[0].worker: worker 2 is not valid (0..=1)"]
    );
    assert_eq!(
        rule("ip_dscp = 64\nworker = 0"),
        vec!["fulmar.toml:6:11: dataplane.priority_class[0].ip_dscp: ip_dscp 64 is not valid (0..=63)"]
    );
    assert_eq!(
        rule("vlan_pcp = 8\nworker = 0"),
        vec!["fulmar.toml:6:12: dataplane.priority_class[0].vlan_pcp: vlan_pcp 8 is not valid (0..=7)"]
    );
    assert_eq!(
        rule("worker = 0"),
        vec!["fulmar.toml:5:1: dataplane.priority_class[0]: a rule needs at least one of ip_dscp, vlan_pcp, ip_proto, udp_src, udp_dst, tcp_src, tcp_dst"]
    );
    assert_eq!(
        rule("udp_dst = 1\ntcp_dst = 2\nworker = 0"),
        vec!["fulmar.toml:5:1: dataplane.priority_class[0]: a rule cannot match both udp and tcp ports"]
    );
    assert_eq!(
        rule("tcp_dst = 179\nip_proto = 17\nworker = 0"),
        vec!["fulmar.toml:5:1: dataplane.priority_class[0]: ip_proto 17 contradicts the rule's tcp ports"]
    );
    assert_eq!(
        e("dispatch = \"priority-class\"\ndispatch_fallback = \"priority-class\"\n[[dataplane.priority_class]]\nip_dscp = 1\nworker = 0"),
        vec!["fulmar.toml:5:21: dataplane.dispatch_fallback: the fallback of priority-class dispatch cannot be priority-class"]
    );
    // In run-to-completion there is no RX dispatch: a warning.
    assert_eq!(
        warnings("[dataplane]\ndispatch = \"port\"\n"),
        vec!["fulmar.toml:2:12: dataplane.dispatch: dispatch applies only in mode = \"rx-worker-tx\"; ignored"]
    );
}

#[test]
fn inline_flows_name_the_toml_line_and_column() {
    let text = one_bridge("flows = [\n  \"in_port=1,actions=output:2\",\n  \"in_port=1,eth_dts=00:00:00:00:00:01,actions=drop\",\n]");
    // The string starts at column 3 of line 5; `eth_dts` is at offset 10
    // in it, so column 3 + 1 (quote) + 10.
    assert_eq!(
        errors(&text),
        vec!["fulmar.toml:5:14: bridges[0].flows[1]: unknown field \"eth_dts\""]
    );
    // A literal string: the same.
    let text = one_bridge("flows = ['in_port=1,eth_dts=1,actions=drop']");
    assert_eq!(
        errors(&text),
        vec!["fulmar.toml:3:21: bridges[0].flows[0]: unknown field \"eth_dts\""]
    );
    // With an escape the offsets no longer line up: the string's column.
    let text = one_bridge("flows = [\"in_port=1,\\u0065th_dts=1,actions=drop\"]");
    assert_eq!(
        errors(&text),
        vec!["fulmar.toml:3:10: bridges[0].flows[0]: unknown field \"eth_dts\""]
    );
    let c = load(&one_bridge("flows = [\n  \"in_port=1,actions=output:1\",\n  \" table=1, priority=5,actions=drop \",\n]")).unwrap();
    let f = &c.bridges[0].flows;
    assert_eq!(f.len(), 2);
    assert_eq!(f[1].text, "table=1, priority=5,actions=drop");
    assert_eq!(
        f[1].flow_mod().unwrap(),
        flowtext::parse_flow("table=1,priority=5,actions=drop").unwrap()
    );
    assert_eq!(
        f[1].source,
        Source {
            file: std::path::Path::new("fulmar.toml").into(),
            line: 5,
            inline: true
        }
    );
}

#[test]
fn flow_semantic_errors_and_warnings() {
    let flows = |list: &str| one_bridge(&format!("n_tables = 4\nflows = [{list}]"));
    assert_eq!(
        errors(&flows("\"delete in_port=1\"")),
        vec!["fulmar.toml:4:10: bridges[0].flows[0]: a static flow must be an add"]
    );
    assert_eq!(
        errors(&flows("\"table=4,actions=drop\"")),
        vec!["fulmar.toml:4:10: bridges[0].flows[0]: table 4 does not exist (n_tables = 4)"]
    );
    // flowtext refuses a backward goto_table itself (as ovs-ofctl does),
    // pointing at the table number.
    assert_eq!(
        errors(&flows("\"table=2,actions=goto_table:1\"")),
        vec!["fulmar.toml:4:38: bridges[0].flows[0]: goto_table:1 must go to a table after 2"]
    );
    assert_eq!(
        errors(&flows("\"table=2,actions=goto_table:9\"")),
        vec!["fulmar.toml:4:10: bridges[0].flows[0]: goto_table:9: table 9 does not exist (n_tables = 4)"]
    );
    // References a controller may satisfy later: warnings only.
    let w = warnings(&flows("\"priority=1,actions=group:7\", \"priority=2,actions=meter:3,output:1\", \"priority=3,actions=output:5,output:LOCAL,output:CONTROLLER\""));
    assert_eq!(
        w,
        vec![
            "fulmar.toml:4:10: bridges[0].flows[0]: group 7 is not defined in this file (a controller must add it)",
            "fulmar.toml:4:40: bridges[0].flows[1]: meter 3 is not defined in this file (a controller must add it)",
            "fulmar.toml:4:79: bridges[0].flows[2]: output:5: the bridge has no port 5",
        ]
    );
    assert_eq!(
        warnings(&flows(
            "\"in_port=3,actions=drop\", \"in_port=LOCAL,actions=drop\""
        )),
        vec!["fulmar.toml:4:10: bridges[0].flows[0]: in_port=3: the bridge has no port 3"]
    );
    // Defined statically: no warnings.
    let text = one_bridge("groups = [\"group_id=7,type=all,bucket=output:1\"]\nmeters = [\"meter=3,kbps,bands=type=drop,rate=100\"]\nflows = [\"priority=1,actions=group:7\", \"priority=2,actions=meter:3,output:1\"]");
    let c = load(&text).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.bridges[0].groups[0].group_mod.group_id, 7);
    assert_eq!(c.bridges[0].meters[0].meter_mod.meter_id, 3);
    // A group bucket naming an undefined group.
    assert_eq!(
        warnings(&one_bridge("groups = [\"group_id=1,type=indirect,bucket=group:2\"]")),
        vec!["fulmar.toml:3:11: bridges[0].groups[0]: group 2 is not defined in this file (a controller must add it)"]
    );
    // The same flow twice.
    assert_eq!(
        warnings(&flows("\"priority=5,in_port=1,actions=drop\", \"priority=5,in_port=1,actions=output:1\"")),
        vec!["fulmar.toml:4:47: bridges[0].flows[1]: this flow has the same table, priority and match as the one at fulmar.toml:4, and replaces it"]
    );
    assert_eq!(
        errors(&one_bridge(
            "groups = [\"group_id=1,type=all\", \"group_id=1,type=all\"]"
        )),
        vec!["fulmar.toml:3:34: bridges[0].groups[1]: group 1 is already defined at fulmar.toml:3"]
    );
    assert_eq!(
        errors(&one_bridge("meters = [\"meter=1,kbps,bands=type=drop,rate=1\", \"meter=1,pktps,bands=type=drop,rate=1\"]")),
        vec!["fulmar.toml:3:50: bridges[0].meters[1]: meter 1 is already defined at fulmar.toml:3"]
    );
    assert_eq!(
        errors(&one_bridge("groups = [\"delete group_id=1\"]")),
        vec!["fulmar.toml:3:11: bridges[0].groups[0]: a static group must be an add"]
    );
    assert_eq!(
        errors(&one_bridge("groups = [\"group_id=1,type=bogus\"]")),
        vec!["fulmar.toml:3:28: bridges[0].groups[0]: unknown group type \"bogus\""]
    );
}

/// A flows file long enough to be parsed on several threads keeps its
/// order, names each error's line, finds a flow that replaces an earlier
/// one (the duplicate check keys flows by a hash), and keeps the first
/// hundred warnings of many with a count of the rest.
#[test]
fn a_long_flows_file_keeps_order_lines_duplicates_and_counts_warnings() {
    let scratch = tmpdir("long-flows");
    let dir = scratch.path();
    let n = 70_000; // several parse blocks (16,384 lines)
    let mut text = String::from("# generated\n");
    for i in 0..n {
        // Port 7 is not on the bridge: one warning per flow.
        text.push_str(&format!(
            "priority=5,in_port=1,dl_vlan={},actions=output:7\n",
            i % 40 + 1
        ));
    }
    std::fs::write(dir.join("long.flows"), &text).unwrap();
    let origin = dir.join("fulmar.toml");
    let c =
        Config::from_str_for(&one_bridge("flows_file = \"long.flows\""), &origin, HOST).unwrap();
    let b = &c.bridges[0];
    assert!(b.flows.is_empty());
    assert_eq!(b.flows_file.as_ref().unwrap().flows, n);
    let flows = file_flows(b);
    assert_eq!(flows.len(), n);
    for (i, (line, text, fm)) in flows.iter().enumerate() {
        assert_eq!(*line, i + 2);
        assert!(text.contains(&format!("dl_vlan={},", i % 40 + 1)), "{text}");
        if i % 997 == 0 {
            assert_eq!(*fm, flowtext::parse_flow(text).unwrap());
        }
    }
    // n "no port 7" warnings and n - 40 "replaces" warnings: 100 kept,
    // then the count of the others.
    assert_eq!(c.warnings.len(), 101, "{:#?}", &c.warnings[..3]);
    let last = c.warnings.last().unwrap().to_string();
    let expected = 2 * n - 40 - 100;
    assert!(
        last.contains(&format!("{expected} more warning(s) not listed")),
        "{last}"
    );
    let replaces: Vec<_> = c
        .warnings
        .iter()
        .filter(|w| w.message.contains("replaces it"))
        .collect();
    assert!(!replaces.is_empty());
    // Flow 41 (line 42) repeats flow 1 (line 2).
    assert!(
        replaces[0]
            .message
            .contains(&format!("{}:2,", dir.join("long.flows").display())),
        "{}",
        replaces[0]
    );
    assert_eq!(replaces[0].line, Some(42));

    // Errors in both halves are all reported, at their lines, in order.
    let mut bad: Vec<&str> = text.lines().collect();
    bad[10] = "priority=5,in_port=1,actions=frobnicate";
    bad[69_999] = "table=0,actions=drop,eth_dts=1";
    std::fs::write(dir.join("bad.flows"), bad.join("\n")).unwrap();
    let e =
        Config::from_str_for(&one_bridge("flows_file = \"bad.flows\""), &origin, HOST).unwrap_err();
    let lines: Vec<Option<usize>> = e.errors.iter().map(|d| d.line).collect();
    assert_eq!(lines, vec![Some(11), Some(70_000)], "{}", e);
}

#[test]
fn flows_file_errors_name_that_file_and_line() {
    let scratch = tmpdir("flows-file");
    let dir = scratch.path();
    std::fs::write(
        dir.join("br0.flows"),
        "# comment\n\ntable=0,priority=1,actions=output:1\n  in_port=1,eth_dts=1,actions=drop\ntable=0,actions=drop\nin_port=1,actions=frobnicate\n",
    )
    .unwrap();
    let origin = dir.join("fulmar.toml");
    let text = one_bridge("flows_file = \"br0.flows\"");
    let e = Config::from_str_for(&text, &origin, HOST).unwrap_err();
    let flows = dir.join("br0.flows");
    let got: Vec<String> = e.errors.iter().map(|d| d.to_string()).collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    // `eth_dts` at byte 12 of line 4: column 13.
    assert_eq!(
        got[0],
        format!(
            "{}:4:13: bridges[0].flows_file: unknown field \"eth_dts\"",
            flows.display()
        )
    );
    assert!(
        got[1].starts_with(&format!("{}:6:", flows.display())),
        "{}",
        got[1]
    );
    assert_eq!(e.errors[1].file, flows);
    assert_eq!(e.errors[1].field, "bridges[0].flows_file");

    // A good file: flows after the inline ones, with their file and line.
    std::fs::write(
        dir.join("ok.flows"),
        "\n# c\ntable=0,priority=1,actions=output:1\ntable=0,priority=0,actions=drop\n",
    )
    .unwrap();
    let text = one_bridge("flows = [\"priority=9,actions=drop\"]\nflows_file = \"ok.flows\"");
    let c = Config::from_str_for(&text, &origin, HOST).unwrap();
    let b = &c.bridges[0];
    let file = b.flows_file.as_ref().unwrap();
    assert_eq!(file.path, dir.join("ok.flows"));
    assert_eq!(file.flows, 2);
    assert_eq!(b.flows.len(), 1);
    assert_eq!(
        b.flows[0].source,
        Source {
            file: origin.clone().into(),
            line: 3,
            inline: true
        }
    );
    let lines: Vec<(usize, String)> = file_flows(b).into_iter().map(|(l, t, _)| (l, t)).collect();
    assert_eq!(
        lines,
        vec![
            (3, "table=0,priority=1,actions=output:1".to_string()),
            (4, "table=0,priority=0,actions=drop".to_string())
        ]
    );

    // A semantic error in a file names the file and line.
    std::fs::write(
        dir.join("t.flows"),
        "table=0,actions=drop\ntable=9,actions=drop\n",
    )
    .unwrap();
    let text = one_bridge("n_tables = 2\nflows_file = \"t.flows\"");
    let e = Config::from_str_for(&text, &origin, HOST).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: bridges[0].flows_file: table 9 does not exist (n_tables = 2)",
            dir.join("t.flows").display()
        )
    );

    // A missing file.
    let text = one_bridge("flows_file = \"none.flows\"");
    let e = Config::from_str_for(&text, &origin, HOST).unwrap_err();
    assert_eq!(e.errors.len(), 1);
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "{}:3:14: bridges[0].flows_file: cannot read {}: ",
            origin.display(),
            dir.join("none.flows").display()
        )),
        "{msg}"
    );

    // Groups and meters files too.
    std::fs::write(dir.join("g"), "group_id=1,type=all\ngroup_id=2,type=nope\n").unwrap();
    std::fs::write(dir.join("m"), "meter=1,kbps,bands=type=drop,rate=5\n").unwrap();
    let text = one_bridge("groups_file = \"g\"\nmeters_file = \"m\"");
    let e = Config::from_str_for(&text, &origin, HOST).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2:17: bridges[0].groups_file: unknown group type \"nope\"",
            dir.join("g").display()
        )
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_error_is_reported_and_nothing_is_returned() {
    let text = "[dataplane]\nworker_threads = 0\n[dataplane.burst]\nrx_read = 3\n[[bridges]]\nname = \"b\"\nn_tables = 0\nflows = [\"bogus\"]\n[[bridges.ports]]\nport = 0\ninterface = \"e\"\n";
    let e = errors(text);
    assert_eq!(
        e,
        vec![
            "fulmar.toml:7:12: bridges[0].n_tables: n_tables 0 is not valid (1..=254)",
            "fulmar.toml:10:8: bridges[0].ports[0].port: port number 0 is not valid (1..=4294967040)",
            "fulmar.toml:8:11: bridges[0].flows[0]: unknown field \"bogus\"",
            "fulmar.toml:2:18: dataplane.worker_threads: worker_threads 0 is not valid (1..=256)",
            "fulmar.toml:4:11: dataplane.burst.rx_read: burst size 3 is not valid (a power of two, 1..=1024)",
        ]
    );
}

#[test]
fn gateway_example_loads() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gateway.toml");
    let c = Config::load_for(path, HOST).unwrap();
    assert!(c.warnings.is_empty(), "{:#?}", c.warnings);
    assert_eq!(c.bridges.len(), 2);
    let (gw1, gw2) = (&c.bridges[0], &c.bridges[1]);
    assert_eq!((gw1.name.as_str(), gw1.dpid), ("gw1", 1));
    assert_eq!((gw2.name.as_str(), gw2.dpid), ("gw2", 2));
    assert_eq!(
        c.patch_links,
        vec![PatchLink {
            a: ("gw1".into(), 2),
            b: ("gw2".into(), 2)
        }]
    );
    assert_eq!(
        gw1.port(2).map(|p| &p.kind),
        Some(&PortKind::Patch {
            peer_bridge: "gw2".into(),
            peer_port: 2
        })
    );
    assert_eq!(gw1.flows.len(), 3);
    assert!(gw1.flows.iter().all(|f| f.source.inline));
    let push = flowtext::parse_flow(
        "table=0,priority=100,in_port=1,dl_vlan=10,actions=pop_vlan,push_mpls:0x8847,set_field:100->mpls_label,output:2",
    )
    .unwrap();
    assert_eq!(gw1.flows[0].flow_mod().unwrap(), push);
    assert!(gw2.flows.is_empty());
    let gw2_file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gateway-gw2.flows");
    assert_eq!(gw2.flows_file.as_ref().map(|f| &f.path), Some(&gw2_file));
    let flows = file_flows(gw2);
    assert_eq!(flows.len(), 3);
    assert_eq!(flows[0].0, 3);
    assert_eq!(
        c.interfaces(),
        vec![
            InterfaceRef {
                bridge: "gw1",
                port: 1,
                interface: "gw1-lan",
                backend: &Backend::AfPacket
            },
            InterfaceRef {
                bridge: "gw2",
                port: 1,
                interface: "gw2-lan",
                backend: &Backend::AfPacket
            },
        ]
    );
    let d = &c.dataplane;
    assert_eq!(d.mode, ThreadMode::RxWorkerTx);
    assert_eq!((d.rx_threads, d.worker_threads, d.tx_threads), (1, 2, 1));
    assert_eq!(d.dispatch.rules.len(), 1);
    assert_eq!(gw1.controllers[0].target.to_string(), "ptcp:6653:127.0.0.1");
}

#[test]
fn round_trip_through_toml() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gateway.toml");
    let c = Config::load_for(path, HOST).unwrap();
    let text = c.to_toml_string();
    let back = Config::from_str_for(&text, path, HOST).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(without_sources(back.clone()), without_sources(c.clone()));
    // The file's flows keep their file and line.
    assert_eq!(back.bridges[1].flows, c.bridges[1].flows);
    // A fixed point.
    assert_eq!(back.to_toml_string(), text);

    // Everything else the model holds.
    let text = "[tls]\nprivate_key = \"/k\"\ncertificate = \"/c\"\nca_cert = \"/a\"\n\
        [dataplane]\nmode = \"rx-worker-tx\"\nrx_threads = 2\nworker_threads = 3\ntx_threads = 1\n\
        rx_cores = [0, 1]\nworker_cores = [2, 3, 3]\ntx_cores = [0]\nflush_idle_us = 10\nmax_batch_wait_us = 500\n\
        rx_ring_size = 4096\ntx_ring_size = 64\ndispatch = \"priority-class\"\ndispatch_fallback = \"port\"\n\
        [dataplane.burst]\nrx_read = 64\nrx_write = 16\nworker_read = 8\nworker_write = 4\ntx_read = 2\ntx_write = 1\n\
        [[dataplane.priority_class]]\nvlan_pcp = 5\ntcp_dst = 179\nip_proto = 6\nworker = 2\n\
        [[bridges]]\nname = \"x\"\ndpid = \"aa:bb:cc:dd:ee:ff:00:11\"\nfail_mode = \"standalone\"\nn_tables = 3\nmiss_send_len = 0\nflow_table_capacity = 10\n\
        flows = [\"table=1,priority=7,ip,nw_dst=10.0.0.0/8,actions=output:1\"]\n\
        groups = [\"group_id=1,type=select,bucket=weight:5,output:1\"]\nmeters = [\"meter=2,kbps,bands=type=drop,rate=100\"]\n\
        [[bridges.ports]]\nport = 1\ninterface = \"in\"\nbackend = \"pcap\"\npcap_read = \"/in.pcap\"\npcap_write = \"/out.pcap\"\npcap_rate = 250\n\
        [[bridges.ports]]\nport = 4294967040\ninterface = \"xdp0\"\nbackend = \"afxdp\"\n\
        [[bridges.ports]]\nport = 3\ninterface = \"tap0\"\nbackend = \"tap\"\n\
        [[bridges.ports]]\nport = 4\nbackend = \"patch\"\n\
        [[bridges.controllers]]\ntarget = \"tls:ctl.example.net:6653\"\necho_interval_ms = 100\ndead_peer_timeout_ms = 101\nbackoff_min_ms = 1\nbackoff_max_ms = 1\n\
        [[bridges.controllers]]\nlisten = \"tcp:[::1]:0\"\n\
        [[bridges]]\nname = \"y\"\n[[bridges.ports]]\nport = 4\nbackend = \"patch\"\n\
        [[patch_links]]\na = \"x:4\"\nb = \"y:4\"\n";
    let c = load(text).unwrap_or_else(|e| panic!("{e}"));
    let out = c.to_toml_string();
    let back = load(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(without_sources(back.clone()), without_sources(c.clone()));
    assert_eq!(back.to_toml_string(), out);
    // The warnings (cores 3 and 0 twice) survive.
    assert_eq!(back.warnings.len(), c.warnings.len());
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
}

#[test]
fn from_flags_builds_one_bridge() {
    let scratch = tmpdir("flags");
    let dir = scratch.path();
    let flows = dir.join("f.flows");
    std::fs::write(
        &flows,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
    )
    .unwrap();
    let c = Config::from_flags_for(
        FlagArgs {
            interfaces: vec!["veth0".into(), "veth1".into()],
            flows_file: Some(flows.clone()),
            listen: vec!["tcp:127.0.0.1:6653".into()],
            controllers: vec!["tcp:192.0.2.1:6633".into()],
            dpid: Some(0xabc),
            io: Backend::AfXdp,
            workers: 2,
        },
        HOST,
    )
    .unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.bridges.len(), 1);
    let b = &c.bridges[0];
    assert_eq!((b.name.as_str(), b.dpid), ("br0", 0xabc));
    assert_eq!(
        c.interfaces()
            .iter()
            .map(|i| (i.port, i.interface, i.backend.clone()))
            .collect::<Vec<_>>(),
        vec![(1, "veth0", Backend::AfXdp), (2, "veth1", Backend::AfXdp)]
    );
    assert!(b.flows.is_empty());
    assert_eq!(b.flows_file.as_ref().map(|f| &f.path), Some(&flows));
    let lines: Vec<usize> = file_flows(b).iter().map(|f| f.0).collect();
    assert_eq!(lines, vec![1, 2]);
    assert_eq!(
        b.controllers
            .iter()
            .map(|c| c.target.to_string())
            .collect::<Vec<_>>(),
        vec!["tcp:192.0.2.1:6633", "ptcp:6653:127.0.0.1"]
    );
    assert_eq!(c.dataplane.mode, ThreadMode::RunToCompletion);
    assert_eq!(c.dataplane.worker_threads, 2);

    // Defaults: dpid 1, afpacket, no flows.
    let c = Config::from_flags_for(
        FlagArgs {
            interfaces: vec!["eth0".into()],
            workers: 1,
            ..Default::default()
        },
        HOST,
    )
    .unwrap();
    assert_eq!(c.bridges[0].dpid, 1);
    assert_eq!(c.interfaces()[0].backend, &Backend::AfPacket);

    // Validated as a file is; messages name the command line.
    let e = Config::from_flags_for(
        FlagArgs {
            interfaces: vec!["eth0".into(), "eth0".into()],
            controllers: vec!["1.2.3.4".into()],
            workers: 0,
            ..Default::default()
        },
        HOST,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "command line: bridges[0].controllers[0].target: controller target \"1.2.3.4\" has no type (tcp:, tls:, ptcp:, ptls:)\n\
         command line: bridges[0].ports[1].interface: interface \"eth0\" is already used by bridges[0].ports[0]\n\
         command line: dataplane.worker_threads: worker_threads 0 is not valid (1..=256)"
    );

    // A bad line in the flows file names that file and line.
    std::fs::write(
        &flows,
        "in_port=1,actions=output:2\n\nin_port=1,actions=output:xyz\n",
    )
    .unwrap();
    let e = Config::from_flags_for(
        FlagArgs {
            interfaces: vec!["eth0".into()],
            flows_file: Some(flows.clone()),
            workers: 1,
            ..Default::default()
        },
        HOST,
    )
    .unwrap_err();
    assert_eq!(e.errors.len(), 1);
    assert_eq!(e.errors[0].file, flows);
    assert_eq!(e.errors[0].line, Some(3));
    assert_eq!(e.errors[0].field, "bridges[0].flows_file");

    // pcap from the flags.
    let c = Config::from_flags_for(
        FlagArgs {
            interfaces: vec!["p0".into()],
            io: Backend::Pcap(PcapBackend {
                read: Some("/tmp/in.pcap".into()),
                write: None,
                rate: PcapRate::Pps(10),
            }),
            workers: 1,
            ..Default::default()
        },
        HOST,
    )
    .unwrap();
    assert_eq!(
        c.interfaces()[0].backend,
        &Backend::Pcap(PcapBackend {
            read: Some("/tmp/in.pcap".into()),
            write: None,
            rate: PcapRate::Pps(10)
        })
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn load_names_a_missing_file() {
    let e = Config::load_for("/nonexistent/fulmar.toml", HOST).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("/nonexistent/fulmar.toml: cannot read the configuration: "),
        "{msg}"
    );
}

#[test]
fn path_at_finds_the_deepest_key() {
    let text = "a = 1\n[[bridges]]\nname = \"x\"\n[[bridges.ports]]\nport = 1\n[[bridges]]\nname = \"y\"\nflows = [\"p\", \"q\"]\n";
    let at = |needle: &str| validate::path_at(text, text.find(needle).unwrap());
    assert_eq!(at("a ="), "a");
    assert_eq!(at("\"x\""), "bridges[0].name");
    assert_eq!(at("port ="), "bridges[0].ports[0].port");
    assert_eq!(at("\"y\""), "bridges[1].name");
    assert_eq!(at("\"q\""), "bridges[1].flows[1]");
    assert_eq!(validate::path_at("not toml [", 3), "");
}

#[test]
fn revalidate_checks_a_model_changed_in_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gateway.toml");
    let c = Config::load_for(path, HOST).unwrap();
    let again = c.revalidate(HOST).unwrap();
    assert_eq!(again, c, "unchanged: the same model, sources included");
    let mut changed = c.clone();
    changed.bridges[0].flows.remove(0);
    let again = changed.revalidate(HOST).unwrap();
    assert_eq!(again.bridges[0].flows, changed.bridges[0].flows);
    assert_eq!(
        again.bridges[0].flows[1].source,
        c.bridges[0].flows[2].source
    );

    let mut bad = c.clone();
    bad.bridges[1].ports[0].number = 0;
    bad.dataplane.burst.tx_read = 24;
    let e = bad.revalidate(HOST).unwrap_err();
    let got: Vec<(&str, &str)> = e
        .errors
        .iter()
        .map(|d| (d.field.as_str(), d.message.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "bridges[1].ports[0].port",
                "port number 0 is not valid (1..=4294967040)"
            ),
            (
                "dataplane.burst.tx_read",
                "burst size 24 is not valid (a power of two, 1..=1024)"
            ),
        ]
    );
    assert!(e
        .errors
        .iter()
        .all(|d| d.file == std::path::Path::new(MODEL) && d.line.is_none()));

    let mut dup = c;
    dup.bridges[1].name = "gw1".into();
    let e = dup.revalidate(HOST).unwrap_err();
    assert!(
        e.errors
            .iter()
            .any(|d| d.message == "bridge name \"gw1\" is already used by bridges[0]"),
        "{e}"
    );
}

mod no_panic {
    //! Whatever the text, loading returns a value or an error; it never
    //! panics (spans, columns and offsets into strings are all checked).
    use super::*;
    use proptest::prelude::*;

    const SEED: &str = include_str!("../examples/gateway.toml");

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn mutated_gateway(cut in 0..SEED.len(), len in 0usize..40, insert in "[\\[\\]\"'=,.:a-z0-9 \\n\\\\é{}#-]{0,12}") {
            let mut text = SEED.to_string();
            let start = (0..=cut).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            let end = (start + len).min(text.len());
            let end = (end..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
            text.replace_range(start..end, &insert);
            let origin = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gateway.toml");
            if let Ok(c) = Config::from_str_for(&text, origin, HOST) {
                // What loads also writes and loads back.
                let out = c.to_toml_string();
                prop_assert!(Config::from_str_for(&out, origin, HOST).is_ok(), "{}", out);
            }
        }

        #[test]
        fn arbitrary_text(text in "\\PC{0,200}") {
            let _ = load(&text);
        }

        #[test]
        fn arbitrary_flow_strings(flow in "\\PC{0,80}") {
            let text = one_bridge(&format!("flows = [{}]", toml_quote(&flow)));
            let _ = load(&text);
            let text = one_bridge(&format!("flows = ['{}']", flow.replace(['\'', '\n', '\r'], "")));
            let _ = load(&text);
        }
    }

    fn toml_quote(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

#[test]
fn dpdk_ports_eal_arguments_and_placement_load_and_round_trip() {
    let text = r#"
[dpdk]
eal_args = ["--no-huge", "-m", "256", "--no-pci"]

[dataplane]
mode = "rx-worker-tx"
rx_threads = 2
worker_threads = 1
tx_threads = 1
rx_cores = [0, 1]
worker_cores = [1]
tx_cores = [0]

[[bridges]]
name = "br0"

[[bridges.ports]]
port = 1
interface = "wan"
backend = "dpdk"
dpdk_devargs = "net_pcap0,rx_pcap=in.pcap,infinite_rx=1"
dpdk_rx_queues = 2
dpdk_rx_desc = 512
dpdk_mbufs = 65535
rx_queue_cores = [1, 0]
tx_core = 0

[[bridges.ports]]
port = 2
interface = "net_null0"
backend = "dpdk"
"#;
    let c = Config::from_str_for(text, "fulmar.toml", HOST).unwrap();
    assert_eq!(c.dpdk.eal_args, ["--no-huge", "-m", "256", "--no-pci"]);
    let PortKind::Interface {
        backend: Backend::Dpdk(d),
        ..
    } = &c.bridges[0].ports[0].kind
    else {
        panic!("not dpdk")
    };
    assert_eq!(d.devargs, "net_pcap0,rx_pcap=in.pcap,infinite_rx=1");
    assert_eq!(d.device_name(), "net_pcap0");
    assert_eq!(
        (d.rx_queues, d.rx_desc, d.tx_desc, d.mbufs),
        (Some(2), 512, 1024, 65535)
    );
    assert_eq!(
        (d.rx_queue_cores.clone(), d.tx_core),
        (Some(vec![1, 0]), Some(0))
    );
    let PortKind::Interface {
        backend: Backend::Dpdk(d2),
        ..
    } = &c.bridges[0].ports[1].kind
    else {
        panic!("not dpdk")
    };
    assert_eq!(
        d2,
        &DpdkBackend::new("net_null0"),
        "devargs default to the interface"
    );
    let again = Config::from_str_for(&c.to_toml_string(), "fulmar.toml", HOST).unwrap();
    assert_eq!(without_sources(again), without_sources(c));

    let policy = "[dataplane]\ncore_assign = \"minimum\"\n[[bridges]]\nname = \"b\"\n";
    let c = Config::from_str_for(policy, "fulmar.toml", HOST).unwrap();
    assert_eq!(c.dataplane.core_assign, Some(CoreAssign::Minimum));
    assert!(c.to_toml_string().contains("core_assign = \"minimum\""));
}

#[test]
fn dpdk_errors_name_the_field() {
    let port = |body: &str| {
        error(&format!(
            "[[bridges]]\nname = \"b\"\n[[bridges.ports]]\nport = 1\n{body}\n"
        ))
    };
    assert_eq!(
        port("interface = \"e\"\ndpdk_rx_queues = 2"),
        "fulmar.toml:6:18: bridges[0].ports[0].dpdk_rx_queues: dpdk_rx_queues is only for backend = \"dpdk\""
    );
    assert_eq!(
        port("interface = \"e\"\nbackend = \"dpdk\"\ndpdk_rx_queues = 0"),
        "fulmar.toml:7:18: bridges[0].ports[0].dpdk_rx_queues: dpdk_rx_queues 0 is not valid (1..=1024)"
    );
    assert_eq!(
        port("interface = \"e\"\nbackend = \"dpdk\"\ndpdk_devargs = \",x=1\""),
        "fulmar.toml:7:16: bridges[0].ports[0].dpdk_devargs: dpdk_devargs \",x=1\" is not a device (a vdev like \"net_pcap0,rx_pcap=in.pcap\", or a PCI address)"
    );
    assert_eq!(
        port("interface = \"e\"\nbackend = \"dpdk\"\ndpdk_mbufs = 100"),
        "fulmar.toml:7:14: bridges[0].ports[0].dpdk_mbufs: dpdk_mbufs 100 is not valid (1023..=16777215)"
    );
    assert_eq!(
        port("interface = \"e\"\nbackend = \"dpdk\"\nrx_queue_cores = [1]"),
        "fulmar.toml:7:18: bridges[0].ports[0].rx_queue_cores: rx_queue_cores needs the reading threads pinned: give dataplane.worker_cores or dataplane.core_assign"
    );
    assert_eq!(
        port("interface = \"e\"\nbackend = \"dpdk\"\ntx_core = 1"),
        "fulmar.toml:7:11: bridges[0].ports[0].tx_core: tx_core is only for mode = \"rx-worker-tx\" (run to completion, every worker sends)"
    );
    let two = "[[bridges]]\nname = \"b\"\n[[bridges.ports]]\nport = 1\ninterface = \"a\"\nbackend = \"dpdk\"\ndpdk_devargs = \"net_null0\"\n[[bridges.ports]]\nport = 2\ninterface = \"b\"\nbackend = \"dpdk\"\ndpdk_devargs = \"net_null0,size=64\"\n";
    assert_eq!(
        error(two),
        "fulmar.toml:12:16: bridges[0].ports[1].dpdk_devargs: DPDK device \"net_null0\" is already bridges[0].ports[0]"
    );
    let pinned = "[dataplane]\nworker_cores = [1]\n[[bridges]]\nname = \"b\"\n[[bridges.ports]]\nport = 1\ninterface = \"a\"\nbackend = \"dpdk\"\nrx_queue_cores = [0]\n";
    assert_eq!(
        error(pinned),
        "fulmar.toml:9:19: bridges[0].ports[0].rx_queue_cores[0]: no reading thread runs on core 0 (dataplane.worker_cores = [1])"
    );
    assert_eq!(
        error("[dataplane]\ncore_assign = \"fastest\"\n"),
        "fulmar.toml:2:15: dataplane.core_assign: core_assign \"fastest\" is not valid (performance, balance or minimum)"
    );
    assert_eq!(
        error("[dataplane]\ncore_assign = \"balance\"\nworker_cores = [1]\n"),
        "fulmar.toml:2:15: dataplane.core_assign: give core_assign or the cores of each kind of thread (rx_cores, worker_cores, tx_cores), not both"
    );
    assert_eq!(
        error("[dpdk]\neal_args = [\"-l\", \"0\", \"--help\"]\n"),
        "fulmar.toml:2:24: dpdk.eal_args[2]: EAL argument \"--help\" is not allowed (it ends the process)"
    );
}

#[test]
fn port_vlan_settings_load_check_and_round_trip() {
    let text = "[[bridges]]\nname = \"br0\"\n\
        [[bridges.ports]]\nport = 1\ninterface = \"eth0\"\ntag = 10\n\
        [[bridges.ports]]\nport = 2\ninterface = \"eth1\"\ntrunks = [20, 10, 20]\n\
        [[bridges.ports]]\nport = 3\ninterface = \"eth2\"\nvlan_mode = \"native-untagged\"\ntag = 5\n";
    let c = load(text).unwrap();
    let b = &c.bridges[0];
    let v = |n: u32| b.port(n).unwrap().vlan.clone();
    assert_eq!(v(1).tag, Some(10));
    assert_eq!(v(1).resolve().unwrap().mode(), VlanMode::Access);
    assert_eq!(v(2).trunks, vec![10, 20], "sorted, no repeats");
    assert_eq!(v(2).resolve().unwrap().mode(), VlanMode::Trunk);
    assert_eq!(v(3).mode, Some(VlanMode::NativeUntagged));
    let again = Config::from_str_for(&c.to_toml_string(), "again.toml", HOST).unwrap();
    assert_eq!(without_sources(again), without_sources(c));

    let e =
        error(&one_bridge("").replace("interface = \"eth0\"", "interface = \"eth0\"\ntag = 4095"));
    assert!(
        e.contains("bridges[0].ports[0].tag") && e.contains("4095"),
        "{e}"
    );
    let e = error(&one_bridge("").replace(
        "interface = \"eth0\"",
        "interface = \"eth0\"\nvlan_mode = \"native-tagged\"",
    ));
    assert!(e.contains("vlan_mode") && e.contains("needs a tag"), "{e}");
    let e = error(&one_bridge("").replace(
        "interface = \"eth0\"",
        "interface = \"eth0\"\nvlan_mode = \"dot1q-tunnel\"",
    ));
    assert!(e.contains("is not valid"), "{e}");
    let e = error(&one_bridge("").replace(
        "interface = \"eth0\"",
        "interface = \"eth0\"\ntrunks = [1, 9999]",
    ));
    assert!(e.contains("trunks[1]"), "{e}");
}

#[test]
fn port_qos_loads_writes_back_and_diffs() {
    let text = "[[bridges]]\nname = \"br0\"\n[[bridges.ports]]\nport = 1\ninterface = \"eth0\"\n\
        qos = { type = \"linux-hfsc\", max_rate = 20000000, queues = [\
        { id = 1, priority = 0, min_rate = 1000000 }, { id = 2, priority = 5, max_rate = 15000000 } ] }\n\
        [[bridges.ports]]\nport = 2\ninterface = \"eth1\"\n";
    let c = load(text).unwrap();
    let b = &c.bridges[0];
    let q = &b.qos[&1];
    assert_eq!(q.kind, QosKind::LinuxHfsc);
    assert_eq!(q.max_rate, 20_000_000);
    assert_eq!(
        q.queues,
        vec![
            QueueConf {
                id: 1,
                min_rate: 1_000_000,
                max_rate: 0,
                priority: 0
            },
            QueueConf {
                id: 2,
                min_rate: 0,
                max_rate: 15_000_000,
                priority: 5
            },
        ]
    );
    assert!(!b.qos.contains_key(&2));
    // Written back and read again: the same model.
    let again = load(&c.to_toml_string()).unwrap();
    assert_eq!(without_sources(again.clone()), without_sources(c.clone()));
    // A change of queues is a SetQos of that port only, no restart.
    let mut changed = c.clone();
    changed.bridges[0].qos.get_mut(&1).unwrap().max_rate = 1_000_000;
    changed.bridges[0].qos.insert(
        2,
        PortQos {
            kind: QosKind::LinuxHtb,
            max_rate: 0,
            queues: vec![],
        },
    );
    let d = diff(&c, &changed);
    assert_eq!(
        d,
        vec![
            Change::SetQos {
                bridge: "br0".into(),
                port: 1
            },
            Change::SetQos {
                bridge: "br0".into(),
                port: 2
            }
        ]
    );
    assert!(d.iter().all(|c| !c.needs_restart()));
    assert!(diff(&c, &again).is_empty());
}

#[test]
fn port_qos_errors() {
    let q = |s: &str| {
        format!("[[bridges]]\nname = \"br0\"\n[[bridges.ports]]\nport = 1\ninterface = \"eth0\"\nqos = {s}\n")
    };
    assert!(error(&q("{ type = \"linux-noop\" }")).contains("QoS type \"linux-noop\" is not valid"));
    assert!(error(&q("{ max_rate = -1 }")).contains("bridges[0].ports[0].qos.max_rate"));
    assert!(error(&q("{ queues = [{ id = 4294967295 }] }"))
        .contains("queue id 4294967295 is not valid"));
    assert!(error(&q("{ queues = [{ id = 1 }, { id = 1 }] }"))
        .contains("queue 1 is already given as bridges[0].ports[0].qos.queues[0]"));
    assert!(
        error(&q("{ queues = [{ id = 1, min_rate = 5, max_rate = 4 }] }"))
            .contains("min_rate 5 is above max_rate 4")
    );
    assert!(error(&q("{ queues = [{ id = 1, weight = 4 }] }")).contains("weight"));
}

#[test]
fn max_queue_delay_is_parsed_checked_and_written_back() {
    let dp = |body: &str| errors(&format!("[dataplane]\n{body}\n"));
    assert_eq!(
        load("").unwrap().dataplane.max_queue_delay_us,
        crate::model::DEFAULT_MAX_QUEUE_DELAY_US
    );
    for (text, us) in [("0", 0), ("50", 50), ("1000000", 1_000_000)] {
        let c = load(&format!("[dataplane]\nmax_queue_delay_us = {text}\n")).unwrap();
        assert_eq!(c.dataplane.max_queue_delay_us, us);
        // Written back (every setting is, defaults included) and read back
        // the same.
        let toml = c.to_toml_string();
        assert!(
            toml.contains(&format!("max_queue_delay_us = {us}")),
            "{toml}"
        );
        assert_eq!(load(&toml).unwrap().dataplane.max_queue_delay_us, us);
    }
    assert!(load("").unwrap().to_toml_string().contains(&format!(
        "max_queue_delay_us = {}",
        crate::model::DEFAULT_MAX_QUEUE_DELAY_US
    )));
    assert_eq!(
        dp("max_queue_delay_us = 1000001"),
        vec!["fulmar.toml:2:22: dataplane.max_queue_delay_us: max_queue_delay_us 1000001 is not valid (0..=1000000)"]
    );
    assert_eq!(
        dp("max_queue_delay_us = -1"),
        vec!["fulmar.toml:2:22: dataplane.max_queue_delay_us: max_queue_delay_us -1 is not valid (0..=1000000)"]
    );
    assert_eq!(dp("max_queue_delay_us = \"fast\"").len(), 1);
}

#[test]
fn bulk_reply_nice_is_parsed_checked_and_written_back() {
    let dp = |body: &str| errors(&format!("[dataplane]\n{body}\n"));
    assert_eq!(
        load("").unwrap().dataplane.bulk_reply_nice,
        crate::model::DEFAULT_BULK_REPLY_NICE
    );
    for n in [0u8, 1, 19] {
        let c = load(&format!("[dataplane]\nbulk_reply_nice = {n}\n")).unwrap();
        assert_eq!(c.dataplane.bulk_reply_nice, n);
        let toml = c.to_toml_string();
        assert!(toml.contains(&format!("bulk_reply_nice = {n}")), "{toml}");
        assert_eq!(load(&toml).unwrap().dataplane.bulk_reply_nice, n);
    }
    assert_eq!(
        dp("bulk_reply_nice = 20"),
        vec![
            "fulmar.toml:2:19: dataplane.bulk_reply_nice: bulk_reply_nice 20 is not valid (0..=19)"
        ]
    );
    assert_eq!(
        dp("bulk_reply_nice = -1"),
        vec![
            "fulmar.toml:2:19: dataplane.bulk_reply_nice: bulk_reply_nice -1 is not valid (0..=19)"
        ]
    );
    assert_eq!(dp("bulk_reply_nice = \"low\"").len(), 1);
}

/// A recording [`FlowHandover`].
#[derive(Default)]
struct Recorder {
    events: Vec<String>,
    take: bool,
}

impl FlowHandover for Recorder {
    fn start(&mut self, head: &TablesHead, file: &Path) -> bool {
        self.events.push(format!(
            "start {} {} inline={} {}",
            head.bridge,
            head.n_tables,
            head.flows.len(),
            file.file_name().unwrap().to_string_lossy()
        ));
        self.take
    }
    fn flow(&mut self, line: usize, fm: ofp::FlowMod) {
        self.events.push(format!("{line} {}", fm.priority));
    }
    fn end(&mut self, file: Option<&FlowsFile>) {
        self.events.push(format!("end {:?}", file.map(|f| f.flows)));
    }
}

/// A check hands over each flows-file flow as it is checked, in order,
/// after a start with what comes before them; an error stops the
/// handing over (the end says so), and a configuration with an error
/// before the file hands nothing over.
#[test]
fn a_check_hands_over_the_flows_file_as_it_reads_it() {
    let scratch = tmpdir("handover");
    let dir = scratch.path();
    let conf = dir.join("fulmar.toml");
    let write = |flows: &str, extra: &str| {
        std::fs::write(dir.join("h.flows"), flows).unwrap();
        std::fs::write(
            &conf,
            one_bridge(&format!(
                "n_tables = 4\nflows = [\"priority=9,actions=drop\"]\nflows_file = \"h.flows\"\n{extra}"
            )),
        )
        .unwrap();
    };
    let run = |take: bool| {
        let mut r = Recorder {
            take,
            ..Recorder::default()
        };
        let c = Config::load_handing_over(&conf, &mut r);
        (c, r.events)
    };
    write(
        "# c\npriority=2,actions=drop\n\npriority=3,in_port=1,actions=drop\n",
        "",
    );
    let (c, events) = run(true);
    c.unwrap();
    assert_eq!(
        events,
        vec!["start br0 4 inline=1 h.flows", "2 2", "4 3", "end Some(2)"]
    );
    // Not taken: no flows, no end.
    assert_eq!(run(false).1, vec!["start br0 4 inline=1 h.flows"]);

    // An error in the file: handed over up to it, then an end of none.
    write(
        "priority=2,actions=drop\ntable=7,actions=drop\npriority=3,actions=drop\n",
        "",
    );
    let (c, events) = run(true);
    assert!(c.is_err());
    assert_eq!(
        events,
        vec!["start br0 4 inline=1 h.flows", "1 2", "end None"]
    );

    // An error before the file: nothing handed over.
    write("priority=2,actions=drop\n", "miss_send_len = -1");
    let (c, events) = run(true);
    assert!(c.is_err());
    assert!(events.is_empty(), "{events:?}");
}
