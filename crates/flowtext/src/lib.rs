//! The ovs-ofctl style flow, group and meter text syntax, parsed into and
//! printed from the `ofp` structures.

pub mod actions;
mod error;
pub mod flow;
mod lexer;
mod match_text;
mod value;

pub use error::ParseError;
pub use flow::{format_flow, parse_flow, parse_flow_command};
