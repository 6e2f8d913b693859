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
//! # Figures
//!
//! `cargo run --release -p classifier --example lookup_bench`, one
//! thread, on the 2-core shared development VM (AMD EPYC, 32 MiB L3, 4
//! KiB pages: transparent huge pages are madvise-only and nothing here
//! madvises), other jobs running (load average 2 to 2.6; under load 4
//! the figures halve). Uniform random pre-parsed keys over all rules;
//! burst-32 lookups:
//!
//! | scenario | shape | burst-32 | one by one | insert | table RSS |
//! |---|---|---|---|---|---|
//! | gateway 100K in_port+VLAN | single mask | 41-43 Mpps | 20-23 Mpps | 2.4M rules/s | 9 MiB |
//! | gateway 1M in_port+VLAN | single mask | 18-19 Mpps | 5 Mpps | 1.5M rules/s | 124-135 MiB |
//! | gateway 1M MPLS label | single mask | 18-19 (22 hot keys) | 5 Mpps | 1.0-1.6M rules/s | 107-124 MiB |
//! | l3 100K IPv4 prefixes | LPM | 27-33 Mpps | 26-38 Mpps | 1.0M rules/s | 63-82 MiB |
//! | acl 10K acl1-like | LPM + 1 exact + merged | 6-7 Mpps | 7 Mpps | 1.9M rules/s | 3 MiB |
//!
//! The 1M tables are bound by memory: the same code does 43 Mpps on a
//! hot subset of 4096 keys (`BENCH_KEYS=4096`), and shrinking the table
//! to 700K rules (24 MiB of slots instead of 48) barely helps, so the
//! cost is the random miss plus the 4 KiB-page TLB walk per lookup (a VM:
//! nested page walks), not the slot size. The slot arrays and the route
//! table are therefore backed by transparent huge pages
//! ([`packet::huge`]); see docs/results.md for the figures with them.
//! Plain tuple-space search on the acl set made 269 subtables and ran at
//! 0.2 Mpps; the merged tables made it 7.

pub mod cache;
pub mod fast_hash;
pub mod key;
pub mod lpm;
pub mod merged;
pub mod rule;
pub mod subtable;
pub mod table;

pub use cache::{CacheStats, Deps, FlowCache, MAX_DEPS};
pub use fast_hash::{FastBuild, FastHasher, FastMap, FastSet};
pub use key::{L2Layout, L2_WORDS};
pub use rule::{FieldMatch, Hit, LinearRef, Rule, RuleError};
pub use subtable::{prefetch, prefetch_all, Subtable};
pub use table::{Shape, Table};
