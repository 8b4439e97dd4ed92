//! Instagram Reels: URL forms and shortcodes, the reading of Instagram's answers and walls,
//! and the adapter that reads posts, comments and creators over its egress lanes.
//!
//! A lane is one egress route (a proxy, or the direct route) with an optional logged-in
//! session. A lane reads with its session while the session is in good standing: the REST
//! comment pages show every comment and reply. A session that meets a checkpoint is set aside
//! for `session_rest_ms` and its lane reads logged out meanwhile, as a lane without a session
//! always does: Instagram then shows a visitor only part of a post's comments, and the adapter
//! says so (`CollectOutcome::partial`).

pub mod parse;
pub(crate) mod reader;
pub mod shortcode;
pub mod urls;

use crate::creators::{Creator, FoundPost, Listing, Walk};
use crate::keywords::description_keywords;
use crate::model::{CollectOutcome, Comment, Cover, Hashtag, Metadata, MetadataAuthor, Metrics, rfc3339_from_unix};
use crate::turns::Turns;
use crate::urls::{Platform, PostRef};
use crate::{CommentSink, PlatformError};
use cova_config::platforms::InstagramConfig;
use parse::Post;
use reader::{Reader, SESSION_CHECKPOINT, Settings};
use secrecy::ExposeSecret;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use url::Url;

/// How long a post read for its metadata is reused by the collection that follows it.
const POST_REUSE: Duration = Duration::from_secs(60);

struct Session {
    reader: Reader,
    /// Set aside after a checkpoint until then.
    resting_until: Mutex<Option<Instant>>,
}

struct Lane {
    visitor: Reader,
    session: Option<Session>,
}

pub(crate) struct Instagram {
    lanes: Vec<Lane>,
    next: AtomicUsize,
    session_rest: Duration,
    max_redirects: u32,
    /// Posts lately read, by shortcode: the scraper reads a post's metadata, then its comments.
    recent: Mutex<HashMap<String, (Instant, Post)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn is_checkpoint(e: &PlatformError) -> bool {
    matches!(e, PlatformError::Unavailable(d) if d == SESSION_CHECKPOINT)
}

impl Instagram {
    pub fn new(cfg: &InstagramConfig, keep_raw: bool, turns: Arc<Turns>) -> Result<Self, PlatformError> {
        let base = Url::parse(cfg.web_base_url.trim_end_matches('/')).map_err(|e| {
            PlatformError::Unavailable(format!("platforms config: instagram web_base_url is not a URL: {e}"))
        })?;
        let settings = Settings { base, cfg: Arc::new(cfg.clone()), turns, keep_raw };
        let routes: Vec<Option<String>> =
            if cfg.proxies.is_empty() { vec![None] } else { cfg.proxies.iter().cloned().map(Some).collect() };
        let mut lanes = Vec::with_capacity(routes.len());
        for (i, proxy) in routes.into_iter().enumerate() {
            let session = match cfg.sessions.get(i).map(|s| s.expose_secret().trim().to_owned()) {
                Some(id) if !id.is_empty() => Some(Session {
                    // The queue key names the session by position, never by its value.
                    reader: Reader::new(settings.clone(), proxy.clone(), Some((format!("+session-{}", i + 1), id)))?,
                    resting_until: Mutex::new(None),
                }),
                _ => None,
            };
            lanes.push(Lane { visitor: Reader::new(settings.clone(), proxy, None)?, session });
        }
        if cfg.sessions.len() > lanes.len() {
            tracing::warn!(
                sessions = cfg.sessions.len(),
                routes = lanes.len(),
                "more Instagram sessions than egress routes: the extra ones are not used"
            );
        }
        Ok(Self {
            lanes,
            next: AtomicUsize::new(0),
            session_rest: Duration::from_millis(cfg.session_rest_ms),
            max_redirects: cfg.max_redirects,
            recent: Mutex::new(HashMap::new()),
        })
    }

    fn lane(&self) -> &Lane {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.lanes.len().max(1);
        &self.lanes[i]
    }

    /// The session of a lane when it is in good standing.
    fn session<'a>(&self, lane: &'a Lane) -> Option<&'a Session> {
        lane.session.as_ref().filter(|s| lock(&s.resting_until).is_none_or(|until| until <= Instant::now()))
    }

    fn set_aside(&self, session: &Session) {
        tracing::warn!(
            rest_ms = self.session_rest.as_millis() as u64,
            "an Instagram session met a checkpoint: set aside, its route reads logged out meanwhile"
        );
        *lock(&session.resting_until) = Some(Instant::now() + self.session_rest);
    }

    async fn post(&self, lane: &Lane, code: &str) -> Result<Post, PlatformError> {
        if let Some((at, post)) = lock(&self.recent).get(code)
            && at.elapsed() < POST_REUSE
        {
            return Ok(post.clone());
        }
        let post = match lane.visitor.post(code).await {
            // Gated for a visitor (age-restricted, logged-in viewers only): a session in good
            // standing may be shown it.
            Err(PlatformError::AudienceRestricted(detail)) => match self.session(lane) {
                None => return Err(PlatformError::AudienceRestricted(detail)),
                Some(session) => match session.reader.session_post(code).await {
                    Ok(Some(post)) => post,
                    Ok(None) => return Err(PlatformError::AudienceRestricted(detail)),
                    Err(e) if is_checkpoint(&e) => {
                        self.set_aside(session);
                        return Err(PlatformError::AudienceRestricted(detail));
                    }
                    Err(e) => return Err(e),
                },
            },
            other => other?,
        };
        let mut recent = lock(&self.recent);
        recent.retain(|_, (at, _)| at.elapsed() < POST_REUSE);
        recent.insert(code.to_owned(), (Instant::now(), post.clone()));
        Ok(post)
    }

    pub async fn metadata(&self, post: &PostRef) -> Result<Metadata, PlatformError> {
        let read = self.post(self.lane(), &post.id).await?;
        Ok(metadata_of(post, &read))
    }

    /// Collects what the lane is shown: everything with a session in good standing, a
    /// visitor's part without one (`partial` when the post counts more than that).
    pub async fn collect(
        &self,
        post: &PostRef,
        max: u32,
        sink: &mut (dyn CommentSink + Send),
    ) -> Result<CollectOutcome, PlatformError> {
        let lane = self.lane();
        let read = self.post(lane, &post.id).await?;
        // Pages a set-aside session already handed over are read again logged out: each
        // comment still reaches the sink once.
        let mut once = Once { inner: sink, seen: HashSet::new(), max, capped: false };
        let mut logged_in = false;
        let mut got = None;
        if let Some(session) = self.session(lane) {
            match session.reader.comments(&read, max, &mut once).await {
                Ok(r) => {
                    logged_in = true;
                    got = Some(r);
                }
                Err(e) if is_checkpoint(&e) => self.set_aside(session),
                Err(e) => return Err(e),
            }
        }
        let got = match got {
            Some(r) => r,
            None => lane.visitor.comments(&read, max, &mut once).await?,
        };
        let collected = u32::try_from(once.seen.len()).unwrap_or(u32::MAX);
        let shown_all = read.comments.is_none_or(|n| u64::from(collected) >= n);
        let capped = got.capped || once.capped;
        Ok(CollectOutcome {
            collected,
            truncated: capped,
            reported_total: read.comments,
            partial: !logged_in && !capped && !read.comments_disabled && !shown_all,
            comments_off: read.comments_disabled,
            cut_short: got.cut_short && !capped,
        })
    }

    /// The post a `/share/…` link leads to.
    pub async fn resolve_share(&self, path: &str) -> Result<PostRef, PlatformError> {
        let code = self.lane().visitor.resolve_share(path, self.max_redirects).await?;
        Ok(PostRef { platform: Platform::Instagram, id: code })
    }

    /// The account of a username, keyed by its numeric id.
    pub async fn creator(&self, username: &str) -> Result<Creator, PlatformError> {
        let lane = self.lane();
        let profile = lane.visitor.profile(username).await?;
        let p = profile
            .ok_or_else(|| PlatformError::Missing(format!("the Instagram account {username} does not exist")))?;
        if p.private {
            return Err(PlatformError::AudienceRestricted(format!(
                "the Instagram account {username} is private: its reels are shown to its followers only"
            )));
        }
        Ok(Creator {
            platform: Platform::Instagram,
            id: p.id.clone(),
            listing: p.id,
            handle: Some(p.username),
            name: p.full_name,
            avatar_url: p.avatar_url,
            followers: p.followers,
            posts: p.posts,
            verified: Some(p.verified),
        })
    }

    /// The account's new reels, newest first; pinned reels never end the walk (see [`Walk`]).
    pub async fn creator_posts(
        &self,
        creator: &Creator,
        listing: &Listing<'_>,
    ) -> Result<Vec<FoundPost>, PlatformError> {
        let lane = self.lane();
        // The account may have been renamed: the id is what lists its reels; the name only
        // names the page the query is sent from.
        let name = creator.handle.clone().unwrap_or_else(|| creator.id.clone());
        let mut walk = Walk::default();
        let mut after: Option<String> = None;
        for _ in 0..listing.max_pages.max(1) {
            let page = lane.visitor.reels(&name, &creator.listing, after.as_deref()).await?;
            for reel in page.reels {
                let post = PostRef { platform: Platform::Instagram, id: reel.shortcode.clone() };
                walk.take(
                    listing,
                    FoundPost {
                        url: post.canonical_url(),
                        post,
                        title: reel.caption.map(|c| title_of(&c)),
                        published_at: reel.taken_at.map(|t| t * 1000),
                        pinned: reel.pinned,
                        metadata: None,
                    },
                );
            }
            match page.next {
                Some(next) if !walk.done => after = Some(next),
                _ => break,
            }
        }
        Ok(walk.found)
    }
}

/// Hands each comment on once, at most `max` of them.
struct Once<'a> {
    inner: &'a mut (dyn CommentSink + Send),
    seen: HashSet<String>,
    max: u32,
    capped: bool,
}

#[async_trait::async_trait]
impl CommentSink for Once<'_> {
    async fn page(&mut self, batch: Vec<Comment>) -> Result<(), PlatformError> {
        let mut fresh = Vec::with_capacity(batch.len());
        for c in batch {
            if self.seen.contains(&c.id) {
                continue;
            }
            if self.seen.len() >= self.max as usize {
                self.capped = true;
                break;
            }
            self.seen.insert(c.id.clone());
            fresh.push(c);
        }
        if fresh.is_empty() { Ok(()) } else { self.inner.page(fresh).await }
    }
}

/// A title from a caption: its first line, at most 100 characters.
fn title_of(caption: &str) -> String {
    let line = caption.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(100) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// cova's metadata of an Instagram post.
fn metadata_of(post: &PostRef, p: &Post) -> Metadata {
    let keywords = description_keywords(&p.caption);
    let hashtags = keywords.hashtags.iter().map(|name| Hashtag { name: name.clone(), id: None }).collect();
    Metadata {
        post_ref: post.to_string(),
        platform: Platform::Instagram.as_str().into(),
        url: post.canonical_url(),
        title: Some(title_of(&p.caption)).filter(|t| !t.is_empty()),
        description: p.caption.clone(),
        created_at: p.taken_at.map(rfc3339_from_unix),
        duration_s: None,
        kind: if p.is_video { "video" } else { "photo" }.into(),
        comments_off: Some(p.comments_disabled),
        language: None,
        author: MetadataAuthor {
            id: Some(p.owner.id.clone()),
            handle: p.owner.username.clone(),
            name: p.owner.full_name.clone(),
            avatar_url: p.owner.avatar_url.clone(),
            verified: Some(p.owner.verified),
            ..MetadataAuthor::default()
        },
        metrics: Metrics { views: p.plays, likes: p.likes, comments: p.comments, ..Metrics::default() },
        hashtags,
        sound: None,
        cover: Cover {
            url: p.display_url.clone(),
            urls: p.display_url.iter().cloned().collect(),
            width: None,
            height: None,
        },
        description_keywords: keywords,
        media: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_title_is_the_captions_first_line_cut_at_100_characters() {
        assert_eq!(super::title_of("Launch day 🚀\n#brand #new"), "Launch day 🚀");
        let long = "é".repeat(150);
        assert_eq!(super::title_of(&long).chars().count(), 101);
        assert_eq!(super::title_of(""), "");
    }
}
