//! Where packets leave the pipeline: outputs to ports (physical, IN_PORT,
//! ALL, FLOOD, NORMAL, CONTROLLER, LOCAL, TABLE), the frames queued for
//! transmission with their counters, and packet-ins with buffer ids.

use crate::datapath::counters::DropReason;
use crate::datapath::output::{PacketInEvent, TraceEvent};
use ofp::action::OFPCML_NO_BUFFER;
use ofp::consts::{port_no, OFP_NO_BUFFER};
use ofp::packet_in::packet_in_reason;
use ofp::{Match, Oxm, OxmField, OxmValue};
use packet::buffer::PacketBuf;

use super::{Exec, Pkt};

impl Exec<'_> {
    /// The output action.
    pub fn output(&mut self, pkt: &Pkt, port: u32, max_len: u16) {
        match port {
            p if p <= port_no::MAX => {
                if p == pkt.in_port {
                    // Spec §5.12: output to the ingress port only via IN_PORT.
                    self.trace(|| TraceEvent::Skipped { port: p });
                } else {
                    self.send(pkt, p);
                }
            }
            port_no::IN_PORT => match pkt.in_port {
                p if p <= port_no::MAX => self.send(pkt, p),
                port_no::LOCAL => self.tx(pkt, port_no::LOCAL),
                _ => self.dropped(DropReason::UnsupportedOutput),
            },
            port_no::ALL | port_no::FLOOD => {
                let ports = self.ports;
                for p in ports.numbers() {
                    let ok = if port == port_no::FLOOD {
                        ports.floods_to(p)
                    } else {
                        ports.can_send(p)
                    };
                    if p != pkt.in_port && ok {
                        self.tx(pkt, p);
                    }
                }
            }
            port_no::CONTROLLER => {
                let reason = if pkt.origin.miss {
                    packet_in_reason::NO_MATCH
                } else {
                    packet_in_reason::ACTION
                };
                self.packet_in(pkt, reason, max_len);
            }
            // Spec §5.12 again: the local port is an ingress port too.
            port_no::LOCAL if pkt.in_port == port_no::LOCAL => {
                self.trace(|| TraceEvent::Skipped {
                    port: port_no::LOCAL,
                });
            }
            port_no::LOCAL => self.tx(pkt, port_no::LOCAL),
            port_no::NORMAL => {
                self.normal(pkt);
            }
            port_no::TABLE if pkt.packet_out => self.pipeline(pkt.clone(), 0),
            _ => {
                self.dropped(DropReason::UnsupportedOutput);
            }
        }
    }

    pub(super) fn send(&mut self, pkt: &Pkt, p: u32) {
        if self.ports.can_send(p) {
            self.tx(pkt, p);
        } else {
            self.hot.port(self.counters, p).tx_dropped += 1;
            self.dropped(DropReason::PortDown);
        }
    }

    pub(super) fn tx(&mut self, pkt: &Pkt, p: u32) {
        self.emit_frame(pkt.buf.clone(), p, pkt.queue_id, pkt.tunnel_id);
    }

    /// As `tx`, moving the buffer out of `pkt` (left empty).
    pub(super) fn tx_owned(&mut self, pkt: &mut Pkt, p: u32) {
        let packet = std::mem::replace(&mut pkt.buf, PacketBuf::from_vec(Vec::new()));
        self.emit_frame(packet, p, pkt.queue_id, pkt.tunnel_id);
    }

    /// Sends `packet` (whose `tunnel_id` is `tunnel_id`) on queue
    /// `queue_id` of port `p` (a standard port that can send): moved to
    /// the output, counted, traced.
    #[inline]
    pub(in crate::datapath) fn emit_frame(
        &mut self,
        packet: PacketBuf,
        p: u32,
        queue_id: u32,
        tunnel_id: u64,
    ) {
        let len = self.queue_frame(packet, p, queue_id, tunnel_id);
        self.count_tx(p, queue_id, 1, len);
        self.trace(|| TraceEvent::Output { port: p, queue_id });
    }

    /// Pads `packet` to its floor and moves it to the output for queue
    /// `queue_id` of port `p`, uncounted; returns the length it leaves
    /// with (see `packet::buffer`).
    #[inline]
    pub(in crate::datapath) fn queue_frame(
        &mut self,
        mut packet: PacketBuf,
        p: u32,
        queue_id: u32,
        tunnel_id: u64,
    ) -> u64 {
        packet.pad_to_floor();
        let len = packet.len() as u64;
        if tunnel_id != 0 {
            self.out.tx_tunnel_ids.push((self.out.tx.len(), tunnel_id));
        }
        packet.meta.queue_id = queue_id;
        self.out.tx.push(p, packet);
        len
    }

    /// Counts `packets` frames of `bytes` bytes in all (as they leave,
    /// padded) sent on queue `queue_id` of port `p`.
    pub(in crate::datapath) fn count_tx(
        &mut self,
        p: u32,
        queue_id: u32,
        packets: u64,
        bytes: u64,
    ) {
        let c = self.hot.port(self.counters, p);
        c.tx_packets += packets;
        c.tx_bytes += bytes;
        self.hot
            .queue_tx(self.counters, p, queue_id, packets, bytes);
    }

    /// Sends the packet to the controller: buffers it unless `max_len` is
    /// `OFPCML_NO_BUFFER` or the pool is disabled, and truncates the data
    /// to `max_len` when buffered.
    pub fn packet_in(&mut self, pkt: &Pkt, reason: u8, max_len: u16) {
        if !self.ports.packet_in_allowed(pkt.in_port) {
            self.dropped(DropReason::PacketInBlocked);
            return;
        }
        // The frame as it would leave a port: padded with zeros to its
        // floor (see `packet::buffer`).
        let total = pkt.buf.padded_len();
        let (buffer_id, keep) = if max_len == OFPCML_NO_BUFFER {
            (OFP_NO_BUFFER, total)
        } else {
            let mut frame = pkt.buf.clone();
            frame.pad_to_floor();
            match self.buffers.store(pkt.in_port, frame) {
                Some(id) => (id, total.min(usize::from(max_len))),
                None => (OFP_NO_BUFFER, total),
            }
        };
        let bytes = pkt.buf.as_slice();
        let mut data = bytes
            .get(..keep.min(bytes.len()))
            .unwrap_or_default()
            .to_vec();
        data.resize(keep, 0);
        let mut fields = vec![Oxm::basic(OxmField::InPort, OxmValue::U32(pkt.in_port))];
        if pkt.in_phy_port != pkt.in_port {
            fields.push(Oxm::basic(
                OxmField::InPhyPort,
                OxmValue::U32(pkt.in_phy_port),
            ));
        }
        if pkt.metadata != 0 {
            fields.push(Oxm::basic(OxmField::Metadata, OxmValue::U64(pkt.metadata)));
        }
        if pkt.tunnel_id != 0 {
            fields.push(Oxm::basic(OxmField::TunnelId, OxmValue::U64(pkt.tunnel_id)));
        }
        self.trace(|| TraceEvent::PacketIn { reason });
        self.out.packet_ins.push(PacketInEvent {
            in_port: pkt.in_port,
            message: ofp::PacketIn {
                buffer_id,
                total_len: u16::try_from(total).unwrap_or(u16::MAX),
                reason,
                table_id: pkt.origin.table_id,
                cookie: pkt.origin.cookie,
                match_: Match { fields },
                data,
            },
        });
    }
}
