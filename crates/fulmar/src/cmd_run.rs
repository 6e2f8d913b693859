//! `fulmar run`: start the switch from a config file or from flags, run
//! until SIGINT/SIGTERM (or `--duration`, or `fulmar ctl exit`), then stop
//! cleanly and print the final port, drop and flow counters.
//!
//! While it runs, the switch is managed through its control socket
//! (`--ctl`, for `fulmar ctl` and `ovs-appctl`), each bridge's OpenFlow
//! management socket (`--mgmt-dir`, for `ovs-ofctl ... unix:DIR/BR.mgmt`)
//! and, when asked, Prometheus metrics (`--metrics`), OVSDB (`--ovsdb`),
//! SNMP (`--agentx`) and OF-CONFIG (`--netconf`). Configuration
//! changes are persisted to the `--config` file (or `--state FILE`), and
//! the tables are saved at a graceful stop and restored at the next start
//! (`--saved-tables`, [`runtime::saved`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, ValueEnum};
use datastore::{Backend, Config, FlagArgs, ThreadMode, COMMAND_LINE};
use runtime::daemon::{Daemon, DaemonOptions};
use runtime::signals::Shutdown;
use runtime::{Prebuild, Prebuilt};

/// Packet I/O backend for `--interface` ports.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Io {
    /// AF_PACKET (a TPACKET_V2 ring, or a packet socket: --afpacket-mode); works on any interface.
    Afpacket,
    /// AF_XDP (one queue per interface).
    Afxdp,
}

/// How afpacket ports receive.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AfMode {
    /// A TPACKET_V2 ring (default): no copy and no system call per burst;
    /// at saturation stale frames are dropped in user space and pings
    /// spared.
    Ring,
    /// A plain packet socket (`recvmmsg`): the kernel tail-drops beyond
    /// the bounded receive buffer.
    Socket,
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
    #[arg(long, short = 'c', conflicts_with_all = ["interface", "flows", "listen", "controller", "dpid", "io", "workers", "mode", "fail_mode", "local_port", "max_queue_delay_us"])]
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
    /// Give the bridge its local port (OFPP_LOCAL): a TAP interface named
    /// br0, as `add-br` makes (in a file: `local_port = true`).
    #[arg(long, requires = "interface")]
    pub local_port: bool,
    /// Packet I/O backend.
    #[arg(long, value_enum)]
    pub io: Option<Io>,
    /// Worker threads.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Thread arrangement (default run-to-completion).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Longest a packet may wait in the queues between a port and a
    /// worker, in µs at the rate they drain (default 100); 0: deep,
    /// byte-sized queues (`[dataplane] max_queue_delay_us` in a file).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub max_queue_delay_us: Option<u32>,
    /// How afpacket ports receive.
    #[arg(long, value_enum, default_value = "ring")]
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
    /// How the periodic report is printed.
    #[arg(long, value_enum, default_value = "text")]
    pub stats_format: StatsFormat,
    /// Flows the periodic report lists (the busiest first).
    #[arg(long, default_value_t = 10)]
    pub stats_top: usize,
    /// Stop by itself after N seconds (tests, demos).
    #[arg(long)]
    pub duration: Option<f64>,
    /// The control socket (`fulmar ctl`, `ovs-appctl -t PATH`); "none":
    /// no socket.
    #[arg(long, default_value = DEFAULT_CTL)]
    pub ctl: PathBuf,
    /// A group (name or number) whose members may use the control and
    /// management sockets too (default: the owner only).
    #[arg(long)]
    pub ctl_group: Option<String>,
    /// Directory of each bridge's OpenFlow management socket
    /// (`DIR/BRIDGE.mgmt`, for `ovs-ofctl -O OpenFlow13 ... unix:DIR/BRIDGE.mgmt`);
    /// "none": no such sockets.
    #[arg(long, default_value = DEFAULT_MGMT_DIR)]
    pub mgmt_dir: PathBuf,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (PORT alone:
    /// on 127.0.0.1).
    #[arg(long)]
    pub metrics: Option<String>,
    /// Where configuration changes are written (default: the --config
    /// file; with flags and no --state, changes are not persisted).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Where each bridge's flows, groups and meters are saved at a
    /// graceful stop and restored from at the next start, before the ports
    /// forward (default: STATE.saved beside the --state or --config file;
    /// "none": neither saved nor restored).
    #[arg(long, value_name = "DIR")]
    pub saved_tables: Option<PathBuf>,
    /// Microseconds a controller channel keeps polling its socket after a
    /// reply, when the controller answered the previous reply that fast
    /// (a controller that sends a BARRIER after every flow-mod, as
    /// ovs-ofctl does, then waits less); 0: never poll.
    #[arg(long, value_name = "US", default_value_t = 100)]
    pub controller_busy_poll_us: u64,
    /// Packet-ins each bridge sends its controllers per second at most (a
    /// token bucket); what is over it is dropped and counted as
    /// packet_in_rate_limited; 0: no limit.
    #[arg(long, value_name = "PPS", default_value_t = agent::PacketInConfig::default().rate_pps)]
    pub packet_in_rate: u32,
    /// The most packet-ins the bucket admits at once, after a quiet spell.
    #[arg(long, value_name = "N", default_value_t = agent::PacketInConfig::default().burst,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub packet_in_burst: u32,
    /// Validate the configuration (and its flow, group and meter files)
    /// and exit: 0 when valid, 2 with every error otherwise.
    #[arg(long)]
    pub check: bool,
    /// Log filter (error, warn, info, debug, trace, or per target as
    /// RUST_LOG takes it); changeable at run time with `fulmar ctl log-level`.
    #[arg(long)]
    pub log_level: Option<String>,
    /// OVSDB: configuration from an ovsdb-server, state written back.
    #[command(flatten)]
    pub ovsdb: ovsdb::Args,
    /// SNMP: an AgentX subagent.
    #[command(flatten)]
    pub snmp: snmp::Args,
    /// OF-CONFIG: a NETCONF server over SSH.
    #[command(flatten)]
    pub ofconfig: ofconfig::Args,
}

/// The default control socket.
pub const DEFAULT_CTL: &str = "/run/fulmar/fulmar.ctl";
/// The default directory of the bridges' management sockets.
pub const DEFAULT_MGMT_DIR: &str = "/run/fulmar";

/// Periodic report format.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum StatsFormat {
    /// Lines for people.
    Text,
    /// One JSON object per report (the bridges' reports).
    Json,
}

fn parse_poll(s: &str) -> Result<Duration, String> {
    if s == "busy" {
        return Ok(Duration::MAX);
    }
    s.parse::<u64>()
        .map(Duration::from_micros)
        .map_err(|_| format!("{s:?}: expected microseconds or \"busy\""))
}

/// The configuration, and (when `prebuild` is given) the bridges' tables
/// built from their flows files as the check read them.
fn load(args: &RunArgs, prebuild: Option<Prebuild>) -> anyhow::Result<(Config, Prebuilt)> {
    let Some(mut pre) = prebuild else {
        return Ok((load_with(args, None)?, Prebuilt::default()));
    };
    let cfg = load_with(args, Some(&mut pre));
    let built = pre.finish();
    Ok((cfg?, built))
}

/// The configuration from `--config` or from the flags, its flows files'
/// flows handed to `handover` as they are checked.
fn load_with(
    args: &RunArgs,
    handover: Option<&mut dyn datastore::FlowHandover>,
) -> anyhow::Result<Config> {
    if let Some(path) = &args.config {
        return match handover {
            Some(h) => Config::load_handing_over(path, h),
            None => Config::load(path),
        }
        .map_err(|e| anyhow::anyhow!("{e}"));
    }
    if args.interface.is_empty() {
        // A switch configured entirely through a management protocol
        // starts with no bridges, as ovs-vswitchd does on an empty
        // database.
        if args.ovsdb.enabled() || args.ofconfig.enabled() {
            return Config::from_str("", COMMAND_LINE).map_err(|e| anyhow::anyhow!("{e}"));
        }
        anyhow::bail!("give --config FILE, at least one --interface IF, --ovsdb or --netconf");
    }
    let flags = FlagArgs {
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
    };
    let mut cfg = match handover {
        Some(h) => Config::from_flags_handing_over(flags, h),
        None => Config::from_flags(flags),
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(FailModeArg::Standalone) = args.fail_mode {
        for b in &mut cfg.bridges {
            b.fail_mode = datastore::FailMode::Standalone;
        }
    }
    if args.local_port {
        for b in &mut cfg.bridges {
            if args.interface.contains(&b.name) {
                anyhow::bail!(
                    "--local-port makes the TAP interface {0}: -i {0} cannot be a port too",
                    b.name
                );
            }
            b.local_port = true;
        }
    }
    if let Some(Mode::RxWorkerTx) = args.mode {
        cfg.dataplane.mode = ThreadMode::RxWorkerTx;
        cfg.dataplane.rx_threads = 1;
        cfg.dataplane.tx_threads = 1;
    }
    if let Some(us) = args.max_queue_delay_us {
        cfg.dataplane.max_queue_delay_us = us;
    }
    Ok(cfg)
}

fn none(p: &Path) -> bool {
    p.as_os_str() == "none"
}

/// A group name or number → gid (from /etc/group).
fn group_id(g: &str) -> anyhow::Result<u32> {
    if let Ok(n) = g.parse() {
        return Ok(n);
    }
    let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
    groups
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let gid = f.nth(1)?.parse().ok()?;
            Some((name.to_string(), gid))
        })
        .find(|(n, _)| n == g)
        .map(|(_, gid)| gid)
        .ok_or_else(|| anyhow::anyhow!("--ctl-group {g:?}: no such group"))
}

/// Tells systemd (Type=notify) that the switch is up, when started by it.
fn notify_ready() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let r = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|a| sock.send_to_addr(b"READY=1", &a))
        }
        None => sock.send_to(b"READY=1", &path),
    };
    if let Err(e) = r {
        tracing::warn!("sd_notify: {e}");
    }
}

/// Runs the switch.
pub fn run(args: &RunArgs, logs: crate::logging::Logs) -> anyhow::Result<ExitCode> {
    if let Some(l) = &args.log_level {
        logs.set(l).map_err(anyhow::Error::msg)?;
    }
    let state_file = args.state.clone().or_else(|| args.config.clone());
    let saved_tables = match &args.saved_tables {
        Some(d) if none(d) => None,
        Some(d) => Some(d.clone()),
        None => state_file.as_ref().map(|f| {
            let mut d = f.as_os_str().to_owned();
            d.push(".saved");
            PathBuf::from(d)
        }),
    };
    // A start builds the tables as the check reads the flows files.
    let prebuild = (!args.check).then(|| Prebuild::new(saved_tables.clone()));
    let (cfg, prebuilt) = match load(args, prebuild) {
        Ok(c) => c,
        Err(e) if args.check => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e),
    };
    for w in &cfg.warnings {
        tracing::warn!("{w}");
    }
    if args.check {
        let flows: usize = cfg
            .bridges
            .iter()
            .map(|b| b.flows.len() + b.flows_file.as_ref().map_or(0, |f| f.flows))
            .sum();
        println!(
            "configuration valid: {} bridge(s), {} port(s), {flows} static flow(s), {} warning(s)",
            cfg.bridges.len(),
            cfg.bridges.iter().map(|b| b.ports.len()).sum::<usize>(),
            cfg.warnings.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let shutdown = Shutdown::install()?;
    let mut opts = DaemonOptions::default();
    opts.runtime.backends.afpacket_mode = args.afpacket_mode.into();
    opts.runtime.backends.afpacket_rcvbuf = args.afpacket_rcvbuf.map(|b| b as usize);
    opts.runtime.poll_window = args.poll_us;
    opts.runtime.flow_cache = args.flow_cache.map(|n| n as usize);
    let gid = args.ctl_group.as_deref().map(group_id).transpose()?;
    opts.controllers.tls = match &cfg.tls {
        Some(t) => Some(agent::TlsSettings::from_pem_files(
            &t.certificate,
            &t.private_key,
            &t.ca_cert,
        )?),
        None => None,
    };
    opts.controllers.mgmt_dir = (!none(&args.mgmt_dir)).then(|| args.mgmt_dir.clone());
    opts.controllers.mgmt_perms = gid.map(agent::UnixPerms::group).unwrap_or_default();
    opts.controllers.busy_poll = Some(Duration::from_micros(args.controller_busy_poll_us));
    opts.controllers.packet_in = agent::PacketInConfig {
        rate_pps: args.packet_in_rate,
        burst: args.packet_in_burst,
        ..agent::PacketInConfig::default()
    };
    opts.state_file = state_file;
    opts.runtime.saved_tables = saved_tables;
    opts.prebuilt = prebuilt;
    let daemon = Arc::new(Daemon::start(cfg, opts).map_err(|e| anyhow::anyhow!("{e}"))?);
    let handle = daemon.controllers().handle();
    let mut tasks = Vec::new();
    let _ctl_file = if none(&args.ctl) {
        None
    } else {
        let perms = mgmt::ctl::CtlPerms { group: gid };
        let mut path = args.ctl.clone();
        let listener = {
            let _enter = handle.enter();
            match mgmt::ctl::bind(&path, &perms) {
                // Another switch answers at the default path: this one
                // takes a path of its own (as ovs-vswitchd's carry a pid).
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && path.as_os_str() == DEFAULT_CTL =>
                {
                    path = Path::new(DEFAULT_MGMT_DIR)
                        .join(format!("fulmar.{}.ctl", std::process::id()));
                    tracing::warn!("{DEFAULT_CTL} is in use by another switch: {e}");
                    mgmt::ctl::bind(&path, &perms)
                }
                r => r,
            }
            .map_err(|e| anyhow::anyhow!("control socket {}: {e}", path.display()))?
        };
        let stop = shutdown.clone();
        let log_filter = logs.clone();
        let ctl = mgmt::commands::Ctl::new(
            daemon.clone(),
            mgmt::commands::Hooks {
                log_level: Box::new(move |f| logs.set(f)),
                log_filter: Box::new(move || log_filter.current()),
                exit: Box::new(move || stop.request()),
                version: crate::version_line(),
            },
        );
        tasks.push(handle.spawn(mgmt::ctl::serve(listener, Arc::new(ctl))));
        eprintln!("fulmar: control socket {}", path.display());
        Some(mgmt::ctl::SocketFile(path))
    };
    if let Some(m) = &args.metrics {
        let addr = mgmt::metrics::parse_listen_addr(m).map_err(anyhow::Error::msg)?;
        let listener = handle
            .block_on(tokio::net::TcpListener::bind(addr))
            .map_err(|e| anyhow::anyhow!("--metrics {m}: {e}"))?;
        let bound = listener.local_addr()?;
        let d = daemon.clone();
        let started = SystemTime::now();
        tasks.push(handle.spawn(mgmt::metrics::serve(
            listener,
            Arc::new(move || mgmt::scrape::scrape(&d, started)),
        )));
        eprintln!("fulmar: metrics on http://{bound}/metrics");
    }
    let mut services = Vec::new();
    services.extend(
        ovsdb::start(daemon.clone(), &handle, &args.ovsdb)
            .map_err(anyhow::Error::msg)?
            .map(Service::Ovsdb),
    );
    services.extend(
        snmp::start(daemon.clone(), &handle, &args.snmp)
            .map_err(anyhow::Error::msg)?
            .map(Service::Snmp),
    );
    services.extend(
        ofconfig::start(daemon.clone(), &handle, &args.ofconfig)
            .map_err(anyhow::Error::msg)?
            .map(Service::Ofconfig),
    );
    eprintln!(
        "fulmar: running bridges {:?}; Ctrl-C stops",
        daemon.runtime().bridge_names()
    );
    notify_ready();
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
        let rt = daemon.runtime();
        if last_tick.elapsed() >= Duration::from_secs(1) {
            last_tick = Instant::now();
            rt.tick();
        }
        if let Some(n) = args.stats_interval {
            if last_stats.elapsed() >= Duration::from_secs(n.max(1)) {
                last_stats = Instant::now();
                print_report(rt, args);
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
    for s in services {
        s.stop();
    }
    for t in tasks {
        t.abort();
    }
    print!("{}", daemon.stop());
    Ok(ExitCode::SUCCESS)
}

/// A management module started beside the control socket.
enum Service {
    Ovsdb(ovsdb::Service),
    Snmp(snmp::Service),
    Ofconfig(ofconfig::Service),
}

impl Service {
    fn stop(self) {
        match self {
            Service::Ovsdb(s) => s.stop(),
            Service::Snmp(s) => s.stop(),
            Service::Ofconfig(s) => s.stop(),
        }
    }
}

fn print_report(rt: &runtime::Runtime, args: &RunArgs) {
    match args.stats_format {
        StatsFormat::Text => print!("{}", rt.report(args.stats_top)),
        StatsFormat::Json => {
            let reports: Vec<_> = rt
                .bridge_names()
                .iter()
                .filter_map(|b| rt.bridge_report(b, args.stats_top, false))
                .collect();
            if let Ok(s) = serde_json::to_string(&reports) {
                println!("{s}");
            }
        }
    }
}
