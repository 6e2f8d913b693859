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
//! # Figures
//!
//! See `examples/lookup_bench.rs` (and the report in its top comment).

pub mod cache;
pub mod key;
pub mod lpm;
pub mod merged;
pub mod rule;
pub mod subtable;
pub mod table;

pub use cache::{CacheStats, Deps, FlowCache, MAX_DEPS};
pub use rule::{FieldMatch, Hit, LinearRef, Rule, RuleError};
pub use table::{Shape, Table};
