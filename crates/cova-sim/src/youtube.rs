//! YouTube Data API v3: videos.list, commentThreads.list and comments.list.

use crate::rules::{YouTubeScenario, decode_youtube_id};
use crate::server::{Req, State};
use crate::truth::SimComment;
use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use serde_json::{Value, json};

pub(crate) fn error(status: u16, reason: &str, message: &str, domain: &str) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST)).json(json!({
        "error": {"code": status, "message": message,
                  "errors": [{"message": message, "domain": domain, "reason": reason}]}
    }))
}

pub(crate) fn rfc3339(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or(chrono::DateTime::UNIX_EPOCH)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub(crate) fn handle(state: &State, r: &Req) -> HttpResponse {
    if r.param("key") != Some(state.cfg.youtube_api_key.as_str()) {
        return error(400, "keyInvalid", "API key not valid. Please pass a valid API key.", "usageLimits");
    }
    let method = r.path.trim_start_matches("/youtube/v3/");
    match method {
        "channels" => return crate::creators::youtube_channels(state, r),
        "playlistItems" => return crate::creators::youtube_playlist(state, r),
        // Several ids at once (a channel's uploads checked for Shorts): one answer per video.
        "videos" if r.param("id").is_some_and(|ids| ids.contains(',')) => return several_videos(state, r),
        _ => {}
    }
    // comments.list only knows the thread: simulated thread ids embed the video id after "Ugz".
    let video = match method {
        "comments" => r.param("parentId").and_then(|p| p.get(3..14)).map(str::to_string),
        _ => r.param("videoId").or_else(|| r.param("id")).map(str::to_string),
    };
    let Some(video) = video.filter(|v| v.len() == 11) else {
        return error(400, "missingRequiredParameter", "No filter selected.", "youtube.parameter");
    };
    let (scenario, _) = decode_youtube_id(&video);
    if scenario == YouTubeScenario::QuotaExceeded {
        return error(
            403,
            "quotaExceeded",
            "The request cannot be completed because you have exceeded your quota.",
            "youtube.quota",
        );
    }
    // Every third request of the video fails, but never the same request twice: a retry that
    // interleaves with the video's other requests (replies are fetched side by side) could
    // otherwise land on every third slot and fail all of its attempts.
    if scenario == YouTubeScenario::ServerErrorEvery3rd
        && state.bump(&format!("yt:{video}")).is_multiple_of(3)
        && state.bump(&format!("yt-failed:{}?{:?}", r.path, r.query)) == 1
    {
        return error(503, "backendError", "Backend Error", "global");
    }
    match method {
        "videos" => videos(state, &video, scenario),
        "commentThreads" => threads(state, r, &video, scenario),
        "comments" => replies(state, r, &video),
        _ => error(404, "notFound", "Not Found", "global"),
    }
}

fn page_params(r: &Req, prefix: char) -> Result<(usize, usize), Box<HttpResponse>> {
    let size = r.param("maxResults").and_then(|m| m.parse().ok()).unwrap_or(20usize).clamp(1, 100);
    let offset = match r.param("pageToken") {
        None | Some("") => 0,
        Some(t) => match t.strip_prefix(prefix).and_then(|o| o.parse().ok()) {
            Some(o) => o,
            None => {
                return Err(Box::new(error(
                    400,
                    "invalidPageToken",
                    "The page token is invalid.",
                    "youtube.parameter",
                )));
            }
        },
    };
    Ok((offset, size))
}

fn several_videos(state: &State, r: &Req) -> HttpResponse {
    let mut items = Vec::new();
    for id in r.param("id").unwrap_or_default().split(',').filter(|v| v.len() == 11).take(50) {
        let (scenario, _) = decode_youtube_id(id);
        let answer = video_json(state, id, scenario);
        items.extend(answer["items"].as_array().cloned().unwrap_or_default());
    }
    HttpResponse::Ok()
        .json(json!({"kind": "youtube#videoListResponse", "pageInfo": {"totalResults": items.len()}, "items": items}))
}

fn videos(state: &State, video: &str, scenario: YouTubeScenario) -> HttpResponse {
    HttpResponse::Ok().json(video_json(state, video, scenario))
}

fn video_json(state: &State, video: &str, scenario: YouTubeScenario) -> Value {
    if scenario == YouTubeScenario::NotFound {
        return json!({"kind": "youtube#videoListResponse", "items": [], "pageInfo": {"totalResults": 0, "resultsPerPage": 0}});
    }
    let post = state.youtube_post(video);
    let m = &post.metadata;
    let sizes = [("default", 120, 90), ("medium", 320, 180), ("high", 480, 360), ("maxres", 1280, 720)];
    let thumbs: serde_json::Map<String, Value> = sizes
        .iter()
        .zip(&m.cover_urls)
        .map(|((name, w, h), url)| (name.to_string(), json!({"url": url, "width": w, "height": h})))
        .collect();
    let mut stats = json!({"viewCount": m.views.to_string(), "likeCount": m.likes.to_string(), "favoriteCount": "0"});
    if scenario != YouTubeScenario::CommentsDisabled {
        stats["commentCount"] = json!(m.comments.to_string());
    }
    json!({
        "kind": "youtube#videoListResponse", "etag": "sim",
        "items": [{
            "kind": "youtube#video", "etag": "sim", "id": video,
            "snippet": {
                "publishedAt": rfc3339(m.create_time), "channelId": format!("UC{}", &m.author_id[..22.min(m.author_id.len())]),
                "title": m.title, "description": m.description, "thumbnails": thumbs, "channelTitle": m.author_name,
                "tags": m.hashtags.iter().map(|h| h.0.clone()).collect::<Vec<_>>(), "categoryId": "22",
                "liveBroadcastContent": "none", "defaultAudioLanguage": m.language
            },
            "contentDetails": {"duration": format!("PT{}S", m.duration_s), "dimension": "2d", "definition": "hd", "caption": "false"},
            "statistics": stats
        }],
        "pageInfo": {"totalResults": 1, "resultsPerPage": 1}
    })
}

fn comment_json(c: &SimComment, video: &str, parent: Option<&str>) -> Value {
    let handle = c.author_handle.clone().unwrap_or_default();
    let mut snippet = json!({
        "channelId": "UCsimchannel0000000000001", "videoId": video, "textDisplay": c.text, "textOriginal": c.text,
        "authorDisplayName": format!("@{handle}"), "authorProfileImageUrl": c.avatar_url,
        "authorChannelUrl": format!("http://www.youtube.com/@{handle}"), "authorChannelId": {"value": c.author_id},
        "canRate": true, "viewerRating": "none", "likeCount": c.likes,
        "publishedAt": rfc3339(c.create_time), "updatedAt": rfc3339(c.create_time)
    });
    if let Some(p) = parent {
        snippet["parentId"] = json!(p);
    }
    json!({"kind": "youtube#comment", "etag": "sim", "id": c.id, "snippet": snippet})
}

fn threads(state: &State, r: &Req, video: &str, scenario: YouTubeScenario) -> HttpResponse {
    match scenario {
        YouTubeScenario::CommentsDisabled => {
            return error(
                403,
                "commentsDisabled",
                "The video identified by the videoId parameter has disabled comments.",
                "youtube.commentThread",
            );
        }
        YouTubeScenario::NotFound => {
            return error(
                404,
                "videoNotFound",
                "The video identified by the videoId parameter could not be found.",
                "youtube.commentThread",
            );
        }
        YouTubeScenario::Forbidden => {
            return error(
                403,
                "forbidden",
                "The comment thread could not be retrieved due to insufficient permissions.",
                "youtube.commentThread",
            );
        }
        _ => {}
    }
    let (offset, size) = match page_params(r, 'T') {
        Ok(p) => p,
        Err(resp) => return *resp,
    };
    let post = state.youtube_post(video);
    let end = (offset + size).min(post.comments.len());
    let items: Vec<Value> = post
        .comments
        .get(offset..end)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let mut thread = json!({
                "kind": "youtube#commentThread", "etag": "sim", "id": c.id,
                "snippet": {"channelId": "UCsimchannel0000000000001", "videoId": video, "topLevelComment": comment_json(c, video, None),
                            "canReply": true, "totalReplyCount": c.replies.len(), "isPublic": true}
            });
            // Like the API, at most five replies are embedded.
            if !c.replies.is_empty() {
                let embedded: Vec<Value> = c.replies.iter().take(5).map(|r| comment_json(r, video, Some(&c.id))).collect();
                thread["replies"] = json!({"comments": embedded});
            }
            thread
        })
        .collect();
    let mut body = json!({
        "kind": "youtube#commentThreadListResponse", "etag": "sim",
        "pageInfo": {"totalResults": items.len(), "resultsPerPage": size}, "items": items
    });
    if end < post.comments.len() {
        body["nextPageToken"] = json!(format!("T{end}"));
    }
    HttpResponse::Ok().json(body)
}

fn replies(state: &State, r: &Req, video: &str) -> HttpResponse {
    let (offset, size) = match page_params(r, 'R') {
        Ok(p) => p,
        Err(resp) => return *resp,
    };
    let post = state.youtube_post(video);
    let parent_id = r.param("parentId").unwrap_or_default();
    let Some(parent) = post.comments.iter().find(|c| c.id == parent_id) else {
        return error(
            404,
            "commentNotFound",
            "The comment identified by the parentId parameter could not be found.",
            "youtube.comment",
        );
    };
    let end = (offset + size).min(parent.replies.len());
    let items: Vec<Value> = parent
        .replies
        .get(offset..end)
        .unwrap_or_default()
        .iter()
        .map(|c| comment_json(c, video, Some(&parent.id)))
        .collect();
    let mut body = json!({"kind": "youtube#commentListResponse", "etag": "sim", "pageInfo": {"resultsPerPage": size}, "items": items});
    if end < parent.replies.len() {
        body["nextPageToken"] = json!(format!("R{end}"));
    }
    HttpResponse::Ok().json(body)
}
