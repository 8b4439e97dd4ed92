//! The HTTP server: actix-web's service stack on actix-server, as `HttpServer` builds it, with
//! one difference. A request whose head cannot be parsed (a NUL in a header, Content-Length
//! together with Transfer-Encoding, two Content-Lengths, a head over 128 KiB) never reaches
//! the application: actix-http answers it with a canned, bodiless 400 or 431 (or 408 for a
//! head that arrives too slowly). Each connection is wrapped so that such a canned answer is
//! rewritten into the catalogue's `{detail, code}` body and logged as a warning. The
//! application never sends a bodiless 4xx itself, so only those answers match.

use actix_http::body::MessageBody;
use actix_http::{HttpService, KeepAlive, Protocol, Request, Response};
use actix_server::Server;
use actix_service::{IntoServiceFactory, Service, ServiceFactory, ServiceFactoryExt, fn_service, map_config};
use actix_web::dev::AppConfig;
use cova_errors::{ApiError, ErrorCode};
use std::io;
use std::net::TcpListener;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub struct Settings {
    /// HTTP worker threads; 0 = one per CPU.
    pub workers: usize,
    pub shutdown_timeout_s: u64,
    /// How long a client may take to send a request head (then: 408).
    pub head_timeout: Duration,
    pub keep_alive: Duration,
}

/// Serves the application built by `factory` (called once per worker) on `listener`.
pub fn serve<F, I, S, B>(listener: TcpListener, settings: Settings, factory: F) -> io::Result<Server>
where
    F: Fn() -> I + Send + Clone + 'static,
    I: IntoServiceFactory<S, Request>,
    S: ServiceFactory<Request, Config = AppConfig> + 'static,
    S::Error: Into<actix_web::Error> + 'static,
    S::InitError: std::fmt::Debug,
    S::Response: Into<Response<B>> + 'static,
    <S::Service as Service<Request>>::Future: 'static,
    S::Service: 'static,
    B: MessageBody + 'static,
{
    let addr = listener.local_addr()?;
    let mut builder = Server::build().disable_signals().shutdown_timeout(settings.shutdown_timeout_s);
    if settings.workers > 0 {
        builder = builder.workers(settings.workers);
    }
    let (head_timeout, keep_alive) = (settings.head_timeout, settings.keep_alive);
    builder = builder.listen("cova-http", listener, move || {
        let app = factory().into_factory().map_err(|err| err.into().error_response());
        let http = HttpService::build()
            .keep_alive(KeepAlive::Timeout(keep_alive))
            .client_request_timeout(head_timeout)
            .local_addr(addr)
            .finish(map_config(app, |_| AppConfig::default()));
        fn_service(|io: TcpStream| async move {
            let _ = io.set_nodelay(true);
            let peer = io.peer_addr().ok();
            Ok((CannedAnswers::new(io), Protocol::Http1, peer))
        })
        .and_then(http)
    })?;
    Ok(builder.run())
}

/// The answers actix-http gives on its own, and what they become.
const CANNED: [(&str, ErrorCode, &str); 3] = [
    (
        "HTTP/1.1 400 Bad Request\r\n",
        ErrorCode::ValidationError,
        "The request is malformed HTTP (for example a NUL byte in a header, Content-Length together with \
         Transfer-Encoding, or two Content-Length headers).",
    ),
    (
        "HTTP/1.1 431 Request Header Fields Too Large\r\n",
        ErrorCode::HeadersTooLarge,
        "The request line and headers are larger than 128 KiB, or there are more than 96 headers.",
    ),
    ("HTTP/1.1 408 Request Timeout\r\n", ErrorCode::RequestTimeout, "The request head was not received in time."),
];

/// A connection whose canned, bodiless error answers are rewritten on their way out.
struct CannedAnswers<T> {
    io: T,
    /// Rewritten bytes still to be written to `io`.
    pending: Vec<u8>,
    written: usize,
}

impl<T> CannedAnswers<T> {
    fn new(io: T) -> Self {
        Self { io, pending: Vec::new(), written: 0 }
    }
}

/// Every byte the server writes is searched (a 5,000-comment result is 3.6 MB): vectorised
/// substring searches, built once.
struct Finders {
    canned: Vec<memchr::memmem::Finder<'static>>,
    head_end: memchr::memmem::Finder<'static>,
}

static FINDERS: std::sync::LazyLock<Finders> = std::sync::LazyLock::new(|| Finders {
    canned: CANNED.iter().map(|(line, _, _)| memchr::memmem::Finder::new(line.as_bytes())).collect(),
    head_end: memchr::memmem::Finder::new(b"\r\n\r\n"),
});

/// `buf` with a canned answer in it replaced, or `None` when it holds none.
fn rewrite(buf: &[u8]) -> Option<Vec<u8>> {
    let finders = &*FINDERS;
    for ((status_line, code, detail), finder) in CANNED.iter().zip(&finders.canned) {
        let Some(start) = finder.find(buf) else { continue };
        let head_end = finders.head_end.find(&buf[start..]).map(|i| start + i + 4)?;
        let head = String::from_utf8_lossy(&buf[start..head_end]).to_ascii_lowercase();
        if !head.contains("\r\ncontent-length: 0\r\n") || head.contains("\r\ncontent-type:") {
            continue;
        }
        let error = ApiError::new(*code, *detail);
        tracing::warn!(http.status = error.status(), code = code.as_str(), "malformed request refused");
        let body = serde_json::to_vec(&error.body()).unwrap_or_default();
        let mut out = buf[..start].to_vec();
        out.extend_from_slice(
            format!(
                "{}content-type: application/json\r\nx-content-type-options: nosniff\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                status_line,
                body.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(&body);
        // The canned answer closes the connection: nothing follows it.
        return Some(out);
    }
    None
}

impl<T: AsyncWrite + Unpin> CannedAnswers<T> {
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.pending.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CannedAnswers<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CannedAnswers<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        match rewrite(buf) {
            Some(rewritten) => {
                self.pending = rewritten;
                // The caller's bytes are taken; they leave with the next flush at the latest.
                let _ = self.poll_pending(cx)?;
                Poll::Ready(Ok(buf.len()))
            }
            None => Pin::new(&mut self.io).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn canned_answers_get_a_catalogue_body() {
        let canned = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\ndate: Mon, 23 Nov 2026 10:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(rewrite(canned).expect("rewritten")).expect("utf-8");
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"), "{out}");
        let body = out.split("\r\n\r\n").nth(1).expect("body");
        let v: serde_json::Value = serde_json::from_str(body).expect("json body");
        assert_eq!(v["code"], "validation_error");
        assert!(out.contains(&format!("content-length: {}\r\n", body.len())));
    }

    #[test]
    fn application_answers_pass_unchanged() {
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 50\r\ncontent-type: application/json\r\n\r\n{}";
        assert!(rewrite(ours).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(rewrite(ok).is_none());
        let with_earlier = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        let out = String::from_utf8(rewrite(with_earlier).expect("rewritten")).expect("utf-8");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"), "earlier answers stay");
        assert!(out.contains("headers_too_large"), "{out}");
    }
}
