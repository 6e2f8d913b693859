//! MPLS label stack entry view (RFC 3032): label (20 bits), traffic class
//! (3 bits), bottom-of-stack (1 bit), TTL (8 bits).

use crate::view::header;

header! {
    /// A view of one MPLS label stack entry.
    pub struct MplsLabel[LSE_LEN = 4] {
        /// The raw 32-bit entry.
        [0] raw / set_raw: u32 {
            /// Label value (20 bits).
            [12, 20] label / set_label: u32;
            /// Traffic class (3 bits).
            [9, 3] tc / set_tc: u8;
            /// Bottom of stack.
            [8, 1] bos / set_bos: bool;
            /// Time to live.
            [0, 8] ttl / set_ttl: u8;
        };
    }
}

impl<T: AsRef<[u8]>> MplsLabel<T> {
    /// Everything after this entry.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[LSE_LEN..]
    }
}

/// Parsed form of a label stack entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MplsRepr {
    /// Label.
    pub label: u32,
    /// Traffic class.
    pub tc: u8,
    /// Bottom of stack.
    pub bos: bool,
    /// TTL.
    pub ttl: u8,
}

impl MplsRepr {
    /// Reads a checked entry.
    pub fn parse<T: AsRef<[u8]>>(l: &MplsLabel<T>) -> Self {
        MplsRepr {
            label: l.label(),
            tc: l.tc(),
            bos: l.bos(),
            ttl: l.ttl(),
        }
    }

    /// The 32-bit wire encoding.
    pub fn to_raw(&self) -> u32 {
        ((self.label & 0xf_ffff) << 12)
            | (u32::from(self.tc & 7) << 9)
            | if self.bos { 0x100 } else { 0 }
            | u32::from(self.ttl)
    }

    /// Writes into a checked entry.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, l: &mut MplsLabel<T>) {
        l.set_raw(self.to_raw());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        // label 0x12345, tc 5, bos 1, ttl 64
        let b = [0x12, 0x34, 0x5b, 0x40];
        let r = MplsRepr::parse(&MplsLabel::new_checked(&b[..]).unwrap());
        assert_eq!(
            r,
            MplsRepr {
                label: 0x12345,
                tc: 5,
                bos: true,
                ttl: 64
            }
        );
        let mut o = [0u8; 4];
        r.emit(&mut MplsLabel::new_checked(&mut o[..]).unwrap());
        assert_eq!(o, b);
        // Each setter changes its own bits only.
        let mut m = MplsLabel::new_checked(&mut o[..]).unwrap();
        m.set_label(0xfffff);
        assert_eq!(m.raw(), 0xfffffb40);
        m.set_tc(0);
        m.set_bos(false);
        m.set_ttl(1);
        assert_eq!(m.raw(), 0xfffff001);
        assert!(MplsLabel::new_checked(&b[..3]).is_err());
    }
}
