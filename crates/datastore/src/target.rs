//! Controller target strings, as `ovs-vsctl set-controller` writes them:
//! `tcp:HOST[:PORT]`, `tls:HOST[:PORT]` (connect), `ptcp:[PORT][:ADDR]`,
//! `ptls:[PORT][:ADDR]` (listen), and for `--listen` also
//! `tcp:ADDR[:PORT]` / `tls:ADDR[:PORT]` meaning "listen on ADDR". IPv6
//! addresses are written in brackets (`tcp:[2001:db8::1]:6653`); a missing
//! port is 6653.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::model::{ControllerTarget, Transport, OPENFLOW_PORT};

impl ControllerTarget {
    /// Parses a controller target: `tcp:`/`tls:` connect, `ptcp:`/`ptls:`
    /// listen. The error is a message naming the problem.
    ///
    /// ```
    /// use datastore::{ControllerTarget, Transport};
    /// let t = ControllerTarget::parse_target("tcp:192.0.2.1:6633").unwrap();
    /// assert_eq!(t, ControllerTarget::Connect {
    ///     transport: Transport::Tcp, host: "192.0.2.1".into(), port: 6633 });
    /// assert_eq!(ControllerTarget::parse_target("ptls:6653").unwrap().to_string(),
    ///     "ptls:6653:0.0.0.0");
    /// ```
    pub fn parse_target(text: &str) -> Result<ControllerTarget, String> {
        let (scheme, rest) = split_scheme(text)?;
        match Transport::from_scheme(scheme) {
            Some((Transport::Unix, _)) | None => Err(unknown_scheme(text, scheme)),
            Some((t, false)) => connect(t, rest, text),
            Some((t, true)) => passive(t, rest, text),
        }
    }

    /// Parses a listener as `--listen` takes it: `ptcp:`/`ptls:` as in
    /// [`parse_target`](Self::parse_target), or `tcp:ADDR[:PORT]` /
    /// `tls:ADDR[:PORT]` with ADDR an IP address to listen on.
    pub fn parse_listen(text: &str) -> Result<ControllerTarget, String> {
        let (scheme, rest) = split_scheme(text)?;
        let transport = match Transport::from_scheme(scheme) {
            Some((Transport::Unix, _)) | None => return Err(unknown_scheme(text, scheme)),
            Some((t, true)) => return passive(t, rest, text),
            Some((t, false)) => t,
        };
        let (host, port) = host_port(rest, text)?;
        let addr = parse_ip(host).ok_or_else(|| {
            format!("listener {text:?}: {host:?} is not an IP address to listen on")
        })?;
        let port = match port {
            Some(p) => parse_port(p, text, true)?,
            None => OPENFLOW_PORT,
        };
        Ok(ControllerTarget::Listen {
            transport,
            addr,
            port,
        })
    }
}

fn split_scheme(text: &str) -> Result<(&str, &str), String> {
    text.split_once(':')
        .ok_or_else(|| format!("controller target {text:?} has no type (tcp:, tls:, ptcp:, ptls:)"))
}

fn unknown_scheme(text: &str, scheme: &str) -> String {
    format!("controller target {text:?}: unknown type {scheme:?} (expected tcp, tls, ptcp or ptls)")
}

/// Splits `HOST[:PORT]` / `[V6][:PORT]`.
fn host_port<'a>(rest: &'a str, text: &str) -> Result<(&'a str, Option<&'a str>), String> {
    if let Some(inner) = rest.strip_prefix('[') {
        let (host, after) = inner
            .split_once(']')
            .ok_or_else(|| format!("controller target {text:?}: missing \"]\""))?;
        if after.is_empty() {
            return Ok((host, None));
        }
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| format!("controller target {text:?}: expected \":PORT\" after \"]\""))?;
        if host.parse::<Ipv6Addr>().is_err() {
            return Err(format!(
                "controller target {text:?}: {host:?} is not an IPv6 address"
            ));
        }
        return Ok((host, Some(port)));
    }
    Ok(match rest.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (rest, None),
    })
}

fn parse_port(p: &str, text: &str, zero_ok: bool) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(0) if !zero_ok => Err(format!(
            "controller target {text:?}: port 0 is not valid for a connection"
        )),
        Ok(n) if p.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(format!(
            "controller target {text:?}: {p:?} is not a TCP port (0..=65535)"
        )),
    }
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    let s = s
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(s);
    s.parse().ok()
}

fn valid_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn connect(transport: Transport, rest: &str, text: &str) -> Result<ControllerTarget, String> {
    let (host, port) = host_port(rest, text)?;
    if host.is_empty() {
        return Err(format!("controller target {text:?} has no host"));
    }
    let host = if let Ok(v6) = host.parse::<Ipv6Addr>() {
        v6.to_string()
    } else if valid_hostname(host) {
        host.to_string()
    } else {
        return Err(format!(
            "controller target {text:?}: {host:?} is not an IP address or host name"
        ));
    };
    let port = match port {
        Some(p) => parse_port(p, text, false)?,
        None => OPENFLOW_PORT,
    };
    Ok(ControllerTarget::Connect {
        transport,
        host,
        port,
    })
}

fn passive(transport: Transport, rest: &str, text: &str) -> Result<ControllerTarget, String> {
    let (port, addr) = match rest.split_once(':') {
        Some((p, a)) => (p, Some(a)),
        None => (rest, None),
    };
    let port = if port.is_empty() {
        OPENFLOW_PORT
    } else {
        parse_port(port, text, true)?
    };
    let addr = match addr {
        None | Some("") => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        Some(a) => parse_ip(a).ok_or_else(|| {
            format!("controller target {text:?}: {a:?} is not an IP address to listen on")
        })?,
    };
    Ok(ControllerTarget::Listen {
        transport,
        addr,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(t: Transport, host: &str, port: u16) -> ControllerTarget {
        ControllerTarget::Connect {
            transport: t,
            host: host.into(),
            port,
        }
    }

    fn lis(t: Transport, addr: &str, port: u16) -> ControllerTarget {
        ControllerTarget::Listen {
            transport: t,
            addr: addr.parse().unwrap(),
            port,
        }
    }

    #[test]
    fn targets() {
        use Transport::*;
        let p = ControllerTarget::parse_target;
        assert_eq!(p("tcp:10.0.0.1:6633"), Ok(conn(Tcp, "10.0.0.1", 6633)));
        assert_eq!(p("tcp:10.0.0.1"), Ok(conn(Tcp, "10.0.0.1", 6653)));
        assert_eq!(
            p("tls:ctl.example.net:1"),
            Ok(conn(Tls, "ctl.example.net", 1))
        );
        assert_eq!(p("tcp:[2001:db8::1]:7"), Ok(conn(Tcp, "2001:db8::1", 7)));
        assert_eq!(p("tcp:[::1]"), Ok(conn(Tcp, "::1", 6653)));
        assert_eq!(p("ptcp:"), Ok(lis(Tcp, "0.0.0.0", 6653)));
        assert_eq!(p("ptcp:6634"), Ok(lis(Tcp, "0.0.0.0", 6634)));
        assert_eq!(p("ptcp:0:127.0.0.1"), Ok(lis(Tcp, "127.0.0.1", 0)));
        assert_eq!(p("ptls:6653:[::1]"), Ok(lis(Tls, "::1", 6653)));
        assert_eq!(p("ptls:6653:::1"), Ok(lis(Tls, "::1", 6653)));
        assert_eq!(p("ptcp::10.1.1.1"), Ok(lis(Tcp, "10.1.1.1", 6653)));
    }

    #[test]
    fn bad_targets() {
        let p = ControllerTarget::parse_target;
        assert_eq!(
            p("10.0.0.1"),
            Err("controller target \"10.0.0.1\" has no type (tcp:, tls:, ptcp:, ptls:)".into())
        );
        assert_eq!(
            p("udp:1.2.3.4:5"),
            Err("controller target \"udp:1.2.3.4:5\": unknown type \"udp\" (expected tcp, tls, ptcp or ptls)".into())
        );
        assert_eq!(
            p("tcp:1.2.3.4:0"),
            Err("controller target \"tcp:1.2.3.4:0\": port 0 is not valid for a connection".into())
        );
        assert_eq!(
            p("tcp:1.2.3.4:70000"),
            Err(
                "controller target \"tcp:1.2.3.4:70000\": \"70000\" is not a TCP port (0..=65535)"
                    .into()
            )
        );
        assert_eq!(
            p("tcp:1.2.3.4:+5"),
            Err(
                "controller target \"tcp:1.2.3.4:+5\": \"+5\" is not a TCP port (0..=65535)".into()
            )
        );
        assert_eq!(
            p("tcp:"),
            Err("controller target \"tcp:\" has no host".into())
        );
        assert_eq!(
            p("tcp:bad_host:1"),
            Err("controller target \"tcp:bad_host:1\": \"bad_host\" is not an IP address or host name".into())
        );
        assert_eq!(
            p("tcp:[zz]:1"),
            Err("controller target \"tcp:[zz]:1\": \"zz\" is not an IPv6 address".into())
        );
        assert_eq!(
            p("tcp:[::1"),
            Err("controller target \"tcp:[::1\": missing \"]\"".into())
        );
        assert_eq!(
            p("ptcp:1:host.name"),
            Err("controller target \"ptcp:1:host.name\": \"host.name\" is not an IP address to listen on".into())
        );
    }

    #[test]
    fn listen_syntax() {
        use Transport::*;
        let l = ControllerTarget::parse_listen;
        assert_eq!(l("tcp:0.0.0.0:6653"), Ok(lis(Tcp, "0.0.0.0", 6653)));
        assert_eq!(l("tcp:127.0.0.1"), Ok(lis(Tcp, "127.0.0.1", 6653)));
        assert_eq!(l("tls:[::]:6000"), Ok(lis(Tls, "::", 6000)));
        assert_eq!(l("ptcp:6633"), Ok(lis(Tcp, "0.0.0.0", 6633)));
        assert_eq!(
            l("tcp:ctl.example.net:6653"),
            Err("listener \"tcp:ctl.example.net:6653\": \"ctl.example.net\" is not an IP address to listen on".into())
        );
    }

    #[test]
    fn display_parses_back() {
        for s in [
            "tcp:10.0.0.1:6633",
            "tls:[2001:db8::1]:6653",
            "ptcp:6653:0.0.0.0",
            "ptls:0:[::1]",
            "tcp:ctl.example.net:6653",
        ] {
            let t = ControllerTarget::parse_target(s).unwrap();
            assert_eq!(t.to_string(), s);
            assert_eq!(ControllerTarget::parse_target(&t.to_string()), Ok(t));
        }
    }
}
