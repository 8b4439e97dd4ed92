//! Creators an account follows (TikTok accounts, YouTube channels). A run lists a creator's
//! posts newer than the ones it knows; each new post is recorded once, saved in the library
//! (marked with the creator, watched for its first days) and announced as `creator.post_found`.
//! Collecting their comments is a batch (see `batches`): the three-running rule and paying at
//! start hold as for any URL list. The scheduler claims due creators like due watches.

use crate::schema::{analyses, creator_posts, creators};
use crate::{Db, Result, StorageError, Tx};
use cova_domain::AnalysisStatus;
use cova_messages::{AlertCreator, CreatorEvent, CreatorEventType, Outgoing};
use diesel::prelude::*;
use std::collections::HashSet;

/// How long a claim keeps other schedulers (and refreshes) off a creator: a listing retries a
/// blocked platform for a while.
pub const CLAIM_MS: i64 = 5 * 60_000;
/// A refresh's claim: the refresh runs inside its request, which ends well within this (the
/// request timeout, 30 s by default), giving the claim back; only a gateway killed mid-refresh
/// leaves it to lapse.
pub const ASKED_CLAIM_MS: i64 = 60_000;

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = creators)]
pub struct CreatorRow {
    pub id: String,
    pub account_id: String,
    #[diesel(column_name = ref_)]
    pub r#ref: String,
    pub platform: String,
    pub listing: String,
    /// The platform profile as last read (JSON of `cova_platforms::Creator`).
    pub profile: String,
    pub created_at: i64,
    pub since_at: i64,
    pub watch_enabled: bool,
    pub watch_interval_min: i32,
    pub collect_comments: bool,
    pub follow_days: i32,
    pub next_run_at: Option<i64>,
    pub last_run_at: Option<i64>,
    pub last_error: Option<String>,
    pub claimed_until: i64,
}

/// The creator's name as events and alerts show it.
impl CreatorRow {
    pub fn named(&self) -> AlertCreator {
        let profile: serde_json::Value = serde_json::from_str(&self.profile).unwrap_or_default();
        AlertCreator {
            r#ref: self.r#ref.clone(),
            handle: profile["handle"].as_str().map(str::to_owned),
            name: profile["name"].as_str().map(str::to_owned),
        }
    }
}

pub struct NewCreator<'a> {
    pub account_id: &'a str,
    pub r#ref: &'a str,
    pub platform: &'a str,
    pub listing: &'a str,
    pub profile: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    New(CreatorRow),
    /// Added before (by this URL or another one of the same creator): its profile is refreshed.
    Existing(CreatorRow),
    /// The account follows `limit` creators already.
    LimitReached,
}

/// The account's creator of `ref`, if it follows it.
pub(crate) async fn find(tx: &mut Tx<'_>, account_id: &str, r#ref: &str) -> Result<Option<CreatorRow>> {
    let query = creators::table.filter(creators::account_id.eq(account_id)).filter(creators::ref_.eq(r#ref));
    Ok(tx.first_as::<CreatorRow, _>(query).await.optional()?)
}

/// Adds a creator to the account (at most `limit`); posts published before `now` are not taken
/// unless the watch settings say otherwise.
pub async fn add(db: &Db, new: NewCreator<'_>, limit: i64, now: i64) -> Result<Added> {
    let mut t = db.begin().await?;
    let added = add_in(&mut t.tx(), &new, limit, now).await?;
    t.commit().await?;
    Ok(added)
}

/// The body of [`add`]'s transaction.
async fn add_in(tx: &mut Tx<'_>, new: &NewCreator<'_>, limit: i64, now: i64) -> Result<Added> {
    if let Some(existing) = find(tx, new.account_id, new.r#ref).await? {
        tx.execute(
            diesel::update(creators::table.find(&existing.id))
                .set((creators::profile.eq(new.profile), creators::listing.eq(new.listing))),
        )
        .await?;
        return Ok(Added::Existing(find(tx, new.account_id, new.r#ref).await?.ok_or(StorageError::NotFound)?));
    }
    let count: i64 = tx.get_result(creators::table.filter(creators::account_id.eq(new.account_id)).count()).await?;
    if count >= limit {
        return Ok(Added::LimitReached);
    }
    tx.execute(diesel::insert_into(creators::table).values((
        creators::id.eq(super::new_id()),
        creators::account_id.eq(new.account_id),
        creators::ref_.eq(new.r#ref),
        creators::platform.eq(new.platform),
        creators::listing.eq(new.listing),
        creators::profile.eq(new.profile),
        creators::created_at.eq(now),
        creators::since_at.eq(now),
    )))
    .await?;
    Ok(Added::New(find(tx, new.account_id, new.r#ref).await?.ok_or(StorageError::NotFound)?))
}

pub async fn get(db: &Db, account_id: &str, r#ref: &str) -> Result<Option<CreatorRow>> {
    find(&mut db.conn().await?.tx(), account_id, r#ref).await
}

/// The account's creators, the most recently added first.
pub async fn list(db: &Db, account_id: &str) -> Result<Vec<CreatorRow>> {
    let query = creators::table
        .filter(creators::account_id.eq(account_id))
        .order((creators::created_at.desc(), creators::id.desc()));
    Ok(db.conn().await?.tx().load_as::<CreatorRow, _>(query).await?)
}

/// Stops following a creator and forgets the posts it found; their library entries stay.
pub async fn remove(db: &Db, account_id: &str, r#ref: &str) -> Result<bool> {
    let mut t = db.begin().await?;
    let removed = remove_in(&mut t.tx(), account_id, r#ref).await?;
    t.commit().await?;
    Ok(removed)
}

/// The body of [`remove`]'s transaction.
async fn remove_in(tx: &mut Tx<'_>, account_id: &str, r#ref: &str) -> Result<bool> {
    tx.execute(diesel::delete(
        creator_posts::table
            .filter(creator_posts::account_id.eq(account_id))
            .filter(creator_posts::creator_ref.eq(r#ref)),
    ))
    .await?;
    // Its spike settings go with it: its posts follow the account's again.
    tx.execute(diesel::delete(crate::schema::spike_settings::table.find((account_id, r#ref)))).await?;
    let deleted = tx
        .execute(diesel::delete(
            creators::table.filter(creators::account_id.eq(account_id)).filter(creators::ref_.eq(r#ref)),
        ))
        .await?;
    Ok(deleted == 1)
}

/// How a creator is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Following {
    pub enabled: bool,
    pub interval_min: i64,
    pub collect: bool,
    pub follow_days: i64,
    /// Posts published before this (unix ms) are never taken.
    pub since_at: i64,
}

/// Sets how a creator is followed; `None` when the account has no such creator.
pub async fn set_watch(
    db: &Db,
    account_id: &str,
    r#ref: &str,
    following: Following,
    next_run_at: Option<i64>,
) -> Result<Option<CreatorRow>> {
    let out_of_range = |_| StorageError::Conflict("setting out of range".into());
    let interval = i32::try_from(following.interval_min).map_err(out_of_range)?;
    let days = i32::try_from(following.follow_days).map_err(out_of_range)?;
    let mut t = db.begin().await?;
    let followed = set_watch_in(&mut t.tx(), account_id, r#ref, following, (interval, days), next_run_at).await?;
    t.commit().await?;
    Ok(followed)
}

/// The body of [`set_watch`]'s transaction.
async fn set_watch_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    r#ref: &str,
    following: Following,
    (interval, days): (i32, i32),
    next_run_at: Option<i64>,
) -> Result<Option<CreatorRow>> {
    let updated = tx
        .execute(
            diesel::update(
                creators::table.filter(creators::account_id.eq(account_id)).filter(creators::ref_.eq(r#ref)),
            )
            .set((
                creators::watch_enabled.eq(following.enabled),
                creators::watch_interval_min.eq(interval),
                creators::collect_comments.eq(following.collect),
                creators::follow_days.eq(days),
                creators::since_at.eq(following.since_at),
                creators::next_run_at.eq(next_run_at),
                creators::last_error.eq(None::<String>),
                // A run holding a claim on the old settings must not overwrite these.
                creators::claimed_until.eq(0),
            )),
        )
        .await?;
    if updated == 0 {
        return Ok(None);
    }
    find(tx, account_id, r#ref).await
}

/// Claims up to `limit` due creators, earliest first (several schedulers claim disjoint ones).
pub async fn claim_due(db: &Db, now: i64, limit: i64) -> Result<Vec<CreatorRow>> {
    let mut t = db.begin().await?;
    let due = creators::watch_enabled.eq(true).and(creators::next_run_at.le(now)).and(creators::claimed_until.le(now));
    let ids = crate::claim_rows!(
        &mut t.tx(),
        creators::table,
        creators::id,
        due,
        creators::next_run_at.asc(),
        limit,
        creators::claimed_until.eq(now + CLAIM_MS)
    )?;
    t.commit().await?;
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    let mut claimed = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        claimed.extend(tx.load_as::<CreatorRow, _>(creators::table.filter(creators::id.eq_any(chunk))).await?);
    }
    Ok(claimed)
}

/// Claims one creator for a run asked for now (`POST /creators/{ref}/refresh`); `Ok(None)`
/// when a run of it is in progress, `Err(NotFound)` when there is no such creator.
pub async fn claim_now(db: &Db, account_id: &str, r#ref: &str, now: i64) -> Result<Option<CreatorRow>> {
    let mut t = db.begin().await?;
    let claimed = claim_now_in(&mut t.tx(), account_id, r#ref, now).await?;
    t.commit().await?;
    Ok(claimed)
}

/// The body of [`claim_now`]'s transaction.
async fn claim_now_in(tx: &mut Tx<'_>, account_id: &str, r#ref: &str, now: i64) -> Result<Option<CreatorRow>> {
    let Some(row) = find(tx, account_id, r#ref).await? else { return Err(StorageError::NotFound) };
    let claimed = tx
        .execute(
            diesel::update(creators::table.find(&row.id))
                .filter(creators::claimed_until.le(now))
                .set(creators::claimed_until.eq(now + ASKED_CLAIM_MS)),
        )
        .await?;
    if claimed == 0 {
        return Ok(None);
    }
    find(tx, account_id, r#ref).await
}

/// Gives back the claim `row` holds (a run that ended without recording its end: an outage, or
/// its caller gone), so that the next refresh or pass runs at once instead of waiting out the
/// claim. A claim taken since (or cleared by new settings) is left alone.
pub async fn give_back(db: &Db, row: &CreatorRow) -> Result<()> {
    let this_claim = creators::table.find(&row.id).filter(creators::claimed_until.eq(row.claimed_until));
    db.conn().await?.tx().execute(diesel::update(this_claim).set(creators::claimed_until.eq(0))).await?;
    Ok(())
}

/// The refs of the posts the creator's runs found so far.
pub async fn known_posts(db: &Db, account_id: &str, creator_ref: &str) -> Result<HashSet<String>> {
    let query = creator_posts::table
        .filter(creator_posts::account_id.eq(account_id))
        .filter(creator_posts::creator_ref.eq(creator_ref))
        .select(creator_posts::post_ref);
    let refs: Vec<String> = db.conn().await?.tx().load(query).await?;
    Ok(refs.into_iter().collect())
}

/// A post a run found.
#[derive(Debug, Clone)]
pub struct Found {
    pub post_ref: String,
    pub url: String,
    pub platform: String,
    pub title: Option<String>,
    pub published_at: i64,
    pub pinned: bool,
    /// The post's metadata (JSON) and its search text, when the listing carried them.
    pub metadata: Option<(String, String)>,
}

/// What a run does to the creator's schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextRun {
    /// A run asked for now (a refresh) leaves the schedule alone.
    Keep,
    /// A scheduled run sets the next one (`None`: not followed).
    At(Option<i64>),
}

/// How a run ended.
pub struct RunEnd<'a> {
    pub found: &'a [Found],
    pub batch_id: Option<&'a str>,
    /// Why the run found nothing (the platform failed), shown on the creator.
    pub error: Option<&'a str>,
    pub next_run: NextRun,
    /// How a found post's library entry is watched: every `interval_min` for `follow_days`.
    pub interval_min: i64,
}

/// Records a run: its new posts (each once, saved in the library with the creator's mark and
/// watched for the creator's `follow_days`, announced by a `creator.post_found` event), and the
/// creator's next run, unless its settings changed meanwhile. Answers the refs recorded now.
pub async fn end_run(db: &Db, creator: &CreatorRow, end: RunEnd<'_>, trace: &str, now: i64) -> Result<Vec<String>> {
    let named = creator.named();
    let interval = i32::try_from(end.interval_min).unwrap_or(i32::MAX);
    let mut t = db.begin().await?;
    let recorded = end_run_in(&mut t.tx(), creator, &named, &end, interval, trace, now).await?;
    t.commit().await?;
    Ok(recorded)
}

/// The body of [`end_run`]'s transaction.
async fn end_run_in(
    tx: &mut Tx<'_>,
    creator: &CreatorRow,
    named: &AlertCreator,
    end: &RunEnd<'_>,
    interval: i32,
    trace: &str,
    now: i64,
) -> Result<Vec<String>> {
    let mut recorded = Vec::new();
    for post in end.found {
        let inserted = tx
            .execute(
                diesel::insert_into(creator_posts::table)
                    .values((
                        creator_posts::account_id.eq(&creator.account_id),
                        creator_posts::creator_ref.eq(&creator.r#ref),
                        creator_posts::post_ref.eq(&post.post_ref),
                        creator_posts::url.eq(&post.url),
                        creator_posts::title.eq(&post.title),
                        creator_posts::published_at.eq(post.published_at),
                        creator_posts::pinned.eq(post.pinned),
                        creator_posts::found_at.eq(now),
                        creator_posts::batch_id.eq(end.batch_id),
                    ))
                    .on_conflict_do_nothing(),
            )
            .await?;
        if inserted == 0 {
            continue;
        }
        // The library entry: saved, marked with the creator, and watched for its first days
        // unless the account set a watch on it itself.
        tx.execute(
            diesel::insert_into(analyses::table)
                .values((
                    analyses::id.eq(super::new_id()),
                    analyses::account_id.eq(&creator.account_id),
                    analyses::ref_.eq(&post.post_ref),
                    analyses::url.eq(&post.url),
                    analyses::platform.eq(&post.platform),
                    analyses::status.eq(AnalysisStatus::MetadataOnly.as_str()),
                    analyses::created_at.eq(now),
                    analyses::saved_at.eq(now),
                ))
                .on_conflict_do_nothing(),
        )
        .await?;
        let entry = analyses::table.find((&creator.account_id, &post.post_ref));
        tx.execute(diesel::update(entry).filter(analyses::saved_at.is_null()).set(analyses::saved_at.eq(now))).await?;
        tx.execute(diesel::update(entry).set(analyses::creator_ref.eq(&creator.r#ref))).await?;
        if let Some((metadata, search)) = &post.metadata {
            tx.execute(
                diesel::update(entry)
                    .filter(analyses::metadata.is_null())
                    .set((analyses::metadata.eq(metadata), analyses::search.eq(search))),
            )
            .await?;
        }
        // Following a post re-collects it: only when the creator's posts are collected.
        if creator.follow_days > 0 && creator.collect_comments {
            let until = post.published_at + i64::from(creator.follow_days) * cova_domain::time::DAY_MS;
            tx.execute(diesel::update(entry).filter(analyses::watch_enabled.eq(false)).set((
                analyses::watch_enabled.eq(true),
                analyses::watch_interval_min.eq(interval),
                analyses::watch_next_run_at.eq(now + i64::from(interval) * 60_000),
                analyses::watch_until.eq(until),
                analyses::watch_claimed_until.eq(0),
            )))
            .await?;
        }
        let event = CreatorEvent {
            event_type: CreatorEventType::PostFound,
            account_id: creator.account_id.clone(),
            creator: named.clone(),
            r#ref: post.post_ref.clone(),
            url: post.url.clone(),
            title: post.title.clone(),
            published_at: Some(cova_domain::time::rfc3339(post.published_at)),
            batch_id: end.batch_id.map(str::to_owned),
        };
        crate::repo::outbox::queue(tx, &Outgoing::event(&event), trace, now).await?;
        recorded.push(post.post_ref.clone());
    }
    // The claim still holds unless the settings changed (they set the next run then).
    let this_claim = creators::table.find(&creator.id).filter(creators::claimed_until.eq(creator.claimed_until));
    if let NextRun::At(next) = end.next_run {
        tx.execute(diesel::update(this_claim).set(creators::next_run_at.eq(next))).await?;
    }
    tx.execute(diesel::update(this_claim).set((
        creators::last_run_at.eq(now),
        creators::last_error.eq(end.error),
        creators::claimed_until.eq(0),
    )))
    .await?;
    Ok(recorded)
}

/// A post a creator's runs found.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = creator_posts)]
pub struct CreatorPost {
    pub post_ref: String,
    pub url: String,
    pub title: Option<String>,
    pub published_at: i64,
    pub pinned: bool,
    pub found_at: i64,
    pub batch_id: Option<String>,
}

/// One post the creator's runs found.
pub async fn post(db: &Db, account_id: &str, creator_ref: &str, post_ref: &str) -> Result<Option<CreatorPost>> {
    let query = creator_posts::table.find((account_id, creator_ref, post_ref));
    Ok(db.conn().await?.tx().first_as::<CreatorPost, _>(query).await.optional()?)
}

/// The creator's posts found so far, newest first, `limit` after the `(published_at, ref)` cursor.
pub async fn posts(
    db: &Db,
    account_id: &str,
    creator_ref: &str,
    after: Option<(i64, String)>,
    limit: i64,
) -> Result<Vec<CreatorPost>> {
    let newest_first = creator_posts::table
        .filter(creator_posts::account_id.eq(account_id))
        .filter(creator_posts::creator_ref.eq(creator_ref))
        .order((creator_posts::published_at.desc(), creator_posts::post_ref.desc()))
        .limit(limit);
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    Ok(match &after {
        Some((at, r#ref)) => {
            let after_cursor = creator_posts::published_at
                .lt(*at)
                .or(creator_posts::published_at.eq(*at).and(creator_posts::post_ref.lt(r#ref)));
            tx.load_as::<CreatorPost, _>(newest_first.filter(after_cursor)).await?
        }
        None => tx.load_as::<CreatorPost, _>(newest_first).await?,
    })
}
