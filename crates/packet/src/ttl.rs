//! TTL actions: dec_nw_ttl / set_nw_ttl (IPv4 TTL with an RFC 1624 header
//! checksum update, IPv6 hop limit), dec_mpls_ttl / set_mpls_ttl on the
//! outermost label, and copy_ttl_out / copy_ttl_in between the outermost
//! MPLS label and the next header inwards (the next label, or the IPv4/IPv6
//! header under the bottom-of-stack label, told apart by its version
//! nibble).
//!
//! A decrement that finds a TTL of 0 or 1 returns
//! [`ActionError::InvalidTtl`] and leaves the packet unchanged: the
//! pipeline drops it and may send it to the controller (OFPR_INVALID_TTL),
//! which then sees the TTL the packet arrived with.
//!
//! Each action also has a `*_with_key` form taking a [`FlowKey`] already
//! parsed from the packet (TTL actions never move headers, so one key
//! serves a whole run of them); a key of a packet of another length is
//! refused with [`ActionError::Truncated`]. TTL values are always read from
//! the packet, never from the key.

use crate::checksum;
use crate::ethernet::ethertype;
use crate::flow_key::{field, FlowKey};
use crate::{be16, be32, put16, put32, ActionError};

/// An action's plain form: parses the key from the packet, then runs its
/// `*_with_key` form.
macro_rules! plain_form {
    ($(#[$doc:meta])* $name:ident = $with_key:ident($($arg:ident: $ty:ty)?) -> $ret:ty) => {
        $(#[$doc])*
        pub fn $name(pkt: &mut [u8] $(, $arg: $ty)?) -> Result<$ret, ActionError> {
            let k = FlowKey::parse(pkt);
            $with_key(pkt, &k $(, $arg)?)
        }
    };
}

/// A TTL less one: [`ActionError::InvalidTtl`] for a TTL of 0 or 1.
#[inline]
fn decremented(ttl: u8) -> Result<u8, ActionError> {
    if ttl <= 1 {
        Err(ActionError::InvalidTtl)
    } else {
        Ok(ttl - 1)
    }
}

/// Where the IP TTL of a parsed packet lives.
enum IpTtl {
    V4(usize),
    V6(usize),
}

fn ip_ttl_at(k: &FlowKey) -> Result<IpTtl, ActionError> {
    let l3 = k.l3_offset as usize;
    if k.has(field::IPV4_SRC) {
        Ok(IpTtl::V4(l3))
    } else if k.has(field::IPV6_SRC) {
        Ok(IpTtl::V6(l3))
    } else if k.eth_type == ethertype::IPV4 || k.eth_type == ethertype::IPV6 {
        Err(ActionError::Truncated)
    } else {
        Err(ActionError::MissingHeader)
    }
}

/// Writes an IPv4 TTL at header offset `l3`, updating the checksum.
fn write_ipv4_ttl(pkt: &mut [u8], l3: usize, ttl: u8) {
    let old = be16(pkt, l3 + 8);
    let new = (u16::from(ttl) << 8) | (old & 0xff);
    pkt[l3 + 8] = ttl;
    let c = checksum::update16(be16(pkt, l3 + 10), old, new);
    put16(pkt, l3 + 10, c);
}

fn write_ip_ttl(pkt: &mut [u8], at: &IpTtl, ttl: u8) {
    match *at {
        IpTtl::V4(l3) => write_ipv4_ttl(pkt, l3, ttl),
        IpTtl::V6(l3) => pkt[l3 + 7] = ttl,
    }
}

fn same_len(pkt: &[u8], k: &FlowKey) -> Result<(), ActionError> {
    if pkt.len() == k.packet_len as usize {
        Ok(())
    } else {
        Err(ActionError::Truncated)
    }
}

fn read_ip_ttl(pkt: &[u8], at: &IpTtl) -> u8 {
    match *at {
        IpTtl::V4(l3) => pkt[l3 + 8],
        IpTtl::V6(l3) => pkt[l3 + 7],
    }
}

plain_form! {
    /// OpenFlow dec_nw_ttl. Returns the new TTL.
    dec_nw_ttl = dec_nw_ttl_with_key() -> u8
}

/// [`dec_nw_ttl`] with a key parsed from this packet.
pub fn dec_nw_ttl_with_key(pkt: &mut [u8], k: &FlowKey) -> Result<u8, ActionError> {
    same_len(pkt, k)?;
    let at = ip_ttl_at(k)?;
    let ttl = decremented(read_ip_ttl(pkt, &at))?;
    write_ip_ttl(pkt, &at, ttl);
    Ok(ttl)
}

/// dec_nw_ttl on the IPv4 header at offset `l3` of a frame whose key
/// has its IPv4 addresses there (as [`crate::flow_key::plain_ipv4_dst`]
/// vouches for): the TTL and the header checksum written as
/// [`dec_nw_ttl_with_key`] writes them, without a key. Returns the new
/// TTL; a TTL of 0 or 1 ([`ActionError::InvalidTtl`]) or a header not
/// held whole leaves the frame unchanged.
pub fn dec_ipv4_ttl_at(pkt: &mut [u8], l3: usize) -> Result<u8, ActionError> {
    if pkt.len() < l3.saturating_add(20) {
        return Err(ActionError::Truncated);
    }
    let ttl = decremented(pkt[l3 + 8])?;
    write_ipv4_ttl(pkt, l3, ttl);
    Ok(ttl)
}

plain_form! {
    /// OpenFlow set_nw_ttl.
    set_nw_ttl = set_nw_ttl_with_key(ttl: u8) -> ()
}

/// [`set_nw_ttl`] with a key parsed from this packet.
pub fn set_nw_ttl_with_key(pkt: &mut [u8], k: &FlowKey, ttl: u8) -> Result<(), ActionError> {
    same_len(pkt, k)?;
    let at = ip_ttl_at(k)?;
    write_ip_ttl(pkt, &at, ttl);
    Ok(())
}

fn outer_label(k: &FlowKey) -> Result<usize, ActionError> {
    if k.has(field::MPLS_LABEL) {
        Ok(k.l3_offset as usize)
    } else if ethertype::is_mpls(k.eth_type) {
        Err(ActionError::Truncated)
    } else {
        Err(ActionError::MissingHeader)
    }
}

plain_form! {
    /// OpenFlow dec_mpls_ttl (outermost label). Returns the new TTL.
    dec_mpls_ttl = dec_mpls_ttl_with_key() -> u8
}

/// [`dec_mpls_ttl`] with a key parsed from this packet.
pub fn dec_mpls_ttl_with_key(pkt: &mut [u8], k: &FlowKey) -> Result<u8, ActionError> {
    same_len(pkt, k)?;
    let at = outer_label(k)?;
    let ttl = decremented(pkt[at + 3])?;
    pkt[at + 3] = ttl;
    Ok(ttl)
}

plain_form! {
    /// OpenFlow set_mpls_ttl (outermost label).
    set_mpls_ttl = set_mpls_ttl_with_key(ttl: u8) -> ()
}

/// [`set_mpls_ttl`] with a key parsed from this packet.
pub fn set_mpls_ttl_with_key(pkt: &mut [u8], k: &FlowKey, ttl: u8) -> Result<(), ActionError> {
    same_len(pkt, k)?;
    let at = outer_label(k)?;
    pkt[at + 3] = ttl;
    Ok(())
}

/// The header inside the outermost label.
enum Inner {
    Label(usize),
    V4(usize),
    V6(usize),
}

fn inner_of(pkt: &[u8], at: usize) -> Result<Inner, ActionError> {
    let lse = be32(pkt, at);
    let next = at + 4;
    if lse & 0x100 == 0 {
        return if pkt.len() >= next + 4 {
            Ok(Inner::Label(next))
        } else {
            Err(ActionError::Truncated)
        };
    }
    match pkt.get(next).map(|b| b >> 4) {
        Some(4) => {
            let ok = pkt.get(next..next + 20).is_some_and(|h| {
                h[0] & 0xf >= 5 && pkt.len() >= next + usize::from(h[0] & 0xf) * 4
            });
            if ok {
                Ok(Inner::V4(next))
            } else {
                Err(ActionError::Truncated)
            }
        }
        Some(6) if pkt.len() >= next + 40 => Ok(Inner::V6(next)),
        Some(6) => Err(ActionError::Truncated),
        None => Err(ActionError::Truncated),
        _ => Err(ActionError::MissingHeader),
    }
}

plain_form! {
    /// OpenFlow copy_ttl_out: copies the TTL of the next-to-outermost header
    /// (inner label, or IP under the bottom label) to the outermost label.
    copy_ttl_out = copy_ttl_out_with_key() -> ()
}

/// [`copy_ttl_out`] with a key parsed from this packet.
pub fn copy_ttl_out_with_key(pkt: &mut [u8], k: &FlowKey) -> Result<(), ActionError> {
    same_len(pkt, k)?;
    let at = outer_label(k)?;
    let ttl = match inner_of(pkt, at)? {
        Inner::Label(n) => pkt[n + 3],
        Inner::V4(n) => pkt[n + 8],
        Inner::V6(n) => pkt[n + 7],
    };
    pkt[at + 3] = ttl;
    Ok(())
}

plain_form! {
    /// OpenFlow copy_ttl_in: copies the outermost label's TTL to the
    /// next-to-outermost header (IPv4 checksum updated).
    copy_ttl_in = copy_ttl_in_with_key() -> ()
}

/// [`copy_ttl_in`] with a key parsed from this packet.
pub fn copy_ttl_in_with_key(pkt: &mut [u8], k: &FlowKey) -> Result<(), ActionError> {
    same_len(pkt, k)?;
    let at = outer_label(k)?;
    let ttl = pkt[at + 3];
    match inner_of(pkt, at)? {
        Inner::Label(n) => {
            let v = (be32(pkt, n) & !0xff) | u32::from(ttl);
            put32(pkt, n, v);
        }
        Inner::V4(n) => write_ipv4_ttl(pkt, n, ttl),
        Inner::V6(n) => pkt[n + 7] = ttl,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixup::verify_checksums;
    use crate::testutil::*;

    #[test]
    fn dec_and_set_nw_ttl() {
        let mut p = eth_ipv4_tcp();
        assert_eq!(dec_nw_ttl(&mut p), Ok(63));
        assert_eq!(p[22], 63);
        assert_eq!(verify_checksums(&p), Ok(()));
        for t in [1u8, 0, 255, 2] {
            set_nw_ttl(&mut p, t).unwrap();
            assert_eq!(p[22], t);
            assert_eq!(verify_checksums(&p), Ok(()));
        }
        assert_eq!(dec_nw_ttl(&mut p), Ok(1));
        let before = p.clone();
        assert_eq!(dec_nw_ttl(&mut p), Err(ActionError::InvalidTtl));
        assert_eq!(p, before);
        set_nw_ttl(&mut p, 0).unwrap();
        assert_eq!(dec_nw_ttl(&mut p), Err(ActionError::InvalidTtl));
        // IPv6 hop limit, checksum unaffected.
        let mut p = with_tags(&eth_ipv6_udp(), &[(0x8100, 5)]);
        assert_eq!(dec_nw_ttl(&mut p), Ok(254));
        assert_eq!(FlowKey::parse(&p).ip_ttl, 254);
        assert_eq!(verify_checksums(&p), Ok(()));
        set_nw_ttl(&mut p, 1).unwrap();
        assert_eq!(dec_nw_ttl(&mut p), Err(ActionError::InvalidTtl));
        // Not IP.
        let mut a = eth_arp();
        assert_eq!(dec_nw_ttl(&mut a), Err(ActionError::MissingHeader));
        let mut m = eth_mpls1_ipv4();
        assert_eq!(dec_nw_ttl(&mut m), Err(ActionError::MissingHeader));
        // IPv4 with options.
        let mut o = eth_ipv4_options_udp();
        assert_eq!(dec_nw_ttl(&mut o), Ok(1));
        assert_eq!(verify_checksums(&o), Ok(()));
    }

    #[test]
    fn dec_ipv4_ttl_at_writes_what_dec_nw_ttl_writes() {
        for mut p in [eth_ipv4_tcp(), eth_ipv4_options_udp()] {
            for t in [255u8, 64, 2, 1, 0] {
                set_nw_ttl(&mut p, t).unwrap();
                let mut q = p.clone();
                assert_eq!(dec_ipv4_ttl_at(&mut q, 14), dec_nw_ttl(&mut p));
                assert_eq!(q, p);
            }
        }
        let mut short = eth_ipv4_tcp();
        short.truncate(33);
        let before = short.clone();
        assert_eq!(dec_ipv4_ttl_at(&mut short, 14), Err(ActionError::Truncated));
        assert_eq!(short, before);
    }

    #[test]
    fn mpls_ttl() {
        let mut m = eth_mpls2_ipv4();
        assert_eq!(dec_mpls_ttl(&mut m), Ok(19));
        assert_eq!(FlowKey::parse(&m).mpls_ttl, 19);
        set_mpls_ttl(&mut m, 1).unwrap();
        let before = m.clone();
        assert_eq!(dec_mpls_ttl(&mut m), Err(ActionError::InvalidTtl));
        assert_eq!(m, before);
        let mut p = eth_ipv4_udp();
        assert_eq!(dec_mpls_ttl(&mut p), Err(ActionError::MissingHeader));
        assert_eq!(set_mpls_ttl(&mut p, 3), Err(ActionError::MissingHeader));
    }

    #[test]
    fn copy_ttl_between_labels() {
        let mut m = eth_mpls2_ipv4(); // outer ttl 20, inner ttl 30
        copy_ttl_out(&mut m).unwrap();
        assert_eq!(m[17], 30);
        set_mpls_ttl(&mut m, 5).unwrap();
        copy_ttl_in(&mut m).unwrap();
        assert_eq!(m[21], 5);
        assert_eq!(be32(&m, 18) >> 12, 200); // label untouched
    }

    #[test]
    fn copy_ttl_with_ip() {
        let mut m = eth_mpls1_ipv4(); // label ttl 9, IP ttl 64
        copy_ttl_out(&mut m).unwrap();
        assert_eq!(FlowKey::parse(&m).mpls_ttl, 64);
        set_mpls_ttl(&mut m, 7).unwrap();
        copy_ttl_in(&mut m).unwrap();
        assert_eq!(m[18 + 8], 7);
        // Pop the label and check the IPv4 checksum from scratch.
        let mut b = crate::buffer::PacketBuf::from_slice(&m);
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(verify_checksums(b.as_slice()), Ok(()));
        let mut m6 = eth_mpls1_ipv6(); // label ttl 7, hop limit 255
        copy_ttl_out(&mut m6).unwrap();
        assert_eq!(FlowKey::parse(&m6).mpls_ttl, 255);
        set_mpls_ttl(&mut m6, 33).unwrap();
        copy_ttl_in(&mut m6).unwrap();
        assert_eq!(m6[18 + 7], 33);
        // Not MPLS.
        let mut p = eth_ipv4_udp();
        assert_eq!(copy_ttl_out(&mut p), Err(ActionError::MissingHeader));
        assert_eq!(copy_ttl_in(&mut p), Err(ActionError::MissingHeader));
    }

    #[test]
    fn one_key_serves_a_run_of_ttl_actions() {
        let mut p = eth_mpls1_ipv4(); // label ttl 9, IP ttl 64
        let k = FlowKey::parse(&p);
        assert_eq!(copy_ttl_out_with_key(&mut p, &k), Ok(()));
        assert_eq!(dec_mpls_ttl_with_key(&mut p, &k), Ok(63));
        assert_eq!(dec_mpls_ttl_with_key(&mut p, &k), Ok(62));
        assert_eq!(copy_ttl_in_with_key(&mut p, &k), Ok(()));
        assert_eq!(set_mpls_ttl_with_key(&mut p, &k, 1), Ok(()));
        assert_eq!(
            dec_mpls_ttl_with_key(&mut p, &k),
            Err(ActionError::InvalidTtl)
        );
        let mut b = crate::buffer::PacketBuf::from_slice(&p);
        b.pop_mpls(0x0800).unwrap();
        let mut q = b.into_vec();
        assert_eq!(q[22], 62);
        assert_eq!(verify_checksums(&q), Ok(()));
        let k = FlowKey::parse(&q);
        assert_eq!(dec_nw_ttl_with_key(&mut q, &k), Ok(61));
        assert_eq!(set_nw_ttl_with_key(&mut q, &k, 2), Ok(()));
        assert_eq!(dec_nw_ttl_with_key(&mut q, &k), Ok(1));
        assert_eq!(
            dec_nw_ttl_with_key(&mut q, &k),
            Err(ActionError::InvalidTtl)
        );
        assert_eq!(verify_checksums(&q), Ok(()));
        // A key of another length is refused.
        let mut r = q[..q.len() - 1].to_vec();
        assert_eq!(dec_nw_ttl_with_key(&mut r, &k), Err(ActionError::Truncated));
    }

    #[test]
    fn truncated_never_panics() {
        type Act = fn(&mut [u8]) -> Result<(), ActionError>;
        let acts: [Act; 6] = [
            |p| dec_nw_ttl(p).map(|_| ()),
            |p| set_nw_ttl(p, 9),
            |p| dec_mpls_ttl(p).map(|_| ()),
            |p| set_mpls_ttl(p, 9),
            copy_ttl_out,
            copy_ttl_in,
        ];
        for (name, p) in samples() {
            for n in 0..=p.len() {
                for (i, a) in acts.iter().enumerate() {
                    let mut q = p[..n].to_vec();
                    if a(&mut q).is_err() {
                        assert_eq!(q, &p[..n], "{name} {n} {i}");
                    }
                }
            }
        }
    }
}
