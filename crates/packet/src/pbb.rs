//! IEEE 802.1ah Provider Backbone Bridging I-TAG view. The I-TAG follows
//! EtherType 0x88e7: a 4-byte TCI (I-PCP 3 bits, I-DEI 1, UCA 1, 3 reserved,
//! I-SID 24 bits) and then the customer frame, starting with the customer
//! destination and source MAC addresses (C-DA, C-SA).

use crate::{be32, mac_at, put32, Error, MacAddr, Result};

mod field {
    pub const TCI: usize = 0;
    pub const C_DST: usize = 4;
    pub const C_SRC: usize = 10;
    pub const PAYLOAD: usize = 16;
}

/// Length of the I-TAG TCI.
pub const TCI_LEN: usize = 4;
/// Length of the I-TAG TCI plus the customer addresses.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of an I-TAG and the customer addresses that follow it.
#[derive(Debug, Clone)]
pub struct PbbItag<T: AsRef<[u8]>> {
    buffer: T,
}

view_common!(PbbItag);

impl<T: AsRef<[u8]>> PbbItag<T> {
    /// Checks the TCI and customer addresses are present.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The raw 32-bit TCI.
    pub fn tci(&self) -> u32 {
        be32(self.buffer.as_ref(), field::TCI)
    }

    /// I-PCP (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 29) as u8
    }

    /// I-DEI.
    pub fn dei(&self) -> bool {
        self.tci() & (1 << 28) != 0
    }

    /// Use-customer-addresses bit.
    pub fn uca(&self) -> bool {
        self.tci() & (1 << 27) != 0
    }

    /// Backbone service instance identifier (24 bits).
    pub fn isid(&self) -> u32 {
        self.tci() & 0x00ff_ffff
    }

    /// Customer destination address.
    pub fn c_dst(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), field::C_DST)
    }

    /// Customer source address.
    pub fn c_src(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), field::C_SRC)
    }

    /// What follows the customer addresses (customer EtherType onwards).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PbbItag<T> {
    /// Sets the raw TCI.
    pub fn set_tci(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::TCI, v);
    }

    /// Sets I-PCP (low 3 bits).
    pub fn set_pcp(&mut self, v: u8) {
        let t = (self.tci() & 0x1fff_ffff) | (u32::from(v & 7) << 29);
        self.set_tci(t);
    }

    /// Sets I-DEI.
    pub fn set_dei(&mut self, v: bool) {
        let t = (self.tci() & !(1 << 28)) | if v { 1 << 28 } else { 0 };
        self.set_tci(t);
    }

    /// Sets UCA.
    pub fn set_uca(&mut self, v: bool) {
        let t = (self.tci() & !(1 << 27)) | if v { 1 << 27 } else { 0 };
        self.set_tci(t);
    }

    /// Sets the I-SID (low 24 bits).
    pub fn set_isid(&mut self, v: u32) {
        let t = (self.tci() & 0xff00_0000) | (v & 0x00ff_ffff);
        self.set_tci(t);
    }

    /// Sets the customer destination address.
    pub fn set_c_dst(&mut self, v: MacAddr) {
        self.buffer.as_mut()[field::C_DST..field::C_DST + 6].copy_from_slice(&v);
    }

    /// Sets the customer source address.
    pub fn set_c_src(&mut self, v: MacAddr) {
        self.buffer.as_mut()[field::C_SRC..field::C_SRC + 6].copy_from_slice(&v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        let mut b = [0u8; 18];
        let mut t = PbbItag::new_checked(&mut b[..]).unwrap();
        t.set_pcp(6);
        t.set_dei(true);
        t.set_uca(true);
        t.set_isid(0xabcdef);
        t.set_c_dst([1; 6]);
        t.set_c_src([2; 6]);
        assert_eq!(&b[..4], &[0xd8, 0xab, 0xcd, 0xef]);
        let t = PbbItag::new_checked(&b[..]).unwrap();
        assert_eq!(t.pcp(), 6);
        assert!(t.dei());
        assert!(t.uca());
        assert_eq!(t.isid(), 0xabcdef);
        assert_eq!(t.c_dst(), [1; 6]);
        assert_eq!(t.c_src(), [2; 6]);
        assert_eq!(t.payload().len(), 2);
        assert!(PbbItag::new_checked(&b[..15]).is_err());
    }
}
