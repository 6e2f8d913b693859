//! Internet (ones-complement) checksums: RFC 1071 sums, the IPv4 and IPv6
//! pseudo-headers used by TCP, UDP and ICMPv6, and RFC 1624 incremental
//! updates for rewrites that change a few words of a covered region.

/// Adds `data` as big-endian 16-bit words to `acc` (no folding). An odd
/// trailing byte is padded with a zero byte, as RFC 1071 says.
pub fn sum(data: &[u8], acc: u64) -> u64 {
    let mut acc = acc;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds a wide accumulator into 16 bits with end-around carry
/// (not complemented).
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The Internet checksum of `data` (complement of the folded sum), seeded
/// with `acc` (for a pseudo-header sum, or 0).
pub fn checksum(data: &[u8], acc: u64) -> u16 {
    !fold(sum(data, acc))
}

/// True when `data` (with its checksum field in place) sums to all-ones, i.e.
/// the stored checksum is right. `acc` seeds the pseudo-header.
pub fn verify(data: &[u8], acc: u64) -> bool {
    fold(sum(data, acc)) == 0xffff
}

/// Sum of the IPv4 pseudo-header (RFC 793/768): addresses, protocol and the
/// upper-layer length.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u32) -> u64 {
    let mut acc = sum(&src, 0);
    acc = sum(&dst, acc);
    acc + u64::from(proto) + u64::from(len)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1): addresses, 32-bit
/// upper-layer length and next header.
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], proto: u8, len: u32) -> u64 {
    let mut acc = sum(src, 0);
    acc = sum(dst, acc);
    acc + u64::from(len >> 16) + u64::from(len & 0xffff) + u64::from(proto)
}

/// RFC 1624 eqn. 3: the new checksum after one covered 16-bit word changes
/// from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
pub fn update16(csum: u16, old: u16, new: u16) -> u16 {
    let acc = u64::from(!csum) + u64::from(!old) + u64::from(new);
    !fold(acc)
}

/// RFC 1624 update for a covered region that changed from `old` to `new`.
/// Both slices have the same length and must start on a 16-bit boundary of
/// the checksummed data (an odd length is padded as in [`sum`]).
pub fn update_bytes(csum: u16, old: &[u8], new: &[u8]) -> u16 {
    // ~HC + sum(~m) + sum(m') == ~HC + (n*0xffff - sum(m)) + sum(m').
    // Summing the complement of each word keeps everything positive.
    let mut acc = u64::from(!csum);
    let mut o = old.chunks(2);
    for c in &mut o {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        acc += u64::from(!w);
    }
    acc = sum(new, acc);
    !fold(acc)
}

/// RFC 1624 update for a change of a 32-bit covered value.
pub fn update32(csum: u16, old: u32, new: u32) -> u16 {
    update_bytes(csum, &old.to_be_bytes(), &new.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: 0001 f203 f4f5 f6f7 sums to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d, 0)), 0xddf2);
        assert_eq!(checksum(&d, 0), !0xddf2);
    }

    #[test]
    fn odd_length_pads() {
        assert_eq!(fold(sum(&[0x12, 0x34, 0x56], 0)), 0x1234 + 0x5600);
    }

    #[test]
    fn incremental_matches_full() {
        let mut d: Vec<u8> = (0u8..40).map(|x| x.wrapping_mul(37)).collect();
        d[10] = 0;
        d[11] = 0;
        let c = checksum(&d, 0);
        d[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(verify(&d, 0));
        for (pos, newv) in [(0usize, 0xffffu16), (4, 0), (20, 0x1234), (38, 0xfffe)] {
            let old = u16::from_be_bytes([d[pos], d[pos + 1]]);
            let cs = u16::from_be_bytes([d[10], d[11]]);
            let n = update16(cs, old, newv);
            d[pos..pos + 2].copy_from_slice(&newv.to_be_bytes());
            d[10..12].copy_from_slice(&n.to_be_bytes());
            assert!(verify(&d, 0), "pos {pos}");
        }
        let old: [u8; 6] = d[24..30].try_into().unwrap();
        let new = [9, 8, 7, 6, 5, 4];
        let cs = u16::from_be_bytes([d[10], d[11]]);
        let n = update_bytes(cs, &old, &new);
        d[24..30].copy_from_slice(&new);
        d[10..12].copy_from_slice(&n.to_be_bytes());
        assert!(verify(&d, 0));
        let cs = u16::from_be_bytes([d[10], d[11]]);
        let n = update32(
            cs,
            u32::from_be_bytes(d[30..34].try_into().unwrap()),
            0xdeadbeef,
        );
        d[30..34].copy_from_slice(&0xdeadbeefu32.to_be_bytes());
        d[10..12].copy_from_slice(&n.to_be_bytes());
        assert!(verify(&d, 0));
    }

    #[test]
    fn pseudo_headers() {
        let v4 = pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 20);
        assert_eq!(v4, 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 6 + 20);
        let mut s = [0u8; 16];
        s[15] = 1;
        let v6 = pseudo_header_v6(&s, &s, 58, 0x1_0002);
        assert_eq!(v6, 1 + 1 + 1 + 2 + 58);
    }
}
