//! ARP packet view (RFC 826), for Ethernet hardware and IPv4 protocol
//! addresses only (the only kind OpenFlow matches on).

use crate::view::{self, header};
use crate::{Error, MacAddr, Result};

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

/// ARP operations.
pub mod op {
    /// Request.
    pub const REQUEST: u16 = 1;
    /// Reply.
    pub const REPLY: u16 = 2;
}

header! {
    /// A view of an Ethernet/IPv4 ARP packet.
    pub struct ArpPacket {
        /// Hardware type (1 = Ethernet).
        [0] htype: u16;
        /// Protocol type (0x0800 = IPv4).
        [2] ptype: u16;
        /// Hardware address length (6 in this view).
        [4] hlen: u8;
        /// Protocol address length (4 in this view).
        [5] plen: u8;
        /// Operation.
        [6] op / set_op: u16;
        /// Sender hardware address.
        [8] sha / set_sha: MacAddr;
        /// Sender protocol address (as a number).
        [14] spa / set_spa: u32;
        /// Target hardware address.
        [18] tha / set_tha: MacAddr;
        /// Target protocol address (as a number).
        [24] tpa / set_tpa: u32;
    }
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Checks 28 bytes are present with hardware length 6 and protocol
    /// length 4 (other address sizes are `Malformed` for this view).
    pub fn check_len(&self) -> Result<()> {
        // The 6 bytes up to plen announce the length.
        view::check_announced_len(self.buffer.as_ref().len(), 6, || {
            if self.hlen() == 6 && self.plen() == 4 {
                Ok(PACKET_LEN)
            } else {
                Err(Error::Malformed)
            }
        })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes htype 1, ptype 0x0800, hlen 6, plen 4.
    pub fn set_ethernet_ipv4(&mut self) {
        self.buffer.as_mut()[..6].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        let mut b = [0u8; 28];
        // The view needs hlen/plen set before new_checked accepts it.
        ArpPacket::new_unchecked(&mut b[..]).set_ethernet_ipv4();
        let mut a = ArpPacket::new_checked(&mut b[..]).unwrap();
        a.set_op(op::REPLY);
        a.set_sha([1, 2, 3, 4, 5, 6]);
        a.set_spa(0x0a000001);
        a.set_tha([6, 5, 4, 3, 2, 1]);
        a.set_tpa(0x0a000002);
        let a = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((a.htype(), a.ptype(), a.op()), (1, 0x0800, 2));
        assert_eq!((a.sha(), a.spa()), ([1, 2, 3, 4, 5, 6], 0x0a000001));
        assert_eq!((a.tha(), a.tpa()), ([6, 5, 4, 3, 2, 1], 0x0a000002));
        assert_eq!(&b[14..18], &[10, 0, 0, 1]);
        assert_eq!(
            ArpPacket::new_checked(&b[..27]).err(),
            Some(Error::Truncated)
        );
        b[4] = 8;
        assert_eq!(ArpPacket::new_checked(&b[..]).err(), Some(Error::Malformed));
    }
}
