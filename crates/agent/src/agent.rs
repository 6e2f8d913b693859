//! [`Agent`]: the tokio side of the controller channels.
//!
//! - One task per channel ([`Agent::serve`]) shuttles bytes between the
//!   socket and its [`Connection`]: it reads whatever the socket has (up
//!   to `read_buffer` bytes), lets the connection handle every message in
//!   it (so a burst of flow-mods is applied as one batch), then writes all
//!   replies with one `write_all`. It also takes switch events from its own
//!   bounded queue and wakes for keepalive deadlines.
//! - Listeners ([`Agent::listen`]) accept `ptcp:`/`ptls:` channels;
//!   connectors ([`Agent::connect`]) keep one `tcp:`/`tls:` channel to a
//!   controller up, reconnecting with exponential backoff between
//!   `backoff_min` and `backoff_max`.
//! - The event pump ([`Agent::run_events`]) reads the switch's bounded
//!   event channel. Flow-removed and port-status events go to every
//!   channel at once; packet-ins go through [`PacketInQueues`] and are
//!   released only while every channel's queue has room. A channel whose
//!   queue is full loses the event (`event_queue_full`); each
//!   [`Connection`] filters what reaches it by role and async config.
//!
//! Fail modes: when every controller is gone
//! ([`Controllers::all_controllers_gone`]), the runtime applies
//! [`AgentConfig::fail_mode`] — `Secure` keeps the flow tables and drops
//! table misses, `Standalone` acts as a learning switch until a controller
//! is back. The agent only exposes the state; the datapath acts on it.

use crate::conn::{CloseReason, ConnConfig, Connection};
use crate::packet_in::{PacketInConfig, PacketInQueues, PacketInStats};
use crate::roles::{ConnId, Controllers};
use crate::switch::{Switch, SwitchEvent};
use crate::target::{Target, Transport};
use crate::tls::{server_name, TlsSettings};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What the switch does while no controller is connected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailMode {
    /// Keep the flow tables; drop packets that miss (no packet-ins).
    #[default]
    Secure,
    /// Act as a learning switch until a controller connects again.
    Standalone,
}

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
    /// What the runtime does with no controller.
    pub fail_mode: FailMode,
    /// Certificates for `tls:`/`ptls:` targets.
    pub tls: Option<TlsSettings>,
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

/// The controller channels of one switch.
pub struct Agent<S: Switch> {
    switch: Arc<S>,
    config: AgentConfig,
    controllers: Arc<Controllers>,
    channels: Mutex<HashMap<ConnId, EventTx>>,
    counters: Counters,
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
            config,
            controllers: Arc::new(Controllers::new()),
            channels: Mutex::new(HashMap::new()),
            counters: Counters::default(),
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

    /// The configured fail mode.
    pub fn fail_mode(&self) -> FailMode {
        self.config.fail_mode
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

    fn channels(&self) -> MutexGuard<'_, HashMap<ConnId, EventTx>> {
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one channel over `io` until it closes; returns why.
    pub async fn serve<IO>(&self, io: IO) -> CloseReason
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
        self.channels().insert(conn.id(), tx);
        let _unlist = Unlist {
            agent: self,
            id: conn.id(),
        };
        let (mut rd, mut wr) = tokio::io::split(io);
        let mut buf = vec![0u8; self.config.read_buffer.max(4096)];
        loop {
            let out = conn.take_output();
            if !out.is_empty() {
                if let Err(e) = wr.write_all(&out).await {
                    conn.close(CloseReason::Io(e.to_string()));
                }
            }
            if let Some(reason) = conn.closed() {
                let reason = reason.clone();
                let _ = wr.shutdown().await;
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
            tokio::select! {
                r = rd.read(&mut buf) => match r {
                    Ok(0) => conn.close(CloseReason::PeerClosed),
                    Ok(n) => conn.receive(buf.get(..n).unwrap_or_default(), Instant::now()).await,
                    Err(e) => conn.close(CloseReason::Io(e.to_string())),
                },
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

    /// Binds a listener for `target` (`ptcp:`/`ptls:`, or `tcp:`/`tls:`
    /// read as a listen address) and spawns its accept loop. Returns the
    /// bound address (useful with port 0).
    pub async fn listen(
        self: &Arc<Self>,
        target: &Target,
    ) -> io::Result<(SocketAddr, JoinHandle<()>)> {
        let acceptor = match target.transport {
            Transport::Tcp => None,
            Transport::Tls => Some(tokio_rustls::TlsAcceptor::from(
                self.tls()?.server_config()?,
            )),
        };
        let listener = TcpListener::bind(target.socket_addr()).await?;
        let addr = listener.local_addr()?;
        tracing::info!(%addr, %target, "listening for controllers");
        let agent = Arc::clone(self);
        let handle = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        let agent = Arc::clone(&agent);
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            tracing::info!(%peer, "controller connected");
                            match acceptor {
                                None => {
                                    agent.serve(stream).await;
                                }
                                Some(a) => match a.accept(stream).await {
                                    Ok(tls) => {
                                        agent.serve(tls).await;
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
                        });
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: wait a bit.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok((addr, handle))
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
        let client = match target.transport {
            Transport::Tcp => None,
            Transport::Tls => Some((
                tokio_rustls::TlsConnector::from(self.tls()?.client_config()?),
                server_name(&target.host)?,
            )),
        };
        let stream = TcpStream::connect(target.socket_addr()).await?;
        let _ = stream.set_nodelay(true);
        match client {
            None => Ok(self.serve(stream).await),
            Some((connector, name)) => match connector.connect(name, stream).await {
                Ok(tls) => Ok(self.serve(tls).await),
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
    /// (`tcp:`/`tls:`) up: after a failed attempt or a closed channel it
    /// waits, doubling the wait from `backoff_min` up to `backoff_max`; a
    /// channel that opened resets the wait.
    pub fn connect(self: &Arc<Self>, target: Target) -> JoinHandle<()> {
        let agent = Arc::clone(self);
        tokio::spawn(async move {
            let min = agent.config.backoff_min;
            let max = agent.config.backoff_max.max(min);
            let mut backoff = min;
            loop {
                match agent.connect_once(&target).await {
                    Ok(reason) => {
                        tracing::info!(%target, ?reason, "controller channel closed");
                        backoff = min;
                    }
                    Err(e) => {
                        agent
                            .counters
                            .connect_failed
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%target, error = %e, "connect failed");
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(max);
            }
        })
    }

    fn fan_out(&self, ev: SwitchEvent) {
        let ev = Arc::new(ev);
        for tx in self.channels().values() {
            if tx.try_send(Arc::clone(&ev)).is_err() {
                self.counters
                    .event_queue_full
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn channels_have_room(&self) -> bool {
        self.channels().values().all(|tx| tx.capacity() > 0)
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

    /// Reads switch events until the channel closes and fans them out (see
    /// the module documentation).
    pub async fn run_events(&self, mut rx: mpsc::Receiver<SwitchEvent>) {
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
            let take = |ev: SwitchEvent, queues: &mut PacketInQueues| match ev {
                SwitchEvent::PacketIn(pi) => {
                    let _ = queues.offer(pi, now);
                }
                other => self.fan_out(other),
            };
            if let Some(ev) = first {
                take(ev, &mut queues);
            }
            for _ in 0..4096 {
                match rx.try_recv() {
                    Ok(ev) => take(ev, &mut queues),
                    Err(_) => break,
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
    pub fn spawn_events(self: &Arc<Self>, rx: mpsc::Receiver<SwitchEvent>) -> JoinHandle<()> {
        let agent = Arc::clone(self);
        tokio::spawn(async move { agent.run_events(rx).await })
    }

    /// Spawns a task calling [`Switch::tick`] every `period` (flow
    /// timeouts).
    pub fn spawn_housekeeping(self: &Arc<Self>, period: Duration) -> JoinHandle<()> {
        let agent = Arc::clone(self);
        tokio::spawn(async move {
            let mut t = tokio::time::interval(period);
            loop {
                t.tick().await;
                agent.switch.tick();
            }
        })
    }
}

#[cfg(test)]
mod tests;
