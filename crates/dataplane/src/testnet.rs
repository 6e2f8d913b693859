//! Test helpers: waiting for a condition ([`eventually`]), test frames,
//! and, for root-only tests, a network namespace named after the test,
//! removed on drop (also when the test panics), with veth pairs in it, and
//! a way to run code with the calling thread inside the namespace.
//!
//! Tests that need root call [`NetNs::for_test`], which returns `None` (and
//! prints why) when not root or when `ip` is missing; such tests then pass
//! without checking anything, and their names end in `_as_root` to say so.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::port::{Burst, PacketBuf, PortBackend};

/// Polls `f` (every 2 ms) until it returns true or `timeout` passes;
/// whether it did. What a test waits for instead of a fixed sleep that a
/// loaded machine can outlast.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    f()
}

/// True when running as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A network namespace owned by one test.
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates namespace `fdp-<test>` (deleting a stale one first), with IPv6
    /// off so the kernel does not chatter on the test links. `None` when the
    /// test cannot run here; the reason is printed.
    pub fn for_test(test: &str) -> Option<NetNs> {
        if !is_root() {
            eprintln!("skipping {test}: needs root to create network namespaces");
            return None;
        }
        if Command::new("ip").arg("-V").output().is_err() {
            eprintln!("skipping {test}: the `ip` command (iproute2) is missing");
            return None;
        }
        let name = format!("fdp-{test}");
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let ns = NetNs { name };
        ns.cmd(&["ip", "netns", "add", &ns.name]);
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        Some(ns)
    }

    fn cmd(&self, args: &[&str]) {
        let out = Command::new(args[0])
            .args(&args[1..])
            .output()
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs a command inside the namespace and asserts it succeeded.
    pub fn exec(&self, args: &[&str]) {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        self.cmd(&full);
    }

    /// Creates veth pair `a`/`b` in the namespace and brings both ends up.
    pub fn veth(&self, a: &str, b: &str) {
        self.exec(&["ip", "link", "add", a, "type", "veth", "peer", "name", b]);
        self.exec(&["ip", "link", "set", a, "up"]);
        self.exec(&["ip", "link", "set", b, "up"]);
    }

    /// Like [`NetNs::veth`] with one RX and one TX queue per end, so every
    /// frame lands on queue 0 (AF_XDP sockets serve one queue).
    pub fn veth_single_queue(&self, a: &str, b: &str) {
        self.exec(&[
            "ip",
            "link",
            "add",
            a,
            "numtxqueues",
            "1",
            "numrxqueues",
            "1",
            "type",
            "veth",
            "peer",
            "name",
            b,
            "numtxqueues",
            "1",
            "numrxqueues",
            "1",
        ]);
        self.exec(&["ip", "link", "set", a, "up"]);
        self.exec(&["ip", "link", "set", b, "up"]);
    }

    /// Runs `f` on a new thread that has entered the namespace; sockets it
    /// opens live in the namespace. Panics in `f` propagate.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        let path = format!("/run/netns/{}", self.name);
        let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on a namespace file descriptor we hold open;
                // it only changes this (fresh, scoped) thread's namespace.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

/// As root, runs `f` (as [`NetNs::run`]) in a fresh namespace for `test`
/// holding the veth pair `a`/`b`; does nothing otherwise, as
/// [`NetNs::for_test`].
pub fn in_veth_ns(test: &str, a: &str, b: &str, f: impl FnOnce() + Send) {
    if let Some(ns) = NetNs::for_test(test) {
        ns.veth(a, b);
        ns.run(f);
    }
}

/// As [`in_veth_ns`], with the pair made by [`NetNs::veth_single_queue`].
pub fn in_single_queue_veth_ns(test: &str, a: &str, b: &str, f: impl FnOnce() + Send) {
    if let Some(ns) = NetNs::for_test(test) {
        ns.veth_single_queue(a, b);
        ns.run(f);
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Deleting the namespace destroys every link in it.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// A plain AF_PACKET socket bound to one interface, for checking what a port
/// sent or feeding it frames. Must be created inside the namespace.
pub struct RawSocket {
    fd: std::os::fd::OwnedFd,
    ifindex: u32,
}

impl RawSocket {
    /// Opens a non-blocking raw socket bound to `ifname` (all protocols).
    pub fn bind(ifname: &str) -> RawSocket {
        let proto = (libc::ETH_P_ALL as u16).to_be() as libc::c_int;
        let fd = crate::sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, proto)
            .unwrap();
        let ifindex = crate::sys::if_index(ifname).unwrap();
        let addr = crate::sys::sockaddr_ll(ifindex, libc::ETH_P_ALL as u16);
        // SAFETY: `addr` is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        RawSocket { fd, ifindex }
    }

    /// Sends one frame out of the interface.
    pub fn send(&self, frame: &[u8]) {
        let addr = crate::sys::sockaddr_ll(self.ifindex, libc::ETH_P_ALL as u16);
        // SAFETY: `frame` and `addr` are valid for the sizes passed.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
                &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(
            rc,
            frame.len() as isize,
            "sendto: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Receives frames carrying `ethertype` until `count` have arrived or
    /// `timeout` passed; other frames are skipped.
    pub fn recv_matching(
        &self,
        ethertype: u16,
        count: usize,
        timeout: std::time::Duration,
    ) -> Vec<Vec<u8>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while got.len() < count && std::time::Instant::now() < deadline {
            // SAFETY: `buf` is writable for its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                )
            };
            if n < 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            let frame = &buf[..n as usize];
            if frame.len() >= 14 && u16::from_be_bytes([frame[12], frame[13]]) == ethertype {
                got.push(frame.to_vec());
            }
        }
        got
    }
}

/// A test frame: broadcast destination, given source MAC byte, the local
/// experimental ethertype 0x88b5, then `seq` and filler up to `len` bytes.
pub fn test_frame(src: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, src, 0x88, 0xb5,
    ];
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len.max(18) {
        f.push((f.len() % 251) as u8);
    }
    f
}

/// The test ethertype used by [`test_frame`].
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// Whether `frame` is one of [`test_frame`]'s (by its EtherType).
pub fn is_test_frame(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&TEST_ETHERTYPE.to_be_bytes()[..])
}

/// A [`test_frame`]'s source byte and sequence number (`None`: too short
/// to be one).
pub fn test_frame_id(frame: &[u8]) -> Option<(u8, u32)> {
    let seq = frame.get(14..18)?;
    Some((
        frame[11],
        u32::from_be_bytes([seq[0], seq[1], seq[2], seq[3]]),
    ))
}

/// Reads `port` until it has received `count` test frames (others are
/// dropped) or `timeout` has passed; returns those it got.
pub fn rx_test_frames(
    port: &mut dyn PortBackend,
    count: usize,
    timeout: Duration,
) -> Vec<PacketBuf> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut b = Burst::new();
    while got.len() < count && Instant::now() < deadline {
        if port.rx_burst(&mut b).unwrap() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        got.extend(b.drain().filter(|p| is_test_frame(p.data())));
    }
    got
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_and_links_removed_even_after_panic_as_root() {
        if !is_root() {
            eprintln!("skipping: needs root");
            return;
        }
        let result = std::panic::catch_unwind(|| {
            let ns = NetNs::for_test("panic").expect("root");
            ns.veth("pa", "pb");
            ns.run(|| panic!("test body fails"));
        });
        assert!(result.is_err());
        assert!(!std::path::Path::new("/run/netns/fdp-panic").exists());
    }
}
