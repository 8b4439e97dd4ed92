//! Instagram under `/ig/`, in the shapes of `platforms.md`: a post's page (with the LSD token
//! and the `csrftoken` cookie), the GraphQL endpoint (the logged-out post query, the comment
//! and reply connections), and the REST comment pages of a logged-in session. A visitor
//! without a session sees only the first [`VISITOR_LIMIT`] top-level comments and no replies;
//! pages repeat the previous page's last comment, as Instagram's do. Walls by scenario
//! (see [`InstagramScenario`]).

use crate::rules::{InstagramScenario, decode_instagram_pk, pk_of};
use crate::server::{Req, State};
use crate::truth::{SimComment, SimPost};
use actix_web::HttpResponse;
use serde_json::{Value, json};

/// The web app id Instagram's pages send.
pub const APP_ID: &str = "936619743392459";
/// The LSD token of the simulated pages.
pub const LSD: &str = "simLSDtoken";
/// The session cookie value the simulator accepts; `checkpointed` is a session under check.
pub const SESSION: &str = "sim-session";
pub const CHECKPOINTED_SESSION: &str = "checkpointed";
/// Top-level comments a visitor without a session sees.
pub const VISITOR_LIMIT: usize = 15;
/// Comments per GraphQL page at most.
pub const PAGE: u64 = 12;
pub const DOC_POST_LOGGED_OUT: &str = "27130156389949648";
pub const DOC_POST_SESSION: &str = "8845758582119845";
/// Comments per REST page of a session.
pub const REST_PAGE: usize = 20;
pub const DOC_COMMENTS: &str = "6974885689225067";
pub const DOC_REPLIES: &str = "7171917939589632";
pub const DOC_PROFILE_REELS: &str = "7845543455542541";

fn fail(status: u16, message: &str) -> HttpResponse {
    let code = actix_web::http::StatusCode::from_u16(status).unwrap_or(actix_web::http::StatusCode::BAD_REQUEST);
    HttpResponse::build(code).json(json!({"message": message, "status": "fail"}))
}

fn login_redirect(next: &str) -> HttpResponse {
    HttpResponse::Found().insert_header(("location", format!("/accounts/login/?next={next}"))).finish()
}

pub(crate) fn handle(state: &State, r: &Req, path: &str) -> HttpResponse {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match (r.method.as_str(), segments.as_slice()) {
        ("POST", ["graphql", "query"]) => graphql(state, r),
        ("GET", ["api", "v1", "media", pk, "comments"]) => rest_comments(state, r, pk, None),
        ("GET", ["api", "v1", "media", pk, "comments", parent, "child_comments"]) => {
            rest_comments(state, r, pk, Some(parent))
        }
        ("GET", ["api", "v1", "users", "web_profile_info"]) => {
            if r.headers.get("x-ig-app-id").map(String::as_str) != Some(APP_ID) {
                return fail(400, "useragent mismatch");
            }
            crate::creators::instagram_profile(state, r.param("username").unwrap_or_default())
        }
        // A share link leads to the post it shares (here its code is the post's own).
        ("GET", ["share", kind @ ("reel" | "p"), code]) => {
            HttpResponse::Found().insert_header(("location", format!("/ig/{kind}/{code}/"))).finish()
        }
        ("GET", ["share", ..]) => fail(404, "Page Not Found"),
        ("GET", [.., "reel" | "reels" | "p" | "tv", code]) if pk_of(code).is_some() => page(state, code),
        ("GET", [_user] | [_user, "reels"]) => lsd_page(),
        _ => fail(404, "Page Not Found"),
    }
}

/// A post's HTML page: the LSD token and the CSRF cookie the GraphQL endpoint wants.
fn page(state: &State, code: &str) -> HttpResponse {
    let Some(pk) = pk_of(code) else { return fail(404, "Page Not Found") };
    let (scenario, _) = decode_instagram_pk(pk);
    match scenario {
        InstagramScenario::LoginWall => return login_redirect(&format!("/reel/{code}/")),
        InstagramScenario::Deleted => {
            return HttpResponse::NotFound().body("<html><title>Page not found</title></html>");
        }
        InstagramScenario::Checkpoint => return fail(400, "checkpoint_required"),
        _ => {}
    }
    let _ = state.instagram_post(pk);
    lsd_page()
}

/// A page of the web app: the LSD token and the CSRF cookie.
fn lsd_page() -> HttpResponse {
    HttpResponse::Ok()
        .insert_header(("set-cookie", "csrftoken=simcsrf; Path=/"))
        .content_type("text/html; charset=utf-8")
        .body(format!(
            "<html><head><title>Instagram</title></head><body><script>requireLazy([\"LSD\",[],{{\"token\":\"{LSD}\"}},323]);</script></body></html>"
        ))
}

fn session(r: &Req) -> Option<&str> {
    r.cookie("sessionid").filter(|s| !s.is_empty())
}

/// The checks every GraphQL and REST call passes before its data: the headers a browser's page
/// sends, the session, and the post's walls. `Some` answer is the wall.
fn walls(state: &State, r: &Req, pk: u64, graphql: bool) -> Option<HttpResponse> {
    if r.headers.get("x-ig-app-id").map(String::as_str) != Some(APP_ID) {
        return Some(fail(400, "useragent mismatch"));
    }
    if session(r) == Some(CHECKPOINTED_SESSION) {
        return Some(fail(400, "checkpoint_required"));
    }
    let (scenario, _) = decode_instagram_pk(pk);
    match scenario {
        InstagramScenario::LoginWall => Some(login_redirect("/")),
        InstagramScenario::Checkpoint => Some(fail(400, "checkpoint_required")),
        InstagramScenario::RateLimitedFirst2 if graphql && state.bump(&format!("ig:{pk}")) <= 2 => {
            Some(fail(429, "Please wait a few minutes before you try again."))
        }
        _ => None,
    }
}

fn graphql(state: &State, r: &Req) -> HttpResponse {
    let form: Vec<(String, String)> = url::form_urlencoded::parse(&r.body).into_owned().collect();
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    if r.headers.get("x-fb-lsd").map(String::as_str) != Some(LSD) || field("lsd") != Some(LSD) {
        return fail(400, "Invalid LSD token");
    }
    let Some(vars) = field("variables").and_then(|v| serde_json::from_str::<Value>(v).ok()) else {
        return fail(400, "variables are not JSON");
    };
    if field("doc_id") == Some(DOC_PROFILE_REELS) {
        if r.headers.get("x-ig-app-id").map(String::as_str) != Some(APP_ID) {
            return fail(400, "useragent mismatch");
        }
        return crate::creators::instagram_reels(state, &vars);
    }
    if field("doc_id") == Some(DOC_POST_SESSION) {
        return session_post(state, r, &vars);
    }
    let Some(pk) = vars["media_id"].as_str().and_then(|p| p.parse::<u64>().ok()) else {
        return fail(400, "media_id is missing");
    };
    if let Some(wall) = walls(state, r, pk, true) {
        return wall;
    }
    let (scenario, _) = decode_instagram_pk(pk);
    let post = state.instagram_post(pk);
    match field("doc_id") {
        Some(DOC_POST_LOGGED_OUT) => HttpResponse::Ok().json(match scenario {
            InstagramScenario::UnknownShape => json!({"data": {"xdt_media_v2": {"items": []}}}),
            InstagramScenario::Deleted => json!({"data": {"xig_polaris_media": null}}),
            InstagramScenario::Private => json!({"data": {"xig_polaris_media": {"if_not_gated_logged_out": null}}}),
            _ => json!({"data": {"xig_polaris_media": {"if_not_gated_logged_out": media(&post, pk)}}}),
        }),
        Some(DOC_COMMENTS) => {
            let visible = if session(r) == Some(SESSION) { post.comments.len() } else { VISITOR_LIMIT };
            let tops: Vec<&SimComment> = post.comments.iter().take(visible).collect();
            // Instagram's web answers about a dozen comments a page, whatever `first` asks.
            let size = vars["first"].as_u64().unwrap_or(12).clamp(1, PAGE);
            let (page, next) = slice(&tops, vars["after"].as_str(), size);
            HttpResponse::Ok().json(connection(page.iter().map(|c| node(c, None)).collect(), next))
        }
        Some(DOC_REPLIES) => {
            let parent = vars["parent_comment_id"].as_str().unwrap_or_default();
            // A visitor sees no replies.
            let replies: Vec<&SimComment> = match post.comments.iter().find(|c| c.id == parent) {
                Some(c) if session(r) == Some(SESSION) => c.replies.iter().collect(),
                _ => Vec::new(),
            };
            let (page, next) =
                slice(&replies, vars["after"].as_str(), vars["first"].as_u64().unwrap_or(50).clamp(1, 50));
            HttpResponse::Ok().json(connection(page.iter().map(|c| node(c, Some(parent))).collect(), next))
        }
        _ => fail(400, "Unknown doc_id"),
    }
}

/// A page of `size` items after the cursor (an offset, `o<n>`): the page repeats the last item
/// of the page before it, as Instagram's pages do, so a reader must deduplicate.
fn slice<'a>(items: &[&'a SimComment], after: Option<&str>, size: u64) -> (Vec<&'a SimComment>, Option<String>) {
    let start = after.and_then(|a| a.strip_prefix('o')).and_then(|o| o.parse::<usize>().ok()).unwrap_or(0);
    let from = start.saturating_sub(usize::from(start > 0)).min(items.len());
    let end = (start + size as usize).min(items.len());
    let next = (end < items.len()).then(|| format!("o{end}"));
    (items[from..end].to_vec(), next)
}

fn connection(nodes: Vec<Value>, next: Option<String>) -> Value {
    json!({"data": {"xdt_api__v1__media__media_id__comments__connection": {
        "edges": nodes.into_iter().map(|n| json!({"node": n})).collect::<Vec<_>>(),
        "page_info": {"has_next_page": next.is_some(), "end_cursor": next},
    }}})
}

/// A comment in the mobile API's shape.
fn node(c: &SimComment, parent: Option<&str>) -> Value {
    json!({
        "pk": c.id, "text": c.text, "created_at": c.create_time, "comment_like_count": c.likes,
        "child_comment_count": c.replies.len(), "parent_comment_id": parent, "type": if parent.is_some() { 2 } else { 0 },
        "liked_by_media_owner": c.liked_by_author,
        "user": {"pk": c.author_id, "id": c.author_id, "username": c.author_handle, "full_name": c.author_name,
                 "profile_pic_url": c.avatar_url, "is_verified": false},
    })
}

/// The post in the shortcode-media shape.
fn media(post: &SimPost, pk: u64) -> Value {
    let m = &post.metadata;
    let (scenario, _) = decode_instagram_pk(pk);
    let top = post.comments.len();
    json!({
        "id": pk.to_string(), "shortcode": post.id, "is_video": true,
        "video_play_count": m.views, "video_view_count": m.views,
        "taken_at_timestamp": m.create_time,
        "edge_media_preview_like": {"count": m.likes},
        "edge_media_to_comment": {"count": m.comments},
        "edge_media_to_parent_comment": {"count": top},
        "edge_media_to_caption": {"edges": [{"node": {"text": m.description}}]},
        "display_url": m.cover_urls.first(),
        "comments_disabled": scenario == InstagramScenario::CommentsOff,
        "owner": {"id": m.author_id, "username": m.author_handle, "full_name": m.author_name,
                  "profile_pic_url": m.author_avatar_url, "is_verified": m.author_verified, "is_private": false},
    })
}

/// The post query of a logged-in session (by shortcode): the post in the shortcode-media shape,
/// gated ones included; `xdt_shortcode_media: null` without a session.
fn session_post(state: &State, r: &Req, vars: &Value) -> HttpResponse {
    let Some(pk) = vars["shortcode"].as_str().and_then(pk_of) else {
        return fail(400, "shortcode is missing");
    };
    if let Some(wall) = walls(state, r, pk, true) {
        return wall;
    }
    let (scenario, _) = decode_instagram_pk(pk);
    if session(r) != Some(SESSION) || scenario == InstagramScenario::Deleted {
        return HttpResponse::Ok().json(json!({"data": {"xdt_shortcode_media": null}}));
    }
    HttpResponse::Ok().json(json!({"data": {"xdt_shortcode_media": media(&state.instagram_post(pk), pk)}}))
}

/// Where a session's first comment page starts: the top, or a third of the way down
/// (`Headload`), the comments before it coming by `min_id`.
fn first_page_at(scenario: InstagramScenario, tops: usize) -> usize {
    if scenario == InstagramScenario::Headload { tops / 3 } else { 0 }
}

/// The REST pages of a logged-in session. Comments: the first page (no cursor), then older ones
/// by `max_id` (`has_more_comments`, `next_max_id`) and the ones before the first page by
/// `min_id` (`has_more_headload_comments`, `next_min_id`); pages repeat a comment of the page
/// before. Replies by `max_id`.
fn rest_comments(state: &State, r: &Req, pk: &str, parent: Option<&str>) -> HttpResponse {
    let Ok(pk) = pk.parse::<u64>() else { return fail(404, "Not Found") };
    if let Some(wall) = walls(state, r, pk, false) {
        return wall;
    }
    if session(r) != Some(SESSION) {
        return fail(403, "login_required");
    }
    let post = state.instagram_post(pk);
    let (scenario, _) = decode_instagram_pk(pk);
    match parent {
        None => {
            let tops: Vec<&SimComment> = post.comments.iter().collect();
            let offset = |cursor: Option<&str>, prefix: char| {
                cursor.and_then(|c| c.strip_prefix(prefix)).and_then(|o| o.parse::<usize>().ok())
            };
            // The range of this page, with a comment of the page before repeated.
            let (from, to) = match (offset(r.param("max_id"), 'o'), offset(r.param("min_id"), 'n')) {
                (Some(at), _) => (at.saturating_sub(1), at + REST_PAGE),
                (None, Some(before)) => (before.saturating_sub(REST_PAGE), before + 1),
                (None, None) => {
                    let first = first_page_at(scenario, tops.len());
                    (first, first + REST_PAGE)
                }
            };
            let (from, to) = (from.min(tops.len()), to.min(tops.len()));
            let mut older = (to < tops.len()).then(|| format!("o{to}"));
            if scenario == InstagramScenario::StuckCursor
                && let Some(asked) = r.param("max_id")
                && offset(Some(asked), 'o').is_some_and(|at| at >= 2 * REST_PAGE)
            {
                // The cursor asked comes back as the next one, more still said to be there.
                older = Some(asked.to_owned());
            }
            // The headload direction only from the first page and its own pages.
            let newer = (r.param("max_id").is_none() && from > 0).then(|| format!("n{from}"));
            HttpResponse::Ok().json(json!({
                "comments": tops[from..to].iter().map(|c| node(c, None)).collect::<Vec<_>>(),
                "comment_count": post.metadata.comments,
                "has_more_comments": older.is_some(), "next_max_id": older,
                "has_more_headload_comments": newer.is_some(), "next_min_id": newer, "status": "ok",
            }))
        }
        Some(parent) => {
            let replies: Vec<&SimComment> =
                post.comments.iter().find(|c| c.id == parent).map(|c| c.replies.iter().collect()).unwrap_or_default();
            let (page, next) = slice(&replies, r.param("max_id"), 10);
            HttpResponse::Ok().json(json!({
                "child_comments": page.iter().map(|c| node(c, Some(parent))).collect::<Vec<_>>(),
                "has_more_tail_child_comments": next.is_some(), "next_max_child_cursor": next, "status": "ok",
            }))
        }
    }
}
