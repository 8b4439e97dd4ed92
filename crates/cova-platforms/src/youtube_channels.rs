//! YouTube channels through the Data API: `channels.list` for the profile and the uploads
//! playlist, `playlistItems.list` pages newest first (1 quota unit each), Shorts only.

use crate::PlatformError;
use crate::creators::{Creator, CreatorUrl, FoundPost, Listing, Walk};
use crate::json::{first_url, str_of, u64_of};
use crate::urls::{Platform, PostRef, is_youtube_id};
use crate::youtube::{YouTube, iso8601_duration, video_metadata};
use serde_json::Value;

/// The longest a Short can be.
const SHORT_MAX_S: f64 = 180.0;

/// The channel of a `channels.list` answer; `None` when it holds no item (not found).
pub(crate) fn channel(v: &Value) -> Option<Creator> {
    let item = v.get("items").and_then(Value::as_array)?.first()?;
    let id = item.get("id").and_then(str_of)?;
    let uploads = item.pointer("/contentDetails/relatedPlaylists/uploads").and_then(str_of)?;
    let hidden = item.pointer("/statistics/hiddenSubscriberCount").and_then(Value::as_bool) == Some(true);
    let thumbnails = item.pointer("/snippet/thumbnails");
    let avatar = ["high", "medium", "default"]
        .iter()
        .find_map(|size| thumbnails.and_then(|t| t.get(*size)).and_then(|t| t.get("url")).and_then(first_url));
    Some(Creator {
        platform: Platform::YouTube,
        id,
        listing: uploads,
        handle: item.pointer("/snippet/customUrl").and_then(str_of).map(|h| h.trim_start_matches('@').to_owned()),
        name: item.pointer("/snippet/title").and_then(str_of),
        avatar_url: avatar,
        followers: if hidden { None } else { item.pointer("/statistics/subscriberCount").and_then(u64_of) },
        posts: item.pointer("/statistics/videoCount").and_then(u64_of),
        verified: None,
    })
}

/// The videos of one `playlistItems.list` page, and the next page's token.
pub(crate) fn playlist_page(v: &Value) -> (Vec<FoundPost>, Option<String>) {
    let posts = v
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let id = item
                .pointer("/contentDetails/videoId")
                .or_else(|| item.pointer("/snippet/resourceId/videoId"))
                .and_then(str_of)
                .filter(|id| is_youtube_id(id))?;
            // Private and deleted videos stay listed without `videoPublishedAt`.
            let published = item
                .pointer("/contentDetails/videoPublishedAt")
                .and_then(Value::as_str)
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_millis());
            Some(FoundPost {
                url: format!("https://www.youtube.com/shorts/{id}"),
                title: item.pointer("/snippet/title").and_then(str_of),
                published_at: published,
                pinned: false,
                metadata: None,
                post: PostRef { platform: Platform::YouTube, id },
            })
        })
        .collect();
    (posts, v.get("nextPageToken").and_then(str_of))
}

impl YouTube {
    /// The channel a URL names.
    pub async fn creator(&self, url: &CreatorUrl) -> Result<Creator, PlatformError> {
        let parts = "snippet,statistics,contentDetails";
        let (by, value, shown) = match url {
            CreatorUrl::YouTubeHandle { handle } => ("forHandle", format!("@{handle}"), format!("@{handle}")),
            CreatorUrl::YouTubeChannel { id } => ("id", id.clone(), id.clone()),
            CreatorUrl::YouTubeUser { name } => ("forUsername", name.clone(), name.clone()),
            CreatorUrl::TikTok { .. } | CreatorUrl::Instagram { .. } => {
                return Err(PlatformError::InvalidUrl("not a YouTube channel URL".into()));
            }
        };
        let v = self.call("channels", &[("part", parts), (by, &value)]).await?;
        channel(&v).ok_or_else(|| PlatformError::Missing(format!("the YouTube channel {shown} does not exist")))
    }

    /// The channel's new Shorts, newest first: the Shorts playlist (`UUSH…`) when YouTube has
    /// one, else the uploads playlist with each video's duration checked.
    pub async fn creator_posts(
        &self,
        creator: &Creator,
        listing: &Listing<'_>,
    ) -> Result<Vec<FoundPost>, PlatformError> {
        let shorts = creator.id.strip_prefix("UC").map(|rest| format!("UUSH{rest}"));
        if let Some(shorts) = shorts {
            match self.walk_playlist(&shorts, listing).await {
                Err(PlatformError::Missing(_)) => {}
                other => return other,
            }
        }
        let found = self.walk_playlist(&creator.listing, listing).await?;
        self.only_shorts(found).await
    }

    async fn walk_playlist(&self, playlist: &str, listing: &Listing<'_>) -> Result<Vec<FoundPost>, PlatformError> {
        let mut walk = Walk::default();
        let mut token: Option<String> = None;
        for _ in 0..listing.max_pages.max(1) {
            let mut params = vec![("part", "snippet,contentDetails"), ("playlistId", playlist), ("maxResults", "50")];
            if let Some(t) = &token {
                params.push(("pageToken", t));
            }
            let v = self.call("playlistItems", &params).await?;
            let (posts, next) = playlist_page(&v);
            for post in posts {
                walk.take(listing, post);
            }
            match next {
                Some(next) if !walk.done => token = Some(next),
                _ => break,
            }
        }
        Ok(walk.found)
    }

    /// Keeps the videos of at most three minutes, with their metadata (`videos.list`, 50 a call).
    async fn only_shorts(&self, found: Vec<FoundPost>) -> Result<Vec<FoundPost>, PlatformError> {
        let mut kept = Vec::with_capacity(found.len());
        for chunk in found.chunks(50) {
            let ids = chunk.iter().map(|f| f.post.id.as_str()).collect::<Vec<_>>().join(",");
            let v = self.call("videos", &[("part", "snippet,statistics,contentDetails"), ("id", &ids)]).await?;
            let items = v.get("items").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            for post in chunk {
                let Some(item) = items.iter().find(|i| i.get("id").and_then(Value::as_str) == Some(&post.post.id))
                else {
                    continue;
                };
                let duration =
                    item.pointer("/contentDetails/duration").and_then(Value::as_str).and_then(iso8601_duration);
                if duration.is_some_and(|d| d <= SHORT_MAX_S) {
                    kept.push(FoundPost { metadata: Some(video_metadata(&post.post.id, item)), ..post.clone() });
                }
            }
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_channel_with_its_uploads_playlist() {
        let v = json!({"items": [{"id": "UCabcdefghijklmnopqrstuv",
            "snippet": {"title": "Brand", "customUrl": "@brandtv", "thumbnails": {"default": {"url": "https://yt3.ggpht.com/a"}}},
            "statistics": {"subscriberCount": "1500", "videoCount": "12", "hiddenSubscriberCount": false},
            "contentDetails": {"relatedPlaylists": {"uploads": "UUabcdefghijklmnopqrstuv"}}}]});
        let c = channel(&v).expect("a channel");
        assert_eq!(c.r#ref(), "youtube:channel:UCabcdefghijklmnopqrstuv");
        assert_eq!((c.handle.as_deref(), c.followers, c.posts), (Some("brandtv"), Some(1500), Some(12)));
        assert_eq!(c.listing, "UUabcdefghijklmnopqrstuv");
        assert!(channel(&json!({"items": []})).is_none());
        assert!(channel(&json!({"pageInfo": {}})).is_none());
    }

    #[test]
    fn playlist_pages_keep_private_videos_without_a_date() {
        let v = json!({"nextPageToken": "CDIQAA", "items": [
            {"snippet": {"title": "New", "resourceId": {"videoId": "abcdefghijk"}},
             "contentDetails": {"videoId": "abcdefghijk", "videoPublishedAt": "2026-11-20T10:00:00Z"}},
            {"snippet": {"title": "Private video", "resourceId": {"videoId": "bbcdefghijk"}},
             "contentDetails": {"videoId": "bbcdefghijk"}}
        ]});
        let (posts, next) = playlist_page(&v);
        assert_eq!(next.as_deref(), Some("CDIQAA"));
        assert_eq!(posts[0].published_at, Some(1_795_168_800_000));
        assert_eq!(posts[1].published_at, None);
    }
}
