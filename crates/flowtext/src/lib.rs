//! The ovs-ofctl style flow, group and meter text syntax, parsed into and
//! printed from the `ofp` structures.
//!
//! * Flows: [`parse_flow`], [`parse_flow_command`], [`format_flow`]
//!   (keys, defaults and the canonical printed form in [`flow`]; actions
//!   and instructions in [`actions`]).
//! * Groups: [`parse_group`], [`parse_group_command`], [`format_group`]
//!   (see [`group`]).
//! * Meters: [`parse_meter`], [`parse_meter_command`], [`format_meter`]
//!   (see [`meter`]).
//! * Files of them, one per line, `#` comments: [`parse_flow_file`],
//!   [`parse_group_file`], [`parse_meter_file`].
//! * Pieces, for commands that take only a match (`dump-flows`, a packet
//!   description for `trace`) or only actions (`packet-out`):
//!   [`parse_match`], [`format_match`], [`parse_actions`],
//!   [`format_actions`], [`parse_instructions`], [`format_instructions`].
//!
//! ```
//! let fm = flowtext::parse_flow(
//!     "table=0,priority=100,in_port=1,dl_type=0x8847,mpls_label=16,\
//!      actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4097->vlan_vid,output:2",
//! )
//! .unwrap();
//! let text = flowtext::format_flow(&fm);
//! assert_eq!(
//!     text,
//!     "table=0,priority=100,in_port=1,mpls,mpls_label=16,\
//!      actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:0x1001->vlan_vid,output:2"
//! );
//! assert_eq!(flowtext::parse_flow(&text).unwrap(), fm);
//!
//! let e = flowtext::parse_flow("in_port=1,eth_dts=00:00:00:00:00:01,actions=drop").unwrap_err();
//! assert_eq!(e.to_string(), "at column 11: unknown field \"eth_dts\"");
//! assert_eq!((e.token.as_str(), e.position), ("eth_dts", 10));
//! ```
//!
//! * Printing as `ovs-ofctl` prints (the text of `dump-flows`,
//!   `dump-groups`, `dump-meters`): [`ovs`].
//!
//! # Match fields
//!
//! Pieces are separated by commas or white space. A match field is
//! `NAME=VALUE` or `NAME=VALUE/MASK` (only on maskable fields). Every field
//! name and alias of ovs-fields(7) that OpenFlow 1.3 encodes is taken, and
//! means what it means to Open vSwitch (the same OpenFlow message; the test
//! tests/flowtext_ovs compares the two on a corpus written from the
//! manual pages).
//!
//! * Names: every OXM name (`in_port`, `eth_dst`, `vlan_vid`, `ipv4_src`,
//!   `tcp_dst`, `mpls_label`, `pbb_uca`, ...) and Open vSwitch's names
//!   `dl_src`, `dl_dst`, `dl_type`, `dl_vlan` (12-bit VID, sets
//!   OFPVID_PRESENT; `0xffff` = no tag), `dl_vlan_pcp`, `vlan_tci`
//!   (16-bit PCP|CFI|VID with an optional mask, as `vlan_vid` and
//!   `vlan_pcp`; the CFI bit is "a tag is present"), `nw_src`/`nw_dst` and
//!   `ip_src`/`ip_dst` (`arp_spa`/`arp_tpa` in an ARP or RARP match, else
//!   IPv4), `nw_proto` (`arp_op` in an ARP match, else `ip_proto`),
//!   `nw_tos` (TOS byte; its ECN bits are ignored, stored as `ip_dscp`),
//!   `nw_ecn`, `tp_src`/`tp_dst` (tcp/udp/sctp by the match's `ip_proto`,
//!   which must be there), `icmp_type`/`icmp_code` (ICMPv6 in an IPv6
//!   match, else ICMPv4), `tun_id`/`tunnel_id`, `in_port_oxm`,
//!   `ipv6_label`, `nd_target`, `nd_sll`, `nd_tll`.
//! * Shorthands: `ip`, `ipv6`, `arp`, `rarp`, `mpls`, `mplsm`, `icmp`,
//!   `tcp`, `udp`, `sctp`, `icmp6`, `tcp6`, `udp6`, `sctp6` insert
//!   `eth_type` (and `ip_proto`) where they stand.
//! * Values: decimal or `0x` hex numbers no wider than the field (Open
//!   vSwitch silently cuts wider ones; here they are errors); MACs
//!   `aa:bb:cc:dd:ee:ff`; IPv4/IPv6 literals; port names (`LOCAL`,
//!   `CONTROLLER`, `IN_PORT`, `ANY`, `ALL`, `FLOOD`, `NORMAL`, `TABLE`)
//!   and, as ovs-ofctl reads them, the OpenFlow 1.0 numbers of those ports
//!   in decimal (`65534` is `LOCAL`; `0xfffe` is port 65534). Masks:
//!   numbers, MACs, and for IP fields an address or a prefix length
//!   (`10.0.0.0/8`, `2001:db8::/32`). Value bits outside the mask are
//!   cleared; an all-ones mask is no mask, an all-zeros one no field.
//! * `vlan_pcp` without a VID implies "a tag is present"
//!   (`vlan_vid=0x1000/0x1000`), as in Open vSwitch. Every field needs its
//!   prerequisites in the match (`nw_src` needs `ip`): where Open vSwitch
//!   drops such a field and logs it, this refuses the flow.
//! * Opaque (non-basic) OXMs: `oxm=CLASS:FIELD:HASMASK:HEXBODY`, e.g.
//!   `oxm=0xffff:5:0:00002320aabb` (a fulmar extension).
//!
//! Fields keep the order of the text; a field may appear once.
//! Open vSwitch's extension fields (registers, conntrack, tunnel metadata,
//! `nw_ttl`, `ip_frag`, `tcp_flags`, ...) have no OpenFlow 1.3 OXM and are
//! unknown fields here.
//!
//! # Round trips
//!
//! For every structure a switch would install (a match with its
//! prerequisites and masks neither all ones nor all zeros, actions
//! consistent with it, at most one instruction of each kind, no cookie
//! mask on an add), `parse(format(x)) == x`. What else parses comes back
//! up to the normalizations above and three more: an output's `max_len`
//! is kept only for CONTROLLER (OpenFlow 1.3 ignores it elsewhere), an
//! empty write-actions is no instruction, a meter band's burst size only
//! with the burst flag. Errors never panic: every [`ParseError`] names the
//! offending token and its byte offset.

/// A table of words and what they stand for, members of one enum or module:
/// `words![GroupType: "all" => All, "ff" => FastFailover]`.
macro_rules! words {
    ($owner:ident: $($word:literal => $name:ident),* $(,)?) => {
        &[$(($word, $owner::$name)),*]
    };
}

pub mod actions;
mod error;
pub mod file;
pub mod flow;
pub mod group;
mod lexer;
mod match_text;
pub mod meter;
pub mod ovs;
#[cfg(test)]
mod proptests;
mod value;

pub use error::ParseError;
pub use file::{parse_flow_file, parse_group_file, parse_meter_file};
pub use flow::{format_flow, parse_flow, parse_flow_command};
pub use group::{format_group, parse_group, parse_group_command};
pub use meter::{format_meter, parse_meter, parse_meter_command};

use lexer::{key_value, split_list, Tok};
use ofp::{Action, Instruction, Match};

/// Parses a text of match fields only (as in a flow, without flow keys or
/// actions), e.g. `in_port=1,tcp,nw_dst=10.0.0.0/8`.
pub fn parse_match(text: &str) -> Result<Match, ParseError> {
    let mut builder = match_text::MatchBuilder::default();
    for piece in split_list(Tok::whole(text))? {
        let (key, value) = key_value(piece);
        if !builder.take(key, value)? {
            return Err(key.err(format!("unknown field {}", key.quoted())));
        }
    }
    builder.finish()
}

/// Prints a match as [`format_flow`] does (empty for the match-all).
pub fn format_match(m: &Match) -> String {
    let mut parts = Vec::new();
    match_text::format_match(m, &mut parts);
    parts.join(",")
}

/// Parses an action list (`drop` or nothing is the empty list). `mod_tp_*`
/// are refused here: without a match there is no `ip_proto` to pick the
/// field by.
pub fn parse_actions(text: &str) -> Result<Vec<Action>, ParseError> {
    actions::parse_action_list(Tok::whole(text), &mut actions::Packet::default())
}

/// Prints an action list (`drop` when empty).
pub fn format_actions(list: &[Action]) -> String {
    if list.is_empty() {
        "drop".to_string()
    } else {
        actions::format_action_list(list)
    }
}

/// Parses what follows `actions=` in a flow into instructions.
pub fn parse_instructions(text: &str) -> Result<Vec<Instruction>, ParseError> {
    actions::parse_instructions(Tok::whole(text), &mut actions::Packet::default())
}

/// Prints instructions as they follow `actions=` in [`format_flow`].
pub fn format_instructions(list: &[Instruction]) -> String {
    actions::format_instructions(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_round_trip() {
        let m = parse_match("in_port=1 tcp nw_dst=10.0.0.0/8 tp_dst=80").unwrap();
        assert_eq!(m.fields.len(), 5);
        assert_eq!(
            format_match(&m),
            "in_port=1,tcp,ipv4_dst=10.0.0.0/8,tcp_dst=80"
        );
        assert_eq!(parse_match(&format_match(&m)).unwrap(), m);
        assert_eq!(format_match(&Match::default()), "");
        assert_eq!(parse_match("").unwrap(), Match::default());
        let e = parse_match("in_port=1,actions=drop").unwrap_err();
        assert_eq!((e.token.as_str(), e.position), ("actions", 10));

        let a = parse_actions("pop_vlan,output:1").unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(format_actions(&a), "pop_vlan,output:1");
        assert_eq!(parse_actions("drop").unwrap(), vec![]);
        assert_eq!(format_actions(&[]), "drop");
        assert_eq!(
            parse_actions("goto_table:1").unwrap_err().token,
            "goto_table"
        );

        let i = parse_instructions("output:1,goto_table:2").unwrap();
        assert_eq!(i.len(), 2);
        assert_eq!(format_instructions(&i), "output:1,goto_table:2");
    }
}
