//! Keywords, notification channels, keyword alerts and the delivery log (scope
//! `keywords:write`).

use super::views;
use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::metering::authorized;
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine as _;
use cova_auth::Scope;
use cova_domain::limits::{KEYWORD_CHARS, MAX_KEYWORDS};
use cova_domain::text::normalize;
use cova_domain::time::rfc3339;
use cova_errors::ApiError;
use cova_storage::repo::channels::{self, Channels};
use cova_storage::repo::{alerts, deliveries, keywords};
use serde::Deserialize;
use serde_json::{Value, json};

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;
/// Alerts and deliveries per page, by default and at most.
const PAGE_DEFAULT: i64 = 100;
const PAGE_MAX: i64 = 500;
use crate::input::MAX_URL_LEN;

pub(crate) fn page_limit(raw: Option<i64>) -> Result<i64, ApiError> {
    let limit = raw.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(ApiError::validation(format!("`limit` must be between 1 and {PAGE_MAX}.")));
    }
    Ok(limit)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeywordsBody {
    keywords: Vec<String>,
}

/// The list as stored: trimmed, duplicates (after normalisation) collapsed to the first.
fn keyword_list(body: KeywordsBody) -> Result<Vec<(String, String)>, ApiError> {
    if body.keywords.len() > MAX_KEYWORDS {
        return Err(ApiError::validation(format!("At most {MAX_KEYWORDS} keywords are allowed.")));
    }
    let mut list: Vec<(String, String)> = Vec::new();
    for (i, raw) in body.keywords.iter().enumerate() {
        let keyword = input::text("keywords", raw.trim())?;
        let chars = keyword.chars().count();
        if !KEYWORD_CHARS.contains(&chars) {
            return Err(ApiError::validation(format!(
                "`keywords[{i}]` must be {} to {} characters after trimming.",
                KEYWORD_CHARS.start(),
                KEYWORD_CHARS.end()
            )));
        }
        let normalized = normalize(keyword);
        if !list.iter().any(|(_, n)| *n == normalized) {
            list.push((keyword.to_owned(), normalized));
        }
    }
    Ok(list)
}

/// `GET /keywords`.
pub async fn get_keywords(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::KeywordsWrite, async |_| Ok(())).await?;
    let list = keywords::list(&state.backends.db, &principal.account_id)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    Ok(meter.json(HttpResponse::Ok(), &json!({"keywords": list})))
}

/// `PUT /keywords {"keywords": [...]}`: replaces the list (a paid feature).
pub async fn put_keywords(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, meter, list) = authorized(&req, &state, Scope::KeywordsWrite, async |_| {
        let body: KeywordsBody = input::json(&read_body(&state, payload).await?, r#"{"keywords": ["…"]}"#)?;
        keyword_list(body)
    })
    .await?;
    let db = &state.backends.db;
    // Clearing the list is always allowed.
    if !list.is_empty() {
        meter.require_pack(&state, &principal.account_id, "Keywords need a comment pack this month.").await?;
    }
    keywords::replace(db, &principal.account_id, &list).await.map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let stored: Vec<&String> = list.iter().map(|(k, _)| k).collect();
    Ok(meter.json(HttpResponse::Ok(), &json!({"keywords": stored})))
}

/// The channels as shown; the webhook secret only in `secret`, when it was just created.
/// The channels as the API shows them, with whether this server can send to Telegram at all
/// (so that a form offers a Telegram chat only where one can work).
fn channels_view(state: &AppState, c: &Channels, secret: Option<&str>) -> Value {
    let telegram = c.telegram_chat_id.as_ref().map(
        |chat| json!({"chat_id": chat, "enabled": c.telegram_enabled, "disabled_reason": c.telegram_disabled_reason}),
    );
    let webhook = c.webhook_url.as_ref().map(|url| {
        let mut v = json!({
            "url": url,
            "enabled": c.webhook_enabled,
            "job_events": c.webhook_job_events,
            "disabled_reason": c.webhook_disabled_reason,
        });
        if let (Some(secret), Some(obj)) = (secret, v.as_object_mut()) {
            obj.insert("secret".into(), json!(secret));
        }
        v
    });
    let telegram_available = state.config.notifier.telegram_bot_token.is_some();
    json!({"telegram": telegram, "webhook": webhook, "telegram_available": telegram_available})
}

/// `GET /notification-channels`.
pub async fn get_channels(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::KeywordsWrite, async |_| Ok(())).await?;
    let current = channels::get(&state.backends.db, &principal.account_id)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    Ok(meter.json(HttpResponse::Ok(), &channels_view(&state, &current, None)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TelegramBody {
    chat_id: String,
    #[serde(default = "yes")]
    enabled: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookBody {
    url: String,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    job_events: bool,
}

fn yes() -> bool {
    true
}

/// A Telegram chat: a numeric id (groups are negative) or a public `@channel`.
fn valid_chat(chat: &str) -> bool {
    let digits = chat.strip_prefix('-').unwrap_or(chat);
    let numeric = !digits.is_empty() && digits.len() <= 20 && digits.bytes().all(|b| b.is_ascii_digit());
    let channel = chat
        .strip_prefix('@')
        .is_some_and(|n| (5..=32).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    numeric || channel
}

/// `PUT /notification-channels {telegram?, webhook?}`: a channel given replaces it, `null`
/// removes it, a channel left out stays as it is. The webhook URL must be https and resolve to
/// public addresses. The webhook secret is created with the first webhook and shown once.
pub async fn put_channels(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, meter, body) = authorized(&req, &state, Scope::KeywordsWrite, async |_| {
        let body: Value = input::json(&read_body(&state, payload).await?, r#"{"webhook": {"url": "https://…"}}"#)?;
        let obj = body.as_object().ok_or_else(|| ApiError::validation("The body must be a JSON object."))?;
        if let Some(unknown) = obj.keys().find(|k| !matches!(k.as_str(), "telegram" | "webhook")) {
            return Err(ApiError::validation(format!("Unknown field `{unknown}`: expected `telegram` and `webhook`.")));
        }
        let telegram = match obj.get("telegram") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(v) => {
                let t: TelegramBody = serde_json::from_value(v.clone())
                    .map_err(|e| ApiError::validation(format!("Invalid `telegram`: {e}")))?;
                let chat = input::text("telegram.chat_id", t.chat_id.trim())?.to_owned();
                if !valid_chat(&chat) {
                    return Err(ApiError::validation(
                        "`telegram.chat_id` must be a numeric chat id or a public @channel name.",
                    ));
                }
                // A chat cova could never write to would fail every alert in silence.
                if state.config.notifier.telegram_bot_token.is_none() {
                    return Err(ApiError::validation(
                        "Telegram alerts are not available on this cova server: it has no Telegram bot \
                         configured. Use a webhook instead, or ask the operator to set one up.",
                    ));
                }
                Some(Some(TelegramBody { chat_id: chat, enabled: t.enabled }))
            }
        };
        let webhook = match obj.get("webhook") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(v) => {
                let w: WebhookBody = serde_json::from_value(v.clone())
                    .map_err(|e| ApiError::validation(format!("Invalid `webhook`: {e}")))?;
                let url = input::text("webhook.url", w.url.trim())?.to_owned();
                if url.len() > MAX_URL_LEN {
                    return Err(ApiError::validation(format!(
                        "`webhook.url` is longer than {MAX_URL_LEN} characters."
                    )));
                }
                // A name server that never answers must not hold the request.
                tokio::time::timeout(std::time::Duration::from_secs(5), state.notify.guard().resolve(&url))
                    .await
                    .map_err(|_| ApiError::validation("`webhook.url` is refused: its host did not resolve in time."))?
                    .map_err(|e| ApiError::validation(format!("`webhook.url` is refused: {e}.")))?;
                Some(Some(WebhookBody { url, enabled: w.enabled, job_events: w.job_events }))
            }
        };
        Ok((telegram, webhook))
    })
    .await?;
    let db = &state.backends.db;
    let mut next =
        channels::get(db, &principal.account_id).await.map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let (telegram, webhook) = body;
    match telegram {
        None => {}
        Some(None) => (next.telegram_chat_id, next.telegram_enabled) = (None, false),
        Some(Some(t)) => (next.telegram_chat_id, next.telegram_enabled) = (Some(t.chat_id), t.enabled),
    }
    match webhook {
        None => {}
        Some(None) => (next.webhook_url, next.webhook_enabled, next.webhook_job_events) = (None, false, false),
        Some(Some(w)) => {
            (next.webhook_url, next.webhook_enabled, next.webhook_job_events) = (Some(w.url), w.enabled, w.job_events)
        }
    }
    let secret = new_secret();
    let (stored, created) = channels::put(db, &principal.account_id, &next, &secret, state.now())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    Ok(meter.json(HttpResponse::Ok(), &channels_view(&state, &stored, created.then_some(secret.as_str()))))
}

/// A webhook signing secret: 256 random bits.
fn new_secret() -> String {
    format!("whsec_{}", hex::encode(rand::random::<[u8; 32]>()))
}

/// `POST /notification-channels/webhook/rotate-secret`: a new secret, shown this once.
pub async fn rotate_secret(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::KeywordsWrite, async |_| Ok(())).await?;
    let secret = new_secret();
    channels::rotate_secret(&state.backends.db, &principal.account_id, &secret, state.now())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(ApiError::not_found("No webhook is set.")))?;
    Ok(meter.json(HttpResponse::Ok(), &json!({"secret": secret})))
}

/// `POST /notification-channels/test`: a signed test event to each enabled channel, and what
/// each receiver answered.
pub async fn test_channels(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::KeywordsWrite, async |_| Ok(())).await?;
    let current = channels::get(&state.backends.db, &principal.account_id)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let now = state.now();
    let id = uuid::Uuid::now_v7().to_string();
    let answer = |sent: Result<cova_notify::Outcome, cova_notify::SendError>| match sent {
        Ok(o) => {
            json!({"ok": o.delivered(), "status": o.status, "detail": o.body.chars().take(200).collect::<String>()})
        }
        Err(e) => json!({"ok": false, "status": null, "detail": e.to_string()}),
    };
    let telegram = match (&current.telegram_chat_id, current.telegram_enabled) {
        (Some(chat), true) => {
            Some(answer(state.notify.telegram(chat, "✅ cova test message: this chat receives keyword alerts.").await))
        }
        _ => None,
    };
    let webhook = match (&current.webhook_url, &current.webhook_secret, current.webhook_enabled) {
        (Some(url), Some(secret), true) => {
            let body = json!({"type": "test", "id": id, "created_at": rfc3339(now)}).to_string();
            Some(answer(state.notify.webhook(url, secret, &id, body.as_bytes(), now / 1000).await))
        }
        _ => None,
    };
    Ok(meter.json(HttpResponse::Ok(), &json!({"telegram": telegram, "webhook": webhook})))
}

/// The `since` of an alert list: a `next_since` this API returned (none is the start).
pub(crate) fn since_param(raw: Option<&str>) -> Result<i64, ApiError> {
    match raw {
        None | Some("") => Ok(0),
        Some(s) => s
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| ApiError::validation("`since` must be a `next_since` this API returned.")),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlertParams {
    since: Option<String>,
    limit: Option<i64>,
}

/// `GET /keyword-alerts?since=&limit=`: alerts after `since` (the `next_since` of the previous
/// answer), oldest first, so a poller sees each once.
pub async fn get_alerts(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, (since, limit)) = authorized(&req, &state, Scope::KeywordsWrite, async |_| {
        let p = web::Query::<AlertParams>::from_query(req.query_string()).map_err(backend_errors::query)?.into_inner();
        Ok((since_param(p.since.as_deref())?, page_limit(p.limit)?))
    })
    .await?;
    let found = alerts::after(&state.backends.db, &principal.account_id, since, limit)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let next_since = found.last().map_or(since, |a| a.seq);
    // Each post named as spike alerts name it, from its entry's metadata.
    let mut refs: Vec<&str> = found.iter().map(|a| a.r#ref.as_str()).collect();
    refs.sort_unstable();
    refs.dedup();
    let titles: std::collections::HashMap<String, String> =
        cova_storage::repo::analyses::metadata_of(&state.backends.db, &principal.account_id, &refs)
            .await
            .map_err(|e| meter.fail(backend_errors::storage(e)))?
            .into_iter()
            .filter_map(|(r, m)| {
                let title = cova_domain::library::headline(&serde_json::from_str::<Value>(&m).ok()?)?;
                Some((r, title))
            })
            .collect();
    let items: Vec<Value> = found
        .iter()
        .map(|a| {
            let mut alert = json!({
                "id": a.id,
                "keyword": a.keyword,
                "ref": a.r#ref,
                "title": titles.get(&a.r#ref),
                "comment": serde_json::from_str::<Value>(&a.comment).unwrap_or(Value::Null),
                "created_at": rfc3339(a.created_at),
            });
            // A post found through a followed creator names it, as its webhook does.
            if let Some(creator) = a.creator.as_deref().and_then(|c| serde_json::from_str::<Value>(c).ok()) {
                alert["creator"] = creator;
            }
            alert
        })
        .collect();
    Ok(meter.json(HttpResponse::Ok(), &json!({"items": items, "next_since": next_since.to_string()})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageParams {
    cursor: Option<String>,
    limit: Option<i64>,
}

/// `GET /notification-channels/deliveries`: the delivery log, newest first.
pub async fn get_deliveries(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, (before, limit)) = authorized(&req, &state, Scope::KeywordsWrite, async |_| {
        let p = web::Query::<PageParams>::from_query(req.query_string()).map_err(backend_errors::query)?.into_inner();
        let before = match &p.cursor {
            None => None,
            Some(c) => Some(
                BASE64
                    .decode(c)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|s| s.split_once('|').and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned()))))
                    .ok_or_else(|| ApiError::validation("`cursor` is not one this API returned."))?,
            ),
        };
        Ok((before, page_limit(p.limit)?))
    })
    .await?;
    let found = deliveries::list(&state.backends.db, &principal.account_id, before, limit)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let next_cursor = (found.len() as i64 == limit)
        .then(|| found.last().map(|d| BASE64.encode(format!("{}|{}", d.created_at, d.id))))
        .flatten();
    let items: Vec<Value> = found.iter().map(views::delivery).collect();
    Ok(meter.json(HttpResponse::Ok(), &json!({"items": items, "next_cursor": next_cursor})))
}

/// `POST /notification-channels/deliveries/{id}/replay`: sends a delivery again.
pub async fn replay(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, id) =
        authorized(&req, &state, Scope::KeywordsWrite, async |_| Ok(input::text("id", &path)?.to_owned())).await?;
    let delivery = deliveries::replay(&state.backends.db, &principal.account_id, &id, state.now())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(ApiError::not_found("No such delivery.")))?;
    Ok(meter.json(HttpResponse::Ok(), &views::delivery(&delivery)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_lists_are_trimmed_checked_and_deduplicated() {
        let list = keyword_list(KeywordsBody {
            keywords: vec![" Sale ".into(), "ＳＡＬＥ".into(), "where to buy".into()],
        })
        .expect("valid");
        assert_eq!(list.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["Sale", "where to buy"]);
        assert!(keyword_list(KeywordsBody { keywords: vec!["  ".into()] }).is_err());
        assert!(keyword_list(KeywordsBody { keywords: vec!["x".repeat(65)] }).is_err());
        assert!(keyword_list(KeywordsBody { keywords: vec!["ok".into(); 51] }).is_err());
        assert!(keyword_list(KeywordsBody { keywords: vec!["a\u{0}b".into()] }).is_err());
    }

    #[test]
    fn chat_ids() {
        for ok in ["123456", "-1001234567890", "@cova_alerts"] {
            assert!(valid_chat(ok), "{ok}");
        }
        for bad in ["", "-", "12a", "@ab", "@with space", "https://t.me/x"] {
            assert!(!valid_chat(bad), "{bad}");
        }
    }
}
