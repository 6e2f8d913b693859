//! Compiled flow entries: the part of an entry the forwarding loop reads,
//! in one cache line.
//!
//! # What
//!
//! A [`FastEntry`] is made from every flow entry when it is installed
//! ([`FastEntry::compile`]) and kept by its [`crate::FlowTable`] in a
//! dense vector parallel to the entry slots (`FlowTable::fast`). It holds
//! the entry's id, cookie and table-miss flag, and, when the entry's
//! instructions are at most one apply-actions list of at most
//! [`MAX_OPS`] actions of the kinds below and at most one goto-table
//! (or no instruction at all), the list as [`FastOp`]s of 8 bytes each
//! and the goto's table. Anything else (write-actions, meters, metadata,
//! groups, PBB, 128-bit or tunnel_id set-fields, experimenter actions,
//! longer lists) compiles to "not fast" and runs through the general
//! executor on the full entry.
//!
//! Runs of ops that a gateway uses are fused when compiled
//! (`FastEntry::fuse`): pop_vlan, push_mpls, set_field mpls_label becomes
//! [`FastOp::VlanToMpls`] and pop_mpls, push_vlan, set_field vlan_vid
//! becomes [`FastOp::MplsToVlan`]. On the frames they are meant for (one
//! tag over IP; untagged MPLS) the three actions leave the length alone
//! and change six bytes, which is all the executor writes; on any other
//! frame it runs the three steps, so the result is the same on every
//! frame (the pipeline's differential proptest has both entries).
//!
//! # Invariants
//!
//! - `size_of::<FastEntry>() == 64` and it is 64-byte aligned: one entry,
//!   one cache line.
//! - A fast entry's ops, run in order by the executor, do exactly what the
//!   entry's apply-actions list does (the executor runs both through the
//!   same rewrite functions, `Exec::rewrite` and `Exec::after_action`); a
//!   set-field is fast only when its value fits in 48 bits, its OXM has
//!   no mask and the executor knows the field, so the compiled value
//!   converts back to the same [`packet::set_field::FieldValue`].
//! - Tracing bypasses fast entries (trace events quote the original
//!   actions).
//!
//! # Why
//!
//! Executing from the full entry chases three pointers per packet (the
//! entry, its instruction vector, the action vector inside it): about ten
//! cache lines per packet, which with 100K or 1M entries are all misses,
//! and prefetching them all across a burst fills the core's outstanding-
//! miss slots. A compiled entry makes it three lines per packet
//! (classifier slot, this line, the flow counter). Fusing the gateway's
//! three rewrites makes them one six-byte write. The goto is compiled
//! because in a pipeline shaped like Faucet's every packet's eth_src entry
//! is a bare goto, which read from the full entry would cost a whole
//! entry's misses (`fulmar bench faucet`). What each step measured is in
//! docs/results.md ("What the datapath's structure bought").

use crate::model::flow_entry::{FlowEntry, FlowId};
use crate::model::instructions::{self, EntryInstructions, Item};
use ofp::{Action, Instruction, Oxm, OxmField};
use packet::flow_key::field;
use packet::set_field::FieldValue;

/// Most actions a fast entry holds.
pub const MAX_OPS: usize = 5;

/// A header rewrite, as the executor applies it (shared by fast entries
/// and the general executor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// copy_ttl_out.
    CopyTtlOut,
    /// copy_ttl_in.
    CopyTtlIn,
    /// set_mpls_ttl.
    SetMplsTtl(u8),
    /// dec_mpls_ttl.
    DecMplsTtl,
    /// set_nw_ttl.
    SetNwTtl(u8),
    /// dec_nw_ttl.
    DecNwTtl,
    /// push_vlan with this TPID.
    PushVlan(u16),
    /// pop_vlan.
    PopVlan,
    /// push_mpls with this EtherType.
    PushMpls(u16),
    /// pop_mpls, leaving this EtherType.
    PopMpls(u16),
}

impl Rewrite {
    /// The rewrite an action is, if it is one.
    pub fn of(a: &Action) -> Option<Rewrite> {
        Some(match *a {
            Action::CopyTtlOut => Rewrite::CopyTtlOut,
            Action::CopyTtlIn => Rewrite::CopyTtlIn,
            Action::SetMplsTtl { mpls_ttl } => Rewrite::SetMplsTtl(mpls_ttl),
            Action::DecMplsTtl => Rewrite::DecMplsTtl,
            Action::SetNwTtl { nw_ttl } => Rewrite::SetNwTtl(nw_ttl),
            Action::DecNwTtl => Rewrite::DecNwTtl,
            Action::PushVlan { ethertype } => Rewrite::PushVlan(ethertype),
            Action::PopVlan => Rewrite::PopVlan,
            Action::PushMpls { ethertype } => Rewrite::PushMpls(ethertype),
            Action::PopMpls { ethertype } => Rewrite::PopMpls(ethertype),
            _ => return None,
        })
    }
}

/// One compiled action (8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastOp {
    /// A header rewrite.
    Rewrite(Rewrite),
    /// set_field of OXM field `field` to `(hi << 32) | lo`.
    SetField {
        /// OXM field number.
        field: u8,
        /// Bits 32..48 of the value.
        hi: u16,
        /// Bits 0..32 of the value.
        lo: u32,
    },
    /// output.
    Output {
        /// Port.
        port: u32,
        /// `max_len`.
        max_len: u16,
    },
    /// set_queue.
    SetQueue(u32),
    /// pop_vlan, push_mpls with `ethertype` (0x8847 or 0x8848), set_field
    /// mpls_label to `label`: the VLAN-to-MPLS gateway's three actions,
    /// fused. On a frame with one VLAN tag over a non-MPLS EtherType the
    /// three leave the length alone and change only bytes 12..18 (the tag
    /// and the inner EtherType become the MPLS EtherType and the new
    /// label), so that is all the executor writes; on any other frame it
    /// runs the three steps.
    VlanToMpls {
        /// The pushed EtherType.
        ethertype: u16,
        /// The label value as set_field received it (masked to 20 bits
        /// when written, as set_field does).
        label: u32,
    },
    /// pop_mpls leaving `ethertype` (not a VLAN TPID), push_vlan with
    /// `tpid`, set_field vlan_vid to `vid`: the MPLS-to-VLAN gateway's
    /// three actions, fused. On an untagged frame with an MPLS label the
    /// three leave the length alone and change only bytes 12..18 (the MPLS
    /// EtherType and label become the tag and the popped EtherType); on
    /// any other frame the executor runs the three steps.
    MplsToVlan {
        /// The EtherType pop_mpls leaves.
        ethertype: u16,
        /// The pushed tag's TPID.
        tpid: u16,
        /// The VID as set_field received it (its low 12 bits are written).
        vid: u16,
    },
}

impl FastOp {
    /// The compiled form of `a`, if it has one (see the module comment).
    pub fn of(a: &Action) -> Option<FastOp> {
        if let Some(r) = Rewrite::of(a) {
            return Some(FastOp::Rewrite(r));
        }
        Some(match a {
            Action::Output { port, max_len } => FastOp::Output {
                port: *port,
                max_len: *max_len,
            },
            Action::SetQueue { queue_id } => FastOp::SetQueue(*queue_id),
            Action::SetField {
                field:
                    Oxm::Basic {
                        field,
                        value,
                        mask: None,
                    },
            } => {
                let v = value.to_u128();
                let known = *field != OxmField::TunnelId && field_value(*field, v).is_some();
                if !known || v >> 48 != 0 {
                    return None;
                }
                FastOp::SetField {
                    field: *field as u8,
                    hi: (v >> 32) as u16,
                    lo: v as u32,
                }
            }
            _ => return None,
        })
    }
}

/// Marks a [`FastEntry`] whose instructions did not compile.
const NOT_FAST: u8 = u8::MAX;

/// The hot part of one flow entry (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(align(64))]
pub struct FastEntry {
    /// The entry's id.
    pub id: FlowId,
    /// Its cookie (for packet-ins).
    pub cookie: u64,
    /// Number of ops, or `NOT_FAST`.
    n: u8,
    /// A table-miss entry (priority 0, empty match).
    pub miss: bool,
    /// The goto-table's table, or 0 for none (a goto always names a later
    /// table than its own, so never table 0).
    goto: u8,
    ops: [FastOp; MAX_OPS],
}

impl Default for FastEntry {
    fn default() -> Self {
        FastEntry {
            id: FlowId(0),
            cookie: 0,
            n: NOT_FAST,
            miss: false,
            goto: 0,
            ops: [FastOp::SetQueue(0); MAX_OPS],
        }
    }
}

/// The ops, their number and the goto-table (0: none) of a list that
/// compiles: at most one apply-actions of at most [`MAX_OPS`] actions
/// [`FastOp::of`] takes, and at most one goto-table to a later table
/// (never table 0); `None` for any other list. Unfused.
fn compile_ops<'a>(items: impl Iterator<Item = Item<'a>>) -> Option<([FastOp; MAX_OPS], u8, u8)> {
    let mut ops = [FastOp::SetQueue(0); MAX_OPS];
    let (mut n, mut goto) = (0usize, 0u8);
    let (mut applies, mut gotos) = (0, 0);
    for i in items {
        match i {
            Item::Actions {
                write: false,
                actions,
            } => {
                applies += 1;
                if applies > 1 {
                    return None;
                }
                for a in actions {
                    *ops.get_mut(n)? = FastOp::of(&a)?;
                    n += 1;
                }
            }
            Item::GotoTable(t) if t > 0 => {
                gotos += 1;
                if gotos > 1 {
                    return None;
                }
                goto = t;
            }
            _ => return None,
        }
    }
    Some((ops, n as u8, goto))
}

/// True when an entry with instructions `list` compiles (runs as a
/// [`FastEntry`]'s ops).
fn compiles(list: &[Instruction]) -> bool {
    compile_ops(instructions::items_of(list)).is_some()
}

/// How an entry keeps `list`: packed when it compiles (the general
/// executor never reads it per packet), decoded otherwise.
pub fn entry_instructions(list: &[Instruction]) -> EntryInstructions {
    if compiles(list) {
        EntryInstructions::packed(list)
    } else {
        EntryInstructions::Decoded(list.to_vec())
    }
}

impl FastEntry {
    /// The compiled form of `e`.
    pub fn compile(e: &FlowEntry) -> FastEntry {
        let mut f = FastEntry {
            id: e.id,
            cookie: e.cookie,
            miss: e.priority == 0 && e.key.fields().is_empty(),
            ..FastEntry::default()
        };
        if let Some((ops, n, goto)) = compile_ops(e.instructions.items()) {
            f.ops = ops;
            f.n = n;
            // Only a compiled entry has a goto: nothing reads a stale one.
            f.goto = goto;
            f.fuse();
        }
        f
    }

    /// Replaces each pop_vlan, push_mpls, set_field mpls_label run by one
    /// [`FastOp::VlanToMpls`].
    fn fuse(&mut self) {
        let n = usize::from(self.n);
        let mut out = [FastOp::SetQueue(0); MAX_OPS];
        let (mut i, mut m) = (0, 0);
        while i < n {
            use packet::ethernet::ethertype::{is_mpls, is_vlan};
            let fused = match self.ops.get(i..i + 3) {
                Some(
                    &[FastOp::Rewrite(Rewrite::PopVlan), FastOp::Rewrite(Rewrite::PushMpls(et)), FastOp::SetField { field, lo, .. }],
                ) if field == OxmField::MplsLabel as u8 && is_mpls(et) => {
                    Some(FastOp::VlanToMpls {
                        ethertype: et,
                        label: lo,
                    })
                }
                Some(
                    &[FastOp::Rewrite(Rewrite::PopMpls(et)), FastOp::Rewrite(Rewrite::PushVlan(tpid)), FastOp::SetField { field, lo, .. }],
                ) if field == OxmField::VlanVid as u8 && is_vlan(tpid) && !is_vlan(et) => {
                    Some(FastOp::MplsToVlan {
                        ethertype: et,
                        tpid,
                        vid: lo as u16,
                    })
                }
                _ => None,
            };
            let (op, used) = match fused {
                Some(op) => (op, 3),
                None => (self.ops.get(i).copied().unwrap_or(FastOp::SetQueue(0)), 1),
            };
            if let Some(o) = out.get_mut(m) {
                *o = op;
            }
            m += 1;
            i += used;
        }
        self.ops = out;
        self.n = m as u8;
    }

    /// The compiled apply-actions, or `None` when the entry must run
    /// through the general executor.
    #[inline]
    pub fn ops(&self) -> Option<&[FastOp]> {
        if self.n == NOT_FAST {
            return None;
        }
        self.ops.get(..usize::from(self.n))
    }

    /// The compiled apply-actions of a compiled entry without a
    /// goto-table ([`FastEntry::is_final`]); `None` for any other.
    #[inline]
    pub fn final_ops(&self) -> Option<&[FastOp]> {
        if self.goto != 0 {
            return None;
        }
        self.ops()
    }

    /// A compiled entry without a goto-table: the pipeline ends with it.
    #[inline]
    pub fn is_final(&self) -> bool {
        self.n != NOT_FAST && self.goto == 0
    }

    /// A compiled entry that ends the pipeline with its last op an output
    /// to a standard port: one the express path may forward (it still
    /// checks the ops before and the port, per frame).
    #[inline]
    pub fn leaves_by_port(&self) -> bool {
        self.is_final()
            && matches!(
                self.ops().and_then(<[FastOp]>::last),
                Some(FastOp::Output { port, .. }) if *port <= ofp::consts::port_no::MAX
            )
    }

    /// The table a compiled entry goes on to, if it has a goto-table (the
    /// executor checks that it is later than the entry's own table).
    #[inline]
    pub fn goto(&self) -> Option<u8> {
        (self.goto != 0).then_some(self.goto)
    }
}

fn mac_of(v: u128) -> [u8; 6] {
    let b = v.to_be_bytes();
    let mut m = [0u8; 6];
    if let Some(src) = b.get(10..16) {
        m.copy_from_slice(src);
    }
    m
}

/// The packet rewrite for a set-field of `f` to `v` (`None` for fields
/// that are not packet bytes).
pub fn field_value(f: OxmField, v: u128) -> Option<FieldValue> {
    use FieldValue as F;
    let f8 = f as u8;
    Some(match f8 {
        field::ETH_DST => F::EthDst(mac_of(v)),
        field::ETH_SRC => F::EthSrc(mac_of(v)),
        field::ETH_TYPE => F::EthType(v as u16),
        field::VLAN_VID => F::VlanVid(v as u16),
        field::VLAN_PCP => F::VlanPcp(v as u8),
        field::IP_DSCP => F::IpDscp(v as u8),
        field::IP_ECN => F::IpEcn(v as u8),
        field::IP_PROTO => F::IpProto(v as u8),
        field::IPV4_SRC => F::Ipv4Src(v as u32),
        field::IPV4_DST => F::Ipv4Dst(v as u32),
        field::TCP_SRC => F::TcpSrc(v as u16),
        field::TCP_DST => F::TcpDst(v as u16),
        field::UDP_SRC => F::UdpSrc(v as u16),
        field::UDP_DST => F::UdpDst(v as u16),
        field::SCTP_SRC => F::SctpSrc(v as u16),
        field::SCTP_DST => F::SctpDst(v as u16),
        field::ICMPV4_TYPE => F::Icmpv4Type(v as u8),
        field::ICMPV4_CODE => F::Icmpv4Code(v as u8),
        field::ARP_OP => F::ArpOp(v as u16),
        field::ARP_SPA => F::ArpSpa(v as u32),
        field::ARP_TPA => F::ArpTpa(v as u32),
        field::ARP_SHA => F::ArpSha(mac_of(v)),
        field::ARP_THA => F::ArpTha(mac_of(v)),
        field::IPV6_SRC => F::Ipv6Src(v),
        field::IPV6_DST => F::Ipv6Dst(v),
        field::IPV6_FLABEL => F::Ipv6Flabel(v as u32),
        field::ICMPV6_TYPE => F::Icmpv6Type(v as u8),
        field::ICMPV6_CODE => F::Icmpv6Code(v as u8),
        field::IPV6_ND_TARGET => F::Ipv6NdTarget(v),
        field::IPV6_ND_SLL => F::Ipv6NdSll(mac_of(v)),
        field::IPV6_ND_TLL => F::Ipv6NdTll(mac_of(v)),
        field::MPLS_LABEL => F::MplsLabel(v as u32),
        field::MPLS_TC => F::MplsTc(v as u8),
        field::MPLS_BOS => F::MplsBos(v as u8),
        field::PBB_ISID => F::PbbIsid(v as u32),
        _ => return None,
    })
}

/// Whether a set-field action on `f` is carried out by the executor (a
/// settable field the packet rewriter knows, or the pipeline field
/// `tunnel_id`). Used to derive the table features.
pub fn exec_field_settable(f: OxmField) -> bool {
    f.settable() && (f == OxmField::TunnelId || field_value(f, 0).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::match_key::MatchKey;
    use crate::Time;
    use ofp::{Match, OxmValue};

    /// An entry with `instructions` decoded. Every test's list is also
    /// packed here, and must compile the same both ways, and be packed by
    /// [`entry_instructions`] exactly when it compiles.
    fn entry(instructions: Vec<Instruction>) -> FlowEntry {
        let e = FlowEntry {
            id: FlowId(7),
            table_id: 0,
            priority: 5,
            key: MatchKey::new(&Match::default()).unwrap(),
            sent: None,
            instructions: EntryInstructions::Decoded(instructions.clone()),
            cookie: 0xc0,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            installed_at: Time(0),
        };
        let packed = FlowEntry {
            instructions: EntryInstructions::packed(&instructions),
            ..e.clone()
        };
        let f = FastEntry::compile(&e);
        assert_eq!(FastEntry::compile(&packed), f, "{instructions:?}");
        assert_eq!(
            entry_instructions(&instructions).is_packed(),
            f.ops().is_some(),
            "{instructions:?}"
        );
        e
    }

    fn set(field: OxmField, value: OxmValue) -> Action {
        Action::SetField {
            field: Oxm::basic(field, value),
        }
    }

    #[test]
    fn one_cache_line() {
        assert_eq!(std::mem::size_of::<FastOp>(), 8);
        assert_eq!(std::mem::size_of::<FastEntry>(), 64);
        assert_eq!(std::mem::align_of::<FastEntry>(), 64);
    }

    #[test]
    fn gateway_actions_compile_in_order() {
        let e = entry(vec![Instruction::ApplyActions {
            actions: vec![
                Action::PopVlan,
                Action::PushMpls { ethertype: 0x8847 },
                set(OxmField::MplsLabel, OxmValue::U32(1234)),
                Action::Output {
                    port: 3,
                    max_len: 0,
                },
            ],
        }]);
        let f = FastEntry::compile(&e);
        assert_eq!((f.id, f.cookie, f.miss), (FlowId(7), 0xc0, false));
        assert_eq!(
            f.ops(),
            Some(
                &[
                    FastOp::VlanToMpls {
                        ethertype: 0x8847,
                        label: 1234
                    },
                    FastOp::Output {
                        port: 3,
                        max_len: 0
                    },
                ][..]
            )
        );
        let e = entry(vec![Instruction::ApplyActions {
            actions: vec![
                Action::PopMpls { ethertype: 0x0800 },
                Action::PushVlan { ethertype: 0x8100 },
                set(OxmField::VlanVid, OxmValue::U16(0x1005)),
            ],
        }]);
        assert_eq!(
            FastEntry::compile(&e).ops(),
            Some(
                &[FastOp::MplsToVlan {
                    ethertype: 0x0800,
                    tpid: 0x8100,
                    vid: 0x1005
                }][..]
            )
        );
        // Not the exact run: not fused.
        let e = entry(vec![Instruction::ApplyActions {
            actions: vec![
                Action::PopVlan,
                Action::PushMpls { ethertype: 0x8847 },
                set(OxmField::MplsTc, OxmValue::U8(1)),
            ],
        }]);
        assert_eq!(FastEntry::compile(&e).ops().map(<[FastOp]>::len), Some(3));
        let mac = set(
            OxmField::EthDst,
            OxmValue::Mac(ofp::MacAddr([0xaa, 0xbb, 1, 2, 3, 4])),
        );
        let f = FastEntry::compile(&entry(vec![Instruction::ApplyActions {
            actions: vec![mac],
        }]));
        assert_eq!(
            f.ops(),
            Some(
                &[FastOp::SetField {
                    field: OxmField::EthDst as u8,
                    hi: 0xaabb,
                    lo: 0x0102_0304
                }][..]
            )
        );
        assert_eq!(FastEntry::compile(&entry(vec![])).ops(), Some(&[][..]));
    }

    #[test]
    fn a_goto_compiles_with_or_without_apply_actions_in_either_order() {
        let push = Instruction::ApplyActions {
            actions: vec![Action::PushVlan { ethertype: 0x8100 }],
        };
        let goto = Instruction::GotoTable { table_id: 3 };
        for inst in [
            vec![goto.clone()],
            vec![push.clone(), goto.clone()],
            vec![goto.clone(), push.clone()],
        ] {
            let f = FastEntry::compile(&entry(inst.clone()));
            assert_eq!(f.goto(), Some(3), "{inst:?}");
            assert_eq!(f.ops().map(<[FastOp]>::len), Some(inst.len() - 1));
        }
        let plain = FastEntry::compile(&entry(vec![push]));
        assert_eq!(plain.goto(), None);
        // Not fast: no goto either, so nothing reads a stale one.
        let slow = FastEntry::compile(&entry(vec![
            Instruction::ApplyActions {
                actions: vec![Action::Group { group_id: 1 }],
            },
            goto,
        ]));
        assert_eq!((slow.ops(), slow.goto()), (None, None));
    }

    #[test]
    fn everything_else_takes_the_general_path() {
        let slow = [
            vec![
                Instruction::GotoTable { table_id: 1 },
                Instruction::GotoTable { table_id: 2 },
            ],
            vec![
                Instruction::GotoTable { table_id: 1 },
                Instruction::WriteMetadata {
                    metadata: 1,
                    metadata_mask: 1,
                },
            ],
            vec![Instruction::WriteActions { actions: vec![] }],
            vec![
                Instruction::ApplyActions { actions: vec![] },
                Instruction::ApplyActions { actions: vec![] },
            ],
            vec![Instruction::ApplyActions {
                actions: vec![Action::Group { group_id: 1 }],
            }],
            vec![Instruction::ApplyActions {
                actions: vec![Action::PopPbb],
            }],
            vec![Instruction::ApplyActions {
                actions: vec![set(OxmField::TunnelId, OxmValue::U64(1))],
            }],
            vec![Instruction::ApplyActions {
                actions: vec![set(
                    OxmField::Ipv6Dst,
                    OxmValue::Ipv6("2001:db8::1".parse().unwrap()),
                )],
            }],
            vec![Instruction::ApplyActions {
                actions: vec![Action::DecNwTtl; MAX_OPS + 1],
            }],
        ];
        for inst in slow {
            assert_eq!(
                FastEntry::compile(&entry(inst.clone())).ops(),
                None,
                "{inst:?}"
            );
        }
    }
}
