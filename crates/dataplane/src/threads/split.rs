//! The split arrangement's loops: RX threads, workers, TX threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::capture::Tap;
use crate::dispatch::Dispatcher;
use crate::flush::Backoff;
use crate::port::{Burst, Outbox, PacketBuf};
use crate::spsc::Consumer;
use crate::wake::Doorbell;

use super::counters::{bump, DropMap, Tally};
use super::cycles::{self, StageCycles};
use super::mailbox::{Change, ThreadSide};
use super::rings::Stage;
use super::shutdown::{boxed, drop_together};
use super::spawn::{bound_ports, idle, read_port, Crowd, IdlePlan, RxPort};
use super::tx::{TxSide, PUBLISH_EVERY};
use super::types::{BurstProcessor, ThreadsConfig};

pub(super) struct RxThread {
    pub(super) ports: Vec<RxPort>,
    pub(super) outs: Vec<Stage<PacketBuf>>,
    pub(super) dispatcher: Dispatcher,
    pub(super) side: ThreadSide,
    pub(super) plan: IdlePlan,
    /// Every worker's and TX thread's doorbell: rung when input wakes this
    /// thread from sleep, so the later stages wake while this one reads
    /// (in parallel, not one after the other as each burst reaches them).
    pub(super) downstream: Vec<Arc<Doorbell>>,
    pub(super) stop: Arc<AtomicBool>,
    /// Cells of the ports it reads, for `rx_ring_full`.
    pub(super) drops: DropMap,
    pub(super) cfg: ThreadsConfig,
    /// Where the set's threads run: whether this one yields its CPU
    /// after busy rounds.
    pub(super) crowd: Crowd,
}

impl RxThread {
    pub(super) fn publish(&mut self) {
        for p in &mut self.ports {
            p.input.publish();
        }
        self.side.tally.publish(&self.side.cells);
    }

    /// Applies waiting port changes, if any (one atomic load if none).
    pub(super) fn take_changes(&mut self) {
        let Some(n) = self.side.drain_mail(|c| match c {
            Change::Read(p) => {
                self.drops.ports.insert(p.number, p.drops.clone());
                self.ports.push(p);
            }
            Change::Remove(number) => {
                // Staged packets of the port go on (or count against
                // it) before its cells leave the map.
                for s in &mut self.outs {
                    s.flush(&self.drops);
                }
                self.ports.retain(|p| p.number != number);
                self.drops.ports.remove(&number);
            }
            Change::Capture { number, sink } => {
                for p in self.ports.iter_mut().filter(|p| p.number == number) {
                    p.capture = sink.clone().map(Tap::new);
                }
            }
            Change::Write(_) | Change::Route { .. } | Change::Qos { .. } => {}
        }) else {
            return;
        };
        self.plan = IdlePlan::of(&mut self.ports, &self.cfg);
        self.side.mail.ack(n);
    }

    pub(super) fn run(&mut self) {
        let mut burst = Burst::with_limit(self.cfg.bursts.rx_read.max(1));
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        self.side.tally = Tally::new(last_input);
        self.plan = IdlePlan::of(&mut self.ports, &self.cfg);
        let yields = self.crowd.decide(&self.side.cells);
        // Under a time bound a worker's ring holds at most about a burst:
        // while one holds more, the rest waits in the ports, whose bound
        // drops by age (sparing sparse frames), not in a ring that would
        // make every frame, a ping included, wait for all before it.
        let hold = self
            .cfg
            .queue_delay
            .limit()
            .map(|_| self.cfg.bursts.rx_read.max(1));
        while !self.stop.load(Ordering::Acquire) {
            self.take_changes();
            let mut got = 0;
            let mut bursts = 0;
            let mut drained = true;
            let now = Instant::now();
            let mut mark = cycles::now();
            let mut spent = StageCycles::default();
            let backlogged = hold.is_some_and(|h| self.outs.iter_mut().any(|s| s.queued() >= h));
            for p in self.ports.iter_mut().filter(|_| !backlogged) {
                let n = read_port(p, &mut burst);
                spent.rx += cycles::lap(&mut mark);
                got += n;
                bursts += u64::from(n > 0);
                drained &= burst.room() > 0;
                for pkt in burst.drain() {
                    let w = self.dispatcher.worker_for(p.number, pkt.data());
                    if let Some(s) = self.outs.get_mut(w) {
                        s.push(pkt, now, &self.drops);
                    }
                }
                spent.tx += cycles::lap(&mut mark);
            }
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
                self.side.tally.busy(now, got, bursts);
            }
            for s in &mut self.outs {
                s.flush_due(now, last_input, drained, &self.cfg.flush, &self.drops);
            }
            if got > 0 {
                spent.tx += cycles::lap(&mut mark);
                self.side.tally.stages(true, &spent);
            }
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                let rate = self.side.measure();
                bound_ports(&mut self.ports, self.cfg.queue_delay, rate);
                self.publish();
            }
            if (got > 0 || backlogged) && yields {
                // Let the threads sharing this CPU take their turn now,
                // with the burst just handed on (spawn::crowded).
                std::thread::yield_now();
            } else if backlogged {
                std::hint::spin_loop();
            }
            if got == 0 && !backlogged {
                let holding = self.outs.iter().any(|s| s.first_at.is_some());
                let plan = &self.plan;
                if idle(
                    &mut backoff,
                    holding,
                    &self.side.bell,
                    &plan.fds,
                    plan.timeout,
                    || false,
                    || {},
                ) {
                    for b in &self.downstream {
                        b.ring_if_sleeping();
                    }
                }
                self.side.tally.idle(Instant::now());
            }
        }
        for s in &mut self.outs {
            s.flush(&self.drops);
        }
        self.publish();
        drop_together(boxed(self.ports.drain(..)));
    }
}

pub(super) struct SplitWorker {
    pub(super) inputs: Vec<Consumer<PacketBuf>>,
    pub(super) outs: Vec<Stage<(u32, PacketBuf)>>,
    /// Output port → TX thread.
    pub(super) routes: HashMap<u32, usize>,
    /// Output port → cells, for `tx_ring_full`.
    pub(super) drops: DropMap,
    pub(super) processor: Box<dyn BurstProcessor>,
    pub(super) side: ThreadSide,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) cfg: ThreadsConfig,
    /// Where the set's threads run: whether this one yields its CPU
    /// after busy rounds.
    pub(super) crowd: Crowd,
}

impl SplitWorker {
    /// Applies waiting port changes, if any (one atomic load if none).
    pub(super) fn take_changes(&mut self) {
        let Some(n) = self.side.drain_mail(|c| match c {
            Change::Route { number, tx, drops } => {
                self.routes.insert(number, tx);
                self.drops.ports.insert(number, drops);
            }
            Change::Remove(number) => {
                // Staged packets for the port go on (or count against
                // it) before the route goes.
                for s in &mut self.outs {
                    s.flush(&self.drops);
                }
                self.routes.remove(&number);
                self.drops.ports.remove(&number);
            }
            Change::Read(_) | Change::Write(_) | Change::Capture { .. } | Change::Qos { .. } => {}
        }) else {
            return;
        };
        self.side.mail.ack(n);
    }

    pub(super) fn run(&mut self) {
        let read = self.cfg.bursts.worker_read.max(1);
        let mut burst = Burst::with_limit(read);
        let mut run = Burst::with_limit(read);
        let mut outbox = Outbox::with_capacity(read);
        let mut backoff = Backoff::new(self.cfg.poll_window);
        // The time last read, once per round (see the run-to-completion
        // loop).
        let mut now = Instant::now();
        let mut last_input = now;
        let mut last_publish = last_input;
        self.side.tally = Tally::new(last_input);
        let yields = self.crowd.decide(&self.side.cells);
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            self.take_changes();
            self.processor.between_bursts(now);
            let mut got = 0;
            let mut bursts = 0;
            let began = now;
            let mut drained = true;
            let mut mark = cycles::now();
            let mut spent = StageCycles::default();
            for c in &mut self.inputs {
                burst.clear();
                let n = c.pop_burst(&mut burst);
                spent.rx += cycles::lap(&mut mark);
                got += n;
                bursts += u64::from(n > 0);
                drained &= burst.room() > 0;
                // Runs of packets from one port go to the processor together.
                let mut pkts = burst.drain().peekable();
                while let Some(first) = pkts.next() {
                    let port = first.meta.in_port;
                    run.clear();
                    let _ = run.push(first);
                    while let Some(next) = pkts.next_if(|p| p.meta.in_port == port) {
                        let _ = run.push(next);
                    }
                    self.processor.process(port, &mut run, began, &mut outbox);
                    let (outs, routes, drops) = (&mut self.outs, &self.routes, &self.drops);
                    for (out, pkt) in outbox.drain() {
                        match routes.get(&out).and_then(|&t| outs.get_mut(t)) {
                            Some(s) => s.push((out, pkt), began, drops),
                            None => bump(&drops.no_port, 1),
                        }
                    }
                }
                spent.pipeline += cycles::lap(&mut mark);
            }
            now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
                self.side.tally.busy(now, got, bursts);
            } else if stopping {
                break;
            }
            for s in &mut self.outs {
                s.flush_due(now, last_input, drained, &self.cfg.flush, &self.drops);
            }
            if got > 0 {
                spent.tx = cycles::lap(&mut mark);
                self.side.tally.stages(true, &spent);
            }
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                self.side.measure();
                self.side.tally.publish(&self.side.cells);
            }
            if got > 0 && yields {
                // Let the threads sharing this CPU take their turn now,
                // with the burst just handed on (spawn::crowded).
                std::thread::yield_now();
            }
            if got == 0 {
                let holding = self.outs.iter().any(|s| s.first_at.is_some());
                let inputs = &mut self.inputs;
                idle(
                    &mut backoff,
                    holding,
                    &self.side.bell,
                    &[],
                    self.cfg.max_sleep,
                    || inputs.iter_mut().any(|c| c.available() > 0),
                    || self.processor.idle(),
                );
                now = Instant::now();
                self.side.tally.idle(now);
            }
        }
        for s in &mut self.outs {
            s.flush(&self.drops);
        }
        self.processor.finish();
        self.side.tally.publish(&self.side.cells);
    }
}

pub(super) struct TxThread {
    pub(super) inputs: Vec<Consumer<(u32, PacketBuf)>>,
    pub(super) tx: TxSide,
    pub(super) side: ThreadSide,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) cfg: ThreadsConfig,
    /// Where the set's threads run: whether this one yields its CPU
    /// after busy rounds.
    pub(super) crowd: Crowd,
}

impl TxThread {
    pub(super) fn publish(&mut self) {
        self.tx.publish();
        self.side.tally.publish(&self.side.cells);
    }

    /// Applies waiting port changes, if any (one atomic load if none).
    pub(super) fn take_changes(&mut self) {
        let Some(n) = self.side.drain_mail(|c| match c {
            Change::Write(p) => self.tx.add(p),
            Change::Remove(number) => self.tx.remove(number),
            Change::Capture { number, sink } => self.tx.set_capture(number, sink),
            Change::Qos { number, qos } => self.tx.set_qos(number, qos),
            Change::Read(_) | Change::Route { .. } => {}
        }) else {
            return;
        };
        self.side.mail.ack(n);
    }

    pub(super) fn run(&mut self) {
        let read = self.cfg.bursts.tx_read.max(1);
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        self.side.tally = Tally::new(last_input);
        let yields = self.crowd.decide(&self.side.cells);
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            self.take_changes();
            let mut got = 0;
            let mut bursts = 0;
            let now = Instant::now();
            let mut drained = true;
            let (mark, sent) = (cycles::now(), self.tx.sent_cycles);
            for c in &mut self.inputs {
                let tx = &mut self.tx;
                let n = c.pop_many(read, |(port, pkt)| tx.enqueue(port, pkt, now));
                got += n;
                bursts += u64::from(n > 0);
                drained &= n < read;
            }
            // Sends of bursts that filled while popping are tx.
            let rx =
                (cycles::now().saturating_sub(mark)).saturating_sub(self.tx.sent_cycles - sent);
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
                self.side.tally.busy(now, got, bursts);
            } else if stopping {
                break;
            }
            self.tx.flush_due(now, last_input, drained, &self.cfg.flush);
            let spent = StageCycles {
                rx,
                pipeline: 0,
                tx: self.tx.sent_cycles - sent,
            };
            self.side.tally.stages(got > 0, &spent);
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                self.side.measure();
                self.publish();
            }
            if got > 0 && yields {
                // Let the threads sharing this CPU take their turn now,
                // with the burst just handed on (spawn::crowded).
                std::thread::yield_now();
            }
            if got == 0 {
                let holding = self.tx.holding();
                let inputs = &mut self.inputs;
                idle(
                    &mut backoff,
                    holding,
                    &self.side.bell,
                    &[],
                    self.tx.sleep_for(self.cfg.max_sleep),
                    || inputs.iter_mut().any(|c| c.available() > 0),
                    || {},
                );
                self.side.tally.idle(Instant::now());
            }
        }
        self.tx.flush_all();
        self.publish();
        drop_together(boxed(self.tx.ports.drain(..)));
    }
}
