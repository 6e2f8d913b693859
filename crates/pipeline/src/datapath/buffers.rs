//! The packet buffer pool: packets sent to the controller can be kept here
//! so that the controller refers to them by `buffer_id` (in a PACKET_OUT or
//! a FLOW_MOD) instead of sending the bytes back.
//!
//! The pool is bounded: `N` slots; when every slot is full the oldest
//! packet is dropped to make room (a controller that never answers cannot
//! make the switch run out of memory). Ids grow by one per stored packet
//! and the slot is `id % N`, so an id whose slot has been reused is
//! recognised as unknown. Ids skip `OFP_NO_BUFFER`. `N = 0` disables
//! buffering: every packet-in then carries the whole packet (as allowed by
//! the spec when the switch cannot buffer).
//!
//! Several workers: worker `k` of `W` uses [`BufferPool::with_stride`]`(n,
//! k, W)`, so its ids are `k, k+W, k+2W, …` and the agent finds the worker
//! holding a buffer id as `id % W` ([`BufferPool::owner`]).

use ofp::consts::OFP_NO_BUFFER;
use packet::buffer::PacketBuf;

/// A buffered packet with the port it came in on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffered {
    /// Ingress port of the packet.
    pub in_port: u32,
    /// The whole packet.
    pub packet: PacketBuf,
}

/// See the module comment.
#[derive(Clone, Debug, Default)]
pub struct BufferPool {
    slots: Vec<Option<(u32, Buffered)>>,
    next_id: u32,
    first_id: u32,
    stride: u32,
    /// Packets evicted to make room before anyone claimed them.
    pub evicted: u64,
}

impl BufferPool {
    /// A pool of `n` buffers (`0` disables buffering).
    pub fn new(n: usize) -> BufferPool {
        BufferPool::with_stride(n, 0, 1)
    }

    /// A pool of `n` buffers whose ids are `first, first+stride, …` (see
    /// the module comment; `stride` 0 is treated as 1, `first` is taken
    /// modulo `stride`).
    pub fn with_stride(n: usize, first: u32, stride: u32) -> BufferPool {
        let stride = stride.max(1);
        let first = first % stride;
        BufferPool {
            slots: vec![None; n],
            next_id: first,
            first_id: first,
            stride,
            evicted: 0,
        }
    }

    /// The worker (of `n_workers`, each with a strided pool) whose pool
    /// gave buffer id `id`.
    pub fn owner(id: u32, n_workers: u32) -> u32 {
        id % n_workers.max(1)
    }

    /// Number of buffers.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Stores a packet; returns its id, or `None` when buffering is
    /// disabled.
    pub fn store(&mut self, in_port: u32, packet: PacketBuf) -> Option<u32> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        if self.next_id == OFP_NO_BUFFER {
            self.next_id = self.first_id;
        }
        let id = self.next_id;
        // On wrap-around start again at `first_id`, so every id stays
        // `first_id` modulo the stride.
        self.next_id = id.checked_add(self.stride).unwrap_or(self.first_id);
        let at = self.slot_of(id, n);
        let slot = self.slots.get_mut(at)?;
        if slot.is_some() {
            self.evicted += 1;
        }
        *slot = Some((id, Buffered { in_port, packet }));
        Some(id)
    }

    /// Takes a buffered packet out of the pool; `None` when the id is
    /// unknown (never given, already taken, or evicted).
    pub fn take(&mut self, id: u32) -> Option<Buffered> {
        let n = self.slots.len();
        if n == 0 || id == OFP_NO_BUFFER {
            return None;
        }
        if id % self.stride.max(1) != self.first_id {
            return None;
        }
        let at = self.slot_of(id, n);
        let slot = self.slots.get_mut(at)?;
        match slot {
            Some((stored, _)) if *stored == id => slot.take().map(|(_, b)| b),
            _ => None,
        }
    }

    fn slot_of(&self, id: u32, n: usize) -> usize {
        (id / self.stride.max(1)) as usize % n
    }

    /// Number of packets held now.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// True when no packet is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(b: u8) -> PacketBuf {
        PacketBuf::from_slice(&[b; 20])
    }

    #[test]
    fn store_take_and_evict_oldest() {
        let mut p = BufferPool::new(2);
        let a = p.store(1, pkt(1)).unwrap();
        let b = p.store(2, pkt(2)).unwrap();
        assert_ne!(a, b);
        assert_eq!(p.len(), 2);
        let c = p.store(3, pkt(3)).unwrap();
        assert_eq!(p.evicted, 1);
        assert_eq!(p.take(a), None, "oldest was reused");
        assert_eq!(p.take(b).unwrap().in_port, 2);
        assert_eq!(p.take(b), None, "taken once");
        assert_eq!(p.take(c).unwrap().packet, pkt(3));
        assert!(p.is_empty());
        assert_eq!(p.take(OFP_NO_BUFFER), None);
    }

    #[test]
    fn disabled_pool_buffers_nothing_and_ids_skip_no_buffer() {
        let mut p = BufferPool::new(0);
        assert_eq!(p.store(1, pkt(1)), None);
        assert_eq!(p.take(0), None);
        let mut q = BufferPool::new(3);
        q.next_id = OFP_NO_BUFFER;
        assert_eq!(q.store(1, pkt(1)), Some(0));
    }

    #[test]
    fn strided_pools_give_disjoint_ids_and_name_their_owner() {
        let mut a = BufferPool::with_stride(2, 0, 3);
        let mut b = BufferPool::with_stride(2, 1, 3);
        let ia: Vec<u32> = (0..3).map(|i| a.store(1, pkt(i)).unwrap()).collect();
        let ib: Vec<u32> = (0..3).map(|i| b.store(1, pkt(i)).unwrap()).collect();
        assert_eq!(ia, vec![0, 3, 6]);
        assert_eq!(ib, vec![1, 4, 7]);
        assert!(ia.iter().all(|i| BufferPool::owner(*i, 3) == 0));
        assert!(ib.iter().all(|i| BufferPool::owner(*i, 3) == 1));
        assert_eq!(a.evicted, 1);
        assert_eq!(a.take(0), None, "evicted by id 6");
        assert_eq!(a.take(4), None, "another worker's id");
        assert_eq!(a.take(6).unwrap().packet, pkt(2));
        assert_eq!(b.take(7).unwrap().packet, pkt(2));
        // Wrap-around keeps the residue.
        b.next_id = u32::MAX - 1;
        let _ = b.store(1, pkt(9));
        assert_eq!(b.next_id, 1);
    }
}
