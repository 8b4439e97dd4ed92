//! A webhook receiver for tests: HTTPS on 127.0.0.1 with a certificate for a test host name,
//! signed by a certificate authority made for the run (cova trusts it through
//! `notifier.extra_ca_pem`). It records every request and answers from a script.

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// How to answer one request.
#[derive(Debug, Clone)]
pub enum Reply {
    Status(u16),
    /// A redirect to this location.
    Redirect(String),
    /// Answer only after this long.
    Slow(Duration, u16),
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    script: VecDeque<Reply>,
    /// How long an unscripted answer (200) takes.
    latency: Duration,
}

/// A certificate authority for one test run, and the PEM file cova is told to trust.
pub struct TestCa {
    key: KeyPair,
    params: CertificateParams,
    pem_file: tempfile::NamedTempFile,
}

impl TestCa {
    pub fn new() -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).expect("CA certificate");
        let pem_file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(pem_file.path(), cert.pem()).expect("write CA");
        Self { key, params, pem_file }
    }

    /// The PEM file of the authority (for `notifier.extra_ca_pem`).
    pub fn pem_path(&self) -> String {
        self.pem_file.path().display().to_string()
    }

    fn leaf(&self, host: &str) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().expect("leaf key");
        let params = CertificateParams::new(vec![host.to_owned()]).expect("leaf params");
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("leaf certificate");
        (cert.der().clone(), PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

pub struct Receiver {
    pub addr: SocketAddr,
    /// `https://<host>:<port>`
    pub base_url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Listens on 127.0.0.1 with a certificate for `host` from `ca`; answers 200 unless scripted.
    pub async fn spawn(ca: &TestCa, host: &str) -> Self {
        let (cert, key) = ca.leaf(host);
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("server certificate");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, state) = (acceptor.clone(), shared.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        let _ = serve(tls, state).await;
                    }
                });
            }
        });
        Self { addr, base_url: format!("https://{host}:{}", addr.port()), state, task }
    }

    /// The next answers, in order; after them, 200.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().expect("lock").script.extend(replies);
    }

    /// Unscripted answers (200) come after `latency`, like a receiver that does some work.
    pub fn set_latency(&self, latency: Duration) {
        self.state.lock().expect("lock").latency = latency;
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.state.lock().expect("lock").received.len()
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.lock().expect("lock").received.clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads HTTP/1.1 requests (Content-Length bodies) one after the other on a kept-alive
/// connection, as most receivers allow; records and answers each. Ends when the client closes.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut io: S,
    state: Arc<Mutex<State>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        buf = answer_one(&mut io, &state, buf).await?;
        if buf.is_empty() && !io_open(&mut io, &mut buf).await? {
            return Ok(());
        }
    }
}

/// Whether the client sends more on this connection (the bytes read go to `buf`).
async fn io_open<S: tokio::io::AsyncRead + Unpin>(io: &mut S, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut chunk = [0u8; 4096];
    let n = io.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

/// Reads one request (starting with the bytes in `buf`), records it and answers; returns the
/// bytes read past it.
async fn answer_one<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    io: &mut S,
    state: &Arc<Mutex<State>>,
    mut buf: Vec<u8>,
) -> std::io::Result<Vec<u8>> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (method, path) = (first.next().unwrap_or_default().to_owned(), first.next().unwrap_or_default().to_owned());
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let rest = body.split_off(length.min(body.len()));
    let reply = {
        let mut state = state.lock().expect("lock");
        state.received.push(Received { method, path, headers, body });
        let latency = state.latency;
        state.script.pop_front().unwrap_or(Reply::Slow(latency, 200))
    };
    let (status, extra) = match reply {
        Reply::Status(s) => (s, String::new()),
        Reply::Redirect(to) => (302, format!("location: {to}\r\n")),
        Reply::Slow(wait, s) => {
            tokio::time::sleep(wait).await;
            (s, String::new())
        }
    };
    let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\n{extra}\r\nok");
    io.write_all(answer.as_bytes()).await?;
    Ok(rest)
}
