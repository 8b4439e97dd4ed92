//! AI jobs: running a quote (its charge held, the consent recorded, the job and its command
//! written, in one transaction) and completing the job with its result and its charge.

use super::new::{NewJob, Repeat, insert_job, lock, repeated};
use super::{Ended, Job, end_event, ended, find, holds_lease};
use crate::repo::{balances, outbox};
use crate::schema::{ai_consents, ai_jobs, ai_quotes, analyses, job_leases, jobs};
use crate::{Change, Db, Result, StorageError, Tx};
use cova_domain::money::{self, Admission, Stage};
use cova_domain::time::month_of;
use cova_domain::{AnalysisStatus, JobKind, JobStatus};
use cova_messages::{AiCommand, Outgoing};
use diesel::prelude::*;

pub struct NewAi<'a> {
    pub account_id: &'a str,
    /// The token whose call is the consent to send the comments to the model.
    pub token_id: Option<&'a str>,
    pub quote_id: &'a str,
    pub idempotency_key: Option<&'a str>,
}

#[derive(Debug)]
pub enum AiOutcome {
    /// A new AI job, queued, with the quote's charge held on the balance.
    Created(Job),
    /// The same Idempotency-Key ran this quote before: the same job.
    Repeated(Job),
    /// No such quote for this account.
    UnknownQuote,
    Expired,
    /// The quote already started a job.
    Used,
    /// The analysis was collected again (or removed) since the quote.
    Stale,
    IdempotencyConflict,
    PaymentRequired,
    QuotaExceeded,
    /// `cova_domain::limits::MAX_RUNNING_AI_JOBS` AI jobs of the account are queued or running.
    ConcurrencyLimit,
}

/// Runs a quote: in one transaction that locks the account row, checks the quote, reserves
/// its charge, records the consent and queues the AI job (its command in the outbox).
pub async fn create_ai(db: &Db, new: NewAi<'_>, trace_headers: &str, now: i64) -> Result<AiOutcome> {
    let month = month_of(now);
    let job_id = crate::repo::new_id();
    // Keys are shared with /analyze; an AI run remembers its quote in place of a ref.
    let key_ref = format!("quote:{}", new.quote_id);
    let mut t = db.begin().await?;
    let (outcome, reserved) = create_ai_in(&mut t.tx(), &new, (&job_id, &key_ref), &month, trace_headers, now).await?;
    t.commit().await?;
    if let AiOutcome::Created(job) = &outcome {
        cova_metrics::balance(cova_metrics::Movement::Reserved, reserved);
        db.changed(&[Change::Account(&job.account_id), Change::Job(&job.id)]).await;
    }
    Ok(outcome)
}

/// The body of [`create_ai`]'s transaction: the outcome, and the comments it held.
async fn create_ai_in(
    tx: &mut Tx<'_>,
    new: &NewAi<'_>,
    (job_id, key_ref): (&str, &str),
    month: &str,
    trace: &str,
    now: i64,
) -> Result<(AiOutcome, i64)> {
    lock(tx, new.account_id).await?;
    match repeated(tx, new.account_id, new.idempotency_key, key_ref, now).await? {
        Some(Repeat::Conflict) => return Ok((AiOutcome::IdempotencyConflict, 0)),
        Some(Repeat::Same(job)) => return Ok((AiOutcome::Repeated(job), 0)),
        None => {}
    }
    let quote = tx
        .first_as::<crate::repo::ai::Quote, _>(
            ai_quotes::table.find(new.quote_id).filter(ai_quotes::account_id.eq(new.account_id)),
        )
        .await
        .optional()?;
    let Some(quote) = quote else { return Ok((AiOutcome::UnknownQuote, 0)) };
    if quote.job_id.is_some() {
        return Ok((AiOutcome::Used, 0));
    }
    if quote.expires_at <= now {
        return Ok((AiOutcome::Expired, 0));
    }
    let source = tx
        .first::<(Option<String>, String), _>(
            analyses::table
                .find((new.account_id, &quote.r#ref))
                .filter(analyses::status.eq(AnalysisStatus::Ready.as_str()))
                .select((analyses::last_job_id, analyses::url)),
        )
        .await
        .optional()?;
    let url = match source {
        Some((Some(job), url)) if job == quote.source_job_id => url,
        _ => return Ok((AiOutcome::Stale, 0)),
    };
    let account = balances::account_in(tx, new.account_id, month).await?;
    let hold = match money::admit_ai(&account, quote.charge) {
        Admission::Admit(hold) => hold,
        Admission::PaymentRequired => return Ok((AiOutcome::PaymentRequired, 0)),
        Admission::QuotaExceeded => return Ok((AiOutcome::QuotaExceeded, 0)),
        Admission::ConcurrencyLimit => return Ok((AiOutcome::ConcurrencyLimit, 0)),
    };
    // Decided under the lock: the conditional updates only guard against a bug.
    if !balances::reserve_in(tx, new.account_id, job_id, month, hold, now).await? {
        return Err(StorageError::Conflict("a balance changed under the account lock".into()));
    }
    let row = NewJob {
        id: job_id,
        account_id: new.account_id,
        token_id: new.token_id,
        session_id: None,
        kind: JobKind::Ai,
        r#ref: &quote.r#ref,
        url: &url,
        comments_expected: Some(quote.comments),
        batch_id: None,
        hold_stage: Stage::Sized,
        max_comments: None,
        free_allowance: false,
    };
    let command = Outgoing::command(&AiCommand { job_id: job_id.to_owned() });
    let job = insert_job(tx, &row, (new.idempotency_key, key_ref), &command, trace, now).await?;
    tx.execute(diesel::insert_into(ai_jobs::table).values((
        ai_jobs::job_id.eq(job_id),
        ai_jobs::quote_id.eq(&quote.id),
        ai_jobs::source_job_id.eq(&quote.source_job_id),
        ai_jobs::tasks.eq(&quote.tasks),
        ai_jobs::comments.eq(quote.comments),
        ai_jobs::charge.eq(quote.charge),
    )))
    .await?;
    tx.execute(diesel::update(ai_quotes::table.find(&quote.id)).set(ai_quotes::job_id.eq(job_id))).await?;
    tx.execute(diesel::insert_into(ai_consents::table).values((
        ai_consents::id.eq(crate::repo::new_id()),
        ai_consents::account_id.eq(new.account_id),
        ai_consents::token_id.eq(new.token_id),
        ai_consents::ref_.eq(&quote.r#ref),
        ai_consents::job_id.eq(job_id),
        ai_consents::created_at.eq(now),
    )))
    .await?;
    Ok((AiOutcome::Created(job), quote.charge))
}

/// What an AI job produced.
#[derive(Debug, Clone, Copy)]
pub struct AiOutput<'a> {
    /// The result (JSON).
    pub result: &'a str,
    pub model: &'a str,
    pub tokens_used: Option<i64>,
}

/// Completes an AI job once: stores its result, charges the quoted charge (held at run) and
/// queues the `job.complete` event. False on a duplicate or a lost lease.
pub async fn complete_ai(
    db: &Db,
    job_id: &str,
    owner: &str,
    output: AiOutput<'_>,
    trace: &str,
    now: i64,
) -> Result<bool> {
    let mut t = db.begin().await?;
    let done = complete_ai_in(&mut t.tx(), job_id, owner, output, trace, now).await?;
    t.commit().await?;
    Ok(ended(db, job_id, done).await)
}

/// The body of [`complete_ai`]'s transaction.
async fn complete_ai_in(
    tx: &mut Tx<'_>,
    job_id: &str,
    owner: &str,
    output: AiOutput<'_>,
    trace: &str,
    now: i64,
) -> Result<Option<Ended>> {
    let AiOutput { result, model, tokens_used } = output;
    if !holds_lease(tx, job_id, owner).await? {
        return Ok(None);
    }
    let charge = tx
        .first::<(i64, i64), _>(ai_jobs::table.find(job_id).select((ai_jobs::charge, ai_jobs::comments)))
        .await
        .optional()?;
    let Some((charge, comments)) = charge else { return Ok(None) };
    let done = tx
        .execute(diesel::update(jobs::table.find(job_id)).filter(jobs::status.eq(JobStatus::InProgress.as_str())).set(
            (
                jobs::status.eq(JobStatus::Complete.as_str()),
                jobs::finished_at.eq(now),
                jobs::comments_collected.eq(comments),
            ),
        ))
        .await?;
    if done == 0 {
        return Ok(None);
    }
    tx.execute(diesel::update(ai_jobs::table.find(job_id)).set((
        ai_jobs::result.eq(result),
        ai_jobs::model.eq(model),
        ai_jobs::tokens_used.eq(tokens_used),
    )))
    .await?;
    let closed = balances::close_in(tx, job_id, Some(charge), now).await?;
    tx.execute(diesel::delete(job_leases::table.find(job_id))).await?;
    let job = find(tx, job_id).await?.ok_or(StorageError::NotFound)?;
    outbox::queue(tx, &end_event(&job), trace, now).await?;
    Ok(Some(Ended { closed, account_id: job.account_id, released: None }))
}
