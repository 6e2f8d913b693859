//! A flow entry's instructions as the entry keeps them: decoded, or packed
//! as their wire encoding.
//!
//! # What
//!
//! [`EntryInstructions::Decoded`] holds the [`Instruction`]s, which the
//! general executor walks for every packet that hits the entry.
//! [`EntryInstructions::Packed`] holds the bytes the instructions encode
//! to on the wire (`ofp_instruction` TLVs, padding included), for an entry
//! whose packets run only through its compiled form
//! (`tables::compiled::FastEntry`): the tables layer packs exactly the
//! lists that compile (`compiled::entry_instructions`).
//!
//! Readers do not care which: [`EntryInstructions::list`] gives the list
//! (borrowed, or decoded from the bytes), [`EntryInstructions::items`]
//! walks it without allocating (actions of a packed list are decoded one
//! at a time onto the stack), and [`EntryInstructions::encode`] writes the
//! wire form (a copy of the bytes when packed: a flow-stats reply).
//!
//! # Invariants
//!
//! - Packed bytes are what [`Instruction::encode`] wrote for a list, so
//!   they decode back to that list (`ofp`'s round-trip property tests, and
//!   this module's): two forms of one list are equal (`PartialEq` compares
//!   the lists). The one list that does not come back as it went in has
//!   experimenter data of a length not a multiple of 8, which comes back
//!   padded, as it would from any channel; no list that compiles has an
//!   experimenter instruction.
//! - Nothing in a packed list allocates to walk: the kinds a compiled
//!   entry runs (apply-actions of fixed-size actions, goto-table) decode
//!   without heap memory. Reading a packed list as a whole
//!   ([`EntryInstructions::list`]) allocates, which only control-side
//!   code and tracing do.
//!
//! # Why
//!
//! A gateway entry's one apply-actions of four actions took 256 bytes of
//! heap decoded (a 32-byte instruction and four 56-byte actions, two
//! allocations) and takes 56 packed (one): at a million entries, about
//! 190 MiB. The packed form is also what a flow-stats reply sends, copied
//! instead of encoded.

use ofp::action::action_type;
use ofp::instruction::instruction_type;
use ofp::wire::{FieldList, Reader};
use ofp::{Action, Instruction};
use std::borrow::Cow;

/// A flow entry's instructions (see the module comment).
#[derive(Clone, Debug)]
pub enum EntryInstructions {
    /// The list itself: what the general executor runs.
    Decoded(Vec<Instruction>),
    /// The list's wire encoding.
    Packed(Box<[u8]>),
}

impl Default for EntryInstructions {
    fn default() -> Self {
        EntryInstructions::Decoded(Vec::new())
    }
}

impl PartialEq for EntryInstructions {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (EntryInstructions::Packed(a), EntryInstructions::Packed(b)) => a == b,
            _ => self.list() == other.list(),
        }
    }
}

impl Eq for EntryInstructions {}

impl EntryInstructions {
    /// `list` packed as its wire encoding (see the invariants for the one
    /// list that does not read back exactly).
    pub fn packed(list: &[Instruction]) -> EntryInstructions {
        let mut w = Vec::with_capacity(Instruction::list_wire_len(list));
        for i in list {
            i.encode(&mut w);
        }
        EntryInstructions::Packed(w.into_boxed_slice())
    }

    /// True when held as bytes.
    pub fn is_packed(&self) -> bool {
        matches!(self, EntryInstructions::Packed(_))
    }

    /// The list as the general executor reads it, or `None` when packed.
    pub fn as_decoded(&self) -> Option<&[Instruction]> {
        match self {
            EntryInstructions::Decoded(l) => Some(l),
            EntryInstructions::Packed(_) => None,
        }
    }

    /// The list: borrowed when decoded, decoded from the bytes when
    /// packed.
    pub fn list(&self) -> Cow<'_, [Instruction]> {
        match self {
            EntryInstructions::Decoded(l) => Cow::Borrowed(l),
            EntryInstructions::Packed(b) => Cow::Owned(decode_packed(b)),
        }
    }

    /// The list, owned.
    pub fn to_vec(&self) -> Vec<Instruction> {
        self.list().into_owned()
    }

    /// Appends the list's wire encoding to `w`.
    pub fn encode(&self, w: &mut Vec<u8>) {
        match self {
            EntryInstructions::Decoded(l) => {
                for i in l {
                    i.encode(w);
                }
            }
            EntryInstructions::Packed(b) => w.extend_from_slice(b),
        }
    }

    /// The instructions one by one, without allocating.
    pub fn items(&self) -> Items<'_> {
        match self {
            EntryInstructions::Decoded(l) => items_of(l),
            EntryInstructions::Packed(b) => Items::Packed(Reader::new(b)),
        }
    }

    /// Every action of the apply-actions and write-actions instructions.
    pub fn actions(&self) -> impl Iterator<Item = Cow<'_, Action>> {
        self.items().flat_map(|i| match i {
            Item::Actions { actions, .. } => actions,
            _ => Actions::Slice([].iter()),
        })
    }

    /// The ports of the output actions, in order.
    pub fn output_ports(&self) -> Vec<u32> {
        self.action_words(action_type::OUTPUT)
    }

    /// The groups of the group actions, in order (may repeat).
    pub fn group_ids(&self) -> Vec<u32> {
        self.action_words(action_type::GROUP)
    }

    /// The `u32` that starts the body of every action of type `typ`
    /// (`OFPAT_OUTPUT`: its port; `OFPAT_GROUP`: its group; no other type
    /// is asked for), in order. A packed list's other actions are skipped
    /// by their headers, not decoded: install and removal ask every entry
    /// for its groups.
    fn action_words(&self, typ: u16) -> Vec<u32> {
        let mut out = Vec::new();
        match self {
            EntryInstructions::Decoded(l) => {
                for a in instruction_actions(l) {
                    match *a {
                        Action::Output { port, .. } if typ == action_type::OUTPUT => out.push(port),
                        Action::Group { group_id } if typ == action_type::GROUP => {
                            out.push(group_id)
                        }
                        _ => {}
                    }
                }
            }
            EntryInstructions::Packed(b) => for_each_tlv(b, |it, body| {
                if is_actions(it) {
                    for_each_tlv(body.get(4..).unwrap_or(&[]), |at, ab| {
                        if at == typ {
                            if let Some(w) = ab.get(..4) {
                                out.push(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
                            }
                        }
                    });
                }
            }),
        }
        out
    }

    /// The number of instructions and of actions in them, without
    /// decoding a packed list's actions.
    pub fn counts(&self) -> (usize, usize) {
        match self {
            EntryInstructions::Decoded(l) => counts_of(l),
            EntryInstructions::Packed(b) => {
                let (mut n, mut a) = (0, 0);
                for_each_tlv(b, |typ, body| {
                    n += 1;
                    if is_actions(typ) {
                        // An actions instruction: 4 bytes of padding, then
                        // the action TLVs.
                        for_each_tlv(body.get(4..).unwrap_or(&[]), |_, _| a += 1);
                    }
                });
                (n, a)
            }
        }
    }

    /// Prefetches the first line of the heap memory the list starts in.
    pub fn prefetch(&self) {
        match self {
            EntryInstructions::Decoded(l) => {
                if let Some(i) = l.first() {
                    classifier::prefetch(i);
                }
            }
            EntryInstructions::Packed(b) => {
                if let Some(x) = b.first() {
                    classifier::prefetch(x);
                }
            }
        }
    }
}

/// Decodes bytes [`EntryInstructions::packed`] wrote. They always decode
/// (see the invariants); were they ever not to, the list would read as
/// empty rather than panic, and a debug build stops there.
fn decode_packed(b: &[u8]) -> Vec<Instruction> {
    match Instruction::decode_list(&mut Reader::new(b)) {
        Ok(l) => l,
        Err(e) => {
            debug_assert!(false, "packed instructions do not decode: {e:?}");
            Vec::new()
        }
    }
}

fn is_actions(typ: u16) -> bool {
    typ == instruction_type::APPLY_ACTIONS || typ == instruction_type::WRITE_ACTIONS
}

/// Calls `each(type, body)` for every TLV of `b` (a 16-bit type, a 16-bit
/// length that counts the 4-byte header, then the body); stops at the
/// first length that does not fit.
fn for_each_tlv(b: &[u8], mut each: impl FnMut(u16, &[u8])) {
    let mut r = Reader::new(b);
    while let Some((typ, body)) = next_tlv(&mut r) {
        each(typ, body);
    }
}

/// The next TLV of `r`, or `None` at the end or at a length that does not
/// fit.
fn next_tlv<'a>(r: &mut Reader<'a>) -> Option<(u16, &'a [u8])> {
    let head = r.peek(4)?;
    let typ = u16::from_be_bytes([head[0], head[1]]);
    let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
    if len < 4 {
        return None;
    }
    let all = r.bytes(len).ok()?;
    Some((typ, &all[4..]))
}

/// The instructions of a decoded list one by one, as
/// [`EntryInstructions::items`] gives them.
pub fn items_of(list: &[Instruction]) -> Items<'_> {
    Items::Slice(list.iter())
}

/// Every action inside the apply-actions and write-actions instructions of
/// a decoded list.
pub fn instruction_actions(list: &[Instruction]) -> impl Iterator<Item = &Action> {
    list.iter().flat_map(|i| match i {
        Instruction::ApplyActions { actions } | Instruction::WriteActions { actions } => {
            actions.as_slice()
        }
        _ => &[],
    })
}

/// The number of instructions in `list` and of actions in them.
pub fn counts_of(list: &[Instruction]) -> (usize, usize) {
    (list.len(), instruction_actions(list).count())
}

/// One instruction as [`Items`] gives it.
#[derive(Debug)]
pub enum Item<'a> {
    /// Apply-actions (`write` false) or write-actions.
    Actions { write: bool, actions: Actions<'a> },
    /// Goto-table.
    GotoTable(u8),
    /// Meter.
    Meter(u32),
    /// Write-metadata, clear-actions or an experimenter instruction.
    Other,
}

/// The instructions of an [`EntryInstructions`], one [`Item`] each.
#[derive(Debug)]
pub enum Items<'a> {
    Slice(std::slice::Iter<'a, Instruction>),
    Packed(Reader<'a>),
}

impl<'a> Iterator for Items<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        match self {
            Items::Slice(it) => Some(match it.next()? {
                Instruction::ApplyActions { actions } => Item::Actions {
                    write: false,
                    actions: Actions::Slice(actions.iter()),
                },
                Instruction::WriteActions { actions } => Item::Actions {
                    write: true,
                    actions: Actions::Slice(actions.iter()),
                },
                Instruction::GotoTable { table_id } => Item::GotoTable(*table_id),
                Instruction::Meter { meter_id } => Item::Meter(*meter_id),
                _ => Item::Other,
            }),
            Items::Packed(r) => {
                let (typ, body) = next_tlv(r)?;
                let mut b = Reader::new(body);
                Some(match typ {
                    t if is_actions(t) => {
                        let _ = b.skip(4);
                        Item::Actions {
                            write: t == instruction_type::WRITE_ACTIONS,
                            actions: Actions::Packed(b),
                        }
                    }
                    instruction_type::GOTO_TABLE => Item::GotoTable(b.u8().unwrap_or(0)),
                    instruction_type::METER => Item::Meter(b.u32().unwrap_or(0)),
                    _ => Item::Other,
                })
            }
        }
    }
}

/// The actions of one actions instruction: borrowed from a decoded list,
/// decoded one at a time from a packed one.
#[derive(Debug)]
pub enum Actions<'a> {
    Slice(std::slice::Iter<'a, Action>),
    Packed(Reader<'a>),
}

impl<'a> Iterator for Actions<'a> {
    type Item = Cow<'a, Action>;

    fn next(&mut self) -> Option<Cow<'a, Action>> {
        match self {
            Actions::Slice(it) => it.next().map(Cow::Borrowed),
            Actions::Packed(r) => {
                if r.is_empty() {
                    return None;
                }
                match Action::decode(r) {
                    Ok(a) => Some(Cow::Owned(a)),
                    Err(e) => {
                        debug_assert!(false, "packed action does not decode: {e:?}");
                        let _ = r.rest();
                        None
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::{Oxm, OxmField, OxmValue};

    fn gateway() -> Vec<Instruction> {
        vec![
            Instruction::ApplyActions {
                actions: vec![
                    Action::PopVlan,
                    Action::PushMpls { ethertype: 0x8847 },
                    Action::SetField {
                        field: Oxm::Basic {
                            field: OxmField::MplsLabel,
                            value: OxmValue::U32(1000),
                            mask: None,
                        },
                    },
                    Action::Output {
                        port: 2,
                        max_len: 0,
                    },
                ],
            },
            Instruction::GotoTable { table_id: 3 },
        ]
    }

    fn every_kind() -> Vec<Instruction> {
        vec![
            Instruction::Meter { meter_id: 7 },
            Instruction::WriteMetadata {
                metadata: 1,
                metadata_mask: 3,
            },
            Instruction::ClearActions,
            Instruction::WriteActions {
                actions: vec![Action::Group { group_id: 4 }, Action::DecNwTtl],
            },
            Instruction::ApplyActions { actions: vec![] },
            Instruction::Experimenter {
                experimenter: 0x2320,
                // A multiple of 8 bytes: shorter data would come back
                // padded (the wire cannot tell), as it does from a channel.
                data: vec![1, 2, 3, 4, 5, 6, 7, 8],
            },
            Instruction::GotoTable { table_id: 9 },
        ]
    }

    /// What `items` gives, written out, for comparing the two forms.
    fn walk(e: &EntryInstructions) -> Vec<String> {
        e.items()
            .map(|i| match i {
                Item::Actions { write, actions } => {
                    format!("{write} {:?}", actions.collect::<Vec<_>>())
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn both_forms_read_alike() {
        for list in [gateway(), every_kind(), vec![]] {
            let d = EntryInstructions::Decoded(list.clone());
            let p = EntryInstructions::packed(&list);
            assert!(p.is_packed() && !d.is_packed());
            assert_eq!(p.list().as_ref(), list.as_slice());
            assert_eq!(p.to_vec(), list);
            assert_eq!(d, p);
            assert_eq!(walk(&d), walk(&p));
            assert_eq!(d.counts(), p.counts());
            assert_eq!(
                d.actions().collect::<Vec<_>>(),
                p.actions().collect::<Vec<_>>()
            );
            let (mut wd, mut wp) = (Vec::new(), Vec::new());
            d.encode(&mut wd);
            p.encode(&mut wp);
            assert_eq!(wd, wp);
            assert_eq!(wd.len(), Instruction::list_wire_len(&list));
        }
        assert_eq!(EntryInstructions::Decoded(every_kind()).counts(), (7, 2));
        for list in [gateway(), every_kind()] {
            for typ in [action_type::OUTPUT, action_type::GROUP] {
                let d = EntryInstructions::Decoded(list.clone()).action_words(typ);
                assert_eq!(d, EntryInstructions::packed(&list).action_words(typ));
            }
        }
        assert_eq!(
            EntryInstructions::packed(&gateway()).action_words(action_type::OUTPUT),
            [2]
        );
        assert_eq!(
            EntryInstructions::packed(&every_kind()).action_words(action_type::GROUP),
            [4]
        );
    }

    #[test]
    fn different_lists_differ() {
        let mut other = gateway();
        other.pop();
        assert_ne!(
            EntryInstructions::packed(&gateway()),
            EntryInstructions::packed(&other)
        );
        assert_ne!(
            EntryInstructions::Decoded(gateway()),
            EntryInstructions::packed(&other)
        );
    }

    #[test]
    fn a_packed_gateway_list_is_one_small_block() {
        let p = EntryInstructions::packed(&gateway()[..1]);
        let EntryInstructions::Packed(b) = &p else {
            unreachable!("packed() packs")
        };
        assert_eq!(b.len(), 56);
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any list, packed, reads back as itself in every way.
        #[test]
        fn packing_round_trips(list in ofp::strategies::arb_instructions()) {
            let d = EntryInstructions::Decoded(list.clone());
            let p = EntryInstructions::packed(&list);
            prop_assert_eq!(p.to_vec(), list);
            prop_assert_eq!(d.counts(), p.counts());
            prop_assert_eq!(
                d.actions().collect::<Vec<_>>(),
                p.actions().collect::<Vec<_>>()
            );
            let meters = |e: &EntryInstructions| {
                e.items().filter_map(|i| match i { Item::Meter(m) => Some(m), _ => None }).collect::<Vec<_>>()
            };
            prop_assert_eq!(meters(&d), meters(&p));
            for typ in [action_type::OUTPUT, action_type::GROUP] {
                prop_assert_eq!(d.action_words(typ), p.action_words(typ));
            }
        }
    }
}
