//! Comment collection end to end: POST /analyze → scraper (through the queue, against
//! cova-sim) → GET /analyze/{job_id}; money, dedup, idempotency, limits and failures.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{TestApp, spawn_app, spawn_app_with_sim};
use serde_json::Value;

fn tiktok_url(scenario: TikTokScenario, comments: u64) -> String {
    format!("https://www.tiktok.com/@someone/video/{}", tiktok_post_id(scenario, comments))
}

fn count_all(comments: &Value) -> usize {
    comments.as_array().map_or(0, |a| a.iter().map(|c| 1 + c["replies"].as_array().map_or(0, Vec::len)).sum())
}

async fn used(app: &TestApp, token: &str) -> (i64, i64, i64) {
    let u = app.client(Some(token)).usage().await.ok();
    (u.comments.used, u.comments.reserved, u.comments.remaining)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_collects_every_comment_with_nested_replies_and_charges_exactly() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 49);
    let reply = client.analyze(&format!("https://www.tiktok.com/@someone/video/{id}?is_from_webapp=1"), None).await;
    assert_eq!(reply.status, 202);
    assert!(reply.header("x-quota-limit").is_some() && reply.header("x-ratelimit-limit").is_some());
    let queued = reply.ok();
    assert_eq!(queued["status"], "queued");
    assert_eq!(queued["ref"], format!("tiktok:{id}"));
    assert!(queued.get("deduplicated").is_none());
    let job_id = queued["job_id"].as_str().expect("job_id").to_owned();

    let job = client.wait_job(&job_id).await;
    assert_eq!(job["status"], "complete", "{job}");
    let result = &job["result"];
    assert_eq!(result["analysis_id"], format!("tiktok:{id}"));
    assert_eq!(result["truncated"], false);
    let comments = &result["comments"];
    assert_eq!(count_all(comments), 49);

    // Exactly what the simulator holds: same top-level order, every reply under its parent.
    let truth = app.sim.expected_post(&id.to_string());
    let expected_top: Vec<String> = truth.comments.iter().map(|c| c.id.clone()).collect();
    let got_top: Vec<String> =
        comments.as_array().expect("array").iter().map(|c| c["id"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(got_top, expected_top);
    for c in comments.as_array().expect("array") {
        for r in c["replies"].as_array().expect("replies") {
            assert_eq!(r["parent_id"], c["id"]);
        }
        for field in
            ["id", "text", "author", "likes", "reply_count", "created_at", "pinned", "liked_by_author", "media"]
        {
            assert!(c.get(field).is_some(), "comment lacks {field}: {c}");
        }
    }
    assert_eq!(used(&app, &token).await, (49, 0, 951), "charged exactly what was collected");

    // Bookmarked in the library, once.
    let saved = app.library(&account.id).await;
    assert_eq!(saved, vec![format!("tiktok:{id}")]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_pages_with_limit_and_cursor() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let job = client.analyze(&tiktok_url(TikTokScenario::Normal, 120), None).await.ok();
    let job_id = job["job_id"].as_str().expect("id").to_owned();
    let full = client.wait_job(&job_id).await;
    let all: Vec<Value> = full["result"]["comments"].as_array().expect("array").clone();
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/analyze/{job_id}?limit=25&cursor={c}"),
            None => format!("/api/v1/analyze/{job_id}?limit=25"),
        };
        let page = client.get::<Value>(&path).await.ok();
        paged.extend(page["result"]["comments"].as_array().expect("array").iter().cloned());
        match page["result"]["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, all);
    let (status, err) = client.get::<Value>(&format!("/api/v1/analyze/{job_id}?limit=0")).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    let (status, err) = client.get::<Value>(&format!("/api/v1/analyze/{job_id}?cursor=zzz")).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_urls_are_deduplicated_both_ways_without_spending() {
    let sim = SimConfig { latency_ms: 150, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 30);
    let first = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
    let job_id = first["job_id"].as_str().expect("id").to_owned();
    // Another URL form of the same post, while the first job runs.
    let again = client.analyze(&format!("https://www.tiktok.com/embed/v2/{id}"), None).await;
    assert_eq!(again.status, 200);
    let again = again.ok();
    assert_eq!(again["job_id"], job_id.as_str());
    assert_eq!(again["deduplicated"], "in_flight");
    client.wait_job(&job_id).await;
    let recent = client.analyze(&format!("https://m.tiktok.com/v/{id}.html"), None).await.ok();
    assert_eq!(recent["job_id"], job_id.as_str());
    assert_eq!(recent["deduplicated"], "recent_result");
    assert_eq!(recent["status"], "complete");
    assert_eq!(used(&app, &token).await.0, 30, "dedup answers spend nothing");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_return_the_same_job_and_refuse_other_urls() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let url = tiktok_url(TikTokScenario::Normal, 10);
    let a = client.analyze(&url, Some("order-42")).await.ok();
    let b = client.analyze(&url, Some("order-42")).await.ok();
    assert_eq!(a["job_id"], b["job_id"]);
    assert!(b.get("deduplicated").is_none());
    let (status, err) = client.analyze(&tiktok_url(TikTokScenario::Normal, 11), Some("order-42")).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (409, "idempotency_conflict"));
    let (status, err) = client.analyze(&url, Some("bad key")).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    // Another account may use the same key.
    let (other, other_token) = app.integrator().await;
    app.grant(&other, 100).await;
    let c = app.client(Some(&other_token)).analyze(&url, Some("order-42")).await.ok();
    assert_ne!(c["job_id"], a["job_id"]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_jobs_run_at_once_and_the_fourth_gets_429() {
    let sim = SimConfig { latency_ms: 400, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |_| {}).await;
    let (account, token) = app.integrator().await;
    // Each job holds up to 5,000 until it settles.
    app.grant(&account, 20_000).await;
    let client = app.client(Some(&token));
    let mut ids = Vec::new();
    for n in 1..=3 {
        let job = client.analyze(&tiktok_url(TikTokScenario::Normal, 200 + n), None).await;
        assert_eq!(job.status, 202);
        ids.push(job.ok()["job_id"].as_str().expect("id").to_owned());
    }
    let reply = client.analyze(&tiktok_url(TikTokScenario::Normal, 300), None).await;
    assert!(reply.header_u64("retry-after").is_some());
    let (status, err) = reply.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (429, "concurrency_limit"));
    assert_eq!(app.client(Some(&token)).usage().await.ok().concurrency.running, 3);
    // A deduplicated answer does not count against the limit.
    let dedup = client.analyze(&tiktok_url(TikTokScenario::Normal, 201), None).await.ok();
    assert_eq!(dedup["deduplicated"], "in_flight");
    for id in ids {
        client.wait_job(&id).await;
    }
    assert_eq!(client.analyze(&tiktok_url(TikTokScenario::Normal, 300), None).await.status, 202);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_balance_is_402_and_a_small_one_truncates() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    let client = app.client(Some(&token));
    let (status, err) = client.analyze(&tiktok_url(TikTokScenario::Normal, 20), None).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "quota_exceeded"));
    app.grant(&account, 30).await;
    let job = client.analyze(&tiktok_url(TikTokScenario::Normal, 49), None).await.ok();
    let done = client.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "complete");
    assert_eq!(done["result"]["truncated"], true);
    assert_eq!(count_all(&done["result"]["comments"]), 30);
    assert_eq!(used(&app, &token).await, (30, 0, 0));
    let (status, err) = client.analyze(&tiktok_url(TikTokScenario::Normal, 21), None).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "quota_exceeded"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_over_5000_comments_is_capped_and_truncated() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 10_000).await;
    let client = app.client(Some(&token));
    let job = client.analyze(&tiktok_url(TikTokScenario::Normal, 5_600), None).await.ok();
    let done = client.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "complete", "{}", done["error"]);
    assert_eq!(done["result"]["truncated"], true);
    assert_eq!(count_all(&done["result"]["comments"]), 5_000);
    assert_eq!(used(&app, &token).await, (5_000, 0, 5_000));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_jobs_carry_the_spec_code_and_charge_nothing() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 500).await;
    let client = app.client(Some(&token));
    for (scenario, code) in [
        (TikTokScenario::PrivatePost, "audience_restricted"),
        (TikTokScenario::AudienceRestricted, "audience_restricted"),
        (TikTokScenario::Deleted, "parse_error"),
        (TikTokScenario::EmptyBodyAlways, "parse_error"),
    ] {
        let job = client.analyze(&tiktok_url(scenario, 12), None).await.ok();
        let done = client.wait_job(job["job_id"].as_str().expect("id")).await;
        assert_eq!(done["status"], "failed", "{scenario:?}: {done}");
        assert_eq!(done["error"]["code"], code, "{scenario:?}");
        assert!(done.get("result").is_none());
    }
    assert_eq!(used(&app, &token).await, (0, 0, 500));
    // A failed job is not a recent result: asking again starts a new job.
    let url = tiktok_url(TikTokScenario::Deleted, 12);
    assert_eq!(client.analyze(&url, None).await.status, 202);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_other_accounts_and_unknown_jobs_are_404() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let job = app.client(Some(&token)).analyze(&tiktok_url(TikTokScenario::Normal, 5), None).await.ok();
    let job_id = job["job_id"].as_str().expect("id");
    let (_, other) = app.integrator().await;
    let (status, err) = app.client(Some(&other)).job(job_id).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (404, "not_found"));
    let (status, err) = app.client(Some(&token)).job("no-such-job").await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (404, "not_found"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_validation_and_the_order_of_checks() {
    let app = spawn_app().await;
    let (account, _) = app.integrator().await;
    let metadata_only = app.token(&account, "metadata:read").await;
    let client = app.client(Some(&metadata_only));
    let (status, err) = client.analyze(&tiktok_url(TikTokScenario::Normal, 5), None).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (403, "forbidden_scope"));
    let (status, err) = client.job("x").await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (403, "forbidden_scope"));
    let analyze_only = app.token(&account, "analyze:write").await;
    let (status, err) = app.client(Some(&analyze_only)).metadata(&tiktok_url(TikTokScenario::Normal, 5)).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (403, "forbidden_scope"));
    // Auth comes before body validation; validation before payment.
    let anonymous = app.client(None);
    let (status, _) =
        anonymous.send::<Value>(anonymous.request(reqwest::Method::POST, "/api/v1/analyze").body("{")).await.err();
    assert_eq!(status.as_u16(), 401);
    let all = app.client(Some(&analyze_only));
    for (body, why) in [
        ("{", "malformed JSON"),
        (r#"{"url": 5}"#, "wrong type"),
        (r#"{}"#, "missing url"),
        (r#"{"url": "  "}"#, "empty url"),
        (r#"{"url": "not a url"}"#, "not a URL"),
        (r#"{"url": "https://example.com/video/1"}"#, "unsupported platform"),
        (r#"{"url": "https://www.tiktok.com/@someone"}"#, "not a post"),
    ] {
        let req =
            all.request(reqwest::Method::POST, "/api/v1/analyze").header("content-type", "application/json").body(body);
        let (status, err) = all.send::<Value>(req).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{why}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_cached_and_only_successes_spend_the_limit() {
    let app = spawn_app().await;
    let (_, token) = app.integrator().await;
    let client = app.client(Some(&token));
    let url = tiktok_url(TikTokScenario::Normal, 40);
    let first = client.metadata(&url).await;
    assert_eq!(first.header_u64("x-ratelimit-limit"), Some(10));
    assert_eq!(first.header_u64("x-ratelimit-remaining"), Some(9));
    let first = first.ok();
    assert_eq!(first["cached"], false);
    for group in ["author", "metrics", "hashtags", "sound", "cover", "description_keywords"] {
        assert!(first.get(group).is_some(), "metadata lacks {group}: {first}");
    }
    let second =
        client.metadata(&format!("https://www.tiktok.com/embed/{}", tiktok_post_id(TikTokScenario::Normal, 40))).await;
    assert_eq!(second.header_u64("x-ratelimit-remaining"), Some(9), "a cache hit is free");
    assert_eq!(second.ok()["cached"], true);
    let failed = client.metadata(&tiktok_url(TikTokScenario::Deleted, 3)).await;
    assert_eq!(failed.header_u64("x-ratelimit-remaining"), Some(9), "a failure is free");
    let (status, err) = failed.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (502, "parse_error"));
    let (status, err) = client.metadata(&tiktok_url(TikTokScenario::PrivateAccount, 3)).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (422, "audience_restricted"));
    assert_eq!(client.usage().await.ok().metadata.remaining, 9);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_limit_is_exact_under_twenty_parallel_requests() {
    let app = spawn_app().await;
    let (_, token) = app.integrator().await;
    let mut tasks = Vec::new();
    for n in 0..20u64 {
        let client = app.client(Some(&token));
        tasks.push(tokio::spawn(async move { client.metadata(&tiktok_url(TikTokScenario::Normal, 60 + n)).await }));
    }
    let (mut ok, mut limited) = (0, 0);
    for t in tasks {
        let reply = t.await.expect("join");
        match reply.status.as_u16() {
            200 => ok += 1,
            429 => {
                assert!(reply.header_u64("retry-after").is_some());
                assert_eq!(reply.err().1.code, "rate_limited");
                limited += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((ok, limited), (10, 10));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_comment_count_caps_the_hold() {
    let sim = SimConfig { latency_ms: 300, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 2_000).await;
    let client = app.client(Some(&token));
    let url = tiktok_url(TikTokScenario::Normal, 12);
    assert_eq!(client.metadata(&url).await.ok()["metrics"]["comments"], 12);
    let job = client.analyze(&url, None).await.ok();
    // 12 comments reported, plus room for new ones: 62 held, not the whole balance.
    assert_eq!(used(&app, &token).await, (0, 62, 1_938));
    let done = client.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(done["progress"]["comments_expected"], 12);
    assert_eq!(used(&app, &token).await, (12, 0, 1_988));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_that_stays_unavailable_fails_the_job_after_the_last_attempt() {
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        c.scraper.max_attempts = 2;
        c.scraper.retry_base_ms = 20;
    })
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 500).await;
    let client = app.client(Some(&token));
    // The simulator's quota-exceeded video: YouTube answers `quotaExceeded` every time.
    let id = cova_sim::youtube_video_id(cova_sim::YouTubeScenario::QuotaExceeded, 10);
    let job = client.analyze(&format!("https://www.youtube.com/shorts/{id}"), None).await.ok();
    let done = client.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["code"], "unavailable");
    assert!(done["error"]["detail"].as_str().unwrap_or_default().contains("2 attempts"), "{}", done["error"]);
    assert_eq!(used(&app, &token).await, (0, 0, 500), "nothing charged");
    if let cova_queue::Queue::Memory(q) = &app.backends.queue {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while q.dead_letters().is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(q.dead_letters().len(), 1, "the command ends in the dead-letter queue");
    }
    app.stop().await;
}
