//! Link up/down events from the kernel, through an rtnetlink socket
//! subscribed to the link multicast group (`RTMGRP_LINK`).
//!
//! [`LinkWatcher`] is non-blocking: [`LinkWatcher::poll`] drains whatever
//! events are queued and returns at once, and [`LinkWatcher::fd`] can be put
//! in a poll set. [`LinkWatcher::dump`] asks for the current state of every
//! link (use it at start and after an overrun). The message parser,
//! [`parse_link_messages`], is a plain function over bytes, bounds-checked,
//! tested without sockets.
//!
//! A link is [`LinkState::Up`] when it is administratively up and running
//! (`IFF_UP` and `IFF_RUNNING`, the kernel's operational "up").
//!
//! When events arrive faster than they are read the kernel drops some and
//! says so (`ENOBUFS`); the watcher counts that in [`LinkWatcher::overruns`]
//! and the caller should [`dump`](LinkWatcher::dump) to resynchronise.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use netlink_packet_core::{
    ErrorBuffer, NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NlasIterator,
    ParseableParametrized, NLMSG_DONE, NLMSG_ERROR, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkHeader, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::port::LinkState;
use crate::sys;

/// A netlink message header's length.
const NLMSG_HDR_LEN: usize = 16;
/// `struct ifinfomsg`'s length: a link message's fixed part.
const IFINFO_LEN: usize = 16;

/// What happened to a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkChange {
    /// The link exists with the given state (new, changed, or from a dump).
    Present,
    /// The link was removed.
    Removed,
}

/// One link event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkEvent {
    /// Interface index.
    pub ifindex: u32,
    /// Interface name, when the message carried one.
    pub name: Option<String>,
    /// Interface flags (`IFF_*`).
    pub flags: u32,
    /// Up or down (removed links are down).
    pub state: LinkState,
    /// New/changed or removed.
    pub change: LinkChange,
}

/// A malformed netlink message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkParseError {
    /// A message header's length is shorter than the header or runs past
    /// the buffer.
    BadMessageLength {
        /// Offset of the message in the buffer.
        offset: usize,
    },
    /// A link message is too short for its `ifinfomsg`.
    ShortLinkMessage {
        /// Offset of the message in the buffer.
        offset: usize,
    },
    /// The kernel answered a request with an error (negative errno).
    Kernel(i32),
}

impl std::fmt::Display for LinkParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkParseError::BadMessageLength { offset } => {
                write!(f, "netlink message at {offset} has a bad length")
            }
            LinkParseError::ShortLinkMessage { offset } => {
                write!(f, "link message at {offset} is too short")
            }
            LinkParseError::Kernel(e) => write!(f, "netlink error {e}"),
        }
    }
}

impl std::error::Error for LinkParseError {}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Parses a buffer of netlink messages, appending one event per link
/// message. Returns `Ok(true)` when the buffer held `NLMSG_DONE` (the end of
/// a dump). Other message types are skipped.
pub fn parse_link_messages(buf: &[u8], out: &mut Vec<LinkEvent>) -> Result<bool, LinkParseError> {
    let mut off = 0;
    let mut done = false;
    while off + NLMSG_HDR_LEN <= buf.len() {
        let bad = LinkParseError::BadMessageLength { offset: off };
        let msg = NetlinkBuffer::new_checked(buf.get(off..).unwrap_or(&[])).map_err(|_| bad)?;
        let len = msg.length() as usize;
        let payload = msg.payload();
        match msg.message_type() {
            NLMSG_DONE => done = true,
            NLMSG_ERROR => {
                // A zero code is an acknowledgement, not an error.
                if let Some(code) = ErrorBuffer::new_checked(payload)
                    .ok()
                    .and_then(|e| e.code())
                {
                    return Err(LinkParseError::Kernel(code.get()));
                }
            }
            libc::RTM_NEWLINK | libc::RTM_DELLINK => out.push(parse_link(
                payload,
                off,
                msg.message_type() == libc::RTM_DELLINK,
            )?),
            _ => {} // NLMSG_NOOP and other families
        }
        off += align4(len);
    }
    Ok(done)
}

/// One link message's event: its `ifinfomsg` and, of its attributes, the
/// name. A bad attribute ends the attribute list, not the event.
fn parse_link(payload: &[u8], offset: usize, removed: bool) -> Result<LinkEvent, LinkParseError> {
    let short = LinkParseError::ShortLinkMessage { offset };
    if payload.len() < IFINFO_LEN {
        return Err(short);
    }
    let header = LinkHeader::parse(payload).map_err(|_| short)?;
    let mut name = None;
    for nla in NlasIterator::new(payload.get(IFINFO_LEN..).unwrap_or(&[])) {
        let Ok(nla) = nla else { break };
        if nla.kind() != libc::IFLA_IFNAME {
            continue;
        }
        if let Ok(LinkAttribute::IfName(n)) =
            LinkAttribute::parse_with_param(&nla, header.interface_family)
        {
            name = Some(n);
        }
    }
    let flags = header.flags.bits();
    let up = flags & libc::IFF_UP as u32 != 0 && flags & libc::IFF_RUNNING as u32 != 0;
    Ok(LinkEvent {
        ifindex: header.index,
        name,
        flags,
        state: if up && !removed {
            LinkState::Up
        } else {
            LinkState::Down
        },
        change: if removed {
            LinkChange::Removed
        } else {
            LinkChange::Present
        },
    })
}

/// Watches link events of the calling thread's network namespace.
pub struct LinkWatcher {
    sock: Socket,
    buf: Vec<u8>,
    seq: u32,
    overruns: u64,
}

impl LinkWatcher {
    /// Opens a non-blocking rtnetlink socket subscribed to link events.
    pub fn new() -> io::Result<Self> {
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(|e| sys::context(e, "netlink socket"))?;
        sock.set_non_blocking(true)
            .map_err(|e| sys::context(e, "netlink socket"))?;
        sock.bind(&SocketAddr::new(0, libc::RTMGRP_LINK as u32))
            .map_err(|e| sys::context(e, "bind netlink to RTMGRP_LINK"))?;
        Ok(LinkWatcher {
            sock,
            buf: vec![0u8; 1 << 16],
            seq: 0,
            overruns: 0,
        })
    }

    /// The socket, readable when events are queued.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Times the kernel dropped events because they were not read in time.
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// Receives one datagram; `Ok(None)` when nothing is queued.
    fn recv(&mut self) -> io::Result<Option<usize>> {
        loop {
            match self.sock.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => return Ok(Some(n.min(self.buf.len()))),
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => return Ok(None),
                    Some(libc::ENOBUFS) => {
                        self.overruns += 1;
                        continue;
                    }
                    _ => return Err(e),
                },
            }
        }
    }

    /// Appends every queued event to `out` without blocking; returns how
    /// many were appended. Malformed messages are an `InvalidData` error.
    pub fn poll(&mut self, out: &mut Vec<LinkEvent>) -> io::Result<usize> {
        let before = out.len();
        while let Some(n) = self.recv()? {
            let data = self.buf.get(..n).unwrap_or(&[]);
            parse_link_messages(data, out)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        }
        Ok(out.len() - before)
    }

    /// Asks the kernel for every link and waits (up to one second) for the
    /// answer; returns one `Present` event per link. Events that arrive in
    /// between are returned too.
    pub fn dump(&mut self) -> io::Result<Vec<LinkEvent>> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = self.seq;
        let mut msg = NetlinkMessage::new(
            header,
            NetlinkPayload::from(RouteNetlinkMessage::GetLink(LinkMessage::default())),
        );
        msg.finalize();
        let mut req = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut req);
        self.sock
            .send(&req, 0)
            .map_err(|e| sys::context(e, "netlink RTM_GETLINK"))?;
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        loop {
            match self.recv()? {
                Some(n) => {
                    let data = self.buf.get(..n).unwrap_or(&[]);
                    if parse_link_messages(data, &mut out)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
                    {
                        return Ok(out);
                    }
                }
                None if std::time::Instant::now() > deadline => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no answer to the netlink link dump",
                    ))
                }
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testnet::NetNs;
    use libc::{IFLA_IFNAME, RTM_DELLINK, RTM_NEWLINK};
    use std::time::{Duration, Instant};

    /// Builds one netlink link message.
    fn link_msg(ty: u16, ifindex: u32, flags: u32, name: Option<&str>) -> Vec<u8> {
        let mut body = vec![0u8; IFINFO_LEN];
        body[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        body[8..12].copy_from_slice(&flags.to_ne_bytes());
        // An attribute we do not care about (IFLA_MTU), then the name.
        body.extend_from_slice(&8u16.to_ne_bytes());
        body.extend_from_slice(&4u16.to_ne_bytes());
        body.extend_from_slice(&1500u32.to_ne_bytes());
        if let Some(n) = name {
            let alen = 4 + n.len() + 1;
            body.extend_from_slice(&(alen as u16).to_ne_bytes());
            body.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
            body.extend_from_slice(n.as_bytes());
            body.push(0);
            while !body.len().is_multiple_of(4) {
                body.push(0);
            }
        }
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDR_LEN + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn parses_new_and_removed_links() {
        let up = (libc::IFF_UP | libc::IFF_RUNNING) as u32;
        let mut buf = link_msg(RTM_NEWLINK, 5, up, Some("veth0"));
        buf.extend(link_msg(RTM_NEWLINK, 6, libc::IFF_UP as u32, Some("eth1")));
        buf.extend(link_msg(RTM_DELLINK, 7, up, None));
        let mut out = Vec::new();
        assert_eq!(parse_link_messages(&buf, &mut out), Ok(false));
        assert_eq!(
            out,
            vec![
                LinkEvent {
                    ifindex: 5,
                    name: Some("veth0".into()),
                    flags: up,
                    state: LinkState::Up,
                    change: LinkChange::Present
                },
                LinkEvent {
                    ifindex: 6,
                    name: Some("eth1".into()),
                    flags: libc::IFF_UP as u32,
                    state: LinkState::Down,
                    change: LinkChange::Present
                },
                LinkEvent {
                    ifindex: 7,
                    name: None,
                    flags: up,
                    state: LinkState::Down,
                    change: LinkChange::Removed
                },
            ]
        );
    }

    #[test]
    fn done_and_errors_are_reported() {
        let mut done = vec![0u8; 20];
        done[0..4].copy_from_slice(&20u32.to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        assert_eq!(parse_link_messages(&done, &mut Vec::new()), Ok(true));
        let mut err = vec![0u8; 36];
        err[0..4].copy_from_slice(&36u32.to_ne_bytes());
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(
            parse_link_messages(&err, &mut Vec::new()),
            Err(LinkParseError::Kernel(-1))
        );
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        let good = link_msg(RTM_NEWLINK, 5, 0, Some("x"));
        // Length past the buffer.
        let mut long = good.clone();
        long[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(
            parse_link_messages(&long, &mut Vec::new()),
            Err(LinkParseError::BadMessageLength { offset: 0 })
        );
        // Length shorter than a header.
        let mut tiny = good.clone();
        tiny[0..4].copy_from_slice(&4u32.to_ne_bytes());
        assert!(parse_link_messages(&tiny, &mut Vec::new()).is_err());
        // A link message without its ifinfomsg.
        let mut short = good[..NLMSG_HDR_LEN + 4].to_vec();
        short[0..4].copy_from_slice(&((NLMSG_HDR_LEN + 4) as u32).to_ne_bytes());
        assert_eq!(
            parse_link_messages(&short, &mut Vec::new()),
            Err(LinkParseError::ShortLinkMessage { offset: 0 })
        );
        // Every truncation and a bad attribute length: never a panic.
        for cut in 0..good.len() {
            let _ = parse_link_messages(&good[..cut], &mut Vec::new());
        }
        let mut bad_attr = good.clone();
        bad_attr[NLMSG_HDR_LEN + IFINFO_LEN..NLMSG_HDR_LEN + IFINFO_LEN + 2]
            .copy_from_slice(&500u16.to_ne_bytes());
        let mut out = Vec::new();
        parse_link_messages(&bad_attr, &mut out).unwrap();
        assert_eq!(out[0].name, None);
    }

    fn wait_for(w: &mut LinkWatcher, what: impl Fn(&LinkEvent) -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut evs = Vec::new();
        while Instant::now() < deadline {
            w.poll(&mut evs).unwrap();
            if evs.iter().any(&what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn watcher_sees_links_come_and_go_as_root() {
        let Some(ns) = NetNs::for_test("link") else {
            return;
        };
        let ns = &ns;
        ns.run(|| {
            let mut w = LinkWatcher::new().unwrap();
            let all = w.dump().unwrap();
            assert!(
                all.iter()
                    .any(|e| e.name.as_deref() == Some("lo") && e.state == LinkState::Up),
                "{all:?}"
            );
            ns.veth("wa", "wb");
            assert!(wait_for(&mut w, |e| e.name.as_deref() == Some("wa")
                && e.state == LinkState::Up));
            ns.exec(&["ip", "link", "set", "wb", "down"]);
            // The peer going down takes wa's carrier away.
            assert!(wait_for(&mut w, |e| e.name.as_deref() == Some("wa")
                && e.state == LinkState::Down));
            ns.exec(&["ip", "link", "del", "wa"]);
            assert!(wait_for(&mut w, |e| e.name.as_deref() == Some("wa")
                && e.change == LinkChange::Removed));
            assert_eq!(w.overruns(), 0);
        });
    }
}
