//! `make bench`: measured side by side in one run and reported as ratios, so that a noisy
//! machine still compares. Prints `name: value` lines and writes `bench/results.md`.
//!
//! Real backends are used when reachable (PostgreSQL, Redis, RabbitMQ on 127.0.0.1, or the
//! `COVA_TEST_*_URL` variables); otherwise those lines say they were skipped.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{TestApp, spawn_app_with_sim};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const LOAD_CONCURRENCY: usize = 16;
const LOAD_SECONDS: u64 = 5;
const PLATFORM_LATENCY_MS: u64 = 100;
const COLLECT_COMMENTS: u64 = 5_000;
const JOBS: usize = 200;

struct Report {
    lines: Vec<(String, String)>,
}

impl Report {
    fn add(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        println!("{name}: {value}");
        self.lines.push((name.to_owned(), value));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Fixed-concurrency closed-loop load on one URL; returns (requests/s, p50, p99).
async fn load(url: String, token: Option<String>) -> (f64, Duration, Duration) {
    let client = reqwest::Client::builder().pool_max_idle_per_host(LOAD_CONCURRENCY).build().expect("client");
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..LOAD_CONCURRENCY {
        let (client, url, token, stop) = (client.clone(), url.clone(), token.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let mut req = client.get(&url);
                if let Some(t) = &token {
                    req = req.bearer_auth(t);
                }
                let ok = req.send().await.map(|r| r.status().is_success()).unwrap_or(false);
                assert!(ok, "load request failed");
                latencies.push(started.elapsed());
            }
            latencies
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(LOAD_SECONDS)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("join"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    (all.len() as f64 / elapsed, percentile(&all, 0.5), percentile(&all, 0.99))
}

/// A bare actix-web handler returning a body of the same size as `/api/v1/usage`.
async fn bare_server(body: String) -> (String, actix_web::dev::ServerHandle) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let body = Arc::new(body);
    let server = actix_web::HttpServer::new(move || {
        let body = body.clone();
        actix_web::App::new().route(
                "/bare",
                actix_web::web::get().to(move || {
                    let body = body.clone();
                    async move {
                        actix_web::HttpResponse::Ok().content_type("application/json").body(body.as_str().to_owned())
                    }
                }),
            )
    })
    .workers(2)
    .listen(listener)
    .expect("listen")
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    (format!("http://{addr}/bare"), handle)
}

async fn gateway_overhead(report: &mut Report, label: &str, app: &TestApp) {
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    // A limit high enough not to interfere: the check itself is what is measured.
    let usage_url = format!("{}/api/v1/usage", app.base_url);
    let sample = reqwest::Client::new().get(&usage_url).bearer_auth(&token).send().await.expect("usage");
    let body = sample.text().await.expect("body");
    let (bare_url, bare) = bare_server(" ".repeat(body.len())).await;
    let (bare_rps, bare_p50, bare_p99) = load(bare_url, None).await;
    bare.stop(false).await;
    let (rps, p50, p99) = load(usage_url, Some(token)).await;
    report.add(&format!("gateway_usage_{label}_rps"), format!("{rps:.0}"));
    report.add(&format!("gateway_usage_{label}_p50"), ms(p50));
    report.add(&format!("gateway_usage_{label}_p99"), ms(p99));
    report.add(&format!("gateway_bare_{label}_rps"), format!("{bare_rps:.0}"));
    report.add(&format!("gateway_bare_{label}_p50_p99"), format!("{} / {}", ms(bare_p50), ms(bare_p99)));
    report.add(&format!("gateway_overhead_{label}_rps_ratio"), format!("{:.2}", bare_rps / rps.max(1.0)));
}

async fn collection_speed(report: &mut Report) {
    let sim =
        cova_sim::spawn(SimConfig { latency_ms: PLATFORM_LATENCY_MS, ..SimConfig::default() }).await.expect("sim");
    let mut config = cova_config::Config::default();
    cova_tests::use_simulator(&mut config, &sim);
    let per_host = config.platforms.tiktok.max_concurrency_per_host;
    let platforms = cova_platforms::Platforms::new(&config.platforms).expect("platforms");
    let id = tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS);
    let post: cova_platforms::PostRef = format!("tiktok:{id}").parse().expect("ref");
    sim.clear_requests();
    let started = Instant::now();
    let mut sink = cova_platforms::VecSink::default();
    let outcome = platforms.collect_comments(&post, COLLECT_COMMENTS as u32, &mut sink).await.expect("collect");
    let took = started.elapsed();
    let requests = sim.requests();
    let top = requests.iter().filter(|r| r.path.ends_with("/comment/list/")).count() as f64;
    let replies = requests.iter().filter(|r| r.path.ends_with("/comment/list/reply/")).count() as f64;
    let latency = PLATFORM_LATENCY_MS as f64 / 1000.0;
    // The cursor chain is sequential; reply pages can overlap it up to the per-host limit.
    let bound = (top * latency).max((top + replies) * latency / per_host as f64);
    report.add(
        "collect_5000_comments",
        format!("{:.2} s ({} comments, {top} list + {replies} reply pages)", took.as_secs_f64(), outcome.collected),
    );
    report.add("collect_5000_lower_bound", format!("{bound:.2} s"));
    report.add("collect_5000_ratio_to_bound", format!("{:.2}", took.as_secs_f64() / bound));

    // The naive way: one page after the other, replies after the list, no overlap.
    let naive = naive_collect(sim.base_url(), id).await;
    report.add("collect_5000_naive_sequential", format!("{:.2} s", naive.as_secs_f64()));
    report.add("collect_5000_speedup_vs_naive", format!("{:.2}", naive.as_secs_f64() / took.as_secs_f64()));
    sim.stop().await;
}

async fn naive_collect(base: &str, id: u64) -> Duration {
    let http = reqwest::Client::new();
    let started = Instant::now();
    let mut cursor = 0u64;
    let mut parents = Vec::new();
    let mut seen = std::collections::HashSet::new();
    loop {
        let page: serde_json::Value = http
            .get(format!("{base}/api/comment/list/?aid=1988&aweme_id={id}&cursor={cursor}&count=50"))
            .send()
            .await
            .expect("page")
            .json()
            .await
            .expect("json");
        let comments = page["comments"].as_array().cloned().unwrap_or_default();
        for c in &comments {
            let cid = c["cid"].as_str().unwrap_or_default().to_owned();
            if seen.insert(cid.clone()) && c["reply_comment_total"].as_u64().unwrap_or(0) > 0 {
                parents.push(cid);
            }
        }
        let next = page["cursor"].as_u64().unwrap_or(cursor);
        if comments.is_empty() || next == cursor || seen.len() as u64 >= COLLECT_COMMENTS {
            break;
        }
        cursor = next;
    }
    for parent in parents {
        let mut cursor = 0u64;
        loop {
            let page: serde_json::Value = http
                .get(format!(
                    "{base}/api/comment/list/reply/?aid=1988&item_id={id}&comment_id={parent}&cursor={cursor}&count=50"
                ))
                .send()
                .await
                .expect("reply page")
                .json()
                .await
                .expect("json");
            let n = page["comments"].as_array().map_or(0, Vec::len);
            let next = page["cursor"].as_u64().unwrap_or(cursor);
            if n == 0 || page["has_more"].as_u64() == Some(0) || next == cursor {
                break;
            }
            cursor = next;
        }
    }
    started.elapsed()
}

async fn job_overhead(report: &mut Report, label: &str, app: &TestApp) {
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000_000).await;
    let client = app.client(Some(&token));
    let mut latencies = Vec::new();
    for k in 0..JOBS {
        // Ids outside the simulator's numbered range carry `id % 1000` comments: 20 each.
        let url = format!("https://www.tiktok.com/@a/video/{}", 6_000_000_000_000_000_000u64 + (k as u64) * 1_000 + 20);
        let started = Instant::now();
        let job = client.analyze(&url, None).await.ok();
        let id = job["job_id"].as_str().expect("id").to_owned();
        loop {
            let j = client.job(&id).await.ok();
            if j["status"] == "complete" {
                break;
            }
            assert_ne!(j["status"], "failed", "{j}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        latencies.push(started.elapsed());
    }
    latencies.sort();
    report.add(&format!("job_20_comments_{label}_p50"), ms(percentile(&latencies, 0.5)));
    report.add(&format!("job_20_comments_{label}_p99"), ms(percentile(&latencies, 0.99)));
}

fn reachable(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(300)).is_ok()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut report = Report { lines: Vec::new() };
    rt.block_on(async {
        // Embedded backends.
        no_suite_backends();
        let app = spawn_app_with_sim(SimConfig::default(), |c| c.limits.api_requests_per_minute = 10_000_000).await;
        gateway_overhead(&mut report, "embedded", &app).await;
        job_overhead(&mut report, "embedded", &app).await;
        app.stop().await;

        let real = reachable(5432) && reachable(6379) && reachable(5672);
        if real {
            let app = spawn_app_with_sim(SimConfig::default(), |c| {
                c.limits.api_requests_per_minute = 10_000_000;
                c.cache.url = "redis://127.0.0.1:6379".into();
                c.queue.url = "amqp://guest:guest@127.0.0.1:5672/%2f".into();
            })
            .await;
            gateway_overhead(&mut report, "redis", &app).await;
            app.stop().await;
        } else {
            report.add("gateway_usage_redis", "skipped (Redis, PostgreSQL or RabbitMQ not reachable)");
        }
        collection_speed(&mut report).await;
    });
    write_results(&report);
}

/// The embedded run must not pick up the suite's real-backend variables.
fn no_suite_backends() {
    for var in ["COVA_TEST_DATABASE_URL", "COVA_TEST_CACHE_URL", "COVA_TEST_QUEUE_URL"] {
        assert!(std::env::var(var).is_err(), "unset {var} for `make bench` (it picks backends itself)");
    }
}

fn write_results(report: &Report) {
    let mut out = String::new();
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let _ = writeln!(out, "# cova benchmark results\n");
    let _ = writeln!(out, "- date: {}", chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let _ = writeln!(out, "- commit: {commit}");
    let _ = writeln!(out, "- machine: {cpus} CPUs, {cpu}");
    let _ = writeln!(
        out,
        "- load: {LOAD_CONCURRENCY} concurrent keep-alive clients for {LOAD_SECONDS} s in the same process; platform latency {PLATFORM_LATENCY_MS} ms for collection; {JOBS} sequential jobs for job overhead\n"
    );
    let _ = writeln!(out, "| name | value |\n|---|---|");
    for (name, value) in &report.lines {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    let path = format!("{}/../../bench/results.md", env!("CARGO_MANIFEST_DIR"));
    if let Err(e) = std::fs::write(&path, out) {
        eprintln!("writing {path}: {e}");
    }
}
