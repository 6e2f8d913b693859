//! The model written back as a configuration file (`fulmar ctl` shows the
//! running configuration this way). Every default is written out, dpids as
//! `0x` hex, controller targets in their canonical form; flows given inline
//! stay inline and `*_file`s are referred to by their resolved paths, so
//! loading the text again gives the same model.

use serde::Serialize;

use crate::model::*;
use crate::Config;

#[derive(Serialize)]
struct OutConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    tls: Option<OutTls>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dpdk: Option<OutDpdk>,
    dataplane: OutDataplane,
    bridges: Vec<OutBridge>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    patch_links: Vec<OutLink>,
}

#[derive(Serialize)]
struct OutDpdk {
    eal_args: Vec<String>,
}

#[derive(Serialize)]
struct OutTls {
    private_key: String,
    certificate: String,
    ca_cert: String,
}

#[derive(Serialize)]
struct OutDataplane {
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rx_threads: Option<usize>,
    worker_threads: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    tx_threads: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rx_cores: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_cores: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tx_cores: Option<Vec<usize>>,
    flush_idle_us: u32,
    max_batch_wait_us: u32,
    rx_ring_size: u32,
    tx_ring_size: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    dispatch: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dispatch_fallback: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    core_assign: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_queue_delay_us: Option<u32>,
    burst: OutBurst,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    priority_class: Vec<OutRule>,
}

#[derive(Serialize)]
struct OutBurst {
    rx_read: u16,
    rx_write: u16,
    worker_read: u16,
    worker_write: u16,
    tx_read: u16,
    tx_write: u16,
}

#[derive(Serialize)]
struct OutRule {
    #[serde(skip_serializing_if = "Option::is_none")]
    ip_dscp: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vlan_pcp: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip_proto: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    udp_src: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    udp_dst: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp_src: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp_dst: Option<u16>,
    worker: usize,
}

#[derive(Serialize)]
struct OutBridge {
    name: String,
    dpid: String,
    fail_mode: &'static str,
    n_tables: u8,
    miss_send_len: u16,
    flow_table_capacity: u32,
    #[serde(skip_serializing_if = "is_zero")]
    flow_memory_limit_mib: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    flows: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flows_file: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    groups: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups_file: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    meters: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    meters_file: Option<String>,
    #[serde(skip_serializing_if = "is_false")]
    local_port: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ports: Vec<OutPort>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    controllers: Vec<OutController>,
}

#[derive(Serialize)]
struct OutPort {
    port: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<String>,
    backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pcap_read: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pcap_write: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pcap_rate: Option<PcapRateOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dpdk_devargs: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dpdk_rx_queues: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dpdk_rx_desc: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dpdk_tx_desc: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dpdk_mbufs: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dpdk_mtu: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rx_queue_cores: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tx_core: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vlan_mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trunks: Option<Vec<u16>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remote_ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    local_ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<KeyOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dst_port: Option<u16>,
    qos: Option<OutQos>,
}

#[derive(Serialize)]
struct OutQos {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "is_zero_u64")]
    max_rate: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    queues: Vec<OutQueue>,
}

#[derive(Serialize)]
struct OutQueue {
    id: u32,
    #[serde(skip_serializing_if = "is_zero_u64")]
    min_rate: u64,
    #[serde(skip_serializing_if = "is_zero_u64")]
    max_rate: u64,
    priority: u32,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

fn qos(q: &PortQos) -> OutQos {
    OutQos {
        kind: q.kind.as_str(),
        max_rate: q.max_rate,
        queues: q
            .queues
            .iter()
            .map(|q| OutQueue {
                id: q.id,
                min_rate: q.min_rate,
                max_rate: q.max_rate,
                priority: q.priority,
            })
            .collect(),
    }
}

/// A tunnel key: a number, or `"flow"`.
#[derive(Serialize)]
#[serde(untagged)]
enum KeyOut {
    Fixed(u32),
    Flow(&'static str),
}

#[derive(Serialize)]
#[serde(untagged)]
enum PcapRateOut {
    Max(&'static str),
    Pps(u64),
}

#[derive(Serialize)]
struct OutController {
    target: String,
    echo_interval_ms: u32,
    dead_peer_timeout_ms: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    backoff_min_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    backoff_max_ms: Option<u32>,
}

#[derive(Serialize)]
struct OutLink {
    a: String,
    b: String,
}

fn path_str(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

fn bridge(b: &Bridge) -> OutBridge {
    OutBridge {
        name: b.name.clone(),
        dpid: format!("{:#018x}", b.dpid),
        fail_mode: b.fail_mode.as_str(),
        n_tables: b.n_tables,
        miss_send_len: b.miss_send_len,
        flow_table_capacity: b.flow_table_capacity,
        flow_memory_limit_mib: b.flow_memory_limit_mib,
        flows: b
            .flows
            .iter()
            .filter(|f| f.source.inline)
            .map(|f| f.text.clone())
            .collect(),
        flows_file: b.flows_file.as_deref().map(path_str),
        groups: b
            .groups
            .iter()
            .filter(|g| g.source.inline)
            .map(|g| g.text.clone())
            .collect(),
        groups_file: b.groups_file.as_deref().map(path_str),
        meters: b
            .meters
            .iter()
            .filter(|m| m.source.inline)
            .map(|m| m.text.clone())
            .collect(),
        meters_file: b.meters_file.as_deref().map(path_str),
        local_port: b.local_port,
        ports: b
            .ports
            .iter()
            .map(|p| OutPort {
                qos: b.qos.get(&p.number).map(qos),
                ..port(p)
            })
            .collect(),
        controllers: b
            .controllers
            .iter()
            .map(|c| {
                let active = matches!(c.target, ControllerTarget::Connect { .. });
                OutController {
                    target: c.target.to_string(),
                    echo_interval_ms: c.echo_interval_ms,
                    dead_peer_timeout_ms: c.dead_peer_timeout_ms,
                    backoff_min_ms: active.then_some(c.backoff_min_ms),
                    backoff_max_ms: active.then_some(c.backoff_max_ms),
                }
            })
            .collect(),
    }
}

fn port(p: &Port) -> OutPort {
    let mut out = OutPort {
        port: p.number,
        interface: None,
        backend: "patch",
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
        vlan_mode: None,
        tag: None,
        trunks: None,
        remote_ip: None,
        local_ip: None,
        key: None,
        dst_port: None,
        qos: None,
    };
    out.vlan_mode = p.vlan.mode.map(|m| m.as_str());
    out.tag = p.vlan.tag;
    out.trunks = (!p.vlan.trunks.is_empty()).then(|| p.vlan.trunks.clone());
    if let PortKind::Interface { name, backend } = &p.kind {
        out.interface = Some(name.clone());
        out.backend = backend.kind_str();
        if let Backend::Pcap(pc) = backend {
            out.pcap_read = pc.read.as_deref().map(path_str);
            out.pcap_write = pc.write.as_deref().map(path_str);
            out.pcap_rate = Some(match pc.rate {
                PcapRate::Max => PcapRateOut::Max("max"),
                PcapRate::Pps(n) => PcapRateOut::Pps(n),
            });
        }
        if let Backend::Dpdk(d) = backend {
            out.dpdk_devargs = Some(d.devargs.clone());
            out.dpdk_rx_queues = d.rx_queues;
            out.dpdk_rx_desc = Some(d.rx_desc);
            out.dpdk_tx_desc = Some(d.tx_desc);
            out.dpdk_mbufs = Some(d.mbufs);
            out.dpdk_mtu = d.mtu;
            out.rx_queue_cores = d.rx_queue_cores.clone();
            out.tx_core = d.tx_core;
        }
        if let Backend::Vxlan(t) | Backend::Gre(t) = backend {
            out.remote_ip = t.remote_ip.map(|a| a.to_string());
            out.local_ip = t.local_ip.map(|a| a.to_string());
            out.key = if t.key_flow {
                Some(KeyOut::Flow("flow"))
            } else {
                t.key.map(KeyOut::Fixed)
            };
            out.dst_port = matches!(backend, Backend::Vxlan(_)).then_some(t.dst_port);
        }
    }
    out
}

fn dataplane(d: &Dataplane) -> OutDataplane {
    let piped = d.mode == ThreadMode::RxWorkerTx;
    let class = d.dispatch.key == DispatchKey::PriorityClass;
    OutDataplane {
        mode: d.mode.as_str(),
        rx_threads: piped.then_some(d.rx_threads),
        worker_threads: d.worker_threads,
        tx_threads: piped.then_some(d.tx_threads),
        rx_cores: d.rx_cores.clone().filter(|_| piped),
        worker_cores: d.worker_cores.clone(),
        tx_cores: d.tx_cores.clone().filter(|_| piped),
        flush_idle_us: d.flush.flush_idle_us,
        max_batch_wait_us: d.flush.max_batch_wait_us,
        rx_ring_size: d.rings.rx_ring,
        tx_ring_size: d.rings.tx_ring,
        dispatch: piped.then_some(d.dispatch.key.as_str()),
        dispatch_fallback: (piped && class).then_some(d.dispatch.fallback.as_str()),
        core_assign: d.core_assign.map(CoreAssign::as_str),
        max_queue_delay_us: (d.max_queue_delay_us != crate::model::DEFAULT_MAX_QUEUE_DELAY_US)
            .then_some(d.max_queue_delay_us),
        burst: OutBurst {
            rx_read: d.burst.rx_read,
            rx_write: d.burst.rx_write,
            worker_read: d.burst.worker_read,
            worker_write: d.burst.worker_write,
            tx_read: d.burst.tx_read,
            tx_write: d.burst.tx_write,
        },
        priority_class: if piped && class {
            d.dispatch
                .rules
                .iter()
                .map(|r| OutRule {
                    ip_dscp: r.ip_dscp,
                    vlan_pcp: r.vlan_pcp,
                    ip_proto: r.ip_proto,
                    udp_src: r.udp_src,
                    udp_dst: r.udp_dst,
                    tcp_src: r.tcp_src,
                    tcp_dst: r.tcp_dst,
                    worker: r.worker,
                })
                .collect()
        } else {
            Vec::new()
        },
    }
}

/// The configuration as TOML text.
pub(crate) fn to_toml(c: &Config) -> String {
    let out = OutConfig {
        tls: c.tls.as_ref().map(|t| OutTls {
            private_key: path_str(&t.private_key),
            certificate: path_str(&t.certificate),
            ca_cert: path_str(&t.ca_cert),
        }),
        dpdk: (!c.dpdk.eal_args.is_empty()).then(|| OutDpdk {
            eal_args: c.dpdk.eal_args.clone(),
        }),
        dataplane: dataplane(&c.dataplane),
        bridges: c.bridges.iter().map(bridge).collect(),
        patch_links: c
            .patch_links
            .iter()
            .map(|l| OutLink {
                a: format!("{}:{}", l.a.0, l.a.1),
                b: format!("{}:{}", l.b.0, l.b.1),
            })
            .collect(),
    };
    // Every field is a string, integer, array or table of them: the
    // serializer cannot fail on this shape.
    toml::to_string_pretty(&out)
        .unwrap_or_else(|e| format!("# cannot write the configuration: {e}\n"))
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}
