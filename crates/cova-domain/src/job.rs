//! Job states and kinds: the vocabulary the database stores and the API shows.

use serde::{Deserialize, Serialize};

/// The specification's job statuses. `queued` and `in_progress` count as running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "diesel", derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow), diesel(sql_type = diesel::sql_types::Text))]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    InProgress,
    Complete,
    Failed,
}

impl JobStatus {
    /// States that count against the concurrency limit and get `deduplicated: in_flight`.
    pub const RUNNING: [JobStatus; 2] = [JobStatus::Queued, JobStatus::InProgress];
    /// The stored values of [`JobStatus::RUNNING`].
    pub const RUNNING_STR: [&'static str; 2] = [JobStatus::Queued.as_str(), JobStatus::InProgress.as_str()];

    pub const fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::InProgress => "in_progress",
            JobStatus::Complete => "complete",
            JobStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [JobStatus::Queued, JobStatus::InProgress, JobStatus::Complete, JobStatus::Failed]
            .into_iter()
            .find(|v| v.as_str() == s)
    }

    /// The status as a sentence says it ("still queued").
    pub const fn in_words(self) -> &'static str {
        match self {
            JobStatus::Queued => "still queued",
            JobStatus::InProgress => "still running",
            JobStatus::Complete => "complete",
            JobStatus::Failed => "failed",
        }
    }

    pub const fn is_running(self) -> bool {
        matches!(self, JobStatus::Queued | JobStatus::InProgress)
    }

    pub const fn is_finished(self) -> bool {
        !self.is_running()
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a job does; the `kind` of the job webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "diesel", derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow), diesel(sql_type = diesel::sql_types::Text))]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// Comment collection: `POST /analyze`, a refresh or a watch run.
    Analyze,
    /// An AI run on collected comments.
    Ai,
}

impl JobKind {
    pub const ALL: [JobKind; 2] = [JobKind::Analyze, JobKind::Ai];

    pub const fn as_str(self) -> &'static str {
        match self {
            JobKind::Analyze => "analyze",
            JobKind::Ai => "ai",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an existing job is returned instead of a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dedup {
    /// A job of the same account and ref is queued or in progress.
    InFlight,
    /// One completed less than [`crate::limits::RECENT_RESULT`] ago.
    RecentResult,
}

impl Dedup {
    pub const fn as_str(self) -> &'static str {
        match self {
            Dedup::InFlight => "in_flight",
            Dedup::RecentResult => "recent_result",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Dedup::InFlight, Dedup::RecentResult].into_iter().find(|d| d.as_str() == s)
    }

    /// How the account's latest non-failed job of a ref answers a new request for it, if at all.
    pub fn of(status: JobStatus, finished_at_ms: Option<i64>, now_ms: i64) -> Option<Self> {
        if status.is_running() {
            return Some(Dedup::InFlight);
        }
        let recent = crate::limits::ms(crate::limits::RECENT_RESULT);
        match (status, finished_at_ms) {
            (JobStatus::Complete, Some(t)) if t > now_ms - recent => Some(Dedup::RecentResult),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in [JobStatus::Queued, JobStatus::InProgress, JobStatus::Complete, JobStatus::Failed] {
            assert_eq!(JobStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).ok(), Some(serde_json::Value::from(s.as_str())));
        }
        for k in JobKind::ALL {
            assert_eq!(JobKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(JobStatus::parse("done"), None);
    }

    #[test]
    fn dedup_windows() {
        let now = 10 * 60 * 1000;
        assert_eq!(Dedup::of(JobStatus::Queued, None, now), Some(Dedup::InFlight));
        assert_eq!(Dedup::of(JobStatus::Complete, Some(now - 1000), now), Some(Dedup::RecentResult));
        assert_eq!(Dedup::of(JobStatus::Complete, Some(now - 5 * 60 * 1000), now), None);
        assert_eq!(Dedup::of(JobStatus::Failed, Some(now), now), None);
    }
}

/// Why a collection kept fewer comments than the post has (`truncated_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Truncation {
    /// The per-post cap ([`crate::limits::MAX_COMMENTS_PER_POST`]).
    PostCap,
    /// What the balance allowed (the job's hold).
    Balance,
    /// The customer's own cap on the job (`max_comments`).
    MaxComments,
    /// The platform showed cova only part of the post's comments (Instagram without a
    /// session shows a visitor a few): all of them were collected, and only they are charged.
    VisitorView,
    /// The platform stopped handing out pages while it still said there were more (a cursor
    /// that did not move): every comment it handed out was collected, and only they are charged.
    PlatformStopped,
}

impl Truncation {
    pub const fn as_str(self) -> &'static str {
        match self {
            Truncation::PostCap => "post_cap",
            Truncation::Balance => "balance",
            Truncation::MaxComments => "max_comments",
            Truncation::VisitorView => "visitor_view",
            Truncation::PlatformStopped => "platform_stopped",
        }
    }

    pub const ALL: [Truncation; 5] = [
        Truncation::PostCap,
        Truncation::Balance,
        Truncation::MaxComments,
        Truncation::VisitorView,
        Truncation::PlatformStopped,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// Whether a list has ended: none of its URLs waits and none of the jobs they started runs.
pub fn list_ended(items: &[BatchItemState], statuses: &[JobStatus]) -> bool {
    !items.contains(&BatchItemState::Waiting) && !statuses.iter().any(|s| s.is_running())
}

/// What a batch's URL has come to (`GET /analyze/batch/{id}`): waiting for a slot, its job
/// running or ended, refused (an invalid URL, the balance ran out) or cancelled before it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchItemState {
    Waiting,
    Running,
    Complete,
    Failed,
    Refused,
    Cancelled,
}

impl BatchItemState {
    pub const ALL: [BatchItemState; 6] = [
        BatchItemState::Waiting,
        BatchItemState::Running,
        BatchItemState::Complete,
        BatchItemState::Failed,
        BatchItemState::Refused,
        BatchItemState::Cancelled,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            BatchItemState::Waiting => "waiting",
            BatchItemState::Running => "running",
            BatchItemState::Complete => "complete",
            BatchItemState::Failed => "failed",
            BatchItemState::Refused => "refused",
            BatchItemState::Cancelled => "cancelled",
        }
    }

    pub const fn is_over(self) -> bool {
        !matches!(self, BatchItemState::Waiting | BatchItemState::Running)
    }
}
