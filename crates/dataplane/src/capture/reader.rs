//! One reader for both formats: [`CaptureReader`] tells them apart by
//! their first four bytes, so every place that reads a capture takes
//! pcapng as well as classic pcap.

use std::io::{Read, Seek, SeekFrom};

use super::classic::{parse_file_header, read_record, FileHeader, FILE_HEADER_LEN};
use super::format::{read_full, PcapError, ReadFull, RecordHeader};
use super::pcapng::{NgReader, SHB_TYPE};

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
