//! AI jobs: running a quote (its charge held, the consent recorded, the job and its command
//! written, in one transaction) and completing the job with its result and its charge.

use super::new::{NewJob, Repeat, insert_job, lock_account, repeated};
use super::{Ended, Job, end_event, ended, find_job, holds_lease};
use crate::repo::balances::{account_in, close_in, reserve_in};
use crate::repo::outbox::insert_in as outbox_in;
use crate::schema::{ai_consents, ai_jobs, ai_quotes, analyses, job_leases, jobs};
use crate::{Change, Db, Result, StorageError, in_transaction};
use cova_domain::money::{self, Admission, Stage};
use cova_domain::time::month_of;
use cova_domain::{AnalysisStatus, JobKind, JobStatus};
use cova_messages::{AiCommand, Outgoing};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

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
    // Set inside the transaction, recorded once it has committed.
    let reserved = std::sync::atomic::AtomicI64::new(0);
    let mut conn = db.conn().await?;
    let outcome = in_transaction!(&mut conn, |c| {
        lock_account!(c, new.account_id);
        match repeated!(c, new.account_id, new.idempotency_key, &key_ref, now) {
            Some(Repeat::Conflict) => return Ok(AiOutcome::IdempotencyConflict),
            Some(Repeat::Same(job)) => return Ok(AiOutcome::Repeated(job)),
            None => {}
        }
        let quote = ai_quotes::table
            .find(new.quote_id)
            .filter(ai_quotes::account_id.eq(new.account_id))
            .select(crate::repo::ai::Quote::as_select())
            .first(c)
            .await
            .optional()?;
        let Some(quote) = quote else { return Ok(AiOutcome::UnknownQuote) };
        if quote.job_id.is_some() {
            return Ok(AiOutcome::Used);
        }
        if quote.expires_at <= now {
            return Ok(AiOutcome::Expired);
        }
        let source = analyses::table
            .find((new.account_id, &quote.r#ref))
            .filter(analyses::status.eq(AnalysisStatus::Ready.as_str()))
            .select((analyses::last_job_id, analyses::url))
            .first::<(Option<String>, String)>(c)
            .await
            .optional()?;
        let url = match source {
            Some((Some(job), url)) if job == quote.source_job_id => url,
            _ => return Ok(AiOutcome::Stale),
        };
        let account = account_in!(c, new.account_id, &month)?;
        let hold = match money::admit_ai(&account, quote.charge) {
            Admission::Admit(hold) => hold,
            Admission::PaymentRequired => return Ok(AiOutcome::PaymentRequired),
            Admission::QuotaExceeded => return Ok(AiOutcome::QuotaExceeded),
            Admission::ConcurrencyLimit => return Ok(AiOutcome::ConcurrencyLimit),
        };
        // Decided under the lock: the conditional updates only guard against a bug.
        if !reserve_in!(c, new.account_id, &job_id, &month, hold, now) {
            return Err(StorageError::Conflict("a balance changed under the account lock".into()));
        }
        let row = NewJob {
            id: &job_id,
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
        let command = Outgoing::command(&AiCommand { job_id: job_id.clone() });
        let job = insert_job!(c, &row, new.idempotency_key, &key_ref, &command, trace_headers, now)?;
        diesel::insert_into(ai_jobs::table)
            .values((
                ai_jobs::job_id.eq(&job_id),
                ai_jobs::quote_id.eq(&quote.id),
                ai_jobs::source_job_id.eq(&quote.source_job_id),
                ai_jobs::tasks.eq(&quote.tasks),
                ai_jobs::comments.eq(quote.comments),
                ai_jobs::charge.eq(quote.charge),
            ))
            .execute(c)
            .await?;
        diesel::update(ai_quotes::table.find(&quote.id)).set(ai_quotes::job_id.eq(&job_id)).execute(c).await?;
        diesel::insert_into(ai_consents::table)
            .values((
                ai_consents::id.eq(crate::repo::new_id()),
                ai_consents::account_id.eq(new.account_id),
                ai_consents::token_id.eq(new.token_id),
                ai_consents::ref_.eq(&quote.r#ref),
                ai_consents::job_id.eq(&job_id),
                ai_consents::created_at.eq(now),
            ))
            .execute(c)
            .await?;
        reserved.store(quote.charge, std::sync::atomic::Ordering::Relaxed);
        Ok(AiOutcome::Created(job))
    })?;
    drop(conn);
    if let AiOutcome::Created(job) = &outcome {
        cova_metrics::balance(cova_metrics::Movement::Reserved, reserved.into_inner());
        db.changed(&[Change::Account(&job.account_id), Change::Job(&job.id)]).await;
    }
    Ok(outcome)
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
    let AiOutput { result, model, tokens_used } = output;
    let mut conn = db.conn().await?;
    let done: Option<Ended> = in_transaction!(&mut conn, |c| {
        if !holds_lease!(c, job_id, owner) {
            return Ok(None);
        }
        let charge = ai_jobs::table
            .find(job_id)
            .select((ai_jobs::charge, ai_jobs::comments))
            .first::<(i64, i64)>(c)
            .await
            .optional()?;
        let Some((charge, comments)) = charge else { return Ok(None) };
        let done = diesel::update(jobs::table.find(job_id))
            .filter(jobs::status.eq(JobStatus::InProgress.as_str()))
            .set((
                jobs::status.eq(JobStatus::Complete.as_str()),
                jobs::finished_at.eq(now),
                jobs::comments_collected.eq(comments),
            ))
            .execute(c)
            .await?;
        if done == 0 {
            return Ok(None);
        }
        diesel::update(ai_jobs::table.find(job_id))
            .set((ai_jobs::result.eq(result), ai_jobs::model.eq(model), ai_jobs::tokens_used.eq(tokens_used)))
            .execute(c)
            .await?;
        let closed = close_in!(c, job_id, Some(charge), now)?;
        diesel::delete(job_leases::table.find(job_id)).execute(c).await?;
        let job = find_job!(c, job_id)?.ok_or(StorageError::NotFound)?;
        outbox_in!(c, &end_event(&job), trace, now);
        Ok(Some(Ended { closed, account_id: job.account_id, released: None }))
    })?;
    drop(conn);
    Ok(ended(db, job_id, done).await)
}
