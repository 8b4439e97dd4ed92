//! Accounts, tokens, scopes, usage, limits and the error contract, over HTTP.

use cova_tests::{Client, spawn_app, spawn_app_with};
use reqwest::Method;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_reports_balance_limits_and_tokens() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 2_000).await;
    let reply = app.client(Some(&token)).usage().await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header_u64("x-quota-limit"), Some(2_000));
    assert_eq!(reply.header_u64("x-quota-remaining"), Some(2_000));
    assert_eq!(reply.header_u64("x-ratelimit-limit"), Some(600));
    assert_eq!(reply.header_u64("x-ratelimit-remaining"), Some(599));
    assert!(reply.header("x-request-id").is_some());
    let usage = reply.ok();
    assert_eq!(usage.account.id, account.id);
    assert_eq!(usage.account.email, account.email);
    assert_eq!(
        (usage.comments.limit, usage.comments.used, usage.comments.reserved, usage.comments.remaining),
        (2_000, 0, 0, 2_000)
    );
    assert_eq!(usage.comments.per_post_limit, 5_000);
    assert_eq!(usage.comments.month.len(), 7);
    assert!(usage.comments.expires_at.ends_with("-01T00:00:00Z"), "{}", usage.comments.expires_at);
    assert_eq!((usage.metadata.limit, usage.metadata.remaining, usage.metadata.window_seconds), (10, 10, 7_200));
    assert_eq!((usage.requests.limit, usage.requests.remaining, usage.requests.window_seconds), (600, 599, 60));
    assert_eq!((usage.concurrency.limit, usage.concurrency.running, usage.concurrency.available), (3, 0, 3));
    assert_eq!((usage.tokens.limit, usage.tokens.active), (5, 1));

    // A second token shows up; the balance is per account, not per token.
    let second = app.token(&account, "metadata:read").await;
    let usage = app.client(Some(&second)).usage().await.ok();
    assert_eq!(usage.tokens.active, 2);
    assert_eq!(usage.comments.remaining, 2_000);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_without_a_pack_has_an_empty_balance() {
    let app = spawn_app().await;
    let (_, token) = app.integrator().await;
    let reply = app.client(Some(&token)).usage().await;
    assert_eq!(reply.header_u64("x-quota-limit"), Some(0));
    assert_eq!(reply.header_u64("x-quota-remaining"), Some(0));
    let usage = reply.ok();
    assert_eq!((usage.comments.limit, usage.comments.remaining), (0, 0), "the free allowance never applies to tokens");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_invalid_malformed_and_revoked_tokens_are_401() {
    let app = spawn_app_with(|c| c.auth.token_cache_ms = 0).await;
    let (account, token) = app.integrator().await;
    let cases: Vec<(&str, Option<String>)> = vec![
        ("missing", None),
        ("wrong scheme", Some(format!("Basic {token}"))),
        ("no scheme", Some(token.clone())),
        ("garbage", Some("Bearer garbage".into())),
        (
            "bad checksum",
            Some(format!("Bearer {}{}", &token[..token.len() - 1], if token.ends_with('x') { 'y' } else { 'x' })),
        ),
        ("well-formed but unknown", Some(format!("Bearer {}", cova_auth::generate().value))),
    ];
    for (case, header) in cases {
        let mut req = Client::new(&app.base_url, None).request(Method::GET, "/api/v1/usage");
        if let Some(h) = header {
            req = req.header("authorization", h);
        }
        let (status, err) = app.client(None).send::<serde_json::Value>(req).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (401, "unauthorized"), "{case}");
    }
    assert_eq!(app.client(Some(&token)).usage().await.status, 200);
    let prefix = cova_auth::display_prefix(&token);
    cova_storage::repo::tokens::revoke_by_prefix(app.db(), &account.id, &prefix, cova_domain::time::now_ms())
        .await
        .expect("revoke");
    let (status, err) = app.client(Some(&token)).usage().await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (401, "unauthorized"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_bites_within_the_token_cache_ttl() {
    const TTL_MS: u64 = 500;
    let app = spawn_app_with(|c| c.auth.token_cache_ms = TTL_MS).await;
    let (account, token) = app.integrator().await;
    assert_eq!(app.client(Some(&token)).usage().await.status, 200);
    let prefix = cova_auth::display_prefix(&token);
    cova_storage::repo::tokens::revoke_by_prefix(app.db(), &account.id, &prefix, cova_domain::time::now_ms())
        .await
        .expect("revoke");
    // The cache's TTL is what is tested: once it has passed since the token was looked up, the
    // revocation holds, however long the machine took to get here.
    tokio::time::sleep(Duration::from_millis(TTL_MS)).await;
    assert_eq!(app.client(Some(&token)).usage().await.status, 401, "revoked token still accepted after the TTL");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_the_url_is_refused_even_with_a_valid_header() {
    let app = spawn_app().await;
    let (_, token) = app.integrator().await;
    let client = app.client(Some(&token));
    for query in
        [format!("token={token}"), format!("api_key={token}"), format!("x={token}"), "access_token=abc".to_string()]
    {
        let (status, err) = client.get::<serde_json::Value>(&format!("/api/v1/usage?{query}")).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (401, "unauthorized"), "{query}");
        assert!(err.detail.contains("Authorization header"));
        assert!(!err.detail.contains(&token), "the token is never echoed");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_a_detail_and_code_body() {
    let app = spawn_app_with(|c| c.http.body_limit_bytes = 1024).await;
    let (_, token) = app.integrator().await;
    let client = app.client(Some(&token));
    // The typed client refuses any error body that is not exactly {detail, code}.
    let (status, err) = client.get::<serde_json::Value>("/api/v1/nothing-here").await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (404, "not_found"));
    let (status, err) = client.get::<serde_json::Value>("/nothing-here").await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (404, "not_found"));
    let (status, err) = client.send::<serde_json::Value>(client.request(Method::POST, "/")).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (405, "method_not_allowed"), "the workspace page is GET only");
    let (status, err) = client.send::<serde_json::Value>(client.request(Method::DELETE, "/api/v1/usage")).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (405, "method_not_allowed"));
    let (status, err) = client.send::<serde_json::Value>(client.request(Method::POST, "/healthz")).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (405, "method_not_allowed"));
    // RFC 9110: a 405 names the methods the path serves.
    for (method, path, allow) in [
        (Method::POST, "/", "GET, HEAD"),
        (Method::DELETE, "/api/v1/usage", "GET"),
        (Method::PATCH, "/api/v1/analyze", "POST, GET"),
        (Method::PUT, "/api/v1/analyses/tiktok:7000000000000000012", "GET, DELETE"),
    ] {
        let (status, headers, _) = client.raw(client.request(method.clone(), path)).await;
        assert_eq!(status, 405, "{method} {path}");
        assert_eq!(headers.get("allow").and_then(|v| v.to_str().ok()), Some(allow), "{method} {path}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_limit_answers_429_with_retry_after() {
    let app = spawn_app_with(|c| c.limits.api_requests_per_minute = 3).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 50).await;
    let client = app.client(Some(&token));
    for remaining in [2, 1, 0] {
        let reply = client.usage().await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header_u64("x-ratelimit-remaining"), Some(remaining));
    }
    let reply = client.usage().await;
    assert_eq!(reply.header_u64("x-ratelimit-limit"), Some(3));
    assert_eq!(reply.header_u64("x-ratelimit-remaining"), Some(0));
    assert_eq!(reply.header_u64("x-quota-limit"), Some(50), "a 429 still carries the quota headers");
    assert_eq!(reply.header_u64("x-quota-remaining"), Some(50));
    let retry_after = reply.header_u64("retry-after").expect("Retry-After on 429");
    assert!((1..=20).contains(&retry_after), "{retry_after}");
    let (status, err) = reply.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (429, "rate_limited"));
    // Another account is not affected.
    let (_, other) = app.integrator().await;
    assert_eq!(app.client(Some(&other)).usage().await.status, 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_allows_bearer_requests_from_any_origin_without_credentials() {
    let app = spawn_app().await;
    let (_, token) = app.integrator().await;
    let http = reqwest::Client::new();
    let preflight = http
        .request(Method::OPTIONS, format!("{}/api/v1/usage", app.base_url))
        .header("origin", "https://integrator.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "authorization")
        .send()
        .await
        .expect("preflight");
    assert!(preflight.status().is_success());
    assert_eq!(preflight.headers().get("access-control-allow-origin").and_then(|v| v.to_str().ok()), Some("*"));
    assert!(preflight.headers().get("access-control-allow-credentials").is_none());
    let allowed = preflight.headers().get("access-control-allow-headers").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert!(allowed.contains("authorization"), "{allowed}");
    let res = http
        .get(format!("{}/api/v1/usage", app.base_url))
        .header("origin", "https://integrator.example")
        .bearer_auth(&token)
        .send()
        .await
        .expect("get");
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers().get("access-control-allow-origin").and_then(|v| v.to_str().ok()), Some("*"));
    let exposed = res.headers().get("access-control-expose-headers").and_then(|v| v.to_str().ok()).unwrap_or("");
    for h in ["x-ratelimit-limit", "x-ratelimit-remaining", "x-quota-limit", "x-quota-remaining", "retry-after"] {
        assert!(exposed.contains(h), "{h} not exposed: {exposed}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_request_ids() {
    let app = spawn_app().await;
    let client = app.client(None);
    let health = client.get::<serde_json::Value>("/healthz").await.ok();
    assert_eq!(health["status"], "ok");
    let ready = client.get::<serde_json::Value>("/readyz").await.ok();
    assert_eq!(ready["status"], "ready");
    for backend in ["database", "cache", "queue", "media"] {
        assert_eq!(ready["checks"][backend], "ok", "{backend}");
    }
    let reply = client
        .send::<serde_json::Value>(client.request(Method::GET, "/healthz").header("x-request-id", "abc-123"))
        .await;
    assert_eq!(reply.header("x-request-id"), Some("abc-123"));
    let reply = client
        .send::<serde_json::Value>(client.request(Method::GET, "/healthz").header("x-request-id", "bad id\twith junk"))
        .await;
    assert_ne!(reply.header("x-request-id"), Some("bad id\twith junk"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_that_is_down_costs_only_what_needs_it_and_readiness_says_so() {
    // Nothing listens on port 9 of loopback: the cache is "down" on every machine.
    let database = cova_testdb::TestDatabase::create().await;
    let mut config = cova_tests::test_config(&database).await;
    config.cache.url = "redis://127.0.0.1:9".into();
    config.cache.timeout_ms = 500;
    let backends = cova_runtime::Backends::connect(&config).await.expect("connect is lazy");
    backends.db.migrate().await.expect("migrate");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let platforms = cova_platforms::Platforms::new(&config.platforms).expect("platforms");
    let notify = std::sync::Arc::new(cova_notify::Sender::new(&config.notifier).expect("notifier settings"));
    let state = cova_gateway::AppState::new(config, backends.clone(), platforms, std::sync::Arc::default(), notify)
        .expect("gateway settings");
    let server = cova_gateway::server(state, listener).expect("server");
    let handle = server.handle();
    tokio::spawn(server);

    let account =
        cova_storage::repo::accounts::create(&backends.db, "down@example.com", true, 0, cova_domain::time::now_ms())
            .await
            .expect("account");
    let generated = cova_auth::generate();
    cova_storage::repo::tokens::create(
        &backends.db,
        cova_storage::repo::tokens::NewToken {
            account_id: &account.id,
            name: "t",
            scopes: cova_auth::ScopeSet::parse_list("metadata:read").expect("scopes"),
            token: &generated,
        },
        cova_domain::time::now_ms(),
    )
    .await
    .expect("db")
    .expect("token");
    let client = Client::new(&base, Some(&generated.value));
    // The account's state comes from the database, the general limit is counted here.
    let usage = client.usage().await;
    assert_eq!(usage.status, 200, "usage answers without the cache");
    assert_eq!(usage.header("x-ratelimit-limit"), Some("600"));
    // The metadata window lives in the cache alone: refused, not guessed.
    let reply = client.metadata("https://www.tiktok.com/@a/video/7000000000000000012").await;
    assert!(reply.header_u64("retry-after").is_some());
    let (status, err) = reply.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (503, "unavailable"));
    let (status, err) = client.get::<serde_json::Value>("/readyz").await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (503, "unavailable"));
    assert!(err.detail.contains("cache"), "{}", err.detail);
    assert!(!err.detail.contains("database"), "{}", err.detail);
    handle.stop(false).await;
    let _ = database.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_time_bound_answers_503_and_the_server_keeps_serving() {
    // The gateway allows a request 100 ms; the platform holds its answers until resumed.
    let app = spawn_app_with(|c| c.http.request_timeout_ms = 100).await;
    let (_, token) = app.integrator().await;
    let client = app.client(Some(&token));
    let url = "https://www.tiktok.com/@a/video/7000000000000000012";
    app.sim.pause();
    // Answered while the platform has not answered: at the bound, not after the platform.
    let reply = client.metadata(url).await;
    assert!(reply.header("x-request-id").is_some(), "even an abandoned request is answered with its id");
    let (status, err) = reply.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (503, "unavailable"));
    // The abandoned work finishes in the background; the server keeps serving.
    app.sim.resume();
    cova_tests::eventually("the post looked up again", async || client.metadata(url).await.status == 200).await;
    assert_eq!(client.get::<serde_json::Value>("/healthz").await.status, 200);
    assert_eq!(client.usage().await.status, 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_preflights_and_url_tokens_still_speak_json_and_cors() {
    let app = spawn_app().await;
    let http = reqwest::Client::new();
    let res = http
        .request(Method::OPTIONS, format!("{}/api/v1/usage", app.base_url))
        .header("origin", "https://integrator.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "x-not-allowed")
        .send()
        .await
        .expect("preflight");
    assert_eq!(res.status(), 400);
    let body: cova_tests::ApiError = res.json().await.expect("{detail, code}");
    assert_eq!(body.code, "validation_error");
    let res = http
        .get(format!("{}/api/v1/usage?%74oken=abc", app.base_url))
        .header("origin", "https://integrator.example")
        .send()
        .await
        .expect("get");
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers().get("access-control-allow-origin").and_then(|v| v.to_str().ok()), Some("*"));
    let body: cova_tests::ApiError = res.json().await.expect("{detail, code}");
    assert_eq!(body.code, "unauthorized");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_of_a_known_token_carry_the_limit_headers_and_spend_nothing() {
    let app = spawn_app().await;
    let account = app.account().await;
    app.grant(&account, 700).await;
    let narrow = app.client(Some(&app.token(&account, "metadata:read").await));
    let full = app.client(Some(&app.token(&account, "metadata:read,analyze:write").await));
    let headers = |reply: &cova_tests::Reply<serde_json::Value>| {
        ["x-ratelimit-limit", "x-ratelimit-remaining", "x-quota-limit", "x-quota-remaining"]
            .map(|h| reply.header_u64(h))
    };

    // Scope (403), then body and query validation (400): the general limit, untouched.
    let forbidden = narrow.analyze("https://www.tiktok.com/@a/video/7000000000000000001", None).await;
    assert_eq!(forbidden.status, 403);
    assert_eq!(headers(&forbidden), [Some(600), Some(600), Some(700), Some(700)]);
    let bad_body = full.send(full.request(Method::POST, "/api/v1/analyze").body("{not json")).await;
    assert_eq!(bad_body.status, 400);
    assert_eq!(headers(&bad_body), [Some(600), Some(600), Some(700), Some(700)]);
    let bad_query = full.get::<serde_json::Value>("/api/v1/analyze/some-job?limit=many").await;
    assert_eq!(bad_query.status, 400);
    assert_eq!(headers(&bad_query), [Some(600), Some(600), Some(700), Some(700)]);
    assert_eq!(bad_query.err().1.code, "validation_error");
    let out_of_range = full.get::<serde_json::Value>("/api/v1/analyze/some-job?limit=0").await;
    assert_eq!(out_of_range.status, 400);
    assert_eq!(headers(&out_of_range), [Some(600), Some(600), Some(700), Some(700)]);

    // On /metadata the headers describe the metadata limit.
    let bad_url = full.metadata("https://example.com/not-a-post").await;
    assert_eq!(bad_url.status, 400);
    assert_eq!(headers(&bad_url), [Some(10), Some(10), Some(700), Some(700)]);

    // None of those spent a request: the first counted one leaves 599.
    let usage = full.usage().await;
    assert_eq!(usage.header_u64("x-ratelimit-remaining"), Some(599));
    assert_eq!(usage.ok().metadata.remaining, 10);
    app.stop().await;
}
