//! UDP header view (RFC 768). A zero checksum over IPv4 means "none"; a
//! computed checksum of zero is sent as 0xffff.

use crate::checksum;
use crate::view::{self, header};

header! {
    /// A view of a UDP datagram.
    pub struct UdpPacket[HEADER_LEN = 8] {
        /// Source port.
        [0] src_port / set_src_port: u16;
        /// Destination port.
        [2] dst_port / set_dst_port: u16;
        /// Length field (header + data).
        [4] len / set_len: u16;
        /// Checksum (0 = none, over IPv4).
        [CHECKSUM_OFFSET = 6] checksum / set_checksum: u16;
    }
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// True when the length field is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Payload after the header (to the end of the buffer).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// True when the checksum is right (or absent, i.e. zero); the buffer
    /// must be exactly the datagram.
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        self.checksum() == 0 || checksum::verify(self.buffer.as_ref(), pseudo)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Recomputes the checksum over the whole buffer plus `pseudo`; a result
    /// of zero is written as 0xffff.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        if view::fill_checksum(self.buffer.as_mut(), CHECKSUM_OFFSET, pseudo) == 0 {
            self.set_checksum(0xffff);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn parse_and_build() {
        let mut b = [0u8; 11];
        b[HEADER_LEN..].copy_from_slice(&[1, 2, 3]);
        let mut u = UdpPacket::new_checked(&mut b[..]).unwrap();
        u.set_src_port(53);
        u.set_dst_port(1234);
        u.set_len(11);
        let ph = checksum::pseudo_header_v4([1, 2, 3, 4], [5, 6, 7, 8], 17, 11);
        u.fill_checksum(ph);
        assert_eq!(&b[..6], &[0, 53, 4, 0xd2, 0, 11]);
        let u = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (53, 1234, 11));
        assert!(u.verify_checksum(ph));
        assert!(!u.verify_checksum(ph + 1));
        assert_eq!(
            UdpPacket::new_checked(&b[..7]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn zero_result_becomes_ffff() {
        // Choose a pseudo sum that makes the computed sum all-ones.
        let mut b = [0u8; 8];
        let mut u = UdpPacket::new_checked(&mut b[..]).unwrap();
        u.fill_checksum(0xffff);
        assert_eq!(u.checksum(), 0xffff);
    }
}
