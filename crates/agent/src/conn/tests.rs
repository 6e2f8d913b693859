//! Tests of the connection state machine: bytes in, bytes out, no socket.

use super::*;
use crate::memory::{MemorySwitch, MemorySwitchConfig};
use crate::testutil::flow;
use ofp::error::{
    BadMatchCode, GroupModFailedCode, MeterModFailedCode, QueueOpFailedCode, RoleRequestFailedCode,
    SwitchConfigFailedCode,
};
use ofp::flow_mod::flow_mod_flags;
use ofp::multipart::{Desc, MultipartReply, MultipartReplyBody, OFPMPF_REPLY_MORE};
use ofp::packet_in::packet_in_reason;
use ofp::stats::FlowStatsRequest;
use ofp::{FlowMod, FlowModCommand, Oxm, OxmField, OxmValue, PacketIn, SwitchConfig};

type Conn = Connection<MemorySwitch>;

fn switch() -> Arc<MemorySwitch> {
    Arc::new(crate::testutil::four_table_switch())
}

/// A switch with ports 1 and 2 whose events go to `events`.
fn two_port_switch(events: tokio::sync::mpsc::Sender<SwitchEvent>) -> Arc<MemorySwitch> {
    Arc::new(MemorySwitch::new(
        MemorySwitchConfig {
            ports: (1..=2)
                .map(|n| ofp::Port {
                    port_no: n,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
        Some(events),
    ))
}

fn new_conn(sw: &Arc<MemorySwitch>, ctl: &Arc<Controllers>, config: ConnConfig) -> Conn {
    Connection::new(Arc::clone(sw), Arc::clone(ctl), config, Instant::now())
}

fn decode_all(bytes: &[u8]) -> Vec<(u32, Message)> {
    let mut f = Framer::new();
    f.push(bytes).unwrap();
    let mut out = Vec::new();
    while let Some(m) = f.next_message().unwrap() {
        out.push(Message::decode(&m).unwrap());
    }
    out
}

/// A negotiated connection with its HELLO already taken from the output.
async fn open(sw: &Arc<MemorySwitch>, ctl: &Arc<Controllers>) -> Conn {
    open_with(sw, ctl, ConnConfig::default()).await
}

/// [`open`] with settings `config`.
/// A fresh switch, controller registry and a connection to them whose
/// HELLO has gone out and no peer's come in yet.
fn unopened() -> (Arc<MemorySwitch>, Arc<Controllers>, Conn) {
    let sw = switch();
    let ctl = Arc::new(Controllers::new());
    let mut c = new_conn(&sw, &ctl, ConnConfig::default());
    c.take_output();
    (sw, ctl, c)
}

/// [`opened`] on [`two_port_switch`], with the receiver of its events.
async fn opened_two_port() -> (
    Arc<MemorySwitch>,
    Arc<Controllers>,
    Conn,
    tokio::sync::mpsc::Receiver<SwitchEvent>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let sw = two_port_switch(tx);
    let ctl = Arc::new(Controllers::new());
    let c = open(&sw, &ctl).await;
    (sw, ctl, c, rx)
}

/// A fresh switch, controller registry and a connection to them past
/// the HELLO exchange.
async fn opened() -> (Arc<MemorySwitch>, Arc<Controllers>, Conn) {
    let sw = switch();
    let ctl = Arc::new(Controllers::new());
    let c = open(&sw, &ctl).await;
    (sw, ctl, c)
}

/// [`opened`] with the connection's config as `tune` leaves the default.
async fn opened_with(
    tune: impl FnOnce(&mut ConnConfig),
) -> (Arc<MemorySwitch>, Arc<Controllers>, Conn) {
    let mut config = ConnConfig::default();
    tune(&mut config);
    let sw = switch();
    let ctl = Arc::new(Controllers::new());
    let c = open_with(&sw, &ctl, config).await;
    (sw, ctl, c)
}

async fn open_with(sw: &Arc<MemorySwitch>, ctl: &Arc<Controllers>, config: ConnConfig) -> Conn {
    let mut c = new_conn(sw, ctl, config);
    let hello = decode_all(&c.take_output());
    assert_eq!(hello, vec![(0, Message::Hello(Hello::default()))]);
    c.receive(&Message::Hello(Hello::default()).encode(1), Instant::now())
        .await;
    assert!(c.is_negotiated());
    assert!(c.take_output().is_empty());
    c
}

async fn ask(c: &mut Conn, xid: u32, msg: Message) -> Vec<(u32, Message)> {
    c.receive(&msg.encode(xid), Instant::now()).await;
    decode_all(&c.take_output())
}

async fn ask_raw(c: &mut Conn, raw: &[u8]) -> Vec<(u32, Message)> {
    c.receive(raw, Instant::now()).await;
    decode_all(&c.take_output())
}

fn err(error: OfpError, offending: &[u8]) -> Message {
    Message::Error(ErrorMsg::new(error, offending))
}

/// Sends `msg` as `xid` and checks the only answer is the error `error`
/// quoting it.
async fn refused(c: &mut Conn, xid: u32, msg: &Message, error: OfpError) {
    assert_eq!(
        ask(c, xid, msg.clone()).await,
        vec![(xid, err(error, &msg.encode(xid)))]
    );
}

/// Sends `set` as `xid`, which gets no answer, then `get` as `xid + 1`,
/// whose only answer must be `reply`.
async fn set_then_get(c: &mut Conn, xid: u32, set: Message, get: Message, reply: Message) {
    assert!(ask(c, xid, set).await.is_empty());
    assert_eq!(ask(c, xid + 1, get).await, vec![(xid + 1, reply)]);
}

fn flow_count(sw: &MemorySwitch) -> usize {
    sw.with_state(|s| s.tables.len())
}

#[tokio::test]
async fn hello_with_bitmap_or_newer_version_negotiates_1_3() {
    let sw = switch();
    let ctl = Arc::new(Controllers::new());
    for hello in [
        Hello::default(),
        Hello {
            version: 6,
            elements: vec![HelloElement::VersionBitmap {
                bitmaps: vec![(1 << 4) | (1 << 6)],
            }],
        },
        Hello {
            version: 5,
            elements: vec![],
        },
    ] {
        let mut c = new_conn(&sw, &ctl, ConnConfig::default());
        c.take_output();
        c.receive(&Message::Hello(hello).encode(3), Instant::now())
            .await;
        assert!(c.is_negotiated());
        assert!(c.closed().is_none());
    }
    assert_eq!(ctl.connected(), 0, "dropped connections unregister");
}

#[tokio::test]
async fn incompatible_hello_fails_and_closes() {
    let sw = switch();
    let ctl = Arc::new(Controllers::new());
    for hello in [
        Hello {
            version: 1,
            elements: vec![],
        },
        Hello {
            version: 6,
            elements: vec![HelloElement::VersionBitmap {
                bitmaps: vec![(1 << 1) | (1 << 6)],
            }],
        },
    ] {
        let mut c = new_conn(&sw, &ctl, ConnConfig::default());
        c.take_output();
        let version = hello.version.min(4);
        c.receive(&Message::Hello(hello).encode(9), Instant::now())
            .await;
        let out = c.take_output();
        // One ERROR, HELLO_FAILED/INCOMPATIBLE, xid 9, in the peer's
        // version when older.
        assert_eq!(usize::from(u16::from_be_bytes([out[2], out[3]])), out.len());
        assert_eq!(&out[..2], &[version, 1]);
        assert_eq!(&out[4..12], &[0, 0, 0, 9, 0, 0, 0, 0]);
        assert!(String::from_utf8_lossy(&out[12..]).contains("1.3"));
        assert!(matches!(c.closed(), Some(CloseReason::HelloFailed(_))));
        assert_eq!(ctl.connected(), 0);
    }
}

#[tokio::test]
async fn hello_failure_speaks_an_older_peers_version() {
    let (sw, ctl, mut c) = unopened();
    // An OpenFlow 1.0 HELLO (no elements).
    c.receive(&[1, 0, 0, 8, 0, 0, 0, 5], Instant::now()).await;
    let out = c.take_output();
    assert_eq!(&out[..12], &[1, 1, 0, out[3], 0, 0, 0, 5, 0, 0, 0, 0]);
    assert!(c.closed().is_some());
    // A 1.0 FEATURES_REQUEST before any HELLO: the same, not BAD_VERSION.
    let mut c = new_conn(&sw, &ctl, ConnConfig::default());
    c.take_output();
    c.receive(&[1, 5, 0, 8, 0, 0, 0, 6], Instant::now()).await;
    let out = c.take_output();
    assert_eq!(&out[..12], &[1, 1, 0, out[3], 0, 0, 0, 6, 0, 0, 0, 0]);
    assert!(String::from_utf8_lossy(&out[12..]).contains("FEATURES_REQUEST"));
}

#[tokio::test]
async fn message_before_hello_fails() {
    let (_sw, _ctl, mut c) = unopened();
    let out = ask(&mut c, 4, Message::FeaturesRequest).await;
    assert!(matches!(&out[0], (4, Message::Error(e))
        if e.error() == Some(OfpError::HelloFailed(HelloFailedCode::Incompatible))));
    assert!(c.closed().is_some());
    // Nothing more is handled once closed.
    assert!(ask(&mut c, 5, Message::FeaturesRequest).await.is_empty());
}

#[tokio::test]
async fn hello_timeout_closes() {
    let sw = switch();
    let ctl = Arc::new(Controllers::new());
    let t0 = Instant::now();
    let mut c = Connection::new(sw, ctl, ConnConfig::default(), t0);
    c.on_tick(t0 + Duration::from_secs(9));
    assert!(c.closed().is_none());
    assert_eq!(c.next_deadline(), t0 + Duration::from_secs(10));
    c.on_tick(t0 + Duration::from_secs(10));
    assert_eq!(c.closed(), Some(&CloseReason::HelloTimeout));
}

#[tokio::test]
async fn echo_request_is_answered_with_its_data() {
    let (_sw, _ctl, mut c) = opened().await;
    let echo = ofp::Echo {
        data: b"are you there".to_vec(),
    };
    assert_eq!(
        ask(&mut c, 77, Message::EchoRequest(echo.clone())).await,
        vec![(77, Message::EchoReply(echo))]
    );
}

#[tokio::test]
async fn keepalive_sends_echo_then_declares_dead_peer() {
    let sw = switch();
    let ctl = Arc::new(Controllers::new());
    let config = ConnConfig {
        echo_interval: Duration::from_secs(2),
        echo_timeout: Duration::from_secs(3),
        ..ConnConfig::default()
    };
    let t0 = Instant::now();
    let mut c = Connection::new(Arc::clone(&sw), Arc::clone(&ctl), config, t0);
    c.take_output();
    c.receive(&Message::Hello(Hello::default()).encode(1), t0)
        .await;
    assert_eq!(c.next_deadline(), t0 + Duration::from_secs(2));
    c.on_tick(t0 + Duration::from_secs(1));
    assert!(c.take_output().is_empty());
    c.on_tick(t0 + Duration::from_secs(2));
    let out = decode_all(&c.take_output());
    assert!(matches!(out.as_slice(), [(_, Message::EchoRequest(_))]));
    // Only one echo outstanding.
    c.on_tick(t0 + Duration::from_secs(3));
    assert!(c.take_output().is_empty());
    // A reply (any bytes) resets the clock.
    let t1 = t0 + Duration::from_secs(4);
    c.receive(
        &Message::EchoReply(ofp::Echo::default()).encode(out[0].0),
        t1,
    )
    .await;
    c.on_tick(t1 + Duration::from_secs(4));
    assert!(c.closed().is_none());
    assert_eq!(decode_all(&c.take_output()).len(), 1);
    c.on_tick(t1 + Duration::from_secs(5));
    assert_eq!(c.closed(), Some(&CloseReason::DeadPeer));
    assert_eq!(ctl.connected(), 0);
}

#[tokio::test]
async fn handling_pauses_on_a_full_output_and_resumes_in_order() {
    let (_sw, _ctl, mut c) = opened_with(|c| c.max_pending_output = 1000).await;
    let mut stream = Vec::new();
    for i in 0..20u32 {
        let echo = ofp::Echo {
            data: vec![i as u8; 200],
        };
        stream.extend(Message::EchoRequest(echo).encode(i));
    }
    c.receive(&stream, Instant::now()).await;
    let mut xids = Vec::new();
    let mut rounds = 0;
    loop {
        let out = c.take_output();
        assert!(out.len() < 1000 + 300, "{}", out.len());
        xids.extend(decode_all(&out).into_iter().map(|(x, _)| x));
        if !c.is_paused() {
            break;
        }
        rounds += 1;
        c.resume().await;
    }
    assert!(rounds >= 3, "{rounds}");
    assert_eq!(xids, (0..20).collect::<Vec<_>>());
    // New bytes during a pause queue behind the held-back ones.
    c.receive(&stream, Instant::now()).await;
    assert!(c.is_paused());
    c.receive(&Message::BarrierRequest.encode(99), Instant::now())
        .await;
    let mut last = None;
    loop {
        if let Some((x, _)) = decode_all(&c.take_output()).last() {
            last = Some(*x);
        }
        if !c.is_paused() {
            break;
        }
        c.resume().await;
    }
    assert_eq!(last, Some(99));
}

#[tokio::test]
async fn features_report_the_switch() {
    let (_sw, _ctl, mut c) = opened().await;
    match ask(&mut c, 2, Message::FeaturesRequest).await.as_slice() {
        [(2, Message::FeaturesReply(f))] => {
            // (datapath id, tables, buffers, auxiliary id)
            let ids = (f.datapath_id, f.n_tables, f.n_buffers, f.auxiliary_id);
            assert_eq!(ids, (1, 4, 256, 0));
            use ofp::switch_config::capabilities as cap;
            assert_eq!(
                f.capabilities,
                cap::FLOW_STATS
                    | cap::TABLE_STATS
                    | cap::PORT_STATS
                    | cap::GROUP_STATS
                    | cap::QUEUE_STATS
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn get_and_set_config() {
    let (_sw, _ctl, mut c) = opened().await;
    let cfg = SwitchConfig {
        flags: ofp::switch_config::config_flags::FRAG_DROP,
        miss_send_len: 0xffff,
    };
    let (set, get) = (Message::SetConfig(cfg.clone()), Message::GetConfigRequest);
    set_then_get(&mut c, 1, set, get, Message::GetConfigReply(cfg)).await;
    let bad = Message::SetConfig(SwitchConfig {
        flags: ofp::switch_config::config_flags::FRAG_REASM,
        miss_send_len: 1,
    });
    let error = OfpError::SwitchConfigFailed(SwitchConfigFailedCode::BadFlags);
    refused(&mut c, 3, &bad, error).await;
}

#[tokio::test]
async fn barrier_reply_follows_everything_before_it() {
    let (sw, _ctl, mut c) = opened().await;
    let mut bad = flow(1, 1);
    bad.table_id = 200;
    let mut stream = Vec::new();
    for i in 0..50 {
        stream.extend(Message::FlowMod(flow(i, 5)).encode(i));
    }
    stream.extend(Message::FlowMod(bad.clone()).encode(100));
    stream.extend(Message::BarrierRequest.encode(101));
    let out = ask_raw(&mut c, &stream).await;
    assert_eq!(flow_count(&sw), 50);
    assert_eq!(out.len(), 2);
    assert!(matches!(&out[0], (100, Message::Error(e))
        if e.error() == Some(OfpError::FlowModFailed(ofp::error::FlowModFailedCode::BadTableId))));
    assert_eq!(out[1], (101, Message::BarrierReply));
}

#[tokio::test]
async fn messages_split_across_reads_are_reassembled() {
    let (sw, _ctl, mut c) = opened().await;
    let mut stream = Vec::new();
    for i in 0..10 {
        stream.extend(Message::FlowMod(flow(i, 5)).encode(i));
    }
    stream.extend(Message::BarrierRequest.encode(99));
    let mut out = Vec::new();
    for chunk in stream.chunks(7) {
        c.receive(chunk, Instant::now()).await;
        out.extend(c.take_output());
    }
    assert_eq!(decode_all(&out), vec![(99, Message::BarrierReply)]);
    assert_eq!(flow_count(&sw), 10);
}

#[tokio::test]
async fn decode_errors_get_the_exact_error_and_the_channel_stays_open() {
    let (_sw, _ctl, mut c) = opened().await;

    // Wrong version after HELLO.
    let mut wrong_version = Message::FeaturesRequest.encode(11);
    wrong_version[0] = 1;
    // Unknown type.
    let unknown_type = [4u8, 99, 0, 8, 0, 0, 0, 12];
    // Truncated body: a ROLE_REQUEST of 8 bytes instead of 24.
    let truncated = [4u8, msg_type::ROLE_REQUEST, 0, 8, 0, 0, 0, 13];
    // A bad OXM: in_port with a mask (not maskable) in a flow-mod.
    let mut fm = flow(1, 1);
    fm.match_.fields = vec![Oxm::Basic {
        field: OxmField::InPort,
        value: OxmValue::U32(1),
        mask: Some(OxmValue::U32(0xff)),
    }];
    let bad_oxm = Message::FlowMod(fm).encode(14);
    // A length longer than the type allows: trailing bytes.
    let mut oversized = Message::FeaturesRequest.encode(16);
    oversized[3] = 24;
    oversized.extend([0; 16]);
    // A long message with a bad type: only 64 bytes echoed.
    let mut long_bad = vec![4u8, 98, 0, 200, 0, 0, 0, 15];
    long_bad.resize(200, 0xab);

    let cases: Vec<(Vec<u8>, u32, OfpError)> = vec![
        (
            wrong_version,
            11,
            OfpError::BadRequest(BadRequestCode::BadVersion),
        ),
        (
            unknown_type.to_vec(),
            12,
            OfpError::BadRequest(BadRequestCode::BadType),
        ),
        (
            truncated.to_vec(),
            13,
            OfpError::BadRequest(BadRequestCode::BadLen),
        ),
        (bad_oxm, 14, OfpError::BadMatch(BadMatchCode::BadMask)),
        (long_bad, 15, OfpError::BadRequest(BadRequestCode::BadType)),
        (oversized, 16, OfpError::BadRequest(BadRequestCode::BadLen)),
    ];
    for (raw, xid, error) in cases {
        let out = ask_raw(&mut c, &raw).await;
        let echoed = &raw[..raw.len().min(64)];
        assert_eq!(out, vec![(xid, err(error, echoed))], "{raw:?}");
        assert!(c.closed().is_none());
    }
    assert_eq!(
        ask(&mut c, 17, Message::BarrierRequest).await,
        vec![(17, Message::BarrierReply)]
    );
}

#[tokio::test]
async fn malformed_hello_is_answered_and_closes() {
    let (_sw, _ctl, mut c) = unopened();
    // A HELLO element of length 3.
    let raw = [4u8, 0, 0, 16, 0, 0, 0, 2, 0, 1, 0, 3, 0, 0, 0, 0];
    assert_eq!(
        ask_raw(&mut c, &raw).await,
        vec![(2, err(OfpError::BadRequest(BadRequestCode::BadLen), &raw))]
    );
    assert!(matches!(c.closed(), Some(CloseReason::HelloFailed(_))));
}

#[tokio::test]
async fn unframeable_length_closes_the_channel() {
    let (_sw, _ctl, mut c) = opened().await;
    let out = ask_raw(&mut c, &[4, 0, 0, 4, 0, 0, 0, 1, 9, 9]).await;
    assert!(matches!(out.as_slice(), [(_, Message::Error(e))]
        if e.error() == Some(OfpError::BadRequest(BadRequestCode::BadLen))));
    assert!(matches!(c.closed(), Some(CloseReason::Framing(_))));
}

#[tokio::test]
async fn switch_bound_only_messages_and_experimenter_are_refused() {
    let (_sw, _ctl, mut c) = opened().await;
    let pi = Message::PacketIn(PacketIn::default());
    let error = OfpError::BadRequest(BadRequestCode::BadType);
    refused(&mut c, 1, &pi, error).await;
    let exp = Message::Experimenter(ofp::Experimenter {
        experimenter: 0x2320,
        exp_type: 1,
        data: vec![1, 2, 3],
    });
    let error = OfpError::BadRequest(BadRequestCode::BadExperimenter);
    refused(&mut c, 2, &exp, error).await;
    // An ERROR from the controller is not answered.
    let e = err(OfpError::BadRequest(BadRequestCode::BadLen), b"x");
    assert!(ask(&mut c, 3, e).await.is_empty());
}

#[tokio::test]
async fn group_meter_port_table_mods_and_packet_out_errors_pass_through() {
    let (_sw, _ctl, mut c) = opened().await;
    let gm = Message::GroupMod(ofp::GroupMod {
        command: ofp::GroupModCommand::Delete,
        group_type: ofp::GroupType::All,
        group_id: 0xffff_fff0,
        buckets: vec![],
    });
    let mm = Message::MeterMod(ofp::MeterMod {
        command: ofp::MeterModCommand::Add,
        flags: ofp::meter_mod::meter_flags::KBPS,
        meter_id: 0,
        bands: vec![],
    });
    let pm = Message::PortMod(ofp::PortMod {
        port_no: 7,
        ..Default::default()
    });
    let tm = Message::TableMod(ofp::TableMod {
        table_id: 9,
        config: 0,
    });
    let po = Message::PacketOut(ofp::PacketOut {
        in_port: 0,
        data: vec![0; 60],
        ..Default::default()
    });
    let q = Message::QueueGetConfigRequest(ofp::QueueGetConfigRequest { port: 5 });
    for (m, e) in [
        (
            gm,
            OfpError::GroupModFailed(GroupModFailedCode::InvalidGroup),
        ),
        (
            mm,
            OfpError::MeterModFailed(MeterModFailedCode::InvalidMeter),
        ),
        (
            pm,
            OfpError::PortModFailed(ofp::error::PortModFailedCode::BadPort),
        ),
        (
            tm,
            OfpError::TableModFailed(ofp::error::TableModFailedCode::BadTable),
        ),
        (po, OfpError::BadRequest(BadRequestCode::BadPort)),
        (q, OfpError::QueueOpFailed(QueueOpFailedCode::BadPort)),
    ] {
        let out = ask(&mut c, 5, m.clone()).await;
        assert_eq!(out, vec![(5, err(e, &m.encode(5)))], "{}", m.type_name());
    }
    let q = Message::QueueGetConfigRequest(ofp::QueueGetConfigRequest {
        port: ofp::consts::port_no::ANY,
    });
    assert_eq!(
        ask(&mut c, 6, q).await,
        vec![(
            6,
            Message::QueueGetConfigReply(QueueGetConfigReply {
                port: ofp::consts::port_no::ANY,
                queues: vec![]
            })
        )]
    );
}

fn mp(flags: u16, body: MultipartRequestBody) -> Message {
    Message::MultipartRequest(MultipartRequest { flags, body })
}

#[tokio::test]
async fn big_flow_dump_is_split_with_reply_more() {
    let (_sw, _ctl, mut c) = opened().await;
    let n = 3000u32;
    let mut stream = Vec::new();
    for i in 0..n {
        stream.extend(Message::FlowMod(flow(i, 7)).encode(i));
    }
    assert!(ask_raw(&mut c, &stream).await.is_empty());
    let req = mp(0, MultipartRequestBody::Flow(pipeline::any_flow()));
    c.receive(&req.encode(42), Instant::now()).await;
    let out = c.take_output();
    let mut f = Framer::new();
    f.feed(&out);
    let mut parts = 0;
    let mut total = 0;
    let mut more = Vec::new();
    // Each message decodes on its own and stays under 64 KiB.
    let mut rest = out.as_slice();
    while !rest.is_empty() {
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        assert!(len <= MAX_MESSAGE_LEN);
        let (m, r) = rest.split_at(len);
        rest = r;
        match Message::decode(m).unwrap() {
            (42, Message::MultipartReply(rep)) => {
                parts += 1;
                more.push(rep.flags & OFPMPF_REPLY_MORE != 0);
                match rep.body {
                    MultipartReplyBody::Flow { stats } => total += stats.len(),
                    other => panic!("{other:?}"),
                }
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(total, n as usize);
    assert!(parts > 1, "{parts} parts");
    assert_eq!(more.pop(), Some(false));
    assert!(more.iter().all(|m| *m));
}

#[tokio::test]
async fn multipart_requests_and_errors() {
    let (_sw, _ctl, mut c) = opened().await;
    match ask(&mut c, 1, mp(0, MultipartRequestBody::Desc))
        .await
        .as_slice()
    {
        [(1, Message::MultipartReply(r))] => {
            assert!(
                matches!(&r.body, MultipartReplyBody::Desc(Desc { mfr_desc, .. }) if mfr_desc == "fulmar project")
            )
        }
        other => panic!("{other:?}"),
    }
    for body in [
        MultipartRequestBody::Table,
        MultipartRequestBody::PortDesc,
        MultipartRequestBody::GroupFeatures,
        MultipartRequestBody::MeterFeatures,
        MultipartRequestBody::TableFeatures { tables: vec![] },
        MultipartRequestBody::Aggregate(pipeline::any_flow()),
        MultipartRequestBody::PortStats {
            port_no: ofp::consts::port_no::ANY,
        },
    ] {
        let t = body.multipart_type();
        match ask(&mut c, 2, mp(0, body)).await.as_slice() {
            [(2, Message::MultipartReply(r))] => assert_eq!(r.body.multipart_type(), t),
            other => panic!("{other:?}"),
        }
    }
    let bad_table = mp(
        0,
        MultipartRequestBody::Flow(FlowStatsRequest {
            table_id: 100,
            ..pipeline::any_flow()
        }),
    );
    let error = OfpError::BadRequest(BadRequestCode::BadTableId);
    refused(&mut c, 3, &bad_table, error).await;
    let exp = mp(
        0,
        MultipartRequestBody::Experimenter(ofp::multipart::ExperimenterBody {
            experimenter: 1,
            exp_type: 2,
            data: vec![],
        }),
    );
    let error = OfpError::BadRequest(BadRequestCode::BadExperimenter);
    refused(&mut c, 4, &exp, error).await;
}

#[tokio::test]
async fn req_more_parts_are_buffered_until_the_last() {
    let (_sw, _ctl, mut c) = opened().await;
    let tf = |flags| {
        mp(
            flags,
            MultipartRequestBody::TableFeatures { tables: vec![] },
        )
    };
    assert!(ask(&mut c, 8, tf(OFPMPF_REQ_MORE)).await.is_empty());
    assert!(ask(&mut c, 8, tf(OFPMPF_REQ_MORE)).await.is_empty());
    match ask(&mut c, 8, tf(0)).await.as_slice() {
        [(8, Message::MultipartReply(r))] => {
            assert!(
                matches!(&r.body, MultipartReplyBody::TableFeatures { tables } if tables.len() == 4)
            )
        }
        other => panic!("{other:?}"),
    }
    // A different xid in the middle of a request.
    assert!(ask(&mut c, 9, tf(OFPMPF_REQ_MORE)).await.is_empty());
    let other = tf(0);
    let error = OfpError::BadRequest(BadRequestCode::BadMultipart);
    refused(&mut c, 10, &other, error).await;
}

#[tokio::test]
async fn req_more_buffer_is_bounded() {
    let (_sw, _ctl, mut c) = opened_with(|c| c.max_multipart_request = 40).await;
    let part = mp(OFPMPF_REQ_MORE, MultipartRequestBody::Desc);
    assert!(ask(&mut c, 3, part.clone()).await.is_empty());
    assert!(ask(&mut c, 3, part.clone()).await.is_empty());
    let error = OfpError::BadRequest(BadRequestCode::MultipartBufferOverflow);
    refused(&mut c, 3, &part, error).await;
    // The buffer was dropped: a fresh request works.
    assert_eq!(
        ask(&mut c, 4, mp(0, MultipartRequestBody::Desc))
            .await
            .len(),
        1
    );
}

fn role_req(role: u32, generation_id: u64) -> Message {
    Message::RoleRequest(Role {
        role,
        generation_id,
    })
}

#[tokio::test]
async fn roles_across_two_connections() {
    use controller_role as r;
    let sw = switch();
    let ctl = Arc::new(Controllers::new());
    let mut a = open(&sw, &ctl).await;
    let mut b = open(&sw, &ctl).await;
    assert_eq!(ctl.connected(), 2);
    assert_eq!(
        ask(&mut a, 1, role_req(r::MASTER, 5)).await,
        vec![(
            1,
            Message::RoleReply(Role {
                role: r::MASTER,
                generation_id: 5
            })
        )]
    );
    assert_eq!(
        ask(&mut b, 2, role_req(r::MASTER, 6)).await,
        vec![(
            2,
            Message::RoleReply(Role {
                role: r::MASTER,
                generation_id: 6
            })
        )]
    );
    assert_eq!(a.role(), r::SLAVE);
    // The old master is now a slave: modify-state and packet-out refused.
    for m in [
        Message::FlowMod(flow(1, 1)),
        Message::PacketOut(ofp::PacketOut::default()),
        Message::GroupMod(ofp::GroupMod {
            command: ofp::GroupModCommand::Add,
            group_type: ofp::GroupType::All,
            group_id: 1,
            buckets: vec![],
        }),
        Message::MeterMod(ofp::MeterMod {
            command: ofp::MeterModCommand::Delete,
            flags: 0,
            meter_id: 1,
            bands: vec![],
        }),
        Message::PortMod(ofp::PortMod::default()),
        Message::TableMod(ofp::TableMod::default()),
        Message::SetConfig(SwitchConfig::default()),
    ] {
        assert_eq!(
            ask(&mut a, 3, m.clone()).await,
            vec![(
                3,
                err(OfpError::BadRequest(BadRequestCode::IsSlave), &m.encode(3))
            )],
            "{}",
            m.type_name()
        );
    }
    assert_eq!(flow_count(&sw), 0);
    // Reads still work for a slave.
    assert_eq!(ask(&mut a, 4, Message::FeaturesRequest).await.len(), 1);
    assert_eq!(
        ask(&mut a, 4, mp(0, MultipartRequestBody::Desc))
            .await
            .len(),
        1
    );
    // Stale generation.
    let stale = role_req(r::MASTER, 5);
    let error = OfpError::RoleRequestFailed(RoleRequestFailedCode::Stale);
    refused(&mut a, 5, &stale, error).await;
    // Wrap-around: u64::MAX-ish is older than 6? 6 - MAX = 7 > 0, so newer
    // is 6 + 2^63 - 1 but not 6 + 2^63.
    let too_far = role_req(r::SLAVE, 6 + (1 << 63));
    assert!(matches!(ask(&mut a, 6, too_far).await.as_slice(),
        [(6, Message::Error(e))] if e.error() == Some(OfpError::RoleRequestFailed(RoleRequestFailedCode::Stale))));
    assert_eq!(
        ask(&mut a, 7, role_req(r::SLAVE, 6 + (1 << 63) - 1)).await,
        vec![(
            7,
            Message::RoleReply(Role {
                role: r::SLAVE,
                generation_id: 6 + (1 << 63) - 1
            })
        )]
    );
    // NOCHANGE reads; EQUAL needs no generation; bad role.
    assert_eq!(
        ask(&mut b, 8, role_req(r::NOCHANGE, 0)).await,
        vec![(
            8,
            Message::RoleReply(Role {
                role: r::MASTER,
                generation_id: 6 + (1 << 63) - 1
            })
        )]
    );
    assert!(matches!(
        ask(&mut a, 9, role_req(r::EQUAL, 0)).await.as_slice(),
        [(9, Message::RoleReply(Role { role: r::EQUAL, .. }))]
    ));
    assert!(ask(&mut a, 10, Message::FlowMod(flow(1, 1)))
        .await
        .is_empty());
    assert_eq!(flow_count(&sw), 1);
    let bad = role_req(7, 0);
    let error = OfpError::RoleRequestFailed(RoleRequestFailedCode::BadRole);
    refused(&mut a, 11, &bad, error).await;
    drop(a);
    assert_eq!(ctl.connected(), 1);
}

fn pin(reason: u8) -> SwitchEvent {
    SwitchEvent::PacketIn(PacketIn {
        reason,
        data: vec![1; 20],
        total_len: 20,
        ..PacketIn::default()
    })
}

fn fr(reason: u8) -> SwitchEvent {
    SwitchEvent::FlowRemoved(ofp::FlowRemoved {
        reason,
        ..Default::default()
    })
}

fn ps(reason: u8) -> SwitchEvent {
    SwitchEvent::PortStatus(ofp::PortStatus {
        reason,
        ..Default::default()
    })
}

#[tokio::test]
async fn async_defaults_follow_the_role() {
    use controller_role as r;
    let (_sw, _ctl, mut c) = unopened();
    assert!(!c.on_event(&pin(0)), "nothing before HELLO");
    c.receive(&Message::Hello(Hello::default()).encode(1), Instant::now())
        .await;
    // EQUAL (and MASTER): packet-in for the three reasons, all port-status,
    // all flow-removed.
    for ev in [
        pin(0),
        pin(1),
        pin(2),
        ps(0),
        ps(1),
        ps(2),
        fr(0),
        fr(1),
        fr(2),
        fr(3),
    ] {
        assert!(c.on_event(&ev), "{ev:?}");
    }
    assert!(!c.on_event(&pin(5)));
    let out = decode_all(&c.take_output());
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|(xid, _)| *xid == 0));
    ask(&mut c, 2, role_req(r::SLAVE, 1)).await;
    // SLAVE: port-status only.
    for ev in [pin(0), pin(1), fr(0), fr(2)] {
        assert!(!c.on_event(&ev), "{ev:?}");
    }
    assert!(c.on_event(&ps(2)));
    ask(&mut c, 3, role_req(r::MASTER, 2)).await;
    assert!(c.on_event(&pin(packet_in_reason::ACTION)));
}

#[tokio::test]
async fn set_async_changes_the_filters_and_get_async_reports_them() {
    use controller_role as r;
    let (_sw, _ctl, mut c) = opened().await;
    assert_eq!(
        ask(&mut c, 1, Message::GetAsyncRequest).await,
        vec![(1, Message::GetAsyncReply(default_async_config()))]
    );
    let a = AsyncConfig {
        packet_in_mask: [
            1 << packet_in_reason::ACTION,
            1 << packet_in_reason::NO_MATCH,
        ],
        port_status_mask: [0, 0],
        flow_removed_mask: [0, 1 << 2],
    };
    let (set, get) = (Message::SetAsync(a.clone()), Message::GetAsyncRequest);
    set_then_get(&mut c, 2, set, get, Message::GetAsyncReply(a)).await;
    assert!(!c.on_event(&pin(0)));
    assert!(c.on_event(&pin(1)));
    assert!(!c.on_event(&ps(0)));
    assert!(!c.on_event(&fr(2)));
    ask(&mut c, 4, role_req(r::SLAVE, 0)).await;
    assert!(c.on_event(&pin(0)));
    assert!(!c.on_event(&pin(1)));
    assert!(c.on_event(&fr(2)));
}

#[tokio::test]
async fn flow_removed_from_delete_reaches_the_controller() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let sw = Arc::new(MemorySwitch::new(MemorySwitchConfig::default(), Some(tx)));
    let ctl = Arc::new(Controllers::new());
    let mut c = open(&sw, &ctl).await;
    let mut f = flow(3, 9);
    f.flags = flow_mod_flags::SEND_FLOW_REM;
    f.cookie = 0xabc;
    ask(&mut c, 1, Message::FlowMod(f.clone())).await;
    f.command = FlowModCommand::Delete;
    f.table_id = ofp::consts::table_no::ALL;
    f.out_port = ofp::consts::port_no::ANY;
    f.out_group = ofp::consts::group_no::ANY;
    ask(&mut c, 2, Message::FlowMod(f)).await;
    let ev = rx.try_recv().unwrap();
    assert!(c.on_event(&ev));
    match decode_all(&c.take_output()).as_slice() {
        [(0, Message::FlowRemoved(r))] => {
            assert_eq!(r.cookie, 0xabc);
            assert_eq!(r.reason, 2);
        }
        other => panic!("{other:?}"),
    }
}

fn frame() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend([0, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    f.resize(60, 0xee);
    f
}

#[tokio::test]
async fn packet_out_runs_through_the_datapath() {
    let (sw, _ctl, mut c, mut rx) = opened_two_port().await;
    let po = Message::PacketOut(ofp::PacketOut {
        in_port: ofp::consts::port_no::CONTROLLER,
        actions: vec![
            ofp::Action::Output {
                port: 2,
                max_len: 0,
            },
            ofp::Action::Output {
                port: ofp::consts::port_no::CONTROLLER,
                max_len: 0xffff,
            },
        ],
        data: frame(),
        ..Default::default()
    });
    assert!(ask(&mut c, 1, po).await.is_empty());
    let sent = sw.take_transmitted();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].port, 2);
    assert_eq!(sent[0].packet.as_slice(), frame().as_slice());
    match ask(
        &mut c,
        9,
        mp(0, MultipartRequestBody::PortStats { port_no: 2 }),
    )
    .await
    .as_slice()
    {
        [(
            9,
            Message::MultipartReply(MultipartReply {
                body: MultipartReplyBody::PortStats { stats },
                ..
            }),
        )] => {
            assert_eq!(stats.len(), 1);
            assert_eq!((stats[0].tx_packets, stats[0].tx_bytes), (1, 60));
            assert_eq!(stats[0].rx_packets, 0);
        }
        other => panic!("{other:?}"),
    }
    match rx.try_recv().unwrap() {
        SwitchEvent::PacketIn(p) => {
            assert_eq!(p.reason, packet_in_reason::ACTION);
            assert_eq!(p.data, frame());
            assert!(c.on_event(&SwitchEvent::PacketIn(p)));
            assert!(matches!(
                decode_all(&c.take_output()).as_slice(),
                [(0, Message::PacketIn(_))]
            ));
        }
        other => panic!("{other:?}"),
    }
    // A bad output port is refused by the datapath's action check.
    let bad = Message::PacketOut(ofp::PacketOut {
        in_port: 1,
        actions: vec![ofp::Action::Output {
            port: 0,
            max_len: 0,
        }],
        data: frame(),
        ..Default::default()
    });
    let out = ask(&mut c, 2, bad).await;
    assert!(
        matches!(out.as_slice(), [(2, Message::Error(e))]
        if e.error() == Some(OfpError::BadAction(ofp::error::BadActionCode::BadOutPort))),
        "{out:?}"
    );
}

#[tokio::test]
async fn table_miss_packet_in_is_buffered_and_released_by_flow_mod() {
    let (sw, _ctl, mut c, mut rx) = opened_two_port().await;
    // Table-miss entry: to the controller, buffered (max_len 64).
    let miss = FlowMod {
        command: FlowModCommand::Add,
        priority: 0,
        instructions: vec![ofp::Instruction::ApplyActions {
            actions: vec![ofp::Action::Output {
                port: ofp::consts::port_no::CONTROLLER,
                max_len: 64,
            }],
        }],
        ..FlowMod::default()
    };
    assert!(ask(&mut c, 1, Message::FlowMod(miss)).await.is_empty());
    assert!(sw.inject(1, &[&frame()]).is_empty());
    let pi = match rx.try_recv().unwrap() {
        SwitchEvent::PacketIn(p) => p,
        other => panic!("{other:?}"),
    };
    // A table-miss entry's packet-in reports NO_MATCH (spec 1.3.5 §5.4).
    assert_eq!(pi.reason, packet_in_reason::NO_MATCH);
    assert_eq!(
        pi.data.len(),
        60,
        "max_len 64 keeps the whole 60-byte frame"
    );
    assert_ne!(pi.buffer_id, ofp::consts::OFP_NO_BUFFER);
    // The controller installs a flow naming the buffer: the packet goes out.
    let mut fwd = flow(1, 10);
    fwd.buffer_id = pi.buffer_id;
    fwd.instructions = vec![ofp::Instruction::ApplyActions {
        actions: vec![ofp::Action::Output {
            port: 2,
            max_len: 0,
        }],
    }];
    assert!(ask(&mut c, 2, Message::FlowMod(fwd.clone()))
        .await
        .is_empty());
    let sent = sw.take_transmitted();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].port, 2);
    // The buffer is gone now: applied, but BUFFER_UNKNOWN.
    fwd.priority = 11;
    let m = Message::FlowMod(fwd);
    let error = OfpError::BadRequest(BadRequestCode::BufferUnknown);
    refused(&mut c, 3, &m, error).await;
    assert_eq!(flow_count(&sw), 3);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Random bytes after the HELLO never panic; every reply decodes.
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(async {
                let sw = switch();
                let ctl = Arc::new(Controllers::new());
                let mut c = open(&sw, &ctl).await;
                c.receive(&data, Instant::now()).await;
                let out = c.take_output();
                let mut f = Framer::new();
                f.push(&out).unwrap();
                while let Some(m) = f.next_message().unwrap() {
                    prop_assert!(Message::decode(&m).is_ok());
                }
                Ok(())
            })?;
        }

        /// Random messages with a valid header: each gets at most one
        /// answer and the channel stays open.
        #[test]
        fn framed_random_messages_keep_the_channel(
            t in 0u8..40, body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(async {
                let sw = switch();
                let ctl = Arc::new(Controllers::new());
                let mut c = open(&sw, &ctl).await;
                let len = (8 + body.len()) as u16;
                let mut m = vec![4, t];
                m.extend(len.to_be_bytes());
                m.extend([0, 0, 0, 1]);
                m.extend(&body);
                c.receive(&m, Instant::now()).await;
                prop_assert!(c.closed().is_none());
                let out = decode_all(&c.take_output());
                prop_assert!(out.len() <= 64, "{}", out.len());
                Ok(())
            })?;
        }
    }
}

/// A [`MemorySwitch`] that logs the calls that matter for batching.
struct Logged {
    inner: MemorySwitch,
    log: std::sync::Mutex<Vec<&'static str>>,
}

impl Logged {
    fn note(&self, what: &'static str) {
        self.log.lock().unwrap().push(what);
    }
    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

impl Switch for Logged {
    fn features(&self) -> ofp::FeaturesReply {
        self.inner.features()
    }
    fn config(&self) -> SwitchConfig {
        self.inner.config()
    }
    fn set_config(&self, c: &SwitchConfig) -> Result<(), OfpError> {
        self.inner.set_config(c)
    }
    fn flow_mod(&self, fm: &FlowMod) -> Result<(), OfpError> {
        self.note("flow_mod");
        self.inner.flow_mod(fm)
    }
    fn group_mod(&self, gm: &ofp::GroupMod) -> Result<(), OfpError> {
        self.inner.group_mod(gm)
    }
    fn meter_mod(&self, mm: &ofp::MeterMod) -> Result<(), OfpError> {
        self.inner.meter_mod(mm)
    }
    fn port_mod(&self, pm: &ofp::PortMod) -> Result<(), OfpError> {
        self.inner.port_mod(pm)
    }
    fn table_mod(&self, tm: &ofp::TableMod) -> Result<(), OfpError> {
        self.inner.table_mod(tm)
    }
    fn packet_out(&self, po: &ofp::PacketOut) -> Result<(), OfpError> {
        self.inner.packet_out(po)
    }
    fn multipart(&self, req: &MultipartRequestBody) -> Result<MultipartReplyBody, OfpError> {
        self.inner.multipart(req)
    }
    fn queue_config(&self, port: u32) -> Result<Vec<ofp::PacketQueue>, OfpError> {
        self.inner.queue_config(port)
    }
    fn ports(&self) -> Vec<ofp::Port> {
        self.inner.ports()
    }
    fn barrier(&self) -> impl std::future::Future<Output = ()> + Send {
        self.note("barrier");
        self.inner.barrier()
    }
    fn flush(&self) {
        self.note("flush");
    }
    fn flow_stats_page(
        &self,
        filter: &ofp::stats::FlowStatsRequest,
        after: Option<crate::FlowStatsPos>,
        limit: usize,
    ) -> Result<crate::FlowStatsPage, OfpError> {
        self.inner.flow_stats_page(filter, after, limit)
    }
    fn bulk_reply(&self, active: bool) {
        self.note(if active { "bulk on" } else { "bulk off" });
    }
}

/// A FLOW reply of several pages is bulk work the switch hears about: on
/// when it begins, off when its last part is written or the channel
/// closes before that; a reply of one page is not.
#[tokio::test]
async fn a_reply_of_several_pages_is_announced_as_bulk_work() {
    let sw = Arc::new(Logged {
        inner: MemorySwitch::new(MemorySwitchConfig::default(), None),
        log: std::sync::Mutex::new(Vec::new()),
    });
    let config = ConnConfig {
        max_pending_output: 64 * 1024,
        ..ConnConfig::default()
    };
    let open = || async {
        let mut c = Connection::new(
            Arc::clone(&sw),
            Arc::new(Controllers::new()),
            config.clone(),
            Instant::now(),
        );
        c.receive(&Message::Hello(Hello::default()).encode(1), Instant::now())
            .await;
        c.take_output();
        c
    };
    let mut c = open().await;
    let dump = mp(0, MultipartRequestBody::Flow(pipeline::any_flow())).encode(42);
    // One page: nothing announced.
    for i in 0..10 {
        sw.inner.flow_mod(&flow(i, 7)).unwrap();
    }
    c.receive(&dump, Instant::now()).await;
    assert!(!c.is_paused());
    c.take_output();
    assert!(!sw.take().contains(&"bulk on"));
    // Several pages: on at the first, off after the last part.
    for i in 10..2 * crate::conn::FLOW_STATS_PAGE as u32 {
        sw.inner.flow_mod(&flow(i, 7)).unwrap();
    }
    c.receive(&dump, Instant::now()).await;
    assert!(c.is_paused());
    assert_eq!(sw.take(), ["bulk on"]);
    while c.is_paused() {
        c.take_output();
        c.resume().await;
    }
    assert_eq!(sw.take(), ["bulk off"]);
    // Closed half-way: off once, and not again when it is dropped.
    c.receive(&dump, Instant::now()).await;
    assert_eq!(sw.take(), ["bulk on"]);
    c.close(CloseReason::PeerClosed);
    drop(c);
    assert_eq!(sw.take(), ["bulk off"]);
    // Dropped half-way without a close: off.
    let mut c = open().await;
    c.receive(&dump, Instant::now()).await;
    drop(c);
    assert_eq!(sw.take(), ["bulk on", "bulk off"]);
}

#[tokio::test]
async fn a_batch_ends_when_the_channel_goes_quiet_at_a_barrier_or_after_a_bound() {
    let sw = Arc::new(Logged {
        inner: MemorySwitch::new(MemorySwitchConfig::default(), None),
        log: std::sync::Mutex::new(Vec::new()),
    });
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let config = ConnConfig {
        flush_idle: Duration::from_millis(1),
        flush_max_delay: Duration::from_millis(50),
        ..ConnConfig::default()
    };
    let ctl = Arc::new(Controllers::new());
    let mut c = Connection::new(Arc::clone(&sw), ctl, config, t0);
    c.take_output();
    c.receive(&Message::Hello(Hello::default()).encode(1), ms(0))
        .await;
    let mut bytes = Vec::new();
    for i in 0..3 {
        bytes.extend(Message::FlowMod(flow(i + 1, 1)).encode(10 + i));
    }
    bytes.extend(Message::BarrierRequest.encode(20));
    for i in 0..2 {
        bytes.extend(Message::FlowMod(flow(i + 5, 1)).encode(30 + i));
    }
    // The barrier ends the batch at once; the rest waits for quiet.
    c.receive(&bytes, ms(0)).await;
    assert_eq!(
        sw.take(),
        ["flow_mod", "flow_mod", "flow_mod", "flush", "barrier", "flow_mod", "flow_mod"]
    );
    assert_eq!(
        decode_all(&c.take_output()),
        vec![(20, Message::BarrierReply)]
    );
    assert!(c.has_unflushed());
    assert!(c.next_deadline() <= ms(1));
    c.on_tick(ms(0));
    assert!(sw.take().is_empty(), "not quiet yet");
    c.on_tick(ms(1));
    assert_eq!(sw.take(), ["flush"]);
    assert!(!c.has_unflushed());
    // A continuous stream (a read every 0.5 ms): no flush until the bound.
    let mut t = Duration::from_millis(10);
    let mut flushed_at = None;
    for i in 0..200u32 {
        c.receive(&Message::FlowMod(flow(100 + i, 1)).encode(100 + i), t0 + t)
            .await;
        if sw.take().contains(&"flush") {
            flushed_at = Some(t);
            break;
        }
        t += Duration::from_micros(500);
    }
    assert_eq!(flushed_at, Some(Duration::from_millis(60)));
    // A close flushes what is left.
    c.receive(&Message::FlowMod(flow(999, 1)).encode(999), t0 + t)
        .await;
    c.close(CloseReason::PeerClosed);
    assert_eq!(sw.take(), ["flow_mod", "flush"]);
}

#[tokio::test]
async fn a_long_reply_is_written_a_part_at_a_time_as_output_drains() {
    let (_sw, _ctl, mut c) = opened_with(|c| {
        c.max_pending_output = 4096;
        c.max_reply_len = 2048;
    })
    .await;
    let n = 2000u32;
    let mut stream = Vec::new();
    for i in 0..n {
        stream.extend(Message::FlowMod(flow(i, 7)).encode(i));
    }
    c.receive(&stream, Instant::now()).await;
    assert!(c.take_output().is_empty());
    // A dump, then an echo and a barrier behind it.
    let mut req = mp(0, MultipartRequestBody::Flow(pipeline::any_flow())).encode(42);
    req.extend(Message::EchoRequest(ofp::Echo::default()).encode(43));
    req.extend(Message::BarrierRequest.encode(44));
    c.receive(&req, Instant::now()).await;
    let mut rounds = 0;
    let mut got = Vec::new();
    loop {
        let out = c.take_output();
        // Never more than the limit plus one part.
        assert!(out.len() < 4096 + 2048, "{}", out.len());
        got.extend(decode_all(&out));
        if !c.is_paused() {
            break;
        }
        rounds += 1;
        c.resume().await;
    }
    // ~100 bytes a flow: about 200 KB of reply, so many rounds.
    assert!(rounds > 20, "{rounds}");
    let (dump, rest) = got.split_at(got.len() - 2);
    assert!(
        matches!(
            rest,
            [(43, Message::EchoReply(_)), (44, Message::BarrierReply)]
        ),
        "{rest:?}"
    );
    let mut total = 0;
    for (i, (xid, m)) in dump.iter().enumerate() {
        match m {
            Message::MultipartReply(MultipartReply {
                flags,
                body: MultipartReplyBody::Flow { stats },
            }) => {
                assert_eq!(*xid, 42);
                assert_eq!(*flags & OFPMPF_REPLY_MORE != 0, i + 1 < dump.len());
                total += stats.len();
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(total, n as usize);
}

/// The in_port of each entry of a FLOW reply's parts, in order, and
/// whether every part but the last (only) said "more".
fn dumped_ports(dump: &[(u32, Message)]) -> (Vec<u32>, bool) {
    let mut ports = Vec::new();
    let mut flags_ok = true;
    for (i, (_, m)) in dump.iter().enumerate() {
        let Message::MultipartReply(MultipartReply {
            flags,
            body: MultipartReplyBody::Flow { stats },
        }) = m
        else {
            panic!("{m:?}");
        };
        flags_ok &= (*flags & OFPMPF_REPLY_MORE != 0) == (i + 1 < dump.len());
        for st in stats {
            match st.match_.fields.as_slice() {
                [Oxm::Basic {
                    value: OxmValue::U32(p),
                    ..
                }] => ports.push(*p),
                other => panic!("{other:?}"),
            }
        }
    }
    (ports, flags_ok)
}

/// Installs flows 0..n (out port 7) on `c` and asks for a FLOW dump of
/// every flow (xid 42); nothing but the dump is left to read.
async fn install_and_ask_for_a_dump(c: &mut Conn, n: u32) {
    let mut stream = Vec::new();
    for i in 0..n {
        stream.extend(Message::FlowMod(flow(i, 7)).encode(i));
    }
    c.receive(&stream, Instant::now()).await;
    assert!(c.take_output().is_empty());
    let req = mp(0, MultipartRequestBody::Flow(pipeline::any_flow())).encode(42);
    c.receive(&req, Instant::now()).await;
}

/// A FLOW dump of several pages (FLOW_STATS_PAGE entries each, read one
/// at a time as the output drains) gives every entry once, in order, with
/// "more" on every part but the last; an entry removed before its page is
/// read is left out and one added meanwhile comes at the end.
#[tokio::test]
async fn a_flow_dump_is_read_page_by_page() {
    let (sw, _ctl, mut c) = opened_with(|c| c.max_pending_output = 64 * 1024).await;
    let n = 2 * crate::conn::FLOW_STATS_PAGE as u32 + 100;
    install_and_ask_for_a_dump(&mut c, n).await;
    let mut got = decode_all(&c.take_output());
    assert!(c.is_paused(), "a page is more than the output limit");
    // Meanwhile (another channel, say): the last entry goes, one comes.
    let mut del = flow(n - 1, 7);
    del.command = FlowModCommand::DeleteStrict;
    del.out_port = ofp::consts::port_no::ANY;
    del.out_group = ofp::consts::group_no::ANY;
    sw.flow_mod(&del).unwrap();
    sw.flow_mod(&flow(n, 7)).unwrap();
    while c.is_paused() {
        c.resume().await;
        got.extend(decode_all(&c.take_output()));
    }
    let (ports, flags_ok) = dumped_ports(&got);
    assert!(flags_ok, "\"more\" on every part but the last");
    let want: Vec<u32> = (0..n - 1).chain([n]).collect();
    assert_eq!(ports.len(), want.len());
    assert!(ports == want, "every entry once, in installation order");
}

/// The agent hands each written output buffer back
/// (`give_output_back`): the next parts of a long reply are written into
/// its room, none of its old bytes go out again, and a buffer far larger
/// than the output limit is not kept.
#[tokio::test]
async fn a_written_output_buffer_is_written_into_again() {
    let (_sw, _ctl, mut c) = opened_with(|c| c.max_pending_output = 64 * 1024).await;
    let n = 2 * crate::conn::FLOW_STATS_PAGE as u32;
    install_and_ask_for_a_dump(&mut c, n).await;
    let mut got = Vec::new();
    let mut takes = 0;
    loop {
        let out = c.take_output();
        takes += 1;
        got.extend(decode_all(&out));
        let room = out.capacity();
        c.give_output_back(out);
        // Nothing written since: the buffer given back, empty.
        let kept = c.take_output();
        assert!(
            kept.is_empty() && kept.capacity() == room,
            "{} of {room}",
            kept.capacity()
        );
        c.give_output_back(kept);
        if !c.is_paused() {
            break;
        }
        c.resume().await;
    }
    let (ports, flags_ok) = dumped_ports(&got);
    assert!(flags_ok, "\"more\" on every part but the last");
    assert!(
        ports == (0..n).collect::<Vec<_>>(),
        "every entry once, in order"
    );
    assert!(takes > 2, "the reply took {takes} outputs");
    c.give_output_back(Vec::with_capacity(1 << 20));
    assert!(c.take_output().capacity() < 1 << 20);
}

/// `req` (a whole multipart request) cut into REQ_MORE parts whose bodies
/// end at `cuts` (byte offsets into the body).
fn split_request(req: &[u8], cuts: &[usize]) -> Vec<u8> {
    let body = &req[16..];
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(body.len());
    let mut out = Vec::new();
    for (i, w) in bounds.windows(2).enumerate() {
        let more = i + 2 < bounds.len();
        let part = &body[w[0]..w[1]];
        let mut m = req[..16].to_vec();
        m[2..4].copy_from_slice(&((16 + part.len()) as u16).to_be_bytes());
        m[10..12].copy_from_slice(&(if more { OFPMPF_REQ_MORE } else { 0 }).to_be_bytes());
        m.extend_from_slice(part);
        out.extend(m);
    }
    out
}

#[tokio::test]
async fn any_request_type_reassembles_from_req_more_parts() {
    let (_sw, _ctl, mut c) = opened().await;
    for i in 1..=3 {
        assert!(ask(&mut c, i, Message::FlowMod(flow(i, 5)))
            .await
            .is_empty());
    }
    // A flow-stats request for in_port=2 cut inside its fixed part and
    // inside its match: three parts, one answer.
    let mut fr = pipeline::any_flow();
    fr.match_ = flow(2, 5).match_;
    let whole = mp(0, MultipartRequestBody::Flow(fr)).encode(60);
    let parts = split_request(&whole, &[5, 35]);
    match ask_raw(&mut c, &parts).await.as_slice() {
        [(60, Message::MultipartReply(r))] => match &r.body {
            MultipartReplyBody::Flow { stats } => {
                assert_eq!(stats.len(), 1);
                assert_eq!(stats[0].match_, flow(2, 5).match_);
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // Parts that do not add up to a request: the decode error, echoing the
    // last part.
    let bad = split_request(
        &mp(0, MultipartRequestBody::PortStats { port_no: 1 }).encode(61),
        &[3],
    );
    let last = &bad[19..];
    assert_eq!(
        ask_raw(&mut c, &bad[..19]).await,
        vec![],
        "the first part waits"
    );
    let mut truncated = last.to_vec();
    truncated.truncate(last.len() - 2);
    truncated[3] -= 2;
    assert_eq!(
        ask_raw(&mut c, &truncated).await,
        vec![(
            61,
            err(OfpError::BadRequest(BadRequestCode::BadLen), &truncated)
        )]
    );
    // And the channel goes on.
    assert_eq!(
        ask(&mut c, 62, Message::BarrierRequest).await,
        vec![(62, Message::BarrierReply)]
    );
}
