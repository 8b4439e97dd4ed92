//! Two `cova scraper` processes and a gateway sharing one TikTok route through Redis: the
//! platform (the simulator) never receives requests faster than the configured pace, whatever
//! the mix of jobs and lookups. Needs PostgreSQL, Redis and RabbitMQ (`make test-real`).

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{Scraper, TestDatabase, real_backend, spawn_app_on};

use crate::common::Cova;

/// The route's pace in the test: fast enough for a short test, slow enough that a fleet that
/// ignored it would show.
const RATE: f64 = 8.0;

/// The most requests received in any one-second window, and where that window starts.
fn busiest_second(times: &[i64]) -> (usize, usize) {
    (0..times.len())
        .map(|i| (times[i..].iter().take_while(|t| **t < times[i] + 1_000_000).count(), i))
        .max()
        .unwrap_or((0, 0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL, Redis and RabbitMQ: run with make test-real"]
async fn two_scrapers_and_a_gateway_never_exceed_the_pace_of_their_route() {
    let database = TestDatabase::postgres(&real_backend(cova_testdb::DATABASE_URL_VAR)).await;
    let (cache, queue) = (real_backend("COVA_TEST_CACHE_URL"), real_backend("COVA_TEST_QUEUE_URL"));
    let app = spawn_app_on(database, SimConfig::default(), Scraper::External, move |c| {
        c.limits.api_requests_per_minute = 1_000_000;
        c.cache.url = cache;
        c.queue.url = queue;
        c.platforms.tiktok.requests_per_second = RATE;
    })
    .await;
    let tiktok = &app.config.platforms.tiktok;
    let vars = [
        ("COVA_PLATFORMS__TIKTOK__WEB_BASE_URL", tiktok.web_base_url.clone()),
        ("COVA_PLATFORMS__TIKTOK__REQUESTS_PER_SECOND", RATE.to_string()),
        ("COVA_PLATFORMS__TIKTOK__RETRY_BASE_MS", tiktok.retry_base_ms.to_string()),
    ];
    let cova = Cova::sharing(&app.config, &vars);
    let mut scrapers: Vec<_> = (0..2).map(|_| cova.start_collecting("scraper", "scraper consuming")).collect();
    app.sim.clear_requests();

    let mut tasks = tokio::task::JoinSet::new();
    for a in 0..6u64 {
        let (account, token) = app.integrator().await;
        app.grant(&account, 10_000).await;
        let client = app.client(Some(&token));
        tasks.spawn(async move {
            for k in 0..2u64 {
                let post = tiktok_post_id(TikTokScenario::Normal, 60 + 10 * a + k);
                let queued = client.analyze(&cova_tests::tiktok_url(post), None).await.ok();
                let job = client.wait_job(queued["job_id"].as_str().expect("job_id")).await;
                assert_eq!(job["status"], "complete", "{job}");
                let lookup = tiktok_post_id(TikTokScenario::Normal, 700 + 10 * a + k);
                client.metadata(&cova_tests::tiktok_url(lookup)).await.ok();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("an account's work");
    }

    let requests = app.sim.requests();
    // The media copied from the CDN (another host in production) waits no turn of the route.
    let mut requests: Vec<_> = requests.into_iter().filter(|r| !r.path.starts_with("/cdn/")).collect();
    requests.sort_by_key(|r| r.received_us);
    let times: Vec<i64> = requests.iter().map(|r| r.received_us).collect();
    let (most, at) = busiest_second(&times);
    let fallbacks: Vec<String> =
        scrapers.iter().flat_map(|(_, log)| log.lines()).filter(|l| l.contains("does not answer")).collect();
    for (child, _) in &mut scrapers {
        let _ = child.kill();
        let _ = child.wait();
    }
    println!(
        "{} requests from two scrapers and a gateway at {RATE} a second: at most {most} in any second",
        times.len()
    );
    // A request can reach the simulator a little later than its turn (the network, a busy
    // machine), so that the next one seems closer: one more than the pace in a second, never two.
    let gaps: Vec<String> = requests[at..]
        .windows(2)
        .take(most)
        .map(|w| format!("{} ms to {}", (w[1].received_us - w[0].received_us) / 1_000, w[1].path))
        .collect();
    assert!(
        most as f64 <= RATE + 1.0,
        "{most} requests in one second at a pace of {RATE}: gaps {gaps:#?}; fallbacks logged: {fallbacks:?}"
    );
    assert!(fallbacks.is_empty(), "Redis answered throughout, yet: {fallbacks:?}");
    app.stop().await;
}
