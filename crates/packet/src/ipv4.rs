//! IPv4 header view (RFC 791), options included, with header checksum.

use crate::checksum;
use crate::{be16, put16, Error, Result};

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// Length of the header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Byte offset of the TTL field (used by TTL actions).
pub const TTL_OFFSET: usize = field::TTL;
/// Byte offset of the header checksum.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

/// IP protocol numbers used here.
pub mod protocol {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
}

/// A view of an IPv4 header and what follows.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

view_common!(Ipv4Packet);

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Checks version 4, IHL >= 5, the full header (with options) present and
    /// a total length no smaller than the header. The total length may exceed
    /// the buffer (a truncated capture): `payload` is then cut short.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 4 {
            return Err(Error::Malformed);
        }
        let hl = self.header_len();
        if hl < MIN_HEADER_LEN || usize::from(self.total_len()) < hl {
            return Err(Error::Malformed);
        }
        if b.len() < hl {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// IP version (4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0xf) * 4
    }

    /// Type-of-service byte (DSCP << 2 | ECN).
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// DSCP (6 bits).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// ECN (2 bits).
    pub fn ecn(&self) -> u8 {
        self.tos() & 3
    }

    /// Total length field.
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLG_OFF) & 0x1fff) << 3
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[12], b[13], b[14], b[15]]
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[16], b[17], b[18], b[19]]
    }

    /// Options (between the fixed header and the payload).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }

    /// True when the stored header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(&self.buffer.as_ref()[..self.header_len()], 0)
    }

    /// The payload, bounded by the total length and by the buffer.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = usize::from(self.total_len()).min(b.len());
        &b[self.header_len()..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version 4 and the header length in bytes (a multiple of 4).
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((len / 4) as u8 & 0xf);
    }

    /// Sets the TOS byte.
    pub fn set_tos(&mut self, v: u8) {
        self.buffer.as_mut()[field::TOS] = v;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::IDENT, v);
    }

    /// Sets flags and fragment offset (offset in bytes, multiple of 8).
    pub fn set_frag(&mut self, df: bool, mf: bool, offset: u16) {
        let v = (if df { 0x4000 } else { 0 }) | (if mf { 0x2000 } else { 0 }) | (offset >> 3);
        put16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Sets the TTL (checksum not updated).
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol (checksum not updated).
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, v: [u8; 4]) {
        self.buffer.as_mut()[field::SRC..field::SRC + 4].copy_from_slice(&v);
    }

    /// Sets the destination address.
    pub fn set_dst(&mut self, v: [u8; 4]) {
        self.buffer.as_mut()[field::DST..field::DST + 4].copy_from_slice(&v);
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.buffer.as_ref()[..hl], 0);
        self.set_checksum(c);
    }
}

/// Parsed form of the fixed IPv4 header (options are not represented).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Protocol.
    pub protocol: u8,
    /// TOS byte.
    pub tos: u8,
    /// TTL.
    pub ttl: u8,
    /// Payload length (total length minus 20).
    pub payload_len: u16,
}

impl Ipv4Repr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Self {
        Ipv4Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            tos: p.tos(),
            ttl: p.ttl(),
            payload_len: p.total_len().saturating_sub(p.header_len() as u16),
        }
    }

    /// Writes a 20-byte header (no options, DF clear, ident 0) with its
    /// checksum into a buffer of at least 20 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv4Packet<T>) {
        p.set_header_len(MIN_HEADER_LEN);
        p.set_tos(self.tos);
        p.set_total_len(self.payload_len.saturating_add(MIN_HEADER_LEN as u16));
        p.set_ident(0);
        p.set_frag(false, false, 0);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src(self.src);
        p.set_dst(self.dst);
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real header (from a textbook capture): checksum 0xb861.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn parse_known_header() {
        let p = Ipv4Packet::new_checked(&HDR[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), protocol::UDP);
        assert_eq!(p.src(), [192, 168, 0, 1]);
        assert_eq!(p.dst(), [192, 168, 0, 199]);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 0);
        let mut c = HDR;
        let mut q = Ipv4Packet::new_checked(&mut c[..]).unwrap();
        q.fill_checksum();
        assert_eq!(q.checksum(), 0xb861);
    }

    #[test]
    fn options_and_build() {
        let mut b = [0u8; 28];
        let r = Ipv4Repr {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            protocol: 6,
            tos: 0xb9,
            ttl: 3,
            payload_len: 8,
        };
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        r.emit(&mut p);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), r);
        assert_eq!(p.dscp(), 0xb9 >> 2);
        assert_eq!(p.ecn(), 1);
        // With 4 bytes of options.
        let mut o = [0u8; 24];
        let mut q = Ipv4Packet::new_unchecked(&mut o[..]);
        q.set_header_len(24);
        q.set_total_len(24);
        o[20..24].copy_from_slice(&[0x94, 0x04, 0, 0]);
        let mut q = Ipv4Packet::new_checked(&mut o[..]).unwrap();
        q.fill_checksum();
        assert_eq!(q.options(), &[0x94, 0x04, 0, 0]);
        assert!(q.verify_checksum());
        assert_eq!(
            Ipv4Packet::new_checked(&o[..22]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn malformed() {
        let mut b = HDR;
        b[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
        b[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
        b[0] = 0x45;
        b[3] = 10;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
    }
}
