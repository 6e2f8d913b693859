//! Runs the built `fulmar trace` on flow/group/meter files and packets.

use std::process::{Command, Output};

/// A fresh directory, removed when dropped.
fn dir(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fulmar-trace-test-{test}-"))
        .tempdir()
        .unwrap()
}

fn write(d: &std::path::Path, name: &str, text: &str) -> String {
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn fulmar(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fulmar"))
        .arg("trace")
        .args(args)
        .output()
        .unwrap()
}

/// Ethernet/IPv4/UDP 10.0.0.1:1000 -> 10.0.0.2:2000, TTL 64, no UDP
/// checksum.
const UDP: &str =
    "02000000000202000000000108004500002700010000401166c20a0000010a00000203e807d000130000\
                   68656c6c6f20776f726c64";

/// DIR/in.pcap: the UDP frame once per capture time (seconds,
/// microseconds); its path.
fn write_pcap(d: &std::path::Path, times: &[(u32, u32)]) -> String {
    let frame: Vec<u8> = (0..UDP.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&UDP[i..i + 2], 16).unwrap())
        .collect();
    let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    pcap.extend(65535u32.to_le_bytes());
    pcap.extend(1u32.to_le_bytes());
    for (sec, usec) in times {
        pcap.extend(sec.to_le_bytes());
        pcap.extend(usec.to_le_bytes());
        pcap.extend((frame.len() as u32).to_le_bytes());
        pcap.extend((frame.len() as u32).to_le_bytes());
        pcap.extend(&frame);
    }
    let path = d.join("in.pcap");
    std::fs::write(&path, &pcap).unwrap();
    path.to_str().unwrap().to_string()
}

/// `fulmar trace` of the capture `pcap` arriving on port 1, with the
/// `tables` options (--flows FILE ...) and then `extra`.
fn trace_pcap(tables: &[&str], pcap: &str, extra: &[&str]) -> Output {
    let mut args = tables.to_vec();
    args.extend(["--in-port", "1", "--pcap", pcap]);
    args.extend(extra);
    fulmar(&args)
}

fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn bad_flow_line_names_file_line_and_column() {
    let scratch = dir("bad");
    let d = scratch.path();
    let flows = write(
        d,
        "flows.txt",
        "# comment\npriority=1,actions=output:2\n\nin_port=1,eth_dts=00:00:00:00:00:01,actions=drop\n",
    );
    let o = fulmar(&["--flows", &flows, "--in-port", "1", "--packet", UDP]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(
        err.trim(),
        format!("{flows}:4: at column 11: unknown field \"eth_dts\"")
    );
}

#[test]
fn refused_entries_and_bad_group_lines_are_named_too() {
    let scratch = dir("refused");
    let d = scratch.path();
    let flows = write(d, "flows.txt", "priority=1,actions=group:9\n");
    let o = fulmar(&["--flows", &flows, "--in-port", "1", "--packet", UDP]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.starts_with(&format!(
            "{flows}:1: flow refused: BAD_ACTION/BAD_OUT_GROUP"
        )),
        "{err}"
    );
    let groups = write(
        d,
        "groups.txt",
        "group_id=1,type=all\n\ngroup_id=2,type=bad\n",
    );
    let o = fulmar(&[
        "--flows",
        &flows,
        "--groups",
        &groups,
        "--in-port",
        "1",
        "--packet",
        UDP,
    ]);
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.starts_with(&format!("{groups}:3: at column ")), "{err}");
}

#[test]
fn json_shape_for_outputs_and_packet_ins() {
    let scratch = dir("json");
    let d = scratch.path();
    let flows = write(
        d,
        "flows.txt",
        "table=0,priority=5,udp,cookie=0x99,actions=output:2,LOCAL,CONTROLLER:20\n\
         table=0,priority=0,actions=CONTROLLER:65535\n",
    );
    let o = fulmar(&[
        "--flows",
        &flows,
        "--in-port",
        "1",
        "--packet",
        UDP,
        "--json",
    ]);
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["port"], 2);
    assert_eq!(lines[0]["packet"], UDP);
    assert_eq!(lines[1]["port"], "LOCAL");
    let pi = &lines[2];
    assert_eq!(pi["port"], "CONTROLLER");
    assert_eq!(pi["reason"], "action");
    assert_eq!(pi["table_id"], 0);
    assert_eq!(pi["cookie"], 0x99);
    assert_eq!(pi["packet"], &UDP[..40]);
    assert_eq!(pi["total_len"], UDP.len() / 2);

    // An ARP frame misses the udp rule: the table-miss entry's packet-in.
    let arp = format!(
        "ffffffffffff020000000001080600010800060400010200000000010a000001000000000000{}",
        "0a000002"
    );
    let o = fulmar(&[
        "--flows",
        &flows,
        "--in-port",
        "3",
        "--packet",
        &arp,
        "--json",
    ]);
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["reason"], "no_match");
    assert_eq!(lines[0]["packet"], arp);
    assert_eq!(lines[0]["buffer_id"], serde_json::Value::Null);
}

#[test]
fn readable_trace_shows_tables_entries_and_action_set() {
    let scratch = dir("readable");
    let d = scratch.path();
    let flows = write(
        d,
        "flows.txt",
        "table=0,priority=5,ip,actions=write_actions(dec_ttl,output:3),goto_table:1\n\
         table=1,priority=5,actions=push_vlan:0x8100\n",
    );
    let o = fulmar(&["--flows", &flows, "--in-port", "1", "--packet", UDP]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    for needle in [
        "table 0: in_port=1,",
        "hit: table=0,priority=5,ip,actions=write_actions(dec_ttl,output:3),goto_table:1",
        "table 1: ",
        "action: push_vlan:0x8100",
        "action set: dec_ttl,output:3",
        "-> output to port 3",
        "final:",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn pcap_input_and_down_ports() {
    let scratch = dir("pcap");
    let d = scratch.path();
    let flows = write(d, "flows.txt", "priority=1,actions=group:1\n");
    let groups = write(
        d,
        "groups.txt",
        "group_id=1,type=ff,bucket=watch_port:2,output:2,bucket=watch_port:3,output:3\n",
    );
    let p = write_pcap(d, &[(10, 0), (11, 0)]);
    let tables: [&str; 4] = ["--flows", &flows, "--groups", &groups];
    let o = trace_pcap(&tables, &p, &["--json", "--port-down", "2"]);
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l["port"] == 3));
    let o = trace_pcap(&tables, &p, &["--json"]);
    assert!(json_lines(&o).iter().all(|l| l["port"] == 2));
}

#[test]
fn meters_see_the_pcap_capture_times() {
    let scratch = dir("meter");
    let d = scratch.path();
    let flows = write(d, "flows.txt", "priority=1,actions=meter:1,output:2\n");
    let meters = write(
        d,
        "meters.txt",
        "meter=1,pktps,burst,bands=type=drop,rate=1,burst_size=1\n",
    );
    // Two packets in the same second (the second is over the rate), then
    // one two seconds later (a token is back).
    let p = write_pcap(d, &[(10, 0), (10, 500_000), (12, 600_000)]);
    let tables: [&str; 4] = ["--flows", &flows, "--meters", &meters];
    let o = trace_pcap(&tables, &p, &["--json"]);
    assert_eq!(json_lines(&o).len(), 2, "the middle packet is metered out");
    let o = trace_pcap(&tables, &p, &[]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("meter 1: drop (band 0)"), "{text}");
    assert!(text.contains("drops: meter_drop=1"), "{text}");
}
