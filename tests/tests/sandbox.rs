//! The sandbox: no token, no quota, fixtures in exactly the live shapes, per-IP limits.

use cova_sim::{TikTokScenario, tiktok_post_id};
use cova_tests::{Client, spawn_app, spawn_app_with};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Every key path in a JSON value (array elements merged), e.g. `result.comments[].author.id`.
fn shape(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let path = format!("{prefix}.{k}");
                out.insert(path.clone());
                shape(v, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                shape(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn shape_of(v: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    shape(v, "", &mut out);
    out
}

async fn sandbox(client: &Client, path: &str, url: &str, forwarded_for: Option<&str>) -> cova_tests::Reply<Value> {
    let mut req = client.request(Method::POST, path).json(&json!({ "url": url }));
    if let Some(ip) = forwarded_for {
        req = req.header("x-forwarded-for", ip);
    }
    client.send(req).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_answers_have_exactly_the_live_shapes() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let live = app.client(Some(&token));
    let url = format!("https://www.tiktok.com/@someone/video/{}", tiktok_post_id(TikTokScenario::Normal, 40));
    let live_meta = live.metadata(&url).await.ok();
    let job = live.analyze(&url, None).await.ok();
    let live_job = live.wait_job(job["job_id"].as_str().expect("id")).await;

    let anonymous = app.client(None);
    let sandbox_meta = sandbox(&anonymous, "/api/v1/sandbox/metadata", &url, None).await.ok();
    let sandbox_job = sandbox(&anonymous, "/api/v1/sandbox/analyze", &url, None).await.ok();
    assert_eq!(shape_of(&sandbox_meta), shape_of(&live_meta));
    assert_eq!(shape_of(&sandbox_job), shape_of(&live_job));
    assert_eq!(sandbox_job["status"], "complete");
    assert_eq!(sandbox_job["ref"], live_job["ref"]);
    assert_eq!(sandbox_job["result"]["analysis_id"], live_job["result"]["analysis_id"]);
    assert_eq!(sandbox_meta["ref"], live_meta["ref"]);
    // Deterministic: the same request gives the same fixture.
    let again = sandbox(&anonymous, "/api/v1/sandbox/metadata", &url, None).await.ok();
    assert_eq!(again, sandbox_meta);
    // No quota was touched and the platform was not asked again.
    let requests_before = app.sim.requests().len();
    sandbox(&anonymous, "/api/v1/sandbox/analyze", &url, None).await.ok();
    assert_eq!(app.sim.requests().len(), requests_before, "the sandbox never reaches the platform");
    assert_eq!(live.usage().await.ok().comments.used, 40);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_validates_urls_and_needs_no_token() {
    let app = spawn_app().await;
    let anonymous = app.client(None);
    let (status, err) = sandbox(&anonymous, "/api/v1/sandbox/metadata", "https://example.com/x", None).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    let reply = sandbox(&anonymous, "/api/v1/sandbox/analyze", "https://youtu.be/BGQWPY4IigY", None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.ok()["ref"], "youtube:BGQWPY4IigY");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_limits_each_ip_to_5_per_minute_and_30_per_hour() {
    let app = spawn_app_with(|c| c.http.trusted_proxies = vec!["127.0.0.1".into()]).await;
    let anonymous = app.client(None);
    let url = "https://www.tiktok.com/@a/video/7000000000000000012";
    for remaining in (0..5).rev() {
        let reply = sandbox(&anonymous, "/api/v1/sandbox/metadata", url, Some("203.0.113.7")).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header_u64("x-ratelimit-remaining"), Some(remaining));
    }
    let reply = sandbox(&anonymous, "/api/v1/sandbox/analyze", url, Some("203.0.113.7")).await;
    assert_eq!(reply.header_u64("x-ratelimit-limit"), Some(5));
    // A window, not a smoothed rate: the sixth request is refused until the first one is a
    // minute old (a GCRA would have let one through 12 seconds later).
    let retry_after = reply.header_u64("retry-after").expect("Retry-After");
    assert!((55..=60).contains(&retry_after), "Retry-After {retry_after}");
    let (status, err) = reply.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (429, "rate_limited"));
    // Another client IP behind the same trusted proxy has its own budget.
    assert_eq!(sandbox(&anonymous, "/api/v1/sandbox/metadata", url, Some("198.51.100.1")).await.status, 200);

    // The hourly budget: spend 29 of it directly, then one more request passes and the next is refused.
    for n in 0..29 {
        let member = format!("earlier-{n}");
        let hour = cova_domain::limits::SANDBOX_PER_HOUR;
        app.backends.cache.window("sandbox:h:192.0.2.50", hour, cova_cache::Op::Hit(&member)).await.expect("pre-spend");
    }
    assert_eq!(sandbox(&anonymous, "/api/v1/sandbox/metadata", url, Some("192.0.2.50")).await.status, 200);
    let reply = sandbox(&anonymous, "/api/v1/sandbox/metadata", url, Some("192.0.2.50")).await;
    assert_eq!(reply.header_u64("x-ratelimit-limit"), Some(30));
    let (status, err) = reply.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (429, "rate_limited"));
    assert!(err.detail.contains("30 requests per 3600 seconds"), "{}", err.detail);
    app.stop().await;
}
