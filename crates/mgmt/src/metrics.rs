//! Prometheus metrics: the running switch's counters as a `/metrics` page.
//!
//! This module knows nothing of the runtime or the pipeline. The daemon fills
//! a [`Scrape`] — plain data: per bridge its ports, tables, worker threads,
//! named drops and flow count, its controllers, the process and the datastore
//! version — each time a scraper asks, and [`render`] turns it into the
//! exposition text. Counters are summed over the workers by the daemon at
//! scrape time, so a scrape costs the data path nothing.
//!
//! # Two text formats
//!
//! [`render`] writes OpenMetrics 1.0 (through the `prometheus-client` crate's
//! encoder): counters are declared by their family name (`# TYPE
//! fulmar_drops counter`) and sampled as `fulmar_drops_total`, units get a
//! `# UNIT` line, build and bridge identity are `info` metrics, and the text
//! ends with `# EOF`. Prometheus asks for that format first in its `Accept`
//! header. `promtool check metrics` (checked with 2.42) and older scrapers
//! only read the Prometheus text format 0.0.4: promtool rejects the `info`
//! type outright and reads a `_total` sample under a `counter` family without
//! the suffix as an untyped metric with no help text. So the server answers
//! with OpenMetrics when the request's `Accept` names
//! `application/openmetrics-text`, and with [`render_prometheus_text`]
//! (0.0.4: family names carry `_total`/`_info`, `info` becomes `gauge`, no
//! `# UNIT`, no `# EOF`) otherwise.
//!
//! # Metric families
//!
//! Per port (`bridge`, `port`, `ofport`): `fulmar_port_{rx,tx}_packets_total`,
//! `fulmar_port_{rx,tx}_bytes_total`, `fulmar_port_{rx,tx}_dropped_total`,
//! `fulmar_port_{rx,tx}_errors_total`, `fulmar_port_link_up`,
//! `fulmar_port_admin_up`. Per table (`bridge`, `table`):
//! `fulmar_table_active_entries`, `fulmar_table_lookups_total`,
//! `fulmar_table_matched_total`. Per worker thread (`bridge`, `thread`,
//! `role`): `fulmar_worker_packets_total`, `fulmar_worker_busy_seconds_total`,
//! `fulmar_worker_idle_seconds_total`, and (with a `stage` label: `rx`,
//! `pipeline`, `tx`) `fulmar_thread_cycles_total`, cycles per packet per
//! stage once divided by `fulmar_worker_packets_total`; their rate,
//! `fulmar_thread_cycle_rate_hertz`, turns cycles into seconds. Per bridge: `fulmar_bridge_info`
//! (`bridge`, `dpid`), `fulmar_flows`, `fulmar_bridge_standalone_active`,
//! `fulmar_drops_total` (`bridge`, `reason`). Per egress queue (`bridge`,
//! `port`, `ofport`, `queue`; ports with queues only):
//! `fulmar_queue_tx_packets_total`, `fulmar_queue_tx_bytes_total`,
//! `fulmar_queue_dropped_total`. Per controller (`bridge`,
//! `target`, `role`): `fulmar_controller_connected`. Process-wide:
//! `fulmar_process_resident_memory_bytes`, `fulmar_process_start_time_seconds`,
//! `fulmar_datastore_version`, `fulmar_build_info` (`version`).
//!
//! The HTTP side is in [`serve`]: one request per connection, on `hyper`.

mod http;
mod prom_text;

pub use http::{parse_listen_addr, serve};

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, LabelSetEncoder,
    MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// Everything one scrape shows, collected by the daemon at scrape time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// The running bridges, in the order they are to be listed.
    pub bridges: Vec<BridgeMetrics>,
    /// Every configured controller connection, of every bridge.
    pub controllers: Vec<ControllerMetrics>,
    /// The fulmar process itself.
    pub process: ProcessMetrics,
    /// The datastore's current version (bumped by each committed transaction).
    pub datastore_version: u64,
    /// The rate of the data-plane threads' cycle counter, in cycles per
    /// second (`None`: no bridge, no threads to count).
    pub tsc_hz: Option<u64>,
}

/// One bridge's counters. Port names, table ids, worker thread names and drop
/// reasons are each unique within a bridge (they become label values).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BridgeMetrics {
    /// The bridge's name (`br0`), the `bridge` label everywhere.
    pub name: String,
    /// The OpenFlow datapath id.
    pub dpid: u64,
    /// Its ports.
    pub ports: Vec<PortMetrics>,
    /// Its flow tables (only those worth showing: the daemon may skip empty,
    /// never-looked-up ones).
    pub tables: Vec<TableMetrics>,
    /// The threads that forward its packets.
    pub workers: Vec<WorkerMetrics>,
    /// Packets dropped, by drop-reason name, summed over the workers.
    pub drops: Vec<(String, u64)>,
    /// Flow entries installed, over all tables.
    pub flows: u64,
    /// Whether the bridge forwards on its own (fail-mode standalone, no
    /// controller connected).
    pub standalone_active: bool,
    /// The egress queues of its ports that have some, the default queue
    /// (0) included.
    pub queues: Vec<QueueMetrics>,
}

/// One egress queue's counters, as its scheduler counts them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueMetrics {
    /// The port's name, the `port` label.
    pub port: String,
    /// The OpenFlow port number, the `ofport` label.
    pub ofport: u32,
    /// The queue id, the `queue` label.
    pub queue: u32,
    /// Packets the scheduler sent.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Packets dropped because the queue was full.
    pub dropped: u64,
}

/// One port's counters, as OpenFlow port statistics count them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PortMetrics {
    /// The port's name (`p1`), the `port` label.
    pub name: String,
    /// The OpenFlow port number, the `ofport` label.
    pub number: u32,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets dropped on receive.
    pub rx_dropped: u64,
    /// Packets dropped on send.
    pub tx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Send errors.
    pub tx_errors: u64,
    /// The link is up (carrier).
    pub link_up: bool,
    /// The port is administratively up (not `OFPPC_PORT_DOWN`).
    pub admin_up: bool,
}

/// One flow table's counters, as OpenFlow table statistics count them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableMetrics {
    /// The table id, the `table` label.
    pub table_id: u8,
    /// Flow entries in the table.
    pub active_entries: u64,
    /// Packets looked up in the table.
    pub lookups: u64,
    /// Packets that matched an entry.
    pub matched: u64,
}

/// One data-plane thread's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerMetrics {
    /// The thread's name, the `thread` label.
    pub thread: String,
    /// What it does (`rx`, `worker`, `tx`, `rtc`), the `role` label.
    pub role: String,
    /// Packets it handled.
    pub packets: u64,
    /// Time spent on bursts that carried packets, in nanoseconds.
    pub busy_ns: u64,
    /// Time spent polling empty queues or parked, in nanoseconds.
    pub idle_ns: u64,
    /// Cycles spent per stage: taking bursts in (`rx`), in the pipeline,
    /// sending or handing on (`tx`); [`Scrape::tsc_hz`] per second.
    pub rx_cycles: u64,
    /// See `rx_cycles`.
    pub pipeline_cycles: u64,
    /// See `rx_cycles`.
    pub tx_cycles: u64,
}

/// One controller connection of one bridge.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControllerMetrics {
    /// The bridge it belongs to.
    pub bridge: String,
    /// Its target as configured (`tcp:127.0.0.1:6653`).
    pub target: String,
    /// Whether the OpenFlow channel is up (handshake done).
    pub connected: bool,
    /// Its OpenFlow role (`equal`, `master`, `slave`).
    pub role: String,
}

/// The fulmar process itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessMetrics {
    /// Resident memory in bytes; `None` where it could not be read.
    pub resident_bytes: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl ProcessMetrics {
    /// This process now: resident memory from `/proc/self/status` and the
    /// given start time (the daemon records it when it starts).
    pub fn sample(started: SystemTime) -> ProcessMetrics {
        ProcessMetrics {
            resident_bytes: resident_bytes_now(),
            start_time_seconds: started
                .duration_since(UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64()),
        }
    }
}

/// This process's resident set size in bytes, from `VmRSS` in
/// `/proc/self/status` (in kB there, so no page size is needed); `None` where
/// that file is absent or unreadable.
pub fn resident_bytes_now() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kb = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    kb.checked_mul(1024)
}

/// The two exposition formats the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text, what Prometheus asks for first.
    OpenMetrics,
    /// The Prometheus text format 0.0.4, what `promtool` and older scrapers read.
    PrometheusText,
}

impl Format {
    /// The `Content-Type` to answer with.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format a request's `Accept` header value asks for: OpenMetrics
    /// when it names `application/openmetrics-text` with a nonzero quality,
    /// the Prometheus text format otherwise (and when there is no header).
    pub fn from_accept(accept: Option<&str>) -> Format {
        let wants_openmetrics = accept.is_some_and(|accept| {
            accept.split(',').any(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media = parts.next().unwrap_or("");
                media.eq_ignore_ascii_case("application/openmetrics-text")
                    && !parts.any(|p| {
                        p.split_once('=').is_some_and(|(k, v)| {
                            k.trim().eq_ignore_ascii_case("q")
                                && v.trim().parse::<f64>().is_ok_and(|q| q <= 0.0)
                        })
                    })
            })
        });
        if wants_openmetrics {
            Format::OpenMetrics
        } else {
            Format::PrometheusText
        }
    }
}

/// The scrape as OpenMetrics 1.0 text, ending with `# EOF`.
pub fn render(s: &Scrape) -> String {
    render_owned(s.clone(), Format::OpenMetrics)
}

/// The scrape as Prometheus text format 0.0.4 (what `promtool check metrics`
/// reads): the same families and samples as [`render`], with counter and info
/// families named by their samples, `info` as `gauge`, no `# UNIT`/`# EOF`.
pub fn render_prometheus_text(s: &Scrape) -> String {
    render_owned(s.clone(), Format::PrometheusText)
}

/// The scrape in the given format.
pub fn render_as(s: &Scrape, format: Format) -> String {
    render_owned(s.clone(), format)
}

/// Renders a scrape the caller no longer needs (the server's path: no copy).
fn render_owned(s: Scrape, format: Format) -> String {
    // A fresh registry per scrape holding one collector over the snapshot,
    // rather than `Family<Labels, Counter>` metrics filled from it: a Family
    // keeps its series in a HashMap (the order of lines would change from
    // scrape to scrape), needs an atomic and an owned, hashed label set per
    // series only to be read once, and would silently sum two series that
    // share labels. The collector writes the snapshot's values in its order,
    // borrowing its strings; the crate still writes every descriptor, sample
    // and the `# EOF`.
    let mut registry = Registry::with_prefix("fulmar");
    registry.register_collector(Box::new(SnapshotCollector(s)));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)
        .expect("encoding into a String cannot fail: label values are escaped, gauges clamped");
    match format {
        Format::OpenMetrics => text,
        Format::PrometheusText => prom_text::from_openmetrics(&text),
    }
}

/// The crate's version, shown as `fulmar_build_info{version=...}` (fulmar's
/// crates share the workspace version).
const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug)]
struct SnapshotCollector(Scrape);

/// A port counter family: name, unit, help, and the field it shows.
/// A counter family read off each item: name, unit, help, value.
type ItemCounter<T> = (&'static str, Option<Unit>, &'static str, fn(&T) -> u64);

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let s = &self.0;
        let bridges = &s.bridges;
        let ports = || per_bridge(bridges, |b| &b.ports, port_labels);
        let port_counters: [ItemCounter<PortMetrics>; 8] = [
            (
                "port_rx_packets",
                None,
                "Packets received on the port.",
                |p| p.rx_packets,
            ),
            ("port_tx_packets", None, "Packets sent on the port.", |p| {
                p.tx_packets
            }),
            (
                "port_rx",
                Some(Unit::Bytes),
                "Bytes received on the port.",
                |p| p.rx_bytes,
            ),
            (
                "port_tx",
                Some(Unit::Bytes),
                "Bytes sent on the port.",
                |p| p.tx_bytes,
            ),
            (
                "port_rx_dropped",
                None,
                "Packets dropped on receive.",
                |p| p.rx_dropped,
            ),
            ("port_tx_dropped", None, "Packets dropped on send.", |p| {
                p.tx_dropped
            }),
            ("port_rx_errors", None, "Receive errors on the port.", |p| {
                p.rx_errors
            }),
            ("port_tx_errors", None, "Send errors on the port.", |p| {
                p.tx_errors
            }),
        ];
        for (name, unit, help, get) in port_counters {
            counter(
                &mut enc,
                name,
                help,
                unit,
                ports().map(|(l, p)| (l, get(p))),
            )?;
        }
        gauge(
            &mut enc,
            "port_link_up",
            "Whether the port's link is up (1) or down (0).",
            None,
            ports().map(|(l, p)| (l, i64::from(p.link_up))),
        )?;
        gauge(
            &mut enc,
            "port_admin_up",
            "Whether the port is administratively up (1) or down (0).",
            None,
            ports().map(|(l, p)| (l, i64::from(p.admin_up))),
        )?;

        let tables = || {
            per_bridge(
                bridges,
                |b| &b.tables,
                |t| vec![("table", Cow::Owned(t.table_id.to_string()))],
            )
        };
        gauge(
            &mut enc,
            "table_active_entries",
            "Flow entries in the table.",
            None,
            tables().map(|(l, t)| (l, clamp(t.active_entries))),
        )?;
        counter(
            &mut enc,
            "table_lookups",
            "Packets looked up in the table.",
            None,
            tables().map(|(l, t)| (l, t.lookups)),
        )?;
        counter(
            &mut enc,
            "table_matched",
            "Packets that matched an entry of the table.",
            None,
            tables().map(|(l, t)| (l, t.matched)),
        )?;

        let workers = || per_bridge(bridges, |b| &b.workers, worker_labels);
        counter(
            &mut enc,
            "worker_packets",
            "Packets handled by the data-plane thread.",
            None,
            workers().map(|(l, w)| (l, w.packets)),
        )?;
        counter(
            &mut enc,
            "worker_busy",
            "Time the data-plane thread spent on bursts that carried packets.",
            Some(Unit::Seconds),
            workers().map(|(l, w)| (l, seconds(w.busy_ns))),
        )?;
        counter(
            &mut enc,
            "worker_idle",
            "Time the data-plane thread spent polling empty queues or parked.",
            Some(Unit::Seconds),
            workers().map(|(l, w)| (l, seconds(w.idle_ns))),
        )?;
        counter(
            &mut enc,
            "thread_cycles",
            "Cycles the data-plane thread spent per stage: rx takes bursts in, pipeline runs the datapath, tx sends or hands on.",
            None,
            workers().flat_map(|(labels, w)| {
                [
                    ("rx", w.rx_cycles),
                    ("pipeline", w.pipeline_cycles),
                    ("tx", w.tx_cycles),
                ]
                .map(|(stage, n)| (labels.with("stage", Cow::Borrowed(stage)), n))
            }),
        )?;
        gauge(
            &mut enc,
            "thread_cycle_rate",
            "Rate of the data-plane threads' cycle counter (the TSC), in cycles per second.",
            Some(Unit::Other("hertz".into())),
            s.tsc_hz.map(|hz| (Labels::default(), clamp(hz))),
        )?;

        info(
            &mut enc,
            "bridge",
            "The bridge and its OpenFlow datapath id.",
            bridges.iter().map(|b| {
                Labels(vec![
                    ("bridge", Cow::Borrowed(b.name.as_str())),
                    ("dpid", Cow::Owned(format!("{:016x}", b.dpid))),
                ])
            }),
        )?;
        gauge(
            &mut enc,
            "flows",
            "Flow entries installed in the bridge, over all tables.",
            None,
            bridges.iter().map(|b| (bridge_labels(b), clamp(b.flows))),
        )?;
        gauge(
            &mut enc,
            "bridge_standalone_active",
            "Whether the bridge forwards on its own, without a controller (1) or not (0).",
            None,
            bridges
                .iter()
                .map(|b| (bridge_labels(b), i64::from(b.standalone_active))),
        )?;
        let queues = || per_bridge(bridges, |b| &b.queues, queue_labels);
        let queue_counters: [ItemCounter<QueueMetrics>; 3] = [
            (
                "queue_tx_packets",
                None,
                "Packets an egress queue sent.",
                |q| q.tx_packets,
            ),
            (
                "queue_tx",
                Some(Unit::Bytes),
                "Bytes an egress queue sent.",
                |q| q.tx_bytes,
            ),
            (
                "queue_dropped",
                None,
                "Packets an egress queue dropped because it was full.",
                |q| q.dropped,
            ),
        ];
        for (name, unit, help, get) in queue_counters {
            counter(
                &mut enc,
                name,
                help,
                unit,
                queues().map(|(l, q)| (l, get(q))),
            )?;
        }
        counter(
            &mut enc,
            "drops",
            "Packets the bridge dropped, by reason.",
            None,
            per_bridge(
                bridges,
                |b| &b.drops,
                |(reason, _)| vec![("reason", Cow::Borrowed(reason.as_str()))],
            )
            .map(|(l, (_, n))| (l, *n)),
        )?;

        gauge(
            &mut enc,
            "controller_connected",
            "Whether the OpenFlow connection to the controller is up (1) or not (0).",
            None,
            s.controllers.iter().map(|c| {
                let labels = Labels(vec![
                    ("bridge", Cow::Borrowed(c.bridge.as_str())),
                    ("target", Cow::Borrowed(c.target.as_str())),
                    ("role", Cow::Borrowed(c.role.as_str())),
                ]);
                (labels, i64::from(c.connected))
            }),
        )?;

        gauge(
            &mut enc,
            "process_resident_memory",
            "Resident memory of the fulmar process.",
            Some(Unit::Bytes),
            s.process
                .resident_bytes
                .map(|b| (Labels::default(), clamp(b))),
        )?;
        gauge(
            &mut enc,
            "process_start_time",
            "Start time of the fulmar process since the Unix epoch.",
            Some(Unit::Seconds),
            s.process.start_time_seconds.map(|t| (Labels::default(), t)),
        )?;
        gauge(
            &mut enc,
            "datastore_version",
            "Version of the configuration datastore, one more per committed transaction.",
            None,
            Some((Labels::default(), clamp(s.datastore_version))),
        )?;
        info(
            &mut enc,
            "build",
            "The fulmar build.",
            Some(Labels(vec![("version", Cow::Borrowed(VERSION))])),
        )?;
        Ok(())
    }
}

fn bridge_labels(b: &BridgeMetrics) -> Labels<'_> {
    Labels(vec![("bridge", Cow::Borrowed(b.name.as_str()))])
}

fn port_labels(p: &PortMetrics) -> Vec<(&'static str, Cow<'_, str>)> {
    vec![
        ("port", Cow::Borrowed(p.name.as_str())),
        ("ofport", Cow::Owned(p.number.to_string())),
    ]
}

fn worker_labels(w: &WorkerMetrics) -> Vec<(&'static str, Cow<'_, str>)> {
    vec![
        ("thread", Cow::Borrowed(w.thread.as_str())),
        ("role", Cow::Borrowed(w.role.as_str())),
    ]
}

fn queue_labels(q: &QueueMetrics) -> Vec<(&'static str, Cow<'_, str>)> {
    vec![
        ("port", Cow::Borrowed(q.port.as_str())),
        ("ofport", Cow::Owned(q.ofport.to_string())),
        ("queue", Cow::Owned(q.queue.to_string())),
    ]
}

/// Every item `items` picks out of each bridge (its ports, tables, ...), with
/// the series' labels: `bridge` first, then those `labels` gives the item.
fn per_bridge<'a, T: 'a>(
    bridges: &'a [BridgeMetrics],
    items: impl Fn(&'a BridgeMetrics) -> &'a Vec<T>,
    labels: impl Fn(&'a T) -> Vec<(&'static str, Cow<'a, str>)> + Copy,
) -> impl Iterator<Item = (Labels<'a>, &'a T)> {
    bridges.iter().flat_map(move |b| {
        items(b).iter().map(move |item| {
            let mut l = bridge_labels(b);
            l.0.extend(labels(item));
            (l, item)
        })
    })
}

/// Nanoseconds as seconds.
fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A gauge value: the encoder refuses a `u64` past `i64::MAX`, which no real
/// count reaches; clamp rather than fail the whole scrape.
fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// One series' labels, in order. Values are escaped here: the crate's text
/// encoder writes label values as given.
#[derive(Debug, Default)]
struct Labels<'a>(Vec<(&'static str, Cow<'a, str>)>);

impl<'a> Labels<'a> {
    /// These labels and one more, last.
    fn with(&self, key: &'static str, value: Cow<'a, str>) -> Self {
        let mut l = self.0.clone();
        l.push((key, value));
        Labels(l)
    }
}

impl EncodeLabelSet for Labels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        for (key, value) in &self.0 {
            let mut label = encoder.encode_label();
            let mut key_enc = label.encode_label_key()?;
            key_enc.write_str(key)?;
            let mut value_enc = key_enc.encode_label_value()?;
            write_escaped(&mut value_enc, value)?;
            value_enc.finish()?;
        }
        Ok(())
    }
}

/// A label value as both text formats quote it: `\` → `\\`, `"` → `\"`,
/// newline → `\n`.
fn write_escaped(w: &mut impl fmt::Write, value: &str) -> fmt::Result {
    let mut rest = value;
    while let Some(i) = rest.find(['\\', '"', '\n']) {
        w.write_str(&rest[..i])?;
        w.write_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        })?;
        rest = &rest[i + 1..];
    }
    w.write_str(rest)
}

/// Writes one family's descriptor and its series; a family with no series is
/// left out.
fn family<'a, V>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    metric_type: MetricType,
    series: impl IntoIterator<Item = (Labels<'a>, V)>,
    mut sample: impl FnMut(&mut MetricEncoder, &V) -> fmt::Result,
) -> fmt::Result {
    debug_assert!(
        !help.contains(['\\', '\n', '"']),
        "HELP text is written unescaped"
    );
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, unit.as_ref(), metric_type)?;
    for (labels, value) in series {
        if labels.0.is_empty() {
            sample(&mut metric, &value)?;
        } else {
            sample(&mut metric.encode_family(&labels)?, &value)?;
        }
    }
    Ok(())
}

fn counter<'a, N: EncodeCounterValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    series: impl IntoIterator<Item = (Labels<'a>, N)>,
) -> fmt::Result {
    family(
        enc,
        name,
        help,
        unit,
        MetricType::Counter,
        series,
        |m, v| m.encode_counter::<NoLabelSet, N, u64>(v, None),
    )
}

fn gauge<'a, N: EncodeGaugeValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    series: impl IntoIterator<Item = (Labels<'a>, N)>,
) -> fmt::Result {
    family(enc, name, help, unit, MetricType::Gauge, series, |m, v| {
        m.encode_gauge(v)
    })
}

/// An info family: each label set is one `..._info{...} 1` sample.
fn info<'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = Labels<'a>>,
) -> fmt::Result {
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Info)?;
    for labels in series {
        metric.encode_info(&labels)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
