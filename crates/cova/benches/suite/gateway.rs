//! `COVA_BENCH_ONLY=gateway`: the gateway's requests against a bare handler, each loaded by wrk
//! in its own process, on the embedded and the real backends (with what its account leaves in
//! Redis). A job's round trip through the app (`job_overhead`) is here too; only the whole
//! bench runs it.

use super::{
    JOBS, LOAD_CONCURRENCY, LOAD_ROUNDS, LOAD_SECONDS, RealBackends, Report, ServeProcess, Wrk, cpu_time, ms,
    percentile, post_of_20, redis_pid, wrk,
};
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{TestApp, TestDatabase};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The gateway against a bare handler, each loaded by wrk in its own process: `/usage`, the
/// poll of a running job (what a client polling every 1-2 s sees) and of a complete one (its
/// first comment thread, read from the database), through a release `cova serve` process on
/// the given backends (`extra` settings), with access logs on as deployed.
pub(super) async fn gateway_overhead(report: &mut Report, label: &str, extra: &[(&str, String)]) {
    if std::process::Command::new("wrk").arg("--version").output().is_err() {
        report.add(&format!("gateway_{label}"), "skipped (wrk is not installed: apt-get install wrk)");
        return;
    }
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("sim");
    let mut vars = vec![
        ("COVA_LIMITS__API_REQUESTS_PER_MINUTE", "100000000".to_owned()),
        ("COVA_METRICS__ADDR", "127.0.0.1:0".to_owned()),
    ];
    vars.extend(extra.iter().cloned());
    let serve = ServeProcess::start(&sim, &vars).await;
    let usage_url = format!("{}/api/v1/usage", serve.base);
    let body = reqwest::Client::new().get(&usage_url).bearer_auth(&serve.token).send().await.expect("usage");
    let body = body.text().await.expect("body");
    let complete = serve.collect(tiktok_post_id(TikTokScenario::Normal, 20)).await;
    let complete_url = format!("{}/api/v1/analyze/{complete}?limit=1", serve.base);
    // A job that stays in progress: the platform answers nothing while the load runs.
    sim.pause();
    let client = cova_tests::Client::new(&serve.base, Some(&serve.token));
    let running = client
        .analyze(&format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, 21)), None)
        .await
        .ok();
    let running_url = format!("{}/api/v1/analyze/{}?limit=1", serve.base, running["job_id"].as_str().expect("id"));
    let (bare_url, bare) = bare_server(" ".repeat(body.len())).await;
    let (mut bare_load, mut usage, mut poll, mut poll_complete) =
        (Rounds::default(), Rounds::default(), Rounds::default(), Rounds::default());
    let pid = serve.child.id();
    let redis = if label == "real" { redis_pid() } else { None };
    for _ in 0..LOAD_ROUNDS {
        bare_load.runs.push(wrk(&bare_url, None, LOAD_CONCURRENCY, LOAD_SECONDS).await);
        usage.runs.push(wrk_cpu(&usage_url, Some(&serve.token), pid, redis).await);
        poll.runs.push(wrk_cpu(&running_url, Some(&serve.token), pid, redis).await);
        poll_complete.runs.push(wrk_cpu(&complete_url, Some(&serve.token), pid, redis).await);
    }
    sim.resume();
    bare.stop(false).await;
    let bare_rps = bare_load.rps();
    let mut line = |name: &str, rounds: &Rounds| {
        let (p50, p99) = rounds.latencies();
        report.add(&format!("gateway_{name}_{label}_rps"), format!("{:.0}", rounds.rps()));
        report.add(&format!("gateway_{name}_{label}_p50_p99"), format!("{} / {}", ms(p50), ms(p99)));
        if name != "bare" {
            report.add(
                &format!("gateway_{name}_{label}_share_of_bare"),
                format!("{:.0}%", 100.0 * rounds.rps() / bare_rps.max(1.0)),
            );
            // CPU per request, not requests/s: on two cores wrk competes for the same CPUs.
            let (gateway, redis) = rounds.cpu_per_request();
            let value = match redis {
                Some(redis) => format!("{gateway:.1} µs gateway, {redis:.1} µs Redis"),
                None => format!("{gateway:.1} µs gateway"),
            };
            report.add(&format!("gateway_{name}_{label}_cpu_per_request"), value);
        }
    };
    line("bare", &bare_load);
    line("usage", &usage);
    line("poll", &poll);
    line("poll_complete", &poll_complete);
    drop(serve);
    sim.stop().await;
}

/// [`gateway_overhead`] with `cova serve` on the real backends: a database of its own, and
/// cache and queue prefixes of its own.
pub(super) async fn gateway_overhead_real(report: &mut Report, real: &RealBackends) {
    let database = TestDatabase::postgres(&real.database).await;
    let prefix = format!("bench{}x{}", std::process::id(), chrono::Utc::now().timestamp_micros());
    let vars = [
        ("COVA_DATABASE__URL", database.config.url.clone()),
        ("COVA_DATABASE__ENCRYPTION_KEYS", cova_testdb::TEST_ENCRYPTION_KEY.to_owned()),
        ("COVA_CACHE__URL", real.cache.clone()),
        ("COVA_CACHE__PREFIX", prefix.clone()),
        ("COVA_QUEUE__URL", real.queue.clone()),
        ("COVA_QUEUE__PREFIX", prefix.clone()),
    ];
    gateway_overhead(report, "real", &vars).await;
    redis_memory(report, &real.cache, &prefix);
    redis_round_trip_floor(report, &real.cache);
    let _ = database.drop_database().await;
}

/// What the gateway bench's account left in Redis (its keys under `prefix`), by kind: the
/// request limit, the account's and token's snapshots, and per job its snapshot and first page.
fn redis_memory(report: &mut Report, url: &str, prefix: &str) {
    let cli = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("redis-cli").arg("-u").arg(url).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let Some(keys) = cli(&["--scan", "--pattern", &format!("{prefix}:*")]) else {
        report.add("redis_memory_per_account", "skipped (redis-cli is not installed)");
        return;
    };
    let mut kinds: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for key in keys.lines().filter(|k| !k.is_empty()) {
        let bytes: u64 = cli(&["MEMORY", "USAGE", key]).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        let rest = key.strip_prefix(prefix).unwrap_or(key).trim_start_matches(':');
        // `snap:job:<id>` → `snap:job`; a limit's key keeps its name.
        let kind = if rest.starts_with("snap:") {
            rest.splitn(3, ':').take(2).collect::<Vec<_>>().join(":")
        } else {
            rest.split(':').next().unwrap_or(rest).to_owned()
        };
        let entry = kinds.entry(kind).or_default();
        entry.0 += 1;
        entry.1 += bytes;
    }
    let per_account: u64 =
        kinds.iter().filter(|(k, _)| !k.contains("job") && !k.contains("page")).map(|(_, (_, b))| b).sum();
    let detail: Vec<String> = kinds.iter().map(|(k, (n, b))| format!("{k}: {n} keys, {b} bytes")).collect();
    report.add("redis_memory_per_account", format!("{per_account} bytes ({})", detail.join("; ")));
}

/// Redis CPU per bare round trip on this machine (`PING` from 16 connections, 200,000 times,
/// with redis-benchmark): what one request's round trip costs Redis before any command.
fn redis_round_trip_floor(report: &mut Report, url: &str) {
    let Some(pid) = redis_pid() else {
        report.add("redis_cpu_per_round_trip_floor", "skipped (no local redis-server)");
        return;
    };
    const PINGS: u32 = 200_000;
    let before = cpu_time(pid);
    let ran = std::process::Command::new("redis-benchmark")
        .args(["-u", url, "-q", "-c", "16", "-n", &PINGS.to_string(), "PING"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ran {
        report.add("redis_cpu_per_round_trip_floor", "skipped (redis-benchmark is not installed)");
        return;
    }
    let per = cpu_time(pid).saturating_sub(before) / PINGS;
    report.add(
        "redis_cpu_per_round_trip_floor",
        format!("{:.1} µs (PING from 16 connections: the round trip alone)", per.as_secs_f64() * 1e6),
    );
}

/// A bare actix-web handler (as many workers as `cova serve` runs by default, one per CPU)
/// returning a body of `body.len()` bytes: what the gateway's figures are compared with.
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
    .listen(listener)
    .expect("listen")
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    (format!("http://{addr}/bare"), handle)
}

/// `wrk` on `url`, with the CPU the gateway process `pid` (and Redis, `redis`) spent meanwhile.
async fn wrk_cpu(url: &str, token: Option<&str>, pid: u32, redis: Option<u32>) -> Wrk {
    let (gateway, cache) = (cpu_time(pid), redis.map(cpu_time));
    let mut run = wrk(url, token, LOAD_CONCURRENCY, LOAD_SECONDS).await;
    run.gateway_cpu = cpu_time(pid).saturating_sub(gateway);
    run.redis_cpu = redis.zip(cache).map(|(r, before)| cpu_time(r).saturating_sub(before));
    run
}

/// Rounds of one URL's load, summed.
#[derive(Default)]
struct Rounds {
    runs: Vec<Wrk>,
}

impl Rounds {
    fn rps(&self) -> f64 {
        self.runs.iter().map(|r| r.rps).sum::<f64>() / self.runs.len().max(1) as f64
    }

    /// Gateway and Redis CPU per request over all rounds, in microseconds.
    fn cpu_per_request(&self) -> (f64, Option<f64>) {
        let requests = self.runs.iter().map(|r| r.requests).sum::<u64>().max(1) as f64;
        let per = |d: Duration| d.as_secs_f64() * 1e6 / requests;
        let gateway = per(self.runs.iter().map(|r| r.gateway_cpu).sum());
        let redis = self.runs.iter().map(|r| r.redis_cpu).sum::<Option<Duration>>().map(per);
        (gateway, redis)
    }

    /// The middle round's latencies (rounds alternate, so each saw the same noise).
    fn latencies(&self) -> (Duration, Duration) {
        let mut runs = self.runs.clone();
        runs.sort_by(|a, b| a.rps.total_cmp(&b.rps));
        runs.get(runs.len() / 2).map_or((Duration::ZERO, Duration::ZERO), |r| (r.p50, r.p99))
    }
}

pub(super) async fn job_overhead(report: &mut Report, label: &str, app: &TestApp) {
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000_000).await;
    let client = app.client(Some(&token));
    let mut latencies = Vec::new();
    for k in 0..JOBS as u64 {
        let started = Instant::now();
        let job = client.analyze(&post_of_20(k), None).await.ok();
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

pub(super) async fn run(report: &mut Report, real: &RealBackends) {
    gateway_overhead(report, "embedded", &[]).await;
    if real.reachable() {
        gateway_overhead_real(report, real).await;
    }
}
