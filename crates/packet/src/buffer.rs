//! A packet buffer with headroom, and the OpenFlow 1.3 push/pop actions
//! (push_vlan/pop_vlan, push_mpls/pop_mpls, push_pbb/pop_pbb).
//!
//! Why headroom: every push inserts bytes near the front of the packet and
//! every pop removes bytes there. [`PacketBuf`] keeps the packet at
//! `data[start..]` inside a `Vec<u8>` with free space before `start`, so a
//! push moves only the few header bytes that precede the insertion point
//! (12 to ~30 bytes) into the headroom, and a pop moves them forward; the
//! payload never moves. Only when the headroom runs out does a push
//! reallocate (once, adding [`DEFAULT_HEADROOM`] more).
//!
//! Field initialisation follows OpenFlow 1.3.5 §5.12 (table "existing
//! fields that may be copied into new fields"): a new tag takes its values
//! from the existing outermost tag of the same kind, else zero:
//! - push_vlan: VID and PCP from the outer VLAN tag if any, else 0 (DEI 0).
//!   The tag goes right after the Ethernet addresses, before other tags.
//! - push_mpls: label, TC and TTL from the outer MPLS label if any (BOS 0);
//!   otherwise label 0, TC 0, BOS 1 and the TTL from the IPv4 TTL / IPv6
//!   hop limit (0 if not IP). The label goes after the Ethernet header and
//!   VLAN tags, and the EtherType there becomes the action's EtherType.
//!   (OpenFlow 1.3 §5.12 words it as "immediately after the Ethernet header
//!   and before other tags"; read literally that would put the VLAN tag
//!   inside the MPLS payload, which no receiver can parse, so VLAN tags are
//!   treated as part of the Ethernet header here, as 802.1Q does and as
//!   the Linux/OVS datapath push_mpls does.)
//! - push_pbb: a backbone header is inserted after the Ethernet addresses:
//!   EtherType 0x88e7, an I-TAG with I-SID from an existing I-TAG (else 0)
//!   and I-PCP from the outer VLAN PCP (else 0), then C-DA/C-SA copied from
//!   the frame's addresses. The outer (backbone) addresses keep their
//!   values until the controller sets them; existing VLAN tags now belong to
//!   the customer frame.
//! - pop_vlan removes the outer tag; pop_mpls removes the outer label and
//!   writes the action's EtherType; pop_pbb removes the backbone addresses,
//!   any backbone VLAN tags and the I-TAG, leaving the customer frame.
//!
//! A frame never leaves shorter than it may: if the buffer was made from a
//! frame of Ethernet's minimum size ([`MIN_FRAME_LEN`], 60 bytes without
//! the FCS) or more, and pops left it shorter, [`PacketBuf::pad_to_floor`]
//! appends zeros up to 60 when the frame is emitted (output, packet-in),
//! as an 802.1Q bridge pads a frame that untagging leaves too short. So a
//! 60-byte MPLS/IPv4/ICMP echo popped and sent leaves as a 60-byte IPv4
//! frame (os-ken's switch tests expect this), not 56 bytes. The padding is
//! added at emission, not by the pop, so pop-then-push in one action list
//! gives the same bytes whichever order of steps reaches them (and the
//! fused gateway rewrites of the datapath, which never change the length,
//! agree with the step-by-step path). A frame that arrived shorter
//! (possible on veth or TAP ports) is never padded, and push-then-pop
//! gives back exactly the frame it started from.

use crate::ethernet::ethertype;
use crate::flow_key::{field, FlowKey};
use crate::{be16, be32, put16, put32, ActionError};

/// Headroom given to a new buffer (and added when a push runs out).
pub const DEFAULT_HEADROOM: usize = 64;

/// Ethernet's minimum frame length, without the frame check sequence.
pub const MIN_FRAME_LEN: usize = 60;

/// The length pops pad a frame of `len` bytes back to.
fn floor_of(len: usize) -> usize {
    if len >= MIN_FRAME_LEN {
        MIN_FRAME_LEN
    } else {
        0
    }
}

/// A packet in a `Vec<u8>` with headroom in front (see the module comment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketBuf {
    data: Vec<u8>,
    start: usize,
    /// The shortest the packet may leave: [`MIN_FRAME_LEN`] if the buffer
    /// was made from a frame at least that long, else 0.
    floor: usize,
}

impl PacketBuf {
    /// Copies `pkt` into a new buffer with `headroom` bytes in front.
    pub fn with_headroom(pkt: &[u8], headroom: usize) -> Self {
        let mut data = Vec::with_capacity(headroom + pkt.len());
        data.resize(headroom, 0);
        data.extend_from_slice(pkt);
        PacketBuf {
            data,
            start: headroom,
            floor: floor_of(pkt.len()),
        }
    }

    /// Copies `pkt` into a new buffer with [`DEFAULT_HEADROOM`].
    pub fn from_slice(pkt: &[u8]) -> Self {
        Self::with_headroom(pkt, DEFAULT_HEADROOM)
    }

    /// Takes a vector holding a packet (no headroom: the first push
    /// reallocates).
    pub fn from_vec(v: Vec<u8>) -> Self {
        let floor = floor_of(v.len());
        PacketBuf {
            data: v,
            start: 0,
            floor,
        }
    }

    /// The packet bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.data[self.start..]
    }

    /// The packet bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data[self.start..]
    }

    /// Packet length.
    pub fn len(&self) -> usize {
        self.data.len() - self.start
    }

    /// True for an empty packet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free bytes in front of the packet.
    pub fn headroom(&self) -> usize {
        self.start
    }

    /// The packet as a vector (moves the bytes down if there is headroom).
    pub fn into_vec(mut self) -> Vec<u8> {
        self.data.drain(..self.start);
        self.data
    }

    /// Appends zeros up to the shortest length the frame may leave with
    /// (see the module comment): call it when the frame is emitted.
    pub fn pad_to_floor(&mut self) {
        if self.len() < self.floor {
            self.data.resize(self.start + self.floor, 0);
        }
    }

    /// The length the frame leaves with once padded ([`Self::pad_to_floor`]).
    pub fn padded_len(&self) -> usize {
        self.len().max(self.floor)
    }

    /// The storage and the offset of the packet in it (`start <= len`),
    /// so another buffer type can take the bytes over without copying.
    pub fn into_raw_parts(self) -> (Vec<u8>, usize) {
        (self.data, self.start)
    }

    /// Opens `n` bytes at packet offset `at` (`at <= len`) by moving the
    /// first `at` bytes into the headroom; returns the gap's range in the
    /// packet.
    fn open_gap(&mut self, at: usize, n: usize) -> core::ops::Range<usize> {
        if self.start < n {
            let extra = n + DEFAULT_HEADROOM;
            let mut v = Vec::with_capacity(self.data.len() + extra);
            v.resize(extra, 0);
            v.extend_from_slice(&self.data);
            self.data = v;
            self.start += extra;
        }
        let s = self.start;
        self.data.copy_within(s..s + at, s - n);
        self.start = s - n;
        at..at + n
    }

    /// Removes `n` bytes at packet offset `at` (`at + n <= len`) by moving
    /// the first `at` bytes forward.
    fn close_gap(&mut self, at: usize, n: usize) {
        let s = self.start;
        self.data.copy_within(s..s + at, s + n);
        self.start = s + n;
    }

    /// OpenFlow push_vlan: pushes a new outermost tag with TPID `tpid`
    /// (0x8100 or 0x88a8).
    pub fn push_vlan(&mut self, tpid: u16) -> Result<(), ActionError> {
        if !ethertype::is_vlan(tpid) {
            return Err(ActionError::BadArgument);
        }
        let p = self.as_slice();
        if p.len() < 14 {
            return Err(ActionError::Truncated);
        }
        let tci = if ethertype::is_vlan(be16(p, 12)) && p.len() >= 16 {
            be16(p, 14) & 0xefff // VID and PCP; DEI starts clear
        } else {
            0
        };
        let g = self.open_gap(12, 4);
        let b = self.as_mut_slice();
        put16(b, g.start, tpid);
        put16(b, g.start + 2, tci);
        Ok(())
    }

    /// OpenFlow pop_vlan: removes the outermost tag.
    pub fn pop_vlan(&mut self) -> Result<(), ActionError> {
        let p = self.as_slice();
        if p.len() < 14 || !ethertype::is_vlan(be16(p, 12)) {
            return Err(if p.len() < 14 {
                ActionError::Truncated
            } else {
                ActionError::MissingHeader
            });
        }
        if p.len() < 18 {
            return Err(ActionError::Truncated);
        }
        self.close_gap(12, 4);
        Ok(())
    }

    /// OpenFlow push_mpls: pushes a new outermost label; `ethertype` is
    /// 0x8847 or 0x8848.
    pub fn push_mpls(&mut self, ethertype: u16) -> Result<(), ActionError> {
        let k = FlowKey::parse(self.as_slice());
        self.push_mpls_with_key(ethertype, &k)
    }

    /// [`PacketBuf::push_mpls`] with the packet's key already parsed (`k`
    /// must describe the current bytes).
    pub fn push_mpls_with_key(&mut self, ethertype: u16, k: &FlowKey) -> Result<(), ActionError> {
        if !ethertype::is_mpls(ethertype) {
            return Err(ActionError::BadArgument);
        }
        if k.packet_len as usize != self.len() {
            return Err(ActionError::Truncated);
        }
        if !k.has(field::ETH_TYPE) {
            return Err(ActionError::Truncated);
        }
        let lse = if k.has(field::MPLS_LABEL) {
            // Copy label, TC and TTL from the current outer label; BOS 0.
            be32(self.as_slice(), k.l3_offset as usize) & !0x100
        } else {
            let ttl = if k.has(field::IPV4_SRC) || k.has(field::IPV6_SRC) {
                k.ip_ttl
            } else {
                0
            };
            0x100 | u32::from(ttl)
        };
        let et_off = k.ethertype_offset as usize;
        let g = self.open_gap(et_off + 2, 4);
        let b = self.as_mut_slice();
        put32(b, g.start, lse);
        put16(b, et_off, ethertype);
        Ok(())
    }

    /// OpenFlow pop_mpls: removes the outermost label and sets the
    /// EtherType to `ethertype`.
    pub fn pop_mpls(&mut self, ethertype: u16) -> Result<(), ActionError> {
        let k = FlowKey::parse(self.as_slice());
        self.pop_mpls_with_key(ethertype, &k)
    }

    /// [`PacketBuf::pop_mpls`] with the packet's key already parsed (`k`
    /// must describe the current bytes).
    pub fn pop_mpls_with_key(&mut self, ethertype: u16, k: &FlowKey) -> Result<(), ActionError> {
        if k.packet_len as usize != self.len() {
            return Err(ActionError::Truncated);
        }
        if !k.has(field::MPLS_LABEL) {
            return Err(
                if k.has(field::ETH_TYPE) && !ethertype::is_mpls(k.eth_type) {
                    ActionError::MissingHeader
                } else {
                    ActionError::Truncated
                },
            );
        }
        let et_off = k.ethertype_offset as usize;
        self.close_gap(et_off + 2, 4);
        // The EtherType moved 4 bytes forward with the bytes before it.
        put16(self.as_mut_slice(), et_off, ethertype);
        Ok(())
    }

    /// OpenFlow push_pbb: encapsulates the frame behind a backbone header;
    /// `ethertype` must be 0x88e7.
    pub fn push_pbb(&mut self, ethertype: u16) -> Result<(), ActionError> {
        if ethertype != ethertype::PBB {
            return Err(ActionError::BadArgument);
        }
        let k = FlowKey::parse(self.as_slice());
        if self.len() < 14 {
            return Err(ActionError::Truncated);
        }
        let isid = if k.has(field::PBB_ISID) {
            k.pbb_isid
        } else {
            0
        };
        let pcp = if k.has(field::VLAN_PCP) {
            k.vlan_pcp
        } else {
            0
        };
        let tci = (u32::from(pcp & 7) << 29) | (isid & 0x00ff_ffff);
        let g = self.open_gap(12, 18);
        let b = self.as_mut_slice();
        put16(b, g.start, ethertype::PBB);
        put32(b, g.start + 2, tci);
        b.copy_within(0..12, g.start + 6);
        Ok(())
    }

    /// OpenFlow pop_pbb: removes the backbone header, leaving the customer
    /// frame (C-DA, C-SA, ...).
    pub fn pop_pbb(&mut self) -> Result<(), ActionError> {
        let k = FlowKey::parse(self.as_slice());
        if !k.has(field::PBB_ISID) {
            return Err(if k.has(field::ETH_TYPE) && k.eth_type != ethertype::PBB {
                ActionError::MissingHeader
            } else {
                ActionError::Truncated
            });
        }
        let itag_end = k.l3_offset as usize + 4;
        if self.len() < itag_end + 14 {
            return Err(ActionError::Truncated);
        }
        self.close_gap(0, itag_end);
        Ok(())
    }

    /// Takes over `data` without copying: the packet is `data[start..]`
    /// and the bytes before it are headroom (a `start` past the end gives
    /// an empty packet). The floor ([`Self::pad_to_floor`]) is set from
    /// the packet's length, as the copying constructors do. The inverse of
    /// [`Self::into_raw_parts`].
    pub fn from_raw_parts(data: Vec<u8>, start: usize) -> Self {
        let start = start.min(data.len());
        let floor = floor_of(data.len() - start);
        PacketBuf { data, start, floor }
    }
}

impl AsRef<[u8]> for PacketBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsMut<[u8]> for PacketBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixup::verify_checksums;
    use crate::testutil::*;

    #[test]
    fn raw_parts_keep_headroom_and_bytes() {
        let mut b = PacketBuf::with_headroom(&[1, 2, 3], 8);
        b.as_mut_slice()[0] = 9;
        let (v, start) = b.into_raw_parts();
        assert_eq!((start, &v[start..]), (8, &[9, 2, 3][..]));
    }

    #[test]
    fn push_vlan_untagged_and_tagged() {
        let p = eth_ipv4_tcp();
        let mut b = PacketBuf::from_slice(&p);
        let room = b.headroom();
        b.push_vlan(0x8100).unwrap();
        assert_eq!(b.headroom(), room - 4);
        assert_eq!(b.as_slice(), &with_tags(&p, &[(0x8100, 0)])[..]);
        let k = FlowKey::parse(b.as_slice());
        assert_eq!(k.vlan_vid, 0x1000);
        assert!(k.has(field::TCP_SRC));
        assert_eq!(verify_checksums(b.as_slice()), Ok(()));
        // Push over a tag copies VID and PCP (not DEI).
        let t = with_tags(&p, &[(0x8100, 0xb123)]);
        let mut b = PacketBuf::from_slice(&t);
        b.push_vlan(0x88a8).unwrap();
        assert_eq!(
            b.as_slice(),
            &with_tags(&p, &[(0x88a8, 0xa123), (0x8100, 0xb123)])[..]
        );
        b.pop_vlan().unwrap();
        assert_eq!(b.as_slice(), &t[..]);
        b.pop_vlan().unwrap();
        assert_eq!(b.as_slice(), &p[..]);
        assert_eq!(b.pop_vlan(), Err(ActionError::MissingHeader));
        assert_eq!(b.push_vlan(0x0800), Err(ActionError::BadArgument));
        assert_eq!(b.as_slice(), &p[..]);
    }

    #[test]
    fn push_mpls_initialisation() {
        // From IPv4: label 0, BOS, TTL from IP (64).
        let p = eth_ipv4_udp();
        let mut b = PacketBuf::from_slice(&p);
        b.push_mpls(0x8847).unwrap();
        let k = FlowKey::parse(b.as_slice());
        assert_eq!(k.eth_type, 0x8847);
        assert_eq!(
            (k.mpls_label, k.mpls_tc, k.mpls_bos, k.mpls_ttl),
            (0, 0, 1, 64)
        );
        assert_eq!(&b.as_slice()[18..], &p[14..]);
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(b.as_slice(), &p[..]);
        // From IPv6: hop limit 255.
        let mut b = PacketBuf::from_slice(&eth_ipv6_udp());
        b.push_mpls(0x8848).unwrap();
        let k = FlowKey::parse(b.as_slice());
        assert_eq!((k.eth_type, k.mpls_bos, k.mpls_ttl), (0x8848, 1, 255));
        // Over MPLS: copy label/TC/TTL, BOS 0.
        let m = eth_mpls2_ipv4();
        let mut b = PacketBuf::from_slice(&m);
        b.push_mpls(0x8847).unwrap();
        let k = FlowKey::parse(b.as_slice());
        assert_eq!(
            (k.mpls_label, k.mpls_tc, k.mpls_bos, k.mpls_ttl),
            (100, 3, 0, 20)
        );
        assert_eq!(&b.as_slice()[18..], &m[14..]);
        b.pop_mpls(0x8847).unwrap();
        assert_eq!(b.as_slice(), &m[..]);
        // Non-IP: TTL 0. ARP.
        let mut b = PacketBuf::from_slice(&eth_arp());
        b.push_mpls(0x8847).unwrap();
        assert_eq!(FlowKey::parse(b.as_slice()).mpls_ttl, 0);
        // Behind VLAN tags.
        let v = with_tags(&eth_ipv4_udp(), &[(0x8100, 0x0064)]);
        let mut b = PacketBuf::from_slice(&v);
        b.push_mpls(0x8847).unwrap();
        let k = FlowKey::parse(b.as_slice());
        assert_eq!((k.vlan_vid, k.eth_type, k.l3_offset), (0x1064, 0x8847, 18));
        assert_eq!(&b.as_slice()[..16], &v[..16]);
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(b.as_slice(), &v[..]);
        assert_eq!(b.pop_mpls(0x0800), Err(ActionError::MissingHeader));
        assert_eq!(b.push_mpls(0x0800), Err(ActionError::BadArgument));
    }

    #[test]
    fn pop_mpls_to_ip_is_parseable() {
        let mut b = PacketBuf::from_slice(&eth_mpls1_ipv4());
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(b.padded_len(), 60);
        b.pad_to_floor();
        // 56 bytes of frame, padded back to the 60 the frame had.
        let want = eth_ipv4_udp();
        assert_eq!(&b.as_slice()[..want.len()], &want[..]);
        assert_eq!(b.as_slice()[want.len()..], [0; 4]);
        assert_eq!(verify_checksums(b.as_slice()), Ok(()));
    }

    #[test]
    fn push_pop_pbb() {
        let p = with_tags(&eth_ipv4_udp(), &[(0x8100, 0xa005)]);
        let mut b = PacketBuf::from_slice(&p);
        b.push_pbb(0x88e7).unwrap();
        let s = b.as_slice();
        assert_eq!(s.len(), p.len() + 18);
        assert_eq!(&s[..12], &p[..12]);
        assert_eq!(be16(s, 12), 0x88e7);
        assert_eq!(be32(s, 14), 5 << 29); // I-PCP from the VLAN PCP, I-SID 0
        assert_eq!(&s[18..30], &p[..12]); // C-DA, C-SA
        assert_eq!(&s[30..], &p[12..]); // the customer's tags and payload
        let k = FlowKey::parse(s);
        assert_eq!((k.eth_type, k.pbb_isid, k.vlan_vid), (0x88e7, 0, 0));
        b.pop_pbb().unwrap();
        assert_eq!(b.as_slice(), &p[..]);
        // Push over PBB copies the I-SID.
        let q = eth_pbb();
        let mut b = PacketBuf::from_slice(&q);
        b.push_pbb(0x88e7).unwrap();
        assert_eq!(FlowKey::parse(b.as_slice()).pbb_isid, 0x0abcde);
        b.pop_pbb().unwrap();
        assert_eq!(b.as_slice(), &q[..]);
        b.pop_pbb().unwrap();
        assert_eq!(b.as_slice()[..12], [[0xc1u8; 6], [0xc2; 6]].concat()[..]);
        assert_eq!(b.len(), 56);
        b.pad_to_floor();
        // The 56-byte customer frame, padded to Ethernet's 60.
        let inner = eth_ipv4_udp();
        assert_eq!(&b.as_slice()[12..inner.len()], &inner[12..]);
        assert_eq!(b.as_slice()[inner.len()..], [0; 4]);
        assert_eq!(b.pop_pbb(), Err(ActionError::MissingHeader));
        assert_eq!(b.push_pbb(0x8100), Err(ActionError::BadArgument));
    }

    #[test]
    fn headroom_runs_out_and_grows() {
        let p = eth_ipv4_tcp();
        let mut b = PacketBuf::from_vec(p.clone());
        assert_eq!(b.headroom(), 0);
        for _ in 0..30 {
            b.push_vlan(0x8100).unwrap();
        }
        assert_eq!(b.len(), p.len() + 120);
        for _ in 0..30 {
            b.pop_vlan().unwrap();
        }
        assert_eq!(b.clone().into_vec(), p);
        assert!(!b.is_empty());
    }

    /// Emission pads a frame that was at least 60 bytes and lost bytes to
    /// a pop back to 60, and leaves a runt or a frame still long enough
    /// alone; pop-then-push is not padded in between.
    #[test]
    fn pops_keep_the_ethernet_minimum() {
        // Ethernet/MPLS/IPv4/ICMP echo, 54 bytes and 6 of padding.
        let icmp: Vec<u8> = [
            &[0x22; 6][..],
            &[
                0x12, 0x11, 0x11, 0x11, 0x11, 0x11, 0x88, 0x47, 0x00, 0x06, 0x47, 0x40,
            ],
            &[0x45, 0x20, 0x00, 0x24, 0, 0, 0, 0, 0x40, 0x01, 0xdb, 0x4a],
            &[
                192, 168, 10, 10, 192, 168, 20, 20, 8, 0, 0x59, 0xda, 0, 0, 0, 0,
            ],
            &[
                0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 0, 0, 0, 0, 0,
            ],
        ]
        .concat();
        assert_eq!(icmp.len(), MIN_FRAME_LEN);
        let mut b = PacketBuf::from_slice(&icmp);
        b.pop_mpls(0x0800).unwrap();
        assert_eq!(b.len(), 56);
        let mut again = b.clone();
        again.push_vlan(0x8100).unwrap();
        again.pad_to_floor();
        assert_eq!(again.len(), MIN_FRAME_LEN);
        b.pad_to_floor();
        assert_eq!(b.len(), MIN_FRAME_LEN);
        assert_eq!(b.as_slice()[12..14], [0x08, 0x00]);
        assert_eq!(b.as_slice()[14..56], icmp[18..60]);
        assert_eq!(b.as_slice()[56..], [0; 4]);
        assert_eq!(verify_checksums(b.as_slice()), Ok(()));
        // A frame that arrived shorter is not padded.
        let mut r = PacketBuf::from_slice(&icmp[..56]);
        r.pop_mpls(0x0800).unwrap();
        r.pad_to_floor();
        assert_eq!(r.as_slice(), &b.as_slice()[..52]);
        let mut r = PacketBuf::from_slice(&icmp[..56]);
        r.push_vlan(0x8100).unwrap();
        r.pop_vlan().unwrap();
        assert_eq!(r.as_slice(), &icmp[..56]);
        // Long enough after the pop: nothing appended.
        let t = with_tags(&eth_ipv4_tcp(), &[(0x8100, 0x0064)]);
        let mut v = PacketBuf::from_slice(&t);
        v.pop_vlan().unwrap();
        v.pad_to_floor();
        assert_eq!(v.len(), t.len() - 4);
    }

    #[test]
    fn truncated_prefixes_never_panic() {
        type Act = fn(&mut PacketBuf) -> Result<(), ActionError>;
        let acts: [Act; 6] = [
            |b| b.push_vlan(0x8100),
            |b| b.pop_vlan(),
            |b| b.push_mpls(0x8847),
            |b| b.pop_mpls(0x0800),
            |b| b.push_pbb(0x88e7),
            |b| b.pop_pbb(),
        ];
        for (name, p) in samples() {
            for n in 0..=p.len() {
                for (i, act) in acts.iter().enumerate() {
                    let mut b = PacketBuf::from_slice(&p[..n]);
                    match act(&mut b) {
                        // A failed action leaves the packet alone.
                        Err(_) => assert_eq!(b.as_slice(), &p[..n], "{name} {n} {i}"),
                        Ok(()) => assert!(n >= 14, "{name} {n} {i}"),
                    }
                }
            }
        }
    }

    #[test]
    fn from_raw_parts_adopts_storage_and_sets_the_floor_like_a_copy() {
        // A tagged minimum-size frame: after the tag is popped it leaves
        // padded back to 60.
        let mut t = with_tags(&eth_ipv4_tcp(), &[(0x8100, 5)]);
        t.truncate(MIN_FRAME_LEN);
        let mut v = vec![0u8; 16];
        v.extend_from_slice(&t);
        let p = v.as_ptr();
        let mut adopted = PacketBuf::from_raw_parts(v, 16);
        assert_eq!((adopted.headroom(), adopted.as_slice()), (16, &t[..]));
        assert_eq!(adopted.as_slice().as_ptr(), p.wrapping_add(16), "no copy");
        let mut copied = PacketBuf::with_headroom(&t, 16);
        for b in [&mut adopted, &mut copied] {
            b.pop_vlan().unwrap();
            b.pad_to_floor();
        }
        assert_eq!(adopted.as_slice(), copied.as_slice());
        assert_eq!(adopted.len(), MIN_FRAME_LEN);
        assert_eq!(adopted.into_raw_parts().1, 20);
        // A runt keeps no floor; a start past the end is an empty packet.
        let mut short = PacketBuf::from_raw_parts(vec![0, 0, 1, 2, 3], 2);
        assert_eq!(short.as_slice(), &[1, 2, 3]);
        short.pad_to_floor();
        assert_eq!(short.len(), 3);
        assert!(PacketBuf::from_raw_parts(vec![1, 2], 5).is_empty());
    }
}
