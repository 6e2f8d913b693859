//! UDP header view (RFC 768). A zero checksum over IPv4 means "none"; a
//! computed checksum of zero is sent as 0xffff.

use crate::checksum;
use crate::{be16, put16, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// Header length.
pub const HEADER_LEN: usize = 8;
/// Offset of the checksum field.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

/// A view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_common!(UdpPacket);

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Checks the 8-byte header is present.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field (header + data).
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// True when the length field is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checksum (0 = none, over IPv4).
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
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
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Recomputes the checksum over the whole buffer plus `pseudo`; a result
    /// of zero is written as 0xffff.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref(), pseudo);
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        let mut b = [0u8; 11];
        let mut u = UdpPacket::new_checked(&mut b[..]).unwrap();
        u.set_src_port(53);
        u.set_dst_port(1234);
        u.set_len(11);
        u.payload_check();
        let ph = checksum::pseudo_header_v4([1, 2, 3, 4], [5, 6, 7, 8], 17, 11);
        u.fill_checksum(ph);
        let u = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(u.src_port(), 53);
        assert_eq!(u.dst_port(), 1234);
        assert_eq!(u.len(), 11);
        assert!(u.verify_checksum(ph));
        assert!(!u.verify_checksum(ph + 1));
        assert_eq!(
            UdpPacket::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
    }

    impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
        fn payload_check(&mut self) {
            let n = self.buffer.as_mut().len();
            self.buffer.as_mut()[HEADER_LEN..n].copy_from_slice(&[1, 2, 3]);
        }
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
