//! parse_bench: a rough throughput figure for the flow-key parser and a few
//! rewrites on a handful of packet shapes (`cargo run --release -p packet
//! --example parse_bench`). Prints nanoseconds per packet; asserts nothing.

use packet::buffer::PacketBuf;
use packet::flow_key::FlowKey;
use packet::set_field::{set_field_with_key, FieldValue};
use std::hint::black_box;
use std::time::Instant;

fn frame(ethertype: u16, tags: usize, l3: &[u8]) -> Vec<u8> {
    let mut v = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    for _ in 0..tags {
        v.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
    }
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(l3);
    v
}

fn ipv4_tcp() -> Vec<u8> {
    let mut ip = vec![
        0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip.extend_from_slice(&[
        0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0x20, 0, 0, 0, 0, 0,
    ]);
    ip
}

fn ipv6_udp() -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0, 0, 16, 17, 64];
    ip.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    ip.extend_from_slice(&[0, 53, 0, 53, 0, 16, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    ip
}

fn time(name: &str, n: u32, mut f: impl FnMut()) {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    println!("{name:<34} {ns:8.1} ns/packet");
}

fn main() {
    let n = 2_000_000;
    let shapes = [
        ("ipv4/tcp", frame(0x0800, 0, &ipv4_tcp())),
        ("vlan/ipv4/tcp", frame(0x0800, 1, &ipv4_tcp())),
        ("ipv6/udp", frame(0x86dd, 0, &ipv6_udp())),
        ("mpls", frame(0x8847, 0, &[0, 1, 0x01, 64])),
    ];
    for (name, p) in &shapes {
        time(&format!("parse {name}"), n, || {
            black_box(FlowKey::parse(black_box(p)));
        });
    }
    let mut p = shapes[1].1.clone();
    let k = FlowKey::parse(&p);
    time("set ipv4_dst (with key)", n, || {
        let _ = set_field_with_key(black_box(&mut p), &k, &FieldValue::Ipv4Dst(0x0a00_0009));
    });
    let mut b = PacketBuf::from_slice(&shapes[0].1);
    time("push_vlan + pop_vlan", n, || {
        let _ = b.push_vlan(0x8100);
        let _ = b.pop_vlan();
    });
    time("dec_nw_ttl + set_nw_ttl", n, || {
        let _ = packet::ttl::dec_nw_ttl(b.as_mut_slice());
        let _ = packet::ttl::set_nw_ttl(b.as_mut_slice(), 64);
    });
}
