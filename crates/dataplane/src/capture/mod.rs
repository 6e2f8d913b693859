//! Captures: the formats (classic pcap and pcapng) read and written by
//! the pcap port backend ([`crate::pcap`]), `fulmar trace` and the fuzz
//! target, and the live capture of a port's traffic to a pcapng file
//! (`fulmar ctl capture`). Hand-written, on shared primitives:
//!
//! - [`format`]: the error, the record header, the read helpers both
//!   readers use;
//! - [`classic`]: the libpcap format, read and written;
//! - [`pcapng`]: the pcapng format, read, and written by [`PcapngWriter`];
//! - `reader`: [`CaptureReader`], either format by its first bytes;
//! - `frame` and `live`: a captured [`Frame`] and the [`Capture`] the
//!   dataplane threads feed and the control side drains.

pub mod classic;
pub mod format;
mod frame;
mod live;
pub mod pcapng;
#[cfg(test)]
pub(crate) mod read;
mod reader;

pub use classic::{read_file_header, read_record, FileHeader};
pub use format::{PcapError, RecordHeader, LINKTYPE_ETHERNET, MAX_RECORD};
pub use frame::{now_ns, Direction, Frame};
pub(crate) use live::Tap;
pub use live::{Capture, CaptureStats, DEFAULT_QUEUE_BYTES, DEFAULT_QUEUE_FRAMES, DEFAULT_SNAPLEN};
pub use pcapng::PcapngWriter;
pub use reader::CaptureReader;
