//! Fail-standalone: a bridge whose controllers are all gone acts as a
//! learning switch until one is back.
//!
//! OpenFlow leaves what a switch does without its controller to the
//! switch's fail mode (`fail_mode` of a bridge in the config, the agent's
//! [`agent::FailMode`]). `Secure` needs nothing here: the flow tables stay
//! and misses are dropped (packet-ins find no channel and are counted as
//! `packet_in_no_controller`). `Standalone` is this module: while [`Standalone`]
//! is active, every worker hands each burst to it instead of to the
//! pipeline (the flow tables are bypassed, not changed, so they are in
//! force again the moment a controller returns; the worker still counts
//! each frame in its OpenFlow port and queue statistics), and it
//!
//! - learns the source MAC address of every frame, in the frame's VLAN,
//!   → its input port (one table per bridge, shared by the bridge's
//!   workers; unicast sources only; entries age out after [`AGE`]; a full
//!   table stops learning new addresses until entries age out),
//! - sends a frame to a known unicast destination's port,
//! - floods broadcast, multicast and unknown destinations to every other
//!   port of the bridge, and
//! - never sends a frame back out of the port it came in on (a known
//!   destination on the input port is dropped and counted: the two hosts
//!   share a segment and need no switch).
//!
//! A frame's VLAN is the id of its outer 802.1Q or 802.1ad tag (untagged
//! frames and priority-tagged ones, VID 0, share one space): one host seen
//! in two VLANs (a router, a VM on a trunk) is learnt once in each, and a
//! destination is looked up only in the frame's own VLAN. Flooding stays
//! bridge-wide: ports carry no VLAN membership here. The table is
//! forgotten each time the bridge turns standalone, so addresses learnt in
//! an earlier spell do not outlive the flows that ran in between.
//!
//! # Locking
//!
//! Only the bridge's dataplane workers take the table's mutex, once per
//! burst and never across a send: they decide every packet's ports under
//! the lock and hand the packets on after releasing it. The control side
//! only flips atomics ([`Standalone::set_active`]), so a worker never
//! waits for control code (DESIGN.md).
//!
//! [`follow_controllers`] switches a bridge in and out of standalone as an
//! agent's controllers come and go.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dataplane::{Burst, PacketBuf};

/// How long a learnt address stays without being seen again (Open
/// vSwitch's default MAC aging time).
pub const AGE: Duration = Duration::from_secs(300);

/// Addresses one bridge learns at most.
pub const CAPACITY: usize = 8192;

#[derive(Clone, Copy, Debug)]
struct Entry {
    port: u32,
    spell: u64,
    seen: Instant,
}

/// Counters of a bridge's learning switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StandaloneCounters {
    /// Frames sent to a learnt port.
    pub forwarded: u64,
    /// Frames flooded (broadcast, multicast or unknown destination).
    pub flooded: u64,
    /// Frames dropped: the destination was learnt on the input port.
    pub same_port: u64,
    /// Frames dropped: shorter than an Ethernet header.
    pub runt: u64,
    /// Source addresses not learnt because the table was full.
    pub table_full: u64,
}

/// What the workers share under the table's lock.
#[derive(Debug, Default)]
struct Learn {
    macs: HashMap<(u16, [u8; 6]), Entry>,
    /// The bridge's ports; a burst takes a reference (no copy) to flood
    /// with outside the lock.
    ports: Arc<[u32]>,
}

/// The learning switch of one bridge (see the module comment).
#[derive(Debug)]
pub struct Standalone {
    active: AtomicBool,
    /// Bumped each time the bridge turns standalone; entries of earlier
    /// spells are treated as absent.
    spell: AtomicU64,
    /// The learnt addresses and the ports to flood to, under one lock
    /// that workers take once per burst (the control side takes it only
    /// to replace the port list when a port is added or removed).
    table: Mutex<Learn>,
    forwarded: AtomicU64,
    flooded: AtomicU64,
    same_port: AtomicU64,
    runt: AtomicU64,
    table_full: AtomicU64,
}

impl Default for Standalone {
    /// Inactive, with no ports.
    fn default() -> Self {
        Standalone::new(Vec::new())
    }
}

/// Where one frame goes.
#[derive(Clone, Copy)]
enum Verdict {
    To(u32),
    Flood,
    Drop,
}

impl Standalone {
    /// An inactive learning switch over the bridge's OpenFlow `ports`.
    pub fn new(ports: Vec<u32>) -> Standalone {
        Standalone {
            active: AtomicBool::new(false),
            spell: AtomicU64::new(0),
            table: Mutex::new(Learn {
                macs: HashMap::new(),
                ports: ports.into(),
            }),
            forwarded: AtomicU64::new(0),
            flooded: AtomicU64::new(0),
            same_port: AtomicU64::new(0),
            runt: AtomicU64::new(0),
            table_full: AtomicU64::new(0),
        }
    }

    /// Whether the bridge is a learning switch now (one relaxed load per
    /// burst on the workers' path).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Turns the learning switch on (forgetting what an earlier spell
    /// learnt) or off (back to the flow tables). Returns whether this
    /// changed anything.
    pub fn set_active(&self, on: bool) -> bool {
        if on && !self.is_active() {
            self.spell.fetch_add(1, Ordering::AcqRel);
        }
        self.active.swap(on, Ordering::AcqRel) != on
    }

    /// Replaces the bridge's port list (a port was added or removed) and
    /// forgets addresses learnt on ports that are gone.
    pub fn set_ports(&self, ports: Vec<u32>) {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.macs.retain(|_, e| ports.contains(&e.port));
        t.ports = ports.into();
    }

    /// The counters now.
    pub fn counters(&self) -> StandaloneCounters {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StandaloneCounters {
            forwarded: get(&self.forwarded),
            flooded: get(&self.flooded),
            same_port: get(&self.same_port),
            runt: get(&self.runt),
            table_full: get(&self.table_full),
        }
    }

    /// Switches `burst` (all received on `in_port`), handing every frame
    /// to send to `out` with its output port.
    pub fn process(&self, in_port: u32, burst: &mut Burst, out: &mut dyn FnMut(u32, PacketBuf)) {
        let now = Instant::now();
        let spell = self.spell.load(Ordering::Acquire);
        let mut verdicts: Vec<Verdict> = Vec::with_capacity(burst.len());
        let ports = {
            let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
            for p in burst.iter() {
                verdicts.push(self.decide(&mut table.macs, in_port, p.data(), spell, now));
            }
            table.ports.clone()
        };
        for (p, v) in burst.drain().zip(verdicts) {
            match v {
                Verdict::To(port) => {
                    self.forwarded.fetch_add(1, Ordering::Relaxed);
                    out(port, p);
                }
                Verdict::Flood => {
                    self.flooded.fetch_add(1, Ordering::Relaxed);
                    let mut others = ports.iter().copied().filter(|&q| q != in_port);
                    let Some(first) = others.next() else {
                        continue;
                    };
                    for q in others {
                        out(q, PacketBuf::from_slice(p.data()));
                    }
                    out(first, p);
                }
                Verdict::Drop => {}
            }
        }
    }

    fn decide(
        &self,
        table: &mut HashMap<(u16, [u8; 6]), Entry>,
        in_port: u32,
        frame: &[u8],
        spell: u64,
        now: Instant,
    ) -> Verdict {
        let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
            self.runt.fetch_add(1, Ordering::Relaxed);
            return Verdict::Drop;
        };
        let live = |e: &Entry| e.spell == spell && now.saturating_duration_since(e.seen) < AGE;
        let vid = vlan_of(frame);
        let (src, dst_key) = ((vid, src), (vid, dst));
        if src.1[0] & 1 == 0 {
            if table.len() >= CAPACITY && !table.contains_key(&src) {
                table.retain(|_, e| live(e));
            }
            if table.len() < CAPACITY || table.contains_key(&src) {
                table.insert(
                    src,
                    Entry {
                        port: in_port,
                        spell,
                        seen: now,
                    },
                );
            } else {
                self.table_full.fetch_add(1, Ordering::Relaxed);
            }
        }
        if dst[0] & 1 != 0 {
            return Verdict::Flood;
        }
        match table.get(&dst_key).filter(|e| live(e)) {
            Some(e) if e.port == in_port => {
                self.same_port.fetch_add(1, Ordering::Relaxed);
                Verdict::Drop
            }
            Some(e) => Verdict::To(e.port),
            None => Verdict::Flood,
        }
    }
}

/// The VLAN id (12 bits) of the frame's outer 802.1Q (0x8100) or
/// 802.1ad (0x88a8) tag; 0 when untagged (or the tag is cut off).
fn vlan_of(frame: &[u8]) -> u16 {
    match frame.get(12..16) {
        Some([0x81, 0x00, hi, lo] | [0x88, 0xa8, hi, lo]) => {
            u16::from_be_bytes([*hi, *lo]) & 0x0fff
        }
        _ => 0,
    }
}

fn mac_at(frame: &[u8], at: usize) -> Option<[u8; 6]> {
    if frame.len() < 14 {
        return None;
    }
    frame.get(at..at + 6)?.try_into().ok()
}

/// Keeps `standalone` active exactly while `agent` has no controller
/// connected (runs until the agent's runtime stops). `bridge` names the
/// bridge in the log lines.
pub async fn follow_controllers<S: agent::Switch>(
    agent: Arc<agent::Agent<S>>,
    standalone: Arc<Standalone>,
    bridge: String,
) {
    loop {
        agent.all_controllers_gone().await;
        if standalone.set_active(true) {
            tracing::warn!(
                bridge,
                "no controller: acting as a learning switch (fail mode standalone)"
            );
        }
        agent.controllers().any_controller_connected().await;
        if standalone.set_active(false) {
            tracing::info!(bridge, "a controller is connected: back to the flow tables");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(dst: [u8; 6], src: [u8; 6], tag: u8) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x08, 0x00, tag]);
        f
    }

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
    const C: [u8; 6] = [2, 0, 0, 0, 0, 0xc];
    const BCAST: [u8; 6] = [0xff; 6];

    /// Runs one frame through; returns the ports it went out of.
    fn switch(s: &Standalone, in_port: u32, f: Vec<u8>) -> Vec<(u32, Vec<u8>)> {
        let mut b = Burst::with_limit(1);
        b.push(PacketBuf::from_slice(&f)).unwrap();
        let mut sent = Vec::new();
        s.process(in_port, &mut b, &mut |p, pkt| {
            sent.push((p, pkt.data().to_vec()))
        });
        sent.sort();
        sent
    }

    fn ports(sent: &[(u32, Vec<u8>)]) -> Vec<u32> {
        sent.iter().map(|(p, _)| *p).collect()
    }

    #[test]
    fn learns_forwards_floods_and_never_returns_to_the_input_port() {
        let s = Standalone::new(vec![1, 2, 3]);
        s.set_active(true);
        // Unknown destination: flooded to every other port, intact.
        let f = frame(B, A, 1);
        let sent = switch(&s, 1, f.clone());
        assert_eq!(ports(&sent), vec![2, 3]);
        assert!(sent.iter().all(|(_, d)| *d == f));
        // B answers from port 2: A was learnt on port 1.
        assert_eq!(ports(&switch(&s, 2, frame(A, B, 2))), vec![1]);
        // Now B is known too.
        assert_eq!(ports(&switch(&s, 1, frame(B, A, 3))), vec![2]);
        // Broadcast floods even from a known source.
        assert_eq!(ports(&switch(&s, 2, frame(BCAST, B, 4))), vec![1, 3]);
        // C on port 1 talking to A (also on port 1): not sent back.
        assert!(switch(&s, 1, frame(A, C, 5)).is_empty());
        // A moves to port 3: learnt again.
        assert_eq!(ports(&switch(&s, 3, frame(B, A, 6))), vec![2]);
        assert_eq!(ports(&switch(&s, 2, frame(A, B, 7))), vec![3]);
        // Runts are dropped and counted.
        assert!(switch(&s, 1, vec![1, 2, 3]).is_empty());
        let c = s.counters();
        assert_eq!(
            (c.flooded, c.forwarded, c.same_port, c.runt),
            (2, 4, 1, 1),
            "{c:?}"
        );
    }

    /// `frame` with an 802.1Q tag of VLAN `vid` after the addresses.
    fn tagged(dst: [u8; 6], src: [u8; 6], vid: u16) -> Vec<u8> {
        let mut f = frame(dst, src, 0);
        let [hi, lo] = vid.to_be_bytes();
        f.splice(12..12, [0x81, 0x00, hi, lo]);
        f
    }

    #[test]
    fn addresses_are_learnt_per_vlan() {
        let s = Standalone::new(vec![1, 2, 3]);
        s.set_active(true);
        // A is on port 1 in VLAN 10 and on port 3 in VLAN 20 (a trunk).
        switch(&s, 1, tagged(BCAST, A, 10));
        switch(&s, 3, tagged(BCAST, A, 20));
        assert_eq!(ports(&switch(&s, 2, tagged(A, B, 10))), vec![1]);
        assert_eq!(ports(&switch(&s, 2, tagged(A, B, 20))), vec![3]);
        // Untagged, A is unknown: flooded (and never back to port 2).
        assert_eq!(ports(&switch(&s, 2, frame(A, B, 1))), vec![1, 3]);
        // An 802.1ad outer tag counts the same way; VID 0 is untagged.
        assert_eq!(ports(&switch(&s, 1, frame(C, A, 1))), vec![2, 3]);
        let mut qinq = tagged(A, C, 0);
        qinq[12..14].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(
            ports(&switch(&s, 2, qinq)),
            vec![1],
            "A learnt untagged on 1"
        );
        let mut qinq = tagged(A, C, 20);
        qinq[12..14].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(ports(&switch(&s, 2, qinq)), vec![3]);
    }

    #[test]
    fn a_new_spell_forgets_and_activation_is_reported_once() {
        let s = Standalone::new(vec![1, 2]);
        assert!(!s.is_active());
        assert!(s.set_active(true));
        assert!(!s.set_active(true), "already active");
        switch(&s, 1, frame(B, A, 1));
        assert_eq!(ports(&switch(&s, 2, frame(A, B, 2))), vec![1]);
        assert!(s.set_active(false));
        assert!(s.set_active(true));
        // A is forgotten: B's frame to A is flooded again.
        assert_eq!(ports(&switch(&s, 2, frame(A, B, 3))), vec![1]);
        assert_eq!(s.counters().flooded, 2);
    }

    #[test]
    fn a_full_table_stops_learning_new_addresses() {
        let s = Standalone::new(vec![1, 2]);
        s.set_active(true);
        for i in 0..CAPACITY as u32 {
            let b = i.to_be_bytes();
            switch(&s, 1, frame(BCAST, [2, 0, b[0], b[1], b[2], b[3]], 0));
        }
        assert_eq!(s.counters().table_full, 0);
        switch(&s, 2, frame(BCAST, [4, 0, 0, 0, 0, 1], 0));
        assert_eq!(s.counters().table_full, 1);
        // Known addresses still work.
        assert_eq!(
            ports(&switch(&s, 2, frame([2, 0, 0, 0, 0, 5], C, 0))),
            vec![1]
        );
    }
}
