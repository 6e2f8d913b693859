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

use super::action_set::ActionSet;
use super::buffers::BufferPool;
use super::config::DatapathConfig;
use super::config::OFPC_INVALID_TTL_TO_CONTROLLER;
use super::counters::{Counters, DropReason, HotCounters};
use super::local_meters::LocalMeters;
use super::output::{BurstOutput, PacketInEvent, TraceEvent, TxPacket};
use crate::model::flow_entry::FlowEntry;
use crate::model::ports::Ports;
use crate::tables::compiled::field_value;
use crate::tables::compiled::{FastEntry, FastOp, Rewrite};
use crate::tables::groups::Groups;
use crate::tables::meters::{MeterVerdict, Meters};
use crate::tables::TableSet;
use crate::Time;
use ofp::action::OFPCML_NO_BUFFER;
use ofp::consts::{group_no, port_no, OFP_NO_BUFFER};
use ofp::packet_in::packet_in_reason;
use ofp::{Action, Bucket, GroupType, Instruction, Match, Oxm, OxmField, OxmValue};
use packet::buffer::PacketBuf;
use packet::flow_key::{field, FlowKey};
use packet::set_field::FieldValue;
use packet::{ttl, ActionError};

/// Where a packet's current processing came from, for packet-ins.
#[derive(Clone, Copy, Debug)]
pub(super) struct Origin {
    pub table_id: u8,
    pub cookie: u64,
    /// The entry is a table-miss entry (priority 0, empty match).
    pub miss: bool,
}

/// Cookie reported by packet-ins not caused by a flow entry (packet-out).
pub(super) const NO_COOKIE: u64 = u64::MAX;

/// One packet on its way through the pipeline.
#[derive(Clone, Debug)]
pub(super) struct Pkt {
    pub buf: PacketBuf,
    /// The parsed fields; out of date while `stale` (read them with
    /// [`Pkt::key`]).
    key: FlowKey,
    /// An action changed the bytes since `key` was parsed.
    stale: bool,
    pub in_port: u32,
    pub in_phy_port: u32,
    pub metadata: u64,
    pub tunnel_id: u64,
    pub queue_id: u32,
    pub origin: Origin,
    /// Processing actions of a PACKET_OUT (OFPP_TABLE allowed).
    pub packet_out: bool,
}

impl Pkt {
    pub fn new(buf: PacketBuf, in_port: u32) -> Pkt {
        let mut p = Pkt {
            buf,
            key: FlowKey::default(),
            stale: false,
            in_port,
            in_phy_port: in_port,
            metadata: 0,
            tunnel_id: 0,
            queue_id: 0,
            origin: Origin {
                table_id: 0,
                cookie: NO_COOKIE,
                miss: false,
            },
            packet_out: false,
        };
        p.reparse();
        p
    }

    /// Makes this record describe a new packet `buf` received on
    /// `in_port` (as [`Pkt::new`], reusing the record's storage).
    pub fn reset(&mut self, buf: PacketBuf, in_port: u32) {
        self.buf = buf;
        self.in_port = in_port;
        self.in_phy_port = in_port;
        self.metadata = 0;
        self.tunnel_id = 0;
        self.queue_id = 0;
        self.origin = Origin {
            table_id: 0,
            cookie: NO_COOKIE,
            miss: false,
        };
        self.packet_out = false;
        self.reparse();
    }

    /// Sets the packet's `tunnel_id` as it was received (a tunnel port's
    /// key), in the parsed key too.
    pub fn set_tunnel_id(&mut self, tunnel_id: u64) {
        self.tunnel_id = tunnel_id;
        self.key.tunnel_id = tunnel_id;
    }

    /// Drops the packet's buffer (keeping the record).
    pub fn release(&mut self) {
        self.buf = PacketBuf::from_vec(Vec::new());
    }

    /// Moves the packet out, leaving one with an empty buffer.
    pub fn take(&mut self) -> Pkt {
        let empty = Pkt {
            buf: PacketBuf::from_vec(Vec::new()),
            key: FlowKey::default(),
            stale: false,
            in_port: self.in_port,
            in_phy_port: self.in_phy_port,
            metadata: 0,
            tunnel_id: 0,
            queue_id: 0,
            origin: self.origin,
            packet_out: false,
        };
        std::mem::replace(self, empty)
    }

    /// Parses the headers again (after an action changed them) and sets
    /// the pipeline fields.
    pub fn reparse(&mut self) {
        self.key.parse_into(self.buf.as_slice());
        self.key.set_metadata_fields(
            self.in_port,
            self.in_phy_port,
            self.metadata,
            self.tunnel_id,
        );
        self.stale = false;
    }

    /// The packet's fields as they are now (parsed again if an action
    /// changed the bytes since the last parse: parsing is lazy, so a run
    /// of header rewrites costs one parse, when something reads the key).
    #[inline]
    pub fn key(&mut self) -> &FlowKey {
        if self.stale {
            self.reparse();
        }
        &self.key
    }

    /// The buffer and the up-to-date key, borrowed together.
    #[inline]
    pub fn buf_and_key(&mut self) -> (&mut PacketBuf, &FlowKey) {
        if self.stale {
            self.reparse();
        }
        (&mut self.buf, &self.key)
    }

    /// The key of a packet no action has changed since it was made (what
    /// the burst lookup reads, right after parsing).
    pub fn parsed_key(&self) -> &FlowKey {
        &self.key
    }
}

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

/// A hash of the flow's L2, ARP and 5-tuple fields: the same for every
/// packet of one flow, so a select group keeps a flow on one bucket (ARP
/// addresses count, so ARP conversations spread over the buckets too).
pub(super) fn flow_hash(k: &FlowKey) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    };
    eat(&k.eth_src);
    eat(&k.eth_dst);
    eat(&k.eth_type.to_be_bytes());
    eat(&k.vlan_vid.to_be_bytes());
    eat(&k.ipv4_src.to_be_bytes());
    eat(&k.ipv4_dst.to_be_bytes());
    eat(&k.ipv6_src.to_be_bytes());
    eat(&k.ipv6_dst.to_be_bytes());
    eat(&[k.ip_proto]);
    eat(&k.tp_src.to_be_bytes());
    eat(&k.tp_dst.to_be_bytes());
    eat(&k.mpls_label.to_be_bytes());
    eat(&k.arp_spa.to_be_bytes());
    eat(&k.arp_tpa.to_be_bytes());
    // FNV's low bits are only the parity of the input bytes (the prime is
    // odd); the bucket choice takes a remainder, so mix the high bits down.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
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
            let inst = &e.instructions;
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

    /// Runs group `id` on `pkt`.
    pub fn group(&mut self, mut pkt: Pkt, id: u32, depth: u8) {
        let groups = self.groups;
        let g = match groups.get(id) {
            Some(g) if depth < self.config.max_group_depth => g,
            _ => {
                self.dropped(DropReason::GroupDrop);
                return;
            }
        };
        let len = pkt.buf.len() as u64;
        self.counters.group_hit(id, len);
        match g.group_type {
            GroupType::All => {
                for (i, b) in g.buckets.iter().enumerate() {
                    self.counters.bucket_hit(id, i, len);
                    self.trace(|| TraceEvent::Group {
                        group_id: id,
                        bucket: Some(i),
                    });
                    self.bucket(pkt.clone(), b, depth);
                }
            }
            GroupType::Indirect | GroupType::Select | GroupType::FastFailover => {
                let chosen = match g.group_type {
                    GroupType::Indirect => (!g.buckets.is_empty()).then_some(0),
                    GroupType::Select => {
                        let k = *pkt.key();
                        self.select_bucket(&g.buckets, &k, depth)
                    }
                    _ => g.buckets.iter().position(|b| self.bucket_live(b, depth)),
                };
                self.trace(|| TraceEvent::Group {
                    group_id: id,
                    bucket: chosen,
                });
                match chosen.and_then(|i| g.buckets.get(i).map(|b| (i, b))) {
                    Some((i, b)) => {
                        self.counters.bucket_hit(id, i, len);
                        self.bucket(pkt, b, depth);
                    }
                    None => self.dropped(DropReason::GroupDrop),
                }
            }
        }
    }

    fn bucket(&mut self, mut pkt: Pkt, b: &Bucket, depth: u8) {
        for a in &b.actions {
            let r = match a {
                Action::Group { group_id } => {
                    self.trace(|| TraceEvent::Action {
                        action: a.clone(),
                        error: None,
                    });
                    self.group(pkt.clone(), *group_id, depth.saturating_add(1));
                    Ok(())
                }
                _ => self.action(&mut pkt, a, depth),
            };
            if r.is_err() {
                return;
            }
        }
    }

    /// A live bucket chosen by weight from the flow's hash.
    fn select_bucket(&self, buckets: &[Bucket], key: &FlowKey, depth: u8) -> Option<usize> {
        let live = |b: &Bucket| b.weight > 0 && self.bucket_live(b, depth);
        let total: u64 = buckets
            .iter()
            .filter(|b| live(b))
            .map(|b| u64::from(b.weight))
            .sum();
        if total == 0 {
            return None;
        }
        let mut pick = flow_hash(key) % total;
        for (i, b) in buckets.iter().enumerate() {
            if !live(b) {
                continue;
            }
            let w = u64::from(b.weight);
            if pick < w {
                return Some(i);
            }
            pick -= w;
        }
        None
    }

    /// Bucket liveness (spec §6.5): its watched port is live and its
    /// watched group has a live bucket. Unwatched counts as live.
    pub fn bucket_live(&self, b: &Bucket, depth: u8) -> bool {
        let port_ok = b.watch_port == port_no::ANY || self.ports.is_live(b.watch_port);
        port_ok && (b.watch_group == group_no::ANY || self.group_live(b.watch_group, depth + 1))
    }

    fn group_live(&self, id: u32, depth: u8) -> bool {
        depth < self.config.max_group_depth
            && self
                .groups
                .get(id)
                .is_some_and(|g| g.buckets.iter().any(|b| self.bucket_live(b, depth)))
    }

    /// The output action.
    pub fn output(&mut self, pkt: &Pkt, port: u32, max_len: u16) {
        match port {
            p if p <= port_no::MAX => {
                if p == pkt.in_port {
                    // Spec §5.12: output to the ingress port only via IN_PORT.
                    self.trace(|| TraceEvent::Skipped { port: p });
                } else {
                    self.send(pkt, p);
                }
            }
            port_no::IN_PORT => match pkt.in_port {
                p if p <= port_no::MAX => self.send(pkt, p),
                port_no::LOCAL => self.tx(pkt, port_no::LOCAL),
                _ => self.dropped(DropReason::UnsupportedOutput),
            },
            port_no::ALL | port_no::FLOOD => {
                let ports = self.ports;
                for p in ports.numbers() {
                    let ok = if port == port_no::FLOOD {
                        ports.floods_to(p)
                    } else {
                        ports.can_send(p)
                    };
                    if p != pkt.in_port && ok {
                        self.tx(pkt, p);
                    }
                }
            }
            port_no::CONTROLLER => {
                let reason = if pkt.origin.miss {
                    packet_in_reason::NO_MATCH
                } else {
                    packet_in_reason::ACTION
                };
                self.packet_in(pkt, reason, max_len);
            }
            // Spec §5.12 again: the local port is an ingress port too.
            port_no::LOCAL if pkt.in_port == port_no::LOCAL => {
                self.trace(|| TraceEvent::Skipped {
                    port: port_no::LOCAL,
                });
            }
            port_no::LOCAL => self.tx(pkt, port_no::LOCAL),
            port_no::NORMAL => {
                self.normal(pkt);
            }
            port_no::TABLE if pkt.packet_out => self.pipeline(pkt.clone(), 0),
            _ => {
                self.dropped(DropReason::UnsupportedOutput);
            }
        }
    }

    fn send(&mut self, pkt: &Pkt, p: u32) {
        if self.ports.can_send(p) {
            self.tx(pkt, p);
        } else {
            self.hot.port(self.counters, p).tx_dropped += 1;
            self.dropped(DropReason::PortDown);
        }
    }

    fn tx(&mut self, pkt: &Pkt, p: u32) {
        self.emit_frame(pkt.buf.clone(), p, pkt.queue_id, pkt.tunnel_id);
    }

    /// As `tx`, moving the buffer out of `pkt` (left empty).
    fn tx_owned(&mut self, pkt: &mut Pkt, p: u32) {
        let packet = std::mem::replace(&mut pkt.buf, PacketBuf::from_vec(Vec::new()));
        self.emit_frame(packet, p, pkt.queue_id, pkt.tunnel_id);
    }

    /// Sends `packet` (whose `tunnel_id` is `tunnel_id`) on queue
    /// `queue_id` of port `p` (a standard port that can send): moved to
    /// the output, counted, traced.
    #[inline]
    pub(super) fn emit_frame(&mut self, packet: PacketBuf, p: u32, queue_id: u32, tunnel_id: u64) {
        let len = self.queue_frame(packet, p, queue_id, tunnel_id);
        self.count_tx(p, queue_id, 1, len);
        self.trace(|| TraceEvent::Output { port: p, queue_id });
    }

    /// Pads `packet` to its floor and moves it to the output for queue
    /// `queue_id` of port `p`, uncounted; returns the length it leaves
    /// with (see `packet::buffer`).
    #[inline]
    pub(super) fn queue_frame(
        &mut self,
        mut packet: PacketBuf,
        p: u32,
        queue_id: u32,
        tunnel_id: u64,
    ) -> u64 {
        packet.pad_to_floor();
        let len = packet.len() as u64;
        if tunnel_id != 0 {
            self.out.tx_tunnel_ids.push((self.out.tx.len(), tunnel_id));
        }
        self.out.tx.push(TxPacket {
            port: p,
            queue_id,
            packet,
        });
        len
    }

    /// Counts `packets` frames of `bytes` bytes in all (as they leave,
    /// padded) sent on queue `queue_id` of port `p`.
    pub(super) fn count_tx(&mut self, p: u32, queue_id: u32, packets: u64, bytes: u64) {
        let c = self.hot.port(self.counters, p);
        c.tx_packets += packets;
        c.tx_bytes += bytes;
        self.hot
            .queue_tx(self.counters, p, queue_id, packets, bytes);
    }

    /// Sends the packet to the controller: buffers it unless `max_len` is
    /// `OFPCML_NO_BUFFER` or the pool is disabled, and truncates the data
    /// to `max_len` when buffered.
    pub fn packet_in(&mut self, pkt: &Pkt, reason: u8, max_len: u16) {
        if !self.ports.packet_in_allowed(pkt.in_port) {
            self.dropped(DropReason::PacketInBlocked);
            return;
        }
        // The frame as it would leave a port: padded with zeros to its
        // floor (see `packet::buffer`).
        let total = pkt.buf.padded_len();
        let (buffer_id, keep) = if max_len == OFPCML_NO_BUFFER {
            (OFP_NO_BUFFER, total)
        } else {
            let mut frame = pkt.buf.clone();
            frame.pad_to_floor();
            match self.buffers.store(pkt.in_port, frame) {
                Some(id) => (id, total.min(usize::from(max_len))),
                None => (OFP_NO_BUFFER, total),
            }
        };
        let bytes = pkt.buf.as_slice();
        let mut data = bytes
            .get(..keep.min(bytes.len()))
            .unwrap_or_default()
            .to_vec();
        data.resize(keep, 0);
        let mut fields = vec![Oxm::basic(OxmField::InPort, OxmValue::U32(pkt.in_port))];
        if pkt.in_phy_port != pkt.in_port {
            fields.push(Oxm::basic(
                OxmField::InPhyPort,
                OxmValue::U32(pkt.in_phy_port),
            ));
        }
        if pkt.metadata != 0 {
            fields.push(Oxm::basic(OxmField::Metadata, OxmValue::U64(pkt.metadata)));
        }
        if pkt.tunnel_id != 0 {
            fields.push(Oxm::basic(OxmField::TunnelId, OxmValue::U64(pkt.tunnel_id)));
        }
        self.trace(|| TraceEvent::PacketIn { reason });
        self.out.packet_ins.push(PacketInEvent {
            in_port: pkt.in_port,
            message: ofp::PacketIn {
                buffer_id,
                total_len: u16::try_from(total).unwrap_or(u16::MAX),
                reason,
                table_id: pkt.origin.table_id,
                cookie: pkt.origin.cookie,
                match_: Match { fields },
                data,
            },
        });
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

#[cfg(test)]
mod flow_hash_tests {
    use super::flow_hash;
    use packet::flow_key::FlowKey;

    fn arp(spa: [u8; 4], tpa: [u8; 4]) -> FlowKey {
        let mut f = vec![0xff; 6];
        f.extend([0x02, 0, 0, 0, 0, 1, 0x08, 0x06]);
        f.extend([0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend([0x02, 0, 0, 0, 0, 1]);
        f.extend(spa);
        f.extend([0; 6]);
        f.extend(tpa);
        FlowKey::parse(&f)
    }

    #[test]
    fn arp_conversations_spread_over_select_buckets() {
        // The os-ken select-group tests send ARP with random addresses and
        // expect traffic on every bucket.
        let mut buckets = [0u32; 2];
        for i in 0..200u8 {
            let h = flow_hash(&arp([10, 0, i, 1], [10, 1, 0, i]));
            buckets[(h % 2) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| n > 50), "{buckets:?}");
        // And one conversation always hashes the same.
        assert_eq!(
            flow_hash(&arp([10, 0, 0, 1], [10, 0, 0, 2])),
            flow_hash(&arp([10, 0, 0, 1], [10, 0, 0, 2]))
        );
    }
}
