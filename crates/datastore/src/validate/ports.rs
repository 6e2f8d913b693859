//! Ports: number, interface and backend (AF_PACKET, AF_XDP, TAP, pcap,
//! DPDK, VXLAN/GRE tunnels), VLAN settings, egress queues (QoS), the
//! `[dpdk]` section and the placement of port queues on thread cores.

use super::*;

impl Checker<'_> {
    pub(super) fn port(&mut self, p: &FieldPath, rp: &RawPort) -> Option<PortDraft> {
        let number = self
            .int(
                &rp.port,
                &p.at("port"),
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
                        &p.at(f),
                        format!("{f} is only for backend = \"pcap\""),
                    );
                }
            }
        }
        if backend_name != Some("dpdk") {
            for (f, span) in dpdk_fields(rp) {
                self.err(
                    &span,
                    &p.at(f),
                    format!("{f} is only for backend = \"dpdk\""),
                );
            }
        }
        if !matches!(backend_name, Some("vxlan") | Some("gre")) {
            for (f, span) in tunnel_fields(rp) {
                self.err(
                    &span,
                    &p.at(f),
                    format!("{f} is only for backend = \"vxlan\" or \"gre\""),
                );
            }
        }
        let kind = match backend_name {
            Some("patch") => {
                if let Some(i) = &rp.interface {
                    self.err(
                        &i.span(),
                        &p.at("interface"),
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
                            &p.at("backend"),
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
                            self.err(&i.span(), &p.at("interface"), m);
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
            Some(q) => Some(self.qos(&p.at("qos"), q)?),
            None => None,
        };
        Some(PortDraft {
            qos,
            number: number?,
            kind: kind?,
            vlan: vlan?,
            span: rp.port.span(),
            path: p.clone(),
        })
    }

    /// A port's VLAN settings for NORMAL: `tag`, `trunks`, `vlan_mode`.
    pub(super) fn port_vlan(&mut self, p: &FieldPath, rp: &RawPort) -> Option<VlanSettings> {
        let vid = 0..=i64::from(MAX_VID);
        let tag = match &rp.tag {
            Some(t) => Some(self.int(t, &p.at("tag"), "tag", vid.clone())? as u16),
            None => None,
        };
        let mut trunks = Vec::new();
        if let Some(list) = &rp.trunks {
            for (i, t) in list.get_ref().iter().enumerate() {
                trunks.push(
                    self.int(t, &p.at(format!("trunks[{i}]")), "VLAN id", vid.clone())? as u16,
                );
            }
        }
        let mode = match &rp.vlan_mode {
            Some(m) => match m.get_ref().parse::<VlanMode>() {
                Ok(m) => Some(m),
                Err(e) => {
                    self.err(&m.span(), &p.at("vlan_mode"), e);
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
                self.err(&span, &p.at(field), e);
                None
            }
        }
    }

    /// A VXLAN (`vxlan`) or GRE port's underlay settings.
    pub(super) fn tunnel_port(
        &mut self,
        p: &FieldPath,
        rp: &RawPort,
        vxlan: bool,
    ) -> Option<Backend> {
        let mut ok = true;
        let mut ip = |c: &mut Self, v: &Option<S<String>>, what: &str, remote: bool| match v {
            None => None,
            Some(v) => match crate::tunnel::parse_tunnel_ip(what, v.get_ref(), remote) {
                Ok(ip) => Some(ip),
                Err(m) => {
                    c.err(&v.span(), &p.at(what), m);
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
                &p.at("remote_ip"),
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
                        self.err(&k.span(), &p.at("key"), m);
                        ok = false;
                        None
                    }
                }
            }
        };
        let dst_port = match (&rp.dst_port, vxlan) {
            (None, true) => VXLAN_DEFAULT_PORT,
            (None, false) => 0,
            (Some(v), true) => match self.int(v, &p.at("dst_port"), "dst_port", 1..=65535) {
                Some(n) => n as u16,
                None => {
                    ok = false;
                    0
                }
            },
            (Some(v), false) => {
                self.err(
                    &v.span(),
                    &p.at("dst_port"),
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
    pub(super) fn qos(&mut self, p: &FieldPath, rq: &S<RawQos>) -> Option<PortQos> {
        let raw = rq.get_ref();
        let kind = match &raw.kind {
            None => Some(QosKind::default()),
            Some(k) => {
                let kind = QosKind::parse(k.get_ref());
                if kind.is_none() {
                    self.err(
                        &k.span(),
                        &p.at("type"),
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
            Some(v) => self.int(v, &p.at("max_rate"), "rate", 0..=rate),
            None => Some(0),
        };
        let mut queues = Vec::new();
        let mut ids: HashMap<u32, usize> = HashMap::new();
        for (qi, rq) in raw.queues.iter().enumerate() {
            let qp = p.at(format!("queues[{qi}]"));
            let q = rq.get_ref();
            let id = self.int(&q.id, &qp.at("id"), "queue id", 0..=0xffff_fffe);
            let min_rate = match &q.min_rate {
                Some(v) => self.int(v, &qp.at("min_rate"), "rate", 0..=rate),
                None => Some(0),
            };
            let qmax = match &q.max_rate {
                Some(v) => self.int(v, &qp.at("max_rate"), "rate", 0..=rate),
                None => Some(0),
            };
            let priority = match &q.priority {
                Some(v) => self.int(v, &qp.at("priority"), "priority", 0..=i64::from(u32::MAX)),
                None => Some(0),
            };
            if let Some(id) = id {
                if let Some(prev) = ids.insert(id as u32, qi) {
                    self.err_dup(
                        &q.id.span(),
                        &qp.at("id"),
                        format!("queue {id} is already given as "),
                        &p.at("queues").index(prev),
                    );
                }
            }
            if let (Some(lo), Some(hi)) = (min_rate, qmax) {
                if hi != 0 && lo > hi {
                    self.err(
                        &rq.span(),
                        &qp.at("min_rate"),
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
    pub(super) fn dpdk_port(&mut self, p: &FieldPath, rp: &RawPort) -> Option<Backend> {
        let devargs = match (&rp.dpdk_devargs, &rp.interface) {
            (Some(d), _) => {
                let v = d.get_ref().trim();
                if v.is_empty() || v.starts_with(',') || v.contains(char::is_control) {
                    self.err(
                        &d.span(),
                        &p.at("dpdk_devargs"),
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
            Some(v) => c.int(v, &p.at(name), name, range).map(Some),
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
                    match self.int(
                        c,
                        &p.at(format!("rx_queue_cores[{i}]")),
                        "core",
                        0..=cpus - 1,
                    ) {
                        Some(n) => out.push(n as usize),
                        None => ok = false,
                    }
                }
                if list.get_ref().is_empty() {
                    self.err(
                        &list.span(),
                        &p.at("rx_queue_cores"),
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
                    &p.at("rx_queue_cores"),
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
    pub(super) fn dpdk(&mut self, raw: &RawConfig) -> Option<DpdkSettings> {
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
                        &top(format!("dpdk.eal_args[{i}]")),
                        format!("EAL argument {v:?} is not allowed (it ends the process)"),
                    );
                    ok = false;
                } else if v.contains('\0') {
                    self.err(
                        &a.span(),
                        &top(format!("dpdk.eal_args[{i}]")),
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
    pub(super) fn queue_placement(
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
                let p = self.port_path(&self.bridge_path(bi, rb.get_ref()), pi, rp);
                if let (Some(cores), Some(v)) = (&b.rx_queue_cores, &rp.rx_queue_cores) {
                    match readers {
                        Some(pinned) => {
                            for (i, c) in cores.iter().enumerate() {
                                if !pinned.contains(c) {
                                    self.err(
                                        &v.get_ref().get(i).map_or(v.span(), |x| x.span()),
                                        &p.at(format!("rx_queue_cores[{i}]")),
                                        format!("no reading thread runs on core {c} (dataplane.{reader_key} = {pinned:?})"),
                                    );
                                }
                            }
                        }
                        None if d.core_assign.is_some() => {}
                        None => self.err(
                            &v.span(),
                            &p.at("rx_queue_cores"),
                            format!("rx_queue_cores needs the reading threads pinned: give dataplane.{reader_key} or dataplane.core_assign"),
                        ),
                    }
                }
                if let (Some(c), Some(v)) = (b.tx_core, &rp.tx_core) {
                    if !piped {
                        self.err(
                            &v.span(),
                            &p.at("tx_core"),
                            "tx_core is only for mode = \"rx-worker-tx\" (run to completion, every worker sends)",
                        );
                    } else {
                        match &d.tx_cores {
                            Some(pinned) if !pinned.contains(&c) => self.err(
                                &v.span(),
                                &p.at("tx_core"),
                                format!("no TX thread runs on core {c} (dataplane.tx_cores = {pinned:?})"),
                            ),
                            Some(_) => {}
                            None if d.core_assign.is_some() => {}
                            None => self.err(
                                &v.span(),
                                &p.at("tx_core"),
                                "tx_core needs the TX threads pinned: give dataplane.tx_cores or dataplane.core_assign",
                            ),
                        }
                    }
                }
            }
        }
    }

    pub(super) fn pcap(&mut self, p: &FieldPath, rp: &RawPort) -> Option<Backend> {
        let read = match &rp.pcap_read {
            Some(v) => Some(self.path_value(v, &p.at("pcap_read"))?),
            None => None,
        };
        let write = match &rp.pcap_write {
            Some(v) => Some(self.path_value(v, &p.at("pcap_write"))?),
            None => None,
        };
        if read.is_none() && write.is_none() {
            let span = rp.backend.as_ref().map(|b| b.span()).unwrap_or(0..0);
            self.err(
                &span,
                &p.at("backend"),
                "a pcap port needs pcap_read, pcap_write or both",
            );
            return None;
        }
        let rate = match &rp.pcap_rate {
            None => PcapRate::Max,
            Some(r) => {
                let field = p.at("pcap_rate");
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
}

/// The tunnel keys a port sets, with their spans.
pub(super) fn tunnel_fields(rp: &RawPort) -> Vec<(&'static str, Range<usize>)> {
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
pub(super) fn dpdk_fields(rp: &RawPort) -> Vec<(&'static str, Range<usize>)> {
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

/// Interface names: no white space, `/` or `:`; at most 15 bytes for
/// kernel interfaces (IFNAMSIZ - 1), 64 otherwise.
pub(super) fn check_interface_name(name: &str, kernel: bool) -> Result<(), String> {
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
