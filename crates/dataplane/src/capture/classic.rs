//! The classic libpcap format: a 24-byte file header whose magic gives
//! the byte order and the timestamp resolution (`a1b2c3d4` microseconds,
//! `a1b23c4d` nanoseconds, in either byte order), then records of a
//! 16-byte header (seconds, fraction, captured length, original length)
//! and the captured bytes. Only Ethernet (link type 1) frames are
//! accepted. What is written is little-endian, nanosecond resolution.

use std::io::{self, Read, Write};

use super::format::{
    read_full, read_record_head, PcapError, ReadFull, RecordHeader, LINKTYPE_ETHERNET, MAX_RECORD,
};

/// Magic of a microsecond-resolution file, as read in the writer's order.
const MAGIC_US: u32 = 0xa1b2_c3d4;
/// Magic of a nanosecond-resolution file.
const MAGIC_NS: u32 = 0xa1b2_3c4d;
pub(crate) const FILE_HEADER_LEN: u64 = 24;

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

/// Reads a classic pcap file header, rejecting anything but Ethernet.
pub fn read_file_header(r: &mut impl Read) -> Result<FileHeader, PcapError> {
    let mut h = [0u8; FILE_HEADER_LEN as usize];
    read_full(r, &mut h).map_err(|e| match e {
        ReadFull::Eof | ReadFull::Partial => PcapError::ShortHeader,
        ReadFull::Io(e) => PcapError::Io(e),
    })?;
    parse_file_header(&h)
}

pub(crate) fn parse_file_header(
    h: &[u8; FILE_HEADER_LEN as usize],
) -> Result<FileHeader, PcapError> {
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

/// Reads the next record into `data` (replacing its contents); `Ok(None)` at
/// a clean end of file.
pub fn read_record(
    r: &mut impl Read,
    file: &FileHeader,
    data: &mut Vec<u8>,
) -> Result<Option<RecordHeader>, PcapError> {
    let mut h = [0u8; 16];
    if !read_record_head(r, &mut h)? {
        return Ok(None);
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

/// Writes a nanosecond, Ethernet, little-endian file header.
pub(crate) fn write_file_header(w: &mut impl Write) -> io::Result<()> {
    let mut h = Vec::with_capacity(24);
    h.extend_from_slice(&MAGIC_NS.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    h.extend_from_slice(&MAX_RECORD.to_le_bytes());
    h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    w.write_all(&h)
}

/// Writes one record of `frame` (cut to [`MAX_RECORD`]) stamped `now_ns`.
pub(crate) fn write_record(w: &mut impl Write, frame: &[u8], now_ns: u64) -> io::Result<()> {
    let incl = frame.len().min(MAX_RECORD as usize);
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&((now_ns / 1_000_000_000) as u32).to_le_bytes());
    h[4..8].copy_from_slice(&((now_ns % 1_000_000_000) as u32).to_le_bytes());
    h[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
    h[12..16].copy_from_slice(&u32::try_from(frame.len()).unwrap_or(u32::MAX).to_le_bytes());
    w.write_all(&h)?;
    w.write_all(frame.get(..incl).unwrap_or(frame))
}
