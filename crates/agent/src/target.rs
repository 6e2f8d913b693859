//! Controller connection strings, in the syntax of `ovs-vsctl
//! set-controller`:
//!
//! - `tcp:HOST:PORT`, `tls:HOST:PORT` — connect to a controller (active);
//!   as a listen address they mean "listen on HOST:PORT".
//! - `ptcp:PORT[:ADDR]`, `ptls:PORT[:ADDR]` — listen for controllers
//!   (passive); ADDR defaults to `0.0.0.0`.
//! - `unix:PATH` — connect to a unix domain socket; `punix:PATH` — listen
//!   on one (what `ovs-ofctl ... unix:/run/fulmar/br0.mgmt` talks to). The
//!   path is kept in [`Target::host`] (see [`Target::unix_path`]).
//!
//! IPv6 addresses go in brackets (`tcp:[::1]:6653`, `ptcp:6653:[::1]`).

use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// Whether a channel is plain TCP, TLS or a unix domain socket (defined
/// once, in `ofp`, with its schemes).
pub use ofp::channel::Transport;

/// A parsed connection string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// TCP or TLS.
    pub transport: Transport,
    /// Passive (`ptcp:`/`ptls:`) or active.
    pub passive: bool,
    /// Host name or address (brackets removed); for
    /// [`Transport::Unix`], the socket's path.
    pub host: String,
    /// TCP port (0 for [`Transport::Unix`]).
    pub port: u16,
}

/// A connection string that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetError(pub String);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad controller target: {}", self.0)
    }
}

impl std::error::Error for TargetError {}

/// The default OpenFlow port (IANA).
pub const DEFAULT_PORT: u16 = 6653;

fn strip_brackets(h: &str) -> &str {
    h.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(h)
}

fn parse_port(s: &str, whole: &str) -> Result<u16, TargetError> {
    s.parse()
        .map_err(|_| TargetError(format!("{whole:?}: port {s:?} is not a number 0..=65535")))
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Self, TargetError> {
        let (scheme, rest) = s.split_once(':').ok_or_else(|| {
            TargetError(format!(
                "{s:?}: expected tcp:, tls:, unix:, ptcp:, ptls: or punix:"
            ))
        })?;
        let (transport, passive) = Transport::from_scheme(scheme)
            .ok_or_else(|| TargetError(format!("{s:?}: unknown scheme {scheme:?}")))?;
        if transport == Transport::Unix {
            if rest.is_empty() {
                return Err(TargetError(format!("{s:?}: missing socket path")));
            }
            return Ok(Target {
                transport,
                passive,
                host: rest.to_string(),
                port: 0,
            });
        }
        if passive {
            // PORT[:ADDR]
            let (port, addr) = match rest.split_once(':') {
                Some((p, a)) => (p, a),
                None => (rest, ""),
            };
            let port = if port.is_empty() {
                DEFAULT_PORT
            } else {
                parse_port(port, s)?
            };
            let host = match strip_brackets(addr) {
                "" => "0.0.0.0".to_string(),
                a => a.to_string(),
            };
            Ok(Target {
                transport,
                passive,
                host,
                port,
            })
        } else {
            // HOST[:PORT], the port after the last colon unless the host is
            // a bracketed IPv6 address without port.
            let (host, port) = if rest.starts_with('[') {
                match rest.split_once(']') {
                    Some((h, p)) => (h.trim_start_matches('['), p.strip_prefix(':').unwrap_or("")),
                    None => return Err(TargetError(format!("{s:?}: unclosed '['"))),
                }
            } else {
                match rest.rsplit_once(':') {
                    Some((h, p)) => (h, p),
                    None => (rest, ""),
                }
            };
            if host.is_empty() {
                return Err(TargetError(format!("{s:?}: missing host")));
            }
            let port = if port.is_empty() {
                DEFAULT_PORT
            } else {
                parse_port(port, s)?
            };
            Ok(Target {
                transport,
                passive,
                host: host.to_string(),
                port,
            })
        }
    }
}

impl Target {
    /// The socket path of a `unix:`/`punix:` target.
    pub fn unix_path(&self) -> Option<&Path> {
        (self.transport == Transport::Unix).then(|| Path::new(&self.host))
    }

    /// `host:port` as tokio resolves it (IPv6 in brackets).
    pub fn socket_addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.transport.scheme(self.passive);
        if self.transport == Transport::Unix {
            return write!(f, "{scheme}:{}", self.host);
        }
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.passive {
            write!(f, "{scheme}:{}:{host}", self.port)
        } else {
            write!(f, "{scheme}:{host}:{}", self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        s.parse().unwrap()
    }

    #[test]
    fn active_and_passive_forms() {
        assert_eq!(
            t("tcp:10.0.0.1:6633"),
            Target {
                transport: Transport::Tcp,
                passive: false,
                host: "10.0.0.1".into(),
                port: 6633
            }
        );
        assert_eq!(t("tls:ctl.example").port, DEFAULT_PORT);
        assert_eq!(t("tcp:[::1]:7").host, "::1");
        assert_eq!(t("tcp:[::1]").port, DEFAULT_PORT);
        let p = t("ptcp:6653");
        assert!(p.passive);
        assert_eq!((p.host.as_str(), p.port), ("0.0.0.0", 6653));
        let p = t("ptls:16653:127.0.0.1");
        assert_eq!(p.transport, Transport::Tls);
        assert_eq!((p.host.as_str(), p.port), ("127.0.0.1", 16653));
        assert_eq!(t("ptcp:0:[::1]").host, "::1");
        assert_eq!(t("ptcp:0:[::1]").socket_addr(), "[::1]:0");
        for s in ["tcp:1.2.3.4:5", "ptls:6:[::1]", "tls:[fe80::1]:9"] {
            assert_eq!(t(s).to_string(), s);
        }
    }

    #[test]
    fn bad_forms() {
        for s in [
            "",
            "udp:1:2",
            "tcp:",
            "tcp::5",
            "ptcp:x",
            "tcp:h:70000",
            "tcp:[::1",
        ] {
            assert!(s.parse::<Target>().is_err(), "{s}");
        }
    }

    #[test]
    fn unix_forms() {
        let p = t("punix:/run/fulmar/br0.mgmt");
        assert_eq!((p.transport, p.passive), (Transport::Unix, true));
        assert_eq!(p.unix_path(), Some(Path::new("/run/fulmar/br0.mgmt")));
        assert_eq!(p.to_string(), "punix:/run/fulmar/br0.mgmt");
        let a = t("unix:rel/with:colon.sock");
        assert_eq!((a.transport, a.passive), (Transport::Unix, false));
        assert_eq!(a.host, "rel/with:colon.sock");
        assert_eq!(a.to_string(), "unix:rel/with:colon.sock");
        assert_eq!(t("tcp:1.2.3.4:5").unix_path(), None);
        for s in ["unix:", "punix:"] {
            assert!(s.parse::<Target>().is_err(), "{s}");
        }
    }
}
