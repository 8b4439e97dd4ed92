//! The workspace's pages: one HTML page, its scripts and its style, embedded in the binary
//! (`web/`). The page carries a fresh anonymous page token for the metadata preview of
//! visitors who are not signed in.

use super::sandbox::client_ip;
use crate::AppState;
use crate::error::HttpResult;
use crate::session;
use actix_web::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use actix_web::{HttpRequest, HttpResponse, web};

const INDEX: &str = include_str!("../../web/index.html");
const SCRIPT: &str = include_str!("../../web/app.js");
const CHART: &str = include_str!("../../web/chart.js");
const STYLE: &str = include_str!("../../web/app.css");

/// Nothing inline, nothing from elsewhere: a comment text that slipped into the page could
/// run no script and load nothing.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'";

fn page(builder: &mut actix_web::HttpResponseBuilder) {
    builder
        .insert_header((CONTENT_SECURITY_POLICY, CSP))
        .insert_header(("x-content-type-options", "nosniff"))
        .insert_header(("referrer-policy", "same-origin"))
        .insert_header(("x-frame-options", "DENY"));
}

/// `GET /`: the workspace.
pub async fn index(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let ip = client_ip(&req, &state.trusted_proxies).map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
    // Without the cache the page still works; only its anonymous preview will be refused.
    let token = session::issue_page_token(&state, &ip).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e.detail, "no page token for the workspace page");
        String::new()
    });
    let mut builder = HttpResponse::Ok();
    page(&mut builder);
    Ok(builder
        .insert_header((CONTENT_TYPE, "text/html; charset=utf-8"))
        .insert_header((CACHE_CONTROL, "no-store"))
        .body(INDEX.replace("{{PAGE_TOKEN}}", &token)))
}

fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    let mut builder = HttpResponse::Ok();
    page(&mut builder);
    // Revalidated on every load, so a new cova version is picked up at once.
    builder.insert_header((CONTENT_TYPE, content_type)).insert_header((CACHE_CONTROL, "no-cache")).body(body)
}

pub async fn script() -> HttpResponse {
    asset("text/javascript; charset=utf-8", served_script())
}

/// The page's script with the rules it shows (scopes, limits, error codes) prepended as
/// `RULES`, built from the constants that enforce them: the page never restates a rule.
fn served_script() -> &'static str {
    static SERVED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SERVED.get_or_init(|| {
        use cova_domain::limits;
        let rules = serde_json::json!({
            "scopes": cova_auth::Scope::ALL.iter().map(|s| [s.as_str(), s.access()]).collect::<Vec<_>>(),
            "codes": cova_errors::ErrorCode::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "limits": {
                "active_tokens": limits::MAX_ACTIVE_TOKENS,
                "token_name_chars": [limits::TOKEN_NAME_CHARS.start(), limits::TOKEN_NAME_CHARS.end()],
                "running_analyses": limits::MAX_RUNNING_ANALYSES,
                "keywords": limits::MAX_KEYWORDS,
                "keyword_chars": [limits::KEYWORD_CHARS.start(), limits::KEYWORD_CHARS.end()],
                "watch_phrases": limits::MAX_WATCH_PHRASES,
                "watch_phrase_chars": limits::WATCH_PHRASE_CHARS.end(),
                "watch_interval_min": [limits::WATCH_INTERVAL_MIN.start(), limits::WATCH_INTERVAL_MIN.end()],
                "library_days": limits::LIBRARY_LIFETIME.as_secs() / 86_400,
                "batch_urls": limits::MAX_BATCH_URLS,
                "comments_per_post": limits::MAX_COMMENTS_PER_POST,
                "creator_interval_min": [limits::CREATOR_INTERVAL_MIN.start(), limits::CREATOR_INTERVAL_MIN.end()],
                "search_chars": cova_analyzers::search::MAX_QUERY_CHARS,
                "search_page": limits::SEARCH_PAGE_MAX,
            },
        });
        let declared = format!("\"use strict\";\nconst RULES = Object.freeze({rules});\n");
        SCRIPT.replacen("\"use strict\";\n", &declared, 1)
    })
}

/// `GET /chart.js`: the workspace's own small charting module (no third-party script).
pub async fn chart() -> HttpResponse {
    asset("text/javascript; charset=utf-8", CHART)
}

pub async fn style() -> HttpResponse {
    asset("text/css; charset=utf-8", STYLE)
}
