//! [`Tables`]: every flow table of a switch, their limits, and the index
//! from an entry's id to its table.

use super::cow::{Dual, Location};
use super::table::{FlowTable, TableOp};
use crate::model::flow_entry::{FlowEntry, FlowId};
use crate::tables::validate::ActionPolicy;
use ofp::error::FlowModFailedCode;
use ofp::flow_mod::flow_mod_flags;
use ofp::{Match, OfpError};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Source of [`Tables::instance`] numbers.
static INSTANCES: AtomicU64 = AtomicU64::new(1);

/// Every `OFPFF_*` bit OpenFlow 1.3 defines.
pub(super) const KNOWN_FLAGS: u16 = flow_mod_flags::SEND_FLOW_REM
    | flow_mod_flags::CHECK_OVERLAP
    | flow_mod_flags::RESET_COUNTS
    | flow_mod_flags::NO_PKT_COUNTS
    | flow_mod_flags::NO_BYT_COUNTS;

/// Size limits and policies of the flow tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TablesConfig {
    /// Number of tables, 1..=255 (ids `0..n_tables`; 0 is treated as 1).
    pub n_tables: u8,
    /// Most entries one table holds; an ADD beyond it fails with
    /// `FLOW_MOD_FAILED/TABLE_FULL`. At most [`MAX_TABLE_ENTRIES`].
    pub max_entries: usize,
    /// A memory budget for the entries of all tables, in bytes (0: none):
    /// an ADD that would take [`Tables::memory_estimate`] past it fails
    /// with `FLOW_MOD_FAILED/TABLE_FULL`.
    pub max_bytes: usize,
    /// Which output ports actions may name.
    pub policy: ActionPolicy,
}

/// The most entries one table can hold: its lookup index names an entry's
/// slot in 24 bits. The default limit, so that nothing below what memory
/// holds refuses an entry unless configured to.
pub const MAX_TABLE_ENTRIES: usize = 1 << 24;

/// What one entry costs besides its match fields and instructions, for
/// [`Tables::memory_estimate`]: the entry record, its compiled form, the
/// strict and id indexes and the classifier's slot, measured at about
/// 600 bytes for a two-field gateway entry at 1M entries (the
/// `bytes_per_rule` test).
pub const ENTRY_BYTES: usize = 480;

/// The estimated memory of an entry with `match_` and `instructions`.
pub(super) fn entry_bytes(match_: &Match, instructions: &[ofp::Instruction]) -> usize {
    use ofp::Instruction as I;
    let actions: usize = instructions
        .iter()
        .map(|i| match i {
            I::ApplyActions { actions } | I::WriteActions { actions } => actions.len(),
            _ => 0,
        })
        .sum();
    ENTRY_BYTES + 48 * match_.fields.len() + 40 * instructions.len() + 40 * actions
}

impl Default for TablesConfig {
    /// 255 tables of up to [`MAX_TABLE_ENTRIES`] entries each, no memory
    /// budget, no `OFPP_NORMAL`.
    fn default() -> Self {
        TablesConfig {
            n_tables: 255,
            max_entries: MAX_TABLE_ENTRIES,
            max_bytes: 0,
            policy: ActionPolicy::default(),
        }
    }
}

/// All flow tables of one switch. See the module comment.
#[derive(Clone, Debug)]
pub struct Tables {
    pub(super) config: TablesConfig,
    pub(super) tables: Vec<Dual<FlowTable>>,
    pub(super) next_id: u64,
    pub(super) location: Dual<Location>,
    pub(super) group_refs: Arc<HashMap<u32, BTreeSet<FlowId>>>,
    pub(super) meter_refs: Arc<HashMap<u32, BTreeSet<FlowId>>>,
    pub(super) instance: u64,
    /// [`Tables::memory_estimate`].
    pub(super) bytes: usize,
}

impl Default for Tables {
    fn default() -> Self {
        Tables::new(TablesConfig::default())
    }
}

pub(super) const fn fm_failed(code: FlowModFailedCode) -> OfpError {
    OfpError::FlowModFailed(code)
}

impl Tables {
    /// Empty tables.
    pub fn new(mut config: TablesConfig) -> Tables {
        config.n_tables = config.n_tables.max(1);
        Tables {
            tables: (0..config.n_tables).map(|_| Dual::default()).collect(),
            config,
            next_id: 1,
            location: Dual::default(),
            group_refs: Arc::default(),
            meter_refs: Arc::default(),
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            bytes: 0,
        }
    }

    /// A number identifying this set of tables and its clones (fresh for
    /// every [`Tables::new`]): table generations are comparable only
    /// between tables of the same instance.
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// Applies one change to table `table_id` (see [`Dual`]).
    pub(super) fn write(&mut self, table_id: u8, op: TableOp) -> (Option<FlowEntry>, bool) {
        match self.tables.get_mut(usize::from(table_id)) {
            Some(t) => t.write(op),
            None => (None, false),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TablesConfig {
        &self.config
    }

    /// Number of tables.
    pub fn n_tables(&self) -> u8 {
        self.config.n_tables
    }

    /// One table.
    pub fn table(&self, table_id: u8) -> Option<&FlowTable> {
        self.tables.get(usize::from(table_id)).map(Dual::get)
    }

    /// An entry by id.
    pub fn entry(&self, id: FlowId) -> Option<&FlowEntry> {
        let t = self.location.get().0.get(&id)?;
        self.table(*t)?.entry(id)
    }

    /// Total entries in all tables.
    pub fn len(&self) -> usize {
        self.location.get().0.len()
    }

    /// True when no table has an entry.
    pub fn is_empty(&self) -> bool {
        self.location.get().0.is_empty()
    }

    /// Number of entries forwarding to `group`.
    pub fn group_ref_count(&self, group: u32) -> usize {
        self.group_refs.get(&group).map_or(0, BTreeSet::len)
    }

    /// The estimated memory of every entry (see [`ENTRY_BYTES`]): what a
    /// memory budget ([`TablesConfig::max_bytes`]) is checked against.
    pub fn memory_estimate(&self) -> usize {
        self.bytes
    }

    /// Number of entries using `meter`.
    pub fn meter_flow_count(&self, meter: u32) -> usize {
        self.meter_refs.get(&meter).map_or(0, BTreeSet::len)
    }
}
