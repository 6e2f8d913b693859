//! The pcapng file format: its block and option numbers, a reader of the
//! packets in it (used through [`super::CaptureReader`]) and the writer
//! of live captures ([`PcapngWriter`]).
//!
//! # What the reader accepts
//!
//! A file is one or more sections. Each starts with a Section Header
//! Block, whose byte-order magic tells the byte order of everything up
//! to the next section (the block type `0x0A0D0D0A` reads the same both
//! ways, so the magic is read before the block's length can be). Within a
//! section, Interface Description Blocks are numbered from 0 in order and
//! carry the link type, the snap length and the timestamp unit
//! (`if_tsresol`: 10^-n seconds, or 2^-n when the top bit is set;
//! microseconds when absent). Packets come in Enhanced Packet Blocks
//! (interface, 64-bit timestamp, captured and original length, data),
//! Simple Packet Blocks (interface 0, no timestamp, original length, data)
//! and the obsolete Packet Block. Every other block type (name resolution,
//! statistics, custom, ...) is skipped.
//!
//! Like the classic reader, only Ethernet is accepted: a packet on an
//! interface of another link type is an error, not skipped, so a replay
//! never silently sends less than the file holds. Every length is checked
//! against the block's own length before it is used; a block claims at
//! most [`MAX_BLOCK`] bytes, so a corrupt length cannot make the reader
//! allocate without bound. Timestamps become nanoseconds since 1970,
//! saturating rather than wrapping for units that would overflow.

//! # The writer
//!
//! Written by hand after the pcapng specification draft
//! (draft-ietf-opsawg-pcapng). Every block is a 32-bit block type, a 32-bit
//! total length (of the whole block, both length fields included), a body,
//! and the total length again, so a reader can walk forward and backward;
//! bodies are padded to a multiple of 4 bytes. Options are a list of
//! (16-bit code, 16-bit value length, value padded to 4 bytes) ended by
//! code 0 length 0. All integers are in the writer's byte order, which the
//! reader learns from the section header; this writer uses little-endian.
//!
//! - Section Header Block (type `0x0A0D0D0A`): byte-order magic
//!   `0x1A2B3C4D`, version 1.0 (two 16-bit fields), section length as a
//!   64-bit signed integer (-1: not given), options (none here). 28 bytes.
//! - Interface Description Block (type 1): link type (16 bits; 1 is
//!   Ethernet), 16 reserved bits, snap length (32 bits), options:
//!   `if_name` (code 2, UTF-8, the port's name) and `if_tsresol` (code 9,
//!   one byte: 9 means timestamps count 10^-9 s). Packets refer to
//!   interfaces by their order in the section, so this one is interface 0.
//! - Enhanced Packet Block (type 6): interface id (32 bits), timestamp as
//!   two 32-bit halves (high then low) of a 64-bit count of `if_tsresol`
//!   units since 1970, captured length, original length, the captured
//!   bytes padded to 4, options: `epb_flags` (code 2, 32 bits; the low two
//!   bits are the direction, 1 inbound, 2 outbound).

use std::io::{self, Read, Write};

use super::format::{read_full, read_record_head, PcapError, ReadFull, RecordHeader, MAX_RECORD};
use super::frame::Frame;

/// Section Header Block type.
pub const SHB_TYPE: u32 = 0x0A0D_0D0A;
/// Byte-order magic of the Section Header Block.
pub const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// Interface Description Block type.
pub const IDB_TYPE: u32 = 1;
/// Obsolete Packet Block type (read, never written).
pub const PB_TYPE: u32 = 2;
/// Simple Packet Block type (read, never written).
pub const SPB_TYPE: u32 = 3;
/// Enhanced Packet Block type.
pub const EPB_TYPE: u32 = 6;
/// Link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u16 = 1;
/// End of an option list.
pub const OPT_END: u16 = 0;
/// `if_name`: the interface's name (UTF-8).
pub const OPT_IF_NAME: u16 = 2;
/// `if_tsresol`: one byte, the interface's timestamp unit.
pub const OPT_IF_TSRESOL: u16 = 9;
/// `epb_flags`: 32 bits; the low two are the direction.
pub const OPT_EPB_FLAGS: u16 = 2;

/// Largest block accepted: a maximal record plus room for its options.
pub const MAX_BLOCK: u32 = MAX_RECORD + 65_536;

/// The unit an interface's timestamps count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TsUnit {
    /// 10^-n seconds.
    Decimal(u8),
    /// 2^-n seconds.
    Binary(u8),
}

impl TsUnit {
    fn from_option(v: u8) -> TsUnit {
        if v & 0x80 == 0 {
            TsUnit::Decimal(v)
        } else {
            TsUnit::Binary(v & 0x7f)
        }
    }

    /// `ticks` of this unit in nanoseconds (saturating at `u64::MAX`).
    fn to_ns(self, ticks: u64) -> u64 {
        let ns = match self {
            TsUnit::Decimal(n) if n <= 9 => u128::from(ticks) * 10u128.pow(9 - u32::from(n)),
            // 10^20 is more than any u64: every tick count rounds to 0.
            TsUnit::Decimal(n) if n - 9 >= 20 => 0,
            TsUnit::Decimal(n) => u128::from(ticks) / 10u128.pow(u32::from(n) - 9),
            // ticks < 2^64 and 10^9 < 2^30: the product fits in u128.
            TsUnit::Binary(n) => (u128::from(ticks) * 1_000_000_000) >> n,
        };
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

#[derive(Clone, Copy, Debug)]
struct Interface {
    link_type: u16,
    unit: TsUnit,
}

/// Reads the packets of a pcapng file, block by block.
#[derive(Debug)]
pub struct NgReader {
    big_endian: bool,
    interfaces: Vec<Interface>,
    block: Vec<u8>,
}

/// The body of one block (both length fields and the type removed), with
/// the section's byte order.
struct Body<'a> {
    b: &'a [u8],
    big_endian: bool,
}

impl Body<'_> {
    fn u16_at(&self, i: usize) -> Result<u16, PcapError> {
        let s = self
            .b
            .get(i..i + 2)
            .ok_or(PcapError::Malformed("block too short for its fields"))?;
        let a = [s[0], s[1]];
        Ok(if self.big_endian {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }

    fn u32_at(&self, i: usize) -> Result<u32, PcapError> {
        let s = self
            .b
            .get(i..i + 4)
            .ok_or(PcapError::Malformed("block too short for its fields"))?;
        let a = [s[0], s[1], s[2], s[3]];
        Ok(if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }

    /// The value of the first option `code` in the option list at `at`.
    fn option(&self, mut at: usize, code: u16) -> Result<Option<&[u8]>, PcapError> {
        // An option list may also simply end with the body.
        while at + 4 <= self.b.len() {
            let (c, len) = (self.u16_at(at)?, usize::from(self.u16_at(at + 2)?));
            if c == OPT_END {
                break;
            }
            let value = self
                .b
                .get(at + 4..at + 4 + len)
                .ok_or(PcapError::Malformed("option runs past its block"))?;
            if c == code {
                return Ok(Some(value));
            }
            at += 4 + len.next_multiple_of(4);
        }
        Ok(None)
    }
}

impl NgReader {
    /// Reads the rest of the first Section Header Block, whose type (the
    /// file's first four bytes) the caller has read already.
    pub fn start(r: &mut impl Read) -> Result<NgReader, PcapError> {
        let mut reader = NgReader {
            big_endian: false,
            interfaces: Vec::new(),
            block: Vec::new(),
        };
        reader.section(r, true)?;
        Ok(reader)
    }

    /// Reads a Section Header Block after its type: length and byte-order
    /// magic first, then the rest. `first`: a file that ends here is too
    /// short, not empty.
    fn section(&mut self, r: &mut impl Read, first: bool) -> Result<(), PcapError> {
        let mut h = [0u8; 8];
        read_full(r, &mut h).map_err(|e| match e {
            ReadFull::Io(e) => PcapError::Io(e),
            _ if first => PcapError::ShortHeader,
            _ => PcapError::TruncatedRecord,
        })?;
        let magic = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        self.big_endian = match magic {
            BYTE_ORDER_MAGIC => false,
            m if m.swap_bytes() == BYTE_ORDER_MAGIC => true,
            _ => {
                return Err(PcapError::Malformed(
                    "section header without its byte-order magic",
                ))
            }
        };
        let raw = [h[0], h[1], h[2], h[3]];
        let total = if self.big_endian {
            u32::from_be_bytes(raw)
        } else {
            u32::from_le_bytes(raw)
        };
        // Type, length, magic, version (4), section length (8), trailer.
        if !(28..=MAX_BLOCK).contains(&total) || !total.is_multiple_of(4) {
            return Err(PcapError::Malformed("section header of impossible length"));
        }
        self.read_rest(r, total, 12)?;
        let body = Body {
            b: &self.block,
            big_endian: self.big_endian,
        };
        let major = body.u16_at(0)?;
        if major != 1 {
            return Err(PcapError::UnsupportedVersion(major));
        }
        self.interfaces.clear();
        Ok(())
    }

    /// Reads the block's remaining `total - already` bytes, keeps all but
    /// the trailing length in `self.block`, and checks that trailer.
    fn read_rest(&mut self, r: &mut impl Read, total: u32, already: u32) -> Result<(), PcapError> {
        let rest = (total - already) as usize;
        self.block.resize(rest, 0);
        read_full(r, &mut self.block).map_err(|e| match e {
            ReadFull::Io(e) => PcapError::Io(e),
            _ => PcapError::TruncatedRecord,
        })?;
        let body = Body {
            b: &self.block,
            big_endian: self.big_endian,
        };
        if body.u32_at(rest - 4)? != total {
            return Err(PcapError::Malformed("block lengths at its two ends differ"));
        }
        self.block.truncate(rest - 4);
        Ok(())
    }

    /// Reads blocks until the next packet, puts its bytes in `data` and
    /// returns its header; `Ok(None)` at a clean end of file.
    pub fn next_record(
        &mut self,
        r: &mut impl Read,
        data: &mut Vec<u8>,
    ) -> Result<Option<RecordHeader>, PcapError> {
        loop {
            let mut h = [0u8; 4];
            if !read_record_head(r, &mut h)? {
                return Ok(None);
            }
            if u32::from_le_bytes(h) == SHB_TYPE {
                self.section(r, false)?;
                continue;
            }
            let kind = self.word(h);
            read_full(r, &mut h).map_err(|e| match e {
                ReadFull::Io(e) => PcapError::Io(e),
                _ => PcapError::TruncatedRecord,
            })?;
            let total = self.word(h);
            if !(12..=MAX_BLOCK).contains(&total) || !total.is_multiple_of(4) {
                return Err(PcapError::Malformed("block of impossible length"));
            }
            self.read_rest(r, total, 8)?;
            if let Some(rec) = self.packet(kind, data)? {
                return Ok(Some(rec));
            }
        }
    }

    fn word(&self, b: [u8; 4]) -> u32 {
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    /// Interprets the block in `self.block`: an interface is remembered, a
    /// packet returned, anything else skipped.
    fn packet(&mut self, kind: u32, data: &mut Vec<u8>) -> Result<Option<RecordHeader>, PcapError> {
        let body = Body {
            b: &self.block,
            big_endian: self.big_endian,
        };
        // (interface, timestamp ticks, captured length, original length, data offset)
        let (iface, ticks, incl_len, orig_len, at) = match kind {
            IDB_TYPE => {
                let link_type = body.u16_at(0)?;
                let unit = match body.option(8, OPT_IF_TSRESOL)? {
                    Some([v, ..]) => TsUnit::from_option(*v),
                    _ => TsUnit::Decimal(6),
                };
                self.interfaces.push(Interface { link_type, unit });
                return Ok(None);
            }
            EPB_TYPE => (
                body.u32_at(0)?,
                (u64::from(body.u32_at(4)?) << 32) | u64::from(body.u32_at(8)?),
                body.u32_at(12)?,
                body.u32_at(16)?,
                20,
            ),
            PB_TYPE => (
                u32::from(body.u16_at(0)?),
                (u64::from(body.u32_at(4)?) << 32) | u64::from(body.u32_at(8)?),
                body.u32_at(12)?,
                body.u32_at(16)?,
                20,
            ),
            SPB_TYPE => {
                let orig = body.u32_at(0)?;
                // The data fills the block; a shorter frame is padded.
                let room = u32::try_from(body.b.len() - 4).unwrap_or(u32::MAX);
                (0, 0, orig.min(room), orig, 4)
            }
            _ => return Ok(None),
        };
        let iface = *self
            .interfaces
            .get(iface as usize)
            .ok_or(PcapError::Malformed(
                "packet on an interface never described",
            ))?;
        if iface.link_type != LINKTYPE_ETHERNET {
            return Err(PcapError::UnsupportedLinkType(u32::from(iface.link_type)));
        }
        if incl_len > MAX_RECORD {
            return Err(PcapError::RecordTooLarge { incl_len });
        }
        let bytes = body
            .b
            .get(at..at + incl_len as usize)
            .ok_or(PcapError::Malformed("packet runs past its block"))?;
        data.clear();
        data.extend_from_slice(bytes);
        Ok(Some(RecordHeader {
            timestamp_ns: iface.unit.to_ns(ticks),
            incl_len,
            orig_len,
        }))
    }
}

/// Writes a pcapng section with one Ethernet interface, then a block per
/// frame. Each block is assembled in a buffer and written with one call.
pub struct PcapngWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    frames: u64,
}

fn put16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// Pads `b` with zeros to a multiple of 4 bytes.
fn pad4(b: &mut Vec<u8>) {
    while !b.len().is_multiple_of(4) {
        b.push(0);
    }
}

/// An option: code, length, value padded to 4 bytes.
fn put_option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    put16(b, code);
    put16(b, u16::try_from(value.len()).unwrap_or(u16::MAX));
    b.extend_from_slice(value.get(..usize::from(u16::MAX)).unwrap_or(value));
    pad4(b);
}

/// Starts a block of `kind` in `b` (cleared); [`end_block`] fills in the
/// lengths.
fn begin_block(b: &mut Vec<u8>, kind: u32) {
    b.clear();
    put32(b, kind);
    put32(b, 0);
}

fn end_block(b: &mut Vec<u8>) {
    pad4(b);
    let total = u32::try_from(b.len() + 4).unwrap_or(u32::MAX);
    put32(b, total);
    if let Some(len) = b.get_mut(4..8) {
        len.copy_from_slice(&total.to_le_bytes());
    }
}

impl<W: Write> PcapngWriter<W> {
    /// Writes the Section Header Block and the Interface Description Block
    /// of interface 0 (Ethernet, named `if_name`, nanosecond timestamps).
    pub fn new(out: W, if_name: &str, snaplen: usize) -> io::Result<PcapngWriter<W>> {
        let mut w = PcapngWriter {
            out,
            buf: Vec::with_capacity(2048),
            frames: 0,
        };
        let b = &mut w.buf;
        begin_block(b, SHB_TYPE);
        put32(b, BYTE_ORDER_MAGIC);
        put16(b, 1);
        put16(b, 0);
        b.extend_from_slice(&(-1i64).to_le_bytes());
        end_block(b);
        w.out.write_all(&w.buf)?;

        let b = &mut w.buf;
        begin_block(b, IDB_TYPE);
        put16(b, LINKTYPE_ETHERNET);
        put16(b, 0);
        put32(b, u32::try_from(snaplen).unwrap_or(u32::MAX));
        if !if_name.is_empty() {
            put_option(b, OPT_IF_NAME, if_name.as_bytes());
        }
        put_option(b, OPT_IF_TSRESOL, &[9]);
        put_option(b, OPT_END, &[]);
        end_block(b);
        w.out.write_all(&w.buf)?;
        Ok(w)
    }

    /// Writes `f` as an Enhanced Packet Block on interface 0.
    pub fn write_frame(&mut self, f: &Frame) -> io::Result<()> {
        let b = &mut self.buf;
        begin_block(b, EPB_TYPE);
        put32(b, 0);
        put32(b, (f.ts_ns >> 32) as u32);
        put32(b, f.ts_ns as u32);
        put32(b, u32::try_from(f.bytes.len()).unwrap_or(u32::MAX));
        put32(b, f.orig_len);
        b.extend_from_slice(&f.bytes);
        pad4(b);
        put_option(b, OPT_EPB_FLAGS, &f.direction.epb_flags().to_le_bytes());
        put_option(b, OPT_END, &[]);
        end_block(b);
        self.out.write_all(&self.buf)?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::capture::{read, Direction};

    /// A frame of `n` bytes of `fill` (also used by the live tap's tests).
    pub(crate) fn frame(n: usize, fill: u8, direction: Direction, ts_ns: u64) -> Frame {
        Frame {
            ts_ns,
            direction,
            orig_len: n as u32,
            bytes: vec![fill; n],
        }
    }

    /// A block in big-endian order built by hand, independent of the writer.
    fn be_block(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut b = body.to_vec();
        while !b.len().is_multiple_of(4) {
            b.push(0);
        }
        let total = (b.len() + 12) as u32;
        let mut v = kind.to_be_bytes().to_vec();
        v.extend_from_slice(&total.to_be_bytes());
        v.extend_from_slice(&b);
        v.extend_from_slice(&total.to_be_bytes());
        v
    }

    fn be_section() -> Vec<u8> {
        let mut body = BYTE_ORDER_MAGIC.to_be_bytes().to_vec();
        body.extend_from_slice(&1u16.to_be_bytes());
        body.extend_from_slice(&0u16.to_be_bytes());
        body.extend_from_slice(&(-1i64).to_be_bytes());
        be_block(SHB_TYPE, &body)
    }

    fn be_interface(link: u16, tsresol: Option<u8>) -> Vec<u8> {
        let mut body = link.to_be_bytes().to_vec();
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&65535u32.to_be_bytes());
        if let Some(r) = tsresol {
            body.extend_from_slice(&OPT_IF_TSRESOL.to_be_bytes());
            body.extend_from_slice(&1u16.to_be_bytes());
            body.extend_from_slice(&[r, 0, 0, 0]);
            body.extend_from_slice(&[0; 4]);
        }
        be_block(IDB_TYPE, &body)
    }

    fn be_epb(iface: u32, ticks: u64, data: &[u8], orig: u32) -> Vec<u8> {
        let mut body = iface.to_be_bytes().to_vec();
        body.extend_from_slice(&((ticks >> 32) as u32).to_be_bytes());
        body.extend_from_slice(&(ticks as u32).to_be_bytes());
        body.extend_from_slice(&(data.len() as u32).to_be_bytes());
        body.extend_from_slice(&orig.to_be_bytes());
        body.extend_from_slice(data);
        be_block(EPB_TYPE, &body)
    }

    fn read_all(file: &[u8]) -> Result<Vec<(RecordHeader, Vec<u8>)>, PcapError> {
        let mut r = file;
        let mut first = [0u8; 4];
        r.read_exact(&mut first).unwrap();
        assert_eq!(u32::from_le_bytes(first), SHB_TYPE);
        let mut ng = NgReader::start(&mut r)?;
        let mut out = Vec::new();
        let mut data = Vec::new();
        while let Some(h) = ng.next_record(&mut r, &mut data)? {
            out.push((h, data.clone()));
        }
        Ok(out)
    }

    #[test]
    fn reads_what_the_capture_writer_writes() {
        let mut file = Vec::new();
        let mut w = PcapngWriter::new(&mut file, "p1", 65535).unwrap();
        let frames: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
        for (i, f) in frames.iter().enumerate() {
            let fr = Frame::copy_of(
                f,
                65535,
                1_700_000_000_123_456_789 + i as u64,
                Direction::Inbound,
            );
            w.write_frame(&fr).unwrap();
        }
        drop(w);
        let got = read_all(&file).unwrap();
        assert_eq!(got.len(), 5);
        for (i, (h, d)) in got.iter().enumerate() {
            assert_eq!(d, &frames[i]);
            assert_eq!(h.timestamp_ns, 1_700_000_000_123_456_789 + i as u64);
            assert_eq!(h.orig_len as usize, frames[i].len());
        }
    }

    #[test]
    fn big_endian_sections_units_and_skipped_blocks() {
        let a = vec![0xaa; 64];
        let b = vec![0xbb; 70];
        let mut f = be_section();
        f.extend(be_interface(1, None)); // microseconds
        f.extend(be_block(4, &[1, 2, 3, 4])); // name resolution: skipped
        f.extend(be_epb(0, 10_000_005, &a, 64));
        f.extend(be_interface(1, Some(0x80 | 10))); // 2^-10 s
        f.extend(be_epb(1, 1024 * 3, &b, 100));
        // A new section forgets the interfaces of the last.
        f.extend(be_section());
        f.extend(be_interface(1, Some(9)));
        f.extend(be_epb(0, 42, &a, 64));
        let got = read_all(&f).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].0.timestamp_ns, 10_000_005_000);
        assert_eq!(got[1].0.timestamp_ns, 3_000_000_000);
        assert_eq!((got[1].0.incl_len, got[1].0.orig_len), (70, 100));
        assert_eq!(got[1].1, b);
        assert_eq!(got[2].0.timestamp_ns, 42);
    }

    #[test]
    fn simple_packet_blocks_take_the_block_s_data() {
        let mut f = be_section();
        f.extend(be_interface(1, None));
        let mut body = 62u32.to_be_bytes().to_vec();
        body.extend_from_slice(&[7; 62]);
        f.extend(be_block(SPB_TYPE, &body));
        let got = read_all(&f).unwrap();
        assert_eq!(got[0].1, vec![7; 62]);
        assert_eq!((got[0].0.incl_len, got[0].0.orig_len), (62, 62));
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let a = vec![0u8; 64];
        // A packet on an interface never described.
        let mut f = be_section();
        f.extend(be_epb(0, 1, &a, 64));
        assert!(matches!(read_all(&f), Err(PcapError::Malformed(_))));
        // Not Ethernet.
        let mut f = be_section();
        f.extend(be_interface(113, None));
        f.extend(be_epb(0, 1, &a, 64));
        assert!(matches!(
            read_all(&f),
            Err(PcapError::UnsupportedLinkType(113))
        ));
        // A file of one packet whose 4 bytes at `at` say `value` instead.
        let with_epb_word = |at: usize, value: u32| {
            let mut f = be_section();
            f.extend(be_interface(1, None));
            let mut epb = be_epb(0, 1, &a, 64);
            epb[at..at + 4].copy_from_slice(&value.to_be_bytes());
            f.extend(epb);
            f
        };
        // A captured length past the block.
        let f = with_epb_word(20, 200);
        assert!(matches!(read_all(&f), Err(PcapError::Malformed(_))));
        // Trailing length that disagrees; a length not a multiple of 4; a huge one.
        let mut f = be_section();
        let n = f.len();
        f[n - 1] ^= 4;
        assert!(matches!(read_all(&f), Err(PcapError::Malformed(_))));
        let f = with_epb_word(4, 0x7fff_fff0);
        assert!(matches!(read_all(&f), Err(PcapError::Malformed(_))));
        // Version 2; cut short.
        let mut f = be_section();
        f[12..14].copy_from_slice(&2u16.to_be_bytes());
        assert!(matches!(
            read_all(&f),
            Err(PcapError::UnsupportedVersion(2))
        ));
        let mut f = be_section();
        f.extend(be_interface(1, None));
        f.extend(be_epb(0, 1, &a, 64));
        f.truncate(f.len() - 3);
        assert!(matches!(read_all(&f), Err(PcapError::TruncatedRecord)));
    }

    #[test]
    fn timestamp_units_saturate_instead_of_wrapping() {
        assert_eq!(TsUnit::Decimal(0).to_ns(u64::MAX), u64::MAX);
        assert_eq!(TsUnit::Decimal(127).to_ns(u64::MAX), 0);
        assert_eq!(TsUnit::Decimal(12).to_ns(5_000), 5);
        assert_eq!(TsUnit::Binary(127).to_ns(u64::MAX), 0);
        assert_eq!(TsUnit::Binary(0).to_ns(2), 2_000_000_000);
    }

    #[test]
    fn writer_lays_out_the_blocks_of_the_spec() {
        let mut w = PcapngWriter::new(Vec::new(), "port-2", 65535).unwrap();
        // 28-byte SHB, then the IDB: 8 + 8 + if_name (4 + 8) + if_tsresol
        // (4 + 4) + end (4) + 4 = 44 bytes.
        let header = w.out.len();
        assert_eq!(header, 28 + 44);
        let ts = 1_700_000_000_123_456_789u64;
        w.write_frame(&frame(61, 0xab, Direction::Inbound, ts))
            .unwrap();
        w.write_frame(&frame(64, 0xcd, Direction::Outbound, ts + 1))
            .unwrap();
        assert_eq!(w.frames(), 2);
        let bytes = w.into_inner();
        // EPB: 8 + 20 + data padded + epb_flags (8) + end (4) + 4.
        assert_eq!(bytes.len(), header + (44 + 64) + (44 + 64));
        // The first bytes, spelled out.
        assert_eq!(
            bytes[..28],
            [
                0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff,
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 28, 0, 0, 0
            ]
        );
        let f = read::parse(&bytes);
        assert_eq!(f.byte_order_magic, 0x1A2B_3C4D);
        assert_eq!(f.version, (1, 0));
        assert_eq!(f.linktype, 1);
        assert_eq!(f.snaplen, 65535);
        assert_eq!(f.if_name.as_deref(), Some("port-2"));
        assert_eq!(f.if_tsresol, Some(9));
        assert_eq!(f.packets.len(), 2);
        let (a, b) = (&f.packets[0], &f.packets[1]);
        assert_eq!((a.interface, a.ts, a.cap_len, a.orig_len), (0, ts, 61, 61));
        assert_eq!(a.data, vec![0xab; 61]);
        assert_eq!(a.flags, Some(1));
        assert_eq!((b.ts, b.cap_len, b.orig_len), (ts + 1, 64, 64));
        assert_eq!(b.data, vec![0xcd; 64]);
        assert_eq!(b.flags, Some(2));
    }

    #[test]
    fn frames_are_cut_to_the_snap_length() {
        let data: Vec<u8> = (0..200u8).collect();
        let f = Frame::copy_of(&data, 100, 5, Direction::Outbound);
        assert_eq!((f.orig_len, f.bytes.len()), (200, 100));
        assert_eq!(f.bytes[..], data[..100]);
        let mut w = PcapngWriter::new(Vec::new(), "", 100).unwrap();
        w.write_frame(&f).unwrap();
        let p = read::parse(&w.into_inner());
        assert_eq!(p.if_name, None);
        assert_eq!(p.snaplen, 100);
        assert_eq!((p.packets[0].cap_len, p.packets[0].orig_len), (100, 200));
    }
}
