//! cova's configuration: built-in defaults → optional TOML file → `COVA_…` environment.
//!
//! Sections mirror the environment names: `COVA_DATABASE__URL` ↔ `database.url`.
//! Every key is documented in `docs/configuration.md`. Unknown keys are errors, so a typo
//! never silently falls back to a default.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

mod backend;
mod keys;
pub mod platforms;
mod print;
pub use backend::{CacheBackend, DatabaseBackend, QueueBackend, redact_url};
pub use platforms::PlatformsConfig;

/// Environment variables with the `COVA_` prefix that are not configuration keys.
const NON_CONFIG_VARS: &[&str] = &["COVA_CONFIG"];
const NON_CONFIG_PREFIXES: &[&str] = &["COVA_TEST_"];

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub http: HttpConfig,
    pub database: DatabaseConfig,
    pub queue: QueueConfig,
    pub cache: CacheConfig,
    pub telemetry: TelemetryConfig,
    pub metrics: MetricsConfig,
    pub limits: LimitsConfig,
    pub billing: BillingConfig,
    pub auth: AuthConfig,
    pub workspace: WorkspaceConfig,
    pub smtp: SmtpConfig,
    pub payments: PaymentsConfig,
    pub scraper: ScraperConfig,
    pub scheduler: SchedulerConfig,
    pub notifier: NotifierConfig,
    pub ai: AiConfig,
    pub media: MediaConfig,
    /// Platform adapters (hosts, client hygiene, API keys); see the cova-platforms crate.
    /// Not serialised: it holds secrets, and its defaults come from its own `Default`.
    #[serde(skip_serializing)]
    pub platforms: PlatformsConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Listen address of the gateway.
    pub addr: String,
    /// Largest accepted JSON body.
    pub body_limit_bytes: usize,
    /// Upper bound on handling one request; a slower backend answers 503.
    pub request_timeout_ms: u64,
    /// How long a client may take to send its request body (then 408 `request_timeout`).
    pub body_timeout_ms: u64,
    /// How long a stopping gateway lets in-flight requests finish.
    pub shutdown_timeout_s: u64,
    /// HTTP worker threads; 0 = one per CPU.
    pub workers: usize,
    /// Peers whose `X-Forwarded-For` is believed for the client IP.
    pub trusted_proxies: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8080".into(),
            body_limit_bytes: 64 * 1024,
            request_timeout_ms: 30_000,
            body_timeout_ms: 10_000,
            shutdown_timeout_s: 30,
            workers: 0,
            trusted_proxies: Vec::new(),
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `sqlite://<path>` (embedded) or `postgres://…`.
    pub url: String,
    pub pool_size: usize,
    /// How long a request waits for a pooled connection before answering 503.
    pub acquire_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// PostgreSQL `statement_timeout`; SQLite `busy_timeout`.
    pub statement_timeout_ms: u64,
    /// PostgreSQL: how long sent data may go unacknowledged, and an idle connection unanswered
    /// by keepalives, before the connection is given up (`TCP_USER_TIMEOUT`, TCP keepalives):
    /// a network partition is noticed within it instead of at the system's TCP timeout.
    pub io_timeout_ms: u64,
    /// PostgreSQL: the longest a request's read of the state it answers from (a poll,
    /// `/usage`, a token) waits for the database before answering from the kept copies; a
    /// read that takes longer marks the database unreachable.
    pub request_wait_ms: u64,
    /// PostgreSQL: while the database is marked unreachable, requests do not try it and a
    /// background probe tries it this often, marking it reachable again once it answers.
    pub probe_interval_ms: u64,
    /// The keys that seal stored secrets (webhook secrets, Telegram chat ids), base64 of 32
    /// bytes each, the current one first, older ones after it for reading. Required with
    /// PostgreSQL; on SQLite, empty means a key kept in `encryption.key` beside the database file.
    #[serde(skip_serializing)]
    pub encryption_keys: Option<secrecy::SecretString>,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://data/cova.db".into(),
            pool_size: 8,
            acquire_timeout_ms: 2_000,
            connect_timeout_ms: 1_000,
            statement_timeout_ms: 10_000,
            io_timeout_ms: 2_000,
            request_wait_ms: 500,
            probe_interval_ms: 500,
            encryption_keys: None,
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// `memory://` (in-process) or `amqp://…`.
    pub url: String,
    /// Prefix of every exchange and queue name, so deployments (and tests) can share a broker.
    pub prefix: String,
    /// Unacknowledged messages a consumer holds at once.
    pub prefetch: u16,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self { url: "memory://".into(), prefix: "cova".into(), prefetch: 4 }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// `memory://` (in-process) or `redis://…`.
    pub url: String,
    /// Prefix of every key, so deployments (and tests) can share a Redis.
    pub prefix: String,
    /// Bound on one cache round trip; a slower cache answers 503.
    pub timeout_ms: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self { url: "memory://".into(), prefix: "cova".into(), timeout_ms: 2_000 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `auto` (`pretty` when stderr is a terminal, else `json`), `json` (one object per line)
    /// or `pretty`.
    pub log_format: String,
    /// `tracing` filter directive, e.g. `info` or `cova=debug,info`.
    pub log_level: String,
    /// OTLP/HTTP endpoint (e.g. `http://collector:4318`); traces are exported when set.
    pub otlp_endpoint: Option<String>,
    /// OTLP/HTTP body encoding: `protobuf` (what every collector takes) or `json`.
    pub otlp_protocol: String,
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            log_format: "auto".into(),
            log_level: "info".into(),
            otlp_endpoint: None,
            otlp_protocol: "protobuf".into(),
            service_name: "cova".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Private listen address of every process for `/metrics` (Prometheus), `/healthz` and
    /// `/readyz`; empty turns it off. Keep it off the public network: the gateway's public
    /// port never serves metrics.
    pub addr: String,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { addr: "127.0.0.1:9464".into() }
    }
}

impl MetricsConfig {
    /// The address to listen on, `None` when turned off.
    pub fn addr(&self) -> Option<&str> {
        Some(self.addr.trim()).filter(|a| !a.is_empty())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// General request limit per account on authenticated endpoints without a limit of their own.
    pub api_requests_per_minute: u32,
    /// How many gateway processes share the requests. While the cache is away each gateway
    /// limits every account by itself, to its share of the steady rate, so that together they
    /// never let more through than the limit.
    pub gateways: u32,
    /// Creators (TikTok accounts, YouTube channels) one account can follow.
    pub creators_per_account: i64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self { api_requests_per_minute: 600, gateways: 1, creators_per_account: 20 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BillingConfig {
    /// Comments granted once per account at signup, spendable only from the workspace.
    pub free_allowance: i64,
    /// The packs the workspace sells, in the order it shows them.
    pub packs: Vec<PackConfig>,
}

impl Default for BillingConfig {
    fn default() -> Self {
        let pack = |id: &str, comments, amount| PackConfig { id: id.into(), comments, amount, currency: "usd".into() };
        Self {
            free_allowance: 500,
            packs: vec![pack("2k", 2_000, 900), pack("10k", 10_000, 3_900), pack("50k", 50_000, 14_900)],
        }
    }
}

impl BillingConfig {
    pub fn pack(&self, id: &str) -> Option<&PackConfig> {
        self.packs.iter().find(|p| p.id == id)
    }
}

/// One pack of the catalogue: `comments` for `amount` in the currency's smallest unit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PackConfig {
    pub id: String,
    pub comments: i64,
    pub amount: i64,
    pub currency: String,
}

/// The web workspace: cookie sessions and the links its e-mails carry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Where people reach cova, e.g. `https://cova.example.com`: the base of e-mailed links,
    /// and `https` makes the session cookie `Secure` with the `__Host-` prefix. Empty: `http://<http.addr>`.
    pub public_url: String,
    /// Other origins whose pages may use the cookie session (credentialed CORS).
    pub allowed_origins: Vec<String>,
    /// A session ends after this long without a request.
    pub session_idle_min: u64,
    /// A session ends this long after login, however active.
    pub session_max_hours: u64,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        Self { public_url: String::new(), allowed_origins: Vec::new(), session_idle_min: 720, session_max_hours: 168 }
    }
}

/// Outgoing e-mail (confirmation and password reset).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SmtpConfig {
    /// `smtp://host:port` (plain; add `?tls=required` for STARTTLS), `smtps://host:465` (TLS),
    /// with `user:password@` when the server wants a login. Empty: each message is written as
    /// an `.eml` file under `mail_dir`, and the file is logged.
    pub url: String,
    pub from: String,
    pub mail_dir: String,
    pub timeout_ms: u64,
}

impl Default for SmtpConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            from: "cova <no-reply@cova.localhost>".into(),
            mail_dir: "data/mail".into(),
            timeout_ms: 10_000,
        }
    }
}

/// The payment provider (a Stripe-compatible API) that sells packs.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PaymentsConfig {
    pub api_base_url: String,
    #[serde(skip_serializing)]
    pub secret_key: Option<secrecy::SecretString>,
    #[serde(skip_serializing)]
    pub webhook_secret: Option<secrecy::SecretString>,
    /// How old a webhook's signed timestamp may be.
    pub webhook_tolerance_s: u64,
    pub timeout_ms: u64,
}

impl Default for PaymentsConfig {
    fn default() -> Self {
        Self {
            api_base_url: "https://api.stripe.com".into(),
            secret_key: None,
            webhook_secret: None,
            webhook_tolerance_s: 300,
            timeout_ms: 10_000,
        }
    }
}

impl std::fmt::Debug for PaymentsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaymentsConfig")
            .field("api_base_url", &self.api_base_url)
            .field("secret_key", &self.secret_key.as_ref().map(|_| "***"))
            .field("webhook_secret", &self.webhook_secret.as_ref().map(|_| "***"))
            .field("webhook_tolerance_s", &self.webhook_tolerance_s)
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScraperConfig {
    /// Jobs one scraper process collects at once.
    pub concurrency: usize,
    /// Deliveries of one job before a transient failure (platform or backend down) fails it.
    pub max_attempts: u32,
    /// First retry delay; doubles per attempt.
    pub retry_base_ms: u64,
    /// How long a job's claim holds without renewal; a live worker renews it every third of
    /// it, so this is how soon a killed worker's job is taken over.
    pub lease_ms: u64,
}

impl Default for ScraperConfig {
    fn default() -> Self {
        Self { concurrency: 4, max_attempts: 5, retry_base_ms: 2_000, lease_ms: 15_000 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// How often due watches and expired breakdowns are looked for.
    pub tick_ms: u64,
    /// Watches (and breakdowns) handled per claim.
    pub batch: i64,
    /// Creators listed at once by one scheduler process (each a few platform requests).
    pub creator_concurrency: usize,
    /// Due watches started at once by one scheduler process (each a short transaction, so
    /// at most `database.pool_size`).
    pub start_concurrency: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self { tick_ms: 1_000, batch: 500, creator_concurrency: 4, start_concurrency: 8 }
    }
}

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

/// The media store and the downloads of platform images (`media.*`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MediaConfig {
    /// Where images are kept: a directory (`data/media`, `file:///var/lib/cova/media`) or
    /// S3-compatible storage (`s3://bucket/prefix`).
    pub url: String,
    /// S3: the endpoint of a service other than AWS (MinIO, Ceph), path-style requests.
    pub s3_endpoint: Option<String>,
    pub s3_region: Option<String>,
    pub s3_access_key_id: Option<String>,
    #[serde(skip_serializing)]
    pub s3_secret_access_key: Option<secrecy::SecretString>,
    /// S3 over plain http (a local MinIO).
    pub s3_allow_http: bool,
    /// Largest image kept.
    pub max_bytes: usize,
    /// Hosts images are downloaded from: `*.tiktokcdn.com` (the domain and its subdomains),
    /// `i.ytimg.com` (that host), optionally with a scheme (https when absent) and a port.
    /// Every redirect is checked against the list again.
    pub cdn_hosts: Vec<String>,
    /// Address ranges CDN hosts may resolve to although not public (tests, private mirrors).
    pub allow_private: Vec<String>,
    /// Images one scraper downloads at once while it collects.
    pub fetch_concurrency: usize,
    /// Bound on one download (each redirect included).
    pub fetch_timeout_ms: u64,
    pub max_redirects: u8,
    /// How long a job waits for its image downloads after its comments are in; the rest are
    /// fetched when first asked for.
    pub prefetch_wait_ms: u64,
    /// `Cache-Control: private, max-age` of a served image (never past its expiry).
    pub cache_max_age_s: u64,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            url: "data/media".into(),
            s3_endpoint: None,
            s3_region: None,
            s3_access_key_id: None,
            s3_secret_access_key: None,
            s3_allow_http: false,
            max_bytes: 16 * 1024 * 1024,
            cdn_hosts: [
                "*.tiktokcdn.com",
                "*.tiktokcdn-us.com",
                "*.tiktokcdn-eu.com",
                "*.ibyteimg.com",
                "*.byteimg.com",
                "*.muscdn.com",
                "*.ytimg.com",
                "*.ggpht.com",
                "*.googleusercontent.com",
                "*.cdninstagram.com",
                "*.fbcdn.net",
            ]
            .map(String::from)
            .to_vec(),
            allow_private: Vec::new(),
            fetch_concurrency: 4,
            fetch_timeout_ms: 10_000,
            max_redirects: 3,
            prefetch_wait_ms: 60_000,
            cache_max_age_s: 86_400,
        }
    }
}

impl std::fmt::Debug for MediaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaConfig")
            .field("url", &self.url)
            .field("s3_endpoint", &self.s3_endpoint)
            .field("s3_access_key_id", &self.s3_access_key_id)
            .field("s3_secret_access_key", &self.s3_secret_access_key.as_ref().map(|_| "[redacted]"))
            .field("max_bytes", &self.max_bytes)
            .field("cdn_hosts", &self.cdn_hosts)
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

/// Which analyzer AI jobs use (`ai.analyzer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnalyzerKind {
    /// Built-in analysis without any network call.
    Offline,
    /// An OpenAI-compatible chat-completions endpoint (`ai.openai.*`).
    Openai,
}

/// AI jobs (`ai.*`): the ai-worker role and its analyzer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AiConfig {
    pub analyzer: AnalyzerKind,
    /// AI jobs one ai-worker process runs at once.
    pub concurrency: usize,
    /// Deliveries of one AI command before its job fails (transient model failures).
    pub max_attempts: u32,
    pub retry_base_ms: u64,
    /// How long an AI job's claim holds without renewal (renewed every third of it while the
    /// job runs): how soon a killed ai-worker's job is taken over.
    pub lease_ms: u64,
    pub openai: OpenAiConfig,
}

impl Default for AiConfig {
    fn default() -> Self {
        Self {
            analyzer: AnalyzerKind::Offline,
            concurrency: 2,
            max_attempts: 5,
            retry_base_ms: 2_000,
            lease_ms: 60_000,
            openai: OpenAiConfig::default(),
        }
    }
}

/// An OpenAI-compatible endpoint (`ai.openai.*`): a hosted model or a local llama.cpp / vLLM.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenAiConfig {
    /// The API root; requests go to `<base_url>/chat/completions`.
    pub base_url: String,
    #[serde(skip_serializing)]
    pub api_key: Option<secrecy::SecretString>,
    pub model: String,
    /// Estimated prompt tokens per request; comments are batched to stay under it.
    pub batch_tokens: usize,
    pub timeout_ms: u64,
    /// Attempts of one request on a transient failure (429, 5xx, timeout, invalid answer).
    pub request_attempts: u32,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            model: "gpt-4o-mini".into(),
            batch_tokens: 6_000,
            timeout_ms: 60_000,
            request_attempts: 3,
        }
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("batch_tokens", &self.batch_tokens)
            .field("timeout_ms", &self.timeout_ms)
            .field("request_attempts", &self.request_attempts)
            .finish()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// How long a gateway process trusts a token lookup; bounds how late a revocation bites.
    pub token_cache_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self { token_cache_ms: 2_000 }
    }
}

/// Backend URLs may carry passwords: their `Debug` shows them redacted.
macro_rules! redacted_debug {
    ($ty:ident { $($field:ident),* }) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("url", &redact_url(&self.url))
                    $(.field(stringify!($field), &self.$field))*
                    .finish()
            }
        }
    };
}
redacted_debug!(DatabaseConfig {
    pool_size,
    acquire_timeout_ms,
    connect_timeout_ms,
    statement_timeout_ms,
    io_timeout_ms,
    request_wait_ms,
    probe_interval_ms
});
redacted_debug!(QueueConfig { prefix, prefetch });
redacted_debug!(CacheConfig { prefix, timeout_ms });

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(#[from] config::ConfigError),
    #[error("configuration key `{key}`: {message}")]
    Invalid { key: &'static str, message: String },
    #[error(
        "environment variable {var} is not a setting{hint} (a `.` in a key is a double underscore: http.addr is COVA_HTTP__ADDR; see docs/configuration.md)"
    )]
    UnknownVariable { var: String, hint: String },
}

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key, message: message.into() }
}

impl WorkspaceConfig {
    /// The base of e-mailed links, without a trailing `/`.
    pub fn base_url(&self, http_addr: &str) -> String {
        if self.public_url.is_empty() {
            format!("http://{http_addr}")
        } else {
            self.public_url.trim_end_matches('/').to_owned()
        }
    }

    /// Whether the session cookie must be `Secure` (and carry the `__Host-` prefix).
    pub fn secure_cookies(&self) -> bool {
        self.public_url.starts_with("https://")
    }
}

/// Settings that hold secrets: never serialised, still settings.
pub const SECRET_KEYS: &[&str] = &[
    "database.encryption_keys",
    "notifier.telegram_bot_token",
    "media.s3_secret_access_key",
    "ai.openai.api_key",
    "payments.secret_key",
    "payments.webhook_secret",
];

impl Config {
    /// Loads defaults, then the file (if any), then the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_from(file, std::env::vars())
    }

    /// As [`Config::load`] with an explicit environment (tests use this).
    pub fn load_from(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let env: HashMap<String, String> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with("COVA_"))
            .filter(|(k, _)| !NON_CONFIG_VARS.contains(&k.as_str()))
            .filter(|(k, _)| !NON_CONFIG_PREFIXES.iter().any(|p| k.starts_with(p)))
            .collect();
        let mut names: Vec<&String> = env.keys().collect();
        names.sort();
        for name in names {
            keys::check_env_name(name)?;
        }
        let mut builder = config::Config::builder().add_source(config::Config::try_from(&Config::default())?);
        if let Some(path) = file {
            builder = builder.add_source(config::File::from(path).format(config::FileFormat::Toml).required(true));
        }
        builder = builder.add_source(
            config::Environment::with_prefix("COVA")
                .prefix_separator("_")
                .separator("__")
                .list_separator(",")
                .with_list_parse_key("http.trusted_proxies")
                .with_list_parse_key("notifier.allow_private")
                .with_list_parse_key("media.cdn_hosts")
                .with_list_parse_key("media.allow_private")
                .with_list_parse_key("workspace.allowed_origins")
                .with_list_parse_key("platforms.instagram.sessions")
                .try_parsing(true)
                .source(Some(env)),
        );
        let cfg: Config = builder.build()?.try_deserialize()?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks what serde cannot: addresses, URL schemes, ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.http.addr.parse::<SocketAddr>().map_err(|e| {
            invalid("http.addr", format!("`{}` is not an address like 127.0.0.1:8080 ({e})", self.http.addr))
        })?;
        if let Some(addr) = self.metrics.addr() {
            addr.parse::<SocketAddr>().map_err(|e| {
                invalid("metrics.addr", format!("`{addr}` is not an address like 127.0.0.1:9464, or empty ({e})"))
            })?;
        }
        if self.http.body_limit_bytes < 1024 {
            return Err(invalid("http.body_limit_bytes", "must be at least 1024"));
        }
        if self.http.request_timeout_ms == 0 {
            return Err(invalid("http.request_timeout_ms", "must be positive"));
        }
        if self.http.body_timeout_ms == 0 {
            return Err(invalid("http.body_timeout_ms", "must be positive"));
        }
        for ip in &self.http.trusted_proxies {
            ip.parse::<std::net::IpAddr>()
                .map_err(|_| invalid("http.trusted_proxies", format!("`{ip}` is not an IP address")))?;
        }
        if matches!(DatabaseBackend::parse(&self.database.url)?, DatabaseBackend::Postgres(_))
            && self
                .database
                .encryption_keys
                .as_ref()
                .is_none_or(|k| secrecy::ExposeSecret::expose_secret(k).trim().is_empty())
        {
            return Err(invalid(
                "database.encryption_keys",
                "is required with PostgreSQL: stored webhook secrets and chat ids are sealed with it (make one with `openssl rand -base64 32`)",
            ));
        }
        if self.database.pool_size == 0 {
            return Err(invalid("database.pool_size", "must be at least 1"));
        }
        for (key, ms) in [
            ("database.connect_timeout_ms", self.database.connect_timeout_ms),
            ("database.io_timeout_ms", self.database.io_timeout_ms),
            ("database.request_wait_ms", self.database.request_wait_ms),
            ("database.probe_interval_ms", self.database.probe_interval_ms),
        ] {
            if ms == 0 {
                return Err(invalid(key, "must be at least 1 (milliseconds)"));
            }
        }
        QueueBackend::parse(&self.queue.url)?;
        CacheBackend::parse(&self.cache.url)?;
        for (key, prefix) in [("queue.prefix", &self.queue.prefix), ("cache.prefix", &self.cache.prefix)] {
            if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                return Err(invalid(key, "must be non-empty and use only letters, digits, '-', '_' or '.'"));
            }
        }
        if self.queue.prefetch == 0 {
            return Err(invalid("queue.prefetch", "must be at least 1"));
        }
        if !matches!(self.telemetry.log_format.as_str(), "auto" | "json" | "pretty") {
            return Err(invalid("telemetry.log_format", "must be `auto`, `json` or `pretty`"));
        }
        if !matches!(self.telemetry.otlp_protocol.as_str(), "protobuf" | "json") {
            return Err(invalid("telemetry.otlp_protocol", "must be `protobuf` or `json`"));
        }
        if let Some(endpoint) = &self.telemetry.otlp_endpoint {
            url::Url::parse(endpoint).map_err(|e| invalid("telemetry.otlp_endpoint", e.to_string()))?;
        }
        if self.limits.creators_per_account < 0 {
            return Err(invalid("limits.creators_per_account", "must not be negative"));
        }
        if self.scheduler.creator_concurrency == 0 {
            return Err(invalid("scheduler.creator_concurrency", "must be at least 1"));
        }
        if self.scheduler.start_concurrency == 0 {
            return Err(invalid("scheduler.start_concurrency", "must be at least 1"));
        }
        if self.limits.api_requests_per_minute == 0 {
            return Err(invalid("limits.api_requests_per_minute", "must be at least 1"));
        }
        if self.limits.gateways == 0 {
            return Err(invalid("limits.gateways", "must be at least 1"));
        }
        if self.scraper.concurrency == 0 {
            return Err(invalid("scraper.concurrency", "must be at least 1"));
        }
        if self.scraper.max_attempts == 0 {
            return Err(invalid("scraper.max_attempts", "must be at least 1"));
        }
        if self.scraper.lease_ms < 1_000 {
            return Err(invalid("scraper.lease_ms", "must be at least 1000"));
        }
        if self.scheduler.tick_ms == 0 {
            return Err(invalid("scheduler.tick_ms", "must be positive"));
        }
        if !(1..=10_000).contains(&self.scheduler.batch) {
            return Err(invalid("scheduler.batch", "must be between 1 and 10000"));
        }
        if self.notifier.event_concurrency == 0 {
            return Err(invalid("notifier.event_concurrency", "must be at least 1"));
        }
        if self.notifier.concurrency == 0 || self.notifier.per_receiver == 0 {
            return Err(invalid(
                "notifier.concurrency",
                "notifier.concurrency and notifier.per_receiver must be at least 1",
            ));
        }
        if !(1..=30).contains(&self.notifier.max_attempts) {
            return Err(invalid("notifier.max_attempts", "must be between 1 and 30"));
        }
        if self.notifier.tick_ms == 0 || self.notifier.timeout_ms == 0 {
            return Err(invalid("notifier.tick_ms", "notifier.tick_ms and notifier.timeout_ms must be positive"));
        }
        if self.ai.concurrency == 0 || self.ai.max_attempts == 0 || self.ai.lease_ms == 0 {
            return Err(invalid("ai.concurrency", "ai.concurrency, ai.max_attempts and ai.lease_ms must be positive"));
        }
        if self.ai.analyzer == AnalyzerKind::Openai {
            url::Url::parse(&self.ai.openai.base_url).map_err(|e| invalid("ai.openai.base_url", e.to_string()))?;
            if self.ai.openai.batch_tokens < 500 || self.ai.openai.request_attempts == 0 {
                return Err(invalid(
                    "ai.openai.batch_tokens",
                    "ai.openai.batch_tokens must be at least 500 and ai.openai.request_attempts at least 1",
                ));
            }
        }
        if self.media.url.trim().is_empty() {
            return Err(invalid("media.url", "must name a directory or s3://bucket/prefix"));
        }
        if self.media.max_bytes < 1024 || self.media.fetch_concurrency == 0 || self.media.fetch_timeout_ms == 0 {
            return Err(invalid(
                "media.max_bytes",
                "media.max_bytes must be at least 1024, media.fetch_concurrency and media.fetch_timeout_ms positive",
            ));
        }
        url::Url::parse(&self.notifier.telegram_api_base_url)
            .map_err(|e| invalid("notifier.telegram_api_base_url", e.to_string()))?;
        if self.billing.free_allowance < 0 {
            return Err(invalid("billing.free_allowance", "must not be negative"));
        }
        for pack in &self.billing.packs {
            if pack.id.is_empty() || pack.comments <= 0 || pack.amount <= 0 || pack.currency.len() != 3 {
                return Err(invalid(
                    "billing.packs",
                    format!("pack `{}` needs an id, positive comments and amount, and a 3-letter currency", pack.id),
                ));
            }
        }
        for (key, url) in [("workspace.public_url", &self.workspace.public_url), ("smtp.url", &self.smtp.url)] {
            if !url.is_empty() {
                url::Url::parse(url).map_err(|e| invalid(key, format!("`{}`: {e}", redact_url(url))))?;
            }
        }
        if !self.smtp.url.is_empty() && !matches!(self.smtp.url.split(':').next(), Some("smtp" | "smtps")) {
            return Err(invalid("smtp.url", "must start with smtp:// or smtps://"));
        }
        for origin in &self.workspace.allowed_origins {
            let parsed = url::Url::parse(origin).map_err(|e| invalid("workspace.allowed_origins", e.to_string()))?;
            if parsed.origin().ascii_serialization() != *origin {
                return Err(invalid(
                    "workspace.allowed_origins",
                    format!("`{origin}` is not an origin like https://app.example.com (no path, no trailing /)"),
                ));
            }
        }
        if self.workspace.session_idle_min == 0 || self.workspace.session_max_hours == 0 {
            return Err(invalid("workspace.session_idle_min", "session lifetimes must be positive"));
        }
        url::Url::parse(&self.payments.api_base_url).map_err(|e| invalid("payments.api_base_url", e.to_string()))?;
        Ok(())
    }

    /// True when every backend is in-process (one `cova serve` process owns all state).
    pub fn is_embedded(&self) -> bool {
        matches!(QueueBackend::parse(&self.queue.url), Ok(QueueBackend::Memory))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_are_embedded_and_valid() {
        let cfg = Config::load_from(None, env(&[])).expect("defaults load");
        assert_eq!(cfg.http.addr, "127.0.0.1:8080");
        assert_eq!(cfg.database.url, "sqlite://data/cova.db");
        assert!(cfg.is_embedded());
    }

    #[test]
    fn environment_overrides_with_double_underscore() {
        let cfg = Config::load_from(
            None,
            env(&[
                ("COVA_HTTP__ADDR", "0.0.0.0:9000"),
                ("COVA_DATABASE__URL", "postgres://u:p@db/cova"),
                ("COVA_DATABASE__ENCRYPTION_KEYS", "a2V5"),
                ("COVA_DATABASE__POOL_SIZE", "16"),
                ("COVA_HTTP__TRUSTED_PROXIES", "10.0.0.1,10.0.0.2"),
                ("COVA_PLATFORMS__INSTAGRAM__SESSIONS", "123%3Aab%3A1,456%3Acd%3A2"),
                ("COVA_TEST_DATABASE_URL", "ignored"),
                ("COVA_CONFIG", "ignored"),
                ("OTHER", "ignored"),
            ]),
        )
        .expect("valid env");
        assert_eq!(cfg.http.addr, "0.0.0.0:9000");
        assert_eq!(cfg.database.pool_size, 16);
        assert_eq!(cfg.http.trusted_proxies, vec!["10.0.0.1", "10.0.0.2"]);
        let sessions: Vec<&str> =
            cfg.platforms.instagram.sessions.iter().map(secrecy::ExposeSecret::expose_secret).collect();
        assert_eq!(sessions, ["123%3Aab%3A1", "456%3Acd%3A2"]);
    }

    #[test]
    fn postgres_needs_a_sealing_key() {
        let err = Config::load_from(None, env(&[("COVA_DATABASE__URL", "postgres://db/cova")])).expect_err("no key");
        assert!(err.to_string().contains("database.encryption_keys"), "{err}");
        // SQLite keeps a key file of its own.
        assert!(Config::load_from(None, env(&[("COVA_DATABASE__URL", "sqlite://x/cova.db")])).is_ok());
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::load_from(None, env(&[("COVA_HTTP__ADR", "x")])).expect_err("typo");
        assert!(err.to_string().contains("did you mean COVA_HTTP__ADDR?"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (k, v, key) in [
            ("COVA_HTTP__ADDR", "nope", "http.addr"),
            ("COVA_DATABASE__URL", "mysql://x", "database.url"),
            ("COVA_QUEUE__URL", "kafka://x", "queue.url"),
            ("COVA_CACHE__URL", "memcached://x", "cache.url"),
            ("COVA_TELEMETRY__LOG_FORMAT", "xml", "telemetry.log_format"),
        ] {
            let err = Config::load_from(None, env(&[(k, v)])).expect_err(k);
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn debug_output_hides_passwords() {
        let cfg = Config::load_from(
            None,
            env(&[
                ("COVA_DATABASE__URL", "postgres://cova:hunter2@db/cova"),
                ("COVA_DATABASE__ENCRYPTION_KEYS", "hunter2key"),
                ("COVA_QUEUE__URL", "amqp://u:hunter2@mq/%2f"),
            ]),
        )
        .expect("valid");
        let printed = format!("{cfg:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("postgres://cova:***@db/cova"), "{printed}");
    }

    #[test]
    fn platform_hosts_come_from_the_environment() {
        let cfg = Config::load_from(
            None,
            env(&[
                ("COVA_PLATFORMS__TIKTOK__WEB_BASE_URL", "http://127.0.0.1:9090"),
                ("COVA_PLATFORMS__YOUTUBE__API_BASE_URL", "http://127.0.0.1:9090"),
                ("COVA_PLATFORMS__YOUTUBE__API_KEY", "sim-key"),
            ]),
        )
        .expect("valid");
        assert_eq!(cfg.platforms.tiktok.web_base_url, "http://127.0.0.1:9090");
        assert_eq!(cfg.platforms.youtube.api_base_url, "http://127.0.0.1:9090");
        assert!(!format!("{cfg:?}").contains("sim-key"), "the API key is never printed");
        let defaults = Config::load_from(None, env(&[])).expect("defaults");
        assert_eq!(defaults.platforms.tiktok.web_base_url, "https://www.tiktok.com");
    }

    #[test]
    fn file_then_env() {
        let dir = std::env::temp_dir().join(format!("cova-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("cova.toml");
        std::fs::write(&path, "[http]\naddr = \"127.0.0.1:7000\"\n[cache]\nprefix = \"fromfile\"\n").expect("write");
        let cfg = Config::load_from(Some(&path), env(&[("COVA_CACHE__PREFIX", "fromenv")])).expect("loads");
        assert_eq!(cfg.http.addr, "127.0.0.1:7000");
        assert_eq!(cfg.cache.prefix, "fromenv");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The keys `docs/configuration.md` documents: the first cell of each table row, where a
    /// bare name after a dotted key (`` `a.b.c` / `d` ``) is a sibling of it.
    fn documented_keys() -> std::collections::BTreeSet<String> {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md"))
            .expect("docs/configuration.md");
        let mut keys = std::collections::BTreeSet::new();
        for line in text.lines().filter(|l| l.starts_with("| `")) {
            let cell = line.split('|').nth(1).unwrap_or_default();
            let mut parent: Option<String> = None;
            for name in cell.split('`').skip(1).step_by(2) {
                match (name.rsplit_once('.'), &parent) {
                    (Some((p, _)), _) => {
                        keys.insert(name.to_owned());
                        parent = Some(p.to_owned());
                    }
                    (None, Some(p)) => {
                        keys.insert(format!("{p}.{name}"));
                    }
                    (None, None) => {}
                }
            }
        }
        keys
    }

    fn leaves(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
        match value.as_object() {
            Some(object) if !object.is_empty() => {
                for (k, v) in object {
                    leaves(&if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, v, out);
                }
            }
            _ => out.push(prefix.to_owned()),
        }
    }

    /// Every key the configuration reads is documented, and every documented key is read: a
    /// documented key set to a value of the wrong type must fail as a wrong type, never as an
    /// unknown key.
    #[test]
    fn the_documented_keys_are_the_configurations_keys() {
        let documented = documented_keys();
        assert!(documented.len() > 100, "{} keys found in docs/configuration.md", documented.len());
        let mut read = Vec::new();
        leaves("", &serde_json::to_value(Config::default()).expect("serialisable"), &mut read);
        let undocumented: Vec<&String> = read.iter().filter(|k| !documented.contains(*k)).collect();
        assert!(undocumented.is_empty(), "keys missing from docs/configuration.md: {undocumented:?}");
        for key in &documented {
            let mut value = serde_json::json!({"not": "a value of any key"});
            for part in key.rsplit('.') {
                value = serde_json::json!({ part: value });
            }
            if let Err(e) = serde_json::from_value::<Config>(value) {
                assert!(
                    !e.to_string().contains("unknown field"),
                    "docs/configuration.md documents `{key}`, which is not a key: {e}"
                );
            }
        }
    }
}
