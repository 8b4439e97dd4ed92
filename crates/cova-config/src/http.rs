//! The gateway's HTTP front (`http.*`), its request limits (`limits.*`) and token lookups
//! (`auth.*`).

use serde::{Deserialize, Serialize};

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
pub struct AuthConfig {
    /// How long a gateway process trusts a token lookup; bounds how late a revocation bites.
    pub token_cache_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self { token_cache_ms: 2_000 }
    }
}
