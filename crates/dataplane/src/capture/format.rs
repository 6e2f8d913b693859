//! What the capture formats share: the error every reader returns, a
//! record's header as the readers give it, the largest record accepted,
//! Ethernet's link type, and a read that tells a clean end of file from
//! a cut one.

use std::fmt;
use std::io::{self, Read};

/// Link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest record accepted (libpcap's own maximum snapshot length).
pub const MAX_RECORD: u32 = 262_144;
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

/// Fills `h` with the head of the next record: `false` at a clean end of
/// file, [`PcapError::TruncatedRecord`] when the file ends inside it.
pub(crate) fn read_record_head(r: &mut impl Read, h: &mut [u8]) -> Result<bool, PcapError> {
    match read_full(r, h) {
        Ok(()) => Ok(true),
        Err(ReadFull::Eof) => Ok(false),
        Err(ReadFull::Partial) => Err(PcapError::TruncatedRecord),
        Err(ReadFull::Io(e)) => Err(PcapError::Io(e)),
    }
}
