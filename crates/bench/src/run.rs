//! [`fn@bench`]: the whole in-memory run, phase by phase (the crate's comment
//! says how a run goes).

use crate::options::Options;
use crate::pool::Pool;
use crate::progress::Progress;
use crate::reference;
use crate::report::{median, rss_bytes, target_of, FlowModFigures, ReferenceFigures, Report};
use crate::switch::{add_ports, check, default_state, install, snapshot_of};
use crate::traffic::{totals, traffic, warm_up, worker_states, Control, WorkerOpts, WorkerResult};
use crate::workload::Workload;
use anyhow::{bail, ensure, Context};
use dataplane::snapshot::Publisher;
use pipeline::{TablesConfig, Time};
use std::sync::Arc;
use std::time::Instant;

/// Does the whole run and returns the figures.
pub fn bench(opts: &Options) -> anyhow::Result<Report> {
    let rules = opts.rule_count();
    let flows = opts.flows.unwrap_or(rules);
    let seconds = opts.seconds.unwrap_or(if opts.smoke { 0.2 } else { 5.0 });
    opts.check_traffic(flows)?;
    ensure!(
        (1..=1000).contains(&opts.rounds),
        "--rounds must be 1..=1000"
    );
    ensure!(
        !opts.reference || opts.scenario.has_reference(),
        "{} has no reference loop: its figures stand beside the single-table scenarios'",
        opts.scenario.name()
    );
    ensure!(
        opts.publish_every >= 1,
        "--publish-every must be at least 1"
    );
    let max_entries = TablesConfig::default().max_entries;
    ensure!(
        rules + opts.flow_mods < max_entries,
        "--rules plus --flow-mods must be below {max_entries}, the size of a table"
    );
    ensure!(
        flows.saturating_mul(opts.packet_size) <= 4 << 30,
        "--flows times --packet-size is over the 4 GiB the template pool may use"
    );
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
        bail!("--seconds must be more than 0 and at most a day");
    }
    let progress = Progress { on: opts.progress };
    let mut notes = Vec::new();
    let mut w = Workload::new(opts.scenario, rules + opts.flow_mods, opts.seed)?;
    w.installed = rules;
    let mut state = default_state();
    add_ports(&mut state, w.n_ports);
    let install_seconds = install(&mut state, &w, 0..rules, true, &progress)?;
    // The flows hit only the installed rules.
    let pool = Arc::new(Pool::for_options(&w, flows, rules, opts));
    // The control side keeps `state` (its indexes and counters), as
    // `fulmar run` does; the workers read the snapshot.
    let snap = snapshot_of(&state);
    let (checked, bad) = check(&w, &pool, &snap, 100, opts.seed);
    let mut mismatch_lines: Vec<String> = bad.iter().take(10).cloned().collect();
    let publisher = Publisher::new(snap);
    let wopts = WorkerOpts::of(opts);
    let (results, wall, rss, reference) = if opts.reference {
        // Resident memory before the reference's tables exist: fulmar's.
        let rss = rss_bytes();
        let r = if opts.reference_lines {
            reference::Reference::with_lines(&w, &pool)?
        } else {
            reference::Reference::new(&w, &pool)?
        };
        let (ref_checked, ref_bad) = reference::check(&r, &w, &pool, 100, opts.seed);
        mismatch_lines.extend(ref_bad.iter().take(10).cloned());
        let each = seconds / opts.rounds as f64;
        let mut all = vec![WorkerResult::default(); opts.workers];
        let mut ref_all = WorkerResult::default();
        let (mut f_rounds, mut r_rounds, mut ratios, mut r_ns) = (vec![], vec![], vec![], vec![]);
        let mut wall = 0.0;
        // Fulmar's workers last from round to round, as the runtime's do.
        let mut states = worker_states(opts.workers, wopts);
        warm_up(&publisher, &pool, &mut states, wopts)?;
        for round in 0..opts.rounds {
            // Alternate which goes first, so a trend in the machine's
            // load does not favour one side.
            let mut f_mpps = 0.0;
            let mut r_mpps = 0.0;
            for fulmar_turn in [round % 2 == 0, round % 2 == 1] {
                if fulmar_turn {
                    let (res, w_s, _) = traffic(
                        &publisher,
                        &pool,
                        &mut states,
                        wopts,
                        each,
                        Control::Idle,
                        &progress,
                    )?;
                    for (a, b) in all.iter_mut().zip(&res) {
                        a.add(b);
                    }
                    wall += w_s;
                    f_mpps = totals(&res).mpps;
                } else {
                    let res = reference::run(&r, &pool, opts.workers, opts.burst, each)?;
                    let t = totals(&res);
                    res.iter().for_each(|x| ref_all.add(x));
                    r_mpps = t.mpps;
                    r_ns.push(if t.packets == 0 {
                        0.0
                    } else {
                        t.process_ns as f64 / t.packets as f64
                    });
                }
            }
            f_rounds.push(f_mpps);
            r_rounds.push(r_mpps);
            ratios.push(if r_mpps > 0.0 { f_mpps / r_mpps } else { 0.0 });
        }
        let ratio = median(&ratios);
        // The targets are against the reference's own table; the lines
        // loop is a floor for a design, not what the targets measure.
        let target = target_of(opts.scenario).filter(|_| !opts.reference_lines);
        let figures = ReferenceFigures {
            what: r.describe(),
            rounds: opts.rounds,
            seconds_each: each,
            fulmar_mpps: median(&f_rounds),
            reference_mpps: median(&r_rounds),
            reference_ns_per_packet: median(&r_ns),
            ratio,
            target,
            target_met: target.map(|t| ratio >= t),
            fulmar_mpps_rounds: f_rounds,
            reference_mpps_rounds: r_rounds,
            reference_packets: ref_all.packets,
            reference_tx_packets: ref_all.tx,
            reference_dropped: ref_all.drops,
            reference_table_bytes: r.table_bytes(),
            reference_checked: ref_checked,
            reference_mismatches: ref_bad.len(),
        };
        (all, wall, rss, Some(figures))
    } else {
        let (results, wall, _) = traffic(
            &publisher,
            &pool,
            &mut worker_states(opts.workers, wopts),
            wopts,
            seconds,
            Control::Idle,
            &progress,
        )?;
        (results, wall, rss_bytes(), None)
    };
    let t = totals(&results);
    let per_packet = |ns: u64, packets: u64| {
        if packets == 0 {
            0.0
        } else {
            ns as f64 / packets as f64
        }
    };
    let mut fm = FlowModFigures {
        count: opts.flow_mods,
        publish_every: opts.publish_every,
        ..FlowModFigures::default()
    };
    if opts.flow_mods > 0 {
        let mods = (rules..rules + opts.flow_mods)
            .map(|i| {
                let text = w.rule_text(i);
                flowtext::parse_flow(&text).with_context(|| format!("generated rule {text:?}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        // Alone: the flow_mod calls only.
        let mut alone = state.clone();
        let t0 = Instant::now();
        for (m, i) in mods.iter().zip(rules..) {
            alone
                .flow_mod(m, Time::from_secs(1))
                .map_err(|e| anyhow::anyhow!("rule {:?} refused: {e}", w.rule_text(i)))?;
        }
        fm.per_sec = Some(mods.len() as f64 / t0.elapsed().as_secs_f64().max(1e-9));
        drop(alone);
        // With traffic: the workers forward while this thread applies the
        // same flow-mods to a copy and publishes snapshots through the
        // runtime's mechanism (dataplane::snapshot), as the runtime does.
        let mut state = state.clone();
        let (res, phase, inst) = traffic(
            &publisher,
            &pool,
            &mut worker_states(opts.workers, wopts),
            wopts,
            seconds,
            Control::Install {
                state: &mut state,
                mods: &mods,
                every: opts.publish_every,
            },
            &progress,
        )?;
        let during = totals(&res);
        fm.applied_with_traffic = Some(inst.applied);
        fm.per_sec_with_traffic = Some(inst.applied as f64 / inst.seconds.max(1e-9));
        fm.publishes = Some(inst.publishes);
        fm.publish_ms_mean = Some(inst.publish_seconds * 1e3 / inst.publishes.max(1) as f64);
        fm.mpps_while_installing = Some(during.mpps);
        fm.ns_per_packet_while_installing = Some(per_packet(during.process_ns, during.packets));
        fm.packets_while_installing = Some(during.packets);
        fm.seconds_while_installing = Some(phase);
        fm.versions_seen = Some(res.iter().map(|r| r.versions).min().unwrap_or(0));
        if inst.applied < mods.len() {
            notes.push(format!(
                "with traffic only {} of {} flow-mods were applied within --seconds",
                inst.applied,
                mods.len()
            ));
        }
    }
    Ok(Report {
        scenario: opts.scenario.name(),
        rules,
        flows,
        workers: opts.workers,
        seconds: wall,
        packet_size: opts.packet_size,
        burst: opts.burst,
        mpps: t.mpps,
        ns_per_packet: per_packet(t.process_ns, t.packets),
        mpps_wall: t.packets as f64 / wall / 1e6,
        generator_ns_per_packet: per_packet(t.generator_ns, t.packets),
        generator_allocations: t.allocations,
        cache_hit_rate: {
            let hits: u64 = results.iter().map(|r| r.cache_hits).sum();
            let lookups: u64 = results.iter().map(|r| r.cache_lookups).sum();
            (lookups > 0).then(|| hits as f64 / lookups as f64)
        },
        rss_bytes: rss,
        template_bytes: pool.bytes.len(),
        packets: t.packets,
        tx_packets: t.tx,
        dropped: t.drops,
        install_seconds,
        install_rate: rules as f64 / install_seconds.max(1e-9),
        flow_mods: fm,
        checked,
        mismatches: bad.len(),
        reference,
        notes,
        mismatch_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{export, write_flows};
    use crate::frame;
    use crate::pool::sample_flow;
    use crate::workload::Scenario;
    use packet::buffer::PacketBuf;
    use pipeline::datapath::{BurstOutput, WorkerState};
    use pipeline::Time;

    fn args(s: Scenario) -> Options {
        Options {
            scenario: s,
            rules: Some(50),
            flows: Some(120),
            workers: 2,
            seconds: Some(0.05),
            packet_size: 64,
            burst: 8,
            flow_cache: None,
            flow_mods: 10,
            publish_every: 3,
            hand_over_ms: 1,
            seed: 5,
            smoke: true,
            reference: false,
            rounds: 5,
            reference_lines: false,
            progress: false,
        }
    }

    /// `--export --out-port` sends every rule's output to that port, in
    /// every scenario (l2's rules have the output right after
    /// `actions=`: they kept their own ports once, and a DPDK run forwarded
    /// 7 % of its packets).
    #[test]
    fn export_out_port_rewrites_every_rule() {
        for s in [Scenario::GatewayMpls2Vlan, Scenario::L2, Scenario::L3] {
            let dir = std::env::temp_dir().join(format!(
                "fulmar-export-test-{}-{}",
                std::process::id(),
                s.name()
            ));
            let mut a = args(s);
            a.flows = Some(8);
            export(&a, &dir, Some(2)).unwrap();
            let text = std::fs::read_to_string(dir.join("rules.flows")).unwrap();
            let _ = std::fs::remove_dir_all(&dir);
            assert_eq!(text.lines().count(), 50, "{}", s.name());
            for line in text.lines() {
                assert!(line.ends_with("output:2"), "{}: {line}", s.name());
                assert_eq!(line.matches("output:").count(), 1, "{line}");
                assert!(flowtext::parse_flow(line).is_ok(), "{line}");
            }
        }
    }

    /// The loss-free search end to end on a small gateway: it finds a rate
    /// above zero, and its last loss-free trial lost nothing. (The rate
    /// itself is this machine's affair; nothing is asserted about it.)
    #[cfg(feature = "dpdk")]
    #[test]
    fn loss_free_search_runs_through_dpdk_ring_ports() {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective user.
        if std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(1)
            != 0
        {
            eprintln!("skipped: DPDK's EAL needs root");
            return;
        }
        let mut a = args(Scenario::GatewayMpls2Vlan);
        a.rules = Some(64);
        a.flows = Some(64);
        let eal: Vec<String> = "-l 0 --no-huge -m 512 --no-pci --no-shconf --no-telemetry"
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let r = crate::loss_free::run(&a, 0.2, 0.2, &eal).unwrap();
        let j = serde_json::to_value(&r).unwrap();
        assert!(j["loss_free_pps"].as_f64().unwrap() > 0.0, "{j}");
        let trials = j["trials"].as_array().unwrap();
        assert!(trials.len() >= 2, "{j}");
        assert!(
            trials
                .iter()
                .any(|t| t["sent"] == t["received"] && t["offered_pps"].is_f64()),
            "a paced trial without loss: {j}"
        );
    }

    #[test]
    fn export_writes_rules_and_one_packet_per_flow() {
        let dir = std::env::temp_dir().join(format!("fulmar-bench-export-{}", std::process::id()));
        let mut a = args(Scenario::GatewayMpls2Vlan);
        a.rules = Some(50);
        a.flows = Some(20);
        let e = export(&a, &dir, Some(2)).unwrap();
        assert_eq!((e.rules, e.packets, e.packet_size), (50, 20, 64));
        assert_eq!(e.flows_path, dir.join("rules.flows"));
        let rules = std::fs::read_to_string(dir.join("rules.flows")).unwrap();
        assert_eq!(rules.lines().count(), 50);
        assert!(rules
            .lines()
            .all(|l| l.ends_with(",output:2") && l.contains("mpls_label=")));
        let mut r = dataplane::pcap::PcapReplay::open(dir.join("traffic.pcap")).unwrap();
        let mut b = dataplane::Burst::with_limit(64);
        use dataplane::PortBackend;
        r.rx_burst(&mut b).unwrap();
        assert_eq!(b.len(), 20);
        assert!(b
            .iter()
            .all(|p| p.len() == 64 && p.data()[12..14] == [0x88, 0x47]));
        // A scenario whose flows enter on several ports is refused.
        let mut many = args(Scenario::GatewayVlan2Mpls);
        many.rules = Some(5000);
        let e = export(&many, &dir, None).unwrap_err().to_string();
        assert!(e.contains("needs every flow on port 1"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `--write-flows`: the scenario's extra rules, then one line per
    /// rule, each valid flow text.
    #[test]
    fn write_flows_writes_every_rule_as_flow_text() {
        let dir = tempfile::tempdir().unwrap();
        for s in Scenario::ALL {
            let path = dir.path().join(format!("{}.flows", s.name()));
            let a = args(s);
            write_flows(&a, &path).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            let w = Workload::new(s, 50, 5).unwrap();
            assert_eq!(text.lines().count(), 50 + w.extra_rules().len(), "{s:?}");
            assert_eq!(text.lines().last(), Some(w.rule_text(49).as_str()));
            for line in text.lines() {
                assert!(flowtext::parse_flow(line).is_ok(), "{s:?}: {line}");
            }
        }
        let e = write_flows(&args(Scenario::L2), &dir.path().join("no/such/dir/f"));
        assert!(e.is_err());
    }

    #[test]
    fn every_scenario_forwards_as_its_rules_say() {
        for s in Scenario::ALL {
            let r = bench(&args(s)).unwrap();
            assert_eq!(r.mismatches, 0, "{s:?}");
            assert_eq!(r.checked, 100);
            assert!(r.packets > 0);
            assert_eq!(r.tx_packets, r.packets, "{s:?}: every packet leaves");
            assert_eq!(r.dropped, 0);
            assert_eq!(r.generator_allocations, 0, "{s:?}: buffers are reused");
            let f = &r.flow_mods;
            assert!(f.per_sec.is_some());
            // The install stops when --seconds is up, so how many of the
            // 10 flow-mods land with traffic depends on the machine's
            // speed: at least the first chunk of 3 (applied before the
            // clock is read), at most all 10, and a snapshot per chunk.
            let applied = f.applied_with_traffic.expect("flow-mods with traffic");
            assert!((3..=10).contains(&applied), "{s:?}: {applied}");
            assert_eq!(
                f.publishes,
                Some(applied.div_ceil(3) as u64),
                "{s:?}: {applied} flow-mods, a snapshot every 3"
            );
            assert!(f.packets_while_installing.is_some());
        }
    }

    #[test]
    fn reference_rounds_alternate_and_give_a_ratio() {
        for s in Scenario::ALL.into_iter().filter(|s| s.has_reference()) {
            let mut a = args(s);
            a.reference = true;
            a.rounds = 3;
            a.flow_mods = 0;
            a.workers = 1;
            let r = bench(&a).unwrap();
            assert_eq!(r.mismatches, 0, "{s:?}");
            let x = r.reference.expect("--reference figures");
            assert_eq!((x.reference_checked, x.reference_mismatches), (100, 0));
            assert_eq!(x.fulmar_mpps_rounds.len(), 3);
            assert_eq!(x.reference_mpps_rounds.len(), 3);
            assert!(x.reference_packets > 0 && x.ratio > 0.0, "{s:?}: {x:?}");
            assert_eq!(x.reference_tx_packets, x.reference_packets, "{s:?}");
            assert_eq!(x.reference_dropped, 0);
            assert_eq!(x.target.is_some(), s != Scenario::L2);
            // Fulmar's own figures cover its rounds.
            assert!(r.packets > 0 && r.tx_packets == r.packets);
        }
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn flow_mods_beyond_the_installed_rules_leave_the_check_alone() {
        // 500 generated, 200 installed: the flows and the reference see 200.
        for s in Scenario::ALL {
            let mut a = args(s);
            a.rules = Some(200);
            a.flows = Some(200);
            a.flow_mods = 300;
            a.workers = 1;
            let r = bench(&a).unwrap();
            assert_eq!((r.checked, r.mismatches), (100, 0), "{s:?}");
            assert_eq!(r.tx_packets, r.packets);
        }
    }

    #[test]
    fn the_check_catches_a_wrong_rule() {
        for s in Scenario::ALL {
            let w = Workload::new(s, 40, 3).unwrap();
            let mut state = default_state();
            install(&mut state, &w, 0..40, true, &Progress { on: false }).unwrap();
            let pool = Pool::new(&w, 40, 40, 64, 4, 3);
            // One port more than the scenario uses, for the wrong rule.
            add_ports(&mut state, w.n_ports + 1);
            let snap = snapshot_of(&state);
            assert_eq!(check(&w, &pool, &snap, 30, 1).1.len(), 0, "{s:?}");
            for wrong in [
                // Everything to a port no rule of the scenario uses.
                format!("priority=65535,actions=output:{}", w.n_ports + 1),
                // Everything dropped.
                "priority=65535,actions=drop".to_string(),
            ] {
                let mut bad_state = state.clone();
                let fm = flowtext::parse_flow(&wrong).unwrap();
                bad_state.flow_mod(&fm, Time::from_secs(1)).unwrap();
                let (n, bad) = check(&w, &pool, &snapshot_of(&bad_state), 30, 1);
                assert_eq!(n, 30);
                assert_eq!(bad.len(), 30, "{s:?} {wrong}");
            }
            // Rule 0 again above everything, with one more rewrite: the
            // right port, different bytes, for the flows that hit it.
            let r0 = w.rule_text(0);
            let (head, actions) = r0.split_once("actions=").unwrap();
            let head: Vec<&str> = head
                .split(',')
                .map(|f| {
                    if f.starts_with("priority=") {
                        "priority=65535"
                    } else {
                        f
                    }
                })
                .collect();
            let twisted = format!(
                "{}actions=set_field:02:00:00:00:00:99->eth_src,{actions}",
                head.join(",")
            );
            let mut bad_state = state.clone();
            let fm = flowtext::parse_flow(&twisted).unwrap();
            bad_state.flow_mod(&fm, Time::from_secs(1)).unwrap();
            let (n, bad) = check(&w, &pool, &snapshot_of(&bad_state), 40, 1);
            assert_eq!(n, 40, "every template checked");
            assert!(!bad.is_empty(), "{s:?}: {twisted}");
            assert!(
                bad.iter().all(|b| b.contains("020000000099")),
                "{s:?}: {bad:?}"
            );
        }
    }

    /// The faucet scenario's tables do what Faucet's do: a learned
    /// destination goes out of its port untagged, an unknown one floods
    /// the VLAN's other ports, a tagged frame on an access port drops.
    #[test]
    fn faucet_tables_forward_flood_and_drop_as_faucet_does() {
        let w = Workload::new(Scenario::Faucet, 40, 3).unwrap();
        let mut state = default_state();
        install(&mut state, &w, 0..40, true, &Progress { on: false }).unwrap();
        add_ports(&mut state, w.n_ports);
        let snap = snapshot_of(&state);
        let view = snap.view();
        let mut ws = WorkerState::new(0, 1, 0);
        let mut send = |port: u32, f: &frame::Frame| {
            let mut out = BurstOutput::default();
            let mut burst = vec![PacketBuf::from_slice(&f.build(64))];
            ws.process_burst_into(&view, port, &mut burst, Time::from_secs(2), &mut out);
            assert!(out.packet_ins.is_empty());
            let mut ports: Vec<u32> = out.tx.ports().to_vec();
            ports.sort_unstable();
            (ports, out.tx.pkts().first().map(|p| p.as_slice().to_vec()))
        };
        // Host 5 (port 6) to host 4 (port 5): VLAN 101, learned.
        let (in_port, f) = w.flow(4, 0);
        assert_eq!(in_port, 6);
        let (ports, bytes) = send(in_port, &f);
        assert_eq!(ports, vec![5]);
        assert_eq!(bytes.unwrap(), f.build(64), "the VLAN tag is popped again");
        // An unknown destination floods VLAN 101's other ports.
        let mut unknown = f;
        unknown.eth_dst = 0x0200_dead_beef;
        assert_eq!(send(in_port, &unknown).0, vec![5, 7, 8]);
        // A tagged frame on an access port is dropped by table 0.
        let mut tagged = f;
        tagged.tag = frame::Tag::Vlan(101);
        assert_eq!(send(in_port, &tagged).0, Vec::<u32>::new());
        // --reference is refused with a reason.
        let mut a = args(Scenario::Faucet);
        a.reference = true;
        let e = bench(&a).expect_err("faucet has no reference").to_string();
        assert!(e.contains("no reference loop"), "{e}");
    }

    #[test]
    fn pool_bursts_share_a_port_and_cover_every_flow() {
        let w = Workload::new(Scenario::GatewayVlan2Mpls, 9000, 1).unwrap();
        let pool = Pool::new(&w, 9000, 9000, 64, 32, 1);
        let mut seen = vec![false; 9000];
        for b in &pool.bursts {
            assert!(b.len >= 1 && b.len <= 32);
            for k in b.start..b.start + b.len {
                seen[pool.flow_of[k] as usize] = true;
                assert_eq!(sample_flow(&w, &pool, k).0, b.in_port);
            }
        }
        assert!(seen.iter().all(|&s| s));
        let ports: std::collections::HashSet<u32> = pool.bursts.iter().map(|b| b.in_port).collect();
        assert_eq!(ports.len(), 3, "9000 rules over 4094 VLANs per port");
        assert_eq!(pool.bytes.len(), 9000 * 64);
    }

    #[test]
    fn bad_options_are_errors() {
        type Change = fn(&mut Options);
        let bad: [(&str, Change); 6] = [
            ("10-byte packets", |a| a.packet_size = 10),
            ("no time", |a| a.seconds = Some(0.0)),
            ("empty bursts", |a| a.burst = 0),
            ("no flows", |a| a.flows = Some(0)),
            ("a full table", |a| {
                a.rules = Some(pipeline::MAX_TABLE_ENTRIES)
            }),
            ("100M flows", |a| a.flows = Some(100_000_000)),
        ];
        for (what, change) in bad {
            let mut a = args(Scenario::L2);
            change(&mut a);
            assert!(bench(&a).is_err(), "{what} accepted");
        }
    }
}
