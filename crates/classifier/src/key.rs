//! Packed lookup keys: a [`Layout`] says how the masked fields of one mask
//! (a set of `(field, mask)` pairs) are packed into a few `u64` words, so
//! that a hash subtable compares and hashes one or two machine words per
//! probe instead of a `u128` per field.
//!
//! Packing: fields in ascending field order; each field takes as many
//! bits as its mask's highest set bit needs (the masked value cannot have
//! more); a field of at most 64 bits never straddles two words (it starts
//! a new word when it does not fit in what is left), a wider one (IPv6
//! addresses) takes two whole words. In_port + VLAN_VID is one word; the
//! IPv4 5-tuple plus EtherType is two.

use crate::rule::FieldMatch;
use packet::flow_key::{field, FlowKey, L2Fields, L2_FIELDS, OFPVID_PRESENT};

/// Most words a key may have on the burst path (longer keys use the
/// one-at-a-time path).
pub const BURST_WORDS: usize = 4;

/// The value of a present field, without the presence check (the caller
/// checked `present` against the layout's required bits). MACs are 48-bit
/// numbers, as [`FlowKey::get`] gives them.
#[inline]
pub fn field_value(k: &FlowKey, f: u8) -> u128 {
    let mac = |m: [u8; 6]| -> u128 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&m);
        u64::from_be_bytes(b).into()
    };
    match f {
        field::IN_PORT => k.in_port.into(),
        field::IN_PHY_PORT => k.in_phy_port.into(),
        field::METADATA => k.metadata.into(),
        field::ETH_DST => mac(k.eth_dst),
        field::ETH_SRC => mac(k.eth_src),
        field::ETH_TYPE => k.eth_type.into(),
        field::VLAN_VID => k.vlan_vid.into(),
        field::VLAN_PCP => k.vlan_pcp.into(),
        field::IP_DSCP => k.ip_dscp.into(),
        field::IP_ECN => k.ip_ecn.into(),
        field::IP_PROTO => k.ip_proto.into(),
        field::IPV4_SRC => k.ipv4_src.into(),
        field::IPV4_DST => k.ipv4_dst.into(),
        field::TCP_SRC | field::UDP_SRC | field::SCTP_SRC => k.tp_src.into(),
        field::TCP_DST | field::UDP_DST | field::SCTP_DST => k.tp_dst.into(),
        field::ICMPV4_TYPE | field::ICMPV6_TYPE => k.icmp_type.into(),
        field::ICMPV4_CODE | field::ICMPV6_CODE => k.icmp_code.into(),
        field::ARP_OP => k.arp_op.into(),
        field::ARP_SPA => k.arp_spa.into(),
        field::ARP_TPA => k.arp_tpa.into(),
        field::ARP_SHA => mac(k.arp_sha),
        field::ARP_THA => mac(k.arp_tha),
        field::IPV6_SRC => k.ipv6_src,
        field::IPV6_DST => k.ipv6_dst,
        field::IPV6_FLABEL => k.ipv6_flabel.into(),
        field::IPV6_ND_TARGET => k.nd_target,
        field::IPV6_ND_SLL => mac(k.nd_sll),
        field::IPV6_ND_TLL => mac(k.nd_tll),
        field::MPLS_LABEL => k.mpls_label.into(),
        field::MPLS_TC => k.mpls_tc.into(),
        field::MPLS_BOS => k.mpls_bos.into(),
        field::PBB_ISID => k.pbb_isid.into(),
        field::TUNNEL_ID => k.tunnel_id.into(),
        field::IPV6_EXTHDR => k.ipv6_exthdr.into(),
        _ => 0,
    }
}

/// Where one field goes in the packed key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    field: u8,
    mask: u128,
    word: usize,
    shift: u32,
    /// True for a field wider than 64 bits (two whole words).
    wide: bool,
}

/// How the fields of one mask pack into words. Built once per mask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    slots: Vec<Slot>,
    words: usize,
    /// Presence bits every packet must have for this mask to match.
    required: u64,
}

impl Layout {
    /// The layout of a mask given as `(field, mask)` pairs sorted by field
    /// with nonzero masks (a canonical rule's fields).
    pub fn new(mask: &[(u8, u128)]) -> Layout {
        let mut slots = Vec::with_capacity(mask.len());
        let mut word = 0usize;
        let mut used = 0u32; // bits used in `word`
        let mut required = 0u64;
        for &(f, m) in mask {
            required |= 1u64 << f;
            let width = 128 - m.leading_zeros();
            if width > 64 {
                if used > 0 {
                    word += 1;
                }
                slots.push(Slot {
                    field: f,
                    mask: m,
                    word,
                    shift: 0,
                    wide: true,
                });
                word += 2;
                used = 0;
            } else {
                if used + width > 64 {
                    word += 1;
                    used = 0;
                }
                slots.push(Slot {
                    field: f,
                    mask: m,
                    word,
                    shift: used,
                    wide: false,
                });
                used += width;
            }
        }
        let words = if used > 0 { word + 1 } else { word.max(1) };
        Layout {
            slots,
            words,
            required,
        }
    }

    /// Words per packed key (at least one).
    #[inline]
    pub fn words(&self) -> usize {
        self.words
    }

    /// Presence bits a packet needs.
    #[inline]
    pub fn required(&self) -> u64 {
        self.required
    }

    /// Packs a packet's masked fields into `out` (`words()` long). False
    /// when the packet lacks a field of the layout: nothing of this mask
    /// can match it.
    #[inline]
    pub fn extract(&self, k: &FlowKey, out: &mut [u64]) -> bool {
        if k.present & self.required != self.required {
            return false;
        }
        self.pack(|f| field_value(k, f), out);
        true
    }

    /// Packs a rule's values (the canonical fields of a rule of this
    /// mask) into `out`.
    pub fn pack_rule(&self, fields: &[FieldMatch], out: &mut [u64]) {
        self.pack(
            |f| fields.iter().find(|x| x.field == f).map_or(0, |x| x.value),
            out,
        );
    }

    /// The rule fields a packed key of this layout stands for (the
    /// inverse of [`Layout::pack_rule`] on canonical fields): one
    /// [`FieldMatch`] per field of the mask, in field order.
    pub fn unpack(&self, key: &[u64]) -> Vec<FieldMatch> {
        let word = |i: usize| key.get(i).copied().unwrap_or(0);
        self.slots
            .iter()
            .map(|s| {
                let v = if s.wide {
                    u128::from(word(s.word)) | (u128::from(word(s.word + 1)) << 64)
                } else {
                    u128::from(word(s.word) >> s.shift)
                };
                FieldMatch {
                    field: s.field,
                    value: v & s.mask,
                    mask: s.mask,
                }
            })
            .collect()
    }

    #[inline]
    fn pack(&self, mut value: impl FnMut(u8) -> u128, out: &mut [u64]) {
        for w in out.iter_mut() {
            *w = 0;
        }
        for s in &self.slots {
            let v = value(s.field) & s.mask;
            if s.wide {
                if let Some(w) = out.get_mut(s.word) {
                    *w = v as u64;
                }
                if let Some(w) = out.get_mut(s.word + 1) {
                    *w = (v >> 64) as u64;
                }
            } else if let Some(w) = out.get_mut(s.word) {
                *w |= (v as u64) << s.shift;
            }
        }
    }
}

/// Most fields an [`L2Layout`] packs.
const L2_SLOTS: usize = 8;

/// The ingress-port fields a table-0 key may have beside the link-layer
/// ones: both are the port the frame arrived on.
const PORT_FIELDS: u64 = (1 << field::IN_PORT) | (1 << field::IN_PHY_PORT);

/// Most words an [`L2Layout`] packs into (in_port + EtherType + MPLS
/// label takes two).
pub const L2_WORDS: usize = 2;

/// A [`Layout`] of at most [`L2_WORDS`] words whose fields are all
/// link-layer ones ([`L2Fields`]) or the ingress port: it packs a
/// frame's key straight from its header ([`L2Layout::pack`]), with no
/// [`FlowKey`]. What `pack` gives is what [`Layout::extract`] gives on
/// the parsed key of a frame fresh from port `in_port` (same fields,
/// masks, words and shifts; the differential test holds them together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2Layout {
    /// (field, mask, word, shift), in the layout's order.
    slots: [(u8, u64, u8, u8); L2_SLOTS],
    n: usize,
    words: usize,
    /// Presence bits a frame needs (the ports' always there).
    required: u64,
    /// A layout of three fields or fewer that a key is read for without
    /// [`L2Fields::parse`], when it is one.
    short: Option<Short>,
}

/// The two commonest table-0 masks, read from the bytes they need
/// alone: where each of their fields goes (a mask of 0 for one the
/// layout lacks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Short {
    /// in_port, VLAN_VID, VLAN_PCP (in_port + VLAN): the tag alone.
    Tag([Place; 3]),
    /// in_port, ETH_TYPE, MPLS_LABEL (in_port + MPLS label): the
    /// EtherType and the top label stack entry alone.
    Label([Place; 3]),
}

/// Where one value goes in a packed key: `(value & mask) << shift` into
/// word `word`; a mask of 0 for a value the layout does not have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Place {
    mask: u64,
    word: u8,
    shift: u8,
}

impl Place {
    /// Ors `v` into its word of `w` (`W` at least the layout's words, so
    /// the word is always in `w`: the remainder only lets the compiler
    /// drop the bounds check).
    #[inline]
    fn put<const W: usize>(&self, v: u64, w: &mut [u64; W]) {
        if let Some(x) = w.get_mut(usize::from(self.word) % W.max(1)) {
            *x |= (v & self.mask) << self.shift;
        }
    }
}

/// The places of `fields` when a layout of `slots` has only those
/// fields, each at most once.
fn places(slots: &[(u8, u64, u8, u8)], fields: [u8; 3]) -> Option<[Place; 3]> {
    let mut p = [Place::default(); 3];
    for &(field, mask, word, shift) in slots {
        let i = fields.iter().position(|&f| f == field)?;
        let place = p.get_mut(i)?;
        if place.mask != 0 {
            return None;
        }
        *place = Place { mask, word, shift };
    }
    Some(p)
}

impl Layout {
    /// This layout as an [`L2Layout`], when it is at most [`L2_WORDS`]
    /// words of link-layer fields and the ingress port.
    pub fn l2(&self) -> Option<L2Layout> {
        if self.words > L2_WORDS || self.slots.len() > L2_SLOTS {
            return None;
        }
        let mut l = L2Layout {
            slots: [(0, 0, 0, 0); L2_SLOTS],
            n: self.slots.len(),
            words: self.words,
            required: self.required & !PORT_FIELDS,
            short: None,
        };
        for (d, s) in l.slots.iter_mut().zip(&self.slots) {
            let known = (L2_FIELDS | PORT_FIELDS) & (1u64 << s.field) != 0;
            if s.wide || !known {
                return None;
            }
            *d = (
                s.field,
                u64::try_from(s.mask).ok()?,
                u8::try_from(s.word).ok()?,
                u8::try_from(s.shift).ok()?,
            );
        }
        let slots = l.slots.get(..l.n)?;
        l.short = places(slots, [field::IN_PORT, field::VLAN_VID, field::VLAN_PCP])
            .map(Short::Tag)
            .or_else(|| {
                places(slots, [field::IN_PORT, field::ETH_TYPE, field::MPLS_LABEL])
                    .map(Short::Label)
            });
        Some(l)
    }
}

impl L2Layout {
    /// Words of the packed key (the rest of [`L2Layout::pack`]'s array
    /// is zero).
    #[inline]
    pub fn words(&self) -> usize {
        self.words
    }

    /// The packed key of frame `data` received on `in_port` (`W` at least
    /// [`L2Layout::words`]): [`L2Layout::pack`] of its [`L2Fields`], read
    /// from the VLAN tag alone when the layout is in_port + VLAN, from the
    /// EtherType and the label alone when it is in_port + MPLS label. `None`
    /// when the short parse declines the frame or it lacks a field of the
    /// layout.
    #[inline]
    pub fn pack_frame<const W: usize>(&self, in_port: u32, data: &[u8]) -> Option<[u64; W]> {
        self.pack_frame_on(self.port_bits(in_port), in_port, data)
    }

    /// What the ingress port `in_port` puts in the packed keys of the
    /// frames it receives, when the layout reads them without
    /// [`L2Fields::parse`] (zero otherwise): for [`L2Layout::pack_frame_on`],
    /// which then does not place the port for each frame of a burst.
    #[inline]
    pub fn port_bits<const W: usize>(&self, in_port: u32) -> [u64; W] {
        let mut w = [0u64; W];
        if let Some(Short::Tag([port, ..]) | Short::Label([port, ..])) = self.short {
            port.put(u64::from(in_port), &mut w);
        }
        w
    }

    /// [`L2Layout::pack_frame`] given `port` = [`L2Layout::port_bits`] of
    /// `in_port`.
    #[inline]
    pub fn pack_frame_on<const W: usize>(
        &self,
        port: [u64; W],
        in_port: u32,
        data: &[u8],
    ) -> Option<[u64; W]> {
        let mut w = port;
        match self.short {
            None => return self.pack(in_port, &L2Fields::parse(data)?),
            Some(Short::Tag([_, vid, pcp])) => {
                match L2Fields::tag(data)? {
                    Some(tci) => {
                        vid.put(u64::from(OFPVID_PRESENT | (tci & 0x0fff)), &mut w);
                        pcp.put(u64::from(tci >> 13), &mut w);
                    }
                    // Untagged: no PCP to match.
                    None if pcp.mask != 0 => return None,
                    None => {}
                }
            }
            Some(Short::Label([_, et, label])) => {
                let (t, lse) = L2Fields::type_and_label_of(data)?;
                et.put(u64::from(t), &mut w);
                match lse {
                    Some(v) => label.put(u64::from(v >> 12), &mut w),
                    // No whole label: no label to match.
                    None if label.mask != 0 => return None,
                    None => {}
                }
            }
        }
        Some(w)
    }

    /// The packed key of a frame with link-layer fields `f` received on
    /// `in_port` (`W` at least [`L2Layout::words`]: the rest is zero);
    /// `None` when it lacks a field of the layout (no rule of this mask
    /// can match it).
    #[inline]
    pub fn pack<const W: usize>(&self, in_port: u32, f: &L2Fields) -> Option<[u64; W]> {
        if f.present & self.required != self.required {
            return None;
        }
        let mut w = [0u64; W];
        for &(field, mask, word, shift) in self.slots.get(..self.n).unwrap_or(&[]) {
            let v = if PORT_FIELDS & (1u64 << field) != 0 {
                u64::from(in_port)
            } else {
                f.value(field)
            };
            if let Some(x) = w.get_mut(usize::from(word)) {
                *x |= (v & mask) << shift;
            }
        }
        Some(w)
    }
}

/// Hash of a packed key: multiply-xorshift per word (fast, and good
/// enough for tables whose keys are not chosen by an adversary who sees
/// the seed; the seed is per table).
#[inline]
pub fn hash_words(words: &[u64], seed: u64) -> u64 {
    let mut h = seed;
    for &w in words {
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
    }
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_gateway_and_acl() {
        let gw = Layout::new(&[(field::IN_PORT, 0xffff_ffff), (field::VLAN_VID, 0x1fff)]);
        assert_eq!(gw.words(), 1);
        let mut k = FlowKey::default();
        k.set_metadata_fields(7, 7, 0, 0);
        k.present |= 1 << field::VLAN_VID;
        k.vlan_vid = 0x1005;
        let mut out = [0u64; 1];
        assert!(gw.extract(&k, &mut out));
        assert_eq!(out[0], 7 | (0x1005 << 32));
        let rule = [
            FieldMatch {
                field: field::IN_PORT,
                value: 7,
                mask: 0xffff_ffff,
            },
            FieldMatch {
                field: field::VLAN_VID,
                value: 0x1005,
                mask: 0x1fff,
            },
        ];
        let mut r = [0u64; 1];
        gw.pack_rule(&rule, &mut r);
        assert_eq!(r, out);
        assert_eq!(gw.unpack(&r), rule, "unpack inverts pack_rule");
        k.present &= !(1 << field::VLAN_VID);
        assert!(!gw.extract(&k, &mut out), "absent field");

        let acl = Layout::new(&[
            (field::ETH_TYPE, 0xffff),
            (field::IP_PROTO, 0xff),
            (field::IPV4_SRC, 0xffff_ff00),
            (field::IPV4_DST, 0xffff_ffff),
            (field::TCP_DST, 0xffff),
        ]);
        assert_eq!(acl.words(), 2);
        let v6 = Layout::new(&[(field::ETH_TYPE, 0xffff), (field::IPV6_DST, u128::MAX)]);
        assert_eq!(v6.words(), 3);
        // unpack inverts pack_rule for canonical values of any layout.
        let acl_rule = [
            (field::ETH_TYPE, 0x0800, 0xffff),
            (field::IP_PROTO, 17, 0xff),
            (field::IPV4_SRC, 0xc0a8_0100, 0xffff_ff00),
            (field::IPV4_DST, 0x0a00_0001, 0xffff_ffff),
            (field::TCP_DST, 0xfffe, 0xffff),
        ];
        let v6_rule = [
            (field::ETH_TYPE, 0x86dd, 0xffff),
            (field::IPV6_DST, u128::MAX - 5, u128::MAX),
        ];
        for (layout, rule) in [(&acl, &acl_rule[..]), (&v6, &v6_rule[..])] {
            let fields: Vec<FieldMatch> = rule
                .iter()
                .map(|&(field, value, mask)| FieldMatch { field, value, mask })
                .collect();
            let mut w = vec![0u64; layout.words()];
            layout.pack_rule(&fields, &mut w);
            assert_eq!(layout.unpack(&w), fields);
        }
        assert_eq!(Layout::new(&[]).words(), 1);
    }

    proptest::proptest! {
        /// An L2 layout packs from a frame's header what `extract`
        /// packs from the frame's parsed key, for the gateway and l2
        /// masks and for random one-word masks of link-layer fields.
        #[test]
        fn l2_layout_packs_as_extract_does(
            pick in proptest::collection::vec(0usize..9, 1..4),
            masks in proptest::collection::vec(proptest::prelude::any::<u64>(), 9),
            frame in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            shape in 0usize..5,
            in_port in 1u32..70000,
        ) {
            const FIELDS: [(u8, u64); 9] = [
                (field::IN_PORT, 0xffff_ffff),
                (field::ETH_DST, 0xffff_ffff_ffff),
                (field::ETH_SRC, 0xffff_ffff_ffff),
                (field::ETH_TYPE, 0xffff),
                (field::VLAN_VID, 0x1fff),
                (field::VLAN_PCP, 0x7),
                (field::MPLS_LABEL, 0xf_ffff),
                (field::MPLS_TC, 0x7),
                (field::MPLS_BOS, 0x1),
            ];
            let mut mask: Vec<(u8, u128)> = pick
                .iter()
                .map(|&i| (FIELDS[i].0, u128::from(FIELDS[i].1 & masks[i]).max(1)))
                .collect();
            mask.sort_unstable();
            mask.dedup_by_key(|m| m.0);
            let masks_to_try = [
                mask,
                vec![(field::IN_PORT, 0xffff_ffff), (field::VLAN_VID, 0x1fff)],
                vec![(field::IN_PORT, 0xffff_ffff), (field::ETH_TYPE, 0xffff), (field::MPLS_LABEL, 0xf_ffff)],
                vec![(field::ETH_DST, 0xffff_ffff_ffff)],
            ];
            // Steer the frame's EtherType towards the shapes that matter.
            let mut frame = frame;
            let types: [&[u8]; 5] = [&[0x81, 0x00], &[0x88, 0x47], &[0x08, 0x00], &[0x88, 0xa8], &[]];
            if frame.len() >= 14 && !types[shape].is_empty() {
                frame[12..14].copy_from_slice(types[shape]);
            }
            let mut k = FlowKey::parse(&frame);
            k.set_metadata_fields(in_port, in_port, 0, 0);
            for m in &masks_to_try {
                let layout = Layout::new(m);
                let Some(l2) = layout.l2() else {
                    proptest::prop_assert!(layout.words() > L2_WORDS, "{:?}", m);
                    continue;
                };
                proptest::prop_assert_eq!(l2.words(), layout.words());
                let from_frame = l2.pack_frame::<L2_WORDS>(in_port, &frame);
                let Some(f) = L2Fields::parse(&frame) else {
                    proptest::prop_assert_eq!(from_frame, None);
                    continue;
                };
                let mut want = [0u64; L2_WORDS];
                let found = layout.extract(&k, &mut want[..layout.words()]).then_some(want);
                proptest::prop_assert_eq!(l2.pack::<L2_WORDS>(in_port, &f), found, "{:?}", m);
                proptest::prop_assert_eq!(from_frame, found, "from the frame: {:?}", m);
            }
        }
    }

    #[test]
    fn only_short_link_layer_layouts_are_l2() {
        let gw = Layout::new(&[(field::IN_PORT, 0xffff_ffff), (field::VLAN_VID, 0x1fff)]);
        assert_eq!(gw.l2().map(|l| l.words()), Some(1));
        let mpls = Layout::new(&[
            (field::IN_PORT, 0xffff_ffff),
            (field::ETH_TYPE, 0xffff),
            (field::MPLS_LABEL, 0xf_ffff),
        ]);
        assert_eq!(mpls.l2().map(|l| l.words()), Some(2));
        let v4 = Layout::new(&[(field::ETH_TYPE, 0xffff), (field::IPV4_DST, 0xffff_ffff)]);
        assert_eq!(v4.l2(), None, "an IP field");
        let three = Layout::new(&[
            (field::ETH_DST, 0xffff_ffff_ffff),
            (field::ETH_SRC, 0xffff_ffff_ffff),
            (field::VLAN_VID, 0x1fff),
            (field::MPLS_LABEL, 0xf_ffff),
        ]);
        assert_eq!(three.l2(), None, "three words");
        let meta = Layout::new(&[(field::METADATA, 1)]);
        assert_eq!(meta.l2(), None, "metadata");
        assert!(Layout::new(&[]).l2().is_some(), "the empty mask packs to 0");
    }

    #[test]
    fn field_value_agrees_with_flow_key_get() {
        let k = FlowKey {
            present: (1u64 << 40) - 1,
            eth_dst: [1, 2, 3, 4, 5, 6],
            ipv6_dst: 0x1234 << 100,
            mpls_label: 99,
            tunnel_id: 5,
            ..Default::default()
        };
        for f in 0..40u8 {
            assert_eq!(Some(field_value(&k, f)), k.get(f), "field {f}");
        }
    }
}
