//! Spike alerts: after each collection of a post in the account's library (a watch run, a
//! creator's new post, a refresh), its comments are counted per ten minutes from their own
//! times and the latest hour is judged against the two weeks before it
//! (`cova_domain::spikes::decide`): far more comments than the post's own rate, or a far
//! larger share of negative ones. An alert says what happened in figures and words and is
//! announced as a `spike.alert` event; a spike that goes on is one alert (the cooldown).

use cova_analyzers::{Analyzer, Comment as Analyzed, Label, Offline};
use cova_domain::spikes::{self, Check, Decision, Kind, Spike};
use cova_messages::{AlertAuthor, AlertComment, SpikeAlertEvent, SpikeEventType, SpikeSentiment};
use cova_storage::Db;
use cova_storage::StorageError;
use cova_storage::repo::breakdown;
use cova_storage::repo::{analyses, balances, creators, spikes as store};

/// Comments read per query.
const CHUNK: i64 = 1_000;
/// The baseline's comments whose sentiment is judged: the latest ones before the window.
const BASELINE_JUDGED: usize = 1_000;
/// Terms and example comments an alert carries.
const TERMS: usize = 5;
const EXAMPLES: usize = 3;

/// One comment as the check reads it.
struct Read {
    id: String,
    at: i64,
    text: String,
    likes: u64,
    author: AlertAuthor,
}

/// Checks the post and records the alerts it calls for; returns how many (their events are in
/// the outbox: the caller wakes its relay). Nothing happens for a post outside the library, an
/// account without a pack this month (a paid feature) or with spike alerts turned off.
pub async fn check(db: &Db, account_id: &str, r#ref: &str, now: i64) -> Result<usize, StorageError> {
    let Some(analysis) = analyses::get_saved(db, account_id, r#ref).await? else { return Ok(0) };
    let Some(job) = analysis.breakdown_job() else { return Ok(0) };
    let settings = store::effective(db, account_id, r#ref, analysis.creator_ref.as_deref()).await?;
    if !settings.enabled || !balances::has_pack(db, account_id, now).await? {
        return Ok(0);
    }
    let comments = read_all(db, job).await?;
    let times: Vec<i64> = comments.iter().map(|c| c.at).collect();
    // The history starts at the post's first comment of the last two weeks: a young post is
    // judged on the hours it has had, not on days of zeros before it existed.
    let width = i64::from(spikes::BUCKET_MIN) * 60_000;
    let fortnight = now - spikes::HISTORY_BUCKETS as i64 * width;
    let lived = times.iter().filter(|t| **t >= fortnight).min().map_or(0, |first| (now - first).max(0) / width + 1);
    let buckets = usize::try_from(lived).unwrap_or(usize::MAX).clamp(spikes::WINDOW_BUCKETS, spikes::HISTORY_BUCKETS);
    let counts = spikes::counts(&times, now, spikes::BUCKET_MIN, buckets);
    let window_ms = spikes::WINDOW_BUCKETS as i64 * i64::from(spikes::BUCKET_MIN) * 60_000;
    let start = now - window_ms;
    let history_start = now - buckets as i64 * width;
    let window: Vec<&Read> = comments.iter().filter(|c| c.at >= start && c.at < now).collect();
    let mut before: Vec<&Read> = comments.iter().filter(|c| c.at >= history_start && c.at < start).collect();
    before.sort_by_key(|c| std::cmp::Reverse(c.at));
    before.truncate(BASELINE_JUDGED);
    let offline = Offline::new();
    let negative = |list: &[&Read]| list.iter().filter(|c| offline.label(&c.text).sentiment == Label::Negative).count();
    let check = Check {
        settings,
        counts: &counts,
        negative: negative(&window) as u64,
        judged: window.len() as u64,
        base_negative: negative(&before) as u64,
        base_judged: before.len() as u64,
        last_volume: store::last_end(db, account_id, r#ref, Kind::Volume).await?,
        last_sentiment: store::last_end(db, account_id, r#ref, Kind::Sentiment).await?,
        now,
    };
    let decisions = spikes::decide(&check);
    let raised: Vec<&Spike> =
        decisions.iter().filter_map(|d| if let Decision::Raise(s) = d { Some(s) } else { None }).collect();
    if raised.is_empty() {
        tracing::debug!(account.id = %account_id, r#ref = %r#ref, ?decisions, "no spike");
        return Ok(0);
    }
    // What the window's comments say, once for every alert of this check.
    let analyzed: Vec<Analyzed> = window
        .iter()
        .map(|c| Analyzed { id: c.id.clone(), text: c.text.clone(), author: c.author.id.clone() })
        .collect();
    let analysis_of_window = offline.analyze(&analyzed, &[]).await.ok();
    let top_terms: Vec<String> = analysis_of_window
        .as_ref()
        .map(|a| a.topics.iter().take(TERMS).map(|t| t.phrase.clone()).collect())
        .unwrap_or_default();
    let sentiment = analysis_of_window
        .as_ref()
        .map(|a| SpikeSentiment {
            positive: a.sentiment.positive,
            neutral: a.sentiment.neutral,
            negative: a.sentiment.negative,
        })
        .unwrap_or(SpikeSentiment { positive: 0.0, neutral: 0.0, negative: 0.0 });
    let mut liked = window.clone();
    liked.sort_by_key(|c| std::cmp::Reverse(c.likes));
    let examples: Vec<AlertComment> = liked
        .iter()
        .take(EXAMPLES)
        .map(|c| AlertComment { id: c.id.clone(), text: c.text.clone(), author: c.author.clone() })
        .collect();
    let metadata: serde_json::Value =
        analysis.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default();
    let creator = match &analysis.creator_ref {
        Some(creator) => creators::get(db, account_id, creator).await?.map(|c| c.named()),
        None => None,
    };
    let baseline_share = (check.base_negative as f64 + 2.0) / (check.base_judged as f64 + 20.0);
    let trace = cova_telemetry::current_trace_json();
    let mut recorded = 0;
    for spike in raised {
        let event = SpikeAlertEvent {
            event_type: SpikeEventType::SpikeAlert,
            id: cova_storage::repo::new_id(),
            account_id: account_id.to_owned(),
            kind: spike.kind.as_str().to_owned(),
            r#ref: r#ref.to_owned(),
            url: analysis.url.clone(),
            title: metadata["title"]
                .as_str()
                .or_else(|| metadata["description"].as_str())
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
            author: metadata["author"]["handle"].as_str().map(str::to_owned),
            window_start: cova_domain::time::rfc3339(start),
            window_end: cova_domain::time::rfc3339(now),
            comments: spike.observed,
            expected: round2(spike.expected),
            negative_share: round2(spike.share.unwrap_or_else(|| share(check.negative, check.judged))),
            baseline_negative_share: round2(spike.baseline_share.unwrap_or(baseline_share)),
            sentiment: sentiment.clone(),
            top_terms: top_terms.clone(),
            examples: examples.clone(),
            sensitivity: settings.sensitivity.as_str().to_owned(),
            created_at: cova_domain::time::rfc3339(now),
            creator: creator.clone(),
        };
        let cooldown_ms = i64::from(settings.cooldown_min) * 60_000;
        if store::record(db, &event, (start, now), cooldown_ms, &trace, now).await?.is_some() {
            tracing::info!(account.id = %account_id, r#ref = %r#ref, kind = spike.kind.as_str(),
                comments = spike.observed, expected = spike.expected, "spike alert raised");
            recorded += 1;
        }
    }
    Ok(recorded)
}

fn share(part: u64, of: u64) -> f64 {
    if of == 0 { 0.0 } else { part as f64 / of as f64 }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Every comment of the breakdown with its time (unix ms).
async fn read_all(db: &Db, job: &str) -> Result<Vec<Read>, StorageError> {
    let mut out = Vec::new();
    let mut after = -1;
    loop {
        let rows = breakdown::chunk(db, job, after, CHUNK).await?;
        for row in &rows {
            let Ok(c) = serde_json::from_str::<serde_json::Value>(&row.body) else { continue };
            let Some(at) = c["created_at"].as_str().and_then(cova_domain::time::parse_rfc3339) else { continue };
            out.push(Read {
                id: row.comment_id.clone(),
                at,
                text: c["text"].as_str().unwrap_or_default().to_owned(),
                likes: c["likes"].as_u64().unwrap_or(0),
                author: AlertAuthor {
                    id: c["author"]["id"].as_str().unwrap_or_default().to_owned(),
                    handle: c["author"]["handle"].as_str().map(str::to_owned),
                    name: c["author"]["name"].as_str().map(str::to_owned),
                },
            });
        }
        match rows.last() {
            Some(last) if rows.len() as i64 == CHUNK => after = last.position,
            _ => return Ok(out),
        }
    }
}
