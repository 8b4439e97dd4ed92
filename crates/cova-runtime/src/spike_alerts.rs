//! Spike alerts: after each collection of a post in the account's library (a watch run, a
//! creator's new post, a refresh), its comments are counted per ten minutes from their own
//! times and the latest hour is judged against the two weeks before it
//! (`cova_domain::spikes::decide`): far more comments than the post's own rate, or a far
//! larger share of negative ones. A followed creator's new post is also compared with the
//! creator's earlier posts at the same age (a take-off). An alert says what happened in figures and words and is
//! announced as a `spike.alert` event; a spike that goes on is one alert (the cooldown).

use crate::sentiment;
use cova_analyzers::{Analyzer, Comment as Analyzed, Label, Offline};
use cova_domain::money;
use cova_domain::spikes::{self, Check, Decision, Kind, Spike, Takeoff};
use cova_messages::{AlertAuthor, AlertComment, SpikeAlertEvent, SpikeEventType, SpikeSentiment};
use cova_storage::Db;
use cova_storage::StorageError;
use cova_storage::repo::analyses::Analysis;
use cova_storage::repo::breakdown;
use cova_storage::repo::{analyses, balances, creators, spikes as store};

/// The baseline's comments whose sentiment is judged: the latest ones before the window.
const BASELINE_JUDGED: i64 = 1_000;
/// The window's comments whose sentiment is judged (the latest; all of them are counted).
const WINDOW_JUDGED: i64 = 2_000;
/// Terms and example comments an alert carries.
const TERMS: usize = 5;
const EXAMPLES: usize = 3;

/// One comment as the check reads it.
struct Read {
    id: String,
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
    if !settings.enabled || !money::pack_bought(balances::current(db, account_id, now).await?.granted) {
        return Ok(0);
    }
    // The comments new since the last check are judged now, once (the rest carry their labels).
    crate::sentiment::judge_new(db, job).await?;
    // The database counts the comments per bucket over the two weeks in one pass and hands
    // the latest stored labels of the window and of the time before it; nothing is judged
    // again. The buckets a check weighs are the latest, from the post's first comment on
    // (`history_buckets`), all aligned to `now`; no comment is older than the first.
    let width = i64::from(spikes::BUCKET_MIN) * 60_000;
    let window_ms = spikes::WINDOW_BUCKETS as i64 * width;
    let start = now - window_ms;
    let timeline = breakdown::timeline(
        db,
        job,
        breakdown::Spans {
            start: now - spikes::HISTORY_MS,
            width,
            buckets: spikes::HISTORY_BUCKETS,
            window_start: start,
            window_labels: WINDOW_JUDGED,
            before_labels: BASELINE_JUDGED,
        },
    )
    .await?;
    let so_far: u64 = timeline.counts.iter().sum();
    let buckets = spikes::history_buckets(timeline.first, now);
    let counts = &timeline.counts[timeline.counts.len() - buckets..];
    let (negative, judged) = sentiment::negative_of(&timeline.window);
    let mut base = sentiment::negative_of(&timeline.before);
    let young = young(db, account_id, &analysis, now).await?;
    // A creator's new post with little history of its own is judged against its creator's
    // usual share: the earlier posts' comments fill its baseline up to `BASELINE_JUDGED`.
    if let Some(y) = &young
        && base.1 < BASELINE_JUDGED as u64
        && !y.jobs.is_empty()
    {
        let each = ((BASELINE_JUDGED as u64 - base.1) / y.jobs.len() as u64).max(1) as i64;
        for job in &y.jobs {
            crate::sentiment::judge_new(db, job).await?;
            let (n, of) = sentiment::negative_of(&breakdown::first_sentiments(db, job, each).await?);
            base = (base.0 + n, base.1 + of);
        }
    }
    let last = async |kind| store::last_end(db, account_id, r#ref, kind).await;
    let check = Check {
        settings,
        counts,
        negative,
        judged,
        base_negative: base.0,
        base_judged: base.1,
        last_volume: last(Kind::Volume).await?,
        last_sentiment: last(Kind::Sentiment).await?,
        takeoff: young.as_ref().map(|y| Takeoff { count: so_far, earlier: &y.earlier }),
        last_takeoff: if young.is_some() { last(Kind::Takeoff).await? } else { None },
        now,
    };
    let decisions = spikes::decide(&check);
    let raised: Vec<&Spike> =
        decisions.iter().filter_map(|d| if let Decision::Raise(s) = d { Some(s) } else { None }).collect();
    if raised.is_empty() {
        tracing::debug!(account.id = %account_id, r#ref = %r#ref, ?decisions, "no spike");
        return Ok(0);
    }
    let metadata: serde_json::Value =
        analysis.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default();
    let creator = match &analysis.creator_ref {
        Some(creator) => creators::get(db, account_id, creator).await?.map(|c| c.named()),
        None => None,
    };
    let baseline_share = spikes::baseline_share(check.base_negative, check.base_judged);
    let offline = Offline::new();
    let trace = cova_telemetry::current_trace_json();
    let mut recorded = 0;
    for spike in raised {
        // A take-off's window is the post's life so far.
        let (start, life) = match (spike.kind, &young) {
            (Kind::Takeoff, Some(y)) => {
                (y.published_at, parse(&breakdown::posted_in(db, job, (y.published_at, now), WINDOW_JUDGED).await?))
            }
            _ => (start, Vec::new()),
        };
        let window = if life.is_empty() {
            parse(&breakdown::posted_in(db, job, (start, now), WINDOW_JUDGED).await?)
        } else {
            life
        };
        let comments: Vec<&Read> = window.iter().collect();
        let about = About::of(&offline, &comments).await;
        let negative_share = match spike.share {
            Some(share) => share,
            None => share(negative_of(&comments).await, comments.len() as u64),
        };
        let event = SpikeAlertEvent {
            event_type: SpikeEventType::SpikeAlert,
            id: cova_storage::repo::new_id(),
            account_id: account_id.to_owned(),
            kind: spike.kind.as_str().to_owned(),
            r#ref: r#ref.to_owned(),
            url: analysis.url.clone(),
            title: cova_domain::library::headline(&metadata),
            author: metadata["author"]["handle"].as_str().map(str::to_owned),
            window_start: cova_domain::time::rfc3339(start),
            window_end: cova_domain::time::rfc3339(now),
            comments: spike.observed,
            expected: round2(spike.expected),
            negative_share: round2(negative_share),
            baseline_negative_share: round2(spike.baseline_share.unwrap_or(baseline_share)),
            sentiment: about.sentiment,
            top_terms: about.terms,
            examples: about.examples,
            sensitivity: settings.sensitivity.as_str().to_owned(),
            created_at: cova_domain::time::rfc3339(now),
            creator: creator.clone(),
        };
        if store::record(db, &event, spike.kind, (start, now), settings.cooldown_min, &trace, now).await?.is_some() {
            tracing::info!(account.id = %account_id, r#ref = %r#ref, kind = spike.kind.as_str(),
                comments = spike.observed, expected = spike.expected, "spike alert raised");
            recorded += 1;
        }
    }
    Ok(recorded)
}

/// What an alert's comments say: their top terms, their sentiment split, the most liked.
struct About {
    terms: Vec<String>,
    sentiment: SpikeSentiment,
    examples: Vec<AlertComment>,
}

impl About {
    async fn of(offline: &Offline, comments: &[&Read]) -> Self {
        let analyzed: Vec<Analyzed> = comments
            .iter()
            .map(|c| Analyzed { id: c.id.clone(), text: c.text.clone(), author: c.author.id.clone(), sentiment: None })
            .collect();
        let analysis = offline.analyze(&analyzed, &[]).await.ok();
        let terms = analysis
            .as_ref()
            .map(|a| a.topics.iter().take(TERMS).map(|t| t.phrase.clone()).collect())
            .unwrap_or_default();
        let sentiment = analysis.as_ref().map_or(SpikeSentiment { positive: 0.0, neutral: 0.0, negative: 0.0 }, |a| {
            SpikeSentiment {
                positive: a.sentiment.positive,
                neutral: a.sentiment.neutral,
                negative: a.sentiment.negative,
            }
        });
        let mut liked = comments.to_vec();
        liked.sort_by_key(|c| std::cmp::Reverse(c.likes));
        let examples = liked
            .iter()
            .take(EXAMPLES)
            .map(|c| AlertComment { id: c.id.clone(), text: c.text.clone(), author: c.author.clone() })
            .collect();
        Self { terms, sentiment, examples }
    }
}

/// A followed creator's new post: when it was published, and the comments each of the
/// creator's latest earlier posts had at its age.
struct Young {
    published_at: i64,
    earlier: Vec<u64>,
    /// The breakdowns of the creator's latest earlier posts, newest first.
    jobs: Vec<String>,
}

/// The post as a followed creator's new post (`None` when it is not one, or no longer new).
async fn young(db: &Db, account_id: &str, analysis: &Analysis, now: i64) -> Result<Option<Young>, StorageError> {
    let Some(creator) = analysis.creator_ref.as_deref() else { return Ok(None) };
    let Some(post) = creators::post(db, account_id, creator, &analysis.r#ref).await? else { return Ok(None) };
    if !spikes::takeoff_applies(post.published_at, now) {
        return Ok(None);
    }
    let cursor = Some((post.published_at, post.post_ref.clone()));
    let (mut earlier, mut jobs) = (Vec::new(), Vec::new());
    for p in creators::posts(db, account_id, creator, cursor, spikes::TAKEOFF_EARLIER as i64).await? {
        let Some(a) = analyses::get_saved(db, account_id, &p.post_ref).await? else { continue };
        let (Some(job), Some(collected)) = (a.breakdown_job(), a.last_scraped_at) else { continue };
        jobs.push(job.to_owned());
        // Only a post collected past this age says what it had at this age.
        if let Some(at) = spikes::same_age(p.published_at, collected, post.published_at, now) {
            earlier.push(breakdown::count_before(db, job, at).await?);
        }
    }
    Ok(Some(Young { published_at: post.published_at, earlier, jobs }))
}

/// What the checks of a post in the library can judge at `now`, so that a post too young to
/// judge says so rather than wait silently.
#[derive(Debug, Clone, PartialEq)]
pub struct Judging {
    /// When its volume is first judged (its first comment of the last two weeks and the history
    /// a judgement needs); `None` while it has no comment from the last two weeks.
    pub volume_from: Option<i64>,
    /// As a followed creator's new post: the earlier posts it is compared with so far, and
    /// until when it is compared.
    pub takeoff: Option<(usize, i64)>,
}

/// What the checks of `ref` can judge at `now`; `None` for a post outside the library.
pub async fn judging(db: &Db, account_id: &str, r#ref: &str, now: i64) -> Result<Option<Judging>, StorageError> {
    let Some(analysis) = analyses::get_saved(db, account_id, r#ref).await? else { return Ok(None) };
    let first = match analysis.breakdown_job() {
        Some(job) => breakdown::first_posted_since(db, job, now - spikes::HISTORY_MS).await?,
        None => None,
    };
    let takeoff = young(db, account_id, &analysis, now)
        .await?
        .map(|y| (y.earlier.len(), y.published_at + spikes::TAKEOFF_MAX_AGE_MS));
    Ok(Some(Judging { volume_from: first.map(spikes::volume_judged_from), takeoff }))
}

/// How many of an alert's comments are negative.
async fn negative_of(comments: &[&Read]) -> u64 {
    let labels = Offline::label_all(comments.iter().map(|c| c.text.clone()).collect()).await;
    labels.iter().filter(|l| l.sentiment == Label::Negative).count() as u64
}

fn share(part: u64, of: u64) -> f64 {
    if of == 0 { 0.0 } else { part as f64 / of as f64 }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The stored comments as the check reads them.
fn parse(rows: &[breakdown::Row]) -> Vec<Read> {
    rows.iter()
        .filter_map(|row| {
            let c = serde_json::from_str::<serde_json::Value>(&row.body).ok()?;
            Some(Read {
                id: row.comment_id.clone(),
                text: c["text"].as_str().unwrap_or_default().to_owned(),
                likes: c["likes"].as_u64().unwrap_or(0),
                author: AlertAuthor {
                    id: c["author"]["id"].as_str().unwrap_or_default().to_owned(),
                    handle: c["author"]["handle"].as_str().map(str::to_owned),
                    name: c["author"]["name"].as_str().map(str::to_owned),
                },
            })
        })
        .collect()
}
