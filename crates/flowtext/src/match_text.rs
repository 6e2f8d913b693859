//! Match fields: `name=value[/mask]` pieces, the classic ovs names, the
//! protocol shorthands (`ip`, `tcp`, ...), and printing a match back.
//!
//! Fields keep the order of the text. A shorthand inserts its
//! prerequisites (`tcp` is `eth_type=0x0800,ip_proto=6`) where it stands.
//! Classic names whose meaning depends on the rest of the match (`nw_src`
//! and `ip_src` are `arp_spa` in an ARP match, `tp_dst` is
//! `tcp_dst`/`udp_dst`/`sctp_dst` by `ip_proto`) are resolved after the
//! whole match is read, so they may come before the field they depend on.
//! Value bits outside a mask are cleared (`10.0.0.1/8` is `10.0.0.0/8`), as
//! the spec asks of a match.
//!
//! Then, as `ovs-ofctl` encodes a match for OpenFlow 1.3: a mask of all
//! ones is no mask and a field under a zero mask is no field; `vlan_pcp`
//! (or `dl_vlan_pcp`, or a `vlan_tci` that matches the PCP) brings
//! `vlan_vid=0x1000/0x1000`, "a tag is present", unless the match has a
//! `vlan_vid`. Last, every field must have its prerequisites (spec 1.3.5
//! table 12): where Open vSwitch would silently drop a field whose
//! protocol the match does not name (`nw_src` without `ip`), this refuses
//! the match and says what is missing.

use crate::lexer::Tok;
use crate::value::{
    format_field_mask, format_field_value, format_hex_bytes, parse_field_mask, parse_field_value,
    parse_hex_bytes, parse_u16, parse_u8, parse_uint,
};
use crate::ParseError;
use ofp::oxm::OFPVID_PRESENT;
use ofp::{Match, Oxm, OxmField, OxmValue};

/// Ethertypes of the shorthands.
pub(crate) const ETH_IPV4: u16 = 0x0800;
pub(crate) const ETH_IPV6: u16 = 0x86dd;
pub(crate) const ETH_ARP: u16 = 0x0806;
const ETH_RARP: u16 = 0x8035;
const ETH_MPLS: u16 = 0x8847;
const ETH_MPLS_MCAST: u16 = 0x8848;

/// Protocol shorthands: name, ethertype, IP protocol.
const SHORTHANDS: &[(&str, u16, Option<u8>)] = &[
    ("ip", ETH_IPV4, None),
    ("ipv6", ETH_IPV6, None),
    ("arp", ETH_ARP, None),
    ("rarp", ETH_RARP, None),
    ("mpls", ETH_MPLS, None),
    ("mplsm", ETH_MPLS_MCAST, None),
    ("icmp", ETH_IPV4, Some(1)),
    ("tcp", ETH_IPV4, Some(6)),
    ("udp", ETH_IPV4, Some(17)),
    ("sctp", ETH_IPV4, Some(132)),
    ("icmp6", ETH_IPV6, Some(58)),
    ("tcp6", ETH_IPV6, Some(6)),
    ("udp6", ETH_IPV6, Some(17)),
    ("sctp6", ETH_IPV6, Some(132)),
];

/// Classic ovs names that are another name for one OXM field.
const ALIASES: &[(&str, OxmField)] = words![OxmField:
    "dl_src" => EthSrc, "dl_dst" => EthDst, "dl_type" => EthType, "dl_vlan_pcp" => VlanPcp,
    "nw_ecn" => IpEcn, "tun_id" => TunnelId, "ipv6_label" => Ipv6Flabel,
    "nd_target" => Ipv6NdTarget, "nd_sll" => Ipv6NdSll, "nd_tll" => Ipv6NdTll,
    "icmpv4_type" => Icmpv4Type, "in_port_oxm" => InPort,
];

/// A field name as written in a match or a `set_field`: an OXM name or a
/// classic name that means exactly one OXM field.
pub(crate) fn field_by_name(name: &str) -> Option<OxmField> {
    OxmField::from_name(name).or_else(|| ALIASES.iter().find(|(n, _)| *n == name).map(|&(_, f)| f))
}

/// Classic names whose field depends on the rest of the match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deferred {
    NwSrc,
    NwDst,
    NwProto,
    TpSrc,
    TpDst,
    IcmpType,
    IcmpCode,
}

fn deferred_by_name(name: &str) -> Option<Deferred> {
    Some(match name {
        "nw_src" | "ip_src" => Deferred::NwSrc,
        "nw_dst" | "ip_dst" => Deferred::NwDst,
        "nw_proto" => Deferred::NwProto,
        "tp_src" => Deferred::TpSrc,
        "tp_dst" => Deferred::TpDst,
        "icmp_type" => Deferred::IcmpType,
        "icmp_code" => Deferred::IcmpCode,
        _ => return None,
    })
}

enum Slot<'a> {
    Done(Oxm),
    /// A classic name resolved in `finish`; `value` is `value[/mask]`.
    Deferred {
        which: Deferred,
        value: Tok<'a>,
    },
}

/// Collects match pieces in text order.
#[derive(Default)]
pub(crate) struct MatchBuilder<'a> {
    /// Each slot with the key token that produced it (for errors).
    slots: Vec<(Slot<'a>, Tok<'a>)>,
}

/// A basic field with the value cleared outside the mask.
fn basic(field: OxmField, value: OxmValue, mask: Option<OxmValue>) -> Oxm {
    let value = match (&value, &mask) {
        (_, Some(m)) => OxmValue::from_u128(field.kind(), value.to_u128() & m.to_u128()),
        _ => value,
    };
    Oxm::Basic { field, value, mask }
}

/// Parses `value[/mask]` for `field`.
pub(crate) fn parse_value_and_mask(
    field: OxmField,
    v: Tok<'_>,
    allow_mask: bool,
) -> Result<Oxm, ParseError> {
    let (value, mask) = match v.split_once("/") {
        Some((val, m)) => {
            if !allow_mask || !field.maskable() {
                return Err(m.err(format!(
                    "field {} does not take a mask (\"/{}\")",
                    field.name(),
                    m.text
                )));
            }
            (val, Some(m))
        }
        None => (v, None),
    };
    let value = parse_field_value(field, value)?;
    let mask = mask.map(|m| parse_field_mask(field, m)).transpose()?;
    Ok(basic(field, value, mask))
}

/// Parses the opaque `oxm=CLASS:FIELD:HASMASK:HEXBODY` form.
pub(crate) fn parse_other(v: Tok<'_>) -> Result<Oxm, ParseError> {
    let bad = || v.err(format!("{} is not CLASS:FIELD:HASMASK:HEXBODY", v.quoted()));
    let (class, rest) = v.split_once(":").ok_or_else(bad)?;
    let (field, rest) = rest.split_once(":").ok_or_else(bad)?;
    let (hasmask, body) = rest.split_once(":").ok_or_else(bad)?;
    let class = parse_u16(class, "an OXM class")?;
    let field = parse_uint(field, 7, "an OXM field number")? as u8;
    let hasmask = match hasmask.text {
        "0" => false,
        "1" => true,
        _ => return Err(hasmask.err(format!("{} is not 0 or 1", hasmask.quoted()))),
    };
    let body = parse_hex_bytes(body)?;
    if body.len() > 255 {
        return Err(v.err("OXM body longer than 255 bytes"));
    }
    Ok(Oxm::Other {
        class,
        field,
        hasmask,
        body,
    })
}

/// Prints an opaque OXM in the form [`parse_other`] reads.
pub(crate) fn format_other(class: u16, field: u8, hasmask: bool, body: &[u8]) -> String {
    format!(
        "0x{class:04x}:{field}:{}:{}",
        u8::from(hasmask),
        format_hex_bytes(body)
    )
}

impl<'a> MatchBuilder<'a> {
    /// Takes one `key[=value]` piece if it is a match field or shorthand;
    /// `Ok(false)` when the key is not one.
    pub fn take(&mut self, key: Tok<'a>, value: Option<Tok<'a>>) -> Result<bool, ParseError> {
        if let Some(&(_, eth, proto)) = SHORTHANDS.iter().find(|(n, _, _)| *n == key.text) {
            if let Some(v) = value {
                return Err(v.err(format!(
                    "{} takes no value (got {})",
                    key.quoted(),
                    v.quoted()
                )));
            }
            let ty = basic(OxmField::EthType, OxmValue::U16(eth), None);
            self.slots.push((Slot::Done(ty), key));
            if let Some(p) = proto {
                let p = basic(OxmField::IpProto, OxmValue::U8(p), None);
                self.slots.push((Slot::Done(p), key));
            }
            return Ok(true);
        }
        let field = field_by_name(key.text);
        let deferred = deferred_by_name(key.text);
        let known = field.is_some()
            || deferred.is_some()
            || matches!(key.text, "dl_vlan" | "nw_tos" | "vlan_tci" | "oxm");
        if !known {
            return Ok(false);
        }
        let v = value.ok_or_else(|| key.err(format!("field {} needs a value", key.quoted())))?;
        let slot = if let Some(f) = field {
            Slot::Done(parse_value_and_mask(f, v, true)?)
        } else if let Some(which) = deferred {
            Slot::Deferred { which, value: v }
        } else if key.text == "dl_vlan" {
            Slot::Done(parse_dl_vlan(v)?)
        } else if key.text == "vlan_tci" {
            let mut oxms = parse_vlan_tci(v)?;
            let last = oxms.pop();
            for o in oxms {
                self.slots.push((Slot::Done(o), key));
            }
            match last {
                Some(o) => Slot::Done(o),
                // A zero mask matches anything: nothing to add.
                None => return Ok(true),
            }
        } else if key.text == "nw_tos" {
            if let Some((_, m)) = v.split_once("/") {
                return Err(m.err(format!("nw_tos does not take a mask (\"/{}\")", m.text)));
            }
            // As in ovs, the two low (ECN) bits of the TOS byte are ignored.
            let tos = parse_u8(v, "a TOS byte")?;
            Slot::Done(basic(OxmField::IpDscp, OxmValue::U8(tos >> 2), None))
        } else {
            Slot::Done(parse_other(v)?)
        };
        self.slots.push((slot, key));
        Ok(true)
    }

    /// Resolves the classic names, checks for duplicates, and returns the
    /// match.
    pub fn finish(self) -> Result<Match, ParseError> {
        let done = |f: OxmField| {
            self.slots.iter().find_map(|(s, _)| match s {
                Slot::Done(Oxm::Basic { field, value, .. }) if *field == f => Some(value.to_u128()),
                _ => None,
            })
        };
        let eth_type = done(OxmField::EthType);
        // nw_proto may become ip_proto; tp_src/tp_dst look at it.
        let mut ip_proto = done(OxmField::IpProto);
        if ip_proto.is_none() && eth_type != Some(ETH_ARP.into()) {
            for (s, _) in &self.slots {
                if let Slot::Deferred {
                    which: Deferred::NwProto,
                    value,
                    ..
                } = s
                {
                    let v = value.split_once("/").map_or(*value, |(v, _)| v);
                    ip_proto = crate::value::parse_u128(v).ok();
                }
            }
        }
        let arp = eth_type == Some(ETH_ARP.into()) || eth_type == Some(ETH_RARP.into());
        let ipv6 = eth_type == Some(ETH_IPV6.into());
        let mut fields: Vec<(Oxm, Tok<'a>)> = Vec::with_capacity(self.slots.len());
        for (slot, key) in self.slots {
            let oxm = match slot {
                Slot::Done(o) => o,
                Slot::Deferred { which, value } => {
                    let field = match which {
                        Deferred::NwSrc if arp => OxmField::ArpSpa,
                        Deferred::NwDst if arp => OxmField::ArpTpa,
                        Deferred::NwProto if arp => OxmField::ArpOp,
                        Deferred::NwSrc => OxmField::Ipv4Src,
                        Deferred::NwDst => OxmField::Ipv4Dst,
                        Deferred::NwProto => OxmField::IpProto,
                        Deferred::IcmpType if ipv6 => OxmField::Icmpv6Type,
                        Deferred::IcmpCode if ipv6 => OxmField::Icmpv6Code,
                        Deferred::IcmpType => OxmField::Icmpv4Type,
                        Deferred::IcmpCode => OxmField::Icmpv4Code,
                        Deferred::TpSrc | Deferred::TpDst => {
                            let src = which == Deferred::TpSrc;
                            transport_field(ip_proto, src).ok_or_else(|| {
                                key.err(format!(
                                    "{} needs ip_proto 6, 17 or 132 (tcp, udp or sctp) in the match",
                                    key.quoted()
                                ))
                            })?
                        }
                    };
                    parse_value_and_mask(field, value, true)?
                }
            };
            fields.push((oxm, key));
        }
        // As Open vSwitch encodes them: a mask of all ones is no mask, a
        // field under a zero mask is no field.
        fields.retain_mut(|(o, _)| normalize_mask(o));
        for (i, (oxm, key)) in fields.iter().enumerate() {
            let id = oxm_identity(oxm);
            if fields.iter().take(i).any(|(o, _)| oxm_identity(o) == id) {
                return Err(key.err(format!(
                    "duplicate field {} (from {})",
                    oxm_name(oxm),
                    key.quoted()
                )));
            }
        }
        // vlan_pcp implies "a VLAN tag is present" (Open vSwitch's vlan_tci
        // has the CFI bit set whenever the PCP is matched).
        let has = |fields: &[(Oxm, Tok<'_>)], f: OxmField| {
            fields
                .iter()
                .any(|(o, _)| matches!(o, Oxm::Basic { field, .. } if *field == f))
        };
        if has(&fields, OxmField::VlanPcp) && !has(&fields, OxmField::VlanVid) {
            let at = fields
                .iter()
                .position(|(o, _)| {
                    matches!(
                        o,
                        Oxm::Basic {
                            field: OxmField::VlanPcp,
                            ..
                        }
                    )
                })
                .unwrap_or(0);
            let key = fields.get(at).map_or(Tok::whole(""), |(_, k)| *k);
            let present = OxmValue::U16(OFPVID_PRESENT);
            fields.insert(at, (basic(OxmField::VlanVid, present, Some(present)), key));
        }
        let m = Match {
            fields: fields.iter().map(|(o, _)| o.clone()).collect(),
        };
        for (oxm, key) in &fields {
            if let Oxm::Basic { field, .. } = oxm {
                if !m.prerequisites_met(*field) {
                    return Err(key.err(format!(
                        "{} ({}) needs {} in the match",
                        key.quoted(),
                        field.name(),
                        prerequisite_text(*field)
                    )));
                }
            }
        }
        Ok(m)
    }
}

/// Drops a mask of all ones; false for a field under a zero mask.
fn normalize_mask(o: &mut Oxm) -> bool {
    if let Oxm::Basic { field, mask, .. } = o {
        if let Some(m) = mask {
            let bits = m.to_u128() & field.max_value();
            if bits == field.max_value() {
                *mask = None;
            } else if bits == 0 {
                return false;
            }
        }
    }
    true
}

/// What a field needs elsewhere in the match (OpenFlow 1.3.5 table 12),
/// in the words of the text.
pub(crate) fn prerequisite_text(field: OxmField) -> &'static str {
    use OxmField as F;
    match field {
        F::InPhyPort => "in_port",
        F::VlanVid | F::VlanPcp => {
            "a VLAN tag (dl_vlan, vlan_tci or vlan_vid with the present bit 0x1000)"
        }
        F::IpDscp | F::IpEcn | F::IpProto => "ip or ipv6 (eth_type 0x0800 or 0x86dd)",
        F::Ipv4Src | F::Ipv4Dst => "ip (eth_type 0x0800)",
        F::TcpSrc | F::TcpDst => "tcp or tcp6 (ip_proto 6)",
        F::UdpSrc | F::UdpDst => "udp or udp6 (ip_proto 17)",
        F::SctpSrc | F::SctpDst => "sctp or sctp6 (ip_proto 132)",
        F::Icmpv4Type | F::Icmpv4Code => "icmp (ip with ip_proto 1)",
        F::ArpOp | F::ArpSpa | F::ArpTpa | F::ArpSha | F::ArpTha => "arp (eth_type 0x0806)",
        F::Ipv6Src | F::Ipv6Dst | F::Ipv6Flabel | F::Ipv6Exthdr => "ipv6 (eth_type 0x86dd)",
        F::Icmpv6Type | F::Icmpv6Code => "icmp6 (ipv6 with ip_proto 58)",
        F::Ipv6NdTarget => "icmp6 with icmp_type 135 or 136 (neighbor discovery)",
        F::Ipv6NdSll => "icmp6 with icmp_type 135 (neighbor solicitation)",
        F::Ipv6NdTll => "icmp6 with icmp_type 136 (neighbor advertisement)",
        F::MplsLabel | F::MplsTc | F::MplsBos => "mpls or mplsm (eth_type 0x8847 or 0x8848)",
        F::PbbIsid | F::PbbUca => "PBB (eth_type 0x88e7)",
        F::InPort | F::Metadata | F::EthDst | F::EthSrc | F::EthType | F::TunnelId => "nothing",
    }
}

/// `vlan_tci=TCI[/MASK]`, Open vSwitch's 16-bit view of the tag (PCP, CFI
/// = "a tag is present", VID), as OpenFlow 1.3's `vlan_vid` (the CFI bit
/// is OFPVID_PRESENT) and `vlan_pcp`, as Open vSwitch encodes it. What
/// OpenFlow 1.3 cannot say is refused: part of the PCP, the PCP without
/// the CFI bit (a PCP with CFI 0 fails `vlan_pcp`'s prerequisite later).
fn parse_vlan_tci(v: Tok<'_>) -> Result<Vec<Oxm>, ParseError> {
    let (val, mask_tok) = match v.split_once("/") {
        Some((a, m)) => (a, Some(m)),
        None => (v, None),
    };
    let mask = match mask_tok {
        Some(m) => parse_u16(m, "a vlan_tci mask")?,
        None => 0xffff,
    };
    let value = parse_u16(val, "a vlan_tci")? & mask;
    let at = mask_tok.unwrap_or(v);
    let pcp_mask = mask & 0xe000;
    let cfi_masked = mask & OFPVID_PRESENT != 0;
    if pcp_mask != 0 && pcp_mask != 0xe000 {
        return Err(at.err(format!(
            "vlan_tci {}: OpenFlow 1.3 matches the PCP only whole (mask 0xe000)",
            v.quoted()
        )));
    }
    if pcp_mask != 0 && !cfi_masked {
        return Err(at.err(format!(
            "vlan_tci {}: matching the PCP needs the CFI bit 0x1000 (a tag is present) in the mask",
            v.quoted()
        )));
    }
    let (vid, vid_mask) = (value & 0x1fff, mask & 0x1fff);
    let mut out = Vec::new();
    if vid_mask == 0x1fff {
        out.push(basic(OxmField::VlanVid, OxmValue::U16(vid), None));
    } else if vid_mask != 0 {
        out.push(basic(
            OxmField::VlanVid,
            OxmValue::U16(vid),
            Some(OxmValue::U16(vid_mask)),
        ));
    }
    if vid != 0 && pcp_mask != 0 {
        out.push(basic(
            OxmField::VlanPcp,
            OxmValue::U8((value >> 13) as u8),
            None,
        ));
    }
    Ok(out)
}

pub(crate) fn transport_field(ip_proto: Option<u128>, src: bool) -> Option<OxmField> {
    Some(match (ip_proto?, src) {
        (6, true) => OxmField::TcpSrc,
        (6, false) => OxmField::TcpDst,
        (17, true) => OxmField::UdpSrc,
        (17, false) => OxmField::UdpDst,
        (132, true) => OxmField::SctpSrc,
        (132, false) => OxmField::SctpDst,
        _ => return None,
    })
}

/// What makes two OXMs duplicates of each other.
fn oxm_identity(o: &Oxm) -> (u16, u8) {
    match o {
        Oxm::Basic { field, .. } => (ofp::oxm::OXM_CLASS_OPENFLOW_BASIC, *field as u8),
        Oxm::Other { class, field, .. } => (*class, *field),
    }
}

fn oxm_name(o: &Oxm) -> String {
    match o {
        Oxm::Basic { field, .. } => field.name().to_string(),
        Oxm::Other { class, field, .. } => format!("oxm {class:#06x}:{field}"),
    }
}

/// `dl_vlan`: a 12-bit VID (sets OFPVID_PRESENT), `0xffff` for no tag.
fn parse_dl_vlan(v: Tok<'_>) -> Result<Oxm, ParseError> {
    if let Some((_, m)) = v.split_once("/") {
        return Err(m.err(format!("dl_vlan does not take a mask (\"/{}\")", m.text)));
    }
    let n = parse_u16(v, "dl_vlan")?;
    let vid = match n {
        0xffff => ofp::oxm::OFPVID_NONE,
        0..=0x0fff => n | OFPVID_PRESENT,
        _ => {
            return Err(v.err(format!(
                "dl_vlan {} is not a 12-bit VLAN id (or 0xffff for no tag)",
                v.quoted()
            )))
        }
    };
    Ok(basic(OxmField::VlanVid, OxmValue::U16(vid), None))
}

/// A TOS byte for `mod_nw_tos`: its low two (ECN) bits must be 0.
pub(crate) fn parse_tos(v: Tok<'_>) -> Result<u8, ParseError> {
    let tos = parse_u8(v, "a TOS byte")?;
    if tos & 3 != 0 {
        return Err(v.err(format!(
            "TOS {} has ECN bits set (use a multiple of 4, or ip_dscp/nw_ecn)",
            v.quoted()
        )));
    }
    Ok(tos)
}

/// Prints `value[/mask]` of a basic field.
pub(crate) fn format_basic(field: OxmField, value: &OxmValue, mask: Option<&OxmValue>) -> String {
    match mask {
        None => format_field_value(field, value, false),
        Some(m) => format!(
            "{}/{}",
            format_field_value(field, value, true),
            format_field_mask(m)
        ),
    }
}

/// Prints a match as text pieces, in the match's order. An unmasked
/// `eth_type` (followed by an unmasked `ip_proto`) that a shorthand stands
/// for is printed as that shorthand.
pub(crate) fn format_match(m: &Match, out: &mut Vec<String>) {
    let mut i = 0;
    while let Some(o) = m.fields.get(i) {
        i += 1;
        match o {
            Oxm::Basic {
                field: OxmField::EthType,
                value: OxmValue::U16(eth),
                mask: None,
            } => {
                let next_proto = match m.fields.get(i) {
                    Some(Oxm::Basic {
                        field: OxmField::IpProto,
                        value: OxmValue::U8(p),
                        mask: None,
                    }) => Some(*p),
                    _ => None,
                };
                let with_proto = SHORTHANDS
                    .iter()
                    .find(|&&(_, e, p)| e == *eth && p.is_some() && p == next_proto);
                if let Some((name, _, _)) = with_proto {
                    out.push(name.to_string());
                    i += 1;
                } else if let Some((name, _, _)) = SHORTHANDS
                    .iter()
                    .find(|&&(_, e, p)| e == *eth && p.is_none())
                {
                    out.push(name.to_string());
                } else {
                    out.push(format!("eth_type=0x{eth:04x}"));
                }
            }
            Oxm::Basic { field, value, mask } => {
                out.push(format!(
                    "{}={}",
                    field.name(),
                    format_basic(*field, value, mask.as_ref())
                ));
            }
            Oxm::Other {
                class,
                field,
                hasmask,
                body,
            } => out.push(format!(
                "oxm={}",
                format_other(*class, *field, *hasmask, body)
            )),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{format_match as print_match, parse_match};
    use ofp::consts::port_no;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn print(m: &Match) -> String {
        print_match(m)
    }

    fn b(field: OxmField, value: OxmValue) -> Oxm {
        Oxm::Basic {
            field,
            value,
            mask: None,
        }
    }

    fn bm(field: OxmField, value: OxmValue, mask: OxmValue) -> Oxm {
        Oxm::Basic {
            field,
            value,
            mask: Some(mask),
        }
    }

    /// A value for every field that uses all of its width, and a mask.
    pub(crate) fn sample(field: OxmField) -> (OxmValue, OxmValue) {
        let bits = field.bits();
        let ones = if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        let v = 0xa5c3_5a3c_a5c3_5a3c_a5c3_5a3c_a5c3_5a3c_u128 & ones;
        let m = 0xff00_f0f0_ff00_f0f0_ff00_f0f0_ff00_f0f0_u128 & ones;
        match field.kind() {
            ofp::oxm::ValueKind::Ipv4 => (
                OxmValue::Ipv4(Ipv4Addr::new(10, 1, 0, 0)),
                OxmValue::Ipv4(Ipv4Addr::new(255, 255, 0, 0)),
            ),
            ofp::oxm::ValueKind::Ipv6 => (
                OxmValue::Ipv6("2001:db8::".parse().unwrap()),
                OxmValue::Ipv6("ffff:ffff::".parse().unwrap()),
            ),
            k => (OxmValue::from_u128(k, v & m), OxmValue::from_u128(k, m)),
        }
    }

    /// The fields `field` needs before it in a match (spec table 12).
    pub(crate) fn prereqs(field: OxmField) -> Vec<Oxm> {
        use OxmField as F;
        let eth = |t: u16| b(F::EthType, OxmValue::U16(t));
        let proto = |p: u8| b(F::IpProto, OxmValue::U8(p));
        match field {
            F::InPhyPort => vec![b(F::InPort, OxmValue::U32(1))],
            F::VlanPcp => vec![bm(
                F::VlanVid,
                OxmValue::U16(OFPVID_PRESENT),
                OxmValue::U16(OFPVID_PRESENT),
            )],
            F::IpDscp | F::IpEcn | F::IpProto | F::Ipv4Src | F::Ipv4Dst => vec![eth(0x0800)],
            F::TcpSrc | F::TcpDst => vec![eth(0x0800), proto(6)],
            F::UdpSrc | F::UdpDst => vec![eth(0x0800), proto(17)],
            F::SctpSrc | F::SctpDst => vec![eth(0x0800), proto(132)],
            F::Icmpv4Type | F::Icmpv4Code => vec![eth(0x0800), proto(1)],
            F::ArpOp | F::ArpSpa | F::ArpTpa | F::ArpSha | F::ArpTha => vec![eth(0x0806)],
            F::Ipv6Src | F::Ipv6Dst | F::Ipv6Flabel | F::Ipv6Exthdr => vec![eth(0x86dd)],
            F::Icmpv6Type | F::Icmpv6Code => vec![eth(0x86dd), proto(58)],
            F::Ipv6NdTarget | F::Ipv6NdSll => {
                vec![eth(0x86dd), proto(58), b(F::Icmpv6Type, OxmValue::U8(135))]
            }
            F::Ipv6NdTll => vec![eth(0x86dd), proto(58), b(F::Icmpv6Type, OxmValue::U8(136))],
            F::MplsLabel | F::MplsTc | F::MplsBos => vec![eth(0x8847)],
            F::PbbIsid | F::PbbUca => vec![eth(0x88e7)],
            // in_port, metadata, Ethernet addresses and type, vlan_vid and
            // tunnel_id need nothing.
            _ => vec![],
        }
    }

    #[test]
    fn every_field_round_trips_exact_and_masked() {
        for &field in OxmField::ALL {
            let (v, m) = sample(field);
            let with = |o: Oxm| {
                let mut fields = prereqs(field);
                fields.push(o);
                Match { fields }
            };
            let exact = with(b(field, v));
            let text = print(&exact);
            assert!(text.contains(field.name()), "{text}");
            assert_eq!(parse_match(&text).unwrap(), exact, "{text}");
            if field.maskable() {
                let masked = with(bm(field, v, m));
                let text = print(&masked);
                assert!(text.contains('/'), "{text}");
                assert_eq!(parse_match(&text).unwrap(), masked, "{text}");
            } else {
                let text = format!("{}={}/1", field.name(), format_basic(field, &v, None));
                let e = parse_match(&text).unwrap_err();
                assert_eq!(e.token, "1", "{text}");
                assert_eq!(e.position, text.len() - 1);
            }
        }
    }

    #[test]
    fn every_field_round_trips_as_text() {
        // Written in the canonical form, printed back the same.
        for text in [
            "in_port=LOCAL",
            "in_port=7",
            "in_port=0xfffe",
            "in_port=1,in_phy_port=3",
            "metadata=0x12/0xff",
            "eth_dst=01:00:00:00:00:00/01:00:00:00:00:00",
            "eth_src=aa:bb:cc:dd:ee:ff",
            "vlan_vid=0x1000/0x1000",
            "vlan_vid=0x1005,vlan_pcp=7",
            "ip,ip_dscp=46",
            "ipv6,ip_ecn=3",
            "ip,ipv4_src=10.0.0.0/8",
            "ip,ipv4_dst=10.0.0.1",
            "ip,ipv4_dst=10.0.0.0/255.0.255.0",
            "tcp,tcp_src=1,tcp_dst=65535",
            "udp6,udp_src=2,udp_dst=3",
            "sctp,sctp_src=4,sctp_dst=5",
            "icmp,icmpv4_type=8,icmpv4_code=0",
            "icmp6,icmpv6_type=135,icmpv6_code=1",
            "arp,arp_op=2,arp_spa=1.2.3.4,arp_tpa=1.2.3.0/24,arp_sha=00:11:22:33:44:55,arp_tha=00:00:00:00:00:01",
            "ipv6,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::/32,ipv6_flabel=0x12045/0xff0ff",
            "icmp6,icmpv6_type=135,ipv6_nd_target=fe80::1,ipv6_nd_sll=00:00:00:00:00:02",
            "icmp6,icmpv6_type=136,ipv6_nd_target=fe80::1,ipv6_nd_tll=00:00:00:00:00:03",
            "mpls,mpls_label=1048575,mpls_tc=7,mpls_bos=1",
            "eth_type=0x88e7,pbb_isid=0xab0000/0xff0000,pbb_uca=1",
            "tunnel_id=0x1234",
            "ipv6,ipv6_exthdr=0x100/0x1f0",
            "tcp,tcp_dst=80",
            "ip,ip_proto=47",
            "udp6,udp_src=53",
            "arp,arp_op=1",
            "eth_type=0x88cc",
            "oxm=0xffff:5:0:00002320aabb",
            "oxm=0x0001:3:1:0102",
        ] {
            let m = parse_match(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(print(&m), text);
        }
    }

    #[test]
    fn shorthands_insert_prerequisites_in_place() {
        let m = parse_match("in_port=1,tcp6,tcp_dst=22").unwrap();
        assert_eq!(
            m.fields,
            vec![
                b(OxmField::InPort, OxmValue::U32(1)),
                b(OxmField::EthType, OxmValue::U16(0x86dd)),
                b(OxmField::IpProto, OxmValue::U8(6)),
                b(OxmField::TcpDst, OxmValue::U16(22)),
            ]
        );
        for (name, eth, proto) in SHORTHANDS {
            let m = parse_match(name).unwrap();
            let mut want = vec![b(OxmField::EthType, OxmValue::U16(*eth))];
            if let Some(p) = proto {
                want.push(b(OxmField::IpProto, OxmValue::U8(*p)));
            }
            assert_eq!(m.fields, want, "{name}");
            assert_eq!(print(&m), *name);
        }
    }

    #[test]
    fn classic_names_map_to_oxm_fields() {
        let mac = OxmValue::Mac(ofp::MacAddr([0, 1, 2, 3, 4, 5]));
        let ip = OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let cases: Vec<(&str, Vec<Oxm>)> = vec![
            ("dl_src=00:01:02:03:04:05", vec![b(OxmField::EthSrc, mac)]),
            ("dl_dst=00:01:02:03:04:05", vec![b(OxmField::EthDst, mac)]),
            (
                "dl_type=0x0800",
                vec![b(OxmField::EthType, OxmValue::U16(0x800))],
            ),
            (
                "dl_vlan=5",
                vec![b(OxmField::VlanVid, OxmValue::U16(0x1005))],
            ),
            (
                "dl_vlan=0xffff",
                vec![b(OxmField::VlanVid, OxmValue::U16(0))],
            ),
            (
                "dl_vlan_pcp=3",
                vec![
                    bm(
                        OxmField::VlanVid,
                        OxmValue::U16(0x1000),
                        OxmValue::U16(0x1000),
                    ),
                    b(OxmField::VlanPcp, OxmValue::U8(3)),
                ],
            ),
            ("tun_id=9", vec![b(OxmField::TunnelId, OxmValue::U64(9))]),
            ("tunnel_id=9", vec![b(OxmField::TunnelId, OxmValue::U64(9))]),
            ("in_port_oxm=9", vec![b(OxmField::InPort, OxmValue::U32(9))]),
        ];
        // Names of fields that need others: after their prerequisites.
        let with = |field: OxmField, o: Oxm| {
            let mut v = prereqs(field);
            v.push(o);
            v
        };
        let needing: Vec<(&str, OxmField, Oxm)> = vec![
            (
                "nw_tos=0xb8",
                OxmField::IpDscp,
                b(OxmField::IpDscp, OxmValue::U8(46)),
            ),
            (
                "nw_ecn=1",
                OxmField::IpEcn,
                b(OxmField::IpEcn, OxmValue::U8(1)),
            ),
            (
                "ip_ecn=1",
                OxmField::IpEcn,
                b(OxmField::IpEcn, OxmValue::U8(1)),
            ),
            (
                "nw_src=10.0.0.1",
                OxmField::Ipv4Src,
                b(OxmField::Ipv4Src, ip),
            ),
            (
                "ip_src=10.0.0.1",
                OxmField::Ipv4Src,
                b(OxmField::Ipv4Src, ip),
            ),
            (
                "nw_dst=10.0.0.1",
                OxmField::Ipv4Dst,
                b(OxmField::Ipv4Dst, ip),
            ),
            (
                "ip_dst=10.0.0.1",
                OxmField::Ipv4Dst,
                b(OxmField::Ipv4Dst, ip),
            ),
            (
                "ipv6_label=5",
                OxmField::Ipv6Flabel,
                b(OxmField::Ipv6Flabel, OxmValue::U32(5)),
            ),
            (
                "nd_target=::1",
                OxmField::Ipv6NdTarget,
                b(OxmField::Ipv6NdTarget, OxmValue::Ipv6(Ipv6Addr::LOCALHOST)),
            ),
            (
                "nd_sll=00:01:02:03:04:05",
                OxmField::Ipv6NdSll,
                b(OxmField::Ipv6NdSll, mac),
            ),
            (
                "nd_tll=00:01:02:03:04:05",
                OxmField::Ipv6NdTll,
                b(OxmField::Ipv6NdTll, mac),
            ),
            (
                "icmpv4_type=3",
                OxmField::Icmpv4Type,
                b(OxmField::Icmpv4Type, OxmValue::U8(3)),
            ),
        ];
        for (text, field, o) in needing {
            let prefix = print(&Match {
                fields: prereqs(field),
            });
            let text = format!("{prefix},{text}");
            let m = parse_match(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(m.fields, with(field, o), "{text}");
        }
        let more: Vec<(&str, Vec<Oxm>)> = vec![
            (
                "ip,nw_src=10.0.0.1,nw_dst=10.0.0.0/8,nw_proto=1",
                vec![
                    b(OxmField::EthType, OxmValue::U16(0x800)),
                    b(OxmField::Ipv4Src, ip),
                    bm(
                        OxmField::Ipv4Dst,
                        OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 0)),
                        OxmValue::Ipv4(Ipv4Addr::new(255, 0, 0, 0)),
                    ),
                    b(OxmField::IpProto, OxmValue::U8(1)),
                ],
            ),
            (
                "nw_src=10.0.0.1,arp,nw_dst=10.0.0.1,nw_proto=2",
                vec![
                    b(OxmField::ArpSpa, ip),
                    b(OxmField::EthType, OxmValue::U16(0x806)),
                    b(OxmField::ArpTpa, ip),
                    b(OxmField::ArpOp, OxmValue::U16(2)),
                ],
            ),
            (
                "tp_src=1,tp_dst=2,udp",
                vec![
                    b(OxmField::UdpSrc, OxmValue::U16(1)),
                    b(OxmField::UdpDst, OxmValue::U16(2)),
                    b(OxmField::EthType, OxmValue::U16(0x800)),
                    b(OxmField::IpProto, OxmValue::U8(17)),
                ],
            ),
            (
                "ip,nw_proto=132,tp_dst=9",
                vec![
                    b(OxmField::EthType, OxmValue::U16(0x800)),
                    b(OxmField::IpProto, OxmValue::U8(132)),
                    b(OxmField::SctpDst, OxmValue::U16(9)),
                ],
            ),
            (
                "tcp,tp_src=5",
                vec![
                    b(OxmField::EthType, OxmValue::U16(0x800)),
                    b(OxmField::IpProto, OxmValue::U8(6)),
                    b(OxmField::TcpSrc, OxmValue::U16(5)),
                ],
            ),
            (
                "icmp,icmp_type=8,icmp_code=0",
                vec![
                    b(OxmField::EthType, OxmValue::U16(0x800)),
                    b(OxmField::IpProto, OxmValue::U8(1)),
                    b(OxmField::Icmpv4Type, OxmValue::U8(8)),
                    b(OxmField::Icmpv4Code, OxmValue::U8(0)),
                ],
            ),
            (
                "icmp6,icmp_type=135,icmp_code=0",
                vec![
                    b(OxmField::EthType, OxmValue::U16(0x86dd)),
                    b(OxmField::IpProto, OxmValue::U8(58)),
                    b(OxmField::Icmpv6Type, OxmValue::U8(135)),
                    b(OxmField::Icmpv6Code, OxmValue::U8(0)),
                ],
            ),
        ];
        for (text, want) in cases.into_iter().chain(more) {
            let m = parse_match(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(m.fields, want, "{text}");
        }
    }

    #[test]
    fn value_bits_outside_the_mask_are_cleared() {
        let m = parse_match("ip,ipv4_src=10.1.2.3/8,metadata=0xff/0xf0").unwrap();
        assert_eq!(print(&m), "ip,ipv4_src=10.0.0.0/8,metadata=0xf0/0xf0");
    }

    fn err(text: &str) -> (String, usize, String) {
        let e = parse_match(text).unwrap_err();
        (e.token, e.position, e.message)
    }

    #[test]
    fn errors_name_the_token_and_position() {
        let (t, p, m) = err("in_port=1,eth_dts=00:00:00:00:00:01");
        assert_eq!((t.as_str(), p), ("eth_dts", 10));
        assert!(m.contains("unknown field \"eth_dts\""), "{m}");
        assert_eq!(err("vlan_vid=0x2000").0, "0x2000");
        assert_eq!(err("mpls_label=0x100000").1, 11);
        assert_eq!(err("dl_vlan=4096").0, "4096");
        assert_eq!(err("dl_vlan=5/0xfff").0, "0xfff");
        assert_eq!(err("ip_proto=6/0xff").0, "0xff");
        assert_eq!(err("eth_src=aa:bb").0, "aa:bb");
        assert_eq!(err("ipv4_src=10.0.0.256").0, "10.0.0.256");
        assert_eq!(err("ipv4_src=10.0.0.0/33").0, "33");
        assert_eq!(err("ipv6_src=::1/129").0, "129");
        assert_eq!(err("tcp_dst=x").0, "x");
        let (t, p, m) = err("ip,tcp_dst=1,tcp_dst=2");
        assert_eq!((t.as_str(), p), ("tcp_dst", 13));
        assert!(m.contains("duplicate"), "{m}");
        let (t, p, _) = err("tcp,ip");
        assert_eq!((t.as_str(), p), ("ip", 4));
        let (t, p, m) = err("ip,tp_dst=80");
        assert_eq!((t.as_str(), p), ("tp_dst", 3));
        assert!(m.contains("ip_proto"), "{m}");
        assert_eq!(err("in_port").0, "in_port");
        assert_eq!(err("tcp=1").0, "1");
        assert_eq!(err("nw_tos=256").0, "256");
        assert_eq!(err("nw_tos=4/4").0, "4");
        assert_eq!(
            parse_match("ip,nw_tos=0xbb").unwrap(),
            parse_match("ip,ip_dscp=46").unwrap()
        );
        assert_eq!(err("oxm=0xffff:5:2:00").0, "2");
        assert_eq!(err("oxm=0xffff:5:0:0").0, "0");
        assert_eq!(err("oxm=0xffff:128:0:").0, "128");
    }

    fn fields(text: &str) -> Vec<Oxm> {
        parse_match(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .fields
    }

    #[test]
    fn ovs_names_of_the_ipv4_addresses() {
        let ip = OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let eth = |t| b(OxmField::EthType, OxmValue::U16(t));
        assert_eq!(fields("ip,ip_src=10.0.0.1"), fields("ip,nw_src=10.0.0.1"));
        assert_eq!(
            fields("ip,ip_dst=10.0.0.1"),
            vec![eth(0x0800), b(OxmField::Ipv4Dst, ip)]
        );
        // In an ARP or RARP match they are the ARP protocol addresses.
        assert_eq!(
            fields("arp,ip_src=10.0.0.1,ip_dst=10.0.0.1"),
            vec![
                eth(0x0806),
                b(OxmField::ArpSpa, ip),
                b(OxmField::ArpTpa, ip)
            ]
        );
        assert_eq!(
            fields("in_port_oxm=LOCAL"),
            vec![b(OxmField::InPort, OxmValue::U32(0xffff_fffe))]
        );
    }

    #[test]
    fn openflow_1_0_port_numbers_mean_the_reserved_ports() {
        let port = |text: &str| match fields(text).as_slice() {
            [Oxm::Basic { value, .. }] => value.to_u128() as u32,
            other => panic!("{other:?}"),
        };
        assert_eq!(port("in_port=65534"), port_no::LOCAL);
        assert_eq!(port("in_port=65533"), port_no::CONTROLLER);
        assert_eq!(port("in_port=65535"), port_no::ANY);
        assert_eq!(port("in_port=65280"), 0xffff_ff00);
        assert_eq!(port("in_port=65279"), 65279);
        assert_eq!(port("in_port=4294967294"), port_no::LOCAL);
        // In hex a number is the port of that number (fulmar's spelling).
        assert_eq!(port("in_port=0xfffe"), 0xfffe);
        assert_eq!(
            print(&parse_match("in_port=0xfffe").unwrap()),
            "in_port=0xfffe"
        );
    }

    #[test]
    fn vlan_tci_becomes_vlan_vid_and_vlan_pcp() {
        let vid = |v| b(OxmField::VlanVid, OxmValue::U16(v));
        let vid_m = |v, m| bm(OxmField::VlanVid, OxmValue::U16(v), OxmValue::U16(m));
        let pcp = |p| b(OxmField::VlanPcp, OxmValue::U8(p));
        for (text, want) in [
            ("vlan_tci=0x1005", vec![vid(0x1005), pcp(0)]),
            ("vlan_tci=0xf005", vec![vid(0x1005), pcp(7)]),
            ("vlan_tci=0x1005/0x1fff", vec![vid(0x1005)]),
            ("vlan_tci=0x1005/0x0fff", vec![vid_m(0x0005, 0x0fff)]),
            ("vlan_tci=0x1000/0x1000", vec![vid_m(0x1000, 0x1000)]),
            ("vlan_tci=0x0000/0x1000", vec![vid_m(0, 0x1000)]),
            (
                "vlan_tci=0x1000/0xf000",
                vec![vid_m(0x1000, 0x1000), pcp(0)],
            ),
            (
                "vlan_tci=0x3000/0xf000",
                vec![vid_m(0x1000, 0x1000), pcp(1)],
            ),
            ("vlan_tci=0", vec![vid(0)]),
            ("vlan_tci=0x0000/0xffff", vec![vid(0)]),
            ("vlan_tci=0/0", vec![]),
        ] {
            assert_eq!(fields(text), want, "{text}");
        }
        // Part of the PCP, the PCP without CFI, bits of an absent tag.
        assert_eq!(err("vlan_tci=0x3000/0x3000").0, "0x3000");
        assert_eq!(err("vlan_tci=0x0000/0xe000").0, "0xe000");
        assert_eq!(err("vlan_tci=0x0005").0, "vlan_tci");
        assert_eq!(err("vlan_tci=0x10000").0, "0x10000");
        assert!(err("vlan_tci=0x1005,dl_vlan=5").2.contains("duplicate"));
    }

    #[test]
    fn vlan_pcp_implies_a_tag() {
        let present = bm(
            OxmField::VlanVid,
            OxmValue::U16(0x1000),
            OxmValue::U16(0x1000),
        );
        let pcp = b(OxmField::VlanPcp, OxmValue::U8(3));
        assert_eq!(fields("vlan_pcp=3"), vec![present.clone(), pcp.clone()]);
        assert_eq!(
            fields("in_port=1,dl_vlan_pcp=3"),
            vec![b(OxmField::InPort, OxmValue::U32(1)), present, pcp.clone()]
        );
        // A VID given anywhere is the tag: nothing is added.
        assert_eq!(
            fields("vlan_pcp=3,dl_vlan=5"),
            vec![pcp, b(OxmField::VlanVid, OxmValue::U16(0x1005))]
        );
        // "No tag" and a PCP contradict each other.
        let (t, _, m) = err("dl_vlan=0xffff,dl_vlan_pcp=3");
        assert_eq!(t, "dl_vlan_pcp");
        assert!(m.contains("VLAN tag"), "{m}");
    }

    #[test]
    fn masks_as_open_vswitch_encodes_them() {
        // All ones: no mask. All zeros: no field.
        assert_eq!(
            fields("metadata=5/0xffffffffffffffff"),
            fields("metadata=5")
        );
        assert_eq!(
            fields("ip,nw_src=10.0.0.1/32"),
            fields("ip,nw_src=10.0.0.1")
        );
        assert_eq!(fields("ipv6,ipv6_src=::1/128"), fields("ipv6,ipv6_src=::1"));
        assert_eq!(fields("vlan_vid=0x1005/0x1fff"), fields("vlan_vid=0x1005"));
        assert_eq!(fields("ip,nw_src=10.0.0.1/0"), fields("ip"));
        assert_eq!(fields("dl_dst=01:00:00:00:00:00/00:00:00:00:00:00"), vec![]);
    }

    #[test]
    fn fields_need_their_protocols() {
        for (text, token, needs) in [
            ("nw_src=10.0.0.1", "nw_src", "eth_type 0x0800"),
            ("ip_dst=10.0.0.1", "ip_dst", "eth_type 0x0800"),
            ("ipv4_src=10.0.0.1", "ipv4_src", "eth_type 0x0800"),
            ("arp,ipv6_src=::1", "ipv6_src", "0x86dd"),
            ("nw_proto=6", "nw_proto", "ip or ipv6"),
            ("nw_tos=4", "nw_tos", "ip or ipv6"),
            ("ip,icmp_type=8", "icmp_type", "ip_proto 1"),
            ("udp,tcp_dst=80", "tcp_dst", "ip_proto 6"),
            ("tcp_dst=80", "tcp_dst", "ip_proto 6"),
            ("arp_op=1", "arp_op", "0x0806"),
            ("rarp,arp_op=3", "arp_op", "0x0806"),
            ("mpls_label=5", "mpls_label", "0x8847"),
            ("icmp6,nd_target=::1", "nd_target", "135 or 136"),
            (
                "icmp6,icmp_type=136,nd_sll=00:00:00:00:00:01",
                "nd_sll",
                "135",
            ),
            ("in_phy_port=1", "in_phy_port", "in_port"),
            ("ipv6,icmp_type=1", "icmp_type", "ip_proto 58"),
        ] {
            let (t, _, m) = err(text);
            assert_eq!(t, token, "{text}");
            assert!(m.contains(needs), "{text}: {m}");
        }
    }
}
