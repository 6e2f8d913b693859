//! The least a userspace forwarder can do: two promiscuous packet sockets,
//! `poll` on both, every frame read is written to the other interface. No
//! tables, no batching, no counters, one thread.
//!
//! It is the yardstick for fulmar's light-load latency (`bench/rtt.py`): a
//! ping through it pays exactly what any forwarder that sleeps when idle
//! pays on the machine — the wake-up of the sleeping forwarder and of the
//! pinging process — and nothing of fulmar's own. With `--busy` it never
//! sleeps (reads in a loop), the yardstick for busy polling.
//!
//! ```text
//! reference_forwarder IF_A IF_B [--busy]
//! ```

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A system call's return value, or the error it set.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points at a live `T` of the size passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn open(ifname: &str) -> io::Result<OwnedFd> {
    let cname = CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    // SAFETY: `cname` is a NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {ifname}"),
        ));
    }
    let all = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain system call; no pointers.
    let raw = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(all),
        )
    })?;
    // SAFETY: `raw` was just returned by socket() and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = all;
    addr.sll_ifindex = ifindex as i32;
    // SAFETY: `addr` is a valid sockaddr_ll of the size passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    // Frames this socket sends are not read back by it.
    setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32)?;
    // SAFETY: packet_mreq is plain data; all-zero is a valid value.
    let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mreq.mr_ifindex = ifindex as i32;
    mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
    setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)?;
    Ok(fd)
}

/// Moves every frame queued on `from` to `to`; returns how many.
fn drain(from: &OwnedFd, to: &OwnedFd, buf: &mut [u8]) -> usize {
    let mut n = 0;
    loop {
        // SAFETY: `buf` is writable for its whole length.
        let got = unsafe { libc::recv(from.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got <= 0 {
            return n;
        }
        // SAFETY: the first `got` bytes of `buf` were just written.
        unsafe { libc::send(to.as_raw_fd(), buf.as_ptr().cast(), got as usize, 0) };
        n += 1;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let busy = args.iter().any(|a| a == "--busy");
    let names: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [a, b] = names[..] else {
        eprintln!("usage: reference_forwarder IF_A IF_B [--busy]");
        std::process::exit(2);
    };
    let (a, b) = match (open(a), open(b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("reference_forwarder: {e}");
            std::process::exit(1);
        }
    };
    let mut buf = vec![0u8; 65536];
    loop {
        if !busy {
            let mut fds = [a.as_raw_fd(), b.as_raw_fd()].map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            // SAFETY: `fds` is a live array of the length passed.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        }
        while drain(&a, &b, &mut buf) + drain(&b, &a, &mut buf) > 0 {}
    }
}
