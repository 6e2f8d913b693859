//! The configuration file as TOML gives it: every leaf is `Spanned` so
//! that validation can name its line and column, numbers are taken as
//! TOML's `i64` and strings as strings so that range and syntax errors are
//! ours (with the field path) rather than serde's. Unknown keys are refused
//! here (`deny_unknown_fields`).
//!
//! The same shape goes the other way: [`from_model`] gives a model as a
//! file would, which the validator checks (a transaction's result) and
//! which serializes as the file (`ser`).

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use toml::Spanned;

type S<T> = Spanned<T>;

/// The whole file.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bridges: Vec<S<RawBridge>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub patch_links: Vec<S<RawPatchLink>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataplane: Option<S<RawDataplane>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<S<RawTls>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dpdk: Option<S<RawDpdk>>,
}

/// `[dpdk]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDpdk {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eal_args: Option<S<Vec<S<String>>>>,
}

/// `[[bridges]]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBridge {
    pub name: S<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dpid: Option<S<IntOrString>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_mode: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_tables: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub miss_send_len: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_table_capacity: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_memory_limit_mib: Option<S<i64>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<S<RawPort>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub controllers: Vec<S<RawController>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows_file: Option<S<String>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_file: Option<S<String>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub meters: Vec<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meters_file: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_port: Option<S<bool>>,
}

/// `[[bridges.ports]]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPort {
    pub port: S<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcap_read: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcap_write: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcap_rate: Option<S<IntOrString>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dpdk_devargs: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dpdk_rx_queues: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dpdk_rx_desc: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dpdk_tx_desc: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dpdk_mbufs: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dpdk_mtu: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_queue_cores: Option<S<Vec<S<i64>>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_core: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trunks: Option<S<Vec<S<i64>>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan_mode: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_ip: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_ip: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<S<IntOrString>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<S<i64>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<S<RawQos>>,
}

/// A port with only its number (0 here), for code that builds one and
/// sets what it needs (`..RawPort::default()`).
impl Default for RawPort {
    fn default() -> RawPort {
        RawPort {
            port: S::new(0..0, 0),
            interface: None,
            backend: None,
            pcap_read: None,
            pcap_write: None,
            pcap_rate: None,
            dpdk_devargs: None,
            dpdk_rx_queues: None,
            dpdk_rx_desc: None,
            dpdk_tx_desc: None,
            dpdk_mbufs: None,
            dpdk_mtu: None,
            rx_queue_cores: None,
            tx_core: None,
            tag: None,
            trunks: None,
            vlan_mode: None,
            remote_ip: None,
            local_ip: None,
            key: None,
            dst_port: None,
            qos: None,
        }
    }
}

/// A port's `qos = { type, max_rate, queues = [..] }`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQos {
    #[serde(rename = "type")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<S<i64>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<S<RawQueue>>,
}

/// One of `qos.queues`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQueue {
    pub id: S<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rate: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<S<i64>>,
}

/// `[[bridges.controllers]]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawController {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo_interval_ms: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_peer_timeout_ms: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_min_ms: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_max_ms: Option<S<i64>>,
}

/// `[[patch_links]]`: `a = "br1:3"`, `b = "br2:3"`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPatchLink {
    pub a: S<String>,
    pub b: S<String>,
}

/// `[tls]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub private_key: S<String>,
    pub certificate: S<String>,
    pub ca_cert: S<String>,
}

/// `[dataplane]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDataplane {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_threads: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_threads: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_threads: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_cores: Option<S<Vec<S<i64>>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_cores: Option<S<Vec<S<i64>>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_cores: Option<S<Vec<S<i64>>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<S<RawBurst>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_idle_us: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_batch_wait_us: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_ring_size: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_ring_size: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch_fallback: Option<S<String>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub priority_class: Vec<S<RawRule>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_assign: Option<S<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_queue_delay_us: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulk_reply_nice: Option<S<i64>>,
}

/// `[dataplane.burst]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBurst {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_read: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_write: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_read: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_write: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_read: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_write: Option<S<i64>>,
}

/// `[[dataplane.priority_class]]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_dscp: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan_pcp: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_proto: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_src: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_dst: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_src: Option<S<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
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

impl Serialize for IntOrString {
    fn serialize<Z: serde::Serializer>(&self, z: Z) -> Result<Z::Ok, Z::Error> {
        match self {
            IntOrString::Int(n) => z.serialize_i64(*n),
            IntOrString::Str(s) => z.serialize_str(s),
        }
    }
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

/// A model as the file would give it, with no text behind it (every span
/// empty): what a transaction's result is checked as, with no TOML
/// written or parsed. Defaults are given explicitly, settings the model's
/// mode ignores are left out, inline flows, groups and meters stay inline
/// and `*_file`s are named by their resolved paths, so that checking it
/// gives back the same model.
pub(crate) fn from_model(c: &crate::Config) -> RawConfig {
    use crate::model::*;
    fn s<T>(v: T) -> S<T> {
        Spanned::new(0..0, v)
    }
    fn text(p: &std::path::Path) -> S<String> {
        s(p.to_string_lossy().into_owned())
    }
    fn int(n: impl TryInto<i64>) -> S<i64> {
        s(n.try_into().unwrap_or(i64::MAX))
    }
    fn ints<T: Copy + TryInto<i64>>(v: &[T]) -> S<Vec<S<i64>>> {
        s(v.iter().map(|n| int(*n)).collect())
    }
    let nonzero = |n: u64| (n != 0).then(|| int(n));
    let port = |b: &Bridge, p: &Port| {
        let mut r = RawPort {
            port: int(p.number),
            interface: None,
            backend: Some(s("patch".to_string())),
            tag: p.vlan.tag.map(int),
            trunks: (!p.vlan.trunks.is_empty()).then(|| ints(&p.vlan.trunks)),
            vlan_mode: p.vlan.mode.map(|m| s(m.as_str().to_string())),
            qos: b.qos.get(&p.number).map(|q| {
                s(RawQos {
                    kind: Some(s(q.kind.as_str().to_string())),
                    max_rate: nonzero(q.max_rate),
                    queues: q
                        .queues
                        .iter()
                        .map(|q| {
                            s(RawQueue {
                                id: int(q.id),
                                min_rate: nonzero(q.min_rate),
                                max_rate: nonzero(q.max_rate),
                                priority: Some(int(q.priority)),
                            })
                        })
                        .collect(),
                })
            }),
            ..RawPort::default()
        };
        if let PortKind::Interface { name, backend } = &p.kind {
            r.interface = Some(s(name.clone()));
            r.backend = Some(s(backend.kind_str().to_string()));
            match backend {
                Backend::Pcap(pc) => {
                    r.pcap_read = pc.read.as_deref().map(text);
                    r.pcap_write = pc.write.as_deref().map(text);
                    r.pcap_rate = Some(s(match pc.rate {
                        PcapRate::Max => IntOrString::Str("max".into()),
                        PcapRate::Pps(n) => IntOrString::Int(i64::try_from(n).unwrap_or(i64::MAX)),
                    }));
                }
                Backend::Dpdk(d) => {
                    r.dpdk_devargs = Some(s(d.devargs.clone()));
                    r.dpdk_rx_queues = d.rx_queues.map(int);
                    r.dpdk_rx_desc = Some(int(d.rx_desc));
                    r.dpdk_tx_desc = Some(int(d.tx_desc));
                    r.dpdk_mbufs = Some(int(d.mbufs));
                    r.dpdk_mtu = d.mtu.map(int);
                    r.rx_queue_cores = d.rx_queue_cores.as_deref().map(ints);
                    r.tx_core = d.tx_core.map(int);
                }
                Backend::Vxlan(t) | Backend::Gre(t) => {
                    r.remote_ip = t.remote_ip.map(|a| s(a.to_string()));
                    r.local_ip = t.local_ip.map(|a| s(a.to_string()));
                    r.key = if t.key_flow {
                        Some(s(IntOrString::Str("flow".into())))
                    } else {
                        t.key.map(|k| s(IntOrString::Int(i64::from(k))))
                    };
                    r.dst_port = matches!(backend, Backend::Vxlan(_)).then(|| int(t.dst_port));
                }
                Backend::AfPacket | Backend::AfXdp | Backend::Tap | Backend::Memory => {}
            }
        }
        s(r)
    };
    let bridge = |b: &Bridge| {
        let inline = |texts: Vec<&String>| texts.into_iter().map(|t| s(t.clone())).collect();
        s(RawBridge {
            name: s(b.name.clone()),
            dpid: Some(s(IntOrString::Str(format!("{:#018x}", b.dpid)))),
            fail_mode: Some(s(b.fail_mode.to_string())),
            n_tables: Some(int(b.n_tables)),
            miss_send_len: Some(int(b.miss_send_len)),
            flow_table_capacity: Some(int(b.flow_table_capacity)),
            flow_memory_limit_mib: Some(int(b.flow_memory_limit_mib)),
            ports: b.ports.iter().map(|p| port(b, p)).collect(),
            controllers: b
                .controllers
                .iter()
                .map(|c| {
                    let active = matches!(c.target, ControllerTarget::Connect { .. });
                    s(RawController {
                        target: Some(s(c.target.to_string())),
                        listen: None,
                        echo_interval_ms: Some(int(c.echo_interval_ms)),
                        dead_peer_timeout_ms: Some(int(c.dead_peer_timeout_ms)),
                        backoff_min_ms: active.then(|| int(c.backoff_min_ms)),
                        backoff_max_ms: active.then(|| int(c.backoff_max_ms)),
                    })
                })
                .collect(),
            flows: inline(b.flows.iter().map(|f| &f.text).collect()),
            flows_file: b.flows_file.as_ref().map(|f| text(&f.path)),
            groups: inline(
                b.groups
                    .iter()
                    .filter(|g| g.source.inline)
                    .map(|g| &g.text)
                    .collect(),
            ),
            groups_file: b.groups_file.as_deref().map(text),
            meters: inline(
                b.meters
                    .iter()
                    .filter(|m| m.source.inline)
                    .map(|m| &m.text)
                    .collect(),
            ),
            meters_file: b.meters_file.as_deref().map(text),
            local_port: Some(s(b.local_port)),
        })
    };
    let d = &c.dataplane;
    let piped = d.mode == ThreadMode::RxWorkerTx;
    let class = piped && d.dispatch.key == DispatchKey::PriorityClass;
    let cores = |v: &Option<Vec<usize>>, given: bool| v.as_deref().filter(|_| given).map(ints);
    let b = &d.burst;
    RawConfig {
        bridges: c.bridges.iter().map(bridge).collect(),
        patch_links: c
            .patch_links
            .iter()
            .map(|l| {
                s(RawPatchLink {
                    a: s(format!("{}:{}", l.a.0, l.a.1)),
                    b: s(format!("{}:{}", l.b.0, l.b.1)),
                })
            })
            .collect(),
        dataplane: Some(s(RawDataplane {
            mode: Some(s(d.mode.to_string())),
            rx_threads: piped.then(|| int(d.rx_threads)),
            worker_threads: Some(int(d.worker_threads)),
            tx_threads: piped.then(|| int(d.tx_threads)),
            rx_cores: cores(&d.rx_cores, piped),
            worker_cores: cores(&d.worker_cores, true),
            tx_cores: cores(&d.tx_cores, piped),
            burst: Some(s(RawBurst {
                rx_read: Some(int(b.rx_read)),
                rx_write: Some(int(b.rx_write)),
                worker_read: Some(int(b.worker_read)),
                worker_write: Some(int(b.worker_write)),
                tx_read: Some(int(b.tx_read)),
                tx_write: Some(int(b.tx_write)),
            })),
            flush_idle_us: Some(int(d.flush.idle.as_micros())),
            max_batch_wait_us: Some(int(d.flush.max_wait.as_micros())),
            rx_ring_size: Some(int(d.rings.rx_ring)),
            tx_ring_size: Some(int(d.rings.tx_ring)),
            dispatch: piped.then(|| s(d.dispatch.key.to_string())),
            dispatch_fallback: class.then(|| s(d.dispatch.fallback.to_string())),
            priority_class: if class {
                d.dispatch
                    .rules
                    .iter()
                    .map(|r| {
                        s(RawRule {
                            ip_dscp: r.ip_dscp.map(int),
                            vlan_pcp: r.vlan_pcp.map(int),
                            ip_proto: r.ip_proto.map(int),
                            udp_src: r.udp_src.map(int),
                            udp_dst: r.udp_dst.map(int),
                            tcp_src: r.tcp_src.map(int),
                            tcp_dst: r.tcp_dst.map(int),
                            worker: int(r.worker),
                        })
                    })
                    .collect()
            } else {
                Vec::new()
            },
            core_assign: d.core_assign.map(|a| s(a.to_string())),
            max_queue_delay_us: Some(int(d.max_queue_delay_us)),
            bulk_reply_nice: Some(int(d.bulk_reply_nice)),
        })),
        tls: c.tls.as_ref().map(|t| {
            s(RawTls {
                private_key: text(&t.private_key),
                certificate: text(&t.certificate),
                ca_cert: text(&t.ca_cert),
            })
        }),
        dpdk: (!c.dpdk.eal_args.is_empty()).then(|| {
            s(RawDpdk {
                eal_args: Some(s(c.dpdk.eal_args.iter().map(|a| s(a.clone())).collect())),
            })
        }),
    }
}
