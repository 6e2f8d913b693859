//! `fulmar ofp …`: offline tools over files of raw OpenFlow 1.3 messages
//! (as captured from a channel: messages back to back, no framing besides
//! the header's length).
//!
//! `fulmar ofp decode [--roundtrip] FILE...` prints one JSON object per
//! message: `{"file", "offset", "xid", "type", "msg"}`. Problems (a decode
//! error, a trailing partial message, and with `--roundtrip` a re-encoding
//! that differs from the input) are reported on stderr with the file and
//! byte offset; the exit status is non-zero when there was any.

use anyhow::Context;
use clap::{Args, Subcommand};
use ofp::{Header, Message};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `fulmar ofp` subcommands.
#[derive(Subcommand)]
pub enum OfpCommand {
    /// Decode files of OpenFlow 1.3 messages to JSON lines.
    Decode(DecodeArgs),
}

/// Arguments of `fulmar ofp decode`.
#[derive(Args)]
pub struct DecodeArgs {
    /// Re-encode every message and fail unless it is byte-identical.
    #[arg(long)]
    pub roundtrip: bool,
    /// Files holding messages back to back.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs an `ofp` subcommand.
pub fn run(command: OfpCommand) -> anyhow::Result<ExitCode> {
    match command {
        OfpCommand::Decode(args) => decode(&args),
    }
}

/// One problem found in a file.
#[derive(Debug, PartialEq, Eq)]
pub struct Problem {
    /// Byte offset in the file.
    pub offset: usize,
    pub what: String,
}

/// One message split out of a file and decoded.
pub struct Decoded {
    pub offset: usize,
    pub xid: u32,
    pub msg: Message,
}

/// Splits `data` into messages by their header length, decodes each, and
/// (with `roundtrip`) checks that it re-encodes to the same bytes. Returns
/// what decoded and what went wrong, in file order.
pub fn decode_bytes(data: &[u8], roundtrip: bool) -> (Vec<Decoded>, Vec<Problem>) {
    let mut decoded = Vec::new();
    let mut problems = Vec::new();
    let mut offset = 0;
    while offset < data.len() {
        let rest = data.get(offset..).unwrap_or_default();
        let header = match Header::decode(rest) {
            Ok(h) => h,
            Err(_) if rest.len() < 8 => {
                problems.push(Problem {
                    offset,
                    what: format!(
                        "trailing partial message: {} bytes, less than a header",
                        rest.len()
                    ),
                });
                break;
            }
            Err(e) => {
                problems.push(Problem {
                    offset: offset + e.offset,
                    what: format!("cannot frame: {e}"),
                });
                break;
            }
        };
        let len = usize::from(header.length);
        let Some(bytes) = rest.get(..len) else {
            problems.push(Problem {
                offset,
                what: format!(
                    "trailing partial message: header says {len} bytes, {} left",
                    rest.len()
                ),
            });
            break;
        };
        match Message::decode(bytes) {
            Ok((xid, msg)) => {
                if roundtrip {
                    let again = msg.encode(xid);
                    if again != bytes {
                        let at = again
                            .iter()
                            .zip(bytes)
                            .position(|(a, b)| a != b)
                            .unwrap_or(again.len().min(bytes.len()));
                        problems.push(Problem {
                            offset: offset + at,
                            what: format!(
                                "{} re-encodes differently from byte {at} of the message (re-encoded {} bytes, original {})",
                                msg.type_name(),
                                again.len(),
                                bytes.len()
                            ),
                        });
                    }
                }
                decoded.push(Decoded { offset, xid, msg });
            }
            Err(e) => problems.push(Problem {
                offset: offset + e.offset,
                what: format!("decode error in the message at {offset}: {e}"),
            }),
        }
        offset += len;
    }
    (decoded, problems)
}

/// The JSON line printed for one message, fields in this order.
#[derive(serde::Serialize)]
pub struct JsonLine {
    pub file: String,
    pub offset: usize,
    pub xid: u32,
    #[serde(rename = "type")]
    pub msg_type: &'static str,
    /// The message body (`{}` for messages without one).
    pub msg: serde_json::Value,
}

/// The JSON line printed for one message.
pub fn json_line(file: &Path, d: &Decoded) -> JsonLine {
    let mut msg = serde_json::to_value(&d.msg).unwrap_or(serde_json::Value::Null);
    if msg.is_null() {
        msg = serde_json::Value::Object(serde_json::Map::new());
    }
    JsonLine {
        file: file.display().to_string(),
        offset: d.offset,
        xid: d.xid,
        msg_type: d.msg.type_name(),
        msg,
    }
}

fn decode(args: &DecodeArgs) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed = false;
    for file in &args.files {
        let data = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let (decoded, problems) = decode_bytes(&data, args.roundtrip);
        for d in &decoded {
            serde_json::to_writer(&mut out, &json_line(file, d))?;
            writeln!(out)?;
        }
        out.flush()?;
        for p in &problems {
            eprintln!("{}: offset {}: {}", file.display(), p.offset, p.what);
        }
        failed |= !problems.is_empty();
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ECHO: [u8; 10] = [4, 2, 0, 10, 0, 0, 0, 5, b'h', b'i'];
    const BARRIER: [u8; 8] = [4, 20, 0, 8, 0, 0, 0, 6];

    #[test]
    fn splits_and_decodes() {
        let data = [&ECHO[..], &BARRIER[..]].concat();
        let (d, p) = decode_bytes(&data, true);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(d.len(), 2);
        assert_eq!((d[1].offset, d[1].xid), (10, 6));
        let line = serde_json::to_string(&json_line(Path::new("f"), &d[0])).unwrap();
        assert_eq!(
            line,
            r#"{"file":"f","offset":0,"xid":5,"type":"ECHO_REQUEST","msg":{"data":"6869"}}"#
        );
        assert_eq!(json_line(Path::new("f"), &d[1]).msg, serde_json::json!({}));
    }

    #[test]
    fn partial_tail_names_its_offset() {
        let data = [&ECHO[..], &BARRIER[..5]].concat();
        let (d, p) = decode_bytes(&data, false);
        assert_eq!(d.len(), 1);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].offset, 10);
        assert!(p[0].what.contains("partial"));
        let data = [&BARRIER[..], &ECHO[..9]].concat();
        let (_, p) = decode_bytes(&data, false);
        assert_eq!(p[0].offset, 8);
    }

    #[test]
    fn roundtrip_difference_names_the_first_differing_byte() {
        // TABLE_MOD with non-zero padding: decodes, re-encodes with zeros.
        let data = [4, 17, 0, 16, 0, 0, 0, 1, 0, 0, 7, 0, 0, 0, 0, 0];
        let data = [&BARRIER[..], &data[..]].concat();
        let (d, p) = decode_bytes(&data, true);
        assert_eq!(d.len(), 2);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].offset, 8 + 10);
        let (_, p) = decode_bytes(&data, false);
        assert!(p.is_empty());
    }

    #[test]
    fn decode_error_offset_is_absolute() {
        let bad_type = [4, 99, 0, 8, 0, 0, 0, 0];
        let data = [&ECHO[..], &bad_type[..], &BARRIER[..]].concat();
        let (d, p) = decode_bytes(&data, true);
        assert_eq!(d.len(), 2);
        assert_eq!(p[0].offset, 11);
        assert!(p[0].what.contains("BAD_TYPE"), "{}", p[0].what);
    }
}
