//! SCTP common header view (RFC 9260) with its CRC32c checksum, always
//! recomputed in full over the whole SCTP packet (CRC32c has no cheap
//! incremental form). The CRC is stored least-significant byte first, as
//! RFC 9260 appendix A's reference code does.

use crate::view::header;

header! {
    /// A view of an SCTP packet.
    pub struct SctpPacket[HEADER_LEN = 12] {
        /// Source port.
        [0] src_port / set_src_port: u16;
        /// Destination port.
        [2] dst_port / set_dst_port: u16;
        /// Verification tag.
        [4] verification_tag / set_verification_tag: u32;
        /// The checksum field as stored (4 bytes, wire order).
        [CHECKSUM_OFFSET = 8] checksum_bytes: [u8; 4];
    }
}

/// The CRC32c of an SCTP packet computed with its checksum field taken as
/// zero, in the byte order it is stored on the wire. `data` must hold at
/// least the common header.
fn crc_of(data: &[u8]) -> [u8; 4] {
    let head = &data[..CHECKSUM_OFFSET];
    let crc = crc32c::crc32c(head);
    let crc = crc32c::crc32c_append(crc, &[0, 0, 0, 0]);
    let crc = crc32c::crc32c_append(crc, &data[HEADER_LEN..]);
    crc.to_le_bytes()
}

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// Chunks after the common header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// True when the stored CRC32c matches the buffer (which must be exactly
    /// the SCTP packet).
    pub fn verify_checksum(&self) -> bool {
        crc_of(self.buffer.as_ref()) == self.checksum_bytes()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    /// Recomputes the CRC32c over the whole buffer.
    pub fn fill_checksum(&mut self) {
        let c = crc_of(self.buffer.as_ref());
        self.buffer.as_mut()[CHECKSUM_OFFSET..HEADER_LEN].copy_from_slice(&c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        let mut b = [0u8; 16];
        let mut s = SctpPacket::new_checked(&mut b[..]).unwrap();
        s.set_src_port(5000);
        s.set_dst_port(6000);
        s.set_verification_tag(0xdeadbeef);
        s.fill_checksum();
        assert_eq!(&b[..8], &[0x13, 0x88, 0x17, 0x70, 0xde, 0xad, 0xbe, 0xef]);
        let s = SctpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((s.src_port(), s.dst_port()), (5000, 6000));
        assert_eq!(s.verification_tag(), 0xdeadbeef);
        assert!(s.verify_checksum());
        b[13] = 1;
        assert!(!SctpPacket::new_checked(&b[..]).unwrap().verify_checksum());
        assert!(SctpPacket::new_checked(&b[..11]).is_err());
    }

    #[test]
    fn crc32c_known_vector() {
        // RFC 3720 B.4: 32 bytes of zeros -> CRC32c 0x8a9136aa.
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
        // With the checksum field counted as zero, a 32-byte all-zero SCTP
        // packet stores that CRC least-significant byte first.
        let mut b = [0u8; 32];
        SctpPacket::new_checked(&mut b[..]).unwrap().fill_checksum();
        assert_eq!(&b[8..12], &[0xaa, 0x36, 0x91, 0x8a]);
    }
}
