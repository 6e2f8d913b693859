//! Packet classification for fulmar's flow tables: given a packet's
//! [`FlowKey`](packet::flow_key::FlowKey), find the highest-priority rule
//! of a table that matches it (ties: smallest rule id), fast.
//!
//! # Pieces
//!
//! - [`rule`]: the rule model ([`Rule`], [`FieldMatch`], [`Hit`]) and
//!   [`LinearRef`], the reference linear scan.
//! - [`key`]: packing a mask's fields into a few `u64` words.
//! - [`subtable`]: one open-addressing hash table per mask, with burst
//!   lookups that prefetch.
//! - [`lpm`]: DIR-24-8 IPv4 longest-prefix match for route tables.
//! - [`merged`]: TupleMerge-style tables for the long tail of masks of
//!   wildcard (ACL) tables.
//! - [`table`]: [`Table`], which places each rule in the LPM engine, in
//!   tuple-space search (one subtable per mask, early termination by
//!   priority) or in the merged tables, and so follows the table's shape
//!   as it changes.
//! - [`cache`]: [`FlowCache`], a bounded per-worker exact-match cache
//!   invalidated by table generations.
//! - [`versioned`]: a table one writer changes in place while readers
//!   look it up at the version they acknowledged, with one-cache-line
//!   hits and quiescent-state reclamation (issue #35's protocol; not yet
//!   used by the pipeline).
//!
//! # Semantics
//!
//! A rule matches a packet when every field it constrains is present in
//! the packet and equal under the rule's mask; a field the packet lacks
//! never matches. Results equal [`LinearRef`]'s (property-tested over
//! random rule sets of every shape with inserts, removes and modifies in
//! between lookups).
//!
//! # Plugging into the pipeline
//!
//! One [`Table`] per flow table, kept beside the pipeline's entries:
//! insert/remove/modify it wherever a flow-mod adds, deletes or changes
//! an entry (the rule id is the entry's `FlowId`, the priority its
//! priority, the fields its `MatchKey` fields with the OXM field number
//! as `u8`), then `lookup`/`lookup_burst` return the id of the entry to
//! run. Ids given in installation order make "ties -> smallest id" the
//! linear scan's "ties -> oldest entry". A [`FlowCache`] per worker in
//! front of the whole table walk, keyed by the packet's `FlowKey`, with
//! the generations of the tables the walk read as its [`Deps`].
//!
//! # Memory
//!
//! A large table is bound by memory, not by code: a lookup in a 1M-rule
//! table is a random cache miss and, with 4 KiB pages, a TLB walk (in a
//! VM a nested one), whatever the slot size. The slot arrays and the
//! route table are therefore backed by transparent huge pages
//! ([`packet::huge`]). A wildcard (ACL) table with a long tail of masks
//! would make one subtable per mask under plain tuple-space search, each
//! probed on a miss; the merged tables bound that. The figures are in
//! docs/results.md ("The classifier alone").

pub mod cache;
pub mod fast_hash;
pub mod key;
pub mod lpm;
pub mod merged;
pub mod rule;
pub mod subtable;
mod sync;
pub mod table;
pub mod versioned;

pub use cache::{CacheStats, Deps, FlowCache, MAX_DEPS};
pub use fast_hash::{FastBuild, FastHasher, FastMap, FastSet};
pub use key::{L2Layout, L2_WORDS};
pub use rule::{FieldMatch, Hit, LinearRef, Rule, RuleError};
pub use subtable::{prefetch, prefetch_all, Subtable};
pub use table::{Shape, Table};

/// Puts `v` in a free slot of `slots` (the last one `free` lists) or, with
/// none free, in a new slot at the end; returns the slot's index.
pub(crate) fn put_in_slot<T>(slots: &mut Vec<Option<T>>, free: &mut Vec<usize>, v: T) -> usize {
    match free.pop() {
        Some(i) => {
            slots[i] = Some(v);
            i
        }
        None => {
            slots.push(Some(v));
            slots.len() - 1
        }
    }
}
