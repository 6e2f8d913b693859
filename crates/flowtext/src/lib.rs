//! The ovs-ofctl style flow, group and meter text syntax, parsed into and
//! printed from the `ofp` structures.

pub mod actions;
mod error;
pub mod flow;
pub mod group;
mod lexer;
mod match_text;
pub mod meter;
mod value;

pub use error::ParseError;
pub use flow::{format_flow, parse_flow, parse_flow_command};
pub use group::{format_group, parse_group, parse_group_command};
pub use meter::{format_meter, parse_meter, parse_meter_command};
