//! The TAP backend: a virtual Ethernet interface whose other side is the
//! host's network stack, used for the switch's LOCAL port.
//!
//! The port opens `/dev/net/tun` and attaches a TAP interface (`IFF_TAP`,
//! no packet-information prefix) by name, creating it if needed; it lives
//! until the port is dropped unless it was made persistent elsewhere. What
//! the port sends appears to the host as frames received on that
//! interface; what the host sends out of the interface the port receives.
//!
//! Each `read`/`write` moves one frame. RX reads into a scratch buffer and
//! copies the frame into a right-sized owned [`PacketBuf`] (one copy; the
//! LOCAL port is not a fast path). TX writes each frame from the buffer's
//! own bytes (no user-space copy).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use crate::port::{
    LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, SendOnly, Transmit, TxBurst,
    DEFAULT_HEADROOM,
};
use crate::sys;

/// Options for a [`TapPort`].
#[derive(Clone, Debug)]
pub struct TapConfig {
    /// Bring the interface administratively up after attaching (default true).
    pub up: bool,
}

impl Default for TapConfig {
    fn default() -> Self {
        TapConfig { up: true }
    }
}

/// A port on a TAP interface.
pub struct TapPort {
    name: String,
    dev: File,
    /// A datagram socket for interface ioctls (flags, link state).
    ctl: OwnedFd,
    scratch: Vec<u8>,
    counters: PortCounters,
}

/// `struct ifreq` with the flags member, as TUNSETIFF wants it.
type Ifreq = sys::IfreqFlags;

impl TapPort {
    /// Attaches to (or creates) TAP interface `name` with the default configuration.
    pub fn open(name: &str) -> io::Result<Self> {
        Self::open_with(name, &TapConfig::default())
    }

    /// Attaches to (or creates) TAP interface `name` in the calling thread's
    /// network namespace.
    pub fn open_with(name: &str, cfg: &TapConfig) -> io::Result<Self> {
        let ctx = |what: &str| format!("TAP port {name:?}: {what}");
        let dev = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| sys::context(e, ctx("open /dev/net/tun")))?;
        let mut req = Ifreq::new(name)?;
        req.flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq`; `req` has its
        // layout and size and outlives the call.
        sys::cvt(unsafe { libc::ioctl(dev.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut Ifreq) })
            .map_err(|e| sys::context(e, ctx("TUNSETIFF")))?;
        let ctl = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
            .map_err(|e| sys::context(e, ctx("control socket")))?;
        if cfg.up {
            sys::set_if_up(ctl.as_raw_fd(), name, true)
                .map_err(|e| sys::context(e, ctx("bring up")))?;
        }
        Ok(TapPort {
            name: name.to_string(),
            dev,
            ctl,
            scratch: vec![0u8; 65_536],
            counters: PortCounters::default(),
        })
    }

    /// Sets the interface administratively up or down.
    pub fn set_up(&self, up: bool) -> io::Result<()> {
        sys::set_if_up(self.ctl.as_raw_fd(), &self.name, up)
    }
}

impl PortBackend for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        let mut got = 0;
        while out.room() > 0 {
            match self.dev.read(&mut self.scratch) {
                Ok(0) => break,
                Ok(n) => {
                    let Some(frame) = self.scratch.get(..n) else {
                        break;
                    };
                    if n < 14 {
                        self.counters.rx_drops.malformed += 1;
                        continue;
                    }
                    let pkt = PacketBuf::with_headroom(frame, DEFAULT_HEADROOM);
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += n as u64;
                    let _ = out.push(pkt);
                    got += 1;
                }
                Err(e) if sys::would_block(&e) => break,
                Err(e) => {
                    self.counters.rx_errors += 1;
                    return Err(e);
                }
            }
        }
        Ok(got)
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        send(&mut self.dev, pkts, &mut self.counters)
    }

    fn split_sender(&self) -> io::Result<Option<Box<dyn PortBackend>>> {
        let ctx = |what: &str| format!("TAP port {:?}: {what}", self.name);
        let dev = self
            .dev
            .try_clone()
            .map_err(|e| sys::context(e, ctx("dup")))?;
        let ctl = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
            .map_err(|e| sys::context(e, ctx("control socket")))?;
        let tx = TapTx {
            dev,
            ctl,
            counters: PortCounters::default(),
        };
        Ok(Some(Box::new(SendOnly::new(&self.name, tx))))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.dev.flush()
    }

    fn link_state(&self) -> LinkState {
        sys::link_state_of(self.ctl.as_raw_fd(), &self.name)
    }

    fn stats(&self) -> PortCounters {
        self.counters
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.dev.as_raw_fd())
    }
}

/// Writes frames from the front of `pkts` to the TAP device; the
/// [`PortBackend::tx_burst`] contract.
fn send(dev: &mut File, pkts: &mut TxBurst, counters: &mut PortCounters) -> io::Result<usize> {
    let mut taken = 0;
    while let Some(p) = pkts.pkts().first() {
        if p.len() < 14 {
            counters.tx_drops.runt += 1;
        } else {
            match dev.write(p.data()) {
                Ok(_) => {
                    counters.count_tx(p.len());
                }
                Err(e) if sys::would_block(&e) => break,
                Err(e) => match e.raw_os_error() {
                    Some(libc::EIO) | Some(libc::ENETDOWN) => counters.tx_drops.link_down += 1,
                    Some(libc::EMSGSIZE) => counters.tx_drops.oversize += 1,
                    Some(libc::EBADF) | Some(libc::EBADFD) => return Err(e),
                    _ => counters.tx_errors += 1,
                },
            }
        }
        pkts.drain_front(1);
        taken += 1;
    }
    Ok(taken)
}

/// The sending half of a TAP port's split sender ([`SendOnly`]): a duplicate
/// of its descriptor and its own control socket.
struct TapTx {
    dev: File,
    ctl: OwnedFd,
    counters: PortCounters,
}

impl Transmit for TapTx {
    fn send(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        send(&mut self.dev, pkts, &mut self.counters)
    }

    fn link_state(&self, name: &str) -> LinkState {
        sys::link_state_of(self.ctl.as_raw_fd(), name)
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::Burst;
    use crate::testnet::{rx_test_frames, test_frame, NetNs, RawSocket, TEST_ETHERTYPE};
    use std::time::Duration;

    #[test]
    fn bad_name_is_rejected() {
        let err = TapPort::open("bad/name").err().expect("must fail");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn tap_port_exchanges_frames_with_host_as_root() {
        let Some(ns) = NetNs::for_test("tap") else {
            return;
        };
        ns.run(|| {
            let mut tap = TapPort::open("ftap0").unwrap();
            assert_eq!(tap.link_state(), LinkState::Up);
            let host = RawSocket::bind("ftap0");
            // Port -> host: the host sees the frames as received on ftap0.
            let mut b = Burst::new();
            for seq in 0..10 {
                b.push(PacketBuf::from_slice(&test_frame(7, seq, 100)))
                    .unwrap();
            }
            b.push(PacketBuf::from_slice(&[1, 2])).unwrap();
            assert_eq!(tap.tx_burst(&mut b).unwrap(), 11);
            let got = host.recv_matching(TEST_ETHERTYPE, 10, Duration::from_secs(5));
            assert_eq!(got.len(), 10);
            for (seq, f) in got.iter().enumerate() {
                assert_eq!(f, &test_frame(7, seq as u32, 100));
            }
            // Host -> port.
            for seq in 0..10 {
                host.send(&test_frame(8, seq, 90));
            }
            let frames = rx_test_frames(&mut tap, 10, Duration::from_secs(5));
            assert_eq!(
                frames.iter().map(|p| p.data().to_vec()).collect::<Vec<_>>(),
                (0..10).map(|s| test_frame(8, s, 90)).collect::<Vec<_>>()
            );
            let c = tap.stats();
            assert_eq!(c.tx_packets, 10);
            assert_eq!(c.tx_drops.runt, 1);
            assert!(c.rx_packets >= 10);
            // Down: link state follows and sends are dropped as link_down.
            tap.set_up(false).unwrap();
            assert_eq!(tap.link_state(), LinkState::Down);
            b.push(PacketBuf::from_slice(&test_frame(7, 99, 100)))
                .unwrap();
            assert_eq!(tap.tx_burst(&mut b).unwrap(), 1);
            let c = tap.stats();
            assert_eq!((c.tx_packets, c.tx_drops.link_down), (10, 1), "{c:?}");
            // A split sender writes through its own descriptor.
            tap.set_up(true).unwrap();
            let mut sender = tap.split_sender().unwrap().expect("TAP can split");
            std::thread::scope(|s| {
                s.spawn(|| {
                    let mut b = Burst::new();
                    b.push(PacketBuf::from_slice(&test_frame(7, 500, 100)))
                        .unwrap();
                    assert_eq!(sender.tx_burst(&mut b).unwrap(), 1);
                });
            });
            assert_eq!(sender.stats().tx_packets, 1);
            let got = host.recv_matching(TEST_ETHERTYPE, 1, Duration::from_secs(5));
            assert_eq!(got, vec![test_frame(7, 500, 100)]);
        });
    }
}
