//! The public JSON of jobs, library entries and comments.

use cova_domain::Dedup;
use cova_domain::time::rfc3339;
use cova_storage::repo::analyses::Analysis;
use cova_storage::repo::deliveries::{Delivery, State};
use cova_storage::repo::jobs::Job;
use serde_json::{Value, json};

pub fn job(job: &Job, dedup: Option<Dedup>) -> Value {
    let mut v = json!({
        "job_id": job.id,
        "status": job.status.as_str(),
        "kind": job.kind.as_str(),
        "ref": job.r#ref,
        "url": job.url,
        "created_at": rfc3339(job.created_at),
        "started_at": job.started_at.map(rfc3339),
        "finished_at": job.finished_at.map(rfc3339),
        "progress": {
            "comments_collected": job.comments_collected,
            "comments_expected": job.comments_expected,
        },
    });
    if let (Some(code), Some(obj)) = (&job.error_code, v.as_object_mut()) {
        obj.insert("error".into(), json!({"code": code, "detail": job.error_detail.clone().unwrap_or_default()}));
    }
    if let (Some(d), Some(obj)) = (dedup, v.as_object_mut()) {
        obj.insert("deduplicated".into(), json!(d.as_str()));
    }
    v
}

/// A library entry (without its comments).
pub fn analysis(a: &Analysis) -> Value {
    let metadata = a.metadata.as_deref().and_then(|m| serde_json::from_str::<Value>(m).ok());
    json!({
        "ref": a.r#ref,
        "url": a.url,
        "platform": a.platform,
        "status": a.status.as_str(),
        "metadata": metadata,
        "saved_at": a.saved_at.map(rfc3339),
        "last_scraped_at": a.last_scraped_at.map(rfc3339),
        "expires_at": a.expires_at.map(rfc3339),
        "comment_count": a.comment_count,
        "watch": watch(a),
    })
}

pub fn watch(a: &Analysis) -> Value {
    json!({
        "enabled": a.watch.enabled,
        "interval_min": a.watch.interval_min,
        "next_run_at": a.watch.next_run_at.filter(|_| a.watch.enabled).map(rfc3339),
        "last_run_at": a.watch.last_run_at.map(rfc3339),
        "last_error": a.watch.last_error,
    })
}

/// An entry of the delivery log.
pub fn delivery(d: &Delivery) -> Value {
    json!({
        "id": d.id,
        "event_id": d.event_id,
        "type": d.event_type,
        "channel": d.channel.as_str(),
        "state": d.state.as_str(),
        "attempts": d.attempts,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "next_attempt_at": (d.state == State::Pending).then(|| rfc3339(d.next_attempt_at)),
        "delivered_at": d.delivered_at.map(rfc3339),
        "created_at": rfc3339(d.created_at),
    })
}
