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
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            base: 0,
        }
    }

    /// Absolute offset of the next byte to read.
    #[inline]
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes left to read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
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
    ///
    /// This and the fixed-size reads below are `#[inline]` with the error
    /// built out of line: every TLV of every message goes through them,
    /// and called across the crate boundary they cost about 20
    /// instructions a read (callgrind, a flow-mod's actions decoded).
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        match self.buf.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.too_short(n)),
        }
    }

    #[cold]
    #[inline(never)]
    fn too_short(&self, n: usize) -> DecodeError {
        DecodeError::new(
            OfpError::BadRequest(BadRequestCode::BadLen),
            self.offset(),
            format!("need {n} bytes, {} left", self.remaining()),
        )
    }

    /// Takes the next `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Splits off a sub-reader over the next `n` bytes and advances past them.
    #[inline]
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
    #[inline]
    pub fn peek(&self, n: usize) -> Option<&'a [u8]> {
        self.buf.get(self.pos..self.pos + n)
    }

    /// Skips `n` bytes of padding. Padding content is ignored on decode and
    /// written as zeros on encode.
    #[inline]
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }

    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    #[inline]
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    #[inline]
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    #[inline]
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

// `#[inline]`: other crates encode through these (a 1M-entry flow-stats
// reply called them tens of millions of times, 10 % of the agent's time
// as calls that could not be inlined across crates).
impl Writer for Vec<u8> {
    #[inline]
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    #[inline]
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn put_bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
    #[inline]
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    #[inline]
    fn patch_u16(&mut self, at: usize, v: u16) {
        self[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn pad_to_8(&mut self, start: usize) {
        let len = self.len() - start;
        self.put_zeros((8 - len % 8) % 8);
    }
}

/// Splits off the next length-prefixed record. Its `u16` length sits `at`
/// bytes into the record and counts the whole record; it must be at least
/// `min` and fit in what is left. Errors are `BAD_REQUEST/BAD_LEN`.
pub(crate) fn record<'a>(
    r: &mut Reader<'a>,
    at: usize,
    min: usize,
    what: &str,
) -> Result<Reader<'a>, DecodeError> {
    let mut peek = r.clone();
    peek.skip(at).map_err(|_| r.short(what))?;
    let len = usize::from(peek.u16().map_err(|_| r.short(what))?);
    if len < min {
        return Err(r.error(
            OfpError::BadRequest(BadRequestCode::BadLen),
            format!("{what}: length {len} is shorter than its {min}-byte fixed part"),
        ));
    }
    if len > r.remaining() {
        return Err(r.error(
            OfpError::BadRequest(BadRequestCode::BadLen),
            format!(
                "{what}: length {len} runs past the {} bytes left",
                r.remaining()
            ),
        ));
    }
    r.sub(len)
}

/// Writes a `u16` length placeholder and returns where to patch it.
pub(crate) fn len_placeholder(w: &mut Vec<u8>) -> usize {
    let at = w.len();
    w.put_u16(0);
    at
}

/// Patches the `u16` length at `at` with the bytes written since `start`.
/// Records longer than 65535 bytes cannot be expressed; their length is
/// written modulo 2^16 (callers keep records small).
#[inline]
pub(crate) fn patch_len(w: &mut Vec<u8>, at: usize, start: usize) {
    let len = w.len() - start;
    w.patch_u16(at, len as u16);
}

/// Decodes records with `f` until `r` is empty.
pub(crate) fn decode_all<'a, T>(
    r: &mut Reader<'a>,
    mut f: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(f(r)?);
    }
    Ok(out)
}

/// A value whose wire form its type fixes: the big-endian integers here,
/// and the fixed structures that implement it beside their definitions.
pub trait Field: Sized {
    /// The wire size when every value has the same one.
    const SIZE: Option<usize> = None;
    fn read(r: &mut Reader) -> Result<Self, DecodeError>;
    fn write(&self, w: &mut Vec<u8>);
}

macro_rules! int_fields {
    ($($t:ident: $read:ident, $put:ident;)*) => {$(
        impl Field for $t {
            const SIZE: Option<usize> = Some(std::mem::size_of::<$t>());
            fn read(r: &mut Reader) -> Result<Self, DecodeError> {
                r.$read()
            }
            fn write(&self, w: &mut Vec<u8>) {
                w.$put(*self);
            }
        }
    )*};
}
int_fields! { u8: u8, put_u8; u16: u16, put_u16; u32: u32, put_u32; u64: u64, put_u64; }

/// A fixed-size array: its elements one after another.
impl<T: Field + Copy + Default, const N: usize> Field for [T; N] {
    const SIZE: Option<usize> = match T::SIZE {
        Some(n) => Some(n * N),
        None => None,
    };
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut a = [T::default(); N];
        for v in &mut a {
            *v = T::read(r)?;
        }
        Ok(a)
    }
    fn write(&self, w: &mut Vec<u8>) {
        for v in self {
            v.write(w);
        }
    }
}

/// A list that runs to the end of its reader (a record's trailing
/// entries); entries of one fixed size must fill it exactly.
impl<T: Field> Field for Vec<T> {
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        if let Some(n) = T::SIZE.filter(|&n| !r.remaining().is_multiple_of(n)) {
            return Err(r.error(
                OfpError::BadRequest(BadRequestCode::BadLen),
                format!(
                    "{} bytes of {n}-byte entries is not a whole number",
                    r.remaining()
                ),
            ));
        }
        decode_all(r, T::read)
    }
    fn write(&self, w: &mut Vec<u8>) {
        for v in self {
            v.write(w);
        }
    }
}

/// Lists of entries that run to the end of their reader (actions,
/// instructions, bands), for any [`Field`].
pub trait FieldList: Field {
    /// Decodes entries until the reader is empty.
    fn decode_list(r: &mut Reader) -> Result<Vec<Self>, DecodeError> {
        Vec::read(r)
    }
    /// Encodes entries one after another.
    fn encode_list(items: &[Self], w: &mut Vec<u8>) {
        items.iter().for_each(|i| i.write(w));
    }
}

impl<T: Field> FieldList for T {}

/// Writes `decode`, `encode` and the [`Field`] impl for a struct whose wire
/// form is its fields in the order listed, each in its [`Field`] form, where
/// `pad N` stands for N bytes of padding (ignored on decode, written as
/// zeros): `wire_layout!(Role { role, pad 4, generation_id });`
///
/// `name: str(N)` is a NUL-padded string of N bytes ([`decode_fixed_str`]);
/// `data: rest`, last, is all the bytes that are left, kept opaque.
/// `Name: LEN = N, { .. }` also states the fixed wire size N as `Name::LEN`
/// (checked when encoding in debug builds). `Name: record(AT, "what",
/// FIXED) { .. }` is a record whose `u16` length, the item `len` AT bytes
/// in, counts the whole record: decoding checks it with [`record`] against
/// `Name::FIXED_LEN` (FIXED) and the bytes left, and reads the fields
/// within it; encoding writes it once the record is known.
macro_rules! wire_layout {
    ($ty:ident { $($item:tt)* }) => {
        impl $ty {
            /// Decodes it field by field, in wire order.
            pub fn decode(
                r: &mut $crate::wire::Reader,
            ) -> Result<Self, $crate::error::DecodeError> {
                $crate::wire::wire_layout!(@read r [] $($item)*)
            }

            /// Encodes it field by field, padding as zeros.
            pub fn encode(&self, w: &mut Vec<u8>) {
                $crate::wire::wire_layout!(@write self w len_at $($item)*);
            }
        }

        $crate::wire::wire_layout!(@field $ty);
    };
    ($ty:ident: $len:ident = $size:expr, { $($item:tt)* }) => {
        impl $ty {
            /// Its length on the wire.
            pub const $len: usize = $size;

            /// Decodes it field by field, in wire order.
            pub fn decode(
                r: &mut $crate::wire::Reader,
            ) -> Result<Self, $crate::error::DecodeError> {
                $crate::wire::wire_layout!(@read r [] $($item)*)
            }

            /// Encodes it field by field, padding as zeros.
            pub fn encode(&self, w: &mut Vec<u8>) {
                let start = w.len();
                $crate::wire::wire_layout!(@write self w len_at $($item)*);
                debug_assert_eq!(w.len() - start, Self::$len, "{} layout", stringify!($ty));
            }
        }

        $crate::wire::wire_layout!(@field $ty Self::$len);
    };
    ($ty:ident: record($at:literal, $what:literal, $fixed:expr) { $($item:tt)* }) => {
        impl $ty {
            /// Bytes before the part whose length varies.
            pub const FIXED_LEN: usize = $fixed;

            /// Decodes one record, checking its length, then its fields in
            /// wire order.
            pub fn decode(
                r: &mut $crate::wire::Reader,
            ) -> Result<Self, $crate::error::DecodeError> {
                let mut s = $crate::wire::record(r, $at, Self::FIXED_LEN, $what)?;
                let r = &mut s;
                $crate::wire::wire_layout!(@read r [] $($item)*)
            }

            /// Encodes it field by field, padding as zeros, then patches
            /// its length.
            pub fn encode(&self, w: &mut Vec<u8>) {
                let start = w.len();
                $crate::wire::wire_layout!(@write self w len_at $($item)*);
                $crate::wire::patch_len(w, len_at, start);
            }
        }

        $crate::wire::wire_layout!(@field $ty);
    };
    (@field $ty:ident $($size:expr)?) => {
        impl $crate::wire::Field for $ty {
            $(const SIZE: Option<usize> = Some($size);)?
            fn read(r: &mut $crate::wire::Reader) -> Result<Self, $crate::error::DecodeError> {
                Self::decode(r)
            }
            fn write(&self, w: &mut Vec<u8>) {
                self.encode(w);
            }
        }
    };
    (@read $r:ident [$($done:ident)*] pad $n:literal $(, $($rest:tt)*)?) => {{
        $r.skip($n)?;
        $crate::wire::wire_layout!(@read $r [$($done)*] $($($rest)*)?)
    }};
    (@read $r:ident [$($done:ident)*] $f:ident: str($n:expr) $(, $($rest:tt)*)?) => {{
        let $f = $crate::wire::decode_fixed_str($r, $n)?;
        $crate::wire::wire_layout!(@read $r [$($done)* $f] $($($rest)*)?)
    }};
    (@read $r:ident [$($done:ident)*] $f:ident: rest $(,)?) => {{
        let $f = $r.rest().to_vec();
        $crate::wire::wire_layout!(@read $r [$($done)* $f])
    }};
    (@read $r:ident [$($done:ident)*] len $(, $($rest:tt)*)?) => {{
        $r.skip(2)?;
        $crate::wire::wire_layout!(@read $r [$($done)*] $($($rest)*)?)
    }};
    (@read $r:ident [$($done:ident)*] $f:ident $(, $($rest:tt)*)?) => {{
        let $f = $crate::wire::Field::read($r)?;
        $crate::wire::wire_layout!(@read $r [$($done)* $f] $($($rest)*)?)
    }};
    (@read $r:ident [$($done:ident)*]) => {
        Ok(Self { $($done),* })
    };
    (@write $s:ident $w:ident $lat:ident pad $n:literal $(, $($rest:tt)*)?) => {
        $crate::wire::Writer::put_zeros($w, $n);
        $crate::wire::wire_layout!(@write $s $w $lat $($($rest)*)?)
    };
    (@write $s:ident $w:ident $lat:ident $f:ident: str($n:expr) $(, $($rest:tt)*)?) => {
        $crate::wire::encode_fixed_str(&$s.$f, $n, $w);
        $crate::wire::wire_layout!(@write $s $w $lat $($($rest)*)?)
    };
    (@write $s:ident $w:ident $lat:ident $f:ident: rest $(,)?) => {
        $crate::wire::Writer::put_bytes($w, &$s.$f);
    };
    (@write $s:ident $w:ident $lat:ident len $(, $($rest:tt)*)?) => {
        let $lat = $crate::wire::len_placeholder($w);
        $crate::wire::wire_layout!(@write $s $w $lat $($($rest)*)?)
    };
    (@write $s:ident $w:ident $lat:ident $f:ident $(, $($rest:tt)*)?) => {
        $crate::wire::Field::write(&$s.$f, $w);
        $crate::wire::wire_layout!(@write $s $w $lat $($($rest)*)?)
    };
    (@write $s:ident $w:ident $lat:ident) => {};
}
pub(crate) use wire_layout;

/// Implements [`Field`] through a type's own `decode` and `encode`.
macro_rules! codec_field {
    ($($ty:ty),*) => {$(
        impl $crate::wire::Field for $ty {
            fn read(r: &mut $crate::wire::Reader) -> Result<Self, $crate::error::DecodeError> {
                Self::decode(r)
            }
            fn write(&self, w: &mut Vec<u8>) {
                self.encode(w);
            }
        }
    )*};
}
pub(crate) use codec_field;

/// Declares a C-like enum of wire numbers (its `repr` type), with the
/// named conversion from a wire number (`None` for one the spec lacks);
/// `as` gives the number back. With `unknown: ERROR, "what";` unknown
/// numbers decode to ERROR (`decoded`), and it is a [`Field`] whose errors
/// point just after the number.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident: $repr:ident, $from:ident {
            $($(#[$vmeta:meta])* $variant:ident = $value:literal,)*
        }
        $(unknown: $err:expr, $what:literal;)?
    ) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
        $(#[$meta])*
        #[repr($repr)]
        pub enum $name {
            $($(#[$vmeta])* $variant = $value,)*
        }

        impl $name {
            /// The value for a wire number, if the spec defines one.
            pub fn $from(v: $repr) -> Option<Self> {
                match v {
                    $($value => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }

        $(
            impl $name {
                /// The value for a wire number read at `at`; an unknown
                /// number is the error the spec gives for it.
                pub fn decoded(v: $repr, at: usize) -> Result<Self, $crate::error::DecodeError> {
                    Self::$from(v).ok_or_else(|| {
                        $crate::error::DecodeError::new($err, at, format!("unknown {} {v}", $what))
                    })
                }
            }

            impl $crate::wire::Field for $name {
                const SIZE: Option<usize> = Some(std::mem::size_of::<$repr>());
                fn read(
                    r: &mut $crate::wire::Reader,
                ) -> Result<Self, $crate::error::DecodeError> {
                    let v = <$repr as $crate::wire::Field>::read(r)?;
                    Self::decoded(v, r.offset())
                }
                fn write(&self, w: &mut Vec<u8>) {
                    $crate::wire::Field::write(&(*self as $repr), w);
                }
            }
        )?
    };
}
pub(crate) use wire_enum;

/// Declares a module of named wire numbers (`OFPxx_*`) of one type.
macro_rules! wire_numbers {
    ($(#[$meta:meta])* pub mod $name:ident: $t:ty { $($(#[$cmeta:meta])* $c:ident = $v:expr,)* }) => {
        $(#[$meta])*
        pub mod $name {
            $($(#[$cmeta])* pub const $c: $t = $v;)*
        }
    };
}
pub(crate) use wire_numbers;

/// A length error at `at` (`BAD_REQUEST/BAD_LEN`) for a structure whose
/// declared length does not fit.
pub(crate) fn bad_len(at: usize, reason: String) -> DecodeError {
    DecodeError::new(OfpError::BadRequest(BadRequestCode::BadLen), at, reason)
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

/// Test helper: `decode` must take all of `body`, and encoding what it
/// gives must give `body` back.
#[cfg(test)]
pub(crate) fn reencodes<T>(
    body: &[u8],
    decode: fn(&mut Reader) -> Result<T, DecodeError>,
    encode: fn(&T, &mut Vec<u8>),
) -> T {
    let mut r = Reader::new(body);
    let v = decode(&mut r).unwrap();
    assert!(r.is_empty(), "{} bytes left undecoded", r.remaining());
    let mut w = Vec::new();
    encode(&v, &mut w);
    assert_eq!(w, body);
    v
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
