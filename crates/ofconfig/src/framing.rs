//! NETCONF message framing (RFC 6242 §4): the `]]>]]>` end-of-message
//! delimiter of base:1.0 (used for the hellos and whenever a side lacks
//! base:1.1), and chunked framing (`\n#LEN\n...` chunks, `\n##\n` at the
//! end) once both hellos name base:1.1.
//!
//! [`Framer`] is a plain state machine: bytes in, whole messages out, tested
//! without sockets. A message longer than its limit is an error (the session
//! is then closed: nothing in the stream can be trusted after it).

/// The base:1.0 end-of-message marker.
pub const EOM: &[u8] = b"]]>]]>";
/// Largest chunk size RFC 6242 allows.
const MAX_CHUNK: u64 = 4_294_967_295;

/// Which framing is in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `]]>]]>` after each message.
    EndOfMessage,
    /// RFC 6242 chunks.
    Chunked,
}

/// Splits a byte stream into messages.
#[derive(Debug)]
pub struct Framer {
    mode: Mode,
    buf: Vec<u8>,
    /// Chunked: the message assembled so far.
    msg: Vec<u8>,
    limit: usize,
}

impl Framer {
    /// A framer in end-of-message mode taking messages of at most `limit`
    /// bytes.
    pub fn new(limit: usize) -> Framer {
        Framer {
            mode: Mode::EndOfMessage,
            buf: Vec::new(),
            msg: Vec::new(),
            limit,
        }
    }

    /// Switches framing (after the hellos).
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// The framing in force.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Adds received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole message, `Ok(None)` when more bytes are needed, or a
    /// framing error.
    pub fn next_message(&mut self) -> Result<Option<Vec<u8>>, String> {
        match self.mode {
            Mode::EndOfMessage => self.next_eom(),
            Mode::Chunked => self.next_chunked(),
        }
    }

    fn next_eom(&mut self) -> Result<Option<Vec<u8>>, String> {
        match find(&self.buf, EOM) {
            Some(i) => {
                if i > self.limit {
                    return Err(format!("message longer than {} bytes", self.limit));
                }
                let msg = self.buf[..i].to_vec();
                self.buf.drain(..i + EOM.len());
                Ok(Some(msg))
            }
            None if self.buf.len() > self.limit + EOM.len() => {
                Err(format!("message longer than {} bytes", self.limit))
            }
            None => Ok(None),
        }
    }

    fn next_chunked(&mut self) -> Result<Option<Vec<u8>>, String> {
        loop {
            // Every chunk header and the end marker start with "\n#".
            if self.buf.len() < 3 {
                return Ok(None);
            }
            if &self.buf[..2] != b"\n#" {
                return Err("chunked framing: expected \\n#".into());
            }
            if self.buf[2] == b'#' {
                if self.buf.len() < 4 {
                    return Ok(None);
                }
                if self.buf[3] != b'\n' {
                    return Err("chunked framing: bad end-of-chunks marker".into());
                }
                self.buf.drain(..4);
                if self.msg.is_empty() {
                    return Err("chunked framing: a message with no chunk".into());
                }
                return Ok(Some(std::mem::take(&mut self.msg)));
            }
            // "\n#" 1*DIGIT "\n": at most 10 digits.
            let Some(nl) = self.buf[2..].iter().take(11).position(|&b| b == b'\n') else {
                if self.buf.len() > 13 {
                    return Err("chunked framing: chunk size too long".into());
                }
                return Ok(None);
            };
            let digits = &self.buf[2..2 + nl];
            if digits.is_empty() || digits[0] == b'0' || !digits.iter().all(|b| b.is_ascii_digit())
            {
                return Err("chunked framing: bad chunk size".into());
            }
            let size: u64 = std::str::from_utf8(digits)
                .ok()
                .and_then(|s| s.parse().ok())
                .filter(|&n| n <= MAX_CHUNK)
                .ok_or_else(|| "chunked framing: bad chunk size".to_string())?;
            if self.msg.len() as u64 + size > self.limit as u64 {
                return Err(format!("message longer than {} bytes", self.limit));
            }
            let start = 2 + nl + 1;
            let size = size as usize;
            if self.buf.len() < start + size {
                return Ok(None);
            }
            self.msg.extend_from_slice(&self.buf[start..start + size]);
            self.buf.drain(..start + size);
        }
    }
}

/// `msg` framed for sending in `mode`.
pub fn frame(mode: Mode, msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len() + 16);
    match mode {
        Mode::EndOfMessage => {
            out.extend_from_slice(msg);
            out.extend_from_slice(EOM);
        }
        Mode::Chunked => {
            if !msg.is_empty() {
                out.extend_from_slice(format!("\n#{}\n", msg.len()).as_bytes());
                out.extend_from_slice(msg);
            }
            out.extend_from_slice(b"\n##\n");
        }
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_of_message_split_anywhere() {
        let stream = b"<hello/>]]>]]><rpc/>]]>]]>";
        for cut in 0..stream.len() {
            let mut f = Framer::new(1000);
            let mut got = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                f.push(part);
                while let Some(m) = f.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got, vec![b"<hello/>".to_vec(), b"<rpc/>".to_vec()]);
        }
    }

    #[test]
    fn chunked_split_anywhere_and_multi_chunk() {
        let stream = b"\n#4\n<rpc\n#17\n message-id=\"1\"/>\n##\n\n#3\nabc\n##\n";
        for cut in 0..stream.len() {
            let mut f = Framer::new(1000);
            f.set_mode(Mode::Chunked);
            let mut got = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                f.push(part);
                while let Some(m) = f.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(
                got,
                vec![b"<rpc message-id=\"1\"/>".to_vec(), b"abc".to_vec()]
            );
        }
    }

    #[test]
    fn chunked_errors() {
        for bad in [
            &b"x#4\nabcd"[..],
            b"\n#0\n",
            b"\n#04\nabcd",
            b"\n#a\n",
            b"\n##\n",
            b"\n#99999999999\n",
            b"\n#2\nab\n##x",
        ] {
            let mut f = Framer::new(1000);
            f.set_mode(Mode::Chunked);
            f.push(bad);
            assert!(f.next_message().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn limits() {
        let mut f = Framer::new(4);
        f.push(b"12345]]>]]>");
        assert!(f.next_message().is_err());
        let mut f = Framer::new(4);
        f.push(b"123456789012");
        assert!(f.next_message().is_err());
        let mut f = Framer::new(4);
        f.set_mode(Mode::Chunked);
        f.push(b"\n#3\nabc\n#3\n");
        assert!(f.next_message().is_err());
    }

    /// Arbitrary bytes in either mode: messages or an error, never a panic,
    /// and never a message over the limit.
    #[test]
    fn arbitrary_bytes() {
        let alphabet = b"\n#0123456789]>x";
        let mut seed = 0x9e37_79b9_u32;
        for mode in [Mode::EndOfMessage, Mode::Chunked] {
            for _ in 0..3000 {
                let mut f = Framer::new(64);
                f.set_mode(mode);
                let len = (seed % 40) as usize;
                let mut data = Vec::with_capacity(len);
                for _ in 0..len {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    data.push(alphabet[seed as usize % alphabet.len()]);
                }
                for part in data.chunks(3) {
                    f.push(part);
                    while let Ok(Some(m)) = f.next_message() {
                        assert!(m.len() <= 64);
                    }
                }
            }
        }
    }

    #[test]
    fn frames_round_trip() {
        for mode in [Mode::EndOfMessage, Mode::Chunked] {
            let mut f = Framer::new(100);
            f.set_mode(mode);
            f.push(&frame(mode, b"<ok/>"));
            assert_eq!(f.next_message().unwrap(), Some(b"<ok/>".to_vec()));
        }
    }
}
