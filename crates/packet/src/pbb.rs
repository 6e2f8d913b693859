//! IEEE 802.1ah Provider Backbone Bridging I-TAG view. The I-TAG follows
//! EtherType 0x88e7: a 4-byte TCI (I-PCP 3 bits, I-DEI 1, UCA 1, 3 reserved,
//! I-SID 24 bits) and then the customer frame, starting with the customer
//! destination and source MAC addresses (C-DA, C-SA).

use crate::view::header;
use crate::MacAddr;

/// Length of the I-TAG TCI.
pub const TCI_LEN: usize = 4;

header! {
    /// A view of an I-TAG and the customer addresses that follow it.
    pub struct PbbItag[HEADER_LEN = 16] {
        /// The raw 32-bit TCI.
        [0] tci / set_tci: u32 {
            /// I-PCP (3 bits).
            [29, 3] pcp / set_pcp: u8;
            /// I-DEI.
            [28, 1] dei / set_dei: bool;
            /// Use-customer-addresses bit.
            [27, 1] uca / set_uca: bool;
            /// Backbone service instance identifier (24 bits).
            [0, 24] isid / set_isid: u32;
        };
        /// Customer destination address.
        [4] c_dst / set_c_dst: MacAddr;
        /// Customer source address.
        [10] c_src / set_c_src: MacAddr;
    }
}

impl<T: AsRef<[u8]>> PbbItag<T> {
    /// What follows the customer addresses (customer EtherType onwards).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        // I-PCP 6, I-DEI, UCA, I-SID 0xabcdef; C-DA 01.., C-SA 02..; 2 more bytes.
        let mut wire = [1u8; 18];
        wire[..4].copy_from_slice(&[0xd8, 0xab, 0xcd, 0xef]);
        wire[10..16].copy_from_slice(&[2; 6]);
        let t = PbbItag::new_checked(&wire[..]).unwrap();
        assert_eq!(
            (t.pcp(), t.dei(), t.uca(), t.isid()),
            (6, true, true, 0xabcdef)
        );
        assert_eq!(
            (t.c_dst(), t.c_src(), t.payload().len()),
            ([1; 6], [2; 6], 2)
        );
        let mut b = [1u8; 18];
        let mut t = PbbItag::new_checked(&mut b[..]).unwrap();
        t.set_tci(0);
        t.set_pcp(6);
        t.set_dei(true);
        t.set_uca(true);
        t.set_isid(0xabcdef);
        t.set_c_src([2; 6]);
        assert_eq!(b, wire);
        assert!(PbbItag::new_checked(&b[..15]).is_err());
    }
}
