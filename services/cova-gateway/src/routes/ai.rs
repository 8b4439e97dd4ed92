//! AI endpoints (scope `ai:write`): a quote of the charge, a run of the quote as an AI job,
//! the job's state and result, and the watch phrases of an analysis. Calling them with a
//! token is consent to send the analysis' comment texts to the configured model; a run
//! records that consent.

use super::analyze::idempotency_key;
use super::views;
use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::metering::authorized;
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_cache::{Read, Reply};
use cova_domain::JobKind;
use cova_domain::limits::{
    AI_QUOTE_VALIDITY, MAX_RUNNING_AI_JOBS, MAX_WATCH_PHRASES, WATCH_PHRASE_CHARS, ai_charge, ms,
};
use cova_domain::time::rfc3339;
use cova_errors::{ApiError, ErrorCode};
use cova_platforms::PostRef;
use cova_storage::repo::ai::{self, NewQuote};
use cova_storage::repo::analyses;
use cova_storage::repo::jobs::{self, AiOutcome, NewAi};
use serde::Deserialize;
use serde_json::{Value, json};

fn parse_ref(raw: &str) -> Result<PostRef, ApiError> {
    input::text("ref", raw)?;
    raw.parse::<PostRef>().map_err(|e| ApiError::validation(e.detail().to_owned()))
}

fn unknown_ref(r#ref: &str) -> ApiError {
    ApiError::not_found(format!("`{ref}` is not among this account's analyses."))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuoteBody {
    r#ref: String,
    tasks: Option<Vec<String>>,
}

/// `POST /ai/quote {ref, tasks?}`: the charge of an AI run on the analysis' collected
/// comments, valid for 15 minutes.
pub async fn quote(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, meter, (r#ref, tasks)) = authorized(&req, &state, Scope::AiWrite, async |_| {
        let body: QuoteBody =
            input::json(&read_body(&state, payload).await?, r#"{"ref": "tiktok:7301234567890123456"}"#)?;
        let r#ref = parse_ref(&body.r#ref)?.to_string();
        let tasks = cova_domain::ai::task_set(body.tasks.as_deref()).map_err(ApiError::validation)?;
        Ok((r#ref, tasks))
    })
    .await?;
    let db = &state.backends.db;
    let analysis = analyses::get(db, &principal.account_id, &r#ref)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(unknown_ref(&r#ref)))?;
    let Some(source) = analysis.breakdown_job().filter(|_| analysis.comment_count > 0) else {
        return Err(meter
            .fail(ApiError::new(ErrorCode::PaymentRequired, "Comments were not collected for this post yet."))
            .into());
    };
    let now = state.now();
    let quote = ai::create_quote(
        db,
        NewQuote {
            account_id: &principal.account_id,
            r#ref: &r#ref,
            source_job_id: source,
            tasks: &tasks,
            comments: analysis.comment_count,
            charge: ai_charge(analysis.comment_count),
            expires_at: now + ms(AI_QUOTE_VALIDITY),
        },
        now,
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    Ok(meter.json(
        HttpResponse::Ok(),
        &json!({
            "quote_id": quote.id,
            "ref": quote.r#ref,
            "tasks": quote.task_list(),
            "comments": quote.comments,
            "charge": quote.charge,
            "expires_at": rfc3339(quote.expires_at),
        }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunBody {
    quote_id: String,
    /// The workspace's consent box; a token's call is the consent (the specification).
    consent: Option<bool>,
}

/// `POST /ai/run {quote_id}`: holds the quote's charge and starts the AI job (202); the same
/// `Idempotency-Key` answers the same job (200).
pub async fn run(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, mut meter, (quote_id, key)) = authorized(&req, &state, Scope::AiWrite, async |p| {
        let body: RunBody = input::json(&read_body(&state, payload).await?, r#"{"quote_id": "…"}"#)?;
        let quote_id = input::text("quote_id", body.quote_id.trim())?.to_owned();
        if body.consent == Some(false) || (p.session_id().is_some() && body.consent != Some(true)) {
            return Err(ApiError::validation(
                "Running AI from the workspace needs `consent: true`: the comment texts are sent to the model.",
            ));
        }
        Ok((quote_id, idempotency_key(&req)?))
    })
    .await?;
    let trace = cova_telemetry::current_trace_json();
    let outcome = jobs::create_ai(
        &state.backends.db,
        NewAi {
            account_id: &principal.account_id,
            token_id: principal.token_id(),
            quote_id: &quote_id,
            idempotency_key: key.as_deref(),
        },
        &trace,
        state.now(),
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let refused = |e: ApiError| -> HttpResult { Err(meter.fail(e).into()) };
    let job = match outcome {
        AiOutcome::Created(job) => {
            state.outbox.notify_one();
            tracing::info!(job.id = %job.id, job.r#ref = %job.r#ref, "AI job queued");
            let _ = meter.balance(&state, &principal).await;
            let view = ai_job_view(&state, &job).await.map_err(|e| meter.fail(e))?;
            return Ok(meter.json(HttpResponse::Accepted(), &view));
        }
        AiOutcome::Repeated(job) => job,
        AiOutcome::UnknownQuote => return refused(ApiError::not_found("No such quote for this account.")),
        AiOutcome::Expired => {
            return refused(ApiError::validation(format!(
                "The quote has expired (quotes are valid {}); ask for a new one.",
                cova_domain::limits::in_words(AI_QUOTE_VALIDITY)
            )));
        }
        AiOutcome::Used => return refused(ApiError::validation("The quote was already run; ask for a new one.")),
        AiOutcome::Stale => {
            return refused(ApiError::validation(
                "The analysis' comments changed since the quote (collected again or removed); ask for a new quote.",
            ));
        }
        AiOutcome::IdempotencyConflict => return refused(ApiError::of(ErrorCode::IdempotencyConflict)),
        AiOutcome::PaymentRequired => {
            return refused(ApiError::new(ErrorCode::PaymentRequired, "AI needs a comment pack this month."));
        }
        AiOutcome::QuotaExceeded => {
            return refused(ApiError::new(ErrorCode::QuotaExceeded, "The balance does not cover the quote's charge."));
        }
        AiOutcome::ConcurrencyLimit => {
            let detail = format!(
                "{MAX_RUNNING_AI_JOBS} AI jobs are already running for this account; run this quote when one has finished."
            );
            return refused(ApiError::new(ErrorCode::ConcurrencyLimit, detail).with_retry_after(2));
        }
    };
    let view = ai_job_view(&state, &job).await.map_err(|e| meter.fail(e))?;
    Ok(meter.json(HttpResponse::Ok(), &view))
}

/// An AI job as the API shows it, read from the database.
async fn ai_job_view(state: &AppState, job: &jobs::Job) -> Result<Value, ApiError> {
    let spec = ai::get_job(&state.backends.db, &job.id).await.map_err(backend_errors::storage)?;
    Ok(ai_view(job, spec.as_ref()))
}

/// An AI job as the API shows it; the result only with the quoted tasks' fields. The job row is
/// the state shown: a result read with a later state waits for the next poll, so `result` is
/// never there while `status` says the job runs.
fn ai_view(job: &jobs::Job, spec: Option<&ai::AiJob>) -> Value {
    let result = spec.filter(|_| job.status == cova_domain::JobStatus::Complete).and_then(|s| {
        let mut full: Value = serde_json::from_str(s.result.as_deref()?).ok()?;
        let keep: Vec<&str> = s.task_list().iter().flat_map(|t| cova_domain::ai::fields(t)).copied().collect();
        if let Some(obj) = full.as_object_mut() {
            obj.retain(|k, _| matches!(k.as_str(), "model" | "comments" | "tokens_used") || keep.contains(&k.as_str()));
        }
        Some(full)
    });
    views::ai_job(job, spec.map(ai::AiJobHead::from).as_ref(), result)
}

/// `GET /ai/jobs/{id}`: the AI job's state, and its result once complete. Read, with the
/// limit and the account's state, from the job's kept copy (see `cova_snapshots`): a poll
/// reads no database, and answers while the database does not.
pub async fn get_job(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let principal = crate::auth::authenticate(&req, &state).await?;
    let limit = crate::metering::Limit::api(&state, &principal.account_id);
    let id = crate::metering::before_limit(&state, &principal, &limit, async {
        principal.require(Scope::AiWrite)?;
        Ok(input::text("id", &path)?.to_owned())
    })
    .await?;
    let key = cova_snapshots::job_key(&id);
    let (meter, _, _, replies) =
        crate::metering::Meter::api_with(&state, &principal, &[Read::Stamped { key: &key }]).await?;
    let polled = match replies.into_iter().next() {
        // Job ids are UUIDs: anything else is no job, and costs no read.
        _ if uuid::Uuid::parse_str(&id).is_err() => None,
        Some(Reply::Value(held)) => state
            .backends
            .snapshots
            .job(&state.backends.db, held, &id)
            .await
            .map_err(|e| meter.fail(backend_errors::snapshot(e)))?,
        _ => return Err(meter.fail(ApiError::internal()).into()),
    };
    let polled = polled
        .filter(|p| p.job.account_id == principal.account_id && p.job.kind == JobKind::Ai)
        .ok_or_else(|| meter.fail(ApiError::not_found("No such AI job for this account.")))?;
    Ok(meter.json(HttpResponse::Ok(), &ai_view(&polled.job, polled.ai.as_ref())))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueriesBody {
    queries: Vec<String>,
}

/// The watch phrases of a request: trimmed, each 1..=120 characters, at most three.
fn phrase_list(body: QueriesBody) -> Result<Vec<String>, ApiError> {
    if body.queries.len() > MAX_WATCH_PHRASES {
        return Err(ApiError::validation(format!(
            "`queries` has {} phrases; at most {MAX_WATCH_PHRASES} are kept per analysis.",
            body.queries.len()
        )));
    }
    let (min, max) = (*WATCH_PHRASE_CHARS.start(), *WATCH_PHRASE_CHARS.end());
    body.queries
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let q = q.trim();
            let chars = q.chars().count();
            if !WATCH_PHRASE_CHARS.contains(&chars) {
                return Err(ApiError::validation(format!(
                    "`queries[{i}]` must be {min} to {max} characters after trimming; it has {chars}."
                )));
            }
            Ok(input::text(&format!("queries[{i}]"), q)?.to_owned())
        })
        .collect()
}

/// `PUT /ai/{ref}/queries {"queries": [...]}`: replaces the analysis' watch phrases; a later
/// AI run reports the comments that match each.
pub async fn put_queries(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResult {
    let (principal, meter, (r#ref, queries)) = authorized(&req, &state, Scope::AiWrite, async |_| {
        let r#ref = parse_ref(&path)?.to_string();
        let body: QueriesBody = input::json(&read_body(&state, payload).await?, r#"{"queries": ["where to buy"]}"#)?;
        Ok((r#ref, phrase_list(body)?))
    })
    .await?;
    let db = &state.backends.db;
    // Watch phrases belong to a library entry.
    analyses::get_saved(db, &principal.account_id, &r#ref)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(unknown_ref(&r#ref)))?;
    ai::set_queries(db, &principal.account_id, &r#ref, &queries, state.now())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    Ok(meter.json(HttpResponse::Ok(), &json!({"ref": r#ref, "queries": queries})))
}
