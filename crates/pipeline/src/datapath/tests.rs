//! In-memory pipeline tests: flows, groups and meters written in flow text,
//! packets built byte by byte, outputs checked by parsing them again.

use super::*;
use crate::model::flow_entry::FlowId;
use crate::tables::groups::GroupsConfig;
use crate::tables::meters::MetersConfig;
use crate::tables::TablesConfig;
use crate::{SwitchState, Time};
use ofp::action::OFPCML_NO_BUFFER;
use ofp::consts::{port_no, OFP_NO_BUFFER};
use ofp::error::BadActionCode;
use ofp::error::BadRequestCode;
use ofp::packet_in::packet_in_reason;
use ofp::port::{port_config, port_state};
use ofp::{Action, OfpError, PacketOut};
use ofp::{Match, Oxm, OxmField, OxmValue};
use packet::buffer::PacketBuf;
use packet::fixup::{fill_checksums, verify_checksums};
use packet::flow_key::FlowKey;

const T0: Time = Time(1_000_000_000);
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&DST);
    v.extend_from_slice(&SRC);
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn ipv4(proto: u8, ttl: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut v = vec![0x45, 0];
    v.extend_from_slice(&total.to_be_bytes());
    v.extend_from_slice(&[0, 1, 0, 0, ttl, proto, 0, 0]);
    v.extend_from_slice(&src);
    v.extend_from_slice(&dst);
    v.extend_from_slice(payload);
    v
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    v.extend_from_slice(&[0xab, 0xcd]); // placeholder, not "no checksum"
    v.extend_from_slice(payload);
    v
}

fn tcp(sport: u16, dport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x20, 0, 0, 0, 0, 0]);
    v
}

/// An Ethernet/IPv4/UDP frame 10.0.0.1:1000 -> 10.0.0.2:2000.
fn udp4(ttl: u8) -> Vec<u8> {
    udp4_ports(ttl, 1000, 2000)
}

fn udp4_ports(ttl: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut p = eth(
        0x0800,
        &ipv4(
            17,
            ttl,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            &udp(sport, dport, b"hello world"),
        ),
    );
    fill_checksums(&mut p);
    p
}

fn tcp4() -> Vec<u8> {
    let mut p = eth(
        0x0800,
        &ipv4(6, 64, [10, 0, 0, 1], [10, 0, 0, 2], &tcp(80, 8080)),
    );
    fill_checksums(&mut p);
    p
}

fn state(flows: &str, groups: &str, meters: &str) -> SwitchState {
    let mut s = SwitchState::new(
        TablesConfig {
            n_tables: 4,
            ..TablesConfig::default()
        },
        GroupsConfig::default(),
        MetersConfig::default(),
    );
    for m in flowtext::parse_meter_file(meters).unwrap() {
        s.meter_mod(&m, T0).unwrap();
    }
    for g in flowtext::parse_group_file(groups).unwrap() {
        s.group_mod(&g, T0).unwrap();
    }
    for f in flowtext::parse_flow_file(flows).unwrap() {
        if let Err(e) = s.flow_mod(&f, T0) {
            panic!("{}: {e:?}", flowtext::format_flow(&f));
        }
    }
    s
}

fn dp_full(flows: &str, groups: &str, meters: &str) -> Datapath {
    Datapath::new(
        state(flows, groups, meters),
        Ports::with_range(8),
        DatapathConfig::default(),
    )
}

fn dp(flows: &str) -> Datapath {
    dp_full(flows, "", "")
}

/// A datapath with `flows` and `meters` (no groups).
fn dp_metered(flows: &str, meters: &str) -> Datapath {
    dp_full(flows, "", meters)
}

/// Applies flow text `text` to both datapaths: an add, or with a
/// "delete " prefix a `delete` command.
fn change_both(a: &mut Datapath, b: &mut Datapath, text: &str, delete: ofp::FlowModCommand) {
    let (cmd, text) = match text.strip_prefix("delete ") {
        Some(t) => (delete, t),
        None => (ofp::FlowModCommand::Add, text),
    };
    for mut fm in flowtext::parse_flow_file(text).unwrap() {
        fm.command = cmd;
        a.state.flow_mod(&fm, T0).unwrap();
        b.state.flow_mod(&fm, T0).unwrap();
    }
}

fn send(d: &mut Datapath, in_port: u32, p: &[u8]) -> BurstOutput {
    d.process_burst(in_port, &mut vec![PacketBuf::from_slice(p)], T0)
}

fn send_at(d: &mut Datapath, in_port: u32, p: &[u8], now: Time) -> BurstOutput {
    d.process_burst(in_port, &mut vec![PacketBuf::from_slice(p)], now)
}

fn out_ports(o: &BurstOutput) -> Vec<u32> {
    o.tx.ports().to_vec()
}

fn key_of(o: &BurstOutput, i: usize) -> FlowKey {
    FlowKey::parse(o.tx.pkts()[i].as_slice())
}

// ---- matching, tables, instructions ---------------------------------

/// Many more flows than cache entries: after one window the cache is
/// bypassed; one repeated flow keeps it on. Forwarding is the same.
#[test]
fn a_cache_that_misses_is_bypassed() {
    // Two masks: tuple-space search, a table the cache is used for.
    let flows = "table=0,priority=1,udp,actions=output:2\n\
                 table=0,priority=2,tcp,tcp_dst=80,actions=output:3";
    let mut d = dp(flows);
    d.set_flow_cache(64);
    let total = 2 * CACHE_WINDOW as usize;
    let mut sent = 0;
    for b in 0..total / 32 {
        let mut burst: Vec<PacketBuf> = (0..32)
            .map(|i| PacketBuf::from_slice(&udp4_ports(64, (b * 32 + i) as u16, 53)))
            .collect();
        sent += d.process_burst(1, &mut burst, T0).tx.len();
    }
    assert_eq!(sent, total);
    let s = d.cache_stats();
    assert!(d.cache_bypassed() >= (total as u64) / 2 - 32, "{s:?}");
    assert_eq!(s.hits + s.misses + d.cache_bypassed(), total as u64);

    let mut d = dp(flows);
    for _ in 0..total / 32 {
        let mut burst: Vec<PacketBuf> = (0..32).map(|_| PacketBuf::from_slice(&udp4(64))).collect();
        assert_eq!(d.process_burst(1, &mut burst, T0).tx.len(), 32);
    }
    assert_eq!(d.cache_bypassed(), 0);
    // The first burst is looked up before any of it is cached.
    assert_eq!(d.cache_stats().hits, total as u64 - 32);
}

/// A table answered by one probe (one mask: one hash; IPv4 routes: the
/// route array) is looked up directly, never through the cache, and
/// forwards the same.
#[test]
fn one_probe_tables_skip_the_cache() {
    for flows in [
        "table=0,priority=1,udp,actions=output:2",
        "table=0,priority=24,ip,nw_dst=10.0.0.0/24,actions=output:2\n\
         table=0,priority=8,ip,nw_dst=10.0.0.0/8,actions=output:3",
    ] {
        let mut d = dp(flows);
        for _ in 0..4 {
            let mut burst: Vec<PacketBuf> =
                (0..32).map(|_| PacketBuf::from_slice(&udp4(64))).collect();
            assert_eq!(out_ports(&d.process_burst(1, &mut burst, T0)), vec![2; 32]);
        }
        let s = d.cache_stats();
        assert_eq!((s.hits, s.misses, d.cache_bypassed()), (0, 0, 0), "{flows}");
        assert_eq!(d.counters().tables[&0].matched, 128);
    }
}

#[test]
fn no_match_without_miss_entry_is_a_counted_drop() {
    let mut d = dp("priority=10,in_port=2,actions=output:3");
    let o = send(&mut d, 1, &udp4(64));
    assert!(o.tx.is_empty() && o.packet_ins.is_empty());
    assert_eq!(o.drops.no_match, 1);
    assert_eq!(d.counters().drops.no_match, 1);
    assert_eq!(d.counters().tables[&0].lookups, 1);
    assert_eq!(d.counters().tables[&0].matched, 0);
}

#[test]
fn highest_priority_wins_and_ties_are_deterministic() {
    let mut d = dp("priority=5,ip,actions=output:2\n\
         priority=9,udp,udp_dst=2000,actions=output:3\n\
         priority=9,ip,nw_src=10.0.0.1,actions=output:4\n\
         priority=1,actions=output:5");
    assert_eq!(out_ports(&send(&mut d, 1, &udp4(64))), vec![3]);
    // TCP misses the udp entry; the other priority 9 entry wins.
    assert_eq!(out_ports(&send(&mut d, 1, &tcp4())), vec![4]);
    let arp = eth(0x0806, &[0u8; 28]);
    assert_eq!(out_ports(&send(&mut d, 1, &arp)), vec![5]);
}

#[test]
fn masked_fields_and_absent_fields() {
    let mut d = dp("priority=5,ip,nw_dst=10.0.0.0/24,actions=output:2\n\
         priority=6,tcp,tp_dst=2000,actions=output:3\n\
         priority=7,dl_dst=02:00:00:00:00:00/ff:ff:ff:ff:ff:00,vlan_vid=0x1000/0x1000,dl_vlan_pcp=3,actions=output:4");
    // tcp_dst absent from UDP, vlan_pcp absent from untagged: nw_dst wins.
    assert_eq!(out_ports(&send(&mut d, 1, &udp4(64))), vec![2]);
}

#[test]
fn goto_table_and_masked_write_metadata() {
    let mut d = dp(
        "table=0,priority=1,actions=write_metadata:0xab00/0xff00,goto_table:1\n\
         table=1,priority=1,metadata=0xab00/0xff00,actions=write_metadata:0x5/0xf,goto_table:3\n\
         table=3,priority=2,metadata=0xab05,actions=output:2\n\
         table=3,priority=1,actions=output:3",
    );
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(out_ports(&o), vec![2]);
    let c = d.counters();
    assert_eq!(c.tables[&0].lookups, 1);
    assert_eq!(c.tables[&1].matched, 1);
    assert!(!c.tables.contains_key(&2), "table 2 skipped");
    assert_eq!(c.tables[&3].matched, 1);
}

#[test]
fn apply_actions_change_what_later_tables_match() {
    let mut d = dp(
        "table=0,priority=1,actions=push_vlan:0x8100,set_field:4101->vlan_vid,goto_table:1\n\
         table=1,priority=2,dl_vlan=5,ip,actions=set_field:10.1.1.1->ipv4_src,goto_table:2\n\
         table=1,priority=1,actions=output:7\n\
         table=2,priority=2,ip,nw_src=10.1.1.1,actions=output:2\n\
         table=2,priority=1,actions=output:7",
    );
    let k = udp_leaves_by(&mut d, 2);
    assert_eq!(k.vlan_vid, 0x1005);
    assert_eq!(k.ipv4_src, 0x0a01_0101);
}

/// Sends a UDP frame from port 1 through `d`, checks that it leaves by
/// `port` alone with its checksums right; its key there.
fn udp_leaves_by(d: &mut Datapath, port: u32) -> FlowKey {
    let o = send(d, 1, &udp4(64));
    assert_eq!(out_ports(&o), vec![port]);
    verify_checksums(o.tx.pkts()[0].as_slice()).unwrap();
    key_of(&o, 0)
}

#[test]
fn apply_outputs_see_the_packet_as_it_is_then() {
    let mut d = dp("priority=1,ip,actions=output:2,set_field:10.9.9.9->ipv4_dst,output:3");
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(out_ports(&o), vec![2, 3]);
    assert_eq!(key_of(&o, 0).ipv4_dst, 0x0a00_0002);
    assert_eq!(key_of(&o, 1).ipv4_dst, 0x0a09_0909);
}

// ---- action set ------------------------------------------------------

#[test]
fn action_set_runs_at_the_end_in_spec_order() {
    // Written out of order across two tables; the set pushes the VLAN
    // before setting its VID, decrements the TTL, then outputs.
    let mut d = dp("table=0,priority=1,ip,actions=write_actions(output:4,set_field:4099->vlan_vid,push_vlan:0x8100),goto_table:1\n\
         table=1,priority=1,ip,actions=write_actions(dec_ttl,output:2)");
    // Port 2 alone: the later write replaced output:4.
    let k = udp_leaves_by(&mut d, 2);
    assert_eq!(k.vlan_vid, 0x1003);
    assert_eq!(k.ip_ttl, 63);
}

#[test]
fn clear_actions_empties_the_set_and_group_beats_output() {
    let mut d = dp_full(
        "table=0,priority=1,actions=write_actions(output:4),goto_table:1\n\
         table=1,priority=1,actions=clear_actions,write_actions(group:1,output:5)",
        "group_id=1,type=indirect,bucket=output:3",
        "",
    );
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(out_ports(&o), vec![3]);
}

#[test]
fn empty_action_set_is_counted_as_no_output() {
    let mut d = dp("priority=1,actions=drop");
    let o = send(&mut d, 1, &udp4(64));
    assert!(o.tx.is_empty());
    assert_eq!(o.drops.no_output, 1);
}

// ---- outputs -----------------------------------------------------------

#[test]
fn output_to_ingress_port_needs_in_port() {
    let mut d = dp("priority=1,actions=output:1,output:2,output:IN_PORT");
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(out_ports(&o), vec![2, 1]);
}

#[test]
fn all_and_flood_skip_ingress_down_nofwd_and_blocked() {
    let mut d = dp("priority=2,in_port=1,actions=ALL\npriority=2,in_port=2,actions=FLOOD");
    d.ports = Ports::with_range(6);
    d.ports.set(
        3,
        PortInfo {
            config: port_config::PORT_DOWN,
            state: 0,
        },
    );
    d.ports.set(
        4,
        PortInfo {
            config: port_config::NO_FWD,
            state: 0,
        },
    );
    d.ports.set(
        5,
        PortInfo {
            config: 0,
            state: port_state::BLOCKED,
        },
    );
    assert_eq!(out_ports(&send(&mut d, 1, &udp4(64))), vec![2, 5, 6]);
    assert_eq!(out_ports(&send(&mut d, 2, &udp4(64))), vec![1, 6]);
}

#[test]
fn output_to_a_down_port_is_a_counted_drop_and_local_works() {
    let mut d = dp("priority=1,actions=output:3,output:9,LOCAL");
    d.ports.set(
        3,
        PortInfo {
            config: 0,
            state: port_state::LINK_DOWN,
        },
    );
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(out_ports(&o), vec![port_no::LOCAL]);
    assert_eq!(o.drops.port_down, 2);
    assert_eq!(d.counters().ports[&3].tx_dropped, 1);
}

#[test]
fn output_table_outside_a_packet_out_is_refused_at_install() {
    let mut s = state("", "", "");
    let fm = flowtext::parse_flow("priority=1,actions=output:TABLE").unwrap();
    assert_eq!(
        s.flow_mod(&fm, T0),
        Err(OfpError::BadAction(BadActionCode::BadOutPort))
    );
}

/// A frame from `src` to `dst`, tagged with `vid` when given.
fn l2(dst: [u8; 6], src: [u8; 6], vid: Option<u16>) -> Vec<u8> {
    let mut f = eth(0x0800, &[0x45; 46]);
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    if let Some(v) = vid {
        f.splice(12..12, [0x81, 0x00, (0xa0 | (v >> 8)) as u8, v as u8]);
    }
    f
}

/// (port, VID of the frame as it leaves) for each transmission.
fn outs(o: &BurstOutput) -> Vec<(u32, Option<u16>)> {
    o.tx.iter()
        .map(|(port, packet)| (port, crate::normal::vid_of(packet.as_slice())))
        .collect()
}

const HA: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const HB: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
const BC: [u8; 6] = [0xff; 6];

#[test]
fn normal_learns_floods_and_forwards_beside_other_flows() {
    let mut d = dp("priority=10,ip,nw_dst=10.0.0.9,actions=drop\npriority=0,actions=NORMAL");
    // Unknown destination: flooded to every other port.
    let o = send(&mut d, 1, &l2(HB, HA, None));
    assert_eq!(o.tx.ports().to_vec(), (2..=8).collect::<Vec<_>>());
    // B answers from 3: A is known on 1, and now B on 3.
    assert_eq!(outs(&send(&mut d, 3, &l2(HA, HB, None))), vec![(1, None)]);
    assert_eq!(outs(&send(&mut d, 1, &l2(HB, HA, None))), vec![(3, None)]);
    // Broadcast floods; the frame is left as it came.
    let o = send(&mut d, 3, &l2(BC, HB, None));
    assert_eq!(o.tx.len(), 7);
    assert!(o
        .tx
        .iter()
        .all(|(_, packet)| packet.as_slice() == l2(BC, HB, None).as_slice()));
    // A destination on the input port is not sent back.
    let o = send(&mut d, 1, &l2(HA, [2, 0, 0, 0, 0, 0xc], None));
    assert!(o.tx.is_empty());
    assert_eq!(o.drops.normal_same_port, 1);
    // Reserved 802.1D destinations are not forwarded.
    let o = send(&mut d, 1, &l2([1, 0x80, 0xc2, 0, 0, 0], HA, None));
    assert_eq!((o.tx.len(), o.drops.normal_reserved), (0, 1));
    // The higher-priority flow still drops what it matches.
    let mut ip = udp4(64);
    ip[30..34].copy_from_slice(&[10, 0, 0, 9]);
    let o = send(&mut d, 1, &ip);
    assert!(o.tx.is_empty());
    let fdb = d.config.normal.entries(T0);
    assert_eq!(
        fdb.iter()
            .map(|e| (e.port, e.vlan, e.mac))
            .collect::<Vec<_>>(),
        vec![(1, 0, HA), (1, 0, [2, 0, 0, 0, 0, 0xc]), (3, 0, HB)]
    );
}

#[test]
fn normal_keeps_vlans_apart_and_tags_by_port_mode() {
    use crate::normal::{PortVlan, VlanMode};
    let mut d = dp("priority=0,actions=NORMAL");
    // 1, 2: access VLAN 10; 3: access VLAN 20; 4: trunk of 10 and 20;
    // 5: native-untagged 10 trunking all; 6..8 unplugged.
    d.ports.set_vlan(1, PortVlan::access(10));
    d.ports.set_vlan(2, PortVlan::access(10));
    d.ports.set_vlan(3, PortVlan::access(20));
    d.ports
        .set_vlan(4, PortVlan::new(None, None, &[10, 20]).unwrap());
    d.ports.set_vlan(
        5,
        PortVlan::new(Some(VlanMode::NativeUntagged), Some(10), &[]).unwrap(),
    );
    for p in 6..=8 {
        d.ports.remove(p);
    }
    // An untagged broadcast on access 10 reaches 2 (untagged), the trunk
    // (tagged 10) and 5 (untagged: its native VLAN); never VLAN 20's 3.
    let o = send(&mut d, 1, &l2(BC, HA, None));
    assert_eq!(outs(&o), vec![(2, None), (4, Some(10)), (5, None)]);
    // Tagged 20 from the trunk reaches 3 untagged and 5 tagged.
    let o = send(&mut d, 4, &l2(BC, HB, Some(20)));
    assert_eq!(outs(&o), vec![(3, None), (5, Some(20))]);
    // B is learnt in VLAN 20 only: from VLAN 10 it is unknown (flooded
    // in VLAN 10), from VLAN 20 it goes to the trunk, tagged.
    let o = send(&mut d, 1, &l2(HB, HA, None));
    assert_eq!(outs(&o), vec![(2, None), (4, Some(10)), (5, None)]);
    let o = send(&mut d, 3, &l2(HB, [2, 0, 0, 0, 0, 0xc], None));
    assert_eq!(outs(&o), vec![(4, Some(20))]);
    // A tagged frame on an access port, and a VLAN the trunk does not
    // carry, are dropped and counted.
    let o = send(&mut d, 1, &l2(BC, HA, Some(10)));
    assert_eq!((o.tx.len(), o.drops.normal_vlan), (0, 1));
    let o = send(&mut d, 4, &l2(BC, HA, Some(30)));
    assert_eq!((o.tx.len(), o.drops.normal_vlan), (0, 1));
    // Untagged on the native port: VLAN 10; the frames to the trunk keep
    // the PCP bits of a tagged one.
    let o = send(&mut d, 5, &l2(BC, HB, Some(10)));
    assert_eq!(outs(&o), vec![(1, None), (2, None), (4, Some(10))]);
    let to_trunk = &o.tx.pkts()[2].as_slice()[14..16];
    assert_eq!(to_trunk, &[0xa0, 10]);
}

#[test]
fn normal_after_other_actions_uses_the_rewritten_frame() {
    // push_vlan and set the VID, then NORMAL: the frame is in VLAN 7.
    let mut d = dp("priority=0,in_port=1,actions=push_vlan:0x8100,set_field:4103->vlan_vid,NORMAL");
    d.ports.set_vlan(2, crate::normal::PortVlan::access(7));
    d.ports.set_vlan(3, crate::normal::PortVlan::access(8));
    let o = send(&mut d, 1, &l2(BC, HA, None));
    let got = outs(&o);
    assert!(got.contains(&(2, None)), "{got:?}");
    assert!(!got.iter().any(|(p, _)| *p == 3), "{got:?}");
    assert!(got.contains(&(4, Some(7))), "{got:?}");
}

#[test]
fn set_queue_tags_the_transmission() {
    let mut d = dp("priority=1,actions=set_queue:3,output:2");
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(o.tx.pkts()[0].meta.queue_id, 3);
    assert_eq!(d.counters().queues[&(2, 3)].tx_packets, 1);
}

// ---- header actions ------------------------------------------------------

#[test]
fn push_pop_vlan_mpls_pbb_round_trips() {
    let mut d = dp(
        "table=0,priority=1,actions=push_vlan:0x88a8,set_field:4196->vlan_vid,push_mpls:0x8847,set_field:77->mpls_label,output:2,goto_table:1\n\
         table=1,priority=1,dl_vlan=100,mpls,mpls_label=77,actions=pop_mpls:0x0800,pop_vlan,output:3,push_pbb:0x88e7,set_field:0x123456->pbb_isid,output:4,goto_table:2\n\
         table=2,priority=1,dl_type=0x88e7,pbb_isid=0x123456,actions=pop_pbb,output:5",
    );
    let orig = udp4(64);
    let o = send(&mut d, 1, &orig);
    assert_eq!(out_ports(&o), vec![2, 3, 4, 5]);
    let k = key_of(&o, 0);
    assert_eq!((k.vlan_vid, k.eth_type, k.mpls_label), (0x1064, 0x8847, 77));
    assert_eq!(k.mpls_ttl, 64, "push_mpls copies the IP TTL");
    assert_eq!(o.tx.pkts()[1].as_slice(), &orig[..]);
    let k = key_of(&o, 2);
    assert_eq!((k.eth_type, k.pbb_isid), (0x88e7, 0x123456));
    assert_eq!(o.tx.pkts()[3].as_slice(), &orig[..]);
}

#[test]
fn ttl_actions_on_ip_and_mpls() {
    let mut d = dp(
        "priority=1,ip,actions=dec_ttl,output:2,set_nw_ttl:9,output:3,push_mpls:0x8847,set_mpls_ttl:30,dec_mpls_ttl,output:4,copy_ttl_in,output:5,copy_ttl_out,output:6",
    );
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(key_of(&o, 0).ip_ttl, 63);
    assert_eq!(key_of(&o, 1).ip_ttl, 9);
    assert_eq!(key_of(&o, 2).mpls_ttl, 29);
    // copy_ttl_in: MPLS TTL 29 -> IP TTL.
    let inner = o.tx.pkts()[3].as_slice();
    assert_eq!(inner[14 + 4 + 8], 29);
    for (_, packet) in &o.tx {
        verify_checksums(packet.as_slice()).unwrap();
    }
    // copy_ttl_out after set_nw_ttl... copies IP TTL 29 back out.
    assert_eq!(key_of(&o, 4).mpls_ttl, 29);
}

#[test]
fn expired_ttl_drops_or_goes_to_the_controller() {
    let flows = "priority=1,ip,actions=dec_ttl,output:2";
    let mut d = dp(flows);
    let o = send(&mut d, 1, &udp4(1));
    assert!(o.tx.is_empty() && o.packet_ins.is_empty());
    assert_eq!(o.drops.invalid_ttl, 1);
    assert_eq!(o.drops.no_output, 0);

    let mut d = dp(flows);
    d.config.flags = OFPC_INVALID_TTL_TO_CONTROLLER;
    let p = udp4(1);
    let o = send(&mut d, 1, &p);
    assert!(o.tx.is_empty());
    let pi = &o.packet_ins[0].message;
    assert_eq!(pi.reason, packet_in_reason::INVALID_TTL);
    assert_eq!(usize::from(pi.total_len), p.len());
    assert_eq!(pi.data.len(), p.len().min(128), "miss_send_len applies");
}

#[test]
fn failed_action_is_skipped_and_counted() {
    // Buckets have no match, so a pop_vlan there passes validation and
    // meets an untagged frame.
    let mut d = dp_full(
        "priority=1,actions=group:1",
        "group_id=1,type=indirect,bucket=pop_vlan,pop_vlan,output:2",
        "",
    );
    let mut tagged = udp4(64);
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    let o = send(&mut d, 1, &tagged);
    assert_eq!(out_ports(&o), vec![2]);
    assert_eq!(o.drops.action_failed, 1);
    assert_eq!(o.tx.pkts()[0].as_slice(), &udp4(64)[..]);
}

/// os-ken's action test `set_field: 05_ETH_TYPE`: the flow is accepted,
/// so the rewrite must happen (it was refused by the executor and the
/// frame left unchanged).
#[test]
fn set_field_eth_type_rewrites_the_ethertype() {
    let mut d = dp("priority=1,ip,actions=set_field:0x8848->eth_type,output:2");
    let p = tcp4();
    let o = send(&mut d, 1, &p);
    assert_eq!(out_ports(&o), [2]);
    let q = o.tx.pkts()[0].as_slice();
    assert_eq!(q[12..14], [0x88, 0x48]);
    assert_eq!(q[..12], p[..12]);
    assert_eq!(q[14..], p[14..]);
}

#[test]
fn set_field_on_transport_keeps_checksums() {
    let mut d = dp("priority=1,udp,actions=set_field:53->udp_dst,set_field:02:aa:bb:cc:dd:ee->eth_src,set_field:46->ip_dscp,output:2\n\
         priority=1,tcp,actions=set_field:443->tcp_src,set_field:192.168.0.1->ipv4_dst,output:3");
    let o = send(&mut d, 1, &udp4(64));
    let k = key_of(&o, 0);
    assert_eq!(
        (k.tp_dst, k.eth_src, k.ip_dscp),
        (53, [2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee], 46)
    );
    verify_checksums(o.tx.pkts()[0].as_slice()).unwrap();
    let o = send(&mut d, 1, &tcp4());
    let k = key_of(&o, 0);
    assert_eq!((k.tp_src, k.ipv4_dst), (443, 0xc0a8_0001));
    verify_checksums(o.tx.pkts()[0].as_slice()).unwrap();
}

#[test]
fn tunnel_id_and_metadata_reach_the_packet_in_match() {
    let mut d = dp(
        "table=0,priority=1,actions=set_field:0x77->tunnel_id,write_metadata:0x9,goto_table:1\n\
         table=1,priority=1,tunnel_id=0x77,actions=CONTROLLER:65535",
    );
    let o = send(&mut d, 3, &udp4(64));
    let pi = &o.packet_ins[0].message;
    assert_eq!(pi.reason, packet_in_reason::ACTION);
    assert_eq!(pi.table_id, 1);
    assert_eq!(
        pi.match_,
        Match {
            fields: vec![
                Oxm::basic(OxmField::InPort, OxmValue::U32(3)),
                Oxm::basic(OxmField::Metadata, OxmValue::U64(9)),
                Oxm::basic(OxmField::TunnelId, OxmValue::U64(0x77)),
            ]
        }
    );
}

/// Each output's port and tunnel_id (0 where `tx_tunnel_ids` has none).
fn ports_and_tunnel_ids(o: &BurstOutput) -> Vec<(u32, u64)> {
    let ids: std::collections::HashMap<usize, u64> = o.tx_tunnel_ids.iter().copied().collect();
    assert!(o.tx_tunnel_ids.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(o
        .tx_tunnel_ids
        .iter()
        .all(|(i, id)| *i < o.tx.len() && *id != 0));
    o.tx.iter()
        .enumerate()
        .map(|(i, (port, _))| (port, ids.get(&i).copied().unwrap_or(0)))
        .collect()
}

/// A burst from a tunnel port carries each packet's received key as its
/// tunnel_id: flows match it (through the flow cache, which keys on it:
/// one frame alternating between two keys never hits the other key's
/// entry), it stays with the packet to the output (`BurstOutput::tx_tunnel_ids`,
/// what a key=flow port wraps it in), and set_field sets it for output.
#[test]
fn tunnel_ids_from_a_tunnel_burst_are_matched_and_carried_to_the_output() {
    // Two masks: tuple-space search, a table the cache is used for.
    let st = state(
        "table=0,priority=10,tun_id=42,in_port=2,actions=output:1\n\
         table=0,priority=10,tunnel_id=43,in_port=2,actions=output:3\n\
         table=0,priority=5,in_port=1,udp,actions=set_field:42->tunnel_id,output:2\n\
         table=0,priority=5,in_port=4,actions=output:2",
        "",
        "",
    );
    let ports = Ports::with_range(8);
    let config = DatapathConfig::default();
    let view = PipelineView::of(&st, &ports, &config);
    let mut w = WorkerState::new(0, 1, 16);
    w.set_flow_cache(64);
    let mut o = BurstOutput::default();
    let frame = udp4(64);
    for _ in 0..8 {
        let ids = [42u64, 43, 42, 44, 43, 43, 42];
        let mut burst: Vec<PacketBuf> = ids.iter().map(|_| PacketBuf::from_slice(&frame)).collect();
        o.clear();
        w.process_burst_tunnel_into(&view, 2, &mut burst, &ids, T0, &mut o);
        let got = ports_and_tunnel_ids(&o);
        assert_eq!(
            got,
            [(1, 42), (3, 43), (1, 42), (3, 43), (3, 43), (1, 42)],
            "44 matches nothing"
        );
        assert!(o.tx.pkts().iter().all(|p| p.as_slice() == frame.as_slice()));
    }
    let cs = w.cache_stats();
    assert!(cs.hits > 0, "the cache was used: {cs:?}");
    // Without tunnel_ids (any other port's burst) the tunnel_id is 0.
    let one = |w: &mut WorkerState, o: &mut BurstOutput, in_port: u32| {
        let mut burst = vec![PacketBuf::from_slice(&frame)];
        w.process_burst_into(&view, in_port, &mut burst, T0, o);
    };
    o.clear();
    one(&mut w, &mut o, 2);
    assert!(o.tx.is_empty());
    // set_field gives the output its tunnel_id; otherwise it is 0, also
    // where a tunnel burst's tunnel_ids run short.
    o.clear();
    one(&mut w, &mut o, 1);
    one(&mut w, &mut o, 4);
    let mut two = vec![PacketBuf::from_slice(&frame), PacketBuf::from_slice(&frame)];
    w.process_burst_tunnel_into(&view, 4, &mut two, &[7], T0, &mut o);
    let got = ports_and_tunnel_ids(&o);
    assert_eq!(got, [(2, 42), (2, 0), (2, 7), (2, 0)]);

    // Packets that go on to a later table come out in packet order with
    // the rest, their tunnel_ids with them.
    let st = state(
        "table=0,priority=10,tun_id=42,actions=output:1\n\
         table=0,priority=10,tun_id=43,actions=goto_table:1\n\
         table=0,priority=10,tun_id=44,actions=set_field:45->tunnel_id,goto_table:1\n\
         table=1,priority=1,actions=output:3",
        "",
        "",
    );
    let view = PipelineView::of(&st, &ports, &config);
    let ids = [43u64, 42, 44, 43, 42, 7, 42];
    let mut burst: Vec<PacketBuf> = ids.iter().map(|_| PacketBuf::from_slice(&frame)).collect();
    o.clear();
    w.process_burst_tunnel_into(&view, 2, &mut burst, &ids, T0, &mut o);
    assert_eq!(
        ports_and_tunnel_ids(&o),
        [(3, 43), (1, 42), (3, 45), (3, 43), (1, 42), (1, 42)]
    );
}

// ---- groups ----------------------------------------------------------------

#[test]
fn all_group_clones_to_every_bucket_and_counts() {
    let mut d = dp_full(
        "priority=1,actions=group:1",
        "group_id=1,type=all,bucket=output:2,bucket=set_field:10.0.0.9->ipv4_dst,output:3,bucket=output:4",
        "",
    );
    let p = udp4(64);
    let o = send(&mut d, 1, &p);
    assert_eq!(out_ports(&o), vec![2, 3, 4]);
    assert_eq!(o.tx.pkts()[0].as_slice(), &p[..], "buckets act on copies");
    assert_eq!(key_of(&o, 1).ipv4_dst, 0x0a00_0009);
    let n = p.len() as u64;
    assert_eq!(d.counters().groups[&1].buckets, vec![(1, n); 3]);
    d.sync_counters();
    let gs = d
        .state
        .groups
        .stats(1, |g| d.state.tables.group_ref_count(g), T0);
    assert_eq!(gs[0].packet_count, 1, "one packet, however many buckets");
    assert_eq!(gs[0].bucket_stats[1].byte_count, n);
}

#[test]
fn select_group_keeps_a_flow_on_one_bucket_and_follows_weights() {
    let mut d = dp_full(
        "priority=1,actions=group:1",
        "group_id=1,type=select,bucket=weight:1,output:2,bucket=weight:3,output:3,bucket=weight:0,output:4",
        "",
    );
    let mut hits = [0u32; 9];
    for sport in 0..400u16 {
        let p = udp4_ports(64, 1000 + sport, 2000);
        let first = out_ports(&send(&mut d, 1, &p));
        assert_eq!(first.len(), 1);
        for _ in 0..3 {
            assert_eq!(out_ports(&send(&mut d, 1, &p)), first, "flow moved");
        }
        hits[first[0] as usize] += 1;
    }
    assert_eq!(hits[4], 0, "weight 0 never chosen");
    assert_eq!(hits[2] + hits[3], 400);
    assert!(hits[3] > 2 * hits[2], "weights 1:3 gave {:?}", &hits[2..4]);
    assert!(hits[2] > 50);
}

#[test]
fn fast_failover_uses_the_first_live_bucket() {
    let mut d = dp_full(
        "priority=1,actions=group:1",
        "group_id=2,type=ff,bucket=watch_port:5,output:5\n\
         group_id=1,type=ff,bucket=watch_port:2,output:2,bucket=watch_group:2,output:3,bucket=watch_port:4,output:4",
        "",
    );
    assert_eq!(out_ports(&send(&mut d, 1, &udp4(64))), vec![2]);
    d.ports.set(
        2,
        PortInfo {
            config: 0,
            state: port_state::LINK_DOWN,
        },
    );
    assert_eq!(out_ports(&send(&mut d, 1, &udp4(64))), vec![3]);
    d.ports.set(
        5,
        PortInfo {
            config: port_config::PORT_DOWN,
            state: 0,
        },
    );
    assert_eq!(
        out_ports(&send(&mut d, 1, &udp4(64))),
        vec![4],
        "group 2 has no live bucket"
    );
    d.ports.remove(4);
    let o = send(&mut d, 1, &udp4(64));
    assert!(o.tx.is_empty());
    assert_eq!(o.drops.group_drop, 1);
    assert_eq!(
        d.counters().groups[&1].buckets,
        vec![(1, 53), (1, 53), (1, 53)]
    );
}

#[test]
fn indirect_and_chained_groups() {
    let mut d = dp_full(
        "priority=1,actions=group:1",
        "group_id=2,type=indirect,bucket=set_field:4->udp_src,output:3\n\
         group_id=1,type=all,bucket=output:2,bucket=group:2",
        "",
    );
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(out_ports(&o), vec![2, 3]);
    assert_eq!(key_of(&o, 1).tp_src, 4);
}

// ---- meters ------------------------------------------------------------------

#[test]
fn meter_drop_band_with_a_simulated_clock() {
    let mut d = dp_metered(
        "priority=1,actions=meter:1,output:2",
        "meter=1,pktps,burst,bands=type=drop,rate=10,burst_size=2",
    );
    let p = udp4(64);
    let passed: usize = (0..5).map(|_| send_at(&mut d, 1, &p, T0).tx.len()).sum();
    assert_eq!(passed, 2, "burst of 2 then drops");
    assert_eq!(d.counters().drops.meter_drop, 3);
    // 100 ms later one more token (10 packets/s).
    let later = Time(T0.0 + 100_000_000);
    assert_eq!(send_at(&mut d, 1, &p, later).tx.len(), 1);
    assert_eq!(send_at(&mut d, 1, &p, later).drops.meter_drop, 1);
    assert_eq!(d.counters().meters[&1].packets, 7);
    assert_eq!(d.counters().meters[&1].bands[0].0, 4);
    // The meter's own counters see the worker's counts once folded.
    assert_eq!(
        d.state
            .meters
            .stats(1, |m| d.state.tables.meter_flow_count(m), later)[0]
            .packet_in_count,
        0
    );
    d.sync_counters();
    let ms = d
        .state
        .meters
        .stats(1, |m| d.state.tables.meter_flow_count(m), later);
    assert_eq!(ms[0].packet_in_count, 7);
    assert_eq!(ms[0].band_stats[0].packet_band_count, 4);
}

#[test]
fn meter_dscp_remark_raises_drop_precedence() {
    assert_eq!(remark_dscp(10, 1), 12); // AF11 -> AF12
    assert_eq!(remark_dscp(10, 5), 14); // capped at AF13
    assert_eq!(remark_dscp(46, 0), 46);
    let mut d = dp_metered(
        "priority=1,actions=meter:1,output:2",
        "meter=1,pktps,burst,bands=type=dscp_remark,rate=1,burst_size=1,prec_level=1",
    );
    let mut p = udp4(64);
    p[15] = 10 << 2; // AF11
    fill_checksums(&mut p);
    let o1 = send(&mut d, 1, &p);
    let o2 = send(&mut d, 1, &p);
    assert_eq!(key_of(&o1, 0).ip_dscp, 10);
    assert_eq!(key_of(&o2, 0).ip_dscp, 12);
    verify_checksums(o2.tx.pkts()[0].as_slice()).unwrap();
}

// ---- packet-in and buffers ---------------------------------------------------------

#[test]
fn table_miss_packet_in_reason_cookie_and_truncation() {
    let mut d = dp("table=0,priority=0,cookie=0x42,actions=CONTROLLER:20\n\
         table=0,priority=5,in_port=2,cookie=0x7,actions=CONTROLLER:65535");
    let p = udp4(64);
    let o = send(&mut d, 1, &p);
    let ev = &o.packet_ins[0];
    assert_eq!(ev.in_port, 1);
    let pi = &ev.message;
    assert_eq!(pi.reason, packet_in_reason::NO_MATCH);
    assert_eq!((pi.table_id, pi.cookie), (0, 0x42));
    assert_eq!(pi.data, p[..20].to_vec());
    assert_eq!(usize::from(pi.total_len), p.len());
    assert_ne!(pi.buffer_id, OFP_NO_BUFFER);
    // An explicit rule: reason ACTION, whole packet, no buffer.
    let o = send(&mut d, 2, &p);
    let pi = &o.packet_ins[0].message;
    assert_eq!(pi.reason, packet_in_reason::ACTION);
    assert_eq!(pi.cookie, 7);
    assert_eq!(pi.buffer_id, OFP_NO_BUFFER);
    assert_eq!(pi.data, p);
}

#[test]
fn buffered_packet_released_by_packet_out_once() {
    let mut d = dp("priority=0,actions=CONTROLLER:0");
    let p = udp4(64);
    let o = send(&mut d, 3, &p);
    let id = o.packet_ins[0].message.buffer_id;
    assert!(o.packet_ins[0].message.data.is_empty());
    let po = PacketOut {
        buffer_id: id,
        in_port: 3,
        actions: vec![Action::Output {
            port: port_no::IN_PORT,
            max_len: 0,
        }],
        data: vec![],
    };
    let out = d.packet_out(&po, T0).unwrap();
    assert_eq!(out_ports(&out), vec![3]);
    assert_eq!(out.tx.pkts()[0].as_slice(), &p[..]);
    assert_eq!(
        d.packet_out(&po, T0),
        Err(OfpError::BadRequest(BadRequestCode::BufferUnknown))
    );
}

#[test]
fn disabled_pool_and_full_pool() {
    let mut d = dp("priority=0,actions=CONTROLLER:10");
    d = Datapath::new(
        std::mem::take(&mut d.state),
        Ports::with_range(4),
        DatapathConfig {
            n_buffers: 0,
            ..DatapathConfig::default()
        },
    );
    let p = udp4(64);
    let pi = send(&mut d, 1, &p).packet_ins.remove(0).message;
    assert_eq!(pi.buffer_id, OFP_NO_BUFFER);
    assert_eq!(pi.data, p, "unbuffered packet-ins carry it all");

    let mut d = Datapath::new(
        std::mem::take(&mut d.state),
        Ports::with_range(4),
        DatapathConfig {
            n_buffers: 2,
            ..DatapathConfig::default()
        },
    );
    let ids: Vec<u32> = (0..3)
        .map(|_| send(&mut d, 1, &p).packet_ins[0].message.buffer_id)
        .collect();
    assert!(d.release_buffer(ids[0], T0).is_err(), "oldest reused");
    let out = d.release_buffer(ids[2], T0).unwrap();
    assert_eq!(out.packet_ins.len(), 1, "released packet ran the pipeline");
}

#[test]
fn packet_out_table_runs_the_pipeline_and_checks_its_input() {
    let mut d =
        dp("priority=1,in_port=CONTROLLER,actions=output:4\npriority=1,in_port=2,actions=output:5");
    let p = udp4(64);
    let po = PacketOut {
        buffer_id: OFP_NO_BUFFER,
        in_port: port_no::CONTROLLER,
        actions: vec![
            Action::SetField {
                field: Oxm::basic(OxmField::UdpDst, OxmValue::U16(99)),
            },
            Action::Output {
                port: port_no::TABLE,
                max_len: 0,
            },
            Action::Output {
                port: 1,
                max_len: 0,
            },
        ],
        data: p.clone(),
    };
    let o = d.packet_out(&po, T0).unwrap();
    assert_eq!(out_ports(&o), vec![4, 1]);
    assert_eq!(key_of(&o, 0).tp_dst, 99);
    let bad = PacketOut {
        in_port: 0,
        ..po.clone()
    };
    assert_eq!(
        d.packet_out(&bad, T0),
        Err(OfpError::BadRequest(BadRequestCode::BadPort))
    );
    let bad = PacketOut {
        actions: vec![Action::Group { group_id: 9 }],
        ..po.clone()
    };
    assert_eq!(
        d.packet_out(&bad, T0),
        Err(OfpError::BadAction(BadActionCode::BadOutGroup))
    );
    // A packet-out to the controller: reason ACTION, cookie all ones.
    let to_ctl = PacketOut {
        actions: vec![Action::Output {
            port: port_no::CONTROLLER,
            max_len: OFPCML_NO_BUFFER,
        }],
        ..po
    };
    let pi = d
        .packet_out(&to_ctl, T0)
        .unwrap()
        .packet_ins
        .remove(0)
        .message;
    assert_eq!((pi.reason, pi.cookie), (packet_in_reason::ACTION, u64::MAX));
}

#[test]
fn no_packet_in_and_no_recv_ports() {
    let mut d = dp("priority=0,actions=CONTROLLER:65535");
    d.ports.set(
        1,
        PortInfo {
            config: port_config::NO_PACKET_IN,
            state: 0,
        },
    );
    d.ports.set(
        2,
        PortInfo {
            config: port_config::NO_RECV,
            state: 0,
        },
    );
    let o = send(&mut d, 1, &udp4(64));
    assert_eq!(o.drops.packet_in_blocked, 1);
    let o = send(&mut d, 2, &udp4(64));
    assert_eq!(o.drops.port_no_recv, 1);
    assert_eq!(d.counters().ports[&2].rx_dropped, 1);
}

// ---- counters and bursts ------------------------------------------------------------

#[test]
fn burst_counters_fold_into_flow_and_table_stats() {
    let mut d = dp("priority=5,udp,actions=output:2\npriority=1,actions=output:3");
    let p = udp4(64);
    let t = tcp4();
    let mut burst = vec![
        PacketBuf::from_slice(&p),
        PacketBuf::from_slice(&t),
        PacketBuf::from_slice(&p),
    ];
    let mut out = BurstOutput::default();
    let later = T0.plus_secs(5);
    d.process_burst_into(1, &mut burst, later, &mut out);
    assert!(burst.is_empty());
    assert_eq!(out_ports(&out), vec![2, 3, 2]);
    let c = d.counters();
    assert_eq!(c.ports[&1].rx_packets, 3);
    assert_eq!(c.ports[&2].tx_bytes, 2 * p.len() as u64);
    let synced = d.sync_counters();
    assert_eq!(synced.tables[&0].lookups, 3);
    assert!(d.counters().flows.is_empty(), "taken");
    let stats = d
        .state
        .tables
        .flow_stats(&crate::any_flow(), later)
        .unwrap();
    let udp_stats = stats.iter().find(|s| s.priority == 5).unwrap();
    assert_eq!(udp_stats.packet_count, 2);
    assert_eq!(udp_stats.byte_count, 2 * p.len() as u64);
    let table = &d.state.tables.table_stats()[0];
    assert_eq!((table.lookup_count, table.matched_count), (3, 3));
    // Reusing the output keeps capacity.
    let cap = out.tx.capacity();
    out.clear();
    assert_eq!(out.tx.capacity(), cap);
}

#[test]
fn two_workers_sum_to_the_total() {
    let flows = "priority=1,actions=output:2";
    let mut a = dp(flows);
    let mut b = dp(flows);
    send(&mut a, 1, &udp4(64));
    send(&mut b, 1, &udp4(64));
    send(&mut b, 1, &udp4(64));
    let total = Counters::sum([a.counters(), b.counters()]);
    assert_eq!(total.ports[&2].tx_packets, 3);
    let by_id = total.by_flow();
    let (id, f) = by_id.iter().next().unwrap();
    assert_eq!(f.packets, 3);
    let mut control = state(flows, "", "");
    control.fold(&total);
    assert_eq!(control.tables.counter(*id).unwrap().packets, 3);
}

#[test]
fn idle_timeout_sees_the_last_hit_after_sync() {
    let mut d = dp("priority=1,idle_timeout=10,actions=output:2");
    send_at(&mut d, 1, &udp4(64), T0.plus_secs(8));
    d.sync_counters();
    d.state.expire(T0.plus_secs(12));
    assert_eq!(
        d.state.tables.len(),
        1,
        "hit at 8 s restarted the idle timeout"
    );
    d.state.expire(T0.plus_secs(18));
    assert_eq!(d.state.tables.len(), 0);
}

#[test]
fn tracing_records_the_walk() {
    let mut d = dp("table=0,priority=1,actions=write_actions(output:2),goto_table:1\ntable=1,priority=1,ip,actions=dec_ttl");
    d.set_tracing(true);
    send(&mut d, 1, &udp4(64));
    let t = d.take_trace();
    let lookups = t
        .iter()
        .filter(|e| matches!(e, TraceEvent::Lookup { entry: Some(_), .. }))
        .count();
    assert_eq!(lookups, 2);
    assert!(t.contains(&TraceEvent::Output {
        port: 2,
        queue_id: 0
    }));
    assert!(t
        .iter()
        .any(|e| matches!(e, TraceEvent::ActionSet { actions } if actions.len() == 1)));
    assert!(d.take_trace().is_empty());
}

#[test]
fn garbage_packets_do_not_panic() {
    let mut d = dp_full(
        "priority=1,actions=group:1,group:2",
        "group_id=1,type=indirect,bucket=dec_ttl,pop_vlan,push_mpls:0x8847,copy_ttl_in,set_field:1->ip_dscp,set_field:5->tcp_src,dec_mpls_ttl,pop_pbb,output:2\n\
         group_id=2,type=select,bucket=copy_ttl_out,set_nw_ttl:1,dec_ttl,output:3",
        "",
    );
    for len in 0..80 {
        let p: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        let _ = send(&mut d, 1, &p);
        let mut q = udp4(64);
        q.truncate(len);
        let _ = send(&mut d, 1, &q);
    }
}

/// A 60-byte MPLS frame (Ethernet's minimum) that pops to 56 bytes leaves
/// padded back to 60, to a port and to the controller; and a pop followed
/// by a push in the same pipeline is not padded in between, so the fused
/// gateway rewrite (one entry, compiled) and the same steps spread over two
/// tables (the step-by-step path) send the same bytes.
#[test]
fn popped_minimum_frames_leave_at_sixty_bytes_by_every_path() {
    let inner = {
        let mut p = ipv4(17, 64, [10, 0, 0, 1], [10, 0, 0, 2], &udp(1, 2, &[7; 14]));
        fill_checksums(&mut p);
        p
    };
    let mpls = |label: u32| {
        let mut v = (label << 12 | 1 << 8 | 64).to_be_bytes().to_vec();
        v.extend_from_slice(&inner);
        eth(0x8847, &v)
    };
    assert_eq!(mpls(18).len(), 60);
    let mut d = dp("table=0,priority=9,mpls,mpls_label=18,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4101->vlan_vid,output:4\n\
         table=0,priority=9,mpls,mpls_label=19,actions=pop_mpls:0x0800,goto_table:1\n\
         table=0,priority=9,mpls,mpls_label=20,actions=pop_mpls:0x0800,output:2\n\
         table=0,priority=9,mpls,mpls_label=21,actions=pop_mpls:0x0800,CONTROLLER:65535\n\
         table=1,priority=1,actions=push_vlan:0x8100,set_field:4101->vlan_vid,output:4");
    let fused = send(&mut d, 1, &mpls(18));
    let stepwise = send(&mut d, 1, &mpls(19));
    assert_eq!(fused.tx.len(), 1);
    assert_eq!(stepwise.tx.len(), 1);
    let f = fused.tx.pkts()[0].as_slice();
    assert_eq!(f, stepwise.tx.pkts()[0].as_slice());
    assert_eq!(f.len(), 60);
    assert_eq!(&f[12..18], &[0x81, 0x00, 0x00, 0x05, 0x08, 0x00]);
    assert_eq!(&f[18..], &inner[..]);
    // Popped and sent as is: 56 bytes of frame and 4 of zeros.
    let o = send(&mut d, 1, &mpls(20));
    let p = o.tx.pkts()[0].as_slice();
    assert_eq!(p.len(), 60);
    assert_eq!(&p[14..56], &inner[..]);
    assert_eq!(&p[56..], &[0; 4]);
    let c = d.counters();
    assert_eq!(c.ports[&2].tx_bytes, 60);
    let o = send(&mut d, 1, &mpls(21));
    assert_eq!(o.packet_ins.len(), 1);
    assert_eq!(o.packet_ins[0].message.data, p);
    assert_eq!(o.packet_ins[0].message.total_len, 60);
    // A frame that arrived shorter than 60 is never padded.
    let mut short = mpls(20);
    short.truncate(58);
    let o = send(&mut d, 1, &short);
    assert_eq!(o.tx.pkts()[0].len(), 54);
}

// ---- properties ---------------------------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;

    const FLOWS: &str =
        "table=0,priority=9,udp,actions=push_vlan:0x8100,set_field:4101->vlan_vid,goto_table:1\n\
         table=0,priority=8,tcp,actions=set_field:99->tcp_dst,write_actions(dec_ttl),goto_table:2\n\
         table=0,priority=7,mpls,actions=pop_mpls:0x0800,goto_table:2\n\
         table=0,priority=6,dl_vlan=5,actions=pop_vlan,push_mpls:0x8847,set_field:77->mpls_label,output:3\n\
         table=0,priority=6,ip,dl_vlan=6,actions=set_field:7->vlan_pcp,set_field:00:00:00:00:00:09->eth_src,dec_ttl,set_queue:2,output:in_port\n\
         table=0,priority=8,mpls,mpls_label=17,actions=dec_mpls_ttl,set_mpls_ttl:3,pop_mpls:0x0800,set_field:00:00:00:00:00:01->eth_dst,output:2\n\
         table=0,priority=8,mpls,mpls_label=18,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4101->vlan_vid,output:4\n\
         table=0,priority=5,tcp,tcp_dst=80,actions=output:3,dec_ttl,output:4\n\
         table=0,priority=0,actions=CONTROLLER:64\n\
         table=1,priority=1,ip,actions=group:1,write_actions(output:4)\n\
         table=2,priority=1,actions=group:2";
    const GROUPS: &str = "group_id=1,type=all,bucket=output:2,bucket=pop_vlan,push_pbb:0x88e7,output:5\n\
         group_id=2,type=select,bucket=weight:1,dec_ttl,output:6,bucket=weight:2,copy_ttl_out,output:7";

    /// Templates plus random byte edits and truncation.
    fn packet() -> impl Strategy<Value = Vec<u8>> {
        let templates = vec![
            udp4(64),
            tcp4(),
            udp4(1),
            {
                let mut t = udp4(64);
                t.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
                t
            },
            {
                let mut t = udp4(64);
                t.splice(12..12, [0x81, 0x00, 0x00, 0x06]);
                t
            },
            {
                let mut t = tcp4();
                t[36] = 0;
                t[37] = 80;
                t
            },
            {
                let mut m = udp4(64);
                m[12] = 0x88;
                m[13] = 0x47;
                m.splice(14..14, [0, 0x01, 0x11, 0x40]);
                m
            },
            {
                let mut m = udp4(64);
                m[12] = 0x88;
                m[13] = 0x47;
                m.splice(14..14, [0, 0x01, 0x21, 0x40]);
                m
            },
        ];
        mangled(templates, 80, 4)
    }

    /// Table-0 flow-mods that the cache must notice.
    /// One of `templates`, with fewer than `edits` random byte edits in
    /// its first `reach` bytes and cut anywhere (below 90 bytes).
    pub(super) fn mangled(
        templates: Vec<Vec<u8>>,
        reach: usize,
        edits: usize,
    ) -> impl Strategy<Value = Vec<u8>> {
        (
            proptest::sample::select(templates),
            proptest::collection::vec((0usize..reach, any::<u8>()), 0..edits),
            0usize..90,
        )
            .prop_map(|(mut p, edits, cut)| {
                for (at, v) in edits {
                    if let Some(b) = p.get_mut(at) {
                        *b = v;
                    }
                }
                p.truncate(cut.max(1));
                p
            })
    }

    /// Runs `pkts` from `in_port` three times through `fast` and `slow`,
    /// `change` (as `command`) applied to both before the third run, and
    /// checks each run gives the same outputs, packet-ins, drops and
    /// counters on both.
    pub(super) fn same_each_round(
        fast: &mut Datapath,
        slow: &mut Datapath,
        pkts: &[Vec<u8>],
        in_port: u32,
        change: &str,
        command: ofp::FlowModCommand,
    ) -> Result<(), TestCaseError> {
        let run = |d: &mut Datapath| {
            let mut b: Vec<PacketBuf> = pkts.iter().map(|p| PacketBuf::from_slice(p)).collect();
            d.process_burst(in_port, &mut b, T0)
        };
        for round in 0..3 {
            if round == 2 {
                change_both(fast, slow, change, command);
            }
            let (a, b) = (run(fast), run(slow));
            prop_assert_eq!(&a.tx, &b.tx, "round {}", round);
            prop_assert_eq!(&a.packet_ins, &b.packet_ins);
            prop_assert_eq!(a.drops, b.drops);
            prop_assert_eq!(fast.counters(), slow.counters());
        }
        Ok(())
    }

    const CHANGES: [&str; 4] = [
        "table=0,priority=10,udp,actions=output:3",
        "delete table=0,udp,actions=drop",
        "table=0,priority=9,udp,actions=output:2",
        "delete table=0,actions=drop",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]

        /// The default datapath (fast classifier, burst lookup of table 0,
        /// flow cache) gives exactly the linear scan's outputs and
        /// counters, also after a table-0 flow-mod between bursts (the
        /// cache must not answer from the old table), and repeated
        /// bursts are answered from the cache.
        #[test]
        fn fast_cached_datapath_equals_the_linear_scan(
            pkts in proptest::collection::vec(packet(), 1..24),
            change in 0usize..4,
        ) {
            let mut fast = dp_full(FLOWS, GROUPS, "");
            let mut slow = dp_full(FLOWS, GROUPS, "");
            slow.set_reference_lookup(true);
            slow.set_flow_cache(0);
            same_each_round(&mut fast, &mut slow, &pkts, 1, CHANGES[change], ofp::FlowModCommand::Delete)?;
            let s = fast.cache_stats();
            // CHANGES[3] empties table 0: one probe, no cache in round 2.
            let cached_rounds = if change == 3 { 2 } else { 3 };
            prop_assert_eq!(s.hits + s.misses, cached_rounds * pkts.len() as u64);
            prop_assert!(s.hits >= pkts.len() as u64, "round 1 repeats round 0: {:?}", s);
            prop_assert_eq!(slow.cache_stats().hits + slow.cache_stats().misses, 0);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// No packet makes the pipeline panic, and a burst gives exactly
        /// what the same packets give one at a time.
        #[test]
        fn bursts_equal_single_packets(pkts in proptest::collection::vec(packet(), 1..8)) {
            let mut one = dp_full(FLOWS, GROUPS, "");
            let mut many = dp_full(FLOWS, GROUPS, "");
            let mut singles = BurstOutput::default();
            for p in &pkts {
                one.process_burst_into(1, &mut vec![PacketBuf::from_slice(p)], T0, &mut singles);
            }
            let mut burst: Vec<PacketBuf> = pkts.iter().map(|p| PacketBuf::from_slice(p)).collect();
            let together = many.process_burst(1, &mut burst, T0);
            prop_assert_eq!(&singles.tx, &together.tx);
            prop_assert_eq!(&singles.packet_ins, &together.packet_ins);
            prop_assert_eq!(singles.drops, together.drops);
            prop_assert_eq!(one.counters(), many.counters());
            // Every packet is accounted for: sent, sent to the controller,
            // or dropped with a name.
            prop_assert_eq!(many.counters().ports[&1].rx_packets, pkts.len() as u64);
        }

        /// The linear scan picks a matching entry of the highest priority
        /// among all matching entries.
        #[test]
        fn lookup_picks_a_best_match(p in packet()) {
            let d = dp_full(FLOWS, GROUPS, "");
            let mut k = FlowKey::parse(&p);
            k.set_metadata_fields(1, 1, 0, 0);
            let table = d.state.tables.table(0).unwrap();
            let best = table.lookup_linear(&k);
            let top = table
                .entries()
                .filter(|e| crate::tables::linear::matches(&e.key, &k))
                .map(|e| e.priority)
                .max();
            prop_assert_eq!(best.map(|e| e.priority), top);
        }

        /// Folding with the bulk adds gives the same control-side
        /// statistics as folding one packet at a time, for counters from
        /// a random workload (plus keys that name nothing).
        #[test]
        fn bulk_fold_equals_per_packet_fold(
            pkts in proptest::collection::vec((packet(), 0u64..4), 1..24),
            ghost in 0u64..5,
        ) {
            let meter = "meter=1,pktps,burst,bands=type=drop,rate=5,burst_size=3";
            let flows = format!("{FLOWS}\ntable=3,priority=1,actions=meter:1,output:2");
            let mut d = dp_full(&flows, GROUPS, meter);
            for (p, dt) in &pkts {
                let now = T0.plus_secs(*dt);
                d.process_burst(1, &mut vec![PacketBuf::from_slice(p)], now);
            }
            let mut c = d.take_counters();
            c.flow_hit(FlowId(9999), 60, T0);
            for _ in 0..ghost {
                c.table_lookup(3, ghost % 2 == 0);
                c.group_hit(77, 10);
                c.bucket_hit(1, 9, 10);
                c.meter_hit(1, Some(5), 10);
            }
            let mut bulk = d.state.clone();
            let mut slow = d.state.clone();
            bulk.fold(&c);
            slow.fold_per_packet(&c);
            let now = T0.plus_secs(9);
            for req in [
                ofp::multipart::MultipartRequestBody::Flow(crate::any_flow()),
                ofp::multipart::MultipartRequestBody::Table,
                ofp::multipart::MultipartRequestBody::Group { group_id: ofp::consts::group_no::ALL },
                ofp::multipart::MultipartRequestBody::Meter { meter_id: ofp::consts::meter_no::ALL },
            ] {
                prop_assert_eq!(bulk.multipart(&req, now), slow.multipart(&req, now));
            }
            // Idle timeouts see the same last hit.
            prop_assert_eq!(bulk.expire(T0.plus_secs(1000)), slow.expire(T0.plus_secs(1000)));
        }

        /// Two workers over one shared, read-only snapshot, each taking
        /// some of the packets, count exactly what one worker counts for
        /// all of them, and emit the same packets.
        #[test]
        fn two_workers_over_one_snapshot_equal_one(
            pkts in proptest::collection::vec((packet(), any::<bool>()), 1..16),
        ) {
            let snapshot = std::sync::Arc::new((
                state(FLOWS, GROUPS, ""),
                Ports::with_range(8),
                DatapathConfig::default(),
            ));
            let view = PipelineView::of(&snapshot.0, &snapshot.1, &snapshot.2);
            let mut single = WorkerState::new(0, 1, 16);
            let mut a = WorkerState::new(0, 2, 16);
            let mut b = WorkerState::new(1, 2, 16);
            let (mut o1, mut o2) = (BurstOutput::default(), BurstOutput::default());
            for (p, to_b) in &pkts {
                single.process_burst_into(&view, 1, &mut vec![PacketBuf::from_slice(p)], T0, &mut o1);
                let w = if *to_b { &mut b } else { &mut a };
                w.process_burst_into(&view, 1, &mut vec![PacketBuf::from_slice(p)], T0, &mut o2);
            }
            prop_assert_eq!(&o1.tx, &o2.tx);
            prop_assert_eq!(o1.packet_ins.len(), o2.packet_ins.len());
            let sum = Counters::sum([a.counters(), b.counters()]);
            prop_assert_eq!(&sum, single.counters());
            // Folded into two control states, every statistic agrees.
            let mut s1 = snapshot.0.clone();
            let mut s2 = snapshot.0.clone();
            s1.fold(single.counters());
            s2.fold(&sum);
            let req = ofp::multipart::MultipartRequestBody::Flow(crate::any_flow());
            prop_assert_eq!(s1.multipart(&req, T0), s2.multipart(&req, T0));
        }
    }
}

#[test]
fn datapath_port_mod_reaches_the_packet_side_and_multipart_counts_everything() {
    let mut d = dp("priority=1,actions=output:2");
    d.state.port_table.add_port(
        ofp::Port {
            port_no: 2,
            hw_addr: ofp::MacAddr(DST),
            ..ofp::Port::default()
        },
        T0,
    );
    assert_eq!(send(&mut d, 1, &udp4(64)).tx.len(), 1);
    let pm = ofp::PortMod {
        port_no: 2,
        hw_addr: ofp::MacAddr(DST),
        config: port_config::NO_FWD,
        mask: port_config::NO_FWD,
        advertise: 0,
    };
    assert!(d.port_mod(&pm).unwrap().is_some());
    let o = send(&mut d, 1, &udp4(64));
    assert!(o.tx.is_empty());
    assert_eq!(o.drops.port_down, 1);
    let req = ofp::multipart::MultipartRequestBody::PortStats { port_no: 2 };
    let Some(Ok(ofp::multipart::MultipartReplyBody::PortStats { stats })) = d.multipart(&req, T0)
    else {
        panic!()
    };
    assert_eq!((stats[0].tx_packets, stats[0].tx_dropped), (1, 1));
    let req = ofp::multipart::MultipartRequestBody::Flow(crate::any_flow());
    let Some(Ok(ofp::multipart::MultipartReplyBody::Flow { stats })) = d.multipart(&req, T0) else {
        panic!()
    };
    assert_eq!(stats[0].packet_count, 2);
}

#[test]
fn snapshot_and_workers_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Snapshot>();
    send_sync::<SwitchState>();
    send::<WorkerState>();
    send::<Counters>();
}

/// A shared snapshot of `st` with ports 1..=`ports` added.
fn snapshot_with_ports(mut st: SwitchState, ports: u32) -> std::sync::Arc<Snapshot> {
    for port_no in 1..=ports {
        let port = ofp::Port {
            port_no,
            ..ofp::Port::default()
        };
        st.port_table.add_port(port, T0);
    }
    std::sync::Arc::new(Snapshot::of(&st, DatapathConfig::default()))
}

/// Real threads: four workers over one `Arc<Snapshot>` count what one
/// worker counts for the same packets.
#[test]
fn threads_over_one_snapshot_sum_to_one_worker() {
    let flows = "priority=9,udp,actions=group:1\npriority=1,actions=output:3";
    let groups = "group_id=1,type=select,bucket=output:4,bucket=output:5";
    let st = state(flows, groups, "");
    let snap = snapshot_with_ports(st.clone(), 8);
    let packets: Vec<Vec<u8>> = (0..400u16)
        .map(|i| {
            if i % 3 == 0 {
                tcp4()
            } else {
                udp4_ports(64, 1000 + i, 2000)
            }
        })
        .collect();
    let mut single = WorkerState::new(0, 1, 0);
    let mut o = BurstOutput::default();
    let mut all: Vec<PacketBuf> = packets.iter().map(|p| PacketBuf::from_slice(p)).collect();
    single.process_burst_into(&snap.view(), 1, &mut all, T0, &mut o);
    let per_thread: Vec<Counters> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..4u32)
            .map(|k| {
                let snap = std::sync::Arc::clone(&snap);
                let mine: Vec<Vec<u8>> = packets
                    .iter()
                    .skip(k as usize)
                    .step_by(4)
                    .cloned()
                    .collect();
                sc.spawn(move || {
                    let mut w = WorkerState::new(k, 4, 0);
                    let mut out = BurstOutput::default();
                    for chunk in mine.chunks(32) {
                        let mut b: Vec<PacketBuf> =
                            chunk.iter().map(|p| PacketBuf::from_slice(p)).collect();
                        w.process_burst_into(&snap.view(), 1, &mut b, T0, &mut out);
                        out.clear();
                    }
                    w.take_counters()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let sum = Counters::sum(&per_thread);
    assert_eq!(&sum, single.counters());
    assert_eq!(sum.ports[&1].rx_packets, 400);
    let mut control = st;
    for port_no in 1..=8 {
        let port = ofp::Port {
            port_no,
            ..ofp::Port::default()
        };
        control.port_table.add_port(port, T0);
    }
    control.fold(&sum);
    let tx: u64 = control
        .port_table
        .port_stats(ofp::consts::port_no::ANY, T0)
        .iter()
        .map(|s| s.tx_packets)
        .sum();
    assert_eq!(tx, 400);
}

#[test]
fn workers_share_a_meter_rate_and_follow_meter_mods() {
    let mut s = state(
        "priority=1,actions=meter:1,output:2",
        "",
        "meter=1,pktps,burst,bands=type=drop,rate=10,burst_size=4",
    );
    let ports = Ports::with_range(8);
    let config = DatapathConfig::default();
    let mut a = WorkerState::new(0, 2, 0);
    let mut b = WorkerState::new(1, 2, 0);
    let mut single = WorkerState::new(0, 1, 0);
    let p = udp4(64);
    let burst =
        |n: usize| -> Vec<PacketBuf> { (0..n).map(|_| PacketBuf::from_slice(&p)).collect() };
    let ms = |t: u64| Time(T0.0 + t * 1_000_000);
    let run = |w: &mut WorkerState, s: &SwitchState, n: usize, t: Time| -> usize {
        let view = PipelineView::of(s, &ports, &config);
        let mut o = BurstOutput::default();
        w.process_burst_into(&view, 1, &mut burst(n), t, &mut o);
        o.tx.len()
    };
    // One bucket of 4 for both workers: what a takes, b does not get.
    assert_eq!(run(&mut a, &s, 4, T0), 4);
    assert_eq!(run(&mut b, &s, 4, T0), 0);
    // 200 ms at 10 packets/s: two tokens, whichever worker takes them.
    assert_eq!(run(&mut a, &s, 1, ms(200)), 1);
    assert_eq!(run(&mut b, &s, 2, ms(200)), 1);
    // All the traffic on one worker: the whole burst, not half of it.
    assert_eq!(run(&mut a, &s, 6, ms(1200)), 4);
    // A single worker measures with its own copy (and keeps it).
    assert_eq!(run(&mut single, &s, 6, ms(1200)), 4);
    assert_eq!(single.meters_mut().len(), 1);
    assert!(a.meters_mut().is_empty(), "shared buckets, no copies");
    // A METER_MOD replaces the meter and its buckets.
    let mm =
        flowtext::parse_meter_file("meter=1,pktps,burst,bands=type=drop,rate=100,burst_size=20")
            .unwrap()
            .remove(0);
    let mm = ofp::MeterMod {
        command: ofp::MeterModCommand::Modify,
        ..mm
    };
    s.meter_mod(&mm, ms(1200)).unwrap();
    assert_eq!(run(&mut a, &s, 12, ms(1200)), 12, "new bucket of 20");
    assert_eq!(run(&mut b, &s, 12, ms(1200)), 8);
    assert_eq!(run(&mut single, &s, 12, ms(1200)), 12, "new copy");
    // Counters fold into the control-side meter.
    let total = Counters::sum([a.counters(), b.counters()]);
    assert_eq!(total.meters[&1].packets, 4 + 4 + 1 + 2 + 6 + 12 + 12);
    s.fold(&total);
    let st = s
        .meters
        .stats(1, |m| s.tables.meter_flow_count(m), ms(1200));
    assert_eq!(st[0].packet_in_count, 41);
    assert_eq!(st[0].band_stats[0].packet_band_count, 4 + 1 + 2 + 4);
    single.meters_mut().prune(&s.meters);
    assert_eq!(single.meters_mut().len(), 1);
    s.meter_mod(
        &ofp::MeterMod {
            command: ofp::MeterModCommand::Delete,
            meter_id: 1,
            flags: 0,
            bands: Vec::new(),
        },
        T0,
    )
    .unwrap();
    single.meters_mut().prune(&s.meters);
    assert!(single.meters_mut().is_empty());
}

/// Real threads hammering one meter together pass what the meter passes:
/// its burst plus its rate over the time they ran, not more.
#[test]
fn threads_sharing_a_meter_pass_its_rate_in_aggregate() {
    let s = state(
        "priority=1,actions=meter:1,output:2",
        "",
        "meter=1,pktps,burst,bands=type=drop,rate=1000,burst_size=100",
    );
    let snap = snapshot_with_ports(s, 2);
    let p = udp4(64);
    // Four workers, 2000 packets each, at times spread over one second.
    let passed: usize = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..4u32)
            .map(|k| {
                let snap = std::sync::Arc::clone(&snap);
                let p = &p;
                sc.spawn(move || {
                    let mut w = WorkerState::new(k, 4, 0);
                    let mut out = BurstOutput::default();
                    let mut sent = 0;
                    for i in 0..2000u64 {
                        let t = Time(T0.0 + i * 500_000);
                        let mut b = vec![PacketBuf::from_slice(p)];
                        w.process_burst_into(&snap.view(), 1, &mut b, t, &mut out);
                        sent += out.tx.len();
                        out.clear();
                    }
                    sent
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    // 100 at once, then 1000/s up to the newest time any thread showed
    // (999.5 ms): an older time refills nothing, and no refill is counted
    // twice, however the threads interleave.
    assert!((1098..=1100).contains(&passed), "passed {passed}");
}

// ---- the express path ---------------------------------------------------------------

mod express_props {
    use super::*;
    use proptest::prelude::*;

    /// Table 0 of one in_port + VLAN mask (one key word): entries the
    /// express path runs (a fused rewrite or none, then an output) and
    /// entries it leaves to the general path (output to the ingress port,
    /// to the controller, to a port that cannot send, a goto, two
    /// outputs).
    const VLAN_FLOWS: &str =
        "table=0,priority=5,in_port=1,dl_vlan=5,actions=pop_vlan,push_mpls:0x8847,set_field:77->mpls_label,output:3\n\
         table=0,priority=5,in_port=1,dl_vlan=6,actions=output:2\n\
         table=0,priority=5,in_port=1,dl_vlan=7,actions=output:in_port\n\
         table=0,priority=5,in_port=1,dl_vlan=8,actions=CONTROLLER:64\n\
         table=0,priority=5,in_port=1,dl_vlan=9,actions=pop_vlan,push_mpls:0x8847,set_field:78->mpls_label,goto_table:1\n\
         table=0,priority=5,in_port=1,dl_vlan=10,actions=output:1\n\
         table=0,priority=5,in_port=1,dl_vlan=11,actions=output:9\n\
         table=0,priority=5,in_port=1,dl_vlan=12,actions=pop_vlan,push_mpls:0x8847,set_field:79->mpls_label,output:3,output:4\n\
         table=1,priority=1,actions=output:4";

    /// Table 0 of one in_port + EtherType + MPLS label mask (two words).
    const MPLS_FLOWS: &str =
        "table=0,priority=5,in_port=1,mpls,mpls_label=17,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4101->vlan_vid,output:4\n\
         table=0,priority=5,in_port=1,mpls,mpls_label=18,actions=output:2\n\
         table=0,priority=5,in_port=1,mpls,mpls_label=19,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4102->vlan_vid,output:1";

    /// Table 0 of one in_port + EtherType mask (one key word) whose
    /// entries decrement the TTL: the express path takes untagged IPv4
    /// frames and leaves tagged ones (their key is IPv4 too) and TTLs of
    /// 0 and 1 to the general path.
    const IP_FLOWS: &str =
        "table=0,priority=5,in_port=1,ip,actions=set_field:02:00:00:00:00:05->eth_dst,dec_ttl,output:2\n\
         table=0,priority=5,in_port=2,ip,actions=dec_ttl,output:1";

    /// Table-0 changes between bursts: new actions for an entry the
    /// express path runs (another port, another label, to the general
    /// path), a removal, and a new entry.
    const VLAN_CHANGES: [&str; 4] = [
        "table=0,priority=5,in_port=1,dl_vlan=6,actions=output:4",
        "table=0,priority=5,in_port=1,dl_vlan=5,actions=pop_vlan,push_mpls:0x8847,set_field:99->mpls_label,output:2",
        "delete table=0,priority=5,in_port=1,dl_vlan=5,actions=drop",
        "table=0,priority=5,in_port=1,dl_vlan=6,actions=CONTROLLER:64",
    ];
    const IP_CHANGES: [&str; 2] = [
        "table=0,priority=5,in_port=1,ip,actions=output:3",
        "delete table=0,priority=5,in_port=2,ip,actions=drop",
    ];
    const MPLS_CHANGES: [&str; 3] = [
        "table=0,priority=5,in_port=1,mpls,mpls_label=17,actions=output:3",
        "delete table=0,priority=5,in_port=1,mpls,mpls_label=18,actions=drop",
        "table=0,priority=5,in_port=1,mpls,mpls_label=20,actions=output:2",
    ];

    fn tagged(tpid: u16, vid: u16, inner: Vec<u8>) -> Vec<u8> {
        let mut t = inner;
        let [a, b] = tpid.to_be_bytes();
        let [c, d] = vid.to_be_bytes();
        t.splice(12..12, [a, b, c, d]);
        t
    }

    fn labelled(label: u32) -> Vec<u8> {
        let mut m = udp4(64);
        m[12] = 0x88;
        m[13] = 0x47;
        let lse = (label << 12) | 0x100 | 0x40;
        m.splice(14..14, lse.to_be_bytes());
        m
    }

    /// An IPv6/UDP frame with hop limit 33 and version nibble `version`.
    fn v6(version: u8) -> Vec<u8> {
        let mut ip = vec![0u8; 48];
        ip[0] = version << 4;
        ip[5] = 8;
        ip[6] = 17;
        ip[7] = 33;
        eth(0x86dd, &ip)
    }

    /// One of `templates`, with up to two random byte edits in its first
    /// 60 bytes and cut anywhere.
    fn mangled(templates: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
        super::props::mangled(templates, 60, 3)
    }

    /// The ingress port, the table-0 change (an index) and the
    /// table-miss entry ([`miss_entry`]'s `kind`) of one case.
    fn burst_case() -> impl Strategy<Value = (u32, usize, usize)> {
        (1u32..3, 0usize..4, 0usize..5)
    }

    /// Table-miss entries to put beside table 0's entries, by `kind`:
    /// none, below every entry (dropping, or sending), at priority `above`
    /// (above some or all of them), at `level` (level with some).
    fn miss_entry(kind: usize, above: u16, level: u16) -> String {
        match kind {
            0 => String::new(),
            1 => "\ntable=0,priority=0,actions=drop".into(),
            2 => "\ntable=0,priority=0,actions=output:4".into(),
            3 => format!("\ntable=0,priority={above},actions=output:2"),
            _ => format!("\ntable=0,priority={level},actions=output:3"),
        }
    }

    /// Runs `pkts` from `in_port` three times through a datapath with
    /// `flows` and through one with the same flows on the linear scan
    /// (the general path), `change` applied to both before the third run,
    /// and requires the same outputs, packet-ins, drops and counters of
    /// both; `offered` must hold for the first's table 0 (that it takes
    /// the express path).
    fn same_as_general(
        flows: &str,
        pkts: &[Vec<u8>],
        in_port: u32,
        change: &str,
        offered: impl Fn(&crate::tables::FlowTable) -> bool,
    ) -> Result<(), TestCaseError> {
        let mut fast = dp_full(flows, "", "");
        let mut slow = dp_full(flows, "", "");
        prop_assert!(offered(fast.state.tables.table(0).expect("table 0")));
        slow.set_reference_lookup(true);
        super::props::same_each_round(
            &mut fast,
            &mut slow,
            pkts,
            in_port,
            change,
            ofp::FlowModCommand::DeleteStrict,
        )
    }

    /// Gateway frames of every shape the express path declines or takes,
    /// with random byte edits and truncation.
    fn packet() -> impl Strategy<Value = Vec<u8>> {
        let mut templates: Vec<Vec<u8>> = (4..=13).map(|v| tagged(0x8100, v, udp4(64))).collect();
        templates.extend([
            tagged(0x8100, 5, tcp4()),
            tagged(0x8100, 6, udp4(1)),
            tagged(0x88a8, 5, tagged(0x8100, 6, udp4(64))),
            tagged(0x8100, 5, labelled(17)),
            tagged(0x8100, 5, v6(6)),
            tagged(0x8100, 5, v6(4)),
            tagged(0x8100, 5, eth(0x0806, &[0; 28])),
            udp4(64),
            udp4(1),
            udp4(0),
            labelled(17),
            labelled(18),
            labelled(19),
            labelled(20),
        ]);
        mangled(templates)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// A table-0 express table gives exactly the linear scan's (the
        /// general path's) outputs, packet-ins, drops and counters, for
        /// bursts mixing frames it takes and frames it hands on, from
        /// the port its rules name and from another, with and without
        /// table-miss entries of every priority.
        #[test]
        fn express_path_equals_the_general_path(
            set in 0usize..3,
            pkts in proptest::collection::vec(packet(), 1..40),
            (in_port, change, catch_all) in burst_case(),
        ) {
            let (flows, changes, words): (_, &[&str], _) = match set {
                0 => (VLAN_FLOWS, &VLAN_CHANGES, 1),
                1 => (MPLS_FLOWS, &MPLS_CHANGES, 2),
                _ => (IP_FLOWS, &IP_CHANGES, 1),
            };
            let flows = format!("{flows}{}", miss_entry(catch_all, 7, 5));
            same_as_general(&flows, &pkts, in_port, changes[change % changes.len()], |t| {
                t.l2_index().map(|i| i.words()) == Some(words)
            })?;
        }

        /// A table-0 route table gives exactly the linear scan's (the
        /// general path's) outputs, packet-ins, drops and counters, for
        /// bursts mixing frames the express path takes and frames it
        /// hands on, with and without table-miss entries of every
        /// priority, across table-0 changes.
        #[test]
        fn express_routes_equal_the_general_path(
            pkts in proptest::collection::vec(route_packet(), 1..40),
            (in_port, change, catch_all) in burst_case(),
        ) {
            let flows = format!("{ROUTE_FLOWS}{}", miss_entry(catch_all, 20, 16));
            same_as_general(&flows, &pkts, in_port, ROUTE_CHANGES[change], |t| {
                t.route_index().is_some()
            })?;
        }
    }

    /// Table 0 of IPv4 routes (the route engine): entries the express
    /// path runs (Ethernet address rewrites and a dec_ttl in either
    /// order, a bare output) and entries it leaves to the general path
    /// (two dec_ttls, output to the ingress port or a port that cannot
    /// send, to the controller, a goto, another set_field).
    const ROUTE_FLOWS: &str =
        "table=0,priority=8,ip,nw_dst=10.0.0.0/8,actions=set_field:02:00:00:00:00:01->eth_dst,dec_ttl,output:3\n\
         table=0,priority=16,ip,nw_dst=10.1.0.0/16,actions=dec_ttl,set_field:02:00:00:00:00:02->eth_src,set_field:02:00:00:00:00:03->eth_dst,output:2\n\
         table=0,priority=24,ip,nw_dst=10.1.2.0/24,actions=output:4\n\
         table=0,priority=24,ip,nw_dst=10.1.3.0/24,actions=dec_ttl,dec_ttl,output:4\n\
         table=0,priority=24,ip,nw_dst=10.1.4.0/24,actions=set_field:02:00:00:00:00:04->eth_dst,output:1\n\
         table=0,priority=24,ip,nw_dst=10.1.5.0/24,actions=dec_ttl,output:9\n\
         table=0,priority=24,ip,nw_dst=10.1.6.0/24,actions=dec_ttl,goto_table:1\n\
         table=0,priority=24,ip,nw_dst=10.1.7.0/24,actions=set_field:5->ip_dscp,output:2\n\
         table=0,priority=32,ip,nw_dst=10.1.2.7/32,actions=CONTROLLER:64\n\
         table=1,priority=1,actions=output:4";

    const ROUTE_CHANGES: [&str; 4] = [
        "table=0,priority=24,ip,nw_dst=10.1.2.0/24,actions=dec_ttl,output:3",
        "delete table=0,priority=16,ip,nw_dst=10.1.0.0/16,actions=drop",
        "table=0,priority=24,ip,nw_dst=10.2.0.0/24,actions=output:2",
        "table=0,priority=8,ip,nw_dst=10.0.0.0/8,actions=CONTROLLER:64",
    ];

    /// Frames for the route table: IPv4 to each route and to none, with
    /// TTLs that can and cannot be decremented, tagged, IPv6, ARP, with
    /// random byte edits (the version and header length nibble too) and
    /// truncation.
    fn route_packet() -> impl Strategy<Value = Vec<u8>> {
        let mut templates = Vec::new();
        let dsts = [
            [10, 0, 0, 1],
            [10, 1, 0, 1],
            [10, 1, 2, 1],
            [10, 1, 2, 7],
            [10, 1, 3, 1],
            [10, 1, 4, 1],
            [10, 1, 5, 1],
            [10, 1, 6, 1],
            [10, 1, 7, 1],
            [10, 2, 0, 9],
            [11, 0, 0, 1],
        ];
        for dst in dsts {
            for ttl in [64u8, 2, 1, 0] {
                let mut p = udp4(ttl);
                p[30..34].copy_from_slice(&dst);
                templates.push(p);
            }
        }
        templates.extend([
            tagged(0x8100, 5, udp4(64)),
            v6(6),
            eth(0x0806, &[0; 28]),
            tcp4(),
        ]);
        mangled(templates)
    }

    /// Sends a burst of 40 copies of `frame` from port 1 through a
    /// datapath with `flows`, checks all 40 leave by port 3 and that the
    /// ports, table 0 and the entries counted them; the burst's output.
    fn forty_from_port_1_to_port_3(flows: &str, frame: &[u8]) -> BurstOutput {
        let mut d = dp_full(flows, "", "");
        let mut b: Vec<PacketBuf> = (0..40).map(|_| PacketBuf::from_slice(frame)).collect();
        let out = d.process_burst(1, &mut b, T0);
        assert_eq!(out.tx.len(), 40);
        assert!(out.tx.ports().iter().all(|&p| p == 3));
        let c = d.counters();
        assert_eq!(c.ports[&1].rx_packets, 40);
        assert_eq!(c.ports[&3].tx_packets, 40);
        assert_eq!((c.tables[&0].lookups, c.tables[&0].matched), (40, 40));
        assert_eq!(c.by_flow().values().map(|f| f.packets).sum::<u64>(), 40);
        out
    }

    #[test]
    fn express_path_forwards_routed_frames_and_counts_them() {
        let out = forty_from_port_1_to_port_3(ROUTE_FLOWS, &udp4(64));
        let k = key_of(&out, 0);
        assert_eq!((k.eth_dst, k.ip_ttl), ([2, 0, 0, 0, 0, 1], 63));
        assert_eq!(
            packet::fixup::verify_checksums(out.tx.pkts()[0].as_slice()),
            Ok(())
        );
    }

    /// A table 0 whose entries all go on to later tables (Faucet's VLAN
    /// table) is not offered to the express path, which would pack and
    /// probe each burst only to hand it all on; one entry that leaves by
    /// a port brings it back, its removal takes it away again.
    #[test]
    fn express_path_is_offered_only_when_an_entry_leaves_by_a_port() {
        let flows = "table=0,priority=5,in_port=1,dl_vlan=5,actions=pop_vlan,goto_table:1\n\
                     table=0,priority=0,actions=CONTROLLER:64\n\
                     table=1,priority=1,actions=output:2";
        let mut d = dp_full(flows, "", "");
        let offered = |d: &Datapath| {
            d.state
                .tables
                .table(0)
                .expect("table 0")
                .l2_index()
                .is_some()
        };
        assert!(!offered(&d));
        let mut apply = |text: &str, cmd| {
            for mut fm in flowtext::parse_flow_file(text).unwrap() {
                fm.command = cmd;
                d.state.flow_mod(&fm, T0).unwrap();
            }
        };
        let leaving = "table=0,priority=5,in_port=1,dl_vlan=6,actions=output:2";
        apply(leaving, ofp::FlowModCommand::Add);
        let mut d2 = dp_full(&format!("{flows}\n{leaving}"), "", "");
        assert!(offered(&d2));
        apply(leaving, ofp::FlowModCommand::DeleteStrict);
        assert!(!offered(&d));
        // Forwarding is the same either way: tagged 5 leaves by port 2
        // untagged, through table 1.
        for dp in [&mut d, &mut d2] {
            let out = send(dp, 1, &tagged(0x8100, 5, udp4(64)));
            assert_eq!(out.tx.len(), 1);
            assert_eq!((out.tx.ports()[0], key_of(&out, 0).vlan_tags), (2, 0));
        }
    }

    #[test]
    fn express_path_forwards_gateway_frames_and_counts_them() {
        let out = forty_from_port_1_to_port_3(VLAN_FLOWS, &tagged(0x8100, 5, udp4(64)));
        let k = key_of(&out, 0);
        assert_eq!((k.eth_type, k.mpls_label, k.mpls_ttl), (0x8847, 77, 64));
    }
}

#[test]
fn the_local_port_is_an_ingress_port_and_flooded_to() {
    let mut d = dp("priority=2,in_port=LOCAL,actions=output:1,LOCAL\n\
         priority=2,in_port=1,actions=LOCAL\n\
         priority=1,actions=FLOOD");
    d.ports = Ports::with_range(3);
    d.ports.set(port_no::LOCAL, PortInfo::default());
    // in_port=LOCAL matches; output:LOCAL back to it is skipped (only
    // IN_PORT sends there).
    assert_eq!(out_ports(&send(&mut d, port_no::LOCAL, &udp4(64))), vec![1]);
    assert_eq!(out_ports(&send(&mut d, 1, &udp4(64))), vec![port_no::LOCAL]);
    // FLOOD includes the local port, except where the packet came in.
    assert_eq!(
        out_ports(&send(&mut d, 2, &udp4(64))),
        vec![1, 3, port_no::LOCAL]
    );
    let mut d = dp("priority=1,actions=FLOOD");
    d.ports = Ports::with_range(2);
    d.ports.set(port_no::LOCAL, PortInfo::default());
    assert_eq!(
        out_ports(&send(&mut d, port_no::LOCAL, &udp4(64))),
        vec![1, 2]
    );
}
