//! The coupling benchmark's smoke test: a few hundred rules, tiny rates.
//! It asserts what the run did (forwarded every packet, applied and
//! published the flow-mods, kept the table's size), never how fast: each
//! step lasts until its counts are there, however slow the machine.

use fulmar_bench::{coupling, CouplingOptions, Options, Scenario};

fn options() -> Options {
    Options {
        scenario: Scenario::GatewayVlan2Mpls,
        rules: Some(300),
        flows: Some(300),
        workers: 1,
        seconds: Some(0.05),
        packet_size: 64,
        burst: 16,
        flow_cache: None,
        flow_mods: 0,
        publish_every: 1,
        hand_over_ms: 1,
        seed: 3,
        smoke: true,
        reference: false,
        rounds: 1,
        reference_lines: false,
        progress: false,
    }
}

#[test]
fn every_step_forwards_and_applies_its_flow_mods() {
    let c = CouplingOptions {
        // 50/s leaves the channel quiet between flow-mods (a publish
        // each); 5,000/s is a continuous stream (published at the end).
        rates: vec![50, 5_000],
        window: 16,
        ..CouplingOptions::default()
    };
    let r = coupling(&options(), &c).unwrap();
    // An idle step is put first when none is asked for.
    let rates: Vec<u64> = r.steps.iter().map(|s| s.target_per_sec).collect();
    assert_eq!(rates, vec![0, 50, 5_000]);
    assert_eq!(
        (r.checked, r.mismatches),
        (200, 0),
        "{:?}",
        r.mismatch_lines
    );
    assert!(r.idle_mpps > 0.0);
    let idle = &r.steps[0];
    assert_eq!((idle.applied, idle.publishes), (0, 0));
    // The installed rules and the preloaded churn window.
    assert_eq!(idle.entries_after, 300 + 16);
    let mut net = 0i64;
    for s in &r.steps {
        assert!(s.packets > 0, "{s:?}");
        assert_eq!(s.tx_packets, s.packets, "churn never touches a flow: {s:?}");
        assert_eq!(s.dropped, 0);
        if s.target_per_sec > 0 {
            assert!(s.applied >= 1 && s.publishes >= 1, "{s:?}");
        }
        // Adds and deletes alternate, from an add.
        let adds = if net == 0 {
            s.applied.div_ceil(2)
        } else {
            s.applied / 2
        };
        assert_eq!(s.adds, adds, "{s:?}");
        net += s.adds as i64 - (s.applied - s.adds) as i64;
        assert_eq!(s.entries_after as i64, 316 + net, "{s:?}");
        assert!(s.ratio > 0.0);
    }
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["steps"].as_array().unwrap().len(), 3);
}

#[test]
fn bad_coupling_options_are_errors() {
    let c = CouplingOptions::default();
    for (what, c) in [
        (
            "no rate",
            CouplingOptions {
                rates: vec![],
                ..c.clone()
            },
        ),
        (
            "window 0",
            CouplingOptions {
                window: 0,
                ..c.clone()
            },
        ),
    ] {
        assert!(coupling(&options(), &c).is_err(), "{what}");
    }
    let mut o = options();
    o.flow_mods = 10;
    let e = coupling(&o, &c).unwrap_err().to_string();
    assert!(e.contains("on its own"), "{e}");
}
