//! What the pipeline really supports, said in OpenFlow terms: the
//! TABLE_FEATURES reply (spec 1.3.5 §7.3.5.5), the answer to a
//! TABLE_FEATURES request that tries to set the pipeline, TABLE_MOD
//! (§7.3.3), and the switch description (DESC, §7.3.5.1).
//!
//! Table features are derived from the implementation, not written by
//! hand:
//! - MATCH: every basic OXM field (`OxmField::ALL`: the lookup compares
//!   any field the packet parser sets), with `hasmask` on the fields the
//!   spec lets be masked (the lookup takes arbitrary masks on those);
//!   WILDCARDS: every field (any field may be left out of a match).
//! - INSTRUCTIONS(_MISS): the six standard instructions; GOTO_TABLE only
//!   in tables that have a later table. NEXT_TABLES(_MISS): every later
//!   table (goto only goes forward).
//! - WRITE/APPLY_ACTIONS(_MISS): every standard action the executor runs
//!   (experimenter actions are refused at FLOW_MOD).
//! - WRITE/APPLY_SETFIELD(_MISS): the fields a set-field action can
//!   write (`OxmField::settable` and known to the packet rewriter).
//! - metadata_match / metadata_write: all 64 bits; max_entries: the
//!   tables' configured limit; names `table0`, `table1`, ….
//!
//! Decisions:
//! - A TABLE_FEATURES request with a body asks to reconfigure the
//!   pipeline. The pipeline is fixed, so the request is accepted (and
//!   answered with the features, unchanged) only when it describes
//!   exactly what the pipeline already is: every table, same name, same
//!   metadata masks, same `max_entries`, and per property type the same
//!   set of ids (order ignored; config bits only the deprecated ones).
//!   Otherwise, checked in this order: a table id we do not have is
//!   `TABLE_FEATURES_FAILED/BAD_TABLE`; a property type that is not a
//!   standard one (experimenter included) is `BAD_TYPE`; metadata bits we
//!   cannot match or write are `BAD_METADATA`; a request that asks for
//!   more than the table does (a field, instruction, action or table
//!   beyond ours, more entries, a duplicate table) is `BAD_ARGUMENT`;
//!   anything else (less than we do: a table, a property or an id left
//!   out, another name, fewer entries — restrictions the pipeline would
//!   have to enforce and does not) is `EPERM`.
//! - TABLE_MOD: 1.3 deprecates every config bit; `config` may only hold
//!   bits of `OFPTC_DEPRECATED_MASK` (3), which are accepted and have no
//!   effect, any other bit is `TABLE_MOD_FAILED/BAD_CONFIG`. A table id
//!   we do not have (other than `OFPTT_ALL`) is `BAD_TABLE`.

use crate::tables::compiled::exec_field_settable;
use crate::tables::validate::ACTIONS;
use crate::tables::Tables;

use ofp::consts::table_no;
use ofp::error::{TableFeaturesFailedCode, TableModFailedCode};
use ofp::instruction::instruction_type as it;
use ofp::multipart::Desc;
use ofp::oxm::OXM_CLASS_OPENFLOW_BASIC;
use ofp::switch_config::capabilities;
use ofp::table_features::{ActionId, InstructionId, OxmId, TableFeatureProp, TableFeatures};
use ofp::{FeaturesReply, OfpError, OxmField, TableMod};
use std::collections::BTreeSet;

/// `OFPTC_DEPRECATED_MASK`: the only table config bits 1.3 knows.
pub const OFPTC_DEPRECATED_MASK: u32 = 3;

/// The switch description with fulmar's defaults: manufacturer "fulmar
/// project", hardware "userspace software switch", software "fulmar
/// VERSION" (the crate version), serial "none" and datapath description `dp_desc`.
pub fn default_desc(dp_desc: &str) -> Desc {
    Desc {
        mfr_desc: "fulmar project".to_string(),
        hw_desc: "userspace software switch".to_string(),
        sw_desc: format!("fulmar {}", env!("CARGO_PKG_VERSION")),
        serial_num: "none".to_string(),
        dp_desc: dp_desc.to_string(),
    }
}

/// The `OFPC_*` capabilities of the FEATURES_REPLY: flow, table, port,
/// group and queue statistics (all answered by
/// [`crate::SwitchState::multipart`]); no IP reassembly, and no
/// `PORT_BLOCKED` (no spanning tree runs here, though FLOOD honours a
/// `BLOCKED` state set from outside).
pub const CAPABILITIES: u32 = capabilities::FLOW_STATS
    | capabilities::TABLE_STATS
    | capabilities::PORT_STATS
    | capabilities::GROUP_STATS
    | capabilities::QUEUE_STATS;

/// The FEATURES_REPLY for this pipeline: `n_tables` from the tables,
/// `n_buffers` as given (the buffers of all workers together),
/// [`CAPABILITIES`].
pub fn features_reply(tables: &Tables, datapath_id: u64, n_buffers: u32) -> FeaturesReply {
    FeaturesReply {
        datapath_id,
        n_buffers,
        n_tables: tables.n_tables(),
        auxiliary_id: 0,
        capabilities: CAPABILITIES,
        reserved: 0,
    }
}

fn oxm_id(f: OxmField, hasmask: bool) -> OxmId {
    let len = f.kind().len();
    OxmId {
        class: OXM_CLASS_OPENFLOW_BASIC,
        field: f as u8,
        hasmask,
        length: u8::try_from(if hasmask { 2 * len } else { len }).unwrap_or(u8::MAX),
        experimenter: None,
    }
}

/// The name of table `id`.
pub fn table_name(id: u8) -> String {
    format!("table{id}")
}

/// The features of table `id` of `tables` (see the module comment).
pub fn table_features(tables: &Tables, id: u8) -> TableFeatures {
    let n = tables.n_tables();
    let mut instructions = vec![
        it::WRITE_METADATA,
        it::WRITE_ACTIONS,
        it::APPLY_ACTIONS,
        it::CLEAR_ACTIONS,
        it::METER,
    ];
    if id.saturating_add(1) < n {
        instructions.insert(0, it::GOTO_TABLE);
    }
    let instruction_ids: Vec<InstructionId> = instructions
        .into_iter()
        .map(|t| InstructionId {
            instruction_type: t,
            data: Vec::new(),
        })
        .collect();
    let table_ids: Vec<u8> = (id.saturating_add(1)..n).collect();
    let action_ids: Vec<ActionId> = ACTIONS
        .iter()
        .map(|t| ActionId {
            action_type: *t,
            data: Vec::new(),
        })
        .collect();
    let matches: Vec<OxmId> = OxmField::ALL
        .iter()
        .map(|f| oxm_id(*f, f.maskable()))
        .collect();
    let wildcards: Vec<OxmId> = OxmField::ALL.iter().map(|f| oxm_id(*f, false)).collect();
    let setfields: Vec<OxmId> = OxmField::ALL
        .iter()
        .filter(|f| exec_field_settable(**f))
        .map(|f| oxm_id(*f, false))
        .collect();
    use TableFeatureProp as P;
    TableFeatures {
        table_id: id,
        name: table_name(id),
        metadata_match: u64::MAX,
        metadata_write: u64::MAX,
        config: 0,
        max_entries: u32::try_from(tables.config().max_entries).unwrap_or(u32::MAX),
        properties: vec![
            P::Instructions {
                instruction_ids: instruction_ids.clone(),
            },
            P::InstructionsMiss { instruction_ids },
            P::NextTables {
                table_ids: table_ids.clone(),
            },
            P::NextTablesMiss { table_ids },
            P::WriteActions {
                action_ids: action_ids.clone(),
            },
            P::WriteActionsMiss {
                action_ids: action_ids.clone(),
            },
            P::ApplyActions {
                action_ids: action_ids.clone(),
            },
            P::ApplyActionsMiss { action_ids },
            P::Match { oxm_ids: matches },
            P::Wildcards { oxm_ids: wildcards },
            P::WriteSetfield {
                oxm_ids: setfields.clone(),
            },
            P::WriteSetfieldMiss {
                oxm_ids: setfields.clone(),
            },
            P::ApplySetfield {
                oxm_ids: setfields.clone(),
            },
            P::ApplySetfieldMiss { oxm_ids: setfields },
        ],
    }
}

/// The TABLE_FEATURES reply body: one record per table.
pub fn all_table_features(tables: &Tables) -> Vec<TableFeatures> {
    (0..tables.n_tables())
        .map(|id| table_features(tables, id))
        .collect()
}

/// One property as (type, set of comparable ids); `None` for a type that
/// is not standard.
fn prop_key(p: &TableFeatureProp) -> Option<(u16, BTreeSet<Vec<u8>>)> {
    use ofp::table_features::prop_type as pt;
    use TableFeatureProp as P;
    // An id as its type (or OXM header) followed by its data.
    let key = |head: &[u8], data: &[u8]| [head, data].concat();
    let insts = |v: &[InstructionId]| {
        v.iter()
            .map(|i| key(&i.instruction_type.to_be_bytes(), &i.data))
            .collect()
    };
    let acts = |v: &[ActionId]| {
        v.iter()
            .map(|a| key(&a.action_type.to_be_bytes(), &a.data))
            .collect()
    };
    let oxms = |v: &[OxmId]| {
        v.iter()
            .map(|o| {
                let experimenter = o.experimenter.unwrap_or(0).to_be_bytes();
                key(&o.header().to_be_bytes(), &experimenter)
            })
            .collect()
    };
    let tabs = |v: &[u8]| v.iter().map(|t| vec![*t]).collect();
    Some(match p {
        P::Instructions { instruction_ids } => (pt::INSTRUCTIONS, insts(instruction_ids)),
        P::InstructionsMiss { instruction_ids } => (pt::INSTRUCTIONS_MISS, insts(instruction_ids)),
        P::NextTables { table_ids } => (pt::NEXT_TABLES, tabs(table_ids)),
        P::NextTablesMiss { table_ids } => (pt::NEXT_TABLES_MISS, tabs(table_ids)),
        P::WriteActions { action_ids } => (pt::WRITE_ACTIONS, acts(action_ids)),
        P::WriteActionsMiss { action_ids } => (pt::WRITE_ACTIONS_MISS, acts(action_ids)),
        P::ApplyActions { action_ids } => (pt::APPLY_ACTIONS, acts(action_ids)),
        P::ApplyActionsMiss { action_ids } => (pt::APPLY_ACTIONS_MISS, acts(action_ids)),
        P::Match { oxm_ids } => (pt::MATCH, oxms(oxm_ids)),
        P::Wildcards { oxm_ids } => (pt::WILDCARDS, oxms(oxm_ids)),
        P::WriteSetfield { oxm_ids } => (pt::WRITE_SETFIELD, oxms(oxm_ids)),
        P::WriteSetfieldMiss { oxm_ids } => (pt::WRITE_SETFIELD_MISS, oxms(oxm_ids)),
        P::ApplySetfield { oxm_ids } => (pt::APPLY_SETFIELD, oxms(oxm_ids)),
        P::ApplySetfieldMiss { oxm_ids } => (pt::APPLY_SETFIELD_MISS, oxms(oxm_ids)),
        P::Experimenter { .. } | P::ExperimenterMiss { .. } | P::Unknown { .. } => return None,
    })
}

const fn tf(code: TableFeaturesFailedCode) -> OfpError {
    OfpError::TableFeaturesFailed(code)
}

/// Checks a TABLE_FEATURES request that sets the pipeline (a non-empty
/// body) against `tables`; `Ok` with the reply body (our features) when
/// it describes the pipeline exactly, else the error of the module
/// comment.
pub fn check_table_features_request(
    tables: &Tables,
    request: &[TableFeatures],
) -> Result<Vec<TableFeatures>, OfpError> {
    use TableFeaturesFailedCode as C;
    let ours = all_table_features(tables);
    let mut seen = BTreeSet::new();
    for r in request {
        if r.table_id >= tables.n_tables() {
            return Err(tf(C::BadTable));
        }
        if r.properties.iter().any(|p| prop_key(p).is_none()) {
            return Err(tf(C::BadType));
        }
    }
    let mut restricts = false;
    for r in request {
        if !seen.insert(r.table_id) {
            return Err(tf(C::BadArgument));
        }
        let Some(o) = ours.get(usize::from(r.table_id)) else {
            return Err(tf(C::BadTable));
        };
        if r.metadata_match & !o.metadata_match != 0 || r.metadata_write & !o.metadata_write != 0 {
            return Err(tf(C::BadMetadata));
        }
        if r.metadata_match != o.metadata_match || r.metadata_write != o.metadata_write {
            restricts = true;
        }
        if r.config & !OFPTC_DEPRECATED_MASK != 0 || r.max_entries > o.max_entries {
            return Err(tf(C::BadArgument));
        }
        if r.max_entries < o.max_entries || r.name != o.name {
            restricts = true;
        }
        let mut asked: Vec<(u16, BTreeSet<Vec<u8>>)> = Vec::new();
        for p in &r.properties {
            let Some((t, ids)) = prop_key(p) else {
                return Err(tf(C::BadType));
            };
            if asked.iter().any(|(u, _)| *u == t) {
                return Err(tf(C::BadArgument));
            }
            asked.push((t, ids));
        }
        let have: Vec<(u16, BTreeSet<Vec<u8>>)> =
            o.properties.iter().filter_map(prop_key).collect();
        for (t, ids) in &asked {
            let Some((_, mine)) = have.iter().find(|(u, _)| u == t) else {
                return Err(tf(C::BadArgument));
            };
            if !ids.is_subset(mine) {
                return Err(tf(C::BadArgument));
            }
            if ids != mine {
                restricts = true;
            }
        }
        if have.len() != asked.len() {
            restricts = true;
        }
    }
    if restricts || seen.len() != ours.len() {
        return Err(tf(C::Eperm));
    }
    Ok(ours)
}

/// Checks a TABLE_MOD (see the module comment); it has no effect when
/// accepted.
pub fn check_table_mod(tables: &Tables, tm: &TableMod) -> Result<(), OfpError> {
    if tm.table_id != table_no::ALL && tm.table_id >= tables.n_tables() {
        return Err(OfpError::TableModFailed(TableModFailedCode::BadTable));
    }
    if tm.config & !OFPTC_DEPRECATED_MASK != 0 {
        return Err(OfpError::TableModFailed(TableModFailedCode::BadConfig));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::TablesConfig;
    use proptest::prelude::*;

    #[test]
    fn features_reply_counts_tables_and_claims_what_is_answered() {
        let t = Tables::new(TablesConfig {
            n_tables: 7,
            ..TablesConfig::default()
        });
        let f = features_reply(&t, 0xabc, 512);
        assert_eq!((f.n_tables, f.n_buffers, f.datapath_id), (7, 512, 0xabc));
        assert_eq!(f.capabilities, 0x4f);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A set request is accepted exactly when, table by table, it is
        /// our features up to the order of properties and ids.
        #[test]
        fn only_our_own_pipeline_is_accepted(
            drop_prop in proptest::option::of(0usize..14),
            drop_id in proptest::option::of((0usize..14, 0usize..64)),
            shuffle in any::<u64>(),
            table in 0u8..3,
        ) {
            let t = Tables::new(TablesConfig { n_tables: 3, ..TablesConfig::default() });
            let ours = all_table_features(&t);
            let mut req = ours.clone();
            let Some(target) = req.get_mut(usize::from(table)) else { unreachable!() };
            let n = target.properties.len();
            target.properties.rotate_left((shuffle as usize) % n);
            let mut changed = false;
            if let Some((p, i)) = drop_id {
                if let Some(prop) = target.properties.get_mut(p) {
                    changed |= remove_id(prop, i);
                }
            }
            if let Some(p) = drop_prop {
                if p < target.properties.len() {
                    target.properties.remove(p);
                    changed = true;
                }
            }
            let got = check_table_features_request(&t, &req);
            if changed {
                prop_assert_eq!(
                    got,
                    Err(OfpError::TableFeaturesFailed(TableFeaturesFailedCode::Eperm))
                );
            } else {
                prop_assert_eq!(got, Ok(ours));
            }
        }
    }

    /// Removes id `i` of a property's list; false when there is none.
    fn remove_id(p: &mut TableFeatureProp, i: usize) -> bool {
        use TableFeatureProp as P;
        fn rm<T>(v: &mut Vec<T>, i: usize) -> bool {
            if i < v.len() {
                v.remove(i);
                true
            } else {
                false
            }
        }
        match p {
            P::Instructions { instruction_ids } | P::InstructionsMiss { instruction_ids } => {
                rm(instruction_ids, i)
            }
            P::NextTables { table_ids } | P::NextTablesMiss { table_ids } => rm(table_ids, i),
            P::WriteActions { action_ids }
            | P::WriteActionsMiss { action_ids }
            | P::ApplyActions { action_ids }
            | P::ApplyActionsMiss { action_ids } => rm(action_ids, i),
            P::Match { oxm_ids }
            | P::Wildcards { oxm_ids }
            | P::WriteSetfield { oxm_ids }
            | P::WriteSetfieldMiss { oxm_ids }
            | P::ApplySetfield { oxm_ids }
            | P::ApplySetfieldMiss { oxm_ids } => rm(oxm_ids, i),
            _ => false,
        }
    }
}
