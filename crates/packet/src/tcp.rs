//! TCP header view (RFC 9293) with checksum over the IP pseudo-header.

use crate::checksum;
use crate::view::{self, header};
use crate::Result;

/// Length of the header without options.
pub const MIN_HEADER_LEN: usize = 20;

header! {
    /// A view of a TCP segment.
    pub struct TcpPacket {
        /// Source port.
        [0] src_port / set_src_port: u16;
        /// Destination port.
        [2] dst_port / set_dst_port: u16;
        /// Sequence number.
        [4] seq / set_seq: u32;
        /// Acknowledgement number.
        [8] ack / set_ack: u32;
        /// Data offset (4 bits), reserved bits and flags (9 bits).
        [12] off_flags / set_off_flags: u16 {
            /// Header length in 32-bit words.
            [12, 4] data_offset: u8;
            /// The 9 flag bits (NS..FIN).
            [0, 9] flags: u16;
        };
        /// Window.
        [14] window / set_window: u16;
        /// Checksum.
        [CHECKSUM_OFFSET = 16] checksum / set_checksum: u16;
        /// Urgent pointer.
        [18] urgent: u16;
    }
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Checks the fixed header is present and the data offset is sane
    /// (>= 5 words and within the buffer).
    pub fn check_len(&self) -> Result<()> {
        view::check_announced_len(self.buffer.as_ref().len(), MIN_HEADER_LEN, || {
            Ok(self.header_len())
        })
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.data_offset()) * 4
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
    /// Sets data offset (header length in bytes) and flags.
    pub fn set_header_len_flags(&mut self, len: usize, flags: u16) {
        let v = (((len / 4) as u16 & 0xf) << 12) | (flags & 0x1ff);
        self.set_off_flags(v);
    }

    /// Recomputes the checksum over the whole buffer plus `pseudo`.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        view::fill_checksum(self.buffer.as_mut(), CHECKSUM_OFFSET, pseudo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

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
        assert_eq!(
            &b[..16],
            &[0, 80, 0x9c, 0x40, 1, 2, 3, 4, 10, 11, 12, 13, 0x50, 0x12, 3, 0xe8]
        );
        let t = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (80, 40000));
        assert_eq!((t.seq(), t.ack()), (0x01020304, 0x0a0b0c0d));
        assert_eq!((t.flags(), t.window(), t.urgent()), (0x12, 1000, 0));
        assert_eq!(t.payload().len(), 4);
        assert!(t.verify_checksum(ph));
        assert!(!t.verify_checksum(ph + 1));
        assert_eq!(
            TcpPacket::new_checked(&b[..19]).err(),
            Some(Error::Truncated)
        );
        b[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&b[..]).err(), Some(Error::Malformed));
        b[12] = 0x70;
        assert_eq!(TcpPacket::new_checked(&b[..]).err(), Some(Error::Truncated));
    }
}
