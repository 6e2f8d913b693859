//! Fixtures the agent's unit tests share.

use crate::memory::{MemorySwitch, MemorySwitchConfig};
use ofp::{FlowMod, FlowModCommand, Oxm, OxmField, OxmValue};

/// A memory switch with four tables and no ports.
pub(crate) fn four_table_switch() -> MemorySwitch {
    MemorySwitch::new(
        MemorySwitchConfig {
            tables: pipeline::TablesConfig {
                n_tables: 4,
                ..Default::default()
            },
            ..Default::default()
        },
        None,
    )
}

/// An ADD of a flow matching `in_port`, at `priority`, with no instructions.
pub(crate) fn flow(in_port: u32, priority: u16) -> FlowMod {
    FlowMod {
        command: FlowModCommand::Add,
        priority,
        match_: ofp::Match {
            fields: vec![Oxm::Basic {
                field: OxmField::InPort,
                value: OxmValue::U32(in_port),
                mask: None,
            }],
        },
        ..FlowMod::default()
    }
}
