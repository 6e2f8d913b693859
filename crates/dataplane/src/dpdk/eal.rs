//! DPDK's Environment Abstraction Layer: started once per process, with
//! the arguments the configuration gives, and the registration of
//! fulmar's own threads as lcores.
//!
//! # Start-up
//!
//! `rte_eal_init` can run once in a process; a second call fails. [`init`]
//! therefore remembers the arguments it started with: asking again with
//! the same arguments is fine (every port of a configuration, every test
//! in one binary), other arguments are refused with a message naming
//! both. A failed start is final too, and reported again the same way.
//!
//! `rte_eal_init` pins the calling thread to the main lcore's CPU, and a
//! thread inherits its creator's CPU set. [`init`] puts the caller's
//! CPU set back once the EAL runs, so the control threads made later are
//! not all squeezed onto that one CPU.
//!
//! Without `-l`, `-c` or `--lcores` in the arguments, [`init`] adds
//! `-l N` with the first CPU the process may use: fulmar places its own
//! threads, so the EAL needs only its main lcore (a longer list would
//! make it start an idle thread per lcore).
//!
//! # Threads as lcores
//!
//! A thread the EAL did not start is not an lcore (`rte_lcore_id()` is
//! `LCORE_ID_ANY`), and mempools then skip their per-lcore cache: every
//! mbuf allocation and free goes to the shared ring. [`ensure_lcore`]
//! registers the calling thread with `rte_thread_register` the first time
//! it touches a DPDK port (one thread-local check per burst after that)
//! and unregisters it when the thread exits, so the lcore ids are reused
//! as bridges and threads come and go. Registration keeps the thread's
//! CPU set as it is: fulmar's placement pins the threads.

use std::cell::Cell;
use std::ffi::{c_char, CStr, CString};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use dpdk_sys as sys;

/// The outcome of the one start-up: the arguments it ran with, or why
/// it failed.
static STARTED: Mutex<Option<Result<Vec<String>, String>>> = Mutex::new(None);
/// Whether the EAL runs (read on every port open).
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Arguments that end the process inside `rte_eal_init` (usage, version)
/// or make no sense for an embedded EAL.
const REFUSED: [&str; 4] = ["-h", "--help", "-v", "--version"];

/// The last DPDK error of this thread, as text.
pub(crate) fn last_error() -> String {
    // SAFETY: both calls read thread-local state; rte_strerror returns a
    // pointer to a static or thread-local NUL-terminated string.
    unsafe {
        let e = sys::fulmar_errno();
        let s = sys::rte_strerror(e);
        if s.is_null() {
            format!("DPDK error {e}")
        } else {
            CStr::from_ptr(s).to_string_lossy().into_owned()
        }
    }
}

/// The text of DPDK error number `e` (a negative return value's errno).
pub(crate) fn error_text(e: i32) -> String {
    // SAFETY: rte_strerror accepts any number and returns a NUL-terminated
    // string it owns.
    unsafe {
        let s = sys::rte_strerror(e.abs());
        if s.is_null() {
            format!("DPDK error {e}")
        } else {
            CStr::from_ptr(s).to_string_lossy().into_owned()
        }
    }
}

/// Whether the EAL has been started (by [`init`]).
pub fn is_running() -> bool {
    RUNNING.load(Ordering::Acquire)
}

/// The arguments the EAL runs with (the added `-l` included), if it runs.
pub fn running_args() -> Option<Vec<String>> {
    match &*STARTED.lock().unwrap_or_else(|e| e.into_inner()) {
        Some(Ok(a)) => Some(a.clone()),
        _ => None,
    }
}

/// Checks EAL arguments without starting anything: the ones that would
/// end the process, and NUL bytes.
pub fn check_args(args: &[String]) -> Result<(), String> {
    for a in args {
        if REFUSED.contains(&a.as_str()) {
            return Err(format!(
                "EAL argument {a:?} is not allowed (it ends the process)"
            ));
        }
        if a.contains('\0') {
            return Err(format!("EAL argument {a:?} contains a NUL byte"));
        }
    }
    Ok(())
}

/// `args` with `-l FIRST_CPU` added when they name no lcores.
fn with_lcores(args: &[String]) -> Vec<String> {
    let names_lcores = args.iter().any(|a| {
        a == "-l" || a == "-c" || a.starts_with("--lcores") || {
            // `-l0` / `-c0x3` spelled as one word.
            (a.starts_with("-l") || a.starts_with("-c")) && !a.starts_with("--") && a.len() > 2
        }
    });
    let mut out = args.to_vec();
    if !names_lcores {
        let cpu = crate::placement::allowed_cpus()
            .first()
            .copied()
            .unwrap_or(0);
        out.insert(0, cpu.to_string());
        out.insert(0, "-l".into());
    }
    out
}

/// Starts the EAL with `args` (not counting the program name), once per
/// process; see the module comment for repeated calls.
pub fn init(args: &[String]) -> io::Result<()> {
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    let wanted = with_lcores(args);
    match &*started {
        Some(Ok(prev)) if *prev == wanted => return Ok(()),
        Some(Ok(prev)) => {
            return Err(io::Error::other(format!(
                "the DPDK EAL already runs with arguments {:?}; it starts once per process, so {:?} need a restart",
                prev, wanted
            )))
        }
        Some(Err(e)) => return Err(io::Error::other(e.clone())),
        None => {}
    }
    let outcome = start(&wanted).map(|()| wanted);
    let result = match &outcome {
        Ok(_) => {
            RUNNING.store(true, Ordering::Release);
            Ok(())
        }
        Err(e) => Err(io::Error::other(e.clone())),
    };
    *started = Some(outcome);
    result
}

fn start(args: &[String]) -> Result<(), String> {
    check_args(args)?;
    let mut argv: Vec<*mut c_char> = Vec::with_capacity(args.len() + 2);
    for a in std::iter::once("fulmar").chain(args.iter().map(String::as_str)) {
        let c = CString::new(a).map_err(|_| format!("EAL argument {a:?} contains a NUL byte"))?;
        // The EAL may keep pointers into argv (it parses in place), so the
        // strings live as long as the process.
        argv.push(c.into_raw());
    }
    argv.push(std::ptr::null_mut());
    let argc = i32::try_from(argv.len() - 1).map_err(|_| "too many EAL arguments".to_string())?;
    let saved = crate::placement::thread_cpus();
    // The vector of pointers is leaked too, for the same reason.
    let argv = Box::leak(argv.into_boxed_slice());
    // SAFETY: argv holds argc valid NUL-terminated strings and a final
    // null, all kept alive for the rest of the process; the EAL has not
    // been started in this process (STARTED is None under its lock).
    let ret = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
    // Whatever happened, the caller's CPU set is put back.
    if let Some(set) = saved {
        let _ = crate::placement::set_thread_cpus(&set);
    }
    if ret < 0 {
        return Err(format!(
            "cannot start the DPDK EAL with {:?}: {}",
            args,
            last_error()
        ));
    }
    Ok(())
}

/// This thread's lcore registration; unregisters when the thread exits.
struct Lcore {
    /// 0: not tried, 1: registered by us, 2: an lcore already (or failed).
    state: Cell<u8>,
}

impl Drop for Lcore {
    fn drop(&mut self) {
        if self.state.get() == 1 {
            // SAFETY: this thread registered itself (state 1) and is
            // exiting; nothing of it touches DPDK afterwards.
            unsafe { sys::rte_thread_unregister() };
        }
    }
}

thread_local! {
    static LCORE: Lcore = const { Lcore { state: Cell::new(0) } };
}

/// Makes the calling thread an lcore if it is not one yet (see the module
/// comment). Cheap after the first call in a thread.
#[inline]
pub(crate) fn ensure_lcore() {
    LCORE.with(|l| {
        if l.state.get() == 0 {
            l.state.set(register());
        }
    });
}

#[cold]
fn register() -> u8 {
    if !is_running() {
        return 0;
    }
    // SAFETY: the EAL runs (checked above); both calls act on the calling
    // thread only.
    unsafe {
        if sys::fulmar_lcore_id() != u32::MAX {
            return 2;
        }
        if sys::rte_thread_register() == 0 {
            1
        } else {
            2
        }
    }
}

/// The calling thread's lcore id, if it has one.
pub fn lcore_id() -> Option<u32> {
    // SAFETY: reads a thread-local variable.
    let id = unsafe { sys::fulmar_lcore_id() };
    (id != u32::MAX).then_some(id)
}
