//! Downloads of platform images. A link comes from a platform's answer, so it is treated as
//! hostile: only hosts on the CDN allow-list are contacted (every redirect is checked again),
//! every address the host resolves to must be public (the SSRF guard), a file is read up to
//! the size limit, and only image bytes are accepted.

use bytes::{Bytes, BytesMut};
use cova_config::MediaConfig;
use cova_egress::{Guard, PinnedClients, Refusal};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Why an image could not be downloaded; the text is shown to the customer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("the link is not valid: {0}")]
    Invalid(String),
    #[error("`{0}` is not a platform CDN host cova downloads images from")]
    NotAllowed(String),
    #[error("{0}")]
    Refused(#[from] Refusal),
    #[error("the platform's CDN answered HTTP {0}{hint}", hint = if matches!(.0, 401 | 403 | 404 | 410) { " (its link has probably expired)" } else { "" })]
    Status(u16),
    #[error("more than {0} redirects")]
    TooManyRedirects(u8),
    #[error("the file is not an image (JPEG, PNG, GIF, WebP, AVIF)")]
    NotAnImage,
    #[error("the file is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the platform's CDN could not be reached: {0}")]
    Network(String),
    #[error("the download took longer than {0} ms")]
    Timeout(u64),
}

/// One allow-list entry: a scheme, an exact host or a domain with its subdomains (`*.`), and
/// optionally a port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    scheme: String,
    host: String,
    subdomains: bool,
    port: Option<u16>,
}

impl HostRule {
    fn parse(entry: &str) -> Result<Self, String> {
        let entry = entry.trim().to_ascii_lowercase();
        let (scheme, rest) = entry.split_once("://").unwrap_or(("https", &entry));
        if !matches!(scheme, "http" | "https") {
            return Err(format!("`{entry}`: only http and https hosts can be allowed"));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
                (host, Some(port.parse::<u16>().map_err(|_| format!("`{entry}`: `{port}` is not a port"))?))
            }
            _ => (rest, None),
        };
        let (host, subdomains) = match host.strip_prefix("*.") {
            Some(domain) => (domain, true),
            None => (host, false),
        };
        if host.is_empty() || host.contains(['/', '*', '@', '?', '#']) {
            return Err(format!("`{entry}` is not a host like *.tiktokcdn.com or i.ytimg.com"));
        }
        Ok(Self { scheme: scheme.to_owned(), host: host.to_owned(), subdomains, port })
    }

    fn admits(&self, url: &url::Url) -> bool {
        let Some(host) = url.host_str().map(str::to_ascii_lowercase) else { return false };
        let host_ok = host == self.host
            || (self.subdomains && host.strip_suffix(&self.host).is_some_and(|sub| sub.ends_with('.')));
        let port_ok = match self.port {
            Some(port) => url.port_or_known_default() == Some(port),
            None => url.port().is_none(),
        };
        url.scheme() == self.scheme && host_ok && port_ok
    }
}

/// Downloads images from the allowed CDN hosts.
#[derive(Debug, Clone)]
pub struct Fetcher {
    rules: Vec<HostRule>,
    guard: Guard,
    timeout: Duration,
    max_bytes: usize,
    max_redirects: u8,
    /// One client per (CDN host, checked address), shared by the fetcher's clones.
    clients: Arc<PinnedClients>,
}

impl Fetcher {
    pub fn new(cfg: &MediaConfig) -> Result<Self, String> {
        let rules = cfg.cdn_hosts.iter().map(|h| HostRule::parse(h)).collect::<Result<_, _>>()?;
        let guard = Guard::new(&cfg.allow_private, &Default::default())?;
        Ok(Self {
            rules,
            guard,
            timeout: Duration::from_millis(cfg.fetch_timeout_ms),
            max_bytes: cfg.max_bytes,
            max_redirects: cfg.max_redirects,
            clients: Arc::default(),
        })
    }

    /// The link, when cova may contact it.
    fn check(&self, raw: &str) -> Result<url::Url, FetchError> {
        let url = url::Url::parse(raw).map_err(|e| FetchError::Invalid(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::Invalid(format!("`{}:` links are never fetched", url.scheme())));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(FetchError::Invalid("credentials in the link are not accepted".into()));
        }
        if !self.rules.iter().any(|r| r.admits(&url)) {
            let shown = match url.port() {
                Some(port) => format!("{}://{}:{port}", url.scheme(), url.host_str().unwrap_or_default()),
                None => format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default()),
            };
            return Err(FetchError::NotAllowed(shown));
        }
        Ok(url)
    }

    /// Downloads the image at `raw`, following at most the configured number of redirects
    /// (each checked like the first link), within the download timeout.
    pub async fn fetch(&self, raw: &str) -> Result<Bytes, FetchError> {
        let deadline = Instant::now() + self.timeout;
        let timeout_ms = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        match tokio::time::timeout_at(deadline, self.follow(raw, deadline)).await {
            Ok(result) => result,
            Err(_) => Err(FetchError::Timeout(timeout_ms)),
        }
    }

    async fn follow(&self, raw: &str, deadline: Instant) -> Result<Bytes, FetchError> {
        let mut url = self.check(raw)?;
        for _ in 0..=self.max_redirects {
            let addr = self.guard.resolve_url(&url).await?;
            let builder = || {
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent("Mozilla/5.0 (compatible; cova-media/1)")
            };
            // Connect to the checked address only; TLS still verifies the name.
            let client = self.clients.get(&url, addr, builder).map_err(|e| FetchError::Network(e.to_string()))?;
            let answer = client
                .get(url.clone())
                .timeout(deadline.saturating_duration_since(Instant::now()))
                .send()
                .await
                .map_err(|e| FetchError::Network(without_url(e)))?;
            let status = answer.status();
            if status.is_redirection() {
                let location = answer
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or(FetchError::Status(status.as_u16()))?;
                let next = url.join(location).map_err(|e| FetchError::Invalid(e.to_string()))?;
                url = self.check(next.as_str())?;
                continue;
            }
            if !status.is_success() {
                return Err(FetchError::Status(status.as_u16()));
            }
            return self.read(answer).await;
        }
        Err(FetchError::TooManyRedirects(self.max_redirects))
    }

    /// The body, never more than the size limit in memory.
    async fn read(&self, answer: reqwest::Response) -> Result<Bytes, FetchError> {
        if answer.content_length().is_some_and(|n| n > self.max_bytes as u64) {
            return Err(FetchError::TooLarge(self.max_bytes));
        }
        let mut body = BytesMut::new();
        let mut chunks = answer.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| FetchError::Network(without_url(e)))?;
            if body.len() + chunk.len() > self.max_bytes {
                return Err(FetchError::TooLarge(self.max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        if crate::sniff(&body).is_none() {
            return Err(FetchError::NotAnImage);
        }
        Ok(body.freeze())
    }
}

/// A reqwest error without its URL (signed links do not belong in error details).
fn without_url(e: reqwest::Error) -> String {
    e.without_url().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetcher(hosts: &[&str]) -> Fetcher {
        let cfg = MediaConfig { cdn_hosts: hosts.iter().map(|h| h.to_string()).collect(), ..MediaConfig::default() };
        Fetcher::new(&cfg).expect("fetcher")
    }

    #[test]
    fn only_allowed_hosts() {
        let f = fetcher(&["*.tiktokcdn.com", "i.ytimg.com", "http://127.0.0.1:9000"]);
        for ok in [
            "https://p16-sign-va.tiktokcdn.com/obj/x.jpeg?x-expires=1",
            "https://tiktokcdn.com/x.png",
            "https://i.ytimg.com/vi/x/hq.jpg",
            "http://127.0.0.1:9000/cdn/img/a.png",
        ] {
            assert!(f.check(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://eviltiktokcdn.com/x.png",
            "https://tiktokcdn.com.evil.net/x.png",
            "http://p16.tiktokcdn.com/x.png",
            "https://i.ytimg.com:8443/x.png",
            "https://img.ytimg.com/x.png",
            "http://127.0.0.1:9001/x.png",
            "http://localhost:9000/x.png",
        ] {
            assert!(matches!(f.check(bad), Err(FetchError::NotAllowed(_))), "{bad}");
        }
        for bad in ["file:///etc/passwd", "gopher://x", "data:image/png;base64,AA==", "https://u:p@i.ytimg.com/x", "::"]
        {
            assert!(matches!(f.check(bad), Err(FetchError::Invalid(_))), "{bad}");
        }
    }

    #[test]
    fn allow_list_entries() {
        assert!(HostRule::parse("ftp://x.com").is_err());
        assert!(HostRule::parse("*.").is_err());
        assert!(HostRule::parse("x.com:port").is_err());
        assert_eq!(
            HostRule::parse("HTTP://Cdn.Example:8080").expect("rule"),
            HostRule { scheme: "http".into(), host: "cdn.example".into(), subdomains: false, port: Some(8080) }
        );
    }

    /// An allowed name that resolves to a private address is refused by the address check.
    #[tokio::test]
    async fn allowed_hosts_must_resolve_to_public_addresses() {
        let f = fetcher(&["http://localhost"]);
        let err = f.fetch("http://localhost/x.png").await.expect_err("refused");
        assert!(matches!(err, FetchError::Refused(Refusal::NotPublic { .. })), "{err:?}");
    }
}
