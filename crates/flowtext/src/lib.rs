//! The ovs-ofctl style flow, group and meter text syntax, parsed into and
//! printed from the `ofp` structures.

#[allow(dead_code)]
pub mod actions;
mod error;
#[allow(dead_code)]
mod lexer;
#[allow(dead_code)]
mod match_text;
#[allow(dead_code)]
mod value;

pub use error::ParseError;
