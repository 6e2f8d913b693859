//! The local copy of the monitored part of the database: what the
//! `monitor` reply gave and every `update` since (RFC 7047 sections 4.1.5
//! and 4.1.6), table by table, row by row.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// The database this module works on.
pub const DB: &str = "Open_vSwitch";

/// The Bridge columns fulmar does not support but reports (as ignored)
/// when set.
pub const BRIDGE_UNSUPPORTED: &[&str] = &[
    "stp_enable",
    "rstp_enable",
    "mcast_snooping_enable",
    "mirrors",
    "netflow",
    "sflow",
    "ipfix",
];

/// The monitored tables and columns: `(table, columns, unsupported)`:
/// what fulmar reads (the configuration) or writes back (to see what is
/// already there), then the columns it does not support but reports when
/// set.
pub const MONITORED: &[(&str, &[&str], &[&str])] = &[
    ("Open_vSwitch", &["bridges", "next_cfg", "cur_cfg"], &[]),
    (
        "Bridge",
        &[
            "name",
            "ports",
            "controller",
            "fail_mode",
            "other_config",
            "datapath_id",
            "status",
        ],
        BRIDGE_UNSUPPORTED,
    ),
    (
        "Port",
        &[
            "name",
            "interfaces",
            "tag",
            "trunks",
            "vlan_mode",
            "bond_mode",
            "qos",
        ],
        &[],
    ),
    ("QoS", &["type", "other_config", "queues"], &[]),
    ("Queue", &["other_config"], &[]),
    (
        "Interface",
        &[
            "name",
            "type",
            "options",
            "ofport_request",
            "ofport",
            "error",
            "link_state",
            "admin_state",
            "statistics",
            "mtu_request",
            "mac",
            "ingress_policing_rate",
            "bfd",
        ],
        &[],
    ),
    (
        "Controller",
        &["target", "is_connected", "role", "status"],
        &[],
    ),
    ("Manager", &["target"], &[]),
];

/// The id our monitor's updates carry.
pub const MONITOR_ID: &str = "fulmar";

/// The `monitor` parameters.
pub fn monitor_params() -> Value {
    let mut reqs = Map::new();
    for (table, cols, unsupported) in MONITORED {
        let cols: Vec<&str> = cols.iter().chain(*unsupported).copied().collect();
        reqs.insert(table.to_string(), json!({ "columns": cols }));
    }
    json!([DB, MONITOR_ID, reqs])
}

/// One row: column name → JSON datum.
pub type Row = Map<String, Value>;

/// The rows of each monitored table by UUID.
#[derive(Clone, Debug, Default)]
pub struct Replica {
    /// table → uuid → row.
    pub tables: BTreeMap<String, BTreeMap<String, Row>>,
}

/// An update that is not RFC 7047's shape.
#[derive(Debug, PartialEq, Eq)]
pub struct UpdateError(pub String);

impl Replica {
    /// The rows of `table`.
    pub fn rows(&self, table: &str) -> impl Iterator<Item = (&String, &Row)> {
        self.tables.get(table).into_iter().flat_map(|t| t.iter())
    }

    /// One row.
    pub fn row(&self, table: &str, uuid: &str) -> Option<&Row> {
        self.tables.get(table)?.get(uuid)
    }

    /// Applies `<table-updates>` (the monitor reply or an update's second
    /// parameter). Checked whole before anything changes: a malformed
    /// update changes nothing.
    pub fn apply(&mut self, updates: &Value) -> Result<(), UpdateError> {
        let Value::Object(tables) = updates else {
            return Err(UpdateError("table-updates is not an object".into()));
        };
        let mut work = Vec::new();
        for (table, rows) in tables {
            let Value::Object(rows) = rows else {
                return Err(UpdateError(format!("updates of {table} are not an object")));
            };
            for (uuid, ru) in rows {
                let Value::Object(ru) = ru else {
                    return Err(UpdateError(format!(
                        "update of {table} {uuid} is not an object"
                    )));
                };
                let new = match ru.get("new") {
                    None | Some(Value::Null) => None,
                    Some(Value::Object(n)) => Some(n.clone()),
                    Some(_) => {
                        return Err(UpdateError(format!(
                            "new row of {table} {uuid} is not an object"
                        )))
                    }
                };
                work.push((table.clone(), uuid.clone(), new));
            }
        }
        for (table, uuid, new) in work {
            let t = self.tables.entry(table).or_default();
            match new {
                // Insert, or modify: the columns given replace ours.
                Some(n) => {
                    let row = t.entry(uuid).or_default();
                    for (k, v) in n {
                        row.insert(k, v);
                    }
                }
                None => {
                    t.remove(&uuid);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_modify_delete() {
        let mut r = Replica::default();
        r.apply(&json!({"Bridge": {"u1": {"new": {"name": "br0", "fail_mode": ["set", []]}}}}))
            .unwrap();
        r.apply(&json!({"Bridge": {"u1": {"old": {"fail_mode": ["set", []]},
                                          "new": {"fail_mode": "standalone"}}}}))
            .unwrap();
        let row = r.row("Bridge", "u1").unwrap();
        assert_eq!(row["name"], "br0");
        assert_eq!(row["fail_mode"], "standalone");
        r.apply(&json!({"Bridge": {"u1": {"old": {"name": "br0"}}}}))
            .unwrap();
        assert!(r.row("Bridge", "u1").is_none());
    }

    #[test]
    fn a_malformed_update_changes_nothing() {
        let mut r = Replica::default();
        r.apply(&json!({"Bridge": {"u1": {"new": {"name": "br0"}}}}))
            .unwrap();
        assert!(r
            .apply(&json!({"Bridge": {"u2": {"new": {"name": "br1"}}, "u3": 5}}))
            .is_err());
        assert!(r.apply(&json!([1])).is_err());
        assert!(r.apply(&json!({"Port": {"p": {"new": 3}}})).is_err());
        assert_eq!(r.rows("Bridge").count(), 1);
    }

    #[test]
    fn monitor_asks_for_every_table() {
        let p = monitor_params();
        assert_eq!(p[0], DB);
        for (t, _, _) in MONITORED {
            assert!(p[2][t]["columns"].is_array());
        }
    }
}
