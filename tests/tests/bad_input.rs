//! Bad input of every kind gets a `{detail, code}` 4xx: never a 5xx, never a panic.

use cova_tests::{TestApp, spawn_app};
use proptest::prelude::*;
use reqwest::Method;

const ENDPOINTS: [(&str, &str); 6] = [
    ("POST", "/api/v1/metadata"),
    ("POST", "/api/v1/analyze"),
    ("GET", "/api/v1/analyze/x"),
    ("GET", "/api/v1/usage"),
    ("POST", "/api/v1/sandbox/metadata"),
    ("POST", "/api/v1/sandbox/analyze"),
];

fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        ".{0,200}".prop_map(String::into_bytes),
        any::<String>().prop_map(|s| format!(r#"{{"url": {}}}"#, serde_json::Value::String(s)).into_bytes()),
        any::<i64>().prop_map(|n| format!(r#"{{"url": {n}}}"#).into_bytes()),
        Just(br#"{"url": null}"#.to_vec()),
        Just(br#"[{"url": "https://www.tiktok.com/@a/video/1"}]"#.to_vec()),
        Just(format!(r#"{{"url": "https://www.tiktok.com/@a/video/{}"}}"#, "9".repeat(5_000)).into_bytes()),
        Just(vec![b'{'; 100_000]),
    ]
}

fn header_strategy() -> impl Strategy<Value = String> {
    prop_oneof![".{0,80}", "[ -~]{0,300}", Just("\u{0}\u{1}".to_string()), Just("é".repeat(50))]
}

async fn check(app: &TestApp, token: &str, method: &str, path: &str, body: Vec<u8>, header: String, with_token: bool) {
    let client = reqwest::Client::new();
    let method = Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = client.request(method, format!("{}{path}", app.base_url)).body(body);
    if with_token {
        req = req.bearer_auth(token);
    } else {
        req = req.header("authorization", header.clone());
    }
    req = req.header("idempotency-key", header.clone()).header("content-type", "application/json");
    let Ok(req) = req.build() else { return }; // not sendable over HTTP at all
    let res = client.execute(req).await.expect("an answer");
    let status = res.status();
    let bytes = res.bytes().await.expect("body");
    assert!(status.as_u16() < 500, "{path}: {status} {}", String::from_utf8_lossy(&bytes));
    if !status.is_success() {
        let err: cova_tests::ApiError = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!("{path}: {status} body is not {{detail, code}} ({e}): {}", String::from_utf8_lossy(&bytes))
        });
        assert!(!err.code.is_empty() && !err.detail.is_empty());
    }
}

#[test]
fn arbitrary_bodies_and_headers_get_clear_4xx_answers() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let (app, token) = rt.block_on(async {
        let app = spawn_app().await;
        let (account, token) = app.integrator().await;
        app.grant(&account, 100_000).await;
        (app, token)
    });
    let config = ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(endpoint in 0..ENDPOINTS.len(), body in body_strategy(), header in header_strategy(), with_token in any::<bool>())| {
        let (method, path) = ENDPOINTS[endpoint];
        rt.block_on(check(&app, &token, method, path, body, header, with_token));
    });
    rt.block_on(app.stop());
}
