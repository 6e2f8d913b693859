//! `fulmar demo`: the seed-001 gateway on a fresh machine, as root.
//!
//! ```text
//!  ns fulmar-demo-a            root namespace (fulmar)            ns fulmar-demo-b
//!  eth0.10 10.0.10.1 ── eth0 ═ fdm-a [1] gw1 [2] fdm-w1 ═ fdm-w2 [2] gw2 [1] fdm-b ═ eth0 ── eth0.20 10.0.10.2
//!      VLAN 10                 VLAN 10 → MPLS 100 over the WAN veth → VLAN 20                VLAN 20
//! ```
//!
//! Two network namespaces play host A (VLAN 10) and host B (VLAN 20); three
//! veth pairs join them to two bridges in this process, which translate
//! VLAN 10 to MPLS label 100 over the WAN link and label 100 to VLAN 20
//! (and label 200 back). The hosts are small fulmar helpers run inside the
//! namespaces over AF_PACKET — `fulmar demo-ping` sends VLAN-tagged ICMP
//! echo requests from A and `fulmar demo-echo` answers them on B — so the
//! demo needs neither a `ping` binary nor the kernel's 802.1Q module (many
//! small VMs lack it), and ARP is not needed (the flows carry only IPv4
//! over the tunnel). It prints the round trips and the counters and
//! removes everything it made — also after Ctrl-C, and leftovers of an
//! earlier run (names start with `fulmar-demo-`/`fdm-`) at start.

use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use dataplane::rawsock::RawSocketPort;
use dataplane::wake::{self, Doorbell};
use dataplane::{Burst, PacketBuf, PortBackend};
use datastore::Config;
use runtime::signals::Shutdown;
use runtime::{Runtime, RuntimeOptions};

const NS_A: &str = "fulmar-demo-a";
const NS_B: &str = "fulmar-demo-b";
const MAC_A: &str = "02:00:00:00:00:0a";
const MAC_B: &str = "02:00:00:00:00:0b";
const IP_A: &str = "10.0.10.1";
const IP_B: &str = "10.0.10.2";
/// Root-namespace interfaces the demo creates.
const ROOT_LINKS: [&str; 3] = ["fdm-a", "fdm-b", "fdm-w1"];

/// `fulmar demo` arguments.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Thread arrangement: run-to-completion or rx-worker-tx.
    #[arg(long, default_value = "run-to-completion")]
    pub mode: String,
    /// Port backend: afpacket or afxdp.
    #[arg(long, default_value = "afpacket")]
    pub io: String,
    /// Echo requests to send.
    #[arg(long, default_value_t = 5)]
    pub count: u32,
    /// How afpacket ports receive: ring (default) or socket.
    #[arg(long, value_enum, default_value = "ring")]
    pub afpacket_mode: crate::cmd_run::AfMode,
    /// Keep the switch running after the pings until Ctrl-C.
    #[arg(long)]
    pub hold: bool,
}

/// `fulmar demo-ping` arguments (run inside a namespace by the demo).
#[derive(Args, Debug)]
pub struct PingArgs {
    /// Interface to send on.
    #[arg(long)]
    pub interface: String,
    /// Source MAC.
    #[arg(long)]
    pub src_mac: String,
    /// Destination MAC.
    #[arg(long)]
    pub dst_mac: String,
    /// Source IPv4 address.
    #[arg(long)]
    pub src_ip: std::net::Ipv4Addr,
    /// Destination IPv4 address.
    #[arg(long)]
    pub dst_ip: std::net::Ipv4Addr,
    /// Tag the requests with this VLAN id (and expect tagged replies).
    #[arg(long)]
    pub vlan: Option<u16>,
    /// Requests to send.
    #[arg(long, default_value_t = 5)]
    pub count: u32,
    /// Milliseconds between requests.
    #[arg(long, default_value_t = 200)]
    pub interval_ms: u64,
}

/// `fulmar demo-echo` arguments: answer ICMP echo requests.
#[derive(Args, Debug)]
pub struct EchoArgs {
    /// Interface to answer on.
    #[arg(long)]
    pub interface: String,
    /// Our MAC address.
    #[arg(long)]
    pub mac: String,
    /// Our IPv4 address.
    #[arg(long)]
    pub ip: std::net::Ipv4Addr,
    /// Answer only requests tagged with this VLAN id (replies are tagged
    /// the same way).
    #[arg(long)]
    pub vlan: Option<u16>,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run ip(8): {e}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn ip_quiet(args: &[&str]) {
    let _ = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Removes every namespace and link the demo makes (present or not).
fn cleanup() {
    for ns in [NS_A, NS_B] {
        ip_quiet(&["netns", "del", ns]);
    }
    for l in ROOT_LINKS {
        ip_quiet(&["link", "del", l]);
    }
}

/// Removes the demo's namespaces and links when dropped.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        cleanup();
        eprintln!("demo: namespaces and links removed");
    }
}

fn build() -> anyhow::Result<()> {
    for ns in [NS_A, NS_B] {
        ip(&["netns", "add", ns])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
    }
    for (ns, root, mac) in [(NS_A, "fdm-a", MAC_A), (NS_B, "fdm-b", MAC_B)] {
        ip(&[
            "link", "add", root, "type", "veth", "peer", "name", "eth0", "netns", ns,
        ])?;
        ip(&["-n", ns, "link", "set", "eth0", "address", mac, "up"])?;
        ip(&["link", "set", root, "up"])?;
    }
    ip(&[
        "link", "add", "fdm-w1", "type", "veth", "peer", "name", "fdm-w2",
    ])?;
    ip(&["link", "set", "fdm-w1", "up"])?;
    ip(&["link", "set", "fdm-w2", "up"])?;
    Ok(())
}

/// The demo's configuration: two gateway bridges over the WAN veth.
pub fn demo_config(mode: &str, io: &str) -> String {
    let threads = if mode == "rx-worker-tx" {
        "mode = \"rx-worker-tx\"\nrx_threads = 1\nworker_threads = 1\ntx_threads = 1"
    } else {
        "mode = \"run-to-completion\"\nworker_threads = 1"
    };
    let gw1 = gateway_bridge(
        ("gw1", 1),
        [
            "table=0,priority=100,in_port=1,dl_vlan=10,actions=pop_vlan,push_mpls:0x8847,set_field:100->mpls_label,output:2",
            "table=0,priority=100,in_port=2,dl_type=0x8847,mpls_label=200,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4106->vlan_vid,output:1",
        ],
        ["fdm-a", "fdm-w1"],
        io,
    );
    let gw2 = gateway_bridge(
        ("gw2", 2),
        [
            "table=0,priority=100,in_port=2,dl_type=0x8847,mpls_label=100,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4116->vlan_vid,output:1",
            "table=0,priority=100,in_port=1,dl_vlan=20,actions=pop_vlan,push_mpls:0x8847,set_field:200->mpls_label,output:2",
        ],
        ["fdm-b", "fdm-w2"],
        io,
    );
    format!("[dataplane]\n{threads}\n{gw1}{gw2}")
}

/// One gateway bridge (name, dpid) of the demo: its two label-swapping
/// flows over a drop-all, the LAN interface on port 1 and the WAN veth on
/// port 2, both on backend `io`.
fn gateway_bridge(
    (name, dpid): (&str, u64),
    [flow1, flow2]: [&str; 2],
    [lan, wan]: [&str; 2],
    io: &str,
) -> String {
    format!(
        r#"
[[bridges]]
name = "{name}"
dpid = {dpid}
flows = [
  "{flow1}",
  "{flow2}",
  "table=0,priority=0,actions=drop",
]
ports = [
  {{ port = 1, interface = "{lan}", backend = "{io}" }},
  {{ port = 2, interface = "{wan}", backend = "{io}" }},
]
"#
    )
}

/// Runs the demo.
pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    if !is_root() {
        anyhow::bail!("fulmar demo builds network namespaces and needs root (try sudo)");
    }
    let shutdown = Shutdown::install()?;
    cleanup();
    let _guard = Cleanup;
    build()?;
    eprintln!("demo: host A ({NS_A}, VLAN 10, {IP_A}) <-> gw1 <-MPLS over fdm-w1/fdm-w2-> gw2 <-> host B ({NS_B}, VLAN 20, {IP_B})");
    let cfg = Config::from_str(&demo_config(&args.mode, &args.io), "demo.toml")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut opts = RuntimeOptions::default();
    opts.backends.afpacket_mode = args.afpacket_mode.into();
    let rt = Runtime::start(&cfg, &opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    let exe = std::env::current_exe()?;
    let mut echo = Command::new("ip")
        .args(["netns", "exec", NS_B])
        .arg(&exe)
        .args([
            "demo-echo",
            "--interface",
            "eth0",
            "--mac",
            MAC_B,
            "--ip",
            IP_B,
            "--vlan",
            "20",
            "--duration",
            "3600",
        ])
        .spawn()?;
    std::thread::sleep(Duration::from_millis(500));
    let count = args.count.to_string();
    let status = Command::new("ip")
        .args(["netns", "exec", NS_A])
        .arg(&exe)
        .args([
            "demo-ping",
            "--interface",
            "eth0",
            "--vlan",
            "10",
            "--src-mac",
            MAC_A,
            "--dst-mac",
            MAC_B,
            "--src-ip",
            IP_A,
            "--dst-ip",
            IP_B,
            "--count",
            &count,
        ])
        .status();
    let ok = matches!(&status, Ok(s) if s.success());
    if args.hold && !shutdown.requested() {
        eprintln!("demo: switch running; Ctrl-C stops and cleans up");
        while !shutdown.sleep(Duration::from_secs(1)) {}
    }
    let _ = echo.kill();
    let _ = echo.wait();
    println!("{}", rt.stop());
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("demo: ping from A to B failed");
        ExitCode::FAILURE
    })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

fn parse_mac(s: &str) -> anyhow::Result<[u8; 6]> {
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        anyhow::bail!("bad MAC address {s:?}");
    }
    for (d, p) in m.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16).map_err(|_| anyhow::anyhow!("bad MAC address {s:?}"))?;
    }
    Ok(m)
}

fn csum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        let w = match c {
            [a, b] => u16::from_be_bytes([*a, *b]),
            [a] => u16::from_be_bytes([*a, 0]),
            _ => 0,
        };
        sum += u32::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An ICMP echo frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echo {
    /// Source MAC.
    pub src: [u8; 6],
    /// Destination MAC.
    pub dst: [u8; 6],
    /// VLAN id of an 802.1Q tag, if tagged.
    pub vlan: Option<u16>,
    /// Source IPv4.
    pub sip: [u8; 4],
    /// Destination IPv4.
    pub dip: [u8; 4],
    /// 8: request, 0: reply.
    pub icmp_type: u8,
    /// Identifier.
    pub id: u16,
    /// Sequence number.
    pub seq: u16,
}

impl Echo {
    /// The frame (56 bytes of payload).
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(102);
        f.extend_from_slice(&self.dst);
        f.extend_from_slice(&self.src);
        if let Some(v) = self.vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&(v & 0x0fff).to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let payload = [0x5au8; 56];
        let total = (20 + 8 + payload.len()) as u16;
        let mut iph = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 1, 0, 0];
        iph[2..4].copy_from_slice(&total.to_be_bytes());
        iph[4..6].copy_from_slice(&self.seq.to_be_bytes());
        iph.extend_from_slice(&self.sip);
        iph.extend_from_slice(&self.dip);
        let c = csum(&iph);
        iph[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&iph);
        let mut icmp = vec![self.icmp_type, 0, 0, 0];
        icmp.extend_from_slice(&self.id.to_be_bytes());
        icmp.extend_from_slice(&self.seq.to_be_bytes());
        icmp.extend_from_slice(&payload);
        let c = csum(&icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&icmp);
        f
    }

    /// Parses an ICMP echo frame (untagged or with one 802.1Q tag).
    pub fn parse(frame: &[u8]) -> Option<Echo> {
        let be = |at: usize| Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]));
        let mut off = 12;
        let mut vlan = None;
        if be(12)? == 0x8100 {
            vlan = Some(be(14)? & 0x0fff);
            off = 16;
        }
        if be(off)? != 0x0800 {
            return None;
        }
        let l3 = off + 2;
        if *frame.get(l3 + 9)? != 1 {
            return None;
        }
        let ihl = usize::from(frame.get(l3)? & 0x0f) * 4;
        let icmp = l3 + ihl;
        let icmp_type = *frame.get(icmp)?;
        if icmp_type != 0 && icmp_type != 8 {
            return None;
        }
        let six = |at: usize| -> Option<[u8; 6]> { frame.get(at..at + 6)?.try_into().ok() };
        let four = |at: usize| -> Option<[u8; 4]> { frame.get(at..at + 4)?.try_into().ok() };
        Some(Echo {
            dst: six(0)?,
            src: six(6)?,
            vlan,
            sip: four(l3 + 12)?,
            dip: four(l3 + 16)?,
            icmp_type,
            id: be(icmp + 4)?,
            seq: be(icmp + 6)?,
        })
    }
}

/// Sleeps until the port has a frame (or 10 ms), so the hosts do not take
/// cores from the switch while they wait.
fn idle_wait(bell: &Doorbell, port: &RawSocketPort) {
    let fds: Vec<_> = port.rx_fd().into_iter().collect();
    bell.prepare();
    wake::wait(bell, &fds, Duration::from_millis(10));
}

/// Answers ICMP echo requests addressed to `--ip` until `--duration`.
pub fn echo(args: &EchoArgs) -> anyhow::Result<ExitCode> {
    let mut port = RawSocketPort::open(&args.interface)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.interface))?;
    let mac = parse_mac(&args.mac)?;
    let me = args.ip.octets();
    let start = Instant::now();
    let bell = Doorbell::new()?;
    let mut rx = Burst::with_limit(32);
    let mut tx = Burst::with_limit(32);
    while start.elapsed().as_secs_f64() < args.duration {
        rx.clear();
        if port.rx_burst(&mut rx)? == 0 {
            idle_wait(&bell, &port);
            continue;
        }
        for p in rx.iter() {
            let Some(e) = Echo::parse(p.data()) else {
                continue;
            };
            if e.icmp_type != 8 || e.dip != me || e.vlan != args.vlan {
                continue;
            }
            let reply = Echo {
                src: mac,
                dst: e.src,
                sip: me,
                dip: e.sip,
                icmp_type: 0,
                ..e
            };
            let _ = tx.push(PacketBuf::from_slice(&reply.build()));
        }
        while !tx.is_empty() {
            port.tx_burst(&mut tx)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Sends echo requests and prints each round trip (ms); fails when none
/// came back.
pub fn ping(args: &PingArgs) -> anyhow::Result<ExitCode> {
    let mut port = RawSocketPort::open(&args.interface)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.interface))?;
    let (src, dst) = (parse_mac(&args.src_mac)?, parse_mac(&args.dst_mac)?);
    let id = (std::process::id() & 0xffff) as u16;
    let bell = Doorbell::new()?;
    let mut rtts = Vec::new();
    for seq in 1..=args.count {
        let seq = seq as u16;
        let frame = Echo {
            src,
            dst,
            vlan: args.vlan,
            sip: args.src_ip.octets(),
            dip: args.dst_ip.octets(),
            icmp_type: 8,
            id,
            seq,
        }
        .build();
        let mut b = Burst::with_limit(1);
        let _ = b.push(PacketBuf::from_slice(&frame));
        let sent = Instant::now();
        port.tx_burst(&mut b)?;
        let mut got = None;
        let mut rx = Burst::with_limit(32);
        while sent.elapsed() < Duration::from_secs(1) && got.is_none() {
            rx.clear();
            if port.rx_burst(&mut rx)? == 0 {
                idle_wait(&bell, &port);
            }
            let is_reply =
                |e: Echo| e.icmp_type == 0 && e.id == id && e.seq == seq && e.vlan == args.vlan;
            if rx
                .iter()
                .any(|p| Echo::parse(p.data()).is_some_and(is_reply))
            {
                got = Some(sent.elapsed());
            }
        }
        match got {
            Some(d) => {
                println!(
                    "{} bytes from {}: icmp_seq={seq} time={:.3} ms",
                    84,
                    args.dst_ip,
                    d.as_secs_f64() * 1e3
                );
                rtts.push(d.as_secs_f64() * 1e3);
            }
            None => println!("no reply for icmp_seq={seq}"),
        }
        std::thread::sleep(Duration::from_millis(args.interval_ms));
    }
    if rtts.is_empty() {
        println!("{} packets transmitted, 0 received", args.count);
        return Ok(ExitCode::FAILURE);
    }
    rtts.sort_by(f64::total_cmp);
    let avg = rtts.iter().sum::<f64>() / rtts.len() as f64;
    println!(
        "{} packets transmitted, {} received; rtt min/avg/median/max = {:.3}/{:.3}/{:.3}/{:.3} ms",
        args.count,
        rtts.len(),
        rtts[0],
        avg,
        rtts[rtts.len() / 2],
        rtts[rtts.len() - 1]
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_frames_checksum_and_parse_back() {
        for vlan in [None, Some(10)] {
            let e = Echo {
                src: [2, 0, 0, 0, 0, 1],
                dst: [2, 0, 0, 0, 0, 2],
                vlan,
                sip: [10, 0, 0, 1],
                dip: [10, 0, 0, 2],
                icmp_type: 8,
                id: 7,
                seq: 3,
            };
            let f = e.build();
            let l3 = if vlan.is_some() { 18 } else { 14 };
            assert_eq!(csum(&f[l3..l3 + 20]), 0, "IPv4 header checksum");
            assert_eq!(csum(&f[l3 + 20..]), 0, "ICMP checksum");
            assert_eq!(Echo::parse(&f), Some(e));
            // Cut before the end of the ICMP header: not an echo.
            for n in 0..l3 + 28 {
                assert_eq!(Echo::parse(&f[..n]), None, "{n}");
            }
            assert_eq!(Echo::parse(&f[..l3 + 28]), Some(e));
        }
    }

    #[test]
    fn demo_config_loads_in_both_modes() {
        for mode in ["run-to-completion", "rx-worker-tx"] {
            let c = Config::from_str(&demo_config(mode, "afpacket"), "demo.toml").unwrap();
            assert_eq!(c.bridges.len(), 2);
            assert_eq!(c.bridges[0].flows.len(), 3);
        }
        assert!(parse_mac("02:00:00:00:00:0g").is_err());
    }
}
