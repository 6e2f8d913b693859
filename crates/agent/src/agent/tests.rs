//! Tests of the runtime over real sockets on 127.0.0.1.

use super::*;
use crate::memory::{MemorySwitch, MemorySwitchConfig};
use ofp::error::BadRequestCode;
use ofp::role::controller_role;
use ofp::{ErrorMsg, FlowMod, FlowModCommand, Framer, Hello, Message, OfpError, Oxm, OxmField};
use ofp::{OxmValue, PacketIn, Role};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

/// A minimal controller: frames what it reads.
struct Client<T> {
    io: T,
    framer: Framer,
    buf: Vec<u8>,
}

impl<T: AsyncRead + AsyncWrite + Unpin> Client<T> {
    async fn new(io: T) -> Self {
        let mut c = Client {
            io,
            framer: Framer::new(),
            buf: vec![0; 65536],
        };
        c.send(1, &Message::Hello(Hello::default())).await;
        match c.recv().await {
            Some((_, Message::Hello(_))) => {}
            other => panic!("expected HELLO, got {other:?}"),
        }
        c
    }

    /// Says HELLO without waiting for the switch's: what comes back first,
    /// or None at EOF (how a refused TLS peer finds out under TLS 1.3).
    async fn hello_only(io: T) -> Option<(u32, Message)> {
        let mut c = Client {
            io,
            framer: Framer::new(),
            buf: vec![0; 4096],
        };
        c.send(1, &Message::Hello(Hello::default())).await;
        c.recv().await
    }

    /// A BARRIER_REQUEST with `xid`, answered.
    async fn barrier(&mut self, xid: u32) {
        self.send(xid, &Message::BarrierRequest).await;
        assert_eq!(self.reply(xid).await, Message::BarrierReply);
    }

    async fn send(&mut self, xid: u32, m: &Message) {
        self.io.write_all(&m.encode(xid)).await.unwrap();
    }

    async fn send_raw(&mut self, raw: &[u8]) {
        self.io.write_all(raw).await.unwrap();
    }

    /// The next message, or None at EOF (or error).
    async fn recv(&mut self) -> Option<(u32, Message)> {
        loop {
            if let Some(m) = self.framer.next_message().unwrap() {
                return Some(Message::decode(&m).unwrap());
            }
            let n = timeout(WAIT, self.io.read(&mut self.buf))
                .await
                .expect("timed out waiting for the switch")
                .ok()?;
            if n == 0 {
                return None;
            }
            self.framer.push(&self.buf[..n]).unwrap();
        }
    }

    /// Skips messages until one with `xid` (asynchronous ones have xid 0).
    async fn reply(&mut self, xid: u32) -> Message {
        loop {
            match self.recv().await {
                Some((x, m)) if x == xid => return m,
                Some(_) => {}
                None => panic!("channel closed while waiting for xid {xid}"),
            }
        }
    }
}

fn memory_switch(events: Option<mpsc::Sender<SwitchEvent>>) -> Arc<MemorySwitch> {
    Arc::new(MemorySwitch::new(MemorySwitchConfig::default(), events))
}

async fn listening(
    config: AgentConfig,
    events: Option<mpsc::Sender<SwitchEvent>>,
) -> (Arc<Agent<MemorySwitch>>, SocketAddr) {
    let agent = Agent::new(memory_switch(events), config);
    let (addr, _h) = listen_tcp(&agent).await;
    (agent, addr)
}

/// A TCP listener of `agent` on a free loopback port, and its handle.
async fn listen_tcp(agent: &Arc<Agent<MemorySwitch>>) -> (SocketAddr, ChannelHandle) {
    let target = "ptcp:0:127.0.0.1".parse().unwrap();
    let (addr, h) = agent.listen(&target).await.unwrap();
    (addr.tcp().unwrap(), h)
}

/// An agent on a memory switch that sends an echo request after `echo`
/// of silence and gives the reply (or a stalled write) `echo` as well.
fn echoing(echo: Duration) -> Arc<Agent<MemorySwitch>> {
    let conn = ConnConfig {
        echo_interval: echo,
        echo_timeout: echo,
        ..ConnConfig::default()
    };
    let config = AgentConfig {
        conn,
        ..AgentConfig::default()
    };
    Agent::new(memory_switch(None), config)
}

/// A controller's listener on a free loopback port, and the port.
async fn controller_listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// A ROLE_REQUEST for `role` with `generation_id`.
fn role_request(role: u32, generation_id: u64) -> Message {
    Message::RoleRequest(Role {
        role,
        generation_id,
    })
}

async fn tcp_client(addr: SocketAddr) -> Client<TcpStream> {
    Client::new(TcpStream::connect(addr).await.unwrap()).await
}

fn flow(in_port: u32) -> FlowMod {
    crate::testutil::flow(in_port, 10)
}

/// An agent on a memory switch whose active connections retry after
/// `backoff_min`, growing to `backoff_max`.
fn reconnecting(backoff_min: Duration, backoff_max: Duration) -> Arc<Agent<MemorySwitch>> {
    Agent::new(
        memory_switch(None),
        AgentConfig {
            backoff_min,
            backoff_max,
            ..AgentConfig::default()
        },
    )
}

/// Accepts the agent's connection on `listener` and checks it answers a
/// FEATURES_REQUEST (xid 5).
async fn accept_switch(listener: &TcpListener) -> Client<TcpStream> {
    let (s, _) = timeout(WAIT, listener.accept()).await.unwrap().unwrap();
    let mut c = Client::new(s).await;
    c.send(5, &Message::FeaturesRequest).await;
    assert!(matches!(c.reply(5).await, Message::FeaturesReply(_)));
    c
}

/// A local TCP port nobody listens on, and the socket holding it: bound
/// but not listening (connecting is refused), so that no other test's
/// listener can be given the port while the socket lives (a port bound,
/// then closed, could be handed to a test running alongside).
async fn closed_port() -> (tokio::net::TcpSocket, u16) {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = s.local_addr().unwrap().port();
    (s, port)
}

#[tokio::test]
async fn tcp_listener_serves_a_real_client() {
    let (agent, addr) = listening(AgentConfig::default(), None).await;
    let mut c = tcp_client(addr).await;
    c.send(2, &Message::FeaturesRequest).await;
    assert!(matches!(c.reply(2).await, Message::FeaturesReply(f) if f.datapath_id == 1));
    for i in 0..100 {
        c.send(10 + i, &Message::FlowMod(flow(i))).await;
    }
    c.barrier(500).await;
    assert_eq!(agent.switch().with_state(|s| s.tables.len()), 100);
    assert_eq!(agent.controllers().connected(), 1);
}

#[tokio::test]
async fn bad_input_is_answered_or_closed_and_others_keep_being_served() {
    let config = AgentConfig {
        conn: ConnConfig {
            hello_timeout: Duration::from_secs(1),
            ..ConnConfig::default()
        },
        ..AgentConfig::default()
    };
    let (agent, addr) = listening(config, None).await;
    let mut good = tcp_client(addr).await;
    let mut bad = tcp_client(addr).await;

    // Unknown type, wrong version: answered, channel stays.
    bad.send_raw(&[4, 77, 0, 8, 0, 0, 0, 3]).await;
    assert_eq!(
        bad.reply(3).await,
        Message::Error(ErrorMsg::new(
            OfpError::BadRequest(BadRequestCode::BadType),
            &[4, 77, 0, 8, 0, 0, 0, 3]
        ))
    );
    bad.send_raw(&[3, 2, 0, 8, 0, 0, 0, 4]).await;
    assert!(matches!(bad.reply(4).await, Message::Error(e)
        if e.error() == Some(OfpError::BadRequest(BadRequestCode::BadVersion))));
    // A truncated message followed by garbage length: closed.
    bad.send_raw(&[4, 0, 0, 5, 0, 0, 0, 5]).await;
    match bad.recv().await {
        Some((_, Message::Error(e))) => {
            assert_eq!(
                e.error(),
                Some(OfpError::BadRequest(BadRequestCode::BadLen))
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(bad.recv().await, None, "channel closed");

    // Random bytes on a third channel: closed or answered, never a crash.
    let mut noise = TcpStream::connect(addr).await.unwrap();
    let junk: Vec<u8> = (0..5000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    noise.write_all(&junk).await.unwrap();
    let mut sink = vec![0; 65536];
    // Closed by the switch: HELLO failure, framing error or HELLO timeout.
    timeout(WAIT, async {
        while let Ok(n) = noise.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await
    .expect("the switch closes a channel of noise");

    good.send(9, &Message::EchoRequest(ofp::Echo { data: vec![1] }))
        .await;
    assert_eq!(
        good.reply(9).await,
        Message::EchoReply(ofp::Echo { data: vec![1] })
    );
    assert!(agent.stats().channels_opened >= 3);
}

#[tokio::test]
async fn roles_across_two_tcp_channels() {
    let (agent, addr) = listening(AgentConfig::default(), None).await;
    let mut a = tcp_client(addr).await;
    let mut b = tcp_client(addr).await;
    a.send(1, &role_request(controller_role::MASTER, 1)).await;
    assert!(matches!(a.reply(1).await, Message::RoleReply(r) if r.role == controller_role::MASTER));
    b.send(2, &role_request(controller_role::MASTER, 2)).await;
    assert!(matches!(b.reply(2).await, Message::RoleReply(r) if r.role == controller_role::MASTER));
    a.send(3, &Message::FlowMod(flow(1))).await;
    assert!(matches!(a.reply(3).await, Message::Error(e)
        if e.error() == Some(OfpError::BadRequest(BadRequestCode::IsSlave))));
    b.send(4, &Message::FlowMod(flow(1))).await;
    b.barrier(5).await;
    assert_eq!(agent.switch().with_state(|s| s.tables.len()), 1);
}

#[tokio::test]
async fn events_reach_channels_filtered_by_role() {
    let (tx, rx) = mpsc::channel(64);
    let (agent, addr) = listening(AgentConfig::default(), Some(tx.clone())).await;
    agent.spawn_events(rx);
    let mut master = tcp_client(addr).await;
    let mut slave = tcp_client(addr).await;
    master
        .send(1, &role_request(controller_role::MASTER, 1))
        .await;
    master.reply(1).await;
    slave
        .send(2, &role_request(controller_role::SLAVE, 1))
        .await;
    slave.reply(2).await;
    // Flow with SEND_FLOW_REM, deleted: a flow-removed event from the switch.
    let mut f = flow(4);
    f.flags = ofp::flow_mod::flow_mod_flags::SEND_FLOW_REM;
    master.send(3, &Message::FlowMod(f.clone())).await;
    f.command = FlowModCommand::DeleteStrict;
    master.send(4, &Message::FlowMod(f)).await;
    tx.send(SwitchEvent::PacketIn(PacketIn {
        data: vec![1, 2, 3],
        total_len: 3,
        ..PacketIn::default()
    }))
    .await
    .unwrap();
    tx.send(SwitchEvent::PortStatus(ofp::PortStatus::default()))
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(master.reply(0).await.type_name());
    }
    got.sort();
    assert_eq!(got, ["FLOW_REMOVED", "PACKET_IN", "PORT_STATUS"]);
    // The slave sees only the port-status.
    assert_eq!(slave.reply(0).await.type_name(), "PORT_STATUS");
    slave.barrier(7).await;
}

#[tokio::test]
async fn packet_in_flood_stays_bounded_and_flow_mods_go_on() {
    let (tx, rx) = mpsc::channel(1024);
    let config = AgentConfig {
        packet_in: PacketInConfig {
            rate_pps: 2000,
            burst: 200,
            queue_len: 50,
            max_queues: 8,
        },
        event_queue: 64,
        ..AgentConfig::default()
    };
    let (agent, addr) = listening(config, None).await;
    agent.spawn_events(rx);
    // A controller that never reads: its channel's queue fills.
    let _deaf = tcp_client(addr).await;
    let mut c = tcp_client(addr).await;
    let flood = tokio::spawn(async move {
        for i in 0..200_000u32 {
            let pi = PacketIn {
                match_: ofp::Match {
                    fields: vec![Oxm::Basic {
                        field: OxmField::InPort,
                        value: OxmValue::U32(i % 64),
                        mask: None,
                    }],
                },
                data: vec![0; 64],
                ..PacketIn::default()
            };
            if tx.send(SwitchEvent::PacketIn(pi)).await.is_err() {
                break;
            }
        }
    });
    let mut n = 0;
    let mut batch = Vec::new();
    for round in 0..20u32 {
        batch.clear();
        for i in 0..500 {
            n += 1;
            batch.extend(Message::FlowMod(flow(round * 1000 + i)).encode(n));
        }
        batch.extend(Message::BarrierRequest.encode(1_000_000 + round));
        c.send_raw(&batch).await;
        assert_eq!(c.reply(1_000_000 + round).await, Message::BarrierReply);
    }
    assert_eq!(agent.switch().with_state(|s| s.tables.len()), 10_000);
    timeout(WAIT, flood).await.unwrap().unwrap();
    let s = agent.stats();
    assert!(s.packet_in.packet_in_rate_limited > 0, "{s:?}");
    assert!(
        s.packet_in.packet_in_queued < 200_000,
        "the bucket limits admission: {s:?}"
    );
    // Whatever waits is in the bounded queues (8 queues of 50 at most).
    assert!(s.packet_in.packet_in_queue_depth <= 400, "{s:?}");
    assert!(
        s.event_queue_full > 0 || s.packet_in.packet_in_queue_full > 0,
        "{s:?}"
    );
}

#[tokio::test]
async fn active_connection_reconnects_with_backoff() {
    let (listener, port) = controller_listener().await;
    let agent = reconnecting(Duration::from_millis(20), Duration::from_millis(80));
    let _h = agent.connect(format!("tcp:127.0.0.1:{port}").parse().unwrap());
    // First channel: hello, then the controller hangs up.
    let c = accept_switch(&listener).await;
    timeout(WAIT, async {
        while agent.controllers().connected() != 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    drop(c);
    timeout(WAIT, agent.all_controllers_gone()).await.unwrap();
    // The agent comes back.
    let (s, _) = timeout(WAIT, listener.accept()).await.unwrap().unwrap();
    let mut c = Client::new(s).await;
    c.barrier(6).await;
    timeout(WAIT, agent.controllers().any_controller_connected())
        .await
        .unwrap();
    assert_eq!(agent.fail_mode(), FailMode::Secure);
}

#[tokio::test]
async fn connect_failures_are_counted_and_retried() {
    let (_held, port) = closed_port().await;
    let agent = reconnecting(Duration::from_millis(10), Duration::from_millis(20));
    let h = agent.connect(format!("tcp:127.0.0.1:{port}").parse().unwrap());
    timeout(WAIT, async {
        while agent.stats().connect_failed < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    timeout(WAIT, h.stop_and_wait()).await.unwrap();
}

mod tls {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};

    struct Pki {
        ca_pem: String,
        ca_cert: rcgen::Certificate,
        ca_key: KeyPair,
    }

    fn ca(name: &str) -> Pki {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(rcgen::DnType::CommonName, name.to_string());
        let cert = p.self_signed(&key).unwrap();
        Pki {
            ca_pem: cert.pem(),
            ca_cert: cert,
            ca_key: key,
        }
    }

    /// A leaf certificate (for localhost) signed by `pki`, with `trust`
    /// as the CA it accepts.
    fn settings(pki: &Pki, trust: &Pki) -> TlsSettings {
        settings_for(pki, trust, &["localhost", "127.0.0.1"])
    }

    fn settings_for(pki: &Pki, trust: &Pki, names: &[&str]) -> TlsSettings {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = p.signed_by(&key, &pki.ca_cert, &pki.ca_key).unwrap();
        TlsSettings::from_pem(
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
            trust.ca_pem.as_bytes(),
        )
        .unwrap()
    }

    /// An agent on a memory switch using `switch_tls` for its channels.
    fn tls_agent(switch_tls: TlsSettings) -> Arc<Agent<MemorySwitch>> {
        Agent::new(
            memory_switch(None),
            AgentConfig {
                tls: Some(switch_tls),
                ..AgentConfig::default()
            },
        )
    }

    /// Waits until the agent has counted a failed TLS handshake.
    async fn handshake_failed(agent: &Agent<MemorySwitch>) {
        timeout(WAIT, async {
            while agent.stats().tls_handshake_failed == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
    }

    /// The switch (trusting and trusted by `pki`) connects once to a
    /// controller presenting `ctl`: the error it ends with, and the agent.
    async fn connect_to_controller(
        pki: &Pki,
        ctl: TlsSettings,
    ) -> (Arc<Agent<MemorySwitch>>, io::Error) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let acceptor = tokio_rustls::TlsAcceptor::from(ctl.server_config().unwrap());
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let _ = acceptor.accept(s).await;
            }
        });
        let agent = tls_agent(settings(pki, pki));
        let target: Target = format!("tls:localhost:{port}").parse().unwrap();
        let err = timeout(WAIT, agent.connect_once(&target))
            .await
            .unwrap()
            .unwrap_err();
        (agent, err)
    }

    async fn tls_listener(switch_tls: TlsSettings) -> (Arc<Agent<MemorySwitch>>, SocketAddr) {
        let agent = tls_agent(switch_tls);
        let (addr, _) = agent
            .listen(&"ptls:0:127.0.0.1".parse().unwrap())
            .await
            .unwrap();
        (agent, addr.tcp().unwrap())
    }

    async fn controller_connect(
        addr: SocketAddr,
        ctl: &TlsSettings,
    ) -> io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let connector = tokio_rustls::TlsConnector::from(ctl.client_config()?);
        let s = TcpStream::connect(addr).await?;
        connector.connect(server_name("localhost")?, s).await
    }

    #[tokio::test]
    async fn mutual_auth_is_accepted() {
        let pki = ca("fulmar test CA");
        let (agent, addr) = tls_listener(settings(&pki, &pki)).await;
        let stream = controller_connect(addr, &settings(&pki, &pki))
            .await
            .unwrap();
        let mut c = Client::new(stream).await;
        c.send(3, &Message::FeaturesRequest).await;
        assert!(matches!(c.reply(3).await, Message::FeaturesReply(_)));
        assert_eq!(agent.stats().tls_handshake_failed, 0);
    }

    #[tokio::test]
    async fn client_from_another_ca_is_refused() {
        let pki = ca("fulmar test CA");
        let rogue = ca("rogue CA");
        let (agent, addr) = tls_listener(settings(&pki, &pki)).await;
        // The rogue controller trusts our CA but its own cert is not ours.
        let result = async {
            let stream = controller_connect(addr, &settings(&rogue, &pki)).await?;
            Ok::<_, io::Error>(Client::hello_only(stream).await)
        }
        .await;
        // TLS 1.3 reports the refusal on the first read.
        assert!(matches!(result, Err(_) | Ok(None)), "{result:?}");
        handshake_failed(&agent).await;
        assert_eq!(agent.controllers().connected(), 0);
    }

    #[tokio::test]
    async fn switch_refuses_a_controller_from_another_ca() {
        let pki = ca("fulmar test CA");
        let rogue = ca("rogue CA");
        // A controller with a rogue certificate.
        let (agent, err) = connect_to_controller(&pki, settings(&rogue, &pki)).await;
        assert!(
            err.to_string().to_lowercase().contains("certificate"),
            "{err}"
        );
        assert_eq!(agent.stats().tls_handshake_failed, 1);
    }

    #[tokio::test]
    async fn switch_connects_to_a_tls_controller() {
        let pki = ca("fulmar test CA");
        let ctl_cfg = settings(&pki, &pki).server_config().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let agent = tls_agent(settings(&pki, &pki));
        let _h = agent.connect(format!("tls:localhost:{port}").parse().unwrap());
        let (s, _) = timeout(WAIT, listener.accept()).await.unwrap().unwrap();
        let tls = tokio_rustls::TlsAcceptor::from(ctl_cfg)
            .accept(s)
            .await
            .unwrap();
        let mut c = Client::new(tls).await;
        c.barrier(8).await;
    }

    #[tokio::test]
    async fn client_without_a_certificate_is_refused() {
        let pki = ca("fulmar test CA");
        let (agent, addr) = tls_listener(settings(&pki, &pki)).await;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(settings(&pki, &pki).ca[0].clone()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let s = TcpStream::connect(addr).await.unwrap();
        let result = async {
            let stream = connector.connect(server_name("localhost")?, s).await?;
            Ok::<_, io::Error>(Client::hello_only(stream).await)
        }
        .await;
        assert!(matches!(result, Err(_) | Ok(None)), "{result:?}");
        handshake_failed(&agent).await;
    }

    #[tokio::test]
    async fn switch_checks_the_controllers_name() {
        let pki = ca("fulmar test CA");
        // Signed by the right CA, but for another host.
        let ctl = settings_for(&pki, &pki, &["controller.example"]);
        let (_, err) = connect_to_controller(&pki, ctl).await;
        assert!(err.to_string().to_lowercase().contains("name"), "{err}");
    }

    #[test]
    fn bad_pem_is_an_error() {
        assert!(TlsSettings::from_pem(b"nope", b"nope", b"nope").is_err());
        let e = TlsSettings::from_pem_files(
            std::path::Path::new("/nonexistent/cert.pem"),
            std::path::Path::new("/nonexistent/key.pem"),
            std::path::Path::new("/nonexistent/ca.pem"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/cert.pem"));
    }
}

mod channels;

/// A controller that stops reading: once the switch's output has waited
/// `echo_interval + echo_timeout` on a full socket, the channel closes
/// (bounded buffers, then disconnect) instead of waiting forever.
#[tokio::test]
async fn a_peer_that_stops_reading_is_disconnected() {
    let agent = echoing(Duration::from_millis(200));
    let (ours, mut theirs) = tokio::io::duplex(4096);
    // The peer says HELLO, then asks for echoes and never reads a reply.
    let writer = tokio::spawn(async move {
        let _ = theirs
            .write_all(&Message::Hello(Hello::default()).encode(1))
            .await;
        let echo = Message::EchoRequest(ofp::Echo {
            data: vec![0xab; 1000],
        })
        .encode(2);
        for _ in 0..10_000 {
            if theirs.write_all(&echo).await.is_err() {
                break;
            }
        }
        theirs
    });
    let reason = timeout(WAIT, agent.serve(ours))
        .await
        .expect("the channel did not close");
    assert_eq!(reason, CloseReason::WriteStalled);
    writer.abort();
}

/// A peer that reads slowly but steadily is not a stalled one: replies
/// that take several times echo_interval + echo_timeout to drain, while
/// their bytes keep moving, arrive whole and the channel stays open (the
/// first write-stall limit timed the whole output and cut off a client
/// reading a million-entry flow-stats reply).
#[tokio::test]
async fn a_slow_but_steady_reader_gets_every_reply() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let agent = echoing(Duration::from_millis(100));
    let (ours, theirs) = tokio::io::duplex(4096);
    let (mut rd, mut wr) = tokio::io::split(theirs);
    const N: usize = 3;
    const LEN: usize = 60_000;
    // The peer's writing side: HELLO, N echo requests, then whatever the
    // reader hands it (its answers to our keepalive echoes, as a live
    // controller answers them once it reads them).
    let (answers, mut to_send) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        wr.write_all(&Message::Hello(Hello::default()).encode(1))
            .await
            .unwrap();
        let echo = Message::EchoRequest(ofp::Echo {
            data: vec![0xcd; LEN],
        })
        .encode(2);
        for _ in 0..N {
            wr.write_all(&echo).await.unwrap();
        }
        while let Some(b) = to_send.recv().await {
            if wr.write_all(&b).await.is_err() {
                break;
            }
        }
    });
    // 4 KiB every 20 ms: one 60 KB reply takes ~300 ms, 1.5x the limit.
    let reader = async move {
        let mut framer = Framer::new();
        let mut replies = 0;
        let mut buf = [0u8; 4096];
        while replies < N {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let n = rd.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed after {replies} replies");
            framer.feed(&buf[..n]);
            while let Ok(Some(raw)) = framer.next_message() {
                match Message::decode(&raw) {
                    Ok((_, Message::EchoReply(e))) => {
                        assert_eq!(e.data.len(), LEN);
                        replies += 1;
                    }
                    Ok((xid, Message::EchoRequest(e))) => {
                        let _ = answers.send(Message::EchoReply(e).encode(xid));
                    }
                    _ => {}
                }
            }
        }
        replies
    };
    let replies = timeout(WAIT, async {
        tokio::select! {
            reason = agent.serve(ours) => panic!("the channel closed: {reason:?}"),
            n = reader => n,
        }
    })
    .await
    .expect("the replies did not arrive");
    assert_eq!(replies, N);
    writer.abort();
}
