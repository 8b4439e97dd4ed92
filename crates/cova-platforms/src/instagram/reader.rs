//! One egress lane's client of Instagram: the way Instagram's web page reads a post (its page
//! for the LSD token and the CSRF cookie, then the GraphQL endpoint), the comment and reply
//! connections a visitor is shown, the REST pages of a logged-in session, share links,
//! profiles and their reels. Each answer is read by [`super::parse`]; each wall becomes the
//! error it stands for.

use super::parse::{self, Page, Post, Wall};
use super::shortcode;
use crate::CommentSink;
use crate::PlatformError;
use crate::http::{Attempt, Http, HttpSettings, Request};
use crate::model::Comment;
use crate::turns::Turns;
use cova_config::platforms::InstagramConfig;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use url::Url;

/// How one lane reads Instagram (see `platforms.instagram.*`).
#[derive(Clone)]
pub(crate) struct Settings {
    /// `web_base_url`, parsed.
    pub base: Url,
    pub cfg: Arc<InstagramConfig>,
    pub turns: Arc<Turns>,
    pub keep_raw: bool,
}

/// The detail of a checkpoint met by a logged-in session: the adapter sets the session aside
/// and reads logged out on its route.
pub(crate) const SESSION_CHECKPOINT: &str = "Instagram is checking cova's requests; try again later";

/// What a reading of comments came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Read {
    pub collected: u32,
    /// `max` stopped the reading while more comments were shown.
    pub capped: bool,
    /// Instagram handed back the cursor it was asked with while saying there was more.
    pub cut_short: bool,
}

/// A paging direction of a session's comment pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// `max_id`: older comments (also a visitor's only direction, `after`).
    Older,
    /// `min_id`: the comments the first page was preceded by.
    Newer,
}

pub(crate) struct Reader {
    http: Http,
    settings: Settings,
    logged_in: bool,
    /// The LSD token of the last page read; GraphQL requests carry it.
    lsd: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Reader {
    /// A reader through `proxy` (direct when `None`), logged in when `session` is given
    /// (`(route name suffix, sessionid)`).
    pub fn new(
        settings: Settings,
        proxy: Option<String>,
        session: Option<(String, String)>,
    ) -> Result<Self, PlatformError> {
        let mut cookies = BTreeMap::new();
        let mut route_suffix = String::new();
        let logged_in = session.is_some();
        if let Some((suffix, sessionid)) = session {
            cookies.insert("sessionid".to_owned(), sessionid);
            route_suffix = suffix;
        }
        let cfg = &settings.cfg;
        let http = Http::new(HttpSettings {
            platform: "instagram",
            user_agent: cfg.user_agent.clone(),
            cookies,
            proxies: proxy.into_iter().collect(),
            proxy_rest: Duration::ZERO,
            signer_url: None,
            max_concurrency_per_host: cfg.max_concurrency_per_host.max(1),
            requests_per_second: cfg.requests_per_second,
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            read_timeout: Duration::from_millis(cfg.read_timeout_ms),
            max_retries: cfg.max_retries,
            retry_base: Duration::from_millis(cfg.retry_base_ms),
            retry_max: Duration::from_millis(cfg.retry_max_ms),
            turns: settings.turns.clone(),
            route_suffix,
        })?;
        Ok(Self { http, settings, logged_in, lsd: Mutex::new(None) })
    }

    pub fn url(&self, path: &str) -> Url {
        let mut url = self.settings.base.clone();
        let joined = format!("{}{path}", url.path().trim_end_matches('/'));
        url.set_path(&joined);
        url
    }

    /// The error a wall stands for; a rate limit and a broken endpoint are tried again.
    fn wall_error<T>(&self, wall: Wall) -> Attempt<T> {
        match wall {
            Wall::Login if self.logged_in => {
                // The session was logged out by Instagram: as good as a checkpoint.
                tracing::warn!("Instagram no longer accepts a configured session (login wall)");
                Attempt::Fail(PlatformError::Unavailable(SESSION_CHECKPOINT.into()))
            }
            Wall::Login => Attempt::Fail(PlatformError::AudienceRestricted(
                "Instagram shows this post only to logged-in viewers".into(),
            )),
            Wall::Checkpoint => {
                tracing::warn!(
                    logged_in = self.logged_in,
                    "Instagram is checking cova's requests (a checkpoint or challenge)"
                );
                Attempt::Fail(PlatformError::Unavailable(SESSION_CHECKPOINT.into()))
            }
            Wall::RateLimited => {
                Attempt::Retry { blocked: false, detail: "Instagram: please wait a few minutes".into() }
            }
            Wall::Broken => Attempt::Retry { blocked: false, detail: "Instagram: something went wrong".into() },
        }
    }

    /// A page of Instagram's web app: the LSD token and the CSRF cookie, or the wall it is.
    /// `missing` is the error of a page that does not exist.
    async fn open_page(&self, path: &str, missing: &(dyn Fn() -> PlatformError + Sync)) -> Result<(), PlatformError> {
        let url = self.url(path);
        let mut retry = self.http.retry("Instagram page");
        loop {
            let attempt = match self.http.send(&Request::get(url.clone())).await {
                Attempt::Done(resp) => {
                    let body = String::from_utf8_lossy(&resp.body);
                    if let Some(wall) = parse::wall(resp.status.as_u16(), &body, resp.location()) {
                        self.wall_error(wall)
                    } else if resp.status.as_u16() == 404 {
                        Attempt::Fail(missing())
                    } else if !resp.status.is_success() {
                        tracing::warn!(status = resp.status.as_u16(), path, "Instagram did not show a page");
                        Attempt::Fail(PlatformError::Parse("Instagram did not show the page; try again later".into()))
                    } else {
                        self.keep_csrf(&resp.headers);
                        match lsd_token(&body) {
                            Some(token) => {
                                *lock(&self.lsd) = Some(token);
                                Attempt::Done(())
                            }
                            None => {
                                cova_metrics::platform_parse_error("instagram", "page");
                                Attempt::Fail(PlatformError::Parse(
                                    "Instagram answered the page in a shape cova does not know; try again later".into(),
                                ))
                            }
                        }
                    }
                }
                other => other.map_never(),
            };
            if let Some(done) = retry.next(attempt).await {
                return done;
            }
        }
    }

    fn keep_csrf(&self, headers: &reqwest::header::HeaderMap) {
        for cookie in headers.get_all(reqwest::header::SET_COOKIE) {
            if let Some((name, value)) = cookie.to_str().ok().and_then(|c| c.split(';').next()?.split_once('='))
                && name.trim() == "csrftoken"
            {
                self.http.set_cookie("csrftoken", value.trim());
            }
        }
    }

    fn csrf(&self) -> String {
        self.http.cookie("csrftoken").unwrap_or_default()
    }

    /// One GraphQL query; its answer's JSON, or the wall it is.
    async fn query(
        &self,
        what: &str,
        doc_id: &str,
        variables: serde_json::Value,
        referer: &str,
    ) -> Result<serde_json::Value, PlatformError> {
        let lsd = lock(&self.lsd).clone().unwrap_or_default();
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("doc_id", doc_id)
            .append_pair("variables", &variables.to_string())
            .append_pair("lsd", &lsd)
            .finish();
        let mut retry = self.http.retry(what);
        loop {
            let mut req = Request::post_form(self.url("/graphql/query"), body.clone().into_bytes());
            req.headers.push((reqwest::header::HeaderName::from_static("x-fb-lsd"), lsd.clone()));
            self.browser_headers(&mut req, referer);
            let attempt = self.json_answer(what, &req).await;
            if let Some(done) = retry.next(attempt).await {
                return done;
            }
        }
    }

    /// One GET of the REST API (a session's comments, a profile).
    async fn rest(&self, what: &str, url: Url, referer: &str) -> Result<serde_json::Value, PlatformError> {
        let mut retry = self.http.retry(what);
        loop {
            let mut req = Request::get(url.clone());
            self.browser_headers(&mut req, referer);
            let attempt = self.json_answer(what, &req).await;
            if let Some(done) = retry.next(attempt).await {
                return done;
            }
        }
    }

    fn browser_headers(&self, req: &mut Request, referer: &str) {
        use reqwest::header::HeaderName;
        req.headers.push((HeaderName::from_static("x-ig-app-id"), self.settings.cfg.app_id.clone()));
        req.headers.push((HeaderName::from_static("x-csrftoken"), self.csrf()));
        req.headers.push((HeaderName::from_static("x-requested-with"), "XMLHttpRequest".into()));
        req.headers.push((reqwest::header::REFERER, referer.to_owned()));
    }

    async fn json_answer(&self, what: &str, req: &Request) -> Attempt<serde_json::Value> {
        match self.http.send(req).await {
            Attempt::Done(resp) => {
                let text = String::from_utf8_lossy(&resp.body);
                match parse::wall(resp.status.as_u16(), &text, resp.location()) {
                    Some(wall) => self.wall_error(wall),
                    None => match serde_json::from_slice::<serde_json::Value>(&resp.body) {
                        Ok(v) if resp.status.is_success() => Attempt::Done(v),
                        _ => {
                            cova_metrics::platform_parse_error("instagram", "answer");
                            tracing::warn!(
                                status = resp.status.as_u16(),
                                what,
                                "Instagram answered in an unknown shape"
                            );
                            Attempt::Fail(PlatformError::Parse(format!(
                                "Instagram answered {what} in a shape cova does not know; try again later"
                            )))
                        }
                    },
                }
            }
            other => other.map_never(),
        }
    }

    fn post_path(code: &str) -> String {
        format!("/reel/{code}/")
    }

    /// The post of a shortcode, or why it cannot be read.
    pub async fn post(&self, code: &str) -> Result<Post, PlatformError> {
        let pk = shortcode::to_pk(code)
            .ok_or_else(|| PlatformError::InvalidUrl(format!("`{code}` is not an Instagram post code")))?;
        let deleted = || PlatformError::Parse("the Instagram post was deleted, or the link is wrong".into());
        self.open_page(&Self::post_path(code), &deleted).await?;
        let referer = self.url(&Self::post_path(code)).to_string();
        let answer = self
            .query(
                "the post",
                &self.settings.cfg.doc_post_logged_out,
                serde_json::json!({"media_id": pk.to_string()}),
                &referer,
            )
            .await?;
        let post =
            parse::logged_out_post(&answer).inspect_err(|_| cova_metrics::platform_parse_error("instagram", "post"))?;
        post.ok_or_else(|| {
            PlatformError::AudienceRestricted(
                "the Instagram post is private, age-restricted or shown to logged-in viewers only".into(),
            )
        })
    }

    /// A post the visitor's query gates, read with this reader's session (the session's post
    /// query); `None` when Instagram does not show it to the session either.
    pub async fn session_post(&self, code: &str) -> Result<Option<Post>, PlatformError> {
        let deleted = || PlatformError::Parse("the Instagram post was deleted, or the link is wrong".into());
        self.open_page(&Self::post_path(code), &deleted).await?;
        let referer = self.url(&Self::post_path(code)).to_string();
        let answer = self
            .query("the post", &self.settings.cfg.doc_post_session, serde_json::json!({"shortcode": code}), &referer)
            .await?;
        parse::logged_in_post(&answer).inspect_err(|_| cova_metrics::platform_parse_error("instagram", "post"))
    }

    /// Every comment this reader is shown (a session's REST pages in both of their paging
    /// directions, or a visitor's GraphQL connections), at most `max` counting replies, each
    /// once (Instagram repeats comments across pages), handed to `sink` a top-level page at a
    /// time with the replies after their parent.
    pub async fn comments(
        &self,
        post: &Post,
        max: u32,
        sink: &mut (dyn CommentSink + Send),
    ) -> Result<Read, PlatformError> {
        let mut read = Reading { seen: HashSet::new(), max, read: Read::default() };
        if post.comments_disabled || max == 0 {
            read.read.capped = max == 0 && post.comments.unwrap_or(0) > 0;
            return Ok(read.read);
        }
        let referer = self.url(&Self::post_path(&post.shortcode)).to_string();
        // Where each direction goes on; the first page says, then older pages first.
        let (mut older, mut newer): (Option<String>, Option<String>) = (None, None);
        let mut asked: Option<(Direction, String)> = None;
        loop {
            let (comments, next_older, next_newer) = if self.logged_in {
                let mut url = self.url(&format!("/api/v1/media/{}/comments/", post.pk));
                url.query_pairs_mut()
                    .append_pair("can_support_threading", "true")
                    .append_pair("permalink_enabled", "false");
                if let Some((direction, cursor)) = &asked {
                    let name = if *direction == Direction::Older { "max_id" } else { "min_id" };
                    url.query_pairs_mut().append_pair(name, cursor);
                }
                let answer = self.rest("the comments", url, &referer).await?;
                parse::rest_comments(&answer, self.settings.keep_raw)
                    .map(|p| (p.comments, p.older, p.newer))
                    .inspect_err(|_| cova_metrics::platform_parse_error("instagram", "comments"))?
            } else {
                let after = asked.as_ref().map(|(_, cursor)| cursor.clone());
                let vars =
                    serde_json::json!({"media_id": post.pk, "first": 50, "after": after, "sort_order": "popular"});
                let answer = self.query("the comments", &self.settings.cfg.doc_comments, vars, &referer).await?;
                parse::connection(&answer, None, self.settings.keep_raw)
                    .map(|p| (p.comments, p.next, None))
                    .inspect_err(|_| cova_metrics::platform_parse_error("instagram", "comments"))?
            };
            let mut batch = Vec::new();
            for top in comments {
                if !read.seen.insert(top.id.clone()) {
                    continue;
                }
                if read.full() {
                    read.read.capped = true;
                    break;
                }
                let (pk, replies) = (top.id.clone(), top.reply_count);
                read.read.collected += 1;
                batch.push(top);
                if replies > 0 {
                    self.replies(&pk, post, &referer, &mut read, &mut batch).await?;
                }
            }
            if !batch.is_empty() {
                sink.page(batch).await?;
            }
            if read.read.capped {
                return Ok(read.read);
            }
            // A page of one direction says only where that direction goes on.
            match &asked {
                None => (older, newer) = (next_older, next_newer),
                Some((Direction::Older, _)) => older = next_older,
                Some((Direction::Newer, _)) => newer = next_newer,
            }
            // A cursor handed back as it was asked, while more is said to be there: Instagram
            // stopped that direction short.
            if let Some((direction, cursor)) = &asked {
                let again = match direction {
                    Direction::Older => &mut older,
                    Direction::Newer => &mut newer,
                };
                if again.as_ref() == Some(cursor) {
                    *again = None;
                    read.read.cut_short = true;
                }
            }
            asked = match (older.take(), newer.take()) {
                (Some(cursor), rest) => {
                    newer = rest;
                    Some((Direction::Older, cursor))
                }
                (None, Some(cursor)) => Some((Direction::Newer, cursor)),
                (None, None) => return Ok(read.read),
            };
            if read.full() {
                read.read.capped = true;
                return Ok(read.read);
            }
        }
    }

    async fn replies(
        &self,
        parent: &str,
        post: &Post,
        referer: &str,
        read: &mut Reading,
        out: &mut Vec<Comment>,
    ) -> Result<(), PlatformError> {
        let mut after: Option<String> = None;
        loop {
            let Page { comments, next } = if self.logged_in {
                let mut url = self.url(&format!("/api/v1/media/{}/comments/{parent}/child_comments/", post.pk));
                if let Some(a) = &after {
                    url.query_pairs_mut().append_pair("max_id", a);
                }
                let answer = self.rest("the replies", url, referer).await?;
                parse::rest_replies(&answer, parent, self.settings.keep_raw)
            } else {
                let vars =
                    serde_json::json!({"media_id": post.pk, "parent_comment_id": parent, "first": 50, "after": after});
                let answer = self.query("the replies", &self.settings.cfg.doc_replies, vars, referer).await?;
                parse::connection(&answer, Some(parent), self.settings.keep_raw)
            }
            .inspect_err(|_| cova_metrics::platform_parse_error("instagram", "replies"))?;
            for reply in comments {
                if !read.seen.insert(reply.id.clone()) {
                    continue;
                }
                if read.full() {
                    read.read.capped = true;
                    return Ok(());
                }
                read.read.collected += 1;
                out.push(reply);
            }
            match next {
                Some(n) if Some(&n) != after.as_ref() => after = Some(n),
                _ => return Ok(()),
            }
        }
    }

    /// Follows a `/share/…` link's redirects (bounded) to the post it names.
    pub async fn resolve_share(&self, path: &str, max_redirects: u32) -> Result<String, PlatformError> {
        let mut url = self.url(path);
        for _ in 0..=max_redirects {
            let mut retry = self.http.retry("Instagram share link");
            let resp = loop {
                if let Some(r) = retry.next(self.http.send(&Request::get(url.clone())).await).await {
                    break r?;
                }
            };
            let Some(location) = resp.location().filter(|_| resp.status.is_redirection()) else {
                return Err(PlatformError::Parse(if resp.status.as_u16() == 404 {
                    "the Instagram share link does not exist".into()
                } else {
                    "the Instagram share link did not lead to a post".into()
                }));
            };
            if parse::wall(resp.status.as_u16(), "", Some(location)) == Some(Wall::Login) {
                return Err(PlatformError::AudienceRestricted(
                    "Instagram shows this shared post only to logged-in viewers".into(),
                ));
            }
            let target = url
                .join(location)
                .map_err(|_| PlatformError::Parse("the Instagram share link led to an invalid address".into()))?;
            let on_instagram = target.host_str().is_some_and(super::urls::is_instagram_host)
                || (target.host_str() == self.settings.base.host_str()
                    && target.port_or_known_default() == self.settings.base.port_or_known_default());
            if !on_instagram {
                return Err(PlatformError::Parse("the Instagram share link led outside Instagram".into()));
            }
            // On the configured base (the simulator's), the post path follows the base's own path.
            let path = target.path().strip_prefix(self.settings.base.path().trim_end_matches('/')).unwrap_or("");
            let path = if target.host_str().is_some_and(super::urls::is_instagram_host) { target.path() } else { path };
            let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            if let Some(super::urls::Named::Post(code)) = super::urls::parse_path(&segments) {
                return Ok(code);
            }
            url = target;
        }
        Err(PlatformError::Parse("the Instagram share link redirected too many times".into()))
    }

    /// A profile by username (`web_profile_info`); `None` when there is no such account.
    pub async fn profile(&self, username: &str) -> Result<Option<parse::Profile>, PlatformError> {
        let mut url = self.url("/api/v1/users/web_profile_info/");
        url.query_pairs_mut().append_pair("username", username);
        let referer = self.url(&format!("/{username}/")).to_string();
        let answer = self.rest("the profile", url, &referer).await?;
        parse::profile(&answer).inspect_err(|_| cova_metrics::platform_parse_error("instagram", "profile"))
    }

    /// One page of a profile's reels, newest first (pinned ones may come first).
    pub async fn reels(
        &self,
        username: &str,
        user_id: &str,
        after: Option<&str>,
    ) -> Result<parse::ReelsPage, PlatformError> {
        let missing = || PlatformError::Missing(format!("the Instagram account {username} does not exist"));
        if lock(&self.lsd).is_none() {
            self.open_page(&format!("/{username}/reels/"), &missing).await?;
        }
        let referer = self.url(&format!("/{username}/reels/")).to_string();
        let vars = serde_json::json!({"target_user_id": user_id, "page_size": 12, "include_feed_video": true,
                                      "after": after});
        let answer = self.query("the reels", &self.settings.cfg.doc_profile_reels, vars, &referer).await?;
        parse::reels_page(&answer).inspect_err(|_| cova_metrics::platform_parse_error("instagram", "reels"))
    }
}

struct Reading {
    seen: HashSet<String>,
    max: u32,
    read: Read,
}

impl Reading {
    fn full(&self) -> bool {
        self.read.collected >= self.max
    }
}

/// The LSD token of a page: `["LSD",[],{"token":"…"}`.
fn lsd_token(html: &str) -> Option<String> {
    let at = html.find("\"LSD\",[],{\"token\":\"")? + "\"LSD\",[],{\"token\":\"".len();
    let end = html[at..].find('"')?;
    Some(html[at..at + end].to_owned()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_lsd_token_is_found_in_a_page() {
        let page = r#"<script>requireLazy(["LSD",[],{"token":"AVq3x"},323]);</script>"#;
        assert_eq!(super::lsd_token(page).as_deref(), Some("AVq3x"));
        assert_eq!(super::lsd_token("<html></html>"), None);
    }
}
