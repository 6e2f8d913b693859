//! fulmar's agent: the controller channels of the switch. It turns
//! OpenFlow 1.3 messages into operations on a [`Switch`] and switch events
//! back into messages; it never touches packets on the fast path.
//!
//! Layers, from the wire inwards:
//!
//! - [`target`]: `tcp:`/`tls:` (active) and `ptcp:`/`ptls:` (passive)
//!   connection strings; [`tls`]: rustls configuration.
//! - [`agent`]: the tokio runtime part — listeners, connectors with
//!   backoff, one task per channel shuttling bytes, and the event pump that
//!   fans switch events out to every channel.
//! - [`conn`]: the socket-free protocol state machine of one channel.
//! - [`roles`]: roles and generation ids shared by the channels.
//! - [`packet_in`]: bounded, rate-limited packet-in queues.
//! - [`switch`]: the [`Switch`] trait and the in-memory [`MemorySwitch`].

pub mod agent;
pub mod conn;
pub mod packet_in;
pub mod roles;
pub mod switch;
pub mod target;
pub mod tls;

pub use agent::{Agent, AgentConfig, AgentStats, FailMode};
pub use conn::{CloseReason, ConnConfig, Connection};
pub use packet_in::{PacketInConfig, PacketInQueues, PacketInStats};
pub use roles::{ConnId, Controllers};
pub use switch::{MemorySwitch, MemorySwitchConfig, Switch, SwitchEvent};
pub use target::{Target, Transport};
pub use tls::TlsSettings;
