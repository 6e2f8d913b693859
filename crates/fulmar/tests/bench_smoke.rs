//! Runs the built `fulmar bench` binary: every scenario in smoke mode
//! (its forwarding check must pass), the JSON report's shape, and bad
//! options.

use std::process::{Command, Output};

const SCENARIOS: [&str; 5] = ["gateway-vlan2mpls", "gateway-mpls2vlan", "l2", "l3", "acl"];

fn fulmar(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fulmar"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_scenario_passes_its_smoke_check() {
    for s in SCENARIOS {
        let out = fulmar(&["bench", s, "--smoke", "--rules", "200", "--flows", "300"]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{s}: {stdout}\n{}", text(&out.stderr));
        assert!(
            stdout.contains("check       100 of 100 sampled packets forwarded as the rules say"),
            "{s}: {stdout}"
        );
        assert!(stdout.contains("Mpps"), "{s}: {stdout}");
        // Not a terminal: no progress line.
        assert!(!text(&out.stderr).contains('\r'), "{s}");
    }
}

#[test]
fn json_report_has_the_documented_fields() {
    for s in SCENARIOS {
        let out = fulmar(&[
            "bench",
            s,
            "--smoke",
            "--json",
            "--workers",
            "2",
            "--flow-mods",
            "50",
            // The install phase ends once all 50 are applied; 2 s (not the
            // smoke default 0.2 s) leaves room for a machine busy with the
            // other tests of this binary, so the exact counts below hold.
            "--seconds",
            "2",
        ]);
        assert!(out.status.success(), "{s}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert_eq!(stdout.lines().count(), 1, "one object: {stdout}");
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["scenario"], s);
        assert_eq!(v["rules"], 64);
        assert_eq!(v["flows"], 64);
        assert_eq!(v["workers"], 2);
        for k in [
            "mpps",
            "ns_per_packet",
            "seconds",
            "mpps_wall",
            "generator_ns_per_packet",
            "install_seconds",
            "install_rate",
        ] {
            let x = v[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{s}: {k} in {stdout}"));
            assert!(x > 0.0 && x.is_finite(), "{s}: {k} = {x}");
        }
        assert!(v["rss_bytes"].as_u64().unwrap() > 1 << 20);
        // The pipeline has no flow cache (yet): null, present.
        assert!(v.as_object().unwrap().contains_key("cache_hit_rate"));
        assert!(v["cache_hit_rate"].is_null() || v["cache_hit_rate"].as_f64().is_some());
        assert_eq!(v["mismatches"], 0);
        assert_eq!(v["checked"], 64);
        let packets = v["packets"].as_u64().unwrap();
        assert!(packets > 0);
        assert_eq!(
            v["tx_packets"].as_u64(),
            Some(packets),
            "{s}: all forwarded"
        );
        assert_eq!(v["dropped"], 0);
        let f = &v["flow_mods"];
        assert_eq!(f["count"], 50);
        assert!(f["per_sec"].as_f64().unwrap() > 0.0, "{s}: {f}");
        assert_eq!(f["applied_with_traffic"], 50, "{s}: {f}");
        assert_eq!(
            f["publishes"], 50,
            "{s}: one snapshot per flow-mod by default"
        );
        assert!(f["per_sec_with_traffic"].as_f64().unwrap() > 0.0);
        assert!(f["mpps_while_installing"].as_f64().is_some(), "{s}: {f}");
    }
}

#[test]
fn big_frames_more_flows_than_rules_and_other_bursts_check_out() {
    for s in SCENARIOS {
        let out = fulmar(&[
            "bench",
            s,
            "--smoke",
            "--json",
            "--rules",
            "30",
            "--flows",
            "500",
            "--packet-size",
            "1500",
            "--burst",
            "7",
            "--seed",
            "42",
        ]);
        assert!(out.status.success(), "{s}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (v["checked"].as_u64(), v["mismatches"].as_u64()),
            (Some(100), Some(0))
        );
        assert_eq!(v["packet_size"], 1500);
        assert_eq!(v["template_bytes"], 500 * 1500);
        assert_eq!(v["generator_allocations"], 0, "{s}: buffers reused");
    }
}

#[test]
fn bad_options_fail() {
    for args in [
        &["bench", "l2", "--packet-size", "20"][..],
        &["bench", "l2", "--rules", "0"],
        &["bench", "l2", "--seconds", "-1"],
        &["bench", "acl", "--rules", "70000"],
        &["bench", "nosuch"],
    ] {
        let out = fulmar(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
}

#[test]
fn a_terminal_gets_a_progress_line_each_second() {
    // `script` gives the command a pseudo-terminal; skip where it is missing.
    let cmd = format!(
        "{} bench l2 --rules 100 --seconds 1.5",
        env!("CARGO_BIN_EXE_fulmar")
    );
    let Ok(out) = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
    else {
        eprintln!("no `script` command: skipped");
        return;
    };
    if !out.status.success() {
        eprintln!("`script` failed: skipped ({})", text(&out.stderr));
        return;
    }
    let all = text(&out.stdout);
    assert!(
        all.contains("\r\x1b[2K  1.") && all.contains(" s of 1.5 s: "),
        "progress line on the terminal: {all:?}"
    );
    assert!(all.contains("check       100 of 100"), "{all:?}");
}

#[test]
fn reference_smoke_prints_a_ratio() {
    for s in SCENARIOS {
        let out = fulmar(&["bench", s, "--reference", "--smoke", "--rounds", "2"]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{s}: {stdout}\n{}", text(&out.stderr));
        assert!(
            stdout.contains("check 64 of 64 sampled packets as the rules say"),
            "{s}: {stdout}"
        );
        assert!(
            stdout.contains("ratio       fulmar / reference = "),
            "{s}: {stdout}"
        );
        let out = fulmar(&["bench", s, "--reference", "--smoke", "--json"]);
        assert!(out.status.success(), "{s}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
        let r = &v["reference"];
        assert_eq!(r["rounds"], 5, "{s}: {v}");
        assert!(r["ratio"].as_f64().unwrap() > 0.0, "{s}: {v}");
        assert!(r["reference_mpps"].as_f64().unwrap() > 0.0, "{s}: {v}");
        assert_eq!(r["reference_mismatches"], 0, "{s}: {v}");
    }
    // Without --reference the field is null; --rounds needs --reference.
    let out = fulmar(&["bench", "l2", "--smoke", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert!(v["reference"].is_null(), "{v}");
    let out = fulmar(&["bench", "l2", "--smoke", "--rounds", "3"]);
    assert!(!out.status.success());
    let out = fulmar(&["bench", "l2", "--smoke", "--reference", "--rounds", "0"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--rounds"),
        "{}",
        text(&out.stderr)
    );
    // --reference-lines: the gateway's keys in the in-place table's lines,
    // checked like the reference, with no target printed; refused for a
    // scenario without exact keys and without --reference.
    let out = fulmar(&[
        "bench",
        "gateway-vlan2mpls",
        "--reference",
        "--reference-lines",
        "--smoke",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let r = &v["reference"];
    assert!(r["what"].as_str().unwrap().contains("64-byte lines"), "{v}");
    assert_eq!(r["reference_mismatches"], 0, "{v}");
    assert_eq!(r["reference_tx_packets"], r["reference_packets"], "{v}");
    assert!(r["target"].is_null(), "{v}");
    let out = fulmar(&["bench", "l3", "--reference", "--reference-lines", "--smoke"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("exact-match"),
        "{}",
        text(&out.stderr)
    );
    let out = fulmar(&["bench", "l2", "--reference-lines", "--smoke"]);
    assert!(!out.status.success());
}
