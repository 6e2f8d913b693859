//! The AgentX session with the master agent, kept up for as long as the
//! module runs.
//!
//! One task: connect (unix socket or TCP), Open, Register every subtree
//! of [`mib::SUBTREES`], then answer the master's requests from the
//! [`Collector`]'s view, send a Ping every `ping` interval and a Notify for
//! each link change. When the master goes away (end of stream, a broken
//! PDU stream, a Close from it, an unanswered Open or Ping) the task
//! connects again after a backoff of 250 ms doubling up to 5 s, and opens
//! and registers anew. On stop it sends Close (shutdown).
//!
//! A second task per connection only reads: it frames PDUs and hands them
//! over a channel, so the main loop's `select!` never cancels a read
//! half-way.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use crate::collect::{Clock, Collector, MAX_AGE};
use crate::mib;
use crate::pdu::{self, close_reason, error, Body, DecodeError, Header, Oid, Pdu, HEADER_LEN};

/// Where the master listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Unix(PathBuf),
    /// `HOST:PORT`.
    Tcp(String),
}

impl Target {
    /// `tcp:HOST:PORT`, `unix:PATH` or a socket path (snmpd's
    /// `agentXSocket` spellings).
    pub fn parse(s: &str) -> Result<Target, String> {
        if let Some(hp) = s.strip_prefix("tcp:") {
            match hp.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => {
                    Ok(Target::Tcp(hp.to_string()))
                }
                _ => Err(format!("--agentx {s}: expected tcp:HOST:PORT")),
            }
        } else {
            let path = s.strip_prefix("unix:").unwrap_or(s);
            if path.is_empty() {
                return Err("--agentx: empty socket path".into());
            }
            Ok(Target::Unix(PathBuf::from(path)))
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "{}", p.display()),
            Target::Tcp(hp) => write!(f, "tcp:{hp}"),
        }
    }
}

/// How the session is run.
#[derive(Clone, Debug)]
pub struct Options {
    pub target: Target,
    /// Registration priority (1 is the highest, 127 the default).
    pub priority: u8,
    /// The non-default context registered in (`None`: the default one).
    pub context: Option<Vec<u8>>,
    /// Between two Pings.
    pub ping: Duration,
}

/// The subagent's identity in Open: fulmar's description, no OID.
const DESCR: &[u8] = b"fulmar OpenFlow switch: IF-MIB, BRIDGE-MIB";
/// Seconds the master should wait for an answer (Open's `o.timeout`).
const TIMEOUT_S: u8 = 5;
/// How long a connect may take.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// How long an Open may go unanswered.
const OPEN_WAIT: Duration = Duration::from_secs(5);

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

async fn connect(t: &Target) -> std::io::Result<Box<dyn Stream>> {
    let s: Box<dyn Stream> = match t {
        Target::Unix(p) => Box::new(tokio::net::UnixStream::connect(p).await?),
        Target::Tcp(hp) => {
            let s = tokio::net::TcpStream::connect(hp.as_str()).await?;
            let _ = s.set_nodelay(true);
            Box::new(s)
        }
    };
    Ok(s)
}

/// What the reader hands over.
enum Incoming {
    Pdu(Pdu),
    /// A PDU whose header was sound and payload was not.
    Bad(Header, DecodeError),
    /// The stream ended or cannot be framed any more.
    Lost(String),
}

async fn read_pdus(mut rd: impl AsyncRead + Unpin, tx: mpsc::Sender<Incoming>) {
    loop {
        let mut h = [0u8; HEADER_LEN];
        if let Err(e) = rd.read_exact(&mut h).await {
            let _ = tx.send(Incoming::Lost(format!("read: {e}"))).await;
            return;
        }
        let header = match Header::decode(&h) {
            Ok(h) => h,
            Err(e) => {
                let _ = tx.send(Incoming::Lost(format!("bad header: {e}"))).await;
                return;
            }
        };
        let mut payload = vec![0u8; header.payload_len as usize];
        if let Err(e) = rd.read_exact(&mut payload).await {
            let _ = tx.send(Incoming::Lost(format!("read: {e}"))).await;
            return;
        }
        let item = match Pdu::decode_payload(&header, &payload) {
            Ok(p) => Incoming::Pdu(p),
            Err(e) => Incoming::Bad(header, e),
        };
        if tx.send(item).await.is_err() {
            return;
        }
    }
}

/// Why a session ended.
enum End {
    Stopped,
    /// Worth connecting again; `opened` says whether Open had succeeded.
    Lost {
        why: String,
        opened: bool,
    },
}

/// Runs sessions until `stop` turns true.
pub async fn run(
    collector: Arc<Mutex<Collector>>,
    clock: Arc<Clock>,
    opts: Options,
    mut events: mpsc::UnboundedReceiver<Vec<pdu::VarBind>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(250);
    let mut warned = false;
    loop {
        if *stop.borrow() {
            return;
        }
        let connected = tokio::select! {
            c = tokio::time::timeout(CONNECT_WAIT, connect(&opts.target)) => {
                c.unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")))
            }
            _ = stop.changed() => return,
        };
        match connected {
            Ok(stream) => {
                warned = false;
                let ctx = Ctx {
                    collector: &collector,
                    clock: &clock,
                    opts: &opts,
                };
                match session(stream, ctx, &mut events, &mut stop).await {
                    End::Stopped => return,
                    End::Lost { why, opened } => {
                        tracing::warn!("agentx: session with {} ended: {why}", opts.target);
                        if opened {
                            backoff = Duration::from_millis(250);
                        }
                    }
                }
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(
                        "agentx: cannot reach the master at {}: {e}; retrying",
                        opts.target
                    );
                    warned = true;
                }
            }
        }
        // Notifications while no session is open are lost.
        while events.try_recv().is_ok() {}
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// The state of one open session.
struct Session {
    session_id: u32,
    next_packet: u32,
    open_id: u32,
    opened: bool,
    registering: HashMap<u32, Oid>,
    ping: Option<(u32, Instant)>,
    opened_at: Instant,
}

impl Session {
    fn packet_id(&mut self) -> u32 {
        self.next_packet = self.next_packet.wrapping_add(1).max(1);
        self.next_packet
    }
}

fn oid_text(o: &[u32]) -> String {
    o.iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

/// What every session of `run` works with.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    collector: &'a Arc<Mutex<Collector>>,
    clock: &'a Clock,
    opts: &'a Options,
}

async fn session(
    stream: Box<dyn Stream>,
    ctx: Ctx<'_>,
    events: &mut mpsc::UnboundedReceiver<Vec<pdu::VarBind>>,
    stop: &mut watch::Receiver<bool>,
) -> End {
    let (rd, mut wr) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::channel(16);
    let reader = tokio::spawn(read_pdus(rd, tx));
    let end = drive(&mut wr, &mut rx, ctx, events, stop).await;
    reader.abort();
    let _ = wr.shutdown().await;
    end
}

async fn drive(
    wr: &mut (impl AsyncWrite + Unpin),
    rx: &mut mpsc::Receiver<Incoming>,
    ctx: Ctx<'_>,
    events: &mut mpsc::UnboundedReceiver<Vec<pdu::VarBind>>,
    stop: &mut watch::Receiver<bool>,
) -> End {
    let opts = ctx.opts;
    let mut s = Session {
        session_id: 0,
        next_packet: 0,
        open_id: 0,
        opened: false,
        registering: HashMap::new(),
        ping: None,
        opened_at: Instant::now(),
    };
    s.open_id = s.packet_id();
    let open = Pdu::new(
        0,
        0,
        s.open_id,
        Body::Open {
            timeout: TIMEOUT_S,
            id: vec![],
            descr: DESCR.to_vec(),
        },
    );
    macro_rules! send {
        ($pdu:expr) => {
            if let Err(e) = wr.write_all(&$pdu.encode()).await {
                return End::Lost {
                    why: format!("write: {e}"),
                    opened: s.opened,
                };
            }
        };
    }
    send!(open);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_ping = Instant::now();
    let mut events_open = true;
    loop {
        tokio::select! {
            _ = stop.changed() => {
                if s.opened {
                    let id = s.packet_id();
                    let close = Pdu::new(s.session_id, 0, id, Body::Close { reason: close_reason::SHUTDOWN });
                    let _ = wr.write_all(&close.encode()).await;
                    let _ = wr.flush().await;
                }
                return End::Stopped;
            }
            inc = rx.recv() => {
                let p = match inc {
                    None => return End::Lost { why: "reader ended".into(), opened: s.opened },
                    Some(Incoming::Lost(why)) => return End::Lost { why, opened: s.opened },
                    Some(Incoming::Bad(h, e)) => {
                        tracing::warn!("agentx: unparsable PDU from the master: {e}");
                        if h.pdu_type != pdu::pdu_type::RESPONSE {
                            let mut r = Pdu::new(h.session_id, h.transaction_id, h.packet_id, Body::Response {
                                sys_up_time: 0, error: error::PARSE_ERROR, index: 0, varbinds: vec![],
                            });
                            r.context = None;
                            send!(r);
                        }
                        continue;
                    }
                    Some(Incoming::Pdu(p)) => p,
                };
                match handle(&mut s, p, ctx).await {
                    Handled::Reply(r) => send!(r),
                    Handled::Nothing => {}
                    Handled::Registered => {}
                    Handled::Opened(regs) => {
                        for r in regs {
                            send!(r);
                        }
                        // Notifications from before the session are stale.
                        while events.try_recv().is_ok() {}
                    }
                    Handled::Fail(why) => return End::Lost { why, opened: s.opened },
                }
            }
            ev = events.recv(), if s.opened && events_open => {
                let Some(varbinds) = ev else {
                    events_open = false;
                    continue;
                };
                let id = s.packet_id();
                let mut n = Pdu::new(s.session_id, 0, id, Body::Notify(varbinds));
                n.context = opts.context.clone();
                send!(n);
            }
            _ = tick.tick() => {
                if !s.opened {
                    if s.opened_at.elapsed() > OPEN_WAIT {
                        return End::Lost { why: "no answer to Open".into(), opened: false };
                    }
                    continue;
                }
                if let Some((_, at)) = s.ping {
                    if at.elapsed() > opts.ping.max(Duration::from_secs(TIMEOUT_S as u64)) {
                        return End::Lost { why: "no answer to Ping".into(), opened: true };
                    }
                } else if last_ping.elapsed() >= opts.ping {
                    last_ping = Instant::now();
                    let id = s.packet_id();
                    s.ping = Some((id, Instant::now()));
                    let mut p = Pdu::new(s.session_id, 0, id, Body::Ping);
                    p.context = opts.context.clone();
                    send!(p);
                }
            }
        }
    }
}

enum Handled {
    Reply(Pdu),
    Nothing,
    Opened(Vec<Pdu>),
    Registered,
    Fail(String),
}

async fn handle(s: &mut Session, p: Pdu, ctx: Ctx<'_>) -> Handled {
    let Ctx {
        collector,
        clock,
        opts,
    } = ctx;
    let reply = |error: u16, index: u16, varbinds: Vec<pdu::VarBind>, up: u32| {
        Pdu::new(
            p.session_id,
            p.transaction_id,
            p.packet_id,
            Body::Response {
                sys_up_time: up,
                error,
                index,
                varbinds,
            },
        )
    };
    match &p.body {
        Body::Response {
            error: err,
            sys_up_time,
            ..
        } => {
            if !s.opened && p.packet_id == s.open_id {
                if *err != error::NO_ERROR {
                    return Handled::Fail(format!("Open refused: {}", error::name(*err)));
                }
                s.opened = true;
                s.session_id = p.session_id;
                clock.master_says(*sys_up_time);
                tracing::info!("agentx: session {} open with {}", s.session_id, opts.target);
                let regs = mib::SUBTREES
                    .iter()
                    .map(|t| {
                        let id = s.packet_id();
                        s.registering.insert(id, t.to_vec());
                        let mut r = Pdu::new(
                            s.session_id,
                            0,
                            id,
                            Body::Register {
                                timeout: 0,
                                priority: opts.priority,
                                range_subid: 0,
                                subtree: t.to_vec(),
                                upper_bound: None,
                            },
                        );
                        r.context = opts.context.clone();
                        r
                    })
                    .collect();
                return Handled::Opened(regs);
            }
            if let Some(t) = s.registering.remove(&p.packet_id) {
                if *err == error::NO_ERROR {
                    tracing::info!("agentx: registered {}", oid_text(&t));
                } else {
                    tracing::warn!(
                        "agentx: registration of {} refused: {}{}",
                        oid_text(&t),
                        error::name(*err),
                        if *err == error::DUPLICATE_REGISTRATION {
                            " (the master serves it itself: see --agentx-priority, or start snmpd with -I -ifTable,ifXTable,interface)"
                        } else {
                            ""
                        }
                    );
                }
                return Handled::Registered;
            }
            if s.ping.is_some_and(|(id, _)| id == p.packet_id) {
                s.ping = None;
                if *err == error::NOT_OPEN {
                    return Handled::Fail("the master forgot the session".into());
                }
                clock.master_says(*sys_up_time);
                return Handled::Nothing;
            }
            if *err != error::NO_ERROR {
                tracing::warn!(
                    "agentx: the master answered packet {} with {}",
                    p.packet_id,
                    error::name(*err)
                );
            }
            Handled::Nothing
        }
        Body::Get(_) | Body::GetNext(_) | Body::GetBulk { .. } => {
            if !s.opened || p.session_id != s.session_id {
                return Handled::Reply(reply(error::NOT_OPEN, 0, vec![], 0));
            }
            if p.context != opts.context {
                return Handled::Reply(reply(error::UNSUPPORTED_CONTEXT, 0, vec![], 0));
            }
            let c = collector.clone();
            let got = tokio::task::spawn_blocking(move || {
                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                let up = c.clock().as_master(c.ticks());
                (c.view(MAX_AGE), up)
            })
            .await;
            match got {
                Ok((view, up)) => {
                    let vbs = view.answer(&p.body).unwrap_or_default();
                    Handled::Reply(reply(error::NO_ERROR, 0, vbs, up))
                }
                Err(e) => {
                    tracing::warn!("agentx: reading the switch failed: {e}");
                    Handled::Reply(reply(error::GEN_ERR, 1, vec![], 0))
                }
            }
        }
        // Every object served is read-only here.
        Body::TestSet(vbs) => {
            let (e, i) = if vbs.is_empty() {
                (error::NO_ERROR, 0)
            } else {
                (error::NOT_WRITABLE, 1)
            };
            Handled::Reply(reply(e, i, vec![], 0))
        }
        Body::CommitSet => Handled::Reply(reply(error::COMMIT_FAILED, 0, vec![], 0)),
        Body::UndoSet => Handled::Reply(reply(error::UNDO_FAILED, 0, vec![], 0)),
        Body::CleanupSet => Handled::Nothing,
        Body::Close { reason } => {
            Handled::Fail(format!("the master closed the session (reason {reason})"))
        }
        other => {
            tracing::debug!(
                "agentx: ignoring a PDU of type {} from the master",
                other.pdu_type()
            );
            Handled::Nothing
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::collect::RawBridge;
    use crate::pdu::{SearchRange, Value, VarBind};
    use tokio::net::{UnixListener, UnixStream};

    async fn recv(s: &mut UnixStream) -> Pdu {
        let mut h = [0u8; HEADER_LEN];
        s.read_exact(&mut h).await.unwrap();
        let header = Header::decode(&h).unwrap();
        let mut payload = vec![0u8; header.payload_len as usize];
        s.read_exact(&mut payload).await.unwrap();
        Pdu::decode_payload(&header, &payload).unwrap()
    }

    async fn respond(s: &mut UnixStream, to: &Pdu, session_id: u32) {
        let r = Pdu::new(
            session_id,
            to.transaction_id,
            to.packet_id,
            Body::Response {
                sys_up_time: 0,
                error: 0,
                index: 0,
                varbinds: vec![],
            },
        );
        s.write_all(&r.encode()).await.unwrap();
    }

    /// Accepts a session: Open and the four Registers, each answered.
    async fn accept_session(l: &UnixListener, session_id: u32) -> UnixStream {
        let (mut s, _) = l.accept().await.unwrap();
        let open = recv(&mut s).await;
        assert!(matches!(open.body, Body::Open { .. }), "{open:?}");
        respond(&mut s, &open, session_id).await;
        for t in mib::SUBTREES {
            let reg = recv(&mut s).await;
            assert_eq!(reg.session_id, session_id);
            match &reg.body {
                Body::Register {
                    subtree, priority, ..
                } => {
                    assert_eq!(subtree.as_slice(), *t);
                    assert_eq!(*priority, 127);
                }
                other => panic!("{other:?}"),
            }
            respond(&mut s, &reg, session_id).await;
        }
        s
    }

    async fn ask(s: &mut UnixStream, session_id: u32, packet_id: u32, body: Body) -> Pdu {
        s.write_all(&Pdu::new(session_id, 9, packet_id, body).encode())
            .await
            .unwrap();
        loop {
            let p = recv(s).await;
            // Pings may come in between.
            if matches!(p.body, Body::Response { .. }) {
                assert_eq!((p.transaction_id, p.packet_id), (9, packet_id));
                return p;
            }
        }
    }

    fn varbinds(p: Pdu) -> (u16, Vec<VarBind>) {
        match p.body {
            Body::Response {
                error, varbinds, ..
            } => (error, varbinds),
            other => panic!("{other:?}"),
        }
    }

    /// The whole session against a fake master on a unix socket: Open,
    /// Register, Get, GetNext, a refused TestSet, an unparsable PDU, the
    /// master going away and coming back (re-open, re-register), Close
    /// on stop.
    #[test]
    fn a_session_with_a_fake_master() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = std::env::temp_dir().join(format!(
                "fulmar-snmp-test-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::create_dir_all(&dir);
            let path = dir.join("master");
            let _ = std::fs::remove_file(&path);
            let l = UnixListener::bind(&path).unwrap();
            let (tx, events) = mpsc::unbounded_channel();
            let collector = Collector::with_source(
                Box::new(|| {
                    vec![RawBridge {
                        name: "br0".into(),
                        dpid: 1,
                        ports: vec![(1, "a".into(), false), (2, "b".into(), false)],
                        desc: vec![],
                        stats: vec![],
                        fdb: vec![],
                    }]
                }),
                |_| 1500,
                None,
                tx.clone(),
            );
            let (stop_tx, stop) = watch::channel(false);
            let opts = Options {
                target: Target::Unix(path.clone()),
                priority: 127,
                context: None,
                ping: Duration::from_secs(60),
            };
            let clock = collector.clock();
            let task = tokio::spawn(run(
                Arc::new(Mutex::new(collector)),
                clock,
                opts,
                events,
                stop,
            ));

            let mut s = accept_session(&l, 77).await;
            let ifnumber = [mib::IF_NUMBER, &[0]].concat();
            let (e, v) = varbinds(
                ask(
                    &mut s,
                    77,
                    100,
                    Body::Get(vec![SearchRange {
                        start: ifnumber.clone(),
                        include: false,
                        end: vec![],
                    }]),
                )
                .await,
            );
            assert_eq!(e, 0);
            assert_eq!(v[0].value, Value::Integer(2));
            let (_, v) = varbinds(
                ask(
                    &mut s,
                    77,
                    101,
                    Body::GetNext(vec![SearchRange {
                        start: ifnumber,
                        include: false,
                        end: mib::IF_X_TABLE.to_vec(),
                    }]),
                )
                .await,
            );
            assert_eq!(v[0].name, [mib::IF_ENTRY, &[1, 1]].concat());
            let (e, _) = varbinds(
                ask(
                    &mut s,
                    77,
                    102,
                    Body::TestSet(vec![VarBind {
                        name: [mib::IF_X_ENTRY, &[18, 1]].concat(),
                        value: Value::OctetString(b"x".to_vec()),
                    }]),
                )
                .await,
            );
            assert_eq!(e, error::NOT_WRITABLE);
            // A Get whose OID says 200 sub-identifiers: parseError.
            let mut bad = Pdu::new(77, 9, 103, Body::Get(vec![])).encode();
            bad.extend_from_slice(&[200, 0, 0, 0]);
            bad[19] = 4;
            s.write_all(&bad).await.unwrap();
            let (e, _) = varbinds(recv(&mut s).await);
            assert_eq!(e, error::PARSE_ERROR);
            // A notification queued by the collector goes out as Notify.
            tx.send(vec![VarBind {
                name: mib::SNMP_TRAP_OID.to_vec(),
                value: Value::Oid(mib::LINK_DOWN.to_vec()),
            }])
            .unwrap();
            let n = recv(&mut s).await;
            assert!(matches!(n.body, Body::Notify(_)), "{n:?}");
            assert_eq!(n.session_id, 77);

            // The master goes away; the subagent comes back and registers again.
            drop(s);
            let mut s = accept_session(&l, 78).await;
            let (e, _) = varbinds(
                ask(
                    &mut s,
                    78,
                    1,
                    Body::Get(vec![SearchRange {
                        start: [mib::IF_X_ENTRY, &[1, 2]].concat(),
                        include: false,
                        end: vec![],
                    }]),
                )
                .await,
            );
            assert_eq!(e, 0);

            stop_tx.send(true).unwrap();
            let close = recv(&mut s).await;
            assert_eq!(
                close.body,
                Body::Close {
                    reason: close_reason::SHUTDOWN
                }
            );
            tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .unwrap()
                .unwrap();
            let _ = std::fs::remove_dir_all(&dir);
        });
    }

    #[test]
    fn targets() {
        assert_eq!(
            Target::parse("/var/agentx/master").unwrap(),
            Target::Unix("/var/agentx/master".into())
        );
        assert_eq!(
            Target::parse("unix:/tmp/x").unwrap(),
            Target::Unix("/tmp/x".into())
        );
        assert_eq!(
            Target::parse("tcp:localhost:705").unwrap(),
            Target::Tcp("localhost:705".into())
        );
        assert!(Target::parse("tcp:localhost").is_err());
        assert!(Target::parse("tcp::705").is_err());
        assert!(Target::parse("tcp:h:99999").is_err());
        assert!(Target::parse("").is_err());
    }
}
