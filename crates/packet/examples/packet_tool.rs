//! packet_tool: a small command-line front end to the `packet` crate, used
//! by the independent-decoder tests in `tests/packet_scapy/` (which check
//! our parser and rewrites against scapy).
//!
//! Usage: `packet_tool COMMAND [ARGS] [+ COMMAND [ARGS]]...`
//!
//! Reads one hex-encoded Ethernet frame per line on stdin and writes one
//! line per frame on stdout:
//! - `parse`: the FlowKey as `name=value` pairs (OXM field names, in OXM
//!   order), then `flags=`, `l3_offset=`, `l4_offset=`.
//! - `verify`: `ok` or `error=<what>` after checking every checksum.
//! - rewrites (`push_vlan T`, `pop_vlan`, `push_mpls T`, `pop_mpls T`,
//!   `push_pbb T`, `pop_pbb`, `dec_nw_ttl`, `set_nw_ttl N`, `dec_mpls_ttl`,
//!   `set_mpls_ttl N`, `copy_ttl_out`, `copy_ttl_in`, `set FIELD VALUE`,
//!   `fill`): the rewritten frame in hex, or `error=<ActionError>` if any
//!   step failed. Several rewrites chain with `+`; a chain may end with
//!   `parse` or `verify`.
//!
//! Values: MACs `aa:bb:cc:dd:ee:ff`, IPv4 dotted quads, IPv6 in any form
//! std accepts, integers in decimal or `0x` hex.

use packet::buffer::PacketBuf;
use packet::fixup;
use packet::flow_key::{field, FlowKey};
use packet::set_field::FieldValue;
use packet::{ttl, ActionError};
use std::io::{self, BufRead, Write};
use std::net::{Ipv4Addr, Ipv6Addr};

fn parse_int(s: &str) -> Result<u128, String> {
    let r = if let Some(h) = s.strip_prefix("0x") {
        u128::from_str_radix(h, 16)
    } else {
        s.parse()
    };
    r.map_err(|e| format!("bad number {s:?}: {e}"))
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC {s:?}"));
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(p, 16).map_err(|e| format!("bad MAC {s:?}: {e}"))?;
    }
    Ok(m)
}

fn parse_v4(s: &str) -> Result<u32, String> {
    if let Ok(a) = s.parse::<Ipv4Addr>() {
        return Ok(u32::from(a));
    }
    Ok(parse_int(s)? as u32)
}

fn parse_v6(s: &str) -> Result<u128, String> {
    if let Ok(a) = s.parse::<Ipv6Addr>() {
        return Ok(u128::from(a));
    }
    parse_int(s)
}

/// A field value read from the command line, by the type the field holds:
/// integers in decimal or hex (cut to the field's width), MACs, and IPv4
/// and IPv6 addresses (which also take a plain number).
trait Arg: Sized {
    fn parse(s: &str) -> Result<Self, String>;
}

impl Arg for u8 {
    fn parse(s: &str) -> Result<Self, String> {
        Ok(parse_int(s)? as u8)
    }
}

impl Arg for u16 {
    fn parse(s: &str) -> Result<Self, String> {
        Ok(parse_int(s)? as u16)
    }
}

impl Arg for u32 {
    fn parse(s: &str) -> Result<Self, String> {
        parse_v4(s)
    }
}

impl Arg for u128 {
    fn parse(s: &str) -> Result<Self, String> {
        parse_v6(s)
    }
}

impl Arg for [u8; 6] {
    fn parse(s: &str) -> Result<Self, String> {
        parse_mac(s)
    }
}

fn arg<T: Arg>(s: &str) -> Result<T, String> {
    T::parse(s)
}

fn field_value(name: &str, v: &str) -> Result<FieldValue, String> {
    use FieldValue::*;
    Ok(match name {
        "eth_dst" => EthDst(arg(v)?),
        "eth_src" => EthSrc(arg(v)?),
        "eth_type" => EthType(arg(v)?),
        "vlan_vid" => VlanVid(arg(v)?),
        "vlan_pcp" => VlanPcp(arg(v)?),
        "ip_dscp" => IpDscp(arg(v)?),
        "ip_ecn" => IpEcn(arg(v)?),
        "ip_proto" => IpProto(arg(v)?),
        "ipv4_src" => Ipv4Src(arg(v)?),
        "ipv4_dst" => Ipv4Dst(arg(v)?),
        "tcp_src" => TcpSrc(arg(v)?),
        "tcp_dst" => TcpDst(arg(v)?),
        "udp_src" => UdpSrc(arg(v)?),
        "udp_dst" => UdpDst(arg(v)?),
        "sctp_src" => SctpSrc(arg(v)?),
        "sctp_dst" => SctpDst(arg(v)?),
        "icmpv4_type" => Icmpv4Type(arg(v)?),
        "icmpv4_code" => Icmpv4Code(arg(v)?),
        "arp_op" => ArpOp(arg(v)?),
        "arp_spa" => ArpSpa(arg(v)?),
        "arp_tpa" => ArpTpa(arg(v)?),
        "arp_sha" => ArpSha(arg(v)?),
        "arp_tha" => ArpTha(arg(v)?),
        "ipv6_src" => Ipv6Src(arg(v)?),
        "ipv6_dst" => Ipv6Dst(arg(v)?),
        "ipv6_flabel" => Ipv6Flabel(arg(v)?),
        "icmpv6_type" => Icmpv6Type(arg(v)?),
        "icmpv6_code" => Icmpv6Code(arg(v)?),
        "ipv6_nd_target" => Ipv6NdTarget(arg(v)?),
        "ipv6_nd_sll" => Ipv6NdSll(arg(v)?),
        "ipv6_nd_tll" => Ipv6NdTll(arg(v)?),
        "mpls_label" => MplsLabel(arg(v)?),
        "mpls_tc" => MplsTc(arg(v)?),
        "mpls_bos" => MplsBos(arg(v)?),
        "pbb_isid" => PbbIsid(arg(v)?),
        _ => return Err(format!("unknown field {name:?}")),
    })
}

/// One step of a command chain.
enum Step {
    Parse,
    Verify,
    Fill,
    PushVlan(u16),
    PopVlan,
    PushMpls(u16),
    PopMpls(u16),
    PushPbb(u16),
    PopPbb,
    DecNwTtl,
    SetNwTtl(u8),
    DecMplsTtl,
    SetMplsTtl(u8),
    CopyTtlOut,
    CopyTtlIn,
    Set(FieldValue),
}

fn parse_steps(args: &[String]) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for cmd in args.split(|a| a == "+") {
        let (name, rest) = cmd.split_first().ok_or("empty command")?;
        let arg = |i: usize| -> Result<&str, String> {
            rest.get(i)
                .map(|s| s.as_str())
                .ok_or_else(|| format!("{name}: missing argument"))
        };
        let num = |i: usize| -> Result<u128, String> { parse_int(arg(i)?) };
        steps.push(match name.as_str() {
            "parse" => Step::Parse,
            "verify" => Step::Verify,
            "fill" => Step::Fill,
            "push_vlan" => Step::PushVlan(num(0)? as u16),
            "pop_vlan" => Step::PopVlan,
            "push_mpls" => Step::PushMpls(num(0)? as u16),
            "pop_mpls" => Step::PopMpls(num(0)? as u16),
            "push_pbb" => Step::PushPbb(num(0)? as u16),
            "pop_pbb" => Step::PopPbb,
            "dec_nw_ttl" => Step::DecNwTtl,
            "set_nw_ttl" => Step::SetNwTtl(num(0)? as u8),
            "dec_mpls_ttl" => Step::DecMplsTtl,
            "set_mpls_ttl" => Step::SetMplsTtl(num(0)? as u8),
            "copy_ttl_out" => Step::CopyTtlOut,
            "copy_ttl_in" => Step::CopyTtlIn,
            "set" => Step::Set(field_value(arg(0)?, arg(1)?)?),
            other => return Err(format!("unknown command {other:?}")),
        });
    }
    Ok(steps)
}

fn fmt_mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn describe(k: &FlowKey) -> String {
    let mut out = Vec::new();
    for f in 0..40u8 {
        let Some(v) = k.get(f) else { continue };
        let s = match f {
            field::ETH_DST => fmt_mac(k.eth_dst),
            field::ETH_SRC => fmt_mac(k.eth_src),
            field::ARP_SHA => fmt_mac(k.arp_sha),
            field::ARP_THA => fmt_mac(k.arp_tha),
            field::IPV6_ND_SLL => fmt_mac(k.nd_sll),
            field::IPV6_ND_TLL => fmt_mac(k.nd_tll),
            field::IPV4_SRC | field::IPV4_DST | field::ARP_SPA | field::ARP_TPA => {
                Ipv4Addr::from(v as u32).to_string()
            }
            field::IPV6_SRC | field::IPV6_DST | field::IPV6_ND_TARGET => {
                Ipv6Addr::from(v).to_string()
            }
            _ => v.to_string(),
        };
        out.push(format!("{}={}", field::NAMES[usize::from(f)], s));
    }
    out.push(format!("flags={}", k.flags));
    out.push(format!("l3_offset={}", k.l3_offset));
    out.push(format!("l4_offset={}", k.l4_offset));
    out.join(" ")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if s.len() & 1 == 1 {
        return Err("odd hex length".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

fn run(steps: &[Step], pkt: &[u8]) -> String {
    let mut b = PacketBuf::from_slice(pkt);
    for step in steps {
        let r: Result<(), ActionError> = match step {
            Step::Parse => return describe(&FlowKey::parse(b.as_slice())),
            Step::Verify => {
                return match fixup::verify_checksums(b.as_slice()) {
                    Ok(()) => "ok".into(),
                    Err(e) => format!("error={e:?}"),
                }
            }
            Step::Fill => {
                fixup::fill_checksums(b.as_mut_slice());
                Ok(())
            }
            Step::PushVlan(t) => b.push_vlan(*t),
            Step::PopVlan => b.pop_vlan(),
            Step::PushMpls(t) => b.push_mpls(*t),
            Step::PopMpls(t) => b.pop_mpls(*t),
            Step::PushPbb(t) => b.push_pbb(*t),
            Step::PopPbb => b.pop_pbb(),
            Step::DecNwTtl => ttl::dec_nw_ttl(b.as_mut_slice()).map(|_| ()),
            Step::SetNwTtl(t) => ttl::set_nw_ttl(b.as_mut_slice(), *t),
            Step::DecMplsTtl => ttl::dec_mpls_ttl(b.as_mut_slice()).map(|_| ()),
            Step::SetMplsTtl(t) => ttl::set_mpls_ttl(b.as_mut_slice(), *t),
            Step::CopyTtlOut => ttl::copy_ttl_out(b.as_mut_slice()),
            Step::CopyTtlIn => ttl::copy_ttl_in(b.as_mut_slice()),
            Step::Set(v) => packet::set_field::set_field(b.as_mut_slice(), v),
        };
        if let Err(e) = r {
            return format!("error={e:?}");
        }
    }
    // The frame as it would leave a port.
    b.pad_to_floor();
    hex(b.as_slice())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let steps = match parse_steps(&args) {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => {
            eprintln!("usage: packet_tool COMMAND [ARGS] [+ COMMAND [ARGS]]... < hex-lines");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("packet_tool: {e}");
            std::process::exit(2);
        }
    };
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for line in stdin.lock().lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("packet_tool: {e}");
                std::process::exit(1);
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let res = match unhex(&line) {
            Ok(p) => run(&steps, &p),
            Err(e) => format!("error=BadHex({e})"),
        };
        if writeln!(out, "{res}").is_err() {
            std::process::exit(1);
        }
    }
}
