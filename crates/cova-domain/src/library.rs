//! The library: analyses, their lifetime and their watch schedule.

use crate::limits::{LIBRARY_LIFETIME, WATCH_INTERVAL_MIN, ms};
use serde::{Deserialize, Serialize};

/// What an analysis holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "diesel", derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow), diesel(sql_type = diesel::sql_types::Text))]
#[serde(rename_all = "snake_case")]
pub enum AnalysisStatus {
    /// The breakdown of the last full scrape is there.
    Ready,
    /// The breakdown was purged 14 days after the last full scrape (or removed); a refresh
    /// restores it.
    Expired,
    /// Only the post's metadata was saved; a refresh collects the comments.
    MetadataOnly,
}

impl AnalysisStatus {
    pub const ALL: [AnalysisStatus; 3] = [AnalysisStatus::Ready, AnalysisStatus::Expired, AnalysisStatus::MetadataOnly];

    pub const fn as_str(self) -> &'static str {
        match self {
            AnalysisStatus::Ready => "ready",
            AnalysisStatus::Expired => "expired",
            AnalysisStatus::MetadataOnly => "metadata_only",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// When the breakdown of a scrape finished at `scraped_at` expires. Only a full scrape moves
/// it: opening an entry or polling a job never does.
pub const fn expires_at(scraped_at: i64) -> i64 {
    scraped_at + ms(LIBRARY_LIFETIME)
}

/// Longest random delay added to a watch's next run, so that the watches of one interval do
/// not all fire in the same second: a tenth of the interval, at most five minutes.
pub const fn max_jitter_ms(interval_min: i64) -> i64 {
    let tenth = interval_min * 60_000 / 10;
    if tenth < 300_000 { tenth } else { 300_000 }
}

/// The next run of a watch: one interval after `now` (never one per missed interval, so a
/// scheduler that was down starts one catch-up run), plus `jitter` (0.0..1.0) of the jitter.
pub fn next_run_at(now: i64, interval_min: i64, jitter: f64) -> i64 {
    let interval = interval_min.clamp(*WATCH_INTERVAL_MIN.start(), *WATCH_INTERVAL_MIN.end());
    now + interval * 60_000 + (max_jitter_ms(interval) as f64 * jitter.clamp(0.0, 1.0)) as i64
}

/// How an alert names a post to a person: its title, else its description (a TikTok or an
/// Instagram post has no title of its own); `None` when its stored metadata has neither.
pub fn headline(metadata: &serde_json::Value) -> Option<String> {
    metadata["title"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| metadata["description"].as_str())
        .filter(|t| !t.trim().is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_and_lifetime() {
        assert_eq!(next_run_at(0, 30, 0.0), 1_800_000);
        assert_eq!(next_run_at(0, 30, 1.0), 1_800_000 + 180_000);
        assert_eq!(next_run_at(0, 10_080, 1.0), 10_080 * 60_000 + 300_000);
        assert_eq!(expires_at(0), 14 * 86_400_000);
        for s in AnalysisStatus::ALL {
            assert_eq!(AnalysisStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn a_post_is_named_by_its_title_else_its_description() {
        let named = |m: serde_json::Value| headline(&m);
        assert_eq!(named(serde_json::json!({"title": "Unboxing", "description": "x"})).as_deref(), Some("Unboxing"));
        assert_eq!(named(serde_json::json!({"title": null, "description": "new drop"})).as_deref(), Some("new drop"));
        assert_eq!(named(serde_json::json!({"title": " ", "description": ""})), None);
        assert_eq!(named(serde_json::Value::Null), None);
    }
}
