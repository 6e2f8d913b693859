//! ARP packet view (RFC 826), for Ethernet hardware and IPv4 protocol
//! addresses only (the only kind OpenFlow matches on).

use crate::{be16, be32, mac_at, put16, put32, Error, MacAddr, Result};

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
    pub const END: usize = 28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::END;

/// ARP operations.
pub mod op {
    /// Request.
    pub const REQUEST: u16 = 1;
    /// Reply.
    pub const REPLY: u16 = 2;
}

/// A view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_common!(ArpPacket);

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Checks 28 bytes are present with hardware length 6 and protocol
    /// length 4 (other address sizes are `Malformed` for this view).
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < field::PLEN + 1 {
            return Err(Error::Truncated);
        }
        if b[field::HLEN] != 6 || b[field::PLEN] != 4 {
            return Err(Error::Malformed);
        }
        if b.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Hardware type (1 = Ethernet).
    pub fn htype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HTYPE)
    }

    /// Protocol type (0x0800 = IPv4).
    pub fn ptype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PTYPE)
    }

    /// Operation.
    pub fn op(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPER)
    }

    /// Sender hardware address.
    pub fn sha(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), field::SHA)
    }

    /// Sender protocol address (as a number).
    pub fn spa(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SPA)
    }

    /// Target hardware address.
    pub fn tha(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), field::THA)
    }

    /// Target protocol address (as a number).
    pub fn tpa(&self) -> u32 {
        be32(self.buffer.as_ref(), field::TPA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes htype 1, ptype 0x0800, hlen 6, plen 4.
    pub fn set_ethernet_ipv4(&mut self) {
        let b = self.buffer.as_mut();
        put16(b, field::HTYPE, 1);
        put16(b, field::PTYPE, 0x0800);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
    }

    /// Sets the operation.
    pub fn set_op(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::OPER, v);
    }

    /// Sets the sender hardware address.
    pub fn set_sha(&mut self, v: MacAddr) {
        self.buffer.as_mut()[field::SHA..field::SHA + 6].copy_from_slice(&v);
    }

    /// Sets the sender protocol address.
    pub fn set_spa(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::SPA, v);
    }

    /// Sets the target hardware address.
    pub fn set_tha(&mut self, v: MacAddr) {
        self.buffer.as_mut()[field::THA..field::THA + 6].copy_from_slice(&v);
    }

    /// Sets the target protocol address.
    pub fn set_tpa(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::TPA, v);
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
        assert_eq!(a.htype(), 1);
        assert_eq!(a.ptype(), 0x0800);
        assert_eq!(a.op(), 2);
        assert_eq!(a.sha(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(a.spa(), 0x0a000001);
        assert_eq!(a.tha(), [6, 5, 4, 3, 2, 1]);
        assert_eq!(a.tpa(), 0x0a000002);
        assert_eq!(&b[14..18], &[10, 0, 0, 1]);
        assert_eq!(
            ArpPacket::new_checked(&b[..27]).unwrap_err(),
            Error::Truncated
        );
        b[4] = 8;
        assert_eq!(
            ArpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
    }
}
