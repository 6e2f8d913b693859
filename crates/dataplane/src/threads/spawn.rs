//! Spawning threads, idling, and reading ports (with their time bounds).

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::capture::Tap;
use crate::delay::{bound_packets, QueueDelay, RxBound};
use crate::flush::{Backoff, IdleStep};
use crate::placement;
use crate::port::Burst;
use crate::wake::{self, Doorbell};

use super::counters::{bump, PortDropCells, ThreadCells};
use super::tx::Published;
use super::types::ThreadsConfig;

pub(super) fn spawn(
    name: String,
    core: Option<usize>,
    body: impl FnOnce() + Send + 'static,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(move || {
        if let Some(c) = core {
            // Pinning is best effort: a refused core leaves the thread free.
            let _ = wake::pin_to_core(c);
        }
        wake::set_timer_slack(1000);
        body()
    })
}

pub(super) fn core_of(cores: &Option<Vec<usize>>, i: usize) -> Option<usize> {
    cores
        .as_ref()
        .filter(|c| !c.is_empty())
        .and_then(|c| c.get(i % c.len()).copied())
}

/// Whether a busy-polling thread that may run on the CPUs `own` should
/// yield its CPU after every round that found work: when more busy-polling
/// threads may run on those CPUs — itself, and each of `others` whose CPU
/// set meets `own` — than there are CPUs. Such threads can only take turns;
/// without a yield a busy one keeps its CPU for a whole scheduler slice
/// (milliseconds) while the packets it handed on wait for the next stage.
/// An empty `own` (the system did not say) never yields.
pub(super) fn crowded(own: &[usize], others: &[Vec<usize>]) -> bool {
    let sharing = others
        .iter()
        .filter(|o| o.iter().any(|c| own.contains(c)))
        .count();
    !own.is_empty() && 1 + sharing > own.len()
}

/// The CPUs each of a set of threads may run on, as placed: its core when
/// it has one, else the CPUs the spawning thread may use (which it
/// inherits). Thread `i`: entry `i`.
pub(super) fn placed_cpus(cores: &[Option<usize>]) -> Vec<Vec<usize>> {
    let inherited = placement::allowed_cpus();
    cores
        .iter()
        .map(|c| c.map_or_else(|| inherited.clone(), |c| vec![c]))
        .collect()
}

/// One split-mode thread's view of where its fellow busy-polling threads
/// run, for deciding once at start whether it yields after busy rounds.
pub(super) struct Crowd {
    /// Every thread's CPUs as placed ([`placed_cpus`]).
    pub(super) placed: Arc<Vec<Vec<usize>>>,
    /// This thread's entry.
    pub(super) me: usize,
}

impl Crowd {
    /// Run on the thread itself, after pinning: its CPUs are the ones the
    /// kernel reports now (a refused pin leaves it on the inherited set),
    /// the others' as placed. Records the answer in `cells` for
    /// [`ThreadStats::yields`](super::types::ThreadStats::yields).
    pub(super) fn decide(&self, cells: &ThreadCells) -> bool {
        let own = placement::allowed_cpus();
        let others: Vec<Vec<usize>> = self
            .placed
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.me)
            .map(|(_, s)| s.clone())
            .collect();
        let yields = crowded(&own, &others);
        cells
            .yields
            .store(yields, std::sync::atomic::Ordering::Relaxed);
        yields
    }
}

/// Sleeps or spins one idle step. Returns whether it slept and one of
/// `fds` woke it (input has arrived on a port).
/// `before_sleep` runs when it is about to sleep.
#[allow(clippy::too_many_arguments)]
pub(super) fn idle(
    backoff: &mut Backoff,
    holding: bool,
    bell: &Doorbell,
    fds: &[RawFd],
    timeout: Duration,
    inputs_waiting: impl FnOnce() -> bool,
    before_sleep: impl FnOnce(),
) -> bool {
    match backoff.step(holding) {
        IdleStep::Spin => std::hint::spin_loop(),
        IdleStep::Yield => std::thread::yield_now(),
        IdleStep::Sleep => {
            bell.prepare();
            if inputs_waiting() {
                bell.cancel();
                return false;
            }
            before_sleep();
            return wake::wait(bell, fds, timeout);
        }
    }
    false
}

/// A port read by a thread.
pub(super) struct RxPort {
    pub(super) number: u32,
    pub(super) input: Published,
    /// No descriptor to sleep on.
    pub(super) fdless: bool,
    pub(super) drops: Arc<PortDropCells>,
    /// A capture of what the port receives, if one runs.
    pub(super) capture: Option<Tap>,
    /// Packets read since the last bound was set.
    pub(super) window: u64,
}

pub(super) fn read_port(p: &mut RxPort, burst: &mut Burst) -> usize {
    burst.clear();
    let n = match p.input.handle.with(|b| b.rx_burst(burst)) {
        Ok(n) => n,
        Err(_) => {
            bump(&p.drops.rx_error, 1);
            0
        }
    };
    for pkt in burst.pkts_mut() {
        pkt.meta.in_port = p.number;
    }
    p.window += n as u64;
    // Without a capture: this one branch per burst.
    if let Some(tap) = &mut p.capture {
        if n > 0 && !tap.received(burst.pkts()) {
            p.capture = None;
        }
    }
    n
}

/// Hands each port its receive queue's bound: `delay` at `rate_pps` (the
/// reading thread's drain rate), shared by the ports that had input since
/// the last call (a port without input gets a whole share, so a burst on
/// a quiet port is not cut short).
pub(super) fn bound_ports(ports: &mut [RxPort], delay: QueueDelay, rate_pps: u64) {
    let Some(delay) = delay.limit() else {
        return;
    };
    let active = ports.iter().filter(|p| p.window > 0).count().max(1);
    for p in ports.iter_mut() {
        let share = if p.window > 0 { active } else { 1 };
        p.window = 0;
        let bound = RxBound {
            packets: bound_packets(delay, rate_pps, share, usize::MAX),
            delay,
        };
        p.input.handle.with(|b| b.set_rx_bound(Some(bound)));
    }
}

/// What a thread that reads ports sleeps on when idle: their descriptors
/// (sorted), and how long it may sleep — short when a port has no
/// descriptor to wake it.
#[derive(Default)]
pub(super) struct IdlePlan {
    pub(super) fds: Vec<RawFd>,
    pub(super) timeout: Duration,
}

impl IdlePlan {
    pub(super) fn of(ports: &mut [RxPort], cfg: &ThreadsConfig) -> IdlePlan {
        let mut fds: Vec<RawFd> = ports
            .iter_mut()
            .filter_map(|p| p.input.handle.fd())
            .collect();
        fds.sort_unstable();
        let timeout = if ports.iter().any(|p| p.fdless) {
            cfg.fdless_sleep
        } else {
            cfg.max_sleep
        };
        IdlePlan { fds, timeout }
    }
}
