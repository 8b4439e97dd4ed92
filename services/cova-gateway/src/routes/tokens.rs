//! `/api/v1/tokens`: the workspace's tokens page. Cookie session only: a token cannot mint
//! or revoke tokens. The full value is in the creation answer and nowhere else.

use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::metering::authorized_any;
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::{Scope, ScopeSet};
use cova_domain::limits::{MAX_ACTIVE_TOKENS, TOKEN_NAME_CHARS};
use cova_domain::time::rfc3339;
use cova_errors::{ApiError, ErrorCode};
use cova_storage::repo::tokens::{self, NewToken, TokenRecord, TokenRefusal};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTokenBody {
    name: String,
    scopes: Vec<String>,
}

fn view(t: &TokenRecord) -> Value {
    json!({
        "id": t.id,
        "name": t.name,
        "prefix": t.prefix,
        "scopes": t.scope_set().iter().map(Scope::as_str).collect::<Vec<_>>(),
        "created_at": rfc3339(t.created_at),
        "last_used_at": t.last_used_at.map(rfc3339),
    })
}

/// `GET /tokens`: the active tokens, newest first.
pub async fn list(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = authorized_any(&req, &state, async |p| p.require_session().map(|_| ())).await?;
    let mut all = tokens::list(&state.backends.db, &principal.account_id)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    all.retain(|t| t.revoked_at.is_none());
    all.reverse();
    Ok(meter.json(HttpResponse::Ok(), &json!({"tokens": all.iter().map(view).collect::<Vec<_>>()})))
}

/// `POST /tokens {name, scopes}` → 201 with the value, shown this once.
pub async fn create(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, meter, (name, scopes)) = authorized_any(&req, &state, async |p| {
        p.require_session()?;
        let shape = r#"{"name": "…", "scopes": ["analyze:write", …]}"#;
        let body: NewTokenBody = input::json(&read_body(&state, payload).await?, shape)?;
        let name = input::text("name", body.name.trim())?.to_owned();
        if !TOKEN_NAME_CHARS.contains(&name.chars().count()) {
            return Err(ApiError::validation(format!(
                "`name` must be {} to {} characters.",
                TOKEN_NAME_CHARS.start(),
                TOKEN_NAME_CHARS.end()
            )));
        }
        let mut scopes = ScopeSet::default();
        for scope in &body.scopes {
            scopes.insert(scope.parse().map_err(|e: cova_auth::UnknownScope| ApiError::validation(e.to_string()))?);
        }
        if scopes.is_empty() {
            return Err(ApiError::validation("Choose at least one scope."));
        }
        Ok((name, scopes))
    })
    .await?;
    let token = cova_auth::generate();
    let created = tokens::create(
        &state.backends.db,
        NewToken { account_id: &principal.account_id, name: &name, scopes, token: &token },
        state.now(),
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    match created {
        Ok(record) => {
            tracing::info!(account.id = %principal.account_id, token.prefix = %record.prefix, "token created in the workspace");
            let mut body = view(&record);
            if let Some(obj) = body.as_object_mut() {
                obj.insert("token".into(), Value::String(token.value));
            }
            Ok(meter.json(HttpResponse::Created(), &body))
        }
        Err(TokenRefusal::Limit) => Err(meter
            .fail(ApiError::new(
                ErrorCode::TokenLimit,
                format!("The account already has {MAX_ACTIVE_TOKENS} active tokens; revoke one first."),
            ))
            .into()),
        Err(TokenRefusal::EmailUnconfirmed) => Err(meter
            .fail(ApiError::new(ErrorCode::EmailUnconfirmed, "Confirm your e-mail address before creating tokens."))
            .into()),
    }
}

/// `DELETE /tokens/{id}` → 204; 404 for a token that is not the account's or already revoked.
pub async fn revoke(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, ()) = authorized_any(&req, &state, async |p| p.require_session().map(|_| ())).await?;
    let revoked = tokens::revoke(&state.backends.db, &principal.account_id, &path, state.now())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    if !revoked {
        return Err(meter.fail(ApiError::not_found("No such active token in this account.")).into());
    }
    Ok(meter.empty(HttpResponse::NoContent()))
}
