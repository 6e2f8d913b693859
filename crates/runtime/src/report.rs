//! The counter report (`fulmar run --stats-interval`, the final counters
//! at stop, `fulmar ctl stats`): per port, per drop reason, and the
//! busiest flows.
//!
//! Only numbers are gathered under the bridge's control lock: the flow
//! entries are ranked by packet count there and only the top N are
//! copied; the text is formatted after the lock is released, so a
//! million-entry table does not hold up flow-mods while a report is
//! written.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use dataplane::threads::{ThreadDrops, ThreadStats};
use dataplane::PortCounters;
use serde::Serialize;

use crate::bridge::BridgeRt;

/// One flow entry with its counters (summed over workers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowLine {
    /// The entry in `ovs-ofctl` syntax.
    pub text: String,
    /// Packets that hit it.
    pub packets: u64,
    /// Bytes that hit it.
    pub bytes: u64,
}

/// One port's line of the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PortLine {
    /// OpenFlow port number.
    pub port: u32,
    /// Interface name.
    pub interface: String,
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames lost on the way in (port, rings).
    pub rx_dropped: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames lost on the way out.
    pub tx_dropped: u64,
}

/// One dataplane thread's line.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ThreadLine {
    /// Thread name (`br0-w0`).
    pub name: String,
    /// rx, worker or tx.
    pub role: String,
    /// Packets handled.
    pub packets: u64,
    /// Non-empty polls.
    pub bursts: u64,
    /// Time in iterations that did work.
    pub busy_ns: u64,
    /// Time in iterations that found nothing (sleep included).
    pub idle_ns: u64,
    /// Cycles spent taking bursts in (`dataplane::threads::StageCycles`;
    /// [`BridgeReport::tsc_hz`] per second).
    pub rx_cycles: u64,
    /// Cycles spent in the pipeline.
    pub pipeline_cycles: u64,
    /// Cycles spent sending, or handing on to the next thread.
    pub tx_cycles: u64,
    /// Packets waiting in the thread's input rings now.
    pub ring_fill: u64,
    /// Slots of those rings.
    pub ring_capacity: u64,
    /// The CPU it is pinned to, if it is.
    pub core: Option<usize>,
    /// It yields its CPU after every busy round (split mode, sharing its
    /// CPUs with more busy-polling threads than there are CPUs).
    pub yields: bool,
    /// The receive queues it reads, `PORT:qQUEUE`.
    pub reads: Vec<String>,
}

/// A bridge's report, gathered at one moment.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BridgeReport {
    /// Bridge name.
    pub bridge: String,
    /// Datapath id.
    pub dpid: u64,
    /// Per port.
    pub ports: Vec<PortLine>,
    /// Per dataplane thread.
    pub threads: Vec<ThreadLine>,
    /// The rate of the threads' cycle counter, in cycles per second.
    pub tsc_hz: u64,
    /// Every non-zero drop counter by name.
    pub drops: Vec<(String, u64)>,
    /// Flow entries installed.
    pub flows: usize,
    /// Per table: (table, active entries, lookups, matched).
    pub tables: Vec<(u8, u64, u64, u64)>,
    /// The workers' flow cache: lookups it answered and those it did not
    /// (both 0 while table 0 needs no cache).
    pub flow_cache: (u64, u64),
    /// The busiest flows (most packets first).
    pub top_flows: Vec<FlowLine>,
    /// The learning switch is active now (fail mode standalone, no
    /// controller).
    pub standalone_active: bool,
    /// Its counters.
    pub standalone: (u64, u64),
}

/// Every non-zero drop counter of a bridge by its name: the pipeline's,
/// the ports', the threads', the packet-ins not handed to the agent (by
/// why); NORMAL's (fail-open's included) are the pipeline's.
fn named_drops(
    pc: &pipeline::datapath::Counters,
    ports: &BTreeMap<u32, PortCounters>,
    drops: &ThreadDrops,
    pins: (u64, u64),
) -> Vec<(String, u64)> {
    let mut p = PortCounters::default();
    for c in ports.values() {
        p = p.merged(c);
    }
    let mut named: Vec<(String, u64)> = pc
        .drops
        .named()
        .iter()
        .map(|(k, n)| (k.to_string(), *n))
        .collect();
    for (k, n) in [
        ("port_rx_full", p.rx_drops.ring_full),
        ("port_rx_truncated", p.rx_drops.truncated),
        ("port_rx_malformed", p.rx_drops.malformed),
        ("port_rx_tunnel_malformed", p.rx_drops.tunnel_malformed),
        ("port_rx_tunnel_mismatch", p.rx_drops.tunnel_mismatch),
        ("port_rx_queue_delay", p.rx_drops.queue_delay),
        ("port_rx_errors", p.rx_errors),
        ("port_tx_oversize", p.tx_drops.oversize),
        ("port_tx_link_down", p.tx_drops.link_down),
        ("port_tx_enobufs", p.tx_drops.queue_full),
        ("port_tx_runt", p.tx_drops.runt),
        ("port_tx_errors", p.tx_errors),
        ("rx_ring_full", drops.rx_ring_full),
        ("tx_ring_full", drops.tx_ring_full),
        ("tx_queue_full", drops.tx_queue_full),
        ("no_port", drops.no_port),
        ("port_error", drops.port_error),
        ("rx_error", drops.rx_error),
        ("qos_queue_full", drops.qos_queue_full),
        ("packet_in_no_controller", pins.0),
        ("packet_in_agent_queue_full", pins.1),
    ] {
        named.push((k.to_string(), n));
    }
    named
}

fn thread_line(t: &ThreadStats) -> ThreadLine {
    ThreadLine {
        name: t.name.clone(),
        role: t.role.to_string(),
        packets: t.packets,
        bursts: t.bursts,
        busy_ns: t.busy_ns,
        idle_ns: t.idle_ns,
        rx_cycles: t.cycles.rx,
        pipeline_cycles: t.cycles.pipeline,
        tx_cycles: t.cycles.tx,
        ring_fill: t.ring_fill as u64,
        ring_capacity: t.ring_capacity as u64,
        core: t.core,
        yields: t.yields,
        reads: t
            .reads
            .iter()
            .filter(|(p, _)| *p != crate::INJECT_PORT)
            .map(|(p, q)| format!("{p}:q{q}"))
            .collect(),
    }
}

/// Gathers a bridge's report with its `top` busiest flows; every drop
/// counter by name, zeros included when `zeros`.
pub(crate) fn gather(b: &BridgeRt, top: usize, zeros: bool) -> BridgeReport {
    let ports = b.port_counters();
    let port_drops = b.port_drops();
    let (mut drops, threads) = {
        let t = b.threads();
        (t.drops(), t.thread_stats())
    };
    // Packet-outs the injection ring had no room for (as `port_drops`).
    drops.tx_ring_full += b.control().inject_lost.values().sum::<u64>();
    let sa = b.standalone.counters();
    // Under the control lock: numbers, and copies of the top entries only.
    let (pc, flows, tables, top_entries) = {
        let mut c = b.control();
        b.collect(&mut c);
        let t = &c.dp.state.tables;
        let tables: Vec<(u8, u64, u64, u64)> = t
            .table_stats()
            .iter()
            .filter(|s| s.active_count > 0 || s.lookup_count > 0)
            .map(|s| {
                (
                    s.table_id,
                    u64::from(s.active_count),
                    s.lookup_count,
                    s.matched_count,
                )
            })
            .collect();
        let mut ranked: Vec<(u64, u8, pipeline::FlowId)> = if top > 0 {
            (0..t.n_tables())
                .filter_map(|id| t.table(id))
                .flat_map(|table| table.entries())
                .map(|e| {
                    (
                        t.counter(e.id).unwrap_or_default().packets,
                        e.table_id,
                        e.id,
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let n = top.min(ranked.len());
        if n > 0 {
            ranked.select_nth_unstable_by(n - 1, |a, b| b.0.cmp(&a.0));
            ranked.truncate(n);
            ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        }
        let top_entries: Vec<FlowLine> = ranked
            .iter()
            .filter_map(|&(_, _, id)| Some(flow_line(t.entry(id)?, &t.counter(id)?)))
            .collect();
        (c.totals.clone(), t.len(), tables, top_entries)
    };
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let pins = b.packet_ins_not_handed();
    let flow_cache = b.workers.iter().fold((0, 0), |(h, m), w| {
        (h + load(&w.cache_hits), m + load(&w.cache_misses))
    });
    let mut drops = named_drops(&pc, &ports, &drops, pins);
    if !zeros {
        drops.retain(|(_, n)| *n > 0);
    }
    let names = b.port_entries().clone();
    let ports = ports
        .iter()
        .map(|(no, c)| {
            let d = port_drops.get(no).copied().unwrap_or_default();
            PortLine {
                port: *no,
                interface: names
                    .get(no)
                    .map(|e| e.interface.clone())
                    .unwrap_or_else(|| "?".into()),
                rx_packets: c.rx_packets,
                rx_bytes: c.rx_bytes,
                rx_dropped: c.rx_dropped() + c.rx_errors + d.rx_total(),
                tx_packets: c.tx_packets,
                tx_bytes: c.tx_bytes,
                tx_dropped: c.tx_dropped() + c.tx_errors + d.tx_total(),
            }
        })
        .collect();
    BridgeReport {
        bridge: b.name.clone(),
        dpid: b.dpid,
        ports,
        threads: threads.iter().map(thread_line).collect(),
        tsc_hz: dataplane::threads::tsc_hz(),
        drops,
        flows,
        tables,
        flow_cache,
        top_flows: top_entries,
        standalone_active: b.standalone.is_active(),
        standalone: (sa.forwarded, sa.flooded),
    }
}

/// An entry in `ovs-ofctl` syntax with its counters.
pub(crate) fn flow_line(e: &pipeline::FlowEntry, c: &pipeline::EntryCounter) -> FlowLine {
    FlowLine {
        text: flowtext::format_flow(&e.to_flow_mod()),
        packets: c.packets,
        bytes: c.bytes,
    }
}

impl BridgeReport {
    /// The text form: per port, the frames read and sent and those lost
    /// at that port, then every drop cause by name, then the top flows.
    pub fn text(&self, s: &mut String) {
        let _ = writeln!(s, "bridge {} (dpid {:#x}):", self.bridge, self.dpid);
        for p in &self.ports {
            let _ = writeln!(
                s,
                "  port {} ({}): rx {} pkts {} bytes, drop {}; tx {} pkts {} bytes, drop {}",
                p.port,
                p.interface,
                p.rx_packets,
                p.rx_bytes,
                p.rx_dropped,
                p.tx_packets,
                p.tx_bytes,
                p.tx_dropped
            );
        }
        let named: Vec<String> = self
            .drops
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        let _ = writeln!(
            s,
            "  drops: {}",
            if named.is_empty() {
                "none".to_string()
            } else {
                named.join(" ")
            }
        );
        let (fwd, flood) = self.standalone;
        if self.standalone_active || fwd + flood > 0 {
            let _ = writeln!(
                s,
                "  learning switch (fail mode standalone){}: forwarded {fwd} flooded {flood}",
                if self.standalone_active {
                    ", active"
                } else {
                    ""
                },
            );
        }
        if self.flows > self.top_flows.len() {
            let _ = writeln!(
                s,
                "  flows: {} (the {} busiest below)",
                self.flows,
                self.top_flows.len()
            );
        }
        for f in &self.top_flows {
            let _ = writeln!(
                s,
                "  n_packets={} n_bytes={} {}",
                f.packets, f.bytes, f.text
            );
        }
    }
}
