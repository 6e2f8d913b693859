//! Settings of a switch's controller channels that the OpenFlow 1.3.5
//! specification names (§6.3): how a channel is carried ([`Transport`])
//! and what the switch does while it has no controller ([`FailMode`]).
//! Defined here, the lowest crate that knows OpenFlow, so that the
//! configuration (`datastore`), the channels (`agent`) and the daemon
//! (`runtime`) share one type each, with one spelling each: `FromStr` and
//! `Display` are the only conversions to and from text.

use std::fmt;
use std::str::FromStr;

/// Gives an enum one spelling per variant, the only conversions to and
/// from text: `as_str` (and `Display`) and `FromStr`, whose error names
/// the setting and the valid spellings.
macro_rules! spellings {
    ($ty:ident, $setting:literal, $valid:literal { $($variant:ident => $word:literal,)* }) => {
        impl $ty {
            /// The spelling in files, `fulmar ctl` and OVSDB.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)*
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($word => Ok(Self::$variant),)*
                    _ => Err(format!("{} {s:?} is not valid ({})", $setting, $valid)),
                }
            }
        }
    };
}

/// What the switch does while no controller is connected (§6.4; as
/// `ovs-vsctl set-fail-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FailMode {
    /// Keep the flow tables; drop packets that miss (no packet-ins;
    /// default).
    #[default]
    Secure,
    /// Act as a learning switch until a controller connects again.
    Standalone,
}

spellings!(FailMode, "fail_mode", "secure or standalone" {
    Secure => "secure",
    Standalone => "standalone",
});

/// How a channel is carried: plain TCP, TLS over TCP, or a unix domain
/// socket (Open vSwitch's `unix:`/`punix:`, for local tools).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Plain TCP.
    Tcp,
    /// TLS over TCP.
    Tls,
    /// A unix domain socket.
    Unix,
}

spellings!(Transport, "transport", "tcp, tls or unix" {
    Tcp => "tcp",
    Tls => "tls",
    Unix => "unix",
});

impl Transport {
    /// The scheme of a connection string: the name, with a `p` in front
    /// for a passive (listening) one (`ptcp`, `ptls`, `punix`).
    pub fn scheme(self, passive: bool) -> &'static str {
        match (self, passive) {
            (Transport::Tcp, false) => "tcp",
            (Transport::Tls, false) => "tls",
            (Transport::Unix, false) => "unix",
            (Transport::Tcp, true) => "ptcp",
            (Transport::Tls, true) => "ptls",
            (Transport::Unix, true) => "punix",
        }
    }

    /// The transport and passiveness of a scheme (`ssl`/`pssl` are taken
    /// for `tls`/`ptls`, as Open vSwitch does).
    pub fn from_scheme(scheme: &str) -> Option<(Transport, bool)> {
        Some(match scheme {
            "tcp" => (Transport::Tcp, false),
            "tls" | "ssl" => (Transport::Tls, false),
            "unix" => (Transport::Unix, false),
            "ptcp" => (Transport::Tcp, true),
            "ptls" | "pssl" => (Transport::Tls, true),
            "punix" => (Transport::Unix, true),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for m in [FailMode::Secure, FailMode::Standalone] {
            assert_eq!(m.to_string().parse::<FailMode>(), Ok(m));
        }
        assert_eq!(
            "Secure".parse::<FailMode>(),
            Err("fail_mode \"Secure\" is not valid (secure or standalone)".to_string())
        );
        for t in [Transport::Tcp, Transport::Tls, Transport::Unix] {
            assert_eq!(t.to_string().parse::<Transport>(), Ok(t));
            for passive in [false, true] {
                assert_eq!(
                    Transport::from_scheme(t.scheme(passive)),
                    Some((t, passive))
                );
            }
        }
        assert_eq!(Transport::from_scheme("pssl"), Some((Transport::Tls, true)));
        assert_eq!(Transport::from_scheme("udp"), None);
    }
}
