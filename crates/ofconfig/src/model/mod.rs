//! The capable-switch model (OF-CONFIG 1.2, namespace `urn:onf:config:yang`)
//! over fulmar's datastore: a [`Snapshot`] of the running configuration
//! (plus live state for `get`), rendered as an [`Element`] tree, subtree
//! filters over that tree, and `edit-config` turned into one list of
//! datastore [`Op`]s.
//!
//! Mapping: a logical switch is a bridge (id = bridge name); a port
//! resource is an interface port (resource-id = interface name); a
//! controller's id is its target (`tcp:IP:PORT`), since the datastore keeps
//! no other name; `lost-connection-behavior` is the fail mode. fulmar has no
//! owned certificates or flow tables to configure through OF-CONFIG: those
//! containers are neither shown nor accepted.
//!
//! Queues: a queue resource is one of a port's egress queues (`qos` in the
//! datastore); its resource-id is `PORT:ID` (the port's resource-id and the
//! queue id: fulmar keeps no queue names), `id` the queue id, `port` the
//! port's resource-id. `min-rate`/`max-rate` are tenths of a percent of the
//! port's QoS `max_rate`, as QUEUE_GET_CONFIG gives them (ports report no
//! speed): shown rounded down, left out when the rate or the port's
//! `max_rate` is 0; a value sent back as shown keeps the exact bits/s.
//!
//! Files by concern: [`snapshot`] (what the model shows), [`render`] (the
//! element tree of a snapshot), [`filter`] (subtree filters), [`edit_op`]
//! (what every part of an edit checks first), [`edit`] (`edit-config` into
//! datastore operations) and [`queues`] (the queue resources' part of an
//! edit).

mod edit;
mod edit_op;
mod filter;
mod queues;
mod render;
mod snapshot;

pub use edit::edit_ops;
pub use edit_op::EditOp;
pub use filter::subtree;
pub use render::render;
pub use snapshot::{BridgeSnap, PortLive, Snapshot};

/// The OF-CONFIG 1.2 namespace.
pub const NS: &str = "urn:onf:config:yang";
/// The capable switch's id.
pub const SWITCH_ID: &str = "fulmar";

#[cfg(test)]
mod tests;
