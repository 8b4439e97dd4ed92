//! The comment API envelope and comment normalisation.

use crate::json::{bool_of, first_url, i64_of, str_of, u32_of, u64_of};
use crate::model::{Comment, CommentAuthor, Media, rfc3339_from_unix};
use serde_json::Value;
use std::collections::HashMap;

/// One page of `/api/comment/list/` or `/api/comment/list/reply/`.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub status_code: i64,
    pub status_msg: String,
    pub comments: Vec<Comment>,
    pub cursor: Option<u64>,
    pub has_more: bool,
    pub total: Option<u64>,
    /// Replies of top-level comments whose `reply_comment` preview holds every one of them:
    /// no reply request is needed for those.
    pub complete_previews: HashMap<String, Vec<Comment>>,
}

/// Parses an envelope; `comments` may be null, and `user` may carry only `uid`.
pub(crate) fn envelope(v: &Value, parent_id: Option<&str>, keep_raw: bool) -> Envelope {
    let list = v.get("comments").and_then(Value::as_array);
    let comments =
        list.map(|list| list.iter().filter_map(|c| comment(c, parent_id, keep_raw)).collect()).unwrap_or_default();
    let complete_previews = match parent_id {
        Some(_) => HashMap::new(),
        None => list.into_iter().flatten().filter_map(|c| complete_preview(c, keep_raw)).collect(),
    };
    Envelope {
        status_code: v.get("status_code").and_then(i64_of).unwrap_or(0),
        status_msg: v.get("status_msg").and_then(str_of).unwrap_or_default(),
        comments,
        cursor: v.get("cursor").and_then(u64_of),
        has_more: v.get("has_more").and_then(bool_of).unwrap_or(false),
        total: v.get("total").and_then(u64_of),
        complete_previews,
    }
}

/// The preview replies of a top-level comment when they are all of its replies: as many
/// distinct replies as `reply_comment_total` says it has.
fn complete_preview(c: &Value, keep_raw: bool) -> Option<(String, Vec<Comment>)> {
    let id = c.get("cid").and_then(str_of)?;
    let total = c.get("reply_comment_total").and_then(u64_of)?;
    let preview = c.get("reply_comment").and_then(Value::as_array)?;
    let replies: Vec<Comment> = preview.iter().filter_map(|r| comment(r, Some(&id), keep_raw)).collect();
    let distinct: std::collections::HashSet<&str> = replies.iter().map(|r| r.id.as_str()).collect();
    (total > 0 && distinct.len() as u64 == total && replies.len() == distinct.len()).then_some((id, replies))
}

/// Normalises one comment; `None` when it has no id. A `reply_comment` preview is not turned
/// into replies here: it is usually not the complete set (see [`Envelope::complete_previews`]).
pub(crate) fn comment(c: &Value, parent_id: Option<&str>, keep_raw: bool) -> Option<Comment> {
    let id = c.get("cid").and_then(str_of)?;
    let user = c.get("user").filter(|u| u.is_object());
    let get = |k: &str| user.and_then(|u| u.get(k));
    let author = CommentAuthor {
        id: get("uid").and_then(str_of).or_else(|| get("sec_uid").and_then(str_of)).unwrap_or_default(),
        handle: get("unique_id").and_then(str_of),
        name: get("nickname").and_then(str_of),
        avatar_url: get("avatar_thumb").and_then(first_url),
        avatar: None,
    };
    let reply_to = c.get("reply_id").and_then(str_of).filter(|r| r != "0");
    let media = c
        .get("image_list")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|img| {
            let src = img.get("origin_url").or_else(|| img.get("crop_url"))?;
            Some(Media {
                url: first_url(src)?,
                width: src.get("width").and_then(u32_of),
                height: src.get("height").and_then(u32_of),
                ..Media::default()
            })
        })
        .collect();
    Some(Comment {
        id,
        text: c.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
        author,
        likes: c.get("digg_count").and_then(u64_of).unwrap_or(0),
        reply_count: c.get("reply_comment_total").and_then(u64_of).unwrap_or(0),
        created_at: rfc3339_from_unix(c.get("create_time").and_then(i64_of).unwrap_or(0)),
        language: c.get("comment_language").and_then(str_of).filter(|l| l != "un"),
        pinned: c.get("author_pin").and_then(bool_of).unwrap_or(false)
            || c.get("stick_position").and_then(i64_of).is_some_and(|p| p > 0),
        liked_by_author: c.get("is_author_digged").and_then(bool_of).unwrap_or(false),
        media,
        parent_id: parent_id.map(str::to_string).or(reply_to),
        replies: Vec::new(),
        raw: keep_raw.then(|| c.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let text = match name {
            "page" => include_str!("../../tests/fixtures/tiktok_comments_page.json"),
            "end" => include_str!("../../tests/fixtures/tiktok_comments_has_more_0.json"),
            "null" => include_str!("../../tests/fixtures/tiktok_comments_null.json"),
            _ => include_str!("../../tests/fixtures/tiktok_replies_page.json"),
        };
        serde_json::from_str(text).expect("fixture is JSON")
    }

    #[test]
    fn full_comment_and_uid_only_user() {
        let e = envelope(&fixture("page"), None, false);
        assert_eq!(e.status_code, 0);
        assert!(e.has_more);
        assert_eq!(e.cursor, Some(20));
        assert_eq!(e.total, Some(4821));
        assert_eq!(e.comments.len(), 3);
        let first = &e.comments[0];
        assert_eq!(first.id, "7279900000000000001");
        assert_eq!(first.author.handle.as_deref(), Some("maria.lopez"));
        assert_eq!(
            first.author.avatar_url.as_deref(),
            Some("https://p16-sign.tiktokcdn-us.com/avatar-maria.lopez.jpeg")
        );
        assert_eq!(first.likes, 532);
        assert_eq!(first.reply_count, 14);
        assert_eq!(first.created_at, "2023-09-15T13:00:00Z");
        assert_eq!(first.language.as_deref(), Some("es"));
        assert!(first.pinned);
        assert!(first.liked_by_author);
        assert_eq!(first.parent_id, None);
        assert!(first.raw.is_none());
        // The reply_comment preview is not turned into replies.
        assert!(first.replies.is_empty());
        let uid_only = &e.comments[1];
        assert_eq!(
            uid_only.author,
            CommentAuthor {
                id: "6900000000000000002".into(),
                handle: None,
                name: None,
                avatar_url: None,
                avatar: None
            }
        );
        assert!(!uid_only.pinned);
        let with_image = &e.comments[2];
        assert_eq!(with_image.media.len(), 1);
        assert_eq!(with_image.media[0].width, Some(640));
        assert_eq!(with_image.created_at, "2023-09-15T13:05:00Z", "create_time given as a string");
    }

    #[test]
    fn has_more_zero_with_comments_and_null_comments() {
        let e = envelope(&fixture("end"), None, true);
        assert!(!e.has_more);
        assert_eq!(e.comments.len(), 2);
        assert!(e.comments[0].raw.is_some());
        let n = envelope(&fixture("null"), None, false);
        assert!(n.comments.is_empty());
        assert!(!n.has_more);
    }

    #[test]
    fn a_preview_counts_as_the_replies_only_when_it_holds_them_all() {
        let e = envelope(&fixture("page"), None, false);
        assert!(e.complete_previews.is_empty(), "14 replies, a shorter preview");
        let page = serde_json::json!({"status_code": 0, "comments": [
            {"cid": "1", "reply_comment_total": 2, "reply_comment": [{"cid": "11", "text": "a"}, {"cid": "12", "text": "b"}]},
            {"cid": "2", "reply_comment_total": 3, "reply_comment": [{"cid": "21"}, {"cid": "22"}]},
            {"cid": "3", "reply_comment_total": 2, "reply_comment": [{"cid": "31"}, {"cid": "31"}]},
            {"cid": "4", "reply_comment_total": 0, "reply_comment": null}
        ]});
        let e = envelope(&page, None, false);
        assert_eq!(e.complete_previews.len(), 1);
        let replies = &e.complete_previews["1"];
        assert_eq!(replies.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["11", "12"]);
        assert!(replies.iter().all(|r| r.parent_id.as_deref() == Some("1")));
        assert!(envelope(&page, Some("1"), false).complete_previews.is_empty(), "reply pages carry no previews");
    }

    #[test]
    fn replies_carry_their_parent() {
        let e = envelope(&fixture("replies"), Some("7279900000000000001"), false);
        assert_eq!(e.comments.len(), 2);
        assert!(e.comments.iter().all(|c| c.parent_id.as_deref() == Some("7279900000000000001")));
        assert_eq!(e.cursor, Some(2));
        assert!(e.has_more);
    }
}
