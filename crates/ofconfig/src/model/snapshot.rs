//! What the model shows: the running configuration and live state of
//! every bridge.

use datastore::{Config, ControllerTarget, FailMode, PortKind, PortQos};

/// One port as the model shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSnap {
    /// Interface name (the resource-id and name).
    pub name: String,
    /// OpenFlow port number.
    pub number: u32,
    /// The port as the switch has it (its configuration bits show in
    /// get-config too, its state and rates in get only); `None` when the
    /// port is not open.
    pub live: Option<PortLive>,
    /// The port's egress queues, if it has any.
    pub qos: Option<PortQos>,
}

/// A port's live state (from the OpenFlow port description).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortLive {
    /// `OFPPC_*` bits.
    pub config: u32,
    /// `OFPPS_*` bits.
    pub state: u32,
    /// kbit/s, 0 when unknown.
    pub curr_speed: u32,
    /// kbit/s, 0 when unknown.
    pub max_speed: u32,
}

/// One controller as the model shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtlSnap {
    /// The target.
    pub target: ControllerTarget,
    /// `(connected, role)`, for `get` only.
    pub live: Option<(bool, String)>,
}

/// One bridge as the model shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeSnap {
    /// Name (the logical switch id).
    pub name: String,
    /// Datapath id.
    pub dpid: u64,
    /// Fail mode.
    pub fail_mode: FailMode,
    /// Controllers in order.
    pub controllers: Vec<CtlSnap>,
    /// Interface ports in number order.
    pub ports: Vec<PortSnap>,
}

/// What get / get-config show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Bridges in configuration order.
    pub bridges: Vec<BridgeSnap>,
}

impl Snapshot {
    /// The configuration part of `config` (patch ports are not resources).
    pub fn from_config(config: &Config) -> Snapshot {
        let bridges = config
            .bridges
            .iter()
            .map(|b| {
                let mut ports: Vec<PortSnap> = b
                    .ports
                    .iter()
                    .filter_map(|p| match &p.kind {
                        PortKind::Interface { name, .. } => Some(PortSnap {
                            name: name.clone(),
                            number: p.number,
                            live: None,
                            qos: b.qos.get(&p.number).cloned(),
                        }),
                        PortKind::Patch { .. } => None,
                    })
                    .collect();
                ports.sort_by_key(|p| p.number);
                BridgeSnap {
                    name: b.name.clone(),
                    dpid: b.dpid,
                    fail_mode: b.fail_mode,
                    controllers: b
                        .controllers
                        .iter()
                        .map(|c| CtlSnap {
                            target: c.target.clone(),
                            live: None,
                        })
                        .collect(),
                    ports,
                }
            })
            .collect();
        Snapshot { bridges }
    }

    pub(super) fn bridge(&self, name: &str) -> Option<&BridgeSnap> {
        self.bridges.iter().find(|b| b.name == name)
    }
}

/// `00:00:00:00:00:00:00:01`.
pub fn dpid_text(dpid: u64) -> String {
    let b = dpid.to_be_bytes();
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `00:00:00:00:00:00:00:01` (also 16 hex digits).
pub fn parse_dpid(s: &str) -> Option<u64> {
    let hex: String = if s.len() == 23 {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 8 || parts.iter().any(|p| p.len() != 2) {
            return None;
        }
        parts.concat()
    } else if s.len() == 16 {
        s.to_string()
    } else {
        return None;
    };
    if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}
