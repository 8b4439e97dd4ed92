//! `GET /api/v1/openapi.json` and `GET /docs`: the API's OpenAPI document, and a reference
//! page that renders it, both built into the binary (no token, no network, no CDN). The
//! document is `docs/openapi.json`, the one the conformance tests check the answers against.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};
use std::sync::OnceLock;

const OPENAPI: &str = include_str!("../../../../docs/openapi.json");
const PAGE: &str = include_str!("../../assets/docs.html");

/// Browsers and tools may keep either for five minutes; a new release changes the ETag.
const CACHE_CONTROL: &str = "public, max-age=300";

/// The page runs its own inline script and style, named by their hashes (nothing else inline
/// runs, not even a script that found its way into the rendered document), and talks only to
/// this origin.
fn page_csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        let source = |tag: &str| {
            inline_hash(PAGE, tag).map_or_else(|| "'none'".to_owned(), |hash| format!("'sha256-{hash}'"))
        };
        format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            source("script"),
            source("style")
        )
    })
}

/// The base64 SHA-256 of the first inline `<tag>` element's text, as CSP names it.
fn inline_hash(page: &str, tag: &str) -> Option<String> {
    use base64::Engine;
    let open = format!("<{tag}>");
    let start = page.find(&open)? + open.len();
    let end = start + page[start..].find(&format!("</{tag}>"))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &page.as_bytes()[start..end]);
    Some(base64::engine::general_purpose::STANDARD.encode(digest.as_ref()))
}

/// A strong validator per file: the SHA-256 of its bytes, computed once.
fn etag(text: &'static str, cell: &'static OnceLock<String>) -> &'static str {
    cell.get_or_init(|| {
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        format!("\"{}\"", hex::encode(digest.as_ref()))
    })
}

fn serve(req: &HttpRequest, body: &'static str, content_type: &str, etag: &str) -> HttpResponse {
    let fresh = crate::input::etag_matches(req, etag);
    let mut answer = if fresh { HttpResponse::NotModified() } else { HttpResponse::Ok() };
    answer
        .insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, CACHE_CONTROL))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"));
    if fresh { answer.finish() } else { answer.content_type(content_type).body(body) }
}

pub async fn openapi(req: HttpRequest) -> HttpResponse {
    static ETAG: OnceLock<String> = OnceLock::new();
    serve(&req, OPENAPI, "application/json", etag(OPENAPI, &ETAG))
}

pub async fn page(req: HttpRequest) -> HttpResponse {
    static ETAG: OnceLock<String> = OnceLock::new();
    let mut answer = serve(&req, PAGE, "text/html; charset=utf-8", etag(PAGE, &ETAG));
    if let Ok(csp) = header::HeaderValue::from_str(page_csp()) {
        answer.headers_mut().insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    answer.headers_mut().insert(header::REFERRER_POLICY, header::HeaderValue::from_static("no-referrer"));
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_document_is_json_of_this_api() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("docs/openapi.json is JSON");
        assert!(doc["paths"]["/api/v1/openapi.json"].is_object());
        assert!(PAGE.contains("/api/v1/openapi.json"), "the page loads the document");
    }

    #[test]
    fn the_page_allows_only_its_own_inline_script_and_style() {
        let csp = page_csp();
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        let script = inline_hash(PAGE, "script").expect("the page has an inline script");
        assert!(csp.contains(&format!("script-src 'sha256-{script}'")), "{csp}");
        assert!(csp.contains("style-src 'sha256-"), "{csp}");
        assert_eq!(inline_hash("<p>no script</p>", "script"), None);
    }
}
