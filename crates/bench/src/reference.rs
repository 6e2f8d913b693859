//! `fulmar bench --reference`: the least any switch must do for a
//! scenario, written by hand as one tight loop, run in the same process
//! on the same packets, so fulmar's rate can be given as a fraction of it
//! (absolute per-core rates differ 2-3x between machines; this ratio
//! does not depend on the machine nearly as much).
//!
//! Per burst, for the gateway and l2 scenarios: parse the key the table
//! matches on (in_port + VLAN id, in_port + MPLS label, or the
//! destination MAC), hash it and prefetch its home slot in an
//! open-addressing table (linear probing, at most half full, 16-byte
//! slots holding the key, the output port and the rewrite's argument);
//! then for each packet probe, apply the rewrite in place and move the
//! buffer to the output list. For l3 the same with a DIR-24-8 table
//! (2^24 first-level entries, 256-entry second-level groups for prefixes
//! longer than /24) and a next-hop array. The rewrites are the
//! scenario's actions reduced to the bytes they change:
//!
//! - gateway-vlan2mpls (pop_vlan, push_mpls, set mpls_label): the frame
//!   keeps its length; the EtherType becomes 0x8847 and the 4 bytes of
//!   the tag become the label stack entry (label, bottom of stack, the
//!   IPv4 TTL).
//! - gateway-mpls2vlan (pop_mpls, push_vlan, set vlan_vid): likewise the
//!   4 bytes of the label become the tag; EtherType 0x8100, inner 0x0800.
//! - l2: none (output only).
//! - l3 (set eth_dst, dec_ttl): the 6 bytes of the MAC, the TTL and an
//!   incremental IPv4 checksum update (RFC 1624); a TTL of 0 or 1 drops.
//!
//! Packets of another shape (wrong EtherType, too short) and keys no rule
//! has are dropped. This is deliberately less than an OpenFlow switch
//! does (no counters, no priorities, no general actions, no
//! prerequisites beyond the key): it is the floor fulmar is measured
//! against, not a competitor.
//!
//! For acl the reference is the classifier's own lookup rate: the same
//! rules (flow text → the pipeline's canonical match → classifier rule)
//! in a bare [`classifier::Table`], burst lookups over keys parsed from
//! the same templates before the run (no parsing, no actions, no
//! buffers in the timed part).

use crate::frame::hex;
use crate::pool::{sample_flow, Pool};
use crate::traffic::{join_all, WorkerResult};
use crate::workload::{RefRule, Scenario, Workload};
use anyhow::{ensure, Context};
use packet::buffer::PacketBuf;
use packet::flow_key::FlowKey;
use packet::huge::HugeVec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Which key an exact table is keyed on, and the rewrite that goes with
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExactKind {
    VlanToMpls,
    MplsToVlan,
    L2,
}

/// One slot of [`ExactTable`]: the key ([`EMPTY`] when free) and the
/// value (output port in the top 16 bits, the rewrite's argument in the
/// low 48).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
struct Slot {
    key: u64,
    val: u64,
}

/// The key of a free slot (no parsed key is this large: they are at most
/// 48 bits).
const EMPTY: u64 = u64::MAX;

/// Fibonacci hashing: the multiply's high bits index the table.
const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// An open-addressing hash table (linear probing, load at most 1/2).
#[derive(Debug)]
struct ExactTable {
    slots: HugeVec<Slot>,
    mask: usize,
    shift: u32,
}

impl ExactTable {
    fn with_rules(n: usize) -> ExactTable {
        let cap = (n.max(1) * 2).next_power_of_two().max(16);
        ExactTable {
            slots: HugeVec::filled(cap, Slot { key: EMPTY, val: 0 }),
            mask: cap - 1,
            shift: 64 - cap.trailing_zeros(),
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(HASH_MUL) >> self.shift) as usize
    }

    /// Inserts or replaces `key`.
    fn insert(&mut self, key: u64, port: u32, arg: u64) -> anyhow::Result<()> {
        ensure!(
            key != EMPTY && key < 1 << 48,
            "reference key {key:#x} too wide"
        );
        ensure!(port < 1 << 16, "reference output port {port} too large");
        ensure!(arg < 1 << 48, "reference argument {arg:#x} too wide");
        let val = u64::from(port) << 48 | arg;
        let mut i = self.home(key);
        loop {
            let s = &mut self.slots[i];
            if s.key == EMPTY || s.key == key {
                *s = Slot { key, val };
                return Ok(());
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The value of `key`, probing from its home slot `i`.
    #[inline(always)]
    fn get_from(&self, key: u64, mut i: usize) -> Option<u64> {
        loop {
            let s = self.slots.get(i)?;
            if s.key == key {
                return Some(s.val);
            }
            if s.key == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// Second-level group flag of a [`Dir24`] first-level entry.
const GROUP: u32 = 1 << 31;

/// DIR-24-8 IPv4 longest-prefix match: an entry is 0 (no route), a
/// next-hop index + 1, or [`GROUP`] | group number.
#[derive(Debug)]
struct Dir24 {
    tbl24: HugeVec<u32>,
    tbl8: HugeVec<u32>,
    /// Output port << 48 | next-hop MAC, by next-hop index.
    nexthops: Vec<u64>,
}

impl Dir24 {
    /// Builds the table from `(addr, len, port, mac)` routes (a later
    /// duplicate prefix replaces an earlier one).
    fn new(mut routes: Vec<(u32, u8, u32, u64)>) -> anyhow::Result<Dir24> {
        let mut t = Dir24 {
            tbl24: HugeVec::from_vec(vec![0; 1 << 24]),
            tbl8: HugeVec::default(),
            nexthops: Vec::with_capacity(routes.len()),
        };
        // Shorter first, so a longer prefix overwrites what it covers.
        routes.sort_by_key(|r| r.1);
        for (addr, len, port, mac) in routes {
            ensure!(len <= 32, "prefix length {len}");
            ensure!(port < 1 << 16, "reference output port {port} too large");
            t.nexthops
                .push(u64::from(port) << 48 | (mac & 0xffff_ffff_ffff));
            let e = u32::try_from(t.nexthops.len()).context("too many routes")?;
            ensure!(e < GROUP, "too many routes");
            if len <= 24 {
                let first = (addr >> 8) as usize & !((1usize << (24 - len)) - 1);
                let n = 1usize << (24 - len);
                t.tbl24[first..first + n].fill(e);
            } else {
                let i24 = (addr >> 8) as usize;
                let cur = t.tbl24[i24];
                let group = if cur & GROUP != 0 {
                    (cur & !GROUP) as usize
                } else {
                    let g = t.tbl8.len() / 256;
                    ensure!(g < GROUP as usize, "too many groups");
                    let n = t.tbl8.len() + 256;
                    t.tbl8.grow(n, cur);
                    t.tbl24[i24] = GROUP | g as u32;
                    g
                };
                let first = (addr & 0xff) as usize & !((1usize << (32 - len)) - 1);
                let n = 1usize << (32 - len);
                t.tbl8[group * 256 + first..group * 256 + first + n].fill(e);
            }
        }
        Ok(t)
    }

    #[inline(always)]
    fn lookup(&self, ip: u32) -> Option<u64> {
        let mut e = *self.tbl24.get((ip >> 8) as usize)?;
        if e & GROUP != 0 {
            e = *self
                .tbl8
                .get((e & !GROUP) as usize * 256 + (ip & 0xff) as usize)?;
        }
        self.nexthops.get((e as usize).checked_sub(1)?).copied()
    }
}

/// The acl's reference: the bare classifier, its rules' output ports and
/// the keys of the pool's templates.
struct AclRef {
    table: classifier::Table,
    /// Output port by rule id.
    ports: Vec<u32>,
    /// Key of template `k` (in_port set from its burst).
    keys: Vec<FlowKey>,
}

/// `--reference-lines`: the exact scenarios' keys in the in-place
/// table's 64-byte lines ([`classifier::versioned`]), each worker a
/// registered reader that counts its hits in the lines it owns.
struct LinesRef {
    table: classifier::versioned::Table,
    view: classifier::versioned::View,
    /// Handed out to the workers' scratch as they start.
    versions: std::sync::Mutex<classifier::versioned::Versions>,
}

enum Engine {
    Exact(ExactKind, ExactTable),
    Lines(ExactKind, Box<LinesRef>),
    Lpm(Dir24),
    Acl(Box<AclRef>),
}

/// The reference of one scenario, built from the generator's record of
/// its installed rules.
pub struct Reference {
    engine: Engine,
}

/// Where the buffers of a burst went.
#[derive(Default)]
pub struct RefOutput {
    /// (output port, packet), in input order (the lines loop sends the
    /// packets of its last pass after the others; a flow's packets keep
    /// their order).
    pub tx: Vec<(u32, PacketBuf)>,
    /// Dropped buffers (no rule, wrong shape, TTL expired).
    pub dropped: Vec<PacketBuf>,
}

/// Per-worker scratch of the burst loop.
#[derive(Default)]
pub struct RefScratch {
    /// Parsed key (or [`EMPTY`]) and its home slot or first-level index.
    keys: Vec<(u64, usize)>,
    /// `--reference-lines`: parsed key (or [`EMPTY`]) and its hash.
    hashed: Vec<(u64, u64)>,
    /// `--reference-lines`: packets whose key was not in its first
    /// candidate line, with the key and hash, for the burst's last pass.
    later: Vec<(PacketBuf, u64, u64)>,
    hits: Vec<Option<classifier::Hit>>,
    /// `--reference-lines`: this worker's reader of the lines' versions.
    reader: Option<classifier::versioned::Reader>,
    /// `--reference-lines`: packets and bytes of hits on lines another
    /// worker owns, by entry slot.
    elsewhere: Vec<(u64, u64)>,
}

impl Reference {
    /// Builds the reference for `w`'s installed rules; for acl, also the
    /// keys of `pool`'s templates.
    pub fn new(w: &Workload, pool: &Pool) -> anyhow::Result<Reference> {
        Self::build(w, pool, false)
    }

    /// [`Reference::new`], with the exact scenarios' rules in the
    /// in-place table's lines instead of the reference's own slots
    /// (`--reference-lines`; refused for the other scenarios).
    pub fn with_lines(w: &Workload, pool: &Pool) -> anyhow::Result<Reference> {
        Self::build(w, pool, true)
    }

    fn build(w: &Workload, pool: &Pool, lines: bool) -> anyhow::Result<Reference> {
        let n = w.installed;
        let engine = match w.scenario {
            Scenario::GatewayVlan2Mpls | Scenario::GatewayMpls2Vlan | Scenario::L2 => {
                let kind = match w.scenario {
                    Scenario::GatewayVlan2Mpls => ExactKind::VlanToMpls,
                    Scenario::GatewayMpls2Vlan => ExactKind::MplsToVlan,
                    _ => ExactKind::L2,
                };
                let mut t = ExactTable::with_rules(n);
                for i in 0..n {
                    match w.reference_rule(i) {
                        RefRule::Exact { key, port, arg } => t.insert(key, port, arg)?,
                        r => anyhow::bail!("not an exact rule: {r:?}"),
                    }
                }
                if lines {
                    Engine::Lines(kind, Box::new(lines_of(&t, n)?))
                } else {
                    Engine::Exact(kind, t)
                }
            }
            _ if lines => {
                anyhow::bail!("--reference-lines is for the exact-match scenarios (gateway, l2)")
            }
            Scenario::L3 => {
                let routes = (0..n)
                    .map(|i| match w.reference_rule(i) {
                        RefRule::Prefix {
                            addr,
                            len,
                            port,
                            mac,
                        } => Ok((addr, len, port, mac)),
                        r => Err(anyhow::anyhow!("not a prefix rule: {r:?}")),
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Engine::Lpm(Dir24::new(routes)?)
            }
            Scenario::Acl => {
                let mut table = classifier::Table::new();
                let mut ports = Vec::with_capacity(n + 1);
                let texts = (0..n)
                    .map(|i| w.rule_text(i))
                    .chain(w.extra_rules())
                    .collect::<Vec<_>>();
                let mut rules = Vec::with_capacity(texts.len());
                for (i, text) in texts.iter().enumerate() {
                    let fm = flowtext::parse_flow(text)
                        .with_context(|| format!("generated rule {text:?}"))?;
                    let key = pipeline::MatchKey::new(&fm.match_)
                        .map_err(|e| anyhow::anyhow!("rule {text:?}: {e:?}"))?;
                    rules.push(classifier::Rule {
                        id: i as u64,
                        priority: fm.priority,
                        fields: key
                            .fields()
                            .iter()
                            .map(|f| classifier::FieldMatch {
                                field: f.field as u8,
                                value: f.value,
                                mask: f.mask,
                            })
                            .collect(),
                    });
                    ports.push(match w.reference_rule(i) {
                        RefRule::Wildcard { port } => port,
                        r => anyhow::bail!("not a wildcard rule: {r:?}"),
                    });
                }
                table
                    .insert_many(rules)
                    .map_err(|e| anyhow::anyhow!("classifier refused a rule: {e}"))?;
                let mut keys = vec![FlowKey::default(); pool.flow_of.len()];
                for span in &pool.bursts {
                    for (k, key) in keys.iter_mut().enumerate().skip(span.start).take(span.len) {
                        key.parse_into(pool.template(k));
                        key.in_port = span.in_port;
                    }
                }
                Engine::Acl(Box::new(AclRef { table, ports, keys }))
            }
            Scenario::Faucet => anyhow::bail!("the faucet scenario has no reference loop"),
        };
        Ok(Reference { engine })
    }

    /// What the reference does, in a few words.
    pub fn describe(&self) -> &'static str {
        match &self.engine {
            Engine::Exact(ExactKind::VlanToMpls, _) => {
                "parse in_port+VLAN, hash probe (burst prefetched), VLAN tag -> MPLS label in place, move to output"
            }
            Engine::Exact(ExactKind::MplsToVlan, _) => {
                "parse in_port+MPLS label, hash probe (burst prefetched), MPLS label -> VLAN tag in place, move to output"
            }
            Engine::Exact(ExactKind::L2, _) => {
                "parse eth_dst, hash probe (burst prefetched), move to output"
            }
            Engine::Lines(..) => {
                "the exact loop, its keys in the in-place table's 64-byte lines (versioned lookup, hit counted in the line)"
            }
            Engine::Lpm(_) => {
                "parse IPv4 dst, DIR-24-8 probe (burst prefetched), set eth_dst + dec_ttl with incremental checksum, move to output"
            }
            Engine::Acl(_) => "the classifier's burst lookup on pre-parsed keys of the same packets",
        }
    }

    /// Bytes of the reference's lookup structures.
    pub fn table_bytes(&self) -> usize {
        match &self.engine {
            Engine::Exact(_, t) => t.slots.len() * std::mem::size_of::<Slot>(),
            Engine::Lines(_, l) => l.table.capacity() * 64,
            Engine::Lpm(t) => (t.tbl24.len() + t.tbl8.len()) * 4 + t.nexthops.len() * 8,
            Engine::Acl(a) => a.table.lookup_heap_bytes(),
        }
    }

    /// True for the acl (lookups only: [`Self::lookup_span`], no buffers).
    pub fn lookups_only(&self) -> bool {
        matches!(self.engine, Engine::Acl(_))
    }

    /// The acl: looks up the keys of templates `start..start + len`;
    /// returns how many hit a rule. (Other scenarios: 0.)
    #[inline]
    pub fn lookup_span(&self, start: usize, len: usize, sc: &mut RefScratch) -> u64 {
        let Engine::Acl(a) = &self.engine else {
            return 0;
        };
        let Some(keys) = a.keys.get(start..start + len) else {
            return 0;
        };
        sc.hits.resize(len, None);
        a.table.lookup_burst(keys, &mut sc.hits);
        sc.hits.iter().filter(|h| h.is_some()).count() as u64
    }

    /// The acl: the output port of template `k` (its rule's), if any.
    fn acl_port(&self, k: usize) -> Option<u32> {
        let Engine::Acl(a) = &self.engine else {
            return None;
        };
        let hit = a.table.lookup(a.keys.get(k)?)?;
        a.ports.get(hit.id as usize).copied()
    }

    /// Forwards a burst that arrived on `in_port`: every buffer of
    /// `batch` ends in `out.tx` (rewritten) or `out.dropped`.
    #[inline]
    pub fn process(
        &self,
        in_port: u32,
        batch: &mut Vec<PacketBuf>,
        sc: &mut RefScratch,
        out: &mut RefOutput,
    ) {
        match &self.engine {
            Engine::Exact(kind, t) => {
                let kind = *kind;
                sc.keys.clear();
                for buf in batch.iter() {
                    let k = exact_key(kind, in_port, buf.as_slice());
                    let h = t.home(k);
                    if let Some(s) = t.slots.get(h) {
                        classifier::prefetch(s);
                    }
                    sc.keys.push((k, h));
                }
                for (mut buf, &(k, h)) in batch.drain(..).zip(&sc.keys) {
                    match (k != EMPTY).then(|| t.get_from(k, h)).flatten() {
                        Some(v) => {
                            rewrite_exact(kind, buf.as_mut_slice(), v & 0xffff_ffff_ffff);
                            out.tx.push(((v >> 48) as u32, buf));
                        }
                        None => out.dropped.push(buf),
                    }
                }
            }
            Engine::Lpm(t) => {
                sc.keys.clear();
                for buf in batch.iter() {
                    let p = buf.as_slice();
                    let k = match (p.get(12..14), p.get(30..34)) {
                        (Some([0x08, 0x00]), Some(&[a, b, c, d])) if p.len() >= 34 => {
                            u64::from(u32::from_be_bytes([a, b, c, d]))
                        }
                        _ => EMPTY,
                    };
                    let i = (k as u32 >> 8) as usize;
                    if let Some(e) = t.tbl24.get(i) {
                        classifier::prefetch(e);
                    }
                    sc.keys.push((k, i));
                }
                for (mut buf, &(k, _)) in batch.drain(..).zip(&sc.keys) {
                    let hit = (k != EMPTY).then(|| t.lookup(k as u32)).flatten();
                    match hit {
                        Some(v) if set_mac_dec_ttl(buf.as_mut_slice(), v) => {
                            out.tx.push(((v >> 48) as u32, buf));
                        }
                        _ => out.dropped.push(buf),
                    }
                }
            }
            Engine::Lines(kind, l) => l.process(*kind, in_port, batch, sc, out),
            Engine::Acl(_) => out.dropped.append(batch),
        }
    }
}

/// The lines of `t`'s `n` keys, published (value in action word 0, the
/// slot numbering the keys in table order).
fn lines_of(t: &ExactTable, n: usize) -> anyhow::Result<LinesRef> {
    use classifier::versioned::{Table, Versions};
    let mut versions = Versions::new();
    let mut table = Table::with_capacity(&versions, 1, n);
    for (slot, s) in t.slots.iter().filter(|s| s.key != EMPTY).enumerate() {
        let slot = u32::try_from(slot).context("too many rules for the lines")?;
        ensure!(
            table.insert(&[s.key], 1, slot, [s.val, 0]),
            "key {:#x} twice",
            s.key
        );
    }
    versions.publish();
    let view = table.view();
    Ok(LinesRef {
        table,
        view,
        versions: std::sync::Mutex::new(versions),
    })
}

impl LinesRef {
    /// [`Reference::process`] on the lines: keys hashed and their first
    /// candidate lines prefetched for the whole burst; then each looked up
    /// there, and the packets whose key was not there wait, their second
    /// line prefetched, for a last pass (`versioned::View::prefetch`).
    /// Packets of one flow take the same path, so they keep their order.
    #[inline]
    fn process(
        &self,
        kind: ExactKind,
        in_port: u32,
        batch: &mut Vec<PacketBuf>,
        sc: &mut RefScratch,
        out: &mut RefOutput,
    ) {
        use classifier::versioned::First;
        let r = sc.reader.get_or_insert_with(|| {
            self.versions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .reader()
        });
        if r.stale() {
            r.refresh();
        }
        sc.hashed.clear();
        for buf in batch.iter() {
            let k = exact_key(kind, in_port, buf.as_slice());
            let h = if k == EMPTY {
                0
            } else {
                self.view.prefetch(r, &[k])
            };
            sc.hashed.push((k, h));
        }
        let mut later = std::mem::take(&mut sc.later);
        for (buf, &(k, h)) in batch.drain(..).zip(&sc.hashed) {
            if k == EMPTY {
                out.dropped.push(buf);
                continue;
            }
            match self.view.lookup_first(r, &[k], h) {
                First::Hit(hit) => Self::forward(kind, r, &hit, buf, &mut sc.elsewhere, out),
                First::Absent => out.dropped.push(buf),
                First::Later => later.push((buf, k, h)),
            }
        }
        for (buf, k, h) in later.drain(..) {
            match self.view.lookup_hashed(r, &[k], h) {
                Some(hit) => Self::forward(kind, r, &hit, buf, &mut sc.elsewhere, out),
                None => out.dropped.push(buf),
            }
        }
        sc.later = later;
    }

    /// Counts a hit (in its line, or in `elsewhere` when another reader
    /// owns the line), applies its rewrite and queues the packet.
    #[inline(always)]
    fn forward(
        kind: ExactKind,
        r: &classifier::versioned::Reader,
        hit: &classifier::versioned::Hit<'_>,
        mut buf: PacketBuf,
        elsewhere: &mut Vec<(u64, u64)>,
        out: &mut RefOutput,
    ) {
        let len = buf.len() as u64;
        if !r.count(hit, 1, len) {
            let i = hit.slot as usize;
            if elsewhere.len() <= i {
                elsewhere.resize(i + 1, (0, 0));
            }
            if let Some(c) = elsewhere.get_mut(i) {
                c.0 += 1;
                c.1 += len;
            }
        }
        let v = hit.actions[0];
        rewrite_exact(kind, buf.as_mut_slice(), v & 0xffff_ffff_ffff);
        out.tx.push(((v >> 48) as u32, buf));
    }
}

/// The key of an exact-match scenario, or [`EMPTY`] when the packet has
/// not the shape the scenario's rules match.
#[inline(always)]
fn exact_key(kind: ExactKind, in_port: u32, p: &[u8]) -> u64 {
    let port = u64::from(in_port & 0xffff);
    match kind {
        // The rewrite needs the IPv4 TTL behind the tag.
        ExactKind::VlanToMpls => match (p.get(12..18), p.len() >= 34) {
            (Some(&[0x81, 0x00, a, b, 0x08, 0x00]), true) => {
                port << 12 | u64::from(u16::from_be_bytes([a, b]) & 0x0fff)
            }
            _ => EMPTY,
        },
        ExactKind::MplsToVlan => match p.get(12..18) {
            Some(&[0x88, 0x47, a, b, c, d]) => {
                port << 20 | u64::from(u32::from_be_bytes([a, b, c, d]) >> 12)
            }
            _ => EMPTY,
        },
        ExactKind::L2 => match p.get(0..6) {
            Some(&[a, b, c, d, e, f]) => u64::from_be_bytes([0, 0, a, b, c, d, e, f]),
            _ => EMPTY,
        },
    }
}

/// The scenario's actions on a packet whose key parsed (the length was
/// checked there).
#[inline(always)]
fn rewrite_exact(kind: ExactKind, p: &mut [u8], arg: u64) {
    match kind {
        // pop_vlan, push_mpls:0x8847, set mpls_label: the tag's 4 bytes
        // become the label stack entry (TC 0, bottom of stack, IPv4 TTL).
        ExactKind::VlanToMpls => {
            let ttl = p.get(26).copied().unwrap_or(0);
            let lse = ((arg as u32) & 0xf_ffff) << 12 | 1 << 8 | u32::from(ttl);
            if let Some(h) = p.get_mut(12..18) {
                h[..2].copy_from_slice(&0x8847u16.to_be_bytes());
                h[2..].copy_from_slice(&lse.to_be_bytes());
            }
        }
        // pop_mpls:0x0800, push_vlan:0x8100, set vlan_vid: the label's 4
        // bytes become the tag (PCP 0) and the inner EtherType.
        ExactKind::MplsToVlan => {
            if let Some(h) = p.get_mut(12..18) {
                let tci = (arg as u16) & 0x0fff;
                let [t0, t1] = tci.to_be_bytes();
                h.copy_from_slice(&[0x81, 0x00, t0, t1, 0x08, 0x00]);
            }
        }
        ExactKind::L2 => {}
    }
}

/// set_field eth_dst and dec_ttl with an incremental IPv4 checksum
/// update (RFC 1624, eqn. 3); false (drop) when the TTL is 0 or 1.
#[inline(always)]
fn set_mac_dec_ttl(p: &mut [u8], v: u64) -> bool {
    let Some(ip) = p.get_mut(14..34) else {
        return false;
    };
    let ttl = ip[8];
    if ttl <= 1 {
        return false;
    }
    let old = u16::from_be_bytes([ttl, ip[9]]);
    let new = old - 0x100;
    let hc = u16::from_be_bytes([ip[10], ip[11]]);
    let mut s = u32::from(!hc) + u32::from(!old) + u32::from(new);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    ip[8] = ttl - 1;
    ip[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    if let Some(d) = p.get_mut(0..6) {
        d.copy_from_slice(&v.to_be_bytes()[2..]);
    }
    true
}

/// Runs the reference over the pool for `seconds` (and until every worker
/// has counted a burst) on `workers` threads,
/// each walking the bursts as fulmar's workers do (refill recycled
/// buffers from the templates, untimed; process, timed; recycle,
/// untimed). Returns each worker's figures.
pub fn run(
    r: &Reference,
    pool: &Pool,
    workers: usize,
    burst: usize,
    seconds: f64,
) -> anyhow::Result<Vec<WorkerResult>> {
    let stop = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let counts: Vec<AtomicU64> = (0..workers).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (stop, measuring, count) = (&stop, &measuring, &counts[w]);
                s.spawn(move || worker(r, pool, w, workers, burst, stop, measuring, count))
            })
            .collect();
        measuring.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs_f64(seconds));
        // However busy the machine, every worker's figures cover at least
        // one burst (a worker that ended early is joined below).
        while !(counts.iter().all(|c| c.load(Ordering::Relaxed) > 0)
            || handles.iter().any(|h| h.is_finished()))
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        measuring.store(false, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        join_all(handles, "reference worker")
    })
}

#[allow(clippy::too_many_arguments)]
fn worker(
    r: &Reference,
    pool: &Pool,
    index: usize,
    workers: usize,
    burst: usize,
    stop: &AtomicBool,
    measuring: &AtomicBool,
    count: &AtomicU64,
) -> WorkerResult {
    let mut res = WorkerResult::default();
    let n_bursts = pool.bursts.len();
    if n_bursts == 0 {
        return res;
    }
    let mut sc = RefScratch::default();
    let mut out = RefOutput::default();
    out.tx.reserve(burst * 2);
    let mut free: Vec<PacketBuf> = (0..burst * 2)
        .map(|_| PacketBuf::from_slice(pool.template(0)))
        .collect();
    let mut batch: Vec<PacketBuf> = Vec::with_capacity(burst);
    let mut b = index * n_bursts / workers.max(1);
    let lookups_only = r.lookups_only();
    let mut t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let span = pool.bursts[b];
        let mut allocations = 0;
        let (t1, t2, tx) = if lookups_only {
            let t1 = Instant::now();
            let hits = r.lookup_span(span.start, span.len, &mut sc);
            (t1, Instant::now(), hits)
        } else {
            allocations = pool.fill(span, &mut free, &mut batch);
            let t1 = Instant::now();
            r.process(span.in_port, &mut batch, &mut sc, &mut out);
            let t2 = Instant::now();
            (t1, t2, out.tx.len() as u64)
        };
        let dropped = out.dropped.len() as u64;
        for (_, buf) in out.tx.drain(..) {
            if free.len() < burst * 4 {
                free.push(buf);
            }
        }
        for buf in out.dropped.drain(..) {
            if free.len() < burst * 4 {
                free.push(buf);
            }
        }
        b += 1;
        if b == n_bursts {
            b = 0;
        }
        let t3 = Instant::now();
        if measuring.load(Ordering::Relaxed) {
            res.record(span.len, tx, dropped, allocations, [t0, t1, t2, t3]);
            count.store(res.packets, Ordering::Relaxed);
        }
        t0 = t3;
    }
    res
}

/// Sends `samples` templates (all when there are fewer) through the
/// reference one by one and compares the output port and bytes (acl:
/// the port) with the generator's expectation; returns the number
/// checked and a description of each mismatch.
pub fn check(
    r: &Reference,
    w: &Workload,
    pool: &Pool,
    samples: usize,
    seed: u64,
) -> (usize, Vec<String>) {
    let mut rng = crate::frame::Rng::new(seed ^ 0x4ef);
    let n = pool.flow_of.len();
    let samples = samples.min(n);
    let mut bad = Vec::new();
    let mut sc = RefScratch::default();
    let mut out = RefOutput::default();
    let mut batch = Vec::with_capacity(1);
    for s in 0..samples {
        let k = if n <= samples {
            s
        } else {
            rng.below(n as u64) as usize
        };
        let (port, frame) = sample_flow(w, pool, k);
        let want = w
            .expected(port, &frame)
            .map(|e| (e.port, e.frame.build(pool.size)));
        let got: Option<(u32, Vec<u8>)> = if r.lookups_only() {
            r.acl_port(k).map(|p| (p, pool.template(k).to_vec()))
        } else {
            out.tx.clear();
            out.dropped.clear();
            batch.push(PacketBuf::from_slice(pool.template(k)));
            r.process(port, &mut batch, &mut sc, &mut out);
            out.tx.pop().map(|(p, b)| (p, b.as_slice().to_vec()))
        };
        if got != want {
            bad.push(format!(
                "reference, flow {} (in_port {port}): expected {:?}, got {:?}",
                pool.flow_of[k],
                want.map(|(p, b)| (p, hex(&b))),
                got.map(|(p, b)| (p, hex(&b)))
            ));
        }
    }
    (samples, bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Frame, Tag};

    fn every_template_forwards_as_expected(s: Scenario, rules: usize, flows: usize) {
        let w = Workload::new(s, rules, 7).unwrap();
        let pool = Pool::new(&w, flows, rules, 64, 32, 7);
        let r = Reference::new(&w, &pool).unwrap();
        forwards_as_expected(&r, &w, &pool, s, flows);
    }

    fn forwards_as_expected(r: &Reference, w: &Workload, pool: &Pool, s: Scenario, flows: usize) {
        let (n, bad) = check(r, w, pool, flows, 1);
        assert_eq!(n, flows);
        assert!(
            bad.is_empty(),
            "{s:?}: {} bad, first {:?}",
            bad.len(),
            bad.first()
        );
        // Whole bursts too, as the timed loop runs them.
        let mut sc = RefScratch::default();
        let mut out = RefOutput::default();
        let mut batch = Vec::new();
        for span in &pool.bursts {
            if r.lookups_only() {
                assert_eq!(
                    r.lookup_span(span.start, span.len, &mut sc),
                    span.len as u64
                );
                continue;
            }
            batch.extend(
                (span.start..span.start + span.len)
                    .map(|k| PacketBuf::from_slice(pool.template(k))),
            );
            out.tx.clear();
            r.process(span.in_port, &mut batch, &mut sc, &mut out);
            assert!(batch.is_empty() && out.dropped.is_empty());
            // The lines loop sends what its last pass finished after the
            // rest of the burst: compare the burst's packets as a set.
            let mut got: Vec<(u32, Vec<u8>)> = out
                .tx
                .iter()
                .map(|(port, buf)| (*port, buf.as_slice().to_vec()))
                .collect();
            let mut want: Vec<(u32, Vec<u8>)> = (span.start..span.start + span.len)
                .map(|k| {
                    let (p, f) = sample_flow(w, pool, k);
                    let e = w.expected(p, &f).unwrap();
                    (e.port, e.frame.build(64))
                })
                .collect();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn the_reference_forwards_and_rewrites_every_scenario_correctly() {
        for s in Scenario::ALL.into_iter().filter(|s| s.has_reference()) {
            every_template_forwards_as_expected(s, 300, 450);
        }
        // Several ingress ports (4094 VLANs each) and a table with
        // collisions.
        every_template_forwards_as_expected(Scenario::GatewayVlan2Mpls, 9000, 9000);
    }

    /// `--reference-lines` forwards as the reference does, and counts
    /// every hit in the lines its reader owns; the other scenarios are
    /// refused with a reason.
    #[test]
    fn the_lines_reference_forwards_like_the_reference_and_counts_in_its_lines() {
        for s in Scenario::ALL.into_iter().filter(|s| s.has_reference()) {
            let w = Workload::new(s, 9000, 7).unwrap();
            let pool = Pool::new(&w, 9000, 9000, 64, 32, 7);
            let r = match Reference::with_lines(&w, &pool) {
                Ok(r) => r,
                Err(e) => {
                    assert!(matches!(s, Scenario::L3 | Scenario::Acl), "{s:?}: {e}");
                    assert!(e.to_string().contains("exact-match"), "{e}");
                    continue;
                }
            };
            let Engine::Lines(kind, l) = &r.engine else {
                panic!("{s:?}: not the lines engine");
            };
            // One reader forwards every template once and owns every
            // line it hits: the lines count each packet once.
            let (mut sc, mut out, mut batch) =
                (RefScratch::default(), RefOutput::default(), vec![]);
            let (mut keys, mut sent) = (vec![], 0u64);
            for span in &pool.bursts {
                for k in span.start..span.start + span.len {
                    let t = pool.template(k);
                    keys.push(exact_key(*kind, span.in_port, t));
                    sent += t.len() as u64;
                    batch.push(PacketBuf::from_slice(t));
                }
                r.process(span.in_port, &mut batch, &mut sc, &mut out);
            }
            assert_eq!((out.tx.len(), out.dropped.len()), (keys.len(), 0), "{s:?}");
            assert!(sc.elsewhere.is_empty(), "{s:?}");
            keys.sort_unstable();
            keys.dedup();
            let v = l.versions.lock().unwrap().version();
            let (mut packets, mut bytes) = (0, 0);
            for k in keys {
                let e = l.table.lookup_at(&[k], v).expect("every key has a line");
                let (p, b) = l.table.counters(&[k], e.slot);
                packets += p;
                bytes += b;
            }
            assert_eq!((packets, bytes), (out.tx.len() as u64, sent), "{s:?}");
            drop(sc);
            forwards_as_expected(&r, &w, &pool, s, 9000);
        }
    }

    #[test]
    fn the_rewrites_give_the_expected_bytes() {
        let f = Frame {
            eth_dst: 0x0200_0000_0001,
            eth_src: 0x0200_0000_0002,
            tag: Tag::Vlan(77),
            ip_src: 0x0a00_0001,
            ip_dst: 0xc0a8_0102,
            ttl: 33,
            proto: 17,
            sport: 1000,
            dport: 53,
        };
        let mut p = f.build(64);
        rewrite_exact(ExactKind::VlanToMpls, &mut p, 1234);
        let want = Frame {
            tag: Tag::Mpls {
                label: 1234,
                ttl: 33,
            },
            ..f
        };
        assert_eq!(p, want.build(64));
        rewrite_exact(ExactKind::MplsToVlan, &mut p, 77);
        assert_eq!(p, f.build(64));
        let plain = Frame {
            tag: Tag::None,
            ..f
        };
        for ttl in [2, 64, 255] {
            let mut p = Frame { ttl, ..plain }.build(64);
            assert!(set_mac_dec_ttl(&mut p, 3 << 48 | 0x0a00_0000_0042));
            let want = Frame {
                ttl: ttl - 1,
                eth_dst: 0x0a00_0000_0042,
                ..plain
            };
            assert_eq!(p, want.build(64), "ttl {ttl}");
        }
        let mut p = Frame { ttl: 1, ..plain }.build(64);
        assert!(!set_mac_dec_ttl(&mut p, 0));
    }

    #[test]
    fn unknown_keys_and_other_shapes_are_dropped() {
        let w = Workload::new(Scenario::GatewayMpls2Vlan, 100, 1).unwrap();
        let pool = Pool::new(&w, 100, 100, 64, 32, 1);
        let r = Reference::new(&w, &pool).unwrap();
        let (_, f) = w.flow(5, 0);
        let mut sc = RefScratch::default();
        let mut out = RefOutput::default();
        let unknown = Frame {
            tag: Tag::Mpls {
                label: 5000,
                ttl: 64,
            },
            ..f
        };
        let untagged = Frame {
            tag: Tag::None,
            ..f
        };
        let mut batch = vec![
            PacketBuf::from_slice(&unknown.build(64)),
            PacketBuf::from_slice(&untagged.build(64)),
            PacketBuf::from_slice(&f.build(64)),
            PacketBuf::from_slice(&[0u8; 10]),
        ];
        r.process(1, &mut batch, &mut sc, &mut out);
        assert_eq!(out.tx.len(), 1);
        assert_eq!(out.dropped.len(), 3);
        // The rule matches in_port 1 only.
        out.tx.clear();
        batch.push(PacketBuf::from_slice(&f.build(64)));
        r.process(2, &mut batch, &mut sc, &mut out);
        assert!(out.tx.is_empty());
    }

    #[test]
    fn dir24_takes_the_longest_prefix() {
        let t = Dir24::new(vec![
            (0x0a00_0000, 8, 1, 0xa),
            (0x0a01_0200, 24, 2, 0xb),
            (0x0a01_0280, 25, 3, 0xc),
            (0x0a01_0284, 30, 4, 0xd),
            (0x0a01_0000, 16, 5, 0xe),
        ])
        .unwrap();
        let port = |ip| t.lookup(ip).map(|v| (v >> 48) as u32);
        assert_eq!(port(0x0a09_0909), Some(1));
        assert_eq!(port(0x0a01_0909), Some(5));
        assert_eq!(port(0x0a01_0201), Some(2));
        assert_eq!(port(0x0a01_0281), Some(3));
        assert_eq!(port(0x0a01_0286), Some(4));
        assert_eq!(port(0x0a01_0288), Some(3));
        assert_eq!(port(0x0b00_0000), None);
        assert_eq!(port(0x0a01_0300), Some(5));
    }
}
