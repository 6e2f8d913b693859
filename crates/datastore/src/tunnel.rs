//! Tunnel port settings as text: the addresses and keys of `vxlan` and
//! `gre` ports, checked the same way for the file, `fulmar ctl` and
//! OVSDB (`options:remote_ip`, `options:key`, ...).

use std::net::Ipv4Addr;

use crate::model::VXLAN_MAX_VNI;

/// `remote_ip`/`local_ip`: a unicast IPv4 address. `remote` also refuses
/// the unspecified address (there is no learning from a wildcard peer).
pub fn parse_tunnel_ip(what: &str, value: &str, remote: bool) -> Result<Ipv4Addr, String> {
    let v = value.trim();
    if v == "flow" {
        return Err(format!(
            "{what}=flow (the address from the flow) is not supported; give an IPv4 address"
        ));
    }
    if v.parse::<std::net::Ipv6Addr>().is_ok() {
        return Err(format!(
            "{what} {value:?}: an IPv6 underlay is not supported; give an IPv4 address"
        ));
    }
    let ip: Ipv4Addr = v
        .parse()
        .map_err(|_| format!("{what} {value:?} is not an IPv4 address"))?;
    if ip.is_multicast() {
        return Err(format!(
            "{what} {ip} is a multicast address; multicast tunnels are not supported"
        ));
    }
    if ip.is_broadcast() || ip.is_unspecified() {
        let hint = if remote {
            "the peer's unicast address"
        } else {
            "this end's unicast address, or leave local_ip out"
        };
        return Err(format!("{what} {ip} is not valid (give {hint})"));
    }
    Ok(ip)
}

/// A tunnel port's `key` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelKey {
    /// A fixed key (the VNI for VXLAN).
    Fixed(u32),
    /// `flow`: the key taken from and given to the flow's `tunnel_id`.
    Flow,
}

impl TunnelKey {
    /// As the model holds it: (`key`, `key_flow`).
    pub fn to_model(self) -> (Option<u32>, bool) {
        match self {
            TunnelKey::Fixed(n) => (Some(n), false),
            TunnelKey::Flow => (None, true),
        }
    }
}

/// `key`: a number (decimal or `0x` hex), 0..=16777215 for VXLAN (the
/// VNI) and 0..=4294967295 for GRE, or `flow` (the key from and to the
/// flow's `tunnel_id`).
pub fn parse_tunnel_key(vxlan: bool, value: &str) -> Result<TunnelKey, String> {
    let v = value.trim();
    if v == "flow" {
        return Ok(TunnelKey::Flow);
    }
    let max = if vxlan { VXLAN_MAX_VNI } else { u32::MAX };
    let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse::<u64>().ok(),
    };
    match n {
        Some(n) if n <= u64::from(max) => Ok(TunnelKey::Fixed(n as u32)),
        Some(n) => Err(format!("key {n} is not valid (0..={max})")),
        None => Err(format!(
            "key {value:?} is not a number (0..={max}, decimal or 0x hex)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_unicast_ipv4() {
        assert_eq!(
            parse_tunnel_ip("remote_ip", "10.0.0.2", true),
            Ok(Ipv4Addr::new(10, 0, 0, 2))
        );
        for bad in [
            "flow",
            "::1",
            "239.1.1.1",
            "0.0.0.0",
            "255.255.255.255",
            "x",
            "",
        ] {
            let e = parse_tunnel_ip("remote_ip", bad, true).unwrap_err();
            assert!(e.contains("remote_ip"), "{e}");
        }
        assert!(parse_tunnel_ip("remote_ip", "::1", true)
            .unwrap_err()
            .contains("IPv6"));
    }

    #[test]
    fn keys_by_kind() {
        use TunnelKey::{Fixed, Flow};
        assert_eq!(parse_tunnel_key(true, "42"), Ok(Fixed(42)));
        assert_eq!(parse_tunnel_key(true, "0xffffff"), Ok(Fixed(0xff_ffff)));
        assert!(parse_tunnel_key(true, "16777216").is_err());
        assert_eq!(parse_tunnel_key(false, "4294967295"), Ok(Fixed(u32::MAX)));
        assert!(parse_tunnel_key(false, "4294967296").is_err());
        assert!(parse_tunnel_key(false, "-1").is_err());
        assert_eq!(parse_tunnel_key(true, "flow"), Ok(Flow));
        assert_eq!(parse_tunnel_key(false, " flow "), Ok(Flow));
        assert!(parse_tunnel_key(true, "Flow").is_err());
    }

    use crate::model::{Backend, Host, PortKind, TunnelBackend};
    use crate::{parse_ctl, Config};

    const HOST: Host = Host { cpus: 2 };

    fn file(ports: &str) -> Result<Config, String> {
        let text = format!("[[bridges]]\nname = \"br0\"\n{ports}");
        Config::from_str_for(&text, "t.toml", HOST).map_err(|e| e.to_string())
    }

    fn backend(c: &Config, n: u32) -> Backend {
        match &c.bridges[0].port(n).expect("port").kind {
            PortKind::Interface { backend, .. } => backend.clone(),
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn file_ports_load_and_round_trip() {
        let c = file(
            r#"[[bridges.ports]]
port = 5
interface = "vx0"
backend = "vxlan"
remote_ip = "10.77.0.2"
key = 42
[[bridges.ports]]
port = 6
interface = "gre-to-the-far-site"
backend = "gre"
remote_ip = "10.77.0.3"
local_ip = "10.77.0.1"
key = "0x10"
"#,
        )
        .unwrap();
        assert_eq!(
            backend(&c, 5),
            Backend::Vxlan(TunnelBackend {
                remote_ip: Some(Ipv4Addr::new(10, 77, 0, 2)),
                local_ip: None,
                key: Some(42),
                key_flow: false,
                dst_port: 4789,
            })
        );
        assert_eq!(
            backend(&c, 6),
            Backend::Gre(TunnelBackend {
                remote_ip: Some(Ipv4Addr::new(10, 77, 0, 3)),
                local_ip: Some(Ipv4Addr::new(10, 77, 0, 1)),
                key: Some(16),
                key_flow: false,
                dst_port: 0,
            })
        );
        assert_eq!(c.revalidate(HOST).unwrap(), c);
    }

    #[test]
    fn key_flow_in_the_file_and_ctl() {
        let c = file(
            "[[bridges.ports]]\nport = 5\ninterface = \"vx0\"\nbackend = \"vxlan\"\n\
             remote_ip = \"10.77.0.2\"\nkey = \"flow\"\n\
             [[bridges.ports]]\nport = 6\ninterface = \"g0\"\nbackend = \"gre\"\n\
             remote_ip = \"10.77.0.3\"\nkey = \"flow\"\n",
        )
        .unwrap();
        for n in [5, 6] {
            let (Backend::Vxlan(t) | Backend::Gre(t)) = backend(&c, n) else {
                panic!("{:?}", backend(&c, n));
            };
            assert_eq!((t.key, t.key_flow), (None, true));
        }
        // Written back as key = "flow", and read back the same.
        let text = c.to_toml_string();
        assert!(text.contains("key = \"flow\""), "{text}");
        let again = Config::from_str_for(&text, "t.toml", HOST).unwrap();
        assert_eq!(again, c);
        assert_eq!(c.revalidate(HOST).unwrap(), c);
        // ctl: key=flow, then a fixed key again (and back).
        let c = apply(&c, "set interface vx0 options:key=9").unwrap();
        assert!(matches!(
            backend(&c, 5),
            Backend::Vxlan(TunnelBackend {
                key: Some(9),
                key_flow: false,
                ..
            })
        ));
        let c = apply(
            &c,
            "add-port br0 vx1 type=vxlan remote_ip=10.0.0.9 dst_port=4790 key=flow -- set interface vx0 options:key=flow",
        )
        .unwrap();
        let vxlan_keys: Vec<(Option<u32>, bool)> = c.bridges[0]
            .ports
            .iter()
            .filter_map(|p| match &p.kind {
                PortKind::Interface {
                    backend: Backend::Vxlan(t),
                    ..
                } => Some((t.key, t.key_flow)),
                _ => None,
            })
            .collect();
        assert_eq!(vxlan_keys, [(None, true), (None, true)]);
    }

    #[test]
    fn file_errors_name_the_field() {
        let vx = "[[bridges.ports]]\nport = 5\ninterface = \"vx0\"\nbackend = \"vxlan\"\n";
        let e = file(vx).unwrap_err();
        assert!(
            e.contains("ports[0].remote_ip") && e.contains("needs remote_ip"),
            "{e}"
        );
        let e = file(&format!("{vx}remote_ip = \"10.0.0.1\"\nkey = \"flaw\"\n")).unwrap_err();
        assert!(
            e.contains("ports[0].key") && e.contains("not a number"),
            "{e}"
        );
        let e = file(&format!("{vx}remote_ip = \"10.0.0.1\"\nkey = 16777216\n")).unwrap_err();
        assert!(e.contains("0..=16777215"), "{e}");
        let e = file(&format!("{vx}remote_ip = \"fe80::1\"\n")).unwrap_err();
        assert!(e.contains("IPv6"), "{e}");
        let e = file(&format!("{vx}remote_ip = \"10.0.0.1\"\ndst_port = 0\n")).unwrap_err();
        assert!(e.contains("ports[0].dst_port"), "{e}");
        let two = format!(
            "{vx}remote_ip = \"10.0.0.1\"\n[[bridges.ports]]\nport = 6\ninterface = \"vx1\"\nbackend = \"vxlan\"\nremote_ip = \"10.0.0.2\"\nlocal_ip = \"10.0.0.9\"\n"
        );
        let e = file(&two).unwrap_err();
        assert!(
            e.contains("ports[1].dst_port") && e.contains("already received on"),
            "{e}"
        );
        file(&format!("{two}dst_port = 4790\n")).unwrap();
        let gre = "[[bridges.ports]]\nport = 5\ninterface = \"g0\"\nbackend = \"gre\"\nremote_ip = \"10.0.0.1\"\n";
        let e = file(&format!("{gre}dst_port = 4789\n")).unwrap_err();
        assert!(e.contains("only for backend = \"vxlan\""), "{e}");
        let e =
            file("[[bridges.ports]]\nport = 5\ninterface = \"eth0\"\nremote_ip = \"10.0.0.1\"\n")
                .unwrap_err();
        assert!(e.contains("remote_ip is only for"), "{e}");
    }

    fn apply(base: &Config, words: &str) -> Result<Config, String> {
        let w: Vec<&str> = words.split_whitespace().collect();
        let ops = parse_ctl(&w)?;
        base.apply(&ops, HOST).map_err(|e| e.to_string())
    }

    #[test]
    fn ctl_makes_tunnels_as_ovs_vsctl_words_do() {
        let base = file("").unwrap();
        let c = apply(
            &base,
            "add-port br0 vx0 -- set interface vx0 type=vxlan options:remote_ip=10.77.0.2 options:key=42",
        )
        .unwrap();
        let Backend::Vxlan(t) = backend(&c, 1) else {
            panic!("{:?}", backend(&c, 1));
        };
        assert_eq!(
            (t.remote_ip, t.key, t.dst_port),
            (Some(Ipv4Addr::new(10, 77, 0, 2)), Some(42), 4789)
        );
        let c = apply(
            &c,
            "add-port br0 gt0 type=gre remote_ip=10.77.0.3 key=7 -- set interface vx0 options:dst_port=4790",
        )
        .unwrap();
        assert!(matches!(
            backend(&c, 2),
            Backend::Gre(TunnelBackend { key: Some(7), .. })
        ));
        assert!(matches!(
            backend(&c, 1),
            Backend::Vxlan(TunnelBackend { dst_port: 4790, .. })
        ));
        // Options before the type, as ovs-vsctl allows.
        let c = apply(
            &c,
            "add-port br0 g2 -- set interface g2 options:remote_ip=10.77.0.4 type=gre",
        )
        .unwrap();
        assert!(matches!(
            backend(&c, 3),
            Backend::Gre(TunnelBackend { key: None, .. })
        ));
        // Refusals change nothing and say why.
        for (words, want) in [
            ("add-port br0 vx9 type=vxlan", "needs remote_ip"),
            (
                "add-port br0 g9 type=gre remote_ip=10.0.0.9 dst_port=1",
                "only for type=vxlan",
            ),
            (
                "add-port br0 e9 remote_ip=10.0.0.9",
                "only for type=vxlan or type=gre",
            ),
            (
                "add-port br0 vx9 type=vxlan remote_ip=224.0.0.9",
                "multicast",
            ),
            ("set interface gt0 options:key=x", "not a number"),
        ] {
            let e = apply(&c, words).unwrap_err();
            assert!(e.contains(want), "{words}: {e}");
        }
    }
}
