//! ICMPv6 header view (RFC 4443) with checksum over the IPv6 pseudo-header,
//! and Neighbor Discovery (RFC 4861) helpers: the target address of
//! Neighbor Solicitation/Advertisement and their source/target link-layer
//! address options.

use crate::checksum;
use crate::view::{self, header};
use crate::{addr16_at, MacAddr};

/// Offset of the ND target address in NS/NA.
pub const ND_TARGET_OFFSET: usize = 8;
/// Length of NS/NA up to the options.
pub const ND_MIN_LEN: usize = 24;

/// ICMPv6 message types used here.
pub mod msg_type {
    /// Neighbor Solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor Advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
}

/// ND option types.
pub mod nd_option {
    /// Source link-layer address.
    pub const SOURCE_LL_ADDR: u8 = 1;
    /// Target link-layer address.
    pub const TARGET_LL_ADDR: u8 = 2;
}

header! {
    /// A view of an ICMPv6 message.
    pub struct Icmpv6Packet[MIN_LEN = 4] {
        /// Message type.
        [0] msg_type / set_msg_type: u8;
        /// Message code.
        [1] code / set_code: u8;
        /// Checksum (over the message and the IPv6 pseudo-header).
        [CHECKSUM_OFFSET = 2] checksum / set_checksum: u16;
    }
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// True for NS or NA.
    pub fn is_nd(&self) -> bool {
        matches!(
            self.msg_type(),
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT
        )
    }

    /// The ND target address, for NS/NA messages long enough to hold it.
    pub fn nd_target(&self) -> Option<[u8; 16]> {
        let b = self.buffer.as_ref();
        if self.is_nd() && b.len() >= ND_MIN_LEN {
            Some(addr16_at(b, ND_TARGET_OFFSET))
        } else {
            None
        }
    }

    /// Offset (in this message) of the link-layer address carried by the
    /// first ND option of type `opt` (1 = source, 2 = target) with room for
    /// a 6-byte address, for NS/NA only. The option walk stops at a
    /// zero-length option (malformed per RFC 4861) or at the end.
    pub fn nd_lladdr_offset(&self, opt: u8) -> Option<usize> {
        let b = self.buffer.as_ref();
        if !self.is_nd() {
            return None;
        }
        let mut off = ND_MIN_LEN;
        while let Some(&[t, l]) = b.get(off..off + 2) {
            let len = usize::from(l) * 8;
            if len == 0 || off + len > b.len() {
                return None;
            }
            if t == opt {
                return Some(off + 2);
            }
            off += len;
        }
        None
    }

    /// The link-layer address of the first ND option of type `opt`.
    pub fn nd_lladdr(&self, opt: u8) -> Option<MacAddr> {
        let o = self.nd_lladdr_offset(opt)?;
        let b = self.buffer.as_ref().get(o..o + 6)?;
        let mut m = [0u8; 6];
        m.copy_from_slice(b);
        Some(m)
    }

    /// True when the checksum is right given the pseudo-header sum (see
    /// [`checksum::pseudo_header_v6`]); the buffer must be exactly the
    /// message.
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::verify(self.buffer.as_ref(), pseudo)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Recomputes the checksum over the whole buffer plus `pseudo`.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        view::fill_checksum(self.buffer.as_mut(), CHECKSUM_OFFSET, pseudo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns() -> Vec<u8> {
        let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        // An unknown option (type 14, 8 bytes) then SLL.
        m.extend_from_slice(&[14, 1, 0, 0, 0, 0, 0, 0]);
        m.extend_from_slice(&[1, 1, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf]);
        m
    }

    #[test]
    fn nd_fields() {
        let mut m = ns();
        let p = Icmpv6Packet::new_checked(&m[..]).unwrap();
        assert!(p.is_nd());
        assert_eq!(p.nd_target().unwrap()[15], 1);
        assert_eq!(
            p.nd_lladdr(nd_option::SOURCE_LL_ADDR),
            Some([0xa, 0xb, 0xc, 0xd, 0xe, 0xf])
        );
        assert_eq!(p.nd_lladdr(nd_option::TARGET_LL_ADDR), None);
        assert_eq!(p.nd_lladdr_offset(1), Some(34));
        // Zero-length option stops the walk.
        m[33] = 0;
        m[25] = 0;
        let p = Icmpv6Packet::new_checked(&m[..]).unwrap();
        assert_eq!(p.nd_lladdr(nd_option::SOURCE_LL_ADDR), None);
        // Not ND: no target.
        m[0] = 128;
        assert_eq!(Icmpv6Packet::new_checked(&m[..]).unwrap().nd_target(), None);
        // Truncated options never panic.
        let m = ns();
        for n in 0..m.len() {
            if let Ok(p) = Icmpv6Packet::new_checked(&m[..n]) {
                let _ = p.nd_lladdr(1);
                let _ = p.nd_target();
            }
        }
    }

    #[test]
    fn checksum_roundtrip() {
        let mut m = ns();
        let s = [1u8; 16];
        let d = [2u8; 16];
        let ph = checksum::pseudo_header_v6(&s, &d, 58, m.len() as u32);
        let mut p = Icmpv6Packet::new_checked(&mut m[..]).unwrap();
        p.fill_checksum(ph);
        assert!(p.verify_checksum(ph));
        p.set_code(1);
        assert!(!p.verify_checksum(ph));
    }
}
