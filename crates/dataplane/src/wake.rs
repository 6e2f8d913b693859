//! Sleeping and waking dataplane threads, and pinning them to cores.
//!
//! An idle dataplane thread must not burn a core, yet must wake within
//! microseconds when a packet arrives. Two kinds of input exist:
//!
//! - **ports** with a file descriptor ([`crate::PortBackend::rx_fd`]): the
//!   thread sleeps in `poll(2)` on those descriptors, and the kernel wakes it
//!   when a frame is ready;
//! - **rings** from another thread: the thread sleeps on its own
//!   [`Doorbell`] (an `eventfd`), which every producer feeding it rings
//!   after publishing a burst — but only when the consumer said it is about
//!   to sleep, so a busy ring costs one atomic load per burst, not a
//!   system call.
//!
//! The doorbell handshake avoids lost wake-ups: the consumer sets
//! `sleeping`, issues a full fence, and looks at its inputs once more
//! before it calls `poll`; the producer publishes its burst, issues a full
//! fence and then reads `sleeping`. Either the consumer sees the burst or
//! the producer sees the flag (the two fences order the store before the
//! load on both sides). A stale ring (the flag was already cleared) only
//! costs a spurious wake-up. Every sleep also has a timeout, so a thread
//! checks its stop flag and table version at least that often.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::time::Duration;

/// A wake-up channel for one sleeping consumer thread.
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
    sleeping: AtomicBool,
}

impl Doorbell {
    /// A new doorbell (an `eventfd` in non-blocking mode).
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: eventfd takes no pointers; a negative return is an error.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Doorbell {
            fd,
            sleeping: AtomicBool::new(false),
        })
    }

    /// The descriptor to include in `poll`.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Producer side: call after publishing; wakes the consumer if it
    /// announced it is going to sleep.
    pub fn ring_if_sleeping(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            self.ring();
        }
    }

    /// Wakes the consumer unconditionally (stop, new table version).
    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd. A full
        // counter (EAGAIN) means a wake-up is already pending, which is fine.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }

    /// Consumer side, step 1: announce sleep. Then re-check the inputs; if
    /// something arrived call [`Doorbell::cancel`], else [`wait`].
    pub fn prepare(&self) {
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Consumer side: no sleep after all.
    pub fn cancel(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Consumer side: clears the pending count after waking.
    fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our own eventfd;
        // EAGAIN (nothing pending) is harmless.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut v as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

/// Sleeps until one of `fds` is readable, `bell` rings, or `timeout`
/// passes. Call [`Doorbell::prepare`] and re-check the inputs first.
/// Returns whether one of `fds` (not the bell) was readable.
pub fn wait(bell: &Doorbell, fds: &[RawFd], timeout: Duration) -> bool {
    let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(fds.len() + 1);
    pfds.push(libc::pollfd {
        fd: bell.fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    pfds.extend(fds.iter().map(|&fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }));
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `pfds` is a live array of `pfds.len()` pollfd structs and
    // `ts` a live timespec; no signal mask is passed.
    unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    bell.sleeping.store(false, Ordering::Relaxed);
    if pfds.first().is_some_and(|p| p.revents != 0) {
        bell.drain();
    }
    pfds.iter().skip(1).any(|p| p.revents != 0)
}

/// Pins the calling thread to one CPU core.
pub fn pin_to_core(core: usize) -> io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("core {core} is beyond CPU_SETSIZE"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write within it
    // (core < CPU_SETSIZE checked above); sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sets the calling thread's timer slack (how late the kernel may fire its
/// sleep timers to batch wake-ups; 50 µs by default), so short sleeps end
/// on time.
pub fn set_timer_slack(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn doorbell_wakes_a_sleeper_quickly() {
        let bell = Arc::new(Doorbell::new().unwrap());
        let b2 = bell.clone();
        let (prepared, is_prepared) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            b2.prepare();
            prepared.send(()).unwrap();
            wait(&b2, &[], Duration::from_secs(5));
            start.elapsed()
        });
        // Rung only once the sleeper said it sleeps: on a loaded machine
        // the thread may not even have started after a fixed 20 ms, and
        // `ring_if_sleeping` would then ring nobody (a 5 s wait).
        is_prepared.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        bell.ring_if_sleeping();
        let slept = t.join().unwrap();
        assert!(slept < Duration::from_secs(2), "slept {slept:?}");
    }

    #[test]
    fn wait_times_out_without_a_ring_and_not_sleeping_means_no_ring() {
        let bell = Doorbell::new().unwrap();
        // Not sleeping: ring_if_sleeping does nothing, so the wait times out.
        bell.ring_if_sleeping();
        let start = Instant::now();
        bell.prepare();
        wait(&bell, &[], Duration::from_millis(30));
        assert!(start.elapsed() >= Duration::from_millis(25));
        // A pending ring ends the wait at once.
        bell.ring();
        let start = Instant::now();
        wait(&bell, &[], Duration::from_secs(5));
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn pinning_to_core_zero_works_and_huge_core_is_refused() {
        std::thread::spawn(|| {
            pin_to_core(0).unwrap();
            assert!(pin_to_core(1 << 20).is_err());
        })
        .join()
        .unwrap();
    }
}
