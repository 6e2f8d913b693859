//! OpenFlow 1.3 (wire version 0x04, spec 1.3.5): every message, both
//! directions, decoded from and encoded to bytes.
//!
//! Decoding never panics; a malformed message yields a [`DecodeError`]
//! naming the OpenFlow error type and code the switch must answer with.
//! Encoding is byte-exact: `encode(decode(b)) == b` for every well-formed
//! message (padding written as zeros).

pub mod action;
pub mod consts;
pub mod error;
pub mod flow_mod;
pub mod group_mod;
pub mod instruction;
pub mod meter_mod;
pub mod multipart;
pub mod oxm;
pub mod port;
pub mod stats;
#[cfg(any(test, feature = "proptest"))]
pub mod strategies;
pub mod table_features;
pub mod wire;

pub use action::Action;
pub use error::{DecodeError, OfpError};
pub use flow_mod::{FlowMod, FlowModCommand};
pub use group_mod::{Bucket, GroupMod, GroupModCommand, GroupType};
pub use instruction::Instruction;
pub use meter_mod::{MeterBand, MeterMod, MeterModCommand};
pub use oxm::{MacAddr, Match, Oxm, OxmField, OxmValue};
pub use port::Port;

/// Serializes opaque bytes as a lowercase hex string in JSON output.
pub fn serde_hex<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&HexBytes(bytes))
}

/// Displays bytes as lowercase hex without separators.
pub struct HexBytes<'a>(pub &'a [u8]);

impl std::fmt::Display for HexBytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}
