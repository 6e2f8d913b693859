//! What management sees of the controller channels: each open channel's
//! status and role, and the addresses the listeners bound.

use crate::roles::ConnId;
use ofp::role::controller_role;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The role of a channel, as management shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelRole {
    /// `OFPCR_ROLE_EQUAL` (also a channel that asked for no role).
    Equal,
    /// `OFPCR_ROLE_MASTER`.
    Master,
    /// `OFPCR_ROLE_SLAVE`.
    Slave,
}

impl ChannelRole {
    /// From an `OFPCR_ROLE_*` value (anything but MASTER or SLAVE is
    /// EQUAL).
    pub fn from_ofp(role: u32) -> Self {
        match role {
            controller_role::MASTER => ChannelRole::Master,
            controller_role::SLAVE => ChannelRole::Slave,
            _ => ChannelRole::Equal,
        }
    }

    /// The `OFPCR_ROLE_*` value.
    pub fn to_ofp(self) -> u32 {
        match self {
            ChannelRole::Equal => controller_role::EQUAL,
            ChannelRole::Master => controller_role::MASTER,
            ChannelRole::Slave => controller_role::SLAVE,
        }
    }

    /// `"equal"`, `"master"` or `"slave"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelRole::Equal => "equal",
            ChannelRole::Master => "master",
            ChannelRole::Slave => "slave",
        }
    }
}

impl fmt::Display for ChannelRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One open controller channel, for management (`fulmar ctl show`, OVSDB
/// `Controller` rows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelStatus {
    /// The channel's id among the agent's connections.
    pub id: ConnId,
    /// The target it belongs to, as [`crate::Target`]'s string form: the
    /// listener that accepted it (`ptcp:6653:0.0.0.0`,
    /// `punix:/run/fulmar/br0.mgmt`) or the controller it connected to
    /// (`tcp:192.0.2.1:6653`); empty for a channel given to
    /// [`super::Agent::serve`].
    pub source: String,
    /// The peer: `ADDR:PORT` over TCP/TLS; over a unix socket the socket's
    /// path, followed by ` pid=PID uid=UID` for an accepted channel.
    pub peer: String,
    /// Whether the HELLO exchange completed ([`crate::Connection::is_negotiated`]).
    pub negotiated: bool,
    /// Its role now (EQUAL until negotiated).
    pub role: ChannelRole,
    /// When the channel opened (after TCP/TLS set-up).
    pub since: Instant,
}

/// What [`super::Agent::listen`] bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ListenAddr {
    /// A TCP (or TLS) listener's local address (the real port with port
    /// 0).
    Tcp(SocketAddr),
    /// A unix socket's path.
    Unix(PathBuf),
}

impl ListenAddr {
    /// The TCP address, for a TCP/TLS listener.
    pub fn tcp(&self) -> Option<SocketAddr> {
        match self {
            ListenAddr::Tcp(a) => Some(*a),
            ListenAddr::Unix(_) => None,
        }
    }

    /// The socket path, for a unix listener.
    pub fn unix(&self) -> Option<&Path> {
        match self {
            ListenAddr::Unix(p) => Some(p),
            ListenAddr::Tcp(_) => None,
        }
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(a) => a.fmt(f),
            ListenAddr::Unix(p) => p.display().fmt(f),
        }
    }
}
