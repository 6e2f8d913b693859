//! The least a switch can spend on a flow-mod + barrier round trip: a
//! "switch" that applies nothing and answers at once, for measuring what
//! is left of a round trip when the switch costs nothing (the client's own
//! work and the kernel's wake-ups), beside fulmar and Open vSwitch in
//! `bench/flowmods-vs-ovs.sh --floor`.
//!
//! It listens on a Unix socket, as a switch's management socket does for
//! `ovs-ofctl`, takes one client at a time, and answers HELLO with an
//! OpenFlow 1.3 HELLO, ECHO_REQUEST with ECHO_REPLY, FEATURES_REQUEST with
//! a features reply, a MULTIPART_REQUEST with a minimal reply of its
//! kind, and BARRIER_REQUEST with BARRIER_REPLY. Everything
//! else (the flow-mods) is read, framed and dropped unparsed. It spins on
//! a non-blocking socket, never sleeping in the kernel, so a message is
//! seen the moment it arrives: the best any switch could do with a core of
//! its own. It counts the flow-mods it saw and prints the count for each
//! client when that client leaves, so a run can be checked to have sent
//! what it should.
//!
//! ```text
//! cargo run --release -p agent --example barrier_floor -- SOCKET_PATH
//! ```

use ofp::echo::Echo;
use ofp::header::msg_type as t;
use ofp::multipart::{multipart_type, MultipartReply, MultipartReplyBody};
use ofp::switch_config::FeaturesReply;
use ofp::table_features::TableFeatures;
use ofp::{Framer, Hello, Message};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: barrier_floor SOCKET_PATH");
        std::process::exit(2);
    };
    if let Err(e) = run(&path) {
        eprintln!("barrier_floor: {e:#}");
        std::process::exit(1);
    }
}

fn run(path: &str) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    for conn in listener.incoming() {
        let mut s = conn?;
        match serve(&mut s) {
            Ok(n) => println!("client left after {n} flow-mods"),
            Err(e) => eprintln!("barrier_floor: client dropped: {e:#}"),
        }
    }
    Ok(())
}

/// Answers one client until it closes; returns the flow-mods it sent.
fn serve(s: &mut UnixStream) -> anyhow::Result<u64> {
    s.set_nonblocking(true)?;
    s.write_all(&Message::Hello(Hello::default()).encode(0))?;
    let mut framer = Framer::new();
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::with_capacity(4096);
    let mut flow_mods = 0u64;
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => return Ok(flow_mods),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::hint::spin_loop();
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        let mut rest = buf.get(..n).unwrap_or_default();
        while !rest.is_empty() {
            let took = framer.feed(rest);
            rest = rest.get(took..).unwrap_or_default();
            while let Some(m) = framer.next_slice()? {
                let kind = m.get(1).copied().unwrap_or(u8::MAX);
                let xid = m
                    .get(4..8)
                    .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                match kind {
                    t::FLOW_MOD => flow_mods += 1,
                    t::HELLO => {}
                    t::BARRIER_REQUEST => out.extend(Message::BarrierReply.encode(xid)),
                    t::ECHO_REQUEST => {
                        let data = m.get(8..).unwrap_or_default().to_vec();
                        out.extend(Message::EchoReply(Echo { data }).encode(xid));
                    }
                    t::FEATURES_REQUEST => {
                        let reply = FeaturesReply {
                            datapath_id: 1,
                            n_buffers: 0,
                            n_tables: 254,
                            ..FeaturesReply::default()
                        };
                        out.extend(Message::FeaturesReply(reply).encode(xid));
                    }
                    t::MULTIPART_REQUEST => out.extend(multipart_reply(m, xid)),
                    other => eprintln!("barrier_floor: ignored a message of type {other}"),
                }
            }
        }
        if !out.is_empty() {
            write_all_spinning(s, &out)?;
            out.clear();
        }
    }
}

/// The reply to a multipart request: ovs-ofctl asks for the table
/// features before it sends flows, and gets one table with the eight
/// properties it requires, each an empty list (what ovs-ofctl checks a
/// flow against is not this floor's concern); any other kind gets an empty
/// reply of its kind.
fn multipart_reply(m: &[u8], xid: u32) -> Vec<u8> {
    let kind = m.get(8..10).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    use ofp::table_features::TableFeatureProp as P;
    if kind == multipart_type::TABLE_FEATURES {
        let table = TableFeatures {
            table_id: 0,
            name: "floor".into(),
            max_entries: u32::MAX,
            properties: vec![
                P::Instructions {
                    instruction_ids: vec![],
                },
                P::NextTables { table_ids: vec![] },
                P::WriteActions { action_ids: vec![] },
                P::ApplyActions { action_ids: vec![] },
                P::Match { oxm_ids: vec![] },
                P::Wildcards { oxm_ids: vec![] },
                P::WriteSetfield { oxm_ids: vec![] },
                P::ApplySetfield { oxm_ids: vec![] },
            ],
            ..TableFeatures::default()
        };
        let body = MultipartReplyBody::TableFeatures {
            tables: vec![table],
        };
        return Message::MultipartReply(MultipartReply { flags: 0, body }).encode(xid);
    }
    // A header, the kind, no flags, 4 pad bytes.
    let mut out = vec![4, t::MULTIPART_REPLY, 0, 16];
    out.extend_from_slice(&xid.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&[0; 6]);
    out
}

/// `write_all` on a non-blocking socket.
fn write_all_spinning(s: &mut UnixStream, mut bytes: &[u8]) -> anyhow::Result<()> {
    while !bytes.is_empty() {
        match s.write(bytes) {
            Ok(0) => anyhow::bail!("channel closed"),
            Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                std::hint::spin_loop()
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
