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

/// The page runs its own inline script and style, and talks only to this origin.
const PAGE_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

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
    if let Ok(csp) = header::HeaderValue::from_str(PAGE_CSP) {
        answer.headers_mut().insert(header::CONTENT_SECURITY_POLICY, csp);
    }
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
}
