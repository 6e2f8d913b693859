//! ICMPv4 header view (RFC 792): type, code, checksum over the whole
//! message, and the 4 "rest of header" bytes.

use crate::checksum;
use crate::{be16, put16, Error, Result};

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: usize = 4;
}

/// Length of type, code and checksum.
pub const MIN_LEN: usize = field::REST;
/// Offset of the checksum field.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

/// A view of an ICMPv4 message.
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

view_common!(Icmpv4Packet);

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Checks type, code and checksum are present.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < MIN_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Everything after the checksum.
    pub fn rest(&self) -> &[u8] {
        &self.buffer.as_ref()[field::REST..]
    }

    /// True when the checksum over the whole buffer is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    /// Sets the code.
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Recomputes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref(), 0);
        self.set_checksum(c);
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
