//! YouTube Shorts through the official Data API v3.

use crate::YouTubeConfig;
use crate::collect::{CommentSource, ReplyJob, ReplyPage, TopPage};
use crate::http::{Attempt, Http, HttpSettings, Request, json_body};
use crate::json::{str_of, u32_of, u64_of};
use crate::keywords::description_keywords;
use crate::model::{Comment, CommentAuthor, Cover, Hashtag, Metadata, MetadataAuthor, Metrics};
use crate::{PlatformError, PostRef};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use url::Url;

pub(crate) struct YouTube {
    http: Http,
    base: Url,
    key: Option<SecretString>,
    page_size: u32,
    keep_raw: bool,
    pub reply_parallelism: usize,
}

impl YouTube {
    pub fn new(
        cfg: &YouTubeConfig,
        keep_raw: bool,
        turns: std::sync::Arc<crate::turns::Turns>,
    ) -> Result<Self, PlatformError> {
        let base = Url::parse(&cfg.api_base_url).map_err(|e| {
            PlatformError::Unavailable(format!(
                "platforms config: youtube.api_base_url `{}` is not a URL: {e}",
                cfg.api_base_url
            ))
        })?;
        let http = Http::new(HttpSettings {
            platform: "youtube",
            user_agent: "cova/1 (YouTube Data API client)".into(),
            cookies: BTreeMap::new(),
            proxies: Vec::new(),
            proxy_rest: Duration::ZERO,
            signer_url: None,
            max_concurrency_per_host: cfg.max_concurrency,
            requests_per_second: cfg.requests_per_second,
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            read_timeout: Duration::from_millis(cfg.read_timeout_ms),
            max_retries: cfg.max_retries,
            retry_base: Duration::from_millis(cfg.retry_base_ms),
            retry_max: Duration::from_millis(cfg.retry_max_ms),
            turns,
            route_suffix: String::new(),
        })?;
        Ok(Self {
            http,
            base,
            key: cfg.api_key.clone().filter(|k| !k.expose_secret().is_empty()),
            page_size: cfg.page_size.clamp(1, 100),
            keep_raw,
            reply_parallelism: cfg.reply_parallelism.max(1),
        })
    }

    /// Calls one API method; the key never appears in errors or logs.
    pub(crate) async fn call(&self, method: &str, params: &[(&str, &str)]) -> Result<Value, PlatformError> {
        let key = self.key.as_ref().ok_or_else(|| {
            PlatformError::Unavailable("the YouTube API key is not configured (platforms.youtube.api_key)".into())
        })?;
        let mut url = self.base.clone();
        let prefix = self.base.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{prefix}/youtube/v3/{method}"));
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in params {
                q.append_pair(k, v);
            }
            q.append_pair("key", key.expose_secret());
        }
        let what = format!("YouTube {method}.list");
        let mut retry = self.http.retry(&what);
        loop {
            let attempt = match self.http.send(&Request::get(url.clone())).await {
                Attempt::Done(resp) => match json_body(&resp, &what) {
                    Ok(body) if resp.status.is_success() => Attempt::Done(body),
                    Ok(body) => classify_error(resp.status.as_u16(), &body),
                    Err(retry) => retry,
                },
                other => other.map_never(),
            };
            if let Some(r) = retry.next(attempt).await {
                return r;
            }
        }
    }

    pub async fn metadata(&self, post: &PostRef) -> Result<Metadata, PlatformError> {
        let v = self.call("videos", &[("part", "snippet,statistics,contentDetails"), ("id", &post.id)]).await?;
        let item = v
            .get("items")
            .and_then(Value::as_array)
            .and_then(|items| items.first())
            .ok_or_else(|| PlatformError::Parse(format!("the YouTube video {} was not found", post.id)))?;
        Ok(video_metadata(&post.id, item))
    }
}

/// Maps an API error body to a final failure or a retry.
fn classify_error<T>(status: u16, body: &Value) -> Attempt<T> {
    let reason = body.pointer("/error/errors/0/reason").and_then(Value::as_str).unwrap_or_default();
    let message = body.pointer("/error/message").and_then(Value::as_str).unwrap_or_default();
    match reason {
        "commentsDisabled" => Attempt::Fail(PlatformError::Parse(String::from(COMMENTS_DISABLED))),
        "videoNotFound" => Attempt::Fail(PlatformError::Parse("the YouTube video was not found".into())),
        "playlistNotFound" => Attempt::Fail(PlatformError::Missing("the YouTube playlist was not found".into())),
        "quotaExceeded" | "dailyLimitExceeded" => Attempt::Fail(PlatformError::Unavailable(
            "the YouTube API quota of the day is spent; retry after the daily reset (midnight Pacific time)".into(),
        )),
        "rateLimitExceeded" | "userRateLimitExceeded" | "backendError" => {
            Attempt::Retry { blocked: false, detail: format!("YouTube {reason}") }
        }
        "keyInvalid" | "keyExpired" | "accessNotConfigured" => {
            Attempt::Fail(PlatformError::Unavailable(format!("the configured YouTube API key was refused ({reason})")))
        }
        "forbidden" => Attempt::Fail(PlatformError::Parse(
            "YouTube refused access to the video or its comments (forbidden)".into(),
        )),
        _ => Attempt::Fail(PlatformError::Parse(format!(
            "YouTube answered HTTP {status}{}{}",
            if reason.is_empty() { "" } else { " " },
            if reason.is_empty() { message.to_string() } else { format!("({reason}): {message}") }
        ))),
    }
}

/// Marker detail: comments disabled is a post without comments, not a failure.
const COMMENTS_DISABLED: &str = "comments are disabled for this YouTube video";

fn is_comments_disabled(e: &PlatformError) -> bool {
    matches!(e, PlatformError::Parse(d) if d == COMMENTS_DISABLED)
}

pub(crate) fn video_metadata(id: &str, item: &Value) -> Metadata {
    let sn = item.get("snippet").cloned().unwrap_or(Value::Null);
    let st = item.get("statistics").cloned().unwrap_or(Value::Null);
    let description = sn.get("description").and_then(Value::as_str).unwrap_or_default().to_string();
    let keywords = description_keywords(&description);
    let mut hashtags: Vec<Hashtag> = Vec::new();
    let tags = sn.get("tags").and_then(Value::as_array).into_iter().flatten().filter_map(str_of);
    for name in keywords.hashtags.iter().cloned().chain(tags) {
        if !hashtags.iter().any(|h| h.name.eq_ignore_ascii_case(&name)) {
            hashtags.push(Hashtag { name, id: None });
        }
    }
    let mut cover = Cover::default();
    let mut best = 0u64;
    for size in ["default", "medium", "high", "standard", "maxres"] {
        let Some(t) = sn.pointer(&format!("/thumbnails/{size}")) else {
            continue;
        };
        let Some(url) = t.get("url").and_then(str_of) else {
            continue;
        };
        let (w, h) = (t.get("width").and_then(u32_of), t.get("height").and_then(u32_of));
        let area = u64::from(w.unwrap_or(0)) * u64::from(h.unwrap_or(0));
        if cover.url.is_none() || area >= best {
            best = area;
            cover.url = Some(url.clone());
            cover.width = w;
            cover.height = h;
        }
        cover.urls.push(url);
    }
    Metadata {
        post_ref: format!("youtube:{id}"),
        platform: "youtube".into(),
        url: format!("https://www.youtube.com/shorts/{id}"),
        title: sn.get("title").and_then(str_of),
        description,
        created_at: sn.get("publishedAt").and_then(str_of),
        duration_s: item.pointer("/contentDetails/duration").and_then(Value::as_str).and_then(iso8601_duration),
        kind: "video".into(),
        // videos.list does not say; reading the comments does (`commentsDisabled`).
        comments_off: None,
        language: sn.get("defaultAudioLanguage").or_else(|| sn.get("defaultLanguage")).and_then(str_of),
        author: MetadataAuthor {
            id: sn.get("channelId").and_then(str_of),
            name: sn.get("channelTitle").and_then(str_of),
            ..Default::default()
        },
        metrics: Metrics {
            views: st.get("viewCount").and_then(u64_of),
            likes: st.get("likeCount").and_then(u64_of),
            comments: st.get("commentCount").and_then(u64_of),
            saves: st.get("favoriteCount").and_then(u64_of),
            shares: None,
            reposts: None,
        },
        hashtags,
        sound: None,
        cover,
        description_keywords: keywords,
        media: Vec::new(),
    }
}

/// `PT1M5S` → 65.0; `P1DT2H` style values are supported too.
pub(crate) fn iso8601_duration(s: &str) -> Option<f64> {
    let rest = s.strip_prefix('P')?;
    let (date, time) = rest.split_once('T').unwrap_or((rest, ""));
    let mut total = 0f64;
    let mut take = |part: &str, units: &[(char, f64)]| -> Option<()> {
        let mut num = String::new();
        for ch in part.chars() {
            if ch.is_ascii_digit() || ch == '.' {
                num.push(ch);
            } else {
                let mult = units.iter().find(|(u, _)| *u == ch)?.1;
                total += num.parse::<f64>().ok()? * mult;
                num.clear();
            }
        }
        num.is_empty().then_some(())
    };
    take(date, &[('W', 604_800.0), ('D', 86_400.0)])?;
    take(time, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?;
    Some(total)
}

fn comment(v: &Value, parent_id: Option<&str>, reply_count: u64, keep_raw: bool) -> Option<Comment> {
    let id = v.get("id").and_then(str_of)?;
    let sn = v.get("snippet")?;
    let display = sn.get("authorDisplayName").and_then(str_of);
    Some(Comment {
        id,
        text: sn
            .get("textOriginal")
            .or_else(|| sn.get("textDisplay"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        author: CommentAuthor {
            id: sn.pointer("/authorChannelId/value").and_then(str_of).unwrap_or_default(),
            handle: display.as_deref().and_then(|d| d.strip_prefix('@')).map(str::to_string),
            name: display,
            avatar_url: sn.get("authorProfileImageUrl").and_then(str_of),
            avatar: None,
        },
        likes: sn.get("likeCount").and_then(u64_of).unwrap_or(0),
        reply_count,
        created_at: sn.get("publishedAt").and_then(str_of).unwrap_or_default(),
        language: None,
        pinned: false,
        liked_by_author: false,
        media: Vec::new(),
        parent_id: parent_id.map(str::to_string).or_else(|| sn.get("parentId").and_then(str_of)),
        replies: Vec::new(),
        raw: keep_raw.then(|| v.clone()),
    })
}

pub(crate) struct YouTubeComments {
    yt: Arc<YouTube>,
    video_id: String,
    /// `None` before the first page; `Some(None)` once exhausted.
    next: Mutex<Option<Option<String>>>,
    /// YouTube answered `commentsDisabled`.
    off: std::sync::atomic::AtomicBool,
    /// YouTube handed back the page token it was asked with: it offered a next page it never gave.
    stuck: std::sync::atomic::AtomicBool,
}

impl YouTubeComments {
    pub fn new(yt: Arc<YouTube>, post: &PostRef) -> Self {
        Self {
            yt,
            video_id: post.id.clone(),
            next: Mutex::new(None),
            off: Default::default(),
            stuck: Default::default(),
        }
    }
}

#[async_trait::async_trait]
impl CommentSource for YouTubeComments {
    async fn next_page(&self) -> Result<Option<TopPage>, PlatformError> {
        let token = match self.next.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            Some(None) => return Ok(None),
            Some(Some(t)) => Some(t),
            None => None,
        };
        let size = self.yt.page_size.to_string();
        let mut params = vec![
            ("part", "snippet,replies"),
            ("videoId", self.video_id.as_str()),
            ("maxResults", size.as_str()),
            ("textFormat", "plainText"),
            ("order", "time"),
        ];
        if let Some(t) = token.as_deref() {
            params.push(("pageToken", t));
        }
        let v = match self.yt.call("commentThreads", &params).await {
            Ok(v) => v,
            Err(e) if is_comments_disabled(&e) => {
                // A post whose comments are off has none to collect, and says so.
                self.off.store(true, std::sync::atomic::Ordering::Relaxed);
                *self.next.lock().unwrap_or_else(PoisonError::into_inner) = Some(None);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let page = thread_page(&v, self.yt.keep_raw);
        let offered = v.get("nextPageToken").and_then(str_of);
        if offered.is_some() && offered == token {
            self.stuck.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let next = offered.filter(|t| Some(t) != token.as_ref());
        let done = next.is_none();
        *self.next.lock().unwrap_or_else(PoisonError::into_inner) = Some(next);
        Ok(Some(TopPage { comments: page.0, reply_jobs: page.1, done }))
    }

    async fn reply_page(&self, parent_id: &str, cursor: Option<String>) -> Result<ReplyPage, PlatformError> {
        let size = self.yt.page_size.to_string();
        let mut params = vec![
            ("part", "snippet"),
            ("parentId", parent_id),
            ("maxResults", size.as_str()),
            ("textFormat", "plainText"),
        ];
        if let Some(t) = cursor.as_deref() {
            params.push(("pageToken", t));
        }
        let v = self.yt.call("comments", &params).await?;
        let comments = v
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| comment(c, Some(parent_id), 0, self.yt.keep_raw))
            .collect();
        let next = v.get("nextPageToken").and_then(str_of).filter(|t| Some(t) != cursor.as_ref());
        Ok(ReplyPage { comments, next })
    }

    fn reported_total(&self) -> Option<u64> {
        None
    }

    fn comments_off(&self) -> bool {
        self.off.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn cut_short(&self) -> bool {
        self.stuck.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Top-level comments of a commentThreads page and the reply work they imply: embedded replies
/// are used when complete, otherwise the thread's replies are listed with comments.list.
fn thread_page(v: &Value, keep_raw: bool) -> (Vec<Comment>, Vec<ReplyJob>) {
    let mut comments = Vec::new();
    let mut jobs = Vec::new();
    for thread in v.get("items").and_then(Value::as_array).into_iter().flatten() {
        let total = thread.pointer("/snippet/totalReplyCount").and_then(u64_of).unwrap_or(0);
        let Some(top) = thread.pointer("/snippet/topLevelComment").and_then(|t| comment(t, None, total, keep_raw))
        else {
            continue;
        };
        if total > 0 {
            let embedded: Vec<Comment> = thread
                .pointer("/replies/comments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| comment(c, Some(&top.id), 0, keep_raw))
                .collect();
            let complete = embedded.len() as u64 >= total;
            jobs.push(ReplyJob { parent_id: top.id.clone(), inline: complete.then_some(embedded) });
        }
        comments.push(top);
    }
    (comments, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(text: &str) -> Value {
        serde_json::from_str(text).expect("fixture is JSON")
    }

    #[test]
    fn video_metadata_from_fixture() {
        let v = fixture(include_str!("../tests/fixtures/youtube_videos.json"));
        let m = video_metadata("BGQWPY4IigY", &v["items"][0]);
        assert_eq!(m.post_ref, "youtube:BGQWPY4IigY");
        assert_eq!(m.title.as_deref(), Some("Where to buy this? #shorts #gadget"));
        assert_eq!(m.metrics.views, Some(1_234_567));
        assert_eq!(m.metrics.likes, Some(45_678));
        assert_eq!(m.metrics.comments, Some(321));
        assert_eq!(m.duration_s, Some(59.0));
        assert_eq!(m.cover.url.as_deref(), Some("https://i.ytimg.com/vi/BGQWPY4IigY/maxresdefault.jpg"));
        assert_eq!(m.cover.urls.len(), 4);
        assert_eq!(m.cover.width, Some(1280));
        assert_eq!(m.author.name.as_deref(), Some("Gadget Lab"));
        let tags: Vec<&str> = m.hashtags.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(tags, vec!["gadget", "review", "tech"]);
        assert_eq!(m.created_at.as_deref(), Some("2024-03-01T10:00:00Z"));
    }

    #[test]
    fn threads_with_partial_and_complete_replies() {
        let v = fixture(include_str!("../tests/fixtures/youtube_comment_threads.json"));
        let (comments, jobs) = thread_page(&v, false);
        assert_eq!(comments.len(), 3);
        assert_eq!(comments[0].author.handle.as_deref(), Some("techfan"));
        assert_eq!(comments[0].author.id, "UCfan000000000000000001");
        assert_eq!(comments[0].reply_count, 7);
        assert_eq!(jobs.len(), 2);
        // Thread 1 embeds 2 of 7 replies: listed separately.
        assert_eq!(jobs[0].parent_id, comments[0].id);
        assert!(jobs[0].inline.is_none());
        // Thread 2 embeds its only reply: complete.
        let inline = jobs[1].inline.as_ref().expect("complete replies");
        assert_eq!(inline.len(), 1);
        assert_eq!(inline[0].parent_id.as_deref(), Some(comments[1].id.as_str()));
    }

    #[test]
    fn error_reasons() {
        let code = |file: &str, status: u16| match classify_error::<()>(status, &fixture(file)) {
            Attempt::Fail(e) => e.code().to_string() + ":" + e.detail(),
            Attempt::Retry { .. } => "retry".into(),
            Attempt::Done(()) => "done".into(),
        };
        assert_eq!(
            code(include_str!("../tests/fixtures/youtube_error_comments_disabled.json"), 403),
            format!("parse_error:{COMMENTS_DISABLED}")
        );
        assert!(
            code(include_str!("../tests/fixtures/youtube_error_video_not_found.json"), 404).starts_with("parse_error:")
        );
        assert!(
            code(include_str!("../tests/fixtures/youtube_error_quota_exceeded.json"), 403).starts_with("unavailable:")
        );
        assert!(code(include_str!("../tests/fixtures/youtube_error_forbidden.json"), 403).starts_with("parse_error:"));
        assert!(
            code(include_str!("../tests/fixtures/youtube_error_key_invalid.json"), 400).starts_with("unavailable:")
        );
        assert_eq!(code(r#"{"error":{"code":403,"errors":[{"reason":"rateLimitExceeded"}]}}"#, 403), "retry");
    }

    #[test]
    fn durations() {
        assert_eq!(iso8601_duration("PT59S"), Some(59.0));
        assert_eq!(iso8601_duration("PT1M5S"), Some(65.0));
        assert_eq!(iso8601_duration("P1DT1H"), Some(90_000.0));
        assert_eq!(iso8601_duration("1M"), None);
        assert_eq!(iso8601_duration("PT5X"), None);
    }
}
