//! IPv4 header view (RFC 791), options included, with header checksum.

use crate::checksum;
use crate::view::{self, header};
use crate::{Error, Result};

/// Length of the header without options.
pub const MIN_HEADER_LEN: usize = 20;

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

header! {
    /// A view of an IPv4 header and what follows.
    pub struct Ipv4Packet {
        /// Version (4 bits) and IHL (4 bits).
        [0] ver_ihl / set_ver_ihl: u8 {
            /// IP version (4).
            [4, 4] version: u8;
            /// Internet header length in 32-bit words.
            [0, 4] ihl: u8;
        };
        /// Type-of-service byte (DSCP << 2 | ECN).
        [1] tos / set_tos: u8 {
            /// DSCP (6 bits).
            [2, 6] dscp: u8;
            /// ECN (2 bits).
            [0, 2] ecn: u8;
        };
        /// Total length field.
        [2] total_len / set_total_len: u16;
        /// Identification.
        [4] ident / set_ident: u16;
        /// Flags (3 bits) and fragment offset (13 bits, in units of 8 bytes).
        [6] flags_frag / set_flags_frag: u16 {
            /// Don't-fragment flag.
            [14, 1] dont_frag: bool;
            /// More-fragments flag.
            [13, 1] more_frags: bool;
        };
        /// Time to live (a setter leaves the checksum as it is).
        [TTL_OFFSET = 8] ttl / set_ttl: u8;
        /// Protocol of the payload (a setter leaves the checksum as it is).
        [9] protocol / set_protocol: u8;
        /// Header checksum.
        [CHECKSUM_OFFSET = 10] checksum / set_checksum: u16;
        /// Source address.
        [12] src / set_src: [u8; 4];
        /// Destination address.
        [16] dst / set_dst: [u8; 4];
    }
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Checks version 4, IHL >= 5, the full header (with options) present and
    /// a total length no smaller than the header. The total length may exceed
    /// the buffer (a truncated capture): `payload` is then cut short.
    pub fn check_len(&self) -> Result<()> {
        view::check_announced_len(self.buffer.as_ref().len(), MIN_HEADER_LEN, || {
            let hl = self.header_len();
            if self.version() != 4 || usize::from(self.total_len()) < hl {
                Err(Error::Malformed)
            } else {
                Ok(hl)
            }
        })
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & 0x1fff) << 3
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
        self.set_ver_ihl(0x40 | ((len / 4) as u8 & 0xf));
    }

    /// Sets flags and fragment offset (offset in bytes, multiple of 8).
    pub fn set_frag(&mut self, df: bool, mf: bool, offset: u16) {
        let v = (if df { 0x4000 } else { 0 }) | (if mf { 0x2000 } else { 0 }) | (offset >> 3);
        self.set_flags_frag(v);
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        view::fill_checksum(&mut self.buffer.as_mut()[..hl], CHECKSUM_OFFSET, 0);
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
