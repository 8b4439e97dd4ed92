//! AI quotes, the inputs and results of AI jobs, consents, and watch phrases. Starting and
//! finishing an AI job are job transitions and live in [`super::jobs`].

use crate::schema::{ai_consents, ai_jobs, ai_queries, ai_quotes};
use crate::{Db, Result};
use diesel::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = ai_quotes)]
pub struct Quote {
    pub id: String,
    pub account_id: String,
    #[diesel(column_name = ref_)]
    pub r#ref: String,
    /// The scrape whose comments were quoted.
    pub source_job_id: String,
    /// The task set, comma-separated in canonical order.
    pub tasks: String,
    pub comments: i64,
    pub charge: i64,
    pub created_at: i64,
    pub expires_at: i64,
    /// The job it started, once run.
    pub job_id: Option<String>,
}

impl Quote {
    pub fn task_list(&self) -> Vec<&str> {
        self.tasks.split(',').filter(|t| !t.is_empty()).collect()
    }
}

pub struct NewQuote<'a> {
    pub account_id: &'a str,
    pub r#ref: &'a str,
    pub source_job_id: &'a str,
    pub tasks: &'a [&'a str],
    pub comments: i64,
    pub charge: i64,
    pub expires_at: i64,
}

pub async fn create_quote(db: &Db, new: NewQuote<'_>, now: i64) -> Result<Quote> {
    let quote = Quote {
        id: super::new_id(),
        account_id: new.account_id.to_owned(),
        r#ref: new.r#ref.to_owned(),
        source_job_id: new.source_job_id.to_owned(),
        tasks: new.tasks.join(","),
        comments: new.comments,
        charge: new.charge,
        created_at: now,
        expires_at: new.expires_at,
        job_id: None,
    };
    let insert = diesel::insert_into(ai_quotes::table).values((
        ai_quotes::id.eq(&quote.id),
        ai_quotes::account_id.eq(&quote.account_id),
        ai_quotes::ref_.eq(&quote.r#ref),
        ai_quotes::source_job_id.eq(&quote.source_job_id),
        ai_quotes::tasks.eq(&quote.tasks),
        ai_quotes::comments.eq(quote.comments),
        ai_quotes::charge.eq(quote.charge),
        ai_quotes::created_at.eq(now),
        ai_quotes::expires_at.eq(quote.expires_at),
    ));
    db.conn().await?.tx().execute(insert).await?;
    Ok(quote)
}

/// What an AI job analyses, and its result once complete.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, serde::Serialize, serde::Deserialize)]
#[diesel(table_name = ai_jobs)]
pub struct AiJob {
    pub job_id: String,
    pub quote_id: String,
    pub source_job_id: String,
    pub tasks: String,
    pub comments: i64,
    pub charge: i64,
    pub model: Option<String>,
    pub tokens_used: Option<i64>,
    /// The result (JSON).
    pub result: Option<String>,
}

impl AiJob {
    pub fn task_list(&self) -> Vec<&str> {
        self.tasks.split(',').filter(|t| !t.is_empty()).collect()
    }
}

pub async fn get_job(db: &Db, job_id: &str) -> Result<Option<AiJob>> {
    Ok(db.conn().await?.tx().first_as::<AiJob, _>(ai_jobs::table.find(job_id)).await.optional()?)
}

/// What a list of AI jobs shows of each: its quote, tasks, comments and charge (not the result).
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = ai_jobs)]
pub struct AiJobHead {
    pub job_id: String,
    pub quote_id: String,
    pub tasks: String,
    pub comments: i64,
    pub charge: i64,
}

impl AiJobHead {
    pub fn task_list(&self) -> Vec<&str> {
        self.tasks.split(',').filter(|t| !t.is_empty()).collect()
    }
}

impl From<&AiJob> for AiJobHead {
    fn from(j: &AiJob) -> Self {
        Self {
            job_id: j.job_id.clone(),
            quote_id: j.quote_id.clone(),
            tasks: j.tasks.clone(),
            comments: j.comments,
            charge: j.charge,
        }
    }
}

/// The heads of these AI jobs, in one read.
pub async fn heads(db: &Db, job_ids: &[&str]) -> Result<Vec<AiJobHead>> {
    Ok(db.conn().await?.tx().load_as::<AiJobHead, _>(ai_jobs::table.filter(ai_jobs::job_id.eq_any(job_ids))).await?)
}

/// The consents of an account, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = ai_consents)]
pub struct Consent {
    pub id: String,
    pub account_id: String,
    pub token_id: Option<String>,
    #[diesel(column_name = ref_)]
    pub r#ref: String,
    pub job_id: String,
    pub created_at: i64,
}

pub async fn consents(db: &Db, account_id: &str) -> Result<Vec<Consent>> {
    let query = ai_consents::table.filter(ai_consents::account_id.eq(account_id)).order(ai_consents::created_at.desc());
    Ok(db.conn().await?.tx().load_as::<Consent, _>(query).await?)
}

/// The watch phrases of an analysis (none when never set).
pub async fn queries(db: &Db, account_id: &str, r#ref: &str) -> Result<Vec<String>> {
    let query = ai_queries::table.find((account_id, r#ref)).select(ai_queries::queries);
    let stored = db.conn().await?.tx().first::<String, _>(query).await.optional()?;
    Ok(stored.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default())
}

/// Replaces the watch phrases of an analysis.
pub async fn set_queries(db: &Db, account_id: &str, r#ref: &str, queries: &[String], now: i64) -> Result<()> {
    let json = serde_json::to_string(queries).unwrap_or_else(|_| "[]".into());
    let upsert = diesel::insert_into(ai_queries::table)
        .values((
            ai_queries::account_id.eq(account_id),
            ai_queries::ref_.eq(r#ref),
            ai_queries::queries.eq(&json),
            ai_queries::updated_at.eq(now),
        ))
        .on_conflict((ai_queries::account_id, ai_queries::ref_))
        .do_update()
        .set((ai_queries::queries.eq(&json), ai_queries::updated_at.eq(now)));
    db.conn().await?.tx().execute(upsert).await?;
    Ok(())
}

/// Deletes quotes that expired more than a day ago (run or not): a run's job keeps what it
/// needs, and an `Idempotency-Key` that named the quote is forgotten after a day anyway.
pub async fn purge_quotes(db: &Db, now: i64) -> Result<usize> {
    let cutoff = now - cova_domain::limits::ms(cova_domain::limits::ENDED_KEPT);
    let expired = ai_quotes::table.filter(ai_quotes::expires_at.lt(cutoff));
    Ok(db.conn().await?.tx().execute(diesel::delete(expired)).await?)
}
