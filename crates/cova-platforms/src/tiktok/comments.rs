//! The comment API envelope and comment normalisation.

use crate::json::{bool_of, first_url, i64_of, str_of, u32_of, u64_of};
use crate::model::{Comment, CommentAuthor, Media, rfc3339_from_unix};
use serde_json::Value;

/// One page of `/api/comment/list/` or `/api/comment/list/reply/`.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub status_code: i64,
    pub status_msg: String,
    pub comments: Vec<Comment>,
    pub cursor: Option<u64>,
    pub has_more: bool,
    pub total: Option<u64>,
}

/// Parses an envelope; `comments` may be null, and `user` may carry only `uid`.
pub(crate) fn envelope(v: &Value, parent_id: Option<&str>, keep_raw: bool) -> Envelope {
    let comments = v
        .get("comments")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|c| comment(c, parent_id, keep_raw)).collect())
        .unwrap_or_default();
    Envelope {
        status_code: v.get("status_code").and_then(i64_of).unwrap_or(0),
        status_msg: v.get("status_msg").and_then(str_of).unwrap_or_default(),
        comments,
        cursor: v.get("cursor").and_then(u64_of),
        has_more: v.get("has_more").and_then(bool_of).unwrap_or(false),
        total: v.get("total").and_then(u64_of),
    }
}

/// Normalises one comment; `None` when it has no id. `reply_comment` previews are ignored: they
/// are not the complete set of replies.
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
    fn replies_carry_their_parent() {
        let e = envelope(&fixture("replies"), Some("7279900000000000001"), false);
        assert_eq!(e.comments.len(), 2);
        assert!(e.comments.iter().all(|c| c.parent_id.as_deref() == Some("7279900000000000001")));
        assert_eq!(e.cursor, Some(2));
        assert!(e.has_more);
    }
}
