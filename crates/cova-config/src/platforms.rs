//! Settings of the platform adapters (`platforms.*` / `COVA_PLATFORMS__*`), read by cova-platforms.

use secrecy::SecretString;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// Everything the adapters need; defaults are the production values.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlatformsConfig {
    pub tiktok: TikTokConfig,
    pub youtube: YouTubeConfig,
    pub instagram: InstagramConfig,
    /// Keep the platform's raw JSON next to each normalised comment (debugging only).
    pub keep_raw: bool,
}

impl fmt::Debug for PlatformsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlatformsConfig")
            .field("tiktok", &self.tiktok)
            .field("youtube", &self.youtube)
            .field("instagram", &self.instagram)
            .field("keep_raw", &self.keep_raw)
            .finish()
    }
}

/// TikTok web client settings.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TikTokConfig {
    /// Base of post pages, oEmbed and the comment API.
    pub web_base_url: String,
    /// When set, short links (vm./vt.tiktok.com, www.tiktok.com/t/) are requested on this base
    /// with the same path, e.g. to point at a simulator.
    pub short_link_base_url: Option<String>,
    pub user_agent: String,
    /// Extra cookies sent with every TikTok request (e.g. `msToken`).
    pub cookies: BTreeMap<String, String>,
    /// Proxy URLs used round-robin; a failing proxy is rested for `proxy_rest_ms`.
    pub proxies: Vec<String>,
    pub proxy_rest_ms: u64,
    /// Signing service called before each platform request, see the crate README for the contract.
    pub signer_url: Option<String>,
    pub max_concurrency_per_host: usize,
    /// Request rate per host; 0 disables the limiter.
    pub requests_per_second: f64,
    pub connect_timeout_ms: u64,
    pub read_timeout_ms: u64,
    pub max_retries: u32,
    pub retry_base_ms: u64,
    /// Upper bound of one backoff delay.
    pub retry_max_ms: u64,
    pub comment_page_size: u32,
    /// Top-level comment pages requested ahead of the cursor chain (the cursor is an offset);
    /// 0 walks the chain one page after the other.
    pub list_prefetch: usize,
    pub reply_parallelism: usize,
    pub max_redirects: u32,
    /// Upper bound of the proof-of-work search of a challenge page.
    pub challenge_max_iterations: u64,
}

impl Default for TikTokConfig {
    fn default() -> Self {
        Self {
            web_base_url: "https://www.tiktok.com".into(),
            short_link_base_url: None,
            user_agent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/131.0.0.0 Safari/537.36"
                .into(),
            cookies: BTreeMap::new(),
            proxies: Vec::new(),
            proxy_rest_ms: 60_000,
            signer_url: None,
            max_concurrency_per_host: 4,
            requests_per_second: 10.0,
            connect_timeout_ms: 5_000,
            read_timeout_ms: 15_000,
            max_retries: 4,
            retry_base_ms: 250,
            retry_max_ms: 8_000,
            comment_page_size: 50,
            list_prefetch: 4,
            reply_parallelism: 4,
            max_redirects: 5,
            challenge_max_iterations: 5_000_000,
        }
    }
}

impl fmt::Debug for TikTokConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Cookie values, proxy credentials and signer URLs can carry secrets: print names and counts only.
        f.debug_struct("TikTokConfig")
            .field("web_base_url", &self.web_base_url)
            .field("short_link_base_url", &self.short_link_base_url)
            .field("user_agent", &self.user_agent)
            .field("cookies", &self.cookies.keys().collect::<Vec<_>>())
            .field("proxies", &self.proxies.len())
            .field("signer_url", &self.signer_url.as_ref().map(|_| "[configured]"))
            .field("max_concurrency_per_host", &self.max_concurrency_per_host)
            .field("requests_per_second", &self.requests_per_second)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("read_timeout_ms", &self.read_timeout_ms)
            .field("max_retries", &self.max_retries)
            .field("retry_base_ms", &self.retry_base_ms)
            .field("comment_page_size", &self.comment_page_size)
            .field("list_prefetch", &self.list_prefetch)
            .field("reply_parallelism", &self.reply_parallelism)
            .field("max_redirects", &self.max_redirects)
            .finish_non_exhaustive()
    }
}

/// YouTube Data API v3 settings.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct YouTubeConfig {
    pub api_base_url: String,
    pub api_key: Option<SecretString>,
    /// `maxResults` of commentThreads.list / comments.list (the API allows at most 100).
    pub page_size: u32,
    pub max_concurrency: usize,
    /// Requests per second; 0 disables the limiter.
    pub requests_per_second: f64,
    pub connect_timeout_ms: u64,
    pub read_timeout_ms: u64,
    pub max_retries: u32,
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    pub reply_parallelism: usize,
}

impl Default for YouTubeConfig {
    fn default() -> Self {
        Self {
            api_base_url: "https://www.googleapis.com".into(),
            api_key: None,
            page_size: 100,
            max_concurrency: 4,
            requests_per_second: 20.0,
            connect_timeout_ms: 5_000,
            read_timeout_ms: 15_000,
            max_retries: 4,
            retry_base_ms: 250,
            retry_max_ms: 8_000,
            reply_parallelism: 4,
        }
    }
}

impl fmt::Debug for YouTubeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("YouTubeConfig")
            .field("api_base_url", &self.api_base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("page_size", &self.page_size)
            .field("max_concurrency", &self.max_concurrency)
            .field("requests_per_second", &self.requests_per_second)
            .field("max_retries", &self.max_retries)
            .field("retry_base_ms", &self.retry_base_ms)
            .finish_non_exhaustive()
    }
}

/// Instagram web client settings. Instagram changes its web app's query ids and app id now and
/// then: they are configuration so that an operator can follow without a release.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InstagramConfig {
    /// Post pages, GraphQL and the REST path of a session.
    pub web_base_url: String,
    /// `X-IG-App-ID` of Instagram's web app.
    pub app_id: String,
    /// GraphQL query ids (`doc_id`).
    pub doc_post_logged_out: String,
    /// The post query of a logged-in session (reads a post the logged-out query gates).
    pub doc_post_session: String,
    pub doc_comments: String,
    pub doc_replies: String,
    pub doc_profile_reels: String,
    pub user_agent: String,
    /// Egress routes (proxy URLs); empty means one direct route.
    pub proxies: Vec<String>,
    /// `sessionid` cookies of logged-in sessions, one per egress route in order (the first for
    /// the direct route when there are no proxies); a route without one reads logged out.
    pub sessions: Vec<SecretString>,
    /// How long a session that met a checkpoint is set aside (its route reads logged out meanwhile).
    pub session_rest_ms: u64,
    /// Requests per second per (host, egress route, session); 0 disables the pace.
    pub requests_per_second: f64,
    pub max_concurrency_per_host: usize,
    pub connect_timeout_ms: u64,
    pub read_timeout_ms: u64,
    pub max_retries: u32,
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    /// Redirects followed when resolving a `/share/` link.
    pub max_redirects: u32,
}

impl Default for InstagramConfig {
    fn default() -> Self {
        Self {
            web_base_url: "https://www.instagram.com".into(),
            app_id: "936619743392459".into(),
            doc_post_logged_out: "27130156389949648".into(),
            doc_post_session: "8845758582119845".into(),
            doc_comments: "6974885689225067".into(),
            doc_replies: "7171917939589632".into(),
            doc_profile_reels: "7845543455542541".into(),
            user_agent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/131.0.0.0 Safari/537.36"
                .into(),
            proxies: Vec::new(),
            sessions: Vec::new(),
            session_rest_ms: 6 * 60 * 60 * 1000,
            // About 275 GraphQL requests per 10 minutes, the pace instaloader keeps to.
            requests_per_second: 0.45,
            max_concurrency_per_host: 2,
            connect_timeout_ms: 5_000,
            read_timeout_ms: 15_000,
            max_retries: 4,
            retry_base_ms: 2_000,
            retry_max_ms: 60_000,
            max_redirects: 3,
        }
    }
}

impl fmt::Debug for InstagramConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Sessions are logins and proxies may carry credentials: counts only.
        f.debug_struct("InstagramConfig")
            .field("web_base_url", &self.web_base_url)
            .field("app_id", &self.app_id)
            .field("doc_post_logged_out", &self.doc_post_logged_out)
            .field("doc_post_session", &self.doc_post_session)
            .field("doc_comments", &self.doc_comments)
            .field("doc_replies", &self.doc_replies)
            .field("doc_profile_reels", &self.doc_profile_reels)
            .field("proxies", &self.proxies.len())
            .field("sessions", &self.sessions.len())
            .field("session_rest_ms", &self.session_rest_ms)
            .field("requests_per_second", &self.requests_per_second)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_secrets() {
        let cfg: PlatformsConfig = serde_json::from_value(serde_json::json!({
            "tiktok": {"cookies": {"msToken": "very-secret-cookie"}, "proxies": ["http://user:pw@proxy:1"],
                       "signer_url": "http://signer/?token=abc"},
            "youtube": {"api_key": "AIza-secret-key"},
            "instagram": {"sessions": ["ig-session-secret"], "proxies": ["http://igu:igpw@proxy:2"]}
        }))
        .expect("valid config");
        let printed = format!("{cfg:?}");
        for secret in ["very-secret-cookie", "user:pw", "token=abc", "AIza-secret-key", "ig-session-secret", "igpw"] {
            assert!(!printed.contains(secret), "{secret} leaked in {printed}");
        }
        assert!(printed.contains("msToken"));
    }

    #[test]
    fn defaults_and_unknown_fields() {
        let cfg: PlatformsConfig = serde_json::from_str("{}").expect("empty config is valid");
        assert_eq!(cfg.tiktok.web_base_url, "https://www.tiktok.com");
        assert_eq!(cfg.tiktok.max_retries, 4);
        assert_eq!(cfg.tiktok.comment_page_size, 50);
        assert_eq!(cfg.youtube.page_size, 100);
        assert_eq!(cfg.instagram.app_id, "936619743392459");
        assert!(cfg.instagram.sessions.is_empty());
        assert!(serde_json::from_str::<PlatformsConfig>(r#"{"tiktok": {"nope": 1}}"#).is_err());
    }
}
