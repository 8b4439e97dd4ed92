//! Reads an Instagram post and its comments over HTTP the way Instagram's web page does: the
//! post's page for the LSD token and the CSRF cookie, then the GraphQL endpoint (the
//! logged-out post query, the comment and reply connections). Without a session Instagram
//! shows a visitor only part of a post's comments: the reader collects what it can see and
//! says how much that is against the post's count.

use super::parse::{self, Page, Post, Wall};
use super::shortcode;
use crate::PlatformError;
use crate::http::{Attempt, Http, HttpSettings, Request};
use crate::model::Comment;
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;
use url::Url;

/// What the reader is configured with (the query ids and app id change when Instagram
/// changes its web app, so none is built in).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `https://www.instagram.com`, or the simulator's `/ig` base.
    pub base_url: String,
    pub app_id: String,
    pub doc_post_logged_out: String,
    pub doc_comments: String,
    pub doc_replies: String,
    /// Requests per second per route; 0 disables the pace.
    pub requests_per_second: f64,
    pub max_retries: u32,
    pub retry_base_ms: u64,
}

/// The comments the reader could see, and how many the post says it has.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    /// Top-level comments in Instagram's order, each followed by its replies (`parent_id` set).
    pub comments: Vec<Comment>,
    /// The post's own count (comments and replies), when it gave one.
    pub reported: Option<u64>,
    /// True when the post has comments the reader was not shown (a visitor's view).
    pub partial: bool,
}

pub struct Reader {
    http: Http,
    base: Url,
    settings: Settings,
    /// The LSD token of the last page read; GraphQL requests carry it.
    lsd: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The error a wall stands for; a rate limit and a broken endpoint are tried again.
fn wall_error<T>(wall: Wall) -> Attempt<T> {
    match wall {
        Wall::Login => Attempt::Fail(PlatformError::AudienceRestricted(
            "Instagram shows this post only to logged-in viewers".into(),
        )),
        Wall::Checkpoint => {
            tracing::warn!("Instagram is checking cova's requests (a checkpoint or challenge)");
            Attempt::Fail(PlatformError::Unavailable("Instagram is checking cova's requests; try again later".into()))
        }
        Wall::RateLimited => Attempt::Retry { blocked: false, detail: "Instagram: please wait a few minutes".into() },
        Wall::Broken => Attempt::Retry { blocked: false, detail: "Instagram: something went wrong".into() },
    }
}

impl Reader {
    pub fn new(settings: Settings) -> Result<Self, PlatformError> {
        let base = Url::parse(settings.base_url.trim_end_matches('/')).map_err(|e| {
            PlatformError::Unavailable(format!("platforms config: instagram base URL is not a URL: {e}"))
        })?;
        let http = Http::new(HttpSettings {
            user_agent:
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
                    .into(),
            cookies: BTreeMap::new(),
            proxies: Vec::new(),
            proxy_rest: Duration::ZERO,
            signer_url: None,
            max_concurrency_per_host: 2,
            requests_per_second: settings.requests_per_second,
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(15),
            max_retries: settings.max_retries,
            retry_base: Duration::from_millis(settings.retry_base_ms),
            retry_max: Duration::from_secs(30),
            pace: None,
        })?;
        Ok(Self { http, base, settings, lsd: Mutex::new(None) })
    }

    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        let joined = format!("{}{path}", url.path().trim_end_matches('/'));
        url.set_path(&joined);
        url
    }

    /// The post's page: the LSD token and the CSRF cookie, or the wall it is.
    async fn open_page(&self, code: &str) -> Result<(), PlatformError> {
        let what = "Instagram post page";
        let url = self.url(&format!("/reel/{code}/"));
        let mut retry = self.http.retry(what);
        loop {
            let attempt = match self.http.send(&Request::get(url.clone())).await {
                Attempt::Done(resp) => {
                    let body = String::from_utf8_lossy(&resp.body);
                    if let Some(wall) = parse::wall(resp.status.as_u16(), &body, resp.location()) {
                        wall_error(wall)
                    } else if resp.status.as_u16() == 404 {
                        Attempt::Fail(PlatformError::Parse("the post was deleted, or the link is wrong".into()))
                    } else if !resp.status.is_success() {
                        Attempt::Fail(PlatformError::Parse(format!(
                            "Instagram did not show the post (HTTP {})",
                            resp.status.as_u16()
                        )))
                    } else {
                        for cookie in resp.headers.get_all(reqwest::header::SET_COOKIE) {
                            if let Some((name, value)) =
                                cookie.to_str().ok().and_then(|c| c.split(';').next()?.split_once('='))
                                && name.trim() == "csrftoken"
                            {
                                self.http.set_cookie("csrftoken", value.trim());
                            }
                        }
                        match lsd_token(&body) {
                            Some(token) => {
                                *lock(&self.lsd) = Some(token);
                                Attempt::Done(())
                            }
                            None => {
                                cova_metrics::platform_parse_error("instagram", "page");
                                Attempt::Fail(PlatformError::Parse(
                                    "Instagram answered the post in a shape cova does not know; try again later".into(),
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
            req.headers.push((reqwest::header::HeaderName::from_static("x-ig-app-id"), self.settings.app_id.clone()));
            req.headers.push((reqwest::header::HeaderName::from_static("x-fb-lsd"), lsd.clone()));
            req.headers.push((reqwest::header::REFERER, referer.to_owned()));
            let attempt = match self.http.send(&req).await {
                Attempt::Done(resp) => {
                    let text = String::from_utf8_lossy(&resp.body);
                    match parse::wall(resp.status.as_u16(), &text, resp.location()) {
                        Some(wall) => wall_error(wall),
                        None => match serde_json::from_slice::<serde_json::Value>(&resp.body) {
                            Ok(v) if resp.status.is_success() => Attempt::Done(v),
                            _ => {
                                cova_metrics::platform_parse_error("instagram", "graphql");
                                Attempt::Fail(PlatformError::Parse(format!(
                                    "Instagram answered {what} in a shape cova does not know; try again later"
                                )))
                            }
                        },
                    }
                }
                other => other.map_never(),
            };
            if let Some(done) = retry.next(attempt).await {
                return done;
            }
        }
    }

    /// The post of a shortcode (logged out), or why it cannot be read.
    pub async fn post(&self, code: &str) -> Result<Post, PlatformError> {
        let pk = shortcode::to_pk(code)
            .ok_or_else(|| PlatformError::InvalidUrl(format!("`{code}` is not an Instagram post code")))?;
        self.open_page(code).await?;
        let referer = self.url(&format!("/reel/{code}/")).to_string();
        let answer = self
            .query(
                "the post",
                &self.settings.doc_post_logged_out,
                serde_json::json!({"media_id": pk.to_string()}),
                &referer,
            )
            .await?;
        let post =
            parse::logged_out_post(&answer).inspect_err(|_| cova_metrics::platform_parse_error("instagram", "post"))?;
        post.ok_or_else(|| {
            PlatformError::AudienceRestricted(
                "the post is private, age-restricted or shown to logged-in viewers only".into(),
            )
        })
    }

    /// Every comment the reader can see, at most `max` (replies included), deduplicated by id
    /// (Instagram repeats comments across pages).
    pub async fn comments(&self, post: &Post, max: usize) -> Result<Collected, PlatformError> {
        let referer = self.url(&format!("/reel/{}/", post.shortcode)).to_string();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        if post.comments_disabled {
            return Ok(Collected { comments: out, reported: post.comments, partial: false });
        }
        let mut after: Option<String> = None;
        'pages: loop {
            let vars = serde_json::json!({"media_id": post.pk, "first": 50, "after": after, "sort_order": "popular"});
            let answer = self.query("the comments", &self.settings.doc_comments, vars, &referer).await?;
            let Page { comments, next } = parse::connection(&answer, None)
                .inspect_err(|_| cova_metrics::platform_parse_error("instagram", "comments"))?;
            for top in comments {
                if out.len() >= max {
                    break 'pages;
                }
                if !seen.insert(top.id.clone()) {
                    continue;
                }
                let (pk, replies) = (top.id.clone(), top.reply_count);
                out.push(top);
                if replies > 0 {
                    self.replies(&pk, post, &referer, max, &mut seen, &mut out).await?;
                }
            }
            match next {
                Some(n) if Some(&n) != after.as_ref() => after = Some(n),
                _ => break,
            }
        }
        let partial = post.comments.is_some_and(|n| (out.len() as u64) < n) && out.len() < max;
        Ok(Collected { comments: out, reported: post.comments, partial })
    }

    async fn replies(
        &self,
        parent: &str,
        post: &Post,
        referer: &str,
        max: usize,
        seen: &mut HashSet<String>,
        out: &mut Vec<Comment>,
    ) -> Result<(), PlatformError> {
        let mut after: Option<String> = None;
        loop {
            let vars =
                serde_json::json!({"media_id": post.pk, "parent_comment_id": parent, "first": 50, "after": after});
            let answer = self.query("the replies", &self.settings.doc_replies, vars, referer).await?;
            let Page { comments, next } = parse::connection(&answer, Some(parent))
                .inspect_err(|_| cova_metrics::platform_parse_error("instagram", "replies"))?;
            for reply in comments {
                if out.len() >= max {
                    return Ok(());
                }
                if seen.insert(reply.id.clone()) {
                    out.push(reply);
                }
            }
            match next {
                Some(n) if Some(&n) != after.as_ref() => after = Some(n),
                _ => return Ok(()),
            }
        }
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
