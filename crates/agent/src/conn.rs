//! [`Connection`]: the OpenFlow 1.3 protocol state machine of one
//! controller channel, with no socket in it.
//!
//! Bytes from the channel go in through [`Connection::receive`]; bytes to
//! send come out of [`Connection::take_output`]; events from the switch go
//! in through [`Connection::on_event`]; time moves through
//! [`Connection::on_tick`]. The socket loop in [`crate::agent`] does nothing
//! but shuttle bytes, so every protocol rule is tested here without one.
//!
//! The life of a channel (spec 1.3.5 §6.3):
//!
//! 1. Both sides send HELLO. Ours carries version 4 and a version bitmap
//!    with only bit 4 set. The peer's HELLO is accepted when its bitmap has
//!    bit 4 or, without a bitmap, when its header version is at least 4
//!    (the negotiated version is the smaller of the two highest). Anything
//!    else, or any other message before the HELLO, is answered with
//!    `HELLO_FAILED/INCOMPATIBLE` (an ASCII explanation as data, in the
//!    peer's version when that is older) and the channel closes; a
//!    malformed HELLO gets its decode error instead.
//! 2. After that every message is decoded and handled in arrival order,
//!    synchronously against the [`Switch`]; only BARRIER waits (for
//!    [`Switch::barrier`]), so a BARRIER_REPLY is written after every reply
//!    and error for the messages before it. Messages arriving back to back
//!    form a batch: [`Switch::flush`] ends it when the channel has been
//!    quiet for `flush_idle`, at a BARRIER, when the channel closes, and at
//!    least every `flush_max_delay` (the runtime publishes a batch's
//!    flow-mods to its workers at once; publishing per message, or per
//!    read, costs a copy-on-write replay of every change).
//! 3. A message that does not decode is answered with the error
//!    [`ofp::DecodeError`] names, echoing its first 64 bytes with its xid;
//!    the channel stays open. A header whose length is below 8 cannot be
//!    framed: `BAD_REQUEST/BAD_LEN` is sent and the channel closes.
//! 4. Keepalive: when nothing arrived for `echo_interval` an ECHO_REQUEST
//!    goes out; when nothing arrived for `echo_interval + echo_timeout` the
//!    peer is dead and the channel closes.
//!
//! Roles live in the [`Controllers`] shared by all connections; the async
//! configuration (which packet-in, port-status and flow-removed reasons
//! this controller wants, one mask for MASTER/EQUAL and one for SLAVE) is
//! per connection.

use crate::events::EventSync;
use crate::roles::{ConnId, Controllers};
use crate::switch::{Switch, SwitchEvent};
use ofp::async_config::AsyncConfig;
use ofp::consts::OFP_VERSION;
use ofp::error::{BadRequestCode, HelloFailedCode};
use ofp::header::msg_type;
use ofp::hello::HelloElement;
use ofp::multipart::{multipart_type, MultipartRequest, MultipartRequestBody, OFPMPF_REQ_MORE};
use ofp::reply_parts::ReplyParts;
use ofp::role::controller_role;
use ofp::{ErrorMsg, Framer, Hello, Message, OfpError, QueueGetConfigReply, Role};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Largest OpenFlow message (the length field is 16 bits).
pub const MAX_MESSAGE_LEN: usize = 65535;

/// Settings of one connection.
#[derive(Clone, Debug)]
pub struct ConnConfig {
    /// Idle time after which an ECHO_REQUEST is sent.
    pub echo_interval: Duration,
    /// Further idle time after which the peer is declared dead.
    pub echo_timeout: Duration,
    /// Time allowed for the HELLO exchange.
    pub hello_timeout: Duration,
    /// Most bytes of a multipart request (`OFPMPF_REQ_MORE` parts) kept
    /// before `BAD_REQUEST/MULTIPART_BUFFER_OVERFLOW`.
    pub max_multipart_request: usize,
    /// Largest multipart reply message written (bytes, at most 65535); a
    /// longer reply is split with `OFPMPF_REPLY_MORE`.
    pub max_reply_len: usize,
    /// Output bytes after which handling pauses until the caller has
    /// written them (so a controller that sends many requests and reads
    /// slowly is slowed down instead of growing memory). A long multipart
    /// reply is written a part at a time within it: at most one part
    /// (`max_reply_len`) beyond it.
    pub max_pending_output: usize,
    /// How long the channel stays quiet after a batch before the switch is
    /// told it ended ([`Switch::flush`]: the runtime publishes the batch's
    /// flow-mods to its workers then). A BARRIER ends it at once.
    pub flush_idle: Duration,
    /// Longest a batch may run on under a continuous stream before it is
    /// ended anyway (bounds how stale the datapath can be).
    pub flush_max_delay: Duration,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            echo_interval: Duration::from_secs(5),
            echo_timeout: Duration::from_secs(10),
            hello_timeout: Duration::from_secs(10),
            max_multipart_request: 1 << 20,
            max_reply_len: MAX_MESSAGE_LEN,
            max_pending_output: 1 << 20,
            flush_idle: Duration::from_millis(1),
            flush_max_delay: Duration::from_secs(1),
        }
    }
}

/// Why a connection closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The HELLO exchange failed (no common version, or another message
    /// first).
    HelloFailed(String),
    /// No HELLO within `hello_timeout`.
    HelloTimeout,
    /// A length below 8 made the byte stream unframeable.
    Framing(String),
    /// Nothing received for `echo_interval + echo_timeout`.
    DeadPeer,
    /// The peer closed the channel.
    PeerClosed,
    /// A read or write failed.
    Io(String),
    /// The peer took none of our output for `echo_interval +
    /// echo_timeout` (it stopped reading).
    WriteStalled,
    /// The switch closed it: its listener or connector was stopped (see
    /// [`crate::agent::ChannelHandle::stop`]).
    Stopped,
}

/// The async configuration a connection starts with (spec 1.3.5 §7.3.10):
/// MASTER/EQUAL get packet-ins for NO_MATCH, ACTION and INVALID_TTL, every
/// port-status and every flow-removed; SLAVE gets port-status only.
pub fn default_async_config() -> AsyncConfig {
    AsyncConfig {
        packet_in_mask: [0b111, 0],
        port_status_mask: [0b111, 0b111],
        flow_removed_mask: [0b1111, 0],
    }
}

/// A multipart request arriving in `OFPMPF_REQ_MORE` parts: their bodies
/// are concatenated as bytes and decoded as one request after the last
/// part, so any request type may be split anywhere (a table-features list
/// between tables, or a fixed body in the middle).
struct PendingMultipart {
    xid: u32,
    mp_type: u16,
    /// The multipart header (type, flags cleared, pad) and the bodies so far.
    assembled: Vec<u8>,
    /// Message bytes received for it (bounded by `max_multipart_request`).
    bytes: usize,
}

/// Multipart request header: message header, type, flags, pad.
const MP_REQUEST_HEADER: usize = 16;

/// The protocol state machine of one controller channel.
pub struct Connection<S: Switch> {
    id: ConnId,
    switch: Arc<S>,
    controllers: Arc<Controllers>,
    config: ConnConfig,
    framer: Framer,
    /// Bytes not yet fed to the framer (held back by a pause).
    input: Vec<u8>,
    paused: bool,
    out: Vec<u8>,
    negotiated: bool,
    closed: Option<CloseReason>,
    async_config: AsyncConfig,
    pending_mp: Option<PendingMultipart>,
    /// A multipart reply still being written (see [`Connection::receive`]).
    reply: Option<ReplyParts>,
    /// A FLOW statistics reply's next page: the request and where the
    /// page written now ended (see [`Switch::flow_stats_page`]).
    reply_next: Option<(ofp::stats::FlowStatsRequest, crate::switch::FlowStatsPos)>,
    started: Instant,
    last_rx: Instant,
    /// When the peer last showed it is alive: a message from it, or our
    /// bytes taken off a full socket (a peer draining a long reply sends
    /// nothing, and may not see our echo request until it has read up to
    /// it). What the keepalive measures.
    last_alive: Instant,
    echo_outstanding: bool,
    next_xid: u32,
    /// When the batch not yet flushed began.
    unflushed_since: Option<Instant>,
    /// Flow-removed and port-status events for this channel
    /// ([`Connection::set_event_lane`]).
    lane: Option<mpsc::UnboundedReceiver<Arc<SwitchEvent>>>,
    /// Lets a barrier wait for the events sent before it to reach `lane`.
    lane_sync: Option<EventSync>,
    /// A FLOW reply of several pages is being written
    /// ([`Switch::bulk_reply`]).
    bulk: bool,
}

impl<S: Switch> Drop for Connection<S> {
    fn drop(&mut self) {
        self.set_bulk(false);
        self.controllers.unregister(self.id);
    }
}

fn xid_of(raw: &[u8]) -> u32 {
    raw.get(4..8)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .unwrap_or(0)
}

/// Message types only a switch sends (spec 1.3.5 §A.1).
fn is_switch_to_controller(t: u8) -> bool {
    matches!(
        t,
        msg_type::FEATURES_REPLY
            | msg_type::GET_CONFIG_REPLY
            | msg_type::PACKET_IN
            | msg_type::FLOW_REMOVED
            | msg_type::PORT_STATUS
            | msg_type::MULTIPART_REPLY
            | msg_type::BARRIER_REPLY
            | msg_type::QUEUE_GET_CONFIG_REPLY
            | msg_type::ROLE_REPLY
            | msg_type::GET_ASYNC_REPLY
    )
}

fn is_slave_denied(msg: &Message) -> bool {
    match msg {
        Message::PacketOut(_)
        | Message::FlowMod(_)
        | Message::GroupMod(_)
        | Message::PortMod(_)
        | Message::TableMod(_)
        | Message::MeterMod(_)
        | Message::SetConfig(_) => true,
        Message::MultipartRequest(MultipartRequest {
            body: MultipartRequestBody::TableFeatures { tables },
            ..
        }) => !tables.is_empty(),
        _ => false,
    }
}

impl<S: Switch> Connection<S> {
    /// A new channel; our HELLO is already in the output.
    pub fn new(
        switch: Arc<S>,
        controllers: Arc<Controllers>,
        config: ConnConfig,
        now: Instant,
    ) -> Self {
        let id = controllers.allocate();
        let mut c = Connection {
            id,
            switch,
            controllers,
            config,
            framer: Framer::new(),
            input: Vec::new(),
            paused: false,
            out: Vec::new(),
            negotiated: false,
            closed: None,
            async_config: default_async_config(),
            pending_mp: None,
            reply: None,
            reply_next: None,
            started: now,
            last_rx: now,
            last_alive: now,
            echo_outstanding: false,
            next_xid: 1,
            unflushed_since: None,
            lane: None,
            lane_sync: None,
            bulk: false,
        };
        c.send(0, &Message::Hello(Hello::default()));
        c
    }

    /// This connection's id in the shared [`Controllers`].
    pub fn id(&self) -> ConnId {
        self.id
    }

    /// Whether the HELLO exchange succeeded.
    pub fn is_negotiated(&self) -> bool {
        self.negotiated
    }

    /// Why the connection closed, once it did. The caller flushes the
    /// output and then drops the channel.
    pub fn closed(&self) -> Option<&CloseReason> {
        self.closed.as_ref()
    }

    /// This connection's role now.
    pub fn role(&self) -> u32 {
        self.controllers.role(self.id)
    }

    /// The async configuration now.
    pub fn async_config(&self) -> &AsyncConfig {
        &self.async_config
    }

    /// Bytes waiting to be written.
    pub fn pending_output(&self) -> usize {
        self.out.len()
    }

    /// Takes the bytes to write.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Hands back a buffer [`Connection::take_output`] gave, once its bytes
    /// are written, so that the next output is written into its room
    /// rather than a new buffer grown from empty (a flow-stats reply of
    /// 1M entries went through a hundred 1 MiB buffers, each grown by
    /// doubling: 7.5 % of the agent's time in `realloc`'s copies). Kept
    /// only when nothing was written meanwhile and it is at most twice
    /// `max_pending_output`.
    pub fn give_output_back(&mut self, mut buf: Vec<u8>) {
        if self.out.is_empty()
            && buf.capacity() > self.out.capacity()
            && buf.capacity() <= 2 * self.config.max_pending_output.max(4096)
        {
            buf.clear();
            self.out = buf;
        }
    }

    /// Marks the channel closed from outside (EOF or I/O error); a batch
    /// not yet flushed is flushed.
    pub fn close(&mut self, reason: CloseReason) {
        if self.unflushed_since.is_some() {
            self.flush();
        }
        self.set_bulk(false);
        if self.closed.is_none() {
            self.closed = Some(reason);
        }
        self.controllers.unregister(self.id);
    }

    /// Tells the switch when a FLOW reply of several pages begins and
    /// ends ([`Switch::bulk_reply`]), once per change.
    fn set_bulk(&mut self, on: bool) {
        if self.bulk != on {
            self.bulk = on;
            self.switch.bulk_reply(on);
        }
    }

    fn send(&mut self, xid: u32, msg: &Message) {
        self.out.extend_from_slice(&msg.encode(xid));
    }

    fn send_error(&mut self, xid: u32, error: OfpError, offending: &[u8]) {
        self.send(xid, &Message::Error(ErrorMsg::new(error, offending)));
    }

    fn fresh_xid(&mut self) -> u32 {
        let x = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        x
    }

    /// When [`Connection::on_tick`] next has something to do.
    pub fn next_deadline(&self) -> Instant {
        let keepalive = if !self.negotiated {
            self.started + self.config.hello_timeout
        } else if self.echo_outstanding {
            self.last_alive + self.config.echo_interval + self.config.echo_timeout
        } else {
            self.last_alive + self.config.echo_interval
        };
        match self.unflushed_since {
            Some(since) => keepalive
                .min(self.last_rx + self.config.flush_idle)
                .min(since + self.config.flush_max_delay),
            None => keepalive,
        }
    }

    /// Ends the batch: the switch publishes what it held back.
    fn flush(&mut self) {
        self.unflushed_since = None;
        self.switch.flush();
    }

    /// Whether a batch is waiting for [`Switch::flush`] (the channel has
    /// not been quiet for `flush_idle` yet).
    pub fn has_unflushed(&self) -> bool {
        self.unflushed_since.is_some()
    }

    /// The peer has just taken output that had waited on a full socket
    /// (see [`Connection::next_deadline`]): it is alive, whether or not it
    /// has sent anything. A peer that takes nothing is closed by the
    /// caller's write limit instead ([`CloseReason::WriteStalled`]).
    pub fn output_taken(&mut self, now: Instant) {
        self.last_alive = self.last_alive.max(now);
    }

    /// Advances time: HELLO timeout, echo keepalive, dead-peer detection.
    pub fn on_tick(&mut self, now: Instant) {
        if let Some(since) = self.unflushed_since {
            if now.saturating_duration_since(self.last_rx) >= self.config.flush_idle
                || now.saturating_duration_since(since) >= self.config.flush_max_delay
                || self.closed.is_some()
            {
                self.flush();
            }
        }
        if self.closed.is_some() {
            return;
        }
        if !self.negotiated {
            if now.saturating_duration_since(self.started) >= self.config.hello_timeout {
                self.close(CloseReason::HelloTimeout);
            }
            return;
        }
        let idle = now.saturating_duration_since(self.last_alive);
        if idle >= self.config.echo_interval + self.config.echo_timeout {
            self.close(CloseReason::DeadPeer);
        } else if idle >= self.config.echo_interval && !self.echo_outstanding {
            self.echo_outstanding = true;
            let xid = self.fresh_xid();
            self.send(xid, &Message::EchoRequest(ofp::Echo::default()));
        }
    }

    /// Feeds bytes read from the channel and handles every whole message
    /// in them, in order. Replies and errors go to the output. When the
    /// output reaches `max_pending_output` handling pauses
    /// ([`Connection::is_paused`]) and the rest of the bytes wait inside
    /// the connection: the caller writes the output, then calls
    /// [`Connection::resume`] before reading more from the channel. A
    /// multipart reply longer than that is encoded a part at a time: the
    /// parts that fit, a pause, the next parts on resume; the messages
    /// after its request wait until its last part is out.
    pub async fn receive(&mut self, bytes: &[u8], now: Instant) {
        if self.closed.is_some() {
            return;
        }
        self.last_rx = now;
        self.last_alive = now;
        self.echo_outstanding = false;
        if self.input.is_empty() {
            self.run(bytes).await;
        } else {
            let mut input = std::mem::take(&mut self.input);
            input.extend_from_slice(bytes);
            self.run(&input).await;
        }
    }

    /// Whether handling paused on a full output (see
    /// [`Connection::receive`]).
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Goes on handling the bytes held back by a pause.
    pub async fn resume(&mut self) {
        if self.closed.is_some() {
            return;
        }
        let input = std::mem::take(&mut self.input);
        self.run(&input).await;
    }

    async fn run(&mut self, mut bytes: &[u8]) {
        self.paused = false;
        let mut framer = std::mem::take(&mut self.framer);
        'feed: loop {
            let n = framer.feed(bytes);
            bytes = bytes.get(n..).unwrap_or_default();
            loop {
                if !self.write_reply() || self.out.len() >= self.config.max_pending_output {
                    self.paused = true;
                    break 'feed;
                }
                match framer.next_slice() {
                    Ok(Some(raw)) => {
                        self.handle_raw(raw).await;
                        if self.closed.is_some() {
                            break 'feed;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.send_error(0, e.error, &[]);
                        self.close(CloseReason::Framing(e.to_string()));
                        break 'feed;
                    }
                }
            }
            if bytes.is_empty() {
                break;
            }
        }
        self.framer = framer;
        if self.paused {
            self.input.extend_from_slice(bytes);
        }
        // A batch of modifications ends when the channel goes quiet
        // (on_tick after flush_idle), at a BARRIER, or after
        // flush_max_delay.
        if let Some(since) = self.unflushed_since {
            if self.last_rx.saturating_duration_since(since) >= self.config.flush_max_delay {
                self.flush();
            }
        }
    }

    /// Writes parts of the multipart reply in progress until the output
    /// is full; returns whether it is finished (handling may go on).
    fn write_reply(&mut self) -> bool {
        loop {
            let Some(parts) = self.reply.as_mut() else {
                return true;
            };
            while self.out.len() < self.config.max_pending_output {
                if !parts.next_into(&mut self.out) {
                    break;
                }
            }
            if !parts.is_done() {
                return false;
            }
            let xid = parts.xid();
            let Some((filter, pos)) = self.reply_next.take() else {
                self.reply = None;
                self.set_bulk(false);
                return true;
            };
            // The page is written: the next one, read only now.
            match self
                .switch
                .flow_stats_page(&filter, Some(pos), FLOW_STATS_PAGE)
            {
                Ok((records, next)) => {
                    parts.refill_records(records, next.is_some());
                    self.reply_next = next.map(|p| (filter, p));
                }
                Err(e) => {
                    // Parts already went out flagged "more": the error
                    // ends the reply.
                    self.reply = None;
                    self.set_bulk(false);
                    self.send_error(xid, e, &[]);
                    return true;
                }
            }
        }
    }

    /// Sends `HELLO_FAILED/INCOMPATIBLE` with `why` as its data, in the
    /// peer's version when that is older (so an older peer can read it),
    /// and closes.
    fn hello_failed(&mut self, peer_version: u8, xid: u32, why: &str) {
        let mut bytes = Message::Error(ErrorMsg::Standard {
            err_type: 0,
            code: HelloFailedCode::Incompatible as u16,
            data: why.as_bytes().to_vec(),
        })
        .encode(xid);
        if let Some(v) = bytes.first_mut() {
            *v = peer_version.clamp(1, OFP_VERSION);
        }
        self.out.extend_from_slice(&bytes);
        self.close(CloseReason::HelloFailed(why.to_string()));
    }

    async fn handle_raw(&mut self, raw: &[u8]) {
        let decoded = Message::decode(raw);
        if !self.negotiated {
            let peer_version = raw.first().copied().unwrap_or(OFP_VERSION);
            let xid = xid_of(raw);
            match decoded {
                Ok((_, Message::Hello(h))) => {
                    let has_bitmap = h
                        .elements
                        .iter()
                        .any(|e| matches!(e, HelloElement::VersionBitmap { .. }));
                    let ok = if has_bitmap {
                        h.versions().contains(&OFP_VERSION)
                    } else {
                        h.version >= OFP_VERSION
                    };
                    if ok {
                        self.negotiated = true;
                        self.controllers.register(self.id);
                    } else {
                        self.hello_failed(
                            peer_version,
                            xid,
                            &format!(
                                "no common version: this switch speaks OpenFlow 1.3 (0x04) only, peer offered {:?}",
                                if has_bitmap { h.versions() } else { vec![h.version] }
                            ),
                        );
                    }
                }
                // A malformed HELLO: its own error, then close.
                Err(e) if raw.get(1) == Some(&msg_type::HELLO) => {
                    self.send_error(xid, e.error, raw);
                    self.close(CloseReason::HelloFailed(e.to_string()));
                }
                // Anything else first, decodable or not.
                _ => {
                    let name = raw
                        .get(1)
                        .and_then(|t| ofp::header::msg_type_name(*t))
                        .unwrap_or("an unknown message type");
                    let why = format!("expected HELLO, got {name}");
                    self.hello_failed(peer_version, xid, &why);
                }
            }
            return;
        }
        // A type only a switch sends is refused as a type, whatever its
        // body (a malformed one would otherwise get its decode error).
        if raw.first() == Some(&OFP_VERSION)
            && raw.get(1).is_some_and(|t| is_switch_to_controller(*t))
        {
            self.send_error(
                xid_of(raw),
                OfpError::BadRequest(BadRequestCode::BadType),
                raw,
            );
            return;
        }
        if self.is_request_part(raw) {
            self.request_part(raw).await;
            return;
        }
        match decoded {
            Ok((xid, msg)) => self.handle(xid, msg, raw).await,
            Err(e) => {
                tracing::debug!(conn = self.id, error = %e, "undecodable message");
                self.send_error(xid_of(raw), e.error, raw);
            }
        }
    }

    async fn handle(&mut self, xid: u32, msg: Message, raw: &[u8]) {
        if is_slave_denied(&msg) && self.role() == controller_role::SLAVE {
            self.send_error(xid, OfpError::BadRequest(BadRequestCode::IsSlave), raw);
            return;
        }
        let sw = Arc::clone(&self.switch);
        if matches!(
            msg,
            Message::FlowMod(_)
                | Message::GroupMod(_)
                | Message::MeterMod(_)
                | Message::PortMod(_)
                | Message::TableMod(_)
                | Message::SetConfig(_)
        ) && self.unflushed_since.is_none()
        {
            self.unflushed_since = Some(self.last_rx);
        }
        let result: Result<(), OfpError> = match msg {
            Message::Hello(_) | Message::EchoReply(_) => Ok(()),
            Message::Error(e) => {
                tracing::info!(conn = self.id, error = ?e, "controller sent an error");
                Ok(())
            }
            Message::EchoRequest(e) => {
                self.send(xid, &Message::EchoReply(e));
                Ok(())
            }
            Message::Experimenter(_) => Err(OfpError::BadRequest(BadRequestCode::BadExperimenter)),
            Message::FeaturesRequest => {
                let mut f = sw.features();
                f.auxiliary_id = 0;
                self.send(xid, &Message::FeaturesReply(f));
                Ok(())
            }
            Message::GetConfigRequest => {
                self.send(xid, &Message::GetConfigReply(sw.config()));
                Ok(())
            }
            Message::SetConfig(c) => sw.set_config(&c),
            Message::PacketOut(p) => sw.packet_out(&p),
            Message::FlowMod(f) => sw.flow_mod(&f),
            Message::GroupMod(g) => sw.group_mod(&g),
            Message::PortMod(p) => sw.port_mod(&p),
            Message::TableMod(t) => sw.table_mod(&t),
            Message::MeterMod(m) => sw.meter_mod(&m),
            Message::MultipartRequest(req) => {
                self.multipart(xid, req, raw);
                Ok(())
            }
            Message::BarrierRequest => {
                self.flush();
                sw.barrier().await;
                // What the messages before the barrier caused (the
                // FLOW_REMOVED of a delete) goes before its reply.
                if let Some(s) = self.lane_sync.as_mut() {
                    s.caught_up().await;
                }
                self.drain_lane(usize::MAX);
                self.send(xid, &Message::BarrierReply);
                Ok(())
            }
            Message::QueueGetConfigRequest(q) => sw.queue_config(q.port).map(|queues| {
                self.send(
                    xid,
                    &Message::QueueGetConfigReply(QueueGetConfigReply {
                        port: q.port,
                        queues,
                    }),
                )
            }),
            Message::RoleRequest(r) => self
                .controllers
                .request_role(self.id, r.role, r.generation_id)
                .map(|(role, generation_id)| {
                    self.send(
                        xid,
                        &Message::RoleReply(Role {
                            role,
                            generation_id,
                        }),
                    )
                }),
            Message::GetAsyncRequest => {
                let a = self.async_config.clone();
                self.send(xid, &Message::GetAsyncReply(a));
                Ok(())
            }
            Message::SetAsync(a) => {
                self.async_config = a;
                Ok(())
            }
            // Messages only a switch sends.
            Message::FeaturesReply(_)
            | Message::GetConfigReply(_)
            | Message::PacketIn(_)
            | Message::FlowRemoved(_)
            | Message::PortStatus(_)
            | Message::MultipartReply(_)
            | Message::BarrierReply
            | Message::QueueGetConfigReply(_)
            | Message::RoleReply(_)
            | Message::GetAsyncReply(_) => Err(OfpError::BadRequest(BadRequestCode::BadType)),
        };
        if let Err(e) = result {
            self.send_error(xid, e, raw);
        }
    }

    /// Whether `raw` is a part of a multipart request being assembled
    /// (`OFPMPF_REQ_MORE` set, or one is pending): those are not decoded
    /// one by one.
    fn is_request_part(&self, raw: &[u8]) -> bool {
        raw.len() >= MP_REQUEST_HEADER
            && raw.first() == Some(&OFP_VERSION)
            && raw.get(1) == Some(&msg_type::MULTIPART_REQUEST)
            && (self.pending_mp.is_some()
                || raw
                    .get(10..12)
                    .is_some_and(|f| u16::from_be_bytes([f[0], f[1]]) & OFPMPF_REQ_MORE != 0))
    }

    /// Adds a part to the request being assembled; after the last, decodes
    /// and handles the whole request (errors echo the last part).
    async fn request_part(&mut self, raw: &[u8]) {
        let xid = xid_of(raw);
        let field = |at: usize| {
            raw.get(at..at + 2)
                .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
        };
        let (mp_type, flags) = (field(8), field(10));
        let mut p = match self.pending_mp.take() {
            Some(p) if p.xid == xid && p.mp_type == mp_type => p,
            Some(_) => {
                // A different request while one was being assembled.
                self.send_error(xid, OfpError::BadRequest(BadRequestCode::BadMultipart), raw);
                return;
            }
            None => {
                let mut assembled = Vec::with_capacity(raw.len());
                assembled.extend_from_slice(&mp_type.to_be_bytes());
                assembled.extend_from_slice(&[0; 6]);
                PendingMultipart {
                    xid,
                    mp_type,
                    assembled,
                    bytes: 0,
                }
            }
        };
        p.bytes += raw.len();
        if p.bytes > self.config.max_multipart_request {
            self.send_error(
                xid,
                OfpError::BadRequest(BadRequestCode::MultipartBufferOverflow),
                raw,
            );
            return;
        }
        p.assembled
            .extend_from_slice(raw.get(MP_REQUEST_HEADER..).unwrap_or_default());
        if flags & OFPMPF_REQ_MORE != 0 {
            self.pending_mp = Some(p);
            return;
        }
        match MultipartRequest::decode(&mut ofp::wire::Reader::new(&p.assembled)) {
            Ok(req) => self.handle(xid, Message::MultipartRequest(req), raw).await,
            Err(e) => self.send_error(xid, e.error, raw),
        }
    }

    fn multipart(&mut self, xid: u32, req: MultipartRequest, raw: &[u8]) {
        let mp_type = req.body.multipart_type();
        let body = req.body;
        if mp_type == multipart_type::EXPERIMENTER {
            self.send_error(
                xid,
                OfpError::BadRequest(BadRequestCode::BadExperimenter),
                raw,
            );
            return;
        }
        let max = self.config.max_reply_len.clamp(1024, MAX_MESSAGE_LEN);
        let first = match body {
            // FLOW: records encoded by the switch, page by page.
            MultipartRequestBody::Flow(filter) => self
                .switch
                .flow_stats_page(&filter, None, FLOW_STATS_PAGE)
                .map(|(records, next)| {
                    self.reply_next = next.map(|p| (filter, p));
                    ReplyParts::new_records(xid, multipart_type::FLOW, records, max)
                }),
            body => self
                .switch
                .multipart(&body)
                .map(|reply| ReplyParts::new(xid, reply, max)),
        };
        match first {
            Ok(mut parts) => {
                // Written part by part as the output drains (write_reply).
                parts.continues = self.reply_next.is_some();
                self.set_bulk(parts.continues);
                self.reply = Some(parts);
                self.write_reply();
            }
            Err(e) => self.send_error(xid, e, raw),
        }
    }

    /// Gives the channel its lane of flow-removed and port-status events
    /// (see [`crate::events`]), and what lets a barrier wait for the
    /// events sent before it: the channel's task reads the lane
    /// ([`Connection::next_lane_event`]), and a BARRIER_REPLY is written
    /// only after every such event sent before the barrier.
    pub fn set_event_lane(
        &mut self,
        lane: mpsc::UnboundedReceiver<Arc<SwitchEvent>>,
        sync: Option<EventSync>,
    ) {
        self.lane = Some(lane);
        self.lane_sync = sync;
    }

    /// The next event of the lane (pending forever without one).
    pub async fn next_lane_event(&mut self) -> Option<Arc<SwitchEvent>> {
        match self.lane.as_mut() {
            Some(l) => l.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Handles up to `max` events already in the lane.
    pub fn drain_lane(&mut self, max: usize) {
        for _ in 0..max {
            let Some(ev) = self.lane.as_mut().and_then(|l| l.try_recv().ok()) else {
                return;
            };
            self.on_event(&ev);
        }
    }

    /// Offers an event from the switch; it is written when the channel is
    /// up and this controller's role and async configuration ask for it.
    /// Returns whether it was written.
    pub fn on_event(&mut self, ev: &SwitchEvent) -> bool {
        if !self.negotiated || self.closed.is_some() {
            return false;
        }
        let idx = usize::from(self.role() == controller_role::SLAVE);
        let a = &self.async_config;
        let wanted = |masks: &[u32; 2], reason: u8| {
            masks
                .get(idx)
                .is_some_and(|m| reason < 32 && m & (1u32 << reason) != 0)
        };
        let msg = match ev {
            SwitchEvent::PacketIn(p) if wanted(&a.packet_in_mask, p.reason) => {
                Message::PacketIn(p.clone())
            }
            SwitchEvent::FlowRemoved(f) if wanted(&a.flow_removed_mask, f.reason) => {
                Message::FlowRemoved(f.clone())
            }
            SwitchEvent::PortStatus(s) if wanted(&a.port_status_mask, s.reason) => {
                Message::PortStatus(s.clone())
            }
            _ => return false,
        };
        self.send(0, &msg);
        true
    }
}

/// Entries per page of a FLOW statistics reply (see
/// [`Switch::flow_stats_page`]): about 1.5 MB of entries held at a time.
pub const FLOW_STATS_PAGE: usize = 4096;

#[cfg(test)]
mod tests;
