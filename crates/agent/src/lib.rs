//! fulmar's agent: the controller channels of the switch. It turns
//! OpenFlow 1.3 messages into operations on a [`Switch`] and switch events
//! back into messages; it never touches packets on the fast path.
//!
//! Layers, from the wire inwards:
//!
//! - [`target`]: `tcp:`/`tls:`/`unix:` (active) and
//!   `ptcp:`/`ptls:`/`punix:` (passive) connection strings; [`tls`]:
//!   rustls configuration; [`unix`]: unix socket files and who may use
//!   them.
//! - [`agent`]: the tokio runtime part — listeners, connectors with
//!   backoff, one task per channel shuttling bytes, and the event pump that
//!   fans switch events out to every channel.
//! - [`conn`]: the socket-free protocol state machine of one channel.
//! - [`roles`]: roles and generation ids shared by the channels.
//! - [`packet_in`]: bounded, rate-limited packet-in queues.
//! - [`switch`]: the [`Switch`] trait (ofp types only); [`memory`]: the
//!   in-memory `MemorySwitch` over the pipeline (feature `memory-switch`,
//!   default; the runtime builds the agent without it).
//!
//! Putting it together (what the runtime does):
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use agent::{Agent, AgentConfig, MemorySwitch, MemorySwitchConfig};
//! use std::sync::Arc;
//! let (events_tx, events_rx) = tokio::sync::mpsc::channel(4096);
//! let switch = Arc::new(MemorySwitch::new(MemorySwitchConfig::default(), Some(events_tx)));
//! let agent = Agent::new(switch, AgentConfig::default());
//! agent.spawn_events(events_rx);
//! agent.spawn_housekeeping(std::time::Duration::from_secs(1));
//! let (_addr, listener) = agent.listen(&"ptcp:6653".parse().unwrap()).await?;
//! let mgmt = agent
//!     .listen_unix("/run/fulmar/br0.mgmt".as_ref(), agent::UnixPerms::default())
//!     .await?;
//! let controller = agent.connect("tcp:192.0.2.1:6653".parse().unwrap());
//! // Live reconfiguration: stopping a handle closes its channels.
//! controller.stop();
//! loop {
//!     agent.all_controllers_gone().await;
//!     // Apply agent.fail_mode(): Secure keeps flows and drops misses,
//!     // Standalone turns the datapath into a learning switch.
//!     agent.controllers().any_controller_connected().await;
//!     // Back to OpenFlow control.
//! }
//! # }
//! ```

pub mod agent;
pub mod conn;
pub mod events;
#[cfg(feature = "memory-switch")]
pub mod memory;
pub mod packet_in;
pub mod roles;
pub mod switch;
pub mod target;
#[cfg(test)]
mod testutil;
pub mod tls;
pub mod unix;

pub use agent::{
    Agent, AgentConfig, AgentStats, ChannelHandle, ChannelRole, ChannelStatus, FailMode, ListenAddr,
};
pub use conn::{CloseReason, ConnConfig, Connection};
pub use events::{event_channel, EventReceiver, EventSender, PacketInRefused};
#[cfg(feature = "memory-switch")]
pub use memory::{MemorySwitch, MemorySwitchConfig};
pub use packet_in::{PacketInConfig, PacketInQueues, PacketInStats};
pub use roles::{ConnId, Controllers};
pub use switch::{FlowStatsPage, FlowStatsPos, Switch, SwitchEvent};
pub use target::{Target, Transport};
pub use tls::TlsSettings;
pub use unix::UnixPerms;
