//! Runtime tests over memory and patch ports (no root needed).

use super::*;
use dataplane::{Burst, PacketBuf, PortBackend};
use ofp::port::port_state;
use std::time::Instant;

/// An untagged IPv4/UDP frame with `seq` in the payload.
fn udp(seq: u8) -> Vec<u8> {
    let mut f = vec![
        0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00, // eth
        0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 10, 1, 10, 0, 10, 2, // ip
        0x04, 0xd2, 0x16, 0x2e, 0, 12, 0, 0, // udp
    ];
    f.extend_from_slice(&[seq, 0xaa, 0xbb, 0xcc]);
    f
}

/// The same frame tagged with VLAN `vid`.
fn tagged(vid: u16, seq: u8) -> Vec<u8> {
    let mut f = udp(seq);
    let tag = [0x81, 0x00, (vid >> 8) as u8, vid as u8];
    f.splice(12..12, tag);
    f
}

fn config(text: &str) -> Config {
    Config::from_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// Config text of bridge br0 with the static `flows` (flow text) and the
/// `ports` (number, interface, backend; `None` leaves the backend out).
fn bridge(flows: &[&str], ports: &[(u16, &str, Option<&str>)]) -> String {
    let flows: Vec<String> = flows.iter().map(|f| format!("\"{f}\"")).collect();
    let mut text = format!(
        "[[bridges]]\nname = \"br0\"\nflows = [{}]\n",
        flows.join(", ")
    );
    for &(port, interface, backend) in ports {
        text += &bridge_port(port, Some(interface), backend);
    }
    text
}

/// One `[[bridges.ports]]` entry; `None` leaves that key out.
fn bridge_port(port: u16, interface: Option<&str>, backend: Option<&str>) -> String {
    let mut text = format!("[[bridges.ports]]\nport = {port}\n");
    if let Some(interface) = interface {
        text += &format!("interface = \"{interface}\"\n");
    }
    if let Some(backend) = backend {
        text += &format!("backend = \"{backend}\"\n");
    }
    text
}

/// Bridge br0 with one static flow and one memory port, 1 (m1).
fn one_port_bridge(flow: &str) -> String {
    bridge(&[flow], &[(1, "m1", Some("memory"))])
}

/// Bridge br0 with the static `flows` and two memory ports, 1 (m1) and
/// 2 (m2): the switch most runtime and daemon tests start from.
pub(crate) fn two_port_bridge(flows: &[&str]) -> String {
    bridge(
        flows,
        &[(1, "m1", Some("memory")), (2, "m2", Some("memory"))],
    )
}

/// Installs one flow (flow text) on br0 and waits until the workers
/// have it.
fn install(rt: &Runtime, flow: &str) {
    let fm = flowtext::parse_flow(flow).unwrap_or_else(|e| panic!("{e}"));
    let v = rt.flow_mod("br0", &fm).unwrap();
    assert!(rt.barrier("br0", v, Duration::from_secs(5)));
}

/// Runs the housekeeping until a flow expires; the FLOW_REMOVED the
/// agent was handed for it.
fn tick_until_removed(rt: &Runtime, rx: &mut agent::EventReceiver) -> ofp::FlowRemoved {
    let deadline = Instant::now() + Duration::from_secs(5);
    while rt.tick() == 0 {
        assert!(Instant::now() < deadline, "no flow expired");
        std::thread::sleep(Duration::from_millis(50));
    }
    match rx.try_recv() {
        Some(agent::SwitchEvent::FlowRemoved(r)) => r,
        other => panic!("{other:?}"),
    }
}

/// Polls `value` (every 10 ms, 10 s at most) until `done` holds for it;
/// the last value. The workers hand their counters over every
/// [`worker::SYNC_EVERY`] (or when they go to sleep), but a worker kept off
/// its CPU by a loaded machine may do so much later than a fixed sleep.
fn settled<T>(mut value: impl FnMut() -> T, done: impl Fn(&T) -> bool) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = value();
        if done(&v) || Instant::now() >= deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn start(text: &str) -> Runtime {
    Runtime::start(&config(text), &RuntimeOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn inject(port: &mut PatchPort, frames: &[Vec<u8>]) {
    let mut b = Burst::with_limit(frames.len().max(1));
    for f in frames {
        b.push(PacketBuf::from_slice(f)).unwrap();
    }
    while !b.is_empty() {
        port.tx_burst(&mut b).unwrap();
    }
}

fn collect(port: &mut PatchPort, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut b = Burst::with_limit(64);
    while got.len() < want && Instant::now() < deadline {
        b.clear();
        if port.rx_burst(&mut b).unwrap() == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        got.extend(b.drain().map(|p| p.data().to_vec()));
    }
    got
}

fn mode_line(mode: &str) -> String {
    if mode == "rx-worker-tx" {
        "[dataplane]\nmode = \"rx-worker-tx\"\nrx_threads = 1\nworker_threads = 2\ntx_threads = 1\n"
            .to_string()
    } else {
        "[dataplane]\nmode = \"run-to-completion\"\nworker_threads = 2\n".to_string()
    }
}

/// The seed-001 gateway over two bridges and a patch link, LANs on memory
/// ports.
fn gateway(mode: &str) -> String {
    let gw1 = gateway_bridge(
        "gw1",
        [
            "table=0,priority=100,in_port=1,dl_vlan=10,actions=pop_vlan,push_mpls:0x8847,set_field:100->mpls_label,output:2",
            "table=0,priority=100,in_port=2,dl_type=0x8847,mpls_label=200,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4106->vlan_vid,output:1",
        ],
        "lan1",
    );
    let gw2 = gateway_bridge(
        "gw2",
        [
            "table=0,priority=100,in_port=2,dl_type=0x8847,mpls_label=100,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4116->vlan_vid,output:1",
            "table=0,priority=100,in_port=1,dl_vlan=20,actions=pop_vlan,push_mpls:0x8847,set_field:200->mpls_label,output:2",
        ],
        "lan2",
    );
    format!(
        "{}{gw1}{gw2}\n[[patch_links]]\na = \"gw1:2\"\nb = \"gw2:2\"\n",
        mode_line(mode)
    )
}

/// One gateway bridge: its two flows, the LAN on memory port 1, the
/// patch link on port 2.
fn gateway_bridge(name: &str, [flow1, flow2]: [&str; 2], lan: &str) -> String {
    format!(
        "\n[[bridges]]\nname = \"{name}\"\nflows = [\"{flow1}\", \"{flow2}\"]\n{}{}",
        bridge_port(1, Some(lan), Some("memory")),
        bridge_port(2, None, Some("patch"))
    )
}

#[test]
fn gateway_vlan_to_mpls_to_vlan_across_two_bridges_both_modes() {
    for mode in ["run-to-completion", "rx-worker-tx"] {
        let rt = start(&gateway(mode));
        let mut lan1 = rt.take_memory_port("lan1").unwrap();
        let mut lan2 = rt.take_memory_port("lan2").unwrap();
        let sent: Vec<Vec<u8>> = (0..50).map(|i| tagged(10, i)).collect();
        inject(&mut lan1, &sent);
        let got = collect(&mut lan2, 50, Duration::from_secs(10));
        assert_eq!(got.len(), 50, "{mode}");
        for (i, f) in got.iter().enumerate() {
            assert_eq!(f, &tagged(20, i as u8), "{mode}: VLAN 10 became VLAN 20");
        }
        // And back: VLAN 20 → label 200 → VLAN 10.
        inject(&mut lan2, &[tagged(20, 7)]);
        assert_eq!(
            collect(&mut lan1, 1, Duration::from_secs(10)),
            vec![tagged(10, 7)]
        );
        let hits = |flows: &Vec<FlowLine>| flows.iter().map(|f| f.packets).sum::<u64>();
        let flows = settled(|| rt.flows("gw1").unwrap(), |f| hits(f) >= 51);
        assert_eq!(hits(&flows), 51, "{flows:?}");
        let report = rt.stop();
        assert!(report.contains("bridge gw1"), "{report}");
        assert!(report.contains("n_packets=50"), "{report}");
        assert!(report.contains("port 1 (lan1): rx 50 pkts"), "{report}");
    }
}

/// br0 dropping everything, memory ports 1 (m1) and 2 (m2).
fn one_bridge() -> String {
    two_port_bridge(&["table=0,priority=0,actions=drop"])
}

#[test]
fn flow_changes_reach_running_workers_and_barrier_waits() {
    let rt = start(&one_bridge());
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    inject(&mut m1, &[udp(1)]);
    assert!(collect(&mut m2, 1, Duration::from_millis(200)).is_empty());
    install(
        &rt,
        "table=0,priority=10,in_port=1,actions=push_vlan:0x8100,set_field:4099->vlan_vid,output:2",
    );
    inject(&mut m1, &[udp(2)]);
    assert_eq!(
        collect(&mut m2, 1, Duration::from_secs(5)),
        vec![tagged(3, 2)]
    );
    // A refused mod is an error and publishes nothing.
    let bad = flowtext::parse_flow("table=0,priority=5,actions=group:77").unwrap();
    assert!(rt.flow_mod("br0", &bad).is_err());
    let dropped = |c: &Counters| c.drops.no_output + c.drops.no_match;
    let c = settled(
        || rt.pipeline_counters("br0").unwrap().0,
        |c| dropped(c) >= 1,
    );
    assert_eq!(dropped(&c), 1, "{:?}", c.drops);
    rt.stop();
}

#[test]
fn link_down_shows_in_port_state_and_stops_output() {
    let rt = start(&one_bridge());
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    install(&rt, "table=0,priority=10,in_port=1,actions=output:2");
    assert_eq!(
        rt.port_info("br0", 2).unwrap().state & port_state::LINK_DOWN,
        0
    );
    let v = rt.set_link("br0", 2, false).unwrap();
    assert!(rt.barrier("br0", v, Duration::from_secs(5)));
    assert_ne!(
        rt.port_info("br0", 2).unwrap().state & port_state::LINK_DOWN,
        0
    );
    inject(&mut m1, &[udp(1)]);
    assert!(collect(&mut m2, 1, Duration::from_millis(300)).is_empty());
    let v = rt.set_link("br0", 2, true).unwrap();
    assert!(rt.barrier("br0", v, Duration::from_secs(5)));
    inject(&mut m1, &[udp(2)]);
    assert_eq!(collect(&mut m2, 1, Duration::from_secs(5)), vec![udp(2)]);
    rt.stop();
}

#[test]
fn missing_interfaces_are_all_named_and_nothing_starts() {
    let cfg = config(&bridge(
        &[],
        &[
            (1, "m1", Some("memory")),
            (2, "nosuchif0", None),
            (3, "nosuchif1", Some("afxdp")),
        ],
    ));
    let err = match Runtime::start(&cfg, &RuntimeOptions::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("started with missing interfaces"),
    };
    assert!(err.contains("port 2") && err.contains("nosuchif0"), "{err}");
    assert!(err.contains("port 3") && err.contains("nosuchif1"), "{err}");
    assert!(err.contains("afpacket") && err.contains("afxdp"), "{err}");
}

#[test]
fn refused_static_flow_names_its_source() {
    let cfg = config(&one_port_bridge("table=0,actions=group:77"));
    match Runtime::start(&cfg, &RuntimeOptions::default()) {
        Err(e) => {
            let s = e.to_string();
            assert!(s.contains("br0") && s.contains("group:77"), "{s}");
            assert!(s.contains("test.toml:"), "names the file: {s}");
        }
        Ok(_) => panic!("a flow to a missing table was accepted"),
    }
}

/// A flows file's flows are read again at the start, after the inline
/// ones: installed in order, a refused one named by its file and line,
/// and a file changed after the check refused whole.
#[test]
fn flows_file_is_read_again_at_the_start_and_must_be_the_one_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("br0.flows");
    let conf = |lines: &str| {
        std::fs::write(&file, lines).unwrap();
        config(&format!(
            "[[bridges]]\nname = \"br0\"\nflows = [\"priority=9,actions=drop\"]\nflows_file = {:?}\n{}",
            file.display().to_string(),
            bridge_port(1, Some("m1"), Some("memory"))
        ))
    };
    let cfg = conf("# two\npriority=2,in_port=1,actions=drop\n\npriority=1,actions=drop\n");
    let rt = Runtime::start(&cfg, &RuntimeOptions::default()).unwrap();
    let flows: Vec<String> = rt
        .flows("br0")
        .unwrap()
        .into_iter()
        .map(|f| f.text)
        .collect();
    assert_eq!(flows.len(), 3, "{flows:?}");
    for p in ["priority=9", "priority=2,in_port=1", "priority=1"] {
        assert!(flows.iter().any(|f| f.contains(p)), "{p}: {flows:?}");
    }
    drop(rt);

    // Checked, then refused by the pipeline: its file and line.
    let cfg = conf("priority=2,actions=drop\ntable=0,actions=group:77\n");
    let e = Runtime::start(&cfg, &RuntimeOptions::default())
        .err()
        .expect("a flow to a missing group was accepted")
        .to_string();
    assert!(
        e.contains(&format!("{}:2: table=0,actions=group:77", file.display())),
        "{e}"
    );

    // Checked, then changed: nothing starts.
    let cfg = conf("priority=2,actions=drop\n");
    std::fs::write(&file, "priority=2,actions=drop\npriority=3,actions=drop\n").unwrap();
    let e = Runtime::start(&cfg, &RuntimeOptions::default())
        .err()
        .expect("a changed flows file was installed")
        .to_string();
    assert!(
        e.contains("changed after the configuration was checked"),
        "{e}"
    );
    std::fs::remove_file(&file).unwrap();
    let e = Runtime::start(&cfg, &RuntimeOptions::default())
        .err()
        .expect("a missing flows file was accepted")
        .to_string();
    assert!(e.contains("cannot read it"), "{e}");
}

/// Tables built while the check reads the flows file (`Prebuild`) are
/// the tables a start builds; saved tables are restored there when their
/// digest is the bridge's and left to the start otherwise; a refusal
/// names the file and line and stops the start.
#[test]
fn tables_built_during_the_check_are_the_tables_a_start_builds() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("br0.flows");
    let conf = dir.path().join("fulmar.toml");
    std::fs::write(
        &conf,
        format!(
            "[[bridges]]\nname = \"br0\"\ngroups = [\"group_id=5,type=all,bucket=output:1\"]\nflows = [\"priority=9,actions=drop\"]\nflows_file = \"br0.flows\"\n{}",
            bridge_port(1, Some("m1"), Some("memory"))
        ),
    )
    .unwrap();
    let flows: String = (0..10_000)
        .map(|i| {
            format!(
                "priority={},in_port=1,dl_vlan={},actions=group:5\n",
                i % 3,
                i % 4000 + 1
            )
        })
        .collect();
    std::fs::write(&file, &flows).unwrap();
    let prebuilt = |saved: Option<std::path::PathBuf>| {
        let mut pre = Prebuild::new(saved);
        let cfg = Config::load_handing_over(&conf, &mut pre);
        (cfg, pre.finish())
    };
    let sorted = |rt: &Runtime| {
        let mut f: Vec<String> = rt
            .flows("br0")
            .unwrap()
            .into_iter()
            .map(|f| f.text)
            .collect();
        f.sort();
        f
    };
    let (cfg, built) = prebuilt(None);
    let cfg = cfg.unwrap();
    assert_eq!(format!("{built:?}"), "Prebuilt(1 bridge(s))");
    let opts = RuntimeOptions::default();
    let rt = Runtime::start_with(&cfg, &opts, &built).unwrap();
    assert_eq!(format!("{built:?}"), "Prebuilt(0 bridge(s))", "taken");
    let from_check = sorted(&rt);
    drop(rt);
    let rt = Runtime::start(&cfg, &opts).unwrap();
    let from_start = sorted(&rt);
    drop(rt);
    // (priority, vlan) pairs repeat only after 12,000 lines: all kept.
    assert_eq!(from_check.len(), 1 + 10_000);
    assert_eq!(from_check, from_start);

    // Saved tables whose digest is the bridge's: restored during the
    // check, and the file used once.
    let saved = dir.path().join("saved");
    std::fs::create_dir(&saved).unwrap();
    let saved_file = crate::saved::file_of(&saved, "br0");
    let digest = crate::saved::static_digest(&cfg.bridges[0]);
    let mut text =
        format!("static-digest {digest:016x}\ngroup group_id=5,type=all,bucket=output:1\n");
    for i in 0..5000 {
        text += &format!(
            "flow table=2,priority={},in_port=1,dl_vlan={},actions=drop\n",
            i / 4000,
            i % 4000 + 1
        );
    }
    std::fs::write(&saved_file, &text).unwrap();
    let (cfg2, built) = prebuilt(Some(saved.clone()));
    assert_eq!(cfg2.unwrap(), cfg);
    assert_eq!(format!("{built:?}"), "Prebuilt(1 bridge(s))");
    let opts = RuntimeOptions {
        saved_tables: Some(saved.clone()),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::start_with(&cfg, &opts, &built).unwrap();
    let restored = sorted(&rt);
    drop(rt);
    assert_eq!(restored.len(), 5000);
    assert!(
        restored.iter().all(|f| f.contains("table=2")),
        "{:?}",
        &restored[..2]
    );
    assert!(!saved_file.exists(), "used once");

    // Saved for another static configuration: not restored during the
    // check; the start sets the file aside and builds from the
    // configuration.
    std::fs::write(
        &saved_file,
        text.replace(&format!("{digest:016x}"), "0123456789abcdef"),
    )
    .unwrap();
    let (_, built) = prebuilt(Some(saved.clone()));
    assert_eq!(format!("{built:?}"), "Prebuilt(0 bridge(s))");
    let rt = Runtime::start_with(&cfg, &opts, &built).unwrap();
    assert_eq!(sorted(&rt), from_start);
    drop(rt);
    assert!(!saved_file.exists());
    let mut unused = saved_file.as_os_str().to_owned();
    unused.push(".unused");
    assert!(std::path::Path::new(&unused).exists());

    // A saved file that cannot be read is left to the start (set aside).
    std::fs::write(&saved_file, "").unwrap();
    let (_, built) = prebuilt(Some(saved.clone()));
    assert_eq!(format!("{built:?}"), "Prebuilt(0 bridge(s))");
    std::fs::remove_file(&saved_file).unwrap();

    // A group the flows file names, removed: checked with a warning,
    // refused while building; the start fails naming the line.
    std::fs::write(
        &conf,
        std::fs::read_to_string(&conf)
            .unwrap()
            .replace("groups = [\"group_id=5,type=all,bucket=output:1\"]\n", ""),
    )
    .unwrap();
    let (cfg, built) = prebuilt(None);
    let cfg = cfg.unwrap();
    let e = Runtime::start_with(&cfg, &RuntimeOptions::default(), &built)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains(&format!("{}:1:", file.display())) && e.contains("group:5"),
        "{e}"
    );
}

#[test]
fn openflow_switch_packet_out_packet_in_barrier_and_stats() {
    use agent::{Switch, SwitchEvent};
    use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
    let rt = start(&two_port_bridge(&[
        "table=0,priority=0,actions=CONTROLLER:64",
    ]));
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    let (tx, mut rx) = agent::event_channel(16);
    let sw = rt.switch("br0", tx).unwrap();
    assert_eq!(sw.features().datapath_id, 1);
    assert_eq!(
        sw.ports().len(),
        2,
        "the injection port is not an OpenFlow port"
    );
    // Packet-out: straight to port 2, through the dataplane.
    sw.packet_out(&ofp::PacketOut {
        buffer_id: ofp::consts::OFP_NO_BUFFER,
        in_port: ofp::consts::port_no::CONTROLLER,
        actions: vec![ofp::Action::Output {
            port: 2,
            max_len: 0,
        }],
        data: udp(9),
    })
    .unwrap();
    assert_eq!(collect(&mut m2, 1, Duration::from_secs(5)), vec![udp(9)]);
    // A table miss becomes a packet-in event from a worker.
    inject(&mut m1, &[udp(4)]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let ev = loop {
        if let Some(ev) = rx.try_recv() {
            break ev;
        }
        assert!(Instant::now() < deadline, "no packet-in");
        std::thread::sleep(Duration::from_millis(5));
    };
    match ev {
        SwitchEvent::PacketIn(pi) => assert_eq!(pi.data, udp(4)),
        other => panic!("{other:?}"),
    }
    // Flow mod + barrier: in force for the next packet.
    let fm = flowtext::parse_flow("table=0,priority=10,in_port=1,actions=output:2").unwrap();
    sw.flow_mod(&fm).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(sw.barrier());
    inject(&mut m1, &[udp(5)]);
    assert_eq!(collect(&mut m2, 1, Duration::from_secs(5)), vec![udp(5)]);
    std::thread::sleep(worker::SYNC_EVERY * 3);
    let req = MultipartRequestBody::Flow(ofp::stats::FlowStatsRequest {
        table_id: 0xff,
        out_port: ofp::consts::port_no::ANY,
        out_group: ofp::consts::group_no::ANY,
        cookie: 0,
        cookie_mask: 0,
        match_: ofp::Match::default(),
    });
    match sw.multipart(&req).unwrap() {
        MultipartReplyBody::Flow { stats } => {
            let hits: Vec<u64> = stats.iter().map(|s| s.packet_count).collect();
            assert_eq!(stats.len(), 2);
            assert!(hits.contains(&1), "{hits:?}");
        }
        other => panic!("{other:?}"),
    }
    // A link change becomes a PORT_STATUS event.
    rt.set_link("br0", 2, false);
    match rx.try_recv() {
        Some(SwitchEvent::PortStatus(ps)) => {
            assert_eq!(ps.desc.port_no, 2);
            assert_ne!(ps.desc.state & port_state::LINK_DOWN, 0);
        }
        other => panic!("{other:?}"),
    }
    rt.stop();
}

#[test]
fn hard_timeout_removes_a_flow_from_running_workers() {
    let rt = start(&one_bridge());
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    let installed = Instant::now();
    install(
        &rt,
        "table=0,priority=10,hard_timeout=1,in_port=1,actions=output:2",
    );
    inject(&mut m1, &[udp(1)]);
    assert_eq!(collect(&mut m2, 1, Duration::from_secs(5)).len(), 1);
    // Not removed before its hard timeout: checked when this point came
    // well inside it (a loaded machine may take a second to get here).
    let early = rt.tick();
    if installed.elapsed() < Duration::from_millis(900) {
        assert_eq!(early, 0);
    }
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(early + rt.tick(), 1);
    std::thread::sleep(Duration::from_millis(50));
    inject(&mut m1, &[udp(2)]);
    assert!(collect(&mut m2, 1, Duration::from_millis(300)).is_empty());
    assert_eq!(
        rt.flows("br0").unwrap().len(),
        1,
        "only the table-miss drop"
    );
    rt.stop();
}

/// one_bridge() with `flow` installed and 50 frames from m1 forwarded by
/// it to m2; the runtime, m1, the frames, m2, and the agent's end of an
/// event queue with a switch handing events to it.
struct Forwarded {
    rt: Runtime,
    m1: PatchPort,
    m2: PatchPort,
    frames: Vec<Vec<u8>>,
    rx: agent::EventReceiver,
    sw: openflow::BridgeSwitch,
}

fn forwarded(flow: &str) -> Forwarded {
    let rt = start(&one_bridge());
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    let (tx, rx) = agent::event_channel(16);
    let sw = rt.switch("br0", tx).unwrap();
    install(&rt, flow);
    let frames: Vec<Vec<u8>> = (0..50u8).map(udp).collect();
    inject(&mut m1, &frames);
    assert_eq!(collect(&mut m2, 50, Duration::from_secs(5)).len(), 50);
    Forwarded {
        rt,
        m1,
        m2,
        frames,
        rx,
        sw,
    }
}

#[test]
fn a_flow_removed_at_its_hard_timeout_reports_every_frame_it_forwarded() {
    // What the expiry reports is what the workers counted (traffic at
    // the moment of expiry: tests/e2e/test_faults.py).
    let Forwarded { rt, mut rx, .. } = forwarded(
        "table=0,cookie=0x9,priority=10,in_port=1,hard_timeout=1,send_flow_rem,actions=output:2",
    );
    let r = tick_until_removed(&rt, &mut rx);
    assert_eq!((r.cookie, r.packet_count), (0x9, 50), "{r:?}");
    rt.stop();
}

#[test]
fn a_deleted_flow_reports_what_it_forwarded_until_the_delete_was_published() {
    // A delete is published at the end of the agent's batch (flush), so
    // the workers forward by the entry until then; its FLOW_REMOVED goes
    // out after that publish and counts those frames too, even when a
    // statistics request collected the workers' counters in between or
    // the expiry ran.
    use agent::Switch as _;
    let Forwarded {
        rt,
        mut m1,
        mut m2,
        frames,
        mut rx,
        sw,
    } = forwarded("table=0,cookie=0x9,priority=10,in_port=1,send_flow_rem,actions=output:2");
    let delete = ofp::FlowMod {
        command: ofp::FlowModCommand::Delete,
        cookie: 0x9,
        cookie_mask: u64::MAX,
        ..ofp::FlowMod::default()
    };
    sw.flow_mod(&delete).unwrap();
    assert!(rx.try_recv().is_none(), "reported before it was published");
    inject(&mut m1, &frames[..30]);
    assert_eq!(collect(&mut m2, 30, Duration::from_secs(5)).len(), 30);
    let b = rt.bridge("br0").unwrap();
    b.request_counters(Duration::from_secs(1));
    b.collect(&mut b.control());
    // The housekeeping's expiry, removing nothing, publishes nothing and
    // reports nothing.
    assert_eq!(rt.tick(), 0);
    assert!(rx.try_recv().is_none(), "reported before it was published");
    sw.flush();
    match rx.try_recv() {
        Some(agent::SwitchEvent::FlowRemoved(r)) => {
            assert_eq!((r.cookie, r.packet_count), (0x9, 80), "{r:?}")
        }
        other => panic!("{other:?}"),
    }
    assert!(b.control().removing.is_empty());
    rt.stop();
}

#[test]
fn a_worker_going_to_sleep_hands_its_counters_over_first() {
    // So that a request for counters (a statistics request, a delete's
    // FLOW_REMOVED) need neither wake nor wait for a sleeping worker.
    let Forwarded { rt, .. } =
        forwarded("table=0,cookie=0x9,priority=10,in_port=1,actions=output:2");
    let b = rt.bridge("br0").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !b.workers.iter().all(|w| w.asleep.load(Ordering::SeqCst)) {
        assert!(Instant::now() < deadline, "the workers never slept");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut c = b.control();
    b.collect(&mut c);
    let hits: u64 =
        c.dp.state
            .tables
            .entries()
            .filter(|e| e.cookie == 0x9)
            .filter_map(|e| c.dp.state.tables.counter(e.id))
            .map(|n| n.packets)
            .sum();
    assert_eq!(hits, 50);
    drop(c);
    rt.stop();
}

#[test]
fn packet_ins_not_handed_over_are_counted_by_why() {
    let rt = start(&one_port_bridge("table=0,priority=0,actions=CONTROLLER:64"));
    let mut m1 = rt.take_memory_port("m1").unwrap();
    // Room for one packet-in, and nobody reading it.
    let (tx, _rx) = agent::event_channel(1);
    let _sw = rt.switch("br0", tx).unwrap();
    let up = rt.controller_flag("br0").unwrap();
    let drop_named = |name: &str| {
        let r = rt.bridge_report("br0", 0, true).unwrap();
        r.drops
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0, |(_, n)| *n)
    };
    let wait_for = |name: &str, n: u64| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while drop_named(name) != n {
            assert!(
                Instant::now() < deadline,
                "{name}: {} not {n}",
                drop_named(name)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    for i in 0..3 {
        inject(&mut m1, &[udp(i)]);
    }
    wait_for("packet_in_agent_queue_full", 2);
    up.store(false, std::sync::atomic::Ordering::Relaxed);
    for i in 3..5 {
        inject(&mut m1, &[udp(i)]);
    }
    wait_for("packet_in_no_controller", 2);
    assert_eq!(drop_named("packet_in_agent_queue_full"), 2);
    rt.stop();
}

#[test]
fn statistics_include_every_packet_forwarded_before_the_request() {
    use agent::Switch;
    use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
    let rt = start(&one_bridge());
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    let (tx, _rx) = agent::event_channel(16);
    let sw = rt.switch("br0", tx).unwrap();
    install(&rt, "table=0,priority=10,in_port=1,actions=output:2");
    for round in 1..=5u64 {
        inject(&mut m1, &[udp(round as u8)]);
        assert_eq!(collect(&mut m2, 1, Duration::from_secs(5)).len(), 1);
        // Asked at once (well inside the workers' periodic hand-over), the
        // table counters already hold this packet.
        let Ok(MultipartReplyBody::Table { stats }) = sw.multipart(&MultipartRequestBody::Table)
        else {
            panic!("table stats");
        };
        let t0 = stats.iter().find(|t| t.table_id == 0).unwrap();
        assert_eq!((t0.lookup_count, t0.matched_count), (round, round));
    }
    rt.stop();
}

#[test]
fn the_runtime_housekeeping_hands_its_flow_removed_to_the_agent() {
    // The daemon's own tick and the agent's race to expire a flow; the
    // daemon's used to drop the FLOW_REMOVED of what it removed.
    let rt = start(&one_bridge());
    let (tx, mut rx) = agent::event_channel(16);
    let _sw = rt.switch("br0", tx).unwrap();
    install(
        &rt,
        "table=0,cookie=0x77,priority=10,in_port=1,idle_timeout=1,send_flow_rem,actions=output:2",
    );
    let r = tick_until_removed(&rt, &mut rx);
    assert_eq!(r.cookie, 0x77);
    assert_eq!(
        r.reason,
        ofp::flow_removed::flow_removed_reason::IDLE_TIMEOUT
    );
    rt.stop();
}

/// OpenFlow port statistics of `port`.
fn of_port_stats(sw: &openflow::BridgeSwitch, port: u32) -> ofp::stats::PortStats {
    use agent::Switch;
    use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
    match sw.multipart(&MultipartRequestBody::PortStats { port_no: port }) {
        Ok(MultipartReplyBody::PortStats { stats }) => stats
            .into_iter()
            .find(|s| s.port_no == port)
            .unwrap_or_else(|| panic!("no stats for port {port}")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_dataplane_drop_shows_in_openflow_port_stats_and_by_name() {
    // rx-worker-tx with the smallest rings, and nobody reading port 2's far
    // end until the end: its patch ring fills, the TX thread's burst
    // overflows, the worker → TX ring overflows.
    let rt = start(&format!(
        "[dataplane]\nmode = \"rx-worker-tx\"\nrx_threads = 1\nworker_threads = 1\n\
         tx_threads = 1\nrx_ring_size = 64\ntx_ring_size = 64\n{}",
        two_port_bridge(&["table=0,priority=10,in_port=1,actions=output:2"])
    ));
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    let (tx, _rx) = agent::event_channel(16);
    let sw = rt.switch("br0", tx).unwrap();
    let sent = 3 * ports::PATCH_RING as u64;
    for chunk in 0..sent / 64 {
        let frames: Vec<Vec<u8>> = (0..64).map(|i| udp((chunk + i) as u8)).collect();
        inject(&mut m1, &frames);
    }
    // Settled: everything sent was read and either forwarded or dropped.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut p1, mut p2) = (of_port_stats(&sw, 1), of_port_stats(&sw, 2));
    while Instant::now() < deadline
        && (p1.rx_packets + p1.rx_dropped < sent || p2.tx_packets + p2.tx_dropped < p1.rx_packets)
    {
        std::thread::sleep(Duration::from_millis(20));
        (p1, p2) = (of_port_stats(&sw, 1), of_port_stats(&sw, 2));
    }
    std::thread::sleep(Duration::from_millis(50));
    (p1, p2) = (of_port_stats(&sw, 1), of_port_stats(&sw, 2));
    assert_eq!(p1.rx_packets + p1.rx_dropped, sent, "{p1:?}");
    assert_eq!(p2.tx_packets + p2.tx_dropped, p1.rx_packets, "{p2:?}");
    // Port 2's far end holds PATCH_RING frames and the rings and bursts a
    // few hundred more: the rest was dropped, on the way in (the RX →
    // worker ring) or out (the TX ring and burst, port 2 refusing).
    assert!(
        p1.rx_dropped + p2.tx_dropped >= sent - 2 * ports::PATCH_RING as u64,
        "{p1:?} {p2:?}"
    );
    // What port 2 counts as sent is exactly what came out of it.
    let out = collect(&mut m2, sent as usize, Duration::from_secs(2));
    assert_eq!(out.len() as u64, p2.tx_packets);
    // The report names every drop: the causes add up to the ports' drops.
    let report = rt.report(10);
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("drops:"))
        .unwrap();
    let named: u64 = line
        .split_whitespace()
        .filter_map(|w| w.split_once('=')?.1.parse::<u64>().ok())
        .sum();
    assert_eq!(named, p1.rx_dropped + p2.tx_dropped, "{report}");
    rt.stop();
}

#[test]
fn packet_outs_beyond_the_injection_ring_are_sent_or_counted() {
    // One packet-out with three rings' worth of outputs to port 2 (one
    // handover to the dataplane), then a ring's worth of single ones:
    // every copy comes out of port 2 or is one of port 2's counted drops,
    // and port 2 counts as sent exactly what came out. (The injection ring
    // once dropped what did not fit, counted nowhere, while the port
    // statistics claimed it sent.)
    use agent::Switch;
    let rt = start(&one_bridge());
    let mut m2 = rt.take_memory_port("m2").unwrap();
    let (tx, _rx) = agent::event_channel(16);
    let sw = rt.switch("br0", tx).unwrap();
    let copies = 3 * ports::PATCH_RING;
    let singles = ports::PATCH_RING;
    let sent = copies + singles;
    // Reads port 2's far end until all came, or nothing more comes for a
    // second after the last packet-out.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let collector = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut quiet_since = None;
            while got.len() < sent {
                let more = collect(&mut m2, sent - got.len(), Duration::from_millis(10));
                if !more.is_empty() || !done.load(std::sync::atomic::Ordering::Relaxed) {
                    quiet_since = None;
                } else if quiet_since.get_or_insert_with(Instant::now).elapsed()
                    > Duration::from_secs(1)
                {
                    break;
                }
                got.extend(more);
            }
            (got, m2)
        })
    };
    let out2 = ofp::Action::Output {
        port: 2,
        max_len: 0,
    };
    let po = |n: usize| ofp::PacketOut {
        buffer_id: ofp::consts::OFP_NO_BUFFER,
        in_port: ofp::consts::port_no::CONTROLLER,
        actions: vec![out2.clone(); n],
        data: udp(7),
    };
    sw.packet_out(&po(copies)).unwrap();
    let one = po(1);
    for _ in 0..singles {
        sw.packet_out(&one).unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut out, mut m2) = collector.join().unwrap();
    // The collector gives up after a quiet second, which a worker kept
    // off its CPU on a loaded machine can outlast: until every copy is
    // sent or dropped (10 s at most), what port 2 sent is read on here.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut p2 = of_port_stats(&sw, 2);
    while Instant::now() < deadline
        && (p2.tx_packets + p2.tx_dropped < sent as u64 || (out.len() as u64) < p2.tx_packets)
    {
        let want = sent.saturating_sub(out.len()).max(1);
        out.extend(collect(&mut m2, want, Duration::from_millis(10)));
        p2 = of_port_stats(&sw, 2);
    }
    out.extend(collect(&mut m2, 1, Duration::from_millis(100)));
    let lost_at_injection = rt
        .bridge("br0")
        .unwrap()
        .port_drops()
        .get(&2)
        .map_or(0, |d| d.tx_ring_full);
    println!(
        "{sent} copies: {} out of port 2, {} dropped ({lost_at_injection} at the injection ring)",
        out.len(),
        p2.tx_dropped
    );
    assert!(out.iter().all(|f| *f == udp(7)));
    assert_eq!(out.len() as u64, p2.tx_packets, "{p2:?}");
    assert_eq!(p2.tx_packets + p2.tx_dropped, sent as u64, "{p2:?}");
    rt.stop();
}

/// Reads OpenFlow messages from `s` until `until` returns true for one
/// (returned) or `timeout` passes (`None`); every message read is kept in
/// `seen` as (type, xid).
fn read_until(
    s: &mut std::net::TcpStream,
    framer: &mut ofp::Framer,
    seen: &mut Vec<(u8, u32)>,
    timeout: Duration,
    until: impl Fn(&ofp::Message) -> bool,
) -> Option<ofp::Message> {
    use std::io::Read;
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    loop {
        while let Ok(Some(raw)) = framer.next_message() {
            let (xid, m) = ofp::Message::decode(&raw).unwrap();
            seen.push((raw[1], xid));
            if until(&m) {
                return Some(m);
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => {
                framer.feed(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// A worker that never takes the new tables (a reader registered with the
/// bridge's publisher that neither refreshes nor parks, as a worker stuck
/// in a burst would be): a controller sending FLOW_MOD + BARRIER gets no
/// BARRIER_REPLY while it is stuck — not after the old 2 s limit either —
/// and gets it once the worker moves on. Idle workers, by contrast, do not
/// hold a barrier back at all.
#[test]
fn a_stalled_worker_never_gets_a_barrier_reply_claiming_completion() {
    use std::io::Write;
    let rt = start(&one_bridge());
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    let (tx, _events) = agent::event_channel(16);
    let sw = Arc::new(rt.switch("br0", tx).unwrap());
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = tokio_rt.block_on(async {
        let agent = agent::Agent::new(sw, agent::AgentConfig::default());
        let (addr, _listener) = agent
            .listen(&"ptcp:0:127.0.0.1".parse().unwrap())
            .await
            .unwrap();
        addr.tcp().unwrap()
    });
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut framer = ofp::Framer::new();
    let mut seen = Vec::new();
    s.write_all(&ofp::Message::Hello(ofp::hello::Hello::default()).encode(1))
        .unwrap();
    let barrier_reply = |m: &ofp::Message| matches!(m, ofp::Message::BarrierReply);
    // First with every worker idle: the barrier is answered at once.
    let fm = flowtext::parse_flow("table=0,priority=5,in_port=2,actions=drop").unwrap();
    s.write_all(&ofp::Message::FlowMod(fm).encode(2)).unwrap();
    s.write_all(&ofp::Message::BarrierRequest.encode(3))
        .unwrap();
    assert!(
        read_until(
            &mut s,
            &mut framer,
            &mut seen,
            Duration::from_secs(10),
            barrier_reply
        )
        .is_some(),
        "{seen:?}"
    );
    // Now a worker that is stuck.
    let stalled = rt.bridge("br0").unwrap().publisher.reader();
    let fm = flowtext::parse_flow("table=0,priority=10,in_port=1,actions=output:2").unwrap();
    s.write_all(&ofp::Message::FlowMod(fm).encode(4)).unwrap();
    s.write_all(&ofp::Message::BarrierRequest.encode(5))
        .unwrap();
    let early = read_until(
        &mut s,
        &mut framer,
        &mut seen,
        Duration::from_secs(3),
        barrier_reply,
    );
    assert!(
        early.is_none(),
        "a BARRIER_REPLY while a worker is stuck: {seen:?}"
    );
    assert!(
        !seen.iter().any(|&(_, xid)| xid == 5),
        "nothing answers the barrier early: {seen:?}"
    );
    drop(stalled);
    let late = read_until(
        &mut s,
        &mut framer,
        &mut seen,
        Duration::from_secs(10),
        barrier_reply,
    );
    assert!(late.is_some(), "{seen:?}");
    assert_eq!(seen.last().map(|&(_, xid)| xid), Some(5));
    // And what it acknowledged is in force.
    inject(&mut m1, &[udp(1)]);
    assert_eq!(collect(&mut m2, 1, Duration::from_secs(5)), vec![udp(1)]);
    drop(s);
    rt.stop();
}

#[cfg(not(feature = "dpdk"))]
#[test]
fn dpdk_ports_without_the_dpdk_build_are_a_clear_error() {
    let cfg = config(&(bridge(&[], &[(1, "d0", Some("dpdk"))]) + "dpdk_devargs = \"net_null0\"\n"));
    let err = match Runtime::start(&cfg, &RuntimeOptions::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("started a DPDK port without DPDK"),
    };
    assert!(
        err.contains("port 1") && err.contains("built without DPDK"),
        "{err}"
    );
}

/// Two DPDK null devices, in and out, in both thread modes and with the
/// threads placed by a policy: every generated frame reaches the output
/// port's counters, and the stats name each thread's core and queues.
#[cfg(feature = "dpdk")]
#[test]
fn dpdk_null_ports_forward_in_both_modes_with_placed_queues() {
    for (mode, extra) in [
        (
            "run-to-completion",
            "worker_threads = 2\ncore_assign = \"balance\"",
        ),
        ("rx-worker-tx", "rx_threads = 2\ncore_assign = \"minimum\""),
    ] {
        let dev = format!("net_null{}", if mode == "rx-worker-tx" { 11 } else { 10 });
        let text = format!(
            r#"
[dpdk]
eal_args = ["-l", "0", "--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--no-telemetry"]
[dataplane]
mode = "{mode}"
{extra}
[[bridges]]
name = "br0"
flows = ["priority=1,in_port=1,actions=output:2"]
[[bridges.ports]]
port = 1
interface = "in"
backend = "dpdk"
dpdk_devargs = "{dev},size=64"
dpdk_mbufs = 8191
[[bridges.ports]]
port = 2
interface = "out"
backend = "dpdk"
dpdk_devargs = "{dev}9,size=64"
dpdk_mbufs = 4095
"#
        );
        let cfg = config(&text);
        let rt = Runtime::start(&cfg, &RuntimeOptions::default()).unwrap();
        let port_of =
            |r: &BridgeReport, n: u32| r.ports.iter().find(|p| p.port == n).unwrap().clone();
        // Until both ports count 1000 frames (10 s at most), not for a
        // fixed 300 ms that a loaded machine may give the threads little of.
        let report = settled(
            || rt.bridge_report("br0", 0, true).unwrap(),
            |r| port_of(r, 1).rx_packets > 1000 && port_of(r, 2).tx_packets > 1000,
        );
        rt.stop();
        let port = |n: u32| port_of(&report, n);
        assert!(port(1).rx_packets > 1000, "{mode}: {:?}", port(1));
        assert!(port(2).tx_packets > 1000, "{mode}: {:?}", port(2));
        // Both receive queues of port 1 are read, each by its own thread.
        let reads: Vec<Vec<String>> = report
            .threads
            .iter()
            .filter(|t| t.reads.iter().any(|r| r.starts_with("1:")))
            .map(|t| t.reads.clone())
            .collect();
        assert_eq!(reads.len(), 2, "{mode}: {:?}", report.threads);
        assert!(report.threads.iter().all(|t| t.core.is_some()), "{mode}");
    }
}

#[test]
fn final_counters_list_the_busiest_flows_not_every_flow() {
    // 250 flows, traffic on one: the stop report names the total and
    // lists FINAL_REPORT_FLOWS flows, the busy one first.
    use agent::Switch;
    let rt = start(&one_bridge());
    let (tx, _rx) = agent::event_channel(16);
    let sw = rt.switch("br0", tx).unwrap();
    for i in 0..250 {
        let text = format!(
            "table=0,priority=10,in_port=1,dl_vlan={},actions=output:2",
            i + 1
        );
        sw.flow_mod(&flowtext::parse_flow(&text).unwrap()).unwrap();
    }
    let busy = flowtext::parse_flow("table=0,priority=5,in_port=1,actions=output:2").unwrap();
    sw.flow_mod(&busy).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(sw.barrier());
    let mut m1 = rt.take_memory_port("m1").unwrap();
    let mut m2 = rt.take_memory_port("m2").unwrap();
    inject(&mut m1, &[udp(1), udp(2), udp(3)]);
    assert_eq!(collect(&mut m2, 3, Duration::from_secs(5)).len(), 3);
    std::thread::sleep(worker::SYNC_EVERY * 3);
    let out = rt.stop();
    let flow_lines: Vec<&str> = out.lines().filter(|l| l.contains("n_packets=")).collect();
    assert_eq!(flow_lines.len(), FINAL_REPORT_FLOWS, "{out}");
    assert!(
        out.contains(&format!(
            "flows: 252 (the {FINAL_REPORT_FLOWS} busiest below)"
        )),
        "{out}"
    );
    assert!(
        flow_lines[0].starts_with("  n_packets=3 "),
        "{}",
        flow_lines[0]
    );
}

#[test]
fn a_bridge_is_found_by_name_until_removed_and_its_name_can_run_again() {
    let text = format!(
        "{}[[bridges]]\nname = \"br1\"\n\
         [[bridges.ports]]\nport = 1\ninterface = \"m2\"\nbackend = \"memory\"\n",
        one_port_bridge("priority=1,actions=drop")
    );
    let cfg = config(&text);
    let br0 = cfg.bridge("br0").unwrap();
    let rt = start(&text);
    assert_eq!(rt.bridge_names(), ["br0", "br1"]);
    let e = rt.add_bridge(&cfg, br0).unwrap_err();
    assert_eq!(e.to_string(), "bridge \"br0\" already runs");
    assert_eq!(rt.flow_count("br0"), Some(1));

    rt.remove_bridge("br0").unwrap();
    assert_eq!(rt.bridge_names(), ["br1"]);
    assert_eq!(rt.flow_count("br0"), None);
    let no = "no bridge named \"br0\" runs";
    assert_eq!(rt.remove_bridge("br0").unwrap_err().to_string(), no);
    assert_eq!(rt.remove_port("br0", 1).unwrap_err().to_string(), no);
    let e = rt.set_port_vlan("br0", 1, Default::default()).unwrap_err();
    assert_eq!(e.to_string(), no);
    assert_eq!(rt.flow_count("br1"), Some(0), "the other bridge runs on");

    // The same name runs again, last in order, with its tables rebuilt.
    rt.add_bridge(&cfg, br0).unwrap();
    assert_eq!(rt.bridge_names(), ["br1", "br0"]);
    assert_eq!(rt.flow_count("br0"), Some(1));
    install(&rt, "priority=2,actions=drop");
    assert_eq!(rt.flow_count("br0"), Some(2));
    let report = rt.stop();
    let (br1, br0) = (report.find("br1").unwrap(), report.find("br0").unwrap());
    assert!(
        br1 < br0,
        "the final report follows the bridges' order:\n{report}"
    );
}

#[test]
fn deleting_a_group_or_meter_removes_the_flows_that_use_it() {
    use agent::Switch;
    let rt = start(&one_port_bridge("priority=1,actions=drop"));
    let sw = rt.bridge_switch("br0").unwrap();
    let group = |t: &str, c| flowtext::parse_group_command(t, c).unwrap_or_else(|e| panic!("{e}"));
    let meter = |t: &str, c| flowtext::parse_meter_command(t, c).unwrap_or_else(|e| panic!("{e}"));
    sw.group_mod(&group(
        "group_id=1,type=all,bucket=output:1",
        ofp::GroupModCommand::Add,
    ))
    .unwrap();
    sw.meter_mod(&meter(
        "meter=1,kbps,bands=type=drop,rate=1000",
        ofp::MeterModCommand::Add,
    ))
    .unwrap();
    install(&rt, "priority=5,udp,actions=group:1");
    install(&rt, "priority=6,tcp,actions=meter:1,output:1");
    assert_eq!(rt.flow_count("br0"), Some(3));
    // A group or meter that does not exist is refused, nothing changed.
    assert!(sw
        .group_mod(&group(
            "group_id=9,type=all,bucket=output:1",
            ofp::GroupModCommand::Modify
        ))
        .is_err());
    assert_eq!(rt.flow_count("br0"), Some(3));
    sw.group_mod(&group("group_id=1", ofp::GroupModCommand::Delete))
        .unwrap();
    assert_eq!(rt.flow_count("br0"), Some(2));
    sw.meter_mod(&meter("meter=1", ofp::MeterModCommand::Delete))
        .unwrap();
    assert_eq!(rt.flow_count("br0"), Some(1));
    rt.stop();
}
