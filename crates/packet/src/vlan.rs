//! IEEE 802.1Q / 802.1ad VLAN tag view. A tag is the 4 bytes that follow
//! its TPID (0x8100 or 0x88a8, held in the preceding EtherType field): the
//! TCI (PCP, DEI, VID) and the EtherType of what follows. Tags stack: the
//! inner EtherType of one tag is the TPID of the next.

use crate::view::header;

header! {
    /// A view of one VLAN tag (TCI + inner EtherType).
    pub struct VlanTag[TAG_LEN = 4] {
        /// The whole tag control information.
        [0] tci / set_tci: u16 {
            /// Priority code point (3 bits).
            [13, 3] pcp / set_pcp: u8;
            /// Drop eligible indicator (formerly CFI).
            [12, 1] dei / set_dei: bool;
            /// VLAN identifier (12 bits).
            [0, 12] vid / set_vid: u16;
        };
        /// EtherType of the encapsulated payload (or TPID of the next tag).
        [2] ethertype / set_ethertype: u16;
    }
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Everything after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[TAG_LEN..]
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
        let r = VlanRepr::parse(&VlanTag::new_checked(&b[..]).unwrap());
        let want = VlanRepr {
            pcp: 5,
            dei: true,
            vid: 0x123,
            ethertype: 0x0800,
        };
        assert_eq!(r, want);
        let mut o = [0xffu8; 4];
        r.emit(&mut VlanTag::new_checked(&mut o[..]).unwrap());
        assert_eq!(o, b);
        // Each setter changes its own bits only.
        let mut t = VlanTag::new_checked(&mut o[..]).unwrap();
        t.set_vid(0xfff);
        assert_eq!(t.tci(), 0xbfff);
        t.set_pcp(0);
        t.set_dei(false);
        assert_eq!(t.tci(), 0x0fff);
        assert!(VlanTag::new_checked(&b[..3]).is_err());
    }
}
