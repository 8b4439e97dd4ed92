//! The public JSON of jobs, library entries and comments.

use cova_domain::Dedup;
use cova_domain::money::Stage;
use cova_domain::time::rfc3339;
use cova_storage::repo::ai::AiJobHead;
use cova_storage::repo::analyses::Analysis;
use cova_storage::repo::deliveries::{Delivery, State};
use cova_storage::repo::jobs::Job;
use serde::Serialize;
use serde_json::{Value, json};

pub fn job(job: &Job, dedup: Option<Dedup>) -> JobView<'_> {
    JobView {
        created_at: rfc3339(job.created_at),
        deduplicated: dedup.map(|d| d.as_str()),
        error: job
            .error_code
            .as_deref()
            .map(|code| JobError { code, detail: job.error_detail.as_deref().unwrap_or("") }),
        finished_at: job.finished_at.map(rfc3339),
        job_id: &job.id,
        kind: job.kind.as_str(),
        max_comments: job.max_comments,
        progress: Progress {
            comments_collected: job.comments_collected,
            comments_expected: job.comments_expected,
            waiting_for: (job.status.is_running() && job.hold_stage == Stage::Waiting).then_some("balance"),
        },
        r#ref: &job.r#ref,
        started_at: job.started_at.map(rfc3339),
        status: job.status.as_str(),
        url: &job.url,
    }
}

/// A job as the API shows it, serialized without an intermediate map (polls are hot). Members
/// in alphabetical order, as every other answer's.
#[derive(Debug, Serialize)]
pub struct JobView<'a> {
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    deduplicated: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<JobError<'a>>,
    finished_at: Option<String>,
    job_id: &'a str,
    kind: &'static str,
    max_comments: Option<i64>,
    progress: Progress,
    r#ref: &'a str,
    started_at: Option<String>,
    status: &'static str,
    url: &'a str,
}

#[derive(Debug, Serialize)]
struct JobError<'a> {
    code: &'a str,
    detail: &'a str,
}

#[derive(Debug, Serialize)]
struct Progress {
    comments_collected: i64,
    comments_expected: Option<i64>,
    /// `balance` while the job waits for comments held by the account's other jobs.
    waiting_for: Option<&'static str>,
}

/// An AI job as `GET /ai/jobs/{id}` shows it; `result` once complete.
pub fn ai_job(job: &Job, head: Option<&AiJobHead>, result: Option<Value>) -> Value {
    let mut v = json!({
        "id": job.id,
        "status": job.status.as_str(),
        "ref": job.r#ref,
        "quote_id": head.map(|h| &h.quote_id),
        "tasks": head.map(AiJobHead::task_list),
        "comments": head.map(|h| h.comments),
        "charge": head.map(|h| h.charge),
        "created_at": rfc3339(job.created_at),
        "started_at": job.started_at.map(rfc3339),
        "finished_at": job.finished_at.map(rfc3339),
        "result": result,
    });
    if let (Some(code), Some(obj)) = (&job.error_code, v.as_object_mut()) {
        obj.insert("error".into(), json!({"code": code, "detail": job.error_detail.clone().unwrap_or_default()}));
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
        "creator_ref": a.creator_ref,
    })
}

pub fn watch(a: &Analysis) -> Value {
    json!({
        "enabled": a.watch.enabled,
        "interval_min": a.watch.interval_min,
        "next_run_at": a.watch.next_run_at.filter(|_| a.watch.enabled).map(rfc3339),
        "last_run_at": a.watch.last_run_at.map(rfc3339),
        "last_error": a.watch.last_error,
        "until": a.watch.until.filter(|_| a.watch.enabled).map(rfc3339),
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
