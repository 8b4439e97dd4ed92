//! Watches: library entries re-scraped at an interval. The scheduler claims due watches (one
//! replica each), then starts their runs and reschedules them many at a time, in one
//! transaction per group ([`start_runs`]).

use crate::repo::balances::NewHold;
use crate::repo::jobs::new::NewJob;
use crate::repo::outbox::NewMessage;
use crate::schema::{accounts, analyses, balances, jobs, outbox, reservations};
use crate::{Change, Db, Result, StorageError, Tx};
use cova_domain::JobKind;
use cova_domain::JobStatus;
use cova_domain::money::{self, Admission, AnalyzeRequest, Stage};
use cova_domain::time::month_of;
use cova_messages::{AnalyzeCommand, Outgoing};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use std::collections::{HashMap, HashSet};

/// How long a claim keeps other scheduler replicas off a watch.
pub const CLAIM_MS: i64 = 60_000;

#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct DueWatch {
    pub id: String,
    pub account_id: String,
    pub r#ref: String,
    pub url: String,
    pub interval_min: i32,
    /// This claim: [`start_runs`] reschedules the watch only while it still holds (a change
    /// of the watch settings in between ends the claim and wins).
    pub claimed_until: i64,
    /// The cap of the analysis' last scrape, which its runs take.
    pub max_comments: Option<i64>,
}

/// Turns off the due watches whose follow ended (a post found through a creator is watched for
/// its first days only); answers how many.
pub async fn end_followed(db: &Db, now: i64) -> Result<usize> {
    let ended = analyses::table
        .filter(analyses::watch_enabled.eq(true))
        .filter(analyses::watch_next_run_at.le(now))
        .filter(analyses::watch_until.le(now));
    let turn_off =
        diesel::update(ended).set((analyses::watch_enabled.eq(false), analyses::watch_next_run_at.eq(None::<i64>)));
    let mut conn = db.conn().await?;
    // Borrowed: with diesel-async's `RunQueryDsl` in scope, a `Tx` value would be taken as a query.
    let tx = &mut conn.tx();
    Ok(tx.execute(turn_off).await?)
}

/// Claims up to `limit` due watches of library entries, earliest first.
pub async fn claim_due(db: &Db, now: i64, limit: i64) -> Result<Vec<DueWatch>> {
    let mut t = db.begin().await?;
    let due = analyses::watch_enabled
        .eq(true)
        .and(analyses::saved_at.is_not_null())
        .and(analyses::watch_next_run_at.le(now))
        .and(analyses::watch_claimed_until.le(now))
        .and(analyses::watch_until.is_null().or(analyses::watch_until.gt(now)));
    let ids = crate::claim_rows!(
        &mut t.tx(),
        analyses::table,
        analyses::id,
        due,
        analyses::watch_next_run_at.asc(),
        limit,
        analyses::watch_claimed_until.eq(now + CLAIM_MS)
    )?;
    t.commit().await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut conn = db.conn().await?;
    let mut claimed = Vec::with_capacity(ids.len());
    let tx = &mut conn.tx();
    for chunk in ids.chunks(500) {
        let query = analyses::table.filter(analyses::id.eq_any(chunk)).select((
            analyses::id,
            analyses::account_id,
            analyses::ref_,
            analyses::url,
            analyses::watch_interval_min,
            analyses::watch_claimed_until,
            analyses::max_comments,
        ));
        let part = tx.load::<DueWatch, _>(query).await?;
        claimed.extend(part);
    }
    Ok(claimed)
}

/// What became of one due watch's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStart {
    /// A refresh job was queued, holding its opening hold.
    Started { job_id: String },
    /// The post was already being collected for the account: the run joined that job.
    Joined,
    /// No comment pack this month (watching is a paid feature).
    PaymentRequired,
    /// The balance is empty.
    QuotaExceeded,
    /// The account already has `cova_domain::limits::MAX_RUNNING_ANALYSES` analyses running.
    ConcurrencyLimit,
}

/// When a watch runs next, given what became of this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextRun {
    pub at: i64,
    /// Set when a run was started or joined.
    pub ran_at: Option<i64>,
    /// Why the run was skipped, in words for the library.
    pub error: Option<String>,
}

/// Inserts `rows` into `table` in the caller's transaction: in one statement on PostgreSQL,
/// where each statement is a round trip; one row at a time on SQLite, where a statement is a
/// function call (and diesel-async has no multi-row insert).
macro_rules! insert_all {
    ($tx:expr, $table:expr, $rows:expr) => {
        match $tx {
            Tx::Pg(c) => {
                diesel::insert_into($table).values($rows).execute(&mut **c).await?;
            }
            Tx::Sqlite(c) => {
                for row in $rows {
                    diesel::insert_into($table).values(row).execute(&mut **c).await?;
                }
            }
        }
    };
}

/// The body of [`start_runs`]' transaction: the outcomes, and what was held per account.
async fn start_runs_in(
    tx: &mut Tx<'_>,
    watches: &[DueWatch],
    accounts: &[&str],
    month: &str,
    trace_headers: &str,
    now: i64,
    next: &(impl Fn(&DueWatch, &RunStart) -> NextRun + Sync),
) -> Result<(Vec<RunStart>, Vec<(String, i64)>)> {
    lock_accounts(tx, accounts).await?;
    let mut snapshots = crate::repo::balances::accounts_in(tx, accounts, month).await?;
    let mut in_flight: HashSet<(String, String)> = tx
        .load::<(String, String), _>(
            jobs::table
                .filter(jobs::account_id.eq_any(accounts))
                .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
                .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
                .select((jobs::account_id, jobs::ref_)),
        )
        .await?
        .into_iter()
        .collect();

    let mut outcomes = Vec::with_capacity(watches.len());
    let mut started: Vec<(&DueWatch, String, i64)> = Vec::new();
    for watch in watches {
        let key = (watch.account_id.clone(), watch.r#ref.clone());
        if in_flight.contains(&key) {
            outcomes.push(RunStart::Joined);
            continue;
        }
        let Some(account) = snapshots.get_mut(&watch.account_id) else {
            outcomes.push(RunStart::QuotaExceeded);
            continue;
        };
        let request = AnalyzeRequest { refresh: true, max_comments: watch.max_comments, ..AnalyzeRequest::default() };
        outcomes.push(match money::admit_analyze(account, &request) {
            Admission::Admit(hold) => {
                let job_id = crate::repo::new_id();
                account.admit(&job_id, JobKind::Analyze, None, hold, Stage::Opening);
                in_flight.insert(key);
                started.push((watch, job_id.clone(), hold.amount));
                RunStart::Started { job_id }
            }
            Admission::PaymentRequired => RunStart::PaymentRequired,
            Admission::QuotaExceeded => RunStart::QuotaExceeded,
            Admission::ConcurrencyLimit => RunStart::ConcurrencyLimit,
        });
    }

    let mut held: HashMap<&str, i64> = HashMap::new();
    for (watch, _, amount) in &started {
        *held.entry(watch.account_id.as_str()).or_default() += amount;
    }
    let held: Vec<(String, i64)> = held.into_iter().map(|(a, n)| (a.to_owned(), n)).collect();
    hold(tx, month, &held).await?;
    if !started.is_empty() {
        let holds: Vec<NewHold<'_>> = started
            .iter()
            .map(|(w, job_id, amount)| {
                let hold = money::Hold { amount: *amount, free: 0 };
                NewHold::of(w.account_id.as_str(), job_id.as_str(), month, hold, now)
            })
            .collect();
        insert_all!(tx, reservations::table, &holds);
        let new_jobs: Vec<NewJob<'_>> = started
            .iter()
            .map(|(w, job_id, _)| NewJob {
                id: job_id,
                account_id: &w.account_id,
                token_id: None,
                session_id: None,
                kind: JobKind::Analyze,
                r#ref: &w.r#ref,
                url: &w.url,
                comments_expected: None,
                batch_id: None,
                hold_stage: Stage::Opening,
                max_comments: w.max_comments,
                free_allowance: false,
            })
            .collect();
        let rows: Vec<_> = new_jobs.iter().map(|new| new.row(now)).collect();
        insert_all!(tx, jobs::table, &rows);
        let commands: Vec<Outgoing> = started
            .iter()
            .map(|(_, job_id, _)| Outgoing::command(&AnalyzeCommand { job_id: job_id.clone() }))
            .collect();
        let rows: Vec<NewMessage<'_>> = commands.iter().map(|m| NewMessage::of(m, trace_headers, now)).collect();
        insert_all!(tx, outbox::table, &rows);
    }

    let schedule: Vec<(&DueWatch, NextRun)> =
        watches.iter().zip(&outcomes).map(|(watch, outcome)| (watch, next(watch, outcome))).collect();
    reschedule(tx, &schedule).await?;
    Ok((outcomes, held))
}

/// Starts the runs of claimed due watches and reschedules each by `next`, all in one
/// transaction: the watches' accounts are locked (in id order, so that concurrent groups never
/// deadlock), their running jobs and balances read once, and the jobs, holds, outbox commands
/// and reschedules written together. The checks are those of [`super::jobs::create_analyze`]
/// for a refresh: a running job of the post is joined; no pack, an empty balance or three
/// analyses running skip the run. A watch whose claim ended meanwhile (changed or turned off)
/// keeps its new settings. Answers each watch's outcome, in order.
pub async fn start_runs(
    db: &Db,
    watches: &[DueWatch],
    trace_headers: &str,
    now: i64,
    next: impl Fn(&DueWatch, &RunStart) -> NextRun + Sync,
) -> Result<Vec<RunStart>> {
    if watches.is_empty() {
        return Ok(Vec::new());
    }
    let month = month_of(now);
    let mut accounts: Vec<&str> = watches.iter().map(|w| w.account_id.as_str()).collect();
    accounts.sort_unstable();
    accounts.dedup();
    let mut t = db.begin().await?;
    let (outcomes, held) = start_runs_in(&mut t.tx(), watches, &accounts, &month, trace_headers, now, &next).await?;
    t.commit().await?;
    let mut changes: Vec<Change<'_>> = held.iter().map(|(account, _)| Change::Account(account)).collect();
    for outcome in &outcomes {
        if let RunStart::Started { job_id } = outcome {
            changes.push(Change::Job(job_id));
        }
    }
    for (_, amount) in &held {
        cova_metrics::balance(cova_metrics::Movement::Reserved, *amount);
    }
    db.changed(&changes).await;
    Ok(outcomes)
}

/// A balance that changed under the account lock: never expected; the group is rolled back.
fn hold_refused() -> StorageError {
    StorageError::Conflict("a balance changed under the account lock".into())
}

/// Takes the accounts' row locks inside the transaction, so that each account's job requests
/// and watch runs are serialised (see [`super::jobs::create_analyze`]); SQLite's
/// `BEGIN IMMEDIATE` has already serialised every writer.
async fn lock_accounts(tx: &mut Tx<'_>, ids: &[&str]) -> Result<()> {
    if let Tx::Pg(c) = tx {
        // In id order: two groups that share accounts wait for each other, never in a cycle.
        accounts::table
            .filter(accounts::id.eq_any(ids))
            .order(accounts::id)
            .select(accounts::id)
            .for_update()
            .load::<String>(&mut **c)
            .await?;
    }
    Ok(())
}

/// Holds `amount` more on each account's balance of `month` (checked under the lock): in one
/// statement on PostgreSQL, one row at a time on SQLite.
async fn hold(tx: &mut Tx<'_>, month: &str, held: &[(String, i64)]) -> Result<()> {
    use diesel::sql_types::{Array, BigInt, Text};
    match tx {
        Tx::Pg(c) => {
            if held.is_empty() {
                return Ok(());
            }
            let (accounts, amounts): (Vec<&str>, Vec<i64>) = held.iter().map(|(a, n)| (a.as_str(), *n)).unzip();
            let updated = diesel::sql_query(
                "UPDATE balances AS b SET reserved = b.reserved + v.amount \
                 FROM unnest($1::text[], $2::bigint[]) AS v(account_id, amount) \
                 WHERE b.account_id = v.account_id AND b.month = $3 \
                   AND b.granted - b.reserved - b.spent >= v.amount",
            )
            .bind::<Array<Text>, _>(accounts)
            .bind::<Array<BigInt>, _>(amounts)
            .bind::<Text, _>(month)
            .execute(&mut **c)
            .await?;
            if updated != held.len() {
                return Err(hold_refused());
            }
        }
        Tx::Sqlite(c) => {
            for (account, amount) in held {
                let reserved = diesel::update(balances::table.find((account, month)))
                    .filter((balances::granted - balances::reserved - balances::spent).ge(*amount))
                    .set(balances::reserved.eq(balances::reserved + *amount))
                    .execute(&mut **c)
                    .await?;
                if reserved != 1 {
                    return Err(hold_refused());
                }
            }
        }
    }
    Ok(())
}

/// Sets each watch's next run and releases its claim, unless the claim ended meanwhile (a
/// change of the watch wins): in one statement on PostgreSQL, one row at a time on SQLite.
async fn reschedule(tx: &mut Tx<'_>, schedule: &[(&DueWatch, NextRun)]) -> Result<()> {
    match tx {
        Tx::Pg(c) => {
            use diesel::sql_types::{Array, BigInt, Nullable, Text};
            let ids: Vec<&str> = schedule.iter().map(|(w, _)| w.id.as_str()).collect();
            let claims: Vec<i64> = schedule.iter().map(|(w, _)| w.claimed_until).collect();
            let next: Vec<i64> = schedule.iter().map(|(_, n)| n.at).collect();
            let errors: Vec<Option<&str>> = schedule.iter().map(|(_, n)| n.error.as_deref()).collect();
            let ran: Vec<Option<i64>> = schedule.iter().map(|(_, n)| n.ran_at).collect();
            diesel::sql_query(
                "UPDATE analyses AS a SET watch_next_run_at = v.next_at, watch_last_error = v.error, \
                   watch_claimed_until = 0, watch_last_run_at = COALESCE(v.ran_at, a.watch_last_run_at) \
                 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[]) \
                   AS v(id, claimed_until, next_at, error, ran_at) \
                 WHERE a.id = v.id AND a.watch_enabled AND a.watch_claimed_until = v.claimed_until",
            )
            .bind::<Array<Text>, _>(ids)
            .bind::<Array<BigInt>, _>(claims)
            .bind::<Array<BigInt>, _>(next)
            .bind::<Array<Nullable<Text>>, _>(errors)
            .bind::<Array<Nullable<BigInt>>, _>(ran)
            .execute(&mut **c)
            .await?;
        }
        Tx::Sqlite(_) => {
            for (watch, next) in schedule {
                let this_claim = analyses::id
                    .eq(&watch.id)
                    .and(analyses::watch_enabled.eq(true))
                    .and(analyses::watch_claimed_until.eq(watch.claimed_until));
                let rescheduled = (
                    analyses::watch_next_run_at.eq(next.at),
                    analyses::watch_last_error.eq(next.error.as_deref()),
                    analyses::watch_claimed_until.eq(0),
                );
                match next.ran_at {
                    Some(at) => {
                        tx.execute(
                            diesel::update(analyses::table.filter(this_claim))
                                .set((rescheduled, analyses::watch_last_run_at.eq(at))),
                        )
                        .await?
                    }
                    None => tx.execute(diesel::update(analyses::table.filter(this_claim)).set(rescheduled)).await?,
                };
            }
        }
    }
    Ok(())
}
