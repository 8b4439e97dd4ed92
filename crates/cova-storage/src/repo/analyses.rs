//! The account's analyses and the library: one analysis per (account, ref); bookmarked when
//! `saved_at` is set. Its breakdown is the comments of `last_job_id` (see `breakdown`).

use crate::schema::{analyses, job_comments, media};
use crate::{Change, Db, Result, StorageError, Tx};
use cova_domain::AnalysisStatus;
use diesel::dsl;
use diesel::prelude::*;
use diesel::query_dsl::methods;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    pub enabled: bool,
    pub interval_min: i64,
    pub next_run_at: Option<i64>,
    pub last_run_at: Option<i64>,
    /// Why the last scheduled run was skipped (no pack, no balance, …).
    pub last_error: Option<String>,
    /// A post found through a creator is watched until then (unix ms); `None`: no end.
    pub until: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub account_id: String,
    pub r#ref: String,
    pub url: String,
    pub platform: String,
    pub status: AnalysisStatus,
    /// The post's metadata as last read (JSON).
    pub metadata: Option<String>,
    pub created_at: i64,
    /// Set while it is in the library.
    pub saved_at: Option<i64>,
    pub last_scraped_at: Option<i64>,
    pub expires_at: Option<i64>,
    /// The scrape whose comments are the breakdown.
    pub last_job_id: Option<String>,
    pub comment_count: i64,
    pub top_level_count: i64,
    pub new_count: i64,
    pub watch: Watch,
    /// The creator whose listing found the post.
    pub creator_ref: Option<String>,
}

impl Analysis {
    /// The job whose comments are the breakdown, while there is one.
    pub fn breakdown_job(&self) -> Option<&str> {
        breakdown_job(self.status, self.last_job_id.as_deref())
    }
}

/// The rule behind [`Analysis::breakdown_job`], for reads that select the two columns alone.
pub(crate) fn breakdown_job(status: AnalysisStatus, last_job_id: Option<&str>) -> Option<&str> {
    (status == AnalysisStatus::Ready).then_some(last_job_id).flatten()
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = analyses)]
struct AnalysisRow {
    account_id: String,
    #[diesel(column_name = ref_)]
    r#ref: String,
    url: String,
    platform: String,
    status: AnalysisStatus,
    metadata: Option<String>,
    created_at: i64,
    saved_at: Option<i64>,
    last_scraped_at: Option<i64>,
    expires_at: Option<i64>,
    last_job_id: Option<String>,
    comment_count: i64,
    top_level_count: i64,
    new_count: i64,
    watch_enabled: bool,
    watch_interval_min: i32,
    watch_next_run_at: Option<i64>,
    watch_last_run_at: Option<i64>,
    watch_last_error: Option<String>,
    watch_until: Option<i64>,
    creator_ref: Option<String>,
}

/// The row's watch columns nest into [`Watch`].
impl From<AnalysisRow> for Analysis {
    fn from(r: AnalysisRow) -> Self {
        let status = r.status;
        Analysis {
            account_id: r.account_id,
            r#ref: r.r#ref,
            url: r.url,
            platform: r.platform,
            status,
            metadata: r.metadata,
            created_at: r.created_at,
            saved_at: r.saved_at,
            last_scraped_at: r.last_scraped_at,
            expires_at: r.expires_at,
            last_job_id: r.last_job_id,
            comment_count: r.comment_count,
            top_level_count: r.top_level_count,
            new_count: r.new_count,
            watch: Watch {
                enabled: r.watch_enabled,
                interval_min: i64::from(r.watch_interval_min),
                next_run_at: r.watch_next_run_at,
                last_run_at: r.watch_last_run_at,
                last_error: r.watch_last_error,
                until: r.watch_until,
            },
            creator_ref: r.creator_ref,
        }
    }
}

/// The account's analysis of `ref`, saved or not (in the caller's transaction, or alone).
pub(crate) async fn find(tx: &mut Tx<'_>, account_id: &str, r#ref: &str) -> Result<Option<Analysis>> {
    let row = tx.first_as::<AnalysisRow, _>(analyses::table.find((account_id, r#ref))).await.optional()?;
    Ok(row.map(Analysis::from))
}

/// The account's analysis of `ref`, saved or not.
pub async fn get(db: &Db, account_id: &str, r#ref: &str) -> Result<Option<Analysis>> {
    find(&mut db.conn().await?.tx(), account_id, r#ref).await
}

/// The post metadata (JSON, as last read) of the account's analyses of `refs`, by ref; refs
/// without an analysis or metadata are absent.
pub async fn metadata_of(db: &Db, account_id: &str, refs: &[&str]) -> Result<Vec<(String, String)>> {
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    let query = analyses::table
        .filter(analyses::account_id.eq(account_id))
        .filter(analyses::ref_.eq_any(refs))
        .select((analyses::ref_, analyses::metadata));
    let rows: Vec<(String, Option<String>)> = db.conn().await?.tx().load(query).await?;
    Ok(rows.into_iter().filter_map(|(r, m)| Some((r, m?))).collect())
}

/// The account's analysis of `ref` if it is in the library.
pub async fn get_saved(db: &Db, account_id: &str, r#ref: &str) -> Result<Option<Analysis>> {
    Ok(get(db, account_id, r#ref).await?.filter(|a| a.saved_at.is_some()))
}

/// Filters of the library listing.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub platform: Option<String>,
    pub status: Option<AnalysisStatus>,
    pub watched: Option<bool>,
    /// Lower-cased text to find in the title or the author.
    pub text: Option<String>,
    /// Entries saved before this (saved_at, ref): the cursor of the previous page.
    pub before: Option<(i64, String)>,
    pub limit: i64,
}

/// The library, newest first.
pub async fn list(db: &Db, account_id: &str, query: &ListQuery) -> Result<Vec<Analysis>> {
    let page = analyses::table
        .filter(analyses::account_id.eq(account_id))
        .filter(analyses::saved_at.is_not_null())
        .order((analyses::saved_at.desc(), analyses::ref_.desc()))
        .limit(query.limit);
    // The optional filters need a boxed query, and a boxed query names its database: it is
    // made in each arm.
    let mut conn = db.conn().await?;
    let rows: Vec<AnalysisRow> = match conn.tx() {
        Tx::Pg(c) => {
            let boxed = library_filters(page.select(AnalysisRow::as_select()).into_boxed(), query);
            diesel_async::RunQueryDsl::load(boxed, c).await?
        }
        Tx::Sqlite(c) => {
            let boxed = library_filters(page.select(AnalysisRow::as_select()).into_boxed(), query);
            diesel_async::RunQueryDsl::load(boxed, c).await?
        }
    };
    Ok(rows.into_iter().map(Analysis::from).collect())
}

/// The filters of a library listing, on its boxed query (of either database).
fn library_filters<'a, Q>(mut q: Q, query: &'a ListQuery) -> Q
where
    Q: methods::FilterDsl<dsl::Eq<analyses::platform, &'a String>, Output = Q>
        + methods::FilterDsl<dsl::Eq<analyses::status, &'static str>, Output = Q>
        + methods::FilterDsl<dsl::Eq<analyses::watch_enabled, bool>, Output = Q>
        + methods::FilterDsl<dsl::Escape<dsl::Like<analyses::search, String>>, Output = Q>
        + methods::FilterDsl<SavedBefore<'a>, Output = Q>,
{
    if let Some(platform) = &query.platform {
        q = q.filter(analyses::platform.eq(platform));
    }
    if let Some(status) = query.status {
        q = q.filter(analyses::status.eq(status.as_str()));
    }
    if let Some(watched) = query.watched {
        q = q.filter(analyses::watch_enabled.eq(watched));
    }
    if let Some(text) = &query.text {
        let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        q = q.filter(analyses::search.like(format!("%{escaped}%")).escape('\\'));
    }
    if let Some((saved_at, r#ref)) = &query.before {
        q = q.filter(
            analyses::saved_at.lt(*saved_at).or(analyses::saved_at.eq(*saved_at).and(analyses::ref_.lt(r#ref))),
        );
    }
    q
}

/// Entries saved before the cursor `(saved_at, ref)`.
type SavedBefore<'a> = dsl::Or<
    dsl::Lt<analyses::saved_at, i64>,
    dsl::And<dsl::Eq<analyses::saved_at, i64>, dsl::Lt<analyses::ref_, &'a String>>,
>;

/// Bookmarks the account's analysis of `ref` (again); saving twice changes nothing. `None`
/// when the account has no analysis of it.
pub async fn save(db: &Db, account_id: &str, r#ref: &str, now: i64) -> Result<Option<Analysis>> {
    let mut t = db.begin().await?;
    let saved = save_in(&mut t.tx(), account_id, r#ref, now).await?;
    t.commit().await?;
    Ok(saved)
}

/// The body of [`save`]'s transaction.
async fn save_in(tx: &mut Tx<'_>, account_id: &str, r#ref: &str, now: i64) -> Result<Option<Analysis>> {
    tx.execute(
        diesel::update(analyses::table.find((account_id, r#ref)))
            .filter(analyses::saved_at.is_null())
            .set(analyses::saved_at.eq(now)),
    )
    .await?;
    find(tx, account_id, r#ref).await
}

/// Ends the lifetime of a post's images for an account, with its breakdown (the janitor
/// deletes them and their bytes).
pub(crate) async fn expire_media(tx: &mut Tx<'_>, account_id: &str, r#ref: &str) -> Result<()> {
    let images = media::table.filter(media::account_id.eq(account_id)).filter(media::ref_.eq(r#ref));
    tx.execute(diesel::update(images).set(media::expires_at.eq(0_i64))).await?;
    Ok(())
}

/// Removes the entry from the library: stops its watch and deletes its breakdown. False when
/// it was not in the library.
pub async fn remove(db: &Db, account_id: &str, r#ref: &str) -> Result<bool> {
    let mut t = db.begin().await?;
    let removed = remove_in(&mut t.tx(), account_id, r#ref).await?;
    t.commit().await?;
    let Some(released) = removed else { return Ok(false) };
    if let Some(job) = &released {
        db.changed(&[Change::Job(job)]).await;
    }
    Ok(true)
}

/// The body of [`remove`]'s transaction: `None` when the entry was not in the library, else
/// the job whose breakdown it released.
async fn remove_in(tx: &mut Tx<'_>, account_id: &str, r#ref: &str) -> Result<Option<Option<String>>> {
    let Some(analysis) = find(tx, account_id, r#ref).await?.filter(|a| a.saved_at.is_some()) else {
        return Ok(None);
    };
    if let Some(job) = &analysis.last_job_id {
        tx.execute(diesel::delete(job_comments::table.filter(job_comments::job_id.eq(job)))).await?;
    }
    expire_media(tx, account_id, r#ref).await?;
    let status = match analysis.status {
        AnalysisStatus::MetadataOnly => AnalysisStatus::MetadataOnly,
        _ => AnalysisStatus::Expired,
    };
    tx.execute(diesel::update(analyses::table.find((account_id, r#ref))).set((
        analyses::saved_at.eq(None::<i64>),
        analyses::status.eq(status.as_str()),
        analyses::last_job_id.eq(None::<String>),
        analyses::watch_enabled.eq(false),
        analyses::watch_next_run_at.eq(None::<i64>),
    )))
    .await?;
    Ok(Some(analysis.last_job_id))
}

/// Turns the watch of a library entry on or off; `None` when the entry is not in the library.
pub async fn set_watch(
    db: &Db,
    account_id: &str,
    r#ref: &str,
    enabled: bool,
    interval_min: i64,
    next_run_at: Option<i64>,
) -> Result<Option<Analysis>> {
    let interval = i32::try_from(interval_min).map_err(|_| StorageError::Conflict("interval out of range".into()))?;
    let mut t = db.begin().await?;
    let watched = set_watch_in(&mut t.tx(), account_id, r#ref, enabled, interval, next_run_at).await?;
    t.commit().await?;
    Ok(watched)
}

/// The body of [`set_watch`]'s transaction.
async fn set_watch_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    r#ref: &str,
    enabled: bool,
    interval: i32,
    next_run_at: Option<i64>,
) -> Result<Option<Analysis>> {
    let updated = tx
        .execute(
            diesel::update(analyses::table.find((account_id, r#ref))).filter(analyses::saved_at.is_not_null()).set((
                analyses::watch_enabled.eq(enabled),
                analyses::watch_interval_min.eq(interval),
                analyses::watch_next_run_at.eq(next_run_at),
                analyses::watch_last_error.eq(None::<String>),
                // The account's own setting replaces a creator's limited follow.
                analyses::watch_until.eq(None::<i64>),
                // A scheduler holding a claim on the old settings must not overwrite these.
                analyses::watch_claimed_until.eq(0),
            )),
        )
        .await?;
    if updated == 0 {
        return Ok(None);
    }
    find(tx, account_id, r#ref).await
}

pub struct MetadataEntry<'a> {
    pub account_id: &'a str,
    pub r#ref: &'a str,
    pub url: &'a str,
    pub platform: &'a str,
    pub metadata: &'a str,
    pub search: &'a str,
}

/// Saves the post's metadata in the library: a new entry is `metadata_only`; an existing one
/// keeps its breakdown and gets the fresh metadata (and is bookmarked again if it was removed).
pub async fn save_metadata(db: &Db, entry: MetadataEntry<'_>, now: i64) -> Result<Analysis> {
    let mut t = db.begin().await?;
    let saved = save_metadata_in(&mut t.tx(), &entry, now).await?;
    t.commit().await?;
    Ok(saved)
}

/// The body of [`save_metadata`]'s transaction.
async fn save_metadata_in(tx: &mut Tx<'_>, entry: &MetadataEntry<'_>, now: i64) -> Result<Analysis> {
    tx.execute(
        diesel::insert_into(analyses::table)
            .values((
                analyses::id.eq(super::new_id()),
                analyses::account_id.eq(entry.account_id),
                analyses::ref_.eq(entry.r#ref),
                analyses::url.eq(entry.url),
                analyses::platform.eq(entry.platform),
                analyses::status.eq(AnalysisStatus::MetadataOnly.as_str()),
                analyses::created_at.eq(now),
                analyses::saved_at.eq(now),
            ))
            .on_conflict_do_nothing(),
    )
    .await?;
    let entry_row = analyses::table.find((entry.account_id, entry.r#ref));
    tx.execute(
        diesel::update(entry_row).set((analyses::metadata.eq(entry.metadata), analyses::search.eq(entry.search))),
    )
    .await?;
    tx.execute(diesel::update(entry_row).filter(analyses::saved_at.is_null()).set(analyses::saved_at.eq(now))).await?;
    find(tx, entry.account_id, entry.r#ref).await?.ok_or(StorageError::NotFound)
}

/// The janitor's step: breakdowns whose 14 days are over are purged (the entries stay, as
/// `expired`). Several replicas claim disjoint rows. Returns how many expired.
pub async fn expire_due(db: &Db, now: i64, limit: i64) -> Result<usize> {
    let mut t = db.begin().await?;
    let due = analyses::status.eq(AnalysisStatus::Ready.as_str()).and(analyses::expires_at.le(now));
    let expired = crate::claim_rows!(
        &mut t.tx(),
        analyses::table,
        analyses::id,
        due,
        analyses::expires_at.asc(),
        limit,
        analyses::status.eq(AnalysisStatus::Expired.as_str())
    )?;
    t.commit().await?;
    purge_expired(db, limit).await?;
    Ok(expired.len())
}

/// Releases the comments of expired analyses that still point at a scrape (also finishing a
/// purge that was interrupted): deleted on SQLite, left to their day's partition on PostgreSQL.
/// Returns how many breakdowns were released.
pub async fn purge_expired(db: &Db, limit: i64) -> Result<usize> {
    let query = analyses::table
        .filter(analyses::status.ne(AnalysisStatus::Ready.as_str()))
        .filter(analyses::last_job_id.is_not_null())
        .limit(limit)
        .select((analyses::id, analyses::account_id, analyses::ref_, analyses::last_job_id.assume_not_null()));
    let stale: Vec<(String, String, String, String)> = db.conn().await?.tx().load(query).await?;
    // On PostgreSQL the rows stay until their day's partition is dropped whole
    // (`comment_days::drop_unused`), once no breakdown uses it: deleting them one by one would
    // cost as much as writing them and leave the table to bloat.
    let delete_rows = !db.is_postgres();
    for (id, account_id, r#ref, job) in &stale {
        let mut t = db.begin().await?;
        purge_in(&mut t.tx(), delete_rows, id, account_id, r#ref, job).await?;
        t.commit().await?;
    }
    for (_, _, _, job) in &stale {
        db.changed(&[Change::Job(job)]).await;
    }
    Ok(stale.len())
}

/// Releases one expired analysis' breakdown (its comments too when `delete_rows`), in the
/// caller's transaction.
async fn purge_in(
    tx: &mut Tx<'_>,
    delete_rows: bool,
    id: &str,
    account_id: &str,
    r#ref: &str,
    job: &str,
) -> Result<()> {
    if delete_rows {
        tx.execute(diesel::delete(job_comments::table.filter(job_comments::job_id.eq(job)))).await?;
    }
    expire_media(tx, account_id, r#ref).await?;
    tx.execute(
        diesel::update(analyses::table.filter(analyses::id.eq(id)))
            .filter(analyses::status.ne(AnalysisStatus::Ready.as_str()))
            .set(analyses::last_job_id.eq(None::<String>)),
    )
    .await?;
    Ok(())
}

/// A completed scrape, as the account's analysis of its post records it.
pub(crate) struct Scrape<'a> {
    pub job: &'a super::jobs::Job,
    /// The day its comments are stored under ([`super::comment_days`]).
    pub comments_day: Option<i64>,
    /// When the post was bookmarked (`None`: not in the library).
    pub saved_at: Option<i64>,
    /// Comments the scrape kept, top-level and replies; top-level; new to the analysis.
    pub comments: i64,
    pub top_level: i64,
    pub new: i64,
    /// The post's metadata (JSON) read by the scrape, and its search text.
    pub metadata: Option<(&'a str, &'a str)>,
}

/// Inside a transaction: makes the scrape the account's analysis of its post (created when
/// `absent`): `ready`, its breakdown the scrape's comments, living 14 days from `now`.
pub(crate) async fn record_scrape_in(tx: &mut Tx<'_>, absent: bool, scrape: &Scrape<'_>, now: i64) -> Result<()> {
    let job = scrape.job;
    if absent {
        let platform = job.r#ref.split(':').next().unwrap_or_default();
        tx.execute(diesel::insert_into(analyses::table).values((
            analyses::id.eq(crate::repo::new_id()),
            analyses::account_id.eq(&job.account_id),
            analyses::ref_.eq(&job.r#ref),
            analyses::url.eq(&job.url),
            analyses::platform.eq(platform),
            analyses::status.eq(cova_domain::AnalysisStatus::Ready),
            analyses::created_at.eq(now),
        )))
        .await?;
    }
    tx.execute(diesel::update(analyses::table.find((&job.account_id, &job.r#ref))).set((
        analyses::url.eq(&job.url),
        analyses::status.eq(cova_domain::AnalysisStatus::Ready),
        analyses::saved_at.eq(scrape.saved_at),
        analyses::last_scraped_at.eq(now),
        analyses::expires_at.eq(cova_domain::library::expires_at(now)),
        analyses::last_job_id.eq(&job.id),
        analyses::comments_day.eq(scrape.comments_day),
        analyses::comment_count.eq(scrape.comments),
        analyses::top_level_count.eq(scrape.top_level),
        analyses::new_count.eq(scrape.new),
        // A re-scrape takes this cap unless asked otherwise.
        analyses::max_comments.eq(job.max_comments),
    )))
    .await?;
    if let Some((metadata, search)) = scrape.metadata {
        tx.execute(
            diesel::update(analyses::table.find((&job.account_id, &job.r#ref)))
                .set((analyses::metadata.eq(metadata), analyses::search.eq(search))),
        )
        .await?;
    }
    Ok(())
}
