//! A PostgreSQL socket that notices a server that stopped answering.
//!
//! A network that drops packets is noticed by the socket's own timeouts (`TCP_USER_TIMEOUT`,
//! keepalives): sent data goes unacknowledged. A stalled server is not: its host acknowledges
//! every byte and answers keepalives while the process answers nothing, so a statement would
//! wait until the stall ends, and `statement_timeout` cannot end it (the server is what is
//! stalled). [`Answering`] bounds that wait on cova's side: once a request has been written, a
//! byte of the reply must arrive within the bound, or the socket fails, which closes the
//! connection: the statements waiting on it fail as an unreachable database (503 on a request,
//! a retry in a worker), the pool drops the connection, and the next request marks the database
//! down until a probe gets an answer.
//!
//! The bound is the server's own `statement_timeout` plus `io_timeout_ms`: a statement that runs
//! long is ended by the server within it, so only a server that answers nothing passes it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// A TCP stream whose reads fail when a written request gets no byte back within `bound`.
pub(crate) struct Answering {
    inner: TcpStream,
    bound: Duration,
    /// Armed by a write while no reply is awaited; disarmed by any byte read.
    awaiting: Option<Pin<Box<Sleep>>>,
}

impl Answering {
    pub(crate) fn new(inner: TcpStream, bound: Duration) -> Self {
        Self { inner, bound, awaiting: None }
    }
}

impl AsyncRead for Answering {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.awaiting = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match self.awaiting.as_mut().map(|deadline| deadline.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the database server answered nothing within {} ms", self.bound.as_millis()),
                ))),
                _ => Poll::Pending,
            },
            other => other,
        }
    }
}

impl AsyncWrite for Answering {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) && self.awaiting.is_none() {
            let mut deadline = Box::pin(tokio::time::sleep(self.bound));
            // Polled once so that it wakes this task when it passes: the connection's task may
            // have polled its read before this write, and then waits for nothing else.
            let _ = deadline.as_mut().poll(cx);
            self.awaiting = Some(deadline);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Opens a TCP connection to the first of `hosts` that answers, with keepalives (`idle` apart,
/// two missed ones end it) and `TCP_USER_TIMEOUT` of `io_timeout`, as `tokio_postgres` would
/// set them itself.
pub(crate) async fn connect_tcp(
    hosts: &[(String, u16)],
    connect_timeout: Duration,
    io_timeout: Duration,
    idle: Duration,
) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "the database URL names no host");
    for (host, port) in hosts {
        let attempt = async {
            let stream = TcpStream::connect((host.as_str(), *port)).await?;
            stream.set_nodelay(true)?;
            let socket = socket2::SockRef::from(&stream);
            socket
                .set_tcp_keepalive(&socket2::TcpKeepalive::new().with_time(idle).with_interval(idle).with_retries(2))?;
            #[cfg(target_os = "linux")]
            socket.set_tcp_user_timeout(Some(io_timeout))?;
            #[cfg(not(target_os = "linux"))]
            let _ = io_timeout;
            Ok::<_, io::Error>(stream)
        };
        match tokio::time::timeout(connect_timeout, attempt).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = e,
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, format!("connecting to {host}:{port} timed out")),
        }
    }
    Err(last)
}
