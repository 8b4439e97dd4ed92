//! Queue message bodies, and where each one goes. Each type has a JSON Schema in
//! `proto-schemas/` (same name); tests check that what cova publishes matches them.
//!
//! A message knows its routing: a [`Command`] names the worker role that consumes it, an
//! [`Event`] its routing key on the events exchange. Nothing else decides where a message goes.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Worker roles that consume commands, each from its own queue `<prefix>.<role>`.
pub mod roles {
    pub const SCRAPER: &str = "scraper";
    pub const AI_WORKER: &str = "ai-worker";
    /// Every command-consuming role: every process declares their queues, so a command is
    /// routable even before its consumer first starts.
    pub const ALL: &[&str] = &[SCRAPER, AI_WORKER];
}

/// Durable queues on the events exchange, each with the routing-key patterns it is bound to.
/// Every process declares them at connect, so that events published before their consumer
/// first starts wait for it.
pub mod event_queues {
    /// The notifier's: job ends (job webhooks, keyword matching, spike checks), batch ends and
    /// creators' new posts (their webhooks), keyword and spike alerts (their deliveries).
    pub const NOTIFIER: (&str, &[&str]) = (
        "notifier.events",
        &["job.complete", "job.failed", "batch.complete", "keyword.alert", "creator.post_found", "spike.alert"],
    );
    /// The flow's (`cova_runtime::flow`): job ends of either kind, which let the account's
    /// waiting jobs and list URLs go on, and a list's job sized (the URL after it may start).
    pub const FLOW: (&str, &[&str]) = ("flow.events", &["job.complete", "job.failed", "job.sized"]);
    pub const ALL: &[(&str, &[&str])] = &[NOTIFIER, FLOW];
}

/// A message for one worker role.
pub trait Command: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The role whose queue receives it (routing key on the commands exchange).
    const ROLE: &'static str;
}

/// A fact published on the events exchange (a topic exchange), for whoever listens.
pub trait Event: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The routing key of this event, e.g. `job.complete`.
    fn routing_key(&self) -> &'static str;
}

/// Where an outgoing message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// The commands exchange (routing key = role); must reach a queue.
    Command,
    /// The events exchange (routing key = event type); nobody has to listen.
    Event,
}

impl Destination {
    pub const fn as_str(self) -> &'static str {
        match self {
            Destination::Command => "command",
            Destination::Event => "event",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "command" => Some(Destination::Command),
            "event" => Some(Destination::Event),
            _ => None,
        }
    }
}

/// A message ready to be written to the outbox or published: its destination, routing key and
/// JSON body, all taken from the message itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub destination: Destination,
    pub routing_key: &'static str,
    pub payload: String,
}

impl Outgoing {
    pub fn command<C: Command>(command: &C) -> Self {
        Self { destination: Destination::Command, routing_key: C::ROLE, payload: to_json(command) }
    }

    pub fn event<E: Event>(event: &E) -> Self {
        Self { destination: Destination::Event, routing_key: event.routing_key(), payload: to_json(event) }
    }
}

/// These types serialise infallibly (strings, numbers and options only).
fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Command to the scraper role: collect the comments of this job (`proto-schemas/analyze-command.schema.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeCommand {
    pub job_id: String,
}

impl Command for AnalyzeCommand {
    const ROLE: &'static str = roles::SCRAPER;
}

/// Run an AI job: the ai-worker analyses the quoted comments of the job's analysis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AiCommand {
    pub job_id: String,
}

impl Command for AiCommand {
    const ROLE: &'static str = roles::AI_WORKER;
}

/// How a job ended; the `type` of [`JobEvent`] and its routing key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobEventType {
    #[serde(rename = "job.complete")]
    Complete,
    #[serde(rename = "job.failed")]
    Failed,
    /// A list's job holds what its post needs (the flow's alone: never sent to customers).
    #[serde(rename = "job.sized")]
    Sized,
}

impl JobEventType {
    pub const fn as_str(self) -> &'static str {
        match self {
            JobEventType::Complete => "job.complete",
            JobEventType::Failed => "job.failed",
            JobEventType::Sized => "job.sized",
        }
    }
}

/// A job reached an end state (`proto-schemas/job-event.schema.json`). The fields are exactly
/// those of the specification's job webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobEvent {
    /// `job.complete` or `job.failed`; also the routing key on the events exchange.
    #[serde(rename = "type")]
    pub event_type: JobEventType,
    /// `analyze` or `ai`.
    pub kind: String,
    pub job_id: String,
    #[serde(rename = "ref")]
    pub r#ref: String,
    pub url: String,
    /// `null` on success.
    pub error: Option<JobError>,
}

impl Event for JobEvent {
    fn routing_key(&self) -> &'static str {
        self.event_type.as_str()
    }
}

/// The type of [`KeywordAlertEvent`] (its routing key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AlertEventType {
    #[serde(rename = "keyword.alert")]
    KeywordAlert,
}

/// A keyword of an account matched a comment newly collected for its library
/// (`proto-schemas/keyword-alert-event.schema.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeywordAlertEvent {
    #[serde(rename = "type")]
    pub event_type: AlertEventType,
    /// The alert's id (also `X-Event-Id` of its webhook).
    pub id: String,
    pub account_id: String,
    pub keyword: String,
    #[serde(rename = "ref")]
    pub r#ref: String,
    pub comment: AlertComment,
    /// RFC 3339.
    pub created_at: String,
    /// The creator whose listing found the post, for a post found that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<AlertCreator>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertComment {
    pub id: String,
    pub text: String,
    pub author: AlertAuthor,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertAuthor {
    pub id: String,
    pub handle: Option<String>,
    pub name: Option<String>,
}

impl Event for KeywordAlertEvent {
    fn routing_key(&self) -> &'static str {
        "keyword.alert"
    }
}

/// The type of [`SpikeAlertEvent`] (its routing key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpikeEventType {
    #[serde(rename = "spike.alert")]
    SpikeAlert,
}

/// A post of an account's library suddenly drew comments, or turned negative
/// (`proto-schemas/spike-alert-event.schema.json`): the window against the post's own usual,
/// in figures and words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpikeAlertEvent {
    #[serde(rename = "type")]
    pub event_type: SpikeEventType,
    /// The alert's id (also `X-Event-Id` of its webhook).
    pub id: String,
    pub account_id: String,
    /// `volume`, `sentiment` or `takeoff`.
    pub kind: String,
    #[serde(rename = "ref")]
    pub r#ref: String,
    pub url: String,
    pub title: Option<String>,
    /// The post's author's handle, when the platform gives one.
    pub author: Option<String>,
    /// The window judged, RFC 3339.
    pub window_start: String,
    pub window_end: String,
    /// Comments in the window, and what the post's own rate expects in a window like it.
    pub comments: u64,
    pub expected: f64,
    /// The window's share of negative comments and the post's usual share (0 to 1).
    pub negative_share: f64,
    pub baseline_negative_share: f64,
    /// The window's comments by sentiment (shares, 0 to 1).
    pub sentiment: SpikeSentiment,
    /// The most frequent terms of the window's comments, most frequent first.
    pub top_terms: Vec<String>,
    /// Up to three of the window's comments, most liked first.
    pub examples: Vec<AlertComment>,
    /// `balanced`, `sensitive` or `strict`: what the alert was judged at.
    pub sensitivity: String,
    /// RFC 3339.
    pub created_at: String,
    /// The creator whose listing found the post, for a post found that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<AlertCreator>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpikeSentiment {
    pub positive: f64,
    pub neutral: f64,
    pub negative: f64,
}

impl Event for SpikeAlertEvent {
    fn routing_key(&self) -> &'static str {
        "spike.alert"
    }
}

/// The type of [`BatchEvent`] (its routing key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchEventType {
    #[serde(rename = "batch.complete")]
    Complete,
}

/// Every URL of a batch has ended: its job completed or failed, or it was refused or cancelled
/// (`proto-schemas/batch-event.schema.json`). Sent as a webhook when `job_events` is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchEvent {
    #[serde(rename = "type")]
    pub event_type: BatchEventType,
    pub batch_id: String,
    pub account_id: String,
    /// URLs in the batch, and how each ended.
    pub total: u32,
    pub complete: u32,
    pub failed: u32,
    pub refused: u32,
    pub cancelled: u32,
}

impl Event for BatchEvent {
    fn routing_key(&self) -> &'static str {
        "batch.complete"
    }
}

/// The type of [`CreatorEvent`] (its routing key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CreatorEventType {
    #[serde(rename = "creator.post_found")]
    PostFound,
}

/// A followed creator published a post cova had not seen
/// (`proto-schemas/creator-event.schema.json`). Sent as a webhook when `job_events` is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatorEvent {
    #[serde(rename = "type")]
    pub event_type: CreatorEventType,
    pub account_id: String,
    pub creator: AlertCreator,
    /// The post's ref and public URL.
    #[serde(rename = "ref")]
    pub r#ref: String,
    pub url: String,
    pub title: Option<String>,
    /// RFC 3339, when the platform dates the post.
    pub published_at: Option<String>,
    /// The batch collecting its comments, when collection is on.
    pub batch_id: Option<String>,
}

impl Event for CreatorEvent {
    fn routing_key(&self) -> &'static str {
        "creator.post_found"
    }
}

/// A creator as events name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertCreator {
    #[serde(rename = "ref")]
    pub r#ref: String,
    pub handle: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobError {
    pub code: String,
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_uses_the_specification_field_names_and_routes_by_type() {
        let e = JobEvent {
            event_type: JobEventType::Failed,
            kind: "analyze".into(),
            job_id: "j".into(),
            r#ref: "tiktok:1".into(),
            url: "https://www.tiktok.com/@a/video/1".into(),
            error: Some(JobError { code: "parse_error".into(), detail: "gone".into() }),
        };
        let out = Outgoing::event(&e);
        assert_eq!((out.destination, out.routing_key), (Destination::Event, "job.failed"));
        let v: serde_json::Value = serde_json::from_str(&out.payload).expect("json");
        let mut keys: Vec<_> = v.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["error", "job_id", "kind", "ref", "type", "url"]);
        assert_eq!(v["type"], "job.failed");
        assert_eq!(serde_json::from_value::<JobEvent>(v).expect("round trip"), e);
    }

    #[test]
    fn commands_route_to_their_role() {
        let out = Outgoing::command(&AnalyzeCommand { job_id: "j".into() });
        assert_eq!(
            (out.destination, out.routing_key, out.payload.as_str()),
            (Destination::Command, "scraper", r#"{"job_id":"j"}"#)
        );
        assert!(roles::ALL.contains(&AnalyzeCommand::ROLE));
    }
}
