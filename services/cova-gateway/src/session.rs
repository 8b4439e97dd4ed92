//! The workspace's cookie session: the cookie, its lookup, the CSRF checks of unsafe
//! requests, and the anonymous page token of the workspace's own page.
//! The rules are in docs/workspace.md.

use crate::auth::{Credential, Principal};
use crate::{AppState, backend_errors};
use actix_web::HttpRequest;
use actix_web::http::Method;
use actix_web::http::header::{COOKIE, ORIGIN};
use cova_auth::{ScopeSet, secret};
use cova_errors::{ApiError, ErrorCode};
use cova_storage::repo::sessions::{self, Lifetime, Session};
use std::time::Duration;

/// The cookie on plain http (local use).
pub const COOKIE_NAME: &str = "cova_session";
/// The cookie over https: the `__Host-` prefix pins it to this host, `Secure` and `Path=/`.
pub const SECURE_COOKIE_NAME: &str = "__Host-cova_session";
pub const CSRF_HEADER: &str = "x-csrf-token";
pub const PAGE_TOKEN_HEADER: &str = "x-cova-page-token";
/// How long the workspace page's anonymous token is good for.
pub const PAGE_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);
/// A session's idle expiry is pushed forward at most this often.
const TOUCH_EVERY_MS: i64 = 60_000;

pub fn lifetime(state: &AppState) -> Lifetime {
    let ws = &state.config.workspace;
    let ms = |n: u64, unit: i64| i64::try_from(n).unwrap_or(i64::MAX / unit).saturating_mul(unit);
    Lifetime { idle_ms: ms(ws.session_idle_min, 60_000), max_ms: ms(ws.session_max_hours, 3_600_000) }
}

fn cookie_name(state: &AppState) -> &'static str {
    if state.config.workspace.secure_cookies() { SECURE_COOKIE_NAME } else { COOKIE_NAME }
}

/// The session cookie's value, if the request carries one of the right name and form.
pub fn cookie_value(req: &HttpRequest, state: &AppState) -> Option<String> {
    let name = cookie_name(state);
    req.headers()
        .get_all(COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_owned())
}

/// `Set-Cookie` for a session value; `None` clears the cookie.
pub fn set_cookie(state: &AppState, value: Option<&str>) -> String {
    let secure = if state.config.workspace.secure_cookies() { "; Secure" } else { "" };
    let (value, max_age) = match value {
        Some(v) => (v, lifetime(state).max_ms / 1000),
        None => ("", 0),
    };
    format!("{}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}", cookie_name(state))
}

fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The origin the request was sent to, as a browser writes `Origin`.
fn own_origin(req: &HttpRequest) -> String {
    let info = req.connection_info();
    format!("{}://{}", info.scheme(), info.host())
}

/// True when a browser sent the request from cova's own origin or a configured one. Without
/// `Origin`, `Sec-Fetch-Site` decides when present; a client that sends neither is not a
/// browser, and a cross-site request from a browser always carries one of them.
pub fn from_own_origin(req: &HttpRequest, state: &AppState) -> bool {
    if let Some(origin) = req.headers().get(ORIGIN) {
        let Ok(origin) = origin.to_str() else { return false };
        let ws = &state.config.workspace;
        return origin == own_origin(req)
            || ws.allowed_origins.iter().any(|o| o == origin)
            || (!ws.public_url.is_empty() && url_origin(&ws.public_url).as_deref() == Some(origin));
    }
    match req.headers().get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some(site) => matches!(site, "same-origin" | "none"),
        None => true,
    }
}

fn url_origin(url: &str) -> Option<String> {
    url::Url::parse(url).ok().map(|u| u.origin().ascii_serialization())
}

/// 403 `csrf_failed` unless the request carries the session's CSRF token and comes from an
/// allowed origin.
pub fn check_csrf(req: &HttpRequest, state: &AppState, session: &Session) -> Result<(), ApiError> {
    let sent = req.headers().get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    let Some(sent) = sent else {
        return Err(ApiError::new(ErrorCode::CsrfFailed, "The X-CSRF-Token header is missing."));
    };
    if !secret::same(sent.trim(), &session.csrf_token) {
        return Err(ApiError::new(ErrorCode::CsrfFailed, "The X-CSRF-Token header does not match this session."));
    }
    if !from_own_origin(req, state) {
        return Err(ApiError::new(
            ErrorCode::CsrfFailed,
            "Cookie requests are accepted from the workspace's own origin only.",
        ));
    }
    Ok(())
}

fn ended() -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, "Your session has ended; log in again.")
}

/// Authenticates by the session cookie (see [`crate::auth::authenticate`]).
pub async fn authenticate(req: &HttpRequest, state: &AppState, cookie: &str) -> Result<Principal, ApiError> {
    let (session, account) = live(state, cookie).await?.ok_or_else(ended)?;
    if is_unsafe(req.method()) {
        check_csrf(req, state, &session)?;
    }
    Ok(Principal {
        account_id: account.id,
        email: account.email,
        scopes: ScopeSet::all(),
        credential: Credential::Session { id: session.id, csrf: session.csrf_token },
        free_comments_left: account.free_comments_left,
    })
}

/// The live session of this cookie value and its account; keeps it alive (at most once a
/// minute, in the background).
pub async fn live(state: &AppState, cookie: &str) -> Result<Option<(Session, cova_storage::Account)>, ApiError> {
    if !secret::well_formed(cookie) {
        return Ok(None);
    }
    let now = state.now();
    let found = sessions::find(&state.backends.db, cookie, now).await.map_err(backend_errors::storage)?;
    if let Some((session, _)) = &found
        && now - session.last_seen_at >= TOUCH_EVERY_MS
    {
        let (db, session, life) = (state.backends.db.clone(), session.clone(), lifetime(state));
        tokio::spawn(async move {
            if let Err(e) = sessions::touch(&db, &session, life, now).await {
                tracing::debug!(error = %e, "extending a session failed");
            }
        });
    }
    Ok(found)
}

fn page_key(token: &str) -> String {
    format!("page:{}", secret::hash(token))
}

/// A token for the workspace page served to `ip`: anonymous metadata lookups must carry it.
pub async fn issue_page_token(state: &AppState, ip: &str) -> Result<String, ApiError> {
    let token = secret::generate().value;
    state.backends.cache.set(&page_key(&token), ip.as_bytes(), PAGE_TOKEN_TTL).await.map_err(backend_errors::cache)?;
    Ok(token)
}

/// True when `token` was issued to a page served to `ip` within the last day.
pub async fn page_token_valid(state: &AppState, token: &str, ip: &str) -> Result<bool, ApiError> {
    if !secret::well_formed(token) {
        return Ok(false);
    }
    let stored = state.backends.cache.get(&page_key(token)).await.map_err(backend_errors::cache)?;
    Ok(stored.is_some_and(|v| v == ip.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_methods() {
        assert!(!is_unsafe(&Method::GET) && !is_unsafe(&Method::HEAD) && !is_unsafe(&Method::OPTIONS));
        assert!(
            is_unsafe(&Method::POST)
                && is_unsafe(&Method::PUT)
                && is_unsafe(&Method::DELETE)
                && is_unsafe(&Method::PATCH)
        );
    }

    #[test]
    fn origins_of_urls() {
        assert_eq!(url_origin("https://cova.example.com/app/").as_deref(), Some("https://cova.example.com"));
        assert_eq!(url_origin("http://127.0.0.1:8080").as_deref(), Some("http://127.0.0.1:8080"));
    }
}
