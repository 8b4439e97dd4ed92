//! Following creators (TikTok accounts, YouTube channels), the part shared by the gateway
//! (`POST /creators`, `POST /creators/{ref}/refresh`) and the scheduler (due creators):
//!
//! - [`add`] reads the profile behind a creator URL and adds the creator, keyed by its platform
//!   id (never the handle), so a handle change finds the same creator;
//! - [`run`] lists a claimed creator's posts newer than the ones it knows, records the new
//!   ones (library, `creator.post_found`) and collects them as a batch: the account's three
//!   running analyses and its balance decide when each starts, as for any URL list.
//!
//! A listing costs nothing from the comment balance; only collecting does.

use cova_domain::limits::{MAX_BATCH_URLS, WATCH_INTERVAL_DEFAULT_MIN};
use cova_domain::{library, money};
use cova_platforms::{Creator, FoundPost, Listing, PlatformError, Platforms};
use cova_storage::repo::balances;
use cova_storage::repo::batches::{self, NewBatch, NewItem};
use cova_storage::repo::creators::{self, Added, CreatorRow, Found, NewCreator, NextRun, RunEnd};
use cova_storage::{Db, StorageError};

/// Pages of posts a run reads at most (TikTok: 35 a page; YouTube: 50, a quota unit each).
pub const MAX_PAGES: u32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum CreatorError {
    #[error(transparent)]
    Platform(#[from] PlatformError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Reads the creator behind `url` and adds it to the account (or refreshes its profile).
pub async fn add(
    db: &Db,
    platforms: &Platforms,
    account_id: &str,
    url: &str,
    limit: i64,
    now: i64,
) -> Result<Added, CreatorError> {
    let creator = platforms.creator(url).await?;
    let profile = serde_json::to_string(&creator).unwrap_or_default();
    let r#ref = creator.r#ref();
    let new = NewCreator {
        account_id,
        r#ref: &r#ref,
        platform: creator.platform.as_str(),
        listing: &creator.listing,
        profile: &profile,
    };
    Ok(creators::add(db, new, limit, now).await?)
}

/// The platform profile a creator row keeps.
pub fn profile(row: &CreatorRow) -> Option<Creator> {
    serde_json::from_str(&row.profile).ok()
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Run {
    /// The refs of the posts it found, newest first.
    pub found: Vec<String>,
    /// The list collecting them, when collection is on (its URLs started as the money rules
    /// let them: `cova_runtime::flow::advance`).
    pub batch_id: Option<String>,
    /// How many of its URLs started at once.
    pub started: usize,
    /// Why the platform could not be listed; the creator shows it until the next run.
    pub error: Option<PlatformError>,
}

/// When a run happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occasion {
    /// Its time came: the next run is one interval from now (when it is followed).
    Scheduled,
    /// Asked for now (`POST /creators/{ref}/refresh`): the schedule stays as it was.
    Asked,
}

/// Runs a creator this caller has claimed: lists its new posts, records them and the batch that
/// collects them (whose URLs the caller then starts), and releases the claim, also when it
/// fails or is dropped ([`Claim`]). A platform failure is recorded on the creator (and answered
/// in [`Run::error`]), not raised.
pub async fn run(
    db: &Db,
    platforms: &Platforms,
    row: &CreatorRow,
    occasion: Occasion,
    trace: &str,
    now: i64,
) -> Result<Run, StorageError> {
    // How long the claim lasts, on the clock of the process that gives it back.
    let lasts = std::time::Duration::from_millis(u64::try_from(row.claimed_until - now).unwrap_or(0));
    let mut claim = Claim { db, row, lasts, ended: false };
    let run = run_claimed(db, platforms, row, occasion, trace, now).await;
    // A run that returns has recorded its end (which released the claim) unless it failed.
    claim.ended = run.is_ok();
    run
}

/// The claim of a run under way. A run that fails to record its end (the database went away
/// mid-run) or is dropped (its request timed out, its client left) gives the claim back as
/// soon as the database answers, within the claim's lifetime: otherwise every refresh would
/// answer `run_in_progress` and new posts would wait for the next period, for minutes.
struct Claim<'a> {
    db: &'a Db,
    row: &'a CreatorRow,
    lasts: std::time::Duration,
    ended: bool,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if self.ended {
            return;
        }
        let (db, row) = (self.db.clone(), self.row.clone());
        let lapses = std::time::Instant::now() + self.lasts;
        runtime.spawn(async move {
            let mut wait = std::time::Duration::from_millis(100);
            loop {
                match creators::give_back(&db, &row).await {
                    Ok(()) => return,
                    Err(e) => tracing::debug!(creator.r#ref = %row.r#ref, error = %e, "giving a claim back failed; trying again"),
                }
                // Past the claim's end it has lapsed by itself.
                if std::time::Instant::now() >= lapses {
                    return;
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(std::time::Duration::from_secs(2));
            }
        });
    }
}

/// [`run`], once the claim is in hand.
async fn run_claimed(
    db: &Db,
    platforms: &Platforms,
    row: &CreatorRow,
    occasion: Occasion,
    trace: &str,
    now: i64,
) -> Result<Run, StorageError> {
    let next_run = match occasion {
        Occasion::Asked => NextRun::Keep,
        Occasion::Scheduled => NextRun::At(
            row.watch_enabled
                .then(|| library::next_run_at(now, i64::from(row.watch_interval_min), jitter(&row.id, now))),
        ),
    };
    let end =
        |found, batch_id, error| RunEnd { found, batch_id, error, next_run, interval_min: WATCH_INTERVAL_DEFAULT_MIN };
    // Following needs a pack each month, as post watches do: a scheduled run without one is
    // skipped with the reason (a run asked for now is not following).
    if occasion == Occasion::Scheduled
        && !money::pack_bought(balances::current(db, &row.account_id, now).await?.granted)
    {
        let error =
            "Following creators needs a comment pack this month; this run was skipped and the next one tries again.";
        creators::end_run(db, row, end(&[], None, Some(error)), trace, now).await?;
        return Ok(Run::default());
    }
    let Some(creator) = profile(row) else {
        let error = "the creator's stored profile cannot be read; add it again";
        creators::end_run(db, row, end(&[], None, Some(error)), trace, now).await?;
        return Ok(Run { error: Some(PlatformError::Parse(error.into())), ..Run::default() });
    };
    let known = creators::known_posts(db, &row.account_id, &row.r#ref).await?;
    let is_known = |post: &cova_platforms::PostRef| known.contains(&post.to_string());
    // Platforms date posts to the second: a post of the second the creator was added counts.
    let since = row.since_at - row.since_at.rem_euclid(1000);
    let listing = Listing { since, known: &is_known, max_pages: MAX_PAGES };
    let mut posts = match platforms.creator_posts(&creator, &listing).await {
        Ok(posts) => posts,
        Err(e) => {
            tracing::warn!(creator.r#ref = %row.r#ref, error = %e, "listing a creator failed");
            creators::end_run(db, row, end(&[], None, Some(e.detail())), trace, now).await?;
            return Ok(Run { error: Some(e), ..Run::default() });
        }
    };
    // Newest first; one run collects at most a batch's worth.
    posts.truncate(MAX_BATCH_URLS);
    let found: Vec<Found> = posts.iter().map(found).collect();
    let batch_id = if row.collect_comments && !found.is_empty() {
        let items = posts
            .iter()
            .zip(&found)
            .map(|(post, f)| NewItem {
                url: f.url.clone(),
                post: Ok(f.post_ref.clone()),
                // The listing read each post's count: the balance it needs is known.
                known_comments: post
                    .metadata
                    .as_ref()
                    .and_then(|m| m.metrics.comments)
                    .and_then(|n| i64::try_from(n).ok()),
            })
            .collect();
        let digest = format!("creator:{}:{now}", row.r#ref);
        let new = NewBatch {
            account_id: &row.account_id,
            token_id: None,
            session_id: None,
            idempotency_key: None,
            request_digest: &digest,
            items,
            max_comments: None,
        };
        match batches::create(db, new, now).await? {
            batches::Created::New(id) | batches::Created::Repeated(id) => Some(id),
            batches::Created::Conflict => None,
        }
    } else {
        None
    };
    let recorded = creators::end_run(db, row, end(&found, batch_id.as_deref(), None), trace, now).await?;
    if !recorded.is_empty() {
        tracing::info!(creator.r#ref = %row.r#ref, found = recorded.len(), "new posts of a creator found");
    }
    let started = match &batch_id {
        Some(_) => cova_runtime::flow::advance(db, &row.account_id, trace, now).await?,
        None => 0,
    };
    Ok(Run { found: recorded, batch_id, started, error: None })
}

fn found(post: &FoundPost) -> Found {
    Found {
        post_ref: post.post.to_string(),
        url: post.url.clone(),
        platform: post.post.platform.as_str().to_owned(),
        title: post.title.clone(),
        // The walk takes dated posts only.
        published_at: post.published_at.unwrap_or_default(),
        pinned: post.pinned,
        metadata: post.metadata.as_ref().map(|m| (serde_json::to_string(m).unwrap_or_default(), m.search_text())),
    }
}

/// A spread of the next run within the interval's jitter, stable for a creator and a run.
fn jitter(id: &str, now: i64) -> f64 {
    let h = id.bytes().fold(now as u64, |h, b| h.rotate_left(5) ^ u64::from(b));
    (h % 1000) as f64 / 1000.0
}
