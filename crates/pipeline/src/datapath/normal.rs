//! Output to `OFPP_NORMAL` on the packet path: the steps of
//! [`crate::normal`] over one packet, emitting a copy per output port
//! with the tag that port wants.

use super::counters::DropReason;
use super::exec::{Exec, Pkt};
use crate::normal::{is_reserved, vid_of, Egress};
use ofp::consts::port_no;
use packet::buffer::PacketBuf;

/// The 802.1Q TPID NORMAL pushes.
const TPID: u16 = 0x8100;

/// What NORMAL did with one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NormalOutcome {
    /// Sent to the port its destination was learnt on.
    Forwarded,
    /// Flooded to the VLAN's ports (broadcast, multicast, unknown).
    Flooded,
    /// Dropped (counted by reason).
    Dropped,
}

impl Exec<'_> {
    /// NORMAL for `pkt` as it is now (see [`crate::normal`]).
    pub(super) fn normal(&mut self, pkt: &Pkt) -> NormalOutcome {
        let frame = pkt.buf.as_slice();
        let (Some(dst), Some(src)) = (mac(frame, 0), mac(frame, 6)) else {
            self.dropped(DropReason::ActionFailed);
            return NormalOutcome::Dropped;
        };
        let in_port = pkt.in_port;
        let tag = vid_of(frame);
        let Some(vlan) = self.ports.vlan(in_port).ingress(tag) else {
            self.dropped(DropReason::NormalVlan);
            return NormalOutcome::Dropped;
        };
        let table = &self.config.normal;
        if src[0] & 1 == 0 && (in_port <= port_no::MAX || in_port == port_no::LOCAL) {
            table.learn(vlan, src, in_port, self.now);
        }
        if is_reserved(dst) {
            self.dropped(DropReason::NormalReserved);
            return NormalOutcome::Dropped;
        }
        if dst[0] & 1 == 0 {
            match table.lookup(vlan, dst, self.now) {
                Some(p) if p == in_port => {
                    self.dropped(DropReason::NormalSamePort);
                    return NormalOutcome::Dropped;
                }
                Some(p) if self.ports.can_send(p) => {
                    if !self.normal_emit(pkt, p, vlan, tag.is_some()) {
                        self.dropped(DropReason::NormalVlan);
                        return NormalOutcome::Dropped;
                    }
                    return NormalOutcome::Forwarded;
                }
                // Unknown, or learnt on a port that cannot send now.
                _ => {}
            }
        }
        let ports = self.ports;
        for p in ports.numbers() {
            if p != in_port && ports.floods_to(p) {
                self.normal_emit(pkt, p, vlan, tag.is_some());
            }
        }
        NormalOutcome::Flooded
    }

    /// Sends a copy of `pkt`, of VLAN `vlan`, out of `port` tagged as the
    /// port carries the VLAN; false when it does not carry it.
    fn normal_emit(&mut self, pkt: &Pkt, port: u32, vlan: u16, tagged: bool) -> bool {
        let egress = self.ports.vlan(port).egress(vlan);
        let mut buf: PacketBuf = match egress {
            Egress::No => return false,
            _ => pkt.buf.clone(),
        };
        let done = match (egress, tagged) {
            (Egress::Untagged, true) => buf.pop_vlan().is_ok(),
            (Egress::Tagged(v), false) => buf.push_vlan(TPID).is_ok() && set_vid(&mut buf, v),
            (Egress::Tagged(v), true) => set_vid(&mut buf, v),
            _ => true,
        };
        if done {
            self.emit_frame(buf, port, pkt.queue_id, pkt.tunnel_id);
        } else {
            self.dropped(DropReason::ActionFailed);
        }
        true
    }
}

/// Writes `vid` into the outer tag's TCI, keeping PCP and DEI.
fn set_vid(buf: &mut PacketBuf, vid: u16) -> bool {
    let Some(tci) = buf.as_mut_slice().get_mut(14..16) else {
        return false;
    };
    let old = u16::from_be_bytes([tci[0], tci[1]]);
    tci.copy_from_slice(&((old & 0xf000) | (vid & 0x0fff)).to_be_bytes());
    true
}

fn mac(frame: &[u8], at: usize) -> Option<[u8; 6]> {
    if frame.len() < 14 {
        return None;
    }
    frame.get(at..at + 6)?.try_into().ok()
}
