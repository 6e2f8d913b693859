//! Interoperability with a client nobody here wrote: `ovs-ofctl -O
//! OpenFlow13` against an agent listening on 127.0.0.1 and on a unix
//! socket (`punix:`). Skipped (with a note) where `ovs-ofctl` is not
//! installed.

mod common;

use agent::{Agent, AgentConfig};
use std::process::Command;

/// The `ovs-ofctl` arguments for `args` = [COMMAND, ARGS...] at `target`:
/// COMMAND TARGET ARGS...
fn at_target(target: &str, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![args[0].to_string(), target.to_string()];
    v.extend(args[1..].iter().map(|s| s.to_string()));
    v
}

fn have_ovs_ofctl() -> bool {
    Command::new("ovs-ofctl").arg("--version").output().is_ok()
}

/// Runs `ovs-ofctl -O OpenFlow13 ARGS` and returns (success, stdout+stderr).
async fn ofctl(args: Vec<String>) -> (bool, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new("ovs-ofctl")
            .arg("-O")
            .arg("OpenFlow13")
            .arg("--timeout=20")
            .args(&args)
            .output()
            .expect("ovs-ofctl runs");
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    })
    .await
    .unwrap()
}

/// [`ofctl`] that must succeed: its stdout+stderr.
async fn ofctl_ok(args: Vec<String>) -> String {
    let (ok, out) = ofctl(args).await;
    assert!(ok, "{out}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ovs_ofctl_drives_the_agent() {
    if !have_ovs_ofctl() {
        eprintln!("ovs-ofctl not installed: skipping the interoperability test");
        return;
    }
    let (switch, addr) = common::listening_switch(3).await;
    let target = format!("tcp:{addr}");
    let run = |args: &[&str]| ofctl(at_target(&target, args));
    let must = |args: &[&str]| ofctl_ok(at_target(&target, args));

    let out = must(&["show"]).await;
    assert!(out.contains("dpid:0000000000000001"), "{out}");
    assert!(out.contains("n_tables:255"), "{out}");
    assert!(out.contains("2(p2): addr:02:00:00:00:00:02"), "{out}");

    // add-flow first reads the table features: 255 tables, several
    // REPLY_MORE parts.
    must(&["add-flow", "table=0,priority=10,in_port=1,actions=output:2"]).await;
    must(&[
        "add-flow",
        "table=3,priority=5,ip,nw_dst=10.0.0.0/8,actions=dec_ttl,output:3",
    ])
    .await;
    let out = must(&["dump-flows"]).await;
    assert!(
        out.contains("priority=10,in_port=1 actions=output:2"),
        "{out}"
    );
    assert!(out.contains("table=3"), "{out}");
    assert_eq!(switch.with_state(|s| s.tables.len()), 2);

    let out = must(&["dump-table-features"]).await;
    assert!(out.contains("table 254"), "{out}");

    must(&[
        "add-group",
        "group_id=1,type=all,bucket=output:1,bucket=output:2",
    ])
    .await;
    let (ok, out) = run(&["dump-groups"]).await;
    assert!(ok && out.contains("group_id=1,type=all"), "{out}");

    // Errors come back with their names.
    let (_, out) = run(&["set-frags", "reassemble"]).await;
    assert!(out.contains("OFPSCFC_BAD_FLAGS"), "{out}");
    let (_, out) = run(&["add-flow", "table=0,actions=group:99"]).await;
    assert!(out.contains("OFPBAC_BAD_OUT_GROUP"), "{out}");

    must(&["del-flows"]).await;
    assert_eq!(switch.with_state(|s| s.tables.len()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ovs_ofctl_over_a_unix_socket() {
    if !have_ovs_ofctl() {
        eprintln!("ovs-ofctl not installed: skipping the unix socket interoperability test");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fulmar-agent-ofctl-{}", std::process::id()));
    let path = dir.join("br0.mgmt");
    let switch = common::switch_with_ports(2);
    let agent = Agent::new(switch.clone(), AgentConfig::default());
    let (_, listener) = agent
        .listen(&format!("punix:{}", path.display()).parse().unwrap())
        .await
        .unwrap();
    let target = format!("unix:{}", path.display());
    let run = |args: &[&str]| ofctl(at_target(&target, args));
    let must = |args: &[&str]| ofctl_ok(at_target(&target, args));

    let out = must(&["show"]).await;
    assert!(out.contains("dpid:0000000000000001"), "{out}");
    must(&["add-flow", "table=0,priority=7,in_port=2,actions=output:1"]).await;
    let out = must(&["dump-flows"]).await;
    assert!(
        out.contains("priority=7,in_port=2 actions=output:1"),
        "{out}"
    );
    assert_eq!(switch.with_state(|s| s.tables.len()), 1);

    listener.stop();
    assert!(!path.exists(), "socket file removed on stop");
    let (ok, out) = run(&["show"]).await;
    assert!(!ok, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
