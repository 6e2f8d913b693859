//! Flow-mod rate over a TCP channel, timed from the first byte written
//! until the BARRIER_REPLY arrives (every flow-mod applied): says HELLO,
//! writes N distinct ADD flow-mods and a BARRIER_REQUEST.
//!
//! Without `--target` it starts an agent with an in-memory switch on
//! 127.0.0.1 and measures into that. With `flood`, a task pushes packet-in
//! events into the agent as fast as it can during the run (they meet the
//! token bucket and the bounded queues), to show that a packet-in flood
//! does not slow flow-mods down.
//!
//! With `--target [tcp:]HOST:PORT` it connects, as a controller, to a
//! switch that listens there (`fulmar run --listen ...`). Its flows carry
//! a cookie of their own (0xf10e): before each run they are deleted (not
//! timed), after it their number is checked with an aggregate-stats
//! request. They match `in_port` 1..48, IPv4 and `ipv4_dst` 11.0.0.0 + i,
//! so traffic between other addresses keeps its own flows. Each run also
//! prints its install window in Unix time, for lining it up with a traffic
//! log (bench/flowmod-under-traffic.sh), and how long one more flow-mod +
//! barrier took right after (work the install left for the next change).
//!
//! ```text
//! cargo run --release -p agent --example flowmod_rate -- [N] [RUNS] [flood] [--target [tcp:]HOST:PORT]
//! ```

use agent::{Agent, AgentConfig, MemorySwitch, MemorySwitchConfig, SwitchEvent};
use ofp::multipart::{MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use ofp::stats::FlowStatsRequest;
use ofp::PacketIn;
use ofp::{FlowMod, FlowModCommand, Framer, Hello, Instruction, Message, Oxm, OxmField, OxmValue};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The cookie of the flows `--target` runs install.
const TARGET_COOKIE: u64 = 0xf10e;

/// Flow `i`: in_port, IPv4 and an exact ipv4_dst `base + i`.
fn flow_mod(i: u32, base: u32, cookie: u64) -> FlowMod {
    let basic = |field, value| Oxm::Basic {
        field,
        value,
        mask: None,
    };
    FlowMod {
        command: FlowModCommand::Add,
        priority: 100,
        match_: ofp::Match {
            fields: vec![
                basic(OxmField::InPort, OxmValue::U32(i % 48 + 1)),
                basic(OxmField::EthType, OxmValue::U16(0x0800)),
                basic(
                    OxmField::Ipv4Dst,
                    OxmValue::Ipv4(Ipv4Addr::from(base.wrapping_add(i))),
                ),
            ],
        },
        instructions: vec![Instruction::ApplyActions {
            actions: vec![ofp::Action::Output {
                port: (i % 47) + 1,
                max_len: 0,
            }],
        }],
        cookie,
        ..FlowMod::default()
    }
}

/// A controller connection to `addr`, HELLOs exchanged.
async fn connect(addr: impl tokio::net::ToSocketAddrs) -> anyhow::Result<(TcpStream, Framer)> {
    let mut s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let mut framer = Framer::new();
    s.write_all(&Message::Hello(Hello::default()).encode(0))
        .await?;
    // The switch's HELLO (xid 0).
    read_until_xid(&mut s, &mut framer, 0).await?;
    Ok((s, framer))
}

async fn read_until_xid<R: AsyncRead + Unpin>(
    s: &mut R,
    framer: &mut Framer,
    xid: u32,
) -> anyhow::Result<Message> {
    let mut buf = vec![0u8; 65536];
    loop {
        while let Some(m) = framer.next_message()? {
            let (x, msg) = Message::decode(&m)?;
            if let Message::Error(e) = &msg {
                anyhow::bail!("switch answered with an error: {e:?}");
            }
            if x == xid {
                return Ok(msg);
            }
        }
        let n = s.read(&mut buf).await?;
        anyhow::ensure!(n > 0, "channel closed");
        framer.push(&buf[..n])?;
    }
}

async fn run_once(n: u32, flood: bool) -> anyhow::Result<(f64, u64)> {
    let switch = Arc::new(MemorySwitch::new(MemorySwitchConfig::default(), None));
    let agent = Agent::new(switch.clone(), AgentConfig::default());
    let (addr, listener) = agent.listen(&"ptcp:0:127.0.0.1".parse()?).await?;
    let addr = addr
        .tcp()
        .ok_or_else(|| anyhow::anyhow!("not a TCP listener"))?;
    let (tx, rx) = tokio::sync::mpsc::channel(4096);
    let pump = agent.spawn_events(rx);
    let stop = Arc::new(AtomicBool::new(false));
    let flooder = flood.then(|| {
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let pi = PacketIn {
                    match_: ofp::Match {
                        fields: vec![Oxm::Basic {
                            field: OxmField::InPort,
                            value: OxmValue::U32((sent % 16) as u32 + 1),
                            mask: None,
                        }],
                    },
                    data: vec![0; 128],
                    total_len: 128,
                    ..PacketIn::default()
                };
                if tx.send(SwitchEvent::PacketIn(pi)).await.is_err() {
                    break;
                }
                sent += 1;
            }
            sent
        })
    });

    let mut stream = Vec::with_capacity(n as usize * 100);
    for i in 0..n {
        stream.extend(Message::FlowMod(flow_mod(i, 0x0a00_0000, 0)).encode(i + 1));
    }
    let barrier_xid = 0xffff_fff0;
    stream.extend(Message::BarrierRequest.encode(barrier_xid));

    let (s, mut framer) = connect(addr).await?;

    let (mut rd, mut wr) = s.into_split();
    let start = Instant::now();
    let writer = tokio::spawn(async move { wr.write_all(&stream).await.map(|_| wr) });
    let reply = read_until_xid(&mut rd, &mut framer, barrier_xid).await?;
    let elapsed = start.elapsed().as_secs_f64();
    let _wr = writer.await??;
    anyhow::ensure!(reply == Message::BarrierReply, "unexpected {reply:?}");
    let installed = switch.with_state(|s| s.tables.len());
    anyhow::ensure!(
        installed == n as usize,
        "{installed} flows installed, expected {n}"
    );
    stop.store(true, Ordering::Relaxed);
    let offered = match flooder {
        Some(f) => f.await?,
        None => 0,
    };
    listener.stop();
    pump.abort();
    drop(rd);
    Ok((f64::from(n) / elapsed, offered))
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The number of flows with the `--target` cookie, by aggregate stats.
async fn count_target_flows(
    s: &mut TcpStream,
    framer: &mut Framer,
    xid: u32,
) -> anyhow::Result<u32> {
    // Every table, any port and group: only the cookie narrows it down.
    let filter = FlowStatsRequest {
        cookie: TARGET_COOKIE,
        cookie_mask: u64::MAX,
        table_id: ofp::consts::table_no::ALL,
        out_port: ofp::consts::port_no::ANY,
        out_group: ofp::consts::group_no::ANY,
        match_: ofp::Match::default(),
    };
    let body = MultipartRequestBody::Aggregate(filter);
    let req = Message::MultipartRequest(MultipartRequest { flags: 0, body });
    s.write_all(&req.encode(xid)).await?;
    match read_until_xid(s, framer, xid).await? {
        Message::MultipartReply(r) => match r.body {
            MultipartReplyBody::Aggregate(a) => Ok(a.flow_count),
            other => anyhow::bail!("unexpected reply {other:?}"),
        },
        other => anyhow::bail!("unexpected reply {other:?}"),
    }
}

/// One run against a listening switch: delete our flows, then time N adds
/// and a barrier. Returns the rate, the install window (Unix seconds) and
/// the time one more flow-mod + barrier took after it.
async fn run_target(addr: &str, n: u32) -> anyhow::Result<(f64, f64, f64, f64)> {
    let (mut s, mut framer) = connect(addr).await?;

    let delete = FlowMod {
        command: FlowModCommand::Delete,
        table_id: 0xff,
        cookie: TARGET_COOKIE,
        cookie_mask: u64::MAX,
        ..FlowMod::default()
    };
    let mut pre = Message::FlowMod(delete).encode(1);
    pre.extend(Message::BarrierRequest.encode(2));
    s.write_all(&pre).await?;
    read_until_xid(&mut s, &mut framer, 2).await?;
    anyhow::ensure!(
        count_target_flows(&mut s, &mut framer, 3).await? == 0,
        "flows with cookie {TARGET_COOKIE:#x} left after the delete"
    );

    let mut stream = Vec::with_capacity(n as usize * 100);
    for i in 0..n {
        stream.extend(Message::FlowMod(flow_mod(i, 0x0b00_0000, TARGET_COOKIE)).encode(i + 16));
    }
    let barrier_xid = 0xffff_fff0;
    stream.extend(Message::BarrierRequest.encode(barrier_xid));

    let (mut rd, mut wr) = s.into_split();
    let t0 = unix_now();
    let start = Instant::now();
    let writer = tokio::spawn(async move { wr.write_all(&stream).await.map(|_| wr) });
    let reply = read_until_xid(&mut rd, &mut framer, barrier_xid).await?;
    let elapsed = start.elapsed().as_secs_f64();
    let t1 = unix_now();
    let wr = writer.await??;
    anyhow::ensure!(reply == Message::BarrierReply, "unexpected {reply:?}");
    let mut s = rd.reunite(wr)?;
    // One more flow-mod and a barrier: what the install left for the next
    // change to pay (the switch's copy-on-write catching up).
    let next = Instant::now();
    let mut one = Message::FlowMod(flow_mod(n, 0x0b00_0000, TARGET_COOKIE)).encode(5);
    one.extend(Message::BarrierRequest.encode(6));
    s.write_all(&one).await?;
    read_until_xid(&mut s, &mut framer, 6).await?;
    let next = next.elapsed().as_secs_f64();
    let installed = count_target_flows(&mut s, &mut framer, 7).await?;
    anyhow::ensure!(
        installed == n + 1,
        "{installed} flows installed, expected {}",
        n + 1
    );
    Ok((f64::from(n) / elapsed, t0, t1, next))
}

fn main() -> anyhow::Result<()> {
    let mut positional = Vec::new();
    let mut target = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--target" {
            let t = args
                .next()
                .ok_or_else(|| anyhow::anyhow!("--target needs [tcp:]HOST:PORT"))?;
            target = Some(t.strip_prefix("tcp:").unwrap_or(&t).to_string());
        } else {
            positional.push(a);
        }
    }
    let mut args = positional.into_iter();
    let n: u32 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let runs: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3);
    let flood = args.next().as_deref() == Some("flood");
    anyhow::ensure!(
        !(flood && target.is_some()),
        "flood is for the in-memory switch only"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut rates = Vec::new();
    for run in 1..=runs {
        if let Some(addr) = &target {
            let (rate, t0, t1, next) = rt.block_on(run_target(addr, n))?;
            println!(
                "run {run}: {n} flow-mods + barrier to {addr}: {rate:.0} flow-mods/s \
                 (window {t0:.3} {t1:.3}; the next flow-mod + barrier: {:.1} ms)",
                next * 1e3
            );
            rates.push(rate);
            continue;
        }
        let (rate, offered) = rt.block_on(run_once(n, flood))?;
        if flood {
            println!(
                "run {run}: {n} flow-mods + barrier: {rate:.0} flow-mods/s \
                 ({offered} packet-ins offered meanwhile)"
            );
        } else {
            println!("run {run}: {n} flow-mods + barrier: {rate:.0} flow-mods/s");
        }
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    if let Some(median) = rates.get(rates.len() / 2) {
        println!("median: {median:.0} flow-mods/s over {runs} runs of {n}");
    }
    Ok(())
}
