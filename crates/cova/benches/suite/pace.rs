//! `COVA_BENCH_ONLY=pace`: the one queue of every platform request. What a turn costs; another
//! account's reel while one account floods Instagram with links that lead nowhere, against its
//! time alone; a 100-URL list of the three platforms counted by previews, against the pace
//! bound; and, on the real backends, two scraper processes and a gateway never above the pace
//! as the platform (the simulator) received their requests.

use super::{RealBackends, Report, RoleProcess, cpu_time, redis_pid};
use cova_sim::{InstagramScenario, SimConfig, TikTokScenario, YouTubeScenario, instagram_shortcode, tiktok_post_id};
use cova_tests::{Scraper, spawn_app_on, spawn_app_with_sim};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Turns of the turn-cost rows, from this many accounts at once.
const TURN_REQUESTS: usize = 20_000;
const TURN_ACCOUNTS: usize = 8;

/// What a turn in the queue costs, measured on the queue itself: `TURN_REQUESTS` turns of
/// `TURN_ACCOUNTS` accounts at once on one route, at a pace so fast that nobody waits (only
/// the queue's work: reading, the rules, writing back), through the cache as every cova
/// process keeps its queues.
async fn turn_cost(report: &mut Report, label: &str, cache: cova_cache::Cache, redis: Option<u32>) {
    let store: Arc<dyn cova_platforms::QueueStore> = Arc::new(cova_app::CacheQueues(cache));
    let turns = Arc::new(cova_platforms::Turns::new(Some(store)));
    let gate = Arc::new(tokio::sync::Semaphore::new(64));
    let take = |n: usize| {
        let (turns, gate) = (turns.clone(), gate.clone());
        async move {
            let mut tasks = tokio::task::JoinSet::new();
            for a in 0..TURN_ACCOUNTS {
                let (turns, gate) = (turns.clone(), gate.clone());
                tasks.spawn(cova_platforms::Demand::interactive(&format!("bench-account-{a}")).scope(async move {
                    for _ in 0..n / TURN_ACCOUNTS {
                        let permit = turns.turn("bench|host|direct", "host", Duration::from_micros(1), &gate).await;
                        drop(permit.expect("a turn"));
                    }
                }));
            }
            while tasks.join_next().await.is_some() {}
        }
    };
    take(TURN_REQUESTS / 10).await;
    let me = std::process::id();
    let before = (cpu_time(me), redis.map_or(Duration::ZERO, cpu_time));
    let started = Instant::now();
    take(TURN_REQUESTS).await;
    let wall = started.elapsed();
    let (ours, theirs) = (cpu_time(me) - before.0, redis.map_or(Duration::ZERO, cpu_time) - before.1);
    let per = |d: Duration| d.as_secs_f64() * 1e6 / TURN_REQUESTS as f64;
    report.add(
        &format!("pace_turn_cpu_{label}"),
        format!(
            "{:.1} µs of CPU per platform request for its turn ({:.1} µs in the process{}; {TURN_REQUESTS} turns of {TURN_ACCOUNTS} accounts at once on one route, {:.0} turns a second)",
            per(ours + theirs),
            per(ours),
            if redis.is_some() { format!(", {:.1} µs in Redis", per(theirs)) } else { String::new() },
            TURN_REQUESTS as f64 / wall.as_secs_f64()
        ),
    );
}

fn reel(scenario: InstagramScenario, comments: u64) -> String {
    format!("https://www.instagram.com/reel/{}/", instagram_shortcode(scenario, comments))
}

/// Seconds from `POST /analyze` to the job's end.
async fn job_seconds(client: &cova_tests::Client, url: &str) -> f64 {
    let started = Instant::now();
    let queued = client.analyze(url, None).await.ok();
    let job = client.wait_job(queued["job_id"].as_str().expect("job_id")).await;
    assert_eq!(job["status"], "complete", "{job}");
    started.elapsed().as_secs_f64()
}

/// Another account's 5-comment reel at Instagram's default pace while one account floods
/// three lists of 100 share links that lead nowhere, against its time alone: when the flood
/// starts with it, and once the flood is under way.
async fn fairness(report: &mut Report) {
    let rate = cova_config::Config::default().platforms.instagram.requests_per_second;
    let app = spawn_app_with_sim(SimConfig::default(), move |c| {
        c.platforms.instagram.requests_per_second = rate;
        c.limits.api_requests_per_minute = 1_000_000;
    })
    .await;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let (reader, token) = app.integrator().await;
    app.grant(&reader, 1_000).await;
    let reader = app.client(Some(&token));
    let (_, flood) = app.integrator().await;
    let flooder = app.client(Some(&flood));
    let alone = job_seconds(&reader, &reel(InstagramScenario::Normal, 5)).await;
    for (name, head_start) in [("with_the_flood", Duration::ZERO), ("flood_under_way", 10 * interval)] {
        // The queue idle again before each run.
        tokio::time::sleep(2 * interval).await;
        for list in 0..3 {
            let urls: Vec<String> =
                (0..100).map(|k| format!("https://www.instagram.com/share/none{name}{list}x{k}/")).collect();
            let preview = flooder.post_json("/api/v1/analyze/batch/preview", json!({ "urls": urls })).await.ok();
            assert_eq!(preview["items"].as_array().map(Vec::len), Some(100));
        }
        tokio::time::sleep(head_start).await;
        // Another reel of 5 comments each time (a media id outside the scenarios' scheme has
        // `pk % 1000` comments): nothing of it is known yet.
        let n = if head_start.is_zero() { 6 } else { 7 };
        let other = format!("https://www.instagram.com/reel/{}/", cova_sim::shortcode_of(n * 1_000 + 5));
        let flooded = job_seconds(&reader, &other).await;
        report.add(
            &format!("pace_fairness_reel_{name}"),
            format!(
                "{:.2}× its time alone ({flooded:.1} s against {alone:.1} s; a 5-comment reel at {rate} requests a second while another account floods three lists of 100 share links that lead nowhere{})",
                flooded / alone,
                if head_start.is_zero() { ", started together" } else { ", 10 turns into the flood" }
            ),
        );
    }
    let asked = app.sim.requests().iter().filter(|r| r.path.contains("/share/none")).count();
    report.add("pace_flood_requests", format!("{asked} share links of the 600 reached Instagram (30 failures an hour per account, 2 lookups at once per platform)"));
    app.stop().await;
}

/// A 100-URL list of the three platforms previewed at the default paces: the first answer, and
/// the time until every post is counted against the pace bound (the busiest route's requests,
/// one interval apart; the routes go on side by side).
async fn list_of_100(report: &mut Report) {
    let defaults = cova_config::Config::default().platforms;
    let app = spawn_app_with_sim(SimConfig::default(), move |c| {
        c.platforms.tiktok.requests_per_second = defaults.tiktok.requests_per_second;
        c.platforms.youtube.requests_per_second = defaults.youtube.requests_per_second;
        c.platforms.instagram.requests_per_second = defaults.instagram.requests_per_second;
    })
    .await;
    let (_, token) = app.integrator().await;
    let client = app.client(Some(&token));
    let urls: Vec<String> = (0..100u64)
        .map(|k| match k % 3 {
            0 => cova_tests::tiktok_url(tiktok_post_id(TikTokScenario::Normal, 100 + k)),
            1 => format!(
                "https://www.youtube.com/shorts/{}",
                cova_sim::youtube_video_id(YouTubeScenario::Normal, 100 + k)
            ),
            _ => reel(InstagramScenario::Normal, 100 + k),
        })
        .collect();
    app.sim.clear_requests();
    let started = Instant::now();
    let first: Value = client.post_json("/api/v1/analyze/batch/preview", json!({ "urls": urls })).await.ok();
    let first_answer = started.elapsed();
    let mut last = first.clone();
    while last["counting"] != 0 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        last = client.post_json("/api/v1/analyze/batch/preview", json!({ "urls": urls })).await.ok();
    }
    let counted = started.elapsed().as_secs_f64();
    let requests = app.sim.requests();
    let on = |prefix: &str| requests.iter().filter(|r| r.path.starts_with(prefix)).count();
    let instagram = on("/ig/");
    let youtube = requests.iter().filter(|r| r.path.starts_with("/youtube/")).count();
    let tiktok = requests.len() - instagram - youtube;
    let bound = [
        (instagram, defaults.instagram.requests_per_second),
        (youtube, defaults.youtube.requests_per_second),
        (tiktok, defaults.tiktok.requests_per_second),
    ]
    .into_iter()
    .map(|(n, rps)| n.saturating_sub(1) as f64 / rps)
    .fold(0.0, f64::max);
    report.add(
        "pace_list_100_first_answer",
        format!(
            "{:.0} ms ({} of 100 posts counted at once, {} being counted)",
            first_answer.as_secs_f64() * 1e3,
            first["counted"],
            first["counting"]
        ),
    );
    report.add(
        "pace_list_100_all_counted",
        format!(
            "{counted:.1} s, {:.2}× the pace bound of {bound:.1} s ({} counted; {instagram} Instagram, {youtube} YouTube and {tiktok} TikTok requests at the default paces)",
            counted / bound.max(f64::EPSILON),
            last["counted"]
        ),
    );
    app.stop().await;
}

/// Two release scraper processes and the gateway (this process) on the real backends, sharing
/// one TikTok route at 5 requests a second: jobs of 8 accounts and metadata lookups at once.
/// Measured where the simulator received the requests: the most in any second, and the
/// closest two.
async fn fleet_pace(report: &mut Report, real: &RealBackends) {
    const RATE: f64 = 5.0;
    let sim = SimConfig::default();
    let database = cova_tests::TestDatabase::postgres(&real.database).await;
    let (cache, queue) = (real.cache.clone(), real.queue.clone());
    let app = spawn_app_on(database, sim, Scraper::External, move |c| {
        c.limits.api_requests_per_minute = 10_000_000;
        c.cache.url = cache;
        c.queue.url = queue;
        c.platforms.tiktok.requests_per_second = RATE;
    })
    .await;
    let scrapers: Vec<RoleProcess> = (0..2).map(|_| RoleProcess::scraper(&app)).collect();
    app.sim.clear_requests();
    let mut tasks = tokio::task::JoinSet::new();
    for a in 0..8u64 {
        let (account, token) = app.integrator().await;
        app.grant(&account, 10_000).await;
        let client = app.client(Some(&token));
        tasks.spawn(async move {
            for k in 0..3u64 {
                let url = cova_tests::tiktok_url(tiktok_post_id(TikTokScenario::Normal, 30 + 10 * a + k));
                let queued = client.analyze(&url, None).await.ok();
                client.wait_job(queued["job_id"].as_str().expect("job_id")).await;
                let _ = client
                    .metadata(&cova_tests::tiktok_url(tiktok_post_id(TikTokScenario::Normal, 500 + 10 * a + k)))
                    .await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    // The media copied from the CDN (another host in production) waits no turn of the route.
    let mut times: Vec<i64> =
        app.sim.requests().iter().filter(|r| !r.path.starts_with("/cdn/")).map(|r| r.received_us).collect();
    times.sort_unstable();
    let most_in_a_second = times
        .iter()
        .enumerate()
        .map(|(i, t)| times[i..].iter().take_while(|u| **u < t + 1_000_000).count())
        .max()
        .unwrap_or(0);
    let closest = times.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(0);
    report.add(
        "pace_fleet_real",
        format!(
            "at most {most_in_a_second} requests in any second against {RATE} allowed; the closest two {:.0} ms apart (interval {:.0} ms); {} requests from two scraper processes and a gateway sharing one route",
            closest as f64 / 1e3,
            1e3 / RATE,
            times.len()
        ),
    );
    drop(scrapers);
    app.stop().await;
}

pub(super) async fn run(report: &mut Report, real: &RealBackends) {
    turn_cost(report, "embedded", cova_cache::Cache::in_memory("bench-pace"), None).await;
    if real.reachable() {
        let cfg = cova_config::CacheConfig {
            url: real.cache.clone(),
            prefix: format!("bench-pace-{}", std::process::id()),
            timeout_ms: 2_000,
        };
        let redis = cova_cache::Cache::connect(&cfg).expect("redis");
        turn_cost(report, "real", redis, redis_pid()).await;
    }
    fairness(report).await;
    list_of_100(report).await;
    if real.reachable() {
        fleet_pace(report, real).await;
    }
}
