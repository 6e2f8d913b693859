//! The daemon over memory ports (no root needed): transactions applied
//! while traffic flows lose none of it; a bad transaction changes nothing;
//! the state file follows each commit and loads back to the same switch.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::patch::PatchPort;
use dataplane::{Burst, PacketBuf, PortBackend};

use super::*;

/// The daemon's starting config: br0 forwarding ports 1 and 3 to 2.
fn config_text() -> String {
    crate::tests::two_port_bridge(&[
        "table=0,priority=10,in_port=1,actions=output:2",
        "table=0,priority=10,in_port=3,actions=output:2",
    ])
}

fn frame(seq: u32) -> Vec<u8> {
    let mut f = vec![
        0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00, // eth
        0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 10, 1, 10, 0, 10, 2, // ip
        0x04, 0xd2, 0x16, 0x2e, 0, 12, 0, 0, // udp
    ];
    f.extend_from_slice(&seq.to_be_bytes());
    f
}

fn start(dir: &Path) -> Daemon {
    start_with(dir, &config_text(), None)
}

/// A daemon of `config` (written to DIR/switch.toml, its state file),
/// saving and restoring its tables in `saved`.
pub(super) fn start_with(dir: &Path, config: &str, saved: Option<&Path>) -> Daemon {
    let path = dir.join("switch.toml");
    std::fs::write(&path, config).unwrap();
    let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let opts = DaemonOptions {
        runtime: RuntimeOptions {
            watch_links: false,
            saved_tables: saved.map(Path::to_path_buf),
            ..RuntimeOptions::default()
        },
        state_file: Some(path),
        ..DaemonOptions::default()
    };
    Daemon::start(cfg, opts).unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fulmar-daemon-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ops(words: &str) -> Vec<Op> {
    let w: Vec<&str> = words.split_whitespace().collect();
    datastore::parse_ctl(&w).unwrap_or_else(|e| panic!("{words}: {e}"))
}

/// Sends frames into `m1` until told to stop, paced by what `m2` has
/// given back (how many so far in `received`), and returns (sent,
/// received) once everything is in.
fn stream(
    mut m1: PatchPort,
    mut m2: PatchPort,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU32>,
) -> (u32, u32) {
    let (mut sent, mut got) = (0u32, 0u32);
    let mut b = Burst::with_limit(32);
    let mut rx = Burst::with_limit(64);
    let mut next_expected = 0u32;
    loop {
        if !stop.load(Ordering::Acquire) && sent - got < 256 {
            b.clear();
            for _ in 0..16 {
                let _ = b.push(PacketBuf::from_slice(&frame(sent)));
                sent += 1;
            }
            while !b.is_empty() {
                m1.tx_burst(&mut b).unwrap();
            }
        }
        rx.clear();
        let n = m2.rx_burst(&mut rx).unwrap();
        for p in rx.iter() {
            let d = p.data();
            let seq = u32::from_be_bytes(d[d.len() - 4..].try_into().unwrap());
            assert_eq!(seq, next_expected, "frames out of order or lost");
            next_expected += 1;
        }
        got += n as u32;
        received.store(got, Ordering::Release);
        if stop.load(Ordering::Acquire) && got == sent {
            return (sent, got);
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

#[test]
fn transactions_under_traffic_lose_nothing_and_persist() {
    let dir = tmpdir("live");
    let d = start(&dir);
    let m1 = d.runtime().take_memory_port("m1").unwrap();
    let m2 = d.runtime().take_memory_port("m2").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let received = Arc::new(AtomicU32::new(0));
    let r2 = received.clone();
    let traffic = std::thread::spawn(move || stream(m1, m2, s2, r2));
    // Traffic flows before the first change: wait for it rather than for
    // a fixed 100 ms, which a loaded machine can spend starting the
    // threads (and then the stream is too short to mean anything).
    let deadline = Instant::now() + Duration::from_secs(10);
    while received.load(Ordering::Acquire) <= 500 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let changes = [
        "add-port br0 m3 type=memory",
        "add-br br1 -- add-port br1 m9 type=memory",
        "set-fail-mode br0 standalone",
        "set-controller br0 ptcp:0:127.0.0.1",
        "del-controller br0",
        "set-fail-mode br0 secure",
        "set bridge:br1 dpid=0x99",
    ];
    for (i, c) in changes.iter().enumerate() {
        let o = d
            .transact(&ops(c), false)
            .unwrap_or_else(|e| panic!("{c}: {e}"));
        assert_eq!(o.version, i as u64 + 2, "{c}");
        assert!(!o.changes.is_empty(), "{c}");
    }
    stop.store(true, Ordering::Release);
    let (sent, got) = traffic.join().unwrap();
    assert!(sent > 500, "too little traffic to mean anything: {sent}");
    assert_eq!(sent, got);
    assert!(d.runtime().take_memory_port("m3").is_some());
    let show = d.show();
    let br0 = &show.bridges[0];
    assert_eq!(
        br0.ports.iter().map(|p| p.ofport).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(br0.fail_mode, "secure");
    assert_eq!(show.bridges[1].datapath_id, "0000000000000099");
    // The state file holds the new model; loading it gives the same show.
    let (cfg, _) = d.config();
    let saved = Config::load(dir.join("switch.toml")).unwrap();
    assert_eq!(datastore::diff(&cfg, &saved), vec![]);
    d.transact(&ops("del-port br0 m3 -- del-br br1"), false)
        .unwrap();
    assert_eq!(d.show().bridges.len(), 1);
    assert_eq!(d.show().bridges[0].ports.len(), 2);
    d.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_transaction_with_one_bad_part_changes_nothing() {
    let dir = tmpdir("bad");
    let d = start(&dir);
    let before = d.show();
    let file = std::fs::read_to_string(dir.join("switch.toml")).unwrap();
    for bad in [
        "add-br br5 -- add-port nosuch m5 type=memory",
        "add-port br0 m1 type=memory",
        "set bridge:br0 n_tables=0",
        "add-port br0 fulmar-no-such-if0",
        "set dataplane worker_threads=2",
    ] {
        let e = d.transact(&ops(bad), false).unwrap_err();
        assert!(!e.to_string().is_empty(), "{bad}");
        assert_eq!(d.show(), before, "{bad}: {e}");
        assert_eq!(d.config().1, 1, "{bad}");
    }
    // A dry run says what it would do and does nothing.
    let o = d.transact(&ops("add-br br7"), true).unwrap();
    assert!(o.dry_run && o.changes == vec!["add bridge br7".to_string()]);
    assert_eq!(d.show(), before);
    assert_eq!(
        std::fs::read_to_string(dir.join("switch.toml")).unwrap(),
        file
    );
    d.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replace_applies_only_the_differences() {
    let dir = tmpdir("replace");
    let d = start(&dir);
    let (cfg, _) = d.config();
    let next = cfg
        .apply(&ops("add-port br0 m4 type=memory"), Host::detect())
        .unwrap();
    let o = d.replace(next.clone(), false).unwrap();
    assert_eq!(o.changes, vec!["add port 3 to br0".to_string()]);
    // The same model again: nothing to do.
    let o = d.replace(next, false).unwrap();
    assert!(o.changes.is_empty());
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.show().bridges[0].ports.len() != 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(d.show().bridges[0].ports.len(), 3);
    d.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `wait_change` returns at once when the version already differs, wakes
/// on a commit from another thread, and times out on a quiet model (a
/// dry run is not a change).
#[test]
fn wait_change_follows_commits() {
    let dir = tmpdir("wait");
    let d = Arc::new(start(&dir));
    let (_, v0) = d.config();
    assert_eq!(d.wait_change(v0 - 1, Duration::from_secs(5)), v0);
    let ops = datastore::parse_ctl(&["set-fail-mode", "br0", "standalone"]).unwrap();
    d.transact(&ops, true).unwrap();
    let t = Instant::now();
    assert_eq!(d.wait_change(v0, Duration::from_millis(200)), v0);
    assert!(t.elapsed() >= Duration::from_millis(200));
    let d2 = d.clone();
    let waiter = std::thread::spawn(move || d2.wait_change(v0, Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(50));
    d.transact(&ops, false).unwrap();
    assert_eq!(waiter.join().unwrap(), v0 + 1);
    d.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bridge's flow entries as ovs-ofctl text, in table order.
fn flow_texts(d: &Daemon) -> Vec<String> {
    let sw = d.runtime().bridge_switch("br0").unwrap();
    crate::saved::read(&sw)
        .unwrap()
        .flows
        .iter()
        .map(flowtext::format_flow)
        .collect()
}

/// What a controller installed (a flow, a group, a meter) is saved at a
/// graceful stop and in force at the next start before any controller
/// connects, and forwards; the file is used once. A changed static
/// configuration wins over saved tables (set aside as `.unused`).
#[test]
fn tables_saved_at_stop_are_restored_at_the_next_start() {
    use agent::Switch;
    let dir = tmpdir("saved");
    let saved = dir.join("switch.toml.saved");
    let d = start_with(&dir, &config_text(), Some(&saved));
    let sw = d.runtime().bridge_switch("br0").unwrap();
    sw.meter_mod(&flowtext::parse_meter("meter=3,pktps,bands=type=drop,rate=1000").unwrap())
        .unwrap();
    sw.group_mod(&flowtext::parse_group("group_id=7,type=all,bucket=actions=output:1").unwrap())
        .unwrap();
    sw.flow_mod(
        &flowtext::parse_flow("table=0,priority=20,cookie=0x99,in_port=2,actions=meter:3,group:7")
            .unwrap(),
    )
    .unwrap();
    let before = flow_texts(&d);
    assert_eq!(before.len(), 3);
    d.stop();
    let file = saved.join("br0.tables");
    assert!(file.exists());

    let d = start_with(&dir, &config_text(), Some(&saved));
    assert_eq!(flow_texts(&d), before);
    assert!(!file.exists(), "saved tables are used once");
    // Port 2's traffic goes to port 1 through the restored group.
    let mut m1 = d.runtime().take_memory_port("m1").unwrap();
    let mut m2 = d.runtime().take_memory_port("m2").unwrap();
    let mut b = Burst::with_limit(4);
    for i in 0..4 {
        b.push(PacketBuf::from_slice(&frame(i))).unwrap();
    }
    while !b.is_empty() {
        m2.tx_burst(&mut b).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = 0;
    let mut rx = Burst::with_limit(16);
    while got < 4 && Instant::now() < deadline {
        rx.clear();
        got += m1.rx_burst(&mut rx).unwrap();
    }
    assert_eq!(got, 4);
    d.stop();

    // The static flows changed while it was stopped: they win.
    let changed = config_text().replace("in_port=3,actions=output:2", "in_port=3,actions=output:1");
    let d = start_with(&dir, &changed, Some(&saved));
    let now = flow_texts(&d);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(
        now.iter().any(|f| f.contains("in_port=3,actions=output:1")),
        "{now:?}"
    );
    assert!(saved.join("br0.tables.unused").exists());
    d.stop();

    // Saved tables the pipeline refuses partway (a flow to a group that
    // is not there, after others were installed): set aside, and the
    // bridge starts from its configuration.
    let _ = std::fs::remove_dir_all(&saved);
    std::fs::create_dir_all(&saved).unwrap();
    let cfg = Config::from_str(&config_text(), dir.join("switch.toml")).unwrap();
    let digest = crate::saved::static_digest(&cfg.bridges[0]);
    let mut text = format!("# hand-made\nstatic-digest {digest:016x}\n");
    for i in 0..20_000 {
        text += &format!(
            "flow table=1,priority=5,in_port=1,dl_vlan={},actions=drop\n",
            i % 4000 + 1
        );
    }
    text += "flow table=0,priority=6,actions=group:99\n";
    std::fs::write(&file, text).unwrap();
    let d = start_with(&dir, &config_text(), Some(&saved));
    let now = flow_texts(&d);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(!file.exists());
    let unused = std::fs::read_dir(&saved)
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().ends_with(".unused"));
    assert!(unused, "set aside");
    d.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_local_port_that_cannot_be_made_leaves_the_bridge_running() {
    // A name longer than a kernel interface takes (15 bytes): no TAP can
    // have it, with or without privilege.
    let dir = tmpdir("local-port");
    let d = start(&dir);
    let long = "bridge-name-of-20-ch";
    d.transact(
        &ops(&format!("add-br {long} -- add-port {long} m9 type=memory")),
        false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let show = d.show();
    let b = show.bridges.iter().find(|b| b.name == long).unwrap();
    assert_eq!(b.local_port, None);
    let why = b.local_port_error.as_deref().unwrap_or_default();
    assert!(
        why.contains("could not be made") && why.contains(long),
        "{why}"
    );
    assert_eq!(b.ports.len(), 1);
    assert_ne!(b.mode, "stopped");
    assert!(show.text().contains("local_port: none: the local port"));
    // The configuration keeps asking for it; without it, the error goes.
    assert!(d.config().0.bridge(long).unwrap().local_port);
    d.transact(&ops(&format!("set bridge:{long} local_port=false")), false)
        .unwrap_or_else(|e| panic!("{e}"));
    let show = d.show();
    let b = show.bridges.iter().find(|b| b.name == long).unwrap();
    assert_eq!((&b.local_port, &b.local_port_error), (&None, &None));
    // Bridges of the file have none unless they ask.
    let br0 = show.bridges.iter().find(|b| b.name == "br0").unwrap();
    assert_eq!((&br0.local_port, &br0.local_port_error), (&None, &None));
}

/// `set-qos` puts port 2 behind egress queues at once: what it sends is
/// counted on its default queue, the queues persist and come back at a
/// restart; `clear-qos` and deleting the port take them away.
#[test]
fn set_qos_applies_live_and_persists() {
    let dir = tmpdir("qos");
    let d = start(&dir);
    let queues = |d: &Daemon| d.runtime().queue_counters("br0").unwrap_or_default();
    assert!(queues(&d).is_empty());
    d.transact(
        &ops(
            "set-qos br0 m2 max_rate=100000000 queue:1=priority:0 queue:2=priority:1,min_rate:1000",
        ),
        false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<u32> = queues(&d)[&2].iter().map(|q| q.id).collect();
    assert_eq!(ids, vec![1, 2, 0]);
    let mut m1 = d.runtime().take_memory_port("m1").unwrap();
    let mut m2 = d.runtime().take_memory_port("m2").unwrap();
    let mut b = Burst::with_limit(16);
    for i in 0..10 {
        let _ = b.push(PacketBuf::from_slice(&frame(i)));
    }
    m1.tx_burst(&mut b).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = 0;
    while got < 10 && Instant::now() < deadline {
        let mut r = Burst::with_limit(16);
        got += m2.rx_burst(&mut r).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(got, 10);
    let default = |d: &Daemon| queues(d)[&2].iter().find(|q| q.id == 0).unwrap().tx_packets;
    assert_eq!(default(&d), 10);
    d.stop();
    let text = std::fs::read_to_string(dir.join("switch.toml")).unwrap();
    assert!(text.contains("linux-htb"), "{text}");
    // Back after a restart, then cleared, then gone with the port.
    let cfg = std::fs::read_to_string(dir.join("switch.toml")).unwrap();
    let d = start_with(&dir, &cfg, None);
    assert_eq!(queues(&d)[&2].len(), 3);
    d.transact(&ops("clear-qos br0 2"), false).unwrap();
    assert!(queues(&d).is_empty());
    d.transact(&ops("set-qos br0 m2 queue:4="), false).unwrap();
    assert_eq!(queues(&d)[&2].len(), 2);
    d.transact(&ops("del-port br0 m2"), false).unwrap();
    assert!(queues(&d).is_empty());
    d.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
