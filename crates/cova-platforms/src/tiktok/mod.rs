//! TikTok: short links, post pages (metadata) and the web comment API.

mod chains;
mod challenge;
mod comments;
mod page;
mod profile;

use crate::TikTokConfig;
use crate::collect::{CommentSource, ReplyJob, ReplyPage, TopPage};
use crate::http::{Attempt, Http, HttpSettings, Request, Response, json_body};
use crate::urls::{ParsedUrl, PostRef, ShortLink, is_tiktok_host, parse_tiktok_path};
use crate::{Metadata, PlatformError};
use chains::Chains;
use page::PageData;
use reqwest::Method;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Link-preview crawlers get the redirect without a bot wall.
const PREVIEW_USER_AGENT: &str = "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)";
/// Challenge pages solved per metadata request before giving up.
const MAX_CHALLENGES: u32 = 2;

pub(crate) struct TikTok {
    http: Http,
    web_base: Url,
    short_base: Option<Url>,
    page_size: u32,
    max_redirects: u32,
    challenge_limit: u64,
    keep_raw: bool,
    pub reply_parallelism: usize,
    /// Top-level pages requested ahead of the cursor chain.
    list_prefetch: usize,
    /// A stable per-process device id, as a browser would send.
    device_id: String,
}

fn parse_base(name: &str, raw: &str) -> Result<Url, PlatformError> {
    let url = Url::parse(raw)
        .map_err(|e| PlatformError::Unavailable(format!("platforms config: {name} `{raw}` is not a URL: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(PlatformError::Unavailable(format!("platforms config: {name} must be an http(s) URL")));
    }
    Ok(url)
}

/// Joins an absolute path onto a base, keeping any path prefix of the base.
fn join(base: &Url, path_and_query: &str) -> Url {
    let mut url = base.clone();
    let prefix = base.path().trim_end_matches('/');
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    url.set_path(&format!("{prefix}{path}"));
    url.set_query((!query.is_empty()).then_some(query));
    url
}

impl TikTok {
    pub fn new(
        cfg: &TikTokConfig,
        keep_raw: bool,
        turns: std::sync::Arc<crate::turns::Turns>,
    ) -> Result<Self, PlatformError> {
        let web_base = parse_base("tiktok.web_base_url", &cfg.web_base_url)?;
        let short_base =
            cfg.short_link_base_url.as_deref().map(|u| parse_base("tiktok.short_link_base_url", u)).transpose()?;
        let signer_url = cfg.signer_url.as_deref().map(|u| parse_base("tiktok.signer_url", u)).transpose()?;
        let http = Http::new(HttpSettings {
            platform: "tiktok",
            user_agent: cfg.user_agent.clone(),
            cookies: cfg.cookies.clone(),
            proxies: cfg.proxies.clone(),
            proxy_rest: Duration::from_millis(cfg.proxy_rest_ms),
            signer_url,
            max_concurrency_per_host: cfg.max_concurrency_per_host,
            requests_per_second: cfg.requests_per_second,
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            read_timeout: Duration::from_millis(cfg.read_timeout_ms),
            max_retries: cfg.max_retries,
            retry_base: Duration::from_millis(cfg.retry_base_ms),
            retry_max: Duration::from_millis(cfg.retry_max_ms),
            turns,
            route_suffix: String::new(),
        })?;
        let device_id = format!("7{:018}", rand::random::<u64>() % 1_000_000_000_000_000_000);
        Ok(Self {
            http,
            web_base,
            short_base,
            page_size: cfg.comment_page_size.clamp(1, 50),
            max_redirects: cfg.max_redirects,
            challenge_limit: cfg.challenge_max_iterations,
            keep_raw,
            reply_parallelism: cfg.reply_parallelism.max(1),
            list_prefetch: cfg.list_prefetch,
            device_id,
        })
    }

    /// Whether a redirect may lead to `url`: TikTok hosts or the configured bases only.
    fn allowed_host(&self, url: &Url) -> bool {
        let same = |base: &Url| {
            base.host_str() == url.host_str() && base.port_or_known_default() == url.port_or_known_default()
        };
        url.host_str().is_some_and(is_tiktok_host) || same(&self.web_base) || self.short_base.as_ref().is_some_and(same)
    }

    fn short_link_url(&self, link: &ShortLink) -> Result<Url, PlatformError> {
        match &self.short_base {
            Some(base) => Ok(join(base, &link.path())),
            None => Url::parse(&link.public_url()).map_err(|e| PlatformError::InvalidUrl(format!("not a URL: {e}"))),
        }
    }

    /// Follows a short link's redirects (HEAD, GET when HEAD is refused) to the post it names.
    pub async fn resolve_short(&self, link: &ShortLink) -> Result<PostRef, PlatformError> {
        let mut url = self.short_link_url(link)?;
        for _ in 0..=self.max_redirects {
            let mut retry = self.http.retry("TikTok short link");
            let resp = loop {
                let mut req = Request::get(url.clone());
                req.method = Method::HEAD;
                req.user_agent = Some(PREVIEW_USER_AGENT.into());
                let attempt = match self.http.send(&req).await {
                    Attempt::Done(r) if r.status == 405 || r.status == 501 => {
                        req.method = Method::GET;
                        self.http.send(&req).await
                    }
                    other => other,
                };
                if let Some(r) = retry.next(attempt).await {
                    break r?;
                }
            };
            if resp.status.is_redirection() {
                let location = resp
                    .location()
                    .ok_or_else(|| PlatformError::Parse("TikTok short link redirected without a Location".into()))?;
                let target = url
                    .join(location)
                    .map_err(|_| PlatformError::Parse("TikTok short link redirected to an invalid URL".into()))?;
                if !self.allowed_host(&target) {
                    return Err(PlatformError::Parse(format!(
                        "TikTok short link redirected outside TikTok (to {})",
                        target.host_str().unwrap_or("an unknown host")
                    )));
                }
                let segments: Vec<&str> =
                    target.path_segments().map(|s| s.filter(|p| !p.is_empty()).collect()).unwrap_or_default();
                match segments.first() {
                    None => {
                        return Err(PlatformError::Parse(
                            "the short link leads to TikTok's home page: the post does not exist or was removed".into(),
                        ));
                    }
                    Some(&"login") => {
                        return Err(PlatformError::AudienceRestricted(
                            "TikTok requires a login to view this post".into(),
                        ));
                    }
                    _ => {}
                }
                if let Some(ParsedUrl::Post(post)) = parse_tiktok_path(&segments) {
                    return Ok(post);
                }
                url = target;
                continue;
            }
            return Err(match resp.status.as_u16() {
                404 | 410 => PlatformError::Parse("the TikTok short link does not exist".into()),
                s if (200..300).contains(&s) => {
                    PlatformError::Parse("the TikTok short link did not redirect to a post".into())
                }
                s => PlatformError::Parse(format!("the TikTok short link answered HTTP {s}")),
            });
        }
        Err(PlatformError::Parse(format!("the TikTok short link redirected more than {} times", self.max_redirects)))
    }

    /// GETs a page, following redirects within TikTok; a redirect to `/login` means a login wall.
    async fn fetch_page(&self, start: &Url) -> Attempt<(Url, Response)> {
        let mut url = start.clone();
        for _ in 0..=self.max_redirects {
            let resp = match self.http.send(&Request::get(url.clone()).signed()).await {
                Attempt::Done(r) => r,
                Attempt::Retry { blocked, detail } => return Attempt::Retry { blocked, detail },
                Attempt::Fail(e) => return Attempt::Fail(e),
            };
            if !resp.status.is_redirection() {
                return Attempt::Done((url, resp));
            }
            let Some(target) = resp.location().and_then(|l| url.join(l).ok()) else {
                return Attempt::Fail(PlatformError::Parse(
                    "TikTok redirected the post page without a valid Location".into(),
                ));
            };
            if !self.allowed_host(&target) {
                return Attempt::Fail(PlatformError::Parse("TikTok redirected the post page outside TikTok".into()));
            }
            let path = target.path().trim_end_matches('/');
            if path.starts_with("/login") {
                return Attempt::Fail(PlatformError::AudienceRestricted(
                    "TikTok redirects this post to its login page: it is only visible to logged-in viewers".into(),
                ));
            }
            if path.is_empty() {
                return Attempt::Fail(PlatformError::Parse(
                    "TikTok redirected the post to its home page: the post was not found".into(),
                ));
            }
            url = target;
        }
        Attempt::Fail(PlatformError::Parse(format!(
            "the TikTok post page redirected more than {} times",
            self.max_redirects
        )))
    }

    pub async fn metadata(&self, post: &PostRef) -> Result<Metadata, PlatformError> {
        let id = post.id.as_str();
        let page_url = join(&self.web_base, &format!("/@_/video/{id}"));
        let mut challenges = 0u32;
        let mut retry = self.http.retry("TikTok post page");
        let found = loop {
            let attempt = self.page_attempt(&page_url, id, &mut challenges).await;
            if let Some(r) = retry.next(attempt).await {
                break r?;
            }
        };
        match found {
            PageData::Item { item, user, user_stats } => page::metadata(id, &item, user.as_ref(), user_stats.as_ref()),
            // Walled or unknown page layout: oEmbed still knows title, author and thumbnail.
            _ => self.oembed(post).await,
        }
    }

    /// One fetch of the post page, classified.
    async fn page_attempt(&self, page_url: &Url, id: &str, challenges: &mut u32) -> Attempt<PageData> {
        let missing = || PlatformError::Parse("the TikTok post page does not exist (HTTP 404)".into());
        let html = match self.page_html(page_url, "post page", missing, challenges).await {
            Attempt::Done(html) => html,
            other => return other.map_never(),
        };
        match page::extract(&html, id) {
            Ok(PageData::Status { code, message }) => match page::status_error(code, &message) {
                Some(e) => Attempt::Fail(e),
                None => {
                    Attempt::Retry { blocked: true, detail: "TikTok answered with a captcha (status 10000)".into() }
                }
            },
            Ok(data) => Attempt::Done(data),
            Err(e) => Attempt::Fail(e),
        }
    }

    /// One fetch of a page that carries rehydration data (`what`: "post page", "profile page"):
    /// its HTML, or why not. A 404 is `missing()`; another failing status or an empty body is
    /// bot detection (retried); a challenge page is solved and the page asked again.
    async fn page_html(
        &self,
        url: &Url,
        what: &str,
        missing: impl FnOnce() -> PlatformError,
        challenges: &mut u32,
    ) -> Attempt<String> {
        let (_, resp) = match self.fetch_page(url).await {
            Attempt::Done(r) => r,
            other => return other.map_never(),
        };
        if resp.status == 404 {
            return Attempt::Fail(missing());
        }
        if !resp.status.is_success() {
            return Attempt::Retry { blocked: true, detail: format!("{what} answered HTTP {}", resp.status.as_u16()) };
        }
        let html = String::from_utf8_lossy(&resp.body).into_owned();
        if html.trim().is_empty() {
            return Attempt::Retry { blocked: true, detail: format!("{what} came back empty") };
        }
        if !page::has_post_data(&html)
            && let Some(ch) = challenge::detect(&html)
        {
            return self.pass_challenge(ch, challenges);
        }
        Attempt::Done(html)
    }

    /// Solves a challenge page and stores its cookie; the caller retries the page.
    fn pass_challenge<T>(&self, ch: Result<challenge::Challenge, String>, solved: &mut u32) -> Attempt<T> {
        let ch = match ch {
            Ok(c) => c,
            Err(detail) => {
                tracing::warn!(detail = %detail, "TikTok served a challenge page cova cannot read");
                return Attempt::Fail(PlatformError::Parse(
                    "TikTok kept turning cova's requests away; try again later".into(),
                ));
            }
        };
        if *solved >= MAX_CHALLENGES {
            tracing::warn!(solved = *solved, "TikTok keeps serving its challenge page: it is blocking cova's requests");
            return Attempt::Fail(PlatformError::Parse(
                "TikTok kept turning cova's requests away; try again later".into(),
            ));
        }
        let Some(answer) = ch.solve(self.challenge_limit) else {
            tracing::warn!(
                bound = ch.bound.min(self.challenge_limit),
                "TikTok served a challenge with no answer in bounds"
            );
            return Attempt::Fail(PlatformError::Parse(
                "TikTok kept turning cova's requests away; try again later".into(),
            ));
        };
        *solved += 1;
        tracing::debug!(cookie = %ch.cookie_name, "solved the TikTok challenge page");
        self.http.set_cookie(&ch.cookie_name, &ch.cookie_value(answer));
        Attempt::Retry { blocked: true, detail: "TikTok served its challenge page".into() }
    }

    async fn oembed(&self, post: &PostRef) -> Result<Metadata, PlatformError> {
        let mut url = join(&self.web_base, "/oembed");
        url.query_pairs_mut().append_pair("url", &post.canonical_url());
        let mut retry = self.http.retry("TikTok oEmbed");
        let value = loop {
            let attempt = match self.http.send(&Request::get(url.clone())).await {
                Attempt::Done(r) if r.status.is_success() => match json_body(&r, "oEmbed") {
                    Ok(v) => Attempt::Done(v),
                    Err(a) => a,
                },
                Attempt::Done(r) => Attempt::Fail(PlatformError::Parse(format!(
                    "the TikTok post page carries no post data and oEmbed answered HTTP {}: the post is unavailable or the client is walled",
                    r.status.as_u16()
                ))),
                other => other.map_never(),
            };
            if let Some(r) = retry.next(attempt).await {
                break r?;
            }
        };
        Ok(page::metadata_from_oembed(&post.id, &value))
    }

    fn api_url(&self, path: &str, params: &[(&str, String)]) -> Url {
        let mut url = join(&self.web_base, path);
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in [
                ("aid", "1988"),
                ("app_language", "en"),
                ("app_name", "tiktok_web"),
                ("browser_language", "en-US"),
                ("browser_name", "Mozilla"),
                ("browser_online", "true"),
                ("browser_platform", "Win32"),
                ("channel", "tiktok_web"),
                ("device_platform", "web_pc"),
                ("os", "windows"),
                ("region", "US"),
            ] {
                q.append_pair(k, v);
            }
            q.append_pair("device_id", &self.device_id);
            for (k, v) in params {
                q.append_pair(k, v);
            }
        }
        url
    }

    /// One comment API call, retried; non-zero status codes map like post page status codes.
    async fn api_page(&self, url: Url, what: &str, parent: Option<&str>) -> Result<comments::Envelope, PlatformError> {
        let mut retry = self.http.retry(what);
        loop {
            let attempt = self.api_attempt(&url, what, parent).await;
            if let Some(r) = retry.next(attempt).await {
                return r;
            }
        }
    }

    async fn api_attempt(&self, url: &Url, what: &str, parent: Option<&str>) -> Attempt<comments::Envelope> {
        let resp = match self.http.send(&Request::get(url.clone()).signed()).await {
            Attempt::Done(r) => r,
            other => return other.map_never(),
        };
        if !resp.status.is_success() {
            return Attempt::Fail(PlatformError::Parse(format!("{what} answered HTTP {}", resp.status.as_u16())));
        }
        let v = match json_body(&resp, what) {
            Ok(v) => v,
            Err(a) => return a,
        };
        let env = comments::envelope(&v, parent, self.keep_raw);
        if env.status_code != 0 {
            return match page::status_error(env.status_code, &env.status_msg) {
                Some(e) => Attempt::Fail(e),
                None => Attempt::Retry { blocked: true, detail: format!("{what}: captcha (status 10000)") },
            };
        }
        Attempt::Done(env)
    }
}

/// TikTok's comments: the top-level list walked by `1 + list_prefetch` cursor chains at once
/// ([`chains`]), replies listed by parent, skipped when the `reply_comment` preview holds them all.
pub(crate) struct TikTokComments {
    tiktok: Arc<TikTok>,
    post_id: String,
    chains: Chains,
}

impl TikTokComments {
    pub fn new(tiktok: Arc<TikTok>, post: &PostRef, max: u32) -> Self {
        let (tt, id) = (tiktok.clone(), post.id.clone());
        let fetch: chains::Fetch = Arc::new(move |cursor| {
            let (tt, id) = (tt.clone(), id.clone());
            Box::pin(async move { Self::fetch_top(tt, id, cursor).await })
        });
        let chains = Chains::new(fetch, 1 + tiktok.list_prefetch, u64::from(max));
        Self { tiktok, post_id: post.id.clone(), chains }
    }

    async fn fetch_top(tiktok: Arc<TikTok>, post_id: String, cursor: u64) -> Result<comments::Envelope, PlatformError> {
        let url = tiktok.api_url(
            "/api/comment/list/",
            &[("aweme_id", post_id), ("cursor", cursor.to_string()), ("count", tiktok.page_size.to_string())],
        );
        tiktok.api_page(url, "TikTok comment list", None).await
    }
}

#[async_trait::async_trait]
impl CommentSource for TikTokComments {
    async fn next_page(&self) -> Result<Option<TopPage>, PlatformError> {
        let Some(env) = self.chains.next().await? else { return Ok(None) };
        let mut previews = env.complete_previews;
        let reply_jobs = env
            .comments
            .iter()
            .filter(|c| c.reply_count > 0)
            .map(|c| ReplyJob { parent_id: c.id.clone(), inline: previews.remove(&c.id) })
            .collect();
        Ok(Some(TopPage { comments: env.comments, reply_jobs, done: false }))
    }

    async fn reply_page(&self, parent_id: &str, cursor: Option<String>) -> Result<ReplyPage, PlatformError> {
        let tt = &self.tiktok;
        let from: u64 = cursor.as_deref().and_then(|c| c.parse().ok()).unwrap_or(0);
        // item_id must be the post id: anything else silently returns nothing.
        let url = tt.api_url(
            "/api/comment/list/reply/",
            &[
                ("item_id", self.post_id.clone()),
                ("comment_id", parent_id.to_string()),
                ("cursor", from.to_string()),
                ("count", tt.page_size.to_string()),
            ],
        );
        let env = tt.api_page(url, "TikTok reply list", Some(parent_id)).await?;
        let got = env.comments.len() as u64;
        let next = env.cursor.filter(|c| *c > from).unwrap_or(from + got);
        let more = env.has_more && got > 0 && next > from;
        Ok(ReplyPage { comments: env.comments, next: more.then(|| next.to_string()) })
    }

    fn reported_total(&self) -> Option<u64> {
        self.chains.reported_total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_keeps_base_prefix_and_query() {
        let base = Url::parse("http://127.0.0.1:9090/tt/").expect("url");
        assert_eq!(join(&base, "/t/abc/?x=1").as_str(), "http://127.0.0.1:9090/tt/t/abc/?x=1");
        let root = Url::parse("https://www.tiktok.com").expect("url");
        assert_eq!(join(&root, "/@_/video/1").as_str(), "https://www.tiktok.com/@_/video/1");
    }
}
