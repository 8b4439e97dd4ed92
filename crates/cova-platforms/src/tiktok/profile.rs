//! TikTok accounts: the profile page's `webapp.user-detail` and the `item_list` API, newest
//! first with pinned posts ahead.

use super::{TikTok, join, page};
use crate::PlatformError;
use crate::creators::{Creator, FoundPost, Listing, Walk};
use crate::http::{Attempt, Request, json_body};
use crate::json::{bool_of, first_url, i64_of, str_of, u64_of};
use crate::urls::{Platform, PostRef};
use serde_json::Value;

/// Posts asked per `item_list` page (TikTok serves up to about 35).
const PAGE: &str = "35";

/// The status codes of a profile: the account does not exist, or it is private. The code
/// goes to the log, not to the customer.
fn profile_error(code: i64, handle: &str) -> Option<PlatformError> {
    let error = match code {
        10202 | 10221 | 10223 => PlatformError::Missing(format!("the TikTok account @{handle} does not exist")),
        10222 => PlatformError::AudienceRestricted(format!("the TikTok account @{handle} is private")),
        page::STATUS_CAPTCHA => return None,
        _ => PlatformError::Parse(format!("TikTok did not show the account @{handle}; try again later")),
    };
    tracing::info!(tiktok.status = code, detail = %error.detail(), "TikTok refused an account");
    Some(error)
}

/// Reads `__DEFAULT_SCOPE__ → webapp.user-detail` of a profile page.
pub(crate) fn user_detail(html: &str, handle: &str) -> Result<Option<Creator>, PlatformError> {
    let Some(text) = page::script_json(html, "__UNIVERSAL_DATA_FOR_REHYDRATION__") else { return Ok(None) };
    let root: Value = serde_json::from_str(text).map_err(|e| {
        PlatformError::Parse(format!("TikTok profile data (rehydration script) is not valid JSON: {e}"))
    })?;
    let Some(detail) = root.pointer("/__DEFAULT_SCOPE__/webapp.user-detail") else { return Ok(None) };
    let code = detail.get("statusCode").and_then(i64_of).unwrap_or(0);
    if code != 0 {
        return match profile_error(code, handle) {
            Some(e) => Err(e),
            None => Ok(None),
        };
    }
    let user = detail.pointer("/userInfo/user").filter(|u| u.is_object());
    let Some(user) = user else { return Ok(None) };
    if user.get("privateAccount").and_then(bool_of) == Some(true) || user.get("secret").and_then(bool_of) == Some(true)
    {
        return Err(PlatformError::AudienceRestricted(format!("the TikTok account @{handle} is private")));
    }
    let (Some(id), Some(sec_uid)) = (user.get("id").and_then(str_of), user.get("secUid").and_then(str_of)) else {
        return Err(PlatformError::Parse(format!("the TikTok profile of @{handle} carries no user id")));
    };
    // `statsV2` holds exact decimal strings; `stats` rounds nothing but may be missing.
    let stat = |name: &str| {
        detail
            .pointer(&format!("/userInfo/statsV2/{name}"))
            .and_then(u64_of)
            .or_else(|| detail.pointer(&format!("/userInfo/stats/{name}")).and_then(u64_of))
    };
    Ok(Some(Creator {
        platform: Platform::TikTok,
        id,
        listing: sec_uid,
        handle: user.get("uniqueId").and_then(str_of).or_else(|| Some(handle.to_owned())),
        name: user.get("nickname").and_then(str_of),
        avatar_url: ["avatarLarger", "avatarMedium", "avatarThumb"]
            .iter()
            .find_map(|k| user.get(*k).and_then(first_url)),
        followers: stat("followerCount"),
        posts: stat("videoCount"),
        verified: user.get("verified").and_then(bool_of),
    }))
}

/// One `item_list` answer: its posts and the cursor of the next page (`None`: the last page).
pub(crate) fn item_page(v: &Value) -> (Vec<FoundPost>, Option<String>) {
    let items = v.get("itemList").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let posts: Vec<FoundPost> = items
        .iter()
        .filter_map(|item| {
            let id = item.get("id").and_then(str_of)?;
            let post: PostRef = format!("tiktok:{id}").parse().ok()?;
            let handle = item.pointer("/author/uniqueId").and_then(str_of).unwrap_or_else(|| "_".into());
            let metadata = page::metadata(&post.id, item, None, None).ok();
            Some(FoundPost {
                url: format!("https://www.tiktok.com/@{handle}/video/{}", post.id),
                title: item.get("desc").and_then(str_of).filter(|d| !d.is_empty()),
                published_at: item.get("createTime").and_then(i64_of).map(|s| s.saturating_mul(1000)),
                pinned: item.get("isPinnedItem").and_then(bool_of).unwrap_or(false),
                metadata,
                post,
            })
        })
        .collect();
    let more = v.get("hasMore").and_then(bool_of).unwrap_or(false) && !items.is_empty();
    let cursor = v.get("cursor").and_then(str_of).filter(|_| more);
    (posts, cursor)
}

impl TikTok {
    /// The account behind `@handle`, from its profile page.
    pub async fn creator(&self, handle: &str) -> Result<Creator, PlatformError> {
        let url = join(&self.web_base, &format!("/@{handle}"));
        let mut challenges = 0u32;
        let mut retry = self.http.retry("TikTok profile page");
        loop {
            let attempt = self.profile_attempt(&url, handle, &mut challenges).await;
            if let Some(r) = retry.next(attempt).await {
                return r;
            }
        }
    }

    async fn profile_attempt(&self, url: &url::Url, handle: &str, challenges: &mut u32) -> Attempt<Creator> {
        let missing = || PlatformError::Missing(format!("the TikTok account @{handle} does not exist"));
        let html = match self.page_html(url, "profile page", missing, challenges).await {
            Attempt::Done(html) => html,
            Attempt::Fail(PlatformError::AudienceRestricted(_)) => {
                return Attempt::Fail(PlatformError::AudienceRestricted(format!(
                    "TikTok shows the account @{handle} only to logged-in viewers"
                )));
            }
            other => return other.map_never(),
        };
        match user_detail(&html, handle) {
            Ok(Some(creator)) => Attempt::Done(creator),
            // A page without the user's data is bot detection, as for posts.
            Ok(None) => Attempt::Retry { blocked: true, detail: "profile page without user data".into() },
            Err(e) => Attempt::Fail(e),
        }
    }

    /// The account's new posts, newest first (see [`Walk`]).
    pub async fn creator_posts(
        &self,
        creator: &Creator,
        listing: &Listing<'_>,
    ) -> Result<Vec<FoundPost>, PlatformError> {
        let mut walk = Walk::default();
        let mut cursor = "0".to_owned();
        for _ in 0..listing.max_pages.max(1) {
            let url = self.api_url(
                "/api/post/item_list/",
                &[("secUid", creator.listing.clone()), ("count", PAGE.into()), ("cursor", cursor.clone())],
            );
            let v = self.item_list(url, creator.handle.as_deref().unwrap_or(&creator.id)).await?;
            let (posts, next) = item_page(&v);
            for post in posts {
                walk.take(listing, post);
            }
            match next {
                Some(next) if !walk.done => cursor = next,
                _ => break,
            }
        }
        Ok(walk.found)
    }

    async fn item_list(&self, url: url::Url, handle: &str) -> Result<Value, PlatformError> {
        let what = "TikTok post list";
        let mut retry = self.http.retry(what);
        loop {
            let attempt = match self.http.send(&Request::get(url.clone()).signed()).await {
                Attempt::Done(resp) if resp.status.is_success() => match json_body(&resp, what) {
                    Ok(v) => match v.get("statusCode").and_then(i64_of).unwrap_or(0) {
                        0 => Attempt::Done(v),
                        page::STATUS_CAPTCHA => {
                            Attempt::Retry { blocked: true, detail: format!("{what}: captcha (status 10000)") }
                        }
                        code => Attempt::Fail(profile_error(code, handle).unwrap_or_else(|| {
                            PlatformError::Parse(format!("TikTok did not list the posts of @{handle}; try again later"))
                        })),
                    },
                    Err(a) => a,
                },
                Attempt::Done(resp) => {
                    Attempt::Fail(PlatformError::Parse(format!("{what} answered HTTP {}", resp.status.as_u16())))
                }
                other => other.map_never(),
            };
            if let Some(r) = retry.next(attempt).await {
                return r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn page_of(detail: Value) -> String {
        let data = json!({"__DEFAULT_SCOPE__": {"webapp.user-detail": detail}});
        format!(
            "<html><script id=\"__UNIVERSAL_DATA_FOR_REHYDRATION__\" type=\"application/json\">{data}</script></html>"
        )
    }

    #[test]
    fn a_profile_page_gives_the_user_id_sec_uid_and_exact_stats() {
        let html = page_of(json!({
            "statusCode": 0,
            "userInfo": {
                "user": {"id": "6800000000000000001", "uniqueId": "brand", "nickname": "Brand", "secUid": "MS4w-sec",
                         "avatarLarger": "https://p16.tiktokcdn.com/a.jpeg", "verified": true, "privateAccount": false},
                "stats": {"followerCount": 1200000, "videoCount": 42},
                "statsV2": {"followerCount": "1234567", "videoCount": "42"}
            }
        }));
        let c = user_detail(&html, "brand").expect("parsed").expect("a user");
        assert_eq!((c.id.as_str(), c.listing.as_str()), ("6800000000000000001", "MS4w-sec"));
        assert_eq!((c.followers, c.posts), (Some(1_234_567), Some(42)));
        assert_eq!(c.r#ref(), "tiktok:user:6800000000000000001");
    }

    #[test]
    fn missing_and_private_accounts() {
        let missing = page_of(json!({"statusCode": 10221, "statusMsg": "user not exist"}));
        assert!(matches!(user_detail(&missing, "x"), Err(PlatformError::Missing(_))));
        let private = page_of(json!({"statusCode": 10222}));
        assert!(matches!(user_detail(&private, "x"), Err(PlatformError::AudienceRestricted(_))));
        let flagged =
            page_of(json!({"statusCode": 0, "userInfo": {"user": {"id": "1", "secUid": "s", "privateAccount": true}}}));
        assert!(matches!(user_detail(&flagged, "x"), Err(PlatformError::AudienceRestricted(_))));
        assert!(matches!(user_detail("<html></html>", "x"), Ok(None)), "a walled page is bot detection");
    }

    #[test]
    fn item_pages_mark_pinned_posts_and_end_without_more() {
        let v = json!({"statusCode": 0, "hasMore": true, "cursor": "1700000000000", "itemList": [
            {"id": "7000000000000000011", "desc": "old but pinned", "createTime": 1000, "isPinnedItem": true, "author": {"uniqueId": "brand"}},
            {"id": "7000000000000000012", "desc": "", "createTime": "1700000001"}
        ]});
        let (posts, cursor) = item_page(&v);
        assert_eq!(cursor.as_deref(), Some("1700000000000"));
        assert!(posts[0].pinned && !posts[1].pinned);
        assert_eq!(posts[1].published_at, Some(1_700_000_001_000));
        assert_eq!(posts[0].url, "https://www.tiktok.com/@brand/video/7000000000000000011");
        assert_eq!(posts[1].title, None);
        let (_, cursor) = item_page(&json!({"statusCode": 0, "hasMore": false, "itemList": []}));
        assert_eq!(cursor, None);
    }
}
