//! The ovs-ofctl style flow, group and meter text syntax, parsed into and
//! printed from the `ofp` structures.
//!
//! * Flows: [`parse_flow`], [`parse_flow_command`], [`format_flow`]
//!   (syntax and canonical form in [`flow`]; matches in `match_text`,
//!   actions and instructions in [`actions`]).
//! * Groups: [`parse_group`], [`parse_group_command`], [`format_group`].
//! * Meters: [`parse_meter`], [`parse_meter_command`], [`format_meter`].
//! * Files of them, one per line: [`parse_flow_file`], [`parse_group_file`],
//!   [`parse_meter_file`].
//!
//! Every parser returns a [`ParseError`] naming the offending token and its
//! byte offset; none panics on any input. For everything the syntax can
//! express, parsing the printed form gives back an equal structure.

pub mod actions;
mod error;
pub mod file;
pub mod flow;
pub mod group;
mod lexer;
mod match_text;
pub mod meter;
#[cfg(test)]
mod proptests;
mod value;

pub use error::ParseError;
pub use file::{parse_flow_file, parse_group_file, parse_meter_file};
pub use flow::{format_flow, parse_flow, parse_flow_command};
pub use group::{format_group, parse_group, parse_group_command};
pub use meter::{format_meter, parse_meter, parse_meter_command};
