//! Zero-copy packet header views and in-place rewrites.
//!
//! Each protocol header has its own module holding a typed view over a byte
//! buffer (`Frame<T>` / `Packet<T>` with `T: AsRef<[u8]>`), in the style of
//! smoltcp's `wire` module: each layout is one `header!` table (`view`),
//! `new_checked` validates the length once so that the accessors cannot
//! panic, and setters exist for `T: AsMut<[u8]>`.
//!
//! On top of the views sit:
//! - [`flow_key`]: the fast-path parser that extracts the OpenFlow 1.3 match
//!   fields of a packet (with the exact spec prerequisites) into a fixed-size
//!   [`flow_key::FlowKey`];
//! - [`buffer`]: a packet buffer with headroom, and the push/pop actions;
//! - [`ttl`]: TTL actions (dec/set/copy for IP and MPLS);
//! - [`set_field`]: OpenFlow set-field rewrites that keep every checksum right;
//! - [`fixup`]: from-scratch checksum fill and verification (slow path, tests);
//! - [`parse_for_fuzz`]: the entry point for a fuzz target.
//!
//! Nothing in this crate panics on packet data: views are only built through
//! `new_checked`, and the parser and rewrites treat every length as untrusted.

/// Common constructor boilerplate for a header view type `$name<T>`: the
/// `check_len` method is written by hand in each module.
macro_rules! view_common {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps a buffer without checking its length. Accessors may panic
            /// on a short buffer: use [`Self::new_checked`] on untrusted data.
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            /// Wraps a buffer after checking (once) that every accessor is in
            /// bounds.
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let v = Self::new_unchecked(buffer);
                v.check_len()?;
                Ok(v)
            }

            /// Gives the underlying buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The whole underlying buffer.
            pub fn as_bytes(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    };
}
mod view;

pub mod arp;
pub mod buffer;
pub mod checksum;
pub mod ethernet;
pub mod fixup;
pub mod flow_key;
pub mod huge;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod mpls;
pub mod pbb;
pub mod sctp;
pub mod set_field;
pub mod tcp;
pub mod ttl;
pub mod udp;
pub mod vlan;

mod fuzz;
pub use fuzz::parse_for_fuzz;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testutil;

/// Why a header view could not be built over a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length the header
    /// itself announces).
    Truncated,
    /// A header field holds a value that makes the header unusable
    /// (wrong version, a length field smaller than the fixed header...).
    Malformed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated header"),
            Error::Malformed => f.write_str("malformed header"),
        }
    }
}

impl std::error::Error for Error {}

/// Why a packet action (push/pop, TTL, set-field) could not be applied.
/// The packet is left unchanged when an action fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionError {
    /// The packet lacks the header the action works on (a VLAN pop on an
    /// untagged frame, an MPLS TTL action without MPLS, a set-field whose
    /// OpenFlow prerequisites do not hold...).
    MissingHeader,
    /// The header the action needs is cut short by the end of the packet.
    Truncated,
    /// A TTL action met a TTL of 0 or 1 before decrementing: the pipeline
    /// must drop the packet and may send it to the controller with reason
    /// OFPR_INVALID_TTL.
    InvalidTtl,
    /// The action's argument is not allowed (push_vlan with a TPID other
    /// than 0x8100/0x88a8, push_mpls other than 0x8847/0x8848, push_pbb
    /// other than 0x88e7).
    BadArgument,
}

impl core::fmt::Display for ActionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ActionError::MissingHeader => "packet lacks the header the action needs",
            ActionError::Truncated => "header cut short",
            ActionError::InvalidTtl => "invalid TTL",
            ActionError::BadArgument => "bad action argument",
        })
    }
}

impl std::error::Error for ActionError {}

/// Result of building a header view.
pub type Result<T> = core::result::Result<T, Error>;

/// A 48-bit Ethernet MAC address in wire order.
pub type MacAddr = [u8; 6];

// Byte helpers. Callers guarantee the range is in bounds (views check their
// length in `new_checked`; the parser checks with `get` before calling).
#[inline]
pub(crate) fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
#[inline]
pub(crate) fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
#[inline]
pub(crate) fn put16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn mac_at(b: &[u8], o: usize) -> MacAddr {
    let mut m = [0u8; 6];
    m.copy_from_slice(&b[o..o + 6]);
    m
}
#[inline]
pub(crate) fn addr16_at(b: &[u8], o: usize) -> [u8; 16] {
    let mut m = [0u8; 16];
    m.copy_from_slice(&b[o..o + 16]);
    m
}
