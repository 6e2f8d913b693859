//! IEEE 802.1Q / 802.1ad VLAN tag view. A tag is the 4 bytes that follow
//! its TPID (0x8100 or 0x88a8, held in the preceding EtherType field): the
//! TCI (PCP, DEI, VID) and the EtherType of what follows. Tags stack: the
//! inner EtherType of one tag is the TPID of the next.

use crate::{be16, put16, Error, Result};

mod field {
    pub const TCI: usize = 0;
    pub const ETHERTYPE: usize = 2;
    pub const PAYLOAD: usize = 4;
}

/// Length of a tag after its TPID.
pub const TAG_LEN: usize = field::PAYLOAD;

/// A view of one VLAN tag (TCI + inner EtherType).
#[derive(Debug, Clone)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

view_common!(VlanTag);

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Checks that the buffer holds a full tag.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < TAG_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The whole tag control information.
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (formerly CFI).
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of the encapsulated payload (or TPID of the next tag).
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Everything after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the whole TCI.
    pub fn set_tci(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::TCI, v);
    }

    /// Sets the PCP (low 3 bits of `v`).
    pub fn set_pcp(&mut self, v: u8) {
        let t = (self.tci() & 0x1fff) | (u16::from(v & 7) << 13);
        self.set_tci(t);
    }

    /// Sets the DEI bit.
    pub fn set_dei(&mut self, v: bool) {
        let t = (self.tci() & !0x1000) | if v { 0x1000 } else { 0 };
        self.set_tci(t);
    }

    /// Sets the VID (low 12 bits of `v`).
    pub fn set_vid(&mut self, v: u16) {
        let t = (self.tci() & 0xf000) | (v & 0x0fff);
        self.set_tci(t);
    }

    /// Sets the inner EtherType.
    pub fn set_ethertype(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::ETHERTYPE, v);
    }
}

/// Parsed form of a VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanRepr {
    /// Priority code point.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id.
    pub vid: u16,
    /// Inner EtherType.
    pub ethertype: u16,
}

impl VlanRepr {
    /// Reads a checked tag.
    pub fn parse<T: AsRef<[u8]>>(t: &VlanTag<T>) -> Self {
        VlanRepr {
            pcp: t.pcp(),
            dei: t.dei(),
            vid: t.vid(),
            ethertype: t.ethertype(),
        }
    }

    /// Writes into a checked tag.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, t: &mut VlanTag<T>) {
        t.set_tci(0);
        t.set_pcp(self.pcp);
        t.set_dei(self.dei);
        t.set_vid(self.vid);
        t.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        // PCP 5, DEI 1, VID 0x123, inner 0x0800
        let b = [0xb1, 0x23, 0x08, 0x00];
        let t = VlanTag::new_checked(&b[..]).unwrap();
        let r = VlanRepr::parse(&t);
        assert_eq!(
            r,
            VlanRepr {
                pcp: 5,
                dei: true,
                vid: 0x123,
                ethertype: 0x0800
            }
        );
        let mut o = [0xffu8; 4];
        r.emit(&mut VlanTag::new_checked(&mut o[..]).unwrap());
        assert_eq!(o, b);
        let mut t = VlanTag::new_checked(&mut o[..]).unwrap();
        t.set_vid(0xfff);
        t.set_pcp(0);
        t.set_dei(false);
        assert_eq!(t.tci(), 0x0fff);
        assert!(VlanTag::new_checked(&b[..3]).is_err());
    }
}
