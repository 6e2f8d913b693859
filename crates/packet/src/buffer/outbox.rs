//! What a burst sends: the packets in order and, beside them, the port
//! each leaves by. Two vectors, not one of pairs, so that a burst that
//! leaves by one port goes to that port's transmit burst whole, by
//! exchanging vectors: the pipeline writes its outputs here, the worker
//! hands the outbox to the dataplane, and no buffer moves after the
//! pipeline put it here.

use super::PacketBuf;

/// Packets to send, each with its output port (see the module comment).
/// Two are equal when they send the same packets (bytes, headroom, floor
/// and egress queue, `meta.queue_id`) by the same ports in the same order.
#[derive(Clone, Debug, Default)]
pub struct Outbox {
    pkts: Vec<PacketBuf>,
    ports: Vec<u32>,
}

impl Outbox {
    /// An empty outbox with room for `n` packets.
    pub fn with_capacity(n: usize) -> Self {
        Outbox {
            pkts: Vec::with_capacity(n),
            ports: Vec::with_capacity(n),
        }
    }

    /// Sends `pkt` by port `port` (after the packets pushed before it).
    #[inline]
    pub fn push(&mut self, port: u32, pkt: PacketBuf) {
        self.ports.push(port);
        self.pkts.push(pkt);
    }

    /// Sends every packet of `pkts`, the `i`-th by `ports[i]`, leaving
    /// `pkts` empty; with fewer ports than packets, the packets past the
    /// last port are dropped. One block copy where the lengths agree: a
    /// 64-byte buffer moved field by field stalls its next move on store
    /// forwarding (a load spanning two narrower stores).
    pub fn append(&mut self, pkts: &mut Vec<PacketBuf>, ports: &[u32]) {
        if pkts.len() == ports.len() {
            self.ports.extend_from_slice(ports);
            self.pkts.append(pkts);
        } else {
            for (pkt, &port) in pkts.drain(..).zip(ports) {
                self.push(port, pkt);
            }
        }
    }

    /// Packets held.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// True when nothing is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Packets it holds room for without growing.
    pub fn capacity(&self) -> usize {
        self.pkts.capacity().min(self.ports.capacity())
    }

    /// Makes room for `n` more packets.
    pub fn reserve(&mut self, n: usize) {
        self.pkts.reserve(n);
        self.ports.reserve(n);
    }

    /// The output ports, one per packet, in order.
    #[inline]
    pub fn ports(&self) -> &[u32] {
        &self.ports
    }

    /// The packets, in order.
    #[inline]
    pub fn pkts(&self) -> &[PacketBuf] {
        &self.pkts
    }

    /// The packets, in order, writable (their ports stay).
    #[inline]
    pub fn pkts_mut(&mut self) -> &mut [PacketBuf] {
        &mut self.pkts
    }

    /// The packets with their ports, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &PacketBuf)> + '_ {
        self.into_iter()
    }

    /// The one port every packet leaves by, if they all leave by one.
    #[inline]
    pub fn single_port(&self) -> Option<u32> {
        let (&first, rest) = self.ports.split_first()?;
        rest.iter().all(|&p| p == first).then_some(first)
    }

    /// Exchanges the packets with `pkts`'s (the caller's vector must be
    /// empty): a burst handed on whole; the outbox is then empty.
    pub fn exchange_pkts(&mut self, pkts: &mut Vec<PacketBuf>) {
        debug_assert!(pkts.is_empty());
        std::mem::swap(&mut self.pkts, pkts);
        self.ports.clear();
    }

    /// Removes and returns every packet with its port, in order.
    pub fn drain(&mut self) -> impl Iterator<Item = (u32, PacketBuf)> + '_ {
        self.drain_from(0)
    }

    /// Removes and returns the packets from `start` on with their ports,
    /// in order.
    pub fn drain_from(&mut self, start: usize) -> impl Iterator<Item = (u32, PacketBuf)> + '_ {
        let start = start.min(self.len());
        self.ports.drain(start..).zip(self.pkts.drain(start..))
    }

    /// Drops every packet.
    pub fn clear(&mut self) {
        self.pkts.clear();
        self.ports.clear();
    }
}

impl PartialEq for Outbox {
    fn eq(&self, other: &Self) -> bool {
        self.ports == other.ports
            && self.pkts.len() == other.pkts.len()
            && self
                .pkts
                .iter()
                .zip(&other.pkts)
                .all(|(a, b)| a == b && a.meta.queue_id == b.meta.queue_id)
    }
}

impl Eq for Outbox {}

impl<'a> IntoIterator for &'a Outbox {
    type Item = (u32, &'a PacketBuf);
    type IntoIter = core::iter::Zip<
        core::iter::Copied<core::slice::Iter<'a, u32>>,
        core::slice::Iter<'a, PacketBuf>,
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.ports.iter().copied().zip(self.pkts.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(tags: &[u8]) -> Vec<PacketBuf> {
        tags.iter()
            .map(|&t| PacketBuf::from_slice(&[t; 64]))
            .collect()
    }

    fn sent(o: &Outbox) -> Vec<(u32, u8)> {
        o.iter().map(|(p, b)| (p, b.as_slice()[0])).collect()
    }

    #[test]
    fn append_sends_each_packet_by_its_port_after_what_was_there() {
        let mut o = Outbox::default();
        o.push(9, PacketBuf::from_slice(&[0; 64]));
        let mut pkts = frames(&[1, 2, 3]);
        o.append(&mut pkts, &[4, 5, 6]);
        assert!(pkts.is_empty());
        assert_eq!(sent(&o), [(9, 0), (4, 1), (5, 2), (6, 3)]);
    }

    #[test]
    fn append_with_fewer_ports_sends_only_the_packets_that_have_one() {
        let mut o = Outbox::default();
        let mut pkts = frames(&[1, 2, 3]);
        o.append(&mut pkts, &[7]);
        assert!(pkts.is_empty());
        assert_eq!(sent(&o), [(7, 1)]);
        assert_eq!(o.ports().len(), o.pkts().len());
    }
}
