//! Ethernet II frame header view: destination, source, EtherType.

use crate::view::header;
use crate::MacAddr;

/// Well-known EtherType values, in the order the parser meets them: tags,
/// labels, then the network layer.
pub mod ethertype {
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (Q-in-Q).
    pub const QINQ: u16 = 0x88a8;

    /// True for the TPIDs of VLAN tags that the parser skips (802.1Q, 802.1ad).
    pub const fn is_vlan(t: u16) -> bool {
        t == VLAN || t == QINQ
    }

    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MC: u16 = 0x8848;

    /// True for the MPLS EtherTypes.
    pub const fn is_mpls(t: u16) -> bool {
        t == MPLS || t == MPLS_MC
    }

    /// IEEE 802.1ah PBB backbone service instance tag (I-TAG).
    pub const PBB: u16 = 0x88e7;
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
}

header! {
    /// A view of an Ethernet II frame.
    pub struct Frame[HEADER_LEN = 14] {
        /// Destination MAC address.
        [0] dst / set_dst: MacAddr;
        /// Source MAC address.
        [6] src / set_src: MacAddr;
        /// EtherType (or TPID of the first VLAN tag).
        [12] ethertype / set_ethertype: u16;
    }
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Everything after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// Parsed form of an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Destination address.
    pub dst: MacAddr,
    /// Source address.
    pub src: MacAddr,
    /// EtherType.
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Reads the header from a checked frame.
    pub fn parse<T: AsRef<[u8]>>(f: &Frame<T>) -> Self {
        EthernetRepr {
            dst: f.dst(),
            src: f.src(),
            ethertype: f.ethertype(),
        }
    }

    /// Writes the header into a checked frame.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut Frame<T>) {
        f.set_dst(self.dst);
        f.set_src(self.src);
        f.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn parse_and_build() {
        let bytes = [
            1, 2, 3, 4, 5, 6, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x08, 0x00, 0xaa, 0xbb,
        ];
        let f = Frame::new_checked(&bytes[..]).unwrap();
        assert_eq!(f.dst(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(f.src(), [0xa, 0xb, 0xc, 0xd, 0xe, 0xf]);
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(f.payload(), &[0xaa, 0xbb]);
        let repr = EthernetRepr::parse(&f);
        let mut out = [0u8; 16];
        let mut g = Frame::new_checked(&mut out[..]).unwrap();
        repr.emit(&mut g);
        g.payload_mut().copy_from_slice(&[0xaa, 0xbb]);
        assert_eq!(out, bytes);
        for n in 0..HEADER_LEN {
            assert_eq!(
                Frame::new_checked(&bytes[..n]).unwrap_err(),
                Error::Truncated
            );
        }
    }
}
