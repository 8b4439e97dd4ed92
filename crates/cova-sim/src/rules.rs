//! How post ids encode comment counts and scenarios (documented in the README).

use std::fmt;

/// Base of simulated TikTok ids: `7_000_000_000_000_000_000 + scenario * 10^12 + comments`.
pub const TIKTOK_ID_BASE: u64 = 7_000_000_000_000_000_000;
/// Width of the comment-count field of a TikTok id.
pub const TIKTOK_SCENARIO_STEP: u64 = 1_000_000_000_000;
/// Generated posts are capped at this many comments to bound memory.
pub const MAX_COMMENTS: u64 = 200_000;

/// TikTok scenarios, selected by `(id - TIKTOK_ID_BASE) / 10^12`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TikTokScenario {
    Normal = 0,
    PrivatePost = 1,
    PrivateAccount = 2,
    FriendsOnly = 3,
    AudienceRestricted = 4,
    Deleted = 5,
    NotFound = 6,
    RegionBlocked = 7,
    LoginRedirect = 8,
    Challenge = 9,
    UnsolvableChallenge = 10,
    EmptyBodyAlways = 11,
    EmptyBodyFirst2 = 12,
    TooManyRequestsFirst2 = 13,
    ServerErrorEvery3rd = 14,
    CaptchaAlways = 15,
    Photo = 16,
    LegacySigiState = 17,
    WalledPage = 18,
    NonJsonFirst2 = 19,
    ChallengeRepeats = 20,
    CaptchaOnce = 21,
    /// Comment images point where cova must never go: a host off the CDN allow-list, a CDN
    /// redirect to loopback, `file://`, a cloud metadata address.
    HostileMedia = 22,
    /// The author turned the comments off: `itemCommentStatus: 3` on the post page (which still
    /// counts its comments), and the comment list answers none.
    CommentsOff = 23,
}

impl TikTokScenario {
    pub const ALL: [TikTokScenario; 24] = [
        Self::Normal,
        Self::PrivatePost,
        Self::PrivateAccount,
        Self::FriendsOnly,
        Self::AudienceRestricted,
        Self::Deleted,
        Self::NotFound,
        Self::RegionBlocked,
        Self::LoginRedirect,
        Self::Challenge,
        Self::UnsolvableChallenge,
        Self::EmptyBodyAlways,
        Self::EmptyBodyFirst2,
        Self::TooManyRequestsFirst2,
        Self::ServerErrorEvery3rd,
        Self::CaptchaAlways,
        Self::Photo,
        Self::LegacySigiState,
        Self::WalledPage,
        Self::NonJsonFirst2,
        Self::ChallengeRepeats,
        Self::CaptchaOnce,
        Self::HostileMedia,
        Self::CommentsOff,
    ];

    pub fn code(self) -> u64 {
        self as u64
    }

    fn from_code(code: u64) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.code() == code)
    }

    /// The TikTok `statusCode` the scenario answers with, if any.
    pub fn status_code(self) -> Option<i64> {
        Some(match self {
            Self::PrivatePost => 10216,
            Self::PrivateAccount => 10222,
            Self::FriendsOnly => 10240,
            Self::Deleted => 10241,
            Self::NotFound => 10204,
            Self::RegionBlocked => 10231,
            _ => return None,
        })
    }
}

impl fmt::Display for TikTokScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// The TikTok id of a simulated post with `comments` comments (top-level plus replies).
pub fn tiktok_post_id(scenario: TikTokScenario, comments: u64) -> u64 {
    TIKTOK_ID_BASE + scenario.code() * TIKTOK_SCENARIO_STEP + comments.min(TIKTOK_SCENARIO_STEP - 1)
}

/// Scenario and comment count of a TikTok id. Ids outside the scheme are normal posts whose
/// comment count is `id % 1000`.
pub fn decode_tiktok_id(id: u64) -> (TikTokScenario, u64) {
    if id >= TIKTOK_ID_BASE {
        let rel = id - TIKTOK_ID_BASE;
        if let Some(s) = TikTokScenario::from_code(rel / TIKTOK_SCENARIO_STEP) {
            return (s, (rel % TIKTOK_SCENARIO_STEP).min(MAX_COMMENTS));
        }
    }
    (TikTokScenario::Normal, id % 1000)
}

/// Base of simulated Instagram media ids (`pk`): `3_000_000_000_000_000_000 + scenario * 10^12
/// + comments`; the post's URL carries the id as a shortcode ([`instagram_shortcode`]).
pub const INSTAGRAM_PK_BASE: u64 = 3_000_000_000_000_000_000;

/// Instagram scenarios, selected by `(pk - INSTAGRAM_PK_BASE) / 10^12`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InstagramScenario {
    Normal = 0,
    /// Gated for visitors (age-restricted): the logged-out query answers
    /// `if_not_gated_logged_out: null`; a session's post query and comment pages show it.
    Private = 1,
    /// The post page is 404 and the media null.
    Deleted = 2,
    /// `comments_disabled: true`, no comments.
    CommentsOff = 3,
    /// Every page redirects to `/accounts/login/`.
    LoginWall = 4,
    /// Every request answers 400 `checkpoint_required`.
    Checkpoint = 5,
    /// The first two GraphQL requests answer 429 "Please wait a few minutes".
    RateLimitedFirst2 = 6,
    /// The post query answers a shape cova does not know.
    UnknownShape = 7,
    /// A session's first comment page starts a third of the way down the list: the comments
    /// before it come by `min_id` (`has_more_headload_comments`), those after by `max_id`.
    Headload = 8,
    /// A session's `max_id` pages stop moving after the second: the cursor asked comes back
    /// with `has_more_comments` still true.
    StuckCursor = 9,
}

impl InstagramScenario {
    pub const ALL: [InstagramScenario; 10] = [
        Self::Normal,
        Self::Private,
        Self::Deleted,
        Self::CommentsOff,
        Self::LoginWall,
        Self::Checkpoint,
        Self::RateLimitedFirst2,
        Self::UnknownShape,
        Self::Headload,
        Self::StuckCursor,
    ];
}

const SHORTCODE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The media id of a simulated Instagram post with `comments` comments (top-level plus replies).
pub fn instagram_pk(scenario: InstagramScenario, comments: u64) -> u64 {
    INSTAGRAM_PK_BASE + scenario as u64 * TIKTOK_SCENARIO_STEP + comments.min(TIKTOK_SCENARIO_STEP - 1)
}

/// The shortcode of a media id (base 64, `A–Z a–z 0–9 - _`, most significant digit first).
pub fn shortcode_of(mut pk: u64) -> String {
    let mut out = Vec::new();
    loop {
        out.push(SHORTCODE[(pk % 64) as usize]);
        pk /= 64;
        if pk == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The media id of a shortcode (its first 11 characters), if it is one.
pub fn pk_of(code: &str) -> Option<u64> {
    let code = code.get(..code.len().min(11))?;
    code.bytes().try_fold(0u64, |pk, b| {
        let d = SHORTCODE.iter().position(|a| *a == b)? as u64;
        pk.checked_mul(64)?.checked_add(d)
    })
}

/// The shortcode of a simulated Instagram post.
pub fn instagram_shortcode(scenario: InstagramScenario, comments: u64) -> String {
    shortcode_of(instagram_pk(scenario, comments))
}

/// Scenario and comment count of a media id; ids outside the scheme are normal posts whose
/// comment count is `pk % 1000`.
pub fn decode_instagram_pk(pk: u64) -> (InstagramScenario, u64) {
    if pk >= INSTAGRAM_PK_BASE {
        let rel = pk - INSTAGRAM_PK_BASE;
        let code = rel / TIKTOK_SCENARIO_STEP;
        if let Some(s) = InstagramScenario::ALL.iter().copied().find(|s| *s as u64 == code) {
            return (s, (rel % TIKTOK_SCENARIO_STEP).min(MAX_COMMENTS));
        }
    }
    (InstagramScenario::Normal, pk % 1000)
}

/// YouTube scenarios, selected by the first character of an 11-character id `<letter><10 digits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum YouTubeScenario {
    /// `c`
    Normal,
    /// `d`: commentThreads answers 403 commentsDisabled.
    CommentsDisabled,
    /// `n`: videos.list has no items, commentThreads answers 404 videoNotFound.
    NotFound,
    /// `q`: every call answers 403 quotaExceeded.
    QuotaExceeded,
    /// `e`: every third call answers 503.
    ServerErrorEvery3rd,
    /// `f`: commentThreads answers 403 forbidden.
    Forbidden,
}

impl YouTubeScenario {
    fn letter(self) -> char {
        match self {
            Self::Normal => 'c',
            Self::CommentsDisabled => 'd',
            Self::NotFound => 'n',
            Self::QuotaExceeded => 'q',
            Self::ServerErrorEvery3rd => 'e',
            Self::Forbidden => 'f',
        }
    }
}

/// The YouTube id of a simulated video: the scenario letter and the comment count in 10 digits.
pub fn youtube_video_id(scenario: YouTubeScenario, comments: u64) -> String {
    format!("{}{:010}", scenario.letter(), comments.min(9_999_999_999))
}

/// Scenario and comment count of a YouTube id; other valid ids are normal videos with
/// `fnv(id) % 500` comments.
pub fn decode_youtube_id(id: &str) -> (YouTubeScenario, u64) {
    let (head, digits) = id.split_at(id.char_indices().nth(1).map_or(id.len(), |(i, _)| i));
    if id.len() == 11 && digits.bytes().all(|b| b.is_ascii_digit()) {
        let n = digits.parse::<u64>().unwrap_or(0).min(MAX_COMMENTS);
        let s = match head {
            "c" => Some(YouTubeScenario::Normal),
            "d" => Some(YouTubeScenario::CommentsDisabled),
            "n" => Some(YouTubeScenario::NotFound),
            "q" => Some(YouTubeScenario::QuotaExceeded),
            "e" => Some(YouTubeScenario::ServerErrorEvery3rd),
            "f" => Some(YouTubeScenario::Forbidden),
            _ => None,
        };
        if let Some(s) = s {
            return (s, n);
        }
    }
    (YouTubeScenario::Normal, fnv(id.as_bytes()) % 500)
}

/// Short-link codes: `ZM<base36 id>` redirects to the video URL, `ZP<base36 id>` to the photo URL;
/// any other code redirects to the home page (not found).
pub fn short_code(id: u64, photo_path: bool) -> String {
    format!("{}{}", if photo_path { "ZP" } else { "ZM" }, base36(id))
}

pub fn decode_short_code(code: &str) -> Option<(u64, bool)> {
    let photo = match code.get(..2)? {
        "ZM" => false,
        "ZP" => true,
        _ => return None,
    };
    u64::from_str_radix(code.get(2..)?, 36).ok().filter(|id| *id > 0).map(|id| (id, photo))
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for s in TikTokScenario::ALL {
            for n in [0, 1, 49, 5_000, 20_000] {
                assert_eq!(decode_tiktok_id(tiktok_post_id(s, n)), (s, n));
            }
        }
        assert_eq!(tiktok_post_id(TikTokScenario::Normal, 5000), 7_000_000_000_000_005_000);
        assert_eq!(decode_tiktok_id(123_456), (TikTokScenario::Normal, 456));
        let id = youtube_video_id(YouTubeScenario::QuotaExceeded, 42);
        assert_eq!(id, "q0000000042");
        assert_eq!(decode_youtube_id(&id), (YouTubeScenario::QuotaExceeded, 42));
        assert_eq!(decode_youtube_id("BGQWPY4IigY").0, YouTubeScenario::Normal);
        for photo in [false, true] {
            let code = short_code(7_000_000_000_000_000_049, photo);
            assert_eq!(decode_short_code(&code), Some((7_000_000_000_000_000_049, photo)));
        }
        assert_eq!(decode_short_code("abcdef"), None);
    }
}
