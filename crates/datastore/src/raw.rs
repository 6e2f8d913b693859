//! The configuration file as TOML gives it: every leaf is `Spanned` so
//! that validation can name its line and column, numbers are taken as
//! TOML's `i64` and strings as strings so that range and syntax errors are
//! ours (with the field path) rather than serde's. Unknown keys are refused
//! here (`deny_unknown_fields`).

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;
use toml::Spanned;

type S<T> = Spanned<T>;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub bridges: Vec<S<RawBridge>>,
    #[serde(default)]
    pub patch_links: Vec<S<RawPatchLink>>,
    pub dataplane: Option<S<RawDataplane>>,
    pub tls: Option<S<RawTls>>,
    pub dpdk: Option<S<RawDpdk>>,
}

/// `[dpdk]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDpdk {
    pub eal_args: Option<S<Vec<S<String>>>>,
}

/// `[[bridges]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBridge {
    pub name: S<String>,
    pub dpid: Option<S<IntOrString>>,
    pub fail_mode: Option<S<String>>,
    pub n_tables: Option<S<i64>>,
    pub miss_send_len: Option<S<i64>>,
    pub flow_table_capacity: Option<S<i64>>,
    pub flow_memory_limit_mib: Option<S<i64>>,
    #[serde(default)]
    pub ports: Vec<S<RawPort>>,
    #[serde(default)]
    pub controllers: Vec<S<RawController>>,
    #[serde(default)]
    pub flows: Vec<S<String>>,
    pub flows_file: Option<S<String>>,
    #[serde(default)]
    pub groups: Vec<S<String>>,
    pub groups_file: Option<S<String>>,
    #[serde(default)]
    pub meters: Vec<S<String>>,
    pub meters_file: Option<S<String>>,
    pub local_port: Option<S<bool>>,
}

/// `[[bridges.ports]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPort {
    pub port: S<i64>,
    pub interface: Option<S<String>>,
    pub backend: Option<S<String>>,
    pub pcap_read: Option<S<String>>,
    pub pcap_write: Option<S<String>>,
    pub pcap_rate: Option<S<IntOrString>>,
    pub dpdk_devargs: Option<S<String>>,
    pub dpdk_rx_queues: Option<S<i64>>,
    pub dpdk_rx_desc: Option<S<i64>>,
    pub dpdk_tx_desc: Option<S<i64>>,
    pub dpdk_mbufs: Option<S<i64>>,
    pub dpdk_mtu: Option<S<i64>>,
    pub rx_queue_cores: Option<S<Vec<S<i64>>>>,
    pub tx_core: Option<S<i64>>,
    pub tag: Option<S<i64>>,
    pub trunks: Option<S<Vec<S<i64>>>>,
    pub vlan_mode: Option<S<String>>,
    pub remote_ip: Option<S<String>>,
    pub local_ip: Option<S<String>>,
    pub key: Option<S<IntOrString>>,
    pub dst_port: Option<S<i64>>,
    #[serde(default)]
    pub qos: Option<S<RawQos>>,
}

/// A port's `qos = { type, max_rate, queues = [..] }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQos {
    #[serde(rename = "type")]
    pub kind: Option<S<String>>,
    pub max_rate: Option<S<i64>>,
    #[serde(default)]
    pub queues: Vec<S<RawQueue>>,
}

/// One of `qos.queues`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQueue {
    pub id: S<i64>,
    pub min_rate: Option<S<i64>>,
    pub max_rate: Option<S<i64>>,
    pub priority: Option<S<i64>>,
}

/// `[[bridges.controllers]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawController {
    pub target: Option<S<String>>,
    pub listen: Option<S<String>>,
    pub echo_interval_ms: Option<S<i64>>,
    pub dead_peer_timeout_ms: Option<S<i64>>,
    pub backoff_min_ms: Option<S<i64>>,
    pub backoff_max_ms: Option<S<i64>>,
}

/// `[[patch_links]]`: `a = "br1:3"`, `b = "br2:3"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPatchLink {
    pub a: S<String>,
    pub b: S<String>,
}

/// `[tls]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub private_key: S<String>,
    pub certificate: S<String>,
    pub ca_cert: S<String>,
}

/// `[dataplane]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDataplane {
    pub mode: Option<S<String>>,
    pub rx_threads: Option<S<i64>>,
    pub worker_threads: Option<S<i64>>,
    pub tx_threads: Option<S<i64>>,
    pub rx_cores: Option<S<Vec<S<i64>>>>,
    pub worker_cores: Option<S<Vec<S<i64>>>>,
    pub tx_cores: Option<S<Vec<S<i64>>>>,
    pub burst: Option<S<RawBurst>>,
    pub flush_idle_us: Option<S<i64>>,
    pub max_batch_wait_us: Option<S<i64>>,
    pub rx_ring_size: Option<S<i64>>,
    pub tx_ring_size: Option<S<i64>>,
    pub dispatch: Option<S<String>>,
    pub dispatch_fallback: Option<S<String>>,
    #[serde(default)]
    pub priority_class: Vec<S<RawRule>>,
    pub core_assign: Option<S<String>>,
    pub max_queue_delay_us: Option<S<i64>>,
}

/// `[dataplane.burst]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBurst {
    pub rx_read: Option<S<i64>>,
    pub rx_write: Option<S<i64>>,
    pub worker_read: Option<S<i64>>,
    pub worker_write: Option<S<i64>>,
    pub tx_read: Option<S<i64>>,
    pub tx_write: Option<S<i64>>,
}

/// `[[dataplane.priority_class]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub ip_dscp: Option<S<i64>>,
    pub vlan_pcp: Option<S<i64>>,
    pub ip_proto: Option<S<i64>>,
    pub udp_src: Option<S<i64>>,
    pub udp_dst: Option<S<i64>>,
    pub tcp_src: Option<S<i64>>,
    pub tcp_dst: Option<S<i64>>,
    pub worker: S<i64>,
}

/// A value written either as a TOML integer or as a string (dpids, pcap
/// rates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum IntOrString {
    Int(i64),
    Str(String),
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IntOrString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrString, E> {
                Ok(IntOrString::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrString, E> {
                i64::try_from(v)
                    .map(IntOrString::Int)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::Str(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}
