//! Matching a flow entry against a packet, and the per-table lookup behind
//! a small trait: [`FastClassifier`] (the default, the `classifier`
//! crate's index kept beside every [`FlowTable`]) and [`LinearScan`] (the
//! reference it is tested against).
//!
//! A packet is described by its [`FlowKey`] (header fields parsed by the
//! `packet` crate, plus the pipeline fields IN_PORT, IN_PHY_PORT, METADATA
//! and TUNNEL_ID set by the pipeline). An entry matches when every field of
//! its [`MatchKey`] is present in the packet and equal under the entry's
//! mask; a field the packet lacks (TCP ports of a UDP packet, VLAN_PCP of
//! an untagged frame) never matches.

use crate::model::flow_entry::FlowEntry;
use crate::tables::{FlowTable, Tables};
use packet::flow_key::FlowKey;

pub use crate::tables::linear::matches;

/// A per-table lookup: the entry of `table` that `packet` hits, if any.
///
/// Among matching entries the highest priority wins; among equal
/// priorities the implementation must pick deterministically (the linear
/// scan picks the oldest entry, the one with the smallest [`FlowId`]).
///
/// [`FlowId`]: crate::model::flow_entry::FlowId
pub trait Classifier {
    /// The entry of table `table_id` of `tables` that `packet` hits.
    fn lookup<'t>(
        &self,
        tables: &'t Tables,
        table_id: u8,
        packet: &FlowKey,
    ) -> Option<&'t FlowEntry>;

    /// True when this classifier answers exactly as each table's own
    /// index ([`FlowTable::lookup`] / [`FlowTable::lookup_burst`]), so
    /// the datapath may use the index's burst lookup and a flow cache
    /// keyed by table generations instead of calling [`Classifier::lookup`].
    fn uses_table_index(&self) -> bool {
        false
    }
}

/// The fast classifier: each table's `classifier::Table` index (hash per
/// mask, IPv4 LPM, merged tables), mirrored on every change of the table.
/// The datapath's default.
#[derive(Clone, Copy, Debug, Default)]
pub struct FastClassifier;

impl Classifier for FastClassifier {
    fn lookup<'t>(
        &self,
        tables: &'t Tables,
        table_id: u8,
        packet: &FlowKey,
    ) -> Option<&'t FlowEntry> {
        tables.table(table_id).and_then(|t| t.lookup(packet))
    }

    fn uses_table_index(&self) -> bool {
        true
    }
}

/// The simple, obviously correct classifier: scans every entry of the
/// table ([`FlowTable::lookup_linear`]). O(entries) per lookup; the
/// reference the fast classifier is tested against.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinearScan;

impl LinearScan {
    /// The best entry of one table.
    pub fn lookup_table<'t>(table: &'t FlowTable, packet: &FlowKey) -> Option<&'t FlowEntry> {
        table.lookup_linear(packet)
    }
}

impl Classifier for LinearScan {
    fn lookup<'t>(
        &self,
        tables: &'t Tables,
        table_id: u8,
        packet: &FlowKey,
    ) -> Option<&'t FlowEntry> {
        tables
            .table(table_id)
            .and_then(|t| Self::lookup_table(t, packet))
    }
}
