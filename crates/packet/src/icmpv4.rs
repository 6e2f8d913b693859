//! ICMPv4 header view (RFC 792): type, code, checksum over the whole
//! message, and the 4 "rest of header" bytes.

use crate::checksum;
use crate::view::{self, header};

header! {
    /// A view of an ICMPv4 message.
    pub struct Icmpv4Packet[MIN_LEN = 4] {
        /// Message type.
        [0] msg_type / set_msg_type: u8;
        /// Message code.
        [1] code / set_code: u8;
        /// Checksum (over the whole message).
        [CHECKSUM_OFFSET = 2] checksum / set_checksum: u16;
    }
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Everything after the checksum.
    pub fn rest(&self) -> &[u8] {
        &self.buffer.as_ref()[MIN_LEN..]
    }

    /// True when the checksum over the whole buffer is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Recomputes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        view::fill_checksum(self.buffer.as_mut(), CHECKSUM_OFFSET, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        // Echo request id 1 seq 1 "ab".
        let mut b = [8u8, 0, 0, 0, 0, 1, 0, 1, b'a', b'b'];
        let mut p = Icmpv4Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.msg_type(), 8);
        assert_eq!(p.code(), 0);
        assert_eq!(p.rest(), &[0, 1, 0, 1, b'a', b'b']);
        p.set_msg_type(0);
        assert!(!p.verify_checksum());
        assert!(Icmpv4Packet::new_checked(&b[..3]).is_err());
    }
}
