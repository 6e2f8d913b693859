//! The packets sent: one template per flow, laid out burst by burst (each
//! burst's packets share an ingress port), refilled into recycled buffers
//! between bursts.

use crate::frame::{self, Rng};
use crate::options::Options;
use crate::workload::Workload;
use packet::buffer::PacketBuf;

/// The packets sent: one template per flow, laid out burst by burst.
pub(crate) struct Pool {
    pub(crate) size: usize,
    /// The flows are spread over rules `0..over`.
    pub(crate) over: usize,
    pub(crate) bytes: Vec<u8>,
    /// Flow number of each template.
    pub(crate) flow_of: Vec<u32>,
    pub(crate) bursts: Vec<BurstSpan>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct BurstSpan {
    pub(crate) in_port: u32,
    pub(crate) start: usize,
    pub(crate) len: usize,
}

impl Pool {
    /// Puts the packets of `span` into `batch`, reusing the buffers in
    /// `free` (the untimed refill between bursts); returns how many had to
    /// be allocated.
    pub(crate) fn fill(
        &self,
        span: BurstSpan,
        free: &mut Vec<PacketBuf>,
        batch: &mut Vec<PacketBuf>,
    ) -> u64 {
        let mut allocations = 0;
        for k in span.start..span.start + span.len {
            let tpl = self.template(k);
            match free.pop() {
                Some(mut buf) if buf.len() == tpl.len() => {
                    buf.as_mut_slice().copy_from_slice(tpl);
                    batch.push(buf);
                }
                _ => {
                    allocations += 1;
                    batch.push(PacketBuf::from_slice(tpl));
                }
            }
        }
        allocations
    }

    pub(crate) fn template(&self, k: usize) -> &[u8] {
        &self.bytes[k * self.size..(k + 1) * self.size]
    }

    /// [`Pool::new`] with the packet size, burst and seed the options give.
    pub(crate) fn for_options(w: &Workload, flows: usize, over: usize, opts: &Options) -> Pool {
        Pool::new(w, flows, over, opts.packet_size, opts.burst, opts.seed)
    }

    /// Builds `flows` flows over the first `over` rules of `w`.
    pub(crate) fn new(
        w: &Workload,
        flows: usize,
        over: usize,
        size: usize,
        burst: usize,
        seed: u64,
    ) -> Pool {
        let mut rng = Rng::new(seed ^ 0xb0057);
        // Group flows by ingress port so a burst shares one.
        let mut by_port: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for j in 0..flows {
            let (i, v) = Workload::flow_rule(j, flows, over);
            let (port, _) = w.flow(i, v);
            by_port.entry(port).or_default().push(j as u32);
        }
        let mut chunks: Vec<(u32, Vec<u32>)> = Vec::new();
        for (port, mut js) in by_port {
            rng.shuffle(&mut js);
            for c in js.chunks(burst) {
                chunks.push((port, c.to_vec()));
            }
        }
        rng.shuffle(&mut chunks);
        let mut pool = Pool {
            size,
            over,
            bytes: Vec::with_capacity(flows * size),
            flow_of: Vec::with_capacity(flows),
            bursts: Vec::with_capacity(chunks.len()),
        };
        for (port, js) in chunks {
            pool.bursts.push(BurstSpan {
                in_port: port,
                start: pool.flow_of.len(),
                len: js.len(),
            });
            for j in js {
                let (i, v) = Workload::flow_rule(j as usize, flows, over);
                pool.bytes.extend_from_slice(&w.flow(i, v).1.build(size));
                pool.flow_of.push(j);
            }
        }
        pool
    }
}

/// The flow of template `k`, rebuilt from the generator.
pub(crate) fn sample_flow(w: &Workload, pool: &Pool, k: usize) -> (u32, frame::Frame) {
    let j = pool.flow_of[k] as usize;
    let (i, v) = Workload::flow_rule(j, pool.flow_of.len(), pool.over);
    w.flow(i, v)
}
