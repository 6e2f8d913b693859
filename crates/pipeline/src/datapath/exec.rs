//! The executor: walks one packet through the tables (instructions in the
//! spec's order, §5.9), runs actions (§5.12), the action set (§5.10),
//! groups (§5.6, §6.5) and meters (§5.7), and emits transmissions and
//! packet-ins into a [`BurstOutput`].
//!
//! An [`Exec`] borrows everything one burst needs, split so that the flow
//! entries (read-only) can be used while counters, meters and the buffer
//! pool are written: entries are never cloned on the fast path.
//!
//! Fast-path rules (each measured, see `super::worker`):
//! - A packet ([`Pkt`]) is processed in place, never moved; its key is
//!   parsed again lazily ([`Pkt::key`]): an action that changes the bytes
//!   only marks it stale, and whatever reads fields next (a set-field, a
//!   push_mpls, a TTL action, a lookup, a select group) parses once.
//! - An entry hit by slot whose compiled form exists
//!   ([`crate::tables::compiled::FastEntry`]) runs from that one cache line
//!   (`Exec::fast_entry`), through the same rewrite and error handling as
//!   the general path (`rewrite`, `Exec::after_action`); tracing always
//!   takes the general path.
//! - When nothing can read the packet after an output (the last action of
//!   the last apply-actions of an entry that ends the pipeline with an
//!   empty action set, or the action set's own output), the buffer moves
//!   to the output instead of being copied.
//! - The action set is only made when a write-actions writes one.
//!
//! The packet record is in `pkt`, groups in `groups`, where packets
//! leave (outputs, transmissions, packet-ins) in `egress`; this file holds
//! the walk through the tables, the actions, the action set and meters.

use super::action_set::ActionSet;
use super::buffers::BufferPool;
use super::config::DatapathConfig;
use super::config::OFPC_INVALID_TTL_TO_CONTROLLER;
use super::counters::{Counters, DropReason, HotCounters};
use super::local_meters::LocalMeters;
use super::output::{BurstOutput, TraceEvent};
use crate::model::flow_entry::FlowEntry;
use crate::model::ports::Ports;
use crate::tables::compiled::field_value;
use crate::tables::compiled::{FastEntry, FastOp, Rewrite};
use crate::tables::groups::Groups;
use crate::tables::meters::{MeterVerdict, Meters};
use crate::tables::TableSet;
use crate::Time;
use ofp::consts::port_no;
use ofp::packet_in::packet_in_reason;
use ofp::{Action, Instruction, Oxm, OxmField};
use packet::flow_key::field;
use packet::set_field::FieldValue;
use packet::{ttl, ActionError};

mod egress;
mod groups;
mod pkt;

pub(super) use pkt::{Origin, Pkt, NO_COOKIE};

/// Processing of this packet ended (dropped by a meter or a TTL check).
pub(super) struct Stopped;

/// Everything one burst needs, borrowed. See the module comment.
pub(super) struct Exec<'a> {
    pub tables: &'a TableSet,
    pub groups: &'a Groups,
    pub meters: &'a Meters,
    pub local_meters: &'a mut LocalMeters,
    /// Look up with the reference linear scan (see [`super::PipelineView`]).
    pub reference: bool,
    pub ports: &'a Ports,
    pub config: &'a DatapathConfig,
    pub counters: &'a mut Counters,
    pub hot: &'a mut HotCounters,
    pub buffers: &'a mut BufferPool,
    pub trace: Option<&'a mut Vec<TraceEvent>>,
    pub out: &'a mut BurstOutput,
    pub now: Time,
}

/// [`FastOp::VlanToMpls`] on frame `p` when it has one VLAN tag over
/// IPv4 or IPv6 with a whole header, or over an EtherType that is
/// neither IP nor MPLS: pop_vlan, push_mpls and set_field mpls_label
/// then leave the length alone and change only bytes 12..18 (the tag and
/// the inner EtherType become `ethertype` and the label stack entry:
/// the label, TC 0, bottom of stack, the IP TTL or 0 without IP), which
/// is all this writes. False, writing nothing, on any other frame (the
/// caller runs the three actions). Read from the bytes, not a parsed
/// key, so the express path needs none.
#[inline]
pub(super) fn vlan_to_mpls_in_place(p: &mut [u8], ethertype: u16, label: u32) -> bool {
    use packet::ethernet::ethertype::{is_mpls, is_vlan, IPV4, IPV6};
    let Some(&[a, b, _, _, c, d]) = p.get(12..18) else {
        return false;
    };
    let inner = u16::from_be_bytes([c, d]);
    if !is_vlan(u16::from_be_bytes([a, b])) || is_vlan(inner) || is_mpls(inner) {
        return false;
    }
    // The IP TTL as the parser finds it: only behind a whole header.
    let ttl = match inner {
        IPV4 => match p.get(18..38) {
            Some(h) => {
                let hl = usize::from(h[0] & 0xf) * 4;
                let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
                if h[0] >> 4 != 4 || hl < 20 || total < hl || p.len() < 18 + hl {
                    return false;
                }
                h[8]
            }
            None => return false,
        },
        IPV6 => match p.get(18..58) {
            Some(h) if h[0] >> 4 == 6 => h[7],
            _ => return false,
        },
        _ => 0,
    };
    let lse = ((label & 0xf_ffff) << 12) | 0x100 | u32::from(ttl);
    let Some(h) = p.get_mut(12..18) else {
        return false;
    };
    h[..2].copy_from_slice(&ethertype.to_be_bytes());
    h[2..].copy_from_slice(&lse.to_be_bytes());
    true
}

/// [`FastOp::MplsToVlan`] on frame `p` when it is untagged with a whole
/// MPLS label: pop_mpls, push_vlan and set_field vlan_vid then leave the
/// length alone and change only bytes 12..18 (the MPLS EtherType and
/// label become the tag, PCP 0, and `ethertype`), which is all this
/// writes. False, writing nothing, on any other frame.
#[inline]
pub(super) fn mpls_to_vlan_in_place(p: &mut [u8], ethertype: u16, tpid: u16, vid: u16) -> bool {
    let Some(h) = p.get_mut(12..18) else {
        return false;
    };
    if !packet::ethernet::ethertype::is_mpls(u16::from_be_bytes([h[0], h[1]])) {
        return false;
    }
    // push_vlan on an untagged frame: PCP, DEI and VID 0; then set_field
    // writes the VID bits.
    h[..2].copy_from_slice(&tpid.to_be_bytes());
    h[2..4].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    h[4..].copy_from_slice(&ethertype.to_be_bytes());
    true
}

/// Applies a header rewrite to the packet's bytes and keeps the key
/// right: updated in place where the packet crate knows how (pop_vlan of
/// a single tag, push_mpls, dec_nw_ttl), else marked stale.
#[inline]
fn rewrite(pkt: &mut Pkt, rw: Rewrite) -> Result<(), ActionError> {
    let r = rewrite_bytes(pkt, rw);
    if r.is_ok() {
        let kept = match rw {
            Rewrite::PopVlan => !pkt.stale && pkt.key.after_pop_vlan(),
            // `rewrite_bytes` refreshed the key before pushing.
            Rewrite::PushMpls(et) => !pkt.stale && pkt.key.after_push_mpls(et),
            // Done by `rewrite_bytes` (it knows the new TTL).
            Rewrite::DecNwTtl => !pkt.stale,
            _ => false,
        };
        pkt.stale |= !kept;
    }
    r
}

/// Sets a field of the packet (with its up-to-date key) and keeps the key
/// right as [`rewrite`] does.
#[inline]
fn set_field_value(pkt: &mut Pkt, fv: &FieldValue) -> Result<(), ActionError> {
    let (b, k) = pkt.buf_and_key();
    let r = packet::set_field::set_field_with_key(b.as_mut_slice(), k, fv);
    if r.is_ok() && !pkt.key.after_set_field(fv) {
        pkt.stale = true;
    }
    r
}

#[inline]
fn rewrite_bytes(pkt: &mut Pkt, rw: Rewrite) -> Result<(), ActionError> {
    match rw {
        Rewrite::CopyTtlOut => ttl::copy_ttl_out(pkt.buf.as_mut_slice()),
        Rewrite::CopyTtlIn => ttl::copy_ttl_in(pkt.buf.as_mut_slice()),
        Rewrite::SetMplsTtl(t) => {
            let (b, k) = pkt.buf_and_key();
            ttl::set_mpls_ttl_with_key(b.as_mut_slice(), k, t)
        }
        Rewrite::DecMplsTtl => {
            let (b, k) = pkt.buf_and_key();
            ttl::dec_mpls_ttl_with_key(b.as_mut_slice(), k).map(|_| ())
        }
        Rewrite::SetNwTtl(t) => {
            let (b, k) = pkt.buf_and_key();
            ttl::set_nw_ttl_with_key(b.as_mut_slice(), k, t)
        }
        Rewrite::DecNwTtl => {
            let (b, k) = pkt.buf_and_key();
            let t = ttl::dec_nw_ttl_with_key(b.as_mut_slice(), k)?;
            pkt.key.ip_ttl = t;
            Ok(())
        }
        Rewrite::PushVlan(et) => pkt.buf.push_vlan(et),
        Rewrite::PopVlan => pkt.buf.pop_vlan(),
        Rewrite::PushMpls(et) => {
            let (b, k) = pkt.buf_and_key();
            b.push_mpls_with_key(et, k)
        }
        Rewrite::PopMpls(et) => {
            let (b, k) = pkt.buf_and_key();
            b.pop_mpls_with_key(et, k)
        }
    }
}

impl<'a> Exec<'a> {
    /// Counts a drop for `reason` (and traces it).
    #[inline]
    pub(super) fn dropped(&mut self, reason: DropReason) {
        self.out.count_drop(reason);
        self.trace(|| TraceEvent::Drop {
            reason: reason.name(),
        });
    }

    fn trace(&mut self, ev: impl FnOnce() -> TraceEvent) {
        if let Some(t) = self.trace.as_deref_mut() {
            t.push(ev());
        }
    }

    /// Runs `pkt` through the tables from `table_id`, then its action set.
    pub fn pipeline(&mut self, mut pkt: Pkt, start: u8) {
        self.pipeline_first(&mut pkt, start, None);
    }

    /// [`Exec::pipeline`] with the lookup in table `start` already done
    /// (`first`: the slot of the entry `pkt.key` hits there, from a burst
    /// lookup or the flow cache, see [`crate::FlowTable::slot`]); later
    /// tables are looked up here.
    /// The packet is processed in place (its buffer is moved out when it
    /// leaves by a single port).
    pub fn pipeline_first(&mut self, pkt: &mut Pkt, start: u8, first: Option<Option<u32>>) {
        let _ = self.pipeline_stage(pkt, start, first, false);
    }

    /// [`Exec::pipeline_first`] that, with `defer`, stops at a goto while
    /// the packet has no action set and returns the table it goes to: the
    /// caller looks that table up for a whole burst of such packets (with
    /// prefetching) and calls again from there with the hit. `None`: the
    /// packet is done (sent, dropped or sent to the controller). Tracing
    /// never defers.
    pub fn pipeline_stage(
        &mut self,
        pkt: &mut Pkt,
        start: u8,
        first: Option<Option<u32>>,
        defer: bool,
    ) -> Option<u8> {
        pkt.packet_out = false;
        let tables = self.tables;
        let indexed = !self.reference;
        // Made on the first write-actions: most pipelines never write one.
        let mut set: Option<ActionSet> = None;
        let mut table_id = start;
        let mut first = first;
        let tracing = self.trace.is_some();
        let defer = defer && !tracing;
        loop {
            let table = tables.table(table_id);
            // The slot hit, when the lookup answers slots.
            let hit: Option<Option<u32>> = match first.take() {
                Some(s) => Some(s),
                None if indexed => Some(table.and_then(|t| t.lookup_slot(pkt.key()))),
                None => None,
            };
            if let (Some(Some(s)), Some(t), false) = (hit, table, tracing) {
                if let Some(fe) = t.fast(s).filter(|f| f.ops().is_some()) {
                    // A compiled entry: at most one apply-actions list and
                    // a goto.
                    let goto = fe.goto();
                    if self
                        .fast_entry(pkt, table_id, s, fe, &set, goto.is_none())
                        .is_err()
                    {
                        return None;
                    }
                    match goto {
                        Some(next) if next > table_id => {
                            if defer && set.is_none() {
                                return Some(next);
                            }
                            table_id = next;
                            continue;
                        }
                        _ => break,
                    }
                }
            }
            // The entry hit and, when known, its slot.
            let (entry, slot): (Option<&'a FlowEntry>, Option<u32>) = match hit {
                Some(s) => (s.and_then(|s| table.and_then(|t| t.slot(s))), s),
                None => (table.and_then(|t| t.lookup_linear(pkt.key())), None),
            };
            self.hot.table_lookup(table_id, entry.is_some());
            if self.trace.is_some() {
                let key = Box::new(*pkt.key());
                self.trace(|| TraceEvent::Lookup {
                    table_id,
                    entry: entry.map(|e| e.id),
                    key,
                });
            }
            let Some(e) = entry else {
                if table_id == 0 && self.config.miss_normal && !pkt.packet_out {
                    // A bridge without controllers in fail mode
                    // standalone: what no flow takes, NORMAL does.
                    self.normal(pkt);
                } else {
                    self.dropped(DropReason::NoMatch);
                }
                return None;
            };
            let len = pkt.buf.len() as u64;
            match slot {
                Some(s) => self
                    .hot
                    .flow_hit(self.counters, table_id, s, e.id, len, self.now),
                None => self.counters.flow_hit(e.id, len, self.now),
            }
            pkt.origin = Origin {
                table_id,
                cookie: e.cookie,
                miss: e.priority == 0 && e.key.fields().is_empty(),
            };
            // Borrowed: entries that reach here are decoded, except under
            // tracing or the reference lookup (packed entries otherwise run
            // compiled, above).
            let listed = e.instructions.list();
            let inst: &[Instruction] = &listed;
            for i in inst {
                if let Instruction::Meter { meter_id } = i {
                    if self.meter(pkt, *meter_id).is_err() {
                        return None;
                    }
                }
            }
            // When this entry ends the pipeline with an empty action set,
            // nothing reads the packet after its last apply-action: a
            // final output there moves the buffer instead of copying it.
            let clears = inst.iter().any(|i| matches!(i, Instruction::ClearActions));
            let ends_empty = (clears || set.as_ref().is_none_or(ActionSet::is_empty))
                && !inst.iter().any(|i| match i {
                    Instruction::GotoTable { table_id: next } => *next > table_id,
                    Instruction::WriteActions { actions } => !actions.is_empty(),
                    _ => false,
                });
            let last_apply = inst
                .iter()
                .rposition(|i| matches!(i, Instruction::ApplyActions { .. }));
            for (ii, i) in inst.iter().enumerate() {
                if let Instruction::ApplyActions { actions } = i {
                    let n = actions.len();
                    for (ai, a) in actions.iter().enumerate() {
                        let r = if ends_empty && last_apply == Some(ii) && ai + 1 == n {
                            self.last_action(pkt, a)
                        } else {
                            self.action(pkt, a, 0)
                        };
                        if r.is_err() {
                            return None;
                        }
                    }
                }
            }
            if clears {
                if let Some(set) = set.as_mut() {
                    set.clear();
                }
                self.trace(|| TraceEvent::ClearActions);
            }
            for i in inst {
                if let Instruction::WriteActions { actions } = i {
                    set.get_or_insert_with(ActionSet::default).write(actions);
                    self.trace(|| TraceEvent::WriteActions {
                        actions: actions.clone(),
                    });
                }
            }
            for i in inst {
                if let Instruction::WriteMetadata {
                    metadata,
                    metadata_mask,
                } = i
                {
                    pkt.metadata = (pkt.metadata & !metadata_mask) | (metadata & metadata_mask);
                    // (A stale key takes the metadata when parsed again.)
                    pkt.key.metadata = pkt.metadata;
                    let m = pkt.metadata;
                    self.trace(|| TraceEvent::WriteMetadata { metadata: m });
                }
            }
            let goto = inst.iter().find_map(|i| match i {
                Instruction::GotoTable { table_id } => Some(*table_id),
                _ => None,
            });
            match goto {
                // Validation only installs forward gotos; a backward one
                // would loop, so it ends the pipeline.
                Some(next) if next > table_id => {
                    if defer && set.is_none() {
                        return Some(next);
                    }
                    table_id = next;
                }
                _ => break,
            }
        }
        match &set {
            Some(set) => self.action_set(pkt, set),
            None => self.trace(|| TraceEvent::ActionSet {
                actions: Vec::new(),
            }),
        }
        None
    }

    /// Runs `run` (one packet's whole trip) and counts a NoOutput drop
    /// when it neither emitted nor dropped anything, so traffic is never
    /// lost silently.
    #[inline]
    pub(super) fn or_no_output(&mut self, run: impl FnOnce(&mut Self)) {
        let (tx, pin, drops) = (
            self.out.tx.len(),
            self.out.packet_ins.len(),
            self.out.dropped,
        );
        run(self);
        if self.out.tx.len() == tx && self.out.packet_ins.len() == pin && self.out.dropped == drops
        {
            self.out.count_drop(DropReason::NoOutput);
        }
    }

    /// A table-0 hit on compiled entry `fe` (slot `slot`) that ends the
    /// pipeline ([`FastEntry::is_final`]), for a packet fresh from its
    /// port: what [`Exec::pipeline_stage`] does for it, without the
    /// general path's set-up (no action set can exist yet, nothing is
    /// deferred, no tracing).
    #[inline]
    pub(super) fn final_entry(&mut self, pkt: &mut Pkt, slot: u32, fe: &FastEntry) {
        pkt.packet_out = false;
        let _ = self.fast_entry(pkt, 0, slot, fe, &None, true);
    }

    /// Runs compiled entry `fe` (slot `slot` of table `table_id`) on the
    /// packet: the counting and the apply-actions of the general path.
    /// `set` is the action set so far; `last`: the pipeline ends after
    /// this entry (it has no goto). An error: an action stopped the
    /// packet.
    fn fast_entry(
        &mut self,
        pkt: &mut Pkt,
        table_id: u8,
        slot: u32,
        fe: &FastEntry,
        set: &Option<ActionSet>,
        last: bool,
    ) -> Result<(), Stopped> {
        self.hot.table_lookup(table_id, true);
        let len = pkt.buf.len() as u64;
        self.hot
            .flow_hit(self.counters, table_id, slot, fe.id, len, self.now);
        pkt.origin = Origin {
            table_id,
            cookie: fe.cookie,
            miss: fe.miss,
        };
        let ends_empty = last && set.as_ref().is_none_or(ActionSet::is_empty);
        let ops = fe.ops().unwrap_or(&[]);
        let n = ops.len();
        for (i, op) in ops.iter().enumerate() {
            let r = match *op {
                FastOp::Output { port, .. }
                    if ends_empty
                        && i + 1 == n
                        && port <= port_no::MAX
                        && port != pkt.in_port
                        && self.ports.can_send(port) =>
                {
                    // As in `last_action`: nothing reads the packet after.
                    self.tx_owned(pkt, port);
                    Ok(())
                }
                op => self.fast_op(pkt, op),
            };
            r?;
        }
        Ok(())
    }

    /// The last action a packet will see (see `ends_empty` in
    /// [`Exec::pipeline_first`]): an output to one port that can send
    /// moves the buffer out of `pkt`; anything else is [`Exec::action`].
    fn last_action(&mut self, pkt: &mut Pkt, a: &Action) -> Result<(), Stopped> {
        match a {
            Action::Output { port, .. }
                if *port <= port_no::MAX && *port != pkt.in_port && self.ports.can_send(*port) =>
            {
                self.trace(|| TraceEvent::Action {
                    action: a.clone(),
                    error: None,
                });
                self.tx_owned(pkt, *port);
                Ok(())
            }
            _ => self.action(pkt, a, 0),
        }
    }

    /// Executes an action set at the end of the pipeline.
    fn action_set(&mut self, pkt: &mut Pkt, set: &ActionSet) {
        self.trace(|| TraceEvent::ActionSet {
            actions: set.iter().cloned().collect(),
        });
        let mut output = None;
        for a in set.iter() {
            match a {
                Action::Output { port, max_len } => output = Some((*port, *max_len)),
                Action::Group { .. } => {}
                _ => {
                    if self.action(pkt, a, 0).is_err() {
                        return;
                    }
                }
            }
        }
        if let Some(g) = set.group() {
            self.group(pkt.take(), g, 0);
        } else if let Some((port, max_len)) = output {
            let single = port <= port_no::MAX && port != pkt.in_port;
            if single && self.ports.can_send(port) {
                // The common case: the packet leaves by one port and is
                // not needed any more, so it moves instead of being copied.
                self.tx_owned(pkt, port);
            } else {
                self.output(pkt, port, max_len);
            }
        }
    }

    /// Runs one action on `pkt`. `depth` is the group nesting depth.
    pub fn action(&mut self, pkt: &mut Pkt, a: &Action, depth: u8) -> Result<(), Stopped> {
        let r: Result<(), ActionError> = match a {
            Action::Output { port, max_len } => {
                self.trace(|| TraceEvent::Action {
                    action: a.clone(),
                    error: None,
                });
                self.output(pkt, *port, *max_len);
                return Ok(());
            }
            Action::Group { group_id } => {
                self.trace(|| TraceEvent::Action {
                    action: a.clone(),
                    error: None,
                });
                self.group(pkt.clone(), *group_id, depth);
                return Ok(());
            }
            Action::SetQueue { queue_id } => {
                pkt.queue_id = *queue_id;
                self.trace(|| TraceEvent::Action {
                    action: a.clone(),
                    error: None,
                });
                return Ok(());
            }
            Action::Experimenter { .. } => return Ok(()),
            Action::SetField { field } => self.set_field(pkt, field),
            Action::PushPbb { ethertype } => {
                let r = pkt.buf.push_pbb(*ethertype);
                pkt.stale |= r.is_ok();
                r
            }
            Action::PopPbb => {
                let r = pkt.buf.pop_pbb();
                pkt.stale |= r.is_ok();
                r
            }
            Action::CopyTtlOut
            | Action::CopyTtlIn
            | Action::SetMplsTtl { .. }
            | Action::DecMplsTtl
            | Action::SetNwTtl { .. }
            | Action::DecNwTtl
            | Action::PushVlan { .. }
            | Action::PopVlan
            | Action::PushMpls { .. }
            | Action::PopMpls { .. } => match Rewrite::of(a) {
                Some(rw) => rewrite(pkt, rw),
                None => Err(ActionError::BadArgument),
            },
        };
        let err = r.err();
        self.trace(|| TraceEvent::Action {
            action: a.clone(),
            error: err,
        });
        self.after_action(pkt, err)
    }

    /// What follows an action that changed (or failed to change) the
    /// packet's bytes (the action itself kept the key right): an invalid
    /// TTL stops the packet; other failures are counted and the packet
    /// goes on.
    #[inline]
    fn after_action(&mut self, pkt: &mut Pkt, err: Option<ActionError>) -> Result<(), Stopped> {
        match err {
            None => Ok(()),
            Some(ActionError::InvalidTtl) => {
                self.invalid_ttl(pkt);
                Err(Stopped)
            }
            Some(_) => {
                // Not a drop of the packet: the trace shows the action's error.
                self.out.count_drop(DropReason::ActionFailed);
                Ok(())
            }
        }
    }

    /// Runs one compiled action (see [`super::fast`]): the same as
    /// [`Exec::action`] on the action it was compiled from, tracing aside
    /// (fast entries are not used while tracing).
    #[inline]
    pub fn fast_op(&mut self, pkt: &mut Pkt, op: FastOp) -> Result<(), Stopped> {
        let r = match op {
            FastOp::Output { port, max_len } => {
                self.output(pkt, port, max_len);
                return Ok(());
            }
            FastOp::SetQueue(q) => {
                pkt.queue_id = q;
                return Ok(());
            }
            FastOp::SetField { field, hi, lo } => {
                let v = (u128::from(hi) << 32) | u128::from(lo);
                match OxmField::from_u8(field).and_then(|f| field_value(f, v)) {
                    Some(fv) => set_field_value(pkt, &fv),
                    None => Err(ActionError::BadArgument),
                }
            }
            FastOp::Rewrite(rw) => rewrite(pkt, rw),
            FastOp::VlanToMpls { ethertype, label } => {
                return self.vlan_to_mpls(pkt, ethertype, label);
            }
            FastOp::MplsToVlan {
                ethertype,
                tpid,
                vid,
            } => return self.mpls_to_vlan(pkt, ethertype, tpid, vid),
        };
        self.after_action(pkt, r.err())
    }

    /// [`FastOp::MplsToVlan`]: the result of pop_mpls, push_vlan and
    /// set_field vlan_vid written directly when the frame is untagged and
    /// has an MPLS label ([`mpls_to_vlan_in_place`]), else the three steps
    /// one by one.
    fn mpls_to_vlan(
        &mut self,
        pkt: &mut Pkt,
        ethertype: u16,
        tpid: u16,
        vid: u16,
    ) -> Result<(), Stopped> {
        if mpls_to_vlan_in_place(pkt.buf.as_mut_slice(), ethertype, tpid, vid) {
            pkt.stale = true;
            return Ok(());
        }
        self.fast_op(pkt, FastOp::Rewrite(Rewrite::PopMpls(ethertype)))?;
        self.fast_op(pkt, FastOp::Rewrite(Rewrite::PushVlan(tpid)))?;
        self.fast_op(
            pkt,
            FastOp::SetField {
                field: OxmField::VlanVid as u8,
                hi: 0,
                lo: u32::from(vid),
            },
        )
    }

    /// [`FastOp::VlanToMpls`]: the result of pop_vlan, push_mpls and
    /// set_field mpls_label written directly when the frame has one VLAN
    /// tag over IP or a non-IP, non-MPLS EtherType
    /// ([`vlan_to_mpls_in_place`]), else the three steps one by one.
    fn vlan_to_mpls(&mut self, pkt: &mut Pkt, ethertype: u16, label: u32) -> Result<(), Stopped> {
        if vlan_to_mpls_in_place(pkt.buf.as_mut_slice(), ethertype, label) {
            pkt.stale = true;
            return Ok(());
        }
        self.fast_op(pkt, FastOp::Rewrite(Rewrite::PopVlan))?;
        self.fast_op(pkt, FastOp::Rewrite(Rewrite::PushMpls(ethertype)))?;
        self.fast_op(
            pkt,
            FastOp::SetField {
                field: OxmField::MplsLabel as u8,
                hi: 0,
                lo: label,
            },
        )
    }

    fn set_field(&mut self, pkt: &mut Pkt, oxm: &Oxm) -> Result<(), ActionError> {
        let Oxm::Basic { field, value, .. } = oxm else {
            return Err(ActionError::BadArgument);
        };
        if *field == OxmField::TunnelId {
            pkt.tunnel_id = value.to_u128() as u64;
            // The key takes the new tunnel_id when parsed again.
            pkt.stale = true;
            return Ok(());
        }
        let Some(fv) = field_value(*field, value.to_u128()) else {
            return Err(ActionError::BadArgument);
        };
        set_field_value(pkt, &fv)
    }

    fn invalid_ttl(&mut self, pkt: &Pkt) {
        self.dropped(DropReason::InvalidTtl);
        if self.config.flags & OFPC_INVALID_TTL_TO_CONTROLLER != 0 {
            self.packet_in(
                pkt,
                packet_in_reason::INVALID_TTL,
                self.config.miss_send_len,
            );
        }
    }

    /// Asks meter `id` about the packet; `Err` when a band drops it.
    fn meter(&mut self, pkt: &mut Pkt, id: u32) -> Result<(), Stopped> {
        let len = u32::try_from(pkt.buf.len()).unwrap_or(u32::MAX);
        let Some(verdict) = self.local_meters.apply(self.meters, id, self.now, len) else {
            // Deleted meters remove their flows; nothing to enforce.
            return Ok(());
        };
        let band = match verdict {
            MeterVerdict::Pass => None,
            MeterVerdict::Drop { band } | MeterVerdict::DscpRemark { band, .. } => Some(band),
        };
        self.counters.meter_hit(id, band, u64::from(len));
        self.trace(|| TraceEvent::Meter {
            meter_id: id,
            verdict,
        });
        match verdict {
            MeterVerdict::Pass => Ok(()),
            MeterVerdict::Drop { .. } => {
                self.dropped(DropReason::MeterDrop);
                Err(Stopped)
            }
            MeterVerdict::DscpRemark { prec_level, .. } => {
                let (b, k) = pkt.buf_and_key();
                if k.has(field::IP_DSCP) {
                    let dscp = remark_dscp(k.ip_dscp, prec_level);
                    let fv = FieldValue::IpDscp(dscp);
                    if packet::set_field::set_field_with_key(b.as_mut_slice(), k, &fv).is_ok() {
                        pkt.stale = true;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Meter DSCP remark (spec §5.7: "increase the drop precedence of the
/// DSCP field"): the drop-precedence bits of an AF code point (bits 1-2
/// of the DSCP) grow by `prec_level`, capped at 3 (high drop precedence).
pub fn remark_dscp(dscp: u8, prec_level: u8) -> u8 {
    let dp = (dscp >> 1) & 0b11;
    let new = dp.saturating_add(prec_level).min(3);
    (dscp & !0b110 & 0x3f) | (new << 1)
}
