//! The control socket: JSON-RPC 1.0 over a unix stream socket, as Open
//! vSwitch's unixctl speaks it, so `ovs-appctl -t SOCKET COMMAND ARGS…`
//! and `fulmar ctl` are both its clients.
//!
//! A request is `{"id": ID, "method": "COMMAND", "params": ["ARG", …]}`;
//! the answer is `{"id": ID, "result": "TEXT", "error": null}` or
//! `{"id": ID, "result": null, "error": "TEXT"}`. Requests follow each
//! other on the stream as concatenated JSON values; a connection may send
//! several. A value that is not such a request gets an error reply and
//! changes nothing; one larger than [`MAX_REQUEST`] closes the connection.
//!
//! The socket file is created owner-only (0600), or 0660 for a group
//! ([`CtlPerms`]); the kernel refuses everyone else's `connect`. Commands
//! run on the blocking pool (they may wait for workers, a barrier or a
//! transaction), one at a time per connection.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The largest request accepted (bytes of JSON).
pub const MAX_REQUEST: usize = 1 << 20;

/// Something that answers commands (see [`crate::commands::Ctl`]).
pub trait Handler: Send + Sync + 'static {
    /// Runs `method` with `params`: the text to print, or an error.
    fn call(&self, method: &str, params: &[String]) -> Result<String, String>;
}

/// Who may connect.
#[derive(Clone, Debug, Default)]
pub struct CtlPerms {
    /// A group whose members may connect too (mode 0660 instead of 0600).
    pub group: Option<u32>,
}

/// Binds the control socket at `path`: makes its directory, replaces a
/// stale socket left by an earlier run (a file of another kind is an
/// error, as is a socket another process still answers on), and sets
/// its mode.
pub fn bind(path: &Path, perms: &CtlPerms) -> io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{}: another switch answers there", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    let mode = if perms.group.is_some() { 0o660 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    if let Some(gid) = perms.group {
        std::os::unix::fs::chown(path, None, Some(gid))?;
    }
    Ok(listener)
}

/// The socket file, removed when dropped.
pub struct SocketFile(pub PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Accepts connections on `listener` and answers their requests with
/// `handler` until the task is dropped.
pub async fn serve(listener: UnixListener, handler: Arc<dyn Handler>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let h = handler.clone();
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, h).await {
                        tracing::debug!(error = %e, "control connection ended");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "control socket accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// What one JSON value asks.
#[derive(Debug, PartialEq)]
pub struct Request {
    /// The id to echo.
    pub id: Value,
    /// The command.
    pub method: String,
    /// Its arguments.
    pub params: Vec<String>,
}

/// Reads a request out of a JSON value; the error says what is wrong
/// (and carries the id to answer with, when there is one).
pub fn parse_request(v: &Value) -> Result<Request, (Value, String)> {
    let id = v.get("id").cloned().unwrap_or(Value::Null);
    let Some(obj) = v.as_object() else {
        return Err((id, "a request is a JSON object".into()));
    };
    let method = match obj.get("method") {
        Some(Value::String(m)) => m.clone(),
        _ => return Err((id, "\"method\" must be a string".into())),
    };
    let params = match obj.get("params") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for p in a {
                match p {
                    Value::String(s) => out.push(s.clone()),
                    _ => return Err((id, "\"params\" must be an array of strings".into())),
                }
            }
            out
        }
        Some(_) => return Err((id, "\"params\" must be an array of strings".into())),
    };
    if !obj.contains_key("id") {
        return Err((id, "a request needs an \"id\"".into()));
    }
    Ok(Request { id, method, params })
}

/// The reply to a request.
pub fn reply(id: Value, r: Result<String, String>) -> Value {
    match r {
        Ok(text) => json!({"id": id, "result": text, "error": null}),
        Err(e) => json!({"id": id, "result": null, "error": e}),
    }
}

/// Splits the complete JSON values off the front of `buf`: the values and
/// how many bytes they took. A syntax error yields `Err` with its offset
/// (the stream cannot be resynchronised: the connection is answered and
/// closed).
pub fn split_values(buf: &[u8]) -> Result<(Vec<Value>, usize), String> {
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_slice(buf).into_iter::<Value>();
    let mut used = 0;
    loop {
        match stream.next() {
            None => break,
            Some(Ok(v)) => {
                used = stream.byte_offset();
                values.push(v);
            }
            Some(Err(e)) if e.is_eof() => break,
            Some(Err(e)) => return Err(format!("malformed JSON: {e}")),
        }
    }
    Ok((values, used))
}

async fn connection(mut stream: UnixStream, handler: Arc<dyn Handler>) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        let (values, used) = match split_values(&buf) {
            Ok(v) => v,
            Err(e) => {
                let r = reply(Value::Null, Err(e));
                stream.write_all(r.to_string().as_bytes()).await?;
                return Ok(());
            }
        };
        buf.drain(..used);
        for v in values {
            let answer = match parse_request(&v) {
                Err((id, e)) => reply(id, Err(e)),
                Ok(req) => {
                    let h = handler.clone();
                    let id = req.id.clone();
                    let r = tokio::task::spawn_blocking(move || h.call(&req.method, &req.params))
                        .await
                        .unwrap_or_else(|e| Err(format!("command failed: {e}")));
                    reply(id, r)
                }
            };
            stream.write_all(answer.to_string().as_bytes()).await?;
        }
        if buf.len() > MAX_REQUEST {
            let r = reply(
                Value::Null,
                Err(format!("request larger than {MAX_REQUEST} bytes")),
            );
            stream.write_all(r.to_string().as_bytes()).await?;
            return Ok(());
        }
    }
}

/// A blocking client call (what `fulmar ctl` does): connects, sends one
/// request, reads one reply.
pub fn call(path: &Path, method: &str, params: &[String]) -> io::Result<Result<String, String>> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(path)?;
    let req = json!({"id": 0, "method": method, "params": params});
    s.write_all(req.to_string().as_bytes())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the switch closed the control connection without answering",
            ));
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        let (values, _) = split_values(&buf).map_err(io::Error::other)?;
        if let Some(v) = values.into_iter().next() {
            let err = v.get("error").cloned().unwrap_or(Value::Null);
            return Ok(match (v.get("result"), err) {
                (_, Value::String(e)) => Err(e),
                (Some(Value::String(r)), _) => Ok(r.clone()),
                (Some(other), _) if !other.is_null() => Ok(other.to_string()),
                _ => Err(format!("unexpected reply: {v}")),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked() {
        let ok = json!({"id": 7, "method": "show", "params": ["--json"]});
        assert_eq!(
            parse_request(&ok).unwrap(),
            Request {
                id: json!(7),
                method: "show".into(),
                params: vec!["--json".into()]
            }
        );
        for (bad, why) in [
            (json!([1]), "object"),
            (json!({"id": 1, "method": 3}), "method"),
            (json!({"id": 1, "method": "x", "params": [1]}), "params"),
            (json!({"id": 1, "method": "x", "params": "a"}), "params"),
            (json!({"method": "x"}), "id"),
        ] {
            let (_, e) = parse_request(&bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn values_split_off_a_stream() {
        let (v, used) = split_values(br#"{"a":1}{"b":2} {"c""#).unwrap();
        assert_eq!(v, vec![json!({"a":1}), json!({"b":2})]);
        assert_eq!(used, 14);
        assert!(split_values(b"{]").is_err());
        assert_eq!(split_values(b"").unwrap().0.len(), 0);
    }

    struct Echo;
    impl Handler for Echo {
        fn call(&self, method: &str, params: &[String]) -> Result<String, String> {
            if method == "fail" {
                return Err("no".into());
            }
            Ok(format!("{method} {}", params.join(" ")))
        }
    }

    #[test]
    fn a_socket_answers_and_survives_bad_requests() {
        let dir = std::env::temp_dir().join(format!("fulmar-ctl-test-{}", std::process::id()));
        let path = dir.join("t.ctl");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(async { bind(&path, &CtlPerms::default()) })
            .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let task = rt.spawn(serve(listener, Arc::new(Echo)));
        let p2 = path.clone();
        let client = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let ok = call(&p2, "show", &["x".into()]).unwrap();
            let fail = call(&p2, "fail", &[]).unwrap();
            // Two requests back to back and a bad one on one connection.
            let mut s = std::os::unix::net::UnixStream::connect(&p2).unwrap();
            s.write_all(br#"{"id":1,"method":"a","params":[]}{"id":2,"params":[]}{"id":3,"method":"b","params":["c"]}"#)
                .unwrap();
            let mut got = Vec::new();
            let mut chunk = [0u8; 4096];
            while split_values(&got).unwrap().0.len() < 3 {
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0);
                got.extend_from_slice(&chunk[..n]);
            }
            (ok, fail, split_values(&got).unwrap().0)
        });
        let (ok, fail, three) = loop {
            if client.is_finished() {
                break client.join().unwrap();
            }
            rt.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(10)).await });
        };
        task.abort();
        assert_eq!(ok, Ok("show x".into()));
        assert_eq!(fail, Err("no".into()));
        assert_eq!(three[0]["result"], json!("a "));
        assert_eq!(three[1]["id"], json!(2));
        assert!(three[1]["error"].as_str().unwrap().contains("method"));
        assert_eq!(three[2]["result"], json!("b c"));
        // A stale socket is replaced by the next bind.
        drop(rt);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async { bind(&path, &CtlPerms::default()) })
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
