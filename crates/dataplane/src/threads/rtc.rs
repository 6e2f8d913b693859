//! The run-to-completion loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::capture::Tap;
use crate::flush::Backoff;
use crate::port::{Burst, Outbox};

use super::counters::Tally;
use super::cycles::{self, StageCycles};
use super::mailbox::{Change, ThreadSide};
use super::shutdown::{boxed, drop_together};
use super::spawn::{bound_ports, idle, read_port, IdlePlan, RxPort};
use super::tx::{TxSide, PUBLISH_EVERY};
use super::types::{BurstProcessor, ThreadsConfig};

pub(super) struct RtcWorker {
    pub(super) rx: Vec<RxPort>,
    pub(super) tx: TxSide,
    pub(super) processor: Box<dyn BurstProcessor>,
    pub(super) side: ThreadSide,
    pub(super) plan: IdlePlan,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) cfg: ThreadsConfig,
}

impl RtcWorker {
    pub(super) fn publish(&mut self) {
        for p in &mut self.rx {
            p.input.publish();
        }
        self.tx.publish();
        self.side.tally.publish(&self.side.cells);
    }

    /// Applies waiting port changes, if any (one atomic load if none).
    pub(super) fn take_changes(&mut self) {
        let Some(n) = self.side.drain_mail(|c| match c {
            Change::Read(p) => self.rx.push(p),
            Change::Write(p) => self.tx.add(p),
            Change::Remove(number) => {
                self.rx.retain(|p| p.number != number);
                self.tx.remove(number);
            }
            Change::Capture { number, sink } => {
                for p in self.rx.iter_mut().filter(|p| p.number == number) {
                    p.capture = sink.clone().map(Tap::new);
                }
                self.tx.set_capture(number, sink);
            }
            Change::Qos { number, qos } => self.tx.set_qos(number, qos),
            Change::Route { .. } => {}
        }) else {
            return;
        };
        self.plan = IdlePlan::of(&mut self.rx, &self.cfg);
        self.side.mail.ack(n);
    }

    pub(super) fn run(&mut self) {
        let mut burst = Burst::with_limit(self.cfg.bursts.rx_read.max(1));
        let mut outbox = Outbox::with_capacity(burst.limit().max(self.cfg.bursts.tx_write));
        let mut backoff = Backoff::new(self.cfg.poll_window);
        // The time last read: once per round, at its end (or after a
        // sleep), and used for the next round's bursts too (a round takes
        // microseconds; the clock costs about as much as a packet).
        let mut now = Instant::now();
        let mut last_input = now;
        let mut last_publish = last_input;
        self.side.tally = Tally::new(last_input);
        self.plan = IdlePlan::of(&mut self.rx, &self.cfg);
        while !self.stop.load(Ordering::Acquire) {
            self.take_changes();
            self.processor.between_bursts(now);
            let mut got = 0;
            let mut bursts = 0;
            let mut drained = true;
            let (mut mark, sent) = (cycles::now(), self.tx.sent_cycles);
            let mut spent = StageCycles::default();
            let began = now;
            for p in &mut self.rx {
                let n = read_port(p, &mut burst);
                spent.rx += cycles::lap(&mut mark);
                if n == 0 {
                    continue;
                }
                got += n;
                bursts += 1;
                drained &= burst.room() > 0;
                self.processor
                    .process(p.number, &mut burst, began, &mut outbox);
                burst.clear();
                self.tx.enqueue_all(&mut outbox, began);
                spent.pipeline += cycles::lap(&mut mark);
            }
            // Sends of bursts that filled inside the processor are tx.
            spent.pipeline = spent.pipeline.saturating_sub(self.tx.sent_cycles - sent);
            now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
                self.side.tally.busy(now, got, bursts);
            }
            self.tx.flush_due(now, last_input, drained, &self.cfg.flush);
            spent.tx = self.tx.sent_cycles - sent;
            self.side.tally.stages(got > 0, &spent);
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                let rate = self.side.measure();
                bound_ports(&mut self.rx, self.cfg.queue_delay, rate);
                self.publish();
            }
            if got == 0 {
                let holding = self.tx.holding();
                let plan = &self.plan;
                idle(
                    &mut backoff,
                    holding,
                    &self.side.bell,
                    &plan.fds,
                    self.tx.sleep_for(plan.timeout),
                    || false,
                    || self.processor.idle(),
                );
                now = Instant::now();
                self.side.tally.idle(now);
            }
        }
        self.tx.flush_all();
        self.processor.finish();
        self.publish();
        let mut held = boxed(self.rx.drain(..));
        held.extend(boxed(self.tx.ports.drain(..)));
        drop_together(held);
    }
}
