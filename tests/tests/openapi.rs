//! `docs/openapi.json` describes the API as built: every answer the scenarios below receive,
//! success or error, has a documented status, validates against the documented schema and
//! carries the documented required headers; every documented operation is routed.

use cova_sim::{TikTokScenario, tiktok_post_id};
use cova_tests::{TestApp, spawn_app, spawn_app_with_sim};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;

fn document() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    let text = std::fs::read_to_string(path).expect("docs/openapi.json");
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

/// Follows a local `$ref` (`#/components/...`) once, if there is one.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        Some(pointer) => doc.pointer(pointer).unwrap_or_else(|| panic!("dangling $ref #{pointer}")),
        None => v,
    }
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

/// Checks what the service answered against what the document says of `method template`.
fn conforms(doc: &Value, method: &str, template: &str, answer: &Answer) {
    let op = &doc["paths"][template][method.to_ascii_lowercase()];
    assert!(op.is_object(), "{method} {template} is not documented");
    let status = answer.status.to_string();
    let response = op["responses"]
        .get(&status)
        .or_else(|| op["responses"].get("default"))
        .unwrap_or_else(|| panic!("{method} {template}: status {status} is not documented ({})", answer.body));
    let response = resolve(doc, response);
    let schema = &response["content"]["application/json"]["schema"];
    assert!(schema.is_object(), "{method} {template} {status}: no application/json schema");
    // Local references resolve against the document's components.
    let wrapper = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "allOf": [schema],
    });
    let validator = jsonschema::validator_for(&wrapper).expect("the documented schema compiles");
    let errors: Vec<String> =
        validator.iter_errors(&answer.body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(
        errors.is_empty(),
        "{method} {template} {status} does not match the document: {errors:#?}\n{}",
        answer.body
    );
    if let Some(headers) = response["headers"].as_object() {
        for (name, header) in headers {
            if resolve(doc, header)["required"] == true {
                assert!(answer.headers.contains_key(name.as_str()), "{method} {template} {status}: {name} missing");
            }
        }
    }
}

struct Caller<'a> {
    app: &'a TestApp,
    doc: &'a Value,
    http: reqwest::Client,
    /// (method, template) pairs the scenarios exercised.
    seen: std::sync::Mutex<BTreeSet<(String, String)>>,
}

impl Caller<'_> {
    /// Sends a request to `path` (the template with its parameters filled in) and checks the
    /// answer against the document's `template`.
    async fn call(
        &self,
        method: Method,
        template: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut req = self.http.request(method.clone(), format!("{}{path}", self.app.base_url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let res = req.send().await.expect("request sent");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = res.bytes().await.expect("body");
        let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{method} {path}: body is not JSON"));
        let answer = Answer { status, headers, body };
        conforms(self.doc, method.as_str(), template, &answer);
        if let Ok(mut seen) = self.seen.lock() {
            seen.insert((method.as_str().to_ascii_lowercase(), template.to_owned()));
        }
        answer
    }
}

fn tiktok(n: u64) -> String {
    format!("https://www.tiktok.com/@someone/video/{}", tiktok_post_id(TikTokScenario::Normal, n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_openapi_3_1_with_unique_operation_ids() {
    let doc = document();
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")), "{}", doc["openapi"]);
    let mut ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path}: no operationId"));
            assert!(ids.insert(id.to_owned()), "operationId {id} twice");
            for (status, response) in op["responses"].as_object().expect("responses") {
                let schema = &resolve(&doc, response)["content"]["application/json"]["schema"];
                assert!(schema.is_object(), "{method} {path} {status}: no JSON schema");
                let wrapper = json!({"components": doc["components"], "allOf": [schema]});
                jsonschema::validator_for(&wrapper)
                    .unwrap_or_else(|e| panic!("{method} {path} {status}: schema does not compile: {e}"));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_answers_match_the_document() {
    let doc = document();
    let app = spawn_app().await;
    let caller = Caller { app: &app, doc: &doc, http: reqwest::Client::new(), seen: Default::default() };
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let t = Some(token.as_str());
    let get = Method::GET;
    let post = Method::POST;

    caller.call(get.clone(), "/healthz", "/healthz", None, None, &[]).await;
    caller.call(get.clone(), "/readyz", "/readyz", None, None, &[]).await;
    assert_eq!(caller.call(get.clone(), "/api/v1/usage", "/api/v1/usage", None, None, &[]).await.status, 401);
    assert_eq!(caller.call(get.clone(), "/api/v1/usage", "/api/v1/usage", t, None, &[]).await.status, 200);

    // Metadata: a lookup, a cache hit, bad input, a token without the scope.
    let url = tiktok(12);
    let meta = "/api/v1/metadata";
    assert_eq!(caller.call(post.clone(), meta, meta, t, Some(json!({"url": url})), &[]).await.status, 200);
    let hit = caller.call(post.clone(), meta, meta, t, Some(json!({"url": url})), &[]).await;
    assert_eq!(hit.body["cached"], true);
    let bad = caller.call(post.clone(), meta, meta, t, Some(json!({"url": "https://example.com/x"})), &[]).await;
    assert_eq!(bad.status, 400);
    assert_eq!(caller.call(post.clone(), meta, meta, t, Some(json!({"link": url})), &[]).await.status, 400);
    let narrow = app.token(&account, "analyze:write").await;
    let forbidden = caller.call(post.clone(), meta, meta, Some(&narrow), Some(json!({"url": url})), &[]).await;
    assert_eq!(forbidden.status, 403);

    // Analyze: created, polled to completion, deduplicated, paged, conflicting key, unknown job.
    let analyze = "/api/v1/analyze";
    let created =
        caller.call(post.clone(), analyze, analyze, t, Some(json!({"url": url})), &[("idempotency-key", "k-1")]).await;
    assert_eq!(created.status, 202);
    let id = created.body["job_id"].as_str().expect("job_id").to_owned();
    let job_path = format!("/api/v1/analyze/{id}");
    let job_template = "/api/v1/analyze/{job_id}";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let job = caller.call(get.clone(), job_template, &job_path, t, None, &[]).await;
        if job.body["status"] == "complete" {
            break;
        }
        assert_ne!(job.body["status"], "failed", "{}", job.body);
        assert!(std::time::Instant::now() < deadline, "job did not finish");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let page = caller.call(get.clone(), job_template, &format!("{job_path}?limit=2"), t, None, &[]).await;
    let cursor = page.body["result"]["next_cursor"].as_str().expect("a next page").to_owned();
    caller.call(get.clone(), job_template, &format!("{job_path}?limit=2&cursor={cursor}"), t, None, &[]).await;
    assert_eq!(caller.call(get.clone(), job_template, &format!("{job_path}?limit=0"), t, None, &[]).await.status, 400);
    let dedup = caller.call(post.clone(), analyze, analyze, t, Some(json!({"url": url})), &[]).await;
    assert_eq!(dedup.status, 200);
    let repeated =
        caller.call(post.clone(), analyze, analyze, t, Some(json!({"url": url})), &[("idempotency-key", "k-1")]).await;
    assert_eq!(repeated.status, 200);
    let other = tiktok(13);
    let conflict = caller
        .call(post.clone(), analyze, analyze, t, Some(json!({"url": other})), &[("idempotency-key", "k-1")])
        .await;
    assert_eq!(conflict.status, 409);
    let missing = caller.call(get.clone(), job_template, "/api/v1/analyze/no-such-job", t, None, &[]).await;
    assert_eq!(missing.status, 404);

    // A failed job, and an account that has nothing left.
    let private = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::PrivatePost, 5));
    let failed = caller.call(post.clone(), analyze, analyze, t, Some(json!({"url": private})), &[]).await;
    let failed_path = format!("/api/v1/analyze/{}", failed.body["job_id"].as_str().expect("job_id"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while caller.call(get.clone(), job_template, &failed_path, t, None, &[]).await.body["status"] != "failed" {
        assert!(std::time::Instant::now() < deadline, "job did not fail");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (_, broke) = app.integrator().await;
    let unpaid = caller.call(post.clone(), analyze, analyze, Some(&broke), Some(json!({"url": other})), &[]).await;
    assert_eq!(unpaid.status, 402);

    // The sandbox: no token.
    for path in ["/api/v1/sandbox/metadata", "/api/v1/sandbox/analyze"] {
        assert_eq!(caller.call(post.clone(), path, path, None, Some(json!({"url": url})), &[]).await.status, 200);
        let bad = caller.call(post.clone(), path, path, None, Some(json!({"url": "nope"})), &[]).await;
        assert_eq!(bad.status, 400);
    }

    // Every documented operation was exercised, so none is documented but missing.
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| item.as_object().into_iter().flatten().map(|(m, _)| (m.clone(), path.clone())))
        .filter(|(m, _)| ["get", "post", "put", "patch", "delete"].contains(&m.as_str()))
        .collect();
    let seen = caller.seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(documented, seen, "documented operations vs those the scenarios reached");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_refusals_match_the_document() {
    let doc = document();
    // Slow platform: the jobs stay running while the fourth is refused.
    let app = spawn_app_with_sim(cova_sim::SimConfig { latency_ms: 300, ..Default::default() }, |c| {
        c.limits.api_requests_per_minute = 8;
    })
    .await;
    let caller = Caller { app: &app, doc: &doc, http: reqwest::Client::new(), seen: Default::default() };
    let (account, token) = app.integrator().await;
    app.grant(&account, 100_000).await;
    let t = Some(token.as_str());
    let analyze = "/api/v1/analyze";
    for n in 0..3 {
        let created = caller.call(Method::POST, analyze, analyze, t, Some(json!({"url": tiktok(20 + n)})), &[]).await;
        assert_eq!(created.status, 202);
    }
    let busy = caller.call(Method::POST, analyze, analyze, t, Some(json!({"url": tiktok(30)})), &[]).await;
    assert_eq!((busy.status, busy.body["code"].as_str()), (429, Some("concurrency_limit")));
    let mut last = busy;
    for _ in 0..8 {
        last = caller.call(Method::GET, "/api/v1/usage", "/api/v1/usage", t, None, &[]).await;
    }
    assert_eq!((last.status, last.body["code"].as_str()), (429, Some("rate_limited")));
    app.stop().await;
}
