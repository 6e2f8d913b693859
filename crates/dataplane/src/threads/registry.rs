//! The port registry: the control side's record of each port and the
//! parts a port is cut into for the threads that read and send it.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::capture::Capture;
use crate::port::{Burst, PortBackend};
use crate::wake::Doorbell;

use super::counters::PortDropCells;
use super::mailbox::ThreadCtl;
use super::spawn::RxPort;
use super::tx::{Handle, Published, QosPort, Slot, TxPort};
use super::types::{PortSpec, ThreadDrops, ThreadMode};

/// The control side's record of a port: where its counters are and which
/// threads read it and (split arrangement) send to it.
pub(super) struct PortRecord {
    pub(super) drops: Arc<PortDropCells>,
    pub(super) slots: Vec<Slot>,
    /// The worker (run to completion) or RX thread reading each of its
    /// receive queues, queue `q` on entry `q`.
    pub(super) readers: Vec<usize>,
    /// The TX thread sending to it (split arrangement).
    pub(super) tx: usize,
    /// The capture its threads copy into, if one was started.
    pub(super) capture: Option<Arc<Capture>>,
    /// Its egress queues, if configured.
    pub(super) qos: Option<Arc<QosPort>>,
}

/// A running set of dataplane threads.
pub struct Threads {
    pub(super) mode: ThreadMode,
    pub(super) tx_write: usize,
    pub(super) stop_rx: Arc<AtomicBool>,
    pub(super) stop_workers: Arc<AtomicBool>,
    pub(super) stop_tx: Arc<AtomicBool>,
    pub(super) rx_handles: Vec<JoinHandle<()>>,
    pub(super) worker_handles: Vec<JoinHandle<()>>,
    pub(super) tx_handles: Vec<JoinHandle<()>>,
    /// The control ends of the RX threads, workers and TX threads.
    pub(super) rx: Vec<ThreadCtl>,
    pub(super) workers: Vec<ThreadCtl>,
    pub(super) tx: Vec<ThreadCtl>,
    /// The ports, read only by the counter calls.
    pub(super) ports: BTreeMap<u32, PortRecord>,
    pub(super) no_port: Arc<AtomicU64>,
    /// Drops counted against ports since removed.
    pub(super) retired: ThreadDrops,
    /// Ports handed over so far (picks a new port's TX thread).
    pub(super) given: usize,
}

/// Makes the handles for one port: a reader handle and `writers` send
/// handles (split senders, or all shared behind one mutex).
pub(super) fn handles_for(
    backend: Box<dyn PortBackend>,
    writers: usize,
) -> io::Result<(Handle, Vec<Handle>, bool)> {
    let mut senders = Vec::with_capacity(writers);
    for _ in 0..writers {
        match backend.split_sender()? {
            Some(s) => senders.push(Handle::Own(s)),
            None => {
                let shared = Arc::new(Mutex::new(backend));
                let senders = (0..writers)
                    .map(|_| Handle::Shared(shared.clone()))
                    .collect();
                return Ok((Handle::Shared(shared), senders, true));
            }
        }
    }
    Ok((Handle::Own(backend), senders, false))
}

/// What [`port_parts`] makes: (reading thread, port) per receive queue,
/// the send ports, the record.
pub(super) type PortParts = (Vec<(usize, RxPort)>, Vec<TxPort>, PortRecord);

/// The pieces of one port: a reader's port per receive queue (queue `q`
/// read by thread `pick(q)`, whose doorbell `bells` gives, attached),
/// `writers` send ports, and its record (TX thread still 0).
pub(super) fn port_parts(
    mut spec: PortSpec,
    writers: usize,
    bells: &[Arc<Doorbell>],
    pick: &dyn Fn(usize) -> usize,
    tx_write: usize,
) -> io::Result<PortParts> {
    let number = spec.number;
    // The further queues first, while the backend is still ours alone.
    let extra = spec.backend.split_receivers()?;
    let n_queues = 1 + extra.len();
    let readers: Vec<usize> = (0..n_queues).map(pick).collect();
    if let Some(bad) = readers.iter().find(|&&r| r >= bells.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "port {number}: no reading thread {bad} (there are {})",
                bells.len()
            ),
        ));
    }
    let (reader, senders, shared) = handles_for(spec.backend, writers)?;
    let drops = Arc::new(PortDropCells::default());
    let mut slots = Vec::new();
    let woken = spec.woken;
    let rx_of = |handle: Handle, bell: &Arc<Doorbell>, slots: &mut Vec<Slot>| {
        let mut handle = handle;
        let rung = handle.with(|p| p.attach_doorbell(bell.clone()));
        let fdless = handle.fd().is_none() && !woken && !rung;
        let slot = Slot::default();
        slots.push(slot.clone());
        RxPort {
            number,
            input: Published {
                slot: Some(slot),
                handle,
            },
            fdless,
            drops: drops.clone(),
            capture: None,
            window: 0,
        }
    };
    let mut rxs = Vec::with_capacity(n_queues);
    rxs.push((readers[0], rx_of(reader, &bells[readers[0]], &mut slots)));
    for (q, h) in extra.into_iter().enumerate() {
        let r = readers[q + 1];
        rxs.push((r, rx_of(Handle::Own(h), &bells[r], &mut slots)));
    }
    let txs = senders
        .into_iter()
        .map(|handle| {
            // Shared handles are published by their reader only.
            let slot = (!shared).then(|| {
                let s = Slot::default();
                slots.push(s.clone());
                s
            });
            TxPort {
                number,
                out: Published { slot, handle },
                pending: Burst::with_limit(tx_write),
                first_at: None,
                drops: drops.clone(),
                capture: None,
                qos: None,
            }
        })
        .collect();
    spec.readers.clear();
    let record = PortRecord {
        drops,
        slots,
        readers,
        tx: 0,
        capture: None,
        qos: None,
    };
    Ok((rxs, txs, record))
}
