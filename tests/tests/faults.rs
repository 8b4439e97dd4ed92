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

/// The app's database, reached directly (the app's own goes through `proxy`).
fn direct_db(app: &cova_tests::TestApp, upstream: std::net::SocketAddr) -> cova_storage::Db {
    let mut config = app.config.database.clone();
    let mut url = url::Url::parse(&config.url).expect("database url");
    let _ = url.set_port(Some(upstream.port()));
    config.url = url.to_string();
    cova_storage::Db::connect(&config).expect("direct pool")
}

/// (status, finished_at) of each job, read directly.
async fn job_states(db: &cova_storage::Db, ids: &[String]) -> Vec<(String, Option<i64>)> {
    let mut out = Vec::new();
    for id in ids {
        let job = cova_storage::repo::jobs::get(db, id).await.expect("read").expect("job");
        out.push((job.status.as_str().to_owned(), job.finished_at));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn jobs_cut_off_by_a_ten_second_database_outage_finish_within_a_lease_of_its_end() {
    let admin_url = real_backend(cova_storage::testing::DATABASE_URL_VAR);
    let upstream = upstream_of(&admin_url);
    let proxy = Proxy::spawn(upstream).await;
    let sim = SimConfig { latency_ms: 80, ..SimConfig::default() };
    // The deployed defaults: a 15 s lease, retries from 2 s.
    let defaults = cova_config::ScraperConfig::default();
    let lease_ms = i64::try_from(defaults.lease_ms).expect("lease");
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(sim, |c| {
        let mut url = url::Url::parse(&c.database.url).expect("database url");
        let _ = url.set_port(Some(proxy_port));
        c.database.url = url.to_string();
        c.database.acquire_timeout_ms = 1_000;
        c.database.connect_timeout_ms = 1_000;
        c.scraper = defaults.clone();
    })
    .await;
    let db = direct_db(&app, upstream);
    let (account, token) = app.integrator().await;
    app.grant(&account, 20_000).await;
    let client = app.client(Some(&token));
    let sizes = [400u64, 500, 600];
    let mut ids = Vec::new();
    for n in sizes {
        let url = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, n));
        ids.push(client.analyze(&url, None).await.ok()["job_id"].as_str().expect("id").to_owned());
    }
    // Every job under way, then the database goes away for 10 s.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut started = 0;
        for id in &ids {
            let job = cova_storage::repo::jobs::get(&db, id).await.expect("read").expect("job");
            started += usize::from(job.comments_collected > 0);
        }
        if started == ids.len() {
            break;
        }
        assert!(Instant::now() < deadline, "the jobs never got under way");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy.refuse(true);
    proxy.cut();
    let cut = cova_domain::time::now_ms();
    tokio::time::sleep(Duration::from_secs(10)).await;
    proxy.refuse(false);
    let back = cova_domain::time::now_ms();

    let deadline = Instant::now() + Duration::from_secs(120);
    let states = loop {
        let states = job_states(&db, &ids).await;
        if states.iter().all(|(s, _)| s == "complete" || s == "failed") {
            break states;
        }
        if std::env::var("COVA_DEBUG_FAULTS").is_ok() {
            let mut line = Vec::new();
            for id in &ids {
                let j = cova_storage::repo::jobs::get(&db, id).await.expect("read").expect("job");
                line.push(format!("{}:{}", j.status.as_str(), j.comments_collected));
            }
            println!("{} {line:?}", cova_domain::time::now_ms() - back);
        }
        assert!(Instant::now() < deadline, "jobs still unfinished two minutes after the outage: {states:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The jobs the outage caught running (any that finished before it are not measured).
    let after: Vec<i64> = states.iter().filter_map(|(_, f)| f.filter(|at| *at > cut)).map(|at| at - back).collect();
    println!("database outage of 10 s: jobs finished {after:?} ms after it ended (lease {lease_ms} ms)");
    assert!(!after.is_empty(), "the outage caught no job running");
    for ((status, _), ms) in states.iter().zip(&after) {
        assert_eq!(status, "complete");
        assert!(*ms <= lease_ms + 15_000, "a job finished {ms} ms after the outage; the bound is the lease + 15 s");
    }
    let usage = client.usage().await.ok();
    let total: i64 = sizes.iter().map(|n| *n as i64).sum();
    assert_eq!((usage.comments.used, usage.comments.reserved), (total, 0), "each job charged exactly once");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn a_webhook_sent_again_after_its_outcome_was_lost_counts_two_attempts() {
    use cova_tests::receiver::{Receiver, TestCa};
    const HOST: &str = "hooks.test";
    let admin_url = real_backend(cova_storage::testing::DATABASE_URL_VAR);
    let upstream = upstream_of(&admin_url);
    let proxy = Proxy::spawn(upstream).await;
    let ca = TestCa::new();
    let receiver = Receiver::spawn(&ca, HOST).await;
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        let mut url = url::Url::parse(&c.database.url).expect("database url");
        let _ = url.set_port(Some(proxy_port));
        c.database.url = url.to_string();
        c.database.acquire_timeout_ms = 1_000;
        c.database.connect_timeout_ms = 1_000;
        cova_tests::use_receivers(c, &ca, HOST);
        // A claim outlives one send by 5 s: 2 × 500 ms + 3 s + 5 s.
        c.notifier.connect_timeout_ms = 500;
        c.notifier.timeout_ms = 3_000;
    })
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let hook = format!("{}/hook", receiver.base_url);
    client
        .put_json("/api/v1/notification-channels", serde_json::json!({"webhook": {"url": hook, "job_events": true}}))
        .await
        .ok();
    // The receiver takes a while to answer; the database goes away while it does, so the
    // notifier cannot record that the event was delivered.
    receiver.set_latency(Duration::from_millis(1_500));
    client.collect(tiktok_post_id(TikTokScenario::Normal, 3)).await;
    cova_tests::eventually("the first send arrives", async || receiver.count() >= 1).await;
    proxy.refuse(true);
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.refuse(false);
    receiver.set_latency(Duration::ZERO);
    // The claim expires and the event is sent again, with the same id.
    let db = direct_db(&app, upstream);
    let deadline = Instant::now() + Duration::from_secs(40);
    let delivery = loop {
        let log = cova_storage::repo::deliveries::list(&db, &account.id, None, 10).await.expect("log");
        if let Some(d) = log.into_iter().find(|d| d.state == cova_storage::repo::deliveries::State::Delivered) {
            break d;
        }
        assert!(Instant::now() < deadline, "the webhook was never recorded as delivered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let received = receiver.received();
    assert_eq!(received.len(), 2, "sent twice: the outcome of the first send was lost");
    let ids: std::collections::BTreeSet<&str> = received.iter().filter_map(|r| r.header("x-event-id")).collect();
    assert_eq!(ids.len(), 1, "the same X-Event-Id both times");
    assert_eq!(delivery.attempts, 2, "every send counted");
    app.stop().await;
}
