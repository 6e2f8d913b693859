//! Patch ports: two in-process ports joined back to back, so that what one
//! bridge outputs on its end enters the other bridge on the other end with
//! no interface in between (and no copy: the buffer itself moves).
//!
//! Each direction is a bounded [`crate::spsc`] ring. A port's
//! receiving half is owned by whichever thread polls it; its sending half
//! sits behind a mutex so that several threads (every run-to-completion
//! worker, or the port's TX thread) can hold a sender ([`split_sender`]).
//! Only dataplane threads ever take that mutex, for the length of one
//! burst; the control side never does. A full ring leaves packets with the
//! caller (the TX stage then retries or counts `tx_queue_full`).
//!
//! A thread reading a patch port attaches its doorbell
//! ([`PortBackend::attach_doorbell`]); the other end rings it after each
//! burst, so an idle reader sleeps instead of polling.
//!
//! The pair also serves tests: hold one end, hand the other to the switch,
//! and inject or collect packets through `tx_burst`/`rx_burst`.
//!
//! [`split_sender`]: PortBackend::split_sender

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::port::{LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, TxBurst};
use crate::spsc::{self, Consumer, Producer};
use crate::wake::Doorbell;

/// The doorbell of the thread reading one end, once it attached one.
type BellSlot = Arc<OnceLock<Arc<Doorbell>>>;

/// One end of a patch link.
pub struct PatchPort {
    name: String,
    rx: Option<Consumer<PacketBuf>>,
    tx: Arc<Mutex<Producer<PacketBuf>>>,
    /// Administrative/link state shared by both ends.
    up: Arc<AtomicBool>,
    /// This end's reader's doorbell (rung by the other end's senders).
    rx_bell: BellSlot,
    /// The other end's reader's doorbell (rung after sending).
    peer_bell: BellSlot,
    counters: PortCounters,
}

/// Two patch ports joined back to back; each direction holds up to
/// `capacity` packets.
pub fn pair(a: &str, b: &str, capacity: usize) -> (PatchPort, PatchPort) {
    let (ab_tx, ab_rx) = spsc::ring(capacity);
    let (ba_tx, ba_rx) = spsc::ring(capacity);
    let up = Arc::new(AtomicBool::new(true));
    let (bell_a, bell_b): (BellSlot, BellSlot) = (Arc::default(), Arc::default());
    (
        PatchPort {
            name: a.to_string(),
            rx: Some(ba_rx),
            tx: Arc::new(Mutex::new(ab_tx)),
            up: up.clone(),
            rx_bell: bell_a.clone(),
            peer_bell: bell_b.clone(),
            counters: PortCounters::default(),
        },
        PatchPort {
            name: b.to_string(),
            rx: Some(ab_rx),
            tx: Arc::new(Mutex::new(ba_tx)),
            up,
            rx_bell: bell_b,
            peer_bell: bell_a,
            counters: PortCounters::default(),
        },
    )
}

impl PatchPort {
    /// Takes the link down or up (both ends see it; a down link drops what
    /// is sent and counts `tx_drops.link_down`).
    pub fn set_link(&self, up: bool) {
        self.up.store(up, Ordering::Release);
    }
}

impl PortBackend for PatchPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        let Some(rx) = self.rx.as_mut() else {
            return Ok(0);
        };
        let before = out.len();
        rx.pop_burst(out);
        let n = out.len() - before;
        self.counters.rx_packets += n as u64;
        self.counters.rx_bytes += out.pkts()[before..]
            .iter()
            .map(|p| p.len() as u64)
            .sum::<u64>();
        Ok(n)
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        if !self.up.load(Ordering::Acquire) {
            let n = pkts.len();
            pkts.clear();
            self.counters.tx_drops.link_down += n as u64;
            return Ok(n);
        }
        let mut tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let room = tx.free().min(pkts.len());
        // A tunnel_id does not cross a patch link: the other bridge
        // would take the burst for a tunnel port's (see
        // `PacketMeta::tunnel_id`).
        let bytes: u64 = pkts.pkts_mut()[..room]
            .iter_mut()
            .map(|p| {
                p.meta.set_tunnel_id(None);
                p.len() as u64
            })
            .sum();
        let queued = tx.push_all_or_drop(pkts.drain_front(room));
        drop(tx);
        self.counters.tx_packets += queued as u64;
        self.counters.tx_bytes += bytes;
        if queued > 0 {
            if let Some(bell) = self.peer_bell.get() {
                // Unconditionally: the reader may have found the ring empty
                // just before this burst and be on its way to sleep (it
                // cannot re-check a port it only knows through the trait).
                // The eventfd keeps the wake-up until the reader drains it.
                // One write(2) per burst on patch links.
                bell.ring();
            }
        }
        Ok(queued)
    }

    fn link_state(&self) -> LinkState {
        if self.up.load(Ordering::Acquire) {
            LinkState::Up
        } else {
            LinkState::Down
        }
    }

    fn stats(&self) -> PortCounters {
        self.counters
    }

    fn split_sender(&self) -> io::Result<Option<Box<dyn PortBackend>>> {
        Ok(Some(Box::new(PatchPort {
            name: self.name.clone(),
            rx: None,
            tx: self.tx.clone(),
            up: self.up.clone(),
            rx_bell: Arc::default(),
            peer_bell: self.peer_bell.clone(),
            counters: PortCounters::default(),
        })))
    }

    /// The other end rings `bell` after every burst it queues here.
    fn attach_doorbell(&mut self, bell: Arc<Doorbell>) -> bool {
        self.rx.is_some() && (self.rx_bell.set(bell).is_ok() || self.rx_bell.get().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::Burst;

    #[test]
    fn packets_cross_in_order_and_full_ring_leaves_rest_with_caller() {
        let (mut a, mut b) = pair("a", "b", 4);
        let mut out = Burst::with_limit(8);
        for i in 0..6u8 {
            out.push(PacketBuf::from_slice(&[i; 20])).unwrap();
        }
        assert_eq!(a.tx_burst(&mut out).unwrap(), 4);
        assert_eq!(out.len(), 2, "no room: left with the caller");
        let mut got = Burst::with_limit(8);
        assert_eq!(b.rx_burst(&mut got).unwrap(), 4);
        let firsts: Vec<u8> = got.iter().map(|p| p.data()[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2, 3]);
        assert_eq!(b.stats().rx_packets, 4);
        assert_eq!(a.stats().tx_bytes, 80);
        // The other direction, through a split sender.
        let mut s = b.split_sender().unwrap().unwrap();
        let mut one = Burst::with_limit(1);
        one.push(PacketBuf::from_slice(&[9; 14])).unwrap();
        assert_eq!(s.tx_burst(&mut one).unwrap(), 1);
        let mut got = Burst::with_limit(8);
        assert_eq!(a.rx_burst(&mut got).unwrap(), 1);
        assert_eq!(s.rx_burst(&mut got).unwrap(), 0, "sender receives nothing");
    }

    #[test]
    fn sending_rings_the_readers_doorbell() {
        let (mut a, mut b) = pair("a", "b", 4);
        let bell = Arc::new(Doorbell::new().unwrap());
        assert!(b.attach_doorbell(bell.clone()));
        let (prepared, is_prepared) = std::sync::mpsc::channel();
        let waiter = {
            let bell = bell.clone();
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                bell.prepare();
                prepared.send(()).unwrap();
                crate::wake::wait(&bell, &[], std::time::Duration::from_secs(5));
                start.elapsed()
            })
        };
        // Sent only once the reader said it sleeps: on a loaded machine the
        // thread may not have started after a fixed 30 ms, and the send
        // would then ring nobody (a 5 s wait).
        is_prepared.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut out = Burst::with_limit(1);
        out.push(PacketBuf::from_slice(&[1; 20])).unwrap();
        a.tx_burst(&mut out).unwrap();
        assert!(waiter.join().unwrap() < std::time::Duration::from_secs(2));
        let mut got = Burst::with_limit(2);
        assert_eq!(b.rx_burst(&mut got).unwrap(), 1);
    }

    #[test]
    fn down_link_drops_and_counts() {
        let (mut a, b) = pair("a", "b", 4);
        b.set_link(false);
        assert_eq!(a.link_state(), LinkState::Down);
        let mut out = Burst::with_limit(2);
        out.push(PacketBuf::from_slice(&[1; 20])).unwrap();
        assert_eq!(a.tx_burst(&mut out).unwrap(), 1);
        assert_eq!(a.stats().tx_drops.link_down, 1);
    }
}
