//! TCP header view (RFC 9293) with checksum over the IP pseudo-header.

use crate::checksum;
use crate::{be16, be32, put16, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const OFF_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// Length of the header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Offset of the checksum field.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

/// A view of a TCP segment.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_common!(TcpPacket);

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Checks the fixed header is present and the data offset is sane
    /// (>= 5 words and within the buffer).
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hl {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ)
    }

    /// Acknowledgement number.
    pub fn ack(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK)
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OFF_FLAGS] >> 4) * 4
    }

    /// The 9 flag bits (NS..FIN).
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OFF_FLAGS) & 0x01ff
    }

    /// Window.
    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WINDOW)
    }

    /// Checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    /// Payload after header and options.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// True when the checksum is right; `pseudo` is the pseudo-header sum
    /// (see [`checksum::pseudo_header_v4`]) and the buffer must be exactly
    /// the segment.
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::verify(self.buffer.as_ref(), pseudo)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        crate::put32(self.buffer.as_mut(), field::SEQ, v);
    }

    /// Sets the acknowledgement number.
    pub fn set_ack(&mut self, v: u32) {
        crate::put32(self.buffer.as_mut(), field::ACK, v);
    }

    /// Sets data offset (header length in bytes) and flags.
    pub fn set_header_len_flags(&mut self, len: usize, flags: u16) {
        let v = (((len / 4) as u16 & 0xf) << 12) | (flags & 0x1ff);
        put16(self.buffer.as_mut(), field::OFF_FLAGS, v);
    }

    /// Sets the window.
    pub fn set_window(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::WINDOW, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Recomputes the checksum over the whole buffer plus `pseudo`.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref(), pseudo);
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        let mut b = [0u8; 24];
        let mut t = TcpPacket::new_unchecked(&mut b[..]);
        t.set_src_port(80);
        t.set_dst_port(40000);
        t.set_seq(0x01020304);
        t.set_ack(0x0a0b0c0d);
        t.set_header_len_flags(20, 0x012);
        t.set_window(1000);
        let ph = checksum::pseudo_header_v4([1, 1, 1, 1], [2, 2, 2, 2], 6, 24);
        t.fill_checksum(ph);
        let t = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(t.src_port(), 80);
        assert_eq!(t.dst_port(), 40000);
        assert_eq!(t.seq(), 0x01020304);
        assert_eq!(t.ack(), 0x0a0b0c0d);
        assert_eq!(t.flags(), 0x12);
        assert_eq!(t.window(), 1000);
        assert_eq!(t.urgent(), 0);
        assert_eq!(t.payload().len(), 4);
        assert!(t.verify_checksum(ph));
        assert!(!t.verify_checksum(ph + 1));
        assert_eq!(
            TcpPacket::new_checked(&b[..19]).unwrap_err(),
            Error::Truncated
        );
        b[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
        b[12] = 0x70;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
    }
}
