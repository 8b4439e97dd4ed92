//! Deliveries to customers' channels (`notifier.*`).

use serde::{Deserialize, Serialize};

/// Deliveries to customers' channels (`notifier.*`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotifierConfig {
    /// Deliveries sent at once by one notifier process.
    pub concurrency: usize,
    /// Events (job ends, alerts, batch ends, found posts) one notifier process handles at once:
    /// keyword matching and writing delivery rows, before anything is sent.
    pub event_concurrency: usize,
    /// Deliveries sent at once to one receiver (host), so a slow one cannot hold up the rest.
    pub per_receiver: usize,
    pub timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// How often due deliveries are looked for.
    pub tick_ms: u64,
    /// Attempts of one delivery (backoff over about a day) before its channel is disabled.
    pub max_attempts: u32,
    /// Address ranges webhooks may reach although not public (tests, private deployments).
    pub allow_private: Vec<String>,
    /// Static host entries consulted before DNS, as `name = "address"`.
    pub hosts: std::collections::BTreeMap<String, String>,
    /// A PEM file of extra certificate authorities trusted for webhooks.
    pub extra_ca_pem: Option<String>,
    pub telegram_api_base_url: String,
    #[serde(skip_serializing)]
    pub telegram_bot_token: Option<secrecy::SecretString>,
}

impl Default for NotifierConfig {
    fn default() -> Self {
        Self {
            concurrency: 128,
            event_concurrency: 4,
            per_receiver: 4,
            timeout_ms: 10_000,
            connect_timeout_ms: 5_000,
            tick_ms: 500,
            max_attempts: 12,
            allow_private: Vec::new(),
            hosts: Default::default(),
            extra_ca_pem: None,
            telegram_api_base_url: "https://api.telegram.org".into(),
            telegram_bot_token: None,
        }
    }
}

impl NotifierConfig {
    /// How long a notifier owns a claimed delivery: one send's worst case (name lookup and
    /// connect, each bounded by the connect timeout, then the request) plus a margin. A
    /// notifier that dies mid-send leaves its claims to others after this long.
    pub fn claim_ms(&self) -> i64 {
        i64::try_from(2 * self.connect_timeout_ms + self.timeout_ms + 5_000).unwrap_or(i64::MAX)
    }
}

impl std::fmt::Debug for NotifierConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifierConfig")
            .field("concurrency", &self.concurrency)
            .field("per_receiver", &self.per_receiver)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_attempts", &self.max_attempts)
            .field("allow_private", &self.allow_private)
            .field("telegram_api_base_url", &self.telegram_api_base_url)
            .field("telegram_bot_token", &self.telegram_bot_token.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}
