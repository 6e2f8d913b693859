//! The control side's calls: starting the threads, changing ports,
//! captures and egress queues, reading counters, stopping.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::capture::Capture;
use crate::port::{PacketBuf, PortCounters};
use crate::qos::{QosSpec, QueueCounters};
use crate::spsc::{self, Consumer};
use crate::wake::Doorbell;

use super::counters::{DropMap, PortDropCells};
use super::mailbox::{await_acks, Change, InRings, ThreadCtl};
use super::registry::{port_parts, Threads};
use super::rings::Stage;
use super::rtc::RtcWorker;
use super::spawn::{core_of, placed_cpus, spawn, Crowd, IdlePlan, RxPort};
use super::split::{RxThread, SplitWorker, TxThread};
use super::tx::{QosPort, QueueStatsHandle, TxPort, TxSide};
use super::types::{
    BurstProcessor, PortSpec, ThreadDrops, ThreadMode, ThreadRole, ThreadStats, ThreadsConfig,
};

impl Threads {
    /// Starts the threads over `ports`; `make` builds worker `i`'s
    /// processor. Port numbers must be distinct (`AlreadyExists`).
    pub fn start(
        cfg: &ThreadsConfig,
        ports: Vec<PortSpec>,
        make: &mut dyn FnMut(usize) -> Box<dyn BurstProcessor>,
    ) -> io::Result<Threads> {
        match cfg.mode {
            ThreadMode::RunToCompletion => Self::start_rtc(cfg, ports, make),
            ThreadMode::RxWorkerTx => Self::start_split(cfg, ports, make),
        }
    }

    pub(super) fn empty(cfg: &ThreadsConfig) -> Threads {
        Threads {
            mode: cfg.mode,
            tx_write: cfg.bursts.tx_write.max(1),
            stop_rx: Arc::default(),
            stop_workers: Arc::default(),
            stop_tx: Arc::default(),
            rx_handles: Vec::new(),
            worker_handles: Vec::new(),
            tx_handles: Vec::new(),
            rx: Vec::new(),
            workers: Vec::new(),
            tx: Vec::new(),
            ports: BTreeMap::new(),
            no_port: Arc::default(),
            retired: ThreadDrops::default(),
            given: 0,
        }
    }

    pub(super) fn ctls(
        cfg: &ThreadsConfig,
        n: usize,
        tag: &str,
        role: ThreadRole,
    ) -> io::Result<Vec<ThreadCtl>> {
        let cores = match role {
            ThreadRole::Rx => &cfg.rx_cores,
            ThreadRole::Worker => &cfg.worker_cores,
            ThreadRole::Tx => &cfg.tx_cores,
        };
        (0..n)
            .map(|i| ThreadCtl::new(format!("{}-{tag}{i}", cfg.name), role, core_of(cores, i)))
            .collect()
    }

    /// rx-worker-tx: the TX thread of the `i`-th port handed over.
    pub(super) fn sender_of(spec: &PortSpec, i: usize, ntx: usize) -> io::Result<usize> {
        match spec.sender {
            Some(x) if x >= ntx => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("port {}: no TX thread {x} (there are {ntx})", spec.number),
            )),
            Some(x) => Ok(x),
            None => Ok(i % ntx),
        }
    }

    pub(super) fn check_new(&self, number: u32) -> io::Result<()> {
        if self.ports.contains_key(&number) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("port {number} is already in use"),
            ));
        }
        Ok(())
    }

    pub(super) fn start_rtc(
        cfg: &ThreadsConfig,
        ports: Vec<PortSpec>,
        make: &mut dyn FnMut(usize) -> Box<dyn BurstProcessor>,
    ) -> io::Result<Threads> {
        let workers = cfg.workers.max(1);
        let mut t = Threads::empty(cfg);
        t.workers = Self::ctls(cfg, workers, "w", ThreadRole::Worker)?;
        let mut rx_of: Vec<Vec<RxPort>> = (0..workers).map(|_| Vec::new()).collect();
        let mut tx_of: Vec<Vec<TxPort>> = (0..workers).map(|_| Vec::new()).collect();
        let bells: Vec<Arc<Doorbell>> = t.workers.iter().map(|c| c.bell.clone()).collect();
        for (i, spec) in ports.into_iter().enumerate() {
            let number = spec.number;
            t.check_new(number)?;
            let chosen = spec.readers.clone();
            let pick = |q: usize| chosen.get(q).copied().unwrap_or((i + q) % workers);
            let (rxs, txs, record) = port_parts(spec, workers, &bells, &pick, t.tx_write)?;
            for (reader, rx) in rxs {
                if let Some(list) = rx_of.get_mut(reader) {
                    list.push(rx);
                }
            }
            for (list, tx) in tx_of.iter_mut().zip(txs) {
                list.push(tx);
            }
            t.ports.insert(number, record);
            t.given += 1;
        }
        for (w, (rx, tx)) in rx_of.into_iter().zip(tx_of).enumerate() {
            let side = t.workers.get(w).map(|c| c.side());
            let side = side.ok_or_else(|| io::Error::other("worker"))?;
            let mut worker = RtcWorker {
                rx,
                tx: TxSide::new(tx, t.no_port.clone()),
                processor: make(w),
                side,
                plan: IdlePlan::default(),
                stop: t.stop_workers.clone(),
                cfg: cfg.clone(),
            };
            t.worker_handles.push(spawn(
                format!("{}-w{w}", cfg.name),
                core_of(&cfg.worker_cores, w),
                move || worker.run(),
            )?);
        }
        Ok(t)
    }

    pub(super) fn start_split(
        cfg: &ThreadsConfig,
        ports: Vec<PortSpec>,
        make: &mut dyn FnMut(usize) -> Box<dyn BurstProcessor>,
    ) -> io::Result<Threads> {
        let (nrx, nw, ntx) = (
            cfg.rx_threads.max(1),
            cfg.workers.max(1),
            cfg.tx_threads.max(1),
        );
        let b = cfg.bursts;
        let mut t = Threads::empty(cfg);
        t.rx = Self::ctls(cfg, nrx, "rx", ThreadRole::Rx)?;
        t.workers = Self::ctls(cfg, nw, "w", ThreadRole::Worker)?;
        t.tx = Self::ctls(cfg, ntx, "tx", ThreadRole::Tx)?;
        let mut rx_ports: Vec<Vec<RxPort>> = (0..nrx).map(|_| Vec::new()).collect();
        let mut tx_ports: Vec<Vec<TxPort>> = (0..ntx).map(|_| Vec::new()).collect();
        let bells: Vec<Arc<Doorbell>> = t.rx.iter().map(|c| c.bell.clone()).collect();
        for (i, spec) in ports.into_iter().enumerate() {
            let number = spec.number;
            t.check_new(number)?;
            let x = Self::sender_of(&spec, i, ntx)?;
            let chosen = spec.readers.clone();
            let pick = |q: usize| chosen.get(q).copied().unwrap_or((i + q) % nrx);
            let (rxs, mut txs, mut record) = port_parts(spec, 1, &bells, &pick, t.tx_write)?;
            record.tx = x;
            for (reader, rx) in rxs {
                if let Some(list) = rx_ports.get_mut(reader) {
                    list.push(rx);
                }
            }
            if let (Some(tx), Some(list)) = (txs.pop(), tx_ports.get_mut(x)) {
                list.push(tx);
            }
            t.ports.insert(number, record);
            t.given += 1;
        }
        // What every worker knows of the ports: their TX thread and cells.
        let routes: HashMap<u32, usize> = t.ports.iter().map(|(n, r)| (*n, r.tx)).collect();
        let drop_map = || {
            let mut m = DropMap::new(t.no_port.clone());
            m.ports = t.ports.iter().map(|(n, r)| (*n, r.drops.clone())).collect();
            m
        };
        let worker_drops: Vec<DropMap> = (0..nw).map(|_| drop_map()).collect();
        // worker_in[w]: consumers of worker w; rx_out[r]: stages of RX thread r.
        let mut worker_in: Vec<Vec<Consumer<PacketBuf>>> = (0..nw).map(|_| Vec::new()).collect();
        let mut rx_out: Vec<Vec<Stage<PacketBuf>>> = (0..nrx).map(|_| Vec::new()).collect();
        for out in rx_out.iter_mut() {
            for (w, ctl) in t.workers.iter().enumerate() {
                let (p, c) = spsc::ring(cfg.rx_ring);
                out.push(Stage::new(p, ctl.bell.clone(), b.rx_write.max(1)));
                if let Some(list) = worker_in.get_mut(w) {
                    list.push(c);
                }
            }
        }
        let mut tx_in: Vec<Vec<Consumer<(u32, PacketBuf)>>> =
            (0..ntx).map(|_| Vec::new()).collect();
        let mut worker_out: Vec<Vec<Stage<(u32, PacketBuf)>>> =
            (0..nw).map(|_| Vec::new()).collect();
        for out in worker_out.iter_mut() {
            for (x, ctl) in t.tx.iter().enumerate() {
                let (p, c) = spsc::ring(cfg.tx_ring);
                out.push(Stage::new(p, ctl.bell.clone(), b.worker_write.max(1)));
                if let Some(list) = tx_in.get_mut(x) {
                    list.push(c);
                }
            }
        }
        // Every thread's CPUs, RX threads, workers, TX threads in turn.
        let cores: Vec<Option<usize>> = (t.rx.iter().chain(&t.workers).chain(&t.tx))
            .map(|c| c.core)
            .collect();
        let placed = Arc::new(placed_cpus(&cores));
        let crowd = |me: usize| Crowd {
            placed: placed.clone(),
            me,
        };
        for (ctl, inputs) in t.workers.iter_mut().zip(&worker_in) {
            ctl.ring_capacity = inputs.iter().map(|c| c.capacity()).sum();
            ctl.rings = InRings::Packets(inputs.iter().map(|c| c.stats()).collect());
        }
        for (ctl, inputs) in t.tx.iter_mut().zip(&tx_in) {
            ctl.ring_capacity = inputs.iter().map(|c| c.capacity()).sum();
            ctl.rings = InRings::Outputs(inputs.iter().map(|c| c.stats()).collect());
        }
        for (x, (ports, inputs)) in tx_ports.into_iter().zip(tx_in).enumerate() {
            let side = t.tx.get(x).map(|c| c.side());
            let side = side.ok_or_else(|| io::Error::other("tx thread"))?;
            let mut th = TxThread {
                inputs,
                tx: TxSide::new(ports, t.no_port.clone()),
                side,
                stop: t.stop_tx.clone(),
                cfg: cfg.clone(),
                crowd: crowd(nrx + nw + x),
            };
            t.tx_handles.push(spawn(
                format!("{}-tx{x}", cfg.name),
                core_of(&cfg.tx_cores, x),
                move || th.run(),
            )?);
        }
        for (w, ((inputs, outs), drops)) in worker_in
            .into_iter()
            .zip(worker_out)
            .zip(worker_drops)
            .enumerate()
        {
            let side = t.workers.get(w).map(|c| c.side());
            let side = side.ok_or_else(|| io::Error::other("worker"))?;
            let mut th = SplitWorker {
                inputs,
                outs,
                routes: routes.clone(),
                drops,
                processor: make(w),
                side,
                stop: t.stop_workers.clone(),
                cfg: cfg.clone(),
                crowd: crowd(nrx + w),
            };
            t.worker_handles.push(spawn(
                format!("{}-w{w}", cfg.name),
                core_of(&cfg.worker_cores, w),
                move || th.run(),
            )?);
        }
        let downstream: Vec<Arc<Doorbell>> = t
            .workers
            .iter()
            .chain(&t.tx)
            .map(|c| c.bell.clone())
            .collect();
        for (r, (ports, outs)) in rx_ports.into_iter().zip(rx_out).enumerate() {
            let side = t.rx.get(r).map(|c| c.side());
            let side = side.ok_or_else(|| io::Error::other("rx thread"))?;
            let mut drops = DropMap::new(t.no_port.clone());
            drops.ports = ports.iter().map(|p| (p.number, p.drops.clone())).collect();
            let mut th = RxThread {
                ports,
                outs,
                dispatcher: cfg.dispatcher.clone(),
                side,
                plan: IdlePlan::default(),
                downstream: downstream.clone(),
                stop: t.stop_rx.clone(),
                drops,
                cfg: cfg.clone(),
                crowd: crowd(r),
            };
            t.rx_handles.push(spawn(
                format!("{}-rx{r}", cfg.name),
                core_of(&cfg.rx_cores, r),
                move || th.run(),
            )?);
        }
        Ok(t)
    }

    /// The threads that read ports: workers (run to completion) or RX
    /// threads.
    pub(super) fn readers(&self) -> &[ThreadCtl] {
        match self.mode {
            ThreadMode::RunToCompletion => &self.workers,
            ThreadMode::RxWorkerTx => &self.rx,
        }
    }

    pub(super) fn running(&self) -> bool {
        !self.worker_handles.is_empty()
    }

    /// Adds a port to the running threads, leaving the other ports alone.
    /// The reader with the fewest ports reads it; every worker (run to
    /// completion) or TX thread `i % tx_threads` (split) sends to it. Once
    /// this returns every thread concerned has taken it. A port number
    /// already present is `AlreadyExists` and changes nothing; a thread
    /// that does not take the port within a few seconds is `TimedOut` (the
    /// port is then withdrawn again).
    pub fn add_port(&mut self, spec: PortSpec) -> io::Result<()> {
        let number = spec.number;
        self.check_new(number)?;
        if !self.running() {
            return Err(io::Error::other("the dataplane threads have stopped"));
        }
        let n = self.readers().len().max(1);
        let base = (0..n)
            .min_by_key(|i| {
                self.ports
                    .values()
                    .map(|r| r.readers.iter().filter(|&&t| t == *i).count())
                    .sum::<usize>()
            })
            .unwrap_or(0);
        let chosen = spec.readers.clone();
        let pick = |q: usize| chosen.get(q).copied().unwrap_or((base + q) % n);
        let bells: Vec<Arc<Doorbell>> = self.readers().iter().map(|c| c.bell.clone()).collect();
        let done = match self.mode {
            ThreadMode::RunToCompletion => {
                let (rxs, txs, record) =
                    port_parts(spec, self.workers.len(), &bells, &pick, self.tx_write)?;
                self.ports.insert(number, record);
                self.given += 1;
                // Each worker applies its changes in order: a reader can
                // send to the port before it reads it.
                for (ctl, tx) in self.workers.iter_mut().zip(txs) {
                    ctl.post(Change::Write(tx));
                }
                for (reader, rx) in rxs {
                    if let Some(ctl) = self.workers.get_mut(reader) {
                        ctl.post(Change::Read(rx));
                    }
                }
                await_acks(self.workers.iter())
            }
            ThreadMode::RxWorkerTx => {
                let x = Self::sender_of(&spec, self.given, self.tx.len().max(1))?;
                let (rxs, mut txs, mut record) = port_parts(spec, 1, &bells, &pick, self.tx_write)?;
                record.tx = x;
                let drops = record.drops.clone();
                self.ports.insert(number, record);
                self.given += 1;
                self.add_split(number, rxs, txs.pop(), drops, x)
            }
        };
        if done.is_err() {
            self.withdraw(number);
        }
        done
    }

    /// The split arrangement's steps of [`Threads::add_port`], backwards
    /// along the packets' way.
    pub(super) fn add_split(
        &mut self,
        number: u32,
        rxs: Vec<(usize, RxPort)>,
        tx: Option<TxPort>,
        drops: Arc<PortDropCells>,
        x: usize,
    ) -> io::Result<()> {
        if let (Some(ctl), Some(tx)) = (self.tx.get_mut(x), tx) {
            ctl.post(Change::Write(tx));
        }
        await_acks(self.tx.get(x).into_iter())?;
        for ctl in &mut self.workers {
            ctl.post(Change::Route {
                number,
                tx: x,
                drops: drops.clone(),
            });
        }
        await_acks(self.workers.iter())?;
        for (reader, rx) in rxs {
            if let Some(ctl) = self.rx.get_mut(reader) {
                ctl.post(Change::Read(rx));
            }
        }
        await_acks(self.rx.iter())
    }

    /// Tells every thread to forget `number` without waiting, and forgets
    /// it here.
    pub(super) fn withdraw(&mut self, number: u32) {
        for ctl in self
            .rx
            .iter_mut()
            .chain(&mut self.workers)
            .chain(&mut self.tx)
        {
            ctl.post(Change::Remove(number));
        }
        self.retire(number);
    }

    pub(super) fn retire(&mut self, number: u32) {
        if let Some(r) = self.ports.remove(&number) {
            self.retired.add(&r.drops.read());
            if let Some(c) = r.capture {
                c.stop();
            }
        }
    }

    /// Removes a port from the running threads, leaving the other ports
    /// alone: its reader stops reading, staged packets for it are sent
    /// (what the port refuses counts as `tx_queue_full`), and every thread
    /// drops its handles. Once this returns the backend is closed; later
    /// output to the number counts as `no_port`, and its counters are gone
    /// from [`Threads::port_counters`] and [`Threads::port_drops`] (its
    /// drops stay in [`Threads::drops`]). An unknown number is `NotFound`;
    /// a thread that does not answer within a few seconds is `TimedOut`
    /// (the port is then still listed, and removing it again waits again).
    pub fn remove_port(&mut self, number: u32) -> io::Result<()> {
        let Some(r) = self.ports.get(&number) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no port {number}"),
            ));
        };
        let (readers, x) = (r.readers.clone(), r.tx);
        if self.running() {
            match self.mode {
                ThreadMode::RunToCompletion => {
                    for ctl in &mut self.workers {
                        ctl.post(Change::Remove(number));
                    }
                    await_acks(self.workers.iter())?;
                }
                ThreadMode::RxWorkerTx => {
                    // Forwards along the packets' way.
                    for (i, ctl) in self.rx.iter_mut().enumerate() {
                        if readers.contains(&i) {
                            ctl.post(Change::Remove(number));
                        }
                    }
                    await_acks(self.rx.iter())?;
                    for ctl in &mut self.workers {
                        ctl.post(Change::Remove(number));
                    }
                    await_acks(self.workers.iter())?;
                    if let Some(ctl) = self.tx.get_mut(x) {
                        ctl.post(Change::Remove(number));
                    }
                    await_acks(self.tx.get(x).into_iter())?;
                }
            }
        }
        self.retire(number);
        Ok(())
    }

    /// Starts copying what port `port` receives and sends into `sink`:
    /// every thread that reads or sends the port gets it through its
    /// mailbox, and once this returns every one of them has it. The
    /// capture ends by itself at its frame limit, or by
    /// [`Threads::stop_capture`], by removing the port, or by stopping the
    /// threads; the control side writes it out with
    /// [`Capture::drain_to`]. An unknown port is `NotFound`; a port whose
    /// capture is still running is `AlreadyExists`; a thread that does
    /// not answer within a few seconds is `TimedOut` (the capture is then
    /// stopped).
    pub fn start_capture(&mut self, port: u32, sink: Arc<Capture>) -> io::Result<()> {
        let Some(r) = self.ports.get(&port) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no port {port}"),
            ));
        };
        if r.capture.as_ref().is_some_and(|c| !c.is_finished()) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("port {port} is already being captured"),
            ));
        }
        if !self.running() {
            return Err(io::Error::other("the dataplane threads have stopped"));
        }
        if let Some(r) = self.ports.get_mut(&port) {
            r.capture = Some(sink.clone());
        }
        let done = self.post_capture(port, Some(sink.clone()));
        if done.is_err() {
            self.stop_capture(port);
        }
        done
    }

    /// Stops the capture of port `port`, if one runs: no frame is taken
    /// after this returns (the writer then writes what is queued and
    /// ends), and the threads let go of it. Does nothing for a port
    /// without a capture or an unknown one.
    pub fn stop_capture(&mut self, port: u32) {
        let Some(sink) = self.ports.get_mut(&port).and_then(|r| r.capture.take()) else {
            return;
        };
        sink.stop();
        if self.running() {
            // A thread that is late lets go at its next burst anyway (the
            // capture says it has ended).
            let _ = self.post_capture(port, None);
        }
    }

    /// Posts a capture change to the threads that read or send `number`
    /// and waits for them.
    pub(super) fn post_capture(
        &mut self,
        number: u32,
        sink: Option<Arc<Capture>>,
    ) -> io::Result<()> {
        let Some(r) = self.ports.get(&number) else {
            return Ok(());
        };
        let (readers, x) = (r.readers.clone(), r.tx);
        self.post_to(&readers, x, || Change::Capture {
            number,
            sink: sink.clone(),
        })
    }

    /// Posts `change()` to the threads that handle a port read by RX
    /// threads `readers` and sent by TX thread `x` (every worker in run
    /// to completion) and waits for them.
    pub(super) fn post_to(
        &mut self,
        readers: &[usize],
        x: usize,
        change: impl Fn() -> Change,
    ) -> io::Result<()> {
        match self.mode {
            ThreadMode::RunToCompletion => {
                for ctl in &mut self.workers {
                    ctl.post(change());
                }
                await_acks(self.workers.iter())
            }
            ThreadMode::RxWorkerTx => {
                for (i, ctl) in self.rx.iter_mut().enumerate() {
                    if readers.contains(&i) {
                        ctl.post(change());
                    }
                }
                if let Some(ctl) = self.tx.get_mut(x) {
                    ctl.post(change());
                }
                await_acks(
                    self.rx
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| readers.contains(i))
                        .map(|(_, c)| c)
                        .chain(self.tx.get(x)),
                )
            }
        }
    }

    /// Sends port `port` through egress queues configured by `spec`
    /// ([`crate::qos`]), replacing any it had (their counters start
    /// again; packets they still hold are dropped as `tx_queue_full`);
    /// `None` sends it
    /// directly again. Once this returns every sender of the port has it.
    /// An unknown port is `NotFound`, a bad spec `InvalidInput` (nothing
    /// changes); a thread that does not answer within a few seconds is
    /// `TimedOut`.
    pub fn set_qos(&mut self, port: u32, spec: Option<&QosSpec>) -> io::Result<()> {
        if !self.ports.contains_key(&port) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no port {port}"),
            ));
        }
        let qos = match spec {
            Some(s) => Some(Arc::new(QosPort::new(s).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("port {port}: {e}"))
            })?)),
            None => None,
        };
        if !self.running() {
            return Err(io::Error::other("the dataplane threads have stopped"));
        }
        let Some(r) = self.ports.get_mut(&port) else {
            return Ok(());
        };
        r.qos = qos.clone();
        let x = r.tx;
        // Only the senders hold a port's queues.
        self.post_to(&[], x, || Change::Qos {
            number: port,
            qos: qos.clone(),
        })
    }

    /// The counters of port `port`'s egress queues (the default queue
    /// included, in the scheduler's order), as of their last burst;
    /// `None` when the port has none configured.
    pub fn queue_counters(&self, port: u32) -> Option<Vec<QueueCounters>> {
        self.ports
            .get(&port)
            .and_then(|r| r.qos.as_ref())
            .map(|q| q.counters())
    }

    /// A handle on port `port`'s egress queue counters that outlives
    /// this borrow (`None`: no queues configured).
    pub fn queue_handle(&self, port: u32) -> Option<QueueStatsHandle> {
        self.ports
            .get(&port)
            .and_then(|r| r.qos.clone())
            .map(QueueStatsHandle)
    }

    /// Wakes every sleeping thread (after publishing new tables, so they
    /// pick them up at once).
    pub fn wake_all(&self) {
        for c in self.rx.iter().chain(&self.workers).chain(&self.tx) {
            c.bell.ring();
        }
    }

    /// Each port's counters, summed over the handles of all threads (as of
    /// their last publication, at most a few milliseconds old).
    pub fn port_counters(&self) -> BTreeMap<u32, PortCounters> {
        self.ports
            .iter()
            .map(|(n, r)| {
                let c = r.slots.iter().fold(PortCounters::default(), |acc, s| {
                    acc.merged(&s.lock().unwrap_or_else(|e| e.into_inner()))
                });
                (*n, c)
            })
            .collect()
    }

    /// The drops the threads made, by name, summed over all ports (removed
    /// ones included).
    pub fn drops(&self) -> ThreadDrops {
        let mut d = self.retired;
        d.no_port += self.no_port.load(Ordering::Relaxed);
        for r in self.ports.values() {
            d.add(&r.drops.read());
        }
        d
    }

    /// The drops the threads made, per port (`no_port` is always 0 here;
    /// see [`Threads::drops`]). Exact: read from atomic counters, not a
    /// published copy.
    pub fn port_drops(&self) -> BTreeMap<u32, ThreadDrops> {
        self.ports
            .iter()
            .map(|(n, r)| (*n, r.drops.read()))
            .collect()
    }

    /// Per thread: packets, bursts, busy and idle time (as of its last
    /// publication, at most a few milliseconds old), and its input rings'
    /// fill now. RX threads first, then workers, then TX threads.
    pub fn thread_stats(&self) -> Vec<ThreadStats> {
        let mut out: Vec<ThreadStats> = self
            .rx
            .iter()
            .chain(&self.workers)
            .chain(&self.tx)
            .map(ThreadCtl::stats)
            .collect();
        // The readers are the RX threads (split) or the workers.
        let first = match self.mode {
            ThreadMode::RunToCompletion => self.rx.len(),
            ThreadMode::RxWorkerTx => 0,
        };
        for (number, r) in &self.ports {
            for (q, &t) in r.readers.iter().enumerate() {
                if let Some(st) = out.get_mut(first + t) {
                    st.reads.push((*number, q));
                }
            }
        }
        out
    }

    /// Number of threads running.
    pub fn thread_count(&self) -> usize {
        self.rx_handles.len() + self.worker_handles.len() + self.tx_handles.len()
    }

    /// Stops the threads stage by stage (see the module comment) and
    /// returns once all have exited.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// As [`Threads::stop`], keeping the counters readable afterwards (the
    /// final values). Calling it again does nothing.
    pub fn halt(&mut self) {
        self.shutdown();
    }

    pub(super) fn shutdown(&mut self) {
        let stages = [
            (self.stop_rx.clone(), std::mem::take(&mut self.rx_handles)),
            (
                self.stop_workers.clone(),
                std::mem::take(&mut self.worker_handles),
            ),
            (self.stop_tx.clone(), std::mem::take(&mut self.tx_handles)),
        ];
        for (flag, handles) in stages {
            flag.store(true, Ordering::Release);
            self.wake_all();
            for h in handles {
                let _ = h.join();
            }
        }
        // What the threads flushed on their way out is in; writers end.
        for r in self.ports.values() {
            if let Some(c) = &r.capture {
                c.stop();
            }
        }
    }
}
