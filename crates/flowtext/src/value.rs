//! Scalar values: numbers, port and group names, hex byte strings, and the
//! typed OXM field values and masks (MACs, IPv4/IPv6 addresses and
//! prefixes), both parsed and printed.

use crate::lexer::Tok;
use crate::ParseError;
use ofp::consts::{group_no, port_no};
use ofp::oxm::ValueKind;
use ofp::{MacAddr, OxmField, OxmValue};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Parses a decimal or `0x` hexadecimal unsigned number.
pub(crate) fn parse_u128(t: Tok<'_>) -> Result<u128, ParseError> {
    let s = t.text;
    let bad = || t.err(format!("{} is not a number", t.quoted()));
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(bad());
    }
    u128::from_str_radix(digits, radix).map_err(|_| t.err(format!("{} is too large", t.quoted())))
}

/// Parses a number that must fit in `bits` bits; `what` names it in errors.
pub(crate) fn parse_uint(t: Tok<'_>, bits: u32, what: &str) -> Result<u128, ParseError> {
    let v = parse_u128(t)?;
    if bits < 128 && v >> bits != 0 {
        return Err(t.err(format!(
            "{} is too large for {what} ({bits} bits)",
            t.quoted()
        )));
    }
    Ok(v)
}

pub(crate) fn parse_u8(t: Tok<'_>, what: &str) -> Result<u8, ParseError> {
    Ok(parse_uint(t, 8, what)? as u8)
}

pub(crate) fn parse_u16(t: Tok<'_>, what: &str) -> Result<u16, ParseError> {
    Ok(parse_uint(t, 16, what)? as u16)
}

pub(crate) fn parse_u32(t: Tok<'_>, what: &str) -> Result<u32, ParseError> {
    Ok(parse_uint(t, 32, what)? as u32)
}

pub(crate) fn parse_u64(t: Tok<'_>, what: &str) -> Result<u64, ParseError> {
    Ok(parse_uint(t, 64, what)? as u64)
}

/// Reserved port names, as printed.
const PORT_NAMES: &[(&str, u32)] = words![port_no:
    "IN_PORT" => IN_PORT, "TABLE" => TABLE, "NORMAL" => NORMAL, "FLOOD" => FLOOD, "ALL" => ALL,
    "CONTROLLER" => CONTROLLER, "LOCAL" => LOCAL, "ANY" => ANY,
];

/// The reserved port number for a name (any case; `NONE` is `ANY`).
pub(crate) fn port_by_name(name: &str) -> Option<u32> {
    if name.eq_ignore_ascii_case("none") {
        return Some(port_no::ANY);
    }
    PORT_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, p)| p)
}

/// Parses a port: a number or a reserved port name. In decimal, the
/// OpenFlow 1.0 numbers of the reserved ports, 65280 to 65535, mean those
/// ports (65534 is `LOCAL`, 65533 `CONTROLLER`), as ovs-ofctl reads them;
/// in hex (`0xfffe`) a number is always the port of that number.
pub(crate) fn parse_port(t: Tok<'_>) -> Result<u32, ParseError> {
    if let Some(p) = port_by_name(t.text) {
        return Ok(p);
    }
    if !t.text.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(t.err(format!("{} is not a port number or name", t.quoted())));
    }
    let p = parse_u32(t, "a port")?;
    let decimal = !t.text.starts_with("0x") && !t.text.starts_with("0X");
    Ok(match p {
        0xff00..=0xffff if decimal => p | 0xffff_0000,
        _ => p,
    })
}

/// Prints a port: its reserved name, else the number in decimal (in hex
/// for 65280-65535, which in decimal would mean reserved ports).
pub(crate) fn format_port(p: u32) -> String {
    PORT_NAMES
        .iter()
        .find(|&&(_, n)| n == p)
        .map(|(name, _)| name.to_string())
        .unwrap_or_else(|| match p {
            0xff00..=0xffff => format!("{p:#x}"),
            _ => p.to_string(),
        })
}

/// Parses a group number or `all` / `any`.
pub(crate) fn parse_group_id(t: Tok<'_>) -> Result<u32, ParseError> {
    if t.text.eq_ignore_ascii_case("all") {
        Ok(group_no::ALL)
    } else if t.text.eq_ignore_ascii_case("any") {
        Ok(group_no::ANY)
    } else {
        parse_u32(t, "a group id")
    }
}

/// Prints a group number (`all` / `any` for the reserved ones).
pub(crate) fn format_group_id(g: u32) -> String {
    match g {
        group_no::ALL => "all".to_string(),
        group_no::ANY => "any".to_string(),
        _ => g.to_string(),
    }
}

/// Parses hex bytes (an optional `0x`, then an even number of hex digits;
/// empty means no bytes).
pub(crate) fn parse_hex_bytes(t: Tok<'_>) -> Result<Vec<u8>, ParseError> {
    let s = t
        .text
        .strip_prefix("0x")
        .or_else(|| t.text.strip_prefix("0X"))
        .unwrap_or(t.text);
    if s.len() & 1 != 0 || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(t.err(format!(
            "{} is not hex bytes (an even number of hex digits)",
            t.quoted()
        )));
    }
    (0..s.len() / 2)
        .map(|i| {
            s.get(2 * i..2 * i + 2)
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| t.err(format!("{} is not hex bytes", t.quoted())))
        })
        .collect()
}

/// Prints bytes as lowercase hex.
pub(crate) fn format_hex_bytes(b: &[u8]) -> String {
    ofp::HexBytes(b).to_string()
}

/// Parses the value of `field`: a number for integer fields (a port name
/// too for `in_port`/`in_phy_port`), a MAC, or an IP address.
pub(crate) fn parse_field_value(field: OxmField, t: Tok<'_>) -> Result<OxmValue, ParseError> {
    let kind = field.kind();
    match kind {
        ValueKind::Mac => t
            .text
            .parse::<MacAddr>()
            .map(OxmValue::Mac)
            .map_err(|_| t.err(format!("{} is not a MAC address", t.quoted()))),
        ValueKind::Ipv4 => t
            .text
            .parse::<Ipv4Addr>()
            .map(OxmValue::Ipv4)
            .map_err(|_| t.err(format!("{} is not an IPv4 address", t.quoted()))),
        ValueKind::Ipv6 => t
            .text
            .parse::<Ipv6Addr>()
            .map(OxmValue::Ipv6)
            .map_err(|_| t.err(format!("{} is not an IPv6 address", t.quoted()))),
        _ => {
            let v = if matches!(field, OxmField::InPort | OxmField::InPhyPort) {
                u128::from(parse_port(t)?)
            } else {
                parse_uint(t, field.bits(), field.name())?
            };
            Ok(OxmValue::from_u128(kind, v))
        }
    }
}

/// A mask of `len` leading one bits in a `width`-bit value.
fn prefix_mask(len: u32, width: u32) -> u128 {
    if len == 0 {
        0
    } else {
        let ones = if len >= 128 {
            u128::MAX
        } else {
            (1u128 << len) - 1
        };
        ones << (width - len.min(width))
    }
}

/// The prefix length of a mask that is a run of leading ones, if it is one.
fn mask_prefix_len(mask: u128, width: u32) -> Option<u32> {
    (0..=width).find(|&l| prefix_mask(l, width) == mask)
}

/// Parses the mask of `field` (only called for maskable fields): a number
/// for integer fields, a MAC, or for IP fields an address or a prefix
/// length (`/24`).
pub(crate) fn parse_field_mask(field: OxmField, t: Tok<'_>) -> Result<OxmValue, ParseError> {
    let kind = field.kind();
    let width = match kind {
        ValueKind::Ipv4 => Some(32),
        ValueKind::Ipv6 => Some(128),
        _ => None,
    };
    if let Some(width) = width {
        if !t.text.is_empty() && t.text.chars().all(|c| c.is_ascii_digit()) {
            let len = parse_u128(t)?;
            if len > u128::from(width) {
                return Err(t.err(format!(
                    "prefix length {} is longer than {width}",
                    t.quoted()
                )));
            }
            return Ok(OxmValue::from_u128(kind, prefix_mask(len as u32, width)));
        }
        return parse_field_value(field, t);
    }
    match kind {
        ValueKind::Mac => parse_field_value(field, t),
        _ => Ok(OxmValue::from_u128(
            kind,
            parse_uint(t, field.bits(), &format!("the mask of {}", field.name()))?,
        )),
    }
}

/// Prints the value of `field` (masked values of integer fields in hex).
pub(crate) fn format_field_value(field: OxmField, v: &OxmValue, masked: bool) -> String {
    format_value(v, |n| match field {
        OxmField::InPort | OxmField::InPhyPort if !masked => format_port(n as u32),
        OxmField::EthType => format!("0x{n:04x}"),
        OxmField::Metadata
        | OxmField::TunnelId
        | OxmField::Ipv6Exthdr
        | OxmField::VlanVid
        | OxmField::PbbIsid => format!("0x{n:x}"),
        _ if masked => format!("0x{n:x}"),
        _ => n.to_string(),
    })
}

/// Prints a value: addresses in their usual notation, integers with `int`.
pub(crate) fn format_value(v: &OxmValue, int: impl FnOnce(u128) -> String) -> String {
    match v {
        OxmValue::Mac(m) => m.to_string(),
        OxmValue::Ipv4(a) => a.to_string(),
        OxmValue::Ipv6(a) => a.to_string(),
        _ => int(v.to_u128()),
    }
}

/// Prints a mask (IP masks that are prefixes as the prefix length).
pub(crate) fn format_field_mask(v: &OxmValue) -> String {
    match v {
        OxmValue::Mac(m) => m.to_string(),
        OxmValue::Ipv4(a) => match mask_prefix_len(u32::from(*a).into(), 32) {
            Some(l) => l.to_string(),
            None => a.to_string(),
        },
        OxmValue::Ipv6(a) => match mask_prefix_len(u128::from(*a), 128) {
            Some(l) => l.to_string(),
            None => a.to_string(),
        },
        _ => format!("0x{:x}", v.to_u128()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(s: &str) -> Tok<'_> {
        Tok::whole(s)
    }

    #[test]
    fn numbers_in_decimal_and_hex() {
        assert_eq!(parse_u128(tok("42")).unwrap(), 42);
        assert_eq!(parse_u128(tok("0x2A")).unwrap(), 42);
        assert!(parse_u128(tok("0x")).is_err());
        assert!(parse_u128(tok("-1")).is_err());
        assert!(parse_u128(tok("1e3")).is_err());
        assert!(parse_u128(tok("99999999999999999999999999999999999999999")).is_err());
        assert_eq!(parse_u16(tok("65535"), "x").unwrap(), 65535);
        assert!(parse_u16(tok("65536"), "x").is_err());
    }

    #[test]
    fn ports_by_name_and_number() {
        assert_eq!(parse_port(tok("local")).unwrap(), port_no::LOCAL);
        assert_eq!(parse_port(tok("CONTROLLER")).unwrap(), port_no::CONTROLLER);
        assert_eq!(parse_port(tok("7")).unwrap(), 7);
        assert!(parse_port(tok("eth0")).is_err());
        for &(name, p) in PORT_NAMES {
            assert_eq!(format_port(p), name);
            assert_eq!(parse_port(tok(name)).unwrap(), p);
        }
    }

    #[test]
    fn hex_bytes() {
        assert_eq!(parse_hex_bytes(tok("00ff10")).unwrap(), vec![0, 0xff, 0x10]);
        assert_eq!(parse_hex_bytes(tok("")).unwrap(), Vec::<u8>::new());
        assert!(parse_hex_bytes(tok("abc")).is_err());
        assert!(parse_hex_bytes(tok("zz")).is_err());
        assert_eq!(format_hex_bytes(&[1, 0xab]), "01ab");
    }

    #[test]
    fn ip_prefix_masks() {
        let m = parse_field_mask(OxmField::Ipv4Src, tok("8")).unwrap();
        assert_eq!(m, OxmValue::Ipv4(Ipv4Addr::new(255, 0, 0, 0)));
        assert_eq!(format_field_mask(&m), "8");
        let m = parse_field_mask(OxmField::Ipv4Src, tok("255.0.255.0")).unwrap();
        assert_eq!(format_field_mask(&m), "255.0.255.0");
        assert!(parse_field_mask(OxmField::Ipv4Src, tok("33")).is_err());
        let m = parse_field_mask(OxmField::Ipv6Src, tok("64")).unwrap();
        assert_eq!(m, OxmValue::Ipv6("ffff:ffff:ffff:ffff::".parse().unwrap()));
        assert_eq!(format_field_mask(&m), "64");
        let m = parse_field_mask(OxmField::Ipv6Src, tok("128")).unwrap();
        assert_eq!(m, OxmValue::Ipv6(Ipv6Addr::from(u128::MAX)));
        let m = parse_field_mask(OxmField::Ipv6Src, tok("0")).unwrap();
        assert_eq!(format_field_mask(&m), "0");
    }

    #[test]
    fn values_respect_field_width() {
        assert!(parse_field_value(OxmField::VlanVid, tok("0x1fff")).is_ok());
        assert!(parse_field_value(OxmField::VlanVid, tok("0x2000")).is_err());
        assert!(parse_field_value(OxmField::MplsLabel, tok("0xfffff")).is_ok());
        assert!(parse_field_value(OxmField::MplsLabel, tok("0x100000")).is_err());
        assert_eq!(
            parse_field_value(OxmField::PbbIsid, tok("0xffffff")).unwrap(),
            OxmValue::U32(0xffffff)
        );
        assert!(parse_field_mask(OxmField::VlanVid, tok("0x2000")).is_err());
    }
}
