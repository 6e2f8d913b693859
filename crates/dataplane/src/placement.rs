//! Which CPU each dataplane thread runs on: the CPUs the process may use,
//! their hyperthread siblings, and the three assignment policies Lagopus
//! offered (`--core-assign`), here for RX threads, workers and TX threads.
//!
//! The first CPU the process may use is left to the control side (the
//! main thread, the controller channels, DPDK's main lcore) whenever
//! there is another one; dataplane threads are placed on the rest:
//!
//! - [`CoreAssign::Performance`]: one logical CPU per physical core — a
//!   CPU whose hyperthread sibling is already taken (the control CPU's
//!   included) is skipped — and one thread per CPU. Too few cores is an
//!   error that says how many are needed.
//! - [`CoreAssign::Balance`]: every logical CPU, siblings included, one
//!   thread per CPU while they last, then round robin (threads share).
//! - [`CoreAssign::Minimum`]: two CPUs: RX and TX threads share one, the
//!   workers share the other (run to completion: all workers on one CPU).
//!
//! Threads are taken in the order RX threads, workers, TX threads.

use std::io;

/// An assignment policy (Lagopus's `--core-assign`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoreAssign {
    /// One thread per physical core, hyperthread siblings skipped.
    Performance,
    /// Every logical CPU, siblings included; threads share when there are
    /// more threads than CPUs.
    Balance,
    /// One CPU for the I/O threads, one for the workers.
    Minimum,
}

impl CoreAssign {
    /// The config-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CoreAssign::Performance => "performance",
            CoreAssign::Balance => "balance",
            CoreAssign::Minimum => "minimum",
        }
    }
}

/// The CPUs of each kind of thread, thread `i` on entry `i`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CorePlan {
    /// RX threads (rx-worker-tx only).
    pub rx: Vec<usize>,
    /// Workers.
    pub workers: Vec<usize>,
    /// TX threads (rx-worker-tx only).
    pub tx: Vec<usize>,
}

/// The CPUs the calling thread may run on (at start-up: the process's),
/// ascending; empty if the system does not say.
pub fn allowed_cpus() -> Vec<usize> {
    let Some(set) = thread_cpus() else {
        return Vec::new();
    };
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: i < CPU_SETSIZE; CPU_ISSET reads within the set.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// The calling thread's CPU set.
pub fn thread_cpus() -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data, zero is a valid value; the call
    // writes at most size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some(set)
    }
}

/// Sets the calling thread's CPU set.
pub fn set_thread_cpus(set: &libc::cpu_set_t) -> io::Result<()> {
    // SAFETY: reads size_of::<cpu_set_t>() bytes from a valid set.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// While it lives, the thread that made it runs at nice value `nice`
/// (when that is lower in priority than its own), so that bulk control
/// work (a statistics reply over a million flows) yields the CPU to
/// dataplane threads that share it: the kernel's fair scheduler gives a
/// thread at nice 10 about a tenth of a CPU a thread at nice 0 wants too,
/// and all of it when that thread sleeps. Dropping it (on any thread)
/// restores that thread's nice value. It does nothing where the thread
/// could not be given its value back (neither root nor an `RLIMIT_NICE`
/// that allows it): lowering a nice value needs that privilege, and a
/// thread left niced would slow every later request.
pub struct Yielding {
    /// The thread lowered and its nice value before.
    restore: Option<(libc::id_t, i32)>,
}

impl Yielding {
    /// Lowers the calling thread's priority to nice `nice` (clamped to
    /// 0..=19) until the value is dropped; `nice` 0 does nothing.
    pub fn enter(nice: i32) -> Yielding {
        let nice = nice.clamp(0, 19);
        if nice == 0 {
            return Yielding::none();
        }
        let tid = thread_id();
        let Some(prev) = thread_nice(tid) else {
            return Yielding::none();
        };
        if prev >= nice || !may_lower_nice_to(prev) {
            return Yielding::none();
        }
        // SAFETY: setpriority reads its three integer arguments only.
        let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
        Yielding {
            restore: (r == 0).then_some((tid, prev)),
        }
    }

    fn none() -> Yielding {
        Yielding { restore: None }
    }

    /// Whether the thread's priority was lowered (and will be restored).
    pub fn is_active(&self) -> bool {
        self.restore.is_some()
    }
}

impl Drop for Yielding {
    fn drop(&mut self) {
        if let Some((tid, prev)) = self.restore {
            // SAFETY: as in `enter`. The thread lowered, whichever thread
            // drops this (one of this process: PRIO_PROCESS takes a thread
            // id on Linux; an id that has ended fails harmlessly).
            unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, prev) };
        }
    }
}

/// The calling thread's kernel id (what `PRIO_PROCESS` takes for one
/// thread on Linux).
fn thread_id() -> libc::id_t {
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    libc::id_t::try_from(tid).unwrap_or(0)
}

/// Thread `tid`'s nice value; `None` when the kernel does not say.
fn thread_nice(tid: libc::id_t) -> Option<i32> {
    // getpriority may return -1 as a value: errno tells an error apart.
    // SAFETY: errno is thread-local; the calls read integers only.
    unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid);
        (*libc::__errno_location() == 0).then_some(n)
    }
}

/// Whether the calling thread may set its nice value back down to `nice`:
/// root may, others as far as `RLIMIT_NICE` allows (20 − limit).
fn may_lower_nice_to(nice: i32) -> bool {
    // SAFETY: geteuid has no arguments.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut lim) } != 0 {
        return false;
    }
    i64::from(nice) >= 20 - i64::try_from(lim.rlim_cur).unwrap_or(i64::MAX).min(40)
}

/// Parses a kernel CPU list (`0-3,8,10-11`).
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// The hyperthread siblings of `cpu` (itself included), from sysfs; just
/// `cpu` when sysfs does not say.
pub fn siblings(cpu: usize) -> Vec<usize> {
    std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
    ))
    .ok()
    .and_then(|s| parse_cpu_list(&s))
    .filter(|l| l.contains(&cpu))
    .unwrap_or_else(|| vec![cpu])
}

/// Places `n_rx` RX threads, `n_workers` workers and `n_tx` TX threads
/// (zero RX/TX threads: run to completion) on `cpus` by `policy`;
/// `siblings_of` gives a CPU's hyperthread siblings.
pub fn assign(
    policy: CoreAssign,
    n_rx: usize,
    n_workers: usize,
    n_tx: usize,
    cpus: &[usize],
    siblings_of: &dyn Fn(usize) -> Vec<usize>,
) -> Result<CorePlan, String> {
    if cpus.is_empty() {
        return Err("no CPU is available to place threads on".into());
    }
    // The first CPU stays with the control side when there is another.
    let (control, usable) = match cpus {
        [only] => (None, vec![*only]),
        [first, rest @ ..] => (Some(*first), rest.to_vec()),
        [] => return Err("no CPU".into()),
    };
    let total = n_rx + n_workers + n_tx;
    let spread =
        |list: &[usize]| -> Vec<usize> { (0..total).map(|i| list[i % list.len()]).collect() };
    let flat = match policy {
        CoreAssign::Performance => {
            let mut taken: Vec<usize> = control.map(siblings_of).unwrap_or_default();
            let mut list = Vec::new();
            for &c in &usable {
                if taken.contains(&c) {
                    continue;
                }
                list.push(c);
                taken.extend(siblings_of(c));
            }
            if list.len() < total {
                return Err(format!(
                    "core_assign = \"performance\" needs {total} physical cores besides the control CPU ({} RX, {} workers, {} TX), and only {} are available ({:?}); use \"balance\" or fewer threads",
                    n_rx,
                    n_workers,
                    n_tx,
                    list.len(),
                    list
                ));
            }
            spread(&list)
        }
        CoreAssign::Balance => spread(&usable),
        CoreAssign::Minimum => {
            let io = usable[0];
            let work = *usable.get(1).unwrap_or(&usable[0]);
            let (io, work) = if n_rx + n_tx == 0 {
                (io, io)
            } else {
                (io, work)
            };
            let mut v = vec![io; n_rx];
            v.extend(std::iter::repeat_n(work, n_workers));
            v.extend(std::iter::repeat_n(io, n_tx));
            v
        }
    };
    Ok(CorePlan {
        rx: flat[..n_rx].to_vec(),
        workers: flat[n_rx..n_rx + n_workers].to_vec(),
        tx: flat[n_rx + n_workers..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a thread of its own (nice values are per thread): the value is
    /// lowered while a `Yielding` lives and given back when it drops; a
    /// thread already at or past the value, and nice 0, are left alone.
    #[test]
    fn yielding_lowers_the_thread_priority_and_gives_it_back() {
        std::thread::spawn(|| {
            let tid = thread_id();
            let before = thread_nice(tid).unwrap();
            {
                let y = Yielding::enter(10);
                if before < 10 && may_lower_nice_to(before) {
                    assert!(y.is_active());
                    assert_eq!(thread_nice(tid), Some(10));
                    // Nested, at a value the thread is already past: no change.
                    let inner = Yielding::enter(5);
                    assert!(!inner.is_active());
                    drop(inner);
                    assert_eq!(thread_nice(tid), Some(10));
                } else {
                    // Could not be given back: never lowered.
                    assert!(!y.is_active());
                    assert_eq!(thread_nice(tid), Some(before));
                }
            }
            assert_eq!(thread_nice(tid), Some(before));
            assert!(!Yielding::enter(0).is_active());
            assert_eq!(thread_nice(tid), Some(before));
            // Out of range clamps.
            drop(Yielding::enter(99));
            assert_eq!(thread_nice(tid), Some(before));
            // Dropped on another thread: this one gets its value back.
            let y = Yielding::enter(12);
            let active = y.is_active();
            std::thread::spawn(move || drop(y)).join().unwrap();
            if active {
                assert_eq!(thread_nice(tid), Some(before));
            }
        })
        .join()
        .unwrap();
    }

    /// Eight CPUs, siblings i and i+4.
    fn ht(c: usize) -> Vec<usize> {
        vec![c % 4, c % 4 + 4]
    }

    #[test]
    fn performance_skips_siblings_and_the_control_cpu() {
        let cpus: Vec<usize> = (0..8).collect();
        let p = assign(CoreAssign::Performance, 1, 1, 1, &cpus, &ht).unwrap();
        assert_eq!((p.rx, p.workers, p.tx), (vec![1], vec![2], vec![3]));
        let err = assign(CoreAssign::Performance, 1, 2, 1, &cpus, &ht).unwrap_err();
        assert!(
            err.contains("needs 4 physical cores") && err.contains("only 3"),
            "{err}"
        );
        let rtc = assign(CoreAssign::Performance, 0, 3, 0, &cpus, &ht).unwrap();
        assert_eq!(rtc.workers, vec![1, 2, 3]);
        assert!(rtc.rx.is_empty() && rtc.tx.is_empty());
    }

    #[test]
    fn balance_uses_siblings_then_shares() {
        let cpus: Vec<usize> = (0..8).collect();
        let p = assign(CoreAssign::Balance, 2, 4, 2, &cpus, &ht).unwrap();
        assert_eq!(p.rx, vec![1, 2]);
        assert_eq!(p.workers, vec![3, 4, 5, 6]);
        assert_eq!(p.tx, vec![7, 1]);
        let two = assign(CoreAssign::Balance, 0, 2, 0, &[0, 1], &|c| vec![c]).unwrap();
        assert_eq!(two.workers, vec![1, 1]);
        let one = assign(CoreAssign::Balance, 0, 2, 0, &[5], &|c| vec![c]).unwrap();
        assert_eq!(one.workers, vec![5, 5]);
    }

    #[test]
    fn minimum_uses_one_io_and_one_worker_cpu() {
        let cpus: Vec<usize> = (0..8).collect();
        let p = assign(CoreAssign::Minimum, 2, 3, 1, &cpus, &ht).unwrap();
        assert_eq!(
            (p.rx, p.workers, p.tx),
            (vec![1, 1], vec![2, 2, 2], vec![1])
        );
        let rtc = assign(CoreAssign::Minimum, 0, 2, 0, &cpus, &ht).unwrap();
        assert_eq!(rtc.workers, vec![1, 1]);
        assert!(assign(CoreAssign::Minimum, 0, 1, 0, &[], &ht).is_err());
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-2,5,7-8\n"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse_cpu_list("3"), Some(vec![3]));
        assert_eq!(parse_cpu_list("2-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert!(!allowed_cpus().is_empty());
        let c = allowed_cpus()[0];
        assert!(siblings(c).contains(&c));
    }
}
