//! What customers receive.

use cova_messages::{AlertCreator, BatchEvent, CreatorEvent, KeywordAlertEvent};
use serde_json::json;

/// The webhook body of a keyword alert: `{type, id, keyword, ref, comment {id, text, author},
/// created_at}` and `creator {ref, handle, name}` for a post found through a creator (the
/// account is the receiver's own).
pub fn alert_webhook_body(alert: &KeywordAlertEvent) -> String {
    let mut body = json!({
        "type": "keyword.alert",
        "id": alert.id,
        "keyword": alert.keyword,
        "ref": alert.r#ref,
        "comment": alert.comment,
        "created_at": alert.created_at,
    });
    if let Some(creator) = &alert.creator {
        body["creator"] = json!(creator);
    }
    body.to_string()
}

/// The webhook body of a post found through a followed creator: the event without `account_id`.
pub fn creator_webhook_body(event: &CreatorEvent) -> String {
    json!({
        "type": "creator.post_found",
        "creator": event.creator,
        "ref": event.r#ref,
        "url": event.url,
        "title": event.title,
        "published_at": event.published_at,
        "batch_id": event.batch_id,
    })
    .to_string()
}

/// How a message names a creator: `@handle (name)`, or whichever is known.
fn creator_words(creator: &AlertCreator) -> String {
    match (&creator.handle, &creator.name) {
        (Some(h), Some(n)) if n != h => format!("@{h} ({n})"),
        (Some(h), _) => format!("@{h}"),
        (None, Some(n)) => n.clone(),
        (None, None) => creator.r#ref.clone(),
    }
}

/// The webhook body of a finished batch: `{type, batch_id, total, complete, failed, refused,
/// cancelled}` (the account is the receiver's own); `GET /analyze/batch/{batch_id}` has the rest.
pub fn batch_webhook_body(batch: &BatchEvent) -> String {
    json!({
        "type": "batch.complete",
        "batch_id": batch.batch_id,
        "total": batch.total,
        "complete": batch.complete,
        "failed": batch.failed,
        "refused": batch.refused,
        "cancelled": batch.cancelled,
    })
    .to_string()
}

/// The Telegram message of a keyword alert (plain text; Telegram renders no markup here).
pub fn alert_message(alert: &KeywordAlertEvent) -> String {
    let author = alert
        .comment
        .author
        .handle
        .as_deref()
        .map(|h| format!("@{h}"))
        .or_else(|| alert.comment.author.name.clone())
        .unwrap_or_else(|| "someone".to_owned());
    let text: String = alert.comment.text.chars().take(3_000).collect();
    let by = alert.creator.as_ref().map(|c| format!(" by {}", creator_words(c))).unwrap_or_default();
    format!("🔔 \u{201c}{}\u{201d} on {}{by}\n{author}: {text}", alert.keyword, alert.r#ref)
}
