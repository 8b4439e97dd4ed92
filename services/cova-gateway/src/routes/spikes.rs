//! Spike alerts (scope `keywords:write`): the account's settings and a post's or creator's
//! own, and the alerts raised, polled like keyword alerts.

use super::{analyses, creators, notifications};
use crate::error::HttpResult;
use crate::input::{self, Integer, read_body};
use crate::metering::authorized;
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_domain::spikes::{COOLDOWN_RANGE_MIN, MIN_COMMENTS_RANGE, Sensitivity, Settings};
use cova_errors::ApiError;
use cova_runtime::spike_alerts;
use cova_storage::repo::spikes::{self, ACCOUNT};
use cova_storage::repo::{analyses as library, creators as followed};
use serde::Deserialize;
use serde_json::{Value, json};

/// The settings as the API shows them, with what the sensitivity means in figures.
fn shown(s: &Settings, own: Option<bool>) -> Value {
    let t = s.thresholds();
    let mut v = json!({
        "enabled": s.enabled,
        "sensitivity": s.sensitivity.as_str(),
        "min_comments": s.min_comments,
        "cooldown_min": s.cooldown_min,
        "judged": {
            "min_comments": t.min_comments,
            "ratio": t.ratio,
            "p_max": t.p_max,
            "negative_share_rise": t.share_rise,
        },
    });
    if let Some(own) = own {
        v["own"] = json!(own);
    }
    v
}

/// A body of `PUT …/settings`: any of the fields; the others keep their value. Only
/// `min_comments` may be `null` (back to the sensitivity's minimum); integers may be sent as
/// integral numbers (`60.0`), as JSON Schema counts them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsBody {
    #[serde(default, deserialize_with = "input::present")]
    enabled: Option<bool>,
    #[serde(default, deserialize_with = "input::present")]
    sensitivity: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    min_comments: Option<Option<Integer>>,
    #[serde(default, deserialize_with = "input::present")]
    cooldown_min: Option<Integer>,
}

const SHAPE: &str = r#"{"enabled": true, "sensitivity": "balanced", "min_comments": null, "cooldown_min": 360}"#;

/// A checked `PUT` body: the fields to change, each within its bounds.
struct Change {
    enabled: Option<bool>,
    sensitivity: Option<Sensitivity>,
    min_comments: Option<Option<u64>>,
    cooldown_min: Option<u32>,
}

impl SettingsBody {
    /// Checks the values on their own, with the rest of the request input (before the rate
    /// limit and the subject's lookup).
    fn checked(self) -> Result<Change, ApiError> {
        let sensitivity = match self.sensitivity {
            Some(name) => Some(
                Sensitivity::parse(&name)
                    .ok_or_else(|| ApiError::validation("`sensitivity` must be sensitive, balanced or strict."))?,
            ),
            None => None,
        };
        let min_comments = self
            .min_comments
            .map(|m| {
                m.map(|Integer(m)| {
                    ranged(m, MIN_COMMENTS_RANGE, || {
                        format!(
                            "`min_comments` must be between {} and {}, or null for the sensitivity's own.",
                            MIN_COMMENTS_RANGE.0, MIN_COMMENTS_RANGE.1
                        )
                    })
                })
                .transpose()
            })
            .transpose()?;
        let cooldown_min = self
            .cooldown_min
            .map(|Integer(c)| {
                ranged(c, COOLDOWN_RANGE_MIN, || {
                    format!(
                        "`cooldown_min` must be between {} and {} minutes.",
                        COOLDOWN_RANGE_MIN.0, COOLDOWN_RANGE_MIN.1
                    )
                })
            })
            .transpose()?;
        Ok(Change { enabled: self.enabled, sensitivity, min_comments, cooldown_min })
    }
}

/// `value` as a `T` within `range` (both ends included), else a validation error saying `why`.
fn ranged<T: TryFrom<i64> + PartialOrd>(
    value: i64,
    range: (T, T),
    why: impl FnOnce() -> String,
) -> Result<T, ApiError> {
    T::try_from(value).ok().filter(|v| *v >= range.0 && *v <= range.1).ok_or_else(|| ApiError::validation(why()))
}

/// A change on top of the settings that applied.
fn apply(s: Settings, c: Change) -> Settings {
    Settings {
        enabled: c.enabled.unwrap_or(s.enabled),
        sensitivity: c.sensitivity.unwrap_or(s.sensitivity),
        min_comments: c.min_comments.unwrap_or(s.min_comments),
        cooldown_min: c.cooldown_min.unwrap_or(s.cooldown_min),
    }
}

/// `GET /spike-alerts/settings`: the account's settings (the defaults until it sets some).
pub async fn get_settings(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::KeywordsWrite, async |_| Ok(())).await?;
    let s = spikes::stored(&state.backends.db, &principal.account_id, ACCOUNT)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .unwrap_or_default();
    Ok(meter.json(HttpResponse::Ok(), &shown(&s, None)))
}

/// `PUT /spike-alerts/settings`: changes the account's settings.
pub async fn put_settings(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, meter, change) = authorized(&req, &state, Scope::KeywordsWrite, async |_| {
        input::json::<SettingsBody>(&read_body(&state, payload).await?, SHAPE)?.checked()
    })
    .await?;
    let db = &state.backends.db;
    let fail = |e| meter.fail(backend_errors::storage(e));
    let current = spikes::stored(db, &principal.account_id, ACCOUNT).await.map_err(fail)?.unwrap_or_default();
    let s = apply(current, change);
    spikes::put(db, &principal.account_id, ACCOUNT, &s, state.now()).await.map_err(fail)?;
    Ok(meter.json(HttpResponse::Ok(), &shown(&s, None)))
}

/// What the checks of a post can judge now, in figures and words: a post too young to judge
/// says so rather than wait silently.
fn judging(j: &spike_alerts::Judging, now: i64) -> Value {
    let time = cova_domain::time::rfc3339;
    let volume_waiting = j.volume_from.is_none_or(|from| from > now);
    // The history a volume check needs, in whole hours for words (6 h 50 min is "about 7").
    let hours = (cova_domain::spikes::VOLUME_HISTORY_MS + 1_800_000) / 3_600_000;
    let mut detail = match j.volume_from {
        None => format!(
            "No comment in the last two weeks: its comments per hour are judged against its own rate once it has had about {hours} hours of new ones."
        ),
        Some(from) if from > now => format!(
            "Too young to judge against its own rate: it needs about {hours} hours of comments, so its hours are judged from {}.",
            time(from)
        ),
        Some(_) => {
            "Each collection judges its latest hour of comments against its own rate and usual sentiment.".to_owned()
        }
    };
    let (takeoff, earlier) = match j.takeoff {
        None => ("not_applicable", 0),
        Some((n, until)) => {
            let needed = cova_domain::spikes::TAKEOFF_MIN_EARLIER;
            detail.push_str(&if n < needed {
                format!(
                    " As the creator's new post it is compared with their earlier posts at the same age once {needed} of them have been collected past its age ({n} so far), until {}.",
                    time(until)
                )
            } else {
                format!(" As the creator's new post it is compared with {n} of their earlier posts at the same age, until {}.", time(until))
            });
            (if n < needed { "waiting" } else { "judged" }, n)
        }
    };
    json!({
        "volume": if volume_waiting { "waiting" } else { "judged" },
        "volume_from": j.volume_from.map(time),
        "takeoff": takeoff,
        "earlier_posts": earlier,
        "detail": detail,
    })
}

/// The settings that apply to a subject as the API shows them; a post's with what its checks
/// can judge now.
async fn shown_for(
    state: &AppState,
    account_id: &str,
    s: &Subject,
    settings: &Settings,
    own: bool,
) -> Result<Value, ApiError> {
    let mut v = shown(settings, Some(own));
    if let Subject::Post { r#ref, .. } = s {
        let now = state.now();
        let found =
            spike_alerts::judging(&state.backends.db, account_id, r#ref, now).await.map_err(backend_errors::storage)?;
        if let Some(j) = found {
            v["judging"] = judging(&j, now);
        }
    }
    Ok(v)
}

/// A subject of its own settings: a post in the library or a followed creator.
enum Subject {
    Post { r#ref: String, creator: Option<String> },
    Creator(String),
}

impl Subject {
    fn key(&self) -> &str {
        match self {
            Subject::Post { r#ref, .. } => r#ref,
            Subject::Creator(r) => r,
        }
    }
}

fn parse_subject(raw: &str) -> Result<(bool, String), ApiError> {
    // A creator ref has a kind between platform and id (`tiktok:user:…`).
    if raw.matches(':').count() == 2 {
        return creators::parse_ref(raw).map(|r| (true, r));
    }
    analyses::parse_ref(raw).map(|r| (false, r.to_string())).map_err(|_| {
        ApiError::validation(
            "`ref` must be a post's ref (tiktok:<id>, youtube:<id>, instagram:<code>) or a creator's ref.",
        )
    })
}

/// The subject, or 404 when the post is not in the library or the creator not followed.
async fn subject(state: &AppState, account_id: &str, raw: (bool, String)) -> Result<Subject, ApiError> {
    let db = &state.backends.db;
    let storage = backend_errors::storage;
    match raw {
        (true, r) => match followed::get(db, account_id, &r).await.map_err(storage)? {
            Some(_) => Ok(Subject::Creator(r)),
            None => Err(ApiError::not_found(format!("This account does not follow `{r}`."))),
        },
        (false, r) => match library::get_saved(db, account_id, &r).await.map_err(storage)? {
            Some(a) => Ok(Subject::Post { r#ref: r, creator: a.creator_ref }),
            None => Err(ApiError::not_found(format!("`{r}` is not in this account's library."))),
        },
    }
}

/// What applies to a subject, and whether it is its own.
async fn applying(state: &AppState, account_id: &str, s: &Subject) -> Result<(Settings, bool), ApiError> {
    let db = &state.backends.db;
    let storage = backend_errors::storage;
    if let Some(own) = spikes::stored(db, account_id, s.key()).await.map_err(storage)? {
        return Ok((own, true));
    }
    let settings = match s {
        Subject::Post { r#ref, creator } => spikes::effective(db, account_id, r#ref, creator.as_deref()).await,
        Subject::Creator(r) => spikes::effective(db, account_id, r, None).await,
    }
    .map_err(storage)?;
    Ok((settings, false))
}

/// `GET /spike-alerts/settings/{ref}`: what applies to a post or creator (`own` when it has
/// settings of its own; else its creator's or the account's).
pub async fn get_subject(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, raw) =
        authorized(&req, &state, Scope::KeywordsWrite, async |_| parse_subject(&path)).await?;
    let s = subject(&state, &principal.account_id, raw).await.map_err(|e| meter.fail(e))?;
    let (settings, own) = applying(&state, &principal.account_id, &s).await.map_err(|e| meter.fail(e))?;
    let v = shown_for(&state, &principal.account_id, &s, &settings, own).await.map_err(|e| meter.fail(e))?;
    Ok(meter.json(HttpResponse::Ok(), &v))
}

/// `PUT /spike-alerts/settings/{ref}`: settings of the post's or creator's own, starting from
/// what applied to it.
pub async fn put_subject(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResult {
    let (principal, meter, (raw, change)) = authorized(&req, &state, Scope::KeywordsWrite, async |_| {
        let raw = parse_subject(&path)?;
        Ok((raw, input::json::<SettingsBody>(&read_body(&state, payload).await?, SHAPE)?.checked()?))
    })
    .await?;
    let s = subject(&state, &principal.account_id, raw).await.map_err(|e| meter.fail(e))?;
    let (current, _) = applying(&state, &principal.account_id, &s).await.map_err(|e| meter.fail(e))?;
    let settings = apply(current, change);
    spikes::put(&state.backends.db, &principal.account_id, s.key(), &settings, state.now())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let v = shown_for(&state, &principal.account_id, &s, &settings, true).await.map_err(|e| meter.fail(e))?;
    Ok(meter.json(HttpResponse::Ok(), &v))
}

/// `DELETE /spike-alerts/settings/{ref}`: the post or creator follows the account's (or its
/// creator's) settings again.
pub async fn delete_subject(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, raw) =
        authorized(&req, &state, Scope::KeywordsWrite, async |_| parse_subject(&path)).await?;
    let s = subject(&state, &principal.account_id, raw).await.map_err(|e| meter.fail(e))?;
    spikes::remove(&state.backends.db, &principal.account_id, s.key())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let (settings, own) = applying(&state, &principal.account_id, &s).await.map_err(|e| meter.fail(e))?;
    let v = shown_for(&state, &principal.account_id, &s, &settings, own).await.map_err(|e| meter.fail(e))?;
    Ok(meter.json(HttpResponse::Ok(), &v))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlertParams {
    since: Option<String>,
    limit: Option<i64>,
    #[serde(rename = "ref")]
    r#ref: Option<String>,
}

/// `GET /spike-alerts?since=&limit=&ref=`: alerts after `since` (the `next_since` of the
/// previous answer), oldest first; of one post with `ref`.
pub async fn get_alerts(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, (since, limit, r#ref)) = authorized(&req, &state, Scope::KeywordsWrite, async |_| {
        let p = web::Query::<AlertParams>::from_query(req.query_string()).map_err(backend_errors::query)?.into_inner();
        // Paged as the keyword alerts are.
        let since = notifications::since_param(p.since.as_deref())?;
        let limit = notifications::page_limit(p.limit)?;
        let r#ref = match p.r#ref.as_deref() {
            None => None,
            Some(r) => Some(analyses::parse_ref(r)?.to_string()),
        };
        Ok((since, limit, r#ref))
    })
    .await?;
    let found = spikes::after(&state.backends.db, &principal.account_id, r#ref.as_deref(), since, limit)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let next_since = found.last().map_or(since, |a| a.seq);
    let items: Vec<Value> = found
        .iter()
        .filter_map(|a| {
            let mut v = serde_json::from_str::<Value>(&a.body).ok()?;
            v.as_object_mut()?.remove("account_id");
            Some(v)
        })
        .collect();
    Ok(meter.json(HttpResponse::Ok(), &json!({"items": items, "next_since": next_since.to_string()})))
}
