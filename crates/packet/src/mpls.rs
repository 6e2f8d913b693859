//! MPLS label stack entry view (RFC 3032): label (20 bits), traffic class
//! (3 bits), bottom-of-stack (1 bit), TTL (8 bits).

use crate::{be32, put32, Error, Result};

/// Length of one label stack entry.
pub const LSE_LEN: usize = 4;

mod field {
    pub const LSE: usize = 0;
    pub const PAYLOAD: usize = 4;
}

/// A view of one MPLS label stack entry.
#[derive(Debug, Clone)]
pub struct MplsLabel<T: AsRef<[u8]>> {
    buffer: T,
}

view_common!(MplsLabel);

impl<T: AsRef<[u8]>> MplsLabel<T> {
    /// Checks that the buffer holds a full entry.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < LSE_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The raw 32-bit entry.
    pub fn raw(&self) -> u32 {
        be32(self.buffer.as_ref(), field::LSE)
    }

    /// Label value (20 bits).
    pub fn label(&self) -> u32 {
        self.raw() >> 12
    }

    /// Traffic class (3 bits).
    pub fn tc(&self) -> u8 {
        ((self.raw() >> 9) & 7) as u8
    }

    /// Bottom of stack.
    pub fn bos(&self) -> bool {
        self.raw() & 0x100 != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.raw() as u8
    }

    /// Everything after this entry.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MplsLabel<T> {
    /// Sets the raw entry.
    pub fn set_raw(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::LSE, v);
    }

    /// Sets the label (low 20 bits of `v`).
    pub fn set_label(&mut self, v: u32) {
        let r = (self.raw() & 0xfff) | ((v & 0xf_ffff) << 12);
        self.set_raw(r);
    }

    /// Sets the traffic class (low 3 bits).
    pub fn set_tc(&mut self, v: u8) {
        let r = (self.raw() & !(7 << 9)) | (u32::from(v & 7) << 9);
        self.set_raw(r);
    }

    /// Sets bottom of stack.
    pub fn set_bos(&mut self, v: bool) {
        let r = (self.raw() & !0x100) | if v { 0x100 } else { 0 };
        self.set_raw(r);
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, v: u8) {
        let r = (self.raw() & !0xff) | u32::from(v);
        self.set_raw(r);
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
        let l = MplsLabel::new_checked(&b[..]).unwrap();
        let r = MplsRepr::parse(&l);
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
        let mut m = MplsLabel::new_checked(&mut o[..]).unwrap();
        m.set_label(0xfffff);
        m.set_tc(0);
        m.set_bos(false);
        m.set_ttl(1);
        assert_eq!(m.raw(), 0xfffff001);
        assert!(MplsLabel::new_checked(&b[..3]).is_err());
    }
}
