//! Lookup benchmark for the four fast-path scenarios: builds each table
//! from synthetic, seeded rules, then times lookups of pre-parsed
//! `FlowKey`s drawn uniformly over the rules (one thread), one at a time
//! and in bursts of 32, plus the bulk insert rate and the resident memory
//! the table added (VmRSS before and after the build).
//!
//! ```text
//! cargo run --release -p classifier --example lookup_bench [scenario...]
//! scenarios: gw100k gw1m mpls1m l3 acl cache (default: all)
//! ```
//!
//! - gw100k / gw1m: one table, exact in_port (1..=256) + VLAN_VID.
//! - mpls1m: one table, exact MPLS label.
//! - l3: 100K IPv4 prefixes (lengths 8..=32, mostly /24 as in BGP
//!   tables), priority = prefix length, ETH_TYPE=0x0800.
//! - acl: 10K 5-tuple rules shaped like ClassBench acl1 (source prefix
//!   mostly /32 or any, destination mostly /32..=/24, TCP/UDP/any,
//!   destination port exact, a range prefix or any), priorities in rule
//!   order.
//! - cache: the gateway 100K table behind a FlowCache whose capacity
//!   holds the working set (hit path), and one that does not.

use classifier::{Deps, FieldMatch, FlowCache, Hit, Rule, Table};
use packet::flow_key::{field, FlowKey};
use std::hint::black_box;
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The figure in kB that `file` (a /proc/self file) gives on its line
/// starting with `key`, or 0.
fn proc_kib(file: &str, key: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn rss_kib() -> u64 {
    proc_kib("/proc/self/status", "VmRSS:")
}

fn huge_kib() -> u64 {
    proc_kib("/proc/self/smaps_rollup", "AnonHugePages:")
}

fn fm(f: u8, value: u128, mask: u128) -> FieldMatch {
    FieldMatch {
        field: f,
        value,
        mask,
    }
}

fn ip_mask(len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        (u32::MAX << (32 - len)).into()
    }
}

/// Packets in flight in the timing loop (pre-parsed keys, cycled).
const PACKETS: usize = 1 << 18;
const LOOKUPS: usize = 20_000_000;
const MPLS_N: usize = 1_000_000;

fn build(name: &str, rules: Vec<Rule>) -> Table {
    let n = rules.len();
    let before = rss_kib();
    let t0 = Instant::now();
    let mut t = Table::new();
    t.insert_many(rules).expect("rules");
    let dt = t0.elapsed().as_secs_f64();
    let after = rss_kib();
    println!(
        "{name}: {n} rules, shape {:?}, insert {:.0} rules/s ({:.3} s), table resident +{} MiB (VmRSS {} MiB, {} MiB in huge pages)",
        t.shape(),
        n as f64 / dt,
        dt,
        after.saturating_sub(before) / 1024,
        after / 1024,
        huge_kib() / 1024
    );
    t
}

fn time_lookups(name: &str, t: &Table, keys: &[FlowKey]) {
    // BENCH_KEYS=n cycles over the first n keys only (a hot working set:
    // separates compute from memory latency).
    let n = std::env::var("BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(keys.len(), |n| n.clamp(32, keys.len()));
    let keys = &keys[..n];
    // One at a time.
    let t0 = Instant::now();
    let mut hits = 0u64;
    for i in 0..LOOKUPS {
        if let Some(h) = t.lookup(black_box(&keys[i % keys.len()])) {
            hits = hits.wrapping_add(h.id);
        }
    }
    let single = LOOKUPS as f64 / t0.elapsed().as_secs_f64();
    // Bursts of 32.
    let mut out = [None::<Hit>; 32];
    let t0 = Instant::now();
    let mut done = 0;
    let mut miss = 0u64;
    while done < LOOKUPS {
        let start = done % keys.len();
        let end = (start + 32).min(keys.len());
        t.lookup_burst(black_box(&keys[start..end]), &mut out);
        for o in &out[..end - start] {
            match o {
                Some(h) => hits = hits.wrapping_add(h.id),
                None => miss += 1,
            }
        }
        done += end - start;
    }
    let burst = done as f64 / t0.elapsed().as_secs_f64();
    black_box(hits);
    println!(
        "{name}: lookup {:.1} Mpps one-by-one, {:.1} Mpps burst-32 (misses {miss})",
        single / 1e6,
        burst / 1e6
    );
}

/// Lookups with the keys of each burst written into one 32-key buffer
/// (hot in L1, as a datapath's freshly parsed burst is) from a compact
/// list of rule indexes; `fill` sets a template key's fields for a rule
/// index. The fill is timed too, so this is a lower bound on lookups/s.
fn time_hot(name: &str, t: &Table, n: usize, fill: impl Fn(&mut FlowKey, usize)) {
    let mut r = Rng(99);
    let idx: Vec<u32> = (0..(1 << 22)).map(|_| r.below(n as u64) as u32).collect();
    let mut buf = [FlowKey::default(); 32];
    for k in &mut buf {
        fill(k, 0);
    }
    let mut out = [None::<Hit>; 32];
    let mut hits = 0u64;
    let mut miss = 0u64;
    let t0 = Instant::now();
    for c in idx.chunks_exact(32).cycle().take(LOOKUPS / 32) {
        for (k, &i) in buf.iter_mut().zip(c) {
            fill(k, i as usize);
        }
        t.lookup_burst(black_box(&buf), &mut out);
        for o in &out {
            match o {
                Some(h) => hits = hits.wrapping_add(h.id),
                None => miss += 1,
            }
        }
    }
    black_box(hits);
    println!(
        "{name}: lookup {:.1} Mpps burst-32 with keys filled into a hot burst buffer (misses {miss})",
        (LOOKUPS / 32 * 32) as f64 / t0.elapsed().as_secs_f64() / 1e6
    );
}

fn gw_fill(k: &mut FlowKey, i: usize) {
    k.set_metadata_fields((i % 256) as u32 + 1, 0, 0, 0);
    k.present |= (1 << field::VLAN_VID) | (1 << field::ETH_TYPE);
    k.vlan_vid = 0x1000 | (i / 256) as u16;
    k.eth_type = 0x0800;
}

/// A key from port 1 with EtherType `eth_type` and `fields` present (their
/// values are left zero).
fn key_on_port1(eth_type: u16, fields: &[u8]) -> FlowKey {
    let mut k = FlowKey::default();
    k.set_metadata_fields(1, 0, 0, 0);
    k.eth_type = eth_type;
    k.present |= 1 << field::ETH_TYPE;
    for f in fields {
        k.present |= 1 << f;
    }
    k
}

fn mpls_fill(k: &mut FlowKey, i: usize) {
    k.set_metadata_fields(1, 0, 0, 0);
    k.present |= (1 << field::ETH_TYPE) | (1 << field::MPLS_LABEL);
    k.eth_type = 0x8847;
    k.mpls_label = i as u32 + 16;
}

fn gateway(n: usize, seed: u64) -> (Vec<Rule>, Vec<FlowKey>) {
    let mut r = Rng(seed);
    let rules: Vec<Rule> = (0..n)
        .map(|i| {
            // Distinct (port, vid) pairs: 256 ports x up to 4096 VLANs.
            let port = (i % 256) as u128 + 1;
            let vid = (i / 256) as u128;
            Rule {
                id: i as u64,
                priority: 100,
                fields: vec![
                    fm(field::IN_PORT, port, 0xffff_ffff),
                    fm(field::VLAN_VID, 0x1000 | vid, 0x1fff),
                ],
            }
        })
        .collect();
    let keys = (0..PACKETS)
        .map(|_| {
            let i = r.below(n as u64) as usize;
            let mut k = FlowKey::default();
            k.set_metadata_fields((i % 256) as u32 + 1, 0, 0, 0);
            k.present |= (1 << field::VLAN_VID) | (1 << field::ETH_TYPE);
            k.vlan_vid = 0x1000 | (i / 256) as u16;
            k.eth_type = 0x0800;
            k
        })
        .collect();
    (rules, keys)
}

fn mpls(n: usize, seed: u64) -> (Vec<Rule>, Vec<FlowKey>) {
    let mut r = Rng(seed);
    let rules: Vec<Rule> = (0..n)
        .map(|i| Rule {
            id: i as u64,
            priority: 100,
            fields: vec![
                fm(field::ETH_TYPE, 0x8847, 0xffff),
                fm(field::MPLS_LABEL, (i + 16) as u128, 0xfffff),
            ],
        })
        .collect();
    let keys = (0..PACKETS)
        .map(|_| {
            let i = r.below(n as u64) as u32;
            let mut k = key_on_port1(
                0x8847,
                &[field::MPLS_LABEL, field::MPLS_TC, field::MPLS_BOS],
            );
            k.mpls_label = i + 16;
            k
        })
        .collect();
    (rules, keys)
}

fn l3(n: usize, seed: u64) -> (Vec<Rule>, Vec<FlowKey>) {
    let mut r = Rng(seed);
    let mut seen = std::collections::HashSet::new();
    let mut prefixes = Vec::with_capacity(n);
    while prefixes.len() < n {
        let x = r.below(100);
        // Roughly the BGP table: ~60% /24, the rest spread over 8..=32.
        let len = match x {
            0..=59 => 24,
            60..=69 => 22,
            70..=76 => 23,
            77..=82 => 20,
            83..=87 => 21,
            88..=91 => 16,
            92..=94 => 19,
            95..=96 => 28,
            97 => 32,
            98 => 12,
            _ => 8 + r.below(25) as u32,
        };
        let a = (r.next() as u32) & (u32::MAX << (32 - len));
        if seen.insert((a, len)) {
            prefixes.push((a, len));
        }
    }
    let rules = prefixes
        .iter()
        .enumerate()
        .map(|(i, &(a, len))| Rule {
            id: i as u64,
            priority: len as u16,
            fields: vec![
                fm(field::ETH_TYPE, 0x800, 0xffff),
                fm(field::IPV4_DST, a.into(), ip_mask(len)),
            ],
        })
        .collect();
    let keys = (0..PACKETS)
        .map(|_| {
            let (a, len) = prefixes[r.below(n as u64) as usize];
            let host = if len == 32 {
                0
            } else {
                (r.next() as u32) & (u32::MAX >> len)
            };
            let mut k = FlowKey::default();
            k.present |= (1 << field::ETH_TYPE) | (1 << field::IPV4_DST) | (1 << field::IPV4_SRC);
            k.eth_type = 0x800;
            k.ipv4_dst = a | host;
            k.ipv4_src = r.next() as u32;
            k
        })
        .collect();
    (rules, keys)
}

/// ClassBench-acl1-shaped 5-tuple rules.
fn acl(n: usize, seed: u64) -> (Vec<Rule>, Vec<FlowKey>) {
    let mut r = Rng(seed);
    let pick = |r: &mut Rng, xs: &[(u32, u64)]| {
        let tot: u64 = xs.iter().map(|x| x.1).sum();
        let mut v = r.below(tot);
        for &(x, w) in xs {
            if v < w {
                return x;
            }
            v -= w;
        }
        xs[0].0
    };
    // A few hundred source and destination networks shared by many rules,
    // as in acl1 where rules cluster on a small set of addresses.
    let srcs: Vec<u32> = (0..300).map(|_| r.next() as u32).collect();
    let dsts: Vec<u32> = (0..2000).map(|_| r.next() as u32).collect();
    let mut rules = Vec::with_capacity(n);
    for i in 0..n {
        let sl = pick(&mut r, &[(32, 45), (0, 30), (24, 10), (16, 10), (8, 5)]);
        let dl = pick(&mut r, &[(32, 55), (24, 20), (28, 8), (30, 7), (16, 10)]);
        let proto = pick(&mut r, &[(6, 60), (17, 25), (0, 15)]);
        let s = srcs[r.below(srcs.len() as u64) as usize];
        let d = dsts[r.below(dsts.len() as u64) as usize];
        let mut f = vec![fm(field::ETH_TYPE, 0x800, 0xffff)];
        if sl > 0 {
            f.push(fm(field::IPV4_SRC, (s as u128) & ip_mask(sl), ip_mask(sl)));
        }
        f.push(fm(field::IPV4_DST, (d as u128) & ip_mask(dl), ip_mask(dl)));
        if proto != 0 {
            f.push(fm(field::IP_PROTO, proto.into(), 0xff));
            let (sf, df) = if proto == 6 {
                (field::TCP_SRC, field::TCP_DST)
            } else {
                (field::UDP_SRC, field::UDP_DST)
            };
            // Destination port: exact (well-known), 1024-65535 expanded
            // to its largest prefix, or any.
            match pick(&mut r, &[(0, 55), (1, 15), (2, 30)]) {
                0 => f.push(fm(
                    df,
                    [80u128, 443, 53, 22, 25, 110, 143, 8080][r.below(8) as usize],
                    0xffff,
                )),
                1 => f.push(fm(df, 0x8000, 0x8000)),
                _ => {}
            }
            if r.below(10) == 0 {
                f.push(fm(sf, 0x0400 * r.below(4) as u128, 0xfc00));
            }
        }
        rules.push(Rule {
            id: i as u64,
            priority: (n - i) as u16,
            fields: f,
        });
    }
    let keys = (0..PACKETS)
        .map(|_| {
            let rl = &rules[r.below(n as u64) as usize];
            let mut k = key_on_port1(0x800, &[field::IPV4_SRC, field::IPV4_DST, field::IP_PROTO]);
            k.ipv4_src = r.next() as u32;
            k.ipv4_dst = r.next() as u32;
            k.ip_proto = [6u8, 17][r.below(2) as usize];
            k.tp_src = r.next() as u16;
            k.tp_dst = r.next() as u16;
            for f in &rl.fields {
                let m = f.mask;
                let v = f.value;
                match f.field {
                    field::IPV4_SRC => k.ipv4_src = ((k.ipv4_src as u128 & !m) | v) as u32,
                    field::IPV4_DST => k.ipv4_dst = ((k.ipv4_dst as u128 & !m) | v) as u32,
                    field::IP_PROTO => k.ip_proto = v as u8,
                    field::TCP_SRC | field::UDP_SRC => {
                        k.tp_src = ((k.tp_src as u128 & !m) | v) as u16
                    }
                    field::TCP_DST | field::UDP_DST => {
                        k.tp_dst = ((k.tp_dst as u128 & !m) | v) as u16
                    }
                    _ => {}
                }
            }
            k.present |= match k.ip_proto {
                6 => (1 << field::TCP_SRC) | (1 << field::TCP_DST),
                _ => (1 << field::UDP_SRC) | (1 << field::UDP_DST),
            };
            k
        })
        .collect();
    (rules, keys)
}

fn cache_bench(t: &Table, keys: &[FlowKey], cap: usize) {
    let mut c: FlowCache<Option<Hit>> = FlowCache::new(cap);
    let gens = [t.generation()];
    let t0 = Instant::now();
    let mut acc = 0u64;
    for i in 0..LOOKUPS {
        let k = &keys[i % keys.len()];
        let v = match c.get(k, &gens) {
            Some(v) => *v,
            None => {
                let v = t.lookup(k);
                let mut d = Deps::new();
                d.push(0, gens[0]);
                c.insert(*k, d, v, &gens);
                v
            }
        };
        acc = acc.wrapping_add(v.map_or(0, |h| h.id));
    }
    black_box(acc);
    let s = c.stats();
    println!(
        "cache cap {}: {:.1} Mpps through the cache, hits {} misses {}",
        c.capacity(),
        LOOKUPS as f64 / t0.elapsed().as_secs_f64() / 1e6,
        s.hits,
        s.misses
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let want = |s: &str| args.is_empty() || args.iter().any(|a| a == s);
    println!(
        "FlowKey is {} bytes; {PACKETS} pre-parsed keys cycled, {LOOKUPS} lookups per figure",
        std::mem::size_of::<FlowKey>()
    );
    if want("gw100k") {
        let (rules, keys) = gateway(100_000, 1);
        let t = build("gateway 100K in_port+vlan", rules);
        time_lookups("gateway 100K", &t, &keys);
        time_hot("gateway 100K", &t, 100_000, gw_fill);
    }
    if want("gw1m") {
        let (rules, keys) = gateway(1_000_000, 2);
        let t = build("gateway 1M in_port+vlan", rules);
        time_lookups("gateway 1M", &t, &keys);
        time_hot("gateway 1M", &t, 1_000_000, gw_fill);
    }
    if want("mpls1m") {
        let (rules, keys) = mpls(MPLS_N, 3);
        let t = build("gateway 1M mpls", rules);
        time_lookups("gateway 1M mpls", &t, &keys);
        time_hot("gateway 1M mpls", &t, MPLS_N, mpls_fill);
    }
    if want("l3") {
        let (rules, keys) = l3(100_000, 4);
        let t = build("l3 100K prefixes", rules);
        time_lookups("l3 100K", &t, &keys);
    }
    if want("acl") {
        let (rules, keys) = acl(10_000, 5);
        let t = build("acl 10K", rules);
        time_lookups("acl 10K", &t, &keys);
    }
    if want("cache") {
        let (rules, keys) = gateway(100_000, 6);
        let t = build("gateway 100K (cache)", rules);
        cache_bench(&t, &keys[..4096], 8192);
        cache_bench(&t, &keys, 8192);
    }
}
