//! What customers receive.

use cova_messages::{BatchEvent, KeywordAlertEvent};
use serde_json::json;

/// The webhook body of a keyword alert: `{type, id, keyword, ref, comment {id, text, author},
/// created_at}` (the account is the receiver's own).
pub fn alert_webhook_body(alert: &KeywordAlertEvent) -> String {
    json!({
        "type": "keyword.alert",
        "id": alert.id,
        "keyword": alert.keyword,
        "ref": alert.r#ref,
        "comment": alert.comment,
        "created_at": alert.created_at,
    })
    .to_string()
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
    format!("🔔 \u{201c}{}\u{201d} on {}\n{author}: {text}", alert.keyword, alert.r#ref)
}
