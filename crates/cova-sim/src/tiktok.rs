//! TikTok web endpoints: post pages, short links, oEmbed and the comment API.

use crate::rules::{TikTokScenario, decode_short_code, decode_tiktok_id, short_code};
use crate::server::{Req, State};
use crate::truth::{SimComment, SimPost, rounded};
use actix_web::HttpResponse;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

const CHALLENGE_COOKIE: &str = "_wafchallengeid";

pub(crate) fn handle(state: &State, r: &Req) -> HttpResponse {
    let segments: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        [] => html(HOME_PAGE),
        ["login", ..] => html(LOGIN_PAGE),
        ["oembed"] => oembed(state, r),
        ["api", "comment", "list"] => comment_list(state, r),
        ["api", "comment", "list", "reply"] => reply_list(state, r),
        ["api", "post", "item_list"] => crate::creators::tiktok_item_list(state, r),
        [user] if user.starts_with('@') => crate::creators::tiktok_profile(state, &user[1..]),
        [user, "video" | "photo", id] if user.starts_with('@') => match id.parse::<u64>() {
            Ok(id) => post_page(state, r, id),
            Err(_) => not_found(),
        },
        ["share", "video", id] | ["embed", id] | ["embed", "v2", id] => canonical_redirect(state, id),
        ["v", file] => canonical_redirect(state, file.trim_end_matches(".html")),
        ["t", code] | [code] => short_link(state, code),
        _ => not_found(),
    }
}

fn html(body: impl Into<String>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/html; charset=utf-8").body(body.into())
}

fn not_found() -> HttpResponse {
    HttpResponse::NotFound().content_type("text/html").body("<html><body>Page not available</body></html>")
}

fn redirect(location: String) -> HttpResponse {
    HttpResponse::MovedPermanently().insert_header(("location", location)).finish()
}

const HOME_PAGE: &str = "<!DOCTYPE html><html><head><title>TikTok - Make Your Day</title></head><body><div id=\"app\">For You</div></body></html>";
const LOGIN_PAGE: &str = "<!DOCTYPE html><html><head><title>Log in | TikTok</title></head><body><div id=\"login\">Log in to TikTok</div></body></html>";

fn post_path(post: &SimPost, photo: bool) -> String {
    format!("/@{}/{}/{}", post.metadata.author_handle, if photo { "photo" } else { "video" }, post.id)
}

fn canonical_redirect(state: &State, id: &str) -> HttpResponse {
    match id.parse::<u64>() {
        Ok(id) => {
            let post = state.tiktok_post(id);
            redirect(format!("{}{}", state.base, post_path(&post, post.metadata.kind == "photo")))
        }
        Err(_) => not_found(),
    }
}

/// Short links redirect to the post with tracking parameters; unknown codes to the home page.
fn short_link(state: &State, code: &str) -> HttpResponse {
    let Some((id, photo)) = decode_short_code(code) else {
        return redirect(format!("{}/", state.base));
    };
    let post = state.tiktok_post(id);
    redirect(format!(
        "{}{}?_r=1&_t=ZT-8{}&is_from_webapp=1&sender_device=pc&web_id=7311111111111111111",
        state.base,
        post_path(&post, photo),
        short_code(id, photo)
    ))
}

/// Injected transport-level failures; `None` lets the request through.
fn fault(state: &State, key: &str, scenario: TikTokScenario, json_api: bool) -> Option<HttpResponse> {
    let n = state.bump(key);
    let cfg = &state.cfg;
    let empty = || HttpResponse::Ok().content_type("application/json").finish();
    if scenario == TikTokScenario::EmptyBodyAlways {
        return Some(empty());
    }
    if n <= cfg.empty_body_first || (scenario == TikTokScenario::EmptyBodyFirst2 && n <= 2) {
        return Some(empty());
    }
    if n <= cfg.too_many_requests_first || (scenario == TikTokScenario::TooManyRequestsFirst2 && n <= 2) {
        return Some(HttpResponse::TooManyRequests().insert_header(("retry-after", "1")).finish());
    }
    let every = if scenario == TikTokScenario::ServerErrorEvery3rd { 3 } else { cfg.server_error_every };
    if every > 0 && n.is_multiple_of(every) {
        return Some(
            HttpResponse::ServiceUnavailable().content_type("text/html").body("<html>Service Unavailable</html>"),
        );
    }
    if json_api && scenario == TikTokScenario::NonJsonFirst2 && n <= 2 {
        return Some(html("<!DOCTYPE html><html><body>Access Denied</body></html>"));
    }
    None
}

struct ChallengeSpec {
    salt: Vec<u8>,
    target: [u8; 32],
    bound: u64,
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The challenge of a post: find `n <= bound` with `SHA-256(salt || decimal(n)) == target`.
fn challenge_spec(state: &State, id: u64, solvable: bool) -> ChallengeSpec {
    let salt = format!("cova-sim:{}:{id}", state.cfg.seed).into_bytes();
    if solvable {
        let answer = crate::rules::fnv(&salt) % 20_000;
        ChallengeSpec { target: sha256(&[&salt, answer.to_string().as_bytes()]), salt, bound: 100_000 }
    } else {
        ChallengeSpec { target: sha256(&[&salt, b"no integer hashes to this"]), salt, bound: 2_000 }
    }
}

fn challenge_page(spec: &ChallengeSpec) -> HttpResponse {
    let data = json!({"v": {"a": STANDARD.encode(&spec.salt), "c": hex::encode(spec.target)}, "s": spec.bound});
    let cs = STANDARD.encode(data.to_string());
    html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Please wait...</title></head><body>\
         <div class=\"loading\">Please wait...</div>\
         <p id=\"cs\" class=\"csc\" style=\"display:none\">{cs}</p>\
         <p id=\"wci\" class=\"wci\" style=\"display:none\">{CHALLENGE_COOKIE}</p>\
         <script>/* solves the challenge, sets the cookie and reloads */</script></body></html>"
    ))
}

fn challenge_passed(r: &Req, spec: &ChallengeSpec) -> bool {
    let Some(v) = r.cookie(CHALLENGE_COOKIE).and_then(|c| STANDARD.decode(c).ok()) else {
        return false;
    };
    let Ok(v) = serde_json::from_slice::<Value>(&v) else {
        return false;
    };
    let salt_ok = v.pointer("/v/a").and_then(Value::as_str) == Some(STANDARD.encode(&spec.salt).as_str());
    let answer = v.get("d").and_then(Value::as_u64);
    salt_ok && answer.is_some_and(|d| sha256(&[&spec.salt, d.to_string().as_bytes()]) == spec.target)
}

fn post_page(state: &State, r: &Req, id: u64) -> HttpResponse {
    let (scenario, _) = decode_tiktok_id(id);
    if let Some(resp) = fault(state, &format!("page:{id}"), scenario, false) {
        return resp;
    }
    use TikTokScenario as S;
    match scenario {
        S::LoginRedirect => {
            return HttpResponse::Found()
                .insert_header(("location", format!("{}/login?redirect_url=%2F%40_%2Fvideo%2F{id}", state.base)))
                .finish();
        }
        S::UnsolvableChallenge => return challenge_page(&challenge_spec(state, id, false)),
        S::ChallengeRepeats => return challenge_page(&challenge_spec(state, id, true)),
        S::Challenge => {
            let spec = challenge_spec(state, id, true);
            if !challenge_passed(r, &spec) {
                return challenge_page(&spec);
            }
        }
        _ if state.cfg.challenge_all => {
            let spec = challenge_spec(state, id, true);
            if !challenge_passed(r, &spec) {
                return challenge_page(&spec);
            }
        }
        _ => {}
    }
    if scenario == S::WalledPage {
        return html(
            "<!DOCTYPE html><html><head><title>TikTok</title></head><body><div id=\"app\"></div><script src=\"/app.js\"></script></body></html>",
        );
    }
    if let Some(code) = scenario.status_code() {
        return rehydration_page(json!({"statusCode": code, "statusMsg": status_msg(code), "itemInfo": {}}));
    }
    let captcha =
        scenario == S::CaptchaAlways || (scenario == S::CaptchaOnce && state.bump(&format!("captcha:{id}")) == 1);
    if captcha {
        return rehydration_page(json!({"statusCode": 10000, "statusMsg": "captcha required"}));
    }
    let post = state.tiktok_post(id);
    if scenario == S::LegacySigiState {
        return sigi_page(&post);
    }
    let mut item = item_struct(&post);
    if scenario == S::AudienceRestricted
        && let Some(o) = item.as_object_mut()
    {
        o.remove("video");
        o.insert("isContentClassified".into(), Value::Bool(true));
    }
    rehydration_page(
        json!({"statusCode": 0, "statusMsg": "", "itemInfo": {"itemStruct": item}, "shareMeta": {"title": post.metadata.author_name, "desc": post.metadata.description}}),
    )
}

fn status_msg(code: i64) -> &'static str {
    match code {
        10216 => "item is private",
        10222 => "author is private",
        10240 => "friends only",
        10241 => "item deleted",
        10204 => "item doesn't exist",
        10231 => "item is not available in your region",
        _ => "",
    }
}

fn rehydration_page(detail: Value) -> HttpResponse {
    rehydration_page_with("webapp.video-detail", detail)
}

/// A page whose rehydration script holds `detail` under `__DEFAULT_SCOPE__ → <scope>`.
pub(crate) fn rehydration_page_with(scope: &str, detail: Value) -> HttpResponse {
    let data = json!({
        "__DEFAULT_SCOPE__": {"webapp.app-context": {"language": "en", "region": "US"}, scope: detail},
        "__REMOVED__": {}
    });
    html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>TikTok</title></head><body><div id=\"app\"></div>\
         <script id=\"__UNIVERSAL_DATA_FOR_REHYDRATION__\" type=\"application/json\">{}</script></body></html>",
        script_safe(&data)
    ))
}

/// JSON embedded in a script element must not close it early.
fn script_safe(v: &Value) -> String {
    v.to_string().replace("</", "<\\/")
}

fn author_json(post: &SimPost) -> Value {
    let m = &post.metadata;
    json!({
        "id": m.author_id, "uniqueId": m.author_handle, "nickname": m.author_name,
        "avatarThumb": m.author_avatar_url, "avatarMedium": m.author_avatar_url, "avatarLarger": m.author_avatar_url,
        "signature": "", "verified": m.author_verified, "secUid": format!("MS4wLjABAAAA{}", m.author_id),
        "privateAccount": false, "secret": false
    })
}

fn author_stats_json(post: &SimPost) -> Value {
    let m = &post.metadata;
    json!({"followerCount": m.followers, "followingCount": m.following, "heart": m.hearts, "heartCount": m.hearts, "videoCount": m.videos, "diggCount": 0})
}

pub(crate) fn item_struct(post: &SimPost) -> Value {
    let m = &post.metadata;
    let (_, n) = decode_tiktok_id(post.id.parse().unwrap_or(0));
    // Some payloads carry createTime as a decimal string.
    let create_time = if n % 3 == 1 { json!(m.create_time.to_string()) } else { json!(m.create_time) };
    let (t1, t2, t3) = (&m.hashtags[0], &m.hashtags[1], &m.hashtags[2]);
    let mut item = json!({
        "id": post.id, "desc": m.description, "createTime": create_time, "scheduleTime": 0, "textLanguage": m.language,
        "author": author_json(post),
        "authorStats": author_stats_json(post),
        "music": {
            "id": m.sound.id, "title": m.sound.title, "playUrl": m.sound.url, "coverThumb": m.sound.cover_url,
            "coverMedium": m.sound.cover_url, "coverLarge": m.sound.cover_url, "authorName": m.sound.author,
            "original": m.sound.original, "duration": m.sound.duration_s
        },
        "challenges": [
            {"id": t1.1, "title": t1.0, "desc": "", "profileThumb": ""},
            {"id": t2.1, "title": t2.0, "desc": "", "profileThumb": ""}
        ],
        "stats": {
            "diggCount": rounded(m.likes), "shareCount": rounded(m.shares), "commentCount": rounded(m.comments),
            "playCount": rounded(m.views), "collectCount": rounded(m.saves)
        },
        "statsV2": {
            "diggCount": m.likes.to_string(), "shareCount": m.shares.to_string(), "commentCount": m.comments.to_string(),
            "playCount": m.views.to_string(), "collectCount": m.saves.to_string(), "repostCount": m.reposts.to_string()
        },
        "textExtra": [
            {"type": 0, "hashtagName": "", "userUniqueId": m.mention, "userId": "6800000000000000001", "start": 0, "end": 0},
            {"type": 1, "hashtagName": t2.0, "hashtagId": t2.1, "start": 0, "end": 0},
            {"type": 1, "hashtagName": t3.0, "hashtagId": t3.1, "start": 0, "end": 0}
        ],
        "privateItem": false, "secret": false, "forFriend": false, "isContentClassified": false, "isAd": false,
        "itemCommentStatus": if decode_tiktok_id(post.id.parse().unwrap_or(0)).0 == TikTokScenario::CommentsOff { 3 } else { 0 },
        "duetEnabled": true, "stitchEnabled": true, "locationCreated": "US"
    });
    let Some(o) = item.as_object_mut() else {
        return item;
    };
    if m.kind == "photo" {
        let images: Vec<Value> = m
            .cover_urls
            .iter()
            .map(|u| json!({"imageURL": {"urlList": [u]}, "imageWidth": m.width, "imageHeight": m.height}))
            .collect();
        o.insert(
            "imagePost".into(),
            json!({"images": images, "cover": {"imageURL": {"urlList": [m.cover_urls[0]]}, "imageWidth": m.width, "imageHeight": m.height}, "title": ""}),
        );
    } else {
        o.insert(
            "video".into(),
            json!({
                "id": post.id, "height": m.height, "width": m.width, "duration": m.duration_s, "ratio": "540p",
                "cover": m.cover_urls[0], "originCover": m.cover_urls[1], "dynamicCover": m.cover_urls[2],
                "playAddr": format!("/cdn/video/{}.mp4", post.id), "format": "mp4"
            }),
        );
    }
    item
}

/// Older page layout: author is a plain string, the user lives in `UserModule`, createTime is a string.
fn sigi_page(post: &SimPost) -> HttpResponse {
    let m = &post.metadata;
    let mut item = item_struct(post);
    if let Some(o) = item.as_object_mut() {
        o.insert("author".into(), json!(m.author_handle));
        o.insert("createTime".into(), json!(m.create_time.to_string()));
        o.remove("authorStats");
        o.remove("statsV2");
    }
    let state = json!({
        "AppContext": {"appContext": {"language": "en", "region": "US"}},
        "VideoPage": {"statusCode": 0, "statusMsg": ""},
        "ItemModule": {post.id.clone(): item},
        "UserModule": {"users": {m.author_handle.clone(): author_json(post)}, "stats": {m.author_handle.clone(): author_stats_json(post)}}
    });
    html(format!(
        "<!DOCTYPE html><html><head><title>TikTok</title></head><body><div id=\"main\"></div>\
         <script id=\"SIGI_STATE\" type=\"application/json\">{}</script></body></html>",
        script_safe(&state)
    ))
}

fn oembed(state: &State, r: &Req) -> HttpResponse {
    let bad = || {
        HttpResponse::BadRequest()
            .json(json!({"code": 400, "message": "Something went wrong", "status_msg": "Something went wrong"}))
    };
    let Some(id) = r
        .param("url")
        .and_then(|u| url::Url::parse(u).ok())
        .and_then(|u| u.path_segments()?.rfind(|s| !s.is_empty()).map(str::to_string))
        .and_then(|last| last.trim_end_matches(".html").parse::<u64>().ok())
    else {
        return bad();
    };
    let (scenario, _) = decode_tiktok_id(id);
    if let Some(resp) = fault(state, &format!("oembed:{id}"), scenario, true) {
        return resp;
    }
    if scenario.status_code().is_some() {
        return bad();
    }
    let post = state.tiktok_post(id);
    let m = &post.metadata;
    HttpResponse::Ok().json(json!({
        "version": "1.0", "type": "video", "title": m.description,
        "author_url": format!("https://www.tiktok.com/@{}", m.author_handle), "author_name": m.author_name,
        "width": "100%", "height": "100%",
        "html": format!("<blockquote class=\"tiktok-embed\" cite=\"https://www.tiktok.com/@{}/video/{}\" data-video-id=\"{}\"></blockquote>", m.author_handle, post.id, post.id),
        "thumbnail_width": 720, "thumbnail_height": 1280, "thumbnail_url": m.cover_urls[0],
        "provider_url": "https://www.tiktok.com", "provider_name": "TikTok",
        "author_unique_id": m.author_handle, "embed_product_id": post.id, "embed_type": "video"
    }))
}

fn comment_json(c: &SimComment, post_id: &str, parent: Option<&str>) -> Value {
    let user = match &c.author_handle {
        Some(handle) => json!({
            "uid": c.author_id, "unique_id": handle, "nickname": c.author_name, "sec_uid": format!("MS4wLjABAAAA{}", c.author_id),
            "avatar_thumb": {"uri": format!("avt/{}", c.author_id), "url_list": [c.avatar_url], "width": 720, "height": 720},
            "custom_verify": "", "region": "US"
        }),
        None => {
            json!({"uid": c.author_id, "unique_id": null, "nickname": null, "sec_uid": null, "avatar_thumb": null})
        }
    };
    let images: Value = if c.images.is_empty() {
        Value::Null
    } else {
        c.images
            .iter()
            .map(|i| {
                json!({"origin_url": {"uri": "img", "url_list": [i.url], "width": i.width, "height": i.height},
                       "crop_url": {"uri": "img", "url_list": [i.url], "width": i.width, "height": i.height}})
            })
            .collect()
    };
    let preview: Value = if c.replies.is_empty() {
        Value::Null
    } else {
        c.replies.iter().take(2).map(|r| comment_json(r, post_id, Some(&c.id))).collect()
    };
    // Some comments carry create_time as a string.
    let create_time = if c.likes % 7 == 3 { json!(c.create_time.to_string()) } else { json!(c.create_time) };
    json!({
        "cid": c.id, "aweme_id": post_id, "text": c.text, "create_time": create_time, "digg_count": c.likes,
        "reply_comment_total": c.replies.len(), "reply_id": parent.unwrap_or("0"), "reply_to_reply_id": "0",
        "author_pin": c.pinned, "is_author_digged": c.liked_by_author, "comment_language": c.language,
        "image_list": images, "label_list": null, "text_extra": [], "status": 1, "stick_position": if c.pinned { 1 } else { 0 },
        "share_info": {"url": format!("https://www.tiktok.com/@_/video/{post_id}?comment_id={}", c.id), "title": c.text},
        "reply_comment": if parent.is_some() { Value::Null } else { preview },
        "user": user, "collect_stat": 0, "is_comment_translatable": true
    })
}

fn envelope(comments: Value, cursor: u64, has_more: bool, total: u64) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "status_code": 0, "status_msg": "", "comments": comments, "cursor": cursor, "has_more": u8::from(has_more),
        "total": total, "has_filtered_comments": 0, "alias_comment_deleted": false,
        "extra": {"now": 1_700_000_000_000u64, "fatal_item_ids": null}, "log_pb": {"impr_id": "20231115000000SIM"}, "reply_style": 2
    }))
}

fn api_status(code: i64, msg: &str) -> HttpResponse {
    HttpResponse::Ok()
        .json(json!({"status_code": code, "status_msg": msg, "comments": null, "cursor": 0, "has_more": 0, "total": 0}))
}

fn paging(r: &Req) -> (u64, u64) {
    let cursor = r.param("cursor").and_then(|c| c.parse().ok()).unwrap_or(0);
    let count = r.param("count").and_then(|c| c.parse().ok()).unwrap_or(20u64).clamp(1, 50);
    (cursor, count)
}

/// Scenario answers shared by both comment endpoints.
fn api_gate(state: &State, r: &Req, key: &str, scenario: TikTokScenario) -> Option<HttpResponse> {
    if r.param("aid") != Some("1988") {
        return Some(api_status(5, "Invalid parameters"));
    }
    if let Some(resp) = fault(state, key, scenario, true) {
        return Some(resp);
    }
    if let Some(code) = scenario.status_code() {
        return Some(api_status(code, status_msg(code)));
    }
    if scenario == TikTokScenario::CaptchaAlways {
        return Some(api_status(10000, "captcha required"));
    }
    None
}

/// Top-level pages: at most `tiktok_page_max` per page, some shorter than asked, some overlapping
/// the previous page, and (posts with an even count) one `has_more: 0` in the middle.
fn comment_list(state: &State, r: &Req) -> HttpResponse {
    let Some(id) = r.param("aweme_id").and_then(|a| a.parse::<u64>().ok()) else {
        return api_status(5, "Invalid parameters");
    };
    let (scenario, n) = decode_tiktok_id(id);
    if let Some(resp) = api_gate(state, r, &format!("comments:{id}"), scenario) {
        return resp;
    }
    let post = state.tiktok_post(id);
    let top = post.comments.len() as u64;
    let (cursor, count) = paging(r);
    if cursor >= top {
        return envelope(Value::Null, cursor, false, n);
    }
    let mut serve = count.min(u64::from(state.cfg.tiktok_page_max.max(1)));
    if (cursor / 7) % 4 == 1 {
        serve = serve.saturating_sub(1 + cursor % 5).max(1);
    }
    let end = (cursor + serve).min(top);
    let overlap =
        if end < top && end - cursor > 3 && crate::rules::fnv(&cursor.to_le_bytes()).is_multiple_of(3) { 2 } else { 0 };
    // Posts of an even count end their first listing early, as TikTok's sometimes do; a post of
    // none (whose comments a test posts at chosen times) lists them whole.
    let glitch = n % 2 == 0 && n > 0 && cursor <= top / 2 && top / 2 < end && end < top;
    let items: Vec<Value> =
        post.comments[cursor as usize..end as usize].iter().map(|c| comment_json(c, &post.id, None)).collect();
    envelope(Value::Array(items), end - overlap, end < top && !glitch, n)
}

fn reply_list(state: &State, r: &Req) -> HttpResponse {
    let Some(id) = r.param("item_id").and_then(|a| a.parse::<u64>().ok()) else {
        return api_status(5, "Invalid parameters");
    };
    let (scenario, _) = decode_tiktok_id(id);
    if let Some(resp) = api_gate(state, r, &format!("replies:{id}"), scenario) {
        return resp;
    }
    let post = state.tiktok_post(id);
    // Like TikTok, a wrong item_id or an unknown comment simply yields nothing.
    let Some(parent) = r.param("comment_id").and_then(|cid| post.comments.iter().find(|c| c.id == cid)) else {
        return envelope(Value::Null, 0, false, 0);
    };
    let total = parent.replies.len() as u64;
    let (cursor, count) = paging(r);
    if cursor >= total {
        return envelope(Value::Null, cursor, false, total);
    }
    let serve = count.min(u64::from(state.cfg.tiktok_page_max.max(1)));
    let end = (cursor + serve).min(total);
    let overlap = u64::from(end < total && end - cursor > 3 && (cursor / 10) % 2 == 1);
    let items: Vec<Value> = parent.replies[cursor as usize..end as usize]
        .iter()
        .map(|c| comment_json(c, &post.id, Some(&parent.id)))
        .collect();
    envelope(Value::Array(items), end - overlap, end < total, total)
}
