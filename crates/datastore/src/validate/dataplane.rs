//! The `[dataplane]` section: thread mode and counts, cores or a
//! placement policy, burst sizes, flushing, ring sizes and dispatch.

use super::*;

impl Checker<'_> {
    /// `[dataplane]`.
    pub(super) fn dataplane(&mut self, raw: Option<&S<RawDataplane>>) -> Option<Dataplane> {
        let empty = RawDataplane::default();
        let r = raw.map(|r| r.get_ref()).unwrap_or(&empty);
        let mode = match &r.mode {
            None => Some(ThreadMode::RunToCompletion),
            Some(m) => self.word(m, &top("dataplane.mode")),
        };
        let threads = 1..=MAX_THREADS as i64;
        let pipelined = mode == Some(ThreadMode::RxWorkerTx);
        let count = |c: &mut Self, v: &Option<S<i64>>, name: &str| -> Option<usize> {
            let field = top(format!("dataplane.{name}"));
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

        let mut used: HashMap<i64, FieldPath> = HashMap::new();
        let rx_cores = self.cores(&r.rx_cores, "rx_cores", rx, &mut used);
        let worker_cores = self.cores(&r.worker_cores, "worker_cores", workers, &mut used);
        let tx_cores = self.cores(&r.tx_cores, "tx_cores", tx, &mut used);

        let burst = self.burst(r.burst.as_ref());
        let defaults = crate::model::FlushPolicy::default();
        let flush_idle = self.int_or(
            &r.flush_idle_us,
            &top("dataplane.flush_idle_us"),
            0..=1000,
            defaults.idle.as_micros() as i64,
        );
        let max_wait = self.int_or(
            &r.max_batch_wait_us,
            &top("dataplane.max_batch_wait_us"),
            0..=10_000,
            defaults.max_wait.as_micros() as i64,
        );
        if let (Some(idle), Some(wait), Some(v)) = (
            flush_idle,
            max_wait,
            r.max_batch_wait_us.as_ref().or(r.flush_idle_us.as_ref()),
        ) {
            if wait < idle {
                self.err(
                    &v.span(),
                    &top("dataplane.max_batch_wait_us"),
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
                    if (size as usize) < need {
                        self.err(
                            &v.span(),
                            &top(format!("dataplane.{name}")),
                            format!("{name} {size} is smaller than the bursts written to and read from the ring ({need})"),
                        );
                    }
                }
            }
        }
        let max_queue_delay = self.int_or(
            &r.max_queue_delay_us,
            &top("dataplane.max_queue_delay_us"),
            0..=1_000_000,
            i64::from(crate::model::DEFAULT_MAX_QUEUE_DELAY_US),
        );
        let bulk_reply_nice = self.int_or(
            &r.bulk_reply_nice,
            &top("dataplane.bulk_reply_nice"),
            0..=19,
            i64::from(crate::model::DEFAULT_BULK_REPLY_NICE),
        );
        let dispatch = self.dispatch(r, workers, pipelined);
        let core_assign = match &r.core_assign {
            None => Some(None),
            Some(v) => {
                let policy: Option<CoreAssign> = self.word(v, &top("dataplane.core_assign"));
                let explicit = [&r.rx_cores, &r.worker_cores, &r.tx_cores]
                    .iter()
                    .any(|c| c.is_some());
                if explicit {
                    self.err(
                        &v.span(),
                        &top("dataplane.core_assign"),
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
                idle: Duration::from_micros(flush_idle? as u64),
                max_wait: Duration::from_micros(max_wait? as u64),
            },
            rings: RingSizes {
                rx_ring: rx_ring?,
                tx_ring: tx_ring?,
            },
            dispatch: dispatch?,
            core_assign: core_assign?,
            max_queue_delay_us: max_queue_delay? as u32,
            bulk_reply_nice: bulk_reply_nice? as u8,
        })
    }

    /// A core pinning list: one core per thread, each below the machine's
    /// CPU count. A core given twice is a warning.
    pub(super) fn cores(
        &mut self,
        v: &Option<S<Vec<S<i64>>>>,
        name: &str,
        threads: Option<usize>,
        used: &mut HashMap<i64, FieldPath>,
    ) -> Option<Option<Vec<usize>>> {
        let Some(list) = v else { return Some(None) };
        let field = top(format!("dataplane.{name}"));
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
            let f = field.index(i);
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
                    format!(
                        "core {n} is also given to {}; the two threads will share it",
                        self.show(prev)
                    ),
                );
            } else {
                used.insert(n, f);
            }
            out.push(n as usize);
        }
        ok.then_some(Some(out))
    }

    pub(super) fn burst(&mut self, raw: Option<&S<RawBurst>>) -> Option<BurstSizes> {
        let empty = RawBurst::default();
        let r = raw.map(|r| r.get_ref()).unwrap_or(&empty);
        let one = |c: &mut Self, v: &Option<S<i64>>, name: &str| -> Option<usize> {
            c.power_of_two(
                v,
                DEFAULT_BURST as i64,
                1..=MAX_BURST as i64,
                format!("dataplane.burst.{name}"),
                "burst size",
            )
            .map(|n| n as usize)
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

    pub(super) fn ring(&mut self, v: &Option<S<i64>>, name: &str) -> Option<u32> {
        self.power_of_two(v, 1024, 64..=65536, format!("dataplane.{name}"), name)
            .map(|n| n as u32)
    }

    /// A power of two within `range`, or `default` where the file leaves
    /// the setting out; anything else is an error at `path` that names
    /// `what` and the range.
    fn power_of_two(
        &mut self,
        v: &Option<S<i64>>,
        default: i64,
        range: std::ops::RangeInclusive<i64>,
        path: String,
        what: &str,
    ) -> Option<i64> {
        let Some(v) = v else { return Some(default) };
        let n = *v.get_ref();
        if range.contains(&n) && (n as u64).is_power_of_two() {
            Some(n)
        } else {
            let (lo, hi) = range.into_inner();
            self.err(
                &v.span(),
                &top(path),
                format!("{what} {n} is not valid (a power of two, {lo}..={hi})"),
            );
            None
        }
    }

    pub(super) fn dispatch_key(&mut self, v: &S<String>, field: &FieldPath) -> Option<DispatchKey> {
        self.word(v, field)
    }

    /// A setting written as a word, by its type's one spelling
    /// (`FromStr`, whose error lists the valid words).
    pub(super) fn word<T: std::str::FromStr<Err = String>>(
        &mut self,
        v: &S<String>,
        field: &FieldPath,
    ) -> Option<T> {
        match v.get_ref().parse() {
            Ok(t) => Some(t),
            Err(m) => {
                self.err(&v.span(), field, m);
                None
            }
        }
    }

    pub(super) fn dispatch(
        &mut self,
        r: &RawDataplane,
        workers: Option<usize>,
        pipelined: bool,
    ) -> Option<Dispatch> {
        let key = match &r.dispatch {
            None => Some(DispatchKey::FiveTuple),
            Some(v) => self.dispatch_key(v, &top("dataplane.dispatch")),
        };
        let fallback = match &r.dispatch_fallback {
            None => Some(DispatchKey::FiveTuple),
            Some(v) => match self.dispatch_key(v, &top("dataplane.dispatch_fallback")) {
                Some(DispatchKey::PriorityClass) => {
                    self.err(
                        &v.span(),
                        &top("dataplane.dispatch_fallback"),
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
                    &top("dataplane.dispatch"),
                    "dispatch applies only in mode = \"rx-worker-tx\"; ignored",
                );
            }
        }
        let is_class = key == Some(DispatchKey::PriorityClass);
        if let (Some(v), Some(k)) = (&r.dispatch_fallback, key) {
            if k != DispatchKey::PriorityClass {
                self.err(
                    &v.span(),
                    &top("dataplane.dispatch_fallback"),
                    "dispatch_fallback is only for dispatch = \"priority-class\"",
                );
            }
        }
        if is_class && r.priority_class.is_empty() {
            let span = r.dispatch.as_ref().map(|d| d.span()).unwrap_or(0..0);
            self.err(
                &span,
                &top("dataplane.dispatch"),
                "priority-class dispatch needs at least one [[dataplane.priority_class]] rule",
            );
        }
        let mut rules = Vec::new();
        let mut ok = true;
        for (i, rr) in r.priority_class.iter().enumerate() {
            let p = top(format!("dataplane.priority_class[{i}]"));
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

    pub(super) fn rule(
        &mut self,
        p: &FieldPath,
        rr: &S<RawRule>,
        workers: Option<usize>,
    ) -> Option<PriorityClassRule> {
        let r = rr.get_ref();
        let mut ok = true;
        let mut small = |c: &mut Self, v: &Option<S<i64>>, name: &str, max: i64| -> Option<i64> {
            let v = v.as_ref()?;
            let n = c.int(v, &p.at(name), name, 0..=max);
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
            Some(w) => self.int(&r.worker, &p.at("worker"), "worker", 0..=(w as i64 - 1)),
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
