//! The one creation step of every job, whatever its kind, as the pieces each kind's creating
//! transaction is built of: the account's row lock (so that one account's requests run one
//! after another), the `Idempotency-Key` that answered before, and the new
//! job itself, written with its key and its command in the outbox. Each kind adds its own
//! checks and hold between them ([`super::analyze::create_analyze`], [`super::ai::create_ai`]).
//!
//! Plain functions over the kind's transaction ([`Tx`]).

use super::Job;
use crate::schema::{idempotency_keys as k, jobs};
use crate::{Result, Tx};
use cova_domain::limits;
use cova_messages::Outgoing;
use diesel::prelude::*;

/// What an `Idempotency-Key` answered before. Short-lived on the stack, so the size gap is
/// harmless.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Repeat {
    /// The same request: its job, as it is now.
    Same(Job),
    /// The key answered another request.
    Conflict,
}

/// A job about to be written.
pub(crate) struct NewJob<'a> {
    pub id: &'a str,
    pub account_id: &'a str,
    pub token_id: Option<&'a str>,
    pub session_id: Option<&'a str>,
    pub kind: cova_domain::JobKind,
    pub r#ref: &'a str,
    pub url: &'a str,
    pub comments_expected: Option<i64>,
    pub batch_id: Option<&'a str>,
    /// Where it starts with the balance: an analyze job's post is not read yet; an AI job's
    /// hold is its whole charge.
    pub hold_stage: cova_domain::money::Stage,
    pub max_comments: Option<i64>,
    /// It may spend the free allowance (a session's new analysis).
    pub free_allowance: bool,
}

/// Takes the account's row lock with a no-op update (PostgreSQL; SQLite is already
/// serialised), so the account's concurrent job requests run one after another.
pub async fn lock(tx: &mut Tx<'_>, account_id: &str) -> Result<()> {
    use crate::schema::accounts;
    tx.execute(
        diesel::update(accounts::table.find(account_id)).set(accounts::active_tokens.eq(accounts::active_tokens)),
    )
    .await?;
    Ok(())
}

/// Remembers that `key` (if any) answered with `job_id` for the request `key_ref` (a post's
/// ref, or `quote:<id>` for an AI run).
pub(crate) async fn remember_key(
    tx: &mut Tx<'_>,
    account_id: &str,
    key: Option<&str>,
    job_id: &str,
    key_ref: &str,
    now: i64,
) -> Result<()> {
    let Some(key) = key else { return Ok(()) };
    tx.execute(
        diesel::insert_into(k::table)
            .values((
                k::account_id.eq(account_id),
                k::key.eq(key),
                k::job_id.eq(job_id),
                k::ref_.eq(key_ref),
                k::created_at.eq(now),
            ))
            .on_conflict_do_nothing(),
    )
    .await?;
    Ok(())
}

/// What the account's `Idempotency-Key` (if any) answered before, after forgetting the
/// account's keys older than [`limits::IDEMPOTENCY`]: the same job for the same request
/// (`key_ref`), a conflict for another.
pub(crate) async fn repeated(
    tx: &mut Tx<'_>,
    account_id: &str,
    key: Option<&str>,
    key_ref: &str,
    now: i64,
) -> Result<Option<Repeat>> {
    let Some(key) = key else { return Ok(None) };
    tx.execute(
        diesel::delete(k::table)
            .filter(k::account_id.eq(account_id))
            .filter(k::created_at.le(now - limits::ms(limits::IDEMPOTENCY))),
    )
    .await?;
    let earlier: Option<(String, String)> =
        tx.first(k::table.find((account_id, key)).select((k::job_id, k::ref_))).await.optional()?;
    Ok(match earlier {
        None => None,
        Some((_, earlier_ref)) if earlier_ref != key_ref => Some(Repeat::Conflict),
        Some((job_id, _)) => super::find(tx, &job_id).await?.map(Repeat::Same),
    })
}

/// A new `queued` job's row: alone, or one of many.
#[derive(Insertable)]
#[diesel(table_name = jobs)]
pub(crate) struct JobRow<'a> {
    id: &'a str,
    account_id: &'a str,
    token_id: Option<&'a str>,
    session_id: Option<&'a str>,
    kind: cova_domain::JobKind,
    #[diesel(column_name = ref_)]
    r#ref: &'a str,
    url: &'a str,
    status: cova_domain::JobStatus,
    created_at: i64,
    comments_collected: i64,
    comments_expected: Option<i64>,
    truncated: bool,
    batch_id: Option<&'a str>,
    hold_stage: cova_domain::money::Stage,
    max_comments: Option<i64>,
    free_allowance: bool,
}

impl<'a> NewJob<'a> {
    /// Its row, created at `now`.
    pub(crate) fn row(&self, now: i64) -> JobRow<'a> {
        JobRow {
            id: self.id,
            account_id: self.account_id,
            token_id: self.token_id,
            session_id: self.session_id,
            kind: self.kind,
            r#ref: self.r#ref,
            url: self.url,
            status: cova_domain::JobStatus::Queued,
            created_at: now,
            comments_collected: 0,
            comments_expected: self.comments_expected,
            truncated: false,
            batch_id: self.batch_id,
            hold_stage: self.hold_stage,
            max_comments: self.max_comments,
            free_allowance: self.free_allowance,
        }
    }
}

/// Writes the new job `queued`, remembers the request's key for it, and writes its command to
/// the outbox; the job as written.
pub(crate) async fn insert_job(
    tx: &mut Tx<'_>,
    new: &NewJob<'_>,
    (key, key_ref): (Option<&str>, &str),
    command: &Outgoing,
    trace: &str,
    now: i64,
) -> Result<Job> {
    tx.execute(diesel::insert_into(jobs::table).values(new.row(now))).await?;
    remember_key(tx, new.account_id, key, new.id, key_ref, now).await?;
    crate::repo::outbox::queue(tx, command, trace, now).await?;
    super::find(tx, new.id).await?.ok_or(crate::StorageError::NotFound)
}
