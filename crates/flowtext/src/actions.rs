//! Actions and instructions: parsing the `actions=` text and printing it.
//!
//! Canonical printed forms (all accepted back by the parser):
//!
//! | structure | text |
//! |---|---|
//! | `Output{CONTROLLER, n}` | `CONTROLLER:n` |
//! | `Output{p, _}` | `output:p` (`p` a number or `LOCAL`, `IN_PORT`, ...; OpenFlow 1.3 gives `max_len` a meaning only for CONTROLLER, and the text does not carry it for other ports) |
//! | `Group`, `SetQueue` | `group:n`, `set_queue:n` |
//! | push/pop | `push_vlan:0x8100`, `pop_vlan`, `push_mpls:0x8847`, `pop_mpls:0x0800`, `push_pbb:0x88e7`, `pop_pbb` |
//! | TTLs | `set_mpls_ttl:n`, `dec_mpls_ttl`, `set_nw_ttl:n`, `dec_ttl`, `copy_ttl_out`, `copy_ttl_in` |
//! | `SetField` | `set_field:VALUE->FIELD` (OXM name; value as in a match) |
//! | `SetField` of a non-basic OXM | `set_oxm:CLASS:FIELD:HASMASK:HEXBODY` |
//! | `Experimenter` | `experimenter:0xID:HEXDATA` |
//!
//! Instructions: an `ApplyActions` prints as its bare actions (a run of bare
//! actions parses back into one `ApplyActions` at that place); an empty one
//! as `apply_actions()`. Then `write_actions(...)`, `clear_actions`,
//! `write_metadata:0xV[/0xM]` (mask printed unless all ones),
//! `goto_table:n`, `meter:n`, `experimenter_instruction:0xID:HEXDATA`.
//! Instructions keep their order; a flow has at most one of each. No
//! instructions at all prints as `drop`; so does an empty `write_actions`,
//! which Open vSwitch leaves out (writing nothing to the action set does
//! nothing).
//!
//! Also accepted, every action spelling of ovs-actions(7) that OpenFlow
//! 1.3 can encode, meaning what Open vSwitch means by it:
//!
//! * output: a bare port number or name (`LOCAL`, `in_port`, `all`,
//!   `flood`, `normal`, `table`; a bare number sends whole packets even to
//!   the controller: `65533` is `CONTROLLER:0` as in Open vSwitch),
//!   `output=N`, `output(port=N)`, `controller`, `controller:N`,
//!   `controller(max_len=N)` (also `reason=action`, `id=0`, the defaults).
//!   OpenFlow 1.0 port numbers 65280-65535 mean the reserved ports
//!   (`65534` is `LOCAL`), as ovs-ofctl reads them.
//! * `strip_vlan`, `mod_nw_ttl:N`, `dec_nw_ttl`, `set_nw_ttl:N`, and the
//!   `mod_*` actions, which become `set_field`: `mod_dl_src`,
//!   `mod_dl_dst`, `mod_nw_src`, `mod_nw_dst`, `mod_nw_tos` (TOS byte, a
//!   multiple of 4, stored as `ip_dscp`), `mod_nw_ecn`, `set_mpls_label`,
//!   `set_mpls_tc`, `set_tunnel`, `set_tunnel64`, `mod_tp_src`/`mod_tp_dst`
//!   (tcp/udp/sctp by the flow's `ip_proto`).
//! * `mod_vlan_vid:VID` / `mod_vlan_pcp:PCP`: `set_field` of the 12-bit
//!   VID (with OFPVID_PRESENT) or the PCP, preceded by `push_vlan:0x8100`
//!   where the packet has no VLAN tag at that point (the match does not
//!   require one, or an earlier action popped it); `set_vlan_vid` /
//!   `set_vlan_pcp` never push.
//! * `set_field:VALUE->NAME` with Open vSwitch's names too (`ip_src`,
//!   `nw_dst`, `tp_src` (TCP), `icmp_type` (ICMPv4), `dl_src`, `tun_id`,
//!   ...).
//!
//! As `ovs-ofctl` does, a flow's actions are checked against its match,
//! followed through the pushes and pops before them: a `set_field` (or a
//! `mod_*`) needs its field's protocol (`mod_nw_dst` an IPv4 match,
//! `set_field` of `vlan_vid` a tag); in apply-actions also `pop_vlan`
//! needs a tag, `pop_mpls` and the MPLS TTL actions an MPLS ethertype, the
//! IP TTL actions IPv4 or IPv6; at most two VLAN tags; `goto_table` must
//! go forward. Write-actions are checked in the order the action set runs
//! them (pops, pushes, then the rest), where Open vSwitch checks them as
//! written. Group buckets and bare action lists are not checked against
//! anything (they start with an untagged packet).

use crate::lexer::{split_list, Tok};
use crate::match_text::{
    field_by_name, format_basic, format_other, parse_tos, parse_value_and_mask, transport_field,
};
use crate::value::{
    format_hex_bytes, format_port, parse_hex_bytes, parse_port, parse_u16, parse_u32, parse_u64,
    parse_u8, port_by_name,
};
use crate::ParseError;
use ofp::action::OFPCML_NO_BUFFER;
use ofp::consts::port_no;
use ofp::oxm::OFPVID_PRESENT;
use ofp::{Action, Instruction, Match, Oxm, OxmField, OxmValue};

/// Which of ovs-ofctl's consistency checks apply to an action list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Checks {
    /// A flow's apply-actions: every inconsistency is an error.
    Apply,
    /// A flow's write-actions: only what the set-fields need (the action
    /// set runs later, in its own order).
    Write,
    /// Group buckets and bare action lists: nothing is known to check.
    None,
}

/// What is known about the packet as a flow's actions run, as ovs-ofctl
/// follows it to check them: the match's fields, changed by the pushes
/// and pops (a `set_field` changes nothing here, as in Open vSwitch).
#[derive(Clone, Debug)]
pub(crate) struct Packet {
    /// Fields known from the match (prerequisites need exact ones).
    known: Match,
    /// VLAN tags known to be there (0, 1 or 2).
    vlans: u8,
    checks: Checks,
    /// The flow's table, for `goto_table` (None: not checked).
    table: Option<u8>,
}

impl Default for Packet {
    /// Nothing known, nothing checked, no tag.
    fn default() -> Self {
        Packet {
            known: Match::default(),
            vlans: 0,
            checks: Checks::None,
            table: None,
        }
    }
}

const ETH_MPLS: [u16; 2] = [0x8847, 0x8848];
const ETH_IP: [u16; 2] = [0x0800, 0x86dd];

impl Packet {
    /// A flow's packet: what `m` says, checked as apply-actions; `table`
    /// when `goto_table` must go beyond it.
    pub fn of_flow(m: &Match, table: Option<u8>) -> Packet {
        let tagged = m.prerequisites_met(OxmField::VlanPcp);
        Packet {
            known: m.clone(),
            vlans: u8::from(tagged),
            checks: Checks::Apply,
            table,
        }
    }

    fn exact(&self, field: OxmField) -> Option<u128> {
        match self.known.get(field)? {
            (v, None) => Some(v.to_u128()),
            (v, Some(m)) if m.to_u128() & field.max_value() == field.max_value() => {
                Some(v.to_u128())
            }
            _ => None,
        }
    }

    fn eth_type_in(&self, types: &[u16]) -> bool {
        self.exact(OxmField::EthType)
            .is_some_and(|t| types.iter().any(|x| u128::from(*x) == t))
    }

    fn ip_proto(&self) -> Option<u8> {
        if !self.eth_type_in(&ETH_IP) {
            return None;
        }
        self.exact(OxmField::IpProto).map(|p| p as u8)
    }

    fn remove(&mut self, field: OxmField) {
        self.known
            .fields
            .retain(|o| !matches!(o, Oxm::Basic { field: f, .. } if *f == field));
    }

    /// A new ethertype (push or pop of MPLS or PBB): what was known above
    /// layer 2 is no longer.
    fn set_eth_type(&mut self, ethertype: u16) {
        self.known.fields.retain(|o| {
            matches!(o, Oxm::Basic { field, .. } if matches!(field,
                OxmField::InPort | OxmField::InPhyPort | OxmField::Metadata
                | OxmField::EthDst | OxmField::EthSrc | OxmField::VlanVid
                | OxmField::VlanPcp | OxmField::TunnelId))
        });
        self.known.fields.push(Oxm::Basic {
            field: OxmField::EthType,
            value: OxmValue::U16(ethertype),
            mask: None,
        });
    }

    /// Whether a set-field of `field` has what it needs.
    fn can_set(&self, field: OxmField) -> bool {
        match field {
            OxmField::VlanVid | OxmField::VlanPcp => self.vlans > 0,
            f => self.known.prerequisites_met(f),
        }
    }

    /// Checks `a` (parsed from `t`) against the packet and follows it.
    fn apply(&mut self, a: &Action, t: Tok<'_>) -> Result<(), ParseError> {
        let strict = self.checks == Checks::Apply;
        let sets = self.checks != Checks::None;
        let inconsistent = |what: &str| {
            Err(t.err(format!(
                "{} needs {what} (OpenFlow 1.3 refuses actions inconsistent with the match)",
                t.quoted()
            )))
        };
        match a {
            Action::PushVlan { .. } => {
                if self.vlans >= 2 {
                    return Err(t.err(format!(
                        "{}: a packet has at most two VLAN tags here",
                        t.quoted()
                    )));
                }
                self.vlans += 1;
            }
            Action::PopVlan => {
                if strict && self.vlans == 0 {
                    return inconsistent("a VLAN tag (match dl_vlan, vlan_tci or vlan_vid with the present bit, or push one first)");
                }
                self.vlans = self.vlans.saturating_sub(1);
                if self.vlans == 0 {
                    self.remove(OxmField::VlanVid);
                    self.remove(OxmField::VlanPcp);
                }
            }
            Action::PushMpls { ethertype } | Action::PushPbb { ethertype } => {
                self.set_eth_type(*ethertype)
            }
            Action::PopMpls { ethertype } => {
                if strict && !self.eth_type_in(&ETH_MPLS) {
                    return inconsistent("an MPLS match (mpls or mplsm)");
                }
                self.set_eth_type(*ethertype)
            }
            Action::PopPbb => {
                if strict && !self.eth_type_in(&[0x88e7]) {
                    return inconsistent("a PBB match (dl_type=0x88e7)");
                }
                self.remove(OxmField::EthType);
            }
            Action::SetMplsTtl { .. } | Action::DecMplsTtl
                if strict && !self.eth_type_in(&ETH_MPLS) =>
            {
                return inconsistent("an MPLS match (mpls or mplsm)");
            }
            Action::SetNwTtl { .. } | Action::DecNwTtl if strict && !self.eth_type_in(&ETH_IP) => {
                return inconsistent("an IPv4 or IPv6 match (ip or ipv6)");
            }
            Action::SetField {
                field: Oxm::Basic { field, .. },
            } if sets && !self.can_set(*field) => {
                return inconsistent(&format!(
                    "{} in the match to set {}",
                    crate::match_text::prerequisite_text(*field),
                    field.name()
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

/// A `name`, `name:arg`, `name=arg` or `name(args)` piece.
struct Call<'a> {
    name: Tok<'a>,
    /// Lowercased name.
    lname: String,
    arg: Option<Tok<'a>>,
    parens: bool,
}

fn split_call(t: Tok<'_>) -> Result<Call<'_>, ParseError> {
    let cut = t.text.find([':', '=', '(']);
    let Some(i) = cut else {
        return Ok(Call {
            name: t,
            lname: t.text.to_ascii_lowercase(),
            arg: None,
            parens: false,
        });
    };
    let name = t.range(0, i);
    let lname = name.text.to_ascii_lowercase();
    if t.text.as_bytes().get(i) == Some(&b'(') {
        // split_list guarantees balance; the matching ')' must end the piece.
        let mut depth = 0usize;
        let mut close = None;
        for (j, c) in t.text.char_indices().skip_while(|&(j, _)| j < i) {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                _ => {}
            }
        }
        let close = close.ok_or_else(|| t.err("unbalanced parentheses"))?;
        if close + 1 != t.text.len() {
            let rest = t.from(close + 1);
            return Err(rest.err(format!("unexpected text {} after \")\"", rest.quoted())));
        }
        return Ok(Call {
            name,
            lname,
            arg: Some(t.range(i + 1, close)),
            parens: true,
        });
    }
    Ok(Call {
        name,
        lname,
        arg: Some(t.from(i + 1)),
        parens: false,
    })
}

impl<'a> Call<'a> {
    fn no_arg(&self) -> Result<(), ParseError> {
        match self.arg {
            None => Ok(()),
            Some(a) => Err(a.err(format!(
                "{} takes no argument (got {})",
                self.name.quoted(),
                a.quoted()
            ))),
        }
    }

    /// The argument of `name:arg`, `name=arg` or `name(arg)` (Open vSwitch
    /// prints `set_mpls_ttl(64)`).
    fn arg(&self) -> Result<Tok<'a>, ParseError> {
        match self.arg {
            Some(a) if !a.text.is_empty() => Ok(a),
            _ => Err(self.name.err(format!(
                "{} needs an argument (NAME:VALUE)",
                self.name.quoted()
            ))),
        }
    }
}

/// Parses `key=value` pairs inside parentheses; only `allowed` keys.
fn paren_args<'a>(arg: Tok<'a>, allowed: &[&str]) -> Result<Vec<(Tok<'a>, Tok<'a>)>, ParseError> {
    let mut out: Vec<(Tok<'a>, Tok<'a>)> = Vec::new();
    for piece in split_list(arg)? {
        let (k, v) = piece
            .split_once("=")
            .ok_or_else(|| piece.err(format!("expected key=value, got {}", piece.quoted())))?;
        if !allowed.contains(&k.text) {
            return Err(k.err(format!("unknown argument {}", k.quoted())));
        }
        if out.iter().any(|(o, _)| o.text == k.text) {
            return Err(k.err(format!("duplicate argument {}", k.quoted())));
        }
        out.push((k, v));
    }
    Ok(out)
}

fn set_field(field: OxmField, value: OxmValue) -> Action {
    Action::SetField {
        field: Oxm::Basic {
            field,
            value,
            mask: None,
        },
    }
}

/// An output as `output:P` writes it: the whole packet to the controller.
fn output(port: u32) -> Action {
    Action::Output {
        port,
        max_len: if port == port_no::CONTROLLER {
            OFPCML_NO_BUFFER
        } else {
            0
        },
    }
}

/// The port of an output action: any but `ANY` (`NONE`).
fn output_port(t: Tok<'_>) -> Result<u32, ParseError> {
    let p = parse_port(t)?;
    if p == port_no::ANY {
        return Err(t.err(format!(
            "{} is not a port to output to (ANY/NONE)",
            t.quoted()
        )));
    }
    Ok(p)
}

/// A field named in `set_field`: an OXM name or an Open vSwitch name
/// (where a name means another field in a match, as `nw_src` does in an
/// ARP match, `set_field` takes the field ovs-fields(7) gives it).
fn set_field_by_name(name: &str) -> Option<OxmField> {
    Some(match name {
        "ip_src" | "nw_src" => OxmField::Ipv4Src,
        "ip_dst" | "nw_dst" => OxmField::Ipv4Dst,
        "tp_src" => OxmField::TcpSrc,
        "tp_dst" => OxmField::TcpDst,
        "icmp_type" => OxmField::Icmpv4Type,
        "icmp_code" => OxmField::Icmpv4Code,
        // A match keyword only: Open vSwitch has no such field to set.
        "dl_vlan_pcp" => return None,
        _ => return field_by_name(name),
    })
}

/// The ethertype of a push action: one of the two `allowed` for its tag
/// (`kind`: "a VLAN", "an MPLS").
fn pushed_ethertype(a: Tok<'_>, allowed: [u16; 2], kind: &str) -> Result<u16, ParseError> {
    let ethertype = parse_u16(a, "an ethertype")?;
    if !allowed.contains(&ethertype) {
        return Err(a.err(format!(
            "{} is not {kind} ethertype ({:#06x} or {:#06x})",
            a.quoted(),
            allowed[0],
            allowed[1]
        )));
    }
    Ok(ethertype)
}

/// A 12-bit VLAN id (`mod_vlan_vid`, `set_vlan_vid`).
fn parse_vid(a: Tok<'_>) -> Result<u16, ParseError> {
    let vid = parse_u16(a, "a VLAN id")?;
    if vid > 0x0fff {
        return Err(a.err(format!("VLAN id {} is wider than 12 bits", a.quoted())));
    }
    Ok(vid)
}

/// Parses one action piece into the actions it stands for (two for a
/// `mod_vlan_*` that pushes a tag), checked against and following `pkt`.
pub(crate) fn parse_action(t: Tok<'_>, pkt: &mut Packet) -> Result<Vec<Action>, ParseError> {
    let mut out = Vec::with_capacity(1);
    if t.text.starts_with(|c: char| c.is_ascii_digit()) {
        // A bare port number: the whole packet, max_len 0 even to the
        // controller (ovs-ofctl's reading).
        out.push(Action::Output {
            port: output_port(t)?,
            max_len: 0,
        });
    } else {
        parse_named_action(t, pkt, &mut out)?;
    }
    for a in &out {
        pkt.apply(a, t)?;
    }
    Ok(out)
}

fn parse_named_action(
    t: Tok<'_>,
    pkt: &mut Packet,
    out: &mut Vec<Action>,
) -> Result<(), ParseError> {
    let c = split_call(t)?;
    let what = c.lname.as_str();
    let action = match what {
        "output" if c.parens => {
            let mut port = None;
            let args = paren_args(c.arg.unwrap_or(c.name), &["port", "max_len"])?;
            for (k, v) in args {
                match k.text {
                    "port" => port = Some(output_port(v)?),
                    _ => {
                        return Err(k.err(format!(
                        "{}: output with max_len truncates packets in Open vSwitch, an extension \
                             OpenFlow 1.3 cannot express (its max_len is only for CONTROLLER: \
                             controller(max_len=N))",
                        t.quoted()
                    )))
                    }
                }
            }
            let port = port.ok_or_else(|| t.err(format!("{} needs port=N", t.quoted())))?;
            output(port)
        }
        "output" => output(output_port(c.arg()?)?),
        "controller" => {
            let max_len = match (c.arg, c.parens) {
                (None, _) => OFPCML_NO_BUFFER,
                (Some(a), true) => {
                    let mut m = OFPCML_NO_BUFFER;
                    for (k, v) in paren_args(a, &["max_len", "reason", "id", "userdata", "pause"])?
                    {
                        match (k.text, v.text) {
                            ("max_len", _) => m = parse_u16(v, "max_len")?,
                            ("reason", "action") | ("id", "0") => {}
                            _ => {
                                return Err(k.err(format!(
                                    "controller({}={}) is an Open vSwitch extension \
                                     (NXAST_CONTROLLER) that OpenFlow 1.3 cannot express",
                                    k.text, v.text
                                )))
                            }
                        }
                    }
                    m
                }
                (Some(_), false) => parse_u16(c.arg()?, "max_len")?,
            };
            Action::Output {
                port: port_no::CONTROLLER,
                max_len,
            }
        }
        "in_port" | "all" | "flood" | "normal" | "local" | "table" => {
            c.no_arg()?;
            output(port_by_name(what).unwrap_or(port_no::ANY))
        }
        "drop" => return Err(t.err("\"drop\" must be the only action")),
        "group" => Action::Group {
            group_id: parse_u32(c.arg()?, "a group id")?,
        },
        "set_queue" => Action::SetQueue {
            queue_id: parse_u32(c.arg()?, "a queue id")?,
        },
        "push_vlan" => Action::PushVlan {
            ethertype: pushed_ethertype(c.arg()?, [0x8100, 0x88a8], "a VLAN")?,
        },
        "push_mpls" => Action::PushMpls {
            ethertype: pushed_ethertype(c.arg()?, [0x8847, 0x8848], "an MPLS")?,
        },
        "pop_mpls" => Action::PopMpls {
            ethertype: parse_u16(c.arg()?, "an ethertype")?,
        },
        "push_pbb" => Action::PushPbb {
            ethertype: parse_u16(c.arg()?, "an ethertype")?,
        },
        "pop_vlan" | "strip_vlan" => {
            c.no_arg()?;
            Action::PopVlan
        }
        "pop_pbb" => {
            c.no_arg()?;
            Action::PopPbb
        }
        "set_mpls_ttl" => Action::SetMplsTtl {
            mpls_ttl: parse_u8(c.arg()?, "a TTL")?,
        },
        "dec_mpls_ttl" => {
            c.no_arg()?;
            Action::DecMplsTtl
        }
        "set_nw_ttl" | "mod_nw_ttl" => Action::SetNwTtl {
            nw_ttl: parse_u8(c.arg()?, "a TTL")?,
        },
        "dec_ttl" | "dec_nw_ttl" => {
            c.no_arg()?;
            Action::DecNwTtl
        }
        "copy_ttl_out" => {
            c.no_arg()?;
            Action::CopyTtlOut
        }
        "copy_ttl_in" => {
            c.no_arg()?;
            Action::CopyTtlIn
        }
        "set_field" => {
            let a = c.arg()?;
            let (value, name) = a
                .split_once("->")
                .ok_or_else(|| a.err(format!("{} is not VALUE->FIELD", a.quoted())))?;
            let field = set_field_by_name(name.text)
                .ok_or_else(|| name.err(format!("unknown field {}", name.quoted())))?;
            if !field.settable() {
                return Err(name.err(format!("field {} cannot be set", name.quoted())));
            }
            if let Some((_, m)) = value.split_once("/") {
                return Err(m.err(format!(
                    "set_field with a mask (\"/{}\") is an Open vSwitch extension \
                     OpenFlow 1.3 cannot express",
                    m.text
                )));
            }
            Action::SetField {
                field: parse_value_and_mask(field, value, false)?,
            }
        }
        "set_oxm" => {
            let a = c.arg()?;
            Action::SetField {
                field: crate::match_text::parse_other(a)?,
            }
        }
        "mod_dl_src" | "mod_dl_dst" | "mod_nw_src" | "mod_nw_dst" | "mod_nw_ecn"
        | "set_mpls_label" | "set_mpls_tc" | "set_tunnel" | "set_tunnel64" => {
            let field = match what {
                "mod_dl_src" => OxmField::EthSrc,
                "mod_dl_dst" => OxmField::EthDst,
                "mod_nw_src" => OxmField::Ipv4Src,
                "mod_nw_dst" => OxmField::Ipv4Dst,
                "mod_nw_ecn" => OxmField::IpEcn,
                "set_mpls_label" => OxmField::MplsLabel,
                "set_mpls_tc" => OxmField::MplsTc,
                _ => OxmField::TunnelId,
            };
            Action::SetField {
                field: parse_value_and_mask(field, c.arg()?, false)?,
            }
        }
        "mod_vlan_vid" | "mod_vlan_pcp" | "set_vlan_vid" | "set_vlan_pcp" => {
            let a = c.arg()?;
            let value = if what.ends_with("vid") {
                set_field(
                    OxmField::VlanVid,
                    OxmValue::U16(parse_vid(a)? | OFPVID_PRESENT),
                )
            } else {
                Action::SetField {
                    field: parse_value_and_mask(OxmField::VlanPcp, a, false)?,
                }
            };
            // mod_vlan_* push a tag where there is none (ovs-actions(7)).
            if what.starts_with("mod") && pkt.vlans == 0 {
                out.push(Action::PushVlan { ethertype: 0x8100 });
            }
            value
        }
        "mod_nw_tos" => {
            let tos = parse_tos(c.arg()?)?;
            set_field(OxmField::IpDscp, OxmValue::U8(tos >> 2))
        }
        "mod_tp_src" | "mod_tp_dst" => {
            let field = transport_field(pkt.ip_proto().map(u128::from), what == "mod_tp_src")
                .ok_or_else(|| {
                    c.name.err(format!(
                        "{} needs a tcp, udp or sctp match (or use set_field)",
                        c.name.quoted()
                    ))
                })?;
            set_field(field, OxmValue::U16(parse_u16(c.arg()?, "a port")?))
        }
        "experimenter" => {
            let (id, data) = experimenter_args(c.arg()?)?;
            Action::Experimenter {
                experimenter: id,
                data,
            }
        }
        _ => match port_by_name(c.name.text) {
            Some(p) if c.arg.is_none() && p != port_no::ANY => output(p),
            _ => return Err(c.name.err(format!("unknown action {}", c.name.quoted()))),
        },
    };
    out.push(action);
    Ok(())
}

/// `ID:HEXDATA` of the experimenter action and instruction.
fn experimenter_args(a: Tok<'_>) -> Result<(u32, Vec<u8>), ParseError> {
    let (id, data) = a
        .split_once(":")
        .ok_or_else(|| a.err(format!("{} is not ID:HEXDATA", a.quoted())))?;
    Ok((parse_u32(id, "an experimenter id")?, parse_hex_bytes(data)?))
}

/// Parses a list of actions (`drop` alone, or nothing, is the empty list),
/// checked against and following `pkt`.
pub(crate) fn parse_action_list(t: Tok<'_>, pkt: &mut Packet) -> Result<Vec<Action>, ParseError> {
    Ok(parse_actions_with_tokens(t, pkt)?
        .into_iter()
        .map(|(a, _)| a)
        .collect())
}

/// [`parse_action_list`], each action with the piece it came from.
fn parse_actions_with_tokens<'a>(
    t: Tok<'a>,
    pkt: &mut Packet,
) -> Result<Vec<(Action, Tok<'a>)>, ParseError> {
    let pieces = split_list(t)?;
    if let [only] = pieces.as_slice() {
        if only.text.eq_ignore_ascii_case("drop") {
            return Ok(Vec::new());
        }
    }
    let mut out = Vec::with_capacity(pieces.len());
    for p in pieces {
        out.extend(parse_action(p, pkt)?.into_iter().map(|a| (a, p)));
    }
    Ok(out)
}

/// The actions of a write-actions instruction, checked as the action set
/// runs them (OpenFlow 1.3 §5.10: pops, then pushes of MPLS, PBB and
/// VLAN, then the rest), not in the order written: a set-field of the VID
/// written before the push of its tag is fine. Only what the set-fields
/// need is checked (the action set runs later, on whatever the packet is
/// then); `mod_vlan_*` push a tag where, in the order written, none is.
fn parse_write_actions(t: Tok<'_>, pkt: &Packet) -> Result<Vec<Action>, ParseError> {
    let mut written = pkt.clone();
    written.checks = Checks::None;
    let list = parse_actions_with_tokens(t, &mut written)?;
    if pkt.checks != Checks::None {
        let mut order: Vec<&(Action, Tok<'_>)> = list.iter().collect();
        order.sort_by_key(|(a, _)| a.action_set_rank());
        let mut set = pkt.clone();
        set.checks = Checks::Write;
        for (a, tok) in order {
            set.apply(a, *tok)?;
        }
    }
    Ok(list.into_iter().map(|(a, _)| a).collect())
}

/// The kind of an instruction, for "at most one of each".
fn instruction_kind(i: &Instruction) -> u8 {
    match i {
        Instruction::GotoTable { .. } => 1,
        Instruction::WriteMetadata { .. } => 2,
        Instruction::WriteActions { .. } => 3,
        Instruction::ApplyActions { .. } => 4,
        Instruction::ClearActions => 5,
        Instruction::Meter { .. } => 6,
        Instruction::Experimenter { .. } => 7,
    }
}

/// Parses the `actions=` text into instructions, checked against and
/// following `pkt` (the flow's packet).
pub(crate) fn parse_instructions(
    t: Tok<'_>,
    pkt: &mut Packet,
) -> Result<Vec<Instruction>, ParseError> {
    let pieces = split_list(t)?;
    if let [only] = pieces.as_slice() {
        if only.text.eq_ignore_ascii_case("drop") {
            return Ok(Vec::new());
        }
    }
    let mut out: Vec<Instruction> = Vec::new();
    // Index in `out` of the ApplyActions a run of bare actions goes into.
    let mut bare: Option<usize> = None;
    let mut seen: Vec<u8> = Vec::new();
    let mut once = |ins: &Instruction, p: Tok<'_>| {
        let k = instruction_kind(ins);
        if seen.contains(&k) {
            let what = if k == 4 {
                "apply-actions (bare actions must come together)"
            } else {
                "instruction of this kind"
            };
            return Err(p.err(format!(
                "{}: a second {what}; a flow has at most one of each",
                p.quoted()
            )));
        }
        seen.push(k);
        Ok(())
    };
    for p in pieces {
        let c = split_call(p)?;
        let ins = match c.lname.as_str() {
            "goto_table" => {
                let a = c.arg()?;
                let table_id = parse_u8(a, "a table id")?;
                if table_id == 255 {
                    return Err(a.err("goto_table:255 names no table (0-254)"));
                }
                if let Some(tbl) = pkt.table.filter(|&tbl| table_id <= tbl) {
                    return Err(a.err(format!(
                        "goto_table:{table_id} must go to a table after {tbl}"
                    )));
                }
                Instruction::GotoTable { table_id }
            }
            "write_metadata" => {
                let a = c.arg()?;
                let (v, m) = match a.split_once("/") {
                    Some((v, m)) => (v, Some(m)),
                    None => (a, None),
                };
                Instruction::WriteMetadata {
                    metadata: parse_u64(v, "metadata")?,
                    metadata_mask: match m {
                        Some(m) => parse_u64(m, "a metadata mask")?,
                        None => u64::MAX,
                    },
                }
            }
            "apply_actions" if c.parens => Instruction::ApplyActions {
                actions: match c.arg {
                    Some(a) => parse_action_list(a, pkt)?,
                    None => Vec::new(),
                },
            },
            "write_actions" if c.parens => Instruction::WriteActions {
                actions: match c.arg {
                    Some(a) => parse_write_actions(a, pkt)?,
                    None => Vec::new(),
                },
            },
            "write_actions" | "apply_actions" => {
                return Err(c.name.err(format!(
                    "{} takes its actions in parentheses: {}(ACTIONS)",
                    c.name.quoted(),
                    c.lname
                )))
            }
            "clear_actions" => {
                c.no_arg()?;
                Instruction::ClearActions
            }
            "meter" => Instruction::Meter {
                meter_id: parse_u32(c.arg()?, "a meter id")?,
            },
            "experimenter_instruction" => {
                let (id, data) = experimenter_args(c.arg()?)?;
                Instruction::Experimenter {
                    experimenter: id,
                    data,
                }
            }
            _ => {
                let actions = parse_action(p, pkt)?;
                match bare.and_then(|i| out.get_mut(i)) {
                    Some(Instruction::ApplyActions { actions: run }) => run.extend(actions),
                    _ => {
                        let ins = Instruction::ApplyActions { actions };
                        once(&ins, p)?;
                        bare = Some(out.len());
                        out.push(ins);
                    }
                }
                continue;
            }
        };
        once(&ins, p)?;
        bare = None;
        // Open vSwitch leaves an empty write-actions out: it writes nothing.
        if !matches!(&ins, Instruction::WriteActions { actions } if actions.is_empty()) {
            out.push(ins);
        }
    }
    Ok(out)
}

/// Prints one action in its canonical form.
pub(crate) fn format_action(a: &Action) -> String {
    match a {
        Action::Output { port, max_len } if *port == port_no::CONTROLLER => {
            format!("CONTROLLER:{max_len}")
        }
        Action::Output { port, .. } => format!("output:{}", format_port(*port)),
        Action::CopyTtlOut => "copy_ttl_out".to_string(),
        Action::CopyTtlIn => "copy_ttl_in".to_string(),
        Action::SetMplsTtl { mpls_ttl } => format!("set_mpls_ttl:{mpls_ttl}"),
        Action::DecMplsTtl => "dec_mpls_ttl".to_string(),
        Action::PushVlan { ethertype } => format!("push_vlan:0x{ethertype:04x}"),
        Action::PopVlan => "pop_vlan".to_string(),
        Action::PushMpls { ethertype } => format!("push_mpls:0x{ethertype:04x}"),
        Action::PopMpls { ethertype } => format!("pop_mpls:0x{ethertype:04x}"),
        Action::SetQueue { queue_id } => format!("set_queue:{queue_id}"),
        Action::Group { group_id } => format!("group:{group_id}"),
        Action::SetNwTtl { nw_ttl } => format!("set_nw_ttl:{nw_ttl}"),
        Action::DecNwTtl => "dec_ttl".to_string(),
        Action::SetField {
            field: Oxm::Basic { field, value, mask },
        } => format!(
            "set_field:{}->{}",
            format_basic(*field, value, mask.as_ref()),
            field.name()
        ),
        Action::SetField {
            field:
                Oxm::Other {
                    class,
                    field,
                    hasmask,
                    body,
                },
        } => format!("set_oxm:{}", format_other(*class, *field, *hasmask, body)),
        Action::PushPbb { ethertype } => format!("push_pbb:0x{ethertype:04x}"),
        Action::PopPbb => "pop_pbb".to_string(),
        Action::Experimenter { experimenter, data } => {
            format!("experimenter:0x{experimenter:x}:{}", format_hex_bytes(data))
        }
    }
}

/// Prints a list of actions, comma separated (empty for none).
pub(crate) fn format_action_list(actions: &[Action]) -> String {
    actions
        .iter()
        .map(format_action)
        .collect::<Vec<_>>()
        .join(",")
}

/// Prints instructions in the canonical form (`drop` for none).
pub(crate) fn format_instructions(list: &[Instruction]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut prev_bare = false;
    for ins in list {
        let text = match ins {
            Instruction::ApplyActions { actions } if !actions.is_empty() && !prev_bare => {
                parts.push(format_action_list(actions));
                prev_bare = true;
                continue;
            }
            Instruction::ApplyActions { actions } => {
                format!("apply_actions({})", format_action_list(actions))
            }
            Instruction::WriteActions { actions } => {
                format!("write_actions({})", format_action_list(actions))
            }
            Instruction::ClearActions => "clear_actions".to_string(),
            Instruction::GotoTable { table_id } => format!("goto_table:{table_id}"),
            Instruction::WriteMetadata {
                metadata,
                metadata_mask: u64::MAX,
            } => format!("write_metadata:0x{metadata:x}"),
            Instruction::WriteMetadata {
                metadata,
                metadata_mask,
            } => format!("write_metadata:0x{metadata:x}/0x{metadata_mask:x}"),
            Instruction::Meter { meter_id } => format!("meter:{meter_id}"),
            Instruction::Experimenter { experimenter, data } => format!(
                "experimenter_instruction:0x{experimenter:x}:{}",
                format_hex_bytes(data)
            ),
        };
        prev_bare = false;
        parts.push(text);
    }
    if parts.is_empty() {
        "drop".to_string()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ofp::MacAddr;
    use std::net::Ipv4Addr;

    fn sf(field: OxmField, value: OxmValue) -> Action {
        set_field(field, value)
    }

    fn act(text: &str) -> Action {
        let mut got = parse_action(Tok::whole(text), &mut Packet::default())
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(got.len(), 1, "{text}");
        got.remove(0)
    }

    /// The actions `text` stands for in a flow matching `m` (apply-actions).
    fn acts_in(m: &str, text: &str) -> Result<Vec<Action>, ParseError> {
        let m = crate::parse_match(m).unwrap();
        parse_action_list(Tok::whole(text), &mut Packet::of_flow(&m, None))
    }

    fn ins(text: &str) -> Vec<Instruction> {
        parse_instructions(Tok::whole(text), &mut Packet::default())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// One of every action, with its canonical text.
    pub(crate) fn every_action() -> Vec<(Action, &'static str)> {
        vec![
            (
                Action::Output {
                    port: 2,
                    max_len: 0,
                },
                "output:2",
            ),
            (
                Action::Output {
                    port: port_no::LOCAL,
                    max_len: 0,
                },
                "output:LOCAL",
            ),
            (
                Action::Output {
                    port: 0xfffe,
                    max_len: 0,
                },
                "output:0xfffe",
            ),
            (
                Action::Output {
                    port: port_no::CONTROLLER,
                    max_len: 128,
                },
                "CONTROLLER:128",
            ),
            (Action::CopyTtlOut, "copy_ttl_out"),
            (Action::CopyTtlIn, "copy_ttl_in"),
            (Action::SetMplsTtl { mpls_ttl: 64 }, "set_mpls_ttl:64"),
            (Action::DecMplsTtl, "dec_mpls_ttl"),
            (Action::PushVlan { ethertype: 0x8100 }, "push_vlan:0x8100"),
            (Action::PopVlan, "pop_vlan"),
            (Action::PushMpls { ethertype: 0x8847 }, "push_mpls:0x8847"),
            (Action::PopMpls { ethertype: 0x0800 }, "pop_mpls:0x0800"),
            (Action::SetQueue { queue_id: 7 }, "set_queue:7"),
            (Action::Group { group_id: 9 }, "group:9"),
            (Action::SetNwTtl { nw_ttl: 3 }, "set_nw_ttl:3"),
            (Action::DecNwTtl, "dec_ttl"),
            (
                sf(OxmField::VlanVid, OxmValue::U16(0x1001)),
                "set_field:0x1001->vlan_vid",
            ),
            (
                sf(OxmField::Ipv4Dst, OxmValue::Ipv4(Ipv4Addr::new(1, 2, 3, 4))),
                "set_field:1.2.3.4->ipv4_dst",
            ),
            (
                Action::SetField {
                    field: Oxm::Other {
                        class: 0xffff,
                        field: 1,
                        hasmask: false,
                        body: vec![0, 0, 0x23, 0x20, 1],
                    },
                },
                "set_oxm:0xffff:1:0:0000232001",
            ),
            (Action::PushPbb { ethertype: 0x88e7 }, "push_pbb:0x88e7"),
            (Action::PopPbb, "pop_pbb"),
            (
                Action::Experimenter {
                    experimenter: 0x2320,
                    data: vec![0, 1, 2, 3, 4, 5],
                },
                "experimenter:0x2320:000102030405",
            ),
        ]
    }

    #[test]
    fn every_action_prints_and_parses_back() {
        for (a, text) in every_action() {
            assert_eq!(format_action(&a), text);
            assert_eq!(act(text), a, "{text}");
        }
    }

    #[test]
    fn every_settable_field_round_trips_in_set_field() {
        for &field in OxmField::ALL {
            let (v, _) = crate::match_text::tests::sample(field);
            let a = sf(field, v);
            let text = format_action(&a);
            if field.settable() {
                assert_eq!(act(&text), a, "{text}");
            } else {
                let e = parse_action(Tok::whole(&text), &mut Packet::default()).unwrap_err();
                assert_eq!(e.token, field.name());
            }
        }
    }

    #[test]
    fn alternative_spellings() {
        let out = |port| Action::Output { port, max_len: 0 };
        let ctl = |max_len| Action::Output {
            port: port_no::CONTROLLER,
            max_len,
        };
        let mac = OxmValue::Mac(MacAddr([0, 0, 0, 0, 0, 1]));
        let ip = OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let cases = vec![
            ("output=5", out(5)),
            ("5", out(5)),
            ("0x10", out(16)),
            ("LOCAL", out(port_no::LOCAL)),
            ("local", out(port_no::LOCAL)),
            ("in_port", out(port_no::IN_PORT)),
            ("IN_PORT", out(port_no::IN_PORT)),
            ("all", out(port_no::ALL)),
            ("flood", out(port_no::FLOOD)),
            ("normal", out(port_no::NORMAL)),
            ("table", out(port_no::TABLE)),
            ("output:normal", out(port_no::NORMAL)),
            ("output(port=LOCAL)", out(port_no::LOCAL)),
            ("controller", ctl(0xffff)),
            ("CONTROLLER", ctl(0xffff)),
            ("output:CONTROLLER", ctl(0xffff)),
            ("controller:64", ctl(64)),
            ("controller(max_len=64)", ctl(64)),
            ("controller()", ctl(0xffff)),
            ("strip_vlan", Action::PopVlan),
            ("mod_nw_ttl:9", Action::SetNwTtl { nw_ttl: 9 }),
            ("dec_nw_ttl", Action::DecNwTtl),
            ("mod_dl_src:00:00:00:00:00:01", sf(OxmField::EthSrc, mac)),
            ("mod_dl_dst:00:00:00:00:00:01", sf(OxmField::EthDst, mac)),
            ("mod_nw_src:10.0.0.1", sf(OxmField::Ipv4Src, ip)),
            ("mod_nw_dst:10.0.0.1", sf(OxmField::Ipv4Dst, ip)),
            ("mod_nw_tos:0xb8", sf(OxmField::IpDscp, OxmValue::U8(46))),
            ("mod_nw_ecn:3", sf(OxmField::IpEcn, OxmValue::U8(3))),
            (
                "set_mpls_label:17",
                sf(OxmField::MplsLabel, OxmValue::U32(17)),
            ),
            ("set_mpls_tc:5", sf(OxmField::MplsTc, OxmValue::U8(5))),
            (
                "set_tunnel:0x99",
                sf(OxmField::TunnelId, OxmValue::U64(0x99)),
            ),
            ("set_tunnel64:7", sf(OxmField::TunnelId, OxmValue::U64(7))),
            (
                "set_field:00:00:00:00:00:01->dl_dst",
                sf(OxmField::EthDst, mac),
            ),
            (
                "set_field:4097->vlan_vid",
                sf(OxmField::VlanVid, OxmValue::U16(4097)),
            ),
            (
                "set_field:::1->ipv6_src",
                sf(
                    OxmField::Ipv6Src,
                    OxmValue::Ipv6(std::net::Ipv6Addr::LOCALHOST),
                ),
            ),
            (
                "experimenter:8992:",
                Action::Experimenter {
                    experimenter: 8992,
                    data: vec![],
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(act(text), want, "{text}");
        }
        for (proto, src, dst) in [
            (6, OxmField::TcpSrc, OxmField::TcpDst),
            (17, OxmField::UdpSrc, OxmField::UdpDst),
            (132, OxmField::SctpSrc, OxmField::SctpDst),
        ] {
            let m = format!("ip,nw_proto={proto}");
            assert_eq!(
                acts_in(&m, "mod_tp_src:80").unwrap(),
                vec![sf(src, OxmValue::U16(80))]
            );
            assert_eq!(
                acts_in(&m, "mod_tp_dst:80").unwrap(),
                vec![sf(dst, OxmValue::U16(80))]
            );
        }
    }

    /// Instruction lists with their canonical text.
    pub(crate) fn every_instruction() -> Vec<(Vec<Instruction>, &'static str)> {
        let out = |port| Action::Output { port, max_len: 0 };
        vec![
            (vec![], "drop"),
            (
                vec![Instruction::ApplyActions {
                    actions: vec![out(1), out(2)],
                }],
                "output:1,output:2",
            ),
            (
                vec![Instruction::ApplyActions { actions: vec![] }],
                "apply_actions()",
            ),
            (
                vec![
                    Instruction::Meter { meter_id: 3 },
                    Instruction::ApplyActions {
                        actions: vec![Action::PopVlan],
                    },
                    Instruction::ClearActions,
                    Instruction::WriteActions {
                        actions: vec![out(1), Action::Group { group_id: 2 }],
                    },
                    Instruction::WriteMetadata {
                        metadata: 0x10,
                        metadata_mask: 0xff,
                    },
                    Instruction::GotoTable { table_id: 4 },
                ],
                "meter:3,pop_vlan,clear_actions,write_actions(output:1,group:2),write_metadata:0x10/0xff,goto_table:4",
            ),
            (
                vec![
                    Instruction::WriteMetadata {
                        metadata: 5,
                        metadata_mask: u64::MAX,
                    },
                    Instruction::WriteActions {
                        actions: vec![out(1)],
                    },
                ],
                "write_metadata:0x5,write_actions(output:1)",
            ),
            (
                vec![
                    Instruction::GotoTable { table_id: 1 },
                    Instruction::ApplyActions {
                        actions: vec![out(3)],
                    },
                ],
                "goto_table:1,output:3",
            ),
            (
                vec![Instruction::Experimenter {
                    experimenter: 0xabc,
                    data: vec![1, 2],
                }],
                "experimenter_instruction:0xabc:0102",
            ),
        ]
    }

    #[test]
    fn every_instruction_prints_and_parses_back() {
        for (list, text) in every_instruction() {
            assert_eq!(format_instructions(&list), text);
            assert_eq!(ins(text), list, "{text}");
        }
        for (a, text) in every_action() {
            for wrapper in ["apply_actions", "write_actions"] {
                let t = format!("{wrapper}({text},{text})");
                let actions = vec![a.clone(), a.clone()];
                let want = if wrapper == "apply_actions" {
                    Instruction::ApplyActions { actions }
                } else {
                    Instruction::WriteActions { actions }
                };
                assert_eq!(ins(&t), vec![want], "{t}");
            }
        }
    }

    #[test]
    fn drop_and_empty_lists() {
        assert_eq!(ins("drop"), vec![]);
        assert_eq!(ins(""), vec![]);
        // An empty write-actions writes nothing: left out, as in ovs-ofctl.
        assert_eq!(ins("write_actions(drop)"), vec![]);
        assert_eq!(ins("write_actions()"), vec![]);
        assert_eq!(
            format_instructions(&[Instruction::WriteActions { actions: vec![] }]),
            "write_actions()"
        );
        assert_eq!(
            ins("apply_actions()"),
            vec![Instruction::ApplyActions { actions: vec![] }]
        );
    }

    #[test]
    fn max_len_is_printed_only_for_the_controller() {
        // OpenFlow 1.3 gives an output's max_len a meaning only for
        // CONTROLLER; Open vSwitch's output(port=P,max_len=N) truncates.
        let a = Action::Output {
            port: 3,
            max_len: 128,
        };
        assert_eq!(format_action(&a), "output:3");
        assert_eq!(act("output(port=3)"), out(3));
        let e = parse_action(
            Tok::whole("output(port=3,max_len=128)"),
            &mut Packet::default(),
        )
        .unwrap_err();
        assert_eq!(e.token, "max_len");
        assert!(e.message.contains("truncates"), "{}", e.message);
    }

    fn out(port: u32) -> Action {
        Action::Output { port, max_len: 0 }
    }

    fn ctl(max_len: u16) -> Action {
        Action::Output {
            port: port_no::CONTROLLER,
            max_len,
        }
    }

    #[test]
    fn ovs_spellings_of_ports_and_the_controller() {
        for (text, want) in [
            // OpenFlow 1.0 numbers of the reserved ports.
            ("output:65534", out(port_no::LOCAL)),
            ("65534", out(port_no::LOCAL)),
            ("output:65532", out(port_no::ALL)),
            ("output:4294967294", out(port_no::LOCAL)),
            // A bare number is a plain output: the controller gets 0 bytes.
            ("65533", ctl(0)),
            ("output:65533", ctl(0xffff)),
            ("controller(reason=action,id=0,max_len=64)", ctl(64)),
            ("controller(max_len=64)", ctl(64)),
            ("set_mpls_ttl(64)", Action::SetMplsTtl { mpls_ttl: 64 }),
            ("group(5)", Action::Group { group_id: 5 }),
        ] {
            assert_eq!(act(text), want, "{text}");
        }
        for text in ["output:NONE", "output:ANY", "output:65535", "65535"] {
            assert!(
                parse_action(Tok::whole(text), &mut Packet::default()).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn ovs_names_in_set_field() {
        let ip = OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let mac = OxmValue::Mac(MacAddr([0, 0, 0, 0, 0, 1]));
        for (text, want) in [
            ("set_field:10.0.0.1->ip_src", sf(OxmField::Ipv4Src, ip)),
            ("set_field:10.0.0.1->ip_dst", sf(OxmField::Ipv4Dst, ip)),
            ("set_field:10.0.0.1->nw_src", sf(OxmField::Ipv4Src, ip)),
            ("set_field:10.0.0.1->nw_dst", sf(OxmField::Ipv4Dst, ip)),
            (
                "set_field:80->tp_src",
                sf(OxmField::TcpSrc, OxmValue::U16(80)),
            ),
            (
                "set_field:80->tp_dst",
                sf(OxmField::TcpDst, OxmValue::U16(80)),
            ),
            (
                "set_field:3->icmp_type",
                sf(OxmField::Icmpv4Type, OxmValue::U8(3)),
            ),
            (
                "set_field:1->icmp_code",
                sf(OxmField::Icmpv4Code, OxmValue::U8(1)),
            ),
            (
                "set_field:00:00:00:00:00:01->dl_src",
                sf(OxmField::EthSrc, mac),
            ),
            (
                "set_field:0x5->tun_id",
                sf(OxmField::TunnelId, OxmValue::U64(5)),
            ),
            ("set_field:3->nw_ecn", sf(OxmField::IpEcn, OxmValue::U8(3))),
            (
                "set_field:5->ipv6_label",
                sf(OxmField::Ipv6Flabel, OxmValue::U32(5)),
            ),
            (
                "set_field:::1->nd_target",
                sf(
                    OxmField::Ipv6NdTarget,
                    OxmValue::Ipv6(std::net::Ipv6Addr::LOCALHOST),
                ),
            ),
        ] {
            assert_eq!(act(text), want, "{text}");
        }
        // Match keywords that name no field to set.
        for text in [
            "set_field:5->dl_vlan_pcp",
            "set_field:5->dl_vlan",
            "set_field:1->nw_tos",
        ] {
            let e = parse_action(Tok::whole(text), &mut Packet::default()).unwrap_err();
            assert!(e.message.contains("unknown field"), "{text}: {e}");
        }
        // A mask is Open vSwitch's NXAST_REG_LOAD: refused.
        let e = parse_action(
            Tok::whole("set_field:00:00:00:00:00:01/ff:ff:ff:00:00:00->eth_dst"),
            &mut Packet::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("mask"), "{}", e.message);
    }

    fn vid(v: u16) -> Action {
        sf(OxmField::VlanVid, OxmValue::U16(0x1000 | v))
    }

    #[test]
    fn mod_vlan_pushes_a_tag_where_there_is_none() {
        let push = Action::PushVlan { ethertype: 0x8100 };
        let pcp = |p| sf(OxmField::VlanPcp, OxmValue::U8(p));
        for (m, text, want) in [
            ("", "mod_vlan_vid:5", vec![push.clone(), vid(5)]),
            ("", "mod_vlan_pcp:3", vec![push.clone(), pcp(3)]),
            (
                "dl_vlan=0xffff",
                "mod_vlan_vid:5",
                vec![push.clone(), vid(5)],
            ),
            (
                "vlan_tci=0x0000/0x1000",
                "mod_vlan_vid:5",
                vec![push.clone(), vid(5)],
            ),
            ("dl_vlan=1", "mod_vlan_vid:5", vec![vid(5)]),
            ("vlan_pcp=1", "mod_vlan_vid:5", vec![vid(5)]),
            ("vlan_tci=0x1000/0x1000", "mod_vlan_pcp:5", vec![pcp(5)]),
            (
                "",
                "mod_vlan_vid:5,mod_vlan_pcp:3",
                vec![push.clone(), vid(5), pcp(3)],
            ),
            (
                "dl_vlan=1",
                "strip_vlan,mod_vlan_vid:5",
                vec![Action::PopVlan, push.clone(), vid(5)],
            ),
            (
                "",
                "push_vlan:0x88a8,mod_vlan_vid:5",
                vec![Action::PushVlan { ethertype: 0x88a8 }, vid(5)],
            ),
            (
                "dl_vlan=1",
                "set_vlan_vid:5,set_vlan_pcp:2",
                vec![vid(5), pcp(2)],
            ),
        ] {
            assert_eq!(acts_in(m, text).unwrap(), want, "{m} {text}");
        }
        // set_vlan_* never push: untagged, they are inconsistent.
        assert!(acts_in("", "set_vlan_vid:5").is_err());
        assert!(acts_in("", "set_vlan_pcp:5").is_err());
        // In a group bucket (nothing known) mod_vlan_vid pushes.
        assert_eq!(act_list("mod_vlan_vid:5"), vec![push, vid(5)]);
    }

    fn act_list(text: &str) -> Vec<Action> {
        parse_action_list(Tok::whole(text), &mut Packet::default())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn actions_are_checked_against_the_match() {
        for (m, text) in [
            ("", "set_field:10.0.0.1->ip_src"),
            ("arp", "set_field:10.0.0.1->ip_src"),
            ("udp", "set_field:80->tcp_dst"),
            ("udp", "set_field:80->tp_dst"),
            ("icmp6,icmp_type=136", "set_field:00:00:00:00:00:01->nd_sll"),
            ("", "set_field:4101->vlan_vid"),
            ("", "set_field:3->vlan_pcp"),
            ("", "mod_nw_dst:10.0.0.1"),
            ("ipv6", "mod_nw_src:10.0.0.1"),
            ("", "mod_nw_tos:4"),
            ("", "mod_nw_ttl:5"),
            ("", "dec_ttl"),
            ("ip", "dec_mpls_ttl"),
            ("ip", "set_mpls_ttl:5"),
            ("ip", "set_mpls_label:5"),
            ("ip", "pop_mpls:0x0800"),
            ("", "pop_vlan"),
            ("dl_vlan=0xffff", "strip_vlan"),
            ("dl_vlan=1", "pop_vlan,pop_vlan"),
            ("", "push_vlan:0x8100,push_vlan:0x8100,push_vlan:0x8100"),
            ("ip", "push_mpls:0x8847,mod_nw_dst:10.0.0.1"),
            ("tcp", "push_mpls:0x8847,pop_mpls:0x0800,mod_tp_dst:5"),
        ] {
            let e = acts_in(m, text).expect_err(text);
            assert!(text.contains(&e.token), "{m} {text}: {e}");
        }
        for (m, text) in [
            ("ip", "set_field:10.0.0.1->ip_src"),
            ("dl_vlan=1", "push_vlan:0x8100,pop_vlan,pop_vlan"),
            ("ip", "push_mpls:0x8847,pop_mpls:0x0800,mod_nw_dst:10.0.0.1"),
            ("mpls", "pop_mpls:0x0800,dec_ttl"),
            ("tcp", "push_vlan:0x8100,mod_tp_dst:5"),
            ("", "push_vlan:0x8100,set_field:4101->vlan_vid"),
            // set_field changes nothing known (as in Open vSwitch).
            (
                "icmp6,icmp_type=135",
                "set_field:136->icmpv6_type,set_field:00:00:00:00:00:01->nd_sll",
            ),
        ] {
            assert!(acts_in(m, text).is_ok(), "{m} {text}");
        }
    }

    /// Instructions of a flow matching `m` in table `table`.
    fn ins_in(m: &str, table: u8, text: &str) -> Result<Vec<Instruction>, ParseError> {
        let m = crate::parse_match(m).unwrap();
        parse_instructions(Tok::whole(text), &mut Packet::of_flow(&m, Some(table)))
    }

    #[test]
    fn write_actions_check_only_what_set_fields_need() {
        // The action set runs later: a pop there is not checked...
        assert!(ins_in("", 0, "write_actions(strip_vlan)").is_ok());
        assert!(ins_in("", 0, "write_actions(dec_ttl)").is_ok());
        // ...but a set-field is, against the packet after apply-actions.
        assert!(ins_in("", 0, "write_actions(set_field:10.0.0.1->ip_dst)").is_err());
        assert!(ins_in("", 0, "write_actions(mod_nw_dst:10.0.0.1)").is_err());
        assert!(ins_in(
            "ip",
            0,
            "push_mpls:0x8847,write_actions(mod_nw_dst:10.0.0.1)"
        )
        .is_err());
        assert!(ins_in(
            "ip",
            0,
            "write_actions(push_mpls:0x8847,mod_nw_dst:10.0.0.1)"
        )
        .is_err());
        // In the action set the push runs before the set-field, whatever
        // the written order (Open vSwitch refuses this one).
        assert!(ins_in(
            "ip",
            0,
            "write_actions(mod_nw_dst:10.0.0.1,push_mpls:0x8847)"
        )
        .is_err());
        assert!(ins_in(
            "",
            0,
            "write_actions(set_field:4099->vlan_vid,push_vlan:0x8100)"
        )
        .is_ok());
        assert!(ins_in("", 0, "write_actions(set_field:4099->vlan_vid)").is_err());
        assert_eq!(
            ins_in("dl_vlan=1", 0, "strip_vlan,write_actions(mod_vlan_vid:3)").unwrap(),
            vec![
                Instruction::ApplyActions {
                    actions: vec![Action::PopVlan]
                },
                Instruction::WriteActions {
                    actions: vec![Action::PushVlan { ethertype: 0x8100 }, vid(3)]
                },
            ]
        );
    }

    #[test]
    fn a_flow_has_one_of_each_instruction_and_goes_forward() {
        for text in [
            "goto_table:1,goto_table:2",
            "meter:1,meter:2",
            "clear_actions,clear_actions",
            "write_metadata:1,write_metadata:2",
            "write_actions(output:1),write_actions(output:2)",
            "output:1,apply_actions(output:2)",
            "output:1,goto_table:2,output:3",
        ] {
            let e = ins_in("", 0, text).expect_err(text);
            assert!(e.message.contains("at most one"), "{text}: {e}");
        }
        assert!(ins_in("", 3, "goto_table:3").is_err());
        assert!(ins_in("", 3, "goto_table:2").is_err());
        assert!(ins_in("", 3, "goto_table:4").is_ok());
        assert!(ins_in("", 0, "goto_table:255").is_err());
        // Any order: OpenFlow runs instructions in its own order.
        assert!(ins_in("", 0, "goto_table:1,output:1").is_ok());
    }

    fn err(text: &str) -> (String, usize) {
        let e = parse_instructions(Tok::whole(text), &mut Packet::default()).unwrap_err();
        assert!(
            e.message.contains(&e.token),
            "{text}: {} does not name {:?}",
            e.message,
            e.token
        );
        (e.token, e.position)
    }

    #[test]
    fn errors_name_the_token_and_position() {
        assert_eq!(err("output:1,outptu:2"), ("outptu".to_string(), 9));
        assert_eq!(err("output:1,drop"), ("drop".to_string(), 9));
        assert_eq!(err("output:x"), ("x".to_string(), 7));
        assert_eq!(err("output"), ("output".to_string(), 0));
        assert_eq!(err("pop_vlan:1"), ("1".to_string(), 9));
        assert_eq!(err("set_field:1->nope"), ("nope".to_string(), 13));
        assert_eq!(err("set_field:8192->vlan_vid"), ("8192".to_string(), 10));
        assert_eq!(err("set_field:1/1->vlan_vid"), ("1".to_string(), 12));
        assert_eq!(err("set_field:1"), ("1".to_string(), 10));
        assert_eq!(err("set_field:1->metadata"), ("metadata".to_string(), 13));
        assert_eq!(err("mod_vlan_vid:4096"), ("4096".to_string(), 13));
        assert_eq!(err("mod_tp_dst:80"), ("mod_tp_dst".to_string(), 0));
        assert_eq!(err("goto_table:256"), ("256".to_string(), 11));
        assert_eq!(err("write_actions(output:1"), ("(".to_string(), 13));
        assert_eq!(err("write_actions(output:1))"), (")".to_string(), 23));
        assert_eq!(err("write_actions(output:1)x"), ("x".to_string(), 23));
        assert_eq!(err("write_actions:1"), ("write_actions".to_string(), 0));
        assert_eq!(
            err("write_actions(goto_table:1)"),
            ("goto_table".to_string(), 14)
        );
        assert_eq!(err("controller(reason=1)"), ("reason".to_string(), 11));
        assert_eq!(err("controller(nope=1)"), ("nope".to_string(), 11));
        assert_eq!(err("output(max_len=1)"), ("max_len".to_string(), 7));
        assert_eq!(err("experimenter:1:abc"), ("abc".to_string(), 15));
        assert_eq!(err("push_vlan:0x10000"), ("0x10000".to_string(), 10));
        assert_eq!(err("ANY"), ("ANY".to_string(), 0));
        assert_eq!(err("mod_nw_tos:1"), ("1".to_string(), 11));
        assert_eq!(err("set_mpls_label:0x100000"), ("0x100000".to_string(), 15));
        assert_eq!(err("mod_nw_ecn:4"), ("4".to_string(), 11));
    }
}
