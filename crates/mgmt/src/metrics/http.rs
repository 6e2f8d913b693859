//! The `/metrics` HTTP/1.1 server: one request per connection, no framework.
//!
//! A connection gets 5 s to send a request head of at most 8 KiB; the head is
//! then classified by [`route`], a plain function tested without sockets:
//! `GET`/`HEAD /metrics` is scraped (the closure runs on tokio's blocking pool,
//! it sums counters), another path is 404, another method 405, a malformed,
//! oversized or late head 400. Every answer carries `Content-Length` and
//! `Connection: close`, and the connection is closed after it. At most
//! [`MAX_CONNECTIONS`] connections are served at once; further ones are
//! closed on accept, so a flood of idle sockets costs a bounded amount.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::{render_owned, Format, Scrape};

/// The largest request head (request line and headers, with the blank line).
pub(super) const MAX_HEAD: usize = 8 * 1024;
/// How long a client has to send its whole request head.
pub(super) const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// How long writing the answer may take before the connection is dropped.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// How long to read and discard what a client still sends after the answer,
/// so that closing does not reset the connection before it read the answer.
const LINGER: Duration = Duration::from_secs(1);
/// Connections served at once.
pub(super) const MAX_CONNECTIONS: usize = 64;

/// Serves `/metrics` on `listener` until the returned future is dropped or
/// its task aborted (which also ends the connections in progress). Each
/// scrape calls `scrape` on tokio's blocking pool and renders the snapshot
/// there: OpenMetrics when the `Accept` header asks for
/// `application/openmetrics-text`, the Prometheus text format 0.0.4 otherwise.
pub async fn serve(listener: TcpListener, scrape: Arc<dyn Fn() -> Scrape + Send + Sync>) {
    serve_with_deadline(listener, scrape, HEAD_DEADLINE).await
}

/// [`serve`] with another head deadline (tests use a short one).
async fn serve_with_deadline(
    listener: TcpListener,
    scrape: Arc<dyn Fn() -> Scrape + Send + Sync>,
    head_deadline: Duration,
) {
    let mut connections = JoinSet::new();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors and the like: wait rather than spin.
                tracing::warn!(error = %e, "metrics: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        if connections.len() >= MAX_CONNECTIONS {
            tracing::debug!(%peer, "metrics: too many connections, closing");
            drop(stream);
            continue;
        }
        connections.spawn(connection(stream, Arc::clone(&scrape), head_deadline));
    }
}

/// What a request head asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// A scrape, in this format; `head` when the method was `HEAD`.
    Metrics { format: Format, head: bool },
    /// A path other than `/metrics`.
    NotFound,
    /// A method other than `GET` and `HEAD`.
    MethodNotAllowed,
    /// Not an HTTP/1.x request head.
    BadRequest,
}

/// Where the request head ends (the index after its blank line), if it does.
pub(super) fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    // Bare-LF line ends, which RFC 9112 lets a server accept.
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Classifies a complete request head.
pub(super) fn route(head: &[u8]) -> Route {
    let Ok(head) = std::str::from_utf8(head) else {
        return Route::BadRequest;
    };
    let mut lines = head.lines();
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if method.is_empty() || target.is_empty() || !version.starts_with("HTTP/1.") {
        return Route::BadRequest;
    }
    let mut accept: Option<String> = None;
    for line in lines.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Route::BadRequest;
        };
        if name.trim().eq_ignore_ascii_case("accept") {
            // Repeated headers combine into one comma-separated list.
            let value = value.trim();
            accept = Some(match accept {
                Some(prev) => format!("{prev}, {value}"),
                None => value.to_string(),
            });
        }
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Route::MethodNotAllowed,
    };
    let path = target.split_once('?').map_or(target, |(path, _query)| path);
    if path != "/metrics" {
        return Route::NotFound;
    }
    Route::Metrics {
        format: Format::from_accept(accept.as_deref()),
        head: head_only,
    }
}

/// Why no request head came.
enum HeadError {
    /// The client closed or the socket failed: nothing to answer.
    Gone,
    /// More than [`MAX_HEAD`] bytes without the blank line.
    TooLarge,
}

async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(HeadError::Gone),
            Ok(n) => n,
        };
        let scanned = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf[scanned..]) {
            let end = scanned + end;
            if end > MAX_HEAD {
                return Err(HeadError::TooLarge);
            }
            buf.truncate(end);
            return Ok(buf);
        }
        if buf.len() >= MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

async fn connection(
    mut stream: TcpStream,
    scrape: Arc<dyn Fn() -> Scrape + Send + Sync>,
    head_deadline: Duration,
) {
    let response = match tokio::time::timeout(head_deadline, read_head(&mut stream)).await {
        Err(_elapsed) => plain(
            400,
            "Bad Request",
            &format!("request head not complete within {head_deadline:?}\n"),
        ),
        Ok(Err(HeadError::Gone)) => return,
        Ok(Err(HeadError::TooLarge)) => plain(400, "Bad Request", "request head over 8 KiB\n"),
        Ok(Ok(head)) => match route(&head) {
            Route::BadRequest => plain(400, "Bad Request", "not an HTTP/1.x request\n"),
            Route::NotFound => plain(404, "Not Found", "only /metrics is served here\n"),
            Route::MethodNotAllowed => {
                let mut r = plain(405, "Method Not Allowed", "only GET and HEAD\n");
                r.extra = "Allow: GET, HEAD\r\n";
                r
            }
            Route::Metrics { format, head } => {
                let scraped =
                    tokio::task::spawn_blocking(move || render_owned(scrape(), format)).await;
                match scraped {
                    Ok(body) => Response {
                        status: 200,
                        reason: "OK",
                        content_type: format.content_type(),
                        extra: "",
                        body,
                        head_only: head,
                    },
                    Err(e) => {
                        tracing::error!(error = %e, "metrics: scrape failed");
                        plain(500, "Internal Server Error", "scrape failed\n")
                    }
                }
            }
        },
    };
    let written = tokio::time::timeout(WRITE_DEADLINE, async {
        stream.write_all(&response.to_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return;
    }
    // Read what the client still sends (the rest of an oversized head) until
    // it closes, briefly, so the close is a FIN it can read the answer before.
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

struct Response {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    extra: &'static str,
    body: String,
    head_only: bool,
}

fn plain(status: u16, reason: &'static str, body: &str) -> Response {
    Response {
        status,
        reason,
        content_type: "text/plain; charset=utf-8",
        extra: "",
        body: body.to_string(),
        head_only: false,
    }
}

impl Response {
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
            self.status,
            self.reason,
            self.content_type,
            self.body.len(),
            self.extra
        )
        .into_bytes();
        if !self.head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

/// Parses the `--metrics` listen address: `ADDR:PORT` (`0.0.0.0:9100`),
/// `[IPv6]:PORT` (`[::1]:9100`), `localhost:PORT`, or `:PORT` and `PORT`,
/// which mean 127.0.0.1 — the page is only exposed beyond the host where the
/// operator names an address.
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let port = if let Some(port) = s.strip_prefix(':') {
        port
    } else if let Some(port) = s.strip_prefix("localhost:") {
        port
    } else {
        s
    };
    if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(port) = port.parse::<u16>() {
            return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
        }
        return Err(format!("{s:?}: port {port} is over 65535"));
    }
    Err(format!(
        "{s:?}: expected ADDR:PORT, [IPv6]:PORT, :PORT or PORT (an IPv6 address needs brackets)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn listen_addresses() {
        let v4 = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(parse_listen_addr("9100"), Ok(v4("127.0.0.1:9100")));
        assert_eq!(parse_listen_addr(":9100"), Ok(v4("127.0.0.1:9100")));
        assert_eq!(
            parse_listen_addr("localhost:9100"),
            Ok(v4("127.0.0.1:9100"))
        );
        assert_eq!(parse_listen_addr("0.0.0.0:9100"), Ok(v4("0.0.0.0:9100")));
        assert_eq!(parse_listen_addr("10.1.2.3:80"), Ok(v4("10.1.2.3:80")));
        assert_eq!(parse_listen_addr("[::1]:9100"), Ok(v4("[::1]:9100")));
        assert_eq!(parse_listen_addr("[::]:9100"), Ok(v4("[::]:9100")));
        for bad in [
            "",
            ":",
            "::1:9100",
            "host:9100",
            "70000",
            ":-1",
            "1.2.3.4",
            "+80",
        ] {
            assert!(parse_listen_addr(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_listen_addr("70000")
            .unwrap_err()
            .contains("over 65535"));
    }

    #[test]
    fn routes() {
        let om = Route::Metrics {
            format: Format::OpenMetrics,
            head: false,
        };
        let text = Route::Metrics {
            format: Format::PrometheusText,
            head: false,
        };
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), text);
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), text);
        assert_eq!(
            route(b"HEAD /metrics HTTP/1.1\r\n\r\n"),
            Route::Metrics {
                format: Format::PrometheusText,
                head: true
            }
        );
        // What Prometheus 2.x sends.
        let prometheus = b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n";
        assert_eq!(route(prometheus), om);
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\naccept: text/plain\r\nACCEPT: Application/OpenMetrics-Text\r\n\r\n"),
            om
        );
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; q=0\r\n\r\n"),
            text
        );
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route(b"GET /metricsx HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Route::MethodNotAllowed
        );
        assert_eq!(route(b"GET /metrics\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b"GET /metrics SPDY/3\r\n\r\n"), Route::BadRequest);
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n"),
            Route::BadRequest
        );
        assert_eq!(route(b"\xff /metrics HTTP/1.1\r\n\r\n"), Route::BadRequest);
    }

    #[test]
    fn head_ends() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nbody"), Some(16));
    }

    use crate::metrics::tests::sample as sample_scrape;

    async fn start() -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_with_deadline(
            listener,
            Arc::new(sample_scrape),
            Duration::from_millis(300),
        ));
        (addr, server)
    }

    /// Sends `request`, reads the answer to the end.
    async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        String::from_utf8(answer).unwrap()
    }

    fn split(answer: &str) -> (&str, &str) {
        answer.split_once("\r\n\r\n").expect("a head and a body")
    }

    #[tokio::test]
    async fn scrape_over_tcp() {
        let (addr, server) = start().await;

        let answer = exchange(
            addr,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
        )
        .await;
        let (head, body) = split(&answer);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains(
            "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
        ));
        assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())));
        assert!(head.contains("\r\nConnection: close"));
        assert!(body.ends_with("# EOF\n"));
        assert!(body
            .contains("fulmar_port_rx_packets_total{bridge=\"br0\",port=\"p1\",ofport=\"1\"} 5\n"));
        assert_eq!(body, crate::metrics::render(&sample_scrape()));

        // No Accept header: the Prometheus text format.
        let answer = exchange(addr, b"GET /metrics HTTP/1.0\r\n\r\n").await;
        let (head, body) = split(&answer);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
        assert_eq!(
            body,
            crate::metrics::render_prometheus_text(&sample_scrape())
        );
        assert!(!body.contains("# EOF"));

        // HEAD: the same head, no body.
        let answer = exchange(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n").await;
        let (head, body) = split(&answer);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(!head.contains("Content-Length: 0\r\n"));
        assert_eq!(body, "");

        server.abort();
    }

    #[tokio::test]
    async fn errors_over_tcp() {
        let (addr, server) = start().await;

        let answer = exchange(addr, b"GET /other HTTP/1.1\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
        assert!(answer.contains("\r\nConnection: close\r\n"));

        let answer = exchange(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").await;
        assert!(
            answer.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{answer}"
        );
        assert!(answer.contains("\r\nAllow: GET, HEAD\r\n"));

        let answer = exchange(addr, b"garbage\r\n\r\n").await;
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );

        // A head that never ends within 8 KiB, sent whole.
        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while huge.len() <= MAX_HEAD + 1000 {
            huge.extend_from_slice(b"X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        let answer = exchange(addr, &huge).await;
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );

        // Exactly at the limit is still served.
        let mut max = b"GET /metrics HTTP/1.1\r\nX-Padding: ".to_vec();
        max.resize(MAX_HEAD - 4, b'a');
        max.extend_from_slice(b"\r\n\r\n");
        let answer = exchange(addr, &max).await;
        assert!(
            answer.starts_with("HTTP/1.1 200 OK\r\n"),
            "{}",
            &answer[..40]
        );

        server.abort();
    }

    #[tokio::test]
    async fn a_slow_head_gets_400() {
        let (addr, server) = start().await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8(answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );
        assert!(answer.ends_with("request head not complete within 300ms\n"));
        server.abort();
    }

    #[tokio::test]
    async fn aborting_serve_closes_the_listener() {
        let (addr, server) = start().await;
        server.abort();
        let _ = server.await;
        assert!(TcpStream::connect(addr).await.is_err());
    }
}
