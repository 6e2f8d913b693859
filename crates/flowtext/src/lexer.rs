//! Splitting text into positioned tokens.
//!
//! A [`Tok`] is a slice of the input together with its byte offset, so every
//! error can point at the text it is about. Lists are split at commas and
//! white space that are not inside parentheses; parentheses must balance.

use crate::ParseError;

/// A piece of the input and its byte offset in the whole input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tok<'a> {
    pub text: &'a str,
    pub pos: usize,
}

impl<'a> Tok<'a> {
    /// The whole input as one token.
    pub fn whole(text: &'a str) -> Tok<'a> {
        Tok { text, pos: 0 }
    }

    /// The part of this token from byte `start` (which must be a char
    /// boundary; callers only pass offsets found by searching ASCII bytes).
    pub fn from(&self, start: usize) -> Tok<'a> {
        let start = start.min(self.text.len());
        Tok {
            text: self.text.get(start..).unwrap_or(""),
            pos: self.pos + start,
        }
    }

    /// The part of this token between byte offsets `start..end`.
    pub fn range(&self, start: usize, end: usize) -> Tok<'a> {
        let end = end.min(self.text.len());
        let start = start.min(end);
        Tok {
            text: self.text.get(start..end).unwrap_or(""),
            pos: self.pos + start,
        }
    }

    /// Splits at the first occurrence of `pat`.
    pub fn split_once(&self, pat: &str) -> Option<(Tok<'a>, Tok<'a>)> {
        // A one-byte pattern (`=`, `:`) is a byte search, not a substring
        // searcher built per call.
        let i = match pat.as_bytes() {
            &[b] if b.is_ascii() => self.text.bytes().position(|c| c == b)?,
            _ => self.text.find(pat)?,
        };
        Some((self.range(0, i), self.from(i + pat.len())))
    }

    /// An error about this token.
    pub fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError::new(message, self.text, self.pos)
    }

    /// The token as a quoted string for messages.
    pub fn quoted(&self) -> String {
        format!("{:?}", self.text)
    }
}

fn is_separator(c: char) -> bool {
    c == ',' || c.is_whitespace()
}

/// Splits `t` at commas and white space outside parentheses. Empty pieces
/// are dropped. Unbalanced parentheses are an error.
pub(crate) fn split_list(t: Tok<'_>) -> Result<Vec<Tok<'_>>, ParseError> {
    if t.text.is_ascii() {
        return split_ascii_list(t);
    }
    split_any_list(t)
}

/// What a byte is to [`split_ascii_list`].
const PLAIN: u8 = 0;
const SEPARATOR: u8 = 1;
const OPEN: u8 = 2;
const CLOSE: u8 = 3;

/// The class of each ASCII byte: `,` and the ASCII characters that
/// `char::is_whitespace` takes (tab, line feed, vertical tab, form feed,
/// carriage return, space) separate.
const CLASS: [u8; 128] = {
    let mut c = [PLAIN; 128];
    c[b',' as usize] = SEPARATOR;
    c[b' ' as usize] = SEPARATOR;
    let mut b = 0x09;
    while b <= 0x0d {
        c[b] = SEPARATOR;
        b += 1;
    }
    c[b'(' as usize] = OPEN;
    c[b')' as usize] = CLOSE;
    c
};

/// [`split_list`] of ASCII text, byte by byte through a class table, a
/// token's plain bytes skipped in a tight loop (a flows file of a million
/// lines spent a seventh of its checking time splitting lists).
fn split_ascii_list(t: Tok<'_>) -> Result<Vec<Tok<'_>>, ParseError> {
    let b = t.text.as_bytes();
    let class = |i: usize| CLASS[usize::from(b[i] & 0x7f)];
    let mut out = Vec::with_capacity(8);
    let mut i = 0;
    while i < b.len() {
        // Separators between tokens.
        while i < b.len() && class(i) == SEPARATOR {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let start = i;
        let mut depth = 0usize;
        let mut outermost = 0usize;
        while i < b.len() {
            match class(i) {
                PLAIN => {}
                SEPARATOR if depth == 0 => break,
                SEPARATOR => {}
                OPEN => {
                    if depth == 0 {
                        outermost = i;
                    }
                    depth += 1;
                }
                _ if depth == 0 => {
                    return Err(ParseError::new(
                        "unbalanced parentheses: \")\" without \"(\"",
                        ")",
                        t.pos + i,
                    ));
                }
                _ => depth -= 1,
            }
            i += 1;
        }
        if depth > 0 {
            return Err(ParseError::new(
                "unbalanced parentheses: \"(\" without \")\"",
                "(",
                t.pos + outermost,
            ));
        }
        out.push(t.range(start, i));
    }
    Ok(out)
}

/// [`split_list`] of any text, `char` by `char`.
fn split_any_list(t: Tok<'_>) -> Result<Vec<Tok<'_>>, ParseError> {
    split_chars(t, t.text.char_indices())
}

/// Splits `t`, read as `chars` (each with its byte offset), as
/// [`split_list`] says, with a depth count for the parentheses (the
/// outermost unclosed one is the last one opened at depth 0).
fn split_chars(
    t: Tok<'_>,
    chars: impl Iterator<Item = (usize, char)>,
) -> Result<Vec<Tok<'_>>, ParseError> {
    let mut out = Vec::with_capacity(8);
    let mut depth = 0usize;
    let mut outermost = 0usize;
    let mut start: Option<usize> = None;
    for (i, c) in chars {
        match c {
            '(' => {
                if depth == 0 {
                    outermost = i;
                }
                depth += 1;
            }
            ')' if depth == 0 => {
                return Err(ParseError::new(
                    "unbalanced parentheses: \")\" without \"(\"",
                    ")",
                    t.pos + i,
                ));
            }
            ')' => depth -= 1,
            _ => {}
        }
        if depth == 0 && is_separator(c) {
            if let Some(s) = start.take() {
                out.push(t.range(s, i));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if depth > 0 {
        return Err(ParseError::new(
            "unbalanced parentheses: \"(\" without \")\"",
            "(",
            t.pos + outermost,
        ));
    }
    if let Some(s) = start {
        out.push(t.from(s));
    }
    Ok(out)
}

/// Splits `key=value`; `None` value when there is no `=`.
pub(crate) fn key_value(t: Tok<'_>) -> (Tok<'_>, Option<Tok<'_>>) {
    match t.split_once("=") {
        Some((k, v)) => (k, Some(v)),
        None => (t, None),
    }
}

/// What `word` stands for in a table of words.
pub(crate) fn lookup<T: Copy>(table: &[(&str, T)], word: &str) -> Option<T> {
    table.iter().find(|(w, _)| *w == word).map(|&(_, v)| v)
}

/// The command and the pieces of a flow, group or meter text: `default`
/// unless the first piece is one of the command `words`, which is then
/// not a piece.
pub(crate) fn command_and_pieces<'a, C: Copy>(
    whole: Tok<'a>,
    words: &[(&str, C)],
    default: C,
) -> Result<(C, Vec<Tok<'a>>), ParseError> {
    let mut pieces = split_list(whole)?;
    match pieces.first().and_then(|first| lookup(words, first.text)) {
        Some(command) => {
            pieces.remove(0);
            Ok((command, pieces))
        }
        None => Ok((default, pieces)),
    }
}

/// A flag word (`send_flow_rem`, `kbps`, ...) sets its bit in `flags`:
/// true when `key` is one of `words`. A flag takes no value and may be
/// given once.
pub(crate) fn flag_word(
    words: &[(&str, u16)],
    flags: &mut u16,
    key: Tok<'_>,
    value: Option<Tok<'_>>,
) -> Result<bool, ParseError> {
    let Some(bit) = lookup(words, key.text) else {
        return Ok(false);
    };
    if let Some(v) = value {
        return Err(v.err(format!(
            "flag {} takes no value (got {})",
            key.quoted(),
            v.quoted()
        )));
    }
    if *flags & bit != 0 {
        return Err(key.err(format!("duplicate flag {}", key.quoted())));
    }
    *flags |= bit;
    Ok(true)
}

/// Test helper: `text` prints from `v` with `format`, parses back to `v`
/// with `parse`, and prints the same again.
#[cfg(test)]
pub(crate) fn assert_text_round_trip<T: PartialEq + std::fmt::Debug>(
    v: &T,
    format: fn(&T) -> String,
    parse: fn(&str) -> Result<T, ParseError>,
) {
    let text = format(v);
    let back = parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(&back, v, "{text}");
    assert_eq!(format(&back), text);
}

/// Test helper: `parse` refuses `text` with an error whose message names
/// its token and whose position is where that token stands in `text`.
#[cfg(test)]
pub(crate) fn refused<T: std::fmt::Debug>(
    parse: fn(&str) -> Result<T, ParseError>,
    text: &str,
) -> ParseError {
    let e = parse(text).unwrap_err();
    assert!(
        e.message.contains(&e.token),
        "{text}: {} does not name {:?}",
        e.message,
        e.token
    );
    assert_eq!(
        text.get(e.position..e.position + e.token.len()),
        Some(e.token.as_str())
    );
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The byte splitter gives exactly the pieces, positions and
        /// errors of the char splitter, on text made of the characters
        /// that matter (separators of every kind, parentheses, letters).
        #[test]
        fn ascii_split_is_the_char_split(s in "[a-c=(),: \t\n\x0b\x0c\r]{0,40}") {
            prop_assert_eq!(split_ascii_list(Tok::whole(&s)), split_any_list(Tok::whole(&s)));
        }
    }

    fn texts(s: &str) -> Vec<(String, usize)> {
        split_list(Tok::whole(s))
            .unwrap()
            .into_iter()
            .map(|t| (t.text.to_string(), t.pos))
            .collect()
    }

    #[test]
    fn splits_at_commas_and_spaces_outside_parentheses() {
        assert_eq!(
            texts("a=1, b  write_actions(x,y),c"),
            vec![
                ("a=1".to_string(), 0),
                ("b".to_string(), 5),
                ("write_actions(x,y)".to_string(), 8),
                ("c".to_string(), 27)
            ]
        );
        assert!(texts(" ,, ").is_empty());
    }

    #[test]
    fn unbalanced_parentheses_point_at_the_paren() {
        let e = split_list(Tok::whole("a,b(c,d")).unwrap_err();
        assert_eq!((e.token.as_str(), e.position), ("(", 3));
        let e = split_list(Tok::whole("a,b)c")).unwrap_err();
        assert_eq!((e.token.as_str(), e.position), (")", 3));
    }

    #[test]
    fn sub_tokens_keep_offsets() {
        let t = Tok {
            text: "key=val",
            pos: 10,
        };
        let (k, v) = key_value(t);
        assert_eq!((k.text, k.pos), ("key", 10));
        let v = v.unwrap();
        assert_eq!((v.text, v.pos), ("val", 14));
        assert_eq!(t.range(5, 100).text, "al");
        assert_eq!(t.from(100).text, "");
    }
}
