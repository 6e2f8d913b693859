//! The model: flow entries, matches and time as plain data.

pub mod counters;
pub mod drops;
pub mod flow_entry;
pub mod instructions;
pub mod match_key;
pub mod ports;
pub mod time;
