//! Creators (TikTok accounts, YouTube channels, Instagram accounts): their URL forms, their profile, and the walk
//! of their posts newest first that stops at the first post already known.

use crate::PlatformError;
use crate::model::Metadata;
use crate::urls::{Platform, PostRef, clip, is_tiktok_host, is_youtube_host, web_url};

/// A creator URL, parsed without network access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreatorUrl {
    /// `tiktok.com/@<handle>`.
    TikTok { handle: String },
    /// `youtube.com/@<handle>` (also `/shorts`, `/videos`, `/featured` after it).
    YouTubeHandle { handle: String },
    /// `youtube.com/channel/UC…`.
    YouTubeChannel { id: String },
    /// Legacy `youtube.com/user/<name>` (and `/c/<name>`, looked up the same way).
    YouTubeUser { name: String },
    /// `instagram.com/<username>/` (also `/reels/` after it).
    Instagram { username: String },
}

impl CreatorUrl {
    pub fn platform(&self) -> Platform {
        match self {
            Self::TikTok { .. } => Platform::TikTok,
            Self::Instagram { .. } => Platform::Instagram,
            _ => Platform::YouTube,
        }
    }
}

/// Instagram's own pages, which are not accounts.
const INSTAGRAM_PAGES: [&str; 10] =
    ["p", "reel", "reels", "tv", "stories", "explore", "accounts", "direct", "share", "about"];

/// Parses a TikTok account or YouTube channel URL. Errors say what a creator URL looks like.
pub fn parse_creator_url(input: &str) -> Result<CreatorUrl, PlatformError> {
    let trimmed = input.trim();
    let web = web_url(trimmed)?;
    let segments = web.segments();
    let not_a_creator =
        |hint: &str| PlatformError::InvalidUrl(format!("not a creator URL: `{}`; {hint}", clip(trimmed)));
    if is_tiktok_host(&web.host) {
        return match segments.as_slice() {
            [user] if is_tiktok_handle(user) => Ok(CreatorUrl::TikTok { handle: user[1..].to_owned() }),
            _ => Err(not_a_creator("expected a TikTok account URL such as https://www.tiktok.com/@<handle>")),
        };
    }
    if is_youtube_host(&web.host) && web.host != "youtu.be" && web.host != "www.youtu.be" {
        let tab = |rest: &[&str]| matches!(rest, [] | ["shorts" | "videos" | "featured"]);
        return match segments.as_slice() {
            [user, rest @ ..] if is_youtube_handle(user) && tab(rest) => {
                Ok(CreatorUrl::YouTubeHandle { handle: user[1..].to_owned() })
            }
            ["channel", id, rest @ ..] if is_channel_id(id) && tab(rest) => {
                Ok(CreatorUrl::YouTubeChannel { id: (*id).to_owned() })
            }
            ["user" | "c", name, rest @ ..] if is_legacy_name(name) && tab(rest) => {
                Ok(CreatorUrl::YouTubeUser { name: (*name).to_owned() })
            }
            _ => Err(not_a_creator(
                "expected a YouTube channel URL such as https://www.youtube.com/@<handle> or https://www.youtube.com/channel/UC…",
            )),
        };
    }
    if crate::instagram::urls::is_instagram_host(&web.host) {
        return match segments.as_slice() {
            [user] | [user, "reels" | "reel" | "tagged"]
                if crate::instagram::urls::is_username(user) && !INSTAGRAM_PAGES.contains(user) =>
            {
                Ok(CreatorUrl::Instagram { username: user.to_ascii_lowercase() })
            }
            _ => Err(not_a_creator("expected an Instagram account URL such as https://www.instagram.com/<username>/")),
        };
    }
    Err(crate::urls::unsupported_host(&web.host))
}

fn is_tiktok_handle(s: &str) -> bool {
    s.strip_prefix('@').is_some_and(|h| {
        (2..=24).contains(&h.len()) && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    })
}

fn is_youtube_handle(s: &str) -> bool {
    s.strip_prefix('@').is_some_and(|h| {
        (3..=30).contains(&h.len()) && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    })
}

/// `UC` and 22 characters of the URL-safe alphabet.
pub(crate) fn is_channel_id(s: &str) -> bool {
    s.len() == 24 && s.starts_with("UC") && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_legacy_name(s: &str) -> bool {
    (1..=100).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// A creator's stable identity, `tiktok:user:<user id>`, `youtube:channel:<UC…>` or
/// `instagram:user:<id>`: never the handle, which its owner can change.
pub fn creator_ref(platform: Platform, id: &str) -> String {
    match platform {
        Platform::TikTok => format!("tiktok:user:{id}"),
        Platform::YouTube => format!("youtube:channel:{id}"),
        Platform::Instagram => format!("instagram:user:{id}"),
    }
}

/// A creator's profile as the platform shows it now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Creator {
    pub platform: Platform,
    /// TikTok's numeric user id, YouTube's channel id.
    pub id: String,
    /// What lists the creator's posts: TikTok's `secUid`, YouTube's uploads playlist.
    pub listing: String,
    pub handle: Option<String>,
    pub name: Option<String>,
    pub avatar_url: Option<String>,
    pub followers: Option<u64>,
    pub posts: Option<u64>,
    pub verified: Option<bool>,
}

impl Creator {
    pub fn r#ref(&self) -> String {
        creator_ref(self.platform, &self.id)
    }

    /// The public profile URL.
    pub fn url(&self) -> String {
        match (self.platform, &self.handle) {
            (Platform::TikTok, Some(h)) => format!("https://www.tiktok.com/@{h}"),
            (Platform::TikTok, None) => format!("https://www.tiktok.com/@{}", self.id),
            (Platform::YouTube, _) => format!("https://www.youtube.com/channel/{}", self.id),
            (Platform::Instagram, Some(h)) => format!("https://www.instagram.com/{h}/"),
            // Instagram has no public link by id alone: the reels tab of the profile by id.
            (Platform::Instagram, None) => format!("https://www.instagram.com/{}/", self.id),
        }
    }
}

/// A post of a creator found by a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundPost {
    pub post: PostRef,
    pub url: String,
    pub title: Option<String>,
    /// Unix milliseconds; unknown for a post the platform hides the date of.
    pub published_at: Option<i64>,
    /// Pinned to the top of the profile (TikTok): first whatever its age.
    pub pinned: bool,
    /// The post's metadata when the listing carries it whole (TikTok's item structs).
    pub metadata: Option<Metadata>,
}

/// What a listing should take: posts published at or after `since` (unix ms) that `known`
/// does not hold, reading at most `max_pages` pages.
pub struct Listing<'a> {
    pub since: i64,
    pub known: &'a (dyn Fn(&PostRef) -> bool + Sync),
    pub max_pages: u32,
}

/// The walk over pages of posts, newest first, shared by the platforms: pinned posts are taken
/// when new but never end the walk (they break the time order); the first other post that is
/// known or older than `since` ends it.
#[derive(Default)]
pub(crate) struct Walk {
    pub found: Vec<FoundPost>,
    pub done: bool,
}

impl Walk {
    pub fn take(&mut self, listing: &Listing<'_>, post: FoundPost) {
        if self.done {
            return;
        }
        let old = post.published_at.is_some_and(|t| t < listing.since);
        let known = (listing.known)(&post.post) || self.found.iter().any(|f| f.post == post.post);
        if post.pinned {
            if !old && !known && post.published_at.is_some() {
                self.found.push(post);
            }
            return;
        }
        if old || known {
            self.done = true;
            return;
        }
        // A post without a date (private, deleted) is skipped, not a reason to stop.
        if post.published_at.is_some() {
            self.found.push(post);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creator(input: &str) -> CreatorUrl {
        parse_creator_url(input).unwrap_or_else(|e| panic!("{input}: {e}"))
    }

    #[test]
    fn creator_url_forms() {
        let tt = CreatorUrl::TikTok { handle: "brand.co".into() };
        for input in [
            "https://www.tiktok.com/@brand.co",
            "https://www.tiktok.com/@brand.co/",
            "https://www.tiktok.com/@brand.co?lang=en",
            "https://m.tiktok.com/@brand.co",
            "tiktok.com/@brand.co",
        ] {
            assert_eq!(creator(input), tt, "{input}");
        }
        let yt = CreatorUrl::YouTubeHandle { handle: "Brand-TV".into() };
        for input in [
            "https://www.youtube.com/@Brand-TV",
            "https://www.youtube.com/@Brand-TV/shorts",
            "https://m.youtube.com/@Brand-TV/videos",
            "https://youtube.com/@Brand-TV/featured",
        ] {
            assert_eq!(creator(input), yt, "{input}");
        }
        assert_eq!(
            creator("https://www.youtube.com/channel/UCabcdefghijklmnopqrstuv"),
            CreatorUrl::YouTubeChannel { id: "UCabcdefghijklmnopqrstuv".into() }
        );
        assert_eq!(creator("https://www.youtube.com/user/brand"), CreatorUrl::YouTubeUser { name: "brand".into() });
        let ig = CreatorUrl::Instagram { username: "brand.co".into() };
        for input in [
            "https://www.instagram.com/brand.co/",
            "https://www.instagram.com/Brand.Co/reels/",
            "instagram.com/brand.co?igsh=abc",
        ] {
            assert_eq!(creator(input), ig, "{input}");
        }
        for bad in ["https://www.instagram.com/reel/CKZ7-7Ghk2j/", "https://www.instagram.com/explore/"] {
            assert!(matches!(parse_creator_url(bad), Err(PlatformError::InvalidUrl(_))), "{bad}");
        }
        for bad in [
            "https://www.tiktok.com/@brand/video/7279848477109062945",
            "https://www.tiktok.com/",
            "https://www.youtube.com/shorts/abcdefghijk",
            "https://www.youtube.com/channel/UCshort",
            "https://youtu.be/@brand",
            "https://example.com/@brand",
            "",
        ] {
            assert!(matches!(parse_creator_url(bad), Err(PlatformError::InvalidUrl(_))), "{bad}");
        }
    }

    fn post(id: u64, at: i64, pinned: bool) -> FoundPost {
        FoundPost {
            post: PostRef::tiktok(id),
            url: String::new(),
            title: None,
            published_at: Some(at),
            pinned,
            metadata: None,
        }
    }

    #[test]
    fn the_walk_skips_pinned_posts_and_stops_at_the_first_known_or_old_one() {
        let known = |p: &PostRef| p.id == "5";
        let listing = Listing { since: 100, known: &known, max_pages: 5 };
        let mut walk = Walk::default();
        // An old pinned post, a new pinned post, two new posts, then a known one.
        for p in [post(1, 10, true), post(2, 300, true), post(3, 250, false), post(4, 200, false), post(5, 150, false)]
        {
            walk.take(&listing, p);
        }
        walk.take(&listing, post(6, 120, false));
        let ids: Vec<&str> = walk.found.iter().map(|f| f.post.id.as_str()).collect();
        assert_eq!(ids, ["2", "3", "4"]);
        assert!(walk.done);

        let mut walk = Walk::default();
        for p in [post(7, 300, false), post(8, 99, false), post(9, 400, false)] {
            walk.take(&listing, p);
        }
        assert_eq!(walk.found.len(), 1, "the walk ends at the first post older than `since`");
    }
}
