//! How a header view states its layout (`header!`): each field once, with
//! its byte offset and type, each bit field once, with its position inside
//! its field, and the fixed length the view checks. The macro writes the
//! accessors; every one is `#[inline]` and indexes the buffer directly: a
//! view checks its length once, in `new_checked`, so that no accessor can go
//! out of bounds.

use crate::{Error, Result};

/// A value stored big-endian at a fixed byte offset of a header.
pub(crate) trait Field: Sized {
    /// Reads the value at `o`; `b` holds it (the view checked its length).
    fn read(b: &[u8], o: usize) -> Self;
    /// Writes the value at `o`.
    fn write(self, b: &mut [u8], o: usize);
}

impl Field for u8 {
    #[inline]
    fn read(b: &[u8], o: usize) -> Self {
        b[o]
    }
    #[inline]
    fn write(self, b: &mut [u8], o: usize) {
        b[o] = self;
    }
}

/// `u16` and `u32`, through the crate's byte helpers.
macro_rules! big_endian_field {
    ($($ty:ty: $read:ident, $write:ident;)*) => {$(
        impl Field for $ty {
            #[inline]
            fn read(b: &[u8], o: usize) -> Self {
                crate::$read(b, o)
            }
            #[inline]
            fn write(self, b: &mut [u8], o: usize) {
                crate::$write(b, o, self);
            }
        }
    )*};
}

big_endian_field! {
    u16: be16, put16;
    u32: be32, put32;
}

/// Addresses: MAC (6 bytes), IPv4 (4), IPv6 (16), in wire order.
impl<const N: usize> Field for [u8; N] {
    #[inline]
    fn read(b: &[u8], o: usize) -> Self {
        let mut m = [0u8; N];
        m.copy_from_slice(&b[o..o + N]);
        m
    }
    #[inline]
    fn write(self, b: &mut [u8], o: usize) {
        b[o..o + N].copy_from_slice(&self);
    }
}

/// A value that a bit field holds or that holds bit fields (through `u32`).
pub(crate) trait Bits: Copy {
    /// Widens to `u32`.
    fn to_u32(self) -> u32;
    /// Narrows from `u32` (the caller masks first).
    fn from_u32(v: u32) -> Self;
}

/// The unsigned integers, which `u32` holds whole.
macro_rules! integer_bits {
    ($($ty:ty),*) => {$(
        impl Bits for $ty {
            #[inline]
            fn to_u32(self) -> u32 {
                u32::from(self)
            }
            #[inline]
            fn from_u32(v: u32) -> Self {
                v as $ty
            }
        }
    )*};
}

integer_bits!(u8, u16, u32);

impl Bits for bool {
    #[inline]
    fn to_u32(self) -> u32 {
        u32::from(self)
    }
    #[inline]
    fn from_u32(v: u32) -> Self {
        v != 0
    }
}

/// The `width` low bits set.
#[inline]
const fn mask(width: u32) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    }
}

/// The `width` bits of `raw` starting `shift` bits from its least
/// significant end.
#[inline]
pub(crate) fn get_bits<R: Bits, V: Bits>(raw: R, shift: u32, width: u32) -> V {
    V::from_u32((raw.to_u32() >> shift) & mask(width))
}

/// `raw` with the bits [`get_bits`] reads replaced by the low `width` bits
/// of `v`; the other bits are kept.
#[inline]
pub(crate) fn with_bits<R: Bits, V: Bits>(raw: R, shift: u32, width: u32, v: V) -> R {
    let m = mask(width) << shift;
    R::from_u32((raw.to_u32() & !m) | ((v.to_u32() << shift) & m))
}

/// Declares a header view `$view<T>` over a buffer `T` (with the
/// constructors of `view_common!`) and its layout, one field a line:
///
/// ```text
/// header! {
///     /// A view of ...
///     pub struct Name[HEADER_LEN = 14] {
///         /// Doc of the field.
///         [offset] getter / setter: type;
///         /// A field whose offset other code needs.
///         [NAME_OFFSET = offset] getter / setter: type;
///         /// A field made of bit fields.
///         [offset] getter / setter: type {
///             /// Doc of the bit field.
///             [shift, width] getter / setter: type;
///         };
///     }
/// }
/// ```
///
/// Setters are optional. A field's type is `u8`, `u16`, `u32` (big-endian)
/// or a byte array (an address, in wire order); a bit field's is `bool` or
/// an unsigned integer, `shift` counting from the least significant bit of
/// its field, and its setter changes only its own bits (the low `width` bits
/// of its argument). `[NAME = offset]` also declares the offset as a
/// `pub const`. With `[HEADER_LEN = 14]` (the header's fixed length, declared
/// as a `pub const`) the view's `check_len` is written here; without, the
/// module writes its own.
macro_rules! header {
    (
        $(#[$sdoc:meta])*
        pub struct $view:ident $([$len_name:ident = $len:literal])? {
            $(
                $(#[$doc:meta])*
                [$($off_name:ident =)? $off:literal] $get:ident $(/ $set:ident)?: $ty:ty $({
                    $(
                        $(#[$bdoc:meta])*
                        [$shift:expr, $width:expr] $bget:ident $(/ $bset:ident)?: $bty:ty;
                    )*
                })?;
            )*
        }
    ) => {
        $(#[$sdoc])*
        #[derive(Debug, Clone)]
        pub struct $view<T: AsRef<[u8]>> {
            buffer: T,
        }

        view_common!($view);

        $(
            #[doc = concat!("Length of the fixed header of [`", stringify!($view), "`].")]
            pub const $len_name: usize = $len;

            impl<T: AsRef<[u8]>> $view<T> {
                #[doc = concat!(
                    "Checks that the buffer holds the whole header (`",
                    stringify!($len_name), "` bytes)."
                )]
                pub fn check_len(&self) -> $crate::Result<()> {
                    if self.buffer.as_ref().len() < $len_name {
                        Err($crate::Error::Truncated)
                    } else {
                        Ok(())
                    }
                }
            }
        )?

        $($(
            #[doc = concat!("Byte offset of [`", stringify!($view), "::", stringify!($get), "`].")]
            pub const $off_name: usize = $off;
        )?)*

        impl<T: AsRef<[u8]>> $view<T> {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $get(&self) -> $ty {
                    <$ty as $crate::view::Field>::read(self.buffer.as_ref(), $off)
                }

                $($(
                    $(#[$bdoc])*
                    #[inline]
                    pub fn $bget(&self) -> $bty {
                        $crate::view::get_bits(self.$get(), $shift, $width)
                    }
                )*)?
            )*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $view<T> {
            $(
                $(
                    #[doc = concat!("Sets [`Self::", stringify!($get), "`].")]
                    #[inline]
                    pub fn $set(&mut self, v: $ty) {
                        $crate::view::Field::write(v, self.buffer.as_mut(), $off)
                    }
                )?

                $($($(
                    #[doc = concat!(
                        "Sets [`Self::", stringify!($bget), "`] (the low ",
                        stringify!($width), " bits of `v`); the rest of [`Self::",
                        stringify!($get), "`] is kept."
                    )]
                    #[inline]
                    pub fn $bset(&mut self, v: $bty) {
                        let r: $ty = $crate::view::with_bits(self.$get(), $shift, $width, v);
                        $crate::view::Field::write(r, self.buffer.as_mut(), $off)
                    }
                )?)*)?
            )*
        }
    };
}
pub(crate) use header;

/// The length check of a header that announces its own length: the first
/// `min` bytes (which hold what `announced` reads) must be present, the
/// announced length valid (`announced` says `Malformed` otherwise) and no
/// smaller than `min`, and the buffer must hold it.
pub(crate) fn check_announced_len(
    have: usize,
    min: usize,
    announced: impl FnOnce() -> Result<usize>,
) -> Result<()> {
    if have < min {
        return Err(Error::Truncated);
    }
    let len = announced()?;
    if len < min {
        return Err(Error::Malformed);
    }
    if have < len {
        return Err(Error::Truncated);
    }
    Ok(())
}

/// Writes into the 16-bit field at `at` of `data` the Internet checksum of
/// `data` seeded with `pseudo` (a pseudo-header sum, or 0), computed with
/// that field zero, and returns it.
#[inline]
pub(crate) fn fill_checksum(data: &mut [u8], at: usize, pseudo: u64) -> u16 {
    crate::put16(data, at, 0);
    let c = crate::checksum::checksum(data, pseudo);
    crate::put16(data, at, c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_read_and_replace_only_their_bits() {
        let raw: u16 = 0b1010_1100_0011_0101;
        assert_eq!(get_bits::<u16, u8>(raw, 13, 3), 0b101);
        assert!(get_bits::<u16, bool>(raw, 2, 1));
        assert_eq!(with_bits(raw, 13, 3, 0b010u8), 0b0100_1100_0011_0101);
        // Bits of `v` beyond the width are dropped, not spilled over.
        assert_eq!(with_bits(raw, 0, 4, 0xffu8), 0b1010_1100_0011_1111);
        assert_eq!(with_bits(raw, 2, 1, false), 0b1010_1100_0011_0001);
        // A field as wide as the word.
        assert_eq!(get_bits::<u32, u32>(u32::MAX, 0, 32), u32::MAX);
        assert_eq!(with_bits(0u32, 0, 32, 0xdead_beefu32), 0xdead_beef);
    }

    #[test]
    fn fields_are_big_endian_at_their_offset() {
        let mut b = [0u8; 8];
        0x0102_0304u32.write(&mut b, 1);
        0x0a0bu16.write(&mut b, 5);
        [9u8, 8].write(&mut b, 6);
        assert_eq!(b, [0, 1, 2, 3, 4, 0x0a, 9, 8]);
        assert_eq!(u32::read(&b, 1), 0x0102_0304);
        assert_eq!(<[u8; 2]>::read(&b, 6), [9, 8]);
        assert_eq!(u8::read(&b, 5), 0x0a);
    }

    #[test]
    fn announced_length() {
        let ok = || Ok(8);
        assert_eq!(check_announced_len(3, 4, ok), Err(Error::Truncated));
        assert_eq!(check_announced_len(6, 4, ok), Err(Error::Truncated));
        assert_eq!(check_announced_len(8, 4, ok), Ok(()));
        assert_eq!(check_announced_len(8, 4, || Ok(2)), Err(Error::Malformed));
        assert_eq!(
            check_announced_len(8, 4, || Err(Error::Malformed)),
            Err(Error::Malformed)
        );
    }
}
