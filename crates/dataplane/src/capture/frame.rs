//! One captured frame: a pooled copy of its first bytes, its time and
//! its direction.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::pool;

/// Which way a frame went through the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Received by the port (before the pipeline saw it).
    Inbound,
    /// Sent by the port (what the switch handed to it).
    Outbound,
}

impl Direction {
    /// The `epb_flags` value: direction bits only.
    pub fn epb_flags(self) -> u32 {
        match self {
            Direction::Inbound => 1,
            Direction::Outbound => 2,
        }
    }
}

/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// When it was read or handed to the port, in nanoseconds since 1970.
    pub ts_ns: u64,
    /// Which way it went.
    pub direction: Direction,
    /// Its length on the wire.
    pub orig_len: u32,
    /// Its first bytes (up to the snap length).
    pub bytes: Vec<u8>,
}

impl Frame {
    /// A copy of `data`'s first `snaplen` bytes (storage from the pool).
    pub fn copy_of(data: &[u8], snaplen: usize, ts_ns: u64, direction: Direction) -> Frame {
        let keep = data.get(..snaplen).unwrap_or(data);
        let mut bytes = if keep.len() <= pool::BUF_CAPACITY {
            pool::take()
        } else {
            Vec::with_capacity(keep.len())
        };
        bytes.extend_from_slice(keep);
        Frame {
            ts_ns,
            direction,
            orig_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            bytes,
        }
    }

    /// Gives the storage back to the pool.
    pub(crate) fn recycle(self) {
        pool::give(self.bytes);
    }
}

/// Nanoseconds since 1970 now (0 before it).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
