//! A running bridge's ports: adding and removing them while the others
//! forward, their link state and VLAN settings, their egress queues, and
//! their counters as port statistics.

use super::*;

impl BridgeRt {
    /// Gives port `port` the egress queues `q` (`None`: none): the
    /// threads send through them once this returns, and the port table
    /// lists them for QUEUE_GET_CONFIG and QUEUE stats (counters from the
    /// scheduler). An unknown port is `NotFound`.
    pub(crate) fn set_qos(&self, port: u32, q: Option<&datastore::PortQos>) -> io::Result<()> {
        let spec = q.map(qos_spec);
        let handle = {
            let mut t = self.threads();
            t.set_qos(port, spec.as_ref())?;
            t.queue_handle(port)
        };
        let old = lock_map(&self.qos).remove(&port);
        {
            let mut c = self.control();
            let now = self.now();
            for id in old.iter().flat_map(|(ids, _)| ids) {
                c.dp.state.port_table.remove_queue(port, *id);
            }
            for qc in q.iter().flat_map(|q| &q.queues) {
                let reference = q.map_or(0, |q| q.max_rate);
                c.dp.state.port_table.set_queue(
                    port,
                    qc.id,
                    pipeline::tables::port_table::QueueConfig {
                        min_rate: permille(qc.min_rate, reference),
                        max_rate: permille(qc.max_rate, reference),
                    },
                    now,
                );
            }
        }
        if let (Some(q), Some(h)) = (q, handle) {
            let ids = q.queues.iter().map(|c| c.id).collect();
            lock_map(&self.qos).insert(port, (ids, h));
        }
        tracing::info!(bridge = %self.name, port, queues = q.map_or(0, |q| q.queues.len()), "egress queues set");
        Ok(())
    }

    /// Every port's egress queue counters (the default queue included).
    pub(crate) fn queue_counters(&self) -> BTreeMap<u32, Vec<dataplane::qos::QueueCounters>> {
        lock_map(&self.qos)
            .iter()
            .map(|(p, (_, h))| (*p, h.counters()))
            .collect()
    }

    pub(crate) fn port_counters(&self) -> BTreeMap<u32, PortCounters> {
        let mut m = self.threads().port_counters();
        m.remove(&INJECT_PORT);
        m
    }

    /// The dataplane threads' drops per port (rings, TX bursts, failed
    /// port calls); the injection port's count against no OpenFlow port.
    /// Packets the injection ring had no room for count as their output
    /// port's `tx_ring_full`.
    pub(crate) fn port_drops(&self) -> BTreeMap<u32, ThreadDrops> {
        let mut m = self.threads().port_drops();
        m.remove(&INJECT_PORT);
        // Not nested in the threads lock: `transmit` takes the two the
        // other way round.
        let lost = self.control().inject_lost.clone();
        for (port, n) in lost {
            m.entry(port).or_default().tx_ring_full += n;
        }
        m
    }

    /// Completes OpenFlow port statistics, which the pipeline counts as
    /// packets enter and leave it, with what happened outside it: frames
    /// lost before the pipeline saw them (the kernel's socket or ring
    /// overflowing, a full RX → worker ring, malformed or truncated
    /// frames) are `rx_dropped`; packets the pipeline output that the port
    /// never sent (a full worker → TX ring or TX burst, a link that went
    /// down, an oversize frame, a failed send) move from `tx_packets` to
    /// `tx_dropped`; failed port calls are `rx_errors` / `tx_errors`.
    pub(crate) fn complete_port_stats(&self, stats: &mut [ofp::stats::PortStats]) {
        let counters = self.port_counters();
        let drops = self.port_drops();
        for s in stats {
            let c = counters.get(&s.port_no).copied().unwrap_or_default();
            let d = drops.get(&s.port_no).copied().unwrap_or_default();
            s.rx_dropped = s.rx_dropped.saturating_add(c.rx_dropped() + d.rx_total());
            let unsent = c.tx_dropped() + c.tx_errors + d.tx_total();
            s.tx_packets = s.tx_packets.saturating_sub(unsent);
            s.tx_dropped = s
                .tx_dropped
                .saturating_add(c.tx_dropped() + d.tx_total() - d.port_error);
            s.rx_errors = s.rx_errors.saturating_add(c.rx_errors + d.rx_error);
            s.tx_errors = s.tx_errors.saturating_add(c.tx_errors + d.port_error);
        }
    }

    fn emit_port_status(&self, reason: u8, desc: ofp::Port) {
        self.emit(agent::SwitchEvent::PortStatus(ofp::PortStatus {
            reason,
            desc,
        }));
    }

    /// Adds an opened port to the running bridge: the pipeline learns it
    /// (and tells controllers with a PORT_STATUS ADD), then the threads
    /// take it over. On error nothing changed.
    pub(crate) fn add_port(&self, p: OpenPort) -> io::Result<()> {
        if self.port_entries().contains_key(&p.number) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("bridge {} already has port {}", self.name, p.number),
            ));
        }
        let desc = port_desc(p.number, &p.interface, p.backend.as_ref());
        let entry = PortEntry {
            interface: p.interface.clone(),
            kernel: p.kernel,
        };
        // Tables first, so the first packet the threads read finds the
        // port; then the threads.
        {
            let mut c = self.control();
            let now = self.now();
            c.dp.state.port_table.add_port(desc.clone(), now);
            c.dp.ports.set(
                p.number,
                PortInfo {
                    config: desc.config,
                    state: desc.state,
                },
            );
            c.dp.ports.set_vlan(p.number, p.vlan.clone());
            self.publish(&c);
        }
        let (number, interface) = (p.number, p.interface.clone());
        let added = port_spec(&self.tcfg, p).and_then(|spec| self.threads().add_port(spec));
        if let Err(e) = added {
            let mut c = self.control();
            c.dp.state.port_table.remove_port(number);
            c.dp.ports.remove(number);
            self.publish(&c);
            return Err(e);
        }
        self.port_entries().insert(number, entry);
        self.emit_port_status(ofp::port_status::port_reason::ADD, desc);
        tracing::info!(bridge = %self.name, port = number, interface = %interface, "port added");
        Ok(())
    }

    /// Removes a port from the running bridge: the threads let it go (its
    /// backend is closed when this returns), then the pipeline forgets it
    /// and controllers get a PORT_STATUS DELETE.
    pub(crate) fn remove_port(&self, number: u32) -> io::Result<PortEntry> {
        let Some(entry) = self.port_entries().get(&number).cloned() else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("bridge {} has no port {number}", self.name),
            ));
        };
        self.threads().remove_port(number)?;
        lock_map(&self.qos).remove(&number);
        let desc = {
            let mut c = self.control();
            let desc = c.dp.state.port_table.remove_port(number);
            c.dp.ports.remove(number);
            self.publish(&c);
            // What NORMAL learnt behind the port is gone with it.
            c.dp.config.normal.flush_port(number);
            desc
        };
        self.port_entries().remove(&number);
        if let Some(desc) = desc {
            self.emit_port_status(ofp::port_status::port_reason::DELETE, desc);
        }
        tracing::info!(bridge = %self.name, port = number, interface = %entry.interface, "port removed");
        Ok(entry)
    }

    /// Sets the link bit of one port, publishes, and tells the agent (if
    /// one runs) with a PORT_STATUS.
    pub(crate) fn set_link(&self, port: u32, up: bool) -> u64 {
        let mut c = self.control();
        let mut state =
            c.dp.state
                .port_table
                .get(port)
                .map(|p| p.state)
                .unwrap_or_default();
        if up {
            state &= !port_state::LINK_DOWN;
        } else {
            state |= port_state::LINK_DOWN;
        }
        let changed = c.dp.state.port_table.set_state(port, state);
        if let Some(mut info) = c.dp.ports.get(port) {
            info.state = state;
            c.dp.ports.set(port, info);
        }
        let v = self.publish(&c);
        drop(c);
        if let Some(desc) = changed {
            self.emit_port_status(ofp::port_status::port_reason::MODIFY, desc);
        }
        v
    }

    /// Sets a port's VLAN settings for NORMAL, publishes, and forgets
    /// what was learnt behind the port.
    pub(crate) fn set_port_vlan(&self, number: u32, vlan: pipeline::normal::PortVlan) {
        let mut c = self.control();
        c.dp.ports.set_vlan(number, vlan);
        self.publish(&c);
        c.dp.config.normal.flush_port(number);
    }
}
