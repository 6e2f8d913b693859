//! A low-latency AF_PACKET port without a ring: `recvmmsg` on RX (into
//! fixed jumbo-sized receive buffers, then one copy per packet into owned
//! storage recycled through [`crate::pool`]) and `sendmmsg` on TX, through
//! the same sender as the ring backend ([`crate::afpacket`]).
//!
//! Why next to [`crate::afpacket`] (the default, a TPACKET_V2 ring): this
//! backend was the default while the ring was TPACKET_V3, which hands
//! frames over a block at a time (at low rates on its retire timer, a
//! kernel tick per hop). It stays as `--afpacket-mode socket`: a plain
//! socket whose bounded receive buffer makes the kernel drop at the bound
//! (no user-space CPU spent on the excess, but no sparing pings either).
//!
//! Frames the kernel drops because the receive queue was full (the socket
//! asks for an 8 MiB buffer) are read from `PACKET_STATISTICS` and counted
//! as `rx_drops.ring_full`, so no loss at this port goes unseen.
//!
//! Under a time bound ([`crate::delay`], the default) the reading thread
//! shrinks the receive buffer to its bound's worth of frames
//! ([`PortBackend::set_rx_bound`]); what the kernel drops while the buffer
//! is bounded counts as `rx_drops.queue_delay` instead.
//!
//! The kernel strips an outer VLAN tag into metadata before packet sockets
//! see a frame; the tag comes back through `PACKET_AUXDATA` and is put back
//! into the frame.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::afpacket::{self, bind, set_flag, set_promiscuous, Sender};
use crate::port::{LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, TxBurst};
use crate::sys;

/// Most packets read or sent per system call.
const BATCH: usize = 32;
/// Bytes of headroom in front of received frames.
const HEADROOM: usize = 128;
/// Largest frame received whole (longer ones are dropped as truncated).
const MAX_FRAME: usize = 9216 + 18;
/// `TP_STATUS_VLAN_VALID` / `TP_STATUS_VLAN_TPID_VALID`.
const VLAN_VALID: u32 = 1 << 4;
const VLAN_TPID_VALID: u32 = 1 << 6;

/// `struct tpacket_auxdata`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct AuxData {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    vlan_tci: u16,
    vlan_tpid: u16,
}

/// Room for one `cmsghdr` carrying an `AuxData` (aligned generously).
const CMSG_SPACE: usize = 64;

/// A packet-socket port (see the module comment).
pub struct RawSocketPort {
    name: String,
    ifindex: u32,
    rx: OwnedFd,
    tx: Sender,
    bufs: Vec<Vec<u8>>,
    cmsgs: Vec<[u64; CMSG_SPACE / 8]>,
    counters: PortCounters,
    /// Frames the kernel dropped because the socket's receive queue was
    /// full, accumulated from `PACKET_STATISTICS` (which resets on read).
    kernel_drops: std::cell::Cell<u64>,
    /// As `kernel_drops`, while the buffer was bounded in time.
    delay_drops: std::cell::Cell<u64>,
    /// The receive buffer asked for at open (the deep size).
    deep_rcvbuf: libc::c_int,
    /// The receive buffer asked for now.
    rcvbuf: libc::c_int,
    /// Whether `rcvbuf` is a time bound's (drops count as `queue_delay`).
    bounded: bool,
}

/// Receive buffer asked for by default: room for a few milliseconds of
/// small frames at line rate, so a worker busy with one burst does not lose
/// the next.
pub const DEFAULT_RCVBUF_BYTES: usize = 8 << 20;

/// `struct tpacket_stats`, what `PACKET_STATISTICS` reports for a packet
/// socket without a ring.
#[repr(C)]
#[derive(Default)]
struct TpacketStats {
    tp_packets: u32,
    tp_drops: u32,
}

impl RawSocketPort {
    /// Opens a port on interface `ifname` (promiscuous) with the default
    /// receive buffer ([`DEFAULT_RCVBUF_BYTES`]).
    pub fn open(ifname: &str) -> io::Result<RawSocketPort> {
        Self::open_with_rcvbuf(ifname, DEFAULT_RCVBUF_BYTES)
    }

    /// Opens a port whose receive socket asks for `rcvbuf` bytes of buffer
    /// (what absorbs a burst while the worker is busy; the kernel counts
    /// frames beyond it as drops, reported as `rx_drops.ring_full`). The
    /// kernel rounds small values up to its minimum.
    pub fn open_with_rcvbuf(ifname: &str, rcvbuf: usize) -> io::Result<RawSocketPort> {
        let rcvbuf = libc::c_int::try_from(rcvbuf)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "receive buffer of {rcvbuf} bytes: expected 1 to {}",
                        libc::c_int::MAX
                    ),
                )
            })?;
        let ifindex = sys::if_index(ifname)?;
        let rx = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)?;
        set_flag(&rx, libc::PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING")?;
        set_flag(&rx, libc::PACKET_AUXDATA, "PACKET_AUXDATA")?;
        set_promiscuous(&rx, ifname, ifindex)?;
        set_rcvbuf(&rx, rcvbuf);
        bind(&rx, ifindex, libc::ETH_P_ALL as u16)?;
        Ok(RawSocketPort {
            name: ifname.to_string(),
            ifindex,
            rx,
            tx: Sender::open(ifindex, false)?,
            bufs: Vec::new(),
            cmsgs: vec![[0u64; CMSG_SPACE / 8]; BATCH],
            counters: PortCounters::default(),
            kernel_drops: std::cell::Cell::new(0),
            delay_drops: std::cell::Cell::new(0),
            deep_rcvbuf: rcvbuf,
            rcvbuf,
            bounded: false,
        })
    }

    /// Moves the kernel's drop count since the last call into the counter
    /// of the current sizing.
    fn collect_kernel_drops(&self) {
        if let Ok(st) = sys::getsockopt::<TpacketStats>(
            self.rx.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
        ) {
            let cell = if self.bounded {
                &self.delay_drops
            } else {
                &self.kernel_drops
            };
            cell.set(cell.get() + u64::from(st.tp_drops));
        }
    }

    /// The receive buffer asked for now, in bytes (the kernel doubles it).
    pub fn rcvbuf(&self) -> usize {
        self.rcvbuf as usize
    }
}

/// Asks for a receive buffer of `bytes` (the kernel doubles the value for
/// its bookkeeping). As root the limit in net.core.rmem_max does not apply;
/// otherwise the kernel caps the request, which is still better than
/// nothing.
fn set_rcvbuf(fd: &OwnedFd, bytes: libc::c_int) {
    if sys::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &bytes).is_err() {
        let _ = sys::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &bytes);
    }
}

impl PortBackend for RawSocketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        let want = out.room().min(BATCH);
        if want == 0 {
            return Ok(0);
        }
        while self.bufs.len() < want {
            self.bufs.push(vec![0u8; HEADROOM + MAX_FRAME]);
        }
        // SAFETY: plain data; all-zero is valid.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..want {
            let buf = &mut self.bufs[i];
            iov[i].iov_base = buf[HEADROOM..].as_mut_ptr().cast();
            iov[i].iov_len = MAX_FRAME;
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = self.cmsgs[i].as_mut_ptr().cast();
            msgs[i].msg_hdr.msg_controllen = CMSG_SPACE as _;
        }
        // SAFETY: the first `want` headers point at live, writable buffers
        // of the lengths given (frame buffers and control buffers).
        let r = unsafe {
            libc::recvmmsg(
                self.rx.as_raw_fd(),
                msgs.as_mut_ptr(),
                want as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let err = io::Error::last_os_error();
            return if sys::would_block(&err) {
                Ok(0)
            } else {
                Err(err)
            };
        }
        let mut added = 0;
        for (i, m) in msgs.iter().take(r as usize).enumerate() {
            let len = m.msg_len as usize;
            if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len > MAX_FRAME {
                self.counters.rx_drops.truncated += 1;
                continue;
            }
            let aux = aux_of(&m.msg_hdr);
            // The receive buffers stay; the frame is copied into recycled
            // storage (cheaper than a fresh zeroed jumbo-sized buffer per
            // frame, and no allocation once the pool is warm).
            let Some(frame) = self.bufs[i].get(HEADROOM..HEADROOM + len) else {
                continue;
            };
            let mut pkt = PacketBuf::with_headroom(frame, HEADROOM);
            if let Some(a) = aux {
                if a.status & VLAN_VALID != 0 {
                    let tpid = if a.status & VLAN_TPID_VALID != 0 && a.vlan_tpid != 0 {
                        a.vlan_tpid
                    } else {
                        0x8100
                    };
                    pkt.insert_vlan_tag(tpid, a.vlan_tci);
                }
            }
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += pkt.len() as u64;
            if out.push(pkt).is_err() {
                break;
            }
            added += 1;
        }
        Ok(added)
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        self.tx.send(pkts)
    }

    fn link_state(&self) -> LinkState {
        sys::link_state_of(self.rx.as_raw_fd(), &self.name)
    }

    fn stats(&self) -> PortCounters {
        self.collect_kernel_drops();
        let mut c = self.counters.merged(&self.tx.counters);
        c.rx_drops.ring_full += self.kernel_drops.get();
        c.rx_drops.queue_delay += self.delay_drops.get();
        c
    }

    fn set_rx_bound(&mut self, bound: Option<crate::delay::RxBound>) {
        // The kernel compares its doubled value against the queued frames'
        // truesize; never more than the deep size asked for at open.
        let want = match bound {
            Some(b) => libc::c_int::try_from(b.kernel_bytes() / 2)
                .unwrap_or(libc::c_int::MAX)
                .min(self.deep_rcvbuf),
            None => self.deep_rcvbuf,
        };
        let bounded = bound.is_some();
        // Small changes are not worth a system call.
        let close = (want - self.rcvbuf).abs() <= self.rcvbuf / 8;
        if bounded == self.bounded && close {
            return;
        }
        self.collect_kernel_drops();
        self.bounded = bounded;
        if !close {
            set_rcvbuf(&self.rx, want);
            self.rcvbuf = want;
        }
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.rx.as_raw_fd())
    }

    fn split_sender(&self) -> io::Result<Option<Box<dyn PortBackend>>> {
        afpacket::split_sender(&self.name, self.ifindex, false)
    }
}

/// The `PACKET_AUXDATA` control message of a received frame, if any.
fn aux_of(h: &libc::msghdr) -> Option<AuxData> {
    // SAFETY: `h` is a msghdr the kernel filled; CMSG_FIRSTHDR/NXTHDR stay
    // within msg_control/msg_controllen, and the data is read unaligned
    // after checking the message is long enough.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET
                && (*c).cmsg_type == libc::PACKET_AUXDATA
                && (*c).cmsg_len as usize
                    >= libc::CMSG_LEN(std::mem::size_of::<AuxData>() as u32) as usize
            {
                return Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(c) as *const AuxData
                ));
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::Burst;
    use crate::testnet::{in_veth_ns, is_test_frame, test_frame, RawSocket};
    use std::time::{Duration, Instant};

    #[test]
    fn frames_cross_a_veth_with_vlan_tags_kept_as_root() {
        in_veth_ns("rawsock", "rsa", "rsb", || {
            let mut a = RawSocketPort::open("rsa").unwrap();
            let mut b = RawSocketPort::open("rsb").unwrap();
            let mut tagged = test_frame(1, 5, 64);
            tagged.splice(12..12, [0x81, 0x00, 0x20, 0x0a]);
            // A fresh veth may drop the first frames while it comes up:
            // send again until something arrives.
            let mut got = Vec::new();
            let mut rx = Burst::with_limit(8);
            for _ in 0..20 {
                let mut out = Burst::with_limit(4);
                out.push(PacketBuf::from_slice(&tagged)).unwrap();
                out.push(PacketBuf::from_slice(&test_frame(1, 6, 64)))
                    .unwrap();
                out.push(PacketBuf::from_slice(&[1, 2, 3])).unwrap();
                assert_eq!(a.tx_burst(&mut out).unwrap(), 3);
                let deadline = Instant::now() + Duration::from_millis(200);
                while got.len() < 2 && Instant::now() < deadline {
                    rx.clear();
                    b.rx_burst(&mut rx).unwrap();
                    got.extend(
                        rx.iter()
                            .map(|p| p.data().to_vec())
                            .filter(|d| matches!(d.get(12..14), Some([0x88, 0xb5] | [0x81, 0x00]))),
                    );
                }
                if got.len() >= 2 {
                    break;
                }
            }
            assert!(a.stats().tx_drops.runt >= 1);
            got.truncate(2);
            assert_eq!(got, vec![tagged, test_frame(1, 6, 64)]);
        });
    }

    /// Sends `sent` test frames from `peer` without reading, then reads
    /// `port` until it is empty; returns how many test frames it read.
    /// `sent` must be more than the socket holds: the reading starts once
    /// the kernel has delivered them, that is once the socket's drop count
    /// is above zero and has stopped rising (a loaded machine defers the
    /// delivery to ksoftirqd, and a reader starting at once would find the
    /// socket still empty and stop).
    fn send_then_read_all(peer: &RawSocket, port: &mut RawSocketPort, sent: u64) -> u64 {
        for seq in 0..sent {
            peer.send(&test_frame(3, seq as u32, 64));
        }
        let drops = |port: &RawSocketPort| {
            let d = port.stats().rx_drops;
            d.ring_full + d.queue_delay
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = drops(port);
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let now = drops(port);
            if (now > 0 && now == last) || Instant::now() >= deadline {
                break;
            }
            last = now;
        }
        let mut received = 0u64;
        let mut rx = Burst::with_limit(64);
        loop {
            rx.clear();
            if port.rx_burst(&mut rx).unwrap() == 0 {
                return received;
            }
            received += rx.iter().filter(|p| is_test_frame(p.data())).count() as u64;
        }
    }

    #[test]
    fn frames_lost_in_a_full_receive_queue_are_counted_as_root() {
        in_veth_ns("rawsock-drop", "rda", "rdb", || {
            let mut port = RawSocketPort::open("rdb").unwrap();
            let peer = RawSocket::bind("rda");
            // Far more than the receive buffer holds, none of it read.
            let sent = 60_000u64;
            let received = send_then_read_all(&peer, &mut port, sent);
            let dropped = port.stats().rx_drops.ring_full;
            assert!(
                dropped > 0,
                "received {received} of {sent}, no drop counted"
            );
            // Frames can also be lost before the socket (the veth backlog),
            // never counted twice here.
            assert!(
                received + dropped <= sent,
                "{received} + {dropped} > {sent}"
            );
        });
    }

    #[test]
    fn a_time_bound_shrinks_the_receive_buffer_and_names_its_drops_as_root() {
        in_veth_ns("rawsock-bound", "rba", "rbb", || {
            let mut port = RawSocketPort::open("rbb").unwrap();
            let bound = crate::delay::RxBound {
                packets: 100,
                delay: Duration::from_micros(200),
            };
            port.set_rx_bound(Some(bound));
            assert_eq!(
                port.rcvbuf(),
                100 * crate::delay::KERNEL_BYTES_PER_PACKET / 2
            );
            let fd = port.rx.as_raw_fd();
            let effective: libc::c_int =
                sys::getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap();
            assert_eq!(
                effective as usize,
                100 * crate::delay::KERNEL_BYTES_PER_PACKET
            );
            let peer = RawSocket::bind("rba");
            let sent = 2_000u64;
            let received = send_then_read_all(&peer, &mut port, sent);
            let d = port.stats().rx_drops;
            // About the bound's worth was kept (the kernel charges each
            // small frame about KERNEL_BYTES_PER_PACKET), the rest dropped
            // under the bound's own name.
            assert!((50..=150).contains(&received), "received {received}");
            assert!(d.queue_delay > 0, "{d:?}");
            assert_eq!(d.ring_full, 0, "{d:?}");
            assert!(received + d.queue_delay <= sent, "{received} + {d:?}");
            // Back to deep: the size asked for at open, drops by the old name.
            port.set_rx_bound(None);
            assert_eq!(port.rcvbuf(), DEFAULT_RCVBUF_BYTES);
        });
    }
}
