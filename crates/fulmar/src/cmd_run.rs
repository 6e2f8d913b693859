//! `fulmar run`: start the switch from a config file or from flags, run
//! until SIGINT/SIGTERM (or `--duration`), then stop cleanly and print the
//! final port, drop and flow counters.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use datastore::{Backend, Config, FlagArgs, ThreadMode};
use runtime::signals::Shutdown;
use runtime::{Runtime, RuntimeOptions};

/// Packet I/O backend for `--interface` ports.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Io {
    /// AF_PACKET (a packet socket, or a TPACKET_V3 ring: --afpacket-mode); works on any interface.
    Afpacket,
    /// AF_XDP (one queue per interface).
    Afxdp,
}

/// How afpacket ports receive.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AfMode {
    /// A plain packet socket: each frame at once (low latency).
    Socket,
    /// A TPACKET_V3 ring: fewer system calls, but frames wait for their
    /// block's timer at low rates (a kernel tick per hop).
    Ring,
}

impl From<AfMode> for runtime::AfPacketMode {
    fn from(m: AfMode) -> Self {
        match m {
            AfMode::Socket => runtime::AfPacketMode::Socket,
            AfMode::Ring => runtime::AfPacketMode::Ring,
        }
    }
}

/// What a bridge does while no controller is connected (flag form).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FailModeArg {
    /// Keep the flow tables; drop what misses.
    Secure,
    /// Act as a learning switch until a controller connects.
    Standalone,
}

/// Thread arrangement for the flag form.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Mode {
    /// Each worker reads, processes and sends its own packets.
    RunToCompletion,
    /// RX thread → workers → TX thread over rings.
    RxWorkerTx,
}

/// `fulmar run` arguments.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// A TOML configuration file (bridges, ports, threads, flows).
    #[arg(long, short = 'c', conflicts_with_all = ["interface", "flows", "listen", "controller", "dpid", "io", "workers", "mode", "fail_mode"])]
    pub config: Option<PathBuf>,
    /// An interface to switch; ports are numbered 1, 2, ... in order.
    #[arg(long, short = 'i')]
    pub interface: Vec<String>,
    /// Static flows (ovs-ofctl syntax, one per line).
    #[arg(long)]
    pub flows: Option<PathBuf>,
    /// Listen for controllers: tcp:ADDR:PORT.
    #[arg(long)]
    pub listen: Vec<String>,
    /// Connect to a controller: tcp:ADDR:PORT (repeatable).
    #[arg(long)]
    pub controller: Vec<String>,
    /// Datapath id.
    #[arg(long)]
    pub dpid: Option<u64>,
    /// What the bridge does while no controller is connected (default
    /// secure); applies when --controller or --listen is given.
    #[arg(long, value_enum)]
    pub fail_mode: Option<FailModeArg>,
    /// Packet I/O backend.
    #[arg(long, value_enum)]
    pub io: Option<Io>,
    /// Worker threads.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Thread arrangement (default run-to-completion).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// How afpacket ports receive.
    #[arg(long, value_enum, default_value = "socket")]
    pub afpacket_mode: AfMode,
    /// Socket mode: receive buffer per port in bytes (default 8 MiB), what
    /// absorbs a burst while a worker is busy; frames beyond it are
    /// counted as rx drops.
    #[arg(long, value_parser = clap::value_parser!(u64).range(4096..=1 << 30))]
    pub afpacket_rcvbuf: Option<u64>,
    /// Idle dataplane threads keep polling this many µs after their last
    /// input before they sleep (default 1000); "busy": never sleep (a core
    /// per thread; the lowest delay).
    #[arg(long, value_parser = parse_poll)]
    pub poll_us: Option<Duration>,
    /// Entries of each worker's flow cache, 0 for none (default 16384,
    /// about 5 MiB a worker; used only while table 0 needs more than one
    /// probe, i.e. wildcards of several shapes, and turned off while it
    /// hits less than half the packets).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1 << 24))]
    pub flow_cache: Option<u64>,
    /// Print counters every N seconds while running.
    #[arg(long)]
    pub stats_interval: Option<u64>,
    /// Stop by itself after N seconds (tests, demos).
    #[arg(long)]
    pub duration: Option<f64>,
}

fn parse_poll(s: &str) -> Result<Duration, String> {
    if s == "busy" {
        return Ok(Duration::MAX);
    }
    s.parse::<u64>()
        .map(Duration::from_micros)
        .map_err(|_| format!("{s:?}: expected microseconds or \"busy\""))
}

fn load(args: &RunArgs) -> anyhow::Result<Config> {
    if let Some(path) = &args.config {
        return Config::load(path).map_err(|e| anyhow::anyhow!("{e}"));
    }
    if args.interface.is_empty() {
        anyhow::bail!("give --config FILE or at least one --interface IF");
    }
    let mut cfg = Config::from_flags(FlagArgs {
        interfaces: args.interface.clone(),
        flows_file: args.flows.clone(),
        listen: args.listen.clone(),
        controllers: args.controller.clone(),
        dpid: args.dpid,
        io: match args.io {
            Some(Io::Afxdp) => Backend::AfXdp,
            Some(Io::Afpacket) | None => Backend::AfPacket,
        },
        workers: args.workers.unwrap_or(1),
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(FailModeArg::Standalone) = args.fail_mode {
        for b in &mut cfg.bridges {
            b.fail_mode = datastore::FailMode::Standalone;
        }
    }
    if let Some(Mode::RxWorkerTx) = args.mode {
        cfg.dataplane.mode = ThreadMode::RxWorkerTx;
        cfg.dataplane.rx_threads = 1;
        cfg.dataplane.tx_threads = 1;
    }
    Ok(cfg)
}

/// Runs the switch.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let cfg = load(args)?;
    for w in &cfg.warnings {
        tracing::warn!("{w}");
    }
    let shutdown = Shutdown::install()?;
    let mut opts = RuntimeOptions::default();
    opts.backends.afpacket_mode = args.afpacket_mode.into();
    opts.backends.afpacket_rcvbuf = args.afpacket_rcvbuf.map(|b| b as usize);
    opts.poll_window = args.poll_us;
    opts.flow_cache = args.flow_cache.map(|n| n as usize);
    let rt = Runtime::start(&cfg, &opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    let _agents = start_agents(&cfg, &rt)?;
    eprintln!(
        "fulmar: running bridges {:?}; Ctrl-C stops",
        rt.bridge_names()
    );
    let started = Instant::now();
    let mut last_stats = Instant::now();
    let mut last_tick = Instant::now();
    loop {
        if shutdown.sleep(Duration::from_millis(100)) {
            break;
        }
        if args
            .duration
            .is_some_and(|d| started.elapsed().as_secs_f64() >= d)
        {
            break;
        }
        if last_tick.elapsed() >= Duration::from_secs(1) {
            last_tick = Instant::now();
            rt.tick();
        }
        if let Some(n) = args.stats_interval {
            if last_stats.elapsed() >= Duration::from_secs(n.max(1)) {
                last_stats = Instant::now();
                print!("{}", rt.report());
            }
        }
        while let Some(ev) = rt.try_port_event() {
            eprintln!(
                "fulmar: bridge {} port {} ({}) link {}",
                ev.bridge,
                ev.port,
                ev.interface,
                if ev.up { "up" } else { "down" }
            );
        }
    }
    eprintln!("fulmar: stopping");
    print!("{}", rt.stop());
    Ok(ExitCode::SUCCESS)
}

/// Starts the OpenFlow channels of every bridge that has controllers
/// (listeners and outgoing connections) on a small tokio runtime; `None`
/// when no bridge has any.
fn start_agents(cfg: &Config, rt: &Runtime) -> anyhow::Result<Option<tokio::runtime::Runtime>> {
    if cfg.bridges.iter().all(|b| b.controllers.is_empty()) {
        return Ok(None);
    }
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("fulmar-agent")
        .enable_all()
        .build()?;
    let tls = match &cfg.tls {
        Some(t) => Some(agent::TlsSettings::from_pem_files(
            &t.certificate,
            &t.private_key,
            &t.ca_cert,
        )?),
        None => None,
    };
    for b in &cfg.bridges {
        if b.controllers.is_empty() {
            continue;
        }
        let config = agent::AgentConfig {
            fail_mode: match b.fail_mode {
                datastore::FailMode::Secure => agent::FailMode::Secure,
                datastore::FailMode::Standalone => agent::FailMode::Standalone,
            },
            tls: tls.clone(),
            ..agent::AgentConfig::default()
        };
        let (tx, rx) = tokio::sync::mpsc::channel(config.event_queue);
        let sw = rt
            .switch(&b.name, tx)
            .ok_or_else(|| anyhow::anyhow!("bridge {} is not running", b.name))?;
        let _enter = tokio_rt.enter();
        let agent = agent::Agent::new(std::sync::Arc::new(sw), config);
        agent.spawn_events(rx);
        agent.spawn_housekeeping(Duration::from_secs(1));
        if b.fail_mode == datastore::FailMode::Standalone {
            if let Some(sa) = rt.standalone(&b.name) {
                tokio_rt.spawn(runtime::standalone::follow_controllers(
                    agent.clone(),
                    sa,
                    b.name.clone(),
                ));
            }
        }
        for c in &b.controllers {
            let target: agent::Target = c
                .target
                .to_string()
                .parse()
                .map_err(|e| anyhow::anyhow!("bridge {}: {e}", b.name))?;
            if target.passive {
                let (addr, _task) = tokio_rt
                    .block_on(agent.listen(&target))
                    .map_err(|e| anyhow::anyhow!("bridge {}: listen on {target}: {e}", b.name))?;
                eprintln!(
                    "fulmar: bridge {} listening for controllers on {addr}",
                    b.name
                );
            } else {
                agent.connect(target);
            }
        }
    }
    Ok(Some(tokio_rt))
}
