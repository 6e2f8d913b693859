//! A bridge's flows file, read block by block wherever its flows are
//! needed: once to check them, once more to install them.
//!
//! The model keeps the file's path, its SHA-256 and its flow count as
//! checked ([`FlowsFile`]), not its lines: a million flows' text with
//! their sources (about 170 bytes a flow) was a fifth of what the running
//! switch held. Whoever installs the flows reads the file again
//! ([`FlowsFile::for_each_flow`]) and learns at its end whether it is
//! still the file that was checked.
//!
//! Reading, hashing and parsing run on another thread, a block ahead of
//! the caller ([`for_each_parsed_block`]): at most two blocks' lines and
//! parses exist at a time, and the file is never held whole.

use std::io::Read;
use std::ops::Range;
use std::path::Path;

use ofp::FlowMod;

use crate::model::{FlowsFile, TablesHead};
use sha2::{Digest, Sha256};

/// Takes each bridge's flows-file flows as the configuration check reads
/// them ([`Config::load_handing_over`](crate::Config::load_handing_over)),
/// so that a bridge's tables can be built while the check goes on and the
/// file is read and parsed once. Only flows that checked without error
/// are handed over, and only while the configuration has no error.
pub trait FlowHandover {
    /// The check reached `head`'s bridge's flows file (`file`) with no
    /// error so far; true to be handed its flows.
    fn start(&mut self, head: &TablesHead, file: &Path) -> bool;
    /// The next flow of that file (its 1-based line), checked.
    fn flow(&mut self, line: usize, fm: FlowMod);
    /// The file was read to its end: `Some` as the model will hold it
    /// when every flow was handed over, `None` when the check found an
    /// error (what was handed over is not the bridge's tables).
    fn end(&mut self, file: Option<&FlowsFile>);
}

/// Why a flows file's flows could not all be given again.
#[derive(Debug)]
pub enum FlowsFileError<E> {
    /// It could not be read.
    Read(std::io::Error),
    /// It was read whole but is not the file that was checked (its bytes
    /// or its flow count differ).
    Changed,
    /// The caller stopped at a flow.
    Stopped(E),
}

impl<E: std::fmt::Display> std::fmt::Display for FlowsFileError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowsFileError::Read(e) => write!(f, "cannot read it: {e}"),
            FlowsFileError::Changed => f.write_str(
                "it changed after the configuration was checked (reload to check it again)",
            ),
            FlowsFileError::Stopped(e) => e.fmt(f),
        }
    }
}

impl FlowsFile {
    /// Reads the file again and calls `each` with every flow in order: its
    /// 1-based line, its text (trimmed) and its parse. Every flow was
    /// checked, so a parse error or [`FlowsFileError::Changed`] (known
    /// only at the end) means the file was changed since; the flows given
    /// before were of the changed file.
    pub fn for_each_flow<E>(
        &self,
        mut each: impl FnMut(usize, &str, Result<FlowMod, flowtext::ParseError>) -> Result<(), E>,
    ) -> Result<(), FlowsFileError<E>> {
        let read = for_each_parsed_block(&self.path, flowtext::parse_flow, |block, parsed| {
            for (&(li, line), r) in block.iter().zip(parsed) {
                each(li + 1, line.trim(), r)?;
            }
            Ok(())
        })?;
        if read.sha256 == self.sha256 && read.lines == self.flows {
            Ok(())
        } else {
            Err(FlowsFileError::Changed)
        }
    }
}

/// What [`for_each_parsed_block`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRead {
    /// SHA-256 of every byte.
    pub sha256: [u8; 32],
    /// Lines given (neither blank nor comments).
    pub lines: usize,
}

/// Bytes read per block: about 19,000 lines of a gateway flows file.
const BLOCK_BYTES: usize = 2 << 20;

/// One block of a file: whole lines, and where the ones to give are.
struct Block {
    text: String,
    /// (0-based line number, bytes in `text`) of each line neither blank
    /// nor a comment.
    lines: Vec<(usize, Range<usize>)>,
}

impl Block {
    /// Splits `text` (whole lines; the first is line `first`) into lines,
    /// as [`str::lines`] does; returns the block and the next line number.
    fn new(text: String, first: usize) -> (Block, usize) {
        let mut lines = Vec::new();
        let mut next = first;
        let base = text.as_ptr() as usize;
        for line in text.lines() {
            let t = line.trim();
            if !t.is_empty() && !t.starts_with('#') {
                let start = line.as_ptr() as usize - base;
                lines.push((next, start..start + line.len()));
            }
            next += 1;
        }
        (Block { text, lines }, next)
    }

    fn view(&self) -> Vec<(usize, &str)> {
        self.lines
            .iter()
            .map(|(li, r)| (*li, &self.text[r.clone()]))
            .collect()
    }
}

/// Reads `path` (a flows file, or any file of one item a line with `#`
/// comments: the runtime's saved tables) in blocks of whole lines,
/// hashing every byte; `each` is called with each block's lines
/// (numbered from 0, blank lines and comments left out) and their
/// parses, in order. Reading and parsing (on every core,
/// `parse_in_parallel`) run on another thread a block ahead of `each`.
/// An error from `each` stops the reading.
pub fn for_each_parsed_block<T: Send, E>(
    path: &Path,
    parse: fn(&str) -> Result<T, flowtext::ParseError>,
    mut each: impl FnMut(&[(usize, &str)], Vec<Result<T, flowtext::ParseError>>) -> Result<(), E>,
) -> Result<FileRead, FlowsFileError<E>> {
    let mut file = std::fs::File::open(path).map_err(FlowsFileError::Read)?;
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let reader = s.spawn(move || -> std::io::Result<FileRead> {
            let mut hash = Sha256::new();
            let mut buf: Vec<u8> = Vec::new();
            let (mut next_line, mut given) = (0usize, 0usize);
            let mut eof = false;
            while !eof {
                // Fill to a block's size, then cut after its last newline
                // (a line longer than a block makes the block longer).
                let want = buf.len() + BLOCK_BYTES;
                while buf.len() < want {
                    let have = buf.len();
                    let n = (&mut file)
                        .take((want - have) as u64)
                        .read_to_end(&mut buf)?;
                    if n == 0 {
                        eof = true;
                        break;
                    }
                }
                let cut = if eof {
                    buf.len()
                } else {
                    match buf.iter().rposition(|&b| b == b'\n') {
                        Some(i) => i + 1,
                        None => continue,
                    }
                };
                let rest = buf.split_off(cut);
                let bytes = std::mem::replace(&mut buf, rest);
                if bytes.is_empty() {
                    break;
                }
                hash.update(&bytes);
                let text = String::from_utf8(bytes).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "stream did not contain valid UTF-8",
                    )
                })?;
                let block;
                (block, next_line) = Block::new(text, next_line);
                given += block.lines.len();
                let parsed = parse_in_parallel(&block.view(), parse);
                // The receiving side stopped: nothing more to read.
                if tx.send((block, parsed)).is_err() {
                    break;
                }
            }
            Ok(FileRead {
                sha256: hash.finalize().into(),
                lines: given,
            })
        });
        for (block, parsed) in rx {
            each(&block.view(), parsed).map_err(FlowsFileError::Stopped)?;
        }
        reader
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
            .map_err(FlowsFileError::Read)
    })
}

/// Lines of a block below which one thread parses them all.
const PARALLEL_FROM: usize = 4096;

/// Parses `lines` in order, split over the machine's cores when there
/// are enough of them to be worth a thread (a million-line flows file
/// takes about 1.3 s of one core here).
pub(crate) fn parse_in_parallel<T: Send>(
    lines: &[(usize, &str)],
    parse: fn(&str) -> Result<T, flowtext::ParseError>,
) -> Vec<Result<T, flowtext::ParseError>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads <= 1 || lines.len() < PARALLEL_FROM {
        return lines.iter().map(|(_, l)| parse(l)).collect();
    }
    let per = lines.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = lines
            .chunks(per)
            .map(|part| s.spawn(move || part.iter().map(|(_, l)| parse(l)).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(path: &Path) -> (Vec<(usize, String)>, FileRead) {
        let mut got = Vec::new();
        let read = for_each_parsed_block(
            path,
            |l| Ok(l.len()),
            |block, parsed| {
                for (&(li, line), n) in block.iter().zip(parsed) {
                    assert_eq!(n.unwrap(), line.len());
                    got.push((li, line.to_string()));
                }
                Ok::<(), ()>(())
            },
        )
        .unwrap();
        (got, read)
    }

    /// Lines across block boundaries, a last line without its newline,
    /// CRLF, blank lines and comments: numbered and given as
    /// `str::lines` gives them; the digest is that of the bytes.
    #[test]
    fn blocks_give_every_line_once_in_order_with_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut text = String::new();
        let mut want = Vec::new();
        let mut i = 0usize;
        while text.len() < 3 * BLOCK_BYTES + 1000 {
            let line = match i % 7 {
                0 => String::new(),
                1 => "# note".to_string(),
                2 => format!("line {i} {}", "x".repeat(i % 300)),
                _ => format!("  line {i}  "),
            };
            if i % 7 >= 2 {
                want.push((i, line.clone()));
            }
            text.push_str(&line);
            text.push_str(if i.is_multiple_of(5) { "\r\n" } else { "\n" });
            i += 1;
        }
        text.push_str("last");
        want.push((i, "last".to_string()));
        std::fs::write(&path, &text).unwrap();
        let (got, read) = read_all(&path);
        assert_eq!(got.len(), want.len());
        assert_eq!(got, want);
        assert_eq!(read.lines, want.len());
        let digest: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        assert_eq!(read.sha256, digest);
    }

    /// A line longer than a block is read whole.
    #[test]
    fn a_line_longer_than_a_block_is_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let long = "y".repeat(BLOCK_BYTES * 2 + 17);
        std::fs::write(&path, format!("a\n{long}\nb\n")).unwrap();
        let (got, read) = read_all(&path);
        assert_eq!(
            got,
            vec![(0, "a".to_string()), (1, long), (2, "b".to_string())]
        );
        assert_eq!(read.lines, 3);
    }

    /// Bad UTF-8 and a missing file are read errors; a caller's error
    /// stops the reading and comes back.
    #[test]
    fn errors_stop_the_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"ok\n\xff\xfe\n").unwrap();
        let e = for_each_parsed_block(&path, |_| Ok(()), |_, _| Ok::<(), ()>(())).unwrap_err();
        assert!(
            matches!(e, FlowsFileError::Read(ref e) if e.kind() == std::io::ErrorKind::InvalidData)
        );
        let e = for_each_parsed_block(
            &dir.path().join("none"),
            |_| Ok(()),
            |_, _| Ok::<(), ()>(()),
        )
        .unwrap_err();
        assert!(matches!(e, FlowsFileError::Read(_)));
        let text: String = (0..500_000).map(|i| format!("l{i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let mut blocks = 0;
        let e = for_each_parsed_block(
            &path,
            |_| Ok(()),
            |_, _| {
                blocks += 1;
                Err("stop")
            },
        )
        .unwrap_err();
        assert!(matches!(e, FlowsFileError::Stopped("stop")));
        assert_eq!(blocks, 1);
    }

    /// A file changed after its check: the flows come back, then
    /// `Changed`.
    #[test]
    fn a_changed_file_is_told_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let one = "table=0,priority=1,actions=drop\n";
        std::fs::write(&path, one).unwrap();
        let checked = FlowsFile {
            path: path.clone(),
            sha256: Sha256::digest(one.as_bytes()).into(),
            flows: 1,
        };
        let mut seen = Vec::new();
        let mut ok = |line: usize, text: &str, r: Result<FlowMod, _>| {
            assert!(r.is_ok());
            seen.push((line, text.to_string()));
            Ok::<(), ()>(())
        };
        checked.for_each_flow(&mut ok).unwrap();
        std::fs::write(&path, format!("{one}# more\n{one}")).unwrap();
        let e = checked.for_each_flow(&mut ok).unwrap_err();
        assert!(matches!(e, FlowsFileError::Changed));
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[2], (3, one.trim().to_string()));
    }
}
