//! Statistics (spec 1.3.5 §7.3.5): counters folded from the workers, and
//! the flow, aggregate and table statistics answers.

use super::set::Tables;
use crate::model::flow_entry::{EntryCounter, FlowEntry, FlowId};
use crate::model::match_key::MatchKey;
use crate::Time;
use ofp::consts::table_no;
use ofp::error::BadRequestCode;
use ofp::flow_mod::flow_mod_flags;
use ofp::stats::{AggregateStats, FlowStats, TableStats};
use ofp::{Match, OfpError};
use std::collections::VecDeque;

/// The selection of a flow or aggregate statistics request (spec 1.3.5
/// §7.3.5.2): table (or `OFPTT_ALL`), out_port (or `OFPP_ANY`), out_group
/// (or `OFPG_ANY`), cookie/cookie_mask, and a match that selected entries
/// are at least as specific as. It is the request body itself.
pub type FlowFilter = ofp::stats::FlowStatsRequest;

/// Where a page of a FLOW statistics reply ended: the table and the id of
/// its last entry (see [`Tables::flow_stats_page`]).
pub type FlowPos = (u8, FlowId);

/// Whether `e` passes a request's cookie, out_port and out_group
/// conditions (its match is the caller's to check).
pub(super) fn passes(
    e: &FlowEntry,
    cookie: u64,
    cookie_mask: u64,
    out_port: u32,
    out_group: u32,
) -> bool {
    e.cookie_matches(cookie, cookie_mask)
        && e.outputs_to(out_port)
        && e.forwards_to_group(out_group)
}

/// A filter selecting every entry of every table.
pub fn any_flow() -> FlowFilter {
    FlowFilter {
        table_id: table_no::ALL,
        out_port: ofp::consts::port_no::ANY,
        out_group: ofp::consts::group_no::ANY,
        cookie: 0,
        cookie_mask: 0,
        match_: Match::default(),
    }
}

/// Adds `packets` hits of `bytes` bytes in all, the latest at `last_hit`,
/// to `c`.
fn add_to(c: &mut EntryCounter, packets: u64, bytes: u64, last_hit: Time) {
    c.packets = c.packets.wrapping_add(packets);
    c.bytes = c.bytes.wrapping_add(bytes);
    if packets > 0 && last_hit > c.last_used {
        c.last_used = last_hit;
    }
}

impl Tables {
    /// Records that a packet of `bytes` bytes matched entry `id` at `now`:
    /// counters grow and the idle timeout restarts. False if no such entry.
    pub fn note_hit(&mut self, id: FlowId, now: Time, bytes: u64) -> bool {
        self.add_hits(id, 1, bytes, now)
    }

    /// Records `packets` packets of `bytes` bytes in total matching entry
    /// `id`, the latest at `last_hit` (the bulk form of
    /// [`Tables::note_hit`], for folding worker counters: O(1) whatever the
    /// packet count). False if no such entry.
    pub fn add_hits(&mut self, id: FlowId, packets: u64, bytes: u64, last_hit: Time) -> bool {
        let Some(&p) = self.location.get(&id) else {
            return false;
        };
        let Some(s) = self
            .books
            .get_mut(usize::from(p.table))
            .and_then(|b| b.counters.get_mut(p.slot as usize))
        else {
            return false;
        };
        add_to(&mut s.c, packets, bytes, last_hit);
        true
    }

    /// [`Tables::add_hits`] for hits a worker counted in slot `slot` of
    /// table `table`: applied there when that slot still holds entry
    /// `id` (one read, no lookup by id), else by id (the entry moved or
    /// was removed while the worker counted: false if it is gone).
    pub fn add_hits_at(
        &mut self,
        table: u8,
        slot: u32,
        id: FlowId,
        packets: u64,
        bytes: u64,
        last_hit: Time,
    ) -> bool {
        let s = self
            .books
            .get_mut(usize::from(table))
            .and_then(|b| b.counters.get_mut(slot as usize))
            .filter(|s| s.id == id);
        match s {
            Some(s) => {
                add_to(&mut s.c, packets, bytes, last_hit);
                true
            }
            None => self.add_hits(id, packets, bytes, last_hit),
        }
    }

    /// Hints the CPU to load slot `slot`'s counters of table `table`.
    pub fn prefetch_counter(&self, table: u8, slot: u32) {
        if let Some(s) = self
            .books
            .get(usize::from(table))
            .and_then(|b| b.counters.get(slot as usize))
        {
            classifier::prefetch(s);
        }
    }

    /// Records `lookups` lookups in `table_id`, `matched` of which hit an
    /// entry (the bulk form of [`Tables::note_lookup`]).
    pub fn note_lookups(&mut self, table_id: u8, lookups: u64, matched: u64) {
        if let Some(b) = self.books.get_mut(usize::from(table_id)) {
            b.lookups = b.lookups.wrapping_add(lookups);
            b.matched = b.matched.wrapping_add(matched);
        }
    }

    /// Records one lookup in `table_id` and whether it matched an entry.
    pub fn note_lookup(&mut self, table_id: u8, matched: bool) {
        self.note_lookups(table_id, 1, u64::from(matched));
    }

    /// The entries a statistics request selects, in table then
    /// installation order. Errors: `BAD_REQUEST/BAD_TABLE_ID` for a table
    /// that does not exist, `BAD_MATCH/*` for an invalid match.
    pub fn filter(&self, filter: &FlowFilter) -> Result<Vec<&FlowEntry>, OfpError> {
        Ok(self.selected(filter, None)?.map(|(e, _)| e).collect())
    }

    /// The entries [`Tables::filter`] gives, lazily, with their counters,
    /// and only those after position `after` when it is given (see
    /// [`Tables::flow_stats_page`]). Errors as [`Tables::filter`].
    fn selected<'s>(
        &'s self,
        filter: &FlowFilter,
        after: Option<FlowPos>,
    ) -> Result<impl Iterator<Item = (&'s FlowEntry, EntryCounter)> + 's, OfpError> {
        if filter.table_id != table_no::ALL && filter.table_id >= self.n_tables() {
            return Err(OfpError::BadRequest(BadRequestCode::BadTableId));
        }
        let key = MatchKey::new(&filter.match_)?;
        let FlowFilter {
            table_id,
            cookie,
            cookie_mask,
            out_port,
            out_group,
            ..
        } = *filter;
        let tables = self
            .books
            .iter()
            .enumerate()
            .filter_map(|(t, book)| Some((u8::try_from(t).ok()?, book)));
        Ok(tables
            .filter(move |(t, _)| {
                (table_id == table_no::ALL || table_id == *t)
                    && after.is_none_or(|(at, _)| *t >= at)
            })
            .flat_map(move |(t, book)| {
                let from = match after {
                    Some((at, id)) if t == at => std::ops::Bound::Excluded(id),
                    _ => std::ops::Bound::Unbounded,
                };
                self.in_order(t, from).map(move |(slot, e)| (e, slot, book))
            })
            .filter(move |(e, _, _)| {
                e.key.is_within(&key) && passes(e, cookie, cookie_mask, out_port, out_group)
            })
            // Counters only of the entries selected.
            .map(|(e, slot, book)| {
                let c = book.counters.get(slot as usize).map(|s| s.c);
                (e, c.unwrap_or_default())
            }))
    }

    /// The FLOW multipart reply body for a request.
    pub fn flow_stats(&self, filter: &FlowFilter, now: Time) -> Result<Vec<FlowStats>, OfpError> {
        self.flow_stats_page(filter, now, None, usize::MAX)
            .map(|(stats, _)| stats)
    }

    /// One page of the FLOW multipart reply body: at most `limit` entries
    /// (at least one) of those [`Tables::flow_stats`] gives, starting after
    /// position `after` (from the start when `None`), and the position of
    /// the last one when the page is full (`None` when the answer ended in
    /// this page). Entries are in table then installation order, so a
    /// reply read page by page gives each entry that lived throughout at
    /// most once and in order, while entries installed meanwhile (newer
    /// ids) may appear and removed ones may be missing — with a few
    /// thousand entries per page, a 1M-entry dump holds one page at a
    /// time instead of a copy of every entry's match and instructions.
    pub fn flow_stats_page(
        &self,
        filter: &FlowFilter,
        now: Time,
        after: Option<FlowPos>,
        limit: usize,
    ) -> Result<(Vec<FlowStats>, Option<FlowPos>), OfpError> {
        let limit = limit.max(1);
        let mut out = Vec::new();
        for (e, c) in self.selected(filter, after)? {
            out.push(e.flow_stats(&c, now));
            if out.len() >= limit {
                return Ok((out, Some((e.table_id, e.id))));
            }
        }
        Ok((out, None))
    }

    /// [`Tables::flow_stats_page`] encoded: the page's `ofp_flow_stats`
    /// records back to back, as a FLOW reply carries them, written straight
    /// from the entries (the agent sends a reply of a million entries this
    /// way, without a [`FlowStats`] built and freed per entry).
    pub fn flow_stats_records(
        &self,
        filter: &FlowFilter,
        now: Time,
        after: Option<FlowPos>,
        limit: usize,
    ) -> Result<(Vec<u8>, Option<FlowPos>), OfpError> {
        let limit = limit.max(1);
        // Room for a page of typical records (about 100 bytes), so the page
        // is not copied as it grows.
        let mut out = Vec::with_capacity(limit.min(4096) * 128);
        let mut n = 0;
        // Entries are taken AHEAD before they are encoded: their heap
        // blocks are prefetched on the way in, their action lists half-way
        // (FlowEntry::prefetch_heap). Entries read ahead past a full page
        // are read again by the next page, which starts after the last one
        // encoded.
        const AHEAD: usize = 8;
        let mut selected = self.selected(filter, after)?;
        let mut ahead: VecDeque<(&FlowEntry, EntryCounter)> = VecDeque::with_capacity(AHEAD);
        loop {
            while ahead.len() < AHEAD {
                let Some((e, c)) = selected.next() else {
                    break;
                };
                e.prefetch_heap(0);
                ahead.push_back((e, c));
            }
            if let Some((e, _)) = ahead.get(AHEAD / 2) {
                e.prefetch_heap(1);
            }
            let Some((e, c)) = ahead.pop_front() else {
                return Ok((out, None));
            };
            e.encode_flow_stats(&c, now, &mut out);
            n += 1;
            if n >= limit {
                return Ok((out, Some((e.table_id, e.id))));
            }
        }
    }

    /// The AGGREGATE multipart reply body for a request. Entries whose
    /// counters are unavailable (`NO_PKT_COUNTS` / `NO_BYT_COUNTS`) add
    /// nothing to that sum.
    pub fn aggregate_stats(&self, filter: &FlowFilter) -> Result<AggregateStats, OfpError> {
        let mut agg = AggregateStats::default();
        for (e, c) in self.selected(filter, None)? {
            agg.flow_count = agg.flow_count.saturating_add(1);
            if e.flags & flow_mod_flags::NO_PKT_COUNTS == 0 {
                agg.packet_count = agg.packet_count.wrapping_add(c.packets);
            }
            if e.flags & flow_mod_flags::NO_BYT_COUNTS == 0 {
                agg.byte_count = agg.byte_count.wrapping_add(c.bytes);
            }
        }
        Ok(agg)
    }

    /// The TABLE multipart reply body: one entry per table.
    pub fn table_stats(&self) -> Vec<TableStats> {
        self.books
            .iter()
            .enumerate()
            .map(|(i, b)| TableStats {
                table_id: u8::try_from(i).unwrap_or(table_no::MAX),
                active_count: u32::try_from(b.order.len()).unwrap_or(u32::MAX),
                lookup_count: b.lookups,
                matched_count: b.matched,
            })
            .collect()
    }
}
