//! The pcap backend: replay a capture file as a port's RX side, and write
//! what a port sends to a capture file.
//!
//! Files are read by [`CaptureReader`], which takes classic pcap and
//! pcapng alike ([`crate::capture`] holds the formats). Only Ethernet
//! (link type 1) frames are accepted; anything else is a typed
//! [`PcapError`]. What is written is classic pcap, nanosecond resolution.
//!
//! [`PcapReplay`] streams the file (it is never loaded whole), as fast as
//! polled or paced to a packet rate, once or several times. A record that was
//! captured shorter than it was on the wire is not a whole frame: it is
//! dropped and counted in `rx_drops.truncated`. A corrupt record ends the
//! replay and is counted in `rx_drops.malformed` (the format has no way to
//! resynchronise). Each packet is one owned buffer (one copy out of the file).
//!
//! [`PcapCapture`] writes nanosecond-resolution records stamped with the time
//! of sending, through a buffer flushed by [`PortBackend::flush`] and on drop.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::capture::classic;
pub use crate::capture::{
    read_file_header, read_record, CaptureReader, FileHeader, PcapError, RecordHeader,
    LINKTYPE_ETHERNET, MAX_RECORD,
};
use crate::port::{
    LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, TxBurst, DEFAULT_HEADROOM,
};

/// A port whose RX side replays a capture file.
pub struct PcapReplay {
    name: String,
    reader: CaptureReader<BufReader<File>>,
    rate_pps: Option<f64>,
    /// Passes over the file still to start after the current one; `None` is forever.
    loops_left: Option<u64>,
    started: Option<Instant>,
    /// Records read (including dropped ones), for pacing.
    records: u64,
    finished: bool,
    scratch: Vec<u8>,
    counters: PortCounters,
}

impl PcapReplay {
    /// Opens `path` for one pass as fast as polled.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| {
            PcapError::Io(io::Error::new(e.kind(), format!("{}: {e}", path.display())))
        })?;
        let reader = CaptureReader::new(BufReader::with_capacity(1 << 16, file))?;
        Ok(PcapReplay {
            name: path.display().to_string(),
            reader,
            rate_pps: None,
            loops_left: Some(0),
            started: None,
            records: 0,
            finished: false,
            scratch: Vec::new(),
            counters: PortCounters::default(),
        })
    }

    /// Paces the replay to `pps` records per second from the first
    /// `rx_burst` (not positive and finite: unpaced).
    pub fn with_rate(mut self, pps: f64) -> Self {
        self.rate_pps = (pps.is_finite() && pps > 0.0).then_some(pps);
        self
    }

    /// Replays the file `passes` times in all (`None`: forever); 0 counts as 1.
    pub fn with_passes(mut self, passes: Option<u64>) -> Self {
        self.loops_left = passes.map(|p| p.saturating_sub(1));
        self
    }

    /// True when every pass is done (or the file turned out corrupt).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn allowance(&mut self, room: usize) -> u64 {
        let mut n = room as u64;
        if let Some(pps) = self.rate_pps {
            let started = *self.started.get_or_insert_with(Instant::now);
            let due = (started.elapsed().as_secs_f64() * pps) as u64;
            n = n.min(due.saturating_sub(self.records));
        }
        n
    }

    /// Starts the next pass if one is left; false when done.
    fn rewind(&mut self) -> Result<bool, PcapError> {
        match self.loops_left {
            Some(0) => Ok(false),
            other => {
                self.loops_left = other.map(|n| n - 1);
                self.reader.rewind()?;
                Ok(true)
            }
        }
    }
}

impl PortBackend for PcapReplay {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        if self.finished {
            return Ok(0);
        }
        // Records (kept or dropped) this call may still read.
        let mut budget = self.allowance(out.room());
        let mut got = 0;
        let mut empty_passes = 0;
        while budget > 0 && out.room() > 0 {
            match self.reader.next_record(&mut self.scratch) {
                Ok(Some(rec)) => {
                    empty_passes = 0;
                    self.records += 1;
                    budget -= 1;
                    if rec.incl_len < rec.orig_len {
                        self.counters.rx_drops.truncated += 1;
                        continue;
                    }
                    let mut pkt = PacketBuf::with_headroom(&self.scratch, DEFAULT_HEADROOM);
                    pkt.meta.set_timestamp_ns(rec.timestamp_ns);
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += pkt.len() as u64;
                    let _ = out.push(pkt);
                    got += 1;
                }
                Ok(None) => {
                    empty_passes += 1;
                    // A file with no records would loop forever without this.
                    if empty_passes > 1 || !self.rewind()? {
                        self.finished = true;
                        break;
                    }
                }
                Err(PcapError::Io(e)) => {
                    self.counters.rx_errors += 1;
                    self.finished = true;
                    return Err(e);
                }
                Err(_) => {
                    self.counters.rx_drops.malformed += 1;
                    self.finished = true;
                    break;
                }
            }
        }
        Ok(got)
    }

    /// A replay port has nowhere to send: packets are counted as sent and
    /// discarded.
    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        Ok(self.counters.discard_as_sent(pkts))
    }

    fn link_state(&self) -> LinkState {
        if self.finished {
            LinkState::Down
        } else {
            LinkState::Up
        }
    }

    fn stats(&self) -> PortCounters {
        self.counters
    }
}

/// A port whose TX side writes a capture file; it never receives.
pub struct PcapCapture {
    name: String,
    path: PathBuf,
    writer: BufWriter<File>,
    counters: PortCounters,
}

impl PcapCapture {
    /// Creates (or truncates) `path` and writes a nanosecond, Ethernet,
    /// little-endian file header.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let file = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let mut writer = BufWriter::with_capacity(1 << 16, file);
        classic::write_file_header(&mut writer)?;
        Ok(PcapCapture {
            name: path.display().to_string(),
            path: path.to_path_buf(),
            writer,
            counters: PortCounters::default(),
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_record(&mut self, frame: &[u8], now_ns: u64) -> io::Result<()> {
        classic::write_record(&mut self.writer, frame, now_ns)
    }
}

impl PortBackend for PcapCapture {
    fn name(&self) -> &str {
        &self.name
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        let now_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let n = pkts.len();
        let mut failure = None;
        for p in pkts.drain() {
            if failure.is_some() {
                self.counters.tx_errors += 1;
                continue;
            }
            match self.write_record(p.data(), now_ns) {
                Ok(()) => {
                    self.counters.count_tx(p.len());
                }
                Err(e) => {
                    self.counters.tx_errors += 1;
                    failure = Some(e);
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    fn link_state(&self) -> LinkState {
        LinkState::Up
    }

    fn stats(&self) -> PortCounters {
        self.counters
    }
}

impl Drop for PcapCapture {
    fn drop(&mut self) {
        let _ = self.writer.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::Burst;
    use std::time::Duration;

    /// A temporary file path unique to the test; removed on drop.
    struct TempPath(PathBuf);
    impl TempPath {
        fn new(test: &str) -> Self {
            TempPath(
                std::env::temp_dir().join(format!("fulmar-dp-{}-{test}.pcap", std::process::id())),
            )
        }
    }
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn frame(seq: u8, len: usize) -> Vec<u8> {
        let mut f = vec![seq; len];
        f[12] = 0x88;
        f[13] = 0xb5;
        f
    }

    fn drain_all(port: &mut PcapReplay) -> Vec<PacketBuf> {
        let mut all = Vec::new();
        let mut b = Burst::with_limit(7);
        while !port.is_finished() {
            port.rx_burst(&mut b).unwrap();
            all.extend(b.drain());
        }
        all
    }

    #[test]
    fn capture_then_replay_round_trips() {
        let tmp = TempPath::new("roundtrip");
        let frames: Vec<Vec<u8>> = (0..20u8)
            .map(|i| frame(i, 60 + usize::from(i) * 10))
            .collect();
        {
            let mut cap = PcapCapture::create(&tmp.0).unwrap();
            let mut b = Burst::with_limit(20);
            for f in &frames {
                b.push(PacketBuf::from_slice(f)).unwrap();
            }
            assert_eq!(cap.tx_burst(&mut b).unwrap(), 20);
            assert_eq!(cap.stats().tx_packets, 20);
        } // dropped: flushed
        let bytes = std::fs::read(&tmp.0).unwrap();
        assert_eq!(
            bytes.len(),
            24 + frames.iter().map(|f| 16 + f.len()).sum::<usize>()
        );
        let mut rp = PcapReplay::open(&tmp.0).unwrap();
        assert!(rp.reader.classic_header().unwrap().nanosecond);
        let got = drain_all(&mut rp);
        let got: Vec<Vec<u8>> = got.iter().map(|p| p.data().to_vec()).collect();
        assert_eq!(got, frames);
        assert_eq!(rp.stats().rx_packets, 20);
        assert_eq!(rp.link_state(), LinkState::Down);
    }

    /// A big-endian microsecond file built by hand, independent of the writer.
    fn big_endian_file(records: &[(u32, u32, &[u8], u32)]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&0xa1b2c3d4u32.to_be_bytes());
        v.extend_from_slice(&2u16.to_be_bytes());
        v.extend_from_slice(&4u16.to_be_bytes());
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&65535u32.to_be_bytes());
        v.extend_from_slice(&1u32.to_be_bytes());
        for (sec, usec, data, orig) in records {
            v.extend_from_slice(&sec.to_be_bytes());
            v.extend_from_slice(&usec.to_be_bytes());
            v.extend_from_slice(&(data.len() as u32).to_be_bytes());
            v.extend_from_slice(&orig.to_be_bytes());
            v.extend_from_slice(data);
        }
        v
    }

    #[test]
    fn reads_big_endian_microsecond_files_and_drops_truncated_records() {
        let tmp = TempPath::new("bigendian");
        let a = frame(1, 64);
        let b = frame(2, 40);
        let c = frame(3, 70);
        std::fs::write(
            &tmp.0,
            big_endian_file(&[(10, 5, &a, 64), (11, 6, &b, 100), (12, 7, &c, 70)]),
        )
        .unwrap();
        let mut rp = PcapReplay::open(&tmp.0).unwrap();
        let h = rp.reader.classic_header().unwrap();
        assert!(h.big_endian && !h.nanosecond);
        let got = drain_all(&mut rp);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].data(), &a[..]);
        assert_eq!(got[0].meta.timestamp_ns(), 10_000_005_000);
        assert_eq!(got[1].data(), &c[..]);
        let s = rp.stats();
        assert_eq!(s.rx_drops.truncated, 1);
        assert_eq!(s.rx_packets, 2);
    }

    #[test]
    fn corrupt_files_give_typed_errors() {
        let tmp = TempPath::new("corrupt");
        std::fs::write(&tmp.0, [0u8; 10]).unwrap();
        assert!(matches!(
            PcapReplay::open(&tmp.0),
            Err(PcapError::ShortHeader)
        ));
        std::fs::write(
            &tmp.0,
            [
                0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
        )
        .unwrap();
        // A pcapng section header without its byte-order magic.
        assert!(matches!(
            PcapReplay::open(&tmp.0),
            Err(PcapError::Malformed(_))
        ));
        std::fs::write(&tmp.0, b"GIF89a.. not a capture at all").unwrap();
        assert!(matches!(
            PcapReplay::open(&tmp.0),
            Err(PcapError::BadMagic(0x3846_4947))
        ));
        let mut f = big_endian_file(&[]);
        f[23] = 113; // Linux cooked capture
        std::fs::write(&tmp.0, &f).unwrap();
        assert!(matches!(
            PcapReplay::open(&tmp.0),
            Err(PcapError::UnsupportedLinkType(113))
        ));
        let e = PcapReplay::open("/nonexistent/dir/x.pcap").err().unwrap();
        assert!(e.to_string().contains("/nonexistent/dir/x.pcap"), "{e}");
    }

    #[test]
    fn corrupt_record_ends_replay_and_is_counted() {
        let tmp = TempPath::new("badrecord");
        let a = frame(1, 64);
        let mut f = big_endian_file(&[(1, 0, &a, 64)]);
        // A second record claiming 1 MB.
        f.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x10, 0, 0]);
        std::fs::write(&tmp.0, &f).unwrap();
        let mut rp = PcapReplay::open(&tmp.0).unwrap();
        assert_eq!(drain_all(&mut rp).len(), 1);
        assert_eq!(rp.stats().rx_drops.malformed, 1);
        // A record cut short by the end of the file.
        let mut f = big_endian_file(&[(1, 0, &a, 64)]);
        f.truncate(f.len() - 5);
        std::fs::write(&tmp.0, &f).unwrap();
        let mut rp = PcapReplay::open(&tmp.0).unwrap();
        assert_eq!(drain_all(&mut rp).len(), 0);
        assert_eq!(rp.stats().rx_drops.malformed, 1);
    }

    #[test]
    fn replays_several_passes_and_empty_files_end() {
        let tmp = TempPath::new("passes");
        let a = frame(1, 64);
        let b = frame(2, 64);
        std::fs::write(&tmp.0, big_endian_file(&[(1, 0, &a, 64), (1, 1, &b, 64)])).unwrap();
        let mut rp = PcapReplay::open(&tmp.0).unwrap().with_passes(Some(3));
        let got = drain_all(&mut rp);
        let firsts: Vec<u8> = got.iter().map(|p| p.data()[0]).collect();
        assert_eq!(firsts, vec![1, 2, 1, 2, 1, 2]);
        std::fs::write(&tmp.0, big_endian_file(&[])).unwrap();
        let mut rp = PcapReplay::open(&tmp.0).unwrap().with_passes(None);
        assert!(
            drain_all(&mut rp).is_empty(),
            "an empty file ends even when looping forever"
        );
    }

    #[test]
    fn replays_pcapng_files_as_well() {
        use crate::capture::{Direction, Frame, PcapngWriter};
        let tmp = TempPath::new("pcapng");
        let frames: Vec<Vec<u8>> = (0..3u8).map(|i| frame(i, 64)).collect();
        {
            let f = File::create(&tmp.0).unwrap();
            let mut w = PcapngWriter::new(f, "p1", 65535).unwrap();
            for (i, f) in frames.iter().enumerate() {
                w.write_frame(&Frame::copy_of(f, 65535, i as u64, Direction::Outbound))
                    .unwrap();
            }
        }
        let mut rp = PcapReplay::open(&tmp.0).unwrap().with_passes(Some(2));
        assert!(rp.reader.is_pcapng());
        let got = drain_all(&mut rp);
        let firsts: Vec<u8> = got.iter().map(|p| p.data()[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(got[1].meta.timestamp_ns(), 1);
    }

    #[test]
    fn replay_paces_to_rate() {
        let tmp = TempPath::new("paced");
        let a = frame(1, 64);
        let recs: Vec<(u32, u32, &[u8], u32)> = (0..1000).map(|i| (i, 0, &a[..], 64)).collect();
        std::fs::write(&tmp.0, big_endian_file(&recs)).unwrap();
        let mut rp = PcapReplay::open(&tmp.0).unwrap().with_rate(1000.0);
        let mut b = Burst::with_limit(10_000);
        let t0 = Instant::now();
        rp.rx_burst(&mut b).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        rp.rx_burst(&mut b).unwrap();
        let ms = t0.elapsed().as_millis() as usize;
        assert!(
            b.len() >= 45 && b.len() <= ms + 1,
            "{} packets after {ms} ms",
            b.len()
        );
    }
}
