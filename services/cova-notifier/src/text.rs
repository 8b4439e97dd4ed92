//! What customers receive.

use cova_messages::{AlertCreator, BatchEvent, CreatorEvent, KeywordAlertEvent, SpikeAlertEvent};
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

/// The webhook body of a spike alert: the event without `account_id` (the receiver's own).
pub fn spike_webhook_body(alert: &SpikeAlertEvent) -> String {
    let mut body = serde_json::to_value(alert).unwrap_or_default();
    if let Some(o) = body.as_object_mut() {
        o.remove("account_id");
    }
    body.to_string()
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// The time from `start` to `end` (RFC 3339) in words: "3 hours", "40 minutes".
fn age_words(start: &str, end: &str) -> String {
    let parse = cova_domain::time::parse_rfc3339;
    let minutes = match (parse(start), parse(end)) {
        (Some(s), Some(e)) => (e - s).max(0) / 60_000,
        _ => 0,
    };
    match minutes {
        m if m < 120 => format!("{m} minutes"),
        m => format!("{} hours", (m + 30) / 60),
    }
}

/// The Telegram message of a spike alert: what happened, in words and figures.
pub fn spike_message(alert: &SpikeAlertEvent) -> String {
    let post = match (&alert.title, &alert.author) {
        (Some(t), Some(a)) => format!("“{t}” by @{a}"),
        (Some(t), None) => format!("“{t}”"),
        (None, Some(a)) => format!("a post by @{a}"),
        (None, None) => alert.r#ref.clone(),
    };
    let what = if alert.kind == "sentiment" {
        format!(
            "turned negative: {} of its {} comments in the last hour are negative, against {} usually",
            percent(alert.negative_share),
            alert.comments,
            percent(alert.baseline_negative_share)
        )
    } else if alert.kind == "takeoff" {
        format!(
            "is taking off: {} comments in its first {}, against about {:.0} for the creator's earlier posts at the same age",
            alert.comments,
            age_words(&alert.window_start, &alert.window_end),
            alert.expected
        )
    } else {
        format!(
            "is drawing comments fast: {} in the last hour, against about {:.0} usually",
            alert.comments, alert.expected
        )
    };
    let mut text = format!("Spike: {post} {what}.");
    if let Some(creator) = &alert.creator {
        text.push_str(&format!("\nFrom {}, whom you follow.", creator_words(creator)));
    }
    if !alert.top_terms.is_empty() {
        text.push_str(&format!("\nWhat they talk about: {}.", alert.top_terms.join(", ")));
    }
    let s = &alert.sentiment;
    text.push_str(&format!(
        "\nSentiment: {} positive, {} neutral, {} negative.",
        percent(s.positive),
        percent(s.neutral),
        percent(s.negative)
    ));
    for c in &alert.examples {
        let who = c.author.handle.as_deref().map(|h| format!("@{h}")).or_else(|| c.author.name.clone());
        let who = who.unwrap_or_else(|| "someone".into());
        let text_of: String = c.text.chars().take(200).collect();
        text.push_str(&format!("\n— {who}: {text_of}"));
    }
    text.push_str(&format!("\n{}", alert.url));
    text
}
