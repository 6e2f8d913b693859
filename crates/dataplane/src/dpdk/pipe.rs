//! In-process port pairs over DPDK rings: two ethdevs made with the ring
//! PMD's `rte_eth_from_rings`, joined back to back so that what one sends
//! the other receives. A traffic generator in the same process drives a
//! switch port through such a pair, paced as it likes (the loss-free rate
//! search of `fulmar bench --loss-free`).

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use dpdk_sys as sys;

use super::eal;

/// Numbers the pipes' rings.
static PIPES: AtomicU32 = AtomicU32::new(0);

/// Makes two ethdevs joined by two rings of `size` slots (a power of
/// two): what the first sends the second receives, and back. The ring PMD
/// names them `net_ring_A` and `net_ring_B`; those names are returned, to
/// open with [`super::DpdkPort::open`] (or to give as a port's
/// `dpdk_devargs`). The EAL must run; the names must be new.
pub fn ring_pipe(a: &str, b: &str, size: u32) -> io::Result<(String, String)> {
    if !eal::is_running() {
        return Err(io::Error::other("the DPDK EAL is not started"));
    }
    for n in [a, b] {
        if n.is_empty() || n.len() > 32 || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{n:?}: a ring pipe's port names are 1 to 32 letters, digits or _"),
            ));
        }
    }
    if !size.is_power_of_two() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "ring size must be a power of two",
        ));
    }
    let c = |s: &str| {
        CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a name"))
    };
    let (na, nb) = (c(a)?, c(b)?);
    // Ring names are short (a memzone name is at most 31 bytes with DPDK's
    // prefix); numbered per process.
    let n = PIPES.fetch_add(1, Ordering::Relaxed);
    let (ra, rb) = (c(&format!("fmpipe{n}a"))?, c(&format!("fmpipe{n}b"))?);
    let flags = sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ;
    // SAFETY: valid names; the rings live for the rest of the process
    // (the ethdevs made on them refer to them and are closed, not freed
    // with their rings).
    unsafe {
        let ab = sys::rte_ring_create(ra.as_ptr(), size, sys::SOCKET_ID_ANY, flags);
        let ba = sys::rte_ring_create(rb.as_ptr(), size, sys::SOCKET_ID_ANY, flags);
        if ab.is_null() || ba.is_null() {
            let e = eal::last_error();
            sys::rte_ring_free(ab);
            sys::rte_ring_free(ba);
            return Err(io::Error::other(format!(
                "cannot make rings for {a}/{b}: {e}"
            )));
        }
        // Each end receives from the ring the other sends on.
        for (name, cname, rx, tx) in [(a, &na, ba, ab), (b, &nb, ab, ba)] {
            let (mut rx, mut tx) = ([rx], [tx]);
            let port =
                sys::rte_eth_from_rings(cname.as_ptr(), rx.as_mut_ptr(), 1, tx.as_mut_ptr(), 1, 0);
            if port < 0 {
                return Err(io::Error::other(format!(
                    "cannot make ethdev {name}: {}",
                    eal::last_error()
                )));
            }
        }
    }
    Ok((format!("net_ring_{a}"), format!("net_ring_{b}")))
}
