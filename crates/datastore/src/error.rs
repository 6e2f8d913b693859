//! Configuration errors and warnings: each names the file, the line and
//! column (when there is a file), the field path (`bridges[0].ports[1].port`)
//! and what is wrong, and prints as
//! `fulmar.toml:14:9: bridges[0].ports[1].port: port number 0 is not valid (1..=4294967040)`.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::path::FieldPath;

/// One finding about a configuration: an error, or a warning that does not
/// stop the configuration from loading.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file it is in (as named to the loader, or joined to the config
    /// file's directory for `*_file`s), or `command line` for flags.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column (in characters), when known.
    pub column: Option<usize>,
    /// Path of the field as shown, e.g. `bridges[0].ports[1].port`, or by
    /// name in a transaction (empty for the whole document, e.g. a TOML
    /// syntax error); [`path`](Self::path) is it typed.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// The field, typed ([`field`](Self::field) is it as shown); empty
    /// when the finding is about no field of the model (a TOML syntax
    /// error, a line of a flows file).
    pub path: FieldPath,
    /// Other fields the message names (the first use of a duplicate).
    pub related: Vec<FieldPath>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        if self.field.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.field, self.message)
        }
    }
}

/// A configuration that was refused, with every error found (at least
/// one). Validation runs to the end, so one load reports them all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The errors, in the order found (roughly document order).
    pub errors: Vec<Diagnostic>,
}

impl fmt::Display for ConfigError {
    /// One line per error.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error with one diagnostic.
    pub(crate) fn one(d: Diagnostic) -> ConfigError {
        ConfigError { errors: vec![d] }
    }
}

/// A text with a name, able to turn byte offsets into lines and columns.
#[derive(Clone, Debug)]
pub(crate) struct SourceText<'a> {
    /// Shown in messages.
    pub name: PathBuf,
    /// The text; `None` for values that came from flags.
    pub text: Option<&'a str>,
    line_starts: Vec<usize>,
}

impl<'a> SourceText<'a> {
    pub fn new(name: &Path, text: Option<&'a str>) -> SourceText<'a> {
        let mut line_starts = vec![0];
        if let Some(t) = text {
            line_starts.extend(t.match_indices('\n').map(|(i, _)| i + 1));
        }
        SourceText {
            name: name.to_path_buf(),
            text,
            line_starts,
        }
    }

    /// 1-based (line, column) of a byte offset; the column counts
    /// characters. `None` without a text.
    pub fn locate(&self, offset: usize) -> Option<(usize, usize)> {
        let text = self.text?;
        let offset = offset.min(text.len());
        let line_idx = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let start = self.line_starts.get(line_idx).copied().unwrap_or(0);
        let col = text
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(offset - start);
        Some((line_idx + 1, col + 1))
    }

    /// A diagnostic at the start of `span`.
    pub fn diag(&self, span: &Range<usize>, field: &str, message: String) -> Diagnostic {
        let loc = self.locate(span.start);
        Diagnostic {
            file: self.name.clone(),
            line: loc.map(|l| l.0),
            column: loc.map(|l| l.1),
            field: field.to_string(),
            message,
            ..Diagnostic::default()
        }
    }

    /// The 1-based line of `span`'s start (0 without a text).
    pub fn line_of(&self, span: &Range<usize>) -> usize {
        self.locate(span.start).map(|l| l.0).unwrap_or(0)
    }

    /// The raw text of a span, if there is a text and the span is inside.
    pub fn slice(&self, span: &Range<usize>) -> Option<&'a str> {
        self.text?.get(span.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_counts_lines_and_characters() {
        let s = SourceText::new(Path::new("f.toml"), Some("ab\nçd = 1\n\nx"));
        assert_eq!(s.locate(0), Some((1, 1)));
        assert_eq!(s.locate(2), Some((1, 3)));
        assert_eq!(s.locate(3), Some((2, 1)));
        // 'ç' is two bytes but one column.
        assert_eq!(s.locate(5), Some((2, 2)));
        assert_eq!(s.locate(10), Some((2, 7)));
        assert_eq!(s.locate(11), Some((3, 1)));
        assert_eq!(s.locate(12), Some((4, 1)));
        assert_eq!(s.locate(999), Some((4, 2)));
        // An offset inside a multi-byte character does not panic.
        assert!(s.locate(4).is_some());
        assert_eq!(SourceText::new(Path::new("x"), None).locate(3), None);
    }

    #[test]
    fn display_forms() {
        let mut d = Diagnostic {
            file: PathBuf::from("fulmar.toml"),
            line: Some(14),
            column: Some(9),
            field: "bridges[0].ports[1].port".into(),
            message: "port number 0 is not valid (1..=4294967040)".into(),
            ..Diagnostic::default()
        };
        assert_eq!(
            d.to_string(),
            "fulmar.toml:14:9: bridges[0].ports[1].port: port number 0 is not valid (1..=4294967040)"
        );
        d.line = None;
        d.column = None;
        d.file = PathBuf::from("command line");
        assert_eq!(
            d.to_string(),
            "command line: bridges[0].ports[1].port: port number 0 is not valid (1..=4294967040)"
        );
        d.field.clear();
        let e = ConfigError {
            errors: vec![d.clone(), d],
        };
        assert_eq!(
            e.to_string(),
            "command line: port number 0 is not valid (1..=4294967040)\n\
             command line: port number 0 is not valid (1..=4294967040)"
        );
    }
}
