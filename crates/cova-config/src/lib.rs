//! cova's configuration: built-in defaults → optional TOML file → `COVA_…` environment.
//!
//! Sections mirror the environment names: `COVA_DATABASE__URL` ↔ `database.url`.
//! Every key is documented in `docs/configuration.md`. Unknown keys are errors, so a typo
//! never silently falls back to a default.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

mod ai;
mod backend;
mod billing;
mod http;
mod keys;
mod media;
mod notifier;
pub mod platforms;
mod print;
mod stores;
mod telemetry;
mod workers;
mod workspace;
// The sections live in modules of their own; their types are named from the crate root.
pub use ai::{AiConfig, AnalyzerKind, OpenAiConfig};
pub use backend::{CacheBackend, DatabaseBackend, QueueBackend, redact_url};
pub use billing::{BillingConfig, PackConfig, PaymentsConfig};
pub use http::{AuthConfig, HttpConfig, LimitsConfig};
pub use media::MediaConfig;
pub use notifier::NotifierConfig;
pub use platforms::PlatformsConfig;
pub use stores::{CacheConfig, DatabaseConfig, QueueConfig};
pub use telemetry::{MetricsConfig, TelemetryConfig};
pub use workers::{SchedulerConfig, ScraperConfig};
pub use workspace::{SmtpConfig, WorkspaceConfig};

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
