//! OpenFlow 1.3 (wire version 0x04, spec 1.3.5): every message, both
//! directions, decoded from and encoded to bytes.
//!
//! Decoding never panics; a malformed message yields a [`DecodeError`]
//! naming the OpenFlow error type and code the switch must answer with.
//! Encoding is byte-exact: `encode(decode(b)) == b` for every well-formed
//! message (padding written as zeros).

pub mod action;
pub mod async_config;
pub mod channel;
pub mod consts;
pub mod echo;
pub mod error;
pub mod error_msg;
pub mod flow_mod;
pub mod flow_removed;
pub mod framer;
pub mod group_mod;
pub mod header;
pub mod hello;
pub mod instruction;
pub mod message;
pub mod meter_mod;
pub mod multipart;
pub mod oxm;
pub mod packet_in;
pub mod packet_out;
pub mod port;
pub mod port_status;
pub mod queue_config;
pub mod reply_parts;
pub mod role;
pub mod stats;
#[cfg(any(test, feature = "proptest"))]
pub mod strategies;
pub mod switch_config;
pub mod table_features;
pub mod table_mod;
pub mod wire;

pub use action::Action;
pub use async_config::AsyncConfig;
pub use echo::{Echo, Experimenter};
pub use error::{DecodeError, OfpError};
pub use error_msg::ErrorMsg;
pub use flow_mod::{FlowMod, FlowModCommand};
pub use flow_removed::FlowRemoved;
pub use framer::Framer;
pub use group_mod::{Bucket, GroupMod, GroupModCommand, GroupType};
pub use header::Header;
pub use hello::{Hello, HelloElement};
pub use instruction::Instruction;
pub use message::Message;
pub use meter_mod::{MeterBand, MeterMod, MeterModCommand};
pub use oxm::{MacAddr, Match, Oxm, OxmField, OxmValue};
pub use packet_in::PacketIn;
pub use packet_out::PacketOut;
pub use port::Port;
pub use port_status::{PortMod, PortStatus};
pub use queue_config::{PacketQueue, QueueGetConfigReply, QueueGetConfigRequest, QueueProperty};
pub use role::Role;
pub use switch_config::{FeaturesReply, SwitchConfig};
pub use table_mod::TableMod;

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
