use super::*;

/// One bridge with two ports, a table, two workers, drops and a controller.
pub(super) fn sample() -> Scrape {
    Scrape {
        bridges: vec![BridgeMetrics {
            name: "br0".into(),
            dpid: 0xab,
            ports: vec![
                PortMetrics {
                    name: "p1".into(),
                    number: 1,
                    rx_packets: 5,
                    tx_packets: 7,
                    rx_bytes: 320,
                    tx_bytes: 448,
                    rx_dropped: 1,
                    tx_dropped: 2,
                    rx_errors: 3,
                    tx_errors: 4,
                    link_up: true,
                    admin_up: true,
                },
                PortMetrics {
                    name: "p2".into(),
                    number: 2,
                    ..Default::default()
                },
            ],
            tables: vec![TableMetrics {
                table_id: 0,
                active_entries: 3,
                lookups: 12,
                matched: 10,
            }],
            workers: vec![
                WorkerMetrics {
                    thread: "fulmar-w0".into(),
                    role: "worker".into(),
                    packets: 12,
                    busy_ns: 1_500_000_000,
                    idle_ns: 250_000,
                    rx_cycles: 1200,
                    pipeline_cycles: 3400,
                    tx_cycles: 5600,
                },
                WorkerMetrics {
                    thread: "fulmar-rx0".into(),
                    role: "rx".into(),
                    packets: 12,
                    busy_ns: 0,
                    idle_ns: 2_000_000_000,
                    ..Default::default()
                },
            ],
            drops: vec![("no_match".into(), 2), ("ttl_expired".into(), 0)],
            flows: 3,
            standalone_active: false,
            queues: vec![QueueMetrics {
                port: "p2".into(),
                ofport: 2,
                queue: 1,
                tx_packets: 9,
                tx_bytes: 900,
                dropped: 4,
            }],
        }],
        controllers: vec![ControllerMetrics {
            bridge: "br0".into(),
            target: "tcp:127.0.0.1:6653".into(),
            connected: true,
            role: "equal".into(),
        }],
        process: ProcessMetrics {
            resident_bytes: Some(12_345_678),
            start_time_seconds: Some(1_700_000_000.5),
        },
        datastore_version: 42,
        tsc_hz: Some(2_500_000_000),
    }
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn openmetrics_lines() {
    let text = render(&sample());
    let got = lines(&text);
    let version_line = format!("fulmar_build_info{{version=\"{VERSION}\"}} 1");
    for want in [
        "# HELP fulmar_port_rx_packets Packets received on the port.",
        "# TYPE fulmar_port_rx_packets counter",
        "fulmar_port_rx_packets_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 5",
        "fulmar_port_rx_packets_total{bridge=\"br0\",port=\"p2\",ofport=\"2\"} 0",
        "fulmar_port_tx_packets_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 7",
        "# TYPE fulmar_port_rx_bytes counter",
        "# UNIT fulmar_port_rx_bytes bytes",
        "fulmar_port_rx_bytes_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 320",
        "fulmar_port_tx_bytes_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 448",
        "fulmar_port_rx_dropped_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 1",
        "fulmar_port_tx_dropped_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 2",
        "fulmar_port_rx_errors_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 3",
        "fulmar_port_tx_errors_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 4",
        "# TYPE fulmar_port_link_up gauge",
        "fulmar_port_link_up{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 1",
        "fulmar_port_link_up{bridge=\"br0\",port=\"p2\",ofport=\"2\"} 0",
        "fulmar_port_admin_up{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 1",
        "fulmar_table_active_entries{bridge=\"br0\",table=\"0\"} 3",
        "fulmar_table_lookups_total{bridge=\"br0\",table=\"0\"} 12",
        "fulmar_table_matched_total{bridge=\"br0\",table=\"0\"} 10",
        "fulmar_worker_packets_total{bridge=\"br0\",thread=\"fulmar-w0\",role=\"worker\"} 12",
        "# TYPE fulmar_worker_busy_seconds counter",
        "# UNIT fulmar_worker_busy_seconds seconds",
        "fulmar_worker_busy_seconds_total{bridge=\"br0\",thread=\"fulmar-w0\",role=\"worker\"} 1.5",
        "fulmar_worker_busy_seconds_total{bridge=\"br0\",thread=\"fulmar-rx0\",role=\"rx\"} 0.0",
        "fulmar_worker_idle_seconds_total{bridge=\"br0\",thread=\"fulmar-w0\",role=\"worker\"} 0.00025",
        "fulmar_worker_idle_seconds_total{bridge=\"br0\",thread=\"fulmar-rx0\",role=\"rx\"} 2.0",
        "# TYPE fulmar_thread_cycles counter",
        "fulmar_thread_cycles_total{bridge=\"br0\",thread=\"fulmar-w0\",role=\"worker\",stage=\"rx\"} 1200",
        "fulmar_thread_cycles_total{bridge=\"br0\",thread=\"fulmar-w0\",role=\"worker\",stage=\"pipeline\"} 3400",
        "fulmar_thread_cycles_total{bridge=\"br0\",thread=\"fulmar-w0\",role=\"worker\",stage=\"tx\"} 5600",
        "fulmar_thread_cycles_total{bridge=\"br0\",thread=\"fulmar-rx0\",role=\"rx\",stage=\"tx\"} 0",
        "# TYPE fulmar_thread_cycle_rate_hertz gauge",
        "# UNIT fulmar_thread_cycle_rate_hertz hertz",
        "fulmar_thread_cycle_rate_hertz 2500000000",
        "# TYPE fulmar_bridge info",
        "fulmar_bridge_info{bridge=\"br0\",dpid=\"00000000000000ab\"} 1",
        "fulmar_flows{bridge=\"br0\"} 3",
        "fulmar_bridge_standalone_active{bridge=\"br0\"} 0",
        "# TYPE fulmar_drops counter",
        "fulmar_queue_tx_packets_total{bridge=\"br0\",port=\"p2\",ofport=\"2\",queue=\"1\"} 9",
        "# UNIT fulmar_queue_tx_bytes bytes",
        "fulmar_queue_tx_bytes_total{bridge=\"br0\",port=\"p2\",ofport=\"2\",queue=\"1\"} 900",
        "fulmar_queue_dropped_total{bridge=\"br0\",port=\"p2\",ofport=\"2\",queue=\"1\"} 4",
        "fulmar_drops_total{bridge=\"br0\",reason=\"no_match\"} 2",
        "fulmar_drops_total{bridge=\"br0\",reason=\"ttl_expired\"} 0",
        "fulmar_controller_connected{bridge=\"br0\",target=\"tcp:127.0.0.1:6653\",role=\"equal\"} 1",
        "# UNIT fulmar_process_resident_memory_bytes bytes",
        "fulmar_process_resident_memory_bytes 12345678",
        "fulmar_process_start_time_seconds 1700000000.5",
        "# HELP fulmar_datastore_version Version of the configuration datastore, one more per committed transaction.",
        "# TYPE fulmar_datastore_version gauge",
        "fulmar_datastore_version 42",
        "# TYPE fulmar_build info",
        &version_line,
    ] {
        assert!(got.contains(&want), "missing line {want:?} in\n{text}");
    }
    assert_eq!(got.last(), Some(&"# EOF"));
    assert!(text.ends_with("# EOF\n"));
    // Each family's descriptor appears once, its samples right after it.
    let types: Vec<&str> = got
        .iter()
        .filter(|l| l.starts_with("# TYPE "))
        .copied()
        .collect();
    let mut unique = types.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(types.len(), unique.len());
    // Every family has a HELP line right before its TYPE line.
    for (i, line) in got.iter().enumerate() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap();
            assert!(got[i - 1].starts_with(&format!("# HELP {name} ")), "{line}");
        }
    }
}

#[test]
fn an_empty_scrape_still_shows_the_process() {
    let text = render(&Scrape::default());
    assert_eq!(
        text,
        format!(
            "# HELP fulmar_datastore_version Version of the configuration datastore, one more per committed transaction.\n\
             # TYPE fulmar_datastore_version gauge\n\
             fulmar_datastore_version 0\n\
             # HELP fulmar_build The fulmar build.\n\
             # TYPE fulmar_build info\n\
             fulmar_build_info{{version=\"{VERSION}\"}} 1\n\
             # EOF\n"
        )
    );
}

#[test]
fn prometheus_text_lines() {
    let text = render_prometheus_text(&sample());
    let got = lines(&text);
    for want in [
        "# HELP fulmar_port_rx_packets_total Packets received on the port.",
        "# TYPE fulmar_port_rx_packets_total counter",
        "fulmar_port_rx_packets_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 5",
        "# TYPE fulmar_port_rx_bytes_total counter",
        "# TYPE fulmar_worker_busy_seconds_total counter",
        "# TYPE fulmar_port_link_up gauge",
        "# TYPE fulmar_bridge_info gauge",
        "fulmar_bridge_info{bridge=\"br0\",dpid=\"00000000000000ab\"} 1",
        "# TYPE fulmar_build_info gauge",
        "# TYPE fulmar_process_resident_memory_bytes gauge",
        "fulmar_process_resident_memory_bytes 12345678",
    ] {
        assert!(got.contains(&want), "missing line {want:?} in\n{text}");
    }
    assert!(!text.contains("# UNIT"));
    assert!(!text.contains("# EOF"));
    // The same samples as the OpenMetrics text.
    let samples = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(samples(&text), samples(&render(&sample())));
    assert_eq!(render_as(&sample(), Format::PrometheusText), text);
    assert_eq!(render_as(&sample(), Format::OpenMetrics), render(&sample()));
}

#[test]
fn label_values_are_escaped() {
    let mut s = sample();
    s.bridges[0].ports[0].name = "a\"b\\c\nd".into();
    s.bridges[0].drops[0].0 = "back\\slash".into();
    s.controllers[0].target = "unix:/run/\"x\"".into();
    let text = render(&s);
    assert!(text.contains(
        "fulmar_port_rx_packets_total{bridge=\"br0\",port=\"a\\\"b\\\\c\\nd\",ofport=\"1\"} 5\n"
    ));
    assert!(text.contains("fulmar_drops_total{bridge=\"br0\",reason=\"back\\\\slash\"} 2\n"));
    assert!(text.contains("target=\"unix:/run/\\\"x\\\"\""));
    // No raw newline inside a line: every line is a comment or a sample.
    for line in text.lines() {
        assert!(
            line.starts_with('#') || line.starts_with("fulmar_"),
            "{line:?}"
        );
    }
}

#[test]
fn escaping() {
    let esc = |s: &str| {
        let mut out = String::new();
        write_escaped(&mut out, s).unwrap();
        out
    };
    assert_eq!(esc(""), "");
    assert_eq!(esc("plain"), "plain");
    assert_eq!(esc("\\\"\n"), "\\\\\\\"\\n");
    assert_eq!(esc("é\"ü"), "é\\\"ü");
}

#[test]
fn huge_gauges_are_clamped_not_fatal() {
    let mut s = sample();
    s.datastore_version = u64::MAX;
    assert!(render(&s).contains(&format!("fulmar_datastore_version {}\n", i64::MAX)));
}

#[test]
fn accept_headers() {
    assert_eq!(Format::from_accept(None), Format::PrometheusText);
    assert_eq!(Format::from_accept(Some("*/*")), Format::PrometheusText);
    assert_eq!(
        Format::from_accept(Some("text/plain;version=0.0.4")),
        Format::PrometheusText
    );
    assert_eq!(
        Format::from_accept(Some("application/openmetrics-text;version=1.0.0")),
        Format::OpenMetrics
    );
    assert_eq!(
        Format::from_accept(Some("text/plain, application/openmetrics-text; q=0.5")),
        Format::OpenMetrics
    );
    assert_eq!(
        Format::from_accept(Some("application/openmetrics-text;q=0")),
        Format::PrometheusText
    );
}

#[test]
fn vm_rss() {
    assert_eq!(
        parse_vm_rss("Name:\tfulmar\nVmRSS:\t   12340 kB\nVmSwap: 0 kB\n"),
        Some(12340 * 1024)
    );
    assert_eq!(parse_vm_rss("Name:\tfulmar\n"), None);
    if std::path::Path::new("/proc/self/status").exists() {
        assert!(resident_bytes_now().is_some_and(|b| b > 0));
    }
    let p = ProcessMetrics::sample(UNIX_EPOCH + std::time::Duration::from_secs(10));
    assert_eq!(p.start_time_seconds, Some(10.0));
}

/// Runs `promtool check metrics` on `text`; `None` when promtool is absent.
fn promtool_check(text: &str) -> Option<(bool, String)> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("running promtool: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), report))
}

#[test]
fn promtool_accepts_the_prometheus_text() {
    let mut s = sample();
    // Escapes in label values too.
    s.bridges[0].ports[1].name = "odd \"name\" \\ with\nnewline".into();
    let text = render_prometheus_text(&s);
    let Some((ok, report)) = promtool_check(&text) else {
        println!("skipped: promtool is not installed (Debian package `prometheus`)");
        return;
    };
    assert!(
        ok && report.is_empty(),
        "promtool check metrics:\n{report}\non\n{text}"
    );
}
