//! Bounds-checked big-endian reading and writing, the only place in `ofp`
//! that indexes into a byte slice.
//!
//! A [`Reader`] never panics: every read either returns the value or a
//! [`DecodeError`] with `BAD_REQUEST/BAD_LEN` and the absolute offset, which
//! enclosing decoders re-label with their own length code
//! ([`DecodeError::length_error_as`]).

use crate::error::{BadRequestCode, DecodeError, OfpError};

/// A cursor over a message (or part of one). Offsets in errors are absolute:
/// counted from the start of the outermost message.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Absolute offset of `buf[0]` in the outermost message.
    base: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            base: 0,
        }
    }

    /// Absolute offset of the next byte to read.
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// A length error at the current offset.
    pub fn short(&self, what: &str) -> DecodeError {
        DecodeError::new(
            OfpError::BadRequest(BadRequestCode::BadLen),
            self.offset(),
            format!("{what}: need more bytes than the {} left", self.remaining()),
        )
    }

    /// An error of any kind at the current offset.
    pub fn error(&self, error: OfpError, reason: impl Into<String>) -> DecodeError {
        DecodeError::new(error, self.offset(), reason)
    }

    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::new(
                OfpError::BadRequest(BadRequestCode::BadLen),
                self.offset(),
                format!("need {n} bytes, {} left", self.remaining()),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Takes the next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Splits off a sub-reader over the next `n` bytes and advances past them.
    pub fn sub(&mut self, n: usize) -> Result<Reader<'a>, DecodeError> {
        let base = self.offset();
        let buf = self.bytes(n)?;
        Ok(Reader { buf, pos: 0, base })
    }

    /// Takes everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// Looks at the next `n` bytes without consuming them.
    pub fn peek(&self, n: usize) -> Option<&'a [u8]> {
        self.buf.get(self.pos..self.pos + n)
    }

    /// Skips `n` bytes of padding. Padding content is ignored on decode and
    /// written as zeros on encode.
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

/// Appends big-endian values to a `Vec<u8>`; lengths that precede a body are
/// written as placeholders and patched once the body is known.
pub trait Writer {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_bytes(&mut self, b: &[u8]);
    fn put_zeros(&mut self, n: usize);
    /// Writes `v` at `at` (which must already have been written).
    fn patch_u16(&mut self, at: usize, v: u16);
    /// Zero bytes until the length from `start` is a multiple of 8.
    fn pad_to_8(&mut self, start: usize);
}

impl Writer for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    fn patch_u16(&mut self, at: usize, v: u16) {
        self[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    fn pad_to_8(&mut self, start: usize) {
        let len = self.len() - start;
        self.put_zeros((8 - len % 8) % 8);
    }
}

/// Rounds `n` up to a multiple of 8.
pub fn round_up_8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Reads an `n`-byte NUL-padded string: everything before the first NUL
/// (or all `n` bytes when there is none). Bytes that are not UTF-8 become
/// U+FFFD; if that makes the text longer than `n` bytes it is cut at the
/// last whole character that fits, so the string always re-encodes to
/// bytes that decode to the same string.
pub(crate) fn decode_fixed_str(r: &mut Reader, n: usize) -> Result<String, DecodeError> {
    let raw = r.bytes(n)?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let text = raw.get(..end).unwrap_or(raw);
    let mut s = String::from_utf8_lossy(text).into_owned();
    s.truncate(char_boundary_at_most(&s, n));
    Ok(s)
}

/// The largest character boundary of `s` that is at most `n`.
fn char_boundary_at_most(s: &str, n: usize) -> usize {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// Writes `s` NUL-padded to `n` bytes; a longer string is cut after the
/// last whole character that fits.
pub(crate) fn encode_fixed_str(s: &str, n: usize, w: &mut Vec<u8>) {
    let bytes = s.as_bytes();
    let end = char_boundary_at_most(s, n);
    w.put_bytes(bytes.get(..end).unwrap_or_default());
    w.put_zeros(n - end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded_and_offsets_absolute() {
        let data = [0u8, 1, 2, 3, 4, 5];
        let mut r = Reader::new(&data);
        assert_eq!(r.u16().unwrap(), 1);
        let mut s = r.sub(3).unwrap();
        assert_eq!(s.offset(), 2);
        assert_eq!(s.u8().unwrap(), 2);
        let e = s.u32().unwrap_err();
        assert_eq!(e.offset, 3);
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadLen));
        assert!(r.sub(2).is_err());
        assert_eq!(r.u8().unwrap(), 5);
        assert!(r.is_empty());
    }

    #[test]
    fn writer_pads_and_patches() {
        let mut w = Vec::new();
        w.put_u16(0);
        w.put_u8(7);
        w.pad_to_8(0);
        w.patch_u16(0, 8);
        assert_eq!(w, [0, 8, 7, 0, 0, 0, 0, 0]);
        assert_eq!(round_up_8(9), 16);
        assert_eq!(round_up_8(16), 16);
    }
}
