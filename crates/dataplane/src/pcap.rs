//! The pcap backend: replay a capture file as a port's RX side, and write
//! what a port sends to a capture file.
//!
//! Files are read by [`CaptureReader`], which tells the two formats apart
//! by their first four bytes: the classic libpcap format (a 24-byte file
//! header whose magic gives the byte order and the timestamp resolution,
//! `a1b2c3d4` microseconds, `a1b23c4d` nanoseconds, in either byte order,
//! then records of a 16-byte header, seconds, fraction, captured length,
//! original length, and the captured bytes), or pcapng (sections of
//! blocks, [`crate::pcapng`]). Only Ethernet (link type 1) frames are
//! accepted; anything else is a typed [`PcapError`]. What is written is
//! classic pcap, nanosecond resolution.
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

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::pcapng::{NgReader, SHB_TYPE};
use crate::port::{
    LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, TxBurst, DEFAULT_HEADROOM,
};

/// Magic of a microsecond-resolution file, as read in the writer's order.
const MAGIC_US: u32 = 0xa1b2_c3d4;
/// Magic of a nanosecond-resolution file.
const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest record accepted (libpcap's own maximum snapshot length).
pub const MAX_RECORD: u32 = 262_144;
const FILE_HEADER_LEN: u64 = 24;

/// What can be wrong with a capture file.
#[derive(Debug)]
pub enum PcapError {
    /// Reading or writing the file failed.
    Io(io::Error),
    /// The file is shorter than its 24-byte header.
    ShortHeader,
    /// The first four bytes are neither a classic pcap magic nor a pcapng
    /// section header.
    BadMagic(u32),
    /// A pcapng section of a major version other than 1.
    UnsupportedVersion(u16),
    /// A pcapng block whose structure is broken (the reason).
    Malformed(&'static str),
    /// The file holds frames of another link type than Ethernet.
    UnsupportedLinkType(u32),
    /// A record claims more captured bytes than allowed.
    RecordTooLarge {
        /// Captured length in the record header.
        incl_len: u32,
    },
    /// The file ends inside a record.
    TruncatedRecord,
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::Io(e) => write!(f, "{e}"),
            PcapError::ShortHeader => write!(f, "file is shorter than the 24-byte pcap header"),
            PcapError::BadMagic(m) => {
                write!(f, "not a pcap or pcapng file (magic {m:#010x})")
            }
            PcapError::UnsupportedVersion(v) => write!(f, "pcapng version {v} is not supported"),
            PcapError::Malformed(why) => write!(f, "corrupt pcapng file: {why}"),
            PcapError::UnsupportedLinkType(t) => write!(f, "link type {t} is not Ethernet (1)"),
            PcapError::RecordTooLarge { incl_len } => {
                write!(
                    f,
                    "record of {incl_len} bytes exceeds the {MAX_RECORD}-byte limit"
                )
            }
            PcapError::TruncatedRecord => write!(f, "file ends inside a record"),
        }
    }
}

impl std::error::Error for PcapError {}

impl From<io::Error> for PcapError {
    fn from(e: io::Error) -> Self {
        PcapError::Io(e)
    }
}

impl From<PcapError> for io::Error {
    fn from(e: PcapError) -> Self {
        match e {
            PcapError::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidData, other),
        }
    }
}

/// The parts of a file header a reader needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Multi-byte fields are big-endian.
    pub big_endian: bool,
    /// Timestamps carry nanoseconds (else microseconds).
    pub nanosecond: bool,
    /// Snapshot length the capture used.
    pub snaplen: u32,
    /// Link type of the frames.
    pub link_type: u32,
}

/// One record's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Capture time in nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// Bytes captured (and following the header).
    pub incl_len: u32,
    /// Bytes the frame had on the wire.
    pub orig_len: u32,
}

/// Reads a classic pcap file header, rejecting anything but Ethernet.
pub fn read_file_header(r: &mut impl Read) -> Result<FileHeader, PcapError> {
    let mut h = [0u8; FILE_HEADER_LEN as usize];
    read_full(r, &mut h).map_err(|e| match e {
        ReadFull::Eof | ReadFull::Partial => PcapError::ShortHeader,
        ReadFull::Io(e) => PcapError::Io(e),
    })?;
    parse_file_header(&h)
}

fn parse_file_header(h: &[u8; FILE_HEADER_LEN as usize]) -> Result<FileHeader, PcapError> {
    let le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let (big_endian, nanosecond) = match le {
        MAGIC_US => (false, false),
        MAGIC_NS => (false, true),
        m if m.swap_bytes() == MAGIC_US => (true, false),
        m if m.swap_bytes() == MAGIC_NS => (true, true),
        m => return Err(PcapError::BadMagic(m)),
    };
    let field = |i: usize| {
        let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let hdr = FileHeader {
        big_endian,
        nanosecond,
        snaplen: field(16),
        link_type: field(20),
    };
    if hdr.link_type != LINKTYPE_ETHERNET {
        return Err(PcapError::UnsupportedLinkType(hdr.link_type));
    }
    Ok(hdr)
}

/// A capture file being read, classic pcap or pcapng.
pub struct CaptureReader<R> {
    inner: R,
    format: Format,
}

enum Format {
    Classic(FileHeader),
    Ng(NgReader),
}

impl Format {
    /// Reads the start of a file and tells which format it is.
    fn read(r: &mut impl Read) -> Result<Format, PcapError> {
        let mut h = [0u8; FILE_HEADER_LEN as usize];
        let short = |e| match e {
            ReadFull::Eof | ReadFull::Partial => PcapError::ShortHeader,
            ReadFull::Io(e) => PcapError::Io(e),
        };
        read_full(r, &mut h[..4]).map_err(short)?;
        if u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == SHB_TYPE {
            return Ok(Format::Ng(NgReader::start(r)?));
        }
        read_full(r, &mut h[4..]).map_err(short)?;
        Ok(Format::Classic(parse_file_header(&h)?))
    }
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file's header (classic) or first section header (pcapng).
    pub fn new(mut inner: R) -> Result<CaptureReader<R>, PcapError> {
        let format = Format::read(&mut inner)?;
        Ok(CaptureReader { inner, format })
    }

    /// The next packet into `data` (its contents replaced); `Ok(None)` at
    /// a clean end of file.
    pub fn next_record(&mut self, data: &mut Vec<u8>) -> Result<Option<RecordHeader>, PcapError> {
        match &mut self.format {
            Format::Classic(h) => read_record(&mut self.inner, h, data),
            Format::Ng(ng) => ng.next_record(&mut self.inner, data),
        }
    }

    /// True for a pcapng file.
    pub fn is_pcapng(&self) -> bool {
        matches!(self.format, Format::Ng(_))
    }

    /// The classic file's header (`None` for pcapng, whose interfaces
    /// each have their own).
    pub fn classic_header(&self) -> Option<FileHeader> {
        match self.format {
            Format::Classic(h) => Some(h),
            Format::Ng(_) => None,
        }
    }

    /// The reader underneath.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read + Seek> CaptureReader<R> {
    /// Starts again from the beginning of the file.
    pub fn rewind(&mut self) -> Result<(), PcapError> {
        self.inner.seek(SeekFrom::Start(0))?;
        self.format = Format::read(&mut self.inner)?;
        Ok(())
    }
}

/// How [`read_full`] stopped short.
pub(crate) enum ReadFull {
    Eof,
    Partial,
    Io(io::Error),
}

/// Fills `buf`, telling a clean end of file from one in the middle.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<(), ReadFull> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 => return Err(ReadFull::Eof),
            Ok(0) => return Err(ReadFull::Partial),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadFull::Io(e)),
        }
    }
    Ok(())
}

/// Reads the next record into `data` (replacing its contents); `Ok(None)` at
/// a clean end of file.
pub fn read_record(
    r: &mut impl Read,
    file: &FileHeader,
    data: &mut Vec<u8>,
) -> Result<Option<RecordHeader>, PcapError> {
    let mut h = [0u8; 16];
    match read_full(r, &mut h) {
        Ok(()) => {}
        Err(ReadFull::Eof) => return Ok(None),
        Err(ReadFull::Partial) => return Err(PcapError::TruncatedRecord),
        Err(ReadFull::Io(e)) => return Err(PcapError::Io(e)),
    }
    let field = |i: usize| {
        let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
        if file.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let (sec, frac, incl_len, orig_len) = (field(0), field(4), field(8), field(12));
    if incl_len > MAX_RECORD {
        return Err(PcapError::RecordTooLarge { incl_len });
    }
    data.resize(incl_len as usize, 0);
    read_full(r, data).map_err(|e| match e {
        ReadFull::Io(e) => PcapError::Io(e),
        _ => PcapError::TruncatedRecord,
    })?;
    let frac_ns = if file.nanosecond {
        u64::from(frac)
    } else {
        u64::from(frac) * 1000
    };
    Ok(Some(RecordHeader {
        timestamp_ns: u64::from(sec) * 1_000_000_000 + frac_ns,
        incl_len,
        orig_len,
    }))
}

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
                    pkt.meta.timestamp_ns = rec.timestamp_ns;
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
        let n = pkts.len();
        for p in pkts.drain() {
            self.counters.tx_packets += 1;
            self.counters.tx_bytes += p.len() as u64;
        }
        Ok(n)
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
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC_NS.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&MAX_RECORD.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        writer.write_all(&h)?;
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
        let incl = frame.len().min(MAX_RECORD as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((now_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((now_ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        h[12..16].copy_from_slice(&u32::try_from(frame.len()).unwrap_or(u32::MAX).to_le_bytes());
        self.writer.write_all(&h)?;
        self.writer.write_all(frame.get(..incl).unwrap_or(frame))
    }
}

impl PortBackend for PcapCapture {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, _out: &mut RxBurst) -> io::Result<usize> {
        Ok(0)
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
                    self.counters.tx_packets += 1;
                    self.counters.tx_bytes += p.len() as u64;
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
        assert_eq!(got[0].meta.timestamp_ns, 10_000_005_000);
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
        assert_eq!(got[1].meta.timestamp_ns, 1);
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
