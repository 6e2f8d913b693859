//! The one error type of the text parsers: what went wrong, the offending
//! piece of text, and where it starts.

use std::fmt;

/// A parse failure. `position` is the byte offset of `token` in the text
/// given to the parser (for the file parsers: in that line). `Display`
/// prints a 1-based column: `at column 23: unknown field "eth_dts"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// What is wrong, naming the token.
    pub message: String,
    /// The offending piece of text (empty when something is missing at
    /// the end of the text).
    pub token: String,
    /// Byte offset of `token` in the input.
    pub position: usize,
}

impl ParseError {
    pub(crate) fn new(message: impl Into<String>, token: &str, position: usize) -> ParseError {
        ParseError {
            message: message.into(),
            token: token.to_string(),
            position,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at column {}: {}", self.position + 1, self.message)
    }
}

impl std::error::Error for ParseError {}
