//! The public JSON of a job, as `POST /analyze` and `GET /analyze/{job_id}` show it.

use cova_domain::Dedup;
use cova_domain::time::rfc3339;
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

/// Stored comments (top level with their replies) as the nested result.
pub fn nested(top: Vec<(i64, String, String)>, replies: Vec<(String, String)>) -> (Vec<Value>, Option<i64>) {
    let last = top.last().map(|(p, _, _)| *p);
    let mut by_parent: std::collections::HashMap<String, Vec<Value>> = std::collections::HashMap::new();
    for (parent, body) in replies {
        if let Ok(v) = serde_json::from_str::<Value>(&body) {
            by_parent.entry(parent).or_default().push(v);
        }
    }
    let comments = top
        .into_iter()
        .filter_map(|(_, id, body)| {
            let mut v = serde_json::from_str::<Value>(&body).ok()?;
            let replies = by_parent.remove(&id).unwrap_or_default();
            v.as_object_mut()?.insert("replies".into(), Value::Array(replies));
            Some(v)
        })
        .collect();
    (comments, last)
}
