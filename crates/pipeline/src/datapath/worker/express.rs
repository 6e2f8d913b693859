//! Table 0's express path: a burst whose first table is one hash
//! subtable keyed on link-layer fields and the ingress port (the
//! gateway's in_port + VLAN or in_port + MPLS label, an L2 table's
//! eth_dst), or the IPv4 route engine (a routing table's prefixes),
//! beside at most table-miss entries, is forwarded without packet
//! records and without parsing past the headers the table reads.
//!
//! # What
//!
//! [`WorkerState::express_burst`] takes such a burst in three passes:
//!
//! 1. key: each frame's key is packed straight from its header
//!    ([`crate::tables::L2Index::key`]), hashed, and its home slot
//!    prefetched; for routes, its IPv4 destination is read
//!    ([`packet::flow_key::plain_ipv4_dst`]: untagged IPv4 only);
//! 2. probe: each key is probed from its home slot (for routes, the
//!    engine's burst passes), giving the entry slot it hits (the
//!    table-miss entry's when that is better);
//! 3. execute, in packet order, fetching the compiled entry and flow
//!    counter `AHEAD` packets ahead: a hit on a compiled entry whose
//!    actions the path does in place for this frame (none; one fused
//!    gateway rewrite; Ethernet address set_fields and a dec_ttl, see
//!    [`rewrite_in_place`]) and then an output to another standard port
//!    that can send is done here (the bytes written in place, the flow,
//!    table and port counters bumped, the buffer moved to the output).
//!    At the first packet it does not forward (a
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
//! For a table whose hit is one lookup and a rewrite in place, the
//! general path's own work is most of a packet's cost: filling a packet
//! record and parsing the whole key, the stage bookkeeping around each
//! packet, packing the key field by field from the parsed key, and the
//! general output. The express path does none of it; what that is worth
//! (`fulmar bench gateway-vlan2mpls --reference`, `fulmar bench l3`) is in
//! docs/results.md, "What the datapath's structure bought".

use super::stages::prefetch_hit;
use super::{WorkerState, AHEAD};
use crate::datapath::exec::{mpls_to_vlan_in_place, vlan_to_mpls_in_place, Exec};
use crate::datapath::output::BurstOutput;
use crate::datapath::PipelineView;
use crate::tables::compiled::{FastOp, Rewrite};
use crate::tables::{FlowTable, L2Index, RouteIndex};
use crate::Time;
use ofp::consts::port_no;
use ofp::OxmField;
use packet::buffer::PacketBuf;
use packet::flow_key::{plain_ipv4_dst, PLAIN_IPV4_L3};
use packet::ttl::dec_ipv4_ttl_at;

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
        // Both asked (the route engine answers at once when it is empty):
        // an `if let` chain asking for routes only after the link-layer
        // index was measured 2-7 ns a packet slower (l3 and gateway 100K,
        // code layout), not faster.
        let index = match (t0.l2_index(), t0.route_index()) {
            (Some(l2), _) => Index::L2(l2),
            (None, Some(routes)) => Index::Routes(routes),
            (None, None) => return false,
        };
        // Only the two vectors this path uses are taken from the scratch
        // (taking the whole of it was a copy in and out a burst).
        let mut first = std::mem::take(&mut self.scratch.express);
        let mut rest = std::mem::take(&mut self.scratch.rest);
        first.clear();
        let bytes = match index {
            Index::L2(index) if index.words() == 1 => {
                express_lookup::<1>(&index, in_port, packets, &mut first)
            }
            Index::L2(index) => express_lookup::<2>(&index, in_port, packets, &mut first),
            Index::Routes(routes) => express_route_lookup(&routes, packets, &mut first),
        };
        let pc = self.hot.port(&mut self.counters, in_port);
        pc.rx_packets += packets.len() as u64;
        pc.rx_bytes += bytes;
        self.hot.reserve(0, t0.slot_count());
        for &s in first.iter().take(AHEAD).filter(|s| **s != NO_SLOT) {
            prefetch_hit(t0, &self.hot, 0, s);
        }
        let mut ex = self.exec(view, out, now);
        let mut done: usize = 0;
        let mut tx = CanSend::default();
        // Each frame is rewritten where it lies and its output port kept
        // in its slot's place; the forwarded frames then move to the
        // output in one block copy. Moving each 64-byte buffer out of the
        // burst, into `express_one` and on into the output, field by
        // field, made each copy's loads wait on the narrower stores of the
        // one before (store forwarding: 16-18 % of the samples on one
        // load, `perf annotate`, gateway 1K rules).
        for (i, buf) in packets.iter_mut().enumerate() {
            if let Some(&s) = first.get(i + AHEAD).filter(|s| **s != NO_SLOT) {
                prefetch_hit(t0, ex.hot, 0, s);
            }
            let Some(slot) = first.get(i).copied().filter(|s| *s != NO_SLOT) else {
                break;
            };
            let Some(port) = express_one(&mut ex, t0, in_port, slot, buf, &mut tx) else {
                break;
            };
            if let Some(f) = first.get_mut(i) {
                *f = port;
            }
            done += 1;
        }
        ex.hot.table_lookups(0, done as u64, done as u64);
        rest.extend(packets.drain(done..));
        ex.out.tx.append(packets, first.get(..done).unwrap_or(&[]));
        first.clear();
        self.scratch.express = first;
        if !rest.is_empty() {
            // From the first frame the express path does not forward, the
            // rest of the burst takes the general path's stages (a table
            // whose entries go on to later tables keeps its burst
            // lookups there).
            self.general_burst(view, in_port, &mut rest, &[], now, out, true);
        }
        self.scratch.rest = rest;
        true
    }
}

/// What the express path's lookups give for a frame that has no table-0
/// slot (a miss, or a frame for the general path); never a slot number
/// (slots are below `1 << SLOT_BITS`).
const NO_SLOT: u32 = u32::MAX;

/// Table 0's index in one of the two shapes the express path takes.
enum Index<'a> {
    L2(L2Index<'a>),
    Routes(RouteIndex<'a>),
}

/// Passes 1 and 2 of the module comment for `packets`, 32 at a time
/// (keys of `W` words): each one's table-0 slot pushed to `first`
/// ([`NO_SLOT`]: a miss or a frame for the general path). Returns the
/// burst's bytes.
#[inline]
fn express_lookup<const W: usize>(
    index: &L2Index<'_>,
    in_port: u32,
    packets: &[PacketBuf],
    first: &mut Vec<u32>,
) -> u64 {
    const CHUNK: usize = 32;
    let mut keys = [([0u64; W], usize::MAX); CHUNK];
    let mut bytes = 0;
    let port = index.port_bits::<W>(in_port);
    for chunk in packets.chunks(CHUNK) {
        for (k, buf) in keys.iter_mut().zip(chunk) {
            let data = buf.as_slice();
            bytes += data.len() as u64;
            *k = match index.key::<W>(port, in_port, data) {
                Some(key) => (key, index.home(&key)),
                None => ([0; W], usize::MAX),
            };
        }
        for (key, home) in keys.iter().take(chunk.len()) {
            let slot = (*home != usize::MAX)
                .then(|| index.slot(*home, key))
                .flatten();
            first.push(slot.unwrap_or(NO_SLOT));
        }
    }
    bytes
}

/// Passes 1 and 2 for a route table: each frame's IPv4 destination read
/// from its header, the route engine's burst passes over 32 at a time,
/// and each frame's table-0 slot pushed to `first` ([`NO_SLOT`]: a miss,
/// or a frame that is not plain IPv4, for the general path). Returns the
/// burst's bytes.
#[inline]
fn express_route_lookup(
    index: &RouteIndex<'_>,
    packets: &[PacketBuf],
    first: &mut Vec<u32>,
) -> u64 {
    const CHUNK: usize = 32;
    let mut addrs = [None; CHUNK];
    let mut hits = [None; CHUNK];
    let mut bytes = 0;
    for chunk in packets.chunks(CHUNK) {
        for (a, buf) in addrs.iter_mut().zip(chunk) {
            bytes += buf.len() as u64;
            *a = plain_ipv4_dst(buf.as_slice());
        }
        let n = chunk.len();
        index.hits(&addrs[..n], &mut hits[..n]);
        for (a, h) in addrs.iter().zip(&hits).take(n) {
            first.push(a.and_then(|_| index.slot(*h)).unwrap_or(NO_SLOT));
        }
    }
    bytes
}

/// Whether the ports below 64 that the burst's frames left by can send,
/// asked once a burst each (the ports are the published view's: they do
/// not change within a burst). Asked frame by frame, `Ports::can_send`
/// was 14 instructions of each gateway frame.
#[derive(Default)]
struct CanSend {
    /// Ports asked.
    known: u64,
    /// Ports asked that can send.
    ok: u64,
}

impl CanSend {
    /// Whether `port` can send.
    #[inline]
    fn sendable(&mut self, ex: &Exec<'_>, port: u32) -> bool {
        let Some(bit) = 1u64.checked_shl(port).filter(|_| port < 64) else {
            return ex.ports.can_send(port);
        };
        if self.known & bit == 0 {
            self.known |= bit;
            if ex.ports.can_send(port) {
                self.ok |= bit;
            }
        }
        self.ok & bit != 0
    }
}

/// Forwards one frame that hit entry slot `slot` of table 0 when the
/// slot's compiled entry ends the pipeline with rewrites the express
/// path does in place for this frame ([`rewrite_in_place`]) and an output
/// to another standard port that can send, and gives that port (the
/// caller moves the frame there); else `None`, the frame untouched.
#[inline]
fn express_one(
    ex: &mut Exec<'_>,
    t0: &FlowTable,
    in_port: u32,
    slot: u32,
    buf: &mut PacketBuf,
    tx: &mut CanSend,
) -> Option<u32> {
    let fe = t0.fast(slot)?;
    let (&FastOp::Output { port, .. }, body) = fe.final_ops().and_then(<[FastOp]>::split_last)?
    else {
        return None;
    };
    if port > port_no::MAX || port == in_port || !tx.sendable(ex, port) {
        return None;
    }
    if !rewrite_in_place(buf.as_mut_slice(), body) {
        return None;
    }
    buf.meta.queue_id = 0;
    let len = buf.len();
    ex.hot
        .flow_hit(ex.counters, 0, slot, fe.id, len as u64, ex.now);
    // What `Exec::queue_frame` does, the length read once.
    let sent = buf.pad_to_floor_from(len) as u64;
    // Counted frame by frame: the counts of a run of frames by one port,
    // bumped when the port changed, cost an out-of-line call per frame
    // where consecutive frames leave by different ports (54 instructions
    // each, `valgrind --tool=callgrind` of the gateway benchmark).
    if !ex.hot.tx_one(port, sent) {
        ex.count_tx(port, 0, 1, sent);
    }
    Some(port)
}

/// Applies `ops` (a compiled entry's actions before its output) to
/// `frame` when the express path does them in place: none; one fused
/// gateway rewrite, exact for this frame; or set_fields of the Ethernet
/// addresses with at most one dec_nw_ttl, on a frame the TTL can be
/// decremented in without a key (untagged IPv4, TTL above 1). Each
/// writes the bytes the executor's own functions write. `false`, with
/// the frame untouched, for anything else (the general path then runs
/// the entry, and sees the frame as it came).
#[inline]
fn rewrite_in_place(frame: &mut [u8], ops: &[FastOp]) -> bool {
    match *ops {
        [] => return true,
        [FastOp::VlanToMpls { ethertype, label }] => {
            return vlan_to_mpls_in_place(frame, ethertype, label)
        }
        [FastOp::MplsToVlan {
            ethertype,
            tpid,
            vid,
        }] => return mpls_to_vlan_in_place(frame, ethertype, tpid, vid),
        _ => {}
    }
    let mut dec_ttl = false;
    for op in ops {
        match *op {
            FastOp::SetField { field, .. } if mac_at(field).is_some() => {}
            FastOp::Rewrite(Rewrite::DecNwTtl) if !dec_ttl => dec_ttl = true,
            _ => return false,
        }
    }
    if frame.len() < 14 {
        return false;
    }
    // The only step that can fail goes first, so a refusal leaves the
    // frame as it came (the others write other bytes: order does not
    // change the result).
    if dec_ttl
        && (plain_ipv4_dst(frame).is_none() || dec_ipv4_ttl_at(frame, PLAIN_IPV4_L3).is_err())
    {
        return false;
    }
    for op in ops {
        if let FastOp::SetField { field, hi, lo } = *op {
            if let Some(mac) = mac_at(field).and_then(|at| frame.get_mut(at..at + 6)) {
                mac[..2].copy_from_slice(&hi.to_be_bytes());
                mac[2..].copy_from_slice(&lo.to_be_bytes());
            }
        }
    }
    true
}

/// Where in the frame set_field of OXM field `field` writes, when it is
/// one of the Ethernet addresses.
#[inline]
fn mac_at(field: u8) -> Option<usize> {
    match field {
        f if f == OxmField::EthDst as u8 => Some(0),
        f if f == OxmField::EthSrc as u8 => Some(6),
        _ => None,
    }
}
