//! Queue message bodies. Each has a JSON Schema in `proto-schemas/` (same name); tests
//! check that what cova publishes matches them.

use serde::{Deserialize, Serialize};

/// Command to the scraper role: collect the comments of this job (`proto-schemas/analyze-command.schema.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeCommand {
    pub job_id: String,
}

/// A job reached an end state (`proto-schemas/job-event.schema.json`). The fields are exactly
/// those of the specification's job webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobEvent {
    /// `job.complete` or `job.failed`; also the routing key on the events exchange.
    #[serde(rename = "type")]
    pub kind_of_event: String,
    /// `analyze` or `ai`.
    pub kind: String,
    pub job_id: String,
    #[serde(rename = "ref")]
    pub r#ref: String,
    pub url: String,
    /// `null` on success.
    pub error: Option<JobError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobError {
    pub code: String,
    pub detail: String,
}

impl AnalyzeCommand {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl JobEvent {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_uses_the_specification_field_names() {
        let e = JobEvent {
            kind_of_event: "job.failed".into(),
            kind: "analyze".into(),
            job_id: "j".into(),
            r#ref: "tiktok:1".into(),
            url: "https://www.tiktok.com/@a/video/1".into(),
            error: Some(JobError { code: "parse_error".into(), detail: "gone".into() }),
        };
        let v: serde_json::Value = serde_json::from_str(&e.to_json()).expect("json");
        let mut keys: Vec<_> = v.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["error", "job_id", "kind", "ref", "type", "url"]);
        assert_eq!(serde_json::from_value::<JobEvent>(v).expect("round trip"), e);
    }
}
