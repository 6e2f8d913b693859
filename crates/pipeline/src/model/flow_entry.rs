//! One flow entry (spec 1.3.5 §5.2): its match, priority, instructions,
//! cookie, timeouts and flags — immutable once installed, so every copy of
//! a table shares it — and its counters ([`EntryCounter`], kept apart by
//! the control side), and the FLOW_REMOVED event it produces when it
//! leaves its table.

use crate::model::instructions::{EntryInstructions, Item};
use crate::model::match_key::MatchKey;
use crate::{Time, COUNTER_UNAVAILABLE};
use ofp::flow_mod::flow_mod_flags;
use ofp::{Action, Instruction, Match};
use std::borrow::Cow;

/// A flow entry's identity: unique among all entries ever installed in one
/// [`crate::Tables`], never reused, kept when MODIFY or a replacing ADD
/// changes the entry. A classifier or cache can index entries by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub u64);

/// Why an entry left its table (`OFPRR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemovalReason {
    /// `OFPRR_IDLE_TIMEOUT`.
    IdleTimeout,
    /// `OFPRR_HARD_TIMEOUT`.
    HardTimeout,
    /// `OFPRR_DELETE`: a DELETE or DELETE_STRICT flow-mod.
    Delete,
    /// `OFPRR_GROUP_DELETE`: a group it forwards to was deleted.
    GroupDelete,
    /// A meter it uses was deleted. OpenFlow 1.3 has no reason code for
    /// this (1.4 added `OFPRR_METER_DELETE` = 4); on a 1.3 channel it is
    /// sent as `OFPRR_DELETE`, see [`RemovalReason::wire_v13`].
    MeterDelete,
}

impl RemovalReason {
    /// The `reason` byte of an OpenFlow 1.3 FLOW_REMOVED message.
    pub fn wire_v13(self) -> u8 {
        use ofp::flow_removed::flow_removed_reason as r;
        match self {
            RemovalReason::IdleTimeout => r::IDLE_TIMEOUT,
            RemovalReason::HardTimeout => r::HARD_TIMEOUT,
            RemovalReason::Delete | RemovalReason::MeterDelete => r::DELETE,
            RemovalReason::GroupDelete => r::GROUP_DELETE,
        }
    }
}

/// The content of a FLOW_REMOVED message (spec 1.3.5 §7.4.2), produced
/// only for entries installed with `OFPFF_SEND_FLOW_REM`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRemoved {
    /// The entry that left.
    pub id: FlowId,
    /// Why it left (finer than the wire's `OFPRR_*`: a meter delete is
    /// sent as a delete).
    pub reason: RemovalReason,
    /// The message body: the match exactly as the controller sent it,
    /// counts all-ones where the entry had `OFPFF_NO_PKT_COUNTS` /
    /// `OFPFF_NO_BYT_COUNTS`. Its `reason` is not read:
    /// [`FlowRemoved::to_message`] takes it from `reason`.
    pub body: ofp::FlowRemoved,
}

impl FlowRemoved {
    /// Adds hits counted for the entry after the report was made (by
    /// workers that had not handed them over yet); a count the entry
    /// does not keep (all-ones) stays all-ones.
    pub fn add_late_hits(&mut self, packets: u64, bytes: u64) {
        let b = &mut self.body;
        if b.packet_count != u64::MAX {
            b.packet_count = b.packet_count.wrapping_add(packets);
        }
        if b.byte_count != u64::MAX {
            b.byte_count = b.byte_count.wrapping_add(bytes);
        }
    }

    /// The OpenFlow 1.3 FLOW_REMOVED body for this event (reason as
    /// [`RemovalReason::wire_v13`]).
    pub fn to_message(&self) -> ofp::FlowRemoved {
        ofp::FlowRemoved {
            reason: self.reason.wire_v13(),
            ..self.body.clone()
        }
    }
}

/// One entry of a flow table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowEntry {
    /// Stable identity.
    pub id: FlowId,
    /// The table holding it.
    pub table_id: u8,
    pub priority: u16,
    /// The canonical form of the match, for comparisons and indexing; it
    /// also gives back the match as sent when `sent` is `None`.
    pub key: MatchKey,
    /// The match as sent, kept only when `key` does not give it back
    /// (TLVs out of field order, an explicit all-ones mask, a mask bit
    /// above the field's width): see [`FlowEntry::match_`]. Controllers send
    /// their fields in order, and a second copy of every match was about
    /// 180 bytes an entry at a million entries.
    pub(crate) sent: Option<Match>,
    /// Decoded, or packed when only the compiled entry runs them (see
    /// [`EntryInstructions`]).
    pub instructions: EntryInstructions,
    pub cookie: u64,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// `OFPFF_*` as installed.
    pub flags: u16,
    /// When it was installed (a replacing ADD restarts it).
    pub installed_at: Time,
}

/// What the packets that hit an entry add up to (the control side keeps
/// one per entry, folded from the workers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryCounter {
    /// Packets matched (kept even when `NO_PKT_COUNTS` hides it).
    pub packets: u64,
    /// Bytes matched (kept even when `NO_BYT_COUNTS` hides it).
    pub bytes: u64,
    /// Last time a packet matched it, or its installation (for the idle
    /// timeout).
    pub last_used: Time,
}

impl FlowEntry {
    /// What [`FlowEntry::sent`] holds for a match `m` whose canonical
    /// form is `key`: nothing when the key gives `m` back exactly.
    pub(crate) fn sent_match(m: &Match, key: &MatchKey) -> Option<Match> {
        if key.rebuilds(m) {
            None
        } else {
            Some(m.clone())
        }
    }

    /// The match as the controller sent it (TLV order kept), for
    /// statistics and FLOW_REMOVED.
    pub fn match_(&self) -> Cow<'_, Match> {
        match &self.sent {
            Some(m) => Cow::Borrowed(m),
            None => Cow::Owned(self.key.to_match()),
        }
    }

    /// The packet and byte counts of `c` as statistics report them:
    /// all-ones for a counter the entry was installed without
    /// (`OFPFF_NO_PKT_COUNTS`, `OFPFF_NO_BYT_COUNTS`).
    pub fn reported(&self, c: &EntryCounter) -> (u64, u64) {
        let packets = if self.flags & flow_mod_flags::NO_PKT_COUNTS != 0 {
            COUNTER_UNAVAILABLE
        } else {
            c.packets
        };
        let bytes = if self.flags & flow_mod_flags::NO_BYT_COUNTS != 0 {
            COUNTER_UNAVAILABLE
        } else {
            c.bytes
        };
        (packets, bytes)
    }

    /// Whether the controller asked for a FLOW_REMOVED when it leaves.
    pub fn sends_flow_removed(&self) -> bool {
        self.flags & flow_mod_flags::SEND_FLOW_REM != 0
    }

    /// The entry as the FLOW_MOD (ADD) that installs it: what flow text
    /// prints (`fulmar trace`, reports, `fulmar ctl`).
    pub fn to_flow_mod(&self) -> ofp::FlowMod {
        self.flow_stats(&EntryCounter::default(), self.installed_at)
            .into_flow_mod()
    }

    /// The statistics of this entry with counters `c` at `now`.
    pub fn flow_stats(&self, c: &EntryCounter, now: Time) -> ofp::stats::FlowStats {
        let h = self.stats_head(c, now);
        ofp::stats::FlowStats {
            table_id: h.table_id,
            duration_sec: h.duration_sec,
            duration_nsec: h.duration_nsec,
            priority: h.priority,
            idle_timeout: h.idle_timeout,
            hard_timeout: h.hard_timeout,
            flags: h.flags,
            cookie: h.cookie,
            packet_count: h.packet_count,
            byte_count: h.byte_count,
            match_: self.match_().into_owned(),
            instructions: self.instructions.to_vec(),
        }
    }

    /// The fixed fields of this entry's statistics with counters `c` at
    /// `now` (what [`FlowEntry::flow_stats`] and
    /// [`FlowEntry::encode_flow_stats`] both report).
    fn stats_head(&self, c: &EntryCounter, now: Time) -> ofp::stats::FlowStatsHead {
        let (duration_sec, duration_nsec) = now.duration_since(self.installed_at);
        let (packet_count, byte_count) = self.reported(c);
        ofp::stats::FlowStatsHead {
            table_id: self.table_id,
            duration_sec,
            duration_nsec,
            priority: self.priority,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            flags: self.flags,
            cookie: self.cookie,
            packet_count,
            byte_count,
        }
    }

    /// Appends this entry's `ofp_flow_stats` record, with counters `c` at
    /// `now`, to `w`: the bytes [`FlowEntry::flow_stats`] would encode,
    /// written straight from the entry (no match or instructions copied).
    pub fn encode_flow_stats(&self, c: &EntryCounter, now: Time, w: &mut Vec<u8>) {
        let write_match = |w: &mut Vec<u8>| match &self.sent {
            Some(m) => m.encode(w),
            None => Match::encode_with(w, |w| {
                for f in self.key.fields() {
                    f.encode_oxm(w);
                }
            }),
        };
        let head = self.stats_head(c, now);
        ofp::stats::encode_flow_stats(w, &head, write_match, |w| self.instructions.encode(w));
    }

    /// Prefetches what [`FlowEntry::encode_flow_stats`] reads beyond the
    /// entry itself, in two stages a few entries apart (a reply over a
    /// million entries otherwise waits on a cache miss per heap block):
    /// stage 0 the match's fields and the instruction list, stage 1 (once
    /// the list is in cache) the action lists it holds.
    pub fn prefetch_heap(&self, stage: u8) {
        use classifier::prefetch;
        if stage == 0 {
            match &self.sent {
                Some(m) => {
                    if let Some(f) = m.fields.first() {
                        prefetch(f);
                    }
                }
                None => {
                    if let Some(f) = self.key.fields().first() {
                        prefetch(f);
                    }
                }
            }
            self.instructions.prefetch();
        } else if let Some(list) = self.instructions.as_decoded() {
            for i in list {
                if let Instruction::ApplyActions { actions }
                | Instruction::WriteActions { actions } = i
                {
                    if let Some(a) = actions.first() {
                        prefetch(a);
                    }
                }
            }
        }
    }

    /// The FLOW_REMOVED content for this entry, with counters `c`,
    /// leaving at `now`.
    pub fn removed_event(&self, reason: RemovalReason, now: Time, c: &EntryCounter) -> FlowRemoved {
        FlowRemoved {
            id: self.id,
            reason,
            body: self.flow_stats(c, now).into_flow_removed(reason.wire_v13()),
        }
    }

    /// Which timeout, if any, has run out at `now`, the entry last used at
    /// `last_used`. The hard timeout wins when both run out at once.
    pub fn expired(&self, now: Time, last_used: Time) -> Option<RemovalReason> {
        const NS: u64 = 1_000_000_000;
        if self.hard_timeout != 0
            && now.nanos_since(self.installed_at) >= u64::from(self.hard_timeout) * NS
        {
            return Some(RemovalReason::HardTimeout);
        }
        if self.idle_timeout != 0 && now.nanos_since(last_used) >= u64::from(self.idle_timeout) * NS
        {
            return Some(RemovalReason::IdleTimeout);
        }
        None
    }

    /// Every action in the entry's apply-actions and write-actions
    /// instructions.
    pub fn actions(&self) -> impl Iterator<Item = Cow<'_, Action>> {
        self.instructions.actions()
    }

    /// True when an output action of the entry sends to `port`
    /// (`OFPP_ANY` always true): the `out_port` filter of delete and stats
    /// requests (spec 1.3.5 §6.4).
    pub fn outputs_to(&self, port: u32) -> bool {
        port == ofp::consts::port_no::ANY || self.instructions.output_ports().contains(&port)
    }

    /// True when a group action of the entry forwards to `group`
    /// (`OFPG_ANY` always true): the `out_group` filter.
    pub fn forwards_to_group(&self, group: u32) -> bool {
        group == ofp::consts::group_no::ANY || self.groups().any(|g| g == group)
    }

    /// The meter of the entry's meter instruction, if any.
    pub fn meter(&self) -> Option<u32> {
        self.instructions.items().find_map(|i| match i {
            Item::Meter(meter_id) => Some(meter_id),
            _ => None,
        })
    }

    /// The groups its group actions forward to (may repeat).
    pub fn groups(&self) -> impl Iterator<Item = u32> {
        self.instructions.group_ids().into_iter()
    }

    /// True when `(cookie & mask) == (self.cookie & mask)`.
    pub fn cookie_matches(&self, cookie: u64, mask: u64) -> bool {
        self.cookie & mask == cookie & mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_removed_message_carries_every_field() {
        let ev = FlowRemoved {
            id: FlowId(1),
            reason: RemovalReason::GroupDelete,
            body: ofp::FlowRemoved {
                cookie: 2,
                priority: 3,
                reason: 0, // not read: to_message takes `reason`
                table_id: 4,
                duration_sec: 5,
                duration_nsec: 6,
                idle_timeout: 7,
                hard_timeout: 8,
                packet_count: 9,
                byte_count: 10,
                match_: Match::default(),
            },
        };
        let mut late = ev.clone();
        late.add_late_hits(5, 500);
        assert_eq!((late.body.packet_count, late.body.byte_count), (14, 510));
        let mut uncounted = ev.clone();
        uncounted.body.packet_count = u64::MAX;
        uncounted.body.byte_count = u64::MAX;
        uncounted.add_late_hits(5, 500);
        assert_eq!(
            (uncounted.body.packet_count, uncounted.body.byte_count),
            (u64::MAX, u64::MAX)
        );
        let m = ev.to_message();
        assert_eq!(
            (
                m.cookie,
                m.priority,
                m.reason,
                m.table_id,
                m.duration_sec,
                m.duration_nsec
            ),
            (2, 3, 3, 4, 5, 6)
        );
        assert_eq!(
            (m.idle_timeout, m.hard_timeout, m.packet_count, m.byte_count),
            (7, 8, 9, 10)
        );
        let meter = FlowRemoved {
            reason: RemovalReason::MeterDelete,
            ..ev
        };
        assert_eq!(meter.to_message().reason, 2);
    }
}
