//! A framer for the OpenFlow byte stream: bytes in (as they arrive from a
//! TCP or TLS channel), whole messages out, split by the header's 16-bit
//! length.
//!
//! The buffer is bounded: it never holds more than [`Framer::CAPACITY`]
//! bytes, so a peer cannot make the switch buffer without limit (a message
//! is at most 65535 bytes; the capacity holds two). [`Framer::feed`]
//! accepts only what fits and says how much it took; the caller pops
//! messages and feeds the rest. A header whose length is below 8 can never
//! be framed: the framer reports `BAD_REQUEST/BAD_LEN` and stays in that
//! state so the caller closes the channel. The framer checks nothing else
//! (version, type and body are [`crate::Message::decode`]'s job).
//!
//! ```
//! use ofp::{ErrorMsg, Framer, Message};
//!
//! let mut framer = Framer::new();
//! let mut stream = Message::BarrierRequest.encode(7);
//! stream.extend([4, 99, 0, 8, 0, 0, 0, 8]); // an unknown message type
//! framer.push(&stream).unwrap();
//! let mut replies = Vec::new();
//! while let Some(bytes) = framer.next_message().unwrap() {
//!     match Message::decode(&bytes) {
//!         Ok((xid, msg)) => assert_eq!((xid, msg.type_name()), (7, "BARRIER_REQUEST")),
//!         // Answer with the error the decoder names, echoing the message.
//!         Err(e) => replies.push(Message::Error(ErrorMsg::from_decode_error(&e, &bytes)).encode(8)),
//!     }
//! }
//! assert_eq!(replies[0], [4, 1, 0, 20, 0, 0, 0, 8, 0, 1, 0, 1, 4, 99, 0, 8, 0, 0, 0, 8]);
//! ```

use crate::consts::OFP_HEADER_LEN;
use crate::error::{BadRequestCode, DecodeError, OfpError};

/// Splits a byte stream into OpenFlow messages.
#[derive(Clone, Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    /// Start of the first unconsumed byte in `buf`.
    start: usize,
    /// Bytes consumed before `buf[0]`, for error offsets in the stream.
    consumed: u64,
    /// Set once a framing error was seen; the stream cannot be resynchronized.
    failed: Option<DecodeError>,
}

impl Framer {
    /// Most bytes ever buffered: two maximal messages.
    pub const CAPACITY: usize = 2 * 65535;

    /// An empty framer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes buffered and not yet popped.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// How many more bytes [`Framer::feed`] would take now.
    pub fn space(&self) -> usize {
        Self::CAPACITY - self.buffered()
    }

    /// Appends as much of `bytes` as fits and returns how many bytes were
    /// taken. Less than `bytes.len()` means the buffer is full: pop
    /// messages, then feed the rest.
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.consumed += self.start as u64;
            self.start = 0;
        }
        let n = bytes.len().min(self.space());
        self.buf
            .extend_from_slice(bytes.get(..n).unwrap_or_default());
        n
    }

    /// Appends all of `bytes`, or nothing: fails when the framer already
    /// failed, or when the bytes do not fit (`BAD_REQUEST/BAD_LEN`; the
    /// caller should pop messages before pushing more).
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if bytes.len() > self.space() {
            return Err(DecodeError::new(
                OfpError::BadRequest(BadRequestCode::BadLen),
                0,
                format!(
                    "framer buffer full: {} bytes buffered, {} more pushed",
                    self.buffered(),
                    bytes.len()
                ),
            ));
        }
        self.feed(bytes);
        Ok(())
    }

    /// Pops the next whole message (header included) if one is buffered.
    /// `Ok(None)` means more bytes are needed. An error is final: every
    /// later call returns it again.
    pub fn next_message(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        Ok(self.next_slice()?.map(<[u8]>::to_vec))
    }

    /// Like [`Framer::next_message`] but borrows the message from the
    /// buffer instead of copying it; it stays valid until the next call.
    pub fn next_slice(&mut self) -> Result<Option<&[u8]>, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let pending = self.buf.get(self.start..).unwrap_or_default();
        let Some(len_bytes) = pending.get(2..4) else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
        if len < OFP_HEADER_LEN {
            let e = DecodeError::new(
                OfpError::BadRequest(BadRequestCode::BadLen),
                2,
                format!(
                    "header length {len} is less than 8 (stream offset {})",
                    self.consumed + self.start as u64
                ),
            );
            self.failed = Some(e.clone());
            return Err(e);
        }
        if pending.len() < len {
            return Ok(None);
        }
        let begin = self.start;
        self.start += len;
        Ok(self.buf.get(begin..begin + len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(len: u16, fill: u8) -> Vec<u8> {
        let mut m = vec![4, 2];
        m.extend(len.to_be_bytes());
        m.resize(usize::from(len), fill);
        m
    }

    #[test]
    fn splits_messages_fed_byte_by_byte() {
        let stream: Vec<u8> = [msg(8, 0), msg(12, 1), msg(9, 2)].concat();
        let mut f = Framer::new();
        let mut out = Vec::new();
        for b in &stream {
            assert_eq!(f.feed(std::slice::from_ref(b)), 1);
            while let Some(m) = f.next_message().unwrap() {
                out.push(m);
            }
        }
        assert_eq!(out, vec![msg(8, 0), msg(12, 1), msg(9, 2)]);
        assert_eq!(f.buffered(), 0);
    }

    #[test]
    fn several_messages_in_one_feed_and_a_partial_tail() {
        let mut stream: Vec<u8> = [msg(16, 7), msg(8, 8)].concat();
        stream.extend(&msg(20, 9)[..10]);
        let mut f = Framer::new();
        f.feed(&stream);
        assert_eq!(f.next_slice().unwrap(), Some(&msg(16, 7)[..]));
        assert_eq!(f.next_slice().unwrap(), Some(&msg(8, 8)[..]));
        assert_eq!(f.next_slice().unwrap(), None);
        assert_eq!(f.buffered(), 10);
        f.feed(&msg(20, 9)[10..]);
        assert_eq!(f.next_message().unwrap(), Some(msg(20, 9)));
        assert_eq!(f.next_message().unwrap(), None);
    }

    #[test]
    fn short_length_is_a_final_bad_len() {
        let mut f = Framer::new();
        f.feed(&msg(8, 0));
        f.feed(&[4, 0, 0, 7, 0, 0, 0, 0]);
        assert!(f.next_message().unwrap().is_some());
        let e = f.next_message().unwrap_err();
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadLen));
        assert!(e.reason.contains("stream offset 8"), "{}", e.reason);
        f.feed(&msg(8, 0));
        assert!(f.next_message().is_err());
        assert!(f.push(&msg(8, 0)).is_err());
    }

    #[test]
    fn buffer_is_bounded() {
        let mut f = Framer::new();
        let big = msg(65535, 1);
        assert_eq!(f.feed(&big), 65535);
        assert_eq!(f.feed(&big), 65535);
        assert_eq!(f.feed(&big), 0);
        assert_eq!(f.space(), 0);
        assert!(f.push(&[0]).is_err());
        assert_eq!(f.next_message().unwrap().map(|m| m.len()), Some(65535));
        // Popping frees room (reclaimed on the next feed).
        assert_eq!(f.feed(&big[..100]), 100);
        assert_eq!(f.buffered(), 65535 + 100);
    }

    use proptest::prelude::*;

    proptest! {
        /// Any chunking of a stream of messages yields exactly the messages.
        #[test]
        fn any_chunking_yields_the_messages(
            lens in proptest::collection::vec(8u16..600, 0..20),
            cuts in proptest::collection::vec(1usize..700, 1..50),
        ) {
            let msgs: Vec<Vec<u8>> =
                lens.iter().enumerate().map(|(i, l)| msg(*l, i as u8)).collect();
            let stream = msgs.concat();
            let mut f = Framer::new();
            let mut out = Vec::new();
            let mut pos = 0;
            let mut cut = cuts.iter().cycle();
            while pos < stream.len() {
                let n = (*cut.next().unwrap()).min(stream.len() - pos);
                f.push(&stream[pos..pos + n]).unwrap();
                pos += n;
                while let Some(m) = f.next_message().unwrap() {
                    out.push(m);
                }
            }
            prop_assert_eq!(out, msgs);
            prop_assert_eq!(f.buffered(), 0);
        }

        /// Random bytes never panic the framer, and every frame it pops is
        /// at least a header long and as long as its header says.
        #[test]
        fn random_streams_frame_or_fail_cleanly(
            data in proptest::collection::vec(any::<u8>(), 0..2000),
            chunk in 1usize..64,
        ) {
            let mut f = Framer::new();
            'feed: for c in data.chunks(chunk) {
                if f.push(c).is_err() {
                    break;
                }
                loop {
                    match f.next_slice() {
                        Ok(Some(m)) => {
                            prop_assert!(m.len() >= 8);
                            prop_assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), m.len());
                        }
                        Ok(None) => break,
                        Err(_) => break 'feed,
                    }
                }
            }
        }
    }
}
