//! `/api/v1/auth/…`: sign-up with e-mail confirmation, login and logout, the session, password
//! reset. Login and reset answer alike for known and unknown addresses; their limits count
//! per client IP and per e-mail address whether or not an account exists.

use super::sandbox::client_ip;
use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::metering::{Limit, Limiter, Meter};
use crate::session::{self, set_cookie};
use crate::{AppState, backend_errors};
use actix_web::http::header::SET_COOKIE;
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::password;
use cova_domain::limits::{
    self, CONFIRM_LINK_VALIDITY, LOGIN_PER_EMAIL, LOGIN_PER_IP, RESET_LINK_VALIDITY, SIGNUP_PER_IP,
};
use cova_domain::time::rfc3339;
use cova_errors::{ApiError, ErrorCode};
use cova_mail::Mail;
use cova_storage::Account;
use cova_storage::repo::email_links::{self, Purpose};
use cova_storage::repo::{accounts, sessions};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Credentials {
    email: String,
    password: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmailBody {
    email: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenBody {
    token: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    token: String,
    password: String,
}

fn ip(req: &HttpRequest, state: &AppState) -> String {
    client_ip(req, &state.trusted_proxies).map_or_else(|| "unknown".to_owned(), |ip| ip.to_string())
}

/// Spends one attempt of each limit in `keys`; the first refusal is 429 with `Retry-After`.
async fn attempt(state: &AppState, keys: &[(String, limits::Window)]) -> Result<(), ApiError> {
    let member = uuid::Uuid::new_v4().to_string();
    let mut meter = Meter::default();
    for (key, window) in keys {
        let limit = Limit { key: key.clone(), limiter: Limiter::Window(*window) };
        meter.spend(state, &limit, &member).await?;
    }
    Ok(())
}

/// Browsers may post these forms only from the workspace itself (no login CSRF).
fn same_origin(req: &HttpRequest, state: &AppState) -> Result<(), ApiError> {
    if session::from_own_origin(req, state) {
        Ok(())
    } else {
        Err(ApiError::new(ErrorCode::CsrfFailed, "Sign-in requests are accepted from the workspace's own origin only."))
    }
}

fn email_of(raw: &str) -> Result<String, ApiError> {
    accounts::normalise_email(input::text("email", raw)?)
        .map_err(|_| ApiError::validation("`email` is not an e-mail address."))
}

async fn hash_password(password: String) -> Result<String, ApiError> {
    tokio::task::spawn_blocking(move || password::hash(&password)).await.map_err(|_| ApiError::internal())?.map_err(
        |e| {
            tracing::error!(error = %e, "password hashing failed");
            ApiError::internal()
        },
    )
}

/// Verifies off the async workers; an account without a password (made by `cova admin`)
/// never matches, and an unknown one costs the same time.
async fn password_matches(password: String, account: Option<&Account>) -> bool {
    let stored = account.and_then(|a| a.password_hash.clone());
    tokio::task::spawn_blocking(move || match stored {
        Some(stored) => password::verify(&password, &stored),
        None => {
            password::verify_nothing(&password);
            false
        }
    })
    .await
    .unwrap_or(false)
}

/// Sends in the background: the answer never says whether an address has an account, so
/// it must not wait for (and be timed by) a mail that only some requests send.
fn send_later(state: &AppState, mail: Mail) {
    let mailer = state.mailer.clone();
    tokio::spawn(async move {
        if let Err(e) = mailer.send(&mail).await {
            tracing::warn!(error = %e, subject = %mail.subject, "an e-mail could not be sent");
        }
    });
}

fn link(state: &AppState, path: &str) -> String {
    format!("{}/#/{path}", state.config.workspace.base_url(&state.config.http.addr))
}

fn accepted(detail: &str) -> HttpResponse {
    HttpResponse::Accepted().json(json!({ "detail": detail }))
}

/// `POST /auth/signup {email, password}` → 202, whether or not the address has an account.
pub async fn signup(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    same_origin(&req, &state)?;
    let body: Credentials = input::json(&read_body(&state, payload).await?, r#"{"email": "…", "password": "…"}"#)?;
    let email = email_of(&body.email)?;
    password::check(&body.password, &email).map_err(|w| ApiError::validation(w.to_string()))?;
    attempt(&state, &[(format!("signup:{}", ip(&req, &state)), SIGNUP_PER_IP)]).await?;
    let hash = hash_password(body.password).await?;
    let now = state.now();
    let db = &state.backends.db;
    let created = accounts::sign_up(db, &email, &hash, state.config.billing.free_allowance, now)
        .await
        .map_err(backend_errors::storage)?;
    let mail = match created {
        Some(account) => {
            let token = email_links::issue(db, &account.id, Purpose::Confirm, limits::ms(CONFIRM_LINK_VALIDITY), now)
                .await
                .map_err(backend_errors::storage)?;
            let confirm = link(&state, &format!("confirm/{token}"));
            Mail {
                to: email.clone(),
                subject: "Confirm your cova account".into(),
                text: format!(
                    "Welcome to cova.\n\nConfirm your e-mail address by opening this link within {}:\n\n{confirm}\n\nIf you did not sign up, ignore this message.\n",
                    limits::in_words(CONFIRM_LINK_VALIDITY)
                ),
            }
        }
        None => Mail {
            to: email.clone(),
            subject: "You already have a cova account".into(),
            text: format!(
                "Someone (perhaps you) tried to sign up to cova with this address, which already has an account.\n\nLog in: {}\nForgot the password? {}\n",
                link(&state, "login"),
                link(&state, "reset")
            ),
        },
    };
    send_later(&state, mail);
    Ok(accepted("If the address can be used, a confirmation e-mail is on its way. Open its link to confirm."))
}

/// `POST /auth/confirm {token}`: confirms the address of the link's account; a live session
/// of that account is rotated (a privilege change).
pub async fn confirm(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let body: TokenBody = input::json(&read_body(&state, payload).await?, r#"{"token": "…"}"#)?;
    let now = state.now();
    let db = &state.backends.db;
    let account_id = email_links::redeem(db, body.token.trim(), Purpose::Confirm, now)
        .await
        .map_err(backend_errors::storage)?
        .ok_or_else(|| {
            ApiError::validation("This confirmation link is unknown, used or expired. Sign up again or log in.")
        })?;
    accounts::confirm_email(db, &account_id, now).await.map_err(backend_errors::storage)?;
    let account = accounts::get(db, &account_id).await.map_err(backend_errors::storage)?;
    let mut response = HttpResponse::Ok();
    if let Some(cookie) = session::cookie_value(&req, &state)
        && let Some((current, _)) = session::live(&state, &cookie).await?
        && current.account_id == account_id
        && let Some(rotated) = sessions::rotate(db, &current.id, now).await.map_err(backend_errors::storage)?
    {
        response.insert_header((SET_COOKIE, set_cookie(&state, Some(&rotated.cookie))));
    }
    tracing::info!(account.id = %account_id, "e-mail confirmed");
    Ok(response.json(json!({"email": account.email, "confirmed": true})))
}

fn session_body(account: &Account, session: &sessions::Session) -> serde_json::Value {
    json!({
        "account": {
            "id": account.id,
            "email": account.email,
            "email_confirmed": account.is_confirmed(),
            "free_comments_left": account.free_comments_left,
        },
        "csrf_token": session.csrf_token,
        "expires_at": rfc3339(session.idle_expires_at.min(session.expires_at)),
    })
}

/// `POST /auth/login {email, password}`: a new session (never one the browser brought).
pub async fn login(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    same_origin(&req, &state)?;
    let body: Credentials = input::json(&read_body(&state, payload).await?, r#"{"email": "…", "password": "…"}"#)?;
    let email = email_of(&body.email)?;
    attempt(
        &state,
        &[(format!("login:ip:{}", ip(&req, &state)), LOGIN_PER_IP), (format!("login:email:{email}"), LOGIN_PER_EMAIL)],
    )
    .await?;
    let db = &state.backends.db;
    let account = accounts::find_by_email(db, &email).await.map_err(backend_errors::storage)?;
    if !password_matches(body.password, account.as_ref()).await {
        return Err(ApiError::new(ErrorCode::Unauthorized, "The e-mail address or the password is wrong.").into());
    }
    let Some(account) = account else { return Err(ApiError::internal().into()) };
    let opened = sessions::open(db, &account.id, session::lifetime(&state), state.now())
        .await
        .map_err(backend_errors::storage)?;
    tracing::info!(account.id = %account.id, "signed in");
    Ok(HttpResponse::Ok()
        .insert_header((SET_COOKIE, set_cookie(&state, Some(&opened.cookie))))
        .json(session_body(&account, &opened.session)))
}

/// `GET /auth/session`: the current session, with its CSRF token.
pub async fn current(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let unauthorized = || ApiError::new(ErrorCode::Unauthorized, "Not signed in.");
    let cookie = session::cookie_value(&req, &state).ok_or_else(unauthorized)?;
    let (session, account) = session::live(&state, &cookie).await?.ok_or_else(unauthorized)?;
    Ok(HttpResponse::Ok().insert_header(("cache-control", "no-store")).json(session_body(&account, &session)))
}

/// `POST /auth/logout`: cookie and CSRF; revokes the session and clears the cookie.
pub async fn logout(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let principal = crate::auth::authenticate(&req, &state).await?;
    let session_id = principal.require_session()?;
    sessions::revoke(&state.backends.db, session_id, state.now()).await.map_err(backend_errors::storage)?;
    Ok(HttpResponse::NoContent().insert_header((SET_COOKIE, set_cookie(&state, None))).finish())
}

/// `POST /auth/reset {email}` → 202 always; the account, if any, gets a link.
pub async fn reset(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    same_origin(&req, &state)?;
    let body: EmailBody = input::json(&read_body(&state, payload).await?, r#"{"email": "…"}"#)?;
    let email = email_of(&body.email)?;
    attempt(
        &state,
        &[(format!("login:ip:{}", ip(&req, &state)), LOGIN_PER_IP), (format!("reset:email:{email}"), LOGIN_PER_EMAIL)],
    )
    .await?;
    let db = &state.backends.db;
    let now = state.now();
    if let Some(account) = accounts::find_by_email(db, &email).await.map_err(backend_errors::storage)? {
        let token = email_links::issue(db, &account.id, Purpose::Reset, limits::ms(RESET_LINK_VALIDITY), now)
            .await
            .map_err(backend_errors::storage)?;
        let reset = link(&state, &format!("reset/{token}"));
        send_later(
            &state,
            Mail {
                to: account.email,
                subject: "Reset your cova password".into(),
                text: format!(
                    "Choose a new password by opening this link within {}:\n\n{reset}\n\nIf you did not ask for it, ignore this message; your password stays as it is.\n",
                    limits::in_words(RESET_LINK_VALIDITY)
                ),
            },
        );
    }
    Ok(accepted("If the address has an account, a link to choose a new password is on its way."))
}

/// `POST /auth/reset/confirm {token, password}`: sets the password, confirms the address and
/// ends every session of the account.
pub async fn reset_confirm(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    same_origin(&req, &state)?;
    let body: ResetBody = input::json(&read_body(&state, payload).await?, r#"{"token": "…", "password": "…"}"#)?;
    let db = &state.backends.db;
    let now = state.now();
    let invalid = || ApiError::validation("This reset link is unknown, used or expired. Ask for a new one.");
    // The rules are checked before the link is used up, so a refused password can be retried.
    let account_id = email_links::peek(db, body.token.trim(), Purpose::Reset, now)
        .await
        .map_err(backend_errors::storage)?
        .ok_or_else(invalid)?;
    let account = accounts::get(db, &account_id).await.map_err(backend_errors::storage)?;
    password::check(&body.password, &account.email).map_err(|w| ApiError::validation(w.to_string()))?;
    email_links::redeem(db, body.token.trim(), Purpose::Reset, now)
        .await
        .map_err(backend_errors::storage)?
        .filter(|id| *id == account_id)
        .ok_or_else(invalid)?;
    let hash = hash_password(body.password).await?;
    accounts::set_password(db, &account_id, &hash, now).await.map_err(backend_errors::storage)?;
    tracing::info!(account.id = %account_id, "password reset; every session ended");
    Ok(HttpResponse::Ok()
        .insert_header((SET_COOKIE, set_cookie(&state, None)))
        .json(json!({"detail": "Your password is changed. Log in with it."})))
}
