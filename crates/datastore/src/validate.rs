//! From the raw, spanned file to the validated model. Every check runs
//! and every error is collected (each naming file, line, column and field
//! path); only when there are none is a model built, so a configuration is
//! taken whole or not at all.
//!
//! Order: bridges one by one (identity, ports, controllers, then groups and
//! meters, then flows, which may refer to both), then what spans bridges
//! (names, dpids, interfaces, listeners, patch links, TLS), then the
//! dataplane threads.

use std::collections::{HashMap, HashSet};
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ofp::consts::{group_no, meter_no, port_no};
use ofp::{
    Action, FlowMod, FlowModCommand, GroupModCommand, Instruction, MeterModCommand, Oxm, OxmField,
    OxmValue,
};
use toml::Spanned;

use crate::error::{Diagnostic, SourceText};
use crate::model::*;
use crate::raw::*;
use crate::Config;

type S<T> = Spanned<T>;

/// Where a finding is: a value of the TOML document, or a line of another
/// file.
enum At {
    Span(Range<usize>),
    Line {
        file: Arc<Path>,
        line: usize,
        column: Option<usize>,
    },
}

/// The validation state: the document, the directory relative paths are
/// taken from, the machine, and what was found.
pub(crate) struct Checker<'a> {
    src: SourceText<'a>,
    dir: PathBuf,
    host: Host,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// Warnings past [`MAX_WARNINGS`], counted and not kept: a flows file
    /// of a million rules that all name an absent port would otherwise
    /// hold and print a million lines.
    warnings_not_kept: usize,
}

/// The most warnings a configuration keeps and reports one by one.
pub(crate) const MAX_WARNINGS: usize = 100;

/// A port as read, before patch links are resolved.
struct PortDraft {
    number: u32,
    kind: PortKind,
    vlan: VlanSettings,
    /// Its egress queues, if given.
    qos: Option<PortQos>,
    /// Where the port's number was written (for link errors).
    span: Range<usize>,
    path: String,
}

impl<'a> Checker<'a> {
    pub fn new(src: SourceText<'a>, dir: PathBuf, host: Host) -> Checker<'a> {
        Checker {
            src,
            dir,
            host,
            errors: Vec::new(),
            warnings: Vec::new(),
            warnings_not_kept: 0,
        }
    }

    fn diag(&self, at: &At, field: &str, message: String) -> Diagnostic {
        match at {
            At::Span(span) => self.src.diag(span, field, message),
            At::Line { file, line, column } => Diagnostic {
                file: file.to_path_buf(),
                line: Some(*line),
                column: *column,
                field: field.to_string(),
                message,
            },
        }
    }

    fn err(&mut self, span: &Range<usize>, field: &str, message: impl Into<String>) {
        let d = self.src.diag(span, field, message.into());
        self.errors.push(d);
    }

    fn err_at(&mut self, at: &At, field: &str, message: impl Into<String>) {
        let d = self.diag(at, field, message.into());
        self.errors.push(d);
    }

    fn warn_at(&mut self, at: &At, field: &str, message: impl Into<String>) {
        if self.room_for_warning() {
            let d = self.diag(at, field, message.into());
            self.warnings.push(d);
        }
    }

    fn warn(&mut self, span: &Range<usize>, field: &str, message: impl Into<String>) {
        if self.room_for_warning() {
            let d = self.src.diag(span, field, message.into());
            self.warnings.push(d);
        }
    }

    /// Whether one more warning is kept; else it is counted
    /// ([`MAX_WARNINGS`]).
    fn room_for_warning(&mut self) -> bool {
        let room = self.warnings.len() < MAX_WARNINGS;
        if !room {
            self.warnings_not_kept += 1;
        }
        room
    }

    /// The kept warnings, and one more that counts those not kept.
    fn take_warnings(&mut self) -> Vec<Diagnostic> {
        let mut w = std::mem::take(&mut self.warnings);
        if self.warnings_not_kept > 0 {
            w.push(Diagnostic {
                file: self.src.name.clone(),
                line: None,
                column: None,
                field: String::new(),
                message: format!(
                    "{} more warning(s) not listed (only the first {MAX_WARNINGS} are kept)",
                    self.warnings_not_kept
                ),
            });
            self.warnings_not_kept = 0;
        }
        w
    }

    /// An integer in `range`, else an error `WHAT N is not valid (LO..=HI)`.
    fn int(
        &mut self,
        v: &S<i64>,
        field: &str,
        what: &str,
        range: RangeInclusive<i64>,
    ) -> Option<i64> {
        let n = *v.get_ref();
        if range.contains(&n) {
            Some(n)
        } else {
            self.err(
                &v.span(),
                field,
                format!(
                    "{what} {n} is not valid ({}..={})",
                    range.start(),
                    range.end()
                ),
            );
            None
        }
    }

    /// An optional integer with a default.
    fn int_or(
        &mut self,
        v: &Option<S<i64>>,
        field: &str,
        range: RangeInclusive<i64>,
        default: i64,
    ) -> Option<i64> {
        match v {
            Some(v) => self.int(v, field, leaf(field), range),
            None => Some(default),
        }
    }

    /// A path relative to the config file's directory.
    fn resolve(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }

    /// A non-empty path string, resolved.
    fn path_value(&mut self, v: &S<String>, field: &str) -> Option<PathBuf> {
        if v.get_ref().is_empty() {
            self.err(&v.span(), field, "the path is empty");
            None
        } else {
            Some(self.resolve(v.get_ref()))
        }
    }

    /// The whole configuration. `None` when there were errors.
    pub fn config(&mut self, raw: &RawConfig) -> Option<Config> {
        let mut bridges = Vec::new();
        let mut drafts = Vec::new();
        for (bi, rb) in raw.bridges.iter().enumerate() {
            let (bridge, ports) = self.bridge(bi, rb.get_ref());
            bridges.push(bridge);
            drafts.push(ports);
        }
        self.across_bridges(raw, &bridges, &drafts);
        let links = self.patch_links(raw, &mut drafts);
        let tls = self.tls(raw, &bridges);
        let dataplane = self.dataplane(raw.dataplane.as_ref());
        let dpdk = self.dpdk(raw);
        if let Some(d) = &dataplane {
            self.queue_placement(raw, &drafts, d);
        }
        if !self.errors.is_empty() {
            return None;
        }
        let bridges = bridges
            .into_iter()
            .zip(drafts)
            .map(|(b, ports)| {
                let mut b = b?;
                b.qos = ports
                    .iter()
                    .flatten()
                    .filter_map(|p| Some((p.number, p.qos.clone()?)))
                    .collect();
                b.ports = ports
                    .into_iter()
                    .map(|p| {
                        p.map(|p| Port {
                            number: p.number,
                            kind: p.kind,
                            vlan: p.vlan,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(b)
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Config {
            bridges,
            patch_links: links,
            dataplane: dataplane?,
            tls: tls?,
            dpdk: dpdk?,
            warnings: self.take_warnings(),
        })
    }

    /// One bridge: its fields, ports, controllers, groups, meters and flows.
    /// The ports come back separately (patch ports get their peers later).
    fn bridge(&mut self, bi: usize, rb: &RawBridge) -> (Option<Bridge>, Vec<Option<PortDraft>>) {
        let p = format!("bridges[{bi}]");
        let name = rb.name.get_ref().clone();
        if let Err(m) = check_bridge_name(&name) {
            self.err(&rb.name.span(), &format!("{p}.name"), m);
        }
        let dpid = match &rb.dpid {
            None => Some(bi as u64 + 1),
            Some(d) => match parse_dpid(d.get_ref()) {
                Ok(v) => Some(v),
                Err(m) => {
                    self.err(&d.span(), &format!("{p}.dpid"), m);
                    None
                }
            },
        };
        let fail_mode = match &rb.fail_mode {
            None => Some(FailMode::Secure),
            Some(f) => match f.get_ref().as_str() {
                "secure" => Some(FailMode::Secure),
                "standalone" => Some(FailMode::Standalone),
                other => {
                    self.err(
                        &f.span(),
                        &format!("{p}.fail_mode"),
                        format!("fail_mode {other:?} is not valid (secure or standalone)"),
                    );
                    None
                }
            },
        };
        let n_tables = self.int_or(&rb.n_tables, &format!("{p}.n_tables"), 1..=254, 254);
        let miss_send_len = self.int_or(
            &rb.miss_send_len,
            &format!("{p}.miss_send_len"),
            0..=65535,
            128,
        );
        let capacity = self.int_or(
            &rb.flow_table_capacity,
            &format!("{p}.flow_table_capacity"),
            1..=16_777_216,
            16_777_216,
        );
        let memory_limit = self.int_or(
            &rb.flow_memory_limit_mib,
            &format!("{p}.flow_memory_limit_mib"),
            0..=16_777_216,
            0,
        );

        let mut ports: Vec<Option<PortDraft>> = Vec::new();
        let mut numbers: HashMap<u32, usize> = HashMap::new();
        for (pi, rp) in rb.ports.iter().enumerate() {
            let draft = self.port(&format!("{p}.ports[{pi}]"), rp.get_ref());
            if let Some(d) = &draft {
                if let Some(prev) = numbers.insert(d.number, pi) {
                    self.err(
                        &d.span,
                        &format!("{p}.ports[{pi}].port"),
                        format!(
                            "port number {} is already used by {p}.ports[{prev}]",
                            d.number
                        ),
                    );
                }
            }
            ports.push(draft);
        }
        let port_numbers: HashSet<u32> = numbers.keys().copied().collect();

        let mut controllers = Vec::new();
        let mut seen_targets: HashMap<ControllerTarget, usize> = HashMap::new();
        for (ci, rc) in rb.controllers.iter().enumerate() {
            let cp = format!("{p}.controllers[{ci}]");
            let c = self.controller(&cp, rc);
            if let Some(c) = &c {
                if let Some(prev) = seen_targets.insert(c.target.clone(), ci) {
                    let span = rc
                        .get_ref()
                        .target
                        .as_ref()
                        .or(rc.get_ref().listen.as_ref());
                    let span = span.map(|s| s.span()).unwrap_or_else(|| rc.span());
                    self.err(
                        &span,
                        &cp,
                        format!(
                            "controller {} is already given as {p}.controllers[{prev}]",
                            c.target
                        ),
                    );
                }
            }
            controllers.push(c);
        }

        let n_tables_v = n_tables.unwrap_or(254) as u8;
        let ctx = FlowCtx {
            bridge_path: p.clone(),
            n_tables: n_tables_v,
            ports: port_numbers,
        };
        let (meters, meters_file) = self.meters(&ctx, rb);
        let meter_ids: HashSet<u32> = meters.iter().map(|m| m.item.meter_mod.meter_id).collect();
        let (groups, groups_file) = self.groups(&ctx, rb);
        let group_ids: HashSet<u32> = groups.iter().map(|g| g.item.group_mod.group_id).collect();
        for g in &groups {
            let at = source_at(&g.source, g.span.clone());
            for b in &g.item.group_mod.buckets {
                self.check_actions(&ctx, &at, &g.field, &b.actions, &group_ids);
            }
        }
        let (flows, flows_file) = self.flows(&ctx, rb, &group_ids, &meter_ids);

        let bridge = (|| {
            Some(Bridge {
                name,
                dpid: dpid?,
                fail_mode: fail_mode?,
                n_tables: n_tables? as u8,
                miss_send_len: miss_send_len? as u16,
                flow_table_capacity: capacity? as u32,
                flow_memory_limit_mib: memory_limit? as u32,
                ports: Vec::new(),
                controllers: controllers.into_iter().collect::<Option<Vec<_>>>()?,
                flows,
                groups: groups.into_iter().map(|g| g.item).collect(),
                meters: meters.into_iter().map(|m| m.item).collect(),
                flows_file: flows_file?,
                groups_file: groups_file?,
                meters_file: meters_file?,
                local_port: rb.local_port.as_ref().is_some_and(|v| *v.get_ref()),
                qos: Default::default(),
            })
        })();
        (bridge, ports)
    }

    fn port(&mut self, p: &str, rp: &RawPort) -> Option<PortDraft> {
        let number = self
            .int(
                &rp.port,
                &format!("{p}.port"),
                "port number",
                1..=i64::from(port_no::MAX),
            )
            .map(|n| n as u32);
        let backend_name = rp.backend.as_ref().map(|b| b.get_ref().as_str());
        let backend_span = rp.backend.as_ref().map(|b| b.span());
        let pcap_fields = [
            ("pcap_read", rp.pcap_read.as_ref().map(|v| v.span())),
            ("pcap_write", rp.pcap_write.as_ref().map(|v| v.span())),
            ("pcap_rate", rp.pcap_rate.as_ref().map(|v| v.span())),
        ];
        if backend_name != Some("pcap") {
            for (f, span) in &pcap_fields {
                if let Some(span) = span {
                    self.err(
                        span,
                        &format!("{p}.{f}"),
                        format!("{f} is only for backend = \"pcap\""),
                    );
                }
            }
        }
        if backend_name != Some("dpdk") {
            for (f, span) in dpdk_fields(rp) {
                self.err(
                    &span,
                    &format!("{p}.{f}"),
                    format!("{f} is only for backend = \"dpdk\""),
                );
            }
        }
        if !matches!(backend_name, Some("vxlan") | Some("gre")) {
            for (f, span) in tunnel_fields(rp) {
                self.err(
                    &span,
                    &format!("{p}.{f}"),
                    format!("{f} is only for backend = \"vxlan\" or \"gre\""),
                );
            }
        }
        let kind = match backend_name {
            Some("patch") => {
                if let Some(i) = &rp.interface {
                    self.err(
                        &i.span(),
                        &format!("{p}.interface"),
                        "a patch port has no interface (its peer is given in [[patch_links]])",
                    );
                    None
                } else {
                    Some(PortKind::Patch {
                        peer_bridge: String::new(),
                        peer_port: 0,
                    })
                }
            }
            _ => {
                let backend = match backend_name {
                    None | Some("afpacket") => Some(Backend::AfPacket),
                    Some("afxdp") => Some(Backend::AfXdp),
                    Some("tap") => Some(Backend::Tap),
                    Some("memory") => Some(Backend::Memory),
                    Some("pcap") => self.pcap(p, rp),
                    Some("dpdk") => self.dpdk_port(p, rp),
                    Some("vxlan") => self.tunnel_port(p, rp, true),
                    Some("gre") => self.tunnel_port(p, rp, false),
                    Some(other) => {
                        self.err(
                            &backend_span.clone().unwrap_or(0..0),
                            &format!("{p}.backend"),
                            format!(
                                "backend {other:?} is not valid (afpacket, afxdp, tap, pcap, dpdk, vxlan, gre, memory or patch)"
                            ),
                        );
                        None
                    }
                };
                match &rp.interface {
                    None => {
                        self.err(
                            &rp.port.span(),
                            p,
                            "the port has no interface (give interface = \"NAME\", or backend = \"patch\")",
                        );
                        None
                    }
                    Some(i) => {
                        let name = i.get_ref();
                        let kernel = backend.as_ref().is_none_or(|b| b.is_kernel());
                        if let Err(m) = check_interface_name(name, kernel) {
                            self.err(&i.span(), &format!("{p}.interface"), m);
                            None
                        } else {
                            backend.map(|backend| PortKind::Interface {
                                name: name.clone(),
                                backend,
                            })
                        }
                    }
                }
            }
        };
        let vlan = self.port_vlan(p, rp);
        let qos = match &rp.qos {
            Some(q) => Some(self.qos(&format!("{p}.qos"), q)?),
            None => None,
        };
        Some(PortDraft {
            qos,
            number: number?,
            kind: kind?,
            vlan: vlan?,
            span: rp.port.span(),
            path: p.to_string(),
        })
    }

    /// A port's VLAN settings for NORMAL: `tag`, `trunks`, `vlan_mode`.
    fn port_vlan(&mut self, p: &str, rp: &RawPort) -> Option<VlanSettings> {
        let vid = 0..=i64::from(MAX_VID);
        let tag = match &rp.tag {
            Some(t) => Some(self.int(t, &format!("{p}.tag"), "tag", vid.clone())? as u16),
            None => None,
        };
        let mut trunks = Vec::new();
        if let Some(list) = &rp.trunks {
            for (i, t) in list.get_ref().iter().enumerate() {
                trunks
                    .push(self.int(t, &format!("{p}.trunks[{i}]"), "VLAN id", vid.clone())? as u16);
            }
        }
        let mode = match &rp.vlan_mode {
            Some(m) => match m.get_ref().parse::<VlanMode>() {
                Ok(m) => Some(m),
                Err(e) => {
                    self.err(&m.span(), &format!("{p}.vlan_mode"), e);
                    return None;
                }
            },
            None => None,
        };
        trunks.sort_unstable();
        trunks.dedup();
        let v = VlanSettings { mode, tag, trunks };
        match v.resolve() {
            Ok(_) => Some(v),
            Err(e) => {
                let (field, span) = match (&rp.vlan_mode, &rp.tag, &rp.trunks) {
                    (Some(m), _, _) => ("vlan_mode", m.span()),
                    (None, Some(t), _) => ("tag", t.span()),
                    (None, None, Some(t)) => ("trunks", t.span()),
                    (None, None, None) => ("port", rp.port.span()),
                };
                self.err(&span, &format!("{p}.{field}"), e);
                None
            }
        }
    }

    /// A VXLAN (`vxlan`) or GRE port's underlay settings.
    fn tunnel_port(&mut self, p: &str, rp: &RawPort, vxlan: bool) -> Option<Backend> {
        let mut ok = true;
        let mut ip = |c: &mut Self, v: &Option<S<String>>, what: &str, remote: bool| match v {
            None => None,
            Some(v) => match crate::tunnel::parse_tunnel_ip(what, v.get_ref(), remote) {
                Ok(ip) => Some(ip),
                Err(m) => {
                    c.err(&v.span(), &format!("{p}.{what}"), m);
                    ok = false;
                    None
                }
            },
        };
        let remote_ip = ip(self, &rp.remote_ip, "remote_ip", true);
        let local_ip = ip(self, &rp.local_ip, "local_ip", false);
        if rp.remote_ip.is_none() {
            let span = rp.backend.as_ref().map(|b| b.span()).unwrap_or(0..0);
            self.err(
                &span,
                &format!("{p}.remote_ip"),
                "a tunnel port needs remote_ip (the peer's IPv4 address)",
            );
            ok = false;
        }
        let key = match &rp.key {
            None => None::<crate::tunnel::TunnelKey>,
            Some(k) => {
                let text = match k.get_ref() {
                    IntOrString::Int(n) => n.to_string(),
                    IntOrString::Str(s) => s.clone(),
                };
                match crate::tunnel::parse_tunnel_key(vxlan, &text) {
                    Ok(k) => Some(k),
                    Err(m) => {
                        self.err(&k.span(), &format!("{p}.key"), m);
                        ok = false;
                        None
                    }
                }
            }
        };
        let dst_port = match (&rp.dst_port, vxlan) {
            (None, true) => VXLAN_DEFAULT_PORT,
            (None, false) => 0,
            (Some(v), true) => match self.int(v, &format!("{p}.dst_port"), "dst_port", 1..=65535) {
                Some(n) => n as u16,
                None => {
                    ok = false;
                    0
                }
            },
            (Some(v), false) => {
                self.err(
                    &v.span(),
                    &format!("{p}.dst_port"),
                    "dst_port is only for backend = \"vxlan\"",
                );
                ok = false;
                0
            }
        };
        if !ok {
            return None;
        }
        let (key, key_flow) = key.map_or((None, false), |k| k.to_model());
        let t = TunnelBackend {
            remote_ip,
            local_ip,
            key,
            key_flow,
            dst_port,
        };
        Some(if vxlan {
            Backend::Vxlan(t)
        } else {
            Backend::Gre(t)
        })
    }

    /// A port's `qos = {..}`.
    fn qos(&mut self, p: &str, rq: &S<RawQos>) -> Option<PortQos> {
        let raw = rq.get_ref();
        let kind = match &raw.kind {
            None => Some(QosKind::default()),
            Some(k) => {
                let kind = QosKind::parse(k.get_ref());
                if kind.is_none() {
                    self.err(
                        &k.span(),
                        &format!("{p}.type"),
                        format!(
                            "QoS type {:?} is not valid (linux-htb or linux-hfsc)",
                            k.get_ref()
                        ),
                    );
                }
                kind
            }
        };
        let rate = MAX_QOS_RATE as i64;
        let max_rate = match &raw.max_rate {
            Some(v) => self.int(v, &format!("{p}.max_rate"), "rate", 0..=rate),
            None => Some(0),
        };
        let mut queues = Vec::new();
        let mut ids: HashMap<u32, usize> = HashMap::new();
        for (qi, rq) in raw.queues.iter().enumerate() {
            let qp = format!("{p}.queues[{qi}]");
            let q = rq.get_ref();
            let id = self.int(&q.id, &format!("{qp}.id"), "queue id", 0..=0xffff_fffe);
            let min_rate = match &q.min_rate {
                Some(v) => self.int(v, &format!("{qp}.min_rate"), "rate", 0..=rate),
                None => Some(0),
            };
            let qmax = match &q.max_rate {
                Some(v) => self.int(v, &format!("{qp}.max_rate"), "rate", 0..=rate),
                None => Some(0),
            };
            let priority = match &q.priority {
                Some(v) => self.int(
                    v,
                    &format!("{qp}.priority"),
                    "priority",
                    0..=i64::from(u32::MAX),
                ),
                None => Some(0),
            };
            if let Some(id) = id {
                if let Some(prev) = ids.insert(id as u32, qi) {
                    self.err(
                        &q.id.span(),
                        &format!("{qp}.id"),
                        format!("queue {id} is already given as {p}.queues[{prev}]"),
                    );
                }
            }
            if let (Some(lo), Some(hi)) = (min_rate, qmax) {
                if hi != 0 && lo > hi {
                    self.err(
                        &rq.span(),
                        &format!("{qp}.min_rate"),
                        format!("min_rate {lo} is above max_rate {hi}"),
                    );
                }
            }
            queues.push((|| {
                Some(QueueConf {
                    id: id? as u32,
                    min_rate: min_rate? as u64,
                    max_rate: qmax? as u64,
                    priority: priority? as u32,
                })
            })());
        }
        Some(PortQos {
            kind: kind?,
            max_rate: max_rate? as u64,
            queues: queues.into_iter().collect::<Option<Vec<_>>>()?,
        })
    }

    /// A DPDK port's settings (its placement is checked with the
    /// dataplane, [`Self::queue_placement`]).
    fn dpdk_port(&mut self, p: &str, rp: &RawPort) -> Option<Backend> {
        let devargs = match (&rp.dpdk_devargs, &rp.interface) {
            (Some(d), _) => {
                let v = d.get_ref().trim();
                if v.is_empty() || v.starts_with(',') || v.contains(char::is_control) {
                    self.err(
                        &d.span(),
                        &format!("{p}.dpdk_devargs"),
                        format!("dpdk_devargs {:?} is not a device (a vdev like \"net_pcap0,rx_pcap=in.pcap\", or a PCI address)", d.get_ref()),
                    );
                    return None;
                }
                v.to_string()
            }
            (None, Some(i)) => i.get_ref().clone(),
            (None, None) => String::new(),
        };
        let num = |c: &mut Self, v: &Option<S<i64>>, name: &str, range: RangeInclusive<i64>| match v
        {
            None => Some(None),
            Some(v) => c.int(v, &format!("{p}.{name}"), name, range).map(Some),
        };
        let rx_queues = num(self, &rp.dpdk_rx_queues, "dpdk_rx_queues", 1..=1024);
        let rx_desc = num(self, &rp.dpdk_rx_desc, "dpdk_rx_desc", 64..=32768);
        let tx_desc = num(self, &rp.dpdk_tx_desc, "dpdk_tx_desc", 64..=32768);
        let mbufs = match &rp.dpdk_mbufs {
            Some(v) if *v.get_ref() == 0 => Some(Some(0)),
            _ => num(self, &rp.dpdk_mbufs, "dpdk_mbufs", 1023..=16_777_215),
        };
        let mtu = num(self, &rp.dpdk_mtu, "dpdk_mtu", 68..=65535);
        let cpus = self.host.cpus as i64;
        let rx_queue_cores = match &rp.rx_queue_cores {
            None => Some(None),
            Some(list) => {
                let mut ok = true;
                let mut out = Vec::new();
                for (i, c) in list.get_ref().iter().enumerate() {
                    match self.int(c, &format!("{p}.rx_queue_cores[{i}]"), "core", 0..=cpus - 1) {
                        Some(n) => out.push(n as usize),
                        None => ok = false,
                    }
                }
                if list.get_ref().is_empty() {
                    self.err(
                        &list.span(),
                        &format!("{p}.rx_queue_cores"),
                        "give one core per receive queue",
                    );
                    ok = false;
                }
                ok.then_some(Some(out))
            }
        };
        let tx_core = num(self, &rp.tx_core, "tx_core", 0..=cpus - 1);
        let (rx_queues, rx_desc, tx_desc, mbufs, mtu) =
            (rx_queues?, rx_desc?, tx_desc?, mbufs?, mtu?);
        let rx_queue_cores = rx_queue_cores?;
        if let (Some(q), Some(cores), Some(v)) = (rx_queues, &rx_queue_cores, &rp.rx_queue_cores) {
            if cores.len() as i64 > q {
                self.err(
                    &v.span(),
                    &format!("{p}.rx_queue_cores"),
                    format!("{} cores for {q} receive queues", cores.len()),
                );
                return None;
            }
        }
        Some(Backend::Dpdk(DpdkBackend {
            devargs,
            rx_queues: rx_queues.map(|n| n as u16),
            rx_desc: rx_desc.map_or(DPDK_DEFAULT_DESC, |n| n as u16),
            tx_desc: tx_desc.map_or(DPDK_DEFAULT_DESC, |n| n as u16),
            mbufs: mbufs.map_or(0, |n| n as u32),
            mtu: mtu.map(|n| n as u16),
            rx_queue_cores,
            tx_core: tx_core?.map(|n| n as usize),
        }))
    }

    /// `[dpdk]`: the EAL's arguments.
    fn dpdk(&mut self, raw: &RawConfig) -> Option<DpdkSettings> {
        let Some(d) = &raw.dpdk else {
            return Some(DpdkSettings::default());
        };
        let mut out = DpdkSettings::default();
        let mut ok = true;
        if let Some(args) = &d.get_ref().eal_args {
            for (i, a) in args.get_ref().iter().enumerate() {
                let v = a.get_ref();
                if ["-h", "--help", "-v", "--version"].contains(&v.as_str()) {
                    self.err(
                        &a.span(),
                        &format!("dpdk.eal_args[{i}]"),
                        format!("EAL argument {v:?} is not allowed (it ends the process)"),
                    );
                    ok = false;
                } else if v.contains('\0') {
                    self.err(
                        &a.span(),
                        &format!("dpdk.eal_args[{i}]"),
                        "an EAL argument contains a NUL byte",
                    );
                    ok = false;
                }
                out.eal_args.push(v.clone());
            }
        }
        ok.then_some(out)
    }

    /// Where DPDK ports' queues are read and sent: `rx_queue_cores` must
    /// name CPUs of reading threads (workers, or RX threads in
    /// rx-worker-tx) and `tx_core` of a TX thread, pinned by `*_cores`;
    /// with `core_assign` the runtime checks them, once it has placed the
    /// threads.
    fn queue_placement(
        &mut self,
        raw: &RawConfig,
        drafts: &[Vec<Option<PortDraft>>],
        d: &Dataplane,
    ) {
        let piped = d.mode == ThreadMode::RxWorkerTx;
        let readers = if piped { &d.rx_cores } else { &d.worker_cores };
        let reader_key = if piped { "rx_cores" } else { "worker_cores" };
        for (bi, rb) in raw.bridges.iter().enumerate() {
            for (pi, rp) in rb.get_ref().ports.iter().enumerate() {
                let rp = rp.get_ref();
                let Some(Some(PortDraft {
                    kind:
                        PortKind::Interface {
                            backend: Backend::Dpdk(b),
                            ..
                        },
                    ..
                })) = drafts.get(bi).and_then(|ps| ps.get(pi))
                else {
                    continue;
                };
                let p = format!("bridges[{bi}].ports[{pi}]");
                if let (Some(cores), Some(v)) = (&b.rx_queue_cores, &rp.rx_queue_cores) {
                    match readers {
                        Some(pinned) => {
                            for (i, c) in cores.iter().enumerate() {
                                if !pinned.contains(c) {
                                    self.err(
                                        &v.get_ref().get(i).map_or(v.span(), |x| x.span()),
                                        &format!("{p}.rx_queue_cores[{i}]"),
                                        format!("no reading thread runs on core {c} (dataplane.{reader_key} = {pinned:?})"),
                                    );
                                }
                            }
                        }
                        None if d.core_assign.is_some() => {}
                        None => self.err(
                            &v.span(),
                            &format!("{p}.rx_queue_cores"),
                            format!("rx_queue_cores needs the reading threads pinned: give dataplane.{reader_key} or dataplane.core_assign"),
                        ),
                    }
                }
                if let (Some(c), Some(v)) = (b.tx_core, &rp.tx_core) {
                    if !piped {
                        self.err(
                            &v.span(),
                            &format!("{p}.tx_core"),
                            "tx_core is only for mode = \"rx-worker-tx\" (run to completion, every worker sends)",
                        );
                    } else {
                        match &d.tx_cores {
                            Some(pinned) if !pinned.contains(&c) => self.err(
                                &v.span(),
                                &format!("{p}.tx_core"),
                                format!("no TX thread runs on core {c} (dataplane.tx_cores = {pinned:?})"),
                            ),
                            Some(_) => {}
                            None if d.core_assign.is_some() => {}
                            None => self.err(
                                &v.span(),
                                &format!("{p}.tx_core"),
                                "tx_core needs the TX threads pinned: give dataplane.tx_cores or dataplane.core_assign",
                            ),
                        }
                    }
                }
            }
        }
    }

    fn pcap(&mut self, p: &str, rp: &RawPort) -> Option<Backend> {
        let read = match &rp.pcap_read {
            Some(v) => Some(self.path_value(v, &format!("{p}.pcap_read"))?),
            None => None,
        };
        let write = match &rp.pcap_write {
            Some(v) => Some(self.path_value(v, &format!("{p}.pcap_write"))?),
            None => None,
        };
        if read.is_none() && write.is_none() {
            let span = rp.backend.as_ref().map(|b| b.span()).unwrap_or(0..0);
            self.err(
                &span,
                &format!("{p}.backend"),
                "a pcap port needs pcap_read, pcap_write or both",
            );
            return None;
        }
        let rate = match &rp.pcap_rate {
            None => PcapRate::Max,
            Some(r) => {
                let field = format!("{p}.pcap_rate");
                match r.get_ref() {
                    IntOrString::Str(s) if s == "max" => PcapRate::Max,
                    IntOrString::Int(n) if (1..=1_000_000_000).contains(n) => {
                        PcapRate::Pps(*n as u64)
                    }
                    IntOrString::Int(n) => {
                        self.err(
                            &r.span(),
                            &field,
                            format!("pcap_rate {n} is not valid (1..=1000000000 packets per second, or \"max\")"),
                        );
                        return None;
                    }
                    IntOrString::Str(s) => {
                        self.err(
                            &r.span(),
                            &field,
                            format!(
                                "pcap_rate {s:?} is not valid (packets per second, or \"max\")"
                            ),
                        );
                        return None;
                    }
                }
            }
        };
        Some(Backend::Pcap(PcapBackend { read, write, rate }))
    }

    fn controller(&mut self, cp: &str, rc: &S<RawController>) -> Option<Controller> {
        let r = rc.get_ref();
        let target = match (&r.target, &r.listen) {
            (Some(t), None) => match ControllerTarget::parse_target(t.get_ref()) {
                Ok(t) => Some(t),
                Err(m) => {
                    self.err(&t.span(), &format!("{cp}.target"), m);
                    None
                }
            },
            (None, Some(l)) => match ControllerTarget::parse_listen(l.get_ref()) {
                Ok(t) => Some(t),
                Err(m) => {
                    self.err(&l.span(), &format!("{cp}.listen"), m);
                    None
                }
            },
            (Some(_), Some(l)) => {
                self.err(
                    &l.span(),
                    &format!("{cp}.listen"),
                    "give either target or listen, not both",
                );
                None
            }
            (None, None) => {
                self.err(
                    &rc.span(),
                    cp,
                    "a controller needs target = \"tcp:HOST:PORT\" (or ptcp:, tls:, ptls:) or listen = \"tcp:ADDR:PORT\"",
                );
                None
            }
        };
        let echo = self.int_or(
            &r.echo_interval_ms,
            &format!("{cp}.echo_interval_ms"),
            100..=3_600_000,
            i64::from(DEFAULT_ECHO_INTERVAL_MS),
        );
        let dead = self.int_or(
            &r.dead_peer_timeout_ms,
            &format!("{cp}.dead_peer_timeout_ms"),
            1..=3_600_000,
            i64::from(DEFAULT_DEAD_PEER_TIMEOUT_MS),
        );
        if let (Some(e), Some(d)) = (echo, dead) {
            if d <= e {
                let span = r
                    .dead_peer_timeout_ms
                    .as_ref()
                    .or(r.echo_interval_ms.as_ref())
                    .map(|s| s.span())
                    .unwrap_or_else(|| rc.span());
                self.err(
                    &span,
                    &format!("{cp}.dead_peer_timeout_ms"),
                    format!("dead_peer_timeout_ms {d} must be more than echo_interval_ms {e}"),
                );
            }
        }
        let bmin = self.int_or(
            &r.backoff_min_ms,
            &format!("{cp}.backoff_min_ms"),
            1..=3_600_000,
            i64::from(DEFAULT_BACKOFF_MIN_MS),
        );
        let bmax = self.int_or(
            &r.backoff_max_ms,
            &format!("{cp}.backoff_max_ms"),
            1..=3_600_000,
            i64::from(DEFAULT_BACKOFF_MAX_MS),
        );
        if let (Some(lo), Some(hi)) = (bmin, bmax) {
            if hi < lo {
                let span = r
                    .backoff_max_ms
                    .as_ref()
                    .or(r.backoff_min_ms.as_ref())
                    .map(|s| s.span())
                    .unwrap_or_else(|| rc.span());
                self.err(
                    &span,
                    &format!("{cp}.backoff_max_ms"),
                    format!("backoff_max_ms {hi} is less than backoff_min_ms {lo}"),
                );
                return None;
            }
        }
        if let (Some(ControllerTarget::Listen { .. }), Some(v)) = (
            &target,
            r.backoff_min_ms.as_ref().or(r.backoff_max_ms.as_ref()),
        ) {
            self.warn(
                &v.span(),
                cp,
                "reconnect backoff does not apply to a listener",
            );
        }
        Some(Controller {
            target: target?,
            echo_interval_ms: echo? as u32,
            dead_peer_timeout_ms: dead? as u32,
            backoff_min_ms: bmin? as u32,
            backoff_max_ms: bmax? as u32,
        })
    }

    /// Reads a `*_file`; an error names the file and the config field.
    fn read_list_file(&mut self, v: &S<String>, field: &str) -> Option<(PathBuf, String)> {
        let path = self.path_value(v, field)?;
        match std::fs::read_to_string(&path) {
            Ok(text) => Some((path, text)),
            Err(e) => {
                self.err(
                    &v.span(),
                    field,
                    format!("cannot read {}: {e}", path.display()),
                );
                None
            }
        }
    }

    /// Parses the inline strings of `items` and the lines of `file` with
    /// `parse`, reporting every parse error. The second value is the
    /// resolved file (`Some(None)`: none given; `None`: it could not be
    /// read).
    #[allow(clippy::type_complexity)]
    fn parse_list<T>(
        &mut self,
        base: &str,
        items: &[S<String>],
        file: &Option<S<String>>,
        parse: fn(&str) -> Result<T, flowtext::ParseError>,
    ) -> (Vec<Parsed<T>>, Option<Option<PathBuf>>) {
        let mut out = Vec::new();
        for (i, s) in items.iter().enumerate() {
            let field = format!("{base}[{i}]");
            let text = s.get_ref();
            match parse(text) {
                Ok(v) => out.push(Parsed {
                    item: v,
                    text: text.trim().to_string(),
                    source: Source {
                        file: Arc::from(self.src.name.as_path()),
                        line: self.src.line_of(&s.span()),
                        inline: true,
                    },
                    span: s.span(),
                    field,
                }),
                Err(e) => {
                    let d = self.inline_parse_error(s, &field, &e);
                    self.errors.push(d);
                }
            }
        }
        let file_field = format!("{base}_file");
        let resolved = match file {
            None => Some(None),
            Some(f) => match self.read_list_file(f, &file_field) {
                None => None,
                Some((path, text)) => {
                    let shared: Arc<Path> = Arc::from(path.as_path());
                    for (li, line) in text.lines().enumerate() {
                        let trimmed = line.trim();
                        if trimmed.is_empty() || trimmed.starts_with('#') {
                            continue;
                        }
                        match parse(line) {
                            Ok(v) => out.push(Parsed {
                                item: v,
                                text: trimmed.to_string(),
                                source: Source {
                                    file: shared.clone(),
                                    line: li + 1,
                                    inline: false,
                                },
                                span: f.span(),
                                field: file_field.clone(),
                            }),
                            Err(e) => {
                                self.errors
                                    .push(line_parse_error(&path, li, line, &file_field, e))
                            }
                        }
                    }
                    Some(Some(path))
                }
            },
        };
        (out, resolved)
    }

    /// A parse error inside an inline string: the column is that of the
    /// offending token when the string is written without escapes, else
    /// that of the string.
    fn inline_parse_error(
        &self,
        s: &S<String>,
        field: &str,
        e: &flowtext::ParseError,
    ) -> Diagnostic {
        let span = s.span();
        let value = s.get_ref();
        let exact = self.src.slice(&span).is_some_and(|raw| {
            raw.len() == value.len() + 2
                && (raw.starts_with('"') || raw.starts_with('\''))
                && raw.get(1..raw.len() - 1) == Some(value.as_str())
        });
        let at = if exact && value.is_char_boundary(e.position.min(value.len())) {
            let off = span.start + 1 + e.position.min(value.len());
            off..off
        } else {
            span
        };
        self.src.diag(&at, field, e.message.clone())
    }

    #[allow(clippy::type_complexity)]
    fn meters(
        &mut self,
        ctx: &FlowCtx,
        rb: &RawBridge,
    ) -> (Vec<Parsed<StaticMeter>>, Option<Option<PathBuf>>) {
        let base = format!("{}.meters", ctx.bridge_path);
        let (parsed, file) =
            self.parse_list(&base, &rb.meters, &rb.meters_file, flowtext::parse_meter);
        let mut seen: HashMap<u32, String> = HashMap::new();
        let mut out = Vec::new();
        for m in parsed {
            let at = source_at(&m.source, m.span.clone());
            let id = m.item.meter_id;
            if m.item.command != MeterModCommand::Add {
                self.err_at(&at, &m.field, "a static meter must be an add");
            } else if id == 0
                || id == meter_no::ALL
                || (id > meter_no::MAX && id < meter_no::SLOWPATH)
            {
                self.err_at(&at, &m.field, format!("meter id {id} is not valid"));
            } else if let Some(prev) = seen.get(&id) {
                self.err_at(
                    &at,
                    &m.field,
                    format!("meter {id} is already defined at {prev}"),
                );
            } else {
                seen.insert(id, m.source.to_string());
            }
            out.push(Parsed {
                item: StaticMeter {
                    text: m.text.clone(),
                    meter_mod: m.item,
                    source: m.source.clone(),
                },
                text: m.text,
                source: m.source,
                span: m.span,
                field: m.field,
            });
        }
        (out, file)
    }

    #[allow(clippy::type_complexity)]
    fn groups(
        &mut self,
        ctx: &FlowCtx,
        rb: &RawBridge,
    ) -> (Vec<Parsed<StaticGroup>>, Option<Option<PathBuf>>) {
        let base = format!("{}.groups", ctx.bridge_path);
        let (parsed, file) =
            self.parse_list(&base, &rb.groups, &rb.groups_file, flowtext::parse_group);
        let mut seen: HashMap<u32, String> = HashMap::new();
        let mut out = Vec::new();
        for g in parsed {
            let at = source_at(&g.source, g.span.clone());
            let id = g.item.group_id;
            if g.item.command != GroupModCommand::Add {
                self.err_at(&at, &g.field, "a static group must be an add");
            } else if id > group_no::MAX {
                self.err_at(
                    &at,
                    &g.field,
                    format!("group id {id} is not valid (0..=4294967040)"),
                );
            } else if let Some(prev) = seen.get(&id) {
                self.err_at(
                    &at,
                    &g.field,
                    format!("group {id} is already defined at {prev}"),
                );
            } else {
                seen.insert(id, g.source.to_string());
            }
            out.push(Parsed {
                item: StaticGroup {
                    text: g.text.clone(),
                    group_mod: g.item,
                    source: g.source.clone(),
                },
                text: g.text,
                source: g.source,
                span: g.span,
                field: g.field,
            });
        }
        (out, file)
    }

    #[allow(clippy::type_complexity)]
    fn flows(
        &mut self,
        ctx: &FlowCtx,
        rb: &RawBridge,
        groups: &HashSet<u32>,
        meters: &HashSet<u32>,
    ) -> (Vec<StaticFlow>, Option<Option<PathBuf>>) {
        let base = format!("{}.flows", ctx.bridge_path);
        let mut fc = FlowChecks {
            ctx,
            groups,
            meters,
            seen: SeenFlows::default(),
            out: Vec::new(),
        };
        let inline_file: Arc<Path> = Arc::from(self.src.name.as_path());
        for (i, s) in rb.flows.iter().enumerate() {
            let field = format!("{base}[{i}]");
            let text = s.get_ref();
            match flowtext::parse_flow(text) {
                Ok(fm) => {
                    let source = Source {
                        file: inline_file.clone(),
                        line: self.src.line_of(&s.span()),
                        inline: true,
                    };
                    self.check_flow(&mut fc, fm, text.trim(), source, s.span(), &field);
                }
                Err(e) => {
                    let d = self.inline_parse_error(s, &field, &e);
                    self.errors.push(d);
                }
            }
        }
        let file_field = format!("{base}_file");
        let resolved = match &rb.flows_file {
            None => Some(None),
            Some(f) => match self.read_list_file(f, &file_field) {
                None => None,
                Some((path, text)) => {
                    let file: Arc<Path> = Arc::from(path.as_path());
                    let lines: Vec<(usize, &str)> = text
                        .lines()
                        .enumerate()
                        .filter(|(_, l)| {
                            let t = l.trim();
                            !t.is_empty() && !t.starts_with('#')
                        })
                        .collect();
                    // Block by block, so that only one block's FLOW_MODs
                    // exist at a time (the model keeps the text).
                    for block in lines.chunks(PARSE_BLOCK) {
                        let parsed = parse_in_parallel(block, flowtext::parse_flow);
                        for (&(li, line), r) in block.iter().zip(parsed) {
                            match r {
                                Ok(fm) => {
                                    let source = Source {
                                        file: file.clone(),
                                        line: li + 1,
                                        inline: false,
                                    };
                                    self.check_flow(
                                        &mut fc,
                                        fm,
                                        line.trim(),
                                        source,
                                        f.span(),
                                        &file_field,
                                    );
                                }
                                Err(e) => self.errors.push(line_parse_error(
                                    &path,
                                    li,
                                    line,
                                    &file_field,
                                    e,
                                )),
                            }
                        }
                    }
                    Some(Some(path))
                }
            },
        };
        let mut out = fc.out;
        out.shrink_to_fit();
        (out, resolved)
    }

    /// Checks one parsed static flow against its bridge and the flows
    /// before it; keeps its text and source when it is an add.
    fn check_flow(
        &mut self,
        fc: &mut FlowChecks,
        fm: FlowMod,
        text: &str,
        source: Source,
        span: Range<usize>,
        field: &str,
    ) {
        let (ctx, groups, meters) = (fc.ctx, fc.groups, fc.meters);
        let at = source_at(&source, span);
        let fm = &fm;
        if fm.command != FlowModCommand::Add {
            self.err_at(&at, field, "a static flow must be an add");
            return;
        }
        if fm.table_id >= ctx.n_tables {
            self.err_at(
                &at,
                field,
                format!(
                    "table {} does not exist (n_tables = {})",
                    fm.table_id, ctx.n_tables
                ),
            );
        }
        for oxm in &fm.match_.fields {
            if let Oxm::Basic {
                field: OxmField::InPort,
                value: OxmValue::U32(port),
                ..
            } = oxm
            {
                if *port <= port_no::MAX && !ctx.ports.contains(port) {
                    self.warn_at(
                        &at,
                        field,
                        format!("in_port={port}: the bridge has no port {port}"),
                    );
                }
            }
        }
        for ins in &fm.instructions {
            match ins {
                Instruction::GotoTable { table_id } => {
                    if *table_id <= fm.table_id {
                        self.err_at(
                            &at,
                            field,
                            format!(
                                "goto_table:{table_id} must go to a table after {}",
                                fm.table_id
                            ),
                        );
                    } else if *table_id >= ctx.n_tables {
                        self.err_at(
                            &at,
                            field,
                            format!(
                                "goto_table:{table_id}: table {table_id} does not exist (n_tables = {})",
                                ctx.n_tables
                            ),
                        );
                    }
                }
                Instruction::Meter { meter_id } if !meters.contains(meter_id) => {
                    self.warn_at(
                        &at,
                        field,
                        format!("meter {meter_id} is not defined in this file (a controller must add it)"),
                    );
                }
                Instruction::ApplyActions { actions } | Instruction::WriteActions { actions } => {
                    self.check_actions(ctx, &at, field, actions, groups);
                }
                _ => {}
            }
        }
        if let Some(prev) = fc.seen.first(&fc.out, fm) {
            self.warn_at(
                &at,
                field,
                format!("this flow has the same table, priority and match as the one at {prev}, and replaces it"),
            );
        }
        fc.out.push(StaticFlow {
            text: text.to_string(),
            source,
        });
    }

    /// Warnings for actions that name groups not defined here or ports the
    /// bridge does not have.
    fn check_actions(
        &mut self,
        ctx: &FlowCtx,
        at: &At,
        field: &str,
        actions: &[Action],
        groups: &HashSet<u32>,
    ) {
        for a in actions {
            match a {
                Action::Group { group_id } if !groups.contains(group_id) => {
                    self.warn_at(
                        at,
                        field,
                        format!("group {group_id} is not defined in this file (a controller must add it)"),
                    );
                }
                Action::Output { port, .. }
                    if *port <= port_no::MAX && !ctx.ports.contains(port) =>
                {
                    self.warn_at(
                        at,
                        field,
                        format!("output:{port}: the bridge has no port {port}"),
                    );
                }
                _ => {}
            }
        }
    }

    /// Checks that span bridges: names, dpids, interfaces, pcap output
    /// files, listeners.
    fn across_bridges(
        &mut self,
        raw: &RawConfig,
        bridges: &[Option<Bridge>],
        drafts: &[Vec<Option<PortDraft>>],
    ) {
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut dpids: HashMap<u64, usize> = HashMap::new();
        for (bi, rb) in raw.bridges.iter().enumerate() {
            let rb = rb.get_ref();
            if let Some(prev) = names.insert(rb.name.get_ref(), bi) {
                self.err(
                    &rb.name.span(),
                    &format!("bridges[{bi}].name"),
                    format!(
                        "bridge name {:?} is already used by bridges[{prev}]",
                        rb.name.get_ref()
                    ),
                );
            }
            if let Some(Some(b)) = bridges.get(bi) {
                if let Some(prev) = dpids.insert(b.dpid, bi) {
                    let span = rb
                        .dpid
                        .as_ref()
                        .map(|d| d.span())
                        .unwrap_or_else(|| rb.name.span());
                    self.err(
                        &span,
                        &format!("bridges[{bi}].dpid"),
                        format!("dpid {:#018x} is already used by bridges[{prev}]", b.dpid),
                    );
                }
            }
        }
        let mut ifaces: HashMap<String, String> = HashMap::new();
        // A bridge's local port is the TAP interface named after it: no
        // kernel interface port may take that name.
        let locals: HashSet<&str> = bridges
            .iter()
            .flatten()
            .filter(|b| b.local_port)
            .map(|b| b.name.as_str())
            .collect();
        let mut pcap_out: HashMap<PathBuf, String> = HashMap::new();
        let mut devices: HashMap<String, String> = HashMap::new();
        // VXLAN receive sockets: (local address, UDP port, which port).
        let mut vxlan_binds: Vec<(Option<std::net::Ipv4Addr>, u16, String)> = Vec::new();
        for (bi, ports) in drafts.iter().enumerate() {
            let Some(rb) = raw.bridges.get(bi) else {
                continue;
            };
            for (pi, d) in ports.iter().enumerate() {
                let Some(PortDraft {
                    kind: PortKind::Interface { name, backend },
                    path,
                    ..
                }) = d
                else {
                    continue;
                };
                let Some(rp) = rb.get_ref().ports.get(pi) else {
                    continue;
                };
                let rp = rp.get_ref();
                let ispan = rp.interface.as_ref().map(|i| i.span()).unwrap_or(0..0);
                if let Some(prev) = ifaces.get(name) {
                    self.err(
                        &ispan,
                        &format!("{path}.interface"),
                        format!("interface {name:?} is already used by {prev}"),
                    );
                } else {
                    ifaces.insert(name.clone(), path.clone());
                }
                if let Backend::Vxlan(t) = backend {
                    // One UDP socket per address and port: any address
                    // overlaps every other.
                    let clash = vxlan_binds.iter().find(|(l, p, _)| {
                        *p == t.dst_port
                            && (l.is_none() || t.local_ip.is_none() || *l == t.local_ip)
                    });
                    if let Some((_, _, prev)) = clash {
                        self.err(
                            &ispan,
                            &format!("{path}.dst_port"),
                            format!(
                                "VXLAN UDP port {} on {} is already received on by {prev}",
                                t.dst_port,
                                t.local_ip
                                    .map_or("any address".to_string(), |a| a.to_string())
                            ),
                        );
                    } else {
                        vxlan_binds.push((t.local_ip, t.dst_port, path.clone()));
                    }
                }
                if backend.is_kernel() && locals.contains(name.as_str()) {
                    self.err(
                        &ispan,
                        &format!("{path}.interface"),
                        format!(
                            "interface {name:?} is the local port of bridge {name:?} \
                             (local_port = true): a port cannot use that name"
                        ),
                    );
                }
                if let Backend::Dpdk(d) = backend {
                    let dev = d.device_name().to_string();
                    if let Some(prev) = devices.get(&dev) {
                        let span = rp.dpdk_devargs.as_ref().map_or(ispan.clone(), |v| v.span());
                        self.err(
                            &span,
                            &format!("{path}.dpdk_devargs"),
                            format!("DPDK device {dev:?} is already {prev}"),
                        );
                    } else {
                        devices.insert(dev, path.clone());
                    }
                }
                if let Backend::Pcap(PcapBackend { write: Some(w), .. }) = backend {
                    let wspan = rp.pcap_write.as_ref().map(|i| i.span()).unwrap_or(0..0);
                    if let Some(prev) = pcap_out.get(w) {
                        self.err(
                            &wspan,
                            &format!("{path}.pcap_write"),
                            format!("{} is already written by {prev}", w.display()),
                        );
                    } else {
                        pcap_out.insert(w.clone(), path.clone());
                    }
                }
            }
        }
        let mut listeners: Vec<((std::net::IpAddr, u16), String)> = Vec::new();
        for (bi, rb) in raw.bridges.iter().enumerate() {
            let Some(Some(b)) = bridges.get(bi) else {
                continue;
            };
            for (ci, c) in b.controllers.iter().enumerate() {
                if let ControllerTarget::Listen { addr, port, .. } = &c.target {
                    if *port == 0 {
                        continue;
                    }
                    let path = format!("bridges[{bi}].controllers[{ci}]");
                    // The same port on the same address, or on the
                    // wildcard address of the same family, cannot both
                    // be bound.
                    let clash = listeners.iter().find(|((a, p), _)| {
                        p == port
                            && (a == addr
                                || (a.is_ipv4() == addr.is_ipv4()
                                    && (a.is_unspecified() || addr.is_unspecified())))
                    });
                    if let Some((_, prev)) = clash {
                        let span = rb
                            .get_ref()
                            .controllers
                            .get(ci)
                            .and_then(|rc| {
                                rc.get_ref()
                                    .target
                                    .as_ref()
                                    .or(rc.get_ref().listen.as_ref())
                            })
                            .map(|s| s.span())
                            .unwrap_or(0..0);
                        self.err(
                            &span,
                            &path,
                            format!("{} is already listened on by {prev}", c.target),
                        );
                    } else {
                        listeners.push(((*addr, *port), path));
                    }
                }
            }
        }
    }

    /// `[[patch_links]]`: both ends exist, are patch ports, are on
    /// different bridges and are linked once; every patch port is linked.
    fn patch_links(
        &mut self,
        raw: &RawConfig,
        drafts: &mut [Vec<Option<PortDraft>>],
    ) -> Vec<PatchLink> {
        let index: HashMap<&str, usize> = raw
            .bridges
            .iter()
            .enumerate()
            .rev()
            .map(|(i, b)| (b.get_ref().name.get_ref().as_str(), i))
            .collect();
        let mut linked: HashMap<(usize, u32), String> = HashMap::new();
        let mut links = Vec::new();
        for (li, rl) in raw.patch_links.iter().enumerate() {
            let rl = rl.get_ref();
            let mut ends = Vec::new();
            for (side, v) in [("a", &rl.a), ("b", &rl.b)] {
                let field = format!("patch_links[{li}].{side}");
                let Some((bname, pstr)) = v.get_ref().rsplit_once(':') else {
                    self.err(
                        &v.span(),
                        &field,
                        format!("{:?} is not BRIDGE:PORT", v.get_ref()),
                    );
                    continue;
                };
                let Some(&bi) = index.get(bname) else {
                    self.err(&v.span(), &field, format!("there is no bridge {bname:?}"));
                    continue;
                };
                let Ok(pn) = pstr.parse::<u32>() else {
                    self.err(&v.span(), &field, format!("{pstr:?} is not a port number"));
                    continue;
                };
                let found = drafts
                    .get(bi)
                    .and_then(|ps| ps.iter().flatten().find(|d| d.number == pn));
                match found {
                    None => {
                        self.err(
                            &v.span(),
                            &field,
                            format!("bridge {bname:?} has no port {pn}"),
                        );
                        continue;
                    }
                    Some(PortDraft {
                        kind: PortKind::Interface { .. },
                        path,
                        ..
                    }) => {
                        let path = path.clone();
                        self.err(
                            &v.span(),
                            &field,
                            format!("port {pn} of bridge {bname:?} is not a patch port ({path} has an interface)"),
                        );
                        continue;
                    }
                    Some(_) => {}
                }
                if let Some(prev) = linked.get(&(bi, pn)) {
                    self.err(
                        &v.span(),
                        &field,
                        format!("port {pn} of bridge {bname:?} is already linked by {prev}"),
                    );
                    continue;
                }
                linked.insert((bi, pn), field);
                ends.push((bi, bname.to_string(), pn, v.span()));
            }
            if let [(ai, an, ap, _), (bi, bn, bp, bspan)] = ends.as_slice() {
                if ai == bi {
                    self.err(
                        bspan,
                        &format!("patch_links[{li}].b"),
                        format!(
                            "a patch link joins two different bridges; both ends are on {an:?}"
                        ),
                    );
                    continue;
                }
                for (i, pn, peer, peer_port) in [(*ai, *ap, bn, *bp), (*bi, *bp, an, *ap)] {
                    if let Some(d) = drafts
                        .get_mut(i)
                        .and_then(|ps| ps.iter_mut().flatten().find(|d| d.number == pn))
                    {
                        d.kind = PortKind::Patch {
                            peer_bridge: peer.clone(),
                            peer_port,
                        };
                    }
                }
                links.push(PatchLink {
                    a: (an.clone(), *ap),
                    b: (bn.clone(), *bp),
                });
            }
        }
        for (bi, ports) in drafts.iter().enumerate() {
            for d in ports.iter().flatten() {
                if matches!(&d.kind, PortKind::Patch { peer_bridge, .. } if peer_bridge.is_empty())
                    && !linked.contains_key(&(bi, d.number))
                {
                    let (span, path) = (d.span.clone(), d.path.clone());
                    self.err(
                        &span,
                        &format!("{path}.backend"),
                        format!(
                            "patch port {} is not in any [[patch_links]] entry",
                            d.number
                        ),
                    );
                }
            }
        }
        links
    }

    /// `[tls]`, required when a controller uses TLS. `None` on error.
    fn tls(&mut self, raw: &RawConfig, bridges: &[Option<Bridge>]) -> Option<Option<TlsFiles>> {
        let files = match &raw.tls {
            None => None,
            Some(t) => {
                let t = t.get_ref();
                let k = self.path_value(&t.private_key, "tls.private_key");
                let c = self.path_value(&t.certificate, "tls.certificate");
                let a = self.path_value(&t.ca_cert, "tls.ca_cert");
                Some(TlsFiles {
                    private_key: k?,
                    certificate: c?,
                    ca_cert: a?,
                })
            }
        };
        if files.is_none() {
            for (bi, rb) in raw.bridges.iter().enumerate() {
                let Some(Some(b)) = bridges.get(bi) else {
                    continue;
                };
                for (ci, c) in b.controllers.iter().enumerate() {
                    if c.target.transport() == Transport::Tls {
                        let span = rb
                            .get_ref()
                            .controllers
                            .get(ci)
                            .and_then(|rc| {
                                rc.get_ref()
                                    .target
                                    .as_ref()
                                    .or(rc.get_ref().listen.as_ref())
                            })
                            .map(|s| s.span())
                            .unwrap_or(0..0);
                        self.err(
                            &span,
                            &format!("bridges[{bi}].controllers[{ci}]"),
                            format!(
                                "{} needs a [tls] section (private_key, certificate, ca_cert)",
                                c.target
                            ),
                        );
                    }
                }
            }
        }
        Some(files)
    }

    /// `[dataplane]`.
    fn dataplane(&mut self, raw: Option<&S<RawDataplane>>) -> Option<Dataplane> {
        let empty = RawDataplane::default();
        let r = raw.map(|r| r.get_ref()).unwrap_or(&empty);
        let mode = match &r.mode {
            None => Some(ThreadMode::RunToCompletion),
            Some(m) => match m.get_ref().as_str() {
                "run-to-completion" => Some(ThreadMode::RunToCompletion),
                "rx-worker-tx" => Some(ThreadMode::RxWorkerTx),
                other => {
                    self.err(
                        &m.span(),
                        "dataplane.mode",
                        format!("mode {other:?} is not valid (run-to-completion or rx-worker-tx)"),
                    );
                    None
                }
            },
        };
        let threads = 1..=MAX_THREADS as i64;
        let pipelined = mode == Some(ThreadMode::RxWorkerTx);
        let count = |c: &mut Self, v: &Option<S<i64>>, name: &str| -> Option<usize> {
            let field = format!("dataplane.{name}");
            if !pipelined && name != "worker_threads" {
                if let Some(v) = v {
                    if mode.is_some() {
                        c.err(
                            &v.span(),
                            &field,
                            format!("{name} is only for mode = \"rx-worker-tx\""),
                        );
                    }
                }
                return Some(0);
            }
            c.int_or(v, &field, threads.clone(), 1).map(|n| n as usize)
        };
        let rx = count(self, &r.rx_threads, "rx_threads");
        let workers = count(self, &r.worker_threads, "worker_threads");
        let tx = count(self, &r.tx_threads, "tx_threads");

        let mut used: HashMap<i64, String> = HashMap::new();
        let rx_cores = self.cores(&r.rx_cores, "rx_cores", rx, &mut used);
        let worker_cores = self.cores(&r.worker_cores, "worker_cores", workers, &mut used);
        let tx_cores = self.cores(&r.tx_cores, "tx_cores", tx, &mut used);

        let burst = self.burst(r.burst.as_ref());
        let defaults = crate::model::FlushPolicy::default();
        let flush_idle = self.int_or(
            &r.flush_idle_us,
            "dataplane.flush_idle_us",
            0..=1000,
            i64::from(defaults.flush_idle_us),
        );
        let max_wait = self.int_or(
            &r.max_batch_wait_us,
            "dataplane.max_batch_wait_us",
            0..=10_000,
            i64::from(defaults.max_batch_wait_us),
        );
        if let (Some(idle), Some(wait), Some(v)) = (
            flush_idle,
            max_wait,
            r.max_batch_wait_us.as_ref().or(r.flush_idle_us.as_ref()),
        ) {
            if wait < idle {
                self.err(
                    &v.span(),
                    "dataplane.max_batch_wait_us",
                    format!("max_batch_wait_us {wait} is less than flush_idle_us {idle}"),
                );
            }
        }
        let rx_ring = self.ring(&r.rx_ring_size, "rx_ring_size");
        let tx_ring = self.ring(&r.tx_ring_size, "tx_ring_size");
        if let Some(b) = &burst {
            for (ring, v, name, need) in [
                (
                    rx_ring,
                    &r.rx_ring_size,
                    "rx_ring_size",
                    b.rx_write.max(b.worker_read),
                ),
                (
                    tx_ring,
                    &r.tx_ring_size,
                    "tx_ring_size",
                    b.worker_write.max(b.tx_read),
                ),
            ] {
                if let (Some(size), Some(v)) = (ring, v) {
                    if size < u32::from(need) {
                        self.err(
                            &v.span(),
                            &format!("dataplane.{name}"),
                            format!("{name} {size} is smaller than the bursts written to and read from the ring ({need})"),
                        );
                    }
                }
            }
        }
        let max_queue_delay = self.int_or(
            &r.max_queue_delay_us,
            "dataplane.max_queue_delay_us",
            0..=1_000_000,
            i64::from(crate::model::DEFAULT_MAX_QUEUE_DELAY_US),
        );
        let dispatch = self.dispatch(r, workers, pipelined);
        let core_assign = match &r.core_assign {
            None => Some(None),
            Some(v) => {
                let policy = match v.get_ref().as_str() {
                    "performance" => Some(CoreAssign::Performance),
                    "balance" => Some(CoreAssign::Balance),
                    "minimum" => Some(CoreAssign::Minimum),
                    other => {
                        self.err(
                            &v.span(),
                            "dataplane.core_assign",
                            format!("core_assign {other:?} is not valid (performance, balance or minimum)"),
                        );
                        None
                    }
                };
                let explicit = [&r.rx_cores, &r.worker_cores, &r.tx_cores]
                    .iter()
                    .any(|c| c.is_some());
                if explicit {
                    self.err(
                        &v.span(),
                        "dataplane.core_assign",
                        "give core_assign or the cores of each kind of thread (rx_cores, worker_cores, tx_cores), not both",
                    );
                    None
                } else {
                    policy.map(Some)
                }
            }
        };
        let flush_ok = matches!((flush_idle, max_wait), (Some(i), Some(w)) if w >= i);
        if !flush_ok {
            return None;
        }
        Some(Dataplane {
            mode: mode?,
            rx_threads: rx?,
            worker_threads: workers?,
            tx_threads: tx?,
            rx_cores: rx_cores?,
            worker_cores: worker_cores?,
            tx_cores: tx_cores?,
            burst: burst?,
            flush: FlushPolicy {
                flush_idle_us: flush_idle? as u32,
                max_batch_wait_us: max_wait? as u32,
            },
            rings: RingSizes {
                rx_ring: rx_ring?,
                tx_ring: tx_ring?,
            },
            dispatch: dispatch?,
            core_assign: core_assign?,
            max_queue_delay_us: max_queue_delay? as u32,
        })
    }

    /// A core pinning list: one core per thread, each below the machine's
    /// CPU count. A core given twice is a warning.
    fn cores(
        &mut self,
        v: &Option<S<Vec<S<i64>>>>,
        name: &str,
        threads: Option<usize>,
        used: &mut HashMap<i64, String>,
    ) -> Option<Option<Vec<usize>>> {
        let Some(list) = v else { return Some(None) };
        let field = format!("dataplane.{name}");
        let threads = threads?;
        if threads == 0 {
            // Refused already with the thread count (wrong mode).
            self.err(
                &list.span(),
                &field,
                format!("{name} is only for mode = \"rx-worker-tx\""),
            );
            return None;
        }
        let mut ok = true;
        if list.get_ref().len() != threads {
            self.err(
                &list.span(),
                &field,
                format!(
                    "{} cores for {threads} threads; give one core per thread",
                    list.get_ref().len()
                ),
            );
            ok = false;
        }
        let cpus = self.host.cpus;
        let mut out = Vec::new();
        for (i, c) in list.get_ref().iter().enumerate() {
            let n = *c.get_ref();
            let f = format!("{field}[{i}]");
            if n < 0 || n as u64 >= cpus as u64 {
                self.err(
                    &c.span(),
                    &f,
                    format!(
                        "core {n} does not exist (this machine has {cpus} CPUs: 0..={})",
                        cpus.saturating_sub(1)
                    ),
                );
                ok = false;
                continue;
            }
            if let Some(prev) = used.get(&n) {
                self.warn(
                    &c.span(),
                    &f,
                    format!("core {n} is also given to {prev}; the two threads will share it"),
                );
            } else {
                used.insert(n, f);
            }
            out.push(n as usize);
        }
        ok.then_some(Some(out))
    }

    fn burst(&mut self, raw: Option<&S<RawBurst>>) -> Option<BurstSizes> {
        let empty = RawBurst::default();
        let r = raw.map(|r| r.get_ref()).unwrap_or(&empty);
        let one = |c: &mut Self, v: &Option<S<i64>>, name: &str| -> Option<u16> {
            let Some(v) = v else {
                return Some(DEFAULT_BURST);
            };
            let n = *v.get_ref();
            if (1..=i64::from(MAX_BURST)).contains(&n) && (n as u64).is_power_of_two() {
                Some(n as u16)
            } else {
                c.err(
                    &v.span(),
                    &format!("dataplane.burst.{name}"),
                    format!("burst size {n} is not valid (a power of two, 1..=1024)"),
                );
                None
            }
        };
        let rx_read = one(self, &r.rx_read, "rx_read");
        let rx_write = one(self, &r.rx_write, "rx_write");
        let worker_read = one(self, &r.worker_read, "worker_read");
        let worker_write = one(self, &r.worker_write, "worker_write");
        let tx_read = one(self, &r.tx_read, "tx_read");
        let tx_write = one(self, &r.tx_write, "tx_write");
        Some(BurstSizes {
            rx_read: rx_read?,
            rx_write: rx_write?,
            worker_read: worker_read?,
            worker_write: worker_write?,
            tx_read: tx_read?,
            tx_write: tx_write?,
        })
    }

    fn ring(&mut self, v: &Option<S<i64>>, name: &str) -> Option<u32> {
        let Some(v) = v else { return Some(1024) };
        let n = *v.get_ref();
        if (64..=65536).contains(&n) && (n as u64).is_power_of_two() {
            Some(n as u32)
        } else {
            self.err(
                &v.span(),
                &format!("dataplane.{name}"),
                format!("{name} {n} is not valid (a power of two, 64..=65536)"),
            );
            None
        }
    }

    fn dispatch_key(&mut self, v: &S<String>, field: &str) -> Option<DispatchKey> {
        match v.get_ref().as_str() {
            "port" => Some(DispatchKey::Port),
            "l2" => Some(DispatchKey::L2),
            "5tuple" => Some(DispatchKey::FiveTuple),
            "priority-class" => Some(DispatchKey::PriorityClass),
            other => {
                self.err(
                    &v.span(),
                    field,
                    format!(
                        "dispatch key {other:?} is not valid (port, l2, 5tuple or priority-class)"
                    ),
                );
                None
            }
        }
    }

    fn dispatch(
        &mut self,
        r: &RawDataplane,
        workers: Option<usize>,
        pipelined: bool,
    ) -> Option<Dispatch> {
        let key = match &r.dispatch {
            None => Some(DispatchKey::FiveTuple),
            Some(v) => self.dispatch_key(v, "dataplane.dispatch"),
        };
        let fallback = match &r.dispatch_fallback {
            None => Some(DispatchKey::FiveTuple),
            Some(v) => match self.dispatch_key(v, "dataplane.dispatch_fallback") {
                Some(DispatchKey::PriorityClass) => {
                    self.err(
                        &v.span(),
                        "dataplane.dispatch_fallback",
                        "the fallback of priority-class dispatch cannot be priority-class",
                    );
                    None
                }
                k => k,
            },
        };
        if !pipelined {
            if let Some(v) = &r.dispatch {
                self.warn(
                    &v.span(),
                    "dataplane.dispatch",
                    "dispatch applies only in mode = \"rx-worker-tx\"; ignored",
                );
            }
        }
        let is_class = key == Some(DispatchKey::PriorityClass);
        if let (Some(v), Some(k)) = (&r.dispatch_fallback, key) {
            if k != DispatchKey::PriorityClass {
                self.err(
                    &v.span(),
                    "dataplane.dispatch_fallback",
                    "dispatch_fallback is only for dispatch = \"priority-class\"",
                );
            }
        }
        if is_class && r.priority_class.is_empty() {
            let span = r.dispatch.as_ref().map(|d| d.span()).unwrap_or(0..0);
            self.err(
                &span,
                "dataplane.dispatch",
                "priority-class dispatch needs at least one [[dataplane.priority_class]] rule",
            );
        }
        let mut rules = Vec::new();
        let mut ok = true;
        for (i, rr) in r.priority_class.iter().enumerate() {
            let p = format!("dataplane.priority_class[{i}]");
            if key.is_some() && !is_class {
                self.err(
                    &rr.span(),
                    &p,
                    "priority_class rules need dispatch = \"priority-class\"",
                );
                ok = false;
                continue;
            }
            match self.rule(&p, rr, workers) {
                Some(rule) => rules.push(rule),
                None => ok = false,
            }
        }
        if !ok {
            return None;
        }
        Some(Dispatch {
            key: key?,
            fallback: fallback?,
            rules,
        })
    }

    fn rule(
        &mut self,
        p: &str,
        rr: &S<RawRule>,
        workers: Option<usize>,
    ) -> Option<PriorityClassRule> {
        let r = rr.get_ref();
        let mut ok = true;
        let mut small = |c: &mut Self, v: &Option<S<i64>>, name: &str, max: i64| -> Option<i64> {
            let v = v.as_ref()?;
            let n = c.int(v, &format!("{p}.{name}"), name, 0..=max);
            if n.is_none() {
                ok = false;
            }
            n
        };
        let rule = PriorityClassRule {
            ip_dscp: small(self, &r.ip_dscp, "ip_dscp", 63).map(|n| n as u8),
            vlan_pcp: small(self, &r.vlan_pcp, "vlan_pcp", 7).map(|n| n as u8),
            ip_proto: small(self, &r.ip_proto, "ip_proto", 255).map(|n| n as u8),
            udp_src: small(self, &r.udp_src, "udp_src", 65535).map(|n| n as u16),
            udp_dst: small(self, &r.udp_dst, "udp_dst", 65535).map(|n| n as u16),
            tcp_src: small(self, &r.tcp_src, "tcp_src", 65535).map(|n| n as u16),
            tcp_dst: small(self, &r.tcp_dst, "tcp_dst", 65535).map(|n| n as u16),
            worker: 0,
        };
        let has_udp = r.udp_src.is_some() || r.udp_dst.is_some();
        let has_tcp = r.tcp_src.is_some() || r.tcp_dst.is_some();
        let any = [
            &r.ip_dscp,
            &r.vlan_pcp,
            &r.ip_proto,
            &r.udp_src,
            &r.udp_dst,
            &r.tcp_src,
            &r.tcp_dst,
        ]
        .iter()
        .any(|v| v.is_some());
        if !any {
            self.err(
                &rr.span(),
                p,
                "a rule needs at least one of ip_dscp, vlan_pcp, ip_proto, udp_src, udp_dst, tcp_src, tcp_dst",
            );
            ok = false;
        }
        if has_udp && has_tcp {
            self.err(&rr.span(), p, "a rule cannot match both udp and tcp ports");
            ok = false;
        }
        if let (Some(proto), true) = (rule.ip_proto, has_udp || has_tcp) {
            let want = if has_udp { 17 } else { 6 };
            if proto != want {
                self.err(
                    &rr.span(),
                    p,
                    format!(
                        "ip_proto {proto} contradicts the rule's {} ports",
                        if has_udp { "udp" } else { "tcp" }
                    ),
                );
                ok = false;
            }
        }
        let worker = match workers {
            Some(w) => self.int(
                &r.worker,
                &format!("{p}.worker"),
                "worker",
                0..=(w as i64 - 1),
            ),
            None => None,
        };
        if !ok {
            return None;
        }
        Some(PriorityClassRule {
            worker: worker? as usize,
            ..rule
        })
    }
}

/// What flow checks need to know about their bridge.
struct FlowCtx {
    bridge_path: String,
    n_tables: u8,
    ports: HashSet<u32>,
}

/// A parsed flow, group or meter with where it came from.
struct Parsed<T> {
    item: T,
    text: String,
    source: Source,
    /// The inline string, or the `*_file` value.
    span: Range<usize>,
    field: String,
}

/// The tunnel keys a port sets, with their spans.
fn tunnel_fields(rp: &RawPort) -> Vec<(&'static str, Range<usize>)> {
    let mut out = Vec::new();
    if let Some(v) = &rp.remote_ip {
        out.push(("remote_ip", v.span()));
    }
    if let Some(v) = &rp.local_ip {
        out.push(("local_ip", v.span()));
    }
    if let Some(v) = &rp.key {
        out.push(("key", v.span()));
    }
    if let Some(v) = &rp.dst_port {
        out.push(("dst_port", v.span()));
    }
    out
}

/// The DPDK keys a port gives, with where.
fn dpdk_fields(rp: &RawPort) -> Vec<(&'static str, Range<usize>)> {
    let ints = [
        ("dpdk_rx_queues", &rp.dpdk_rx_queues),
        ("dpdk_rx_desc", &rp.dpdk_rx_desc),
        ("dpdk_tx_desc", &rp.dpdk_tx_desc),
        ("dpdk_mbufs", &rp.dpdk_mbufs),
        ("dpdk_mtu", &rp.dpdk_mtu),
        ("tx_core", &rp.tx_core),
    ];
    let mut out: Vec<(&'static str, Range<usize>)> = ints
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v.span())))
        .collect();
    if let Some(v) = &rp.dpdk_devargs {
        out.push(("dpdk_devargs", v.span()));
    }
    if let Some(v) = &rp.rx_queue_cores {
        out.push(("rx_queue_cores", v.span()));
    }
    out
}

fn source_at(source: &Source, span: Range<usize>) -> At {
    if source.inline {
        At::Span(span)
    } else {
        At::Line {
            file: source.file.clone(),
            line: source.line,
            column: None,
        }
    }
}

/// The last component of a field path (`n_tables` of `bridges[0].n_tables`).
fn leaf(field: &str) -> &str {
    field.rsplit('.').next().unwrap_or(field)
}

/// Bridge names: 1..=32 of letters, digits, `_`, `-`, `.`.
fn check_bridge_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 32 {
        return Err(format!("bridge name {name:?} must have 1 to 32 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(format!(
            "bridge name {name:?} may hold only letters, digits, '_', '-' and '.'"
        ));
    }
    Ok(())
}

/// Interface names: no white space, `/` or `:`; at most 15 bytes for
/// kernel interfaces (IFNAMSIZ - 1), 64 otherwise.
fn check_interface_name(name: &str, kernel: bool) -> Result<(), String> {
    let max = if kernel { 15 } else { 64 };
    if name.is_empty() {
        return Err("the interface name is empty".into());
    }
    if name.len() > max {
        return Err(format!(
            "interface name {name:?} is longer than {max} bytes"
        ));
    }
    if name
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '/' || c == ':')
    {
        return Err(format!(
            "interface name {name:?} may not hold white space, '/' or ':'"
        ));
    }
    Ok(())
}

/// A dpid: a non-negative integer, or a string holding a decimal number,
/// `0x` and 1 to 16 hex digits, or 8 colon-separated hex bytes.
pub(crate) fn parse_dpid(v: &IntOrString) -> Result<u64, String> {
    let bad = |s: &str| {
        format!(
            "dpid {s:?} is not valid (a number, \"0x\" and up to 16 hex digits, or 8 hex bytes as \"aa:bb:cc:dd:ee:ff:00:11\")"
        )
    };
    match v {
        IntOrString::Int(n) => u64::try_from(*n)
            .map_err(|_| format!("dpid {n} is not valid (a datapath id is not negative)")),
        IntOrString::Str(s) => {
            if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad(s));
                }
                u64::from_str_radix(hex, 16).map_err(|_| bad(s))
            } else if s.contains(':') {
                let parts: Vec<&str> = s.split(':').collect();
                if parts.len() != 8 {
                    return Err(bad(s));
                }
                let mut v = 0u64;
                for part in parts {
                    if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(bad(s));
                    }
                    v = (v << 8) | u64::from_str_radix(part, 16).map_err(|_| bad(s))?;
                }
                Ok(v)
            } else if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                s.parse::<u64>().map_err(|_| bad(s))
            } else {
                Err(bad(s))
            }
        }
    }
}

/// The field path of the value at `offset` in a TOML document, found by
/// walking the parsed document for the deepest key or value whose span
/// holds it (`bridges[0].ports[1].speed`). Empty when the document does not
/// parse or nothing holds the offset.
pub(crate) fn path_at(text: &str, offset: usize) -> String {
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return String::new();
    };
    let mut best = (0usize, String::new());
    walk_table(doc.get_ref(), offset, "", 0, &mut best);
    best.1
}

fn holds(span: &Range<usize>, offset: usize) -> bool {
    span.contains(&offset) || (span.start == offset && span.end == offset)
}

fn walk_table(
    t: &toml::de::DeTable<'_>,
    offset: usize,
    prefix: &str,
    depth: usize,
    best: &mut (usize, String),
) {
    for (k, v) in t.iter() {
        let key: &str = k.get_ref();
        let p = if prefix.is_empty() {
            key.to_string()
        } else {
            format!("{prefix}.{key}")
        };
        if (holds(&k.span(), offset) || holds(&v.span(), offset)) && depth + 1 > best.0 {
            *best = (depth + 1, p.clone());
        }
        walk_value(v, offset, &p, depth + 1, best);
    }
}

fn walk_value(
    v: &S<toml::de::DeValue<'_>>,
    offset: usize,
    p: &str,
    depth: usize,
    best: &mut (usize, String),
) {
    match v.get_ref() {
        toml::de::DeValue::Table(t) => walk_table(t, offset, p, depth, best),
        toml::de::DeValue::Array(a) => {
            for (i, e) in a.iter().enumerate() {
                let pi = format!("{p}[{i}]");
                if holds(&e.span(), offset) && depth + 1 > best.0 {
                    *best = (depth + 1, pi.clone());
                }
                walk_value(e, offset, &pi, depth + 1, best);
            }
        }
        _ => {}
    }
}

/// The directory relative paths in a config file are taken from.
pub(crate) fn config_dir(origin: &Path) -> PathBuf {
    origin.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Flow-file lines parsed per block ([`parse_in_parallel`]).
const PARSE_BLOCK: usize = 1 << 16;

/// Parses `lines` in order, split over the machine's cores when there
/// are enough of them to be worth a thread (a million-line flows file
/// takes about 2 s on one core here).
fn parse_in_parallel<T: Send>(
    lines: &[(usize, &str)],
    parse: fn(&str) -> Result<T, flowtext::ParseError>,
) -> Vec<Result<T, flowtext::ParseError>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads <= 1 || lines.len() < 4096 {
        return lines.iter().map(|(_, l)| parse(l)).collect();
    }
    let per = lines.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = lines
            .chunks(per)
            .map(|part| s.spawn(move || part.iter().map(|(_, l)| parse(l)).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// A parse error on line `li` (0-based) of a flows, groups or meters
/// file, with the column of the offending token.
fn line_parse_error(
    path: &Path,
    li: usize,
    line: &str,
    field: &str,
    e: flowtext::ParseError,
) -> Diagnostic {
    let column = line
        .get(..e.position)
        .map(|s| s.chars().count() + 1)
        .unwrap_or(e.position + 1);
    Diagnostic {
        file: path.to_path_buf(),
        line: Some(li + 1),
        column: Some(column),
        field: field.to_string(),
        message: e.message,
    }
}

/// What the flow checks of one bridge carry from flow to flow.
struct FlowChecks<'c> {
    ctx: &'c FlowCtx,
    groups: &'c HashSet<u32>,
    meters: &'c HashSet<u32>,
    seen: SeenFlows,
    out: Vec<StaticFlow>,
}

/// The (table, priority, match) keys of the flows so far, to find one
/// that replaces an earlier one. Keyed by a 64-bit hash, not by the
/// match itself (a copy of a million matches would cost more than the
/// flows' text); a hash that is already there is confirmed by parsing
/// the earlier flow again, and keys whose hashes collide go to `exact`.
#[derive(Default)]
struct SeenFlows {
    by_hash: HashMap<u64, usize>,
    exact: HashMap<(u8, u16, ofp::Match), usize>,
}

impl SeenFlows {
    /// Where the first flow with `fm`'s key was written, if one was; else
    /// records `fm` as the first, at index `out.len()` (it is pushed next).
    fn first(&mut self, out: &[StaticFlow], fm: &FlowMod) -> Option<String> {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        (fm.table_id, fm.priority, &fm.match_).hash(&mut h);
        let next = out.len();
        let same = |i: usize| {
            out[i].flow_mod().is_ok_and(|o| {
                (o.table_id, o.priority, &o.match_) == (fm.table_id, fm.priority, &fm.match_)
            })
        };
        match self.by_hash.entry(h.finish()) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(next);
                None
            }
            std::collections::hash_map::Entry::Occupied(o) if same(*o.get()) => {
                Some(out[*o.get()].source.to_string())
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                let key = (fm.table_id, fm.priority, fm.match_.clone());
                match self.exact.get(&key) {
                    Some(&i) => Some(out[i].source.to_string()),
                    None => {
                        self.exact.insert(key, next);
                        None
                    }
                }
            }
        }
    }
}
