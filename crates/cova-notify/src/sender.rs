//! Sending: webhooks to the address the guard checked (no second resolution), over a
//! connection kept for the next delivery to that receiver, with no redirects followed,
//! bounded time and a bounded read of the answer; Telegram through the configured Bot API.

use cova_auth::signature::{
    EVENT_ID_HEADER, SIGNATURE_HEADER, STANDARD_ID_HEADER, STANDARD_SIGNATURE_HEADER, STANDARD_TIMESTAMP_HEADER,
    sign_event, sign_standard,
};
use cova_config::NotifierConfig;
use cova_egress::{Guard, PinnedClients, Refusal};
use secrecy::ExposeSecret;
use std::net::SocketAddr;
use std::time::Duration;

/// Bytes of a receiver's answer that are kept (for the delivery log).
const ANSWER_BYTES: usize = 1_024;

/// What the receiver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: u16,
    /// The start of the answer's body, as text.
    pub body: String,
}

impl Outcome {
    pub fn delivered(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SendError {
    /// The URL may not be contacted (never retried).
    #[error("{0}")]
    Refused(#[from] Refusal),
    /// No answer: connection refused, TLS, timeout…
    #[error("{0}")]
    Network(String),
    #[error("{0}")]
    NotConfigured(&'static str),
    /// cova's own side is missing something (an operator's setting): retried, never the
    /// customer's channel's fault.
    #[error("{0}")]
    Operator(&'static str),
}

pub struct Sender {
    guard: Guard,
    timeout: Duration,
    connect_timeout: Duration,
    roots: Vec<reqwest::Certificate>,
    telegram: Option<(String, secrecy::SecretString)>,
    telegram_client: reqwest::Client,
    /// One client per (host, checked address): its connections are reused by the next
    /// delivery to the same receiver, and it can reach no address but the one checked.
    clients: PinnedClients,
}

impl Sender {
    pub fn new(cfg: &NotifierConfig) -> Result<Self, String> {
        let guard = Guard::new(&cfg.allow_private, &cfg.hosts)?;
        let roots = match &cfg.extra_ca_pem {
            None => Vec::new(),
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| format!("reading {path}: {e}"))?;
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| format!("{path}: {e}"))?
            }
        };
        let timeout = Duration::from_millis(cfg.timeout_ms);
        let connect_timeout = Duration::from_millis(cfg.connect_timeout_ms);
        let telegram_client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        let telegram =
            cfg.telegram_bot_token.clone().map(|t| (cfg.telegram_api_base_url.trim_end_matches('/').to_owned(), t));
        Ok(Self {
            guard,
            timeout,
            connect_timeout,
            roots,
            telegram,
            telegram_client,
            clients: PinnedClients::default(),
        })
    }

    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// POSTs `body` to the webhook `url`, signed with `secret` at `now_s` (unix seconds).
    pub async fn webhook(
        &self,
        url: &str,
        secret: &str,
        event_id: &str,
        body: &[u8],
        now_s: i64,
    ) -> Result<Outcome, SendError> {
        // A name server that never answers must not outlast the delivery's claim.
        let (url, addr) = tokio::time::timeout(self.connect_timeout, self.guard.resolve(url))
            .await
            .map_err(|_| SendError::Network("resolving the host timed out".into()))??;
        let client = self.client_for(&url, addr)?;
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .header(SIGNATURE_HEADER, sign_event(secret, now_s, event_id, body))
            .header(EVENT_ID_HEADER, event_id);
        if let Some(standard) = sign_standard(secret, event_id, now_s, body) {
            request = request
                .header(STANDARD_ID_HEADER, event_id)
                .header(STANDARD_TIMESTAMP_HEADER, now_s.to_string())
                .header(STANDARD_SIGNATURE_HEADER, standard);
        }
        let request = request.body(body.to_vec());
        read(request).await
    }

    /// The client that connects `url`'s host to `addr` only, kept for the next delivery there.
    fn client_for(&self, url: &url::Url, addr: SocketAddr) -> Result<reqwest::Client, SendError> {
        let builder = || {
            let builder = reqwest::Client::builder()
                .timeout(self.timeout)
                .connect_timeout(self.connect_timeout)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent("cova-webhooks/1");
            self.roots.iter().fold(builder, |b, root| b.add_root_certificate(root.clone()))
        };
        self.clients.get(url, addr, builder).map_err(|e| SendError::Network(e.to_string()))
    }

    /// Sends `text` to a Telegram chat through the Bot API.
    pub async fn telegram(&self, chat_id: &str, text: &str) -> Result<Outcome, SendError> {
        let (base, token) = self.telegram.as_ref().ok_or(SendError::Operator("no Telegram bot token is configured"))?;
        let request = self
            .telegram_client
            .post(format!("{base}/bot{}/sendMessage", token.expose_secret()))
            .json(&serde_json::json!({"chat_id": chat_id, "text": text, "disable_web_page_preview": true}));
        read(request).await
    }
}

async fn read(request: reqwest::RequestBuilder) -> Result<Outcome, SendError> {
    let mut response = request.send().await.map_err(|e| SendError::Network(network_error(&e)))?;
    let status = response.status().as_u16();
    let mut body = Vec::new();
    while body.len() < ANSWER_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(ANSWER_BYTES);
    Ok(Outcome { status, body: String::from_utf8_lossy(&body).into_owned() })
}

/// A short cause without the URL (which may carry a bot token).
fn network_error(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut cause = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(c) = cause {
        detail = c.to_string();
        cause = c.source();
    }
    if detail.is_empty() { kind.to_owned() } else { format!("{kind}: {detail}") }
}
