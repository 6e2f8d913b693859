//! The controller side of every bridge: one OpenFlow agent per bridge,
//! its channels to the configured controllers and listeners, the
//! bridge's management socket (`punix:DIR/BRIDGE.mgmt`, what
//! `ovs-ofctl -O OpenFlow13 dump-flows unix:DIR/br0.mgmt` talks to), and
//! the fail-mode follower (a bridge in fail mode standalone acts as a
//! learning switch while it has controllers configured and none
//! connected).
//!
//! Everything here runs on one small tokio runtime owned by
//! [`Controllers`]. Controllers are set per bridge as a whole
//! ([`Controllers::set`]): channels whose target stays are left alone,
//! those gone are closed, new ones are opened.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agent::{Agent, AgentConfig, ChannelHandle, PacketInConfig, TlsSettings, UnixPerms};
use datastore::FailMode;
use tokio::task::JoinHandle;

use crate::openflow::BridgeSwitch;
use crate::{Runtime, RuntimeError};

/// One controller channel's state, for `fulmar ctl show`, OVSDB and
/// metrics.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ControllerStatus {
    /// The target as configured (`tcp:HOST:PORT`, `ptcp:PORT:ADDR`).
    pub target: String,
    /// A channel to it (or accepted by it) has completed negotiation.
    pub connected: bool,
    /// The channel's role (`master`, `slave`, `equal`, or `other` when
    /// none is connected).
    pub role: String,
    /// Open channels (a listener may have several).
    pub channels: usize,
}

struct BridgeAgent {
    agent: Arc<Agent<BridgeSwitch>>,
    tasks: Vec<JoinHandle<()>>,
    follow: Option<JoinHandle<()>>,
    channels: Vec<(String, ChannelHandle)>,
    mgmt: Option<ChannelHandle>,
    fail_mode: FailMode,
}

impl BridgeAgent {
    /// Closes the channels and ends the tasks; returns the agent's
    /// counters as they stood once it stopped.
    fn stop(mut self) -> agent::AgentStats {
        for (_, h) in self.channels.drain(..) {
            h.stop();
        }
        if let Some(h) = self.mgmt.take() {
            h.stop();
        }
        if let Some(f) = self.follow.take() {
            f.abort();
        }
        for t in self.tasks.drain(..) {
            t.abort();
        }
        self.agent.stats()
    }
}

/// Settings of the controller side.
#[derive(Clone, Debug, Default)]
pub struct ControllerOptions {
    /// Certificates for `tls:`/`ptls:` targets.
    pub tls: Option<TlsSettings>,
    /// Where each bridge's management socket goes (`DIR/BRIDGE.mgmt`);
    /// `None`: none.
    pub mgmt_dir: Option<PathBuf>,
    /// Who may open the management sockets.
    pub mgmt_perms: UnixPerms,
    /// How long a channel polls its socket after a reply to a quick
    /// controller (`None`: the agent's default; zero: never; see
    /// [`AgentConfig::busy_poll`]).
    pub busy_poll: Option<Duration>,
    /// Each bridge's packet-in path: its token bucket and queues (see
    /// [`PacketInConfig`]).
    pub packet_in: PacketInConfig,
}

/// The agents of every bridge.
pub struct Controllers {
    /// Always `Some` until dropped (see the `Drop` impl).
    tokio: Option<tokio::runtime::Runtime>,
    opts: ControllerOptions,
    bridges: Mutex<HashMap<String, BridgeAgent>>,
}

impl Controllers {
    /// A controller side with its own runtime (one thread).
    pub fn new(opts: ControllerOptions) -> std::io::Result<Controllers> {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fulmar-agent")
            .enable_all()
            .build()?;
        Ok(Controllers {
            tokio: Some(tokio),
            opts,
            bridges: Mutex::new(HashMap::new()),
        })
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.tokio
            .as_ref()
            .expect("the runtime lives until Controllers is dropped")
    }

    /// The runtime the agents run on (management modules run there too).
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.rt().handle().clone()
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, BridgeAgent>> {
        self.bridges.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts bridge `br`'s agent (the bridge runs in `rt`): its
    /// management socket, then its controllers.
    pub fn attach(&self, rt: &Runtime, br: &datastore::Bridge) -> Result<(), RuntimeError> {
        let config = AgentConfig {
            fail_mode: br.fail_mode,
            tls: self.opts.tls.clone(),
            busy_poll: self
                .opts
                .busy_poll
                .unwrap_or(AgentConfig::default().busy_poll),
            packet_in: self.opts.packet_in.clone(),
            ..AgentConfig::default()
        };
        let (tx, rx) = agent::event_channel(config.event_queue);
        let sw = rt
            .switch(&br.name, tx)
            .ok_or_else(|| RuntimeError::Change(format!("bridge {} is not running", br.name)))?;
        let _enter = self.rt().enter();
        let agent = Agent::new(Arc::new(sw), config);
        let mut tasks = vec![
            agent.spawn_events(rx),
            agent.spawn_housekeeping(Duration::from_secs(1)),
        ];
        if let Some(up) = rt.controller_flag(&br.name) {
            let mut connected = agent.controllers().subscribe();
            tasks.push(self.rt().spawn(async move {
                loop {
                    let n = *connected.borrow_and_update();
                    up.store(n > 0, std::sync::atomic::Ordering::Relaxed);
                    if connected.changed().await.is_err() {
                        break;
                    }
                }
            }));
        }
        let mgmt = match &self.opts.mgmt_dir {
            Some(dir) => {
                let mut path = dir.join(format!("{}.mgmt", br.name));
                if std::os::unix::net::UnixStream::connect(&path).is_ok() {
                    // Another switch process has a bridge of this name:
                    // leave its socket alone (as ovs-vswitchd names its
                    // sockets by pid).
                    let own = dir.join(format!("{}.{}.mgmt", br.name, std::process::id()));
                    tracing::warn!(
                        bridge = %br.name,
                        "{} is in use by another switch; management socket at {}",
                        path.display(),
                        own.display()
                    );
                    path = own;
                }
                let h = self
                    .rt()
                    .block_on(agent.listen_unix(&path, self.opts.mgmt_perms.clone()))
                    .map_err(|e| {
                        RuntimeError::Change(format!(
                            "bridge {}: management socket {}: {e}",
                            br.name,
                            path.display()
                        ))
                    })?;
                Some(h)
            }
            None => None,
        };
        self.map().insert(
            br.name.clone(),
            BridgeAgent {
                agent,
                tasks,
                follow: None,
                channels: Vec::new(),
                mgmt,
                fail_mode: FailMode::Secure,
            },
        );
        self.set(rt, &br.name, &br.controllers, br.fail_mode)
    }

    /// Stops bridge `bridge`'s agent and closes its channels.
    /// Returns the agent's counters as they stood once it stopped (the
    /// controller-side drops belong in the bridge's final report).
    pub fn detach(&self, bridge: &str) -> Option<agent::AgentStats> {
        let b = self.map().remove(bridge)?;
        let _enter = self.rt().enter();
        Some(b.stop())
    }

    /// Sets bridge `bridge`'s controllers and fail mode: channels to
    /// targets that stay are kept, the others closed, new ones opened.
    /// A listener that cannot bind is an error, and then nothing changed.
    pub fn set(
        &self,
        rt: &Runtime,
        bridge: &str,
        controllers: &[datastore::Controller],
        fail_mode: FailMode,
    ) -> Result<(), RuntimeError> {
        let _enter = self.rt().enter();
        let mut map = self.map();
        let b = map
            .get_mut(bridge)
            .ok_or_else(|| RuntimeError::Change(format!("bridge {bridge} has no agent")))?;
        let wanted: Vec<String> = controllers.iter().map(|c| c.target.to_string()).collect();
        // New channels first, so a listener that cannot bind leaves
        // everything as it was.
        let mut opened = Vec::new();
        for t in &wanted {
            if b.channels.iter().any(|(k, _)| k == t) {
                continue;
            }
            let target: agent::Target = t
                .parse()
                .map_err(|e| RuntimeError::Change(format!("bridge {bridge}: {e}")))?;
            let h = if target.passive {
                match self.rt().block_on(b.agent.listen(&target)) {
                    Ok((addr, h)) => {
                        let addr = addr.to_string();
                        eprintln!("fulmar: bridge {bridge} listening for controllers on {addr}");
                        h
                    }
                    Err(e) => {
                        for (_, h) in opened {
                            ChannelHandle::stop(h);
                        }
                        return Err(RuntimeError::Change(format!(
                            "bridge {bridge}: listen on {t}: {e}"
                        )));
                    }
                }
            } else {
                b.agent.connect(target)
            };
            opened.push((t.clone(), h));
        }
        let mut kept = Vec::new();
        for (t, h) in b.channels.drain(..) {
            if wanted.contains(&t) {
                kept.push((t, h));
            } else {
                tracing::info!(bridge, target = %t, "controller removed");
                h.stop();
            }
        }
        kept.extend(opened);
        b.channels = kept;
        b.agent.set_fail_mode(fail_mode);
        b.fail_mode = fail_mode;
        // Fail mode standalone: with controllers, fail-open while none is
        // connected; without, table-0 misses go to NORMAL (see
        // `standalone`).
        let follow = fail_mode == FailMode::Standalone && !b.channels.is_empty();
        let miss_normal = fail_mode == FailMode::Standalone && b.channels.is_empty();
        if rt.set_miss_normal(bridge, miss_normal) {
            tracing::info!(
                bridge,
                "{}",
                if miss_normal {
                    "no controller, fail mode standalone: table misses go to NORMAL"
                } else {
                    "table misses are dropped again"
                }
            );
        }
        let sa = rt.standalone(bridge);
        match (follow, b.follow.is_some()) {
            (true, false) => {
                if let Some(sa) = sa {
                    b.follow = Some(self.rt().spawn(crate::standalone::follow_controllers(
                        b.agent.clone(),
                        sa,
                        bridge.to_string(),
                    )));
                }
            }
            (false, true) => {
                if let Some(f) = b.follow.take() {
                    f.abort();
                }
                if let Some(sa) = sa {
                    if sa.set_active(false) {
                        tracing::info!(bridge, "fail mode secure: back to the flow tables");
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The state of bridge `bridge`'s configured controllers, in
    /// configuration order.
    pub fn status(&self, bridge: &str) -> Vec<ControllerStatus> {
        let map = self.map();
        let Some(b) = map.get(bridge) else {
            return Vec::new();
        };
        let chans = b.agent.channel_status();
        b.channels
            .iter()
            .map(|(t, h)| {
                let mine: Vec<_> = chans.iter().filter(|c| c.source == h.source()).collect();
                let negotiated: Vec<_> = mine.iter().filter(|c| c.negotiated).collect();
                ControllerStatus {
                    target: t.clone(),
                    connected: !negotiated.is_empty(),
                    role: negotiated
                        .first()
                        .map(|c| c.role.to_string())
                        .unwrap_or_else(|| "other".into()),
                    channels: mine.len(),
                }
            })
            .collect()
    }

    /// Bridge `bridge`'s agent's counters (packet-ins it dropped, events
    /// its channels had no room for).
    pub fn agent_stats(&self, bridge: &str) -> Option<agent::AgentStats> {
        Some(self.map().get(bridge)?.agent.stats())
    }

    /// Stops every agent and closes every channel (the runtime itself
    /// ends when this is dropped).
    /// Returns each bridge's agent counters as they stood once it stopped.
    pub fn stop_all(&self) -> HashMap<String, agent::AgentStats> {
        let all: Vec<_> = self.map().drain().collect();
        let _enter = self.rt().enter();
        all.into_iter().map(|(name, b)| (name, b.stop())).collect()
    }
}

impl Drop for Controllers {
    /// The last holder of the daemon may be a task on this very runtime
    /// (a control connection answering `exit`): a runtime cannot be
    /// dropped from inside itself, so it is shut down in the background.
    fn drop(&mut self) {
        if let Some(rt) = self.tokio.take() {
            rt.shutdown_background();
        }
    }
}
