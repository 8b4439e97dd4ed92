//! Normalised shapes shared by every platform.

use serde::{Deserialize, Serialize};

/// A comment or reply, the same shape for every platform.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Comment {
    pub id: String,
    pub text: String,
    pub author: CommentAuthor,
    pub likes: u64,
    pub reply_count: u64,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub language: Option<String>,
    pub pinned: bool,
    pub liked_by_author: bool,
    /// Images attached to the comment.
    pub media: Vec<Media>,
    /// `None` for a top-level comment, the parent's id for a reply.
    pub parent_id: Option<String>,
    /// Nested replies; always empty in the pages handed to a [`crate::CommentSink`].
    #[serde(default)]
    pub replies: Vec<Comment>,
    /// The platform's own JSON, kept only when `keep_raw` is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommentAuthor {
    pub id: String,
    pub handle: Option<String>,
    pub name: Option<String>,
    /// The platform's link (signed; it expires within hours).
    pub avatar_url: Option<String>,
    /// cova's copy of the avatar, once cova has listed it for an account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<Media>,
}

/// An image. As a platform adapter reads it, `url` is the platform's link; once cova has
/// listed it for an account, `url` is cova's own (`/api/v1/media/file?id=…`), `id` names it and
/// `source_url` keeps the platform's link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub url: String,
    /// `cover`, `avatar` or `image`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub width: Option<u32>,
    pub height: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
}

/// Free post metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(rename = "ref")]
    pub post_ref: String,
    pub platform: String,
    /// Canonical public URL of the post.
    pub url: String,
    pub title: Option<String>,
    pub description: String,
    pub created_at: Option<String>,
    pub duration_s: Option<f64>,
    /// `video` or `photo`.
    pub kind: String,
    /// The post's author turned its comments off, as its page says (`None`: the platform's
    /// page does not say; YouTube tells only when its comments are read).
    #[serde(default)]
    pub comments_off: Option<bool>,
    pub language: Option<String>,
    pub author: MetadataAuthor,
    pub metrics: Metrics,
    pub hashtags: Vec<Hashtag>,
    pub sound: Option<Sound>,
    pub cover: Cover,
    pub description_keywords: DescriptionKeywords,
    /// cova's copies of the cover and the author's avatar, once listed for an account.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<Media>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataAuthor {
    pub id: Option<String>,
    pub handle: Option<String>,
    pub name: Option<String>,
    pub avatar_url: Option<String>,
    pub verified: Option<bool>,
    pub followers: Option<u64>,
    pub following: Option<u64>,
    pub likes: Option<u64>,
    pub videos: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    pub views: Option<u64>,
    pub likes: Option<u64>,
    pub comments: Option<u64>,
    pub shares: Option<u64>,
    pub saves: Option<u64>,
    pub reposts: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hashtag {
    pub name: String,
    pub id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sound {
    pub id: Option<String>,
    pub title: Option<String>,
    pub author: Option<String>,
    pub original: Option<bool>,
    pub duration_s: Option<f64>,
    pub url: Option<String>,
    pub cover_url: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cover {
    pub url: Option<String>,
    /// Every cover URL the platform offered (they are signed and expire).
    pub urls: Vec<String>,
    pub width: Option<u32>,
    pub height: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescriptionKeywords {
    pub hashtags: Vec<String>,
    pub mentions: Vec<String>,
    /// Salient words, most frequent first.
    pub words: Vec<String>,
}

/// Totals of one comment collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectOutcome {
    /// Comments handed to the sink (top-level and replies).
    pub collected: u32,
    /// True when `max` stopped the collection while more comments existed.
    pub truncated: bool,
    /// The platform's own comment count, when it reports one.
    pub reported_total: Option<u64>,
    /// The platform showed cova only part of the post's comments (Instagram's visitor view):
    /// everything shown was collected, the rest could not be seen.
    #[serde(default)]
    pub partial: bool,
    /// The post's author turned its comments off: there was nothing to collect.
    #[serde(default)]
    pub comments_off: bool,
    /// The platform stopped handing out pages while it still said there were more (a cursor
    /// that did not move): what it handed out was collected.
    #[serde(default)]
    pub cut_short: bool,
}

/// Formats unix seconds as RFC 3339 UTC; out-of-range values fall back to the epoch.
pub(crate) fn rfc3339_from_unix(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or(chrono::DateTime::UNIX_EPOCH)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Text as it is searched: lower-cased (Unicode-aware), so a lower-cased query finds it.
pub fn search_text<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    parts.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ").to_lowercase()
}

impl Comment {
    /// What a search of the breakdown looks at: the text and the author.
    pub fn search_text(&self) -> String {
        let author = [self.author.handle.as_deref(), self.author.name.as_deref()];
        search_text(std::iter::once(self.text.as_str()).chain(author.into_iter().flatten()))
    }
}

impl Metadata {
    /// What a search of the library looks at: the title (or description) and the author.
    pub fn search_text(&self) -> String {
        let title = self.title.as_deref().unwrap_or(&self.description);
        let author = [self.author.handle.as_deref(), self.author.name.as_deref()];
        search_text(std::iter::once(title).chain(author.into_iter().flatten()))
    }
}
