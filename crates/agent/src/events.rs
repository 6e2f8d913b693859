//! The switch-to-agent event channel, in two lanes.
//!
//! Packet-ins come from the datapath workers, as fast as traffic misses
//! the tables: their lane is bounded, a worker that finds it full drops
//! the packet-in and counts it, and the agent limits them again on the
//! way out ([`crate::packet_in`]). Flow-removed and port-status events
//! come from the control side, one per flow deleted or expired and per
//! port change: a controller keeps its state by them, and a DELETE of
//! 20,000 flows with `OFPFF_SEND_FLOW_REM` must reach it as 20,000
//! FLOW_REMOVED messages (with one bounded lane of 1,024 shared with the
//! packet-ins, 18,976 of them were lost unseen). Their lane is unbounded:
//! their number is bounded by the flows and ports the switch holds, and
//! the event pump reads it before the packet-in lane.
//!
//! A BARRIER_REPLY comes after the FLOW_REMOVED messages of the deletes
//! before it, as OpenFlow asks of everything a message before a barrier
//! causes: the control lane counts what it was given ([`EventSync`]),
//! the event pump counts what it handed to the channels, and a channel
//! answering a barrier first waits until the pump has handed over what
//! was sent by then and writes it ([`crate::Connection::set_event_lane`]).

use crate::switch::SwitchEvent;
use ofp::PacketIn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The longest a barrier waits for the event pump to catch up (it is
/// behind by a few events at most, unless it is stuck: the barrier is
/// then answered anyway, not held).
pub const CATCH_UP_LIMIT: Duration = Duration::from_secs(1);

/// How far the control lane's events have got: how many were sent, and
/// how many the event pump has handed to the channels.
#[derive(Debug)]
struct Progress {
    sent: AtomicU64,
    handed: watch::Sender<u64>,
}

/// A channel's view of `Progress`: waits until the event pump has
/// handed over every control event sent before the wait began.
#[derive(Clone, Debug)]
pub struct EventSync {
    progress: Arc<Progress>,
    handed: watch::Receiver<u64>,
}

impl EventSync {
    /// Returns once every control event sent before this call has been
    /// handed to the channels (or after [`CATCH_UP_LIMIT`]).
    pub async fn caught_up(&mut self) {
        let target = self.progress.sent.load(Ordering::Acquire);
        let _ = tokio::time::timeout(CATCH_UP_LIMIT, self.handed.wait_for(|h| *h >= target)).await;
    }
}

/// The pump's side of [`Progress`]: counts the control events handed over.
#[derive(Debug)]
pub(crate) struct Handed {
    progress: Arc<Progress>,
}

impl Handed {
    /// One more control event was handed to the channels.
    pub(crate) fn one(&mut self) {
        self.progress.handed.send_modify(|n| *n += 1);
    }

    /// A view for a channel.
    pub(crate) fn sync(&self) -> EventSync {
        EventSync {
            progress: Arc::clone(&self.progress),
            handed: self.progress.handed.subscribe(),
        }
    }
}

/// The sending side: held by whatever produces events (the datapath
/// workers send packet-ins, the control side everything).
#[derive(Clone, Debug)]
pub struct EventSender {
    packet_ins: mpsc::Sender<SwitchEvent>,
    control: mpsc::UnboundedSender<SwitchEvent>,
    progress: Arc<Progress>,
}

/// Why a packet-in was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketInRefused {
    /// The packet-in lane is full (the agent is behind).
    Full,
    /// The agent is gone.
    Closed,
}

impl EventSender {
    /// Queues a packet-in if its lane has room.
    pub fn packet_in(&self, pi: PacketIn) -> Result<(), PacketInRefused> {
        self.packet_ins
            .try_send(SwitchEvent::PacketIn(pi))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => PacketInRefused::Full,
                mpsc::error::TrySendError::Closed(_) => PacketInRefused::Closed,
            })
    }

    /// Queues any event: a packet-in as [`EventSender::packet_in`] does,
    /// the others without limit. False when it was not queued.
    pub fn send(&self, ev: SwitchEvent) -> bool {
        match ev {
            SwitchEvent::PacketIn(pi) => self.packet_in(pi).is_ok(),
            other => {
                // Counted before it is queued, so a barrier that reads the
                // count waits for it.
                self.progress.sent.fetch_add(1, Ordering::AcqRel);
                self.control.send(other).is_ok()
            }
        }
    }
}

/// The receiving side, read by [`crate::Agent::run_events`]. A plain
/// bounded receiver converts into one with no control lane (everything
/// arrives on the bounded lane), as the in-memory switch and the
/// examples use it.
#[derive(Debug)]
pub struct EventReceiver {
    packet_ins: mpsc::Receiver<SwitchEvent>,
    control: Option<(mpsc::UnboundedReceiver<SwitchEvent>, Arc<Progress>)>,
}

impl From<mpsc::Receiver<SwitchEvent>> for EventReceiver {
    fn from(packet_ins: mpsc::Receiver<SwitchEvent>) -> Self {
        EventReceiver {
            packet_ins,
            control: None,
        }
    }
}

impl EventReceiver {
    /// The next event, control events first; `None` once every sender is
    /// gone and nothing is left.
    pub async fn recv(&mut self) -> Option<SwitchEvent> {
        match &mut self.control {
            None => self.packet_ins.recv().await,
            Some((control, _)) => tokio::select! {
                biased;
                Some(ev) = control.recv() => Some(ev),
                Some(ev) = self.packet_ins.recv() => Some(ev),
                else => None,
            },
        }
    }

    /// An event already queued, control events first.
    pub fn try_recv(&mut self) -> Option<SwitchEvent> {
        if let Some(ev) = self.control.as_mut().and_then(|c| c.0.try_recv().ok()) {
            return Some(ev);
        }
        self.packet_ins.try_recv().ok()
    }

    /// The pump's counter of control events handed over (`None` for a
    /// receiver without a control lane).
    pub(crate) fn handed(&self) -> Option<Handed> {
        self.control.as_ref().map(|(_, p)| Handed {
            progress: Arc::clone(p),
        })
    }
}

/// A channel whose packet-in lane holds at most `packet_ins` events.
pub fn event_channel(packet_ins: usize) -> (EventSender, EventReceiver) {
    let (ptx, prx) = mpsc::channel(packet_ins.max(1));
    let (ctx, crx) = mpsc::unbounded_channel();
    let progress = Arc::new(Progress {
        sent: AtomicU64::new(0),
        handed: watch::Sender::new(0),
    });
    (
        EventSender {
            packet_ins: ptx,
            control: ctx,
            progress: Arc::clone(&progress),
        },
        EventReceiver {
            packet_ins: prx,
            control: Some((crx, progress)),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn removed(cookie: u64) -> SwitchEvent {
        SwitchEvent::FlowRemoved(ofp::FlowRemoved {
            cookie,
            ..ofp::FlowRemoved::default()
        })
    }

    fn pin() -> PacketIn {
        PacketIn {
            buffer_id: ofp::consts::OFP_NO_BUFFER,
            total_len: 0,
            reason: 0,
            table_id: 0,
            cookie: 0,
            match_: ofp::Match::default(),
            data: Vec::new(),
        }
    }

    #[test]
    fn control_events_are_never_refused_and_come_first() {
        let (tx, mut rx) = event_channel(2);
        assert_eq!(tx.packet_in(pin()), Ok(()));
        assert_eq!(tx.packet_in(pin()), Ok(()));
        assert_eq!(tx.packet_in(pin()), Err(PacketInRefused::Full));
        assert!(!tx.send(SwitchEvent::PacketIn(pin())));
        for c in 0..20_000 {
            assert!(tx.send(removed(c)), "flow-removed {c} refused");
        }
        let mut cookies = Vec::new();
        let mut pins = 0;
        while let Some(ev) = rx.try_recv() {
            match ev {
                SwitchEvent::FlowRemoved(r) => {
                    assert_eq!(pins, 0, "a packet-in came before a control event");
                    cookies.push(r.cookie);
                }
                SwitchEvent::PacketIn(_) => pins += 1,
                SwitchEvent::PortStatus(_) => unreachable!(),
            }
        }
        assert_eq!(
            cookies,
            (0..20_000).collect::<Vec<_>>(),
            "in order, none lost"
        );
        assert_eq!(pins, 2);
    }

    #[test]
    fn recv_ends_when_both_lanes_are_closed_and_empty() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (tx, mut rx) = event_channel(4);
            assert!(tx.send(removed(1)));
            assert_eq!(tx.packet_in(pin()), Ok(()));
            drop(tx);
            assert!(matches!(rx.recv().await, Some(SwitchEvent::FlowRemoved(_))));
            assert!(matches!(rx.recv().await, Some(SwitchEvent::PacketIn(_))));
            assert!(rx.recv().await.is_none());
            let (tx, rx) = mpsc::channel(1);
            let mut rx = EventReceiver::from(rx);
            tx.try_send(removed(2)).expect("room");
            drop(tx);
            assert!(rx.recv().await.is_some());
            assert!(rx.recv().await.is_none());
        });
    }
}
