//! `docs/openapi.json` describes the API as built: every answer the scenarios below receive,
//! success or error, has a documented status, validates against the documented schema (a
//! download has a documented content type, an answer documented without content has no
//! body) and carries the documented required headers; every documented operation is routed;
//! every request cova sends to a webhook matches the document's `webhooks`.

use cova_sim::{TikTokScenario, tiktok_post_id};
use cova_tests::receiver::{Received, Receiver, TestCa};
use cova_tests::{TestApp, eventually, spawn_app_with, spawn_app_with_sim, until, use_receivers};
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
    /// The body as JSON; `Value::Null` when it is not JSON (a download, an empty answer).
    body: Value,
    bytes: Vec<u8>,
}

/// The media type of an answer, lower-cased and without parameters (`text/csv` of
/// `text/csv; charset=utf-8`); empty when there is no `Content-Type`.
fn media_type(headers: &reqwest::header::HeaderMap) -> String {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// What keeps `instance` from matching `schema` (nothing when it matches). Local references
/// resolve against the document's components.
fn schema_errors(doc: &Value, schema: &Value, instance: &Value) -> Vec<String> {
    let wrapper = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "allOf": [schema],
    });
    let validator = jsonschema::validator_for(&wrapper).expect("the documented schema compiles");
    let errors: Vec<String> =
        validator.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    errors
}

/// Checks what the service answered against what the document says of `method template`.
fn conforms(doc: &Value, method: &str, template: &str, answer: &Answer) {
    let op = &doc["paths"][template][method.to_ascii_lowercase()];
    assert!(op.is_object(), "{method} {template} is not documented");
    let status = answer.status.to_string();
    let text = String::from_utf8_lossy(&answer.bytes);
    let response = op["responses"]
        .get(&status)
        .or_else(|| op["responses"].get("default"))
        .unwrap_or_else(|| panic!("{method} {template}: status {status} is not documented ({text})"));
    let response = resolve(doc, response);
    match response.get("content").and_then(Value::as_object) {
        // Documented without content (a 204): nothing may come.
        None => assert!(
            answer.bytes.is_empty(),
            "{method} {template} {status}: documented without a body, answered {} bytes",
            answer.bytes.len()
        ),
        Some(content) => match content.get("application/json") {
            Some(json_content) => {
                let schema = &json_content["schema"];
                assert!(schema.is_object(), "{method} {template} {status}: no application/json schema");
                assert_eq!(
                    media_type(&answer.headers),
                    "application/json",
                    "{method} {template} {status}: not answered as JSON"
                );
                let body: Value = serde_json::from_slice(&answer.bytes)
                    .unwrap_or_else(|_| panic!("{method} {template} {status}: body is not JSON ({text})"));
                let errors = schema_errors(doc, schema, &body);
                assert!(
                    errors.is_empty(),
                    "{method} {template} {status} does not match the document: {errors:#?}\n{body}"
                );
            }
            // A download: its type is one the document lists; its bytes are not checked.
            None => {
                let media = media_type(&answer.headers);
                assert!(
                    content.contains_key(&media),
                    "{method} {template} {status}: Content-Type `{media}` is not documented ({:?})",
                    content.keys().collect::<Vec<_>>()
                );
            }
        },
    }
    if let Some(headers) = response["headers"].as_object() {
        for (name, header) in headers {
            if resolve(doc, header)["required"] == true {
                assert!(answer.headers.contains_key(name.as_str()), "{method} {template} {status}: {name} missing");
            }
        }
    }
}

/// Checks a request cova sent to a webhook receiver against the document's webhook `name`: a
/// POST with a JSON body that matches the documented schema, carrying every required header
/// with a value that matches its schema.
fn conforms_webhook(doc: &Value, name: &str, received: &Received) {
    let op = &doc["webhooks"][name]["post"];
    assert!(op.is_object(), "webhook {name} is not documented");
    assert_eq!(received.method, "POST", "webhook {name}");
    for parameter in op["parameters"].as_array().into_iter().flatten() {
        let parameter = resolve(doc, parameter);
        if parameter["in"] != "header" {
            continue;
        }
        let header = parameter["name"].as_str().expect("a parameter name").to_ascii_lowercase();
        match received.header(&header) {
            Some(value) => {
                let errors = schema_errors(doc, &parameter["schema"], &json!(value));
                assert!(
                    errors.is_empty(),
                    "webhook {name}: {header} `{value}` does not match the document: {errors:#?}"
                );
            }
            None => assert!(parameter["required"] != true, "webhook {name}: {header} missing"),
        }
    }
    assert_eq!(received.header("content-type"), Some("application/json"), "webhook {name}");
    let schema = &op["requestBody"]["content"]["application/json"]["schema"];
    assert!(schema.is_object(), "webhook {name}: no application/json schema");
    let body = received.json();
    let errors = schema_errors(doc, schema, &body);
    assert!(errors.is_empty(), "webhook {name} does not match the document: {errors:#?}\n{body}");
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
        let bytes = res.bytes().await.expect("body").to_vec();
        // Whether the body must be JSON is the document's to say: `conforms` checks it.
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let answer = Answer { status, headers, body, bytes };
        conforms(self.doc, method.as_str(), template, &answer);
        if let Ok(mut seen) = self.seen.lock() {
            seen.insert((method.as_str().to_ascii_lowercase(), template.to_owned()));
        }
        answer
    }
}

/// The host name of the test's webhook receiver.
const HOOKS: &str = "hooks.test";

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
            // Every URL is refused with 400 when its path or query carries a control character,
            // so an operation with a path parameter must document that answer.
            if path.contains('{') {
                assert!(op["responses"].get("400").is_some(), "{method} {path}: 400 not documented");
            }
            for (status, response) in op["responses"].as_object().expect("responses") {
                let content = resolve(&doc, response).get("content").and_then(Value::as_object);
                match content.and_then(|c| c.get("application/json")) {
                    Some(json_content) => {
                        let schema = &json_content["schema"];
                        assert!(schema.is_object(), "{method} {path} {status}: no JSON schema");
                        let wrapper = json!({"components": doc["components"], "allOf": [schema]});
                        jsonschema::validator_for(&wrapper)
                            .unwrap_or_else(|e| panic!("{method} {path} {status}: schema does not compile: {e}"));
                    }
                    // Only a success may be something else: a download, or a 204 (or a 304 of a
                    // conditional request) without content.
                    None => {
                        let success = status.starts_with('2') || status == "304";
                        assert!(success, "{method} {path} {status}: an error without a JSON schema");
                        match content {
                            None => assert!(
                                status == "204" || status == "304",
                                "{method} {path} {status}: no content documented"
                            ),
                            Some(c) => assert!(
                                !c.is_empty() && c.values().all(|m| m["schema"].is_object()),
                                "{method} {path} {status}: a content type without a schema"
                            ),
                        }
                    }
                }
            }
        }
    }
    // The requests cova sends to webhooks: operation ids unique with the others, JSON bodies.
    for (name, item) in doc["webhooks"].as_object().expect("webhooks") {
        for (method, op) in item.as_object().expect("webhook item") {
            let id = op["operationId"].as_str().unwrap_or_else(|| panic!("webhook {name} {method}: no operationId"));
            assert!(ids.insert(id.to_owned()), "operationId {id} twice");
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            assert!(schema.is_object(), "webhook {name}: no application/json schema");
            let wrapper = json!({"components": doc["components"], "allOf": [schema]});
            jsonschema::validator_for(&wrapper)
                .unwrap_or_else(|e| panic!("webhook {name}: schema does not compile: {e}"));
        }
    }
}

/// Every schema, however deep, for the generators' sake: an array says what its items are.
fn arrays_without_items(path: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            let is_array = o.get("type") == Some(&json!("array"))
                || o.get("type").and_then(Value::as_array).is_some_and(|t| t.contains(&json!("array")));
            if is_array && !o.contains_key("items") && !o.contains_key("prefixItems") {
                out.push(path.to_owned());
            }
            for (k, child) in o {
                arrays_without_items(&format!("{path}/{k}"), child, out);
            }
        }
        Value::Array(a) => {
            a.iter().enumerate().for_each(|(i, child)| arrays_without_items(&format!("{path}/{i}"), child, out))
        }
        _ => {}
    }
}

/// What generated clients need of the document: typed arrays, every event type a delivery can
/// carry, binary downloads declared binary, the input rules that are not prose only, and links
/// that name real operations and parameters.
#[test]
fn generated_clients_can_read_the_document() {
    let doc = document();
    let mut untyped = Vec::new();
    arrays_without_items("#", &doc, &mut untyped);
    assert!(untyped.is_empty(), "arrays without items: {untyped:?}");

    let delivered: BTreeSet<&str> = doc["components"]["schemas"]["Delivery"]["properties"]["type"]["enum"]
        .as_array()
        .expect("Delivery.type enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let sent: BTreeSet<&str> = cova_messages::event_queues::NOTIFIER.1.iter().copied().collect();
    assert_eq!(delivered, sent, "Delivery.type lists every event the notifier delivers");
    let hooks: BTreeSet<&str> = doc["webhooks"].as_object().expect("webhooks").keys().map(String::as_str).collect();
    for event in sent.iter().filter(|e| e.starts_with("keyword") || e.starts_with("batch") || e.starts_with("creator"))
    {
        assert!(hooks.contains(event), "webhook {event} documented");
    }

    let mut operations = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            operations.insert(op["operationId"].as_str().expect("operationId").to_owned());
            for (status, response) in op["responses"].as_object().expect("responses") {
                for (media, content) in resolve(&doc, response)["content"].as_object().into_iter().flatten() {
                    let binary = media.starts_with("image/") || media.contains("spreadsheetml");
                    if binary {
                        assert_eq!(content["schema"]["format"], "binary", "{method} {path} {status} {media}");
                    }
                }
            }
        }
    }
    let parameters = &doc["components"]["parameters"];
    for name in ["Cursor", "BreakdownCursor", "MediaId"] {
        assert_eq!(parameters[name]["schema"]["minLength"], 1, "{name}: an empty value is refused");
        assert!(parameters[name]["schema"]["pattern"].is_string(), "{name}: control characters are refused");
    }

    let mut links = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            for (status, response) in op["responses"].as_object().expect("responses") {
                for (name, link) in response["links"].as_object().into_iter().flatten() {
                    links += 1;
                    let target = link["operationId"].as_str().expect("operationId");
                    assert!(operations.contains(target), "{method} {path} {status}: link {name} to {target}");
                    let target_op = doc["paths"]
                        .as_object()
                        .expect("paths")
                        .values()
                        .flat_map(|i| i.as_object().expect("item").values())
                        .find(|o| o["operationId"] == target)
                        .expect("the target");
                    let names: BTreeSet<String> = target_op["parameters"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|p| resolve(&doc, p)["name"].as_str().expect("name").to_owned())
                        .collect();
                    for param in link["parameters"].as_object().into_iter().flatten().map(|(k, _)| k) {
                        assert!(names.contains(param), "link {name}: {target} has no parameter {param}");
                    }
                    // A link that fills the target's body names only fields the body has.
                    let body = &target_op["requestBody"]["content"]["application/json"]["schema"];
                    let fields = &resolve(&doc, body)["properties"];
                    for field in link["requestBody"].as_object().into_iter().flatten().map(|(k, _)| k) {
                        assert!(fields.get(field).is_some(), "link {name}: {target}'s body has no field {field}");
                    }
                    assert!(
                        link.get("parameters").is_some() || link.get("requestBody").is_some(),
                        "link {name} passes nothing to {target}"
                    );
                }
            }
        }
    }
    assert!(links >= 10, "the job, batch, AI and creator flows are linked ({links} links)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_answers_match_the_document() {
    let doc = document();
    // A webhook receiver the notifier may reach (its host name resolves to loopback).
    let ca = TestCa::new();
    let receiver = Receiver::spawn(&ca, HOOKS).await;
    let app = spawn_app_with(|c| use_receivers(c, &ca, HOOKS)).await;
    let caller = Caller { app: &app, doc: &doc, http: reqwest::Client::new(), seen: Default::default() };
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let t = Some(token.as_str());
    let get = Method::GET;
    let post = Method::POST;

    caller.call(get.clone(), "/healthz", "/healthz", None, None, &[]).await;
    caller.call(get.clone(), "/readyz", "/readyz", None, None, &[]).await;
    // The document itself, as served, is this document; the page that renders it loads it.
    for path in ["/api/v1/openapi.json", "/docs"] {
        let served = caller.call(get.clone(), path, path, None, None, &[]).await;
        assert_eq!(served.status, 200);
        let etag = served.headers["etag"].to_str().expect("etag").to_owned();
        assert_eq!(caller.call(get.clone(), path, path, None, None, &[("if-none-match", &etag)]).await.status, 304);
    }
    let served = caller.call(get.clone(), "/api/v1/openapi.json", "/api/v1/openapi.json", None, None, &[]).await;
    assert_eq!(served.body, doc, "the served document is docs/openapi.json");
    let page = caller.call(get.clone(), "/docs", "/docs", None, None, &[]).await;
    let csp = page.headers["content-security-policy"].to_str().expect("csp");
    assert!(csp.starts_with("default-src 'none'") && csp.contains("connect-src 'self'"), "{csp}");
    assert!(String::from_utf8_lossy(&page.bytes).contains("/api/v1/openapi.json"));
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
    let r#ref = created.body["ref"].as_str().expect("ref").to_owned();
    let job_path = format!("/api/v1/analyze/{id}");
    let job_template = "/api/v1/analyze/{job_id}";
    until("the job to finish", async || {
        let job = caller.call(get.clone(), job_template, &job_path, t, None, &[]).await;
        assert_ne!(job.body["status"], "failed", "{}", job.body);
        (job.body["status"] == "complete").then_some(())
    })
    .await;
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
    eventually("the job to fail", async || {
        caller.call(get.clone(), job_template, &failed_path, t, None, &[]).await.body["status"] == "failed"
    })
    .await;
    let (_, broke) = app.integrator().await;
    let unpaid = caller.call(post.clone(), analyze, analyze, Some(&broke), Some(json!({"url": other})), &[]).await;
    assert_eq!(unpaid.status, 402);

    // The sandbox: no token.
    for path in ["/api/v1/sandbox/metadata", "/api/v1/sandbox/analyze"] {
        assert_eq!(caller.call(post.clone(), path, path, None, Some(json!({"url": url})), &[]).await.status, 200);
        let bad = caller.call(post.clone(), path, path, None, Some(json!({"url": "nope"})), &[]).await;
        assert_eq!(bad.status, 400);
    }

    // The images of the first post: whole, partial, unchanged, out of range, unknown, unreachable.
    media(&caller, &token, &broke, &r#ref).await;

    // The library, now that the first job is complete and nothing runs.
    library(&caller, &token, &narrow, &broke, &r#ref).await;

    // Keywords, channels, alerts and deliveries, for an account of their own.
    notifications(&caller, &narrow, &receiver).await;

    // Watch phrases, quotes, runs and AI jobs, for an account of their own.
    ai(&caller, &narrow, &receiver).await;

    // Creators: added, listed, read, followed, refreshed, removed; their webhook.
    creators(&caller, &narrow, &receiver).await;

    // The workspace: sign-up, the session, tokens, packs, password reset.
    workspace(&caller).await;

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

async fn media(caller: &Caller<'_>, token: &str, other: &str, r#ref: &str) {
    let t = Some(token);
    let get = Method::GET;
    let entry =
        caller.call(get.clone(), "/api/v1/analyses/{ref}", &format!("/api/v1/analyses/{ref}"), t, None, &[]).await;
    let cover = entry.body["metadata"]["media"][0]["url"].as_str().expect("a cover").to_owned();
    for template in ["/api/v1/media/file", "/api/v1/media/download"] {
        let path = cover.replace("/api/v1/media/file", template);
        let whole = caller.call(get.clone(), template, &path, t, None, &[]).await;
        assert_eq!(whole.status, 200);
        let etag = whole.headers["etag"].to_str().expect("etag").to_owned();
        let size = whole.bytes.len();
        assert_eq!(caller.call(get.clone(), template, &path, t, None, &[("range", "bytes=0-3")]).await.status, 206);
        assert_eq!(caller.call(get.clone(), template, &path, t, None, &[("if-none-match", &etag)]).await.status, 304);
        let past = format!("bytes={size}-");
        assert_eq!(caller.call(get.clone(), template, &path, t, None, &[("range", &past)]).await.status, 416);
        assert_eq!(caller.call(get.clone(), template, template, t, None, &[]).await.status, 400);
        assert_eq!(caller.call(get.clone(), template, &path, None, None, &[]).await.status, 401);
        assert_eq!(caller.call(get.clone(), template, &path, Some(other), None, &[]).await.status, 404);
    }
    // A commenter's avatar, never fetched, after the platform's links expired.
    let avatar = entry.body["comments"]
        .as_array()
        .expect("comments")
        .iter()
        .find_map(|c| c["author"]["avatar"]["url"].as_str())
        .expect("an avatar")
        .to_owned();
    caller.app.sim.expire_cdn_links();
    assert_eq!(caller.call(get, "/api/v1/media/file", &avatar, t, None, &[]).await.status, 502);
}

/// Polls `GET /analyze/{job_id}` (every answer checked) until the job has `status`.
async fn poll_until(caller: &Caller<'_>, token: &str, job_id: &str, status: &str) -> Answer {
    let path = format!("/api/v1/analyze/{job_id}");
    until(&format!("job {job_id} to become {status}"), async || {
        let job = caller.call(Method::GET, "/api/v1/analyze/{job_id}", &path, Some(token), None, &[]).await;
        assert_ne!(job.body["status"], "failed", "{}", job.body);
        (job.body["status"] == status).then_some(job)
    })
    .await
}

/// Every `/analyses` operation, as a client uses them once `r#ref` was collected with `token`
/// (whose last job failed): listed, opened, saved, watched, refreshed, exported, removed.
/// `narrow` lacks `library:write`; `broke`'s account has no pack.
async fn library(caller: &Caller<'_>, token: &str, narrow: &str, broke: &str, r#ref: &str) {
    let t = Some(token);
    let (get, post) = (Method::GET, Method::POST);

    // The listing: filtered, paged, refused.
    let saved = "/api/v1/analyses/saved";
    let list = caller.call(get.clone(), saved, saved, t, None, &[]).await;
    assert_eq!(list.status, 200);
    assert!(list.body["items"].as_array().expect("items").iter().any(|i| i["ref"] == r#ref), "{}", list.body);
    let first_page = format!("{saved}?limit=1&platform=tiktok&status=ready&watched=false");
    let page = caller.call(get.clone(), saved, &first_page, t, None, &[]).await;
    let cursor = page.body["next_cursor"].as_str().expect("a full page has a next cursor").to_owned();
    let rest =
        caller.call(get.clone(), saved, &format!("{saved}?limit=1&cursor={cursor}&q=sneakers"), t, None, &[]).await;
    assert_eq!(rest.status, 200);
    assert_eq!(caller.call(get.clone(), saved, &format!("{saved}?limit=0"), t, None, &[]).await.status, 400);
    assert_eq!(caller.call(get.clone(), saved, saved, Some(narrow), None, &[]).await.status, 403);

    // The last job of this token failed before there was an analysis: ref, url and job only.
    let session = "/api/v1/analyses/session";
    let latest = caller.call(get.clone(), session, session, t, None, &[]).await;
    assert_eq!((latest.status, latest.body["job"]["status"].as_str()), (200, Some("failed")));

    // The entry with its breakdown: sorted, paged, searched, only the new comments.
    let entry_template = "/api/v1/analyses/{ref}";
    let entry_path = format!("/api/v1/analyses/{ref}");
    let entry = caller.call(get.clone(), entry_template, &entry_path, t, None, &[]).await;
    assert_eq!((entry.status, entry.body["status"].as_str()), (200, Some("ready")));
    let word = entry.body["comments"][0]["text"].as_str().and_then(|s| s.split_whitespace().next()).unwrap_or("a");
    let q: String = url::form_urlencoded::byte_serialize(word.as_bytes()).collect();
    let liked =
        caller.call(get.clone(), entry_template, &format!("{entry_path}?sort=likes&limit=2"), t, None, &[]).await;
    if let Some(c) = liked.body["next_cursor"].as_str() {
        let next = format!("{entry_path}?sort=likes&limit=2&cursor={c}");
        assert_eq!(caller.call(get.clone(), entry_template, &next, t, None, &[]).await.status, 200);
    }
    let found =
        caller.call(get.clone(), entry_template, &format!("{entry_path}?sort=newest&q={q}"), t, None, &[]).await;
    assert!(!found.body["comments"].as_array().expect("comments").is_empty(), "{}", found.body);
    let new = caller.call(get.clone(), entry_template, &format!("{entry_path}?new=true"), t, None, &[]).await;
    assert_eq!(new.status, 200);

    // The search over every kept comment: found, paged, filtered, refused.
    let search = "/api/v1/comments/search";
    let hits = caller.call(get.clone(), search, &format!("{search}?q={q}&limit=1"), t, None, &[]).await;
    assert_eq!(hits.status, 200);
    assert_eq!(hits.body["items"][0]["post"]["ref"], r#ref, "{}", hits.body);
    if let Some(c) = hits.body["next_cursor"].as_str() {
        let next = format!("{search}?q={q}&limit=1&cursor={c}");
        assert_eq!(caller.call(get.clone(), search, &next, t, None, &[]).await.status, 200);
    }
    let filtered = format!(
        "{search}?q={q}&platform=tiktok&ref={ref}&since=2020-01-01T00:00:00Z&replies=exclude&media=false&min_likes=0&sort=newest"
    );
    assert_eq!(caller.call(get.clone(), search, &filtered, t, None, &[]).await.status, 200);
    assert_eq!(caller.call(get.clone(), search, &format!("{search}?q="), t, None, &[]).await.status, 400);
    assert_eq!(caller.call(get.clone(), search, &format!("{search}?q={q}"), Some(narrow), None, &[]).await.status, 403);
    let export = "/api/v1/comments/search/export";
    for format in ["csv", "jsonl", "xlsx"] {
        let path = format!("{export}?q={q}&sort=likes&format={format}");
        assert_eq!(caller.call(get.clone(), export, &path, t, None, &[]).await.status, 200, "{format}");
    }
    assert_eq!(caller.call(get.clone(), export, &format!("{export}?q={q}&limit=5"), t, None, &[]).await.status, 400);
    let bad_sort = caller.call(get.clone(), entry_template, &format!("{entry_path}?sort=oldest"), t, None, &[]).await;
    assert_eq!(bad_sort.status, 400);

    // Saving an entry already in the library changes nothing.
    let save_template = "/api/v1/analyses/{ref}/save";
    let save_path = format!("{entry_path}/save");
    let again = caller.call(post.clone(), save_template, &save_path, t, None, &[]).await;
    assert_eq!((again.status, &again.body["saved_at"]), (200, &entry.body["saved_at"]));

    // The watch: on every hour; five minutes is too often.
    let watch_template = "/api/v1/analyses/{ref}/watch";
    let watch_path = format!("{entry_path}/watch");
    let on = json!({"enabled": true, "interval_min": 60});
    let watch = caller.call(Method::PUT, watch_template, &watch_path, t, Some(on.clone()), &[]).await;
    assert_eq!((watch.status, watch.body["interval_min"].as_i64()), (200, Some(60)));
    let too_often = json!({"enabled": true, "interval_min": 5});
    assert_eq!(caller.call(Method::PUT, watch_template, &watch_path, t, Some(too_often), &[]).await.status, 400);

    // A refresh now: a new job, then the same one for the same key; polled to completion.
    let refresh_template = "/api/v1/analyses/{ref}/refresh";
    let refresh_path = format!("{entry_path}/refresh");
    let key = [("idempotency-key", "r-1")];
    let refresh = caller.call(post.clone(), refresh_template, &refresh_path, t, None, &key).await;
    assert!(matches!(refresh.status, 200 | 202), "{}", refresh.body);
    let repeated = caller.call(post.clone(), refresh_template, &refresh_path, t, None, &key).await;
    assert_eq!((repeated.status, &repeated.body["job_id"]), (200, &refresh.body["job_id"]));
    let capped = json!({"max_comments": 0});
    assert_eq!(caller.call(post.clone(), refresh_template, &refresh_path, t, Some(capped), &[]).await.status, 400);
    let refresh_id = refresh.body["job_id"].as_str().expect("job_id").to_owned();
    poll_until(caller, token, &refresh_id, "complete").await;
    let latest = caller.call(get.clone(), session, session, t, None, &[]).await;
    assert_eq!(
        (latest.body["ref"].as_str(), latest.body["job"]["job_id"].as_str()),
        (Some(r#ref), Some(refresh_id.as_str()))
    );

    // A metadata-only entry: saved from a lookup, with nothing to export.
    let save_metadata = "/api/v1/analyses/save-metadata";
    let other = json!({"url": tiktok(14)});
    let meta_only = caller.call(post.clone(), save_metadata, save_metadata, t, Some(other.clone()), &[]).await;
    assert_eq!((meta_only.status, meta_only.body["status"].as_str()), (200, Some("metadata_only")));
    let meta_ref = meta_only.body["ref"].as_str().expect("ref").to_owned();
    let bad = caller.call(post.clone(), save_metadata, save_metadata, t, Some(json!({"url": "nope"})), &[]).await;
    assert_eq!(bad.status, 400);
    let export_template = "/api/v1/analyses/{ref}/export";
    let nothing =
        caller.call(get.clone(), export_template, &format!("/api/v1/analyses/{meta_ref}/export"), t, None, &[]).await;
    assert_eq!(nothing.status, 404);

    // An account without a pack: its own metadata-only entry can be neither watched nor refreshed.
    let unpaid = Some(broke);
    let own = caller.call(post.clone(), save_metadata, save_metadata, unpaid, Some(other), &[]).await;
    assert_eq!(own.status, 200);
    let own_path = format!("/api/v1/analyses/{meta_ref}");
    let watch_unpaid =
        caller.call(Method::PUT, watch_template, &format!("{own_path}/watch"), unpaid, Some(on), &[]).await;
    assert_eq!((watch_unpaid.status, watch_unpaid.body["code"].as_str()), (402, Some("payment_required")));
    let refresh_unpaid =
        caller.call(post.clone(), refresh_template, &format!("{own_path}/refresh"), unpaid, None, &[]).await;
    assert_eq!((refresh_unpaid.status, refresh_unpaid.body["code"].as_str()), (402, Some("payment_required")));

    // Exports of the refreshed breakdown, in every format.
    let export_path = format!("{entry_path}/export");
    let csv = caller.call(get.clone(), export_template, &export_path, t, None, &[]).await;
    assert_eq!(csv.status, 200);
    assert!(
        csv.bytes.starts_with("\u{feff}post_url,post_title,id,parent_id,".as_bytes()),
        "{}",
        String::from_utf8_lossy(&csv.bytes)
    );
    // The same comments through the job.
    let job_export = "/api/v1/analyze/{job_id}/export";
    let by_job =
        caller.call(get.clone(), job_export, &format!("/api/v1/analyze/{refresh_id}/export"), t, None, &[]).await;
    assert_eq!((by_job.status, &by_job.bytes), (200, &csv.bytes));
    let no_job =
        caller.call(get.clone(), job_export, "/api/v1/analyze/no-such-job/export?format=xlsx", t, None, &[]).await;
    assert_eq!(no_job.status, 404);
    let jsonl = caller.call(get.clone(), export_template, &format!("{export_path}?format=jsonl"), t, None, &[]).await;
    let text = String::from_utf8_lossy(&jsonl.bytes);
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON object per line")).collect();
    assert!(!lines.is_empty() && lines.iter().all(|c| c["first_seen_at"].is_string()), "{text}");
    let xlsx = caller.call(get.clone(), export_template, &format!("{export_path}?format=xlsx"), t, None, &[]).await;
    assert_eq!(xlsx.status, 200);
    let pdf = caller.call(get.clone(), export_template, &format!("{export_path}?format=pdf"), t, None, &[]).await;
    assert_eq!(pdf.status, 400);

    // Removed: 204 without a body, then absent; the refresh's result is released.
    let removed = caller.call(Method::DELETE, entry_template, &entry_path, t, None, &[]).await;
    assert_eq!((removed.status, removed.bytes.len()), (204, 0));
    let gone = caller.call(get.clone(), entry_template, &entry_path, t, None, &[]).await;
    assert_eq!(gone.status, 404);
    assert_eq!(caller.call(Method::DELETE, entry_template, &entry_path, t, None, &[]).await.status, 404);
    assert_eq!(caller.call(get.clone(), export_template, &export_path, t, None, &[]).await.status, 404);
    let released = poll_until(caller, token, &refresh_id, "complete").await;
    assert_eq!(released.body["result"]["released"], true, "{}", released.body);
    let latest = caller.call(get.clone(), session, session, t, None, &[]).await;
    assert!(latest.body["saved_at"].is_null(), "a removed entry is no longer saved: {}", latest.body);
    let missing = format!("/api/v1/analyses/tiktok:{}/save", tiktok_post_id(TikTokScenario::Normal, 15));
    assert_eq!(caller.call(post.clone(), save_template, &missing, t, None, &[]).await.status, 404);
}

/// Every keyword and notification operation, as a client uses them, for a new account whose
/// webhook is `receiver`: keywords (a paid feature), channels (refused settings, the secret
/// shown once), a test, the secret rotated, alerts and the delivery log paged, a delivery
/// replayed; then every request the receiver got is checked against the document's
/// `webhooks`. `narrow` lacks `keywords:write`.
async fn notifications(caller: &Caller<'_>, narrow: &str, receiver: &Receiver) {
    let (account, token) = caller.app.integrator().await;
    let t = Some(token.as_str());
    let (get, post, put) = (Method::GET, Method::POST, Method::PUT);

    // Keywords: none yet; a pack is needed; at most 50; stored trimmed, each once.
    let keywords = "/api/v1/keywords";
    let none = caller.call(get.clone(), keywords, keywords, t, None, &[]).await;
    assert_eq!((none.status, &none.body["keywords"]), (200, &json!([])));
    let list = json!({"keywords": ["price", " Price ", "where to buy", "😍"]});
    let unpaid = caller.call(put.clone(), keywords, keywords, t, Some(list.clone()), &[]).await;
    assert_eq!((unpaid.status, unpaid.body["code"].as_str()), (402, Some("payment_required")));
    caller.app.grant(&account, 1_000).await;
    let too_many = json!({"keywords": vec!["k"; 51]});
    let refused = caller.call(put.clone(), keywords, keywords, t, Some(too_many), &[]).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (400, Some("validation_error")));
    let stored = caller.call(put.clone(), keywords, keywords, t, Some(list), &[]).await;
    assert_eq!((stored.status, &stored.body["keywords"]), (200, &json!(["price", "where to buy", "😍"])));
    let read = caller.call(get.clone(), keywords, keywords, t, None, &[]).await;
    assert_eq!(read.body, stored.body);
    assert_eq!(caller.call(get.clone(), keywords, keywords, Some(narrow), None, &[]).await.status, 403);

    // No channel yet: a test sends nothing, and there is no secret to rotate.
    let channels = "/api/v1/notification-channels";
    let unset = caller.call(get.clone(), channels, channels, t, None, &[]).await;
    assert_eq!(
        (unset.status, &unset.body),
        (200, &json!({"telegram": null, "webhook": null, "telegram_available": true})),
        "the test server has a Telegram bot"
    );
    let test = "/api/v1/notification-channels/test";
    let silent = caller.call(post.clone(), test, test, t, None, &[]).await;
    assert_eq!((silent.status, &silent.body), (200, &json!({"telegram": null, "webhook": null})), "no channel is on");
    assert_eq!(caller.call(post.clone(), test, test, Some(narrow), None, &[]).await.status, 403);
    let rotate = "/api/v1/notification-channels/webhook/rotate-secret";
    let no_webhook = caller.call(post.clone(), rotate, rotate, t, None, &[]).await;
    assert_eq!((no_webhook.status, no_webhook.body["code"].as_str()), (404, Some("not_found")));

    // Refused settings, none saved: plain http, a private address, not a chat, an unknown channel.
    for bad in [
        json!({"webhook": {"url": format!("http://{HOOKS}/cova")}}),
        json!({"webhook": {"url": "https://10.0.0.1/cova"}}),
        json!({"telegram": {"chat_id": "not a chat"}}),
        json!({"email": "someone@example.com"}),
    ] {
        let refused = caller.call(put.clone(), channels, channels, t, Some(bad.clone()), &[]).await;
        assert_eq!((refused.status, refused.body["code"].as_str()), (400, Some("validation_error")), "{bad}");
    }
    let still = caller.call(get.clone(), channels, channels, t, None, &[]).await;
    assert_eq!(still.body, unset.body, "nothing was saved");

    // Both channels: the secret is shown once; each receiver answers the test; a new secret.
    let hook = format!("{}/openapi", receiver.base_url);
    let both = json!({"webhook": {"url": hook, "job_events": true}, "telegram": {"chat_id": "-1001234567"}});
    let set = caller.call(put.clone(), channels, channels, t, Some(both), &[]).await;
    assert_eq!(set.status, 200, "{}", set.body);
    let secret = set.body["webhook"]["secret"].as_str().expect("the secret, once").to_owned();
    let shown = caller.call(get.clone(), channels, channels, t, None, &[]).await;
    assert!(shown.body["webhook"].get("secret").is_none(), "never shown again: {}", shown.body);
    assert_eq!(shown.body["telegram"]["enabled"], true, "{}", shown.body);
    let tested = caller.call(post.clone(), test, test, t, None, &[]).await;
    let webhook = &tested.body["webhook"];
    assert_eq!((webhook["ok"].as_bool(), webhook["status"].as_u64()), (Some(true), Some(200)), "{}", tested.body);
    assert_eq!(tested.body["telegram"]["ok"], true, "{}", tested.body);
    let rotated = caller.call(post.clone(), rotate, rotate, t, None, &[]).await;
    assert_eq!(rotated.status, 200);
    assert_ne!(rotated.body["secret"].as_str(), Some(secret.as_str()), "a new secret");

    // A collected post raises alerts (its job ends with `job.complete`); a failed job is announced too.
    let analyze = "/api/v1/analyze";
    let created = caller.call(post.clone(), analyze, analyze, t, Some(json!({"url": tiktok(60)})), &[]).await;
    assert_eq!(created.status, 202, "{}", created.body);
    poll_until(caller, &token, created.body["job_id"].as_str().expect("job_id"), "complete").await;
    let private = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::PrivatePost, 6));
    let failing = caller.call(post.clone(), analyze, analyze, t, Some(json!({"url": private})), &[]).await;
    assert!(failing.body["job_id"].is_string(), "{}", failing.body);

    // Alerts: polled until there are some, then paged with `since`.
    let alerts = "/api/v1/keyword-alerts";
    eventually("keyword alerts", async || {
        let all = caller.call(get.clone(), alerts, alerts, t, None, &[]).await;
        all.body["items"].as_array().is_some_and(|items| items.len() >= 2)
    })
    .await;
    let first = caller.call(get.clone(), alerts, &format!("{alerts}?limit=1"), t, None, &[]).await;
    let since = first.body["next_since"].as_str().expect("next_since").to_owned();
    let next = caller.call(get.clone(), alerts, &format!("{alerts}?since={since}&limit=1"), t, None, &[]).await;
    assert_ne!(next.body["items"][0]["id"], first.body["items"][0]["id"], "each alert once");
    for bad in ["?limit=0", "?since=abc", "?after=1"] {
        let refused = caller.call(get.clone(), alerts, &format!("{alerts}{bad}"), t, None, &[]).await;
        assert_eq!(refused.status, 400, "{bad}");
    }
    assert_eq!(caller.call(get.clone(), alerts, alerts, Some(narrow), None, &[]).await.status, 403);

    // Spike alerts: the account's settings, a post's own (set, read, removed), the list.
    let settings = "/api/v1/spike-alerts/settings";
    let shown = caller.call(get.clone(), settings, settings, t, None, &[]).await;
    assert_eq!((shown.status, &shown.body["sensitivity"]), (200, &json!("balanced")));
    let strict = json!({"sensitivity": "strict", "min_comments": null, "cooldown_min": 120});
    let changed = caller.call(put.clone(), settings, settings, t, Some(strict), &[]).await;
    assert_eq!((changed.status, &changed.body["judged"]["min_comments"]), (200, &json!(50)));
    let refused = caller.call(put.clone(), settings, settings, t, Some(json!({"cooldown_min": 1})), &[]).await;
    assert_eq!(refused.status, 400);
    let subject = "/api/v1/spike-alerts/settings/{ref}";
    let post_ref = created.body["ref"].as_str().expect("ref").to_owned();
    let own = format!("{settings}/{post_ref}");
    let follows = caller.call(get.clone(), subject, &own, t, None, &[]).await;
    assert_eq!((follows.status, &follows.body["own"]), (200, &json!(false)));
    let off = caller.call(put.clone(), subject, &own, t, Some(json!({"enabled": false})), &[]).await;
    assert_eq!((off.status, &off.body["own"], &off.body["enabled"]), (200, &json!(true), &json!(false)));
    let back = caller.call(Method::DELETE, subject, &own, t, None, &[]).await;
    assert_eq!((back.status, &back.body["own"]), (200, &json!(false)));
    let unknown = caller.call(get.clone(), subject, &format!("{settings}/tiktok:user:1"), t, None, &[]).await;
    assert_eq!((unknown.status, unknown.body["code"].as_str()), (404, Some("not_found")));
    let spikes = "/api/v1/spike-alerts";
    let none = caller.call(get.clone(), spikes, &format!("{spikes}?ref={post_ref}"), t, None, &[]).await;
    assert_eq!((none.status, &none.body["items"]), (200, &json!([])), "a post without history has no spike");
    for bad in ["?limit=0", "?ref=nope", "?after=1"] {
        assert_eq!(
            caller.call(get.clone(), spikes, &format!("{spikes}{bad}"), t, None, &[]).await.status,
            400,
            "{bad}"
        );
    }
    assert_eq!(caller.call(get.clone(), spikes, spikes, Some(narrow), None, &[]).await.status, 403);

    // The webhook gets both job events and the alerts; the log shows them delivered.
    eventually("job events and alerts at the webhook", async || {
        let types: BTreeSet<String> =
            receiver.received().iter().filter_map(|r| r.json()["type"].as_str().map(str::to_owned)).collect();
        ["job.complete", "job.failed", "keyword.alert"].iter().all(|kind| types.contains(*kind))
    })
    .await;
    let deliveries = "/api/v1/notification-channels/deliveries";
    let delivered = until("a delivered webhook in the log", async || {
        let log = caller.call(get.clone(), deliveries, deliveries, t, None, &[]).await;
        log.body["items"]
            .as_array()
            .and_then(|items| items.iter().find(|d| d["channel"] == "webhook" && d["state"] == "delivered").cloned())
    })
    .await;
    let page = caller.call(get.clone(), deliveries, &format!("{deliveries}?limit=1"), t, None, &[]).await;
    let cursor = page.body["next_cursor"].as_str().expect("a full page has a next cursor").to_owned();
    let rest_path = format!("{deliveries}?limit=1&cursor={cursor}");
    let rest = caller.call(get.clone(), deliveries, &rest_path, t, None, &[]).await;
    assert_eq!(rest.status, 200);
    assert_ne!(rest.body["items"][0]["id"], page.body["items"][0]["id"], "the next page");
    for bad in ["?limit=501", "?cursor=nope", "?page=2"] {
        let refused = caller.call(get.clone(), deliveries, &format!("{deliveries}{bad}"), t, None, &[]).await;
        assert_eq!(refused.status, 400, "{bad}");
    }
    assert_eq!(caller.call(get.clone(), deliveries, deliveries, Some(narrow), None, &[]).await.status, 403);

    // A delivery replayed; an unknown one; a token without the scope.
    let replay = "/api/v1/notification-channels/deliveries/{id}/replay";
    let id = delivered["id"].as_str().expect("id");
    let replay_path = format!("{deliveries}/{id}/replay");
    let replayed = caller.call(post.clone(), replay, &replay_path, t, None, &[]).await;
    assert_eq!((replayed.status, replayed.body["id"].as_str()), (200, Some(id)));
    let unknown_path = format!("{deliveries}/no-such-delivery/replay");
    let unknown = caller.call(post.clone(), replay, &unknown_path, t, None, &[]).await;
    assert_eq!((unknown.status, unknown.body["code"].as_str()), (404, Some("not_found")));
    assert_eq!(caller.call(post.clone(), replay, &replay_path, Some(narrow), None, &[]).await.status, 403);

    // Removing the chat leaves the webhook as it is, its secret unshown.
    let removed = caller.call(put.clone(), channels, channels, t, Some(json!({"telegram": null})), &[]).await;
    assert_eq!((removed.status, removed.body["telegram"].is_null()), (200, true));
    assert_eq!(removed.body["webhook"]["url"].as_str(), Some(hook.as_str()));
    assert!(removed.body["webhook"].get("secret").is_none(), "the secret is shown only when created");

    // Every request the webhook received is documented.
    for r in receiver.received() {
        let body = r.json();
        let name = match body["type"].as_str() {
            Some("job.complete" | "job.failed") => "job",
            Some("keyword.alert") => "keyword.alert",
            Some("test") => "test",
            _ => panic!("a webhook the document does not describe: {body}"),
        };
        conforms_webhook(caller.doc, name, &r);
    }
}

/// Polls `GET /ai/jobs/{id}` (every answer checked) until the AI job is complete.
async fn poll_ai(caller: &Caller<'_>, token: &str, id: &str) -> Answer {
    let path = format!("/api/v1/ai/jobs/{id}");
    until(&format!("AI job {id} to complete"), async || {
        let job = caller.call(Method::GET, "/api/v1/ai/jobs/{id}", &path, Some(token), None, &[]).await;
        assert_ne!(job.body["status"], "failed", "{}", job.body);
        (job.body["status"] == "complete").then_some(job)
    })
    .await
}

/// Every AI operation, as a client uses them, for a new account whose webhook (with job
/// events) is `receiver`: watch phrases set and refused, quotes of a collected post and the
/// refused ones, runs (a repeated key, a second run, an unknown quote, a conflicting key), the
/// jobs polled to completion (all tasks, and a subset), unknown jobs; then the `kind: ai` job
/// webhooks are checked against the document. `narrow` lacks `ai:write`.
async fn creators(caller: &Caller<'_>, narrow: &str, receiver: &Receiver) {
    let app = caller.app;
    let id: u64 = 6_800_000_000_000_000_077;
    let mut creator = cova_sim::SimCreator::tiktok(id, "openapi.brand");
    creator.posts = vec![cova_sim::SimCreatorPost {
        id: tiktok_post_id(TikTokScenario::Normal, 5).to_string(),
        published_at_ms: app.now() - 3_600_000,
        pinned: false,
    }];
    app.sim.add_creator(creator);
    let mut private = cova_sim::SimCreator::tiktok(id + 1, "openapi.private");
    private.private = true;
    app.sim.add_creator(private);
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let t = Some(token.as_str());
    let (get, post, put, delete) = (Method::GET, Method::POST, Method::PUT, Method::DELETE);
    let channels = "/api/v1/notification-channels";
    let events = json!({"webhook": {"url": format!("{}/openapi-creators", receiver.base_url), "job_events": true}});
    assert_eq!(caller.call(put.clone(), channels, channels, t, Some(events), &[]).await.status, 200);

    let all = "/api/v1/creators";
    let url = json!({"url": "https://www.tiktok.com/@openapi.brand"});
    let added = caller.call(post.clone(), all, all, t, Some(url.clone()), &[]).await;
    assert_eq!(added.status, 201, "{}", added.body);
    let r#ref = added.body["ref"].as_str().expect("ref").to_owned();
    assert_eq!(caller.call(post.clone(), all, all, t, Some(url.clone()), &[]).await.status, 200);
    let missing = json!({"url": "https://www.tiktok.com/@openapi.nobody"});
    assert_eq!(caller.call(post.clone(), all, all, t, Some(missing), &[]).await.status, 404);
    let private = json!({"url": "https://www.tiktok.com/@openapi.private"});
    assert_eq!(caller.call(post.clone(), all, all, t, Some(private), &[]).await.status, 422);
    let bad = json!({"url": "https://example.com/@someone"});
    assert_eq!(caller.call(post.clone(), all, all, t, Some(bad), &[]).await.status, 400);
    assert_eq!(caller.call(post.clone(), all, all, Some(narrow), Some(url), &[]).await.status, 403);
    assert_eq!(caller.call(get.clone(), all, all, t, None, &[]).await.status, 200);

    let one = "/api/v1/creators/{ref}";
    let path = format!("{all}/{ref}");
    assert_eq!(caller.call(get.clone(), one, &path, t, None, &[]).await.status, 200);
    let unknown = format!("{all}/tiktok:user:1");
    assert_eq!(caller.call(get.clone(), one, &unknown, t, None, &[]).await.status, 404);
    assert_eq!(caller.call(get.clone(), one, &format!("{all}/nope"), t, None, &[]).await.status, 400);

    // Posts of the last day are taken; not followed, so nothing runs on its own.
    let watch = "/api/v1/creators/{ref}/watch";
    let settings = json!({"enabled": false, "backfill_days": 1, "follow_days": 0});
    let set = caller.call(put.clone(), watch, &format!("{path}/watch"), t, Some(settings), &[]).await;
    assert_eq!(set.status, 200, "{}", set.body);
    let too_often = json!({"enabled": true, "interval_min": 5});
    assert_eq!(caller.call(put.clone(), watch, &format!("{path}/watch"), t, Some(too_often), &[]).await.status, 400);
    let (_, unpaid) = app.integrator().await;
    assert_eq!(
        caller
            .call(
                post.clone(),
                all,
                all,
                Some(&unpaid),
                Some(json!({"url": "https://www.tiktok.com/@openapi.brand"})),
                &[]
            )
            .await
            .status,
        201
    );
    let follow = json!({"enabled": true});
    assert_eq!(
        caller.call(put.clone(), watch, &format!("{path}/watch"), Some(&unpaid), Some(follow), &[]).await.status,
        402
    );

    let refresh = "/api/v1/creators/{ref}/refresh";
    let run = caller.call(post.clone(), refresh, &format!("{path}/refresh"), t, None, &[]).await;
    assert_eq!((run.status, run.body["found"].as_array().map(Vec::len)), (200, Some(1)), "{}", run.body);
    assert_eq!(caller.call(post.clone(), refresh, &format!("{unknown}/refresh"), t, None, &[]).await.status, 404);
    let found = until("the creator.post_found webhook", async || {
        receiver
            .received()
            .into_iter()
            .find(|r| r.json()["type"] == "creator.post_found" && r.json()["creator"]["ref"] == r#ref.as_str())
    })
    .await;
    conforms_webhook(caller.doc, "creator.post_found", &found);

    assert_eq!(caller.call(delete.clone(), one, &path, t, None, &[]).await.status, 204);
    assert_eq!(caller.call(delete, one, &path, t, None, &[]).await.status, 404);
}

async fn ai(caller: &Caller<'_>, narrow: &str, receiver: &Receiver) {
    let (account, token) = caller.app.integrator().await;
    caller.app.grant(&account, 1_000).await;
    let t = Some(token.as_str());
    let (get, post, put) = (Method::GET, Method::POST, Method::PUT);

    // The account's webhook is told when its jobs end.
    let channels = "/api/v1/notification-channels";
    let hook = format!("{}/openapi-ai", receiver.base_url);
    let events = json!({"webhook": {"url": hook, "job_events": true}});
    let set = caller.call(put.clone(), channels, channels, t, Some(events), &[]).await;
    assert_eq!(set.status, 200, "{}", set.body);

    // A collected post, and a metadata-only entry.
    let analyze = "/api/v1/analyze";
    let created = caller.call(post.clone(), analyze, analyze, t, Some(json!({"url": tiktok(70)})), &[]).await;
    assert_eq!(created.status, 202, "{}", created.body);
    let analyze_id = created.body["job_id"].as_str().expect("job_id").to_owned();
    let r#ref = created.body["ref"].as_str().expect("ref").to_owned();
    poll_until(caller, &token, &analyze_id, "complete").await;
    let save_metadata = "/api/v1/analyses/save-metadata";
    let meta = caller.call(post.clone(), save_metadata, save_metadata, t, Some(json!({"url": tiktok(71)})), &[]).await;
    assert_eq!((meta.status, meta.body["status"].as_str()), (200, Some("metadata_only")), "{}", meta.body);
    let meta_ref = meta.body["ref"].as_str().expect("ref").to_owned();
    let unknown_ref = "tiktok:7000000000000000001";

    // Watch phrases: stored trimmed; at most three; only for the account's analyses.
    let queries = "/api/v1/ai/{ref}/queries";
    let queries_path = format!("/api/v1/ai/{ref}/queries");
    let phrases = json!({"queries": [" price ", "where to buy"]});
    let stored = caller.call(put.clone(), queries, &queries_path, t, Some(phrases), &[]).await;
    assert_eq!((stored.status, &stored.body["queries"]), (200, &json!(["price", "where to buy"])), "{}", stored.body);
    let four = json!({"queries": ["a", "b", "c", "d"]});
    let too_many = caller.call(put.clone(), queries, &queries_path, t, Some(four), &[]).await;
    assert_eq!((too_many.status, too_many.body["code"].as_str()), (400, Some("validation_error")));
    let not_ours_path = format!("/api/v1/ai/{unknown_ref}/queries");
    let not_ours = caller.call(put.clone(), queries, &not_ours_path, t, Some(json!({"queries": []})), &[]).await;
    assert_eq!((not_ours.status, not_ours.body["code"].as_str()), (404, Some("not_found")));

    // Quotes: of the collected post; refused for an unknown ref, an entry without comments,
    // an unknown task and a token without the scope.
    let quote = "/api/v1/ai/quote";
    let quoted = caller.call(post.clone(), quote, quote, t, Some(json!({"ref": r#ref})), &[]).await;
    assert_eq!((quoted.status, quoted.body["ref"].as_str()), (200, Some(r#ref.as_str())), "{}", quoted.body);
    let quote_id = quoted.body["quote_id"].as_str().expect("quote_id").to_owned();
    let unknown = caller.call(post.clone(), quote, quote, t, Some(json!({"ref": unknown_ref})), &[]).await;
    assert_eq!((unknown.status, unknown.body["code"].as_str()), (404, Some("not_found")));
    let uncollected = caller.call(post.clone(), quote, quote, t, Some(json!({"ref": meta_ref})), &[]).await;
    assert_eq!((uncollected.status, uncollected.body["code"].as_str()), (402, Some("payment_required")));
    let mood = json!({"ref": r#ref, "tasks": ["mood"]});
    let unknown_task = caller.call(post.clone(), quote, quote, t, Some(mood), &[]).await;
    assert_eq!((unknown_task.status, unknown_task.body["code"].as_str()), (400, Some("validation_error")));
    let forbidden = caller.call(post.clone(), quote, quote, Some(narrow), Some(json!({"ref": r#ref})), &[]).await;
    assert_eq!(forbidden.status, 403);

    // A run: a new job, the same job for the same key, never a second job; unknown quotes.
    let run = "/api/v1/ai/run";
    let key = [("idempotency-key", "ai-1")];
    let body = json!({"quote_id": quote_id});
    let started = caller.call(post.clone(), run, run, t, Some(body.clone()), &key).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let job_id = started.body["id"].as_str().expect("id").to_owned();
    let repeated = caller.call(post.clone(), run, run, t, Some(body.clone()), &key).await;
    assert_eq!((repeated.status, repeated.body["id"].as_str()), (200, Some(job_id.as_str())), "{}", repeated.body);
    let again = caller.call(post.clone(), run, run, t, Some(body), &[]).await;
    assert_eq!((again.status, again.body["code"].as_str()), (400, Some("validation_error")), "{}", again.body);
    let no_quote = json!({"quote_id": "no-such-quote"});
    let missing = caller.call(post.clone(), run, run, t, Some(no_quote.clone()), &[]).await;
    assert_eq!((missing.status, missing.body["code"].as_str()), (404, Some("not_found")));
    let conflict = caller.call(post.clone(), run, run, t, Some(no_quote), &key).await;
    assert_eq!((conflict.status, conflict.body["code"].as_str()), (409, Some("idempotency_conflict")));

    // The job, polled to completion: every task's field, the watch phrases matched.
    let done = poll_ai(caller, &token, &job_id).await;
    let result = &done.body["result"];
    assert_eq!(result["model"], "cova-offline/1", "{}", done.body);
    assert_eq!(result["phrase_matches"][0]["phrase"], "price", "{}", done.body);

    // A quote of some tasks: the result has only their fields.
    let some = json!({"ref": r#ref, "tasks": ["topics", "sentiment"]});
    let partial = caller.call(post.clone(), quote, quote, t, Some(some), &[]).await;
    assert_eq!((partial.status, &partial.body["tasks"]), (200, &json!(["sentiment", "topics"])), "{}", partial.body);
    let partial_run =
        caller.call(post.clone(), run, run, t, Some(json!({"quote_id": partial.body["quote_id"]})), &[]).await;
    assert_eq!(partial_run.status, 202, "{}", partial_run.body);
    let partial_id = partial_run.body["id"].as_str().expect("id").to_owned();
    let partial_done = poll_ai(caller, &token, &partial_id).await;
    let fields = partial_done.body["result"].as_object().expect("a result");
    assert!(fields.contains_key("sentiment") && !fields.contains_key("summary"), "{}", partial_done.body);

    // The history of both kinds, filtered and paged.
    let ai_history = "/api/v1/ai/jobs";
    let listed = caller.call(get.clone(), ai_history, &format!("{ai_history}?ref={ref}&limit=1"), t, None, &[]).await;
    assert_eq!((listed.status, listed.body["items"].as_array().map(Vec::len)), (200, Some(1)), "{}", listed.body);
    let cursor = listed.body["next_cursor"].as_str().expect("a second AI job").to_owned();
    let next =
        caller.call(get.clone(), ai_history, &format!("{ai_history}?ref={ref}&cursor={cursor}"), t, None, &[]).await;
    assert_eq!(next.status, 200);
    let bad = caller.call(get.clone(), ai_history, &format!("{ai_history}?batch=x"), t, None, &[]).await;
    assert_eq!(bad.status, 400);
    let history = "/api/v1/analyze";
    let analyze_history = caller.call(get.clone(), history, &format!("{history}?status=complete"), t, None, &[]).await;
    assert_eq!(analyze_history.status, 200);
    assert_eq!(analyze_history.body["items"][0]["job_id"], analyze_id.as_str(), "{}", analyze_history.body);

    // A list's preview: each post counted, the total and what the balance covers.
    let preview = "/api/v1/analyze/batch/preview";
    let urls = json!({"urls": [tiktok(31), tiktok(31), "https://example.com/v/1"], "max_comments": 100});
    let previewed = caller.call(post.clone(), preview, preview, t, Some(urls), &[]).await;
    assert_eq!(previewed.status, 200, "{}", previewed.body);
    let bad = caller.call(post.clone(), preview, preview, t, Some(json!({"urls": [], "max_comments": 0})), &[]).await;
    assert_eq!(bad.status, 400);

    // A batch: created, read, cancelled, repeated under its key; a bad list.
    let batches = "/api/v1/analyze/batch";
    let urls = json!({"urls": [tiktok(31), tiktok(32), "https://example.com/v/1", tiktok(33), tiktok(34)]});
    let key = [("idempotency-key", "batch-1")];
    let created = caller.call(post.clone(), batches, batches, t, Some(urls.clone()), &key).await;
    assert_eq!(created.status, 202, "{}", created.body);
    let batch_id = created.body["batch_id"].as_str().expect("batch_id").to_owned();
    let again = caller.call(post.clone(), batches, batches, t, Some(urls), &key).await;
    assert_eq!(again.status, 200);
    let other_list = caller.call(post.clone(), batches, batches, t, Some(json!({"urls": [tiktok(35)]})), &key).await;
    assert_eq!(other_list.status, 409);
    let empty = caller.call(post.clone(), batches, batches, t, Some(json!({"urls": []})), &[]).await;
    assert_eq!(empty.status, 400);
    let one = "/api/v1/analyze/batch/{batch_id}";
    let read = caller.call(get.clone(), one, &format!("{batches}/{batch_id}"), t, None, &[]).await;
    assert_eq!(read.status, 200);
    let cancel = "/api/v1/analyze/batch/{batch_id}/cancel";
    let cancelled = caller.call(post.clone(), cancel, &format!("{batches}/{batch_id}/cancel"), t, None, &[]).await;
    // The list may have finished before the cancel arrived (the simulator answers at once): then
    // the cancel answers the finished batch unchanged. batch.rs holds a running list to cancel.
    let status = cancelled.body["status"].as_str();
    assert!(cancelled.status == 200 && matches!(status, Some("cancelled" | "complete")), "{}", cancelled.body);
    let missing = caller.call(get.clone(), one, &format!("{batches}/no-such-batch"), t, None, &[]).await;
    assert_eq!(missing.status, 404);

    // Unknown jobs: another id, and a comment-collection job.
    let jobs = "/api/v1/ai/jobs/{id}";
    let unknown_job = caller.call(get.clone(), jobs, "/api/v1/ai/jobs/no-such-job", t, None, &[]).await;
    assert_eq!((unknown_job.status, unknown_job.body["code"].as_str()), (404, Some("not_found")));
    let not_ai = caller.call(get.clone(), jobs, &format!("/api/v1/ai/jobs/{analyze_id}"), t, None, &[]).await;
    assert_eq!(not_ai.status, 404);

    // Both AI jobs are announced with `kind: ai`, as the document describes.
    let announced = until("both AI jobs' webhooks", async || {
        let received: Vec<Received> = receiver.received().into_iter().filter(|r| r.json()["kind"] == "ai").collect();
        (received.len() >= 2).then_some(received)
    })
    .await;
    for r in &announced {
        assert_eq!(r.json()["type"], "job.complete", "{}", r.json());
        conforms_webhook(caller.doc, "job", r);
    }
    // The cancelled batch ends once its running jobs have: its webhook.
    let ended = until("the batch's webhook", async || {
        receiver.received().into_iter().find(|r| r.json()["type"] == "batch.complete")
    })
    .await;
    assert_eq!(ended.json()["batch_id"], batch_id.as_str());
    conforms_webhook(caller.doc, "batch.complete", &ended);
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

async fn workspace(caller: &Caller<'_>) {
    use cova_tests::workspace::{PASSWORD, link_token, mailed_link, set_cookie_value};
    let app = caller.app;
    let base = app.base_url.as_str();
    let (get, post, delete) = (Method::GET, Method::POST, Method::DELETE);
    let own = [("origin", base)];
    let email = "workspace@example.com";

    let signup = "/api/v1/auth/signup";
    assert_eq!(
        plain(caller, &post, signup, Some(json!({"email": email, "password": PASSWORD})), &own).await.status,
        202
    );
    assert_eq!(
        plain(caller, &post, signup, Some(json!({"email": email, "password": "short"})), &own).await.status,
        400
    );
    assert_eq!(
        plain(
            caller,
            &post,
            signup,
            Some(json!({"email": email, "password": PASSWORD})),
            &[("origin", "https://evil.example")]
        )
        .await
        .status,
        403
    );
    let confirm = "/api/v1/auth/confirm";
    assert_eq!(plain(caller, &post, confirm, Some(json!({"token": "nope"})), &own).await.status, 400);
    let token = link_token(&mailed_link(app, email, "confirm").await);
    assert_eq!(plain(caller, &post, confirm, Some(json!({"token": token})), &own).await.status, 200);

    let login = "/api/v1/auth/login";
    assert_eq!(
        plain(caller, &post, login, Some(json!({"email": email, "password": "not the password"})), &own).await.status,
        401
    );
    let signed_in = plain(caller, &post, login, Some(json!({"email": email, "password": PASSWORD})), &own).await;
    assert_eq!(signed_in.status, 200);
    let cookie = format!("cova_session={}", set_cookie_value(&signed_in.headers).expect("a session cookie"));
    let csrf = signed_in.body["csrf_token"].as_str().expect("csrf").to_owned();
    let session = [("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str()), ("origin", base)];
    let session_path = "/api/v1/auth/session";
    assert_eq!(plain(caller, &get, session_path, None, &session).await.status, 200);
    assert_eq!(plain(caller, &get, session_path, None, &[]).await.status, 401);

    let tokens = "/api/v1/tokens";
    let created =
        plain(caller, &post, tokens, Some(json!({"name": "ci", "scopes": ["metadata:read"]})), &session).await;
    assert_eq!(created.status, 201);
    assert_eq!(plain(caller, &post, tokens, Some(json!({"name": "ci", "scopes": []})), &session).await.status, 400);
    assert_eq!(
        plain(caller, &post, tokens, Some(json!({"name": "ci", "scopes": ["metadata:read"]})), &session[..1])
            .await
            .status,
        403
    );
    assert_eq!(plain(caller, &get, tokens, None, &session).await.status, 200);
    assert_eq!(plain(caller, &get, tokens, None, &[]).await.status, 401);
    let value = created.body["token"].as_str().expect("value").to_owned();
    let only_tokens = caller.call(get.clone(), tokens, tokens, Some(&value), None, &[]).await;
    assert_eq!(only_tokens.status, 403);
    let one = format!("/api/v1/tokens/{}", created.body["id"].as_str().expect("id"));
    assert_eq!(caller.call(delete.clone(), "/api/v1/tokens/{id}", &one, None, None, &session).await.status, 204);
    assert_eq!(caller.call(delete.clone(), "/api/v1/tokens/{id}", &one, None, None, &session).await.status, 404);

    assert_eq!(plain(caller, &get, "/api/v1/billing/packs", None, &session).await.status, 200);
    let checkout = "/api/v1/billing/checkout";
    assert_eq!(plain(caller, &post, checkout, Some(json!({"pack": "none"})), &session).await.status, 400);
    let opened = plain(caller, &post, checkout, Some(json!({"pack": "2k"})), &session).await;
    assert_eq!(opened.status, 201);
    assert_eq!(plain(caller, &get, "/api/v1/billing/purchases", None, &session).await.status, 200);
    let hook = "/api/v1/billing/webhook";
    let event = json!({"id": "evt_doc", "object": "event", "type": "checkout.session.completed",
        "data": {"object": {"id": opened.body["checkout_id"], "payment_status": "paid"}}});
    let signature = cova_sim::payments_signature_header(app.now() / 1000, &event.to_string());
    assert_eq!(plain(caller, &post, hook, Some(event.clone()), &[("stripe-signature", &signature)]).await.status, 200);
    assert_eq!(plain(caller, &post, hook, Some(event), &[("stripe-signature", "t=1,v1=00")]).await.status, 400);

    let logout = "/api/v1/auth/logout";
    assert_eq!(plain(caller, &post, logout, None, &session[..1]).await.status, 403);
    assert_eq!(plain(caller, &post, logout, None, &session).await.status, 204);
    assert_eq!(plain(caller, &post, logout, None, &session).await.status, 401);

    let reset = "/api/v1/auth/reset";
    assert_eq!(plain(caller, &post, reset, Some(json!({"email": email})), &own).await.status, 202);
    let reset_confirm = "/api/v1/auth/reset/confirm";
    assert_eq!(
        plain(caller, &post, reset_confirm, Some(json!({"token": "nope", "password": PASSWORD})), &own).await.status,
        400
    );
    let token = link_token(&mailed_link(app, email, "reset").await);
    let changed =
        plain(caller, &post, reset_confirm, Some(json!({"token": token, "password": "another fine passphrase"})), &own)
            .await;
    assert_eq!(changed.status, 200);
}

/// A call to a path without parameters and without a token.
async fn plain(
    caller: &Caller<'_>,
    method: &Method,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> Answer {
    caller.call(method.clone(), path, path, None, body, headers).await
}

/// The document and the server agree at the edges of every constraint the review sent: a value
/// the document admits is never refused as input (400), and a value it refuses always is,
/// with a `{detail, code}` that names no server type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documents_constraints_are_the_servers_at_their_edges() {
    let app = spawn_app_with(|_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100_000).await;
    let client = app.client(Some(&token));
    let doc = document();
    let schema = |name: &str| doc["components"]["schemas"][name].clone();
    let param = |name: &str| doc["components"]["parameters"][name]["schema"].clone();
    let mut disagreements = Vec::new();
    let mut check = |what: String, admitted: bool, status: u16, body: &[u8]| {
        if admitted == (status == 400) {
            disagreements.push(format!(
                "{what}: the document {}, the server {status}",
                if admitted { "admits it" } else { "refuses it" }
            ));
        }
        if status == 400 {
            let text = String::from_utf8_lossy(body);
            for rust in ["u32", "u64", "i64", "Option", "Integer"] {
                assert!(!text.contains(&format!("expected {rust}")), "{what}: {text}");
            }
        }
    };

    // Bodies: each field alone, at and beyond its bounds, integral numbers, null.
    let settings = schema("SpikeSettingsBody");
    let fields: [(&str, &[Value]); 4] = [
        ("cooldown_min", &[json!(29), json!(30), json!(60.0), json!(60.5), json!(10080), json!(10081), Value::Null]),
        ("min_comments", &[json!(4), json!(5), json!(5.0), json!(10000), json!(10001), Value::Null]),
        ("sensitivity", &[json!("strict"), json!("loud"), Value::Null]),
        ("enabled", &[json!(true), json!(1), Value::Null]),
    ];
    for (field, values) in fields {
        for value in values {
            let body = json!({ field: value });
            let admitted = schema_errors(&doc, &settings, &body).is_empty();
            let (status, _, bytes) =
                client.raw(client.request(Method::PUT, "/api/v1/spike-alerts/settings").json(&body)).await;
            check(format!("PUT /spike-alerts/settings {body}"), admitted, status.as_u16(), &bytes);
        }
    }
    let analyze = schema("AnalyzeBody");
    for (n, cap) in
        [Value::Null, json!(0), json!(1), json!(2.0), json!(5000), json!(5001), json!(1.5)].into_iter().enumerate()
    {
        let body = json!({"url": tiktok(10 + n as u64), "max_comments": cap});
        let admitted = schema_errors(&doc, &analyze, &body).is_empty();
        let (status, _, bytes) = client.raw(client.request(Method::POST, "/api/v1/analyze").json(&body)).await;
        check(format!("POST /analyze {body}"), admitted, status.as_u16(), &bytes);
    }

    // Refs: what the patterns admit is what the server reads as a post.
    let refs = [
        "tiktok:0",
        "tiktok:1",
        "tiktok:9999999999999999999",
        "youtube:BGQWPY4IigY",
        "instagram:CKZ7-7Ghk2j",
        "instagram:P__________",
        "instagram:Q__________",
        "instagram:tR02K54bkQJ",
        "instagram:B",
        "tiktok:ù",
        "",
    ];
    let (filter, spike_filter, quote) = (param("RefFilter"), param("SpikeRefFilter"), schema("AiQuoteBody"));
    for r in refs {
        let query = url::form_urlencoded::Serializer::new(String::new()).append_pair("ref", r).finish();
        for (path, schema) in
            [("/api/v1/analyze", &filter), ("/api/v1/ai/jobs", &filter), ("/api/v1/spike-alerts", &spike_filter)]
        {
            let admitted = schema_errors(&doc, schema, &json!(r)).is_empty();
            let (status, _, bytes) = client.raw(client.request(Method::GET, &format!("{path}?{query}"))).await;
            check(format!("GET {path}?ref={r}"), admitted, status.as_u16(), &bytes);
        }
        let body = json!({ "ref": r });
        let admitted = schema_errors(&doc, &quote, &body).is_empty();
        let (status, _, bytes) = client.raw(client.request(Method::POST, "/api/v1/ai/quote").json(&body)).await;
        check(format!("POST /ai/quote {body}"), admitted, status.as_u16(), &bytes);
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    app.stop().await;
}
