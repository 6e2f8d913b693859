//! Tunnel ports: VXLAN (RFC 7348) and GRE carrying Ethernet (RFC 2784 with
//! the key of RFC 2890, protocol 0x6558) over an IPv4 underlay.
//!
//! A tunnel port has no interface of its own. What the switch outputs to
//! it is wrapped in an outer IPv4 header and a UDP+VXLAN or GRE header
//! written here ([`encap_header`]) and handed to the kernel through a raw
//! IPv4 socket with `IP_HDRINCL` (`IPPROTO_RAW`): the kernel routes the
//! outer packet and resolves the next hop through its own tables, so
//! fulmar needs neither a routing table nor ARP. The kernel fills in what
//! it always fills for such sockets (total length, header checksum, an
//! identification when it is zero, the source address when it is zero);
//! the header written here is complete anyway, so it can be checked byte
//! for byte.
//!
//! Receiving:
//! - VXLAN: a UDP socket bound to (`local_ip` or any, `dst_port`); the
//!   kernel has checked the UDP checksum and reassembled fragments. A
//!   datagram from an address other than `remote_ip` or with another VNI
//!   is dropped and counted (`rx_drops.tunnel_mismatch`): the socket is
//!   this port's alone.
//! - GRE: a raw `IPPROTO_GRE` socket, which sees every GRE packet the
//!   namespace receives (the kernel goes on processing it too). Packets
//!   from other addresses (or to another `local_ip`) are left alone
//!   without counting — they belong to other tunnels. From the peer, a
//!   packet with another key or another protocol is counted as
//!   `tunnel_mismatch`.
//!
//! Anything too short or with headers this end cannot take (VXLAN without
//! the I flag, GRE with routing or a version other than 0, an inner frame
//! shorter than an Ethernet header) is counted as `tunnel_malformed`.
//!
//! The key and the flow: every frame a tunnel port receives carries the
//! VNI or GRE key it came with in [`crate::PacketMeta::tunnel_id`] (0 for GRE
//! without a key), which the pipeline makes the packet's `tunnel_id`
//! match field. A port with `key=flow` ([`TunnelConfig::key_flow`])
//! takes every VNI (VXLAN) or every key, and no key (GRE) from its peer,
//! and wraps what it sends in the key the pipeline gave the frame
//! ([`crate::PacketMeta::tunnel_id`] on output: the flow's `tunnel_id`, set by
//! `set_field:N->tunnel_id`); a VNI is the key's low 24 bits.
//!
//! Not covered: an IPv6 underlay, Geneve, the outer UDP checksum (zero, as
//! IPv4 allows), GRE checksums and sequence numbers on send (accepted and
//! skipped on receive), multicast VXLAN and learning; with `key=flow`, GRE
//! always writes a key (there is no "no key" in a flow's `tunnel_id`).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::port::{
    LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, SendOnly, Transmit, TxBurst,
    DEFAULT_HEADROOM,
};
use crate::sys;

/// The encapsulation a tunnel port uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelKind {
    /// VXLAN: outer IPv4 + UDP + 8-byte VXLAN header.
    Vxlan,
    /// GRE: outer IPv4 (protocol 47) + GRE header, protocol 0x6558.
    Gre,
}

/// A tunnel port's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelConfig {
    /// VXLAN or GRE.
    pub kind: TunnelKind,
    /// The peer.
    pub remote: Ipv4Addr,
    /// This end (`None`: the kernel picks the source by route; any local
    /// address is received on).
    pub local: Option<Ipv4Addr>,
    /// VXLAN: the VNI (24 bits; `None` is 0). GRE: the key (`None`: no key
    /// is written, and a packet with one is not this tunnel's). Unused
    /// with `key_flow`.
    pub key: Option<u32>,
    /// `key=flow`: the key is the flow's: any key is received (and handed
    /// on as the frame's `tunnel_id`), and what is sent is wrapped in the
    /// frame's `tunnel_id` ([`crate::PacketMeta::tunnel_id`]).
    pub key_flow: bool,
    /// VXLAN: the UDP destination port (and the one received on).
    pub dst_port: u16,
}

/// IP protocol number of GRE.
pub const IPPROTO_GRE: u8 = 47;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// GRE protocol type of Transparent Ethernet Bridging.
pub const ETH_P_TEB: u16 = 0x6558;
/// Length of an IPv4 header without options.
pub const IPV4_HEADER: usize = 20;
/// Outer headers of a VXLAN packet: IPv4 + UDP + VXLAN.
pub const VXLAN_OVERHEAD: usize = IPV4_HEADER + 8 + 8;
/// Longest outer header this module writes.
pub const MAX_OVERHEAD: usize = VXLAN_OVERHEAD;
/// TTL of the outer header.
pub const OUTER_TTL: u8 = 64;
/// The range VXLAN source ports are drawn from (as Linux does by default
/// for its VXLAN devices: the IANA dynamic range).
pub const VXLAN_SRC_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;

const ETH_HEADER: usize = 14;

/// GRE flag bits (first 16 bits of the header).
mod gre_flags {
    pub const CHECKSUM: u16 = 0x8000;
    pub const ROUTING: u16 = 0x4000;
    pub const KEY: u16 = 0x2000;
    pub const SEQUENCE: u16 = 0x1000;
    pub const VERSION: u16 = 0x0007;
}

/// VXLAN's "I" flag: the VNI is valid.
const VXLAN_FLAG_I: u8 = 0x08;

/// The internet checksum of `bytes` (even length).
fn ip_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in bytes.chunks(2) {
        let hi = u32::from(c[0]) << 8;
        let lo = c.get(1).map_or(0, |b| u32::from(*b));
        sum += hi | lo;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The UDP source port for an inner frame: a hash of its addresses and, for
/// IPv4, of its IP addresses, protocol and TCP/UDP ports, mapped into
/// [`VXLAN_SRC_PORTS`] — one flow keeps one port, so routers on the way
/// that spread by 5-tuple keep its packets in order.
pub fn vxlan_src_port(inner: &[u8]) -> u16 {
    // FNV-1a, 32 bits.
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
    };
    eat(inner.get(..ETH_HEADER).unwrap_or(inner));
    let mut l3 = ETH_HEADER;
    let mut ethertype = inner.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]]));
    if ethertype == Some(0x8100) {
        ethertype = inner.get(16..18).map(|t| u16::from_be_bytes([t[0], t[1]]));
        l3 += 4;
    }
    if ethertype == Some(0x0800) {
        if let Some(ip) = inner.get(l3..l3 + IPV4_HEADER) {
            eat(&ip[9..10]);
            eat(&ip[12..20]);
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
            if frag == 0 && matches!(ip[9], 6 | 17 | 132) {
                if let Some(ports) = inner.get(l3 + ihl..l3 + ihl + 4) {
                    eat(ports);
                }
            }
        }
    }
    let span = u32::from(VXLAN_SRC_PORTS.end() - VXLAN_SRC_PORTS.start()) + 1;
    let off = ((u64::from(h) * u64::from(span)) >> 32) as u16;
    VXLAN_SRC_PORTS.start() + off
}

/// The key `cfg` wraps a frame in whose `tunnel_id` (from the pipeline,
/// its low 32 bits) is `tunnel_id`: the port's own, or with `key=flow`
/// the frame's (for VXLAN its low 24 bits, the VNI; for GRE all 32).
pub fn tx_key(cfg: &TunnelConfig, tunnel_id: Option<u32>) -> Option<u32> {
    if cfg.key_flow {
        let id = tunnel_id.unwrap_or(0);
        Some(match cfg.kind {
            TunnelKind::Vxlan => id & VXLAN_MAX_VNI,
            TunnelKind::Gre => id,
        })
    } else {
        cfg.key
    }
}

/// Largest VNI (24 bits).
const VXLAN_MAX_VNI: u32 = 0x00ff_ffff;

/// Writes the outer headers for `inner` into `out` and returns their
/// length (36 for VXLAN, 24 or 28 for GRE) with the port's own key (see
/// [`encap_header_keyed`]).
pub fn encap_header(
    cfg: &TunnelConfig,
    inner: &[u8],
    ident: u16,
    out: &mut [u8; MAX_OVERHEAD],
) -> usize {
    encap_header_keyed(cfg, cfg.key, inner, ident, out)
}

/// Writes the outer headers for `inner` into `out`, with `key` as the
/// VNI (`None`: 0) or the GRE key (`None`: none) whatever `cfg.key` says,
/// and returns their length (36 for VXLAN, 24 or 28 for GRE). `ident` is
/// the IPv4 identification (0 lets the kernel choose); the source is
/// `cfg.local` or 0.0.0.0 (the kernel's choice by route).
pub fn encap_header_keyed(
    cfg: &TunnelConfig,
    key: Option<u32>,
    inner: &[u8],
    ident: u16,
    out: &mut [u8; MAX_OVERHEAD],
) -> usize {
    let (proto, hlen) = match cfg.kind {
        TunnelKind::Vxlan => (IPPROTO_UDP, VXLAN_OVERHEAD),
        TunnelKind::Gre => (
            IPPROTO_GRE,
            IPV4_HEADER + 4 + if key.is_some() { 4 } else { 0 },
        ),
    };
    let total = (hlen + inner.len()).min(usize::from(u16::MAX)) as u16;
    let src = cfg.local.unwrap_or(Ipv4Addr::UNSPECIFIED).octets();
    let dst = cfg.remote.octets();
    let ip = &mut out[..IPV4_HEADER];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[6..8].copy_from_slice(&[0, 0]);
    ip[8] = OUTER_TTL;
    ip[9] = proto;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let csum = ip_checksum(ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    let rest = &mut out[IPV4_HEADER..hlen];
    match cfg.kind {
        TunnelKind::Vxlan => {
            let udp_len = total - IPV4_HEADER as u16;
            rest[0..2].copy_from_slice(&vxlan_src_port(inner).to_be_bytes());
            rest[2..4].copy_from_slice(&cfg.dst_port.to_be_bytes());
            rest[4..6].copy_from_slice(&udp_len.to_be_bytes());
            rest[6..8].copy_from_slice(&[0, 0]);
            let vni = key.unwrap_or(0) & VXLAN_MAX_VNI;
            rest[8..12].copy_from_slice(&[VXLAN_FLAG_I, 0, 0, 0]);
            rest[12..16].copy_from_slice(&(vni << 8).to_be_bytes());
        }
        TunnelKind::Gre => {
            let flags = if key.is_some() { gre_flags::KEY } else { 0 };
            rest[0..2].copy_from_slice(&flags.to_be_bytes());
            rest[2..4].copy_from_slice(&ETH_P_TEB.to_be_bytes());
            if let Some(k) = key {
                rest[4..8].copy_from_slice(&k.to_be_bytes());
            }
        }
    }
    hlen
}

/// Why an encapsulated packet was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecapError {
    /// Not this tunnel's and not counted: another sender or destination
    /// (GRE, whose socket sees every GRE packet).
    NotOurs,
    /// Too short, or headers this end cannot take (`tunnel_malformed`).
    Malformed,
    /// From the peer (or on the port's own UDP socket) but for another
    /// tunnel: other VNI/key/protocol, or a VXLAN sender that is not the
    /// peer (`tunnel_mismatch`).
    Mismatch,
}

/// A frame taken off a tunnel: where the inner frame starts, and the key
/// it came with (the VNI; GRE's key, 0 without one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decapped {
    /// Offset of the inner frame.
    pub at: usize,
    /// The VNI or GRE key (0: GRE without a key).
    pub key: u32,
}

/// The inner frame of a VXLAN payload (the UDP payload, from `src`): its
/// offset in `payload` (see [`decap_vxlan_keyed`] for the VNI too).
pub fn decap_vxlan(cfg: &TunnelConfig, src: Ipv4Addr, payload: &[u8]) -> Result<usize, DecapError> {
    decap_vxlan_keyed(cfg, src, payload).map(|d| d.at)
}

/// The inner frame of a VXLAN payload (the UDP payload, from `src`) and
/// its VNI: any VNI with `key=flow`, else only the port's.
pub fn decap_vxlan_keyed(
    cfg: &TunnelConfig,
    src: Ipv4Addr,
    payload: &[u8],
) -> Result<Decapped, DecapError> {
    let Some(h) = payload.get(..8) else {
        return Err(DecapError::Malformed);
    };
    if h[0] & VXLAN_FLAG_I == 0 {
        return Err(DecapError::Malformed);
    }
    if payload.len() < 8 + ETH_HEADER {
        return Err(DecapError::Malformed);
    }
    let vni = u32::from_be_bytes([0, h[4], h[5], h[6]]);
    if src != cfg.remote || (!cfg.key_flow && vni != cfg.key.unwrap_or(0) & VXLAN_MAX_VNI) {
        return Err(DecapError::Mismatch);
    }
    Ok(Decapped { at: 8, key: vni })
}

/// The inner frame of a GRE packet as a raw socket hands it over (outer
/// IPv4 header first): its offset in `packet` (see [`decap_gre_keyed`]
/// for the key too).
pub fn decap_gre(cfg: &TunnelConfig, packet: &[u8]) -> Result<usize, DecapError> {
    decap_gre_keyed(cfg, packet).map(|d| d.at)
}

/// The inner frame of a GRE packet as a raw socket hands it over (outer
/// IPv4 header first) and its key (0 without one): any key or none with
/// `key=flow`, else exactly the port's.
pub fn decap_gre_keyed(cfg: &TunnelConfig, packet: &[u8]) -> Result<Decapped, DecapError> {
    let Some(ip) = packet.get(..IPV4_HEADER) else {
        return Err(DecapError::Malformed);
    };
    if ip[0] >> 4 != 4 || ip[9] != IPPROTO_GRE {
        return Err(DecapError::Malformed);
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    if src != cfg.remote || cfg.local.is_some_and(|l| l != dst) {
        return Err(DecapError::NotOurs);
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ihl < IPV4_HEADER {
        return Err(DecapError::Malformed);
    }
    let Some(g) = packet.get(ihl..ihl + 4) else {
        return Err(DecapError::Malformed);
    };
    let flags = u16::from_be_bytes([g[0], g[1]]);
    let proto = u16::from_be_bytes([g[2], g[3]]);
    if flags & (gre_flags::ROUTING | gre_flags::VERSION) != 0 {
        return Err(DecapError::Malformed);
    }
    let mut at = ihl + 4;
    if flags & gre_flags::CHECKSUM != 0 {
        at += 4;
    }
    let key = if flags & gre_flags::KEY != 0 {
        let k = packet.get(at..at + 4).ok_or(DecapError::Malformed)?;
        at += 4;
        Some(u32::from_be_bytes([k[0], k[1], k[2], k[3]]))
    } else {
        None
    };
    if flags & gre_flags::SEQUENCE != 0 {
        at += 4;
    }
    if packet.len() < at + ETH_HEADER {
        return Err(DecapError::Malformed);
    }
    if proto != ETH_P_TEB || (!cfg.key_flow && key != cfg.key) {
        return Err(DecapError::Mismatch);
    }
    Ok(Decapped {
        at,
        key: key.unwrap_or(0),
    })
}

/// A raw IPv4 socket that sends complete IPv4 packets (`IPPROTO_RAW`
/// implies `IP_HDRINCL`).
fn raw_sender() -> io::Result<OwnedFd> {
    sys::socket(
        libc::AF_INET,
        libc::SOCK_RAW | libc::SOCK_NONBLOCK,
        libc::IPPROTO_RAW,
    )
}

/// Sends one IPv4 packet to `dst` on a raw socket.
fn send_to(fd: &OwnedFd, packet: &[u8], dst: Ipv4Addr) -> io::Result<()> {
    // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_addr.s_addr = u32::from_ne_bytes(dst.octets());
    // SAFETY: `packet` is valid for reads of its length and `sa` is a live
    // sockaddr_in of the size passed, for the duration of the call.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            packet.as_ptr() as *const libc::c_void,
            packet.len(),
            0,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Receives one packet from a raw socket into `buf`; its length.
fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length for the call.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// The sending half of a tunnel port: encapsulates and sends.
struct Sender {
    cfg: TunnelConfig,
    fd: OwnedFd,
    scratch: Vec<u8>,
}

impl Sender {
    fn new(cfg: TunnelConfig) -> io::Result<Sender> {
        Ok(Sender {
            cfg,
            fd: raw_sender()?,
            scratch: vec![0u8; usize::from(u16::MAX)],
        })
    }

    /// The [`PortBackend::tx_burst`] contract.
    fn send(&mut self, pkts: &mut TxBurst, counters: &mut PortCounters) -> io::Result<usize> {
        let mut taken = 0;
        while let Some(p) = pkts.pkts().first() {
            let inner = p.data();
            if inner.len() < ETH_HEADER {
                counters.tx_drops.runt += 1;
            } else if inner.len() + MAX_OVERHEAD > self.scratch.len() {
                counters.tx_drops.oversize += 1;
            } else {
                let mut hdr = [0u8; MAX_OVERHEAD];
                let key = tx_key(&self.cfg, p.meta.tunnel_id());
                let hl = encap_header_keyed(&self.cfg, key, inner, 0, &mut hdr);
                self.scratch[..hl].copy_from_slice(&hdr[..hl]);
                self.scratch[hl..hl + inner.len()].copy_from_slice(inner);
                match send_to(&self.fd, &self.scratch[..hl + inner.len()], self.cfg.remote) {
                    Ok(()) => {
                        counters.count_tx(inner.len());
                    }
                    Err(e) if sys::would_block(&e) => break,
                    Err(e) => match e.raw_os_error() {
                        Some(libc::EMSGSIZE) => counters.tx_drops.oversize += 1,
                        Some(libc::ENOBUFS) => counters.tx_drops.queue_full += 1,
                        Some(libc::ENETDOWN)
                        | Some(libc::ENETUNREACH)
                        | Some(libc::EHOSTUNREACH) => counters.tx_drops.link_down += 1,
                        Some(libc::EBADF) => return Err(e),
                        _ => counters.tx_errors += 1,
                    },
                }
            }
            pkts.drain_front(1);
            taken += 1;
        }
        Ok(taken)
    }
}

/// Where a tunnel port receives.
enum Receiver {
    /// VXLAN: a UDP socket of its own.
    Udp(UdpSocket),
    /// GRE: a raw `IPPROTO_GRE` socket (outer IPv4 header included).
    Gre(OwnedFd),
}

/// A VXLAN or GRE port.
pub struct TunnelPort {
    name: String,
    rx: Receiver,
    tx: Sender,
    scratch: Vec<u8>,
    counters: PortCounters,
}

impl TunnelPort {
    /// Opens the sockets of tunnel `name` in the calling thread's network
    /// namespace. VXLAN binds its UDP port now: a port another socket
    /// holds is an error here.
    pub fn open(name: &str, cfg: &TunnelConfig) -> io::Result<TunnelPort> {
        let ctx = |what: &str| format!("tunnel port {name:?}: {what}");
        let rx = match cfg.kind {
            TunnelKind::Vxlan => {
                let at =
                    SocketAddrV4::new(cfg.local.unwrap_or(Ipv4Addr::UNSPECIFIED), cfg.dst_port);
                let s = UdpSocket::bind(at)
                    .map_err(|e| sys::context(e, ctx(&format!("bind UDP {at}"))))?;
                s.set_nonblocking(true)
                    .map_err(|e| sys::context(e, ctx("non-blocking")))?;
                Receiver::Udp(s)
            }
            TunnelKind::Gre => Receiver::Gre(
                sys::socket(
                    libc::AF_INET,
                    libc::SOCK_RAW | libc::SOCK_NONBLOCK,
                    libc::c_int::from(IPPROTO_GRE),
                )
                .map_err(|e| sys::context(e, ctx("raw GRE socket")))?,
            ),
        };
        let tx = Sender::new(*cfg).map_err(|e| sys::context(e, ctx("raw IPv4 socket")))?;
        Ok(TunnelPort {
            name: name.to_string(),
            rx,
            tx,
            scratch: vec![0u8; 65_536],
            counters: PortCounters::default(),
        })
    }

    /// Counts a packet not taken.
    fn refuse(&mut self, e: DecapError) {
        match e {
            DecapError::NotOurs => {}
            DecapError::Malformed => self.counters.rx_drops.tunnel_malformed += 1,
            DecapError::Mismatch => self.counters.rx_drops.tunnel_mismatch += 1,
        }
    }
}

impl PortBackend for TunnelPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        let mut got = 0;
        while out.room() > 0 {
            let cfg = self.tx.cfg;
            let res = match &self.rx {
                Receiver::Udp(s) => match s.recv_from(&mut self.scratch) {
                    Ok((n, from)) => {
                        let src = match from {
                            std::net::SocketAddr::V4(a) => *a.ip(),
                            std::net::SocketAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
                        };
                        Ok((n, decap_vxlan_keyed(&cfg, src, &self.scratch[..n])))
                    }
                    Err(e) => Err(e),
                },
                Receiver::Gre(fd) => match recv(fd, &mut self.scratch) {
                    Ok(n) => Ok((n, decap_gre_keyed(&cfg, &self.scratch[..n]))),
                    Err(e) => Err(e),
                },
            };
            match res {
                Ok((n, Ok(d))) => {
                    let frame = &self.scratch[d.at..n];
                    let mut pkt = PacketBuf::with_headroom(frame, DEFAULT_HEADROOM);
                    pkt.meta.set_tunnel_id(Some(d.key));
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += frame.len() as u64;
                    let _ = out.push(pkt);
                    got += 1;
                }
                Ok((_, Err(e))) => self.refuse(e),
                Err(e) if sys::would_block(&e) => break,
                Err(e) => {
                    self.counters.rx_errors += 1;
                    // ICMP errors reported on the UDP socket are not fatal.
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ECONNREFUSED)
                            | Some(libc::EHOSTUNREACH)
                            | Some(libc::ENETUNREACH)
                    ) {
                        continue;
                    }
                    return Err(e);
                }
            }
        }
        Ok(got)
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        self.tx.send(pkts, &mut self.counters)
    }

    fn link_state(&self) -> LinkState {
        LinkState::Up
    }

    fn stats(&self) -> PortCounters {
        self.counters
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(match &self.rx {
            Receiver::Udp(s) => s.as_raw_fd(),
            Receiver::Gre(fd) => fd.as_raw_fd(),
        })
    }

    fn split_sender(&self) -> io::Result<Option<Box<dyn PortBackend>>> {
        let tx = TunnelTx {
            tx: Sender::new(self.tx.cfg)?,
            counters: PortCounters::default(),
        };
        Ok(Some(Box::new(SendOnly::new(&self.name, tx))))
    }
}

/// The sending half of a tunnel port's split sender ([`SendOnly`]): its own
/// raw socket.
struct TunnelTx {
    tx: Sender,
    counters: PortCounters,
}

impl Transmit for TunnelTx {
    fn send(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        self.tx.send(pkts, &mut self.counters)
    }

    fn link_state(&self, _name: &str) -> LinkState {
        LinkState::Up
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 60-byte inner frame: 02:00:00:00:00:02 <- 02:00:00:00:00:01,
    /// IPv4 10.0.0.1 -> 10.0.0.2 UDP 1000 -> 2000.
    fn inner() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&2000u16.to_be_bytes());
        f
    }

    fn vxlan() -> TunnelConfig {
        TunnelConfig {
            kind: TunnelKind::Vxlan,
            remote: Ipv4Addr::new(192, 0, 2, 2),
            local: Some(Ipv4Addr::new(192, 0, 2, 1)),
            key: Some(42),
            key_flow: false,
            dst_port: 4789,
        }
    }

    fn gre(key: Option<u32>) -> TunnelConfig {
        TunnelConfig {
            kind: TunnelKind::Gre,
            key,
            dst_port: 0,
            ..vxlan()
        }
    }

    #[test]
    fn vxlan_header_matches_hand_checked_vector() {
        let f = inner();
        let mut h = [0u8; MAX_OVERHEAD];
        assert_eq!(encap_header(&vxlan(), &f, 0x1234, &mut h), 36);
        let sport = vxlan_src_port(&f);
        assert!(VXLAN_SRC_PORTS.contains(&sport));
        let [sp0, sp1] = sport.to_be_bytes();
        // Total length 36 + 60 = 96 = 0x60; UDP length 76 = 0x4c. The
        // header checksum, by hand: words 4500 0060 1234 0000 4011 0000
        // c000 0201 c000 0202 sum to 0x21ba8 -> 0x1baa, complement 0xe455.
        #[rustfmt::skip]
        let want = [
            0x45, 0x00, 0x00, 0x60, 0x12, 0x34, 0x00, 0x00,
            0x40, 0x11, 0xe4, 0x55, 192, 0, 2, 1, 192, 0, 2, 2,
            sp0, sp1, 0x12, 0xb5, 0x00, 0x4c, 0x00, 0x00,
            0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x00,
        ];
        assert_eq!(h, want);
        // The checksum verifies to zero.
        assert_eq!(ip_checksum(&h[..20]), 0);
    }

    #[test]
    fn gre_header_with_and_without_key() {
        let f = inner();
        let mut h = [0u8; MAX_OVERHEAD];
        assert_eq!(encap_header(&gre(Some(42)), &f, 0, &mut h), 28);
        // Total 88 = 0x58, protocol 47 = 0x2f.
        assert_eq!(&h[..4], &[0x45, 0, 0, 0x58]);
        assert_eq!(h[9], 0x2f);
        assert_eq!(ip_checksum(&h[..20]), 0);
        assert_eq!(&h[20..28], &[0x20, 0x00, 0x65, 0x58, 0, 0, 0, 42]);
        assert_eq!(encap_header(&gre(None), &f, 0, &mut h), 24);
        assert_eq!(&h[20..24], &[0x00, 0x00, 0x65, 0x58]);
    }

    #[test]
    fn source_port_follows_the_flow() {
        let a = inner();
        let mut b = inner();
        assert_eq!(vxlan_src_port(&a), vxlan_src_port(&b));
        b[35] ^= 1; // another UDP source port
        assert_ne!(vxlan_src_port(&a), vxlan_src_port(&b));
        for len in [0, 1, 13, 14, 20, 40] {
            assert!(VXLAN_SRC_PORTS.contains(&vxlan_src_port(&a[..len])));
        }
    }

    /// Two tunnel ports facing each other over loopback in a namespace:
    /// 127.0.0.1 <-> 127.0.0.2, both kinds, the split sender too; what
    /// one sends the other receives unchanged, and a port does not take
    /// its own GRE packets (the raw socket sees them too).
    #[test]
    fn ports_exchange_frames_over_loopback_as_root() {
        use crate::port::Burst;
        use crate::testnet::{rx_test_frames, test_frame, NetNs};
        use std::time::Duration;
        let Some(ns) = NetNs::for_test("tunnel") else {
            return;
        };
        ns.run(|| {
            let (one, two) = (Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2));
            for kind in [TunnelKind::Vxlan, TunnelKind::Gre] {
                let cfg = |local, remote| TunnelConfig {
                    kind,
                    remote,
                    local: Some(local),
                    key: Some(7),
                    key_flow: false,
                    dst_port: if kind == TunnelKind::Vxlan { 4789 } else { 0 },
                };
                let mut a = TunnelPort::open("a", &cfg(one, two)).unwrap();
                let mut b = TunnelPort::open("b", &cfg(two, one)).unwrap();
                let mut sender = a.split_sender().unwrap().expect("tunnel ports split");
                let mut burst = Burst::new();
                for seq in 0..5 {
                    burst
                        .push(PacketBuf::from_slice(&test_frame(1, seq, 100)))
                        .unwrap();
                }
                burst.push(PacketBuf::from_slice(&[0u8; 10])).unwrap();
                assert_eq!(a.tx_burst(&mut burst).unwrap(), 6);
                burst
                    .push(PacketBuf::from_slice(&test_frame(1, 5, 100)))
                    .unwrap();
                assert_eq!(sender.tx_burst(&mut burst).unwrap(), 1);
                let got: Vec<Vec<u8>> = rx_test_frames(&mut b, 6, Duration::from_secs(10))
                    .iter()
                    .map(|p| {
                        assert_eq!(p.meta.tunnel_id(), Some(7), "{kind:?}");
                        p.data().to_vec()
                    })
                    .collect();
                let want: Vec<Vec<u8>> = (0..6).map(|s| test_frame(1, s, 100)).collect();
                assert_eq!(got, want, "{kind:?}");
                assert_eq!(a.stats().tx_packets + sender.stats().tx_packets, 6);
                assert_eq!(a.stats().tx_drops.runt, 1);
                assert_eq!(b.stats().rx_packets, 6);
                // The sender's own GRE packets reach its raw socket too,
                // and are not its to take or count.
                assert_eq!(a.rx_burst(&mut burst).unwrap(), 0, "{kind:?}");
                assert_eq!(a.stats().rx_dropped(), 0, "{kind:?}");
                drop((a, b, sender));

                // key=flow both ends: each frame leaves with its own
                // tunnel_id and arrives with it.
                let flow = |local, remote| TunnelConfig {
                    key: None,
                    key_flow: true,
                    ..cfg(local, remote)
                };
                let mut a = TunnelPort::open("a", &flow(one, two)).unwrap();
                let mut b = TunnelPort::open("b", &flow(two, one)).unwrap();
                for (seq, id) in [(0u16, Some(42u32)), (1, Some(43)), (2, None)] {
                    let mut p = PacketBuf::from_slice(&test_frame(1, seq.into(), 100));
                    p.meta.set_tunnel_id(id);
                    burst.push(p).unwrap();
                }
                assert_eq!(a.tx_burst(&mut burst).unwrap(), 3);
                let got: Vec<_> = rx_test_frames(&mut b, 3, Duration::from_secs(10))
                    .iter()
                    .map(|p| (p.data().to_vec(), p.meta.tunnel_id()))
                    .collect();
                let want: Vec<_> = [(0, 42), (1, 43), (2, 0)]
                    .into_iter()
                    .map(|(s, id)| (test_frame(1, s, 100), Some(id)))
                    .collect();
                assert_eq!(got, want, "{kind:?} key=flow");
            }
        });
    }

    /// `key=flow`: what is sent carries the frame's tunnel_id (VXLAN its
    /// low 24 bits), and any VNI/key (or none, GRE) from the peer is taken
    /// and reported; a fixed-key port reports its own key.
    #[test]
    fn flow_key_encap_and_decap() {
        let f = inner();
        let flow = TunnelConfig {
            key: None,
            key_flow: true,
            ..vxlan()
        };
        let mut h = [0u8; MAX_OVERHEAD];
        for (id, vni) in [
            (Some(42), 42u32),
            (Some(43), 43),
            (None, 0),
            (Some(0xff00_002a), 42),
        ] {
            let key = tx_key(&flow, id);
            assert_eq!(key, Some(vni));
            assert_eq!(encap_header_keyed(&flow, key, &f, 0, &mut h), 36);
            let mut want = vec![0x08u8, 0, 0, 0];
            want.extend_from_slice(&(vni << 8).to_be_bytes());
            assert_eq!(&h[28..36], &want[..]);
            let mut payload = h[28..36].to_vec();
            payload.extend_from_slice(&f);
            assert_eq!(
                decap_vxlan_keyed(&flow, flow.remote, &payload),
                Ok(Decapped { at: 8, key: vni })
            );
            // A fixed-key port takes only its own VNI, and reports it.
            let fixed = vxlan();
            let want = if vni == 42 {
                Ok(Decapped { at: 8, key: 42 })
            } else {
                Err(DecapError::Mismatch)
            };
            assert_eq!(decap_vxlan_keyed(&fixed, fixed.remote, &payload), want);
            // The fixed-key port ignores the frame's tunnel_id on output.
            assert_eq!(tx_key(&fixed, id), Some(42));
        }
        // Still only from the peer.
        let mut payload = h[28..36].to_vec();
        payload.extend_from_slice(&f);
        assert_eq!(
            decap_vxlan_keyed(&flow, Ipv4Addr::new(192, 0, 2, 9), &payload),
            Err(DecapError::Mismatch)
        );

        // GRE: the key is always written, the low 32 bits of tunnel_id.
        let gflow = TunnelConfig {
            key_flow: true,
            ..gre(None)
        };
        let peer = |c: TunnelConfig| TunnelConfig {
            remote: c.local.unwrap(),
            local: Some(c.remote),
            ..c
        };
        for (id, key) in [(Some(7u32), 7u32), (Some(u32::MAX), u32::MAX), (None, 0)] {
            let k = tx_key(&gflow, id);
            assert_eq!(k, Some(key));
            let hl = encap_header_keyed(&peer(gflow), k, &f, 0, &mut h);
            assert_eq!(hl, 28);
            let mut want = vec![0x20u8, 0, 0x65, 0x58];
            want.extend_from_slice(&key.to_be_bytes());
            assert_eq!(&h[20..28], &want[..]);
            let mut pkt = h[..hl].to_vec();
            pkt.extend_from_slice(&f);
            assert_eq!(decap_gre_keyed(&gflow, &pkt), Ok(Decapped { at: 28, key }));
        }
        // A packet without a key is taken too, as key 0.
        let hl = encap_header_keyed(&peer(gflow), None, &f, 0, &mut h);
        let mut pkt = h[..hl].to_vec();
        pkt.extend_from_slice(&f);
        assert_eq!(
            decap_gre_keyed(&gflow, &pkt),
            Ok(Decapped { at: 24, key: 0 })
        );
        // Another protocol is still refused.
        pkt[23] = 0;
        assert_eq!(decap_gre_keyed(&gflow, &pkt), Err(DecapError::Mismatch));
    }

    #[test]
    fn round_trip_and_refusals() {
        let f = inner();
        let cfg = vxlan();
        let mut h = [0u8; MAX_OVERHEAD];
        encap_header(&cfg, &f, 0, &mut h);
        let mut udp_payload = h[28..36].to_vec();
        udp_payload.extend_from_slice(&f);
        assert_eq!(decap_vxlan(&cfg, cfg.remote, &udp_payload), Ok(8));
        let other = Ipv4Addr::new(192, 0, 2, 9);
        assert_eq!(
            decap_vxlan(&cfg, other, &udp_payload),
            Err(DecapError::Mismatch)
        );
        let mut bad = udp_payload.clone();
        bad[6] = 1; // VNI 42 + 65536
        assert_eq!(
            decap_vxlan(&cfg, cfg.remote, &bad),
            Err(DecapError::Mismatch)
        );
        bad = udp_payload.clone();
        bad[0] = 0; // no I flag
        assert_eq!(
            decap_vxlan(&cfg, cfg.remote, &bad),
            Err(DecapError::Malformed)
        );
        assert_eq!(
            decap_vxlan(&cfg, cfg.remote, &udp_payload[..8 + 13]),
            Err(DecapError::Malformed)
        );
        assert_eq!(
            decap_vxlan(&cfg, cfg.remote, &udp_payload[..7]),
            Err(DecapError::Malformed)
        );

        // GRE: the raw socket hands over the outer IPv4 header too, as the
        // peer sent it (source = the peer).
        let g = gre(Some(42));
        let peer = TunnelConfig {
            remote: g.local.unwrap(),
            local: Some(g.remote),
            ..g
        };
        let hl = encap_header(&peer, &f, 0, &mut h);
        let mut pkt = h[..hl].to_vec();
        pkt.extend_from_slice(&f);
        assert_eq!(decap_gre(&g, &pkt), Ok(28));
        let elsewhere = TunnelConfig {
            remote: Ipv4Addr::new(192, 0, 2, 77),
            ..g
        };
        assert_eq!(decap_gre(&elsewhere, &pkt), Err(DecapError::NotOurs));
        let other_local = TunnelConfig {
            local: Some(Ipv4Addr::new(192, 0, 2, 78)),
            ..g
        };
        assert_eq!(decap_gre(&other_local, &pkt), Err(DecapError::NotOurs));
        let g43 = TunnelConfig { key: Some(43), ..g };
        assert_eq!(decap_gre(&g43, &pkt), Err(DecapError::Mismatch));
        let gnokey = TunnelConfig { key: None, ..g };
        assert_eq!(decap_gre(&gnokey, &pkt), Err(DecapError::Mismatch));
        let mut bad = pkt.clone();
        bad[23] = 0x00; // protocol 0x6500
        assert_eq!(decap_gre(&g, &bad), Err(DecapError::Mismatch));
        bad = pkt.clone();
        bad[20] |= 0x40; // routing present
        assert_eq!(decap_gre(&g, &bad), Err(DecapError::Malformed));
        bad = pkt.clone();
        bad[21] |= 0x01; // version 1
        assert_eq!(decap_gre(&g, &bad), Err(DecapError::Malformed));
        assert_eq!(decap_gre(&g, &pkt[..30]), Err(DecapError::Malformed));
        assert_eq!(decap_gre(&g, &pkt[..10]), Err(DecapError::Malformed));
        // Checksum and sequence words are skipped.
        let mut cs = pkt[..20].to_vec();
        cs.extend_from_slice(&[0xb0, 0x00, 0x65, 0x58, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 7]);
        cs.extend_from_slice(&f);
        assert_eq!(decap_gre(&g, &cs), Ok(36));
    }
}
