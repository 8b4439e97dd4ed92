//! Authentication (a Bearer token, else the workspace's session cookie) and scope checks.

use crate::AppState;
use crate::backend_errors;
use actix_web::HttpRequest;
use actix_web::http::header::AUTHORIZATION;
use cova_auth::{Scope, ScopeSet, hash_token, looks_like_token};
use cova_errors::{ApiError, ErrorCode};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How the caller proved who it is.
#[derive(Debug, Clone)]
pub enum Credential {
    Token {
        id: String,
        prefix: String,
    },
    /// A workspace session: its stable id and its CSRF token.
    Session {
        id: String,
        csrf: String,
    },
}

/// Who is calling: the account and what the credential may do.
#[derive(Debug, Clone)]
pub struct Principal {
    pub account_id: String,
    pub email: String,
    pub scopes: ScopeSet,
    pub credential: Credential,
    /// The free allowance when the session was read (sessions only spend it).
    pub free_comments_left: i64,
}

impl Principal {
    pub fn token_id(&self) -> Option<&str> {
        match &self.credential {
            Credential::Token { id, .. } => Some(id),
            Credential::Session { .. } => None,
        }
    }

    pub fn session_id(&self) -> Option<&str> {
        match &self.credential {
            Credential::Session { id, .. } => Some(id),
            Credential::Token { .. } => None,
        }
    }

    pub fn started_by(&self) -> cova_storage::repo::jobs::StartedBy<'_> {
        use cova_storage::repo::jobs::StartedBy;
        match &self.credential {
            Credential::Token { id, .. } => StartedBy::Token(id),
            Credential::Session { id, .. } => StartedBy::Session(id),
        }
    }

    /// Workspace-only endpoints (tokens, checkout) refuse tokens.
    pub fn require_session(&self) -> Result<&str, ApiError> {
        self.session_id().ok_or_else(|| ApiError::of(ErrorCode::SessionRequired))
    }

    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.scopes.contains(scope) {
            Ok(())
        } else {
            Err(ApiError::new(ErrorCode::ForbiddenScope, format!("This token lacks the `{scope}` scope.")))
        }
    }
}

/// Token lookups remembered for a short time, so that a busy integrator does not cost a
/// database read per request; the TTL bounds how long a revoked token keeps working.
pub struct TokenCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Option<Principal>)>>,
}

/// Beyond this many entries the cache is cleared rather than grown (junk tokens cannot bloat it).
const MAX_CACHED_TOKENS: usize = 10_000;

impl TokenCache {
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    fn get(&self, hash: &str) -> Option<Option<Principal>> {
        let entries = self.entries.lock().ok()?;
        entries.get(hash).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, p)| p.clone())
    }

    fn put(&self, hash: String, principal: Option<Principal>) {
        if self.ttl.is_zero() {
            return;
        }
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= MAX_CACHED_TOKENS {
                entries.clear();
            }
            entries.insert(hash, (Instant::now(), principal));
        }
    }
}

fn unauthorized(detail: &str) -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, detail)
}

/// The bearer token of the request, from the `Authorization` header only.
fn bearer(req: &HttpRequest) -> Result<&str, ApiError> {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .ok_or_else(|| unauthorized("Missing token. Send it as `Authorization: Bearer <token>`."))?;
    let value = header.to_str().map_err(|_| unauthorized("Malformed Authorization header."))?;
    let (scheme, token) = value
        .trim()
        .split_once(' ')
        .ok_or_else(|| unauthorized("Malformed Authorization header; expected `Bearer <token>`."))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(unauthorized("Unsupported authorization scheme; expected `Bearer <token>`."));
    }
    Ok(token.trim())
}

/// Authenticates the request: by its Bearer token when it sends `Authorization` (a cookie
/// beside it is ignored), else by the workspace's session cookie; 401 for a missing,
/// malformed, unknown or revoked credential, 403 `csrf_failed` for an unsafe cookie request
/// without its CSRF proof.
pub async fn authenticate(req: &HttpRequest, state: &AppState) -> Result<Principal, ApiError> {
    let principal = if !req.headers().contains_key(AUTHORIZATION)
        && let Some(cookie) = crate::session::cookie_value(req, state)
    {
        crate::session::authenticate(req, state, &cookie).await?
    } else {
        authenticate_token(req, state).await?
    };
    // The request's platform requests are this account's: they wait their turn as its.
    cova_platforms::Demand::current().identify(&principal.account_id);
    Ok(principal)
}

async fn authenticate_token(req: &HttpRequest, state: &AppState) -> Result<Principal, ApiError> {
    let token = bearer(req)?;
    if !looks_like_token(token) {
        return Err(unauthorized("Invalid token."));
    }
    let hash = hash_token(token);
    let principal = match state.tokens.get(&hash) {
        Some(cached) => cached,
        None => {
            // The database, else (while it does not answer) the token's copy in the cache.
            let found = state
                .backends
                .snapshots
                .token(&state.backends.db, &hash)
                .await
                .map_err(backend_errors::snapshot)?
                .map(|copy| (copy.token, copy.account));
            let principal = found.map(|(token, account)| {
                touch_in_background(state, &token.id);
                Principal {
                    account_id: account.id,
                    email: account.email,
                    scopes: token.scope_set(),
                    credential: Credential::Token { id: token.id, prefix: token.prefix },
                    free_comments_left: account.free_comments_left,
                }
            });
            state.tokens.put(hash, principal.clone());
            principal
        }
    };
    principal.ok_or_else(|| unauthorized("Invalid or revoked token."))
}

/// `last_used_at` is bookkeeping: never make the caller wait for it.
fn touch_in_background(state: &AppState, token_id: &str) {
    let db = state.backends.db.clone();
    let id = token_id.to_owned();
    let now = state.now();
    tokio::spawn(async move {
        if let Err(e) = cova_storage::repo::tokens::touch_last_used(&db, &id, now).await {
            tracing::debug!(error = %e, "recording token use failed");
        }
    });
}
