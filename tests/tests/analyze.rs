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
    assert!(result["truncated_reason"].is_null());
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
    assert_eq!(done["result"]["truncated_reason"], "balance", "the balance stopped it");
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
    assert_eq!(done["result"]["truncated_reason"], "post_cap", "the per-post cap stopped it");
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
        (r#"{"url": "not a url"}"#, "is not a web address"),
        (r#"{"url": "https://example.com/video/1"}"#, "Unsupported platform"),
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
    // On either queue (in-process or RabbitMQ) the command ends in the dead-letter queue.
    let dead = async || app.backends.queue.dead_letter_count("scraper").await.expect("dead-letter count");
    cova_tests::eventually("the command in the dead-letter queue", async || dead().await > 0).await;
    assert_eq!(dead().await, 1, "the command ends in the dead-letter queue once");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_answered_with_a_deduplicated_job_keeps_that_job() {
    // The job runs long enough to be in flight when the key first arrives, then fails.
    let sim = SimConfig { latency_ms: 300, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let url = tiktok_url(TikTokScenario::Deleted, 12);
    let first = client.analyze(&url, None).await.ok();
    let job_id = first["job_id"].as_str().expect("id").to_owned();
    let keyed = client.analyze(&url, Some("retry-7")).await.ok();
    assert_eq!((keyed["job_id"].as_str(), keyed["deduplicated"].as_str()), (Some(job_id.as_str()), Some("in_flight")));
    assert_eq!(client.wait_job(&job_id).await["status"], "failed");
    // The failed job is no recent result, but the key still names it: no second job.
    let again = client.analyze(&url, Some("retry-7")).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.ok()["job_id"], job_id.as_str());
    assert_eq!(app.job_progress().await.total, 1, "the same key created no new job");
    // Without the key, a failed job is retried as a new one.
    assert_eq!(client.analyze(&url, None).await.status, 202);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_outlives_the_recent_result_window_and_expires_after_24_hours() {
    // Mid-month, so that a day later is the same balance month.
    let (app, clock) = cova_tests::spawn_on_clock("2026-06-10T12:00:00Z", |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let url = tiktok_url(TikTokScenario::Normal, 8);
    let job = client.analyze(&url, None).await.ok();
    let job_id = job["job_id"].as_str().expect("id").to_owned();
    client.wait_job(&job_id).await;
    let recent = client.analyze(&url, Some("order-9")).await.ok();
    assert_eq!(
        (recent["job_id"].as_str(), recent["deduplicated"].as_str()),
        (Some(job_id.as_str()), Some("recent_result"))
    );
    // Six minutes on, the result is no longer recent; the key still returns the same job.
    clock.advance(std::time::Duration::from_secs(6 * 60));
    let repeat = client.analyze(&url, Some("order-9")).await;
    assert_eq!(repeat.status, 200);
    assert_eq!(repeat.ok()["job_id"], job_id.as_str());
    assert_eq!(used(&app, &token).await.0, 8, "charged once");
    // A day later the key is forgotten: the same key starts a new job.
    clock.advance(std::time::Duration::from_secs(24 * 60 * 60));
    let fresh = client.analyze(&url, Some("order-9")).await;
    assert_eq!(fresh.status, 202);
    assert_ne!(fresh.ok()["job_id"], job_id.as_str());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_small_jobs_run_at_once_on_a_balance_of_5000_and_the_fourth_gets_429() {
    let sim = SimConfig { latency_ms: 300, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&token));
    let mut ids = Vec::new();
    for n in [40, 41, 42] {
        let reply = client.analyze(&tiktok_url(TikTokScenario::Normal, n), None).await;
        assert_eq!(reply.status, 202, "job of {n} comments accepted");
        ids.push(reply.ok()["job_id"].as_str().expect("id").to_owned());
    }
    let (status, err) = client.analyze(&tiktok_url(TikTokScenario::Normal, 43), None).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (429, "concurrency_limit"));
    for id in &ids {
        let done = client.wait_job(id).await;
        assert_eq!((done["status"].as_str(), done["result"]["truncated"].as_bool()), (Some("complete"), Some(false)));
    }
    assert_eq!(used(&app, &token).await, (123, 0, 4_877));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_sharing_a_small_balance_never_overdraw_it_and_report_truncation() {
    let sim = SimConfig { latency_ms: 100, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let client = app.client(Some(&token));
    // All three are accepted before any learns its post's size (and holds for it): the
    // platform answers nothing until they are.
    app.sim.pause();
    let mut ids = Vec::new();
    for n in [60, 61, 62] {
        let reply = client.analyze(&tiktok_url(TikTokScenario::Normal, n), None).await;
        assert_eq!(reply.status, 202);
        ids.push(reply.ok()["job_id"].as_str().expect("id").to_owned());
    }
    app.sim.resume();
    // The balance covers one post whole; the next is cut at what is left once the first has
    // settled (never to a sliver while it runs); the third finds nothing left and ends
    // `quota_exceeded`, charged nothing.
    let mut collected = 0;
    let mut truncated = 0;
    let mut refused = 0;
    for (id, size) in ids.iter().zip([60, 61, 62]) {
        let done = client.wait_job(id).await;
        if done["status"] == "failed" {
            assert_eq!(done["error"]["code"], "quota_exceeded", "{done}");
            refused += 1;
            continue;
        }
        assert_eq!(done["status"], "complete", "{done}");
        let got = count_all(&done["result"]["comments"]);
        collected += got;
        if done["result"]["truncated"] == true {
            truncated += 1;
            assert!(got < size, "a truncated job collected part of its post");
            assert_eq!(done["result"]["truncated_reason"], "balance");
        } else {
            assert_eq!(got, size, "an untruncated job collected its whole post");
        }
    }
    assert_eq!((truncated, refused, collected), (1, 1, 100), "one whole, one cut at the rest, one refused");
    assert!(collected <= 100, "never more than the balance: {collected}");
    assert!(truncated >= 1, "a job that ran out of balance says so");
    let (spent, reserved, remaining) = used(&app, &token).await;
    assert_eq!(
        (spent, reserved, remaining),
        (collected as i64, 0, 100 - collected as i64),
        "charged what was collected"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_any_input_are_400_and_never_stored() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let client = app.client(Some(&token));
    let nul = format!("{}\u{0}", tiktok_url(TikTokScenario::Normal, 5));
    let (status, err) = client.analyze(&nul, None).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    let (status, err) = client.metadata(&nul).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    for path in ["/api/v1/analyze/%00", "/api/v1/analyze/a%0Ab", "/api/v1/analyze/x?limit=1%00"] {
        let (status, err) = client.get::<Value>(path).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{path}");
    }
    assert_eq!(app.job_progress().await.total, 0, "nothing was stored");
    app.stop().await;
}

/// Requests the simulator saw for a TikTok post's page.
fn page_requests(app: &TestApp, id: u64) -> usize {
    app.sim.requests().iter().filter(|r| r.path.ends_with(&format!("/video/{id}"))).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lookups_of_one_post_share_one_fetch_and_spend_the_limit_once() {
    let sim = SimConfig { latency_ms: 200, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |_| {}).await;
    let (_, token) = app.integrator().await;
    let id = tiktok_post_id(TikTokScenario::Normal, 33);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let client = app.client(Some(&token));
        let url = format!("https://www.tiktok.com/@a/video/{id}");
        tasks.push(tokio::spawn(async move { client.metadata(&url).await }));
    }
    let mut fresh = 0;
    for t in tasks {
        let reply = t.await.expect("join");
        assert_eq!(reply.status, 200);
        fresh += usize::from(reply.ok()["cached"] == false);
    }
    assert_eq!(fresh, 1, "one request fetched, the others shared its answer");
    assert_eq!(page_requests(&app, id), 1, "one platform fetch");
    let client = app.client(Some(&token));
    assert_eq!(client.usage().await.ok().metadata.remaining, 9, "the limit was spent once");

    // Failures are shared too, and free.
    let gone = tiktok_post_id(TikTokScenario::Deleted, 3);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let client = app.client(Some(&token));
        let url = format!("https://www.tiktok.com/@a/video/{gone}");
        tasks.push(tokio::spawn(async move { client.metadata(&url).await }));
    }
    for t in tasks {
        let (status, err) = t.await.expect("join").err();
        assert_eq!((status.as_u16(), err.code.as_str()), (502, "parse_error"));
    }
    assert_eq!(page_requests(&app, gone), 1);
    assert_eq!(client.usage().await.ok().metadata.remaining, 9);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_limit_is_a_two_hour_window() {
    let app = spawn_app().await;
    let (_, token) = app.integrator().await;
    let client = app.client(Some(&token));
    for n in 0..10 {
        assert_eq!(client.metadata(&tiktok_url(TikTokScenario::Normal, 100 + n)).await.status, 200);
    }
    let reply = client.metadata(&tiktok_url(TikTokScenario::Normal, 200)).await;
    // Free again only when the first lookup is two hours old (a GCRA would say 12 minutes).
    let retry_after = reply.header_u64("retry-after").expect("Retry-After");
    assert!((7_190..=7_200).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(reply.header_u64("x-ratelimit-remaining"), Some(0));
    assert_eq!(reply.err().1.code, "rate_limited");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_links_are_resolved_only_within_the_limit_and_remembered() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 9);
    let short = format!("https://vm.tiktok.com/{}/", cova_sim::short_code(id, false));
    let short_requests = |app: &TestApp| app.sim.requests().iter().filter(|r| r.path.starts_with("/ZM")).count();
    // Resolved once for the analysis, then remembered: the lookup below needs no request.
    let job = client.analyze(&short, None).await.ok();
    assert_eq!(job["ref"], format!("tiktok:{id}"));
    client.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(client.metadata(&short).await.ok()["ref"], format!("tiktok:{id}"));
    assert_eq!(short_requests(&app), 1);
    // With the metadata limit spent, a new short link is refused before cova contacts the platform.
    for n in 0..9 {
        assert_eq!(client.metadata(&tiktok_url(TikTokScenario::Normal, 300 + n)).await.status, 200);
    }
    let other =
        format!("https://vm.tiktok.com/{}/", cova_sim::short_code(tiktok_post_id(TikTokScenario::Normal, 10), false));
    let (status, err) = client.metadata(&other).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (429, "rate_limited"));
    assert_eq!(short_requests(&app), 1, "no platform request for a refused caller");
    app.stop().await;
}
