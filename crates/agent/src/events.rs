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

use crate::switch::SwitchEvent;
use ofp::PacketIn;
use tokio::sync::mpsc;

/// The sending side: held by whatever produces events (the datapath
/// workers send packet-ins, the control side everything).
#[derive(Clone, Debug)]
pub struct EventSender {
    packet_ins: mpsc::Sender<SwitchEvent>,
    control: mpsc::UnboundedSender<SwitchEvent>,
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
            other => self.control.send(other).is_ok(),
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
    control: Option<mpsc::UnboundedReceiver<SwitchEvent>>,
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
            Some(control) => tokio::select! {
                biased;
                Some(ev) = control.recv() => Some(ev),
                Some(ev) = self.packet_ins.recv() => Some(ev),
                else => None,
            },
        }
    }

    /// An event already queued, control events first.
    pub fn try_recv(&mut self) -> Option<SwitchEvent> {
        if let Some(ev) = self.control.as_mut().and_then(|c| c.try_recv().ok()) {
            return Some(ev);
        }
        self.packet_ins.try_recv().ok()
    }
}

/// A channel whose packet-in lane holds at most `packet_ins` events.
pub fn event_channel(packet_ins: usize) -> (EventSender, EventReceiver) {
    let (ptx, prx) = mpsc::channel(packet_ins.max(1));
    let (ctx, crx) = mpsc::unbounded_channel();
    (
        EventSender {
            packet_ins: ptx,
            control: ctx,
        },
        EventReceiver {
            packet_ins: prx,
            control: Some(crx),
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
