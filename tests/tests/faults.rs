//! Backends that fail while cova works: connections cut under running jobs, backends that
//! refuse connections; what the outages cost (polls and `/usage` keep answering, jobs resume
//! within a lease, a search is refused with a retry and then finds the same) is measured here.
//! Networked backends only (the embedded ones have no connection to cut): these tests are
//! ignored by a plain `cargo test` and run by `make test-real` (and CI) with
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
    // A job created once the broker is back, as soon as a slot of the three frees (how soon
    // depends on the machine, not on a fixed wait).
    client.wait_job(&jobs[0]).await;
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

/// What a 10 s outage cost the polls and `/usage` requests of integrators polling once a second.
#[derive(Debug, Default)]
struct Served {
    ok: usize,
    failed: usize,
}

impl Served {
    fn share(&self) -> f64 {
        self.ok as f64 / (self.ok + self.failed).max(1) as f64
    }
}

/// Polls `job` and reads `/usage` once a second with each of `tokens` while `proxy` refuses
/// for 10 s (and for 2 s on either side), counting the answers.
async fn poll_through_outage(app: &cova_tests::TestApp, proxy: &Proxy, tokens: &[(String, String)]) -> Served {
    let stop = tokio_util::sync::CancellationToken::new();
    let mut pollers = Vec::new();
    for (token, job) in tokens {
        let client = app.client(Some(token));
        let (job, stop) = (job.clone(), stop.clone());
        pollers.push(tokio::spawn(async move {
            let mut served = Served::default();
            while !stop.is_cancelled() {
                let (polled, usage) = (client.job(&job).await, client.usage().await);
                for (what, status, error) in [
                    ("job poll", polled.status, polled.body.as_ref().err().map(|e| e.code.clone())),
                    ("usage", usage.status, usage.body.as_ref().err().map(|e| e.code.clone())),
                ] {
                    if status == 200 {
                        served.ok += 1;
                    } else {
                        // Said when it happens, so that a failed run tells which answer and when.
                        println!("{what} answered {status} {error:?} at {:?}", std::time::SystemTime::now());
                        served.failed += 1;
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            served
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("backend cut at {:?}", std::time::SystemTime::now());
    proxy.refuse(true);
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(10)).await;
    proxy.refuse(false);
    println!("backend back at {:?}", std::time::SystemTime::now());
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    let mut all = Served::default();
    for poller in pollers {
        let served = poller.await.expect("poller");
        all.ok += served.ok;
        all.failed += served.failed;
    }
    all
}

/// Jobs that run through the outage (slow pages), one per account, each with its token.
async fn running_jobs(app: &cova_tests::TestApp, accounts: usize, comments: u64) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for _ in 0..accounts {
        let (account, token) = app.integrator().await;
        app.grant(&account, 5_000).await;
        let url = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, comments));
        let job = app.client(Some(&token)).analyze(&url, None).await.ok()["job_id"].as_str().expect("id").to_owned();
        out.push((token, job));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: run with make test-real"]
async fn a_redis_outage_keeps_polls_and_usage_answering_and_no_limit_is_exceeded() {
    let cache_url = real_backend(CACHE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&cache_url)).await;
    let via_proxy = through(&cache_url, &proxy);
    let per_minute = 120;
    let app = spawn_app_with_sim(SimConfig { latency_ms: 200, ..SimConfig::default() }, |c| {
        c.cache.url = via_proxy;
        c.cache.timeout_ms = 1_000;
        c.limits.api_requests_per_minute = per_minute;
    })
    .await;
    let pollers = running_jobs(&app, 2, 400).await;
    // Another account sends as fast as it can, before, through and after the outage.
    let (_, greedy) = app.integrator().await;
    let greedy_client = app.client(Some(&greedy));
    let stop = tokio_util::sync::CancellationToken::new();
    let hammering = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let mut admitted = 0u32;
            while !stop.is_cancelled() {
                if greedy_client.usage().await.status == 200 {
                    admitted += 1;
                }
            }
            (admitted, started.elapsed())
        })
    };
    let served = poll_through_outage(&app, &proxy, &pollers).await;
    stop.cancel();
    let (admitted, over) = hammering.await.expect("hammering");
    println!(
        "redis outage of 10 s: {} of {} polls and /usage answered ({:.1}%); a greedy account was admitted {admitted} times in {:.1} s",
        served.ok,
        served.ok + served.failed,
        served.share() * 100.0,
        over.as_secs_f64()
    );
    assert!(served.share() >= 0.95, "{served:?}");
    // The general limit is a GCRA of `per_minute`: a burst of that many, then its steady rate.
    let bound = f64::from(per_minute) + over.as_secs_f64() * f64::from(per_minute) / 60.0 + 1.0;
    assert!(f64::from(admitted) <= bound, "{admitted} admitted; the limit allows {bound:.0} in {over:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn a_postgres_outage_keeps_polls_and_usage_answering_and_loses_no_job() {
    let admin_url = real_backend(cova_testdb::DATABASE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&admin_url)).await;
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(SimConfig { latency_ms: 200, ..SimConfig::default() }, |c| {
        through_proxy_failing_fast(c, proxy_port);
    })
    .await;
    let pollers = running_jobs(&app, 2, 300).await;
    let served = poll_through_outage(&app, &proxy, &pollers).await;
    println!(
        "postgres outage of 10 s: {} of {} polls and /usage answered ({:.1}%)",
        served.ok,
        served.ok + served.failed,
        served.share() * 100.0
    );
    assert!(served.share() >= 0.95, "{served:?}");
    for (token, job) in &pollers {
        let client = app.client(Some(token));
        let done = client.wait_job(job).await;
        assert_eq!(done["status"], "complete", "{}", done["error"]);
        assert_eq!(done["result"]["comments_total"], 300);
        let usage = client.usage().await.ok();
        assert_eq!((usage.comments.used, usage.comments.reserved), (300, 0), "charged once");
    }
    // Readiness says what is down while it is down, and recovers by itself.
    proxy.refuse(true);
    proxy.cut();
    let client = app.client(None);
    cova_tests::eventually("readiness reports the database", async || {
        client.get::<serde_json::Value>("/readyz").await.status == 503
    })
    .await;
    proxy.refuse(false);
    cova_tests::eventually("readiness recovers", async || {
        client.get::<serde_json::Value>("/readyz").await.status == 200
    })
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn a_search_while_the_database_is_down_is_503_with_a_retry_and_finds_the_same_after() {
    let admin_url = real_backend(cova_testdb::DATABASE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&admin_url)).await;
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        through_proxy_failing_fast(c, proxy_port);
    })
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    client.collect(tiktok_post_id(TikTokScenario::Normal, 90)).await;
    let query = [("q", "price"), ("sort", "likes")];
    let before = client.search(&query).await.ok();
    assert!(before["items"].as_array().is_some_and(|items| !items.is_empty()), "{before}");

    proxy.refuse(true);
    proxy.cut();
    // A pooled connection may not know yet that it was cut: the first answers can be late.
    cova_tests::eventually("a search refused while the database is down", async || {
        client.search(&query).await.status == 503
    })
    .await;
    let reply = client.search(&query).await;
    assert_eq!(reply.header_u64("retry-after"), Some(5), "a retry is offered");
    let (_, err) = reply.err();
    assert_eq!(err.code, "unavailable");
    assert!(!err.detail.is_empty() && !err.detail.contains("postgres"), "{}", err.detail);
    // What needs no database goes on answering.
    assert_eq!(app.client(None).get::<serde_json::Value>("/healthz").await.status, 200);

    proxy.refuse(false);
    cova_tests::eventually("the search answering again", async || client.search(&query).await.status == 200).await;
    assert_eq!(client.search(&query).await.ok(), before, "the same hits, in the same order");
    app.stop().await;
}

/// The app's database, reached directly (the app's own goes through `proxy`).
fn direct_db(app: &cova_tests::TestApp, upstream: std::net::SocketAddr) -> cova_storage::Db {
    let mut config = app.config.database.clone();
    config.url = on_port(&config.url, upstream.port());
    cova_storage::Db::connect(&config).expect("direct pool")
}

/// The database URL `url` on another port (same host, database and user).
fn on_port(url: &str, port: u16) -> String {
    let mut url = url::Url::parse(url).expect("database url");
    let _ = url.set_port(Some(port));
    url.to_string()
}

/// Points the app's database at the proxy on `port`.
fn through_proxy(c: &mut cova_config::Config, port: u16) {
    c.database.url = on_port(&c.database.url, port);
}

/// [`through_proxy`], with a second's wait for a connection: an outage shows in a second.
fn through_proxy_failing_fast(c: &mut cova_config::Config, port: u16) {
    through_proxy(c, port);
    c.database.acquire_timeout_ms = 1_000;
    c.database.connect_timeout_ms = 1_000;
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

/// The jobs' states once every one has finished (waiting at most two minutes: a job an outage
/// caught finishes only when its lease runs out).
async fn finished(db: &cova_storage::Db, ids: &[String]) -> Vec<(String, Option<i64>)> {
    cova_tests::until_within("the jobs caught by the outage to finish", Duration::from_secs(120), async || {
        let states = job_states(db, ids).await;
        states.iter().all(|(s, _)| s == "complete" || s == "failed").then_some(states)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn jobs_cut_off_by_a_ten_second_database_outage_finish_within_a_lease_of_its_end() {
    let admin_url = real_backend(cova_testdb::DATABASE_URL_VAR);
    let upstream = upstream_of(&admin_url);
    let proxy = Proxy::spawn(upstream).await;
    let sim = SimConfig { latency_ms: 80, ..SimConfig::default() };
    // The deployed defaults: a 15 s lease, retries from 2 s.
    let defaults = cova_config::ScraperConfig::default();
    let lease_ms = i64::try_from(defaults.lease_ms).expect("lease");
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(sim, |c| {
        through_proxy_failing_fast(c, proxy_port);
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
    cova_tests::eventually("every job under way", async || {
        let mut started = 0;
        for id in &ids {
            let job = cova_storage::repo::jobs::get(&db, id).await.expect("read").expect("job");
            started += usize::from(job.comments_collected > 0);
        }
        started == ids.len()
    })
    .await;
    proxy.refuse(true);
    proxy.cut();
    let cut = cova_domain::time::now_ms();
    tokio::time::sleep(Duration::from_secs(10)).await;
    proxy.refuse(false);
    let back = cova_domain::time::now_ms();

    let states = finished(&db, &ids).await;
    // The jobs the outage caught running (any that finished before it are not measured).
    let after: Vec<i64> = states.iter().filter_map(|(_, f)| f.filter(|at| *at > cut)).map(|at| at - back).collect();
    println!("database outage of 10 s: jobs finished {after:?} ms after it ended (lease {lease_ms} ms)");
    assert!(!after.is_empty(), "the outage caught no job running");
    for ((status, _), ms) in states.iter().zip(&after) {
        assert_eq!(status, "complete");
        assert!(*ms <= lease_ms + 15_000, "a job finished {ms} ms after the outage; the bound is the lease + 15 s");
    }
    let total: i64 = sizes.iter().map(|n| *n as i64).sum();
    let balance = cova_storage::repo::balances::current(&db, &account.id, cova_domain::time::now_ms()).await;
    let balance = balance.expect("the balance");
    assert_eq!((balance.spent, balance.reserved), (total, 0), "each job charged exactly once");
    // The account's copy of its usage catches up with the database (within about a second
    // of the last job's end after the outage).
    cova_tests::eventually("/usage to show the charges", async || {
        let usage = client.usage().await.ok();
        (usage.comments.used, usage.comments.reserved) == (total, 0)
    })
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn a_webhook_sent_again_after_its_outcome_was_lost_counts_two_attempts() {
    use cova_tests::receiver::{Receiver, TestCa};
    const HOST: &str = "hooks.test";
    let admin_url = real_backend(cova_testdb::DATABASE_URL_VAR);
    let upstream = upstream_of(&admin_url);
    let proxy = Proxy::spawn(upstream).await;
    let ca = TestCa::new();
    let receiver = Receiver::spawn(&ca, HOST).await;
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        through_proxy_failing_fast(c, proxy_port);
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
    let delivery = cova_tests::until_within("the webhook recorded as delivered", Duration::from_secs(40), async || {
        let log = cova_storage::repo::deliveries::list(&db, &account.id, None, 10).await.expect("log");
        log.into_iter().find(|d| d.state == cova_storage::repo::deliveries::State::Delivered)
    })
    .await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "sent twice: the outcome of the first send was lost");
    let ids: std::collections::BTreeSet<&str> = received.iter().filter_map(|r| r.header("x-event-id")).collect();
    assert_eq!(ids.len(), 1, "the same X-Event-Id both times");
    assert_eq!(delivery.attempts, 2, "every send counted");
    app.stop().await;
}

/// How one kind of poll fared through an outage.
#[derive(Debug, Default, Clone)]
struct Polls {
    ok: usize,
    failed: usize,
    /// The slowest answer, in ms.
    slowest_ms: u128,
}

impl Polls {
    fn note(&mut self, ok: bool, took: Duration) {
        if ok {
            self.ok += 1
        } else {
            self.failed += 1
        }
        self.slowest_ms = self.slowest_ms.max(took.as_millis());
    }

    fn share(&self) -> f64 {
        self.ok as f64 / (self.ok + self.failed).max(1) as f64
    }
}

/// What an integrator polls: a running job, a job created just before the outage and never
/// polled, a complete job, an AI job, a batch, and `/usage`; each every 250 ms.
struct Watched {
    token: String,
    running: String,
    fresh: String,
    complete: String,
    ai: String,
    batch: String,
}

async fn poll_all(
    app: &cova_tests::TestApp,
    w: &Watched,
    stop: tokio_util::sync::CancellationToken,
) -> Vec<(&'static str, Polls)> {
    let client = app.client(Some(&w.token));
    let paths = [
        ("running job", format!("/api/v1/analyze/{}", w.running)),
        ("first poll of a new job", format!("/api/v1/analyze/{}", w.fresh)),
        ("complete job", format!("/api/v1/analyze/{}?limit=10", w.complete)),
        ("AI job", format!("/api/v1/ai/jobs/{}", w.ai)),
        ("batch", format!("/api/v1/analyze/batch/{}", w.batch)),
        ("/usage", "/api/v1/usage".to_owned()),
    ];
    let mut polls: Vec<(&'static str, Polls)> = paths.iter().map(|(name, _)| (*name, Polls::default())).collect();
    while !stop.is_cancelled() {
        for (n, (_, path)) in paths.iter().enumerate() {
            let started = Instant::now();
            let (status, _, _) = client.raw(client.request(reqwest::Method::GET, path)).await;
            polls[n].1.note(status == 200, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    polls
}

/// A database that refuses connections, one cut off by a partition that drops every packet
/// (connections left hanging), and one whose server stalls (connections open and acknowledged,
/// nothing answered, as a stopped process): through each 10 s outage at least 95 % of the polls
/// of every kind answer, none waits more than a second, and the jobs caught running finish
/// within a lease and 15 s of its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn polls_answer_at_once_through_a_refused_a_partitioned_and_a_stalled_database() {
    let admin_url = real_backend(cova_testdb::DATABASE_URL_VAR);
    let upstream = upstream_of(&admin_url);
    let proxy = Proxy::spawn(upstream).await;
    let proxy_port = proxy.addr.port();
    let defaults = cova_config::ScraperConfig::default();
    let lease_ms = i64::try_from(defaults.lease_ms).expect("lease");
    // The deployed database bounds and scraper: only the address goes through the proxy.
    // Posts small enough that what a job takes after the outage is its recovery, not its size.
    let app = spawn_app_with_sim(SimConfig { latency_ms: 80, ..SimConfig::default() }, |c| {
        through_proxy(c, proxy_port);
        c.scraper = defaults.clone();
        c.limits.api_requests_per_minute = 100_000;
    })
    .await;
    let db = direct_db(&app, upstream);
    for outage in ["refused", "partitioned", "stalled"] {
        let (account, token) = app.integrator().await;
        app.grant(&account, 20_000).await;
        let client = app.client(Some(&token));
        let post = |n: u64| format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, n));
        // A complete job, and an AI job on its comments.
        let complete =
            client.collect(tiktok_post_id(TikTokScenario::Normal, 12)).await["job_id"].as_str().expect("id").to_owned();
        let r#ref = format!("tiktok:{}", tiktok_post_id(TikTokScenario::Normal, 12));
        let quote = client.post_json("/api/v1/ai/quote", serde_json::json!({"ref": r#ref})).await.ok();
        let ai = client.post_json("/api/v1/ai/run", serde_json::json!({"quote_id": quote["quote_id"]})).await.ok();
        let ai = ai["id"].as_str().expect("AI job id").to_owned();
        // A long job under way, a batch, and a job created just before the outage.
        let running = client.analyze(&post(500), None).await.ok()["job_id"].as_str().expect("id").to_owned();
        let batch = client.post_json("/api/v1/analyze/batch", serde_json::json!({"urls": [post(700)]})).await.ok();
        let batch = batch["batch_id"].as_str().expect("batch id").to_owned();
        cova_tests::eventually("the long job under way", async || {
            let job = cova_storage::repo::jobs::get(&db, &running).await.expect("read").expect("job");
            job.comments_collected > 0
        })
        .await;
        let fresh = client.analyze(&post(400), None).await.ok()["job_id"].as_str().expect("id").to_owned();
        let watched =
            Watched { token: token.clone(), running: running.clone(), fresh: fresh.clone(), complete, ai, batch };

        let stop = tokio_util::sync::CancellationToken::new();
        let polling = {
            let (stop, app) = (stop.clone(), &app);
            async move { poll_all(app, &watched, stop).await }
        };
        let cut_off = async {
            match outage {
                "partitioned" => proxy.partition(true),
                "stalled" => proxy.stall(true),
                _ => {
                    proxy.refuse(true);
                    proxy.cut();
                }
            }
            let cut = cova_domain::time::now_ms();
            tokio::time::sleep(Duration::from_secs(10)).await;
            proxy.partition(false);
            proxy.stall(false);
            proxy.refuse(false);
            let back = cova_domain::time::now_ms();
            // Polled on past the end: the first reads after it must find the database again.
            tokio::time::sleep(Duration::from_secs(3)).await;
            stop.cancel();
            (cut, back)
        };
        let (polls, (cut, back)) = tokio::join!(polling, cut_off);
        for (kind, p) in &polls {
            println!(
                "postgres {outage} 10 s: {kind}: {} of {} answered ({:.1}%), slowest {} ms",
                p.ok,
                p.ok + p.failed,
                p.share() * 100.0,
                p.slowest_ms
            );
        }
        for (kind, p) in &polls {
            assert!(p.share() >= 0.95, "{outage}: {kind}: {p:?}");
            assert!(p.slowest_ms <= 1_000, "{outage}: {kind} waited {} ms: {p:?}", p.slowest_ms);
        }
        // The jobs the outage caught finish within a lease and 15 s of its end.
        let ids = [running, fresh];
        let states = finished(&db, &ids).await;
        for (status, finished) in &states {
            assert_eq!(status, "complete", "{outage}");
            let after = finished.unwrap_or(0).max(cut) - back;
            println!(
                "postgres {outage} 10 s: a job caught by it finished {after} ms after it ended (lease {lease_ms} ms)"
            );
            assert!(after <= lease_ms + 15_000, "{outage}: finished {after} ms after the outage");
        }
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn a_database_outage_during_a_spike_check_records_nothing_and_the_next_check_records_once() {
    use cova_sim::Tone;
    use serde_json::{Value, json};
    let admin_url = real_backend(cova_testdb::DATABASE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&admin_url)).await;
    let port = proxy.addr.port();
    let (app, clock) = cova_tests::spawn_on_clock("2026-06-01T00:00:00Z", |c| {
        through_proxy_failing_fast(c, port);
    })
    .await;
    let hour = 3_600_000_i64;
    let t0 = clock.now_ms();
    app.sim.set_clock_ms(t0);
    let (account, token) = app.integrator().await;
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&token));
    // A day at twelve comments an hour, then 60 in the last 40 minutes: collected while spike
    // alerts are off, so that the check below is the first of this spike.
    client.put_json("/api/v1/spike-alerts/settings", json!({"enabled": false})).await.ok();
    let id = tiktok_post_id(TikTokScenario::Normal, 0).to_string();
    let r#ref = format!("tiktok:{id}");
    let day = t0 + 24 * hour;
    let mut posted: Vec<(i64, Tone)> =
        (0..24 * 12).map(|i| ((t0 + i * hour / 12 + 90_000) / 1000, Tone::Usual)).collect();
    posted.extend((0..60).map(|i| ((day - 40 * 60_000 + i * 40_000) / 1000, Tone::Usual)));
    app.sim.post_comments(&id, &posted);
    clock.set(day);
    app.sim.set_clock_ms(day);
    let job = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
    client.wait_job(job["job_id"].as_str().expect("job")).await;
    app.notifier_caught_up().await;
    client.put_json("/api/v1/spike-alerts/settings", json!({"enabled": true})).await.ok();

    // The database goes away during the check: an error, nothing recorded.
    proxy.refuse(true);
    proxy.cut();
    let failed = cova_runtime::spike_alerts::check(app.db(), &account.id, &r#ref, day).await;
    assert!(failed.is_err(), "{failed:?}");
    proxy.refuse(false);
    // The check again (the notifier retries the job's end) records the alert once.
    let recorded = cova_tests::until("the check after the outage", async || {
        cova_runtime::spike_alerts::check(app.db(), &account.id, &r#ref, day).await.ok()
    })
    .await;
    assert_eq!(recorded, 1);
    let again = cova_runtime::spike_alerts::check(app.db(), &account.id, &r#ref, day).await.expect("check");
    assert_eq!(again, 0, "the same spike is one alert");
    let listed = client.get::<Value>("/api/v1/spike-alerts").await.ok();
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{listed}");
    let in_window = posted.iter().filter(|(t, _)| t * 1000 >= day - hour).count();
    assert_eq!((&items[0]["kind"], &items[0]["comments"]), (&json!("volume"), &json!(in_window)), "{listed}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn a_creator_refresh_cut_short_by_an_outage_gives_its_claim_back() {
    use cova_sim::{SimCreator, SimCreatorPost};
    use reqwest::{Method, StatusCode};
    const BRAND: u64 = 6_800_000_000_000_000_001;
    let admin_url = real_backend(cova_testdb::DATABASE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&admin_url)).await;
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        through_proxy_failing_fast(c, proxy_port);
    })
    .await;
    app.sim.add_creator(SimCreator::tiktok(BRAND, "brand"));
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let client = app.client(Some(&token));
    let add = client
        .request(Method::POST, "/api/v1/creators")
        .json(&serde_json::json!({"url": "https://www.tiktok.com/@brand"}));
    assert_eq!(client.raw(add).await.0, StatusCode::CREATED);
    let refresh = "/api/v1/creators/tiktok:user:6800000000000000001/refresh";

    // A refresh whose listing answers slowly; the database goes away while it waits.
    app.sim.set_latency_ms(1_500);
    let asked_before = app.sim.requests().len();
    let asking = {
        let client = client.clone();
        tokio::spawn(async move { client.raw(client.request(Method::POST, refresh)).await.0 })
    };
    cova_tests::eventually("the refresh to ask the platform", async || app.sim.requests().len() > asked_before).await;
    proxy.refuse(true);
    proxy.cut();
    assert_eq!(asking.await.expect("refresh"), StatusCode::SERVICE_UNAVAILABLE, "the run could not record its end");
    app.sim.set_latency_ms(0);
    proxy.refuse(false);

    // The database is back: the next refresh runs and finds the post published meanwhile,
    // rather than answering `run_in_progress` until the claim (a minute) lapses.
    let published = cova_domain::time::now_ms();
    let id = tiktok_post_id(TikTokScenario::Normal, 7).to_string();
    app.sim.publish(&BRAND.to_string(), SimCreatorPost { id: id.clone(), published_at_ms: published, pinned: false });
    let run = cova_tests::until_within("a refresh to run again", Duration::from_secs(20), async || {
        let (status, _, body) = client.raw(client.request(Method::POST, refresh)).await;
        assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR);
        (status == StatusCode::OK).then(|| serde_json::from_slice::<serde_json::Value>(&body).expect("JSON"))
    })
    .await;
    assert_eq!(run["found"], serde_json::json!([format!("tiktok:{id}")]), "{run}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: run with make test-real"]
async fn a_finished_result_s_copies_are_kept_as_long_as_the_result() {
    let cache_url = real_backend(CACHE_URL_VAR);
    let app = spawn_app_with_sim(SimConfig::default(), |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let url = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, 30));
    let job = client.analyze(&url, None).await.ok()["job_id"].as_str().expect("id").to_owned();
    assert_eq!(client.wait_job(&job).await["status"], "complete");
    // The copies an outage answers from outlive the ten minutes of a running job's: a complete
    // result never changes, so they last as long as it does (13 days left at the least).
    let redis = redis::Client::open(cache_url.as_str()).expect("redis url");
    let mut conn = redis.get_multiplexed_async_connection().await.expect("redis");
    let prefix = &app.config.cache.prefix;
    for key in [cova_snapshots::job_key(&job), cova_snapshots::first_page_key(&job)] {
        let left: i64 = redis::cmd("PTTL").arg(format!("{prefix}:{key}")).query_async(&mut conn).await.expect("PTTL");
        assert!(left > 13 * 86_400_000, "{key} is kept for {left} ms");
    }
    app.stop().await;
}

/// A stalled PostgreSQL (connections open and acknowledged, nothing answered): a read that no
/// copy can answer gives up within the statement bound (`statement_timeout_ms` +
/// `io_timeout_ms`) with a 503 instead of waiting for the stall to end, the copies answer
/// meanwhile, and once the server answers again the same read is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with make test-real"]
async fn a_read_into_a_stalled_database_gives_up_within_its_bound_and_copies_answer_meanwhile() {
    let admin_url = real_backend(cova_testdb::DATABASE_URL_VAR);
    let proxy = Proxy::spawn(upstream_of(&admin_url)).await;
    let proxy_port = proxy.addr.port();
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        through_proxy(c, proxy_port);
        c.database.statement_timeout_ms = 1_500;
        c.database.io_timeout_ms = 1_000;
    })
    .await;
    let bound = Duration::from_millis(2_500);
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let job =
        client.collect(tiktok_post_id(TikTokScenario::Normal, 12)).await["job_id"].as_str().expect("id").to_owned();
    let first = client.get::<serde_json::Value>(&format!("/api/v1/analyze/{job}?limit=5")).await.ok();
    let cursor = first["result"]["next_cursor"].as_str().expect("a second page").to_owned();
    let second = format!("/api/v1/analyze/{job}?limit=5&cursor={cursor}");

    proxy.stall(true);
    let started = Instant::now();
    let (status, _, body) = client.raw(client.request(reqwest::Method::GET, &second)).await;
    let waited = started.elapsed();
    println!("a read into a stalled database answered {status} after {} ms", waited.as_millis());
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    assert!(waited < bound + Duration::from_secs(2), "waited {waited:?} for a stalled database");
    // The kept copies answer while it is stalled: the job's first page, at once.
    let started = Instant::now();
    let (status, _, body) =
        client.raw(client.request(reqwest::Method::GET, &format!("/api/v1/analyze/{job}?limit=5"))).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(started.elapsed() < Duration::from_secs(1), "the copy waited {:?}", started.elapsed());
    let started = Instant::now();
    let (status, _, body) = client.raw(client.request(reqwest::Method::GET, "/api/v1/usage")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(started.elapsed() < Duration::from_secs(1), "/usage waited {:?}", started.elapsed());

    proxy.stall(false);
    cova_tests::eventually("the second page once the database answers", async || {
        client.raw(client.request(reqwest::Method::GET, &second)).await.0 == 200
    })
    .await;
    app.stop().await;
}
