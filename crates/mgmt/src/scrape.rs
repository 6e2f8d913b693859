//! One scrape of the running switch for [`crate::metrics`]: every series
//! is summed from the workers' counters at scrape time (nothing is shared
//! on the packet path). Port counters are exactly what an OpenFlow
//! PORT_STATS request answers at the same moment.

use std::time::SystemTime;

use runtime::daemon::Daemon;

use crate::metrics::{
    BridgeMetrics, ControllerMetrics, PortMetrics, ProcessMetrics, QueueMetrics, Scrape,
    TableMetrics, WorkerMetrics,
};

/// Reads every series of `daemon` now (`started`: the process start, for
/// `process_start_time_seconds`).
pub fn scrape(daemon: &Daemon, started: SystemTime) -> Scrape {
    let rt = daemon.runtime();
    let (_, version) = daemon.config();
    let mut bridges = Vec::new();
    let mut controllers = Vec::new();
    let mut tsc_hz = None;
    for name in rt.bridge_names() {
        let (Some(stats), Some(desc), Some(report)) = (
            rt.port_stats(&name),
            rt.port_desc(&name),
            daemon.bridge_report(&name, 0, true),
        ) else {
            continue; // removed meanwhile
        };
        tsc_hz = Some(report.tsc_hz);
        let names = rt.ports(&name).unwrap_or_default();
        let ports = stats
            .iter()
            .map(|s| {
                let d = desc.iter().find(|d| d.port_no == s.port_no);
                PortMetrics {
                    name: names
                        .get(&s.port_no)
                        .map(|e| e.interface.clone())
                        .unwrap_or_else(|| s.port_no.to_string()),
                    number: s.port_no,
                    rx_packets: s.rx_packets,
                    tx_packets: s.tx_packets,
                    rx_bytes: s.rx_bytes,
                    tx_bytes: s.tx_bytes,
                    rx_dropped: s.rx_dropped,
                    tx_dropped: s.tx_dropped,
                    rx_errors: s.rx_errors,
                    tx_errors: s.tx_errors,
                    link_up: d.is_some_and(|d| d.state & ofp::port::port_state::LINK_DOWN == 0),
                    admin_up: d.is_some_and(|d| d.config & ofp::port::port_config::PORT_DOWN == 0),
                }
            })
            .collect();
        for c in daemon.controllers().status(&name) {
            controllers.push(ControllerMetrics {
                bridge: name.clone(),
                target: c.target,
                connected: c.connected,
                role: c.role,
            });
        }
        bridges.push(BridgeMetrics {
            name: name.clone(),
            dpid: report.dpid,
            ports,
            tables: report
                .tables
                .iter()
                .map(
                    |&(table_id, active_entries, lookups, matched)| TableMetrics {
                        table_id,
                        active_entries,
                        lookups,
                        matched,
                    },
                )
                .collect(),
            workers: report
                .threads
                .iter()
                .map(|t| WorkerMetrics {
                    thread: t.name.clone(),
                    role: t.role.clone(),
                    packets: t.packets,
                    busy_ns: t.busy_ns,
                    idle_ns: t.idle_ns,
                    rx_cycles: t.rx_cycles,
                    pipeline_cycles: t.pipeline_cycles,
                    tx_cycles: t.tx_cycles,
                })
                .collect(),
            drops: report.drops.clone(),
            flows: report.flows as u64,
            standalone_active: report.standalone_active,
            queues: rt
                .queue_counters(&name)
                .unwrap_or_default()
                .into_iter()
                .flat_map(|(ofport, qs)| {
                    let port = names
                        .get(&ofport)
                        .map(|e| e.interface.clone())
                        .unwrap_or_else(|| ofport.to_string());
                    qs.into_iter().map(move |q| QueueMetrics {
                        port: port.clone(),
                        ofport,
                        queue: q.id,
                        tx_packets: q.tx_packets,
                        tx_bytes: q.tx_bytes,
                        dropped: q.dropped,
                    })
                })
                .collect(),
        });
    }
    Scrape {
        bridges,
        controllers,
        process: ProcessMetrics::sample(started),
        datastore_version: version,
        tsc_hz,
    }
}
