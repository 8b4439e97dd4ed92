//! TikTok: short links, post pages (metadata) and the web comment API.

mod challenge;
mod comments;
mod coverage;
mod page;

use crate::TikTokConfig;
use crate::collect::{CommentSource, ReplyJob, ReplyPage, TopPage};
use crate::http::{Attempt, Http, HttpSettings, Request, Response, json_body};
use crate::urls::{ParsedUrl, PostRef, ShortLink, is_tiktok_host, parse_tiktok_path};
use crate::{Metadata, PlatformError};
use coverage::Coverage;
use page::PageData;
use reqwest::Method;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::task::JoinHandle;
use url::Url;

/// Link-preview crawlers get the redirect without a bot wall.
const PREVIEW_USER_AGENT: &str = "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)";
/// Extra pages tried after `has_more: 0` arrived with comments and an advancing cursor.
const EXTRA_TRIES_AFTER_HAS_MORE_0: u32 = 3;
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
    pub fn new(cfg: &TikTokConfig, keep_raw: bool) -> Result<Self, PlatformError> {
        let web_base = parse_base("tiktok.web_base_url", &cfg.web_base_url)?;
        let short_base =
            cfg.short_link_base_url.as_deref().map(|u| parse_base("tiktok.short_link_base_url", u)).transpose()?;
        let signer_url = cfg.signer_url.as_deref().map(|u| parse_base("tiktok.signer_url", u)).transpose()?;
        let http = Http::new(HttpSettings {
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
        let (_, resp) = match self.fetch_page(page_url).await {
            Attempt::Done(r) => r,
            Attempt::Retry { blocked, detail } => return Attempt::Retry { blocked, detail },
            Attempt::Fail(e) => return Attempt::Fail(e),
        };
        if resp.status == 404 {
            return Attempt::Fail(PlatformError::Parse("the TikTok post page does not exist (HTTP 404)".into()));
        }
        if !resp.status.is_success() {
            return Attempt::Retry {
                blocked: true,
                detail: format!("post page answered HTTP {}", resp.status.as_u16()),
            };
        }
        let html = String::from_utf8_lossy(&resp.body);
        if html.trim().is_empty() {
            return Attempt::Retry { blocked: true, detail: "post page came back empty".into() };
        }
        if !page::has_post_data(&html)
            && let Some(ch) = challenge::detect(&html)
        {
            return self.pass_challenge(ch, challenges);
        }
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

    /// Solves a challenge page and stores its cookie; the caller retries the page.
    fn pass_challenge<T>(&self, ch: Result<challenge::Challenge, String>, solved: &mut u32) -> Attempt<T> {
        let ch = match ch {
            Ok(c) => c,
            Err(detail) => {
                return Attempt::Fail(PlatformError::Parse(format!(
                    "TikTok served a challenge page cova cannot read: {detail}"
                )));
            }
        };
        if *solved >= MAX_CHALLENGES {
            return Attempt::Fail(PlatformError::Parse(format!(
                "TikTok keeps serving its challenge page after {solved} solved challenges: the platform is blocking the client"
            )));
        }
        let Some(answer) = ch.solve(self.challenge_limit) else {
            return Attempt::Fail(PlatformError::Parse(format!(
                "TikTok served an unsolvable challenge (no answer up to {}): the platform is blocking the client",
                ch.bound.min(self.challenge_limit)
            )));
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

/// The state of one collection's top-level list.
#[derive(Default)]
struct TopState {
    finished: bool,
    extra_tries: u32,
    top_seen: u64,
    total: Option<u64>,
    coverage: Coverage,
    /// A page contradicted the offset model: no more guessing, one page after the other.
    sequential: bool,
    /// Pages requested ahead of the chain, by offset, and those arrived but not yet used.
    ahead: BTreeMap<u64, JoinHandle<Result<comments::Envelope, PlatformError>>>,
    arrived: BTreeMap<u64, comments::Envelope>,
    /// The next offset to guess.
    next_guess: u64,
}

impl TopState {
    fn stop_guessing(&mut self) {
        for (_, task) in std::mem::take(&mut self.ahead) {
            task.abort();
        }
        self.arrived.clear();
    }
}

/// What `next_page` does next for the offset the cover has reached.
enum Step {
    Use(u64, comments::Envelope),
    Await(u64, JoinHandle<Result<comments::Envelope, PlatformError>>),
    Fetch(u64),
}

/// TikTok's comments. The top-level cursor is an offset, so pages further down the list are
/// requested ahead (`list_prefetch` at a time, at the stride full pages advance by) while the
/// chain walks; each page is used once the pages before it vouch for every offset up to its
/// start, and the gaps short pages leave are fetched in the chain itself.
pub(crate) struct TikTokComments {
    tiktok: Arc<TikTok>,
    post_id: String,
    /// Top-level comments beyond this are never needed (the collection's budget).
    max: u64,
    state: Mutex<TopState>,
}

impl TikTokComments {
    pub fn new(tiktok: Arc<TikTok>, post: &PostRef, max: u32) -> Self {
        Self { tiktok, post_id: post.id.clone(), max: u64::from(max), state: Mutex::new(TopState::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TopState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn fetch_top(tiktok: Arc<TikTok>, post_id: String, cursor: u64) -> Result<comments::Envelope, PlatformError> {
        let url = tiktok.api_url(
            "/api/comment/list/",
            &[("aweme_id", post_id), ("cursor", cursor.to_string()), ("count", tiktok.page_size.to_string())],
        );
        tiktok.api_page(url, "TikTok comment list", None).await
    }

    /// Chooses how to reach past the cover: an arrived page that does, one on its way that
    /// starts inside it, or a request at the cover's end.
    fn step(s: &mut TopState) -> Step {
        let at = s.coverage.covered();
        let useful = s
            .arrived
            .range(..=at)
            .rev()
            .find(|(start, env)| {
                coverage::vouched_end(**start, env.comments.len() as u64, env.cursor).is_none_or(|e| e > at)
            })
            .map(|(start, _)| *start);
        if let Some(start) = useful
            && let Some(env) = s.arrived.remove(&start)
        {
            return Step::Use(start, env);
        }
        // Arrived pages that end inside the cover bring nothing.
        s.arrived.retain(|start, _| *start > at);
        if let Some(start) = s.ahead.range(..=at).next_back().map(|(start, _)| *start)
            && let Some(task) = s.ahead.remove(&start)
        {
            return Step::Await(start, task);
        }
        Step::Fetch(at)
    }

    /// Requests pages ahead of the cover, within the window and the list's known size.
    fn guess_ahead(&self, s: &mut TopState) {
        let (stride, window) = (s.coverage.stride(), self.tiktok.list_prefetch);
        if s.sequential || s.finished || stride == 0 || window == 0 {
            return;
        }
        // `total` counts replies too, so it bounds the top-level list from above.
        let end = s.total.unwrap_or(u64::MAX).min(self.max);
        s.next_guess = s.next_guess.max(s.coverage.covered() + stride);
        while s.ahead.len() < window && s.next_guess < end {
            let offset = s.next_guess;
            s.next_guess += stride;
            if s.ahead.contains_key(&offset) || s.arrived.contains_key(&offset) {
                continue;
            }
            let fetch = Self::fetch_top(self.tiktok.clone(), self.post_id.clone(), offset);
            s.ahead.insert(offset, tokio::spawn(tracing::Instrument::in_current_span(fetch)));
        }
    }
}

impl Drop for TikTokComments {
    fn drop(&mut self) {
        self.state().stop_guessing();
    }
}

#[async_trait::async_trait]
impl CommentSource for TikTokComments {
    async fn next_page(&self) -> Result<Option<TopPage>, PlatformError> {
        let (start, env) = loop {
            let step = {
                let mut s = self.state();
                if s.finished {
                    return Ok(None);
                }
                Self::step(&mut s)
            };
            let (start, env) = match step {
                Step::Use(start, env) => (start, env),
                Step::Await(start, task) => {
                    let env = task
                        .await
                        .map_err(|e| PlatformError::Unavailable(format!("a comment page task failed: {e}")))??;
                    self.state().arrived.insert(start, env);
                    continue;
                }
                Step::Fetch(at) => (at, Self::fetch_top(self.tiktok.clone(), self.post_id.clone(), at).await?),
            };
            let mut s = self.state();
            if s.sequential {
                break (start, env);
            }
            let ids: Vec<&str> = env.comments.iter().map(|c| c.id.as_str()).collect();
            match s.coverage.record(start, &ids, env.cursor) {
                Ok(_) => break (start, env),
                Err(contradiction) => {
                    tracing::info!(post.id = %self.post_id, reason = %contradiction.0, "comment pages do not fit the offset model; fetching them one after the other");
                    s.sequential = true;
                    s.stop_guessing();
                    // The page itself is still a page of the chain when it starts at the cover.
                    if start == s.coverage.covered() {
                        break (start, env);
                    }
                }
            }
        };
        let mut s = self.state();
        s.total = env.total.or(s.total);
        let got = env.comments.len() as u64;
        let advanced = if s.sequential {
            // The chain's own rule: a cursor that does not move means `got` comments further on.
            let next = env.cursor.filter(|c| *c > start).unwrap_or(start + got);
            let advanced = next > s.coverage.covered();
            s.coverage = Coverage::resumed_at(next.max(s.coverage.covered()));
            advanced
        } else {
            got > 0
        };
        s.top_seen += got;
        // has_more 0 is not trusted while pages still bring comments and the cursor moves.
        let done = if got == 0 || !advanced {
            true
        } else if env.has_more {
            false
        } else if s.extra_tries < EXTRA_TRIES_AFTER_HAS_MORE_0 && s.total.is_none_or(|t| s.top_seen < t) {
            s.extra_tries += 1;
            false
        } else {
            true
        };
        s.finished = done;
        if done {
            s.stop_guessing();
        } else {
            self.guess_ahead(&mut s);
        }
        drop(s);
        let mut previews = env.complete_previews;
        let reply_jobs = env
            .comments
            .iter()
            .filter(|c| c.reply_count > 0)
            .map(|c| ReplyJob { parent_id: c.id.clone(), inline: previews.remove(&c.id) })
            .collect();
        Ok(Some(TopPage { comments: env.comments, reply_jobs, done }))
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
        self.state().total
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
