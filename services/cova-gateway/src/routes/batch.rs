//! `POST /api/v1/analyze/batch`, `GET /api/v1/analyze/batch/{id}`,
//! `POST /api/v1/analyze/batch/{id}/cancel` and `POST /api/v1/analyze/batch/preview`: many posts
//! at once. Each valid URL becomes an analyze job as `POST /analyze` would start it, when the
//! money rules let it start; the answer lists each URL with its job or why it was refused. The
//! preview says what a list would cost before it starts.

use super::analyze::{idempotency_key, known_comment_count};
use super::views;
use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::later::{Known, Spent, What};
use crate::metering::{self, Limit, Meter, authorized};
use crate::{AppState, backend_errors, lookup};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_domain::limits::{self, LINK_WAIT, MAX_BATCH_URLS};
use cova_domain::money;
use cova_domain::time::rfc3339;
use cova_errors::ApiError;
use cova_platforms::{ParsedUrl, PostRef, ShortLink, parse_url};
use cova_runtime::known_counts::Count;
use cova_storage::repo::batches::{self, Batch, Created, NewBatch, NewItem};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    urls: Vec<String>,
    #[serde(default, deserialize_with = "input::present")]
    max_comments: Option<input::Integer>,
}

/// The URLs of a batch request, as sent; refused as a whole only when the list itself is wrong.
fn urls_of(body: &BatchBody) -> Result<Vec<String>, ApiError> {
    if body.urls.is_empty() || body.urls.len() > MAX_BATCH_URLS {
        return Err(ApiError::validation(format!("`urls` must hold 1 to {MAX_BATCH_URLS} post URLs.")));
    }
    Ok(body.urls.clone())
}

/// A list's body: its URLs and the cap on each post's comments.
async fn list_body(state: &AppState, payload: web::Payload) -> Result<(Vec<String>, Option<i64>), ApiError> {
    let shape = r#"{"urls": ["<post URL>", "<post URL>"], "max_comments": 1000}"#;
    let body: BatchBody = input::json(&read_body(state, payload).await?, shape)?;
    Ok((urls_of(&body)?, input::max_comments(body.max_comments)?))
}

/// SHA-256 of the URL list and its cap: the same `Idempotency-Key` with another list is a
/// conflict.
fn digest(urls: &[String], max_comments: Option<i64>) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for url in urls {
        context.update(url.as_bytes());
        context.update(b"\n");
    }
    if let Some(cap) = max_comments {
        context.update(format!("max_comments={cap}").as_bytes());
    }
    hex::encode(context.finish().as_ref())
}

/// One URL of a list, checked as `POST /analyze` checks its one.
enum Checked {
    Post(PostRef),
    /// A short or share link whose post is not known yet.
    Link(ShortLink),
    Refused(ApiError),
}

/// The URLs of a list checked as `POST /analyze` checks its one, each with the URL as it is
/// kept. Links already followed (in the last day) name their post at once; the others are
/// followed now, all at once, when `wait` is set, for at most [`LINK_WAIT`] in all (those still
/// being followed are refused as `unavailable`, and followed on for the next request), or left
/// as links otherwise (a preview counts them after its answer). While the account's failed
/// lookups are spent, unknown links are refused as `rate_limited`.
async fn checked_list(
    state: &AppState,
    urls: &[String],
    asker: &str,
    wait: bool,
) -> Result<Vec<(String, Checked)>, ApiError> {
    let cache_error = |e| backend_errors::cache(e);
    let mut checked = Vec::with_capacity(urls.len());
    for raw in urls {
        let item = match input::post_url("url", raw) {
            Err(e) => (input::shown_url(raw), Checked::Refused(e)),
            Ok(url) => {
                let check = match parse_url(&url) {
                    Err(e) => Checked::Refused(e.to_api_error()),
                    Ok(ParsedUrl::Post(post)) => Checked::Post(post),
                    Ok(ParsedUrl::ShortLink(link)) => match state.later.link(&link).await.map_err(cache_error)? {
                        Known::Yes(post) => Checked::Post(post),
                        Known::Failed(e) => Checked::Refused(e),
                        Known::Unknown => Checked::Link(link),
                    },
                };
                (url, check)
            }
        };
        checked.push(item);
    }
    if !wait || !checked.iter().any(|(_, c)| matches!(c, Checked::Link(_))) {
        return Ok(checked);
    }
    let failures = Limit::failures(asker).apply(state, cova_cache::Op::Peek).await.map_err(cache_error)?;
    if failures.remaining == 0 {
        for (_, check) in checked.iter_mut().filter(|(_, c)| matches!(c, Checked::Link(_))) {
            *check = Checked::Refused(lookup::too_many_failures(&failures));
        }
        return Ok(checked);
    }
    for (_, check) in &checked {
        if let Checked::Link(link) = check {
            state.later.start(asker, What::Link(link.clone()), None).await.map_err(cache_error)?;
        }
    }
    let deadline = tokio::time::Instant::now() + LINK_WAIT;
    loop {
        let mut open = false;
        for (_, check) in checked.iter_mut() {
            let Checked::Link(link) = check else { continue };
            match state.later.link(link).await.map_err(cache_error)? {
                Known::Yes(post) => *check = Checked::Post(post),
                Known::Failed(e) => *check = Checked::Refused(e),
                Known::Unknown => open = true,
            }
        }
        if !open {
            return Ok(checked);
        }
        if tokio::time::Instant::now() >= deadline {
            for (_, check) in checked.iter_mut().filter(|(_, c)| matches!(c, Checked::Link(_))) {
                *check = Checked::Refused(lookup::still_following());
            }
            return Ok(checked);
        }
        tokio::time::sleep(LINK_POLL).await;
    }
}

/// How a list waiting for its links looks at the cache.
const LINK_POLL: std::time::Duration = std::time::Duration::from_millis(50);

pub async fn create(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, mut meter, ((urls, max_comments), key)) =
        authorized(&req, &state, Scope::AnalyzeWrite, async |_| {
            Ok((list_body(&state, payload).await?, idempotency_key(&req)?))
        })
        .await?;
    // Each URL checked like `POST /analyze` checks its one; a bad one is refused alone.
    let checked = checked_list(&state, &urls, &principal.account_id, true).await.map_err(|e| meter.fail(e))?;
    let mut items = Vec::with_capacity(urls.len());
    for (url, check) in checked {
        let post = match check {
            Checked::Post(post) => Ok(post.to_string()),
            Checked::Refused(e) => Err((e.code.as_str().to_owned(), e.detail.clone())),
            Checked::Link(_) => Err(("unavailable".to_owned(), lookup::still_following().detail)),
        };
        // A count read for a preview (or any metadata lookup) in the last minutes sizes the item.
        let known_comments = match &post {
            Ok(r#ref) => known_comment_count(&state, r#ref).await,
            Err(_) => None,
        };
        items.push(NewItem { url, post, known_comments });
    }
    let db = &state.backends.db;
    let new = NewBatch {
        account_id: &principal.account_id,
        token_id: principal.token_id(),
        session_id: principal.session_id(),
        idempotency_key: key.as_deref(),
        request_digest: &digest(&urls, max_comments),
        items,
        max_comments,
    };
    let now = state.now();
    let (id, status) = match batches::create(db, new, now).await.map_err(|e| meter.fail(backend_errors::storage(e)))? {
        Created::New(id) => {
            let trace = cova_telemetry::current_trace_json();
            cova_runtime::flow::advance(db, &principal.account_id, &trace, now)
                .await
                .map_err(|e| meter.fail(backend_errors::storage(e)))?;
            state.outbox.notify_one();
            (id, HttpResponse::Accepted())
        }
        Created::Repeated(id) => (id, HttpResponse::Ok()),
        Created::Conflict => {
            return Err(meter.fail(ApiError::of(cova_errors::ErrorCode::IdempotencyConflict)).into());
        }
    };
    let _ = meter.balance(&state, &principal).await;
    answer(&state, &principal.account_id, &id, meter, status).await
}

/// `POST /analyze/batch/preview`: what a list would cost before it starts, answered at once
/// whatever its length. Each URL is checked as the list would check it, and its post's comment
/// count is the one cova knows (read by any lookup, preview or collection in the last hour); the
/// posts whose count is not known yet are counted after the answer (`counting`), in their turn
/// at the platforms' pace, from the account's own preview lookups (apart from the metadata
/// limit; one given back when the lookup fails): the same preview asked again shows them.
/// Answers each post's count and what collecting it charges at most, the total, and how many
/// posts the balance covers whole, in list order.
pub async fn preview(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, mut meter, (urls, max_comments)) =
        authorized(&req, &state, Scope::AnalyzeWrite, async |_| list_body(&state, payload).await).await?;
    let usage = meter.balance(&state, &principal).await?;
    let spendable = metering::spendable(&principal, &usage).available.max(0);
    let account = &principal.account_id;
    let checked = checked_list(&state, &urls, account, false).await.map_err(|e| meter.fail(e))?;
    let mut counter = Counter { account, failures: None, previews: None };
    let mut items: Vec<PreviewItem> = Vec::with_capacity(urls.len());
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (position, (url, check)) in checked.into_iter().enumerate() {
        let mut item = PreviewItem {
            position,
            url,
            r#ref: None,
            comments: None,
            charge_at_most: None,
            comments_off: false,
            counting: false,
            same_as: None,
            covered: false,
            error: None,
        };
        match check {
            Checked::Refused(e) => item.error = Some(PreviewError::of(&e)),
            Checked::Link(link) => {
                counter.count(&state, What::LinkThenCount(link), &mut item).await.map_err(|e| meter.fail(e))?;
            }
            Checked::Post(post) => {
                let r#ref = post.to_string();
                if let Some((_, first)) = seen.iter().find(|(r, _)| *r == r#ref) {
                    // One job collects a post once, however often the list names it.
                    let first = &items[*first];
                    item.same_as = Some(first.position);
                    (item.comments, item.counting, item.comments_off) =
                        (first.comments, first.counting, first.comments_off);
                    item.charge_at_most = item.comments.map(|_| 0);
                } else {
                    seen.push((r#ref.clone(), position));
                    match state.later.count(&post).await.map_err(|e| meter.fail(backend_errors::cache(e)))? {
                        Known::Yes(count) => item.counted(count, max_comments),
                        Known::Failed(e) => item.error = Some(PreviewError::of(&e)),
                        Known::Unknown => {
                            counter.count(&state, What::Count(post), &mut item).await.map_err(|e| meter.fail(e))?;
                        }
                    }
                }
                item.r#ref = Some(r#ref);
            }
        }
        items.push(item);
    }
    // Posts of unknown size are left out of what the balance covers.
    let counted: Vec<Option<i64>> = items
        .iter()
        .filter(|i| i.charge_at_most.is_some())
        .map(|i| i.charge_at_most.and(i.comments_charged()))
        .collect();
    let covered = money::covered_whole(spendable, &counted, max_comments);
    let mut left = covered;
    for item in items.iter_mut().filter(|i| i.charge_at_most.is_some()) {
        if left == 0 {
            break;
        }
        item.covered = true;
        left -= 1;
    }
    let body = Preview {
        available: spendable,
        charge_at_most: items.iter().filter_map(|i| i.charge_at_most).sum(),
        counted: items.iter().filter(|i| i.charge_at_most.is_some() && i.same_as.is_none()).count(),
        counting: items.iter().filter(|i| i.counting && i.same_as.is_none()).count(),
        covered_whole: items.iter().filter(|i| i.covered && i.same_as.is_none()).count(),
        max_comments,
        posts: items.iter().filter(|i| i.r#ref.is_some() && i.same_as.is_none()).count(),
        total_comments: items.iter().filter(|i| i.same_as.is_none()).filter_map(|i| i.comments).sum(),
        items,
    };
    Ok(meter.json(HttpResponse::Ok(), &body))
}

/// Starts the counts a preview does not know yet, from the account's preview lookups, while
/// its failed lookups allow.
struct Counter<'a> {
    account: &'a str,
    /// The failed lookups' state, once read.
    failures: Option<cova_cache::Decision>,
    /// The preview lookups' refusal, once met: the rest are not counted either.
    previews: Option<cova_cache::Decision>,
}

impl Counter<'_> {
    async fn count(&mut self, state: &AppState, what: What, item: &mut PreviewItem) -> Result<(), ApiError> {
        let cache_error = |e| backend_errors::cache(e);
        if state.later.under_way(&what).await.map_err(cache_error)? {
            item.counting = true;
            return Ok(());
        }
        let failures = match self.failures {
            Some(d) => d,
            None => {
                let d = Limit::failures(self.account).apply(state, cova_cache::Op::Peek).await.map_err(cache_error)?;
                *self.failures.insert(d)
            }
        };
        if failures.remaining == 0 {
            item.error = Some(PreviewError::of(&lookup::too_many_failures(&failures)));
            return Ok(());
        }
        if let Some(refused) = &self.previews {
            item.error = Some(PreviewError::previews_spent(refused));
            return Ok(());
        }
        let member = uuid::Uuid::new_v4().to_string();
        let limit = Limit::previews(self.account);
        let spent = limit.apply(state, cova_cache::Op::Hit(&member)).await.map_err(cache_error)?;
        if !spent.allowed {
            item.error = Some(PreviewError::previews_spent(&spent));
            self.previews = Some(spent);
            return Ok(());
        }
        let spent = Some(Spent { key: limit.key, member });
        state.later.start(self.account, what, spent).await.map_err(cache_error)?;
        item.counting = true;
        Ok(())
    }
}

#[derive(Serialize)]
struct Preview {
    /// What the caller may spend now (a session's free allowance included).
    available: i64,
    charge_at_most: i64,
    counted: usize,
    /// Posts whose count is being read now: ask the same preview again to see them.
    counting: usize,
    covered_whole: usize,
    items: Vec<PreviewItem>,
    max_comments: Option<i64>,
    posts: usize,
    total_comments: i64,
}

#[derive(Serialize)]
struct PreviewItem {
    position: usize,
    url: String,
    r#ref: Option<String>,
    /// The post's comment count as the platform reports it.
    comments: Option<i64>,
    /// What collecting it charges at most (its count, capped by `max_comments`; 0 for a post
    /// the list already names, or whose comments are off).
    charge_at_most: Option<i64>,
    /// Its author turned its comments off: there is nothing to collect.
    comments_off: bool,
    /// Its count is being read now.
    counting: bool,
    /// The position of the same post earlier in the list.
    same_as: Option<usize>,
    /// The balance covers it whole, with the posts before it.
    covered: bool,
    error: Option<PreviewError>,
}

#[derive(Serialize)]
struct PreviewError {
    code: &'static str,
    detail: String,
}

impl PreviewItem {
    /// A count cova knows.
    fn counted(&mut self, count: Count, max_comments: Option<i64>) {
        match count.comments {
            Some(n) => {
                self.comments = Some(n);
                self.comments_off = count.comments_off == Some(true);
                self.charge_at_most =
                    Some(self.comments_charged().map_or(0, |n| money::charge_at_most(n, max_comments)));
            }
            None => self.error = Some(PreviewError::uncounted()),
        }
    }

    /// What collecting its comments may charge for: none when they are off.
    fn comments_charged(&self) -> Option<i64> {
        if self.comments_off { Some(0) } else { self.comments }
    }
}

impl PreviewError {
    fn of(e: &ApiError) -> Self {
        Self { code: e.code.as_str(), detail: e.detail.clone() }
    }

    fn previews_spent(refused: &cova_cache::Decision) -> Self {
        Self {
            code: "rate_limited",
            detail: format!(
                "Not counted: the account's list-preview lookups ({}) are spent for now; they come back within \
                 {} seconds. Collecting the post does not need its count.",
                limits::window_in_words(limits::PREVIEW_LOOKUPS),
                refused.retry_after_secs()
            ),
        }
    }

    fn uncounted() -> Self {
        Self { code: "parse_error", detail: "The platform does not say how many comments this post has.".into() }
    }
}

pub async fn get(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::AnalyzeWrite, async |_| Ok(())).await?;
    answer(&state, &principal.account_id, &path, meter, HttpResponse::Ok()).await
}

pub async fn cancel(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::AnalyzeWrite, async |_| Ok(())).await?;
    let (db, now) = (&state.backends.db, state.now());
    let cancelled = batches::cancel(db, &principal.account_id, &path, now)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    if cancelled.is_none() {
        return Err(meter.fail(ApiError::not_found("No such batch.")).into());
    }
    // Its waiting URLs are gone: the list ends now if none of its jobs runs.
    cova_runtime::flow::end_list(db, &path, now).await.map_err(|e| meter.fail(backend_errors::storage(e)))?;
    state.outbox.notify_one();
    answer(&state, &principal.account_id, &path, meter, HttpResponse::Ok()).await
}

async fn answer(
    state: &AppState,
    account_id: &str,
    id: &str,
    meter: Meter,
    status: actix_web::HttpResponseBuilder,
) -> HttpResult {
    // Read and copied; while the database does not answer, the copy (as last read or changed).
    let batch = state
        .backends
        .snapshots
        .batch(&state.backends.db, account_id, id)
        .await
        .map_err(|e| meter.fail(backend_errors::snapshot(e)))?
        .ok_or_else(|| meter.fail(ApiError::not_found("No such batch.")))?;
    Ok(meter.json(status, &view(&batch)))
}

/// A batch as the API shows it.
pub fn view(batch: &Batch) -> BatchView<'_> {
    let status = match (batch.finished_at, batch.cancelled_at) {
        (Some(_), None) => "complete",
        (_, Some(_)) => "cancelled",
        (None, None) => "running",
    };
    BatchView {
        batch_id: &batch.id,
        cancelled_at: batch.cancelled_at.map(rfc3339),
        counts: batch.counts().into_iter().map(|(state, n)| (state.as_str(), n)).collect(),
        created_at: rfc3339(batch.created_at),
        finished_at: batch.finished_at.map(rfc3339),
        items: batch
            .items
            .iter()
            .map(|item| ItemView {
                error: item.error.as_ref().map(|(code, detail)| ItemError { code, detail }),
                job: item.job.as_ref().map(|j| {
                    let dedup = item.deduplicated.as_deref().and_then(cova_domain::Dedup::parse);
                    views::job(j, dedup)
                }),
                position: item.position,
                r#ref: item.r#ref.as_deref(),
                state: item.state.as_str(),
                truncated_reason: item.job.as_ref().filter(|j| j.truncated).and_then(|j| j.truncated_reason.as_deref()),
                comments_off: item.job.as_ref().is_some_and(|j| j.comments_off),
                url: &item.url,
            })
            .collect(),
        status,
    }
}

#[derive(Serialize)]
pub struct BatchView<'a> {
    batch_id: &'a str,
    cancelled_at: Option<String>,
    counts: std::collections::BTreeMap<&'static str, u32>,
    created_at: String,
    finished_at: Option<String>,
    items: Vec<ItemView<'a>>,
    status: &'static str,
}

#[derive(Serialize)]
struct ItemView<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ItemError<'a>>,
    job: Option<views::JobView<'a>>,
    position: i32,
    r#ref: Option<&'a str>,
    state: &'static str,
    /// Why its post was cut short (`balance`, `max_comments`, `post_cap`, `visitor_view`,
    /// `platform_stopped`) once its job completed with fewer comments than the post has.
    truncated_reason: Option<&'a str>,
    /// Its job completed with nothing to collect: the post's author turned its comments off.
    comments_off: bool,
    url: &'a str,
}

#[derive(Serialize)]
struct ItemError<'a> {
    code: &'a str,
    detail: &'a str,
}
