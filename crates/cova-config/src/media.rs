//! The media store and the downloads of platform images (`media.*`).

use serde::{Deserialize, Serialize};

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
