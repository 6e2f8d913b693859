//! Transactions: every operation (success and each way it fails), all or
//! nothing, every error reported with its operation and field, `fulmar
//! ctl` words, the diff of two models, and the round trip a restart
//! relies on.

use super::*;
use crate::diff::{diff, Change};
use crate::path::Seg;
use std::time::Duration;

const HOST: Host = Host { cpus: 4 };

/// Two bridges joined by a patch link: br0 (dpid 1) with eth0 (1,
/// afpacket), mem0 (2, memory) and patch port 10; br1 (dpid 3) with tap0
/// (1, tap) and patch port 10; controllers, flows.
const BASE: &str = r#"
[[bridges]]
name = "br0"
dpid = 1
flows = ["table=0,priority=1,actions=output:1"]
[[bridges.ports]]
port = 1
interface = "eth0"
[[bridges.ports]]
port = 2
interface = "mem0"
backend = "memory"
[[bridges.ports]]
port = 10
backend = "patch"
[[bridges.controllers]]
target = "tcp:192.0.2.1:6653"
echo_interval_ms = 1000

[[bridges]]
name = "br1"
dpid = 3
fail_mode = "standalone"
ports = [
  { port = 1, interface = "tap0", backend = "tap" },
  { port = 10, backend = "patch" },
]

[[patch_links]]
a = "br0:10"
b = "br1:10"
"#;

fn base() -> Config {
    Config::from_str_for(BASE, "fulmar.toml", HOST).unwrap_or_else(|e| panic!("{e}"))
}

fn ctl(words: &str) -> Vec<Op> {
    let w: Vec<&str> = words.split_whitespace().collect();
    parse_ctl(&w).unwrap_or_else(|e| panic!("{words}: {e}"))
}

/// The `Change` variant `$kind` for port 1 of br0 (eth0).
macro_rules! br0_port1 {
    ($kind:ident) => {
        Change::$kind {
            bridge: "br0".into(),
            port: 1,
        }
    };
}

/// Applies `words` to the base model.
#[track_caller]
fn ok(words: &str) -> Config {
    base()
        .apply(&ctl(words), HOST)
        .unwrap_or_else(|e| panic!("{words}:\n{e}"))
}

/// The errors of `words` on the base model, as printed.
#[track_caller]
fn errs(words: &str) -> Vec<String> {
    let before = base();
    let r = before.apply(&ctl(words), HOST);
    assert_eq!(before, base(), "the model is untouched");
    match r {
        Ok(_) => panic!("applied: {words}"),
        Err(e) => e.errors.iter().map(|d| d.to_string()).collect(),
    }
}

/// The one error of `words`.
#[track_caller]
fn err(words: &str) -> String {
    let e = errs(words);
    assert_eq!(e.len(), 1, "{e:#?}");
    e.into_iter().next().unwrap_or_default()
}

/// The one error of `words` on `c`.
#[track_caller]
fn one_error(c: &Config, words: &str) -> Diagnostic {
    let mut e = c.apply(&ctl(words), HOST).unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    e.errors.swap_remove(0)
}

fn port<'a>(c: &'a Config, bridge: &str, n: u32) -> &'a Port {
    c.bridge(bridge)
        .and_then(|b| b.port(n))
        .unwrap_or_else(|| panic!("no port {n} in {bridge}"))
}

fn backend(c: &Config, bridge: &str, n: u32) -> Backend {
    match &port(c, bridge, n).kind {
        PortKind::Interface { backend, .. } => backend.clone(),
        k => panic!("{k:?}"),
    }
}

#[test]
fn no_ops_change_nothing() {
    let c = base();
    assert_eq!(c.apply(&[], HOST).unwrap(), c);
    assert!(diff(&c, &c).is_empty());
}

#[test]
fn add_bridge() {
    let c = ok("add-br br2");
    let b = c.bridge("br2").unwrap();
    assert_eq!(b.dpid, 2, "the lowest unused positive dpid");
    // The defaults are exactly the file's, with the local port on.
    let file = Config::from_str_for(
        "[[bridges]]\nname = \"br2\"\ndpid = 2\nlocal_port = true\n",
        "fulmar.toml",
        HOST,
    )
    .unwrap();
    assert_eq!(b, &file.bridges[0]);
    assert_eq!(
        ok("add-br br2 -- add-br br3").bridge("br3").unwrap().dpid,
        4
    );

    let c = ok("add-br br2 dpid=0x99 fail_mode=standalone");
    let b = c.bridge("br2").unwrap();
    assert_eq!((b.dpid, b.fail_mode), (0x99, FailMode::Standalone));

    assert_eq!(
        err("add-br br1"),
        "<transaction>:1: bridges.br1.name: add-br br1: bridge \"br1\" already exists"
    );
    assert_eq!(
        err("add-br br2 dpid=3"),
        "<transaction>:1: bridges.br2.dpid: add-br br2 dpid=0x3: dpid 0x0000000000000003 is already used by bridge \"br1\""
    );
    // A name the file refuses: found when the result is validated, given
    // to the operation.
    assert_eq!(
        err("add-br bad/name"),
        "<transaction>:1: bridges.bad/name.name: add-br bad/name: bridge name \"bad/name\" may hold only letters, digits, '_', '-' and '.'"
    );
}

#[test]
fn del_bridge_takes_its_patch_links_and_their_other_ends() {
    let c = ok("del-br br1");
    assert!(c.bridge("br1").is_none());
    assert!(c.patch_links.is_empty());
    let br0 = c.bridge("br0").unwrap();
    assert_eq!(
        br0.ports.iter().map(|p| p.number).collect::<Vec<_>>(),
        vec![1, 2],
        "the patch port at the other end went with the link"
    );
    assert_eq!(
        err("del-br br9"),
        "<transaction>:1: bridges.br9: del-br br9: there is no bridge \"br9\""
    );
}

#[test]
fn add_port() {
    let c = ok("add-port br0 eth3");
    assert_eq!(
        port(&c, "br0", 3).kind,
        PortKind::Interface {
            name: "eth3".into(),
            backend: Backend::AfPacket
        }
    );
    let c = ok("add-port br1 eth3");
    assert_eq!(port(&c, "br1", 2).number, 2, "lowest free from 1");

    let c = ok("add-port br0 d0 type=dpdk options:dpdk-devargs=net_null0,size=64 options:n_rxq=2 ofport=78");
    let PortKind::Interface {
        backend: Backend::Dpdk(d),
        ..
    } = &c.bridges[0].ports.last().unwrap().kind
    else {
        panic!("not dpdk")
    };
    assert_eq!(
        (d.devargs.as_str(), d.rx_queues),
        ("net_null0,size=64", Some(2))
    );
    let c = ok("add-port br0 net_ring7 type=dpdk");
    assert_eq!(
        backend(&c, "br0", c.bridges[0].ports.last().unwrap().number),
        Backend::Dpdk(DpdkBackend::new("net_ring7"))
    );
    let c = ok("add-port br0 x0 type=afxdp ofport=77");
    assert_eq!(backend(&c, "br0", 77), Backend::AfXdp);
    let c = ok("add-port br0 t1 backend=tap -- add-port br0 m1 options:type=memory");
    assert_eq!(backend(&c, "br0", 3), Backend::Tap);
    assert_eq!(backend(&c, "br0", 4), Backend::Memory);
    let c =
        ok("add-port br0 cap type=pcap pcap_read=/in.pcap pcap_write=\"/out.pcap\" pcap_rate=500");
    assert_eq!(
        backend(&c, "br0", 3),
        Backend::Pcap(PcapBackend {
            read: Some("/in.pcap".into()),
            write: Some("/out.pcap".into()),
            rate: PcapRate::Pps(500),
        })
    );
    // number and ofport agree, or it is an error.
    let ops = [Op::AddPort {
        bridge: "br0".into(),
        interface: "e9".into(),
        number: Some(9),
        options: vec![("ofport".into(), "9".into())],
    }];
    assert!(base()
        .apply(&ops, HOST)
        .unwrap()
        .bridge("br0")
        .unwrap()
        .port(9)
        .is_some());
    let ops = [Op::AddPort {
        bridge: "br0".into(),
        interface: "e9".into(),
        number: Some(9),
        options: vec![("ofport".into(), "8".into())],
    }];
    let e = base().apply(&ops, HOST).unwrap_err();
    assert_eq!(
        e.to_string(),
        "<transaction>:1: bridges.br0.ports.e9.port: add-port br0 e9 ofport=9 ofport=8: the port number is given twice (9 and ofport=8)"
    );
}

#[test]
fn add_port_errors() {
    assert_eq!(
        err("add-port br9 eth3"),
        "<transaction>:1: bridges.br9: add-port br9 eth3: there is no bridge \"br9\""
    );
    assert_eq!(
        err("add-port br1 eth0"),
        "<transaction>:1: bridges.br1.ports.eth0.interface: add-port br1 eth0: interface \"eth0\" is already port 1 of bridge \"br0\""
    );
    assert_eq!(
        err("add-port br0 eth3 speed=10G"),
        "<transaction>:1: bridges.br0.ports.eth3.speed: add-port br0 eth3 speed=10G: unknown key \"speed\" for a port (expected type, pcap_read, pcap_write, pcap_rate, dpdk_devargs, dpdk_rx_queues, remote_ip, local_ip, key, dst_port, ofport, tag, trunks, vlan_mode)"
    );
    assert_eq!(
        err("add-port br0 eth3 type=vhost"),
        "<transaction>:1: bridges.br0.ports.eth3.backend: add-port br0 eth3 type=vhost: backend \"vhost\" is not valid (afpacket, afxdp, tap, memory, pcap, dpdk, vxlan or gre)"
    );
    assert_eq!(
        err("add-port br0 eth3 ofport=2"),
        "<transaction>:1: bridges.br0.ports.eth3.port: add-port br0 eth3 ofport=2: port number 2 is already used by port mem0 of bridge \"br0\""
    );
    assert_eq!(
        err("add-port br0 eth3 ofport=0"),
        "<transaction>:1: bridges.br0.ports.eth3.port: add-port br0 eth3 ofport=0: port number 0 is not valid (1..=4294967040)"
    );
    assert_eq!(
        err("add-port br0 eth3 pcap_read=/x"),
        "<transaction>:1: bridges.br0.ports.eth3.pcap_read: add-port br0 eth3 pcap_read=/x: pcap_read is only for type=pcap"
    );
    assert_eq!(
        err("add-port br0 eth3 type=pcap pcap_rate=fast"),
        "<transaction>:1: bridges.br0.ports.eth3.pcap_rate: add-port br0 eth3 type=pcap pcap_rate=fast: pcap_rate \"fast\" is not valid (packets per second, or \"max\")"
    );
    // Two bad options: both reported.
    assert_eq!(errs("add-port br0 eth3 a=1 b=2").len(), 2);
    // Found by validating the result: a pcap port with no file, an
    // interface name too long for the kernel.
    assert_eq!(
        err("add-port br0 cap type=pcap"),
        "<transaction>:1: bridges.br0.ports.cap.backend: add-port br0 cap type=pcap: a pcap port needs pcap_read, pcap_write or both"
    );
    assert_eq!(
        err("add-port br0 a-very-long-interface"),
        "<transaction>:1: bridges.br0.ports.a-very-long-interface.interface: add-port br0 a-very-long-interface: interface name \"a-very-long-interface\" is longer than 15 bytes"
    );
    assert_eq!(
        err("add-port br0 cap type=patch"),
        "<transaction>:1: bridges.br0.ports.cap.backend: add-port br0 cap type=patch: patch ports are made in the configuration file ([[patch_links]])"
    );
}

#[test]
fn del_port() {
    let c = ok("del-port br0 mem0");
    assert!(c.bridge("br0").unwrap().port(2).is_none());
    let c = ok("del-port br0 2");
    assert!(c.bridge("br0").unwrap().port(2).is_none());
    let c = ok("del-port tap0");
    assert!(
        c.bridge("br1").unwrap().port(1).is_none(),
        "the bridge is found"
    );
    // A patch port takes its link and its peer.
    let c = ok("del-port br0 10");
    assert!(c.patch_links.is_empty());
    assert!(c.bridge("br1").unwrap().port(10).is_none());

    assert_eq!(
        err("del-port br0 eth9"),
        "<transaction>:1: bridges.br0.ports.eth9: del-port br0 eth9: bridge \"br0\" has no port eth9"
    );
    assert_eq!(
        err("del-port br0 7"),
        "<transaction>:1: bridges.br0.ports.7: del-port br0 7: bridge \"br0\" has no port 7"
    );
    assert_eq!(
        err("del-port eth9"),
        "<transaction>:1: ports.eth9: del-port eth9: no bridge has a port \"eth9\""
    );
    assert_eq!(
        err("del-port br9 eth0"),
        "<transaction>:1: bridges.br9: del-port br9 eth0: there is no bridge \"br9\""
    );
    let e = base()
        .apply(
            &[Op::DelPort {
                bridge: None,
                port: PortRef::Number(1),
            }],
            HOST,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "<transaction>:1: ports.1: del-port 1: port number 1 needs its bridge (del-port BRIDGE 1)"
    );
}

#[test]
fn controllers_and_fail_mode() {
    let c = ok("set-controller br0 tcp:192.0.2.1:6653 ptcp:6634");
    let b = c.bridge("br0").unwrap();
    assert_eq!(b.controllers.len(), 2);
    assert_eq!(b.controllers[0].echo_interval_ms, 1000, "kept its timers");
    assert_eq!(b.controllers[1].target.to_string(), "ptcp:6634:0.0.0.0");
    assert_eq!(b.controllers[1].echo_interval_ms, DEFAULT_ECHO_INTERVAL_MS);
    assert!(ok("del-controller br0")
        .bridge("br0")
        .unwrap()
        .controllers
        .is_empty());

    assert_eq!(
        errs("set-controller br0 udp:1.2.3.4 tcp:1.2.3.4:0"),
        vec![
            "<transaction>:1: bridges.br0.controllers[0]: set-controller br0 udp:1.2.3.4 tcp:1.2.3.4:0: controller target \"udp:1.2.3.4\": unknown type \"udp\" (expected tcp, tls, ptcp or ptls)",
            "<transaction>:1: bridges.br0.controllers[1]: set-controller br0 udp:1.2.3.4 tcp:1.2.3.4:0: controller target \"tcp:1.2.3.4:0\": port 0 is not valid for a connection",
        ]
    );
    // TLS without [tls]: found by validation, given to the operation.
    assert_eq!(
        err("add-br br2 -- set-controller br2 tls:192.0.2.9"),
        "<transaction>:2: bridges.br2.controllers[0]: set-controller br2 tls:192.0.2.9: tls:192.0.2.9:6653 needs a [tls] section (private_key, certificate, ca_cert)"
    );
    assert_eq!(
        err("del-controller br7"),
        "<transaction>:1: bridges.br7: del-controller br7: there is no bridge \"br7\""
    );

    let c = ok("set-fail-mode br0 standalone");
    assert_eq!(c.bridge("br0").unwrap().fail_mode, FailMode::Standalone);
    let c = ok("del-fail-mode br1");
    assert_eq!(c.bridge("br1").unwrap().fail_mode, FailMode::Secure);
    assert_eq!(
        err("set-fail-mode br5 secure"),
        "<transaction>:1: bridges.br5: set-fail-mode br5 secure: there is no bridge \"br5\""
    );
}

#[test]
fn set_bridge() {
    let c = ok("set bridge br0 dpid=00:00:00:00:00:00:00:aa n_tables=8 miss_send_len=65535 flow_table_capacity=10 fail_mode=standalone");
    let b = c.bridge("br0").unwrap();
    assert_eq!(
        (
            b.dpid,
            b.n_tables,
            b.miss_send_len,
            b.flow_table_capacity,
            b.fail_mode
        ),
        (0xaa, 8, 65535, 10, FailMode::Standalone)
    );
    let c = ok("set bridge:br0 other-config:datapath-id=00000000000000ff");
    assert_eq!(c.bridge("br0").unwrap().dpid, 0xff);

    assert_eq!(
        err("set bridge br0 n_tables=255"),
        "<transaction>:1: bridges.br0.n_tables: set bridge:br0 n_tables=255: n_tables 255 is not valid (1..=254)"
    );
    assert_eq!(
        err("set bridge br0 miss_send_len=lots"),
        "<transaction>:1: bridges.br0.miss_send_len: set bridge:br0 miss_send_len=lots: miss_send_len \"lots\" is not an integer"
    );
    assert_eq!(
        err("set bridge br0 dpid=3"),
        "<transaction>:1: bridges.br0.dpid: set bridge:br0 dpid=3: dpid 0x0000000000000003 is already used by bridge \"br1\""
    );
    assert_eq!(
        err("set bridge br0 dpid=0xZZ"),
        "<transaction>:1: bridges.br0.dpid: set bridge:br0 dpid=0xZZ: dpid \"0xZZ\" is not valid (a number, \"0x\" and up to 16 hex digits, or 8 hex bytes as \"aa:bb:cc:dd:ee:ff:00:11\")"
    );
    assert_eq!(
        err("set bridge br0 stp_enable=true"),
        "<transaction>:1: bridges.br0.stp_enable: set bridge:br0 stp_enable=true: unknown key \"stp_enable\" for a bridge (expected dpid, fail_mode, n_tables, miss_send_len, flow_table_capacity, flow_memory_limit_mib, local_port)"
    );
    assert_eq!(
        err("set bridge br9 n_tables=2"),
        "<transaction>:1: bridges.br9: set bridge:br9 n_tables=2: there is no bridge \"br9\""
    );
    assert_eq!(
        err("set switch:br0 n_tables=2"),
        "<transaction>:1: switch:br0: set switch:br0 n_tables=2: unknown object \"switch:br0\" (bridge:NAME, port:BRIDGE:PORT, interface:NAME or dataplane)"
    );
    // Fewer tables than a static flow needs: the flow's error, given to
    // the operation that shrank the bridge.
    let text = BASE.replace(
        "flows = [\"table=0,priority=1,actions=output:1\"]",
        "flows = [\"table=0,priority=1,actions=goto_table:5\"]",
    );
    let c = Config::from_str_for(&text, "fulmar.toml", HOST).unwrap();
    let e = c
        .apply(&ctl("set bridge br0 n_tables=3"), HOST)
        .unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    let d = &e.errors[0];
    assert_eq!(
        (d.file.to_str(), d.line, d.field.as_str()),
        (Some(TRANSACTION), Some(1), "bridges.br0.flows[0]"),
        "{d}"
    );
    assert!(d.message.starts_with("set bridge:br0 n_tables=3: "), "{d}");
}

#[test]
fn set_port() {
    let c = ok("set port:br0:eth0 type=pcap pcap_write=/o.pcap");
    assert_eq!(
        backend(&c, "br0", 1),
        Backend::Pcap(PcapBackend {
            read: None,
            write: Some("/o.pcap".into()),
            rate: PcapRate::Max
        })
    );
    let c = ok("set interface mem0 type=tap");
    assert_eq!(backend(&c, "br0", 2), Backend::Tap);
    let c = ok("set port:br0:1 ofport=5");
    assert_eq!(
        port(&c, "br0", 5).kind,
        base().bridge("br0").unwrap().ports[0].kind
    );

    assert_eq!(
        err("set port:br0:eth0 pcap_read=/i.pcap"),
        "<transaction>:1: bridges.br0.ports.eth0.pcap_read: set port:br0:eth0 pcap_read=/i.pcap: pcap_read is only for type=pcap"
    );
    assert_eq!(
        err("set port:br0:eth0 ofport=2"),
        "<transaction>:1: bridges.br0.ports.eth0.port: set port:br0:eth0 ofport=2: port number 2 is already used by port mem0 of bridge \"br0\""
    );
    assert_eq!(
        err("set port:br0:10 type=tap"),
        "<transaction>:1: bridges.br0.ports.10: set port:br0:10 type=tap: port 10 is a patch port; only its ofport can be set here"
    );
    assert_eq!(
        err("set interface eth7 type=tap"),
        "<transaction>:1: ports.eth7: set interface:eth7 type=tap: no bridge has a port \"eth7\""
    );
    assert_eq!(
        err("set port:br0:eth7 type=tap"),
        "<transaction>:1: bridges.br0.ports.eth7: set port:br0:eth7 type=tap: bridge \"br0\" has no port eth7"
    );
    assert_eq!(
        err("set port:br0 type=tap"),
        "<transaction>:1: port:br0: set port:br0 type=tap: unknown object \"port:br0\" (bridge:NAME, port:BRIDGE:PORT, interface:NAME or dataplane)"
    );
}

#[test]
fn set_dataplane() {
    let c = ok("set dataplane mode=rx-worker-tx rx_threads=2 worker_threads=3 dispatch=l2 burst.rx_read=64 tx_write=8 rx_ring_size=4096 flush_idle_us=5 max_batch_wait_us=50 worker_cores=1,2,3");
    let d = &c.dataplane;
    assert_eq!(d.mode, ThreadMode::RxWorkerTx);
    assert_eq!((d.rx_threads, d.worker_threads, d.tx_threads), (2, 3, 1));
    assert_eq!(d.dispatch.key, DispatchKey::L2);
    assert_eq!((d.burst.rx_read, d.burst.tx_write), (64, 8));
    assert_eq!(d.rings.rx_ring, 4096);
    assert_eq!(
        (d.flush.idle, d.flush.max_wait),
        (Duration::from_micros(5), Duration::from_micros(50))
    );
    assert_eq!(d.worker_cores, Some(vec![1, 2, 3]));
    // Back to run-to-completion: the pipeline's settings go.
    let back = c
        .apply(
            &ctl("set dataplane mode=run-to-completion worker_cores="),
            HOST,
        )
        .unwrap();
    assert_eq!(
        back.dataplane,
        Dataplane {
            worker_threads: 3,
            burst: d.burst,
            rings: d.rings,
            flush: d.flush,
            ..Dataplane::default()
        }
    );

    assert_eq!(
        err("set dataplane rx_threads=2"),
        "<transaction>:1: dataplane.rx_threads: set dataplane rx_threads=2: rx_threads is only for mode = \"rx-worker-tx\""
    );
    assert_eq!(
        err("set dataplane mode=turbo"),
        "<transaction>:1: dataplane.mode: set dataplane mode=turbo: mode \"turbo\" is not valid (run-to-completion or rx-worker-tx)"
    );
    assert_eq!(
        err("set dataplane worker_threads=0"),
        "<transaction>:1: dataplane.worker_threads: set dataplane worker_threads=0: worker_threads 0 is not valid (1..=256)"
    );
    assert_eq!(
        err("set dataplane burst.rx_read=48"),
        "<transaction>:1: dataplane.burst.rx_read: set dataplane burst.rx_read=48: burst size 48 is not valid (a power of two, 1..=1024)"
    );
    assert_eq!(
        err("set dataplane rx_ring_size=100"),
        "<transaction>:1: dataplane.rx_ring_size: set dataplane rx_ring_size=100: rx_ring_size 100 is not valid (a power of two, 64..=65536)"
    );
    assert_eq!(
        err("set dataplane threads=4"),
        format!("<transaction>:1: dataplane.threads: set dataplane threads=4: unknown key \"threads\" for the dataplane (expected {DATAPLANE_KEYS})")
    );
    // Found by validation: a core this machine lacks; flushing limits
    // that contradict each other; a ring smaller than its bursts.
    assert_eq!(
        err("set dataplane worker_cores=9"),
        "<transaction>:1: dataplane.worker_cores[0]: set dataplane worker_cores=9: core 9 does not exist (this machine has 4 CPUs: 0..=3)"
    );
    assert_eq!(
        err("set dataplane flush_idle_us=500"),
        "<transaction>:1: dataplane.max_batch_wait_us: set dataplane flush_idle_us=500: max_batch_wait_us 0 is less than flush_idle_us 500"
    );
    assert_eq!(
        err("set dataplane mode=rx-worker-tx -- set dataplane rx_write=128 rx_ring_size=64"),
        "<transaction>:3: dataplane.rx_ring_size: set dataplane rx_ring_size=64: rx_ring_size 64 is smaller than the bursts written to and read from the ring (128)"
    );
}

#[test]
fn one_bad_op_changes_nothing_and_every_error_is_reported() {
    let before = base();
    let ops = ctl(
        "add-br br2 -- add-port br2 p0 type=tap -- add-port br2 p1 type=bogus -- \
         set-fail-mode br2 standalone -- del-port br0 nope -- set bridge br2 n_tables=0 -- \
         set-controller br9 ptcp:",
    );
    let e = before.apply(&ops, HOST).unwrap_err();
    assert_eq!(before, base());
    let got: Vec<String> = e.errors.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        got,
        vec![
            "<transaction>:3: bridges.br2.ports.p1.backend: add-port br2 p1 type=bogus: backend \"bogus\" is not valid (afpacket, afxdp, tap, memory, pcap, dpdk, vxlan or gre)",
            "<transaction>:5: bridges.br0.ports.nope: del-port br0 nope: bridge \"br0\" has no port nope",
            "<transaction>:6: bridges.br2.n_tables: set bridge:br2 n_tables=0: n_tables 0 is not valid (1..=254)",
            "<transaction>:7: bridges.br9: set-controller br9 ptcp:: there is no bridge \"br9\"",
        ]
    );
    // The good ones alone apply.
    let ok = before
        .apply(
            &ctl("add-br br2 -- add-port br2 p0 type=tap -- set-fail-mode br2 standalone"),
            HOST,
        )
        .unwrap();
    assert_eq!(ok.bridge("br2").unwrap().fail_mode, FailMode::Standalone);
    assert_eq!(backend(&ok, "br2", 1), Backend::Tap);
}

#[test]
fn validation_errors_go_to_the_operation_that_caused_them() {
    // Two listeners on one port: the second bridge's, found when the
    // result is validated, is the second operation's.
    let e = base()
        .apply(
            &ctl("set-controller br0 ptcp:6700 -- set-fail-mode br1 secure -- set-controller br1 ptcp:6700:127.0.0.1"),
            HOST,
        )
        .unwrap_err();
    let got: Vec<String> = e.errors.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        got,
        vec!["<transaction>:3: bridges.br1.controllers[0]: set-controller br1 ptcp:6700:127.0.0.1: ptcp:6700:127.0.0.1 is already listened on by bridges.br0.controllers[0]"]
    );
}

#[test]
fn the_second_of_two_operations_is_named_with_its_field() {
    // The first operation is good; the second sets a value only the
    // validation of the result refuses. The error is the second
    // operation's and names the field, typed and as printed.
    let d = one_error(&base(), "add-br br2 -- set bridge br2 miss_send_len=70000");
    assert_eq!(
        d.to_string(),
        "<transaction>:2: bridges.br2.miss_send_len: set bridge:br2 miss_send_len=70000: miss_send_len 70000 is not valid (0..=65535)"
    );
    assert_eq!(d.line, Some(2));
    assert!(matches!(
        d.path.segs(),
        [Seg::Bridge { name, .. }, Seg::Key(k)] if name == "br2" && k == "miss_send_len"
    ));
    // The same setting first, then a good one: the first is named.
    let d = one_error(&base(), "set bridge br1 miss_send_len=70000 -- add-br br2");
    assert_eq!(d.line, Some(1));
    assert_eq!(d.field, "bridges.br1.miss_send_len");
}

#[test]
fn a_duplicate_goes_to_the_operation_that_made_either_use() {
    // br1 listens on 6701 already. A transaction gives br0 a listener on
    // the same port: the clash is reported at br1's controller (the later
    // bridge), which no operation touched, and names br0's, which the
    // second operation made: that operation is named.
    let listening = base()
        .apply(&ctl("set-controller br1 ptcp:6701"), HOST)
        .unwrap();
    let d = one_error(
        &listening,
        "set-fail-mode br1 secure -- set-controller br0 tcp:192.0.2.1:6653 ptcp:6701",
    );
    assert_eq!(
        d.to_string(),
        "<transaction>:2: bridges.br1.controllers[0]: set-controller br0 tcp:192.0.2.1:6653 ptcp:6701: ptcp:6701:0.0.0.0 is already listened on by bridges.br0.controllers[1]"
    );
    assert_eq!(
        d.related,
        vec![FieldPath::bridge(Some(0), "br0").at("controllers").index(1)]
    );
}

#[test]
fn dry_run_is_apply_discarded() {
    let c = base();
    let preview = c.apply(&ctl("add-br br2"), HOST).unwrap();
    assert_eq!(diff(&c, &preview), vec![Change::AddBridge("br2".into())]);
    assert_eq!(c, base());
}

#[test]
fn diff_classifies() {
    let c = base();
    let d = |words: &str| diff(&c, &c.apply(&ctl(words), HOST).unwrap());
    assert_eq!(
        d("add-port br0 eth3"),
        vec![Change::AddPort {
            bridge: "br0".into(),
            port: 3
        }]
    );
    assert_eq!(
        d("del-port br0 mem0"),
        vec![Change::DelPort {
            bridge: "br0".into(),
            port: 2,
            interface: "mem0".into()
        }]
    );
    assert_eq!(
        d("set port:br0:mem0 type=tap"),
        vec![Change::ChangePort {
            bridge: "br0".into(),
            port: 2
        }]
    );
    // Another interface on the same number: out, then in.
    assert_eq!(
        d("del-port br0 mem0 -- add-port br0 mem1 ofport=2"),
        vec![
            Change::DelPort {
                bridge: "br0".into(),
                port: 2,
                interface: "mem0".into()
            },
            Change::AddPort {
                bridge: "br0".into(),
                port: 2
            },
        ]
    );
    assert_eq!(
        d("set-controller br1 ptcp:"),
        vec![Change::SetControllers {
            bridge: "br1".into()
        }]
    );
    assert_eq!(
        d("del-fail-mode br1"),
        vec![Change::SetFailMode {
            bridge: "br1".into(),
            mode: FailMode::Secure
        }]
    );
    assert_eq!(
        d("set bridge br1 n_tables=4 dpid=9"),
        vec![Change::ChangeBridge {
            bridge: "br1".into(),
            fields: vec!["dpid", "n_tables"]
        }]
    );
    // A rebuild takes the whole bridge: nothing else is listed for it.
    assert_eq!(
        d("set bridge br0 miss_send_len=0 -- add-port br0 eth3 -- set-controller br0 ptcp:"),
        vec![Change::ChangeBridge {
            bridge: "br0".into(),
            fields: vec!["miss_send_len"]
        }]
    );
    assert_eq!(
        d("set dataplane mode=rx-worker-tx burst.tx_read=4"),
        vec![Change::ChangeDataplane {
            fields: vec!["mode", "rx_threads", "tx_threads", "burst.tx_read"]
        }]
    );
    // Deletions first, then additions, then settings, links, dataplane.
    assert_eq!(
        d("add-br br2 -- set-fail-mode br0 standalone -- add-port br1 t9 type=tap -- del-br br1 -- \
           add-port br0 eth3 -- del-port br0 eth0 -- set port:br0:mem0 type=tap -- set dataplane worker_threads=2"),
        vec![
            Change::DelBridge("br1".into()),
            Change::DelPort {
                bridge: "br0".into(),
                port: 1,
                interface: "eth0".into()
            },
            Change::DelPort {
                bridge: "br0".into(),
                port: 10,
                interface: "patch:br1:10".into()
            },
            Change::ChangePort {
                bridge: "br0".into(),
                port: 2
            },
            Change::AddBridge("br2".into()),
            Change::AddPort {
                bridge: "br0".into(),
                port: 3
            },
            Change::SetFailMode {
                bridge: "br0".into(),
                mode: FailMode::Standalone
            },
            Change::PatchLinks,
            Change::ChangeDataplane {
                fields: vec!["worker_threads"]
            },
        ]
    );
    let classes: Vec<bool> = [
        Change::AddPort {
            bridge: "b".into(),
            port: 1,
        },
        Change::SetControllers { bridge: "b".into() },
        Change::ChangeBridge {
            bridge: "b".into(),
            fields: vec!["dpid"],
        },
        Change::ChangeFlows { bridge: "b".into() },
        Change::ChangeDataplane { fields: vec![] },
        Change::PatchLinks,
    ]
    .iter()
    .map(Change::needs_restart)
    .collect();
    assert_eq!(classes, vec![false, false, true, true, true, true]);
}

#[test]
fn diff_of_static_flows_tls_and_links() {
    let c = base();
    let mut flows = c.clone();
    flows.bridges[0].flows.clear();
    assert_eq!(
        diff(&c, &flows),
        vec![Change::ChangeFlows {
            bridge: "br0".into()
        }]
    );
    // With a setting too: one rebuild naming both.
    flows.bridges[0].dpid = 77;
    assert_eq!(
        diff(&c, &flows),
        vec![Change::ChangeBridge {
            bridge: "br0".into(),
            fields: vec!["dpid", "flows"]
        }]
    );
    // A flows file whose digest or flow count differs is a change of the
    // flows; its path alone is not.
    let file = |c: &Config, sha: u8, n: usize, path: &str| {
        let mut c = c.clone();
        c.bridges[0].flows_file = Some(FlowsFile {
            path: path.into(),
            sha256: [sha; 32],
            flows: n,
        });
        c
    };
    let one = file(&c, 1, 5, "/a.flows");
    let change = vec![Change::ChangeFlows {
        bridge: "br0".into(),
    }];
    assert_eq!(diff(&c, &one), change);
    assert_eq!(diff(&one, &file(&c, 2, 5, "/a.flows")), change);
    assert_eq!(diff(&one, &file(&c, 1, 6, "/a.flows")), change);
    assert!(diff(&one, &file(&c, 1, 5, "/b.flows")).is_empty());
    // Where a flow was written is no difference.
    let mut moved = c.clone();
    moved.bridges[0].flows[0].source.line = 99;
    moved.bridges.reverse();
    moved.bridges[1].ports.reverse();
    moved.patch_links[0] = PatchLink {
        a: ("br1".into(), 10),
        b: ("br0".into(), 10),
    };
    moved.warnings.push(Diagnostic {
        file: "x".into(),
        line: None,
        column: None,
        field: String::new(),
        message: "w".into(),
        ..Diagnostic::default()
    });
    assert!(diff(&c, &moved).is_empty(), "{:?}", diff(&c, &moved));
    // New TLS files: the bridges with TLS controllers reconnect.
    let mut tls = c.clone();
    tls.tls = Some(TlsFiles {
        private_key: "/k".into(),
        certificate: "/c".into(),
        ca_cert: "/a".into(),
    });
    assert!(diff(&c, &tls).is_empty(), "no TLS controller");
    let mut a = tls.clone();
    a.bridges[1].controllers = vec![Controller::new(
        ControllerTarget::parse_target("tls:192.0.2.7").unwrap(),
    )];
    let mut b = a.clone();
    b.tls.as_mut().unwrap().ca_cert = "/other-ca".into();
    assert_eq!(
        diff(&a, &b),
        vec![Change::SetControllers {
            bridge: "br1".into()
        }]
    );
    // A patch port's peer: re-opened, and the links differ.
    let mut peer = c.clone();
    peer.bridges[0].ports[2].kind = PortKind::Patch {
        peer_bridge: "br1".into(),
        peer_port: 11,
    };
    peer.bridges[1].ports[1].number = 11;
    peer.patch_links[0].b.1 = 11;
    assert_eq!(
        diff(&c, &peer),
        vec![
            Change::DelPort {
                bridge: "br1".into(),
                port: 10,
                interface: "patch:br0:10".into()
            },
            Change::ChangePort {
                bridge: "br0".into(),
                port: 10
            },
            Change::AddPort {
                bridge: "br1".into(),
                port: 11
            },
            Change::PatchLinks,
        ]
    );
}

#[test]
fn parse_ctl_words() {
    assert_eq!(
        ctl("add-br br1 -- add-port br1 eth1 type=afxdp ofport=4 -- set-controller br1 tcp:10.0.0.1 ptcp:6653 -- set-fail-mode br1 standalone"),
        vec![
            Op::AddBridge {
                name: "br1".into(),
                dpid: None,
                fail_mode: None
            },
            Op::AddPort {
                bridge: "br1".into(),
                interface: "eth1".into(),
                number: None,
                options: vec![
                    ("type".into(), "afxdp".into()),
                    ("ofport".into(), "4".into())
                ]
            },
            Op::SetController {
                bridge: "br1".into(),
                targets: vec!["tcp:10.0.0.1".into(), "ptcp:6653".into()]
            },
            Op::SetFailMode {
                bridge: "br1".into(),
                mode: FailMode::Standalone
            },
        ]
    );
    assert_eq!(
        ctl("-- del-br b -- del-port b p -- del-port b 7 -- del-port p -- del-controller b -- del-fail-mode b"),
        vec![
            Op::DelBridge { name: "b".into() },
            Op::DelPort {
                bridge: Some("b".into()),
                port: PortRef::Name("p".into())
            },
            Op::DelPort {
                bridge: Some("b".into()),
                port: PortRef::Number(7)
            },
            Op::DelPort {
                bridge: None,
                port: PortRef::Name("p".into())
            },
            Op::DelController { bridge: "b".into() },
            Op::DelFailMode { bridge: "b".into() },
        ]
    );
    let set = |object: &str, key: &str, value: &str| Op::Set {
        object: object.into(),
        key: key.into(),
        value: value.into(),
    };
    assert_eq!(
        ctl("set bridge br0 n_tables=4 dpid=0x5 -- set interface eth0 type=tap -- set port:br0:eth1 ofport=3 -- set dataplane mode=rx-worker-tx"),
        vec![
            set("bridge:br0", "n_tables", "4"),
            set("bridge:br0", "dpid", "0x5"),
            set("interface:eth0", "type", "tap"),
            set("port:br0:eth1", "ofport", "3"),
            set("dataplane", "mode", "rx-worker-tx"),
        ]
    );
    assert_eq!(
        ctl("add-br b dpid=00:00:00:00:00:00:00:10 fail_mode=standalone"),
        vec![Op::AddBridge {
            name: "b".into(),
            dpid: Some(0x10),
            fail_mode: Some(FailMode::Standalone)
        }]
    );
    // What each op prints as is what parses back to it.
    for words in [
        "add-br br1 dpid=0x10 fail_mode=standalone",
        "add-port br1 eth1 type=pcap pcap_read=/x",
        "del-port br1 eth1",
        "del-port eth1",
        "set-controller br1 tcp:10.0.0.1 ptcp:",
        "set dataplane burst.rx_read=8",
    ] {
        let ops = ctl(words);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].to_string(), words);
    }

    let bad = |words: &str| {
        let w: Vec<&str> = words.split_whitespace().collect();
        parse_ctl(&w).unwrap_err()
    };
    assert_eq!(
        bad("add-bridge br0"),
        "unknown command \"add-bridge\" (known: add-br, del-br, add-port, del-port, set-controller, del-controller, set-fail-mode, del-fail-mode, set, set-qos, clear-qos)"
    );
    assert_eq!(
        bad("add-br br0 -- frobnicate"),
        "unknown command \"frobnicate\" (known: add-br, del-br, add-port, del-port, set-controller, del-controller, set-fail-mode, del-fail-mode, set, set-qos, clear-qos)"
    );
    assert_eq!(
        bad("add-port br0"),
        "add-port: usage: add-port BRIDGE INTERFACE [KEY=VALUE...]"
    );
    assert_eq!(
        bad("add-port br0 eth0 type"),
        "add-port: \"type\" is not KEY=VALUE"
    );
    assert_eq!(
        bad("set-controller br0"),
        "set-controller: usage: set-controller BRIDGE TARGET..."
    );
    assert_eq!(
        bad("set-fail-mode br0 open"),
        "set-fail-mode: fail_mode \"open\" is not valid (secure or standalone)"
    );
    assert_eq!(
        bad("set bridge br0"),
        "set: usage: set bridge:BR|port:BR:IF|dataplane KEY=VALUE..."
    );
    assert_eq!(bad("del-br"), "del-br: usage: del-br BRIDGE");
    assert_eq!(
        bad("add-br b size=3"),
        "add-br: unknown key \"size\" (expected dpid or fail_mode)"
    );
    assert!(bad("--").starts_with("no command given"));
    assert!(bad("").starts_with("no command given"));
}

/// A restart reloads the persisted text: it must give the same model.
#[test]
fn to_toml_round_trips_two_bridges() {
    let text = r#"
[dataplane]
mode = "rx-worker-tx"
rx_threads = 2
worker_threads = 2
dispatch = "port"

[[bridges]]
name = "core"
dpid = "0x00000000000000aa"
fail_mode = "standalone"
n_tables = 16
flows = ["table=0,priority=10,in_port=1,actions=output:2", "table=0,priority=0,actions=CONTROLLER:128"]
groups = ["group_id=1,type=all,bucket=output:1,bucket=output:2"]
meters = ["meter=1,kbps,bands=type=drop,rate=1000"]
ports = [
  { port = 1, interface = "eth0" },
  { port = 2, interface = "xdp0", backend = "afxdp" },
  { port = 3, interface = "cap", backend = "pcap", pcap_read = "/tmp/in.pcap", pcap_rate = 1000 },
  { port = 20, backend = "patch" },
]
controllers = [
  { target = "tcp:192.0.2.1", backoff_max_ms = 2000 },
  { target = "ptcp:6653:127.0.0.1" },
]

[[bridges]]
name = "edge"
ports = [
  { port = 1, interface = "tap0", backend = "tap" },
  { port = 2, interface = "m0", backend = "memory" },
  { port = 7, backend = "patch" },
]
controllers = [{ target = "tcp:[2001:db8::1]:6633" }]

[[patch_links]]
a = "core:20"
b = "edge:7"
"#;
    let c = Config::from_str_for(text, "fulmar.toml", HOST).unwrap_or_else(|e| panic!("{e}"));
    let out = c.to_toml_string();
    let back =
        Config::from_str_for(&out, "fulmar.toml", HOST).unwrap_or_else(|e| panic!("{e}\n{out}"));
    // Only the lines the inline flows were written on differ.
    let lines = |c: &Config| -> Vec<usize> {
        c.bridges
            .iter()
            .flat_map(|b| {
                b.flows
                    .iter()
                    .map(|f| f.source.line)
                    .chain(b.groups.iter().map(|g| g.source.line))
                    .chain(b.meters.iter().map(|m| m.source.line))
            })
            .collect()
    };
    let mut same = back.clone();
    for (nb, ob) in same.bridges.iter_mut().zip(&c.bridges) {
        for (n, o) in nb.flows.iter_mut().zip(&ob.flows) {
            n.source.line = o.source.line;
        }
        for (n, o) in nb.groups.iter_mut().zip(&ob.groups) {
            n.source.line = o.source.line;
        }
        for (n, o) in nb.meters.iter_mut().zip(&ob.meters) {
            n.source.line = o.source.line;
        }
    }
    assert_eq!(same, c);
    assert_ne!(lines(&back), lines(&c), "the test compares something");
    // And the written text is a fixed point, equal model and all.
    let again = Config::from_str_for(&back.to_toml_string(), "fulmar.toml", HOST).unwrap();
    assert_eq!(again, back);
    assert_eq!(back.to_toml_string(), out);
    // revalidate keeps the sources: the same model exactly.
    assert_eq!(c.revalidate(HOST).unwrap(), c);
    assert!(diff(&c, &back).is_empty());
}

#[test]
fn port_vlan_settings_by_transaction() {
    // add-port with a tag, then set the mode and tag in either order
    // within one transaction: checked whole.
    let c = ok("add-port br0 eth7 tag=10");
    let p = c
        .bridge("br0")
        .unwrap()
        .ports
        .iter()
        .find(|p| matches!(&p.kind, PortKind::Interface { name, .. } if name == "eth7"))
        .unwrap();
    assert_eq!(p.vlan.tag, Some(10));
    let c = ok("set port eth0 vlan_mode=native-tagged tag=3 trunks=[4,5]");
    let v = &port(&c, "br0", 1).vlan;
    assert_eq!(
        (v.mode, v.tag, v.trunks.clone()),
        (Some(VlanMode::NativeTagged), Some(3), vec![4, 5])
    );
    // Cleared with empty values.
    let cleared = c
        .apply(&ctl("set port eth0 vlan_mode= tag=[] trunks="), HOST)
        .unwrap();
    assert!(port(&cleared, "br0", 1).vlan.is_default());
    // Live: a VLAN change re-opens nothing.
    assert_eq!(diff(&base(), &c), vec![br0_port1!(SetPortVlan)]);
    // What does not go together is refused, naming the operation.
    let e = err("set port eth0 vlan_mode=access");
    assert!(e.contains("needs a tag"), "{e}");
    let e = err("set port eth0 tag=5000");
    assert!(e.contains("tag 5000"), "{e}");
    // A patch port takes VLAN settings too.
    let c = ok("set port:br0:10 tag=7");
    assert_eq!(port(&c, "br0", 10).vlan.tag, Some(7));
}

#[test]
fn local_port_comes_with_add_br_and_is_a_bridge_setting() {
    // add-br makes it; the file's bridges keep theirs (off by default).
    let c = ok("add-br br2");
    assert!(c.bridge("br2").unwrap().local_port);
    assert!(!c.bridge("br0").unwrap().local_port);
    // It survives the file a restart reads.
    let again = Config::from_str_for(&c.to_toml_string(), "fulmar.toml", HOST).unwrap();
    assert!(again.bridge("br2").unwrap().local_port);
    assert!(!again.bridge("br0").unwrap().local_port);
    // `set bridge:B local_port=...` turns it off and on: a bridge restart.
    let off = ok("add-br br2 -- set bridge:br2 local_port=false");
    assert!(!off.bridge("br2").unwrap().local_port);
    let on = ok("set bridge:br0 local_port=true");
    assert!(on.bridge("br0").unwrap().local_port);
    assert_eq!(
        diff(&base(), &on),
        vec![Change::ChangeBridge {
            bridge: "br0".into(),
            fields: vec!["local_port"],
        }]
    );
    assert_eq!(
        err("set bridge:br0 local_port=yes"),
        "<transaction>:1: bridges.br0.local_port: set bridge:br0 local_port=yes: local_port \"yes\" is not valid (true or false)"
    );
    // The TAP takes the bridge's name: no kernel port may take it too.
    let e = err("add-br br2 -- add-port br0 br2");
    assert!(
        e.contains("interface \"br2\" is the local port of bridge \"br2\""),
        "{e}"
    );
    // Unless the local port is off, or the port is no kernel interface.
    ok("add-br br2 -- set bridge:br2 local_port=false -- add-port br0 br2");
    ok("add-br br2 -- add-port br0 br2 type=memory");
}

#[test]
fn set_qos_and_clear_qos() {
    let c = base()
        .apply(
            &ctl("set-qos br0 eth0 type=linux-hfsc max_rate=20000000 queue:1=priority:0,min_rate:1000000 queue:2=priority:3,max-rate:5000000"),
            HOST,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let q = &c.bridge("br0").unwrap().qos[&1];
    assert_eq!(q.kind, QosKind::LinuxHfsc);
    assert_eq!(q.max_rate, 20_000_000);
    assert_eq!(q.queues.len(), 2);
    assert_eq!(
        (q.queues[1].id, q.queues[1].priority, q.queues[1].max_rate),
        (2, 3, 5_000_000)
    );
    assert_eq!(diff(&base(), &c), vec![br0_port1!(SetQos)]);
    // The words it prints parse back to the same operation.
    let op = ctl("set-qos br0 1 max_rate=10 queue:7=priority:1");
    let again = ctl(&op[0].to_string());
    assert_eq!(again, op);
    // Persisted and read again.
    let text = c.to_toml_string();
    assert!(text.contains("linux-hfsc"), "{text}");
    // Cleared by number.
    let cleared = c.apply(&ctl("clear-qos br0 1"), HOST).unwrap();
    assert!(cleared.bridge("br0").unwrap().qos.is_empty());
}

#[test]
fn set_qos_errors_change_nothing() {
    for (words, want) in [
        (
            "set-qos br0 eth0 type=linux-noop",
            "QoS type \"linux-noop\" is not valid",
        ),
        (
            "set-qos br0 eth0 max_rate=fast",
            "max_rate \"fast\" is not a rate",
        ),
        (
            "set-qos br0 eth0 queue:x=priority:1",
            "queue id \"x\" is not valid",
        ),
        (
            "set-qos br0 eth0 queue:1=weight:3",
            "unknown key \"weight\"",
        ),
        (
            "set-qos br0 eth0 queue:1=min_rate:5,max_rate:4",
            "min_rate 5 is above max_rate 4",
        ),
        (
            "set-qos br0 eth0 queue:1= queue:1=",
            "queue 1 is given twice",
        ),
        ("set-qos br0 eth0 speed=1", "unknown key \"speed\""),
        ("clear-qos br0", "usage: clear-qos BRIDGE PORT"),
    ] {
        let w: Vec<&str> = words.split_whitespace().collect();
        let e = parse_ctl(&w).unwrap_err();
        assert!(e.contains(want), "{words}: {e}");
    }
    let e = base().apply(&ctl("set-qos br0 eth9"), HOST).unwrap_err();
    assert!(
        e.to_string().contains("bridge \"br0\" has no port eth9"),
        "{e}"
    );
    let e = base().apply(&ctl("clear-qos br7 1"), HOST).unwrap_err();
    assert!(e.to_string().contains("there is no bridge \"br7\""), "{e}");
}

#[test]
fn a_port_renumbered_keeps_its_queues_and_a_deleted_one_takes_them() {
    let c = ok("set-qos br0 eth0 max_rate=10000000 queue:1=priority:0");
    assert!(c.bridge("br0").unwrap().qos.contains_key(&1));
    // Renumbered (as ovs-vsctl's ofport_request, or ctl's ofport): the
    // queues follow the port, also through the file a restart reads.
    let moved = c.apply(&ctl("set port eth0 ofport=7"), HOST).unwrap();
    let b = moved.bridge("br0").unwrap();
    assert_eq!(b.qos.keys().copied().collect::<Vec<_>>(), vec![7]);
    let again = Config::from_str_for(&moved.to_toml_string(), "fulmar.toml", HOST).unwrap();
    assert_eq!(again.bridge("br0").unwrap().qos, b.qos);
    // A port that comes later under the old number gets none.
    let reused = moved
        .apply(&ctl("add-port br0 eth9 ofport=1"), HOST)
        .unwrap();
    assert!(!reused.bridge("br0").unwrap().qos.contains_key(&1));
    // Deleted: its queues go with it.
    let gone = moved.apply(&ctl("del-port br0 eth0"), HOST).unwrap();
    assert!(gone.bridge("br0").unwrap().qos.is_empty());
}

#[test]
fn set_dataplane_max_queue_delay() {
    let c = ok("set dataplane max_queue_delay_us=0");
    assert_eq!(c.dataplane.max_queue_delay_us, 0);
    let base = ok("set dataplane max_queue_delay_us=200");
    assert_eq!(
        diff(&c, &base),
        vec![Change::ChangeDataplane {
            fields: vec!["max_queue_delay_us"]
        }]
    );
    assert_eq!(
        err("set dataplane max_queue_delay_us=2000000"),
        "<transaction>:1: dataplane.max_queue_delay_us: set dataplane max_queue_delay_us=2000000: max_queue_delay_us 2000000 is not valid (0..=1000000)"
    );
}
