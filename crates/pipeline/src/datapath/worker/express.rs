//! Table 0's express path: a burst whose first table is one hash
//! subtable keyed on link-layer fields and the ingress port (the
//! gateway's in_port + VLAN or in_port + MPLS label, an L2 table's
//! eth_dst), beside at most table-miss entries, is forwarded without
//! packet records and without parsing past the Ethernet header.
//!
//! # What
//!
//! [`WorkerState::express_burst`] takes such a burst in three passes:
//!
//! 1. key: each frame's key is packed straight from its header
//!    ([`crate::tables::L2Index::key`]), hashed, and its home slot
//!    prefetched;
//! 2. probe: each key is probed from its home slot, giving the entry
//!    slot it hits (the table-miss entry's when that is better);
//! 3. execute, in packet order, fetching the compiled entry and flow
//!    counter `AHEAD` packets ahead: a hit on a compiled entry that is
//!    at most one fused gateway rewrite and an output to another
//!    standard port that can send is done here (the six bytes written
//!    in place, the flow, table and port counters bumped, the buffer
//!    moved to the output). At the first packet it does not forward (a
//!    miss, another kind of entry, a frame of another shape), that
//!    packet and the rest of the burst go on to the general path's
//!    stages ([`WorkerState::process_burst_into`]), so the outputs keep
//!    packet order and a table whose entries go on to later tables
//!    keeps its per-table burst lookups.
//!
//! # Invariants
//!
//! - What a packet does here is what the general path does with it:
//!   the key is the one [`classifier::Layout::extract`] packs from the
//!   parsed key (`classifier`'s differential test), the lookup is the
//!   table's (its whole index is this subtable), the rewrites are the
//!   executor's own in-place functions, which decline every frame they
//!   are not exact for, and the counters are the ones
//!   compiled-entry path of `Exec` bumps. The datapath's differential
//!   proptest (`express_path_equals_the_general_path`) runs bursts
//!   through both, with table-0 changes between bursts.
//! - Nothing is taken from the burst before the burst is known to be an
//!   express one (table, ports, tracing): a `false` return leaves it
//!   whole for [`WorkerState::process_burst_into`]'s general path.
//!
//! # Why
//!
//! With 100K gateway rules the general path spent about 94 ns a packet
//! where a hand-written loop doing the same lookup and rewrite spends
//! 13 (`fulmar bench gateway-vlan2mpls --rules 100000 --reference`):
//! filling a packet record and parsing the whole key (about 20 ns), the
//! stage bookkeeping around each packet (about 17), packing the key
//! field by field from the parsed key, and the general output. The
//! figures after are in docs/results.md.

use super::{prefetch_hit, WorkerState, AHEAD};
use crate::datapath::exec::{mpls_to_vlan_in_place, vlan_to_mpls_in_place, Exec};
use crate::datapath::output::BurstOutput;
use crate::datapath::PipelineView;
use crate::tables::compiled::FastOp;
use crate::tables::{FlowTable, L2Index};
use crate::Time;
use ofp::consts::port_no;
use packet::buffer::PacketBuf;

impl WorkerState {
    /// Forwards a burst received on `in_port` by the express path (see
    /// the module comment), draining `packets` into `out`; `false`,
    /// taking nothing, when table 0 is not an express table, the port
    /// does not receive, or steps are being traced.
    pub(super) fn express_burst(
        &mut self,
        view: &PipelineView<'_>,
        in_port: u32,
        packets: &mut Vec<PacketBuf>,
        now: Time,
        out: &mut BurstOutput,
    ) -> bool {
        if view.reference || self.trace.is_some() || !view.ports.receives(in_port) {
            return false;
        }
        let Some(t0) = view.tables.table(0) else {
            return false;
        };
        let Some(index) = t0.l2_index() else {
            return false;
        };
        let mut sc = std::mem::take(&mut self.scratch);
        sc.first.clear();
        let bytes = match index.words() {
            1 => express_lookup::<1>(&index, in_port, packets, &mut sc.first),
            _ => express_lookup::<2>(&index, in_port, packets, &mut sc.first),
        };
        let pc = self.hot.port(&mut self.counters, in_port);
        pc.rx_packets += packets.len() as u64;
        pc.rx_bytes += bytes;
        self.hot.reserve(0, t0.slot_count());
        for s in sc.first.iter().take(AHEAD).flatten().flatten() {
            prefetch_hit(t0, &self.hot, 0, *s);
        }
        let mut ex = self.exec(view, out, now);
        let mut done = 0;
        // The port the last express packet left by, whether it can send,
        // and what left by it since its counters were last bumped.
        let mut tx = TxRun::default();
        let mut rest = std::mem::take(&mut sc.rest);
        let mut drain = packets.drain(..).enumerate();
        for (i, buf) in drain.by_ref() {
            if let Some(Some(Some(s))) = sc.first.get(i + AHEAD) {
                prefetch_hit(t0, ex.hot, 0, *s);
            }
            let buf = match sc.first.get(i).copied().flatten().flatten() {
                Some(slot) => match express_one(&mut ex, t0, in_port, slot, buf, &mut tx) {
                    Ok(()) => {
                        done += 1;
                        continue;
                    }
                    Err(buf) => buf,
                },
                None => buf,
            };
            rest.push(buf);
            break;
        }
        tx.flush(&mut ex);
        ex.hot.table_lookups(0, done, done);
        rest.extend(drain.map(|(_, b)| b));
        sc.first.clear();
        self.scratch = sc;
        if !rest.is_empty() {
            // From the first frame the express path does not forward, the
            // rest of the burst takes the general path's stages (a table
            // whose entries go on to later tables keeps its burst
            // lookups there).
            self.general_burst(view, in_port, &mut rest, now, out, true);
        }
        self.scratch.rest = rest;
        true
    }
}

/// Passes 1 and 2 of the module comment for `packets`, 32 at a time
/// (keys of `W` words): each one's table-0 slot pushed to `first`
/// (`Some(None)`: a miss or a frame for the general path). Returns the
/// burst's bytes.
#[inline]
fn express_lookup<const W: usize>(
    index: &L2Index<'_>,
    in_port: u32,
    packets: &[PacketBuf],
    first: &mut Vec<Option<Option<u32>>>,
) -> u64 {
    const CHUNK: usize = 32;
    let mut keys = [([0u64; W], usize::MAX); CHUNK];
    let mut bytes = 0;
    for chunk in packets.chunks(CHUNK) {
        for (k, buf) in keys.iter_mut().zip(chunk) {
            bytes += buf.len() as u64;
            *k = match index.key::<W>(in_port, buf.as_slice()) {
                Some(key) => (key, index.home(&key)),
                None => ([0; W], usize::MAX),
            };
        }
        for (key, home) in keys.iter().take(chunk.len()) {
            first.push(Some(
                (*home != usize::MAX)
                    .then(|| index.slot(*home, key))
                    .flatten(),
            ));
        }
    }
    bytes
}

/// Frames the express path sent by one port, not yet counted: frames
/// that leave one after the other by the same port are counted together,
/// and whether the port can send is asked once for them.
#[derive(Default)]
struct TxRun {
    /// The port, if any frame has left yet, and whether it can send.
    port: Option<(u32, bool)>,
    packets: u64,
    bytes: u64,
}

impl TxRun {
    /// Whether `port` can send, flushing the count of the port before
    /// when it is another.
    #[inline]
    fn sendable(&mut self, ex: &mut Exec<'_>, port: u32) -> bool {
        match self.port {
            Some((p, ok)) if p == port => ok,
            _ => {
                self.flush(ex);
                let ok = ex.ports.can_send(port);
                self.port = Some((port, ok));
                ok
            }
        }
    }

    /// Counts what left by the current port (queue 0).
    fn flush(&mut self, ex: &mut Exec<'_>) {
        if let (Some((p, _)), 1..) = (self.port, self.packets) {
            ex.count_tx(p, 0, self.packets, self.bytes);
        }
        self.packets = 0;
        self.bytes = 0;
    }
}

/// Forwards one frame that hit entry slot `slot` of table 0 when the
/// slot's compiled entry ends the pipeline with at most one fused
/// gateway rewrite, exact for this frame, and an output to another
/// standard port that can send; else gives the frame back untouched.
#[inline]
fn express_one(
    ex: &mut Exec<'_>,
    t0: &FlowTable,
    in_port: u32,
    slot: u32,
    mut buf: PacketBuf,
    tx: &mut TxRun,
) -> Result<(), PacketBuf> {
    let Some(fe) = t0.fast(slot).filter(|f| f.is_final()) else {
        return Err(buf);
    };
    let (op, port) = match fe.ops() {
        Some(&[FastOp::Output { port, .. }]) => (None, port),
        Some(&[op, FastOp::Output { port, .. }]) => (Some(op), port),
        _ => return Err(buf),
    };
    if port > port_no::MAX || port == in_port || !tx.sendable(ex, port) {
        return Err(buf);
    }
    let len = buf.len() as u64;
    let rewritten = match op {
        None => true,
        Some(FastOp::VlanToMpls { ethertype, label }) => {
            vlan_to_mpls_in_place(buf.as_mut_slice(), ethertype, label)
        }
        Some(FastOp::MplsToVlan {
            ethertype,
            tpid,
            vid,
        }) => mpls_to_vlan_in_place(buf.as_mut_slice(), ethertype, tpid, vid),
        Some(_) => false,
    };
    if !rewritten {
        return Err(buf);
    }
    ex.hot.flow_hit(ex.counters, 0, slot, fe.id, len, ex.now);
    tx.packets += 1;
    tx.bytes += ex.queue_frame(buf, port, 0);
    Ok(())
}
