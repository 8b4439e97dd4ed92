//! Creators: TikTok accounts (profile page, `item_list`) and YouTube channels (`channels.list`,
//! `playlistItems.list`) that publish posts over time. A post is listed once the simulator's
//! clock has reached its publication time, so a test publishes on its own clock.

use crate::server::{Req, State, lock};
use actix_web::HttpResponse;
use serde_json::{Value, json};

/// A creator and the posts it publishes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SimCreator {
    /// `tiktok` or `youtube`.
    pub platform: String,
    /// TikTok's numeric user id; YouTube's channel id (`UC` + 22 characters).
    pub id: String,
    /// Without `@`; its owner can change it ([`crate::SimHandle::rename_creator`]).
    pub handle: String,
    pub name: String,
    /// A private account (TikTok `statusCode` 10222 on its profile).
    pub private: bool,
    /// YouTube: whether the channel has the Shorts playlist (`UUSH…`); without it cova lists the
    /// uploads playlist and tells Shorts by duration.
    pub shorts_playlist: bool,
    pub posts: Vec<SimCreatorPost>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SimCreatorPost {
    /// A post id of the simulator's rules (its comments follow from it).
    pub id: String,
    pub published_at_ms: i64,
    /// TikTok: pinned to the top of the profile, listed first whatever its age.
    pub pinned: bool,
}

impl SimCreator {
    pub fn tiktok(id: u64, handle: &str) -> Self {
        Self {
            platform: "tiktok".into(),
            id: id.to_string(),
            handle: handle.into(),
            name: format!("{handle} (sim)"),
            private: false,
            shorts_playlist: true,
            posts: Vec::new(),
        }
    }

    /// An Instagram account: `id` is its numeric id; its posts' ids are shortcodes.
    pub fn instagram(id: u64, username: &str) -> Self {
        Self { platform: "instagram".into(), ..Self::tiktok(id, username) }
    }

    /// `channel` is 22 characters after `UC`.
    pub fn youtube(channel: &str, handle: &str) -> Self {
        Self { platform: "youtube".into(), id: format!("UC{channel}"), ..Self::tiktok(0, handle) }
    }

    pub fn sec_uid(&self) -> String {
        format!("MS4wLjABAAAA{}", self.id)
    }

    /// Posts published by `now` (unix ms): pinned first, then newest first.
    fn visible(&self, now: i64) -> Vec<&SimCreatorPost> {
        let mut posts: Vec<&SimCreatorPost> = self.posts.iter().filter(|p| p.published_at_ms <= now).collect();
        posts.sort_by_key(|p| (!p.pinned, std::cmp::Reverse(p.published_at_ms)));
        posts
    }
}

fn find<'a>(creators: &'a [SimCreator], platform: &str, pred: impl Fn(&SimCreator) -> bool) -> Option<&'a SimCreator> {
    creators.iter().find(|c| c.platform == platform && pred(c))
}

/// `GET /@<handle>`: the profile page with `webapp.user-detail`.
pub(crate) fn tiktok_profile(state: &State, handle: &str) -> HttpResponse {
    let creators = lock(&state.creators);
    let detail = match find(&creators, "tiktok", |c| c.handle.eq_ignore_ascii_case(handle)) {
        None => json!({"statusCode": 10221, "statusMsg": "user not exist"}),
        Some(c) if c.private => json!({"statusCode": 10222, "statusMsg": "this account is private"}),
        Some(c) => {
            let count = c.visible(state.now_ms()).len();
            let avatar = state.cdn_link(&format!("img/creator-{}.png", c.id));
            json!({"statusCode": 0, "statusMsg": "", "userInfo": {
                "user": {"id": c.id, "uniqueId": c.handle, "nickname": c.name, "secUid": c.sec_uid(),
                         "avatarThumb": avatar, "avatarMedium": avatar, "avatarLarger": avatar, "signature": "",
                         "verified": false, "privateAccount": false, "secret": false},
                "stats": {"followerCount": 1200, "followingCount": 10, "heartCount": 5000, "heart": 5000,
                          "videoCount": count, "diggCount": 0},
                "statsV2": {"followerCount": "1234", "followingCount": "10", "heartCount": "5000",
                            "videoCount": count.to_string(), "diggCount": "0"}
            }})
        }
    };
    crate::tiktok::rehydration_page_with("webapp.user-detail", detail)
}

/// `GET /api/post/item_list/?secUid=…&count=…&cursor=…`: newest first, pinned posts on the
/// first page; `cursor` is the last post's creation time in milliseconds.
pub(crate) fn tiktok_item_list(state: &State, r: &Req) -> HttpResponse {
    let creators = lock(&state.creators);
    let sec_uid = r.param("secUid").unwrap_or_default();
    let Some(c) = find(&creators, "tiktok", |c| c.sec_uid() == sec_uid) else {
        return HttpResponse::Ok().json(json!({"statusCode": 10221, "statusMsg": "user not exist"}));
    };
    if c.private {
        return HttpResponse::Ok().json(json!({"statusCode": 10222, "statusMsg": "this account is private"}));
    }
    let count = r.param("count").and_then(|v| v.parse::<usize>().ok()).unwrap_or(30).clamp(1, 35);
    let cursor = r.param("cursor").and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    let candidates: Vec<&SimCreatorPost> = c
        .visible(state.now_ms())
        .into_iter()
        .filter(|p| if cursor == 0 { true } else { !p.pinned && p.published_at_ms < cursor })
        .collect();
    let page: Vec<&SimCreatorPost> = candidates.iter().take(count).copied().collect();
    let items: Vec<Value> = page
        .iter()
        .filter_map(|p| {
            let post = state.tiktok_post(p.id.parse().ok()?);
            let mut item = crate::tiktok::item_struct(&post);
            item["createTime"] = json!(p.published_at_ms / 1000);
            item["author"]["id"] = json!(c.id);
            item["author"]["uniqueId"] = json!(c.handle);
            item["author"]["nickname"] = json!(c.name);
            item["author"]["secUid"] = json!(c.sec_uid());
            if p.pinned {
                item["isPinnedItem"] = json!(true);
            }
            Some(item)
        })
        .collect();
    let next = page.iter().filter(|p| !p.pinned).map(|p| p.published_at_ms).min().unwrap_or(cursor);
    HttpResponse::Ok().json(json!({
        "statusCode": 0, "itemList": items, "cursor": next.to_string(), "hasMore": candidates.len() > page.len(),
        "extra": {"now": state.now_ms()}, "log_pb": {"impr_id": "sim"}
    }))
}

/// `GET /ig/api/v1/users/web_profile_info/?username=`: the account, or `user: null`.
pub(crate) fn instagram_profile(state: &State, username: &str) -> HttpResponse {
    let creators = lock(&state.creators);
    let user = find(&creators, "instagram", |c| c.handle.eq_ignore_ascii_case(username)).map(|c| {
        json!({"id": c.id, "username": c.handle, "full_name": c.name, "is_private": c.private, "is_verified": false,
               "profile_pic_url": state.cdn_link(&format!("img/creator-{}.png", c.id)),
               "edge_followed_by": {"count": 1234},
               "edge_owner_to_timeline_media": {"count": c.visible(state.now_ms()).len()}})
    });
    HttpResponse::Ok().json(json!({"data": {"user": user}, "status": "ok"}))
}

/// The profile reels connection (GraphQL): pinned reels first, then newest first, 12 a page;
/// `after` is an offset (`r<n>`).
pub(crate) fn instagram_reels(state: &State, vars: &Value) -> HttpResponse {
    let creators = lock(&state.creators);
    let id = vars["target_user_id"].as_str().unwrap_or_default();
    let Some(c) = find(&creators, "instagram", |c| c.id == id) else {
        return HttpResponse::Ok().json(json!({"data": {"xdt_api__v1__clips__user__connection_v2": null}}));
    };
    let size = vars["page_size"].as_u64().unwrap_or(12).clamp(1, 12) as usize;
    let offset = vars["after"].as_str().and_then(|a| a.strip_prefix('r')?.parse().ok()).unwrap_or(0usize);
    let visible = c.visible(state.now_ms());
    let edges: Vec<Value> = visible
        .iter()
        .skip(offset)
        .take(size)
        .map(|p| {
            let pk = crate::rules::pk_of(&p.id).unwrap_or(0);
            let pinned: Vec<&str> = if p.pinned { vec![c.id.as_str()] } else { Vec::new() };
            json!({"node": {"media": {"pk": pk.to_string(), "id": format!("{pk}_{}", c.id), "code": p.id,
                "taken_at": p.published_at_ms / 1000, "media_type": 2, "product_type": "clips",
                "caption": {"text": format!("Reel {}", p.id)}, "clips_tab_pinned_user_ids": pinned,
                "user": {"pk": c.id, "username": c.handle}}}})
        })
        .collect();
    let more = offset + size < visible.len();
    HttpResponse::Ok().json(json!({"data": {"xdt_api__v1__clips__user__connection_v2": {
        "edges": edges, "page_info": {"has_next_page": more, "end_cursor": more.then(|| format!("r{}", offset + size))}}}}))
}

/// `channels.list` by `forHandle`, `id` or `forUsername`.
pub(crate) fn youtube_channels(state: &State, r: &Req) -> HttpResponse {
    let creators = lock(&state.creators);
    let found = if let Some(handle) = r.param("forHandle") {
        let handle = handle.trim_start_matches('@');
        find(&creators, "youtube", |c| c.handle.eq_ignore_ascii_case(handle))
    } else if let Some(id) = r.param("id") {
        find(&creators, "youtube", |c| c.id == id)
    } else if let Some(name) = r.param("forUsername") {
        find(&creators, "youtube", |c| c.handle.eq_ignore_ascii_case(name))
    } else {
        None
    };
    let items: Vec<Value> = found
        .map(|c| {
            let rest = &c.id[2..];
            json!({"kind": "youtube#channel", "id": c.id,
                "snippet": {"title": c.name, "description": "", "customUrl": format!("@{}", c.handle.to_lowercase()),
                            "thumbnails": {"default": {"url": state.cdn_link(&format!("img/creator-{}.png", c.id))}}},
                "statistics": {"subscriberCount": "1234", "videoCount": c.visible(state.now_ms()).len().to_string(),
                               "hiddenSubscriberCount": false},
                "contentDetails": {"relatedPlaylists": {"uploads": format!("UU{rest}")}}})
        })
        .into_iter()
        .collect();
    HttpResponse::Ok()
        .json(json!({"kind": "youtube#channelListResponse", "pageInfo": {"totalResults": items.len()}, "items": items}))
}

/// `playlistItems.list` of a channel's uploads (`UU…`) or Shorts (`UUSH…`) playlist.
pub(crate) fn youtube_playlist(state: &State, r: &Req) -> HttpResponse {
    let creators = lock(&state.creators);
    let playlist = r.param("playlistId").unwrap_or_default();
    let (rest, shorts) = match playlist.strip_prefix("UUSH") {
        Some(rest) => (rest, true),
        None => (playlist.strip_prefix("UU").unwrap_or_default(), false),
    };
    let Some(c) = find(&creators, "youtube", |c| c.id.get(2..) == Some(rest)).filter(|c| !shorts || c.shorts_playlist)
    else {
        return crate::youtube::error(
            404,
            "playlistNotFound",
            "The playlist identified with the request's playlistId parameter cannot be found.",
            "youtube.playlistItem",
        );
    };
    let size = r.param("maxResults").and_then(|m| m.parse().ok()).unwrap_or(5usize).clamp(1, 50);
    let offset = r.param("pageToken").and_then(|t| t.strip_prefix('P')?.parse().ok()).unwrap_or(0usize);
    let visible = c.visible(state.now_ms());
    let items: Vec<Value> = visible
        .iter()
        .skip(offset)
        .take(size)
        .map(|p| {
            let at = crate::youtube::rfc3339(p.published_at_ms / 1000);
            json!({"kind": "youtube#playlistItem",
                "snippet": {"publishedAt": at, "channelId": c.id, "title": format!("Short {}", p.id), "playlistId": playlist,
                            "resourceId": {"kind": "youtube#video", "videoId": p.id}},
                "contentDetails": {"videoId": p.id, "videoPublishedAt": at}})
        })
        .collect();
    let mut answer = json!({"kind": "youtube#playlistItemListResponse",
        "pageInfo": {"totalResults": visible.len(), "resultsPerPage": size}, "items": items});
    if offset + size < visible.len() {
        answer["nextPageToken"] = json!(format!("P{}", offset + size));
    }
    HttpResponse::Ok().json(answer)
}
