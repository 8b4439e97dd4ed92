//! Backends that fail while cova works: connections cut under running jobs, backends that
//! refuse connections. Networked backends only (the embedded ones have no connection to cut):
//! these tests are ignored by a plain `cargo test` and run by `make test-real` (and CI) with
//! `--include-ignored`, where a missing backend fails them.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::proxy::{Proxy, through, upstream_of};
use cova_tests::{CACHE_URL_VAR, QUEUE_URL_VAR, real_backend, spawn_app_with_sim};
use std::time::Duration;
use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs RabbitMQ: run with make test-real"]
async fn cutting_the_broker_connection_loses_no_job_and_charges_once() {
    let queue_url = real_backend(QUEUE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&queue_url)).await;
    let via_proxy = through(&queue_url, &proxy);
    let sim = SimConfig { latency_ms: 40, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |c| {
        c.queue.url = via_proxy;
        c.scraper.lease_ms = 2_000;
        c.scraper.retry_base_ms = 100;
    })
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 20_000).await;
    let client = app.client(Some(&token));
    let sizes = [60u64, 90, 120];
    let mut jobs = Vec::new();
    for n in sizes {
        let url = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, n));
        jobs.push(client.analyze(&url, None).await.ok()["job_id"].as_str().expect("id").to_owned());
    }
    // Cut every broker connection twice while the jobs run, then once while it refuses.
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.cut();
    }
    proxy.refuse(true);
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.refuse(false);
    // A job created while the broker was away is published once it returns.
    let late = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, 30));
    jobs.push(client.analyze(&late, None).await.ok()["job_id"].as_str().expect("id").to_owned());

    let mut total = 0;
    for job_id in &jobs {
        let done = client.wait_job(job_id).await;
        assert_eq!(done["status"], "complete", "{done}");
        total += done["result"]["comments_total"].as_i64().expect("total");
    }
    assert_eq!(total, 60 + 90 + 120 + 30);
    let usage = client.usage().await.ok();
    assert_eq!((usage.comments.used, usage.comments.reserved), (total, 0), "each job charged exactly once");
    app.stop().await;
}

/// Answers while `proxy` refuses: 503 `unavailable` with Retry-After, fast; then recovery.
async fn outage_and_recovery(app: &cova_tests::TestApp, proxy: &Proxy, token: &str) {
    let client = app.client(Some(token));
    assert_eq!(client.usage().await.status, 200);
    proxy.refuse(true);
    proxy.cut();
    for _ in 0..3 {
        let started = Instant::now();
        let reply = client.usage().await;
        assert!(started.elapsed() < Duration::from_secs(10), "a down backend must not hang a request");
        assert!(reply.header_u64("retry-after").is_some(), "Retry-After on 503");
        let (status, err) = reply.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (503, "unavailable"));
    }
    let (status, _) = client.get::<serde_json::Value>("/readyz").await.err();
    assert_eq!(status.as_u16(), 503);
    proxy.refuse(false);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if client.usage().await.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "cova did not recover after the backend returned");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(client.get::<serde_json::Value>("/readyz").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: run with make test-real"]
async fn redis_down_gives_503_and_cova_recovers_by_itself() {
    let cache_url = real_backend(CACHE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&cache_url)).await;
    let via_proxy = through(&cache_url, &proxy);
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        c.cache.url = via_proxy;
        c.cache.timeout_ms = 1_000;
    })
    .await;
    let (_, token) = app.integrator().await;
    outage_and_recovery(&app, &proxy, &token).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn postgres_down_gives_503_and_no_job_is_lost_or_charged_twice() {
    let admin_url = real_backend(cova_storage::testing::DATABASE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&admin_url)).await;
    let sim = SimConfig { latency_ms: 60, ..SimConfig::default() };
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(sim, |c| {
        let mut url = url::Url::parse(&c.database.url).expect("database url");
        let _ = url.set_port(Some(proxy_port));
        c.database.url = url.to_string();
        c.database.acquire_timeout_ms = 1_000;
        c.database.connect_timeout_ms = 1_000;
        c.auth.token_cache_ms = 0;
        c.scraper.retry_base_ms = 200;
        c.scraper.max_attempts = 20;
        c.scraper.lease_ms = 1_500;
    })
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&token));
    let job = client
        .analyze(&format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, 150)), None)
        .await
        .ok();
    tokio::time::sleep(Duration::from_millis(300)).await;
    outage_and_recovery(&app, &proxy, &token).await;
    let done = client.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "complete", "{}", done["error"]);
    assert_eq!(done["result"]["comments_total"], 150);
    let usage = client.usage().await.ok();
    assert_eq!((usage.comments.used, usage.comments.reserved), (150, 0), "charged once");
    app.stop().await;
}
