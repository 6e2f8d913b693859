//! [`Agent`]: the tokio side of the controller channels.
//!
//! - One task per channel ([`Agent::serve`]) shuttles bytes between the
//!   socket and its [`Connection`]: it reads whatever the socket has (up
//!   to `read_buffer` bytes), lets the connection handle every message in
//!   it (so a burst of flow-mods is applied as one batch), then writes all
//!   replies with one `write_all`. It also takes switch events from its own
//!   bounded queue and wakes for keepalive deadlines.
//! - Listeners ([`Agent::listen`], [`Agent::listen_unix`]) accept
//!   `ptcp:`/`ptls:`/`punix:` channels; connectors ([`Agent::connect`])
//!   keep one `tcp:`/`tls:`/`unix:` channel to a controller up,
//!   reconnecting with exponential backoff between `backoff_min` and
//!   `backoff_max`. Both return a [`ChannelHandle`]: stopping it stops
//!   accepting (or reconnecting) and closes every channel opened through
//!   it, so controllers can be added and removed on a running switch.
//! - [`Agent::channel_status`] lists the open channels (where from,
//!   negotiated, role, since when) for management; each serving task keeps
//!   its own entry current without locks on the data path.
//! - The event pump ([`Agent::run_events`]) reads the switch's event
//!   channel ([`crate::events`]: a bounded packet-in lane, an unbounded
//!   lane for the rest). Flow-removed and port-status events go to every
//!   channel at once, on a lane of the channel's own that never refuses
//!   them (a controller that stops reading is closed by its write stall
//!   limit, which frees what waits for it); packet-ins go through
//!   [`PacketInQueues`] and are released only while every channel's
//!   bounded packet-in queue has room. A channel whose packet-in queue is
//!   full loses the packet-in (`event_queue_full`); each [`Connection`]
//!   filters what reaches it by role and async config.
//!
//! Fail modes: when every controller is gone
//! ([`Controllers::all_controllers_gone`]), the runtime applies
//! [`Agent::fail_mode`] (initially [`AgentConfig::fail_mode`], changed with
//! [`Agent::set_fail_mode`]) — `Secure` keeps the flow tables and drops
//! table misses, `Standalone` acts as a learning switch until a controller
//! is back. The agent only exposes the state; the datapath acts on it.

use crate::conn::{CloseReason, ConnConfig, Connection};
use crate::events::{EventReceiver, EventSync, Handed};
use crate::packet_in::{PacketInConfig, PacketInQueues, PacketInStats};
use crate::roles::{ConnId, Controllers};
use crate::switch::{Switch, SwitchEvent};
use crate::target::{Target, Transport};
use crate::tls::{server_name, TlsSettings};
use crate::unix::{self, SocketFile, UnixPerms};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

mod spin;
mod status;

use spin::Spin;
pub use status::{ChannelRole, ChannelStatus, ListenAddr};

/// What the switch does while no controller is connected (defined once,
/// in `ofp`, for the configuration and the daemon too).
pub use ofp::channel::FailMode;

/// Settings of an [`Agent`].
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Per-channel protocol settings.
    pub conn: ConnConfig,
    /// The packet-in path.
    pub packet_in: PacketInConfig,
    /// Events queued per channel before they are dropped.
    pub event_queue: usize,
    /// Bytes read from a socket at once.
    pub read_buffer: usize,
    /// First reconnect delay of an active channel.
    pub backoff_min: Duration,
    /// Longest reconnect delay.
    pub backoff_max: Duration,
    /// What the runtime does with no controller, at first (see
    /// [`Agent::set_fail_mode`]).
    pub fail_mode: FailMode,
    /// Certificates for `tls:`/`ptls:` targets.
    pub tls: Option<TlsSettings>,
    /// How long a channel keeps polling its socket after sending a reply,
    /// when its controller answered the previous reply within this time
    /// (see [`Spin`]); zero never polls.
    pub busy_poll: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            conn: ConnConfig::default(),
            packet_in: PacketInConfig::default(),
            event_queue: 1024,
            read_buffer: 256 * 1024,
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(8),
            fail_mode: FailMode::Secure,
            tls: None,
            busy_poll: Duration::from_micros(100),
        }
    }
}

/// Counters of an [`Agent`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// The packet-in path's counters.
    pub packet_in: PacketInStats,
    /// Events lost because a channel's queue was full.
    pub event_queue_full: u64,
    /// Channels that completed TCP (and TLS) setup.
    pub channels_opened: u64,
    /// TLS handshakes that failed.
    pub tls_handshake_failed: u64,
    /// Active connection attempts that failed.
    pub connect_failed: u64,
}

#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    queue_full: AtomicU64,
    rate_limited: AtomicU64,
    depth: AtomicU64,
    event_queue_full: AtomicU64,
    channels_opened: AtomicU64,
    tls_handshake_failed: AtomicU64,
    connect_failed: AtomicU64,
}

type EventTx = mpsc::Sender<Arc<SwitchEvent>>;

/// How long a stopped channel may take to close by itself (flushing what
/// it has) before it is dropped.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// What a serving task publishes about its channel.
struct ChannelInfo {
    source: String,
    peer: String,
    since: Instant,
    negotiated: AtomicBool,
}

struct Channel {
    /// Packet-ins (bounded: see [`Agent::run_events`]).
    events: EventTx,
    /// Flow-removed and port-status events (never refused).
    control: mpsc::UnboundedSender<Arc<SwitchEvent>>,
    info: Arc<ChannelInfo>,
}

/// A listener ([`Agent::listen`], [`Agent::listen_unix`]) or a connector
/// ([`Agent::connect`]) with its channels. [`ChannelHandle::stop`] stops
/// accepting (or reconnecting) and closes every channel opened through
/// it. Dropping the handle without stopping detaches it: it keeps running
/// for as long as the runtime does, as a dropped `JoinHandle` would.
#[derive(Debug)]
pub struct ChannelHandle {
    source: String,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    socket_file: Option<SocketFile>,
}

impl ChannelHandle {
    /// The target it serves, in the form of [`ChannelStatus::source`].
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether everything it ran has ended (after a stop: the listener is
    /// closed and so is every channel it accepted).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops accepting (or reconnecting) and closes every channel opened
    /// through this handle: each flushes what it has and closes
    /// ([`CloseReason::Stopped`]), or is dropped after a grace second if
    /// its peer does not read. A unix listener's socket file is removed
    /// now (unless another listener has replaced it). Returns at once; the
    /// closing goes on in the background (see
    /// [`ChannelHandle::stop_and_wait`]).
    pub fn stop(self) {
        self.signal();
    }

    /// [`ChannelHandle::stop`], then waits until the listener or connector
    /// and all its channels have ended.
    pub async fn stop_and_wait(self) {
        self.signal();
        let _ = self.task.await;
    }

    fn signal(&self) {
        self.stop.send_replace(true);
        if let Some(f) = &self.socket_file {
            f.remove();
        }
    }
}

/// Resolves once `stop` says stopped; never if its handle was dropped
/// without stopping (detached).
async fn wait_stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Runs `fut` to its end unless `stop` fires and `fut` has not ended
/// [`STOP_GRACE`] after: then drops it (closing whatever socket it holds)
/// and returns `None`.
async fn until_stopped<F: Future>(fut: F, mut stop: watch::Receiver<bool>) -> Option<F::Output> {
    tokio::select! {
        out = fut => Some(out),
        _ = async {
            wait_stopped(&mut stop).await;
            tokio::time::sleep(STOP_GRACE).await;
        } => None,
    }
}

/// The controller channels of one switch.
pub struct Agent<S: Switch> {
    switch: Arc<S>,
    config: AgentConfig,
    controllers: Arc<Controllers>,
    channels: Mutex<HashMap<ConnId, Channel>>,
    counters: Counters,
    fail_mode: AtomicU8,
    /// Given by the event pump when its receiver has a control lane: what
    /// lets each channel's barriers wait for the events sent before them.
    event_sync: std::sync::OnceLock<EventSync>,
}

fn fail_mode_to_u8(m: FailMode) -> u8 {
    match m {
        FailMode::Secure => 0,
        FailMode::Standalone => 1,
    }
}

struct Unlist<'a, S: Switch> {
    agent: &'a Agent<S>,
    id: ConnId,
}

impl<S: Switch> Drop for Unlist<'_, S> {
    fn drop(&mut self) {
        self.agent.channels().remove(&self.id);
    }
}

impl<S: Switch> Agent<S> {
    /// An agent driving `switch`.
    pub fn new(switch: Arc<S>, config: AgentConfig) -> Arc<Self> {
        Arc::new(Agent {
            switch,
            controllers: Arc::new(Controllers::new()),
            channels: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            fail_mode: AtomicU8::new(fail_mode_to_u8(config.fail_mode)),
            event_sync: std::sync::OnceLock::new(),
            config,
        })
    }

    /// The switch.
    pub fn switch(&self) -> &Arc<S> {
        &self.switch
    }

    /// Roles and liveness of the controllers (see
    /// [`Controllers::all_controllers_gone`]).
    pub fn controllers(&self) -> &Arc<Controllers> {
        &self.controllers
    }

    /// The fail mode now: [`AgentConfig::fail_mode`] until
    /// [`Agent::set_fail_mode`] changes it.
    pub fn fail_mode(&self) -> FailMode {
        match self.fail_mode.load(Ordering::Relaxed) {
            0 => FailMode::Secure,
            _ => FailMode::Standalone,
        }
    }

    /// Changes the fail mode on a running switch (what the runtime reads
    /// the next time it looks at [`Agent::fail_mode`]).
    pub fn set_fail_mode(&self, mode: FailMode) {
        self.fail_mode
            .store(fail_mode_to_u8(mode), Ordering::Relaxed);
    }

    /// The open channels, by id: where each came from, its peer, whether
    /// it is negotiated, its role and since when it is open.
    pub fn channel_status(&self) -> Vec<ChannelStatus> {
        let infos: Vec<(ConnId, Arc<ChannelInfo>)> = self
            .channels()
            .iter()
            .map(|(id, c)| (*id, Arc::clone(&c.info)))
            .collect();
        let mut out: Vec<ChannelStatus> = infos
            .into_iter()
            .map(|(id, info)| {
                let negotiated = info.negotiated.load(Ordering::Relaxed);
                ChannelStatus {
                    id,
                    source: info.source.clone(),
                    peer: info.peer.clone(),
                    negotiated,
                    role: if negotiated {
                        ChannelRole::from_ofp(self.controllers.role(id))
                    } else {
                        ChannelRole::Equal
                    },
                    since: info.since,
                }
            })
            .collect();
        out.sort_by_key(|c| c.id);
        out
    }

    /// Resolves when no controller is connected (see [`FailMode`]).
    pub async fn all_controllers_gone(&self) {
        self.controllers.all_controllers_gone().await
    }

    /// The counters now.
    pub fn stats(&self) -> AgentStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        AgentStats {
            packet_in: PacketInStats {
                packet_in_queued: get(&c.queued),
                packet_in_queue_full: get(&c.queue_full),
                packet_in_rate_limited: get(&c.rate_limited),
                packet_in_queue_depth: get(&c.depth),
            },
            event_queue_full: get(&c.event_queue_full),
            channels_opened: get(&c.channels_opened),
            tls_handshake_failed: get(&c.tls_handshake_failed),
            connect_failed: get(&c.connect_failed),
        }
    }

    fn channels(&self) -> MutexGuard<'_, HashMap<ConnId, Channel>> {
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one channel over `io` until it closes; returns why.
    pub async fn serve<IO>(&self, io: IO) -> CloseReason
    where
        IO: AsyncRead + AsyncWrite + Send + Unpin,
    {
        self.serve_channel(io, None, String::new(), String::new(), None)
            .await
    }

    /// [`Agent::serve`] with the channel's `source` and `peer` for
    /// [`Agent::channel_status`]; closes with [`CloseReason::Stopped`]
    /// when `stop` fires.
    async fn serve_channel<IO>(
        &self,
        io: IO,
        peek: Option<socket2::Socket>,
        source: String,
        peer: String,
        mut stop: Option<watch::Receiver<bool>>,
    ) -> CloseReason
    where
        IO: AsyncRead + AsyncWrite + Send + Unpin,
    {
        self.counters
            .channels_opened
            .fetch_add(1, Ordering::Relaxed);
        let mut conn = Connection::new(
            Arc::clone(&self.switch),
            Arc::clone(&self.controllers),
            self.config.conn.clone(),
            Instant::now(),
        );
        let (tx, mut events) = mpsc::channel(self.config.event_queue.max(1));
        let (control_tx, control) = mpsc::unbounded_channel::<Arc<SwitchEvent>>();
        conn.set_event_lane(control, self.event_sync.get().cloned());
        let info = Arc::new(ChannelInfo {
            source,
            peer,
            since: Instant::now(),
            negotiated: AtomicBool::new(false),
        });
        self.channels().insert(
            conn.id(),
            Channel {
                events: tx,
                control: control_tx,
                info: Arc::clone(&info),
            },
        );
        let mut negotiated = false;
        let _unlist = Unlist {
            agent: self,
            id: conn.id(),
        };
        let (mut rd, mut wr) = tokio::io::split(io);
        let mut buf = vec![0u8; self.config.read_buffer.max(4096)];
        // A peer that takes none of our bytes for as long as it may stay
        // silent is as dead as a silent one (a controller that stopped
        // reading): the channel closes instead of waiting for it forever.
        // One that reads slowly but steadily (a million-entry flow-stats
        // reply into a Python client) is not stalled: the limit is per
        // write, not for the whole output.
        let stall = self.config.conn.echo_interval + self.config.conn.echo_timeout;
        let mut spin = Spin::new(peek, self.config.busy_poll);
        loop {
            let out = conn.take_output();
            if !out.is_empty() {
                match write_moving(&mut wr, &out, stall).await {
                    Ok(waited) if waited => conn.output_taken(Instant::now()),
                    Ok(_) => {}
                    Err(reason) => conn.close(reason),
                }
                conn.give_output_back(out);
                spin.replied();
            }
            if let Some(reason) = conn.closed() {
                let reason = reason.clone();
                // (A stalled peer would stall a TLS close_notify too.)
                let _ = tokio::time::timeout(Duration::from_secs(1), wr.shutdown()).await;
                tracing::info!(conn = conn.id(), ?reason, "channel closed");
                return reason;
            }
            if conn.is_paused() {
                // Output written: handle what is still held back before
                // reading more (the socket pushes back meanwhile).
                conn.resume().await;
                continue;
            }
            let deadline = tokio::time::Instant::from_std(conn.next_deadline());
            spin.wait_for_input();
            tokio::select! {
                r = rd.read(&mut buf) => match r {
                    Ok(0) => conn.close(CloseReason::PeerClosed),
                    Ok(n) => {
                        spin.received();
                        conn.receive(buf.get(..n).unwrap_or_default(), Instant::now()).await;
                        if !negotiated && conn.is_negotiated() {
                            negotiated = true;
                            info.negotiated.store(true, Ordering::Relaxed);
                        }
                    }
                    Err(e) => conn.close(CloseReason::Io(e.to_string())),
                },
                _ = async {
                    match stop.as_mut() {
                        Some(stop) => wait_stopped(stop).await,
                        None => std::future::pending().await,
                    }
                } => conn.close(CloseReason::Stopped),
                ev = conn.next_lane_event() => {
                    if let Some(ev) = ev {
                        conn.on_event(&ev);
                        // As below: many events to one write.
                        conn.drain_lane(255);
                    }
                }
                ev = events.recv() => {
                    if let Some(ev) = ev {
                        conn.on_event(&ev);
                        // Take what else is queued, up to a bound, so one
                        // write carries many events.
                        for _ in 0..255 {
                            match events.try_recv() {
                                Ok(ev) => { conn.on_event(&ev); }
                                Err(_) => break,
                            }
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => conn.on_tick(Instant::now()),
            }
        }
    }

    /// Binds a listener for `target` (`ptcp:`/`ptls:`/`punix:`, or
    /// `tcp:`/`tls:`/`unix:` read as a listen address) and spawns its
    /// accept loop. Returns what it bound (the real port with port 0) and
    /// the handle that stops it. A unix socket gets the default
    /// [`UnixPerms`] (owner only); see [`Agent::listen_unix`].
    pub async fn listen(
        self: &Arc<Self>,
        target: &Target,
    ) -> io::Result<(ListenAddr, ChannelHandle)> {
        let source = target.to_string();
        if let Some(path) = target.unix_path() {
            let h = self.listen_unix_as(path, UnixPerms::default(), source)?;
            return Ok((ListenAddr::Unix(path.to_path_buf()), h));
        }
        let acceptor = match target.transport {
            Transport::Tcp | Transport::Unix => None,
            Transport::Tls => Some(tokio_rustls::TlsAcceptor::from(
                self.tls()?.server_config()?,
            )),
        };
        let listener = TcpListener::bind(target.socket_addr()).await?;
        let addr = listener.local_addr()?;
        tracing::info!(%addr, %target, "listening for controllers");
        let serve = move |agent: Arc<Self>,
                          source: String,
                          (stream, peer): (TcpStream, SocketAddr),
                          stop| {
            let acceptor = acceptor.clone();
            async move {
                let _ = stream.set_nodelay(true);
                tracing::info!(%peer, %source, "controller connected");
                let peer_s = peer.to_string();
                let peek = Spin::handle(&stream);
                match acceptor {
                    None => {
                        agent
                            .serve_channel(stream, peek, source, peer_s, Some(stop))
                            .await;
                    }
                    Some(a) => match a.accept(stream).await {
                        Ok(tls) => {
                            agent
                                .serve_channel(tls, peek, source, peer_s, Some(stop))
                                .await;
                        }
                        Err(e) => {
                            agent
                                .counters
                                .tls_handshake_failed
                                .fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(%peer, error = %e, "TLS handshake failed");
                        }
                    },
                }
            }
        };
        let (stop, task) = self.spawn_channels(
            listener,
            |l: Arc<TcpListener>| async move { l.accept().await },
            &source,
            serve,
        );
        Ok((
            ListenAddr::Tcp(addr),
            ChannelHandle {
                source,
                stop,
                task,
                socket_file: None,
            },
        ))
    }

    /// Listens for OpenFlow channels on the unix socket `path` (what
    /// `ovs-ofctl -O OpenFlow13 dump-flows unix:PATH` talks to): creates
    /// the parent directory if missing, replaces a stale socket file
    /// (anything else at `path` is an error), binds, and gives the file
    /// `perms`. A peer that is neither root, nor this process's user, nor
    /// (with [`UnixPerms::group`]) a member of the group is logged and
    /// closed. Stopping the handle removes the socket file. Its channels'
    /// [`ChannelStatus::source`] is `punix:PATH`.
    pub async fn listen_unix(
        self: &Arc<Self>,
        path: &Path,
        perms: UnixPerms,
    ) -> io::Result<ChannelHandle> {
        let source = Target {
            transport: Transport::Unix,
            passive: true,
            host: path.display().to_string(),
            port: 0,
        }
        .to_string();
        self.listen_unix_as(path, perms, source)
    }

    fn listen_unix_as(
        self: &Arc<Self>,
        path: &Path,
        perms: UnixPerms,
        source: String,
    ) -> io::Result<ChannelHandle> {
        unix::prepare(path)?;
        let listener = UnixListener::bind(path)?;
        let file = unix::set_perms(path, &perms)?;
        tracing::info!(path = %path.display(), mode = format_args!("{:o}", perms.mode), group = ?perms.group, "listening for controllers");
        let owner = file.owner;
        let group = perms.group;
        let shown = path.display().to_string();
        let (stop, task) = self.spawn_channels(
            listener,
            |l: Arc<UnixListener>| async move { l.accept().await },
            &source,
            move |agent, source, (stream, _): (UnixStream, _), stop| {
                let path = shown.clone();
                async move {
                    match unix_peer(&stream, &path, owner, group).await {
                        Ok(peer) => {
                            tracing::info!(%peer, %source, "controller connected");
                            let peek = Spin::handle(&stream);
                            agent
                                .serve_channel(stream, peek, source, peer, Some(stop))
                                .await;
                        }
                        Err(why) => {
                            tracing::warn!(path, "refused a unix socket peer: {why}");
                        }
                    }
                }
            },
        );
        Ok(ChannelHandle {
            source,
            stop,
            task,
            socket_file: Some(file),
        })
    }

    /// [`spawn_listener`] over `listener` for this agent's channels from
    /// `source`: `accept` takes the next connection, `handle` serves it,
    /// given the agent, the source and the stop signal.
    fn spawn_channels<L, T, Fut, HFut>(
        self: &Arc<Self>,
        listener: L,
        accept: impl Fn(Arc<L>) -> Fut + Send + 'static,
        source: &str,
        handle: impl Fn(Arc<Self>, String, T, watch::Receiver<bool>) -> HFut + Send + 'static,
    ) -> (watch::Sender<bool>, JoinHandle<()>)
    where
        L: Send + Sync + 'static,
        Fut: Future<Output = io::Result<T>> + Send,
        T: Send + 'static,
        HFut: Future<Output = ()> + Send + 'static,
    {
        let listener = Arc::new(listener);
        let agent = Arc::clone(self);
        let source = source.to_string();
        spawn_listener(
            move || accept(Arc::clone(&listener)),
            move |c, stop| handle(Arc::clone(&agent), source.clone(), c, stop),
        )
    }

    fn tls(&self) -> io::Result<&TlsSettings> {
        self.config.tls.as_ref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "tls:/ptls: target but no TLS certificates configured",
            )
        })
    }

    /// Connects to `target` once and serves the channel until it closes.
    pub async fn connect_once(&self, target: &Target) -> io::Result<CloseReason> {
        self.connect_channel(target, target.to_string(), None).await
    }

    async fn connect_channel(
        &self,
        target: &Target,
        source: String,
        stop: Option<watch::Receiver<bool>>,
    ) -> io::Result<CloseReason> {
        if let Some(path) = target.unix_path() {
            let stream = UnixStream::connect(path).await?;
            let peer = path.display().to_string();
            let peek = Spin::handle(&stream);
            return Ok(self.serve_channel(stream, peek, source, peer, stop).await);
        }
        let client = match target.transport {
            Transport::Tcp | Transport::Unix => None,
            Transport::Tls => Some((
                tokio_rustls::TlsConnector::from(self.tls()?.client_config()?),
                server_name(&target.host)?,
            )),
        };
        let stream = TcpStream::connect(target.socket_addr()).await?;
        let _ = stream.set_nodelay(true);
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| target.socket_addr());
        let peek = Spin::handle(&stream);
        match client {
            None => Ok(self.serve_channel(stream, peek, source, peer, stop).await),
            Some((connector, name)) => match connector.connect(name, stream).await {
                Ok(tls) => Ok(self.serve_channel(tls, peek, source, peer, stop).await),
                Err(e) => {
                    self.counters
                        .tls_handshake_failed
                        .fetch_add(1, Ordering::Relaxed);
                    Err(e)
                }
            },
        }
    }

    /// Spawns a task that keeps a channel to the controller at `target`
    /// (`tcp:`/`tls:`/`unix:`) up: after a failed attempt or a closed
    /// channel it waits, doubling the wait from `backoff_min` up to
    /// `backoff_max`; a channel that opened resets the wait. Stopping the
    /// returned handle ends the loop and closes the channel.
    pub fn connect(self: &Arc<Self>, target: Target) -> ChannelHandle {
        let agent = Arc::clone(self);
        let source = target.to_string();
        let src = source.clone();
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut stop = stop_rx.clone();
            let min = agent.config.backoff_min;
            let max = agent.config.backoff_max.max(min);
            let mut backoff = min;
            loop {
                let attempt = agent.connect_channel(&target, src.clone(), Some(stop_rx.clone()));
                match until_stopped(attempt, stop_rx.clone()).await {
                    None => break,
                    Some(Ok(reason)) => {
                        tracing::info!(%target, ?reason, "controller channel closed");
                        backoff = min;
                    }
                    Some(Err(e)) => {
                        agent
                            .counters
                            .connect_failed
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%target, error = %e, "connect failed");
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = wait_stopped(&mut stop) => break,
                }
                backoff = (backoff * 2).min(max);
            }
        });
        ChannelHandle {
            source,
            stop: stop_tx,
            task,
            socket_file: None,
        }
    }
    fn fan_out(&self, ev: SwitchEvent) {
        let packet_in = matches!(ev, SwitchEvent::PacketIn(_));
        let ev = Arc::new(ev);
        for c in self.channels().values() {
            if !packet_in {
                // Fails only for a channel whose task has ended.
                let _ = c.control.send(Arc::clone(&ev));
            } else if c.events.try_send(Arc::clone(&ev)).is_err() {
                self.counters
                    .event_queue_full
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn channels_have_room(&self) -> bool {
        self.channels().values().all(|c| c.events.capacity() > 0)
    }

    fn publish_packet_in_stats(&self, q: &PacketInQueues) {
        let s = q.stats();
        let c = &self.counters;
        c.queued.store(s.packet_in_queued, Ordering::Relaxed);
        c.queue_full
            .store(s.packet_in_queue_full, Ordering::Relaxed);
        c.rate_limited
            .store(s.packet_in_rate_limited, Ordering::Relaxed);
        c.depth.store(s.packet_in_queue_depth, Ordering::Relaxed);
    }

    /// The pump's counter of what it hands over from `rx`'s control lane
    /// (if it has one), whose view the channels' barriers then wait on.
    fn adopt_sync(&self, rx: &EventReceiver) -> Option<Handed> {
        let handed = rx.handed();
        if let Some(h) = &handed {
            let _ = self.event_sync.set(h.sync());
        }
        handed
    }

    /// Reads switch events until the channel closes and fans them out (see
    /// the module documentation).
    pub async fn run_events(&self, rx: impl Into<EventReceiver>) {
        let mut rx = rx.into();
        let mut handed = self.adopt_sync(&rx);
        let mut queues = PacketInQueues::new(self.config.packet_in.clone());
        loop {
            let first = if queues.is_empty() {
                match rx.recv().await {
                    Some(ev) => Some(ev),
                    None => break,
                }
            } else {
                // Packet-ins wait for room in the channels: look again soon.
                tokio::select! {
                    ev = rx.recv() => match ev { Some(ev) => Some(ev), None => break },
                    _ = tokio::time::sleep(Duration::from_millis(1)) => None,
                }
            };
            let now = Instant::now();
            let take = |ev: SwitchEvent,
                        queues: &mut PacketInQueues,
                        handed: &mut Option<Handed>| match ev {
                SwitchEvent::PacketIn(pi) => {
                    let _ = queues.offer(pi, now);
                }
                other => {
                    self.fan_out(other);
                    // Only the control lane carries these.
                    if let Some(h) = handed.as_mut() {
                        h.one();
                    }
                }
            };
            if let Some(ev) = first {
                take(ev, &mut queues, &mut handed);
            }
            for _ in 0..4096 {
                match rx.try_recv() {
                    Some(ev) => take(ev, &mut queues, &mut handed),
                    None => break,
                }
            }
            while !queues.is_empty() && self.channels_have_room() {
                if let Some(pi) = queues.pop() {
                    self.fan_out(SwitchEvent::PacketIn(pi));
                }
            }
            self.publish_packet_in_stats(&queues);
        }
    }

    /// Spawns [`Agent::run_events`].
    pub fn spawn_events(
        self: &Arc<Self>,
        rx: impl Into<EventReceiver> + Send + 'static,
    ) -> JoinHandle<()> {
        let rx: EventReceiver = rx.into();
        // Now, not when the task first runs: a channel opened before that
        // gets the barrier ordering too.
        self.adopt_sync(&rx);
        let agent = Arc::clone(self);
        tokio::spawn(async move { agent.run_events(rx).await })
    }

    /// Spawns a task calling [`Switch::tick`] every `period` (flow
    /// timeouts).
    pub fn spawn_housekeeping(self: &Arc<Self>, period: Duration) -> JoinHandle<()> {
        let agent = Arc::clone(self);
        tokio::spawn(async move {
            let mut t = tokio::time::interval(period);
            // A tick that took longer than the period (a slow machine,
            // huge tables) is not made up for with a burst of ticks that
            // would hold this thread from the channels.
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                t.tick().await;
                agent.switch.tick();
            }
        })
    }
}

/// Spawns an accept loop: `accept` yields connections, `handle` serves
/// each in its own task, given the stop signal. On stop the loop closes
/// the listener (dropping `accept`) and waits for its channels, each
/// closed by [`until_stopped`] at the latest. Returns the stop sender and
/// the loop's task.
fn spawn_listener<T, Fut, HFut>(
    accept: impl Fn() -> Fut + Send + 'static,
    handle: impl Fn(T, watch::Receiver<bool>) -> HFut + Send + 'static,
) -> (watch::Sender<bool>, JoinHandle<()>)
where
    Fut: Future<Output = io::Result<T>> + Send,
    T: Send + 'static,
    HFut: Future<Output = ()> + Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut stop = stop_rx.clone();
        let mut set = JoinSet::new();
        loop {
            tokio::select! {
                _ = wait_stopped(&mut stop) => break,
                Some(_) = set.join_next(), if !set.is_empty() => {}
                r = accept() => match r {
                    Ok(c) => {
                        set.spawn(until_stopped(handle(c, stop_rx.clone()), stop_rx.clone()));
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: wait a bit.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
        drop(accept);
        while set.join_next().await.is_some() {}
    });
    (stop_tx, task)
}

/// Checks a unix socket peer's credentials (see [`unix::peer_allowed`])
/// and returns how [`ChannelStatus::peer`] shows it, or why it is refused.
async fn unix_peer(
    stream: &UnixStream,
    path: &str,
    owner: u32,
    group: Option<u32>,
) -> Result<String, String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("cannot read its credentials: {e}"))?;
    let (uid, gid) = (cred.uid(), cred.gid());
    let member = match group {
        Some(g) if uid != 0 && uid != owner && gid != g => {
            tokio::task::spawn_blocking(move || unix::user_in_group(uid, g))
                .await
                .unwrap_or(false)
        }
        _ => false,
    };
    let pid = cred.pid().map(|p| format!(" pid={p}")).unwrap_or_default();
    if unix::peer_allowed(uid, gid, owner, group, |_, _| member) {
        Ok(format!("{path}{pid} uid={uid}"))
    } else {
        Err(format!(
            "uid {uid} (gid {gid}{pid}) is neither root, nor the switch's uid {owner}{}",
            match group {
                Some(g) => format!(", nor in group {g}"),
                None => String::new(),
            }
        ))
    }
}

/// Writes all of `out`, closing with [`CloseReason::WriteStalled`] only
/// when the peer takes none of it for `stall` (each write must make
/// progress within that time; the whole may take longer). Says whether
/// it had to wait for the peer (more than one write).
async fn write_moving<W>(wr: &mut W, mut out: &[u8], stall: Duration) -> Result<bool, CloseReason>
where
    W: AsyncWrite + Unpin,
{
    let mut writes = 0;
    while !out.is_empty() {
        match tokio::time::timeout(stall, wr.write(out)).await {
            Ok(Ok(0)) => return Err(CloseReason::Io("the peer takes no more bytes".into())),
            Ok(Ok(n)) => out = &out[n..],
            Ok(Err(e)) => return Err(CloseReason::Io(e.to_string())),
            Err(_) => return Err(CloseReason::WriteStalled),
        }
        writes += 1;
    }
    Ok(writes > 1)
}

#[cfg(test)]
mod tests;
