//! JSON-RPC 1.0 as OVSDB speaks it (RFC 7047 section 4): JSON values
//! concatenated on a byte stream, with no other framing. [`Framer`] takes
//! the bytes as they arrive, in any split, and hands back each complete
//! value; [`Message`] tells requests, notifications and responses apart.

use serde_json::{json, Value};

/// The most bytes one value may take before it is complete: a server that
/// sends more is broken, and the connection is dropped instead of growing
/// without bound.
pub const MAX_PENDING: usize = 64 << 20;

/// Splits a byte stream into JSON values.
#[derive(Default)]
pub struct Framer {
    buf: Vec<u8>,
}

/// The stream is not JSON (or one value is too long): the connection
/// must be dropped.
#[derive(Debug, PartialEq, Eq)]
pub struct FrameError(pub String);

impl Framer {
    /// Appends `bytes` and returns every value now complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Value>, FrameError> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut used = 0;
        {
            let mut it = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
            loop {
                match it.next() {
                    Some(Ok(v)) => {
                        used = it.byte_offset();
                        out.push(v);
                    }
                    Some(Err(e)) if e.is_eof() => break,
                    Some(Err(e)) => return Err(FrameError(format!("not JSON: {e}"))),
                    None => {
                        used = it.byte_offset();
                        break;
                    }
                }
            }
        }
        self.buf.drain(..used);
        if self.buf.len() > MAX_PENDING {
            return Err(FrameError(format!(
                "a JSON value longer than {MAX_PENDING} bytes"
            )));
        }
        Ok(out)
    }
}

/// One JSON-RPC 1.0 message.
#[derive(Debug, PartialEq)]
pub enum Message {
    /// A request (`id` not null): it must be answered.
    Request {
        /// The method.
        method: String,
        /// Its parameters (an array).
        params: Value,
        /// The id to answer with.
        id: Value,
    },
    /// A notification (`id` null).
    Notification {
        /// The method.
        method: String,
        /// Its parameters.
        params: Value,
    },
    /// The answer to one of ours.
    Response {
        /// Our id.
        id: Value,
        /// `result` (null when it failed).
        result: Value,
        /// `error` (null when it succeeded).
        error: Value,
    },
}

impl Message {
    /// Classifies a value; `None` when it is no JSON-RPC message.
    pub fn parse(v: Value) -> Option<Message> {
        let Value::Object(mut o) = v else {
            return None;
        };
        let id = o.remove("id").unwrap_or(Value::Null);
        if let Some(Value::String(method)) = o.remove("method") {
            let params = o.remove("params").unwrap_or(Value::Array(Vec::new()));
            return Some(if id.is_null() {
                Message::Notification { method, params }
            } else {
                Message::Request { method, params, id }
            });
        }
        if o.contains_key("result") || o.contains_key("error") {
            return Some(Message::Response {
                id,
                result: o.remove("result").unwrap_or(Value::Null),
                error: o.remove("error").unwrap_or(Value::Null),
            });
        }
        None
    }
}

/// A request.
pub fn request(method: &str, params: Value, id: u64) -> Value {
    json!({"method": method, "params": params, "id": id})
}

/// A successful answer.
pub fn reply(result: Value, id: Value) -> Value {
    json!({"result": result, "error": null, "id": id})
}

/// A failed answer.
pub fn reply_error(error: &str, id: Value) -> Value {
    json!({"result": null, "error": error, "id": id})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concatenated_values_come_out_one_by_one() {
        let mut f = Framer::default();
        let v = f
            .push(br#"{"id":1,"result":[],"error":null}{"method":"echo","params":[],"id":"echo"} "#)
            .unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0]["id"], 1);
        assert_eq!(v[1]["method"], "echo");
        assert!(f.push(b"").unwrap().is_empty());
    }

    #[test]
    fn a_value_split_anywhere_comes_out_once_complete() {
        let text = br#"{"method":"update","params":["fulmar",{"Bridge":{"u":{"new":{"name":"br\"0"}}}}],"id":null}{"id":2,"result":{},"error":null}"#;
        for cut in 0..text.len() {
            let mut f = Framer::default();
            let mut got = f.push(&text[..cut]).unwrap();
            got.extend(f.push(&text[cut..]).unwrap());
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!(got[0]["params"][1]["Bridge"]["u"]["new"]["name"], "br\"0");
        }
        // Byte by byte.
        let mut f = Framer::default();
        let mut n = 0;
        for b in text.iter() {
            n += f.push(std::slice::from_ref(b)).unwrap().len();
        }
        assert_eq!(n, 2);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut f = Framer::default();
        assert!(f.push(b"{\"id\":1}]").is_err());
        let mut f = Framer::default();
        assert!(f.push(b"\xff\xfe").is_err());
    }

    #[test]
    fn messages_are_told_apart() {
        let m = |t: &str| Message::parse(serde_json::from_str(t).unwrap());
        assert!(matches!(
            m(r#"{"method":"echo","params":[],"id":"echo"}"#),
            Some(Message::Request { .. })
        ));
        assert!(matches!(
            m(r#"{"method":"update","params":[null,{}],"id":null}"#),
            Some(Message::Notification { .. })
        ));
        assert!(matches!(
            m(r#"{"id":3,"result":[{}],"error":null}"#),
            Some(Message::Response { .. })
        ));
        assert_eq!(m("[1,2]"), None);
        assert_eq!(m(r#"{"id":3}"#), None);
    }
}
