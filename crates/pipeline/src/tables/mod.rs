//! The flow tables as the control side sees them: FLOW_MOD semantics,
//! timeouts, counters and the flow/aggregate/table statistics answers
//! (spec 1.3.5 §5.2–§5.5, §6.4, §7.3.4.2, §7.3.5).
//!
//! # Data structures
//!
//! [`Tables`] holds `n_tables` (1..=255, ids `0..n_tables`) [`FlowTable`]s
//! and three indexes across them:
//!
//! * `location: FlowId -> (table id, slot)`, so an entry and its
//!   counters are found from its id alone (counter updates from the data
//!   side arrive by id);
//! * `group_refs: group id -> {FlowId}` and `meter_refs: meter id ->
//!   {FlowId}`: which entries forward to a group (through a group action
//!   in apply-actions or write-actions) or use a meter (meter
//!   instruction). Deleting a group or meter removes exactly those
//!   entries, and group/meter statistics report their sizes as
//!   `ref_count` / `flow_count` without a scan.
//!
//! Each [`FlowTable`] holds
//!
//! * `slots: Vec<Option<FlowEntry>>` (with a free list), `entries:
//!   HashMap<FlowId, slot>` and `order: BTreeSet<FlowId>` — the entries,
//!   each in a slot of a dense vector (see "Entry slots" below), found by
//!   id in O(1) and iterated in id (= installation) order so statistics
//!   replies are deterministic;
//! * `by_key: FastMap<hash of (priority, MatchKey), FlowId>` plus
//!   `by_key_overflow: FastMap<(priority, MatchKey), FlowId>` — the strict
//!   index: an entry's identity in OpenFlow is its table, priority and
//!   match as a set of fields, so ADD finds the entry it replaces and the
//!   strict commands find their one entry in O(1) ([`FlowTable::find_key`]:
//!   the hash's entry is checked against its stored key, a different one
//!   falls through to the overflow map, which holds entries whose hash was
//!   taken — empty in practice; tests keep 4 bits of the hash so that it
//!   is not). Keyed by the hash it holds 16 bytes a slot instead of a
//!   second copy of every match (`bytes_per_rule` test below);
//! * `lookup_count` / `matched_count` — the table counters the data side
//!   feeds through [`Tables::note_lookup`] or, folded in bulk,
//!   [`Tables::note_lookups`];
//! * `index: classifier::Table` — the fast classifier over every entry's
//!   (id, priority, match fields), rule id = `FlowId << SLOT_BITS | slot`;
//!   it holds only its lookup structures, no copy of the rules, so
//!   removing an entry hands its rule back (`rule_of`). It is
//!   changed in exactly two places, `FlowTable::put` and
//!   `FlowTable::take`, through which every path that adds, replaces,
//!   modifies (detach + attach), deletes, expires or removes entries for a
//!   deleted group or meter goes; invariant 7 checks it. The classifier's
//!   tie rule (smallest id) is the linear scan's (oldest entry) because
//!   ids grow with installation. [`FlowTable::lookup`] and
//!   [`FlowTable::lookup_burst`] use it; its generation
//!   ([`FlowTable::generation`]) moves with every change and keys the
//!   workers' flow caches.
//!
//! # Entry slots
//!
//! The classifier's rule id for an entry is `FlowId << SLOT_BITS | slot`,
//! so a hit names the entry's slot directly: the datapath reads the entry
//! with one indexed load ([`FlowTable::slot`]), can prefetch it across a
//! burst ([`FlowTable::prefetch_slot`]) and keeps its per-flow counters in
//! a plain per-worker array indexed by slot (`datapath::counters`).
//! A map from `FlowId` to entry would cost two dependent cache misses
//! per hit with 100K entries. The FlowId in the high bits
//! keeps "smallest rule id wins" equal to "oldest entry wins". Slots are
//! reused (last freed first), deterministically, so replayed copies agree
//! on them; a slot names an entry only within one table generation, which
//! is what the flow caches key on. Beside the slots, `fast` holds each
//! entry's compiled form (`datapath::fast::FastEntry`, one cache line,
//! made in `put`), which is all the forwarding loop reads for entries made
//! of one apply-actions list. Limits: 2^24 slots per table and ids
//! below 2^40; past them the table falls back to the linear scan
//! (`index_broken`).
//!
//! [`FlowId`]s come from one counter per `Tables`, are never reused, and
//! stay with an entry when MODIFY or a replacing ADD changes its
//! instructions — the entry's (table, priority, match) cannot change, so a
//! classifier that indexes entries by id never has to move one for those.
//!
//! # Invariants (checked by `Tables::check_invariants` in tests)
//!
//! 1. `location[id]` is `(t, s)` exactly when slot `s` of table `t` holds `id`, and
//!    `entries[id].id == id`, `entries[id].table_id == t`.
//! 2. `by_key` + `by_key_overflow` hold exactly one key per entry, found by
//!    `find_key(e.priority, e.key)`, and no two entries of a table share one.
//! 3. `e.key == MatchKey::new(&e.match_())`; `e.match_()` is the TLV list
//!    as the controller sent it (kept in `e.sent` only when the key does
//!    not give it back).
//! 4. `group_refs[g]` holds `id` exactly when entry `id` has a group
//!    action to `g`; likewise `meter_refs`. Empty sets are removed.
//! 5. No table has more than `max_entries` entries.
//! 6. A modification that returns an error has changed nothing: every
//!    check (flags, table id, match, instructions, overlap, capacity) runs
//!    before the first write.
//! 7. `index` holds exactly one rule per entry, equal to the entry's id,
//!    priority and (canonical) match fields.
//! 8. `order` holds exactly the ids of `entries`.
//! 9. `entries[id]` is a slot holding entry `id`; every other slot is
//!    empty and on the free list exactly once.
//!
//! # Publishing: multi-buffered copy-on-write per table
//!
//! Workers read an immutable copy of the switch (`datapath::Snapshot`,
//! published as an `Arc`), so every publish clones the `TableSet`. Each
//! `FlowTable` (entries, strict index, classifier index) is a
//! copy-on-write structure: the control side's copy `cur` behind an
//! `Arc` in the `TableSet` (sixteen tables to a shared chunk), and in a
//! `Dual` up to `MAX_SPARES` (2) older copies left by earlier publishes
//! and a log of the changes the oldest of them has not seen. Every write
//! is an operation (`TableOp`: put, take), applied to `cur` and logged.
//!
//! * A publish clones the `TableSet`: one pointer a chunk of sixteen
//!   tables, O(1) in entries. The first write to a table after it copies
//!   the table's chunk (sixteen pointers).
//! * The first write to a structure after a publish finds `cur` shared.
//!   It takes a spare no snapshot holds anymore (the workers moved on),
//!   replays the operations that spare missed and swaps it in:
//!   O(changes since that spare's publish). Two spares let a worker still
//!   hold the previous snapshot while the one before it is reused. When
//!   no spare is free (first publish, or workers hold them all), the
//!   structure is copied, O(entries), and the published one becomes a
//!   spare. A table of at most `REBUILD_INDEX_BELOW` entries is copied by
//!   rebuilding its classifier index from the rules rather than cloning
//!   it (a routing table's DIR-24-8 engine is 64 MiB at any size; a fresh
//!   one costs nothing until written).
//! * The log is bounded (`MAX_LOG` operations or half the structure's
//!   size, whichever is larger: replaying that many costs about one copy);
//!   beyond it the spares are dropped and the next write after a publish
//!   copies. Sizing it by the table keeps a long bulk install, published
//!   every second, from copying the growing table at each publish
//!   (`bulk_install_with_publishes` test).
//!
//! A full copy of a large table costs thousands of times the steady
//! cycle of publish, previous snapshot dropped and a few flow-mods
//! (`publish_cost` test; figures in docs/results.md, "What a publish
//! costs"), which is why a write replays a spare instead of copying.
//!
//! Costs of the scheme: up to three copies of every table written after
//! publishes (memory); `group_refs` and `meter_refs` stay plain
//! `Arc::make_mut` (copied on the first write after a publish, only when
//! the entry uses groups or meters); folding counters (`add_hits`,
//! `note_lookups`) is a write like any other. A worker that keeps an old
//! snapshot for long forces copies. Not done: a persistent (chunked/HAMT)
//! map, which would bound the copies too.
//!
//! Every `Tables::new` draws a fresh [`Tables::instance`] number shared by
//! its clones; a worker's flow cache is cleared when the instance of the
//! tables it reads changes, since generations of unrelated tables are not
//! comparable. (Two clones of one instance changed independently can
//! reach the same generation with different contents; the runtime never
//! does that — it publishes clones of one control-side copy.)
//!
//! # Costs
//!
//! ADD/strict commands are O(1) plus instruction validation and the
//! classifier insert (amortized O(1); see `classifier::table`);
//! CHECK_OVERLAP and the non-strict commands scan the table;
//! [`Tables::expire`] scans every entry.

pub mod compiled;
mod cow;
mod expiry;
mod flow_mod;
pub mod groups;
pub mod linear;
pub mod meters;
pub mod port_table;
mod set;
mod stats;
mod table;
#[cfg(test)]
mod tests;
pub mod validate;

pub use flow_mod::FlowModOutcome;
pub use stats::{any_flow, FlowFilter, FlowPos};
pub use table::{FlowTable, L2Index, RouteIndex, SLOT_BITS};

pub use set::{TableSet, Tables, TablesConfig, ENTRY_BYTES, MAX_TABLE_ENTRIES};
