//! Instagram's answers read into cova's shapes: the logged-out post query, the comment and
//! reply connections (GraphQL) and the REST comment pages, and the walls an answer can be.
//! An answer of no known shape is a `parse_error`, never an empty post.

use crate::PlatformError;
use crate::json::{bool_of, i64_of, str_of, u64_of};
use crate::model::{Comment, CommentAuthor, rfc3339_from_unix};
use serde_json::Value;

/// A post as Instagram's shortcode-media shape has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    pub pk: String,
    pub shortcode: String,
    pub caption: String,
    pub owner: Owner,
    /// Unix seconds.
    pub taken_at: Option<i64>,
    pub is_video: bool,
    pub plays: Option<u64>,
    pub likes: Option<u64>,
    /// Comments and replies, as the post counts them.
    pub comments: Option<u64>,
    /// Top-level comments only.
    pub top_level: Option<u64>,
    pub display_url: Option<String>,
    pub comments_disabled: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    pub id: String,
    pub username: Option<String>,
    pub full_name: Option<String>,
    pub avatar_url: Option<String>,
    pub verified: bool,
    pub private: bool,
}

/// One page of a comment or reply connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub comments: Vec<Comment>,
    /// Where the next page starts; `None` on the last one.
    pub next: Option<String>,
}

/// Why Instagram did not answer with data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wall {
    /// Log in to see this: a redirect to the login page, `login_required`.
    Login,
    /// The session or address is being checked (`checkpoint_required`, `challenge_required`,
    /// `feedback_required`, a bare `Not Found` from a comments endpoint).
    Checkpoint,
    /// Too many requests (429, "Please wait a few minutes").
    RateLimited,
    /// "Something went wrong": the endpoint is broken for now.
    Broken,
}

/// The wall an answer is, if any: its status, its body and where it redirects.
pub fn wall(status: u16, body: &str, location: Option<&str>) -> Option<Wall> {
    let lower = body.to_ascii_lowercase();
    if let Some(to) = location
        && (to.contains("/accounts/login") || to == "/" || to.ends_with("instagram.com/"))
    {
        return Some(Wall::Login);
    }
    if location.is_some_and(|to| to.contains("/challenge/")) {
        return Some(Wall::Checkpoint);
    }
    if status == 429 || lower.contains("please wait a few minutes") {
        return Some(Wall::RateLimited);
    }
    if ["checkpoint_required", "challenge_required", "feedback_required"].iter().any(|k| lower.contains(k))
        || (status == 404 && body.trim() == "Not Found")
    {
        return Some(Wall::Checkpoint);
    }
    if lower.contains("login_required") {
        return Some(Wall::Login);
    }
    if lower.contains("\"status\":\"fail\"") && lower.contains("something went wrong") {
        return Some(Wall::Broken);
    }
    None
}

fn unknown(what: &str) -> PlatformError {
    PlatformError::Parse(format!("Instagram answered {what} in a shape cova does not know; try again later"))
}

/// The logged-out post query's answer: the post, or `None` when Instagram gates it (private,
/// age-restricted, or shown to logged-in viewers only).
pub fn logged_out_post(answer: &Value) -> Result<Option<Post>, PlatformError> {
    let media = answer.pointer("/data/xig_polaris_media").ok_or_else(|| unknown("the post"))?;
    match media.get("if_not_gated_logged_out") {
        Some(Value::Null) | None => Ok(None),
        Some(m) => post(m).map(Some),
    }
}

/// The session's post query's answer: the post, or `None` when Instagram does not show it to
/// the session either (`xdt_shortcode_media` null: the session is logged out, or the post is
/// not shown to it).
pub fn logged_in_post(answer: &Value) -> Result<Option<Post>, PlatformError> {
    let data = answer.get("data").ok_or_else(|| unknown("the post"))?;
    match data.get("xdt_shortcode_media") {
        Some(Value::Null) | None => Ok(None),
        Some(m) => post(m).map(Some),
    }
}

/// A post in the shortcode-media shape.
pub fn post(m: &Value) -> Result<Post, PlatformError> {
    let pk = m.get("id").and_then(str_of).ok_or_else(|| unknown("the post"))?;
    let shortcode = m.get("shortcode").and_then(str_of).ok_or_else(|| unknown("the post"))?;
    let o = m.get("owner").ok_or_else(|| unknown("the post"))?;
    Ok(Post {
        pk,
        shortcode,
        caption: m.pointer("/edge_media_to_caption/edges/0/node/text").and_then(str_of).unwrap_or_default(),
        owner: Owner {
            id: o.get("id").and_then(str_of).ok_or_else(|| unknown("the post's author"))?,
            username: o.get("username").and_then(str_of),
            full_name: o.get("full_name").and_then(str_of).filter(|n| !n.is_empty()),
            avatar_url: o.get("profile_pic_url").and_then(str_of),
            verified: o.get("is_verified").and_then(bool_of).unwrap_or(false),
            private: o.get("is_private").and_then(bool_of).unwrap_or(false),
        },
        taken_at: m.get("taken_at_timestamp").and_then(i64_of),
        is_video: m.get("is_video").and_then(bool_of).unwrap_or(false),
        plays: m.get("video_play_count").or_else(|| m.get("video_view_count")).and_then(u64_of),
        likes: m.pointer("/edge_media_preview_like/count").and_then(u64_of),
        comments: m.pointer("/edge_media_to_comment/count").and_then(u64_of),
        top_level: m.pointer("/edge_media_to_parent_comment/count").and_then(u64_of),
        display_url: m.get("display_url").and_then(str_of),
        comments_disabled: m.get("comments_disabled").and_then(bool_of).unwrap_or(false),
    })
}

/// A comment node (the mobile API's shape, on GraphQL and REST alike); `parent` for a reply;
/// `keep_raw` keeps the node beside it.
pub fn comment(node: &Value, parent: Option<&str>, keep_raw: bool) -> Result<Comment, PlatformError> {
    let id = node.get("pk").and_then(str_of).ok_or_else(|| unknown("a comment"))?;
    let user = node.get("user").ok_or_else(|| unknown("a comment"))?;
    let parent_id = parent.map(str::to_owned).or_else(|| node.get("parent_comment_id").and_then(str_of));
    Ok(Comment {
        id,
        text: node.get("text").and_then(str_of).unwrap_or_default(),
        author: CommentAuthor {
            id: user.get("pk").or_else(|| user.get("id")).and_then(str_of).unwrap_or_default(),
            handle: user.get("username").and_then(str_of),
            name: user.get("full_name").and_then(str_of).filter(|n| !n.is_empty()),
            avatar_url: user.get("profile_pic_url").and_then(str_of),
            avatar: None,
        },
        likes: node.get("comment_like_count").and_then(u64_of).unwrap_or(0),
        // A reply has none of its own; a top-level comment says how many it has.
        reply_count: if parent_id.is_some() {
            0
        } else {
            node.get("child_comment_count").and_then(u64_of).unwrap_or(0)
        },
        created_at: rfc3339_from_unix(node.get("created_at").and_then(i64_of).unwrap_or(0)),
        language: None,
        pinned: false,
        // `has_liked_comment` is the viewer's like, not the author's: only this flag counts.
        liked_by_author: node.get("liked_by_media_owner").and_then(bool_of).unwrap_or(false),
        media: Vec::new(),
        parent_id,
        replies: Vec::new(),
        raw: keep_raw.then(|| node.clone()),
    })
}

/// A page of the GraphQL comment connection (or, with `parent`, of a comment's replies).
pub fn connection(answer: &Value, parent: Option<&str>, keep_raw: bool) -> Result<Page, PlatformError> {
    let conn = answer
        .pointer("/data/xdt_api__v1__media__media_id__comments__connection")
        .or_else(|| {
            answer
                .pointer("/data/xdt_api__v1__media__media_id__comments__parent_comment_id__child_comments__connection")
        })
        .ok_or_else(|| unknown("the comments"))?;
    let edges = conn.get("edges").and_then(Value::as_array).ok_or_else(|| unknown("the comments"))?;
    let comments = edges
        .iter()
        .map(|e| e.get("node").ok_or_else(|| unknown("a comment")).and_then(|n| comment(n, parent, keep_raw)))
        .collect::<Result<Vec<_>, _>>()?;
    let info = conn.get("page_info");
    let more = info.and_then(|i| i.get("has_next_page")).and_then(bool_of).unwrap_or(false);
    let next = info.and_then(|i| i.get("end_cursor")).and_then(str_of).filter(|c| more && !c.is_empty());
    Ok(Page { comments, next })
}

/// A cursor of a REST answer, while its flag says there is more.
fn rest_cursor(answer: &Value, flag: &str, cursor: &str) -> Option<String> {
    let more = answer.get(flag).and_then(bool_of).unwrap_or(false);
    answer.get(cursor).and_then(str_of).filter(|c| more && !c.is_empty())
}

/// A page of a post's REST comments with a session, and where each of its two paging
/// directions goes on: `older` (`max_id=<next_max_id>` while `has_more_comments`, the usual
/// case after a post's first page) and `newer` (`min_id=<next_min_id>` while
/// `has_more_headload_comments`). One flag false does not end the other direction.
#[derive(Debug, Clone, PartialEq)]
pub struct RestComments {
    pub comments: Vec<Comment>,
    pub older: Option<String>,
    pub newer: Option<String>,
}

pub fn rest_comments(answer: &Value, keep_raw: bool) -> Result<RestComments, PlatformError> {
    let items = answer.get("comments").and_then(Value::as_array).ok_or_else(|| unknown("the comments"))?;
    let comments = items.iter().map(|n| comment(n, None, keep_raw)).collect::<Result<Vec<_>, _>>()?;
    Ok(RestComments {
        comments,
        older: rest_cursor(answer, "has_more_comments", "next_max_id"),
        newer: rest_cursor(answer, "has_more_headload_comments", "next_min_id"),
    })
}

/// A page of a comment's REST replies (`child_comments`, `next_max_child_cursor`) with a
/// session.
pub fn rest_replies(answer: &Value, parent: &str, keep_raw: bool) -> Result<Page, PlatformError> {
    let items = answer.get("child_comments").and_then(Value::as_array).ok_or_else(|| unknown("the comments"))?;
    let comments = items.iter().map(|n| comment(n, Some(parent), keep_raw)).collect::<Result<Vec<_>, _>>()?;
    Ok(Page { comments, next: rest_cursor(answer, "has_more_tail_child_comments", "next_max_child_cursor") })
}

/// A profile as `web_profile_info` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub id: String,
    pub username: String,
    pub full_name: Option<String>,
    pub avatar_url: Option<String>,
    pub private: bool,
    pub verified: bool,
    pub followers: Option<u64>,
    pub posts: Option<u64>,
}

/// `web_profile_info`'s answer: the profile, or `None` when there is no such account.
pub fn profile(answer: &Value) -> Result<Option<Profile>, PlatformError> {
    let data = answer.get("data").ok_or_else(|| unknown("the profile"))?;
    let user = match data.get("user") {
        None | Some(Value::Null) => return Ok(None),
        Some(u) => u,
    };
    Ok(Some(Profile {
        id: user.get("id").and_then(str_of).ok_or_else(|| unknown("the profile"))?,
        username: user.get("username").and_then(str_of).ok_or_else(|| unknown("the profile"))?,
        full_name: user.get("full_name").and_then(str_of).filter(|n| !n.is_empty()),
        avatar_url: user.get("profile_pic_url_hd").or_else(|| user.get("profile_pic_url")).and_then(str_of),
        private: user.get("is_private").and_then(bool_of).unwrap_or(false),
        verified: user.get("is_verified").and_then(bool_of).unwrap_or(false),
        followers: user.pointer("/edge_followed_by/count").and_then(u64_of),
        posts: user.pointer("/edge_owner_to_timeline_media/count").and_then(u64_of),
    }))
}

/// A reel of a profile's reels tab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reel {
    pub shortcode: String,
    pub caption: Option<String>,
    /// Unix seconds.
    pub taken_at: Option<i64>,
    /// Pinned to the top of the tab: listed first whatever its age.
    pub pinned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReelsPage {
    pub reels: Vec<Reel>,
    pub next: Option<String>,
}

/// A page of the profile reels connection.
pub fn reels_page(answer: &Value) -> Result<ReelsPage, PlatformError> {
    let conn = answer.pointer("/data/xdt_api__v1__clips__user__connection_v2").ok_or_else(|| unknown("the reels"))?;
    let edges = conn.get("edges").and_then(Value::as_array).ok_or_else(|| unknown("the reels"))?;
    let reels = edges
        .iter()
        .map(|e| {
            let m = e.pointer("/node/media").ok_or_else(|| unknown("a reel"))?;
            let pinned = ["clips_tab_pinned_user_ids", "timeline_pinned_user_ids"]
                .iter()
                .any(|k| m.get(*k).and_then(Value::as_array).is_some_and(|ids| !ids.is_empty()));
            Ok(Reel {
                shortcode: m.get("code").and_then(str_of).ok_or_else(|| unknown("a reel"))?,
                caption: m.pointer("/caption/text").and_then(str_of).filter(|c| !c.is_empty()),
                taken_at: m.get("taken_at").and_then(i64_of),
                pinned,
            })
        })
        .collect::<Result<Vec<_>, PlatformError>>()?;
    let info = conn.get("page_info");
    let more = info.and_then(|i| i.get("has_next_page")).and_then(bool_of).unwrap_or(false);
    let next = info.and_then(|i| i.get("end_cursor")).and_then(str_of).filter(|c| more && !c.is_empty());
    Ok(ReelsPage { reels, next })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(pk: &str, text: &str, children: u64) -> Value {
        json!({"pk": pk, "text": text, "created_at": 1_700_000_000, "comment_like_count": 4,
               "child_comment_count": children,
               "user": {"pk": "42", "username": "ann", "full_name": "Ann", "profile_pic_url": "https://cdn/a.jpg"}})
    }

    #[test]
    fn a_logged_out_post_is_read_or_gated() {
        let answer = json!({"data": {"xig_polaris_media": {"if_not_gated_logged_out": {
            "id": "2493287677538225571", "shortcode": "CKZ7-7Ghk2j", "is_video": true, "video_play_count": 900,
            "taken_at_timestamp": 1_700_000_000, "edge_media_preview_like": {"count": 12},
            "edge_media_to_comment": {"count": 30}, "edge_media_to_parent_comment": {"count": 20},
            "edge_media_to_caption": {"edges": [{"node": {"text": "Launch day"}}]},
            "owner": {"id": "7", "username": "brand", "full_name": "Brand", "is_verified": true}}}}});
        let p = logged_out_post(&answer).expect("a shape").expect("not gated");
        assert_eq!(
            (p.pk.as_str(), p.caption.as_str(), p.comments, p.top_level),
            ("2493287677538225571", "Launch day", Some(30), Some(20))
        );
        assert_eq!((p.plays, p.likes, p.owner.verified), (Some(900), Some(12), true));
        let gated = json!({"data": {"xig_polaris_media": {"if_not_gated_logged_out": null}}});
        assert_eq!(logged_out_post(&gated).expect("a shape"), None);
        let err = logged_out_post(&json!({"data": {"something_else": {}}})).expect_err("unknown");
        assert_eq!(err.code().as_str(), "parse_error");
    }

    #[test]
    fn comments_and_replies_page_with_their_cursor() {
        let answer = json!({"data": {"xdt_api__v1__media__media_id__comments__connection": {
            "edges": [{"node": node("1", "first", 2)}, {"node": node("2", "second", 0)}],
            "page_info": {"has_next_page": true, "end_cursor": "abc"}}}});
        let page = connection(&answer, None, false).expect("a page");
        assert_eq!(page.comments.len(), 2);
        assert_eq!((page.comments[0].reply_count, page.next.as_deref()), (2, Some("abc")));
        assert_eq!(page.comments[0].author.handle.as_deref(), Some("ann"));
        assert_eq!(page.comments[0].created_at, "2023-11-14T22:13:20Z");
        let replies = json!({"data": {"xdt_api__v1__media__media_id__comments__connection": {
            "edges": [{"node": node("3", "a reply", 0)}], "page_info": {"has_next_page": false, "end_cursor": "x"}}}});
        let page = connection(&replies, Some("1"), true).expect("a page");
        assert_eq!((page.comments[0].parent_id.as_deref(), page.next.as_deref()), (Some("1"), None));
        assert_eq!(page.comments[0].raw.as_ref().and_then(|r| r.get("pk")), Some(&json!("3")), "kept when asked");
        assert!(connection(&json!({"data": {}}), None, false).is_err());
    }

    #[test]
    fn a_sessions_comment_pages_go_on_in_both_directions() {
        let first = json!({"comments": [node("1", "x", 0)], "has_more_comments": true, "next_max_id": "older-1",
                           "has_more_headload_comments": true, "next_min_id": "{\"cached\":1}"});
        let page = rest_comments(&first, false).expect("a page");
        assert_eq!((page.older.as_deref(), page.newer.as_deref()), (Some("older-1"), Some("{\"cached\":1}")));
        // One flag false does not end the other direction; a cursor without its flag is not one.
        let older_only = json!({"comments": [], "has_more_comments": true, "next_max_id": "older-2",
                                "has_more_headload_comments": false, "next_min_id": "ignored"});
        let page = rest_comments(&older_only, false).expect("a page");
        assert_eq!((page.older.as_deref(), page.newer), (Some("older-2"), None));
        assert!(rest_comments(&json!({"child_comments": []}), false).is_err());
        let replies = json!({"child_comments": [node("9", "r", 0)], "has_more_tail_child_comments": true,
                             "next_max_child_cursor": "c2"});
        let page = rest_replies(&replies, "1", false).expect("a page");
        assert_eq!((page.comments[0].parent_id.as_deref(), page.next.as_deref()), (Some("1"), Some("c2")));
    }

    #[test]
    fn walls_are_told_apart() {
        assert_eq!(wall(302, "", Some("https://www.instagram.com/accounts/login/?next=/p/x/")), Some(Wall::Login));
        assert_eq!(wall(403, r#"{"message":"login_required","status":"fail"}"#, None), Some(Wall::Login));
        assert_eq!(wall(400, r#"{"message":"checkpoint_required"}"#, None), Some(Wall::Checkpoint));
        assert_eq!(wall(302, "", Some("https://www.instagram.com/challenge/?next=/")), Some(Wall::Checkpoint));
        assert_eq!(wall(404, "Not Found", None), Some(Wall::Checkpoint));
        assert_eq!(wall(429, "", None), Some(Wall::RateLimited));
        assert_eq!(
            wall(400, r#"{"message":"Please wait a few minutes before you try again."}"#, None),
            Some(Wall::RateLimited)
        );
        assert_eq!(
            wall(500, r#"{"status":"fail","message":"We're sorry, but something went wrong"}"#, None),
            Some(Wall::Broken)
        );
        assert_eq!(wall(200, r#"{"data":{}}"#, None), None);
    }

    #[test]
    fn a_profile_and_its_reels_with_a_pinned_one() {
        let answer = json!({"data": {"user": {"id": "5512", "username": "brand", "full_name": "Brand",
            "edge_followed_by": {"count": 900}, "edge_owner_to_timeline_media": {"count": 40}}}, "status": "ok"});
        let p = profile(&answer).expect("a shape").expect("an account");
        assert_eq!((p.id.as_str(), p.followers, p.posts), ("5512", Some(900), Some(40)));
        assert_eq!(profile(&json!({"data": {"user": null}})).expect("a shape"), None);
        assert!(profile(&json!({"graphql": {}})).is_err());
        let reels = json!({"data": {"xdt_api__v1__clips__user__connection_v2": {"edges": [
            {"node": {"media": {"pk": "1", "code": "A1", "taken_at": 10, "clips_tab_pinned_user_ids": ["5512"]}}},
            {"node": {"media": {"pk": "2", "code": "B2", "taken_at": 20, "caption": {"text": "new"}}}}],
            "page_info": {"has_next_page": true, "end_cursor": "c1"}}}});
        let page = reels_page(&reels).expect("a page");
        assert_eq!((page.reels[0].pinned, page.reels[1].pinned, page.next.as_deref()), (true, false, Some("c1")));
        assert_eq!(page.reels[1].caption.as_deref(), Some("new"));
    }
}
