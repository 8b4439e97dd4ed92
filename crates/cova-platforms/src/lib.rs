//! cova's platform layer: turns post URLs into refs, fetches free post metadata and collects
//! comments with their replies from TikTok (web endpoints), YouTube Shorts (Data API v3) and
//! Instagram Reels (web endpoints, logged out or with configured sessions).
//!
//! Every platform host is configuration, so the same code talks to the real platforms in
//! production and to `cova-sim` in tests.

mod collect;
mod creators;
mod demand;
mod error;
mod http;
pub mod instagram;
mod json;
mod keywords;
mod model;
mod tiktok;
mod turns;
mod urls;
mod youtube;
mod youtube_channels;

pub use cova_config::platforms::{InstagramConfig, PlatformsConfig, TikTokConfig, YouTubeConfig};
pub use creators::{Creator, CreatorUrl, FoundPost, Listing, creator_ref, parse_creator_url};
pub use demand::Demand;
pub use error::PlatformError;
pub use keywords::description_keywords;
pub use model::{
    CollectOutcome, Comment, CommentAuthor, Cover, DescriptionKeywords, Hashtag, Media, Metadata, MetadataAuthor,
    Metrics, Sound, search_text,
};
pub use turns::{QueueStore, StoredQueue, Turns, UNSEEN_SHARERS};
pub use urls::{ParsedUrl, Platform, PostRef, ShortHost, ShortLink, parse_url};

use std::sync::Arc;

/// Receives collected comments page by page, so the caller can persist batches and report progress.
#[async_trait::async_trait]
pub trait CommentSink {
    /// A batch of flat comments: a parent always arrives before its replies (`parent_id` set).
    async fn page(&mut self, batch: Vec<Comment>) -> Result<(), PlatformError>;
}

/// A sink that keeps everything in memory, for small posts, tools and tests.
#[derive(Debug, Default)]
pub struct VecSink {
    pub comments: Vec<Comment>,
    pub pages: usize,
}

#[async_trait::async_trait]
impl CommentSink for VecSink {
    async fn page(&mut self, batch: Vec<Comment>) -> Result<(), PlatformError> {
        self.pages += 1;
        self.comments.extend(batch);
        Ok(())
    }
}

/// Nests flat comments (as handed to a sink) into top-level comments with their `replies`,
/// keeping the order of arrival; replies whose parent is absent are dropped.
pub fn nest(flat: Vec<Comment>) -> Vec<Comment> {
    let mut top: Vec<Comment> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut replies = Vec::new();
    for c in flat {
        if c.parent_id.is_none() {
            index.insert(c.id.clone(), top.len());
            top.push(c);
        } else {
            replies.push(c);
        }
    }
    for r in replies {
        if let Some(&i) = r.parent_id.as_ref().and_then(|p| index.get(p)) {
            top[i].replies.push(r);
        }
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(id: &str, parent: Option<&str>) -> Comment {
        Comment {
            id: id.into(),
            text: String::new(),
            author: CommentAuthor::default(),
            likes: 0,
            reply_count: 0,
            created_at: "2024-01-01T00:00:00Z".into(),
            language: None,
            pinned: false,
            liked_by_author: false,
            media: Vec::new(),
            parent_id: parent.map(str::to_string),
            replies: Vec::new(),
            raw: None,
        }
    }

    #[test]
    fn nest_keeps_order_and_attaches_replies() {
        let flat = vec![
            comment("a", None),
            comment("b", None),
            comment("b1", Some("b")),
            comment("a1", Some("a")),
            comment("b2", Some("b")),
            comment("x1", Some("missing")),
        ];
        let nested = nest(flat);
        let shape: Vec<(String, Vec<String>)> =
            nested.iter().map(|c| (c.id.clone(), c.replies.iter().map(|r| r.id.clone()).collect())).collect();
        assert_eq!(shape, vec![("a".into(), vec!["a1".into()]), ("b".into(), vec!["b1".into(), "b2".into()])]);
    }

    #[test]
    fn comment_serialises_snake_case_without_raw() {
        let json = serde_json::to_value(comment("a", None)).expect("serialise");
        assert!(json.get("raw").is_none());
        assert!(json.get("liked_by_author").is_some());
        let back: Comment = serde_json::from_value(json).expect("deserialise");
        assert_eq!(back, comment("a", None));
    }
}

/// The platform adapters; cheap to clone.
#[derive(Clone)]
pub struct Platforms {
    inner: Arc<Inner>,
}

struct Inner {
    tiktok: Arc<tiktok::TikTok>,
    youtube: Arc<youtube::YouTube>,
    instagram: Arc<instagram::Instagram>,
}

impl std::fmt::Debug for Platforms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Platforms").finish_non_exhaustive()
    }
}

impl Platforms {
    /// Builds the clients, each process pacing itself; fails only on invalid configuration
    /// (bad base URLs or proxies).
    pub fn new(cfg: &PlatformsConfig) -> Result<Self, PlatformError> {
        Self::paced(cfg, None)
    }

    /// As [`Platforms::new`], with the queue of every host and route kept in `queues` for every
    /// process that shares it: one pace, one order of turns for all of them.
    pub fn paced(cfg: &PlatformsConfig, queues: Option<Arc<dyn QueueStore>>) -> Result<Self, PlatformError> {
        let turns = Arc::new(turns::Turns::new(queues));
        Ok(Self {
            inner: Arc::new(Inner {
                tiktok: Arc::new(tiktok::TikTok::new(&cfg.tiktok, cfg.keep_raw, turns.clone())?),
                youtube: Arc::new(youtube::YouTube::new(&cfg.youtube, cfg.keep_raw, turns.clone())?),
                instagram: Arc::new(instagram::Instagram::new(&cfg.instagram, cfg.keep_raw, turns)?),
            }),
        })
    }

    /// Parses and normalises every URL form; TikTok short links are resolved over HTTP
    /// (bounded hops, platform hosts only).
    pub async fn resolve(&self, url: &str) -> Result<PostRef, PlatformError> {
        match parse_url(url)? {
            ParsedUrl::Post(post) => Ok(post),
            ParsedUrl::ShortLink(link) => self.resolve_short_link(&link).await,
        }
    }

    /// Follows a short link (TikTok) or share link (Instagram) to the post it names (bounded
    /// hops, platform hosts only).
    pub async fn resolve_short_link(&self, link: &ShortLink) -> Result<PostRef, PlatformError> {
        match link.host {
            ShortHost::InstagramShare => self.inner.instagram.resolve_share(&link.path()).await,
            _ => self.inner.tiktok.resolve_short(link).await,
        }
    }

    /// The creator a TikTok account, YouTube channel or Instagram account URL names, as its
    /// profile shows it now.
    pub async fn creator(&self, url: &str) -> Result<Creator, PlatformError> {
        match parse_creator_url(url)? {
            CreatorUrl::TikTok { handle } => self.inner.tiktok.creator(&handle).await,
            CreatorUrl::Instagram { username } => self.inner.instagram.creator(&username).await,
            other => self.inner.youtube.creator(&other).await,
        }
    }

    /// The creator's posts newer than the first known one (see [`Listing`]), newest first.
    pub async fn creator_posts(
        &self,
        creator: &Creator,
        listing: &Listing<'_>,
    ) -> Result<Vec<FoundPost>, PlatformError> {
        match creator.platform {
            Platform::TikTok => self.inner.tiktok.creator_posts(creator, listing).await,
            Platform::YouTube => self.inner.youtube.creator_posts(creator, listing).await,
            Platform::Instagram => self.inner.instagram.creator_posts(creator, listing).await,
        }
    }

    pub async fn metadata(&self, post: &PostRef) -> Result<Metadata, PlatformError> {
        match post.platform {
            Platform::TikTok => self.inner.tiktok.metadata(post).await,
            Platform::YouTube => self.inner.youtube.metadata(post).await,
            Platform::Instagram => self.inner.instagram.metadata(post).await,
        }
    }

    /// Collects top-level comments with their complete replies, never more than `max` comments in
    /// total (top-level and replies count one each). Pages go to `sink` as they arrive: top-level
    /// comments in platform order, each reply after its parent. Comments are deduplicated by id.
    pub async fn collect_comments(
        &self,
        post: &PostRef,
        max: u32,
        sink: &mut (dyn CommentSink + Send),
    ) -> Result<CollectOutcome, PlatformError> {
        let (source, parallelism): (Arc<dyn collect::CommentSource>, usize) = match post.platform {
            Platform::TikTok => (
                Arc::new(tiktok::TikTokComments::new(self.inner.tiktok.clone(), post, max)),
                self.inner.tiktok.reply_parallelism,
            ),
            Platform::YouTube => (
                Arc::new(youtube::YouTubeComments::new(self.inner.youtube.clone(), post)),
                self.inner.youtube.reply_parallelism,
            ),
            // Instagram is read one request at a time on its pace: its own reader.
            Platform::Instagram => return self.inner.instagram.collect(post, max, sink).await,
        };
        collect::collect(source, max, parallelism, sink).await
    }
}
