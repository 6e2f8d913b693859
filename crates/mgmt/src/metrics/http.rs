//! The `/metrics` HTTP/1.1 server, on `hyper` (the request parser, the
//! response writer, the head deadline and size limit are its).
//!
//! What is ours is the policy. A connection gets [`HEAD_DEADLINE`] to send
//! a request head of at most [`MAX_HEAD`] bytes (`hyper`'s
//! `header_read_timeout` and `max_buf_size`: a late head closes the
//! connection, an oversized one gets 431, a malformed one 400). The head
//! is then classified by [`route`], a plain function tested without
//! sockets: `GET`/`HEAD /metrics` is scraped (the closure runs on tokio's
//! blocking pool, it sums counters), another path is 404, another method
//! 405. Every answer carries `Content-Length` and `Connection: close`, and
//! the connection is closed after it. At most [`MAX_CONNECTIONS`]
//! connections are served at once; further ones are closed on accept, so
//! a flood of idle sockets costs a bounded amount.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::{render_owned, Format, Scrape};

/// The largest request head (request line and headers), the least `hyper`
/// accepts as its read buffer.
pub(super) const MAX_HEAD: usize = 8 * 1024;
/// How long a client has to send its whole request head.
pub(super) const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// How long a connection may take in all, head to answer written.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(15);
/// Connections served at once.
pub(super) const MAX_CONNECTIONS: usize = 64;

/// The scrape the server calls for each `/metrics` request.
type ScrapeFn = Arc<dyn Fn() -> Scrape + Send + Sync>;

/// Serves `/metrics` on `listener` until the returned future is dropped or
/// its task aborted (which also ends the connections in progress). Each
/// scrape calls `scrape` on tokio's blocking pool and renders the snapshot
/// there: OpenMetrics when the `Accept` header asks for
/// `application/openmetrics-text`, the Prometheus text format 0.0.4 otherwise.
pub async fn serve(listener: TcpListener, scrape: ScrapeFn) {
    serve_with_deadline(listener, scrape, HEAD_DEADLINE).await
}

/// [`serve`] with another head deadline (tests use a short one).
async fn serve_with_deadline(listener: TcpListener, scrape: ScrapeFn, head_deadline: Duration) {
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

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// A scrape, in this format; `head` when the method was `HEAD`.
    Metrics { format: Format, head: bool },
    /// A path other than `/metrics`.
    NotFound,
    /// A method other than `GET` and `HEAD`.
    MethodNotAllowed,
}

/// Classifies a request by its method, path and `Accept` values (repeated
/// headers are read as one comma-separated list).
pub(super) fn route<'a>(
    method: &Method,
    path: &str,
    accept: impl IntoIterator<Item = &'a str>,
) -> Route {
    let head = match *method {
        Method::GET => false,
        Method::HEAD => true,
        _ => return Route::MethodNotAllowed,
    };
    if path != "/metrics" {
        return Route::NotFound;
    }
    let accept: Vec<&str> = accept.into_iter().collect();
    let accept = (!accept.is_empty()).then(|| accept.join(", "));
    Route::Metrics {
        format: Format::from_accept(accept.as_deref()),
        head,
    }
}

async fn connection(stream: TcpStream, scrape: ScrapeFn, head_deadline: Duration) {
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let scrape = Arc::clone(&scrape);
        async move { Ok::<_, Infallible>(answer(&req, scrape).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head_deadline)
        .max_buf_size(MAX_HEAD)
        .keep_alive(false)
        .title_case_headers(true)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(CONNECTION_DEADLINE, served).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "metrics: connection ended"),
        Err(_) => tracing::debug!("metrics: connection over its deadline, closed"),
    }
}

async fn answer(req: &Request<Incoming>, scrape: ScrapeFn) -> Response<Full<Bytes>> {
    let accept = req
        .headers()
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok());
    match route(req.method(), req.uri().path(), accept) {
        Route::NotFound => plain(StatusCode::NOT_FOUND, "only /metrics is served here\n"),
        Route::MethodNotAllowed => {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            r
        }
        Route::Metrics { format, .. } => {
            // `hyper` leaves the body out of a HEAD answer, keeping its
            // Content-Length.
            match tokio::task::spawn_blocking(move || render_owned(scrape(), format)).await {
                Ok(body) => with_type(StatusCode::OK, body, format.content_type()),
                Err(e) => {
                    tracing::error!(error = %e, "metrics: scrape failed");
                    plain(StatusCode::INTERNAL_SERVER_ERROR, "scrape failed\n")
                }
            }
        }
    }
}

fn with_type(
    status: StatusCode,
    body: String,
    content_type: &'static str,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn plain(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    with_type(status, body.to_string(), "text/plain; charset=utf-8")
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
        let get = Method::GET;
        assert_eq!(route(&get, "/metrics", []), text);
        assert_eq!(
            route(&Method::HEAD, "/metrics", []),
            Route::Metrics {
                format: Format::PrometheusText,
                head: true
            }
        );
        // What Prometheus 2.x sends.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(route(&get, "/metrics", [prometheus]), om);
        // Repeated headers are one list.
        assert_eq!(
            route(
                &get,
                "/metrics",
                ["text/plain", "Application/OpenMetrics-Text"]
            ),
            om
        );
        assert_eq!(
            route(&get, "/metrics", ["application/openmetrics-text; q=0"]),
            text
        );
        assert_eq!(route(&get, "/", []), Route::NotFound);
        assert_eq!(route(&get, "/metricsx", []), Route::NotFound);
        assert_eq!(
            route(&Method::POST, "/metrics", []),
            Route::MethodNotAllowed
        );
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

        // No Accept header: the Prometheus text format. (An HTTP/1.0
        // answer needs no Connection header to close.)
        let answer = exchange(addr, b"GET /metrics HTTP/1.0\r\n\r\n").await;
        let (head, body) = split(&answer);
        assert!(head.starts_with("HTTP/1.0 200 OK\r\n"), "{head}");
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
            answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
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

    /// A head not complete within the deadline: the connection is
    /// closed, unanswered.
    #[tokio::test]
    async fn a_slow_head_is_closed() {
        let (addr, server) = start().await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        // Ends (EOF or reset) only because the server closed it; the
        // deadline is generous, 100 times the server's.
        let ended =
            tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer)).await;
        assert!(ended.is_ok(), "the connection stayed open");
        assert!(
            answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
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
