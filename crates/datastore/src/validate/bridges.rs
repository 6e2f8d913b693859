//! Bridges: identity (name, dpid, fail mode, table sizes), their
//! controllers, what must be unique across bridges (names, dpids,
//! interfaces, listeners), patch links and the TLS files.

use super::flows::{source_at, FlowCtx, GROUPS, METERS};
use super::*;

impl Checker<'_> {
    /// One bridge: its fields, ports, controllers, groups, meters and flows.
    /// The ports come back separately (patch ports get their peers later).
    pub(super) fn bridge(
        &mut self,
        bi: usize,
        rb: &RawBridge,
    ) -> (Option<Bridge>, Vec<Option<PortDraft>>) {
        let p = self.bridge_path(bi, rb);
        let name = rb.name.get_ref().clone();
        if let Err(m) = check_bridge_name(&name) {
            self.err(&rb.name.span(), &p.at("name"), m);
        }
        let dpid = match &rb.dpid {
            None => Some(bi as u64 + 1),
            Some(d) => match parse_dpid(d.get_ref()) {
                Ok(v) => Some(v),
                Err(m) => {
                    self.err(&d.span(), &p.at("dpid"), m);
                    None
                }
            },
        };
        let fail_mode = match &rb.fail_mode {
            None => Some(FailMode::Secure),
            Some(f) => self.word(f, &p.at("fail_mode")),
        };
        let n_tables = self.int_or(&rb.n_tables, &p.at("n_tables"), 1..=254, 254);
        let miss_send_len = self.int_or(&rb.miss_send_len, &p.at("miss_send_len"), 0..=65535, 128);
        let capacity = self.int_or(
            &rb.flow_table_capacity,
            &p.at("flow_table_capacity"),
            1..=16_777_216,
            16_777_216,
        );
        let memory_limit = self.int_or(
            &rb.flow_memory_limit_mib,
            &p.at("flow_memory_limit_mib"),
            0..=16_777_216,
            0,
        );

        let mut ports: Vec<Option<PortDraft>> = Vec::new();
        let mut numbers: HashMap<u32, usize> = HashMap::new();
        for (pi, rp) in rb.ports.iter().enumerate() {
            let pp = self.port_path(&p, pi, rp.get_ref());
            let draft = self.port(&pp, rp.get_ref());
            if let Some(d) = &draft {
                if let Some(prev) = numbers.insert(d.number, pi) {
                    let prev = match rb.ports.get(prev) {
                        Some(rq) => self.port_path(&p, prev, rq.get_ref()),
                        None => p.at(format!("ports[{prev}]")),
                    };
                    self.err_dup(
                        &d.span,
                        &pp.at("port"),
                        format!("port number {} is already used by ", d.number),
                        &prev,
                    );
                }
            }
            ports.push(draft);
        }
        let port_numbers: HashSet<u32> = numbers.keys().copied().collect();

        let mut controllers = Vec::new();
        let mut seen_targets: HashMap<ControllerTarget, usize> = HashMap::new();
        for (ci, rc) in rb.controllers.iter().enumerate() {
            let cp = p.at(format!("controllers[{ci}]"));
            let c = self.controller(&cp, rc);
            if let Some(c) = &c {
                if let Some(prev) = seen_targets.insert(c.target.clone(), ci) {
                    let span = rc
                        .get_ref()
                        .target
                        .as_ref()
                        .or(rc.get_ref().listen.as_ref());
                    let span = span.map(|s| s.span()).unwrap_or_else(|| rc.span());
                    self.err_dup(
                        &span,
                        &cp,
                        format!("controller {} is already given as ", c.target),
                        &p.at("controllers").index(prev),
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
        let (meters, meters_file) = self.static_list(&ctx, &METERS, &rb.meters, &rb.meters_file);
        let meter_ids: HashSet<u32> = meters.iter().map(|m| m.item.meter_mod.meter_id).collect();
        let (groups, groups_file) = self.static_list(&ctx, &GROUPS, &rb.groups, &rb.groups_file);
        let group_ids: HashSet<u32> = groups.iter().map(|g| g.item.group_mod.group_id).collect();
        for g in &groups {
            let at = source_at(&g.source, g.span.clone());
            for b in &g.item.group_mod.buckets {
                self.check_actions(&ctx, &at, &g.field, &b.actions, &group_ids);
            }
        }
        let meters: Vec<StaticMeter> = meters.into_iter().map(|m| m.item).collect();
        let groups: Vec<StaticGroup> = groups.into_iter().map(|g| g.item).collect();
        let head = match (n_tables, capacity, memory_limit) {
            (Some(n), Some(c), Some(m)) => Some(TablesHead {
                bridge: name.clone(),
                n_tables: n as u8,
                flow_table_capacity: c as u32,
                flow_memory_limit_mib: m as u32,
                meters,
                groups,
                flows: Vec::new(),
            }),
            _ => None,
        };
        let (flows, flows_file, head) = self.flows(&ctx, rb, &group_ids, &meter_ids, head);

        let bridge = (|| {
            let head = head?;
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
                groups: head.groups,
                meters: head.meters,
                flows_file: flows_file?,
                groups_file: groups_file?,
                meters_file: meters_file?,
                local_port: rb.local_port.as_ref().is_some_and(|v| *v.get_ref()),
                qos: Default::default(),
            })
        })();
        (bridge, ports)
    }

    pub(super) fn controller(
        &mut self,
        cp: &FieldPath,
        rc: &S<RawController>,
    ) -> Option<Controller> {
        let r = rc.get_ref();
        let target = match (&r.target, &r.listen) {
            (Some(t), None) => match ControllerTarget::parse_target(t.get_ref()) {
                Ok(t) => Some(t),
                Err(m) => {
                    self.err(&t.span(), &cp.at("target"), m);
                    None
                }
            },
            (None, Some(l)) => match ControllerTarget::parse_listen(l.get_ref()) {
                Ok(t) => Some(t),
                Err(m) => {
                    self.err(&l.span(), &cp.at("listen"), m);
                    None
                }
            },
            (Some(_), Some(l)) => {
                self.err(
                    &l.span(),
                    &cp.at("listen"),
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
        let [echo, dead, bmin, bmax] = [
            (
                &r.echo_interval_ms,
                "echo_interval_ms",
                100,
                DEFAULT_ECHO_INTERVAL_MS,
            ),
            (
                &r.dead_peer_timeout_ms,
                "dead_peer_timeout_ms",
                1,
                DEFAULT_DEAD_PEER_TIMEOUT_MS,
            ),
            (
                &r.backoff_min_ms,
                "backoff_min_ms",
                1,
                DEFAULT_BACKOFF_MIN_MS,
            ),
            (
                &r.backoff_max_ms,
                "backoff_max_ms",
                1,
                DEFAULT_BACKOFF_MAX_MS,
            ),
        ]
        .map(|(v, name, min, default)| {
            self.int_or(v, &cp.at(name), min..=3_600_000, i64::from(default))
        });
        // Where an error about two of the values points: the first given
        // of the two, else the controller.
        let either = |a: &Option<S<i64>>, b: &Option<S<i64>>| {
            a.as_ref()
                .or(b.as_ref())
                .map(|s| s.span())
                .unwrap_or_else(|| rc.span())
        };
        if let (Some(e), Some(d)) = (echo, dead) {
            if d <= e {
                self.err(
                    &either(&r.dead_peer_timeout_ms, &r.echo_interval_ms),
                    &cp.at("dead_peer_timeout_ms"),
                    format!("dead_peer_timeout_ms {d} must be more than echo_interval_ms {e}"),
                );
            }
        }
        if let (Some(lo), Some(hi)) = (bmin, bmax) {
            if hi < lo {
                self.err(
                    &either(&r.backoff_max_ms, &r.backoff_min_ms),
                    &cp.at("backoff_max_ms"),
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

    /// Checks that span bridges: names, dpids, interfaces, pcap output
    /// files, listeners.
    pub(super) fn across_bridges(
        &mut self,
        raw: &RawConfig,
        bridges: &[Option<Bridge>],
        drafts: &[Vec<Option<PortDraft>>],
    ) {
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut dpids: HashMap<u64, usize> = HashMap::new();
        for (bi, rb) in raw.bridges.iter().enumerate() {
            let rb = rb.get_ref();
            let bp = self.bridge_path(bi, rb);
            let path_of = |c: &Self, i: usize| match raw.bridges.get(i) {
                Some(r) => c.bridge_path(i, r.get_ref()),
                None => top(format!("bridges[{i}]")),
            };
            if let Some(prev) = names.insert(rb.name.get_ref(), bi) {
                let prev = path_of(self, prev);
                self.err_dup(
                    &rb.name.span(),
                    &bp.at("name"),
                    format!("bridge name {:?} is already used by ", rb.name.get_ref()),
                    &prev,
                );
            }
            if let Some(Some(b)) = bridges.get(bi) {
                if let Some(prev) = dpids.insert(b.dpid, bi) {
                    let span = rb
                        .dpid
                        .as_ref()
                        .map(|d| d.span())
                        .unwrap_or_else(|| rb.name.span());
                    let prev = path_of(self, prev);
                    self.err_dup(
                        &span,
                        &bp.at("dpid"),
                        format!("dpid {:#018x} is already used by ", b.dpid),
                        &prev,
                    );
                }
            }
        }
        let mut ifaces: HashMap<String, FieldPath> = HashMap::new();
        // A bridge's local port is the TAP interface named after it: no
        // kernel interface port may take that name.
        let locals: HashSet<&str> = bridges
            .iter()
            .flatten()
            .filter(|b| b.local_port)
            .map(|b| b.name.as_str())
            .collect();
        let mut pcap_out: HashMap<PathBuf, FieldPath> = HashMap::new();
        let mut devices: HashMap<String, FieldPath> = HashMap::new();
        // VXLAN receive sockets: (local address, UDP port, which port).
        let mut vxlan_binds: Vec<(Option<std::net::Ipv4Addr>, u16, FieldPath)> = Vec::new();
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
                    self.err_dup(
                        &ispan,
                        &path.at("interface"),
                        format!("interface {name:?} is already used by "),
                        prev,
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
                        self.err_dup(
                            &ispan,
                            &path.at("dst_port"),
                            format!(
                                "VXLAN UDP port {} on {} is already received on by ",
                                t.dst_port,
                                t.local_ip
                                    .map_or("any address".to_string(), |a| a.to_string())
                            ),
                            prev,
                        );
                    } else {
                        vxlan_binds.push((t.local_ip, t.dst_port, path.clone()));
                    }
                }
                if backend.is_kernel() && locals.contains(name.as_str()) {
                    self.err(
                        &ispan,
                        &path.at("interface"),
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
                        self.err_dup(
                            &span,
                            &path.at("dpdk_devargs"),
                            format!("DPDK device {dev:?} is already "),
                            prev,
                        );
                    } else {
                        devices.insert(dev, path.clone());
                    }
                }
                if let Backend::Pcap(PcapBackend { write: Some(w), .. }) = backend {
                    let wspan = rp.pcap_write.as_ref().map(|i| i.span()).unwrap_or(0..0);
                    if let Some(prev) = pcap_out.get(w) {
                        self.err_dup(
                            &wspan,
                            &path.at("pcap_write"),
                            format!("{} is already written by ", w.display()),
                            prev,
                        );
                    } else {
                        pcap_out.insert(w.clone(), path.clone());
                    }
                }
            }
        }
        let mut listeners: Vec<((std::net::IpAddr, u16), FieldPath)> = Vec::new();
        for (bi, rb) in raw.bridges.iter().enumerate() {
            let Some(Some(b)) = bridges.get(bi) else {
                continue;
            };
            for (ci, c) in b.controllers.iter().enumerate() {
                if let ControllerTarget::Listen { addr, port, .. } = &c.target {
                    if *port == 0 {
                        continue;
                    }
                    let (span, path) = self.controller_at(bi, rb.get_ref(), ci);
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
                        self.err_dup(
                            &span,
                            &path,
                            format!("{} is already listened on by ", c.target),
                            prev,
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
    pub(super) fn patch_links(
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
        let mut linked: HashMap<(usize, u32), FieldPath> = HashMap::new();
        let mut links = Vec::new();
        for (li, rl) in raw.patch_links.iter().enumerate() {
            let rl = rl.get_ref();
            let mut ends = Vec::new();
            for (side, v) in [("a", &rl.a), ("b", &rl.b)] {
                let field = top(format!("patch_links[{li}].{side}"));
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
                        let path = self.show(path);
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
                    self.err_dup(
                        &v.span(),
                        &field,
                        format!("port {pn} of bridge {bname:?} is already linked by "),
                        prev,
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
                        &top(format!("patch_links[{li}].b")),
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
                        &path.at("backend"),
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
    pub(super) fn tls(
        &mut self,
        raw: &RawConfig,
        bridges: &[Option<Bridge>],
    ) -> Option<Option<TlsFiles>> {
        let files = match &raw.tls {
            None => None,
            Some(t) => {
                let t = t.get_ref();
                let k = self.path_value(&t.private_key, &top("tls.private_key"));
                let c = self.path_value(&t.certificate, &top("tls.certificate"));
                let a = self.path_value(&t.ca_cert, &top("tls.ca_cert"));
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
                        let (span, path) = self.controller_at(bi, rb.get_ref(), ci);
                        self.err(
                            &span,
                            &path,
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
}

impl Checker<'_> {
    /// Controller `ci` of bridge `bi`: where its target (or listen) is
    /// written, and its path.
    fn controller_at(&self, bi: usize, rb: &RawBridge, ci: usize) -> (Range<usize>, FieldPath) {
        let span = rb
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
        (span, self.bridge_path(bi, rb).at("controllers").index(ci))
    }
}

/// Bridge names: 1..=32 of letters, digits, `_`, `-`, `.`.
pub(super) fn check_bridge_name(name: &str) -> Result<(), String> {
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
