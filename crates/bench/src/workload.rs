//! The benchmark scenarios: the rules each installs (as flow text), the
//! packet flows sent through them, and — for the smoke check — what a
//! correct switch must do with each flow, worked out from the generator's
//! own record of its rules (never by asking the pipeline).
//!
//! Every rule and flow is a pure function of the scenario, the rule count,
//! the seed and its index, so a run can be repeated exactly and a sampled
//! flow can be rebuilt without storing all of them.

use crate::frame::{Frame, Rng, Tag};
use anyhow::{bail, ensure};
use clap::ValueEnum;
use std::collections::{HashMap, HashSet};

/// VLAN ids a port can carry (1..=4094).
const VIDS: usize = 4094;
/// First MPLS label used (0..=15 are reserved).
const FIRST_LABEL: usize = 16;
/// Output ports of the single-ingress scenarios: 2..=15; the ACL default
/// rule sends to [`DEFAULT_PORT`].
const OUT_PORTS: u32 = 14;
/// Where the ACL's lowest-priority catch-all rule sends packets.
const DEFAULT_PORT: u32 = 16;
/// Access ports of the faucet scenario, in VLANs of [`FAUCET_VLAN_PORTS`]
/// ports each.
const FAUCET_PORTS: u32 = 16;
/// Ports per VLAN in the faucet scenario (even: hosts `2k` and `2k+1` sit
/// on neighbouring ports of one VLAN).
const FAUCET_VLAN_PORTS: u32 = 4;
/// The faucet scenario's first VLAN id.
const FAUCET_FIRST_VID: u32 = 100;
/// Largest ACL: every rule has its own priority.
pub const MAX_ACL_RULES: usize = 65_000;
/// Largest gateway: one MPLS label per rule.
pub const MAX_GATEWAY_RULES: usize = (1 << 20) - FIRST_LABEL;

/// A benchmark scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Data center to WAN (seed 001): table 0 keyed on in_port and VLAN
    /// id; pop_vlan, push_mpls, set mpls_label, output.
    #[value(name = "gateway-vlan2mpls")]
    GatewayVlan2Mpls,
    /// WAN to data center: keyed on the MPLS label; pop_mpls, push_vlan,
    /// set vlan_vid, output.
    #[value(name = "gateway-mpls2vlan")]
    GatewayMpls2Vlan,
    /// Exact destination MAC to an output port.
    #[value(name = "l2")]
    L2,
    /// IPv4 destination prefixes of mixed lengths (priority = prefix
    /// length, so the longest wins); set eth_dst, dec_ttl, output.
    #[value(name = "l3")]
    L3,
    /// 5-tuple wildcard rules shaped like ClassBench acl1 (source and
    /// destination prefixes, TCP/UDP destination port exact or any,
    /// protocol TCP/UDP/any), distinct priorities, and a default rule.
    #[value(name = "acl")]
    Acl,
    /// Shaped like the pipeline Faucet installs on an L2 switch: table 0
    /// tags each access port's packets with its VLAN, table 1 (eth_src)
    /// holds the learned sources, table 2 (eth_dst) the learned
    /// destinations (pop_vlan, output), table 3 floods a VLAN's unknown
    /// destinations. A rule is a host: its eth_dst entry, with its eth_src
    /// entry among the rules installed first; every flow is a unicast
    /// between two learned hosts of one VLAN.
    #[value(name = "faucet")]
    Faucet,
}

impl Scenario {
    /// Every scenario.
    #[cfg(test)]
    pub const ALL: [Scenario; 6] = [
        Scenario::GatewayVlan2Mpls,
        Scenario::GatewayMpls2Vlan,
        Scenario::L2,
        Scenario::L3,
        Scenario::Acl,
        Scenario::Faucet,
    ];

    /// Whether `--reference` has a hand-written loop for it (the faucet
    /// pipeline has none: the issue asks for it beside the single-table
    /// figures, not as a ratio).
    pub fn has_reference(self) -> bool {
        self != Scenario::Faucet
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::GatewayVlan2Mpls => "gateway-vlan2mpls",
            Scenario::GatewayMpls2Vlan => "gateway-mpls2vlan",
            Scenario::L2 => "l2",
            Scenario::L3 => "l3",
            Scenario::Acl => "acl",
            Scenario::Faucet => "faucet",
        }
    }
}

/// One generated ACL rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AclRule {
    /// Source prefix (host bits zero) and its length (0: any).
    pub src: (u32, u8),
    /// Destination prefix and its length.
    pub dst: (u32, u8),
    /// 6, 17, or 0 for any.
    pub proto: u8,
    /// Exact destination port, or any.
    pub dport: Option<u16>,
    /// Flow priority (distinct per rule).
    pub priority: u16,
    /// Output port.
    pub out: u32,
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

fn ip(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

fn mac(m: u64) -> String {
    let b = m.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// A packet as it should leave the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// Output port.
    pub port: u32,
    /// The frame's fields after the rule's rewrites.
    pub frame: Frame,
}

/// A rule as the hand-written reference loop (`--reference`) holds it:
/// its key and what it does, from the generator's record of its rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefRule {
    /// An exact key (packed as the reference parses it: gateway
    /// `in_port << 12 | vid` or `in_port << 20 | label`, l2 the MAC) to
    /// an output port and the rewrite's argument (the MPLS label or the
    /// VLAN id to set; 0 for l2).
    Exact {
        /// The packed key.
        key: u64,
        /// Output port.
        port: u32,
        /// The rewrite's argument.
        arg: u64,
    },
    /// An IPv4 prefix to an output port and the next-hop MAC to set.
    Prefix {
        /// The prefix (host bits zero).
        addr: u32,
        /// Its length.
        len: u8,
        /// Output port.
        port: u32,
        /// Next-hop MAC.
        mac: u64,
    },
    /// A wildcard (acl) rule: its output port (its match is its flow text).
    Wildcard {
        /// Output port.
        port: u32,
    },
}

/// A scenario's rules: generated once, then read by index.
pub struct Workload {
    /// The scenario.
    pub scenario: Scenario,
    /// Number of rules generated (not counting the ACL default rule).
    pub rules: usize,
    /// Rules `0..installed` are in the switch; [`Self::expected`] only
    /// considers them (the rest are for measuring later flow-mods).
    pub installed: usize,
    seed: u64,
    /// Ports 1..=n_ports exist.
    pub n_ports: u32,
    l3: Vec<(u32, u8)>,
    l3_index: HashMap<(u8, u32), usize>,
    acl: Vec<AclRule>,
}

/// A distinct 40-bit host part for MAC number `i` (an odd multiplier is a
/// bijection modulo 2^40), under the locally administered prefix 02.
fn l2_mac(i: usize) -> u64 {
    0x0200_0000_0000 | ((i as u64).wrapping_mul(0x009e_3779_b97f) & 0xff_ffff_ffff)
}

/// Access port of faucet host `h` (neighbouring hosts on neighbouring
/// ports, so host `h ^ 1` shares the VLAN and not the port).
fn faucet_port(h: usize) -> u32 {
    1 + (h % FAUCET_PORTS as usize) as u32
}

/// VLAN id of an access port of the faucet scenario.
fn faucet_vid(port: u32) -> u32 {
    FAUCET_FIRST_VID + (port - 1) / FAUCET_VLAN_PORTS
}

/// The next-hop MAC of L3 rule `i`.
fn l3_mac(i: usize) -> u64 {
    0x0a00_0000_0000 | (i as u64 & 0xffff_ffff)
}

/// Mixes a seed and an index into a per-item seed.
fn mix(seed: u64, i: u64) -> u64 {
    Rng::new(seed ^ i.wrapping_mul(0xd6e8_feb8_6659_fd93)).next_u64()
}

impl Workload {
    /// Generates `rules` rules of `scenario` from `seed`.
    pub fn new(scenario: Scenario, rules: usize, seed: u64) -> anyhow::Result<Workload> {
        ensure!(rules > 0, "--rules must be at least 1");
        let mut w = Workload {
            scenario,
            rules,
            installed: rules,
            seed,
            n_ports: 1 + OUT_PORTS + 1,
            l3: Vec::new(),
            l3_index: HashMap::new(),
            acl: Vec::new(),
        };
        match scenario {
            Scenario::GatewayVlan2Mpls | Scenario::GatewayMpls2Vlan => {
                if rules > MAX_GATEWAY_RULES {
                    bail!("the gateway has one MPLS label per rule: at most {MAX_GATEWAY_RULES} rules");
                }
                if scenario == Scenario::GatewayVlan2Mpls {
                    // Data-center ports 1..=P (4094 VLANs each), then 4 WAN ports.
                    w.n_ports = rules.div_ceil(VIDS) as u32 + 4;
                }
            }
            Scenario::L2 => {
                if rules > 1 << 40 {
                    bail!("l2 has at most 2^40 distinct MACs");
                }
            }
            Scenario::L3 => w.gen_l3()?,
            Scenario::Acl => w.gen_acl()?,
            Scenario::Faucet => {
                if rules > 1 << 39 {
                    bail!("faucet has at most 2^39 distinct hosts");
                }
                w.n_ports = FAUCET_PORTS;
            }
        }
        Ok(w)
    }

    fn gen_l3(&mut self) -> anyhow::Result<()> {
        // Shaped like a routing table: mostly /24, some /16../23 and
        // /25../32, a few short prefixes.
        let mut rng = Rng::new(self.seed ^ 0x13);
        let mut seen = HashSet::with_capacity(self.rules);
        let mut tries = 0usize;
        while self.l3.len() < self.rules {
            tries += 1;
            if tries > self.rules * 20 + 1000 {
                bail!("cannot draw {} distinct prefixes", self.rules);
            }
            let p = rng.below(100);
            let len: u8 = match p {
                0..=54 => 24,
                55..=79 => 16 + rng.below(8) as u8,
                80..=94 => 25 + rng.below(8) as u8,
                _ => 8 + rng.below(8) as u8,
            };
            let addr = rng.next_u32() & mask(len);
            if seen.insert((len, addr)) {
                self.l3_index.insert((len, addr), self.l3.len());
                self.l3.push((addr, len));
            }
        }
        Ok(())
    }

    fn gen_acl(&mut self) -> anyhow::Result<()> {
        if self.rules > MAX_ACL_RULES {
            bail!("acl gives every rule its own priority: at most {MAX_ACL_RULES} rules");
        }
        let mut rng = Rng::new(self.seed ^ 0xac1);
        // Addresses cluster in a few networks, as in ClassBench seeds.
        let nets: Vec<u32> = (0..(self.rules / 8).max(16))
            .map(|_| rng.next_u32() & 0xffff_0000)
            .collect();
        const COMMON: [u16; 10] = [80, 443, 53, 22, 25, 123, 161, 3306, 8080, 5060];
        let n = self.rules;
        for i in 0..n {
            let prefix = |rng: &mut Rng, lens: &[(u64, u8)]| {
                let p = rng.below(100);
                let mut acc = 0;
                let mut len = 32;
                for &(w, l) in lens {
                    acc += w;
                    if p < acc {
                        len = l;
                        break;
                    }
                }
                let net = nets[rng.below(nets.len() as u64) as usize];
                ((net | (rng.next_u32() & 0xffff)) & mask(len), len)
            };
            let src = prefix(&mut rng, &[(20, 0), (10, 16), (25, 24), (15, 28), (30, 32)]);
            let dst = prefix(&mut rng, &[(5, 0), (15, 20), (25, 24), (15, 30), (40, 32)]);
            let proto = match rng.below(100) {
                0..=54 => 6,
                55..=84 => 17,
                _ => 0,
            };
            let dport = (proto != 0 && rng.percent(70)).then(|| {
                if rng.percent(50) {
                    COMMON[rng.below(COMMON.len() as u64) as usize]
                } else {
                    1 + rng.below(65535) as u16
                }
            });
            self.acl.push(AclRule {
                src,
                dst,
                proto,
                dport,
                priority: (MAX_ACL_RULES + 1 - i) as u16,
                out: 2 + (i as u32 % OUT_PORTS),
            });
        }
        Ok(())
    }

    /// Output port of single-ingress rule `i`.
    fn out_port(i: usize) -> u32 {
        2 + (i as u32 % OUT_PORTS)
    }

    /// Flow text of rule `i` (`i < rules`).
    pub fn rule_text(&self, i: usize) -> String {
        match self.scenario {
            Scenario::GatewayVlan2Mpls => {
                let dc_ports = self.n_ports - 4;
                format!(
                    "priority=100,in_port={},dl_vlan={},actions=pop_vlan,push_mpls:0x8847,set_field:{}->mpls_label,output:{}",
                    1 + i / VIDS,
                    1 + i % VIDS,
                    FIRST_LABEL + i,
                    dc_ports + 1 + (i as u32 % 4)
                )
            }
            Scenario::GatewayMpls2Vlan => format!(
                "priority=100,in_port=1,mpls,mpls_label={},actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:{}->vlan_vid,output:{}",
                FIRST_LABEL + i,
                0x1000 | (1 + i % VIDS),
                Self::out_port(i)
            ),
            Scenario::L2 => format!(
                "priority=100,dl_dst={},actions=output:{}",
                mac(l2_mac(i)),
                Self::out_port(i)
            ),
            Scenario::L3 => {
                let (addr, len) = self.l3[i];
                format!(
                    "priority={len},ip,nw_dst={}/{len},actions=set_field:{}->eth_dst,dec_ttl,output:{}",
                    ip(addr),
                    mac(l3_mac(i)),
                    Self::out_port(i)
                )
            }
            Scenario::Acl => {
                let r = &self.acl[i];
                let mut t = format!("priority={},", r.priority);
                t.push_str(match r.proto {
                    6 => "tcp",
                    17 => "udp",
                    _ => "ip",
                });
                for (name, (a, l)) in [("nw_src", r.src), ("nw_dst", r.dst)] {
                    if l > 0 {
                        t.push_str(&format!(",{name}={}/{l}", ip(a)));
                    }
                }
                if let Some(p) = r.dport {
                    t.push_str(&format!(",tp_dst={p}"));
                }
                t.push_str(&format!(",actions=output:{}", r.out));
                t
            }
            Scenario::Faucet => {
                let port = faucet_port(i);
                format!(
                    "table=2,priority=9000,dl_vlan={},dl_dst={},actions=pop_vlan,output:{port}",
                    faucet_vid(port),
                    mac(l2_mac(i))
                )
            }
        }
    }

    /// Rule `i` (`i < rules`) as the reference loop holds it; for the
    /// acl, `i == rules` is the default rule of [`Self::extra_rules`].
    pub fn reference_rule(&self, i: usize) -> RefRule {
        match self.scenario {
            Scenario::GatewayVlan2Mpls => RefRule::Exact {
                key: ((1 + i / VIDS) as u64) << 12 | (1 + i % VIDS) as u64,
                port: self.n_ports - 4 + 1 + (i as u32 % 4),
                arg: (FIRST_LABEL + i) as u64,
            },
            Scenario::GatewayMpls2Vlan => RefRule::Exact {
                key: 1 << 20 | (FIRST_LABEL + i) as u64,
                port: Self::out_port(i),
                arg: (1 + i % VIDS) as u64,
            },
            Scenario::L2 => RefRule::Exact {
                key: l2_mac(i),
                port: Self::out_port(i),
                arg: 0,
            },
            Scenario::L3 => {
                let (addr, len) = self.l3[i];
                RefRule::Prefix {
                    addr,
                    len,
                    port: Self::out_port(i),
                    mac: l3_mac(i),
                }
            }
            Scenario::Acl => RefRule::Wildcard {
                port: self.acl.get(i).map_or(DEFAULT_PORT, |r| r.out),
            },
            // Its eth_dst entry; no reference loop is built for it.
            Scenario::Faucet => RefRule::Exact {
                key: l2_mac(i),
                port: faucet_port(i),
                arg: 0,
            },
        }
    }

    /// Rules installed besides the numbered ones: the ACL's default; the
    /// faucet scenario's port, miss and flood entries and the eth_src
    /// entry of every host (rounded up to an even count, so that each
    /// flow's source, host `i ^ 1`, is learned).
    pub fn extra_rules(&self) -> Vec<String> {
        match self.scenario {
            Scenario::Acl => vec![format!("priority=0,ip,actions=output:{DEFAULT_PORT}")],
            Scenario::Faucet => {
                let hosts = self.rules.next_multiple_of(2);
                let mut v = Vec::with_capacity(hosts + 2 * FAUCET_PORTS as usize + 4);
                for port in 1..=FAUCET_PORTS {
                    let vid = faucet_vid(port);
                    v.push(format!(
                        "table=0,priority=9000,in_port={port},vlan_tci=0x0000/0x1fff,actions=push_vlan:0x8100,set_field:{}->vlan_vid,goto_table:1",
                        0x1000 | vid
                    ));
                    let first = (port - 1) / FAUCET_VLAN_PORTS * FAUCET_VLAN_PORTS + 1;
                    let outs: Vec<String> = (first..first + FAUCET_VLAN_PORTS)
                        .filter(|&q| q != port)
                        .map(|q| format!("output:{q}"))
                        .collect();
                    v.push(format!(
                        "table=3,priority=9000,in_port={port},dl_vlan={vid},actions=pop_vlan,{}",
                        outs.join(",")
                    ));
                }
                // Faucet sends an unknown source to the controller as well;
                // the bench has none, so the miss only goes on.
                v.push("table=0,priority=0,actions=drop".into());
                v.push("table=1,priority=0,actions=goto_table:2".into());
                v.push("table=2,priority=0,actions=goto_table:3".into());
                v.push("table=3,priority=0,actions=drop".into());
                for h in 0..hosts {
                    let port = faucet_port(h);
                    v.push(format!(
                        "table=1,priority=9000,in_port={port},dl_vlan={},dl_src={},actions=goto_table:2",
                        faucet_vid(port),
                        mac(l2_mac(h))
                    ));
                }
                v
            }
            _ => Vec::new(),
        }
    }

    /// The rule flow `j` of `flows` is drawn from, and its variant (flows
    /// beyond the rule count reuse rules with other addresses and ports).
    /// Flows spread evenly over the first `over` rules.
    pub fn flow_rule(j: usize, flows: usize, over: usize) -> (usize, u64) {
        if flows <= over {
            ((j as u128 * over as u128 / flows as u128) as usize, 0)
        } else {
            (j % over, (j / over) as u64)
        }
    }

    /// Ingress port and frame of a packet hitting rule `i`, variant `v`.
    pub fn flow(&self, i: usize, v: u64) -> (u32, Frame) {
        let mut rng = Rng::new(mix(self.seed, (i as u64) << 20 ^ v));
        let mut f = Frame {
            eth_dst: 0x0200_00ff_0000 | (i as u64 & 0xffff),
            eth_src: 0x0200_0100_0000 | (v & 0xff_ffff),
            tag: Tag::None,
            ip_src: 0x0a00_0000 | (v as u32 & 0x00ff_ffff),
            ip_dst: 0xc0a8_0000 | (i as u32 & 0xffff),
            ttl: 64,
            proto: 17,
            sport: 1024 + (v % 60_000) as u16,
            dport: 4789,
        };
        let mut in_port = 1;
        match self.scenario {
            Scenario::GatewayVlan2Mpls => {
                in_port = 1 + (i / VIDS) as u32;
                f.tag = Tag::Vlan((1 + i % VIDS) as u16);
            }
            Scenario::GatewayMpls2Vlan => {
                f.tag = Tag::Mpls {
                    label: (FIRST_LABEL + i) as u32,
                    ttl: 64,
                };
            }
            Scenario::L2 => f.eth_dst = l2_mac(i),
            Scenario::L3 => {
                let (addr, len) = self.l3[i];
                f.ip_dst = addr | (rng.next_u32() & !mask(len));
            }
            Scenario::Faucet => {
                // Host i ^ 1 (learned, same VLAN, the next port) to host i.
                in_port = faucet_port(i ^ 1);
                f.eth_src = l2_mac(i ^ 1);
                f.eth_dst = l2_mac(i);
            }
            Scenario::Acl => {
                let r = &self.acl[i];
                f.ip_src = r.src.0 | (rng.next_u32() & !mask(r.src.1));
                f.ip_dst = r.dst.0 | (rng.next_u32() & !mask(r.dst.1));
                f.proto = match r.proto {
                    0 if rng.percent(50) => 6,
                    0 => 17,
                    p => p,
                };
                f.sport = 1024 + rng.below(64_512) as u16;
                f.dport = r.dport.unwrap_or_else(|| rng.next_u32() as u16);
            }
        }
        (in_port, f)
    }

    /// What a correct switch does with `frame` arriving on `in_port`,
    /// from the generator's record of the rules: the gateway and L2 rules
    /// by construction (each flow's key is its rule's alone), L3 by a
    /// longest-prefix search of the generated prefixes, the ACL by a scan
    /// of the generated rules in priority order. `None`: no rule matches
    /// (the packet is dropped).
    pub fn expected(&self, in_port: u32, frame: &Frame) -> Option<Expected> {
        let mut out = *frame;
        match self.scenario {
            Scenario::GatewayVlan2Mpls => {
                let Tag::Vlan(vid) = frame.tag else {
                    return None;
                };
                let i =
                    (in_port as usize).checked_sub(1)? * VIDS + usize::from(vid).checked_sub(1)?;
                if i >= self.installed || usize::from(vid) > VIDS {
                    return None;
                }
                out.tag = Tag::Mpls {
                    label: (FIRST_LABEL + i) as u32,
                    ttl: frame.ttl,
                };
                Some(Expected {
                    port: self.n_ports - 4 + 1 + (i as u32 % 4),
                    frame: out,
                })
            }
            Scenario::GatewayMpls2Vlan => {
                let Tag::Mpls { label, .. } = frame.tag else {
                    return None;
                };
                let i = (label as usize).checked_sub(FIRST_LABEL)?;
                if i >= self.installed || in_port != 1 {
                    return None;
                }
                out.tag = Tag::Vlan((1 + i % VIDS) as u16);
                Some(Expected {
                    port: Self::out_port(i),
                    frame: out,
                })
            }
            Scenario::L2 => {
                let i = (0..self.installed).find(|&i| l2_mac(i) == frame.eth_dst)?;
                Some(Expected {
                    port: Self::out_port(i),
                    frame: out,
                })
            }
            Scenario::L3 => {
                let i = (0..=32u8).rev().find_map(|len| {
                    self.l3_index
                        .get(&(len, frame.ip_dst & mask(len)))
                        .filter(|&&i| i < self.installed)
                })?;
                out.eth_dst = l3_mac(*i);
                if frame.ttl <= 1 {
                    return None;
                }
                out.ttl = frame.ttl - 1;
                Some(Expected {
                    port: Self::out_port(*i),
                    frame: out,
                })
            }
            Scenario::Acl => {
                let hit = self.acl[..self.installed.min(self.acl.len())]
                    .iter()
                    .filter(|r| {
                        frame.ip_src & mask(r.src.1) == r.src.0
                            && frame.ip_dst & mask(r.dst.1) == r.dst.0
                            && (r.proto == 0 || r.proto == frame.proto)
                            && r.dport.is_none_or(|p| p == frame.dport)
                    })
                    .max_by_key(|r| r.priority);
                Some(Expected {
                    port: hit.map_or(DEFAULT_PORT, |r| r.out),
                    frame: out,
                })
            }
            Scenario::Faucet => {
                // Only untagged frames from an access port are tagged;
                // the destination must be a learned host of that port's
                // VLAN on another port. Anything else is flooded or
                // dropped, which flows drawn over installed rules never
                // are (a flood would show here as a mismatch).
                if frame.tag != Tag::None || in_port == 0 || in_port > FAUCET_PORTS {
                    return None;
                }
                let i = (0..self.installed).find(|&i| l2_mac(i) == frame.eth_dst)?;
                let port = faucet_port(i);
                if faucet_vid(port) != faucet_vid(in_port) || port == in_port {
                    return None;
                }
                Some(Expected { port, frame: out })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_flows_hit_their_rule() {
        for s in Scenario::ALL {
            let w = Workload::new(s, 300, 9).unwrap();
            for i in 0..w.rules {
                let t = w.rule_text(i);
                flowtext::parse_flow(&t).unwrap_or_else(|e| panic!("{t}: {e}"));
            }
            for t in w.extra_rules() {
                flowtext::parse_flow(&t).unwrap();
            }
            for i in [0, 1, 150, 299] {
                let (port, f) = w.flow(i, 0);
                let e = w.expected(port, &f).expect("every flow hits a rule");
                assert_ne!(e.port, port, "{s:?}: output differs from the ingress");
                assert!(e.port >= 1 && e.port <= w.n_ports);
            }
        }
    }

    #[test]
    fn flows_spread_over_rules() {
        assert_eq!(Workload::flow_rule(0, 10, 100), (0, 0));
        assert_eq!(Workload::flow_rule(9, 10, 100), (90, 0));
        assert_eq!(Workload::flow_rule(250, 300, 100), (50, 2));
        let mut hit = [false; 100];
        for j in 0..100 {
            hit[Workload::flow_rule(j, 100, 100).0] = true;
        }
        assert!(hit.iter().all(|&h| h));
    }

    #[test]
    fn l3_longest_prefix_wins_in_the_reference() {
        let mut w = Workload::new(Scenario::L3, 1, 1).unwrap();
        w.l3 = vec![(0x0a00_0000, 8), (0x0a01_0000, 16)];
        w.l3_index =
            w.l3.iter()
                .enumerate()
                .map(|(i, &(a, l))| ((l, a), i))
                .collect();
        w.rules = 2;
        w.installed = 2;
        let (_, mut f) = w.flow(0, 0);
        f.ip_dst = 0x0a01_0203;
        assert_eq!(w.expected(1, &f).unwrap().frame.eth_dst, l3_mac(1));
        f.ip_dst = 0x0a02_0203;
        let e = w.expected(1, &f).unwrap();
        assert_eq!((e.frame.eth_dst, e.frame.ttl), (l3_mac(0), 63));
        f.ip_dst = 0x0b00_0000;
        assert_eq!(w.expected(1, &f), None);
    }

    #[test]
    fn acl_reference_takes_the_highest_priority_and_the_default() {
        let w = Workload::new(Scenario::Acl, 200, 3).unwrap();
        let (_, mut f) = w.flow(120, 0);
        let e = w.expected(1, &f).unwrap();
        // Rule 120 matches, so the winner has at least its priority.
        let winner = w
            .acl
            .iter()
            .find(|r| r.out == e.port && r.priority >= w.acl[120].priority);
        assert!(winner.is_some());
        f.ip_src = 0;
        f.ip_dst = 0;
        f.proto = 1;
        let any_src_dst_proto = w
            .acl
            .iter()
            .any(|r| r.src.1 == 0 && r.dst.1 == 0 && r.proto == 0);
        if !any_src_dst_proto {
            assert_eq!(w.expected(1, &f).unwrap().port, DEFAULT_PORT);
        }
    }

    #[test]
    fn limits_are_errors() {
        assert!(Workload::new(Scenario::Acl, MAX_ACL_RULES + 1, 1).is_err());
        assert!(Workload::new(Scenario::GatewayVlan2Mpls, MAX_GATEWAY_RULES + 1, 1).is_err());
        assert!(Workload::new(Scenario::L2, 0, 1).is_err());
    }
}
