//! Packet-in and packet-out rates as a reactive controller sees them,
//! against a switch that listens for controllers (`fulmar run --listen
//! tcp:...`, or Open vSwitch with `ovs-vsctl set-controller BR ptcp:...`).
//! It connects as a controller, says HELLO, and runs one of two modes:
//!
//! - `reactive`: deletes its own flows (cookie 0xf10f), installs a
//!   table-miss flow (priority 0, match all, output CONTROLLER with max_len
//!   NO_BUFFER) and answers every PACKET_IN with a PACKET_OUT carrying the
//!   packet's data (or its buffer id, if the switch buffered it), in_port
//!   from the packet-in's match, action output to `--out-port`. Traffic is
//!   up to someone else (bench/packetio-vs-ovs.sh sends it into another
//!   port). The measurement window opens at the first PACKET_IN (waited
//!   for up to 10 s) and lasts `--seconds`; packet-ins after it are
//!   counted as late and not answered. Then the table-miss flow is deleted
//!   and a BARRIER's reply says every packet-out sent has been handled, so
//!   what reached the output port can be compared with `packet_outs`.
//! - `packet-out`: deletes its own flows, then writes PACKET_OUTs of one
//!   fixed 64-byte UDP frame (data included, in_port CONTROLLER, output to
//!   `--out-port`) back to back for `--seconds`. Every 256 packet-outs it
//!   writes a BARRIER_REQUEST and keeps at most 8 of them unanswered: the
//!   backlog stays bounded (about 2,000 packet-outs, less than fulmar's
//!   injection ring holds) and `packet_outs` counts only what the switch
//!   has handled, not what sits in socket buffers. A BARRIER rather than
//!   an ECHO because OpenFlow promises that its reply comes after
//!   everything before it was processed; an ECHO promises nothing about
//!   the messages around it. The rate is packet-outs over the time from
//!   the first write until the last BARRIER_REPLY. What reached the wire
//!   is for the caller to count at the receiving end.
//!
//! Results go to stdout as `key=value` lines (see [`Report`]); `ready` on
//! stderr says the flows are in place and traffic may start. Anything
//! unexpected from the switch (an OpenFlow ERROR, a message that does not
//! decode, a packet-in without in_port, a closed channel, a missing
//! BARRIER_REPLY) is reported and the exit status is 1.
//!
//! tokio, as in `flowmod_rate`: packet-out mode reads (barrier replies,
//! echo requests) while it writes, which two tasks on one current-thread
//! runtime express without threads or locks.
//!
//! ```text
//! cargo build --release -p agent --example packetio_rate
//! target/release/examples/packetio_rate reactive|packet-out --target [tcp:]HOST:PORT [--seconds S] [--out-port P]
//! ```

use ofp::consts::{port_no, OFP_NO_BUFFER};
use ofp::{
    Action, FlowMod, FlowModCommand, Framer, Hello, Instruction, Message, Oxm, OxmField, OxmValue,
    PacketIn, PacketOut,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

/// The cookie of the flows this program installs (and deletes).
const COOKIE: u64 = 0xf10f;
/// Packet-outs between two BARRIER_REQUESTs in packet-out mode.
const BATCH: u32 = 256;
/// Unanswered BARRIER_REQUESTs allowed at once in packet-out mode.
const WINDOW: u32 = 8;
/// How long reactive mode waits for its first PACKET_IN.
const FIRST_PACKET_IN_WAIT: Duration = Duration::from_secs(10);
/// How long any reply (HELLO, BARRIER_REPLY) may take.
const REPLY_WAIT: Duration = Duration::from_secs(10);
/// BARRIER xids in packet-out mode: this bit and the batch number.
const BARRIER_XID: u32 = 0x8000_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Reactive,
    PacketOut,
}

struct Options {
    mode: Mode,
    target: String,
    seconds: f64,
    out_port: u32,
}

const USAGE: &str = "usage: packetio_rate reactive|packet-out --target [tcp:]HOST:PORT \
                     [--seconds S] [--out-port P]";

fn parse_args() -> anyhow::Result<Options> {
    let mut mode = None;
    let mut target = None;
    let mut seconds = 5.0;
    let mut out_port = 2;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{name} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "reactive" => mode = Some(Mode::Reactive),
            "packet-out" => mode = Some(Mode::PacketOut),
            "--target" => {
                let t = value("--target")?;
                target = Some(t.strip_prefix("tcp:").unwrap_or(&t).to_string());
            }
            "--seconds" => seconds = value("--seconds")?.parse()?,
            "--out-port" => out_port = value("--out-port")?.parse()?,
            other => anyhow::bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    anyhow::ensure!(
        seconds > 0.0 && seconds <= 3600.0,
        "--seconds must be in (0, 3600]"
    );
    anyhow::ensure!(
        (1..=port_no::MAX).contains(&out_port),
        "--out-port must be a physical port number"
    );
    Ok(Options {
        mode: mode.ok_or_else(|| anyhow::anyhow!("no mode given\n{USAGE}"))?,
        target: target.ok_or_else(|| anyhow::anyhow!("no --target given\n{USAGE}"))?,
        seconds,
        out_port,
    })
}

/// What a run found, printed as `key=value` lines.
#[derive(Default)]
struct Report {
    /// Seconds measured: the window (reactive), first write to last
    /// BARRIER_REPLY (packet-out).
    seconds: f64,
    /// PACKET_INs received inside the window (each answered).
    packet_ins: u64,
    /// PACKET_OUTs the switch acknowledged (with a BARRIER_REPLY).
    packet_outs: u64,
    /// PACKET_INs that came after the window, not answered.
    late_packet_ins: u64,
    /// PACKET_INs in each whole or partial second of the window.
    per_second: Vec<u64>,
}

impl Report {
    fn print(&self, o: &Options) {
        let rate = |n: u64| {
            if self.seconds > 0.0 {
                n as f64 / self.seconds
            } else {
                0.0
            }
        };
        let mode = match o.mode {
            Mode::Reactive => "reactive",
            Mode::PacketOut => "packet-out",
        };
        println!("mode={mode}");
        println!("target={}", o.target);
        println!("seconds={:.3}", self.seconds);
        if o.mode == Mode::Reactive {
            println!("packet_ins={}", self.packet_ins);
            println!("packet_in_rate={:.0}", rate(self.packet_ins));
            println!("late_packet_ins={}", self.late_packet_ins);
            let per: Vec<String> = self.per_second.iter().map(u64::to_string).collect();
            println!("per_second={}", per.join(","));
        } else {
            println!("batch={BATCH}");
            println!("window={WINDOW}");
        }
        println!("packet_outs={}", self.packet_outs);
        println!("packet_out_rate={:.0}", rate(self.packet_outs));
    }
}

/// A controller channel: the socket and what it has read but not decoded.
struct Channel<S> {
    s: S,
    framer: Framer,
    buf: Vec<u8>,
}

impl<S: AsyncRead + Unpin> Channel<S> {
    fn new(s: S) -> Self {
        Channel {
            s,
            framer: Framer::new(),
            buf: vec![0; 65536],
        }
    }

    /// The next message already read whole, if any (never reads). A
    /// message that does not decode is an error; so is an OpenFlow ERROR
    /// (nothing this program sends should draw one).
    fn pop(&mut self) -> anyhow::Result<Option<(u32, Message)>> {
        let Some(m) = self.framer.next_slice()? else {
            return Ok(None);
        };
        let (xid, msg) = Message::decode(m)?;
        if let Message::Error(e) = &msg {
            anyhow::bail!("the switch answered xid {xid:#x} with an error: {e:?}");
        }
        Ok(Some((xid, msg)))
    }

    /// The next message, reading when none is whole yet, or `None` when
    /// `deadline` passes first. A closed channel is an error, and what
    /// [`Channel::pop`] refuses.
    async fn next(&mut self, deadline: Instant) -> anyhow::Result<Option<(u32, Message)>> {
        loop {
            if let Some(m) = self.pop()? {
                return Ok(Some(m));
            }
            let n = match tokio::time::timeout_at(deadline, self.s.read(&mut self.buf)).await {
                Ok(r) => r?,
                Err(_) => return Ok(None),
            };
            anyhow::ensure!(n > 0, "the switch closed the channel");
            self.framer.push(&self.buf[..n])?;
        }
    }
}

/// FLOW_MOD deleting every flow with [`COOKIE`], in every table.
fn delete_own_flows() -> Message {
    Message::FlowMod(FlowMod {
        command: FlowModCommand::Delete,
        table_id: ofp::consts::table_no::ALL,
        cookie: COOKIE,
        cookie_mask: u64::MAX,
        ..FlowMod::default()
    })
}

/// The table-miss flow: everything to the controller, whole packets.
fn table_miss() -> Message {
    Message::FlowMod(FlowMod {
        priority: 0,
        cookie: COOKIE,
        instructions: vec![Instruction::ApplyActions {
            actions: vec![Action::Output {
                port: port_no::CONTROLLER,
                max_len: ofp::action::OFPCML_NO_BUFFER,
            }],
        }],
        ..FlowMod::default()
    })
}

/// A 64-byte UDP frame (no FCS) to a MAC address nobody has, so the
/// receiving host counts it and sends nothing back.
fn udp_frame() -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend([0x02, 0x00, 0x00, 0x00, 0x0f, 0xff]); // eth_dst
    f.extend([0x02, 0x00, 0x00, 0x00, 0x0f, 0x01]); // eth_src
    f.extend(0x0800u16.to_be_bytes());
    let ip_start = f.len();
    let udp_len: u16 = 8 + 22;
    f.extend([0x45, 0x00]);
    f.extend((20 + udp_len).to_be_bytes());
    f.extend([0, 0, 0x40, 0x00, 64, 17, 0, 0]); // id, DF, TTL, UDP, checksum
    f.extend([10, 15, 0, 1, 10, 15, 0, 2]);
    let sum = packet::checksum::checksum(&f[ip_start..], 0);
    f[ip_start + 10..ip_start + 12].copy_from_slice(&sum.to_be_bytes());
    f.extend(9u16.to_be_bytes()); // sport
    f.extend(9u16.to_be_bytes()); // dport
    f.extend(udp_len.to_be_bytes());
    f.extend([0, 0]); // no UDP checksum
    f.resize(64, 0);
    f
}

/// Connects and exchanges HELLOs.
async fn connect(target: &str) -> anyhow::Result<Channel<TcpStream>> {
    let s = TcpStream::connect(target).await?;
    s.set_nodelay(true)?;
    let mut ch = Channel::new(s);
    ch.s.write_all(&Message::Hello(Hello::default()).encode(1))
        .await?;
    let deadline = Instant::now() + REPLY_WAIT;
    loop {
        match ch.next(deadline).await? {
            Some((_, Message::Hello(_))) => return Ok(ch),
            Some(_) => continue,
            None => anyhow::bail!("no HELLO from {target} within {REPLY_WAIT:?}"),
        }
    }
}

/// Sends `msgs` and a BARRIER, and waits for its reply, answering ECHO
/// requests and counting PACKET_INs meanwhile (returned).
async fn sync(ch: &mut Channel<TcpStream>, msgs: &[Message], xid: u32) -> anyhow::Result<u64> {
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        out.extend(m.encode(xid + 1 + i as u32));
    }
    out.extend(Message::BarrierRequest.encode(xid));
    ch.s.write_all(&out).await?;
    let deadline = Instant::now() + REPLY_WAIT;
    let mut packet_ins = 0;
    loop {
        match ch.next(deadline).await? {
            Some((x, Message::BarrierReply)) if x == xid => return Ok(packet_ins),
            Some((_, Message::PacketIn(_))) => packet_ins += 1,
            Some((x, Message::EchoRequest(e))) => {
                ch.s.write_all(&Message::EchoReply(e).encode(x)).await?;
            }
            Some(_) => {}
            None => anyhow::bail!("no BARRIER_REPLY within {REPLY_WAIT:?}"),
        }
    }
}

/// The `in_port` of a packet-in's match.
fn in_port(pi: &PacketIn) -> Option<u32> {
    pi.match_.fields.iter().find_map(|o| match o {
        Oxm::Basic {
            field: OxmField::InPort,
            value: OxmValue::U32(p),
            ..
        } => Some(*p),
        _ => None,
    })
}

/// The PACKET_OUT that answers `pi`: its data (or its buffer, if the
/// switch kept one) from its in_port to `out_port`.
fn answer(pi: PacketIn, out_port: u32, xid: u32) -> anyhow::Result<Vec<u8>> {
    let port = in_port(&pi)
        .ok_or_else(|| anyhow::anyhow!("a PACKET_IN without in_port in its match: {pi:?}"))?;
    let (buffer_id, data) = if pi.buffer_id == OFP_NO_BUFFER {
        (OFP_NO_BUFFER, pi.data)
    } else {
        (pi.buffer_id, Vec::new())
    };
    let po = PacketOut {
        buffer_id,
        in_port: port,
        actions: vec![Action::Output {
            port: out_port,
            max_len: 0,
        }],
        data,
    };
    Ok(Message::PacketOut(po).encode(xid))
}

async fn reactive(o: &Options) -> anyhow::Result<Report> {
    let mut ch = connect(&o.target).await?;
    sync(&mut ch, &[delete_own_flows(), table_miss()], 3).await?;
    eprintln!("ready");
    let mut r = Report::default();
    let mut out = Vec::new();
    let mut xid: u32 = 16;
    let mut window: Option<(Instant, Instant)> = None;
    let wait_until = Instant::now() + FIRST_PACKET_IN_WAIT;
    loop {
        let deadline = window.map_or(wait_until, |(_, end)| end);
        let Some(first) = ch.next(deadline).await? else {
            break;
        };
        // That message and all the others the same read brought whole are
        // answered with one write.
        let mut next = Some(first);
        while let Some((x, msg)) = next {
            match msg {
                Message::PacketIn(pi) => {
                    let now = Instant::now();
                    let (start, end) = *window
                        .get_or_insert_with(|| (now, now + Duration::from_secs_f64(o.seconds)));
                    if now >= end {
                        r.late_packet_ins += 1;
                    } else {
                        out.extend(answer(pi, o.out_port, xid)?);
                        xid = xid.wrapping_add(1) & !BARRIER_XID;
                        r.packet_ins += 1;
                        r.packet_outs += 1;
                        let second = now.duration_since(start).as_secs() as usize;
                        if r.per_second.len() <= second {
                            r.per_second.resize(second + 1, 0);
                        }
                        r.per_second[second] += 1;
                    }
                }
                Message::EchoRequest(e) => out.extend(Message::EchoReply(e).encode(x)),
                _ => {}
            }
            next = ch.pop()?;
        }
        if !out.is_empty() {
            ch.s.write_all(&out).await?;
            out.clear();
        }
    }
    if let Some((start, end)) = window {
        r.seconds = end.duration_since(start).as_secs_f64();
    }
    // No more packet-ins; the BARRIER_REPLY says every packet-out sent
    // before it was handled.
    r.late_packet_ins += sync(&mut ch, &[delete_own_flows()], 5).await?;
    Ok(r)
}

async fn packet_out(o: &Options) -> anyhow::Result<Report> {
    let mut ch = connect(&o.target).await?;
    sync(&mut ch, &[delete_own_flows()], 3).await?;
    eprintln!("ready");
    let po = Message::PacketOut(PacketOut {
        buffer_id: OFP_NO_BUFFER,
        in_port: port_no::CONTROLLER,
        actions: vec![Action::Output {
            port: o.out_port,
            max_len: 0,
        }],
        data: udp_frame(),
    })
    .encode(0);
    let barriers = Arc::new(Semaphore::new(WINDOW as usize));
    // ECHO_REPLYs the reader wants written, by the writer, between batches.
    let (echo_tx, mut echo_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let Channel { s, framer, buf } = ch;
    let (rd, mut wr) = s.into_split();
    let mut reader = Channel { s: rd, framer, buf };
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(o.seconds);
    let writer = {
        let barriers = Arc::clone(&barriers);
        tokio::spawn(async move {
            let mut batch_no: u32 = 0;
            let mut out = Vec::with_capacity(po.len() * BATCH as usize + 64);
            while Instant::now() < end {
                barriers.acquire().await?.forget();
                out.clear();
                while let Ok(reply) = echo_rx.try_recv() {
                    out.extend(reply);
                }
                for i in 0..BATCH {
                    let at = out.len();
                    out.extend(&po);
                    let xid = (batch_no.wrapping_mul(BATCH) + i) & !BARRIER_XID;
                    out[at + 4..at + 8].copy_from_slice(&xid.to_be_bytes());
                }
                out.extend(Message::BarrierRequest.encode(BARRIER_XID | batch_no));
                wr.write_all(&out).await?;
                batch_no += 1;
            }
            anyhow::Ok((batch_no, wr))
        })
    };
    // Barrier replies, in order, until the writer has stopped and every
    // batch it wrote is answered.
    let mut writer = writer;
    let mut written: Option<(u32, OwnedWriteHalf)> = None;
    let mut answered: u32 = 0;
    let mut last_reply = start;
    while written.as_ref().is_none_or(|(n, _)| answered < *n) {
        let wait = if written.is_some() {
            REPLY_WAIT
        } else {
            Duration::from_millis(100)
        };
        let deadline = Instant::now() + wait;
        tokio::select! {
            w = &mut writer, if written.is_none() => written = Some(w??),
            m = reader.next(deadline) => match m? {
                Some((x, Message::BarrierReply)) => {
                    anyhow::ensure!(
                        x == BARRIER_XID | answered,
                        "BARRIER_REPLY xid {x:#x}, expected {:#x}",
                        BARRIER_XID | answered
                    );
                    answered += 1;
                    last_reply = Instant::now();
                    barriers.add_permits(1);
                }
                Some((x, Message::EchoRequest(e))) => {
                    let reply = Message::EchoReply(e).encode(x);
                    match &mut written {
                        Some((_, wr)) => wr.write_all(&reply).await?,
                        None => {
                            let _ = echo_tx.send(reply);
                        }
                    }
                }
                Some(_) => {}
                None if written.is_some() => {
                    anyhow::bail!("no BARRIER_REPLY within {REPLY_WAIT:?}")
                }
                None => {}
            },
        }
    }
    Ok(Report {
        seconds: last_reply.duration_since(start).as_secs_f64(),
        packet_outs: u64::from(answered) * u64::from(BATCH),
        ..Report::default()
    })
}

fn main() -> std::process::ExitCode {
    let run = || -> anyhow::Result<()> {
        let o = parse_args()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let r = rt.block_on(async {
            match o.mode {
                Mode::Reactive => reactive(&o).await,
                Mode::PacketOut => packet_out(&o).await,
            }
        })?;
        r.print(&o);
        Ok(())
    };
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("packetio_rate: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
