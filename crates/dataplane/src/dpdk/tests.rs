//! Tests over DPDK virtual devices, without huge pages or NICs. The EAL
//! starts once per process, so every test starts it with the same
//! arguments ([`eal_up`]) and uses devices of its own names.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::ring_pipe;
use super::*;
use crate::pcap::{PcapCapture, PcapReplay};
use crate::port::{Burst, PacketBuf, PortBackend};

/// The EAL arguments of the tests (also what CI can run: no huge pages,
/// no PCI scan, no shared files).
pub(crate) fn test_args() -> Vec<String> {
    [
        "-l",
        "0",
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--log-level",
        "lib.eal:error",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

pub(crate) fn eal_up() {
    init(&test_args()).expect("EAL start");
}

/// A unique vdev name per call (`net_ring` + n), so tests never collide.
fn unique(kind: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{kind}{}", 100 + N.fetch_add(1, Ordering::Relaxed))
}

fn frame(i: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, i]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, i]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    for (k, b) in f.iter_mut().enumerate().skip(14) {
        *b = (k as u8) ^ i;
    }
    f
}

fn rx_all(p: &mut DpdkPort, want: usize) -> Vec<PacketBuf> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        let mut b = Burst::with_limit(32);
        p.rx_burst(&mut b).unwrap();
        got.extend(b.drain());
    }
    got
}

#[test]
fn ring_loopback_sends_copies_and_forwards_mbufs_in_place() {
    eal_up();
    let name = unique("net_ring");
    let mut p = DpdkPort::open(&DpdkConfig {
        devargs: name.clone(),
        mbufs: 2047,
        ..DpdkConfig::default()
    })
    .unwrap();
    assert_eq!(p.name(), name);
    assert_eq!(p.link_state(), crate::LinkState::Up);
    let base = p.mbufs_in_use();
    // Owned frames are copied into mbufs of the port's pool.
    let mut out = Burst::with_limit(32);
    for i in 0..8 {
        out.push(PacketBuf::from_slice(&frame(i, 60 + usize::from(i))))
            .unwrap();
    }
    assert_eq!(p.tx_burst(&mut out).unwrap(), 8);
    assert!(out.is_empty());
    let got = rx_all(&mut p, 8);
    assert_eq!(got.len(), 8);
    for (i, g) in got.iter().enumerate() {
        assert!(g.is_lent(), "received frames are lent mbufs");
        assert_eq!(g.data(), &frame(i as u8, 60 + i)[..]);
        assert!(g.headroom() >= 128, "the mbuf's headroom: {}", g.headroom());
    }
    // Rewritten in place, a push into the headroom, sent back as the same mbufs.
    let ptrs: Vec<*const u8> = got.iter().map(|g| g.data().as_ptr()).collect();
    let mut again = Burst::with_limit(32);
    for mut g in got {
        g.data_mut()[0] = 0xee;
        g.push_front(4).copy_from_slice(&[9, 9, 9, 9]);
        assert!(g.is_lent(), "a push within the headroom does not copy");
        again.push(g).unwrap();
    }
    assert_eq!(p.tx_burst(&mut again).unwrap(), 8);
    let back = rx_all(&mut p, 8);
    assert_eq!(back.len(), 8);
    for (i, g) in back.iter().enumerate() {
        assert_eq!(&g.data()[..5], &[9, 9, 9, 9, 0xee]);
        assert_eq!(&g.data()[5..], &frame(i as u8, 60 + i)[1..]);
        assert_eq!(
            g.data().as_ptr(),
            ptrs[i].wrapping_sub(4),
            "the same mbuf came back"
        );
    }
    drop(back);
    assert_eq!(p.mbufs_in_use(), base, "every mbuf went home");
    let s = p.stats();
    assert_eq!((s.tx_packets, s.rx_packets), (16, 16));
    assert_eq!(s.rx_bytes, s.tx_bytes);
}

#[test]
fn runts_and_oversize_frames_are_counted_drops() {
    eal_up();
    let mut p = DpdkPort::open(&DpdkConfig {
        devargs: unique("net_null"),
        mbufs: 1023,
        ..DpdkConfig::default()
    })
    .unwrap();
    let mut out = Burst::with_limit(4);
    out.push(PacketBuf::from_slice(&[1; 10])).unwrap();
    out.push(PacketBuf::from_slice(&vec![1; 5000])).unwrap();
    out.push(PacketBuf::from_slice(&frame(1, 64))).unwrap();
    assert_eq!(p.tx_burst(&mut out).unwrap(), 3);
    let s = p.stats();
    assert_eq!(
        (s.tx_drops.runt, s.tx_drops.oversize, s.tx_packets),
        (1, 1, 1)
    );
}

/// Brings the EAL up and opens a fresh null device of 64-byte frames with
/// `cfg`'s other settings.
fn null_port_of_64(cfg: DpdkConfig) -> DpdkPort {
    eal_up();
    DpdkPort::open(&DpdkConfig {
        devargs: format!("{},size=64", unique("net_null")),
        ..cfg
    })
    .unwrap()
}

#[test]
fn lent_mbufs_dropped_on_another_thread_go_home() {
    let mut p = null_port_of_64(DpdkConfig {
        mbufs: 4095,
        ..DpdkConfig::default()
    });
    let base = p.mbufs_in_use();
    let got = rx_all(&mut p, 100);
    assert!(got.len() >= 100);
    assert!(got.iter().all(|g| g.is_lent() && g.len() == 64));
    assert!(p.mbufs_in_use() >= base + 100);
    std::thread::spawn(move || drop(got)).join().unwrap();
    assert_eq!(p.mbufs_in_use(), base);
}

#[test]
fn queues_split_over_handles() {
    let mut p = null_port_of_64(DpdkConfig {
        rx_queues: 2,
        tx_queues: 3,
        mbufs: 8191,
        ..DpdkConfig::default()
    });
    let mut more = p.split_receivers().unwrap();
    assert_eq!(more.len(), 1, "one handle per further queue");
    assert!(
        p.split_receivers().unwrap().is_empty(),
        "each queue is handed out once"
    );
    let senders: Vec<_> = (0..3).map(|_| p.split_sender().unwrap()).collect();
    assert!(senders.iter().all(|s| s.is_some()));
    assert!(p.split_sender().unwrap().is_none(), "no fourth TX queue");
    // Both receive queues deliver.
    let mut b = Burst::with_limit(32);
    assert!(more[0].rx_burst(&mut b).unwrap() > 0);
    let mut b0 = Burst::with_limit(32);
    assert!(p.rx_burst(&mut b0).unwrap() > 0);
    // The first handle found no TX queue left to claim.
    let err = p.tx_burst(&mut b0).unwrap_err();
    assert!(err.to_string().contains("TX queues are taken"), "{err}");
    let mut senders: Vec<_> = senders.into_iter().flatten().collect();
    let mut s = senders.remove(0);
    assert_eq!(s.tx_burst(&mut b).unwrap(), 32);
    assert_eq!(s.stats().tx_packets, 32);
    // A dropped handle's queue is free again: the first handle sends on it.
    drop(s);
    let mut b1 = Burst::with_limit(32);
    assert!(more[0].rx_burst(&mut b1).unwrap() > 0);
    assert_eq!(p.tx_burst(&mut b1).unwrap(), 32);
    assert_eq!(p.tx_queue(), Some(0));
}

#[test]
fn pcap_in_and_out_through_the_vdev() {
    eal_up();
    let dir = std::env::temp_dir().join(format!("fulmar-dpdk-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (input, output) = (dir.join("in.pcap"), dir.join("out.pcap"));
    {
        let mut w = PcapCapture::create(&input).unwrap();
        let mut b = Burst::with_limit(32);
        for i in 0..20 {
            b.push(PacketBuf::from_slice(&frame(i, 64 + usize::from(i))))
                .unwrap();
        }
        w.tx_burst(&mut b).unwrap();
        w.flush().unwrap();
    }
    let name = unique("net_pcap");
    let mut p = DpdkPort::open(&DpdkConfig {
        devargs: format!(
            "{name},rx_pcap={},tx_pcap={}",
            input.display(),
            output.display()
        ),
        mbufs: 1023,
        ..DpdkConfig::default()
    })
    .unwrap();
    let got = rx_all(&mut p, 20);
    assert_eq!(got.len(), 20);
    let mut b = Burst::with_limit(32);
    for g in got {
        b.push(g).unwrap();
    }
    assert_eq!(p.tx_burst(&mut b).unwrap(), 20);
    drop(p); // closing the device writes the file out
    let mut r = PcapReplay::open(&output).unwrap();
    let mut back = Burst::with_limit(64);
    r.rx_burst(&mut back).unwrap();
    assert_eq!(back.len(), 20);
    for (i, g) in back.iter().enumerate() {
        assert_eq!(g.data(), &frame(i as u8, 64 + i)[..]);
    }
    // The same device name can be opened again once closed.
    let again = DpdkPort::open(&DpdkConfig {
        devargs: format!("{name},rx_pcap={}", input.display()),
        mbufs: 1023,
        ..DpdkConfig::default()
    });
    assert!(again.is_ok(), "{:?}", again.err());
    drop(again);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_devices_and_arguments_are_clear_errors() {
    eal_up();
    let e = DpdkPort::open(&DpdkConfig {
        devargs: "net_nosuchdriver0".into(),
        ..DpdkConfig::default()
    })
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot probe DPDK device \"net_nosuchdriver0\""),
        "{e}"
    );
    let e = DpdkPort::open(&DpdkConfig {
        devargs: format!("{},rx_pcap=/nonexistent/x.pcap", unique("net_pcap")),
        ..DpdkConfig::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("cannot probe"), "{e}");
    let name = unique("net_null");
    let p = DpdkPort::open(&DpdkConfig {
        devargs: name.clone(),
        mbufs: 1023,
        ..DpdkConfig::default()
    })
    .unwrap();
    let e = DpdkPort::open(&DpdkConfig {
        devargs: name.clone(),
        ..DpdkConfig::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("already a port"), "{e}");
    drop(p);
    let e = DpdkPort::open(&DpdkConfig {
        devargs: unique("net_null"),
        rx_queues: 5000,
        ..DpdkConfig::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
    // Asked as a wish, the queues are cut to what the device has.
    let pcap = std::env::temp_dir().join(format!("fulmar-dpdk-fit-{}.pcap", std::process::id()));
    PcapCapture::create(&pcap).unwrap().flush().unwrap();
    let mut fit = DpdkPort::open(&DpdkConfig {
        devargs: format!("{},rx_pcap={}", unique("net_pcap"), pcap.display()),
        rx_queues: 4,
        exact_rx_queues: false,
        tx_queues: 4,
        mbufs: 1023,
        ..DpdkConfig::default()
    })
    .unwrap();
    assert!(fit.split_receivers().unwrap().is_empty(), "one RX queue");
    let _ = std::fs::remove_file(&pcap);
    // A second start with other arguments is refused, naming both.
    let e = init(&["--no-huge".to_string()]).unwrap_err();
    assert!(e.to_string().contains("already runs"), "{e}");
    assert!(eal::check_args(&["--help".to_string()]).is_err());
}

#[test]
fn a_ring_pipe_carries_frames_both_ways() {
    eal_up();
    assert!(
        ring_pipe("pipe a", "pipe_b", 1024).is_err(),
        "a space in a name"
    );
    let (a, b) = ring_pipe(&unique("pa"), &unique("pb"), 1024).unwrap();
    let open = |n: &str| {
        DpdkPort::open(&DpdkConfig {
            devargs: n.to_string(),
            mbufs: 1023,
            ..DpdkConfig::default()
        })
        .unwrap()
    };
    let (mut pa, mut pb) = (open(&a), open(&b));
    let mut out = Burst::with_limit(8);
    for i in 0..8 {
        out.push(PacketBuf::from_slice(&frame(i, 64))).unwrap();
    }
    assert_eq!(pa.tx_burst(&mut out).unwrap(), 8);
    let got = rx_all(&mut pb, 8);
    assert_eq!(got.len(), 8);
    assert_eq!(got[3].data(), &frame(3, 64)[..]);
    let mut back = Burst::with_limit(8);
    for g in got {
        back.push(g).unwrap();
    }
    assert_eq!(pb.tx_burst(&mut back).unwrap(), 8);
    assert_eq!(rx_all(&mut pa, 8).len(), 8);
    assert!(rx_all(&mut pb, 1).is_empty(), "nothing loops back");
    let used = a.trim_start_matches("net_ring_");
    assert!(
        ring_pipe(used, &unique("pc"), 1024).is_err(),
        "a name is used once"
    );
}
