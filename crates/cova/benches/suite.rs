//! `make bench`: measured side by side in one run and reported as ratios, so that a noisy
//! machine still compares. Prints `name: value` lines and writes `bench/results.md`.
//!
//! The real backends (PostgreSQL, Redis, RabbitMQ) are those of the `COVA_TEST_*_URL`
//! variables, or the local defaults; when one is unreachable its lines say they were skipped.
//! Throughput and memory run the release `cova scraper` binary as separate processes.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{Scraper, TestApp, TestDatabase, spawn_app_on};
use std::fmt::Write as _;
use std::process::Child;

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "suite/pace.rs"]
mod pace;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const LOAD_CONCURRENCY: usize = 16;
/// Load rounds alternate between the gateway and the bare handler, so that both see the
/// same machine noise.
const LOAD_ROUNDS: u32 = 3;
const LOAD_SECONDS: u64 = 2;
const PLATFORM_LATENCY_MS: u64 = 100;
const COLLECT_COMMENTS: u64 = 5_000;
const JOBS: usize = 200;
/// Accounts submitting at once in the throughput run, each up to its limit of 3 running jobs.
const THROUGHPUT_ACCOUNTS: u64 = 32;
const JOBS_PER_ACCOUNT: u64 = 3;

/// Where the real backends are: the suite's variables, else the local services.
#[derive(Clone)]
struct RealBackends {
    database: String,
    cache: String,
    queue: String,
}

impl RealBackends {
    fn from_env() -> Self {
        let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        Self {
            database: var("COVA_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
            cache: var("COVA_TEST_CACHE_URL", "redis://127.0.0.1:6379"),
            queue: var("COVA_TEST_QUEUE_URL", "amqp://guest:guest@127.0.0.1:5672/%2f"),
        }
    }

    /// Every backend accepts TCP connections.
    fn reachable(&self) -> bool {
        [(&self.database, 5432), (&self.cache, 6379), (&self.queue, 5672)].into_iter().all(|(url, port)| {
            let Some(host) = url::Url::parse(url).ok().and_then(|u| Some((u.host_str()?.to_owned(), u.port()))) else {
                return false;
            };
            let addr = format!("{}:{}", host.0, host.1.unwrap_or(port));
            std::net::ToSocketAddrs::to_socket_addrs(&addr)
                .ok()
                .and_then(|mut a| a.next())
                .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok())
        })
    }

    /// [`gateway_overhead`] with `cova serve` on the real backends: a database of its own, and
    /// cache and queue prefixes of its own.
    async fn gateway_overhead(&self, report: &mut Report) {
        let database = TestDatabase::postgres(&self.database).await;
        let prefix = format!("bench{}x{}", std::process::id(), chrono::Utc::now().timestamp_micros());
        let vars = [
            ("COVA_DATABASE__URL", database.config.url.clone()),
            ("COVA_DATABASE__ENCRYPTION_KEYS", cova_testdb::TEST_ENCRYPTION_KEY.to_owned()),
            ("COVA_CACHE__URL", self.cache.clone()),
            ("COVA_CACHE__PREFIX", prefix.clone()),
            ("COVA_QUEUE__URL", self.queue.clone()),
            ("COVA_QUEUE__PREFIX", prefix.clone()),
        ];
        gateway_overhead(report, "real", &vars).await;
        redis_memory(report, &self.cache, &prefix);
        redis_round_trip_floor(report, &self.cache);
        let _ = database.drop_database().await;
    }

    async fn app(&self, sim: SimConfig, scraper: Scraper) -> TestApp {
        let database = TestDatabase::postgres(&self.database).await;
        spawn_app_on(database, sim, scraper, |c| {
            c.limits.api_requests_per_minute = 10_000_000;
            c.cache.url = self.cache.clone();
            c.queue.url = self.queue.clone();
        })
        .await
    }
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

/// The app on the embedded backends, whatever the environment says.
async fn embedded_app() -> TestApp {
    spawn_app_on(TestDatabase::sqlite(), SimConfig::default(), Scraper::InProcess, |c| {
        c.limits.api_requests_per_minute = 10_000_000;
        c.cache.url = "memory://".into();
        c.queue.url = "memory://".into();
    })
    .await
}

/// A release `cova <role>` process on an app's backends (and simulator); killed when dropped.
struct RoleProcess {
    child: Child,
}

impl RoleProcess {
    /// A scraper, once it consumes.
    fn scraper(app: &TestApp) -> Self {
        Self::scraper_with(app, &[])
    }

    /// A scraper with more settings (`COVA_…` variables), once it consumes.
    fn scraper_with(app: &TestApp, more: &[(&str, String)]) -> Self {
        let c = &app.config;
        let tiktok = &c.platforms.tiktok;
        let vars: Vec<(&str, String)> = [
            ("COVA_PLATFORMS__TIKTOK__WEB_BASE_URL", tiktok.web_base_url.clone()),
            ("COVA_PLATFORMS__TIKTOK__REQUESTS_PER_SECOND", tiktok.requests_per_second.to_string()),
            ("COVA_PLATFORMS__TIKTOK__RETRY_BASE_MS", tiktok.retry_base_ms.to_string()),
            ("COVA_PLATFORMS__TIKTOK__RETRY_MAX_MS", tiktok.retry_max_ms.to_string()),
            ("COVA_SCRAPER__RETRY_BASE_MS", c.scraper.retry_base_ms.to_string()),
        ]
        .into_iter()
        .chain(more.iter().cloned())
        .collect();
        let cova = common::Cova::sharing(c, &vars);
        Self { child: cova.start_until("scraper", "scraper consuming") }
    }

    /// A notifier reading the TOML file `config` too, once it sends.
    fn notifier(app: &TestApp, config: &std::path::Path) -> Self {
        let cova = common::Cova::sharing(&app.config, &[("COVA_CONFIG", config.display().to_string())]);
        Self { child: cova.start_until("notifier", "deliveries running") }
    }

    fn memory_kib(&self, field: &str) -> u64 {
        memory_kib(self.child.id(), field)
    }
}

/// A `/proc/<pid>/status` field in KiB (VmRSS now, VmHWM peak).
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc status"))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A release `cova serve` process on its own SQLite file and media directory, against a
/// simulator, with an account holding a pack and a token of every scope.
struct ServeProcess {
    child: Child,
    base: String,
    token: String,
    _dir: tempfile::TempDir,
}

impl ServeProcess {
    async fn start(sim: &cova_sim::SimHandle, extra: &[(&str, String)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let vars = [
            ("COVA_DATABASE__URL", format!("sqlite://{}/cova.db", dir.path().display())),
            ("COVA_MEDIA__URL", format!("{}/media", dir.path().display())),
            ("COVA_MEDIA__CDN_HOSTS", sim.base_url().to_owned()),
            ("COVA_MEDIA__ALLOW_PRIVATE", "127.0.0.1/32".to_owned()),
            ("COVA_HTTP__ADDR", "127.0.0.1:0".to_owned()),
            ("COVA_TELEMETRY__LOG_LEVEL", "warn,cova=info".to_owned()),
            ("COVA_PLATFORMS__TIKTOK__WEB_BASE_URL", sim.base_url().to_owned()),
            ("COVA_PLATFORMS__TIKTOK__REQUESTS_PER_SECOND", "0".to_owned()),
        ];
        let vars = vars.into_iter().chain(extra.iter().cloned()).map(|(k, v)| (k.to_owned(), v)).collect();
        let cova = common::Cova { vars };
        let admin = |args: &[&str]| {
            let out = cova.run(args);
            assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
            common::stdout(&out)
        };
        admin(&["migrate"]);
        admin(&["admin", "accounts", "create", "--email", "bench@example.com"]);
        admin(&["admin", "packs", "grant", "--email", "bench@example.com", "--comments", "10000"]);
        let scopes = "metadata:read,analyze:write,library:write";
        let token = admin(&["admin", "tokens", "create", "--email", "bench@example.com", "--scopes", scopes])
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        let (child, base) = cova.start("serve", true);
        Self { child, base: base.expect("base url"), token, _dir: dir }
    }

    /// Collects a post to completion; returns the job's id.
    async fn collect(&self, id: u64) -> String {
        let client = cova_tests::Client::new(&self.base, Some(&self.token));
        let job = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
        let done = client.wait_job(job["job_id"].as_str().expect("id")).await;
        assert_eq!(done["status"], "complete", "{done}");
        done["job_id"].as_str().expect("id").to_owned()
    }

    fn mib(&self, field: &str) -> f64 {
        mib(memory_kib(self.child.id(), field))
    }

    /// Starts the peak (`VmHWM`) again from the current RSS.
    fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").expect("clear_refs");
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RoleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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

/// Runs `section` as a task of its own: a section that fails leaves a row saying why instead
/// of ending the run (the other sections' rows are still written).
async fn guarded<Fut>(report: &mut Report, name: &str, section: impl FnOnce(Report) -> Fut)
where
    Fut: std::future::Future<Output = Report> + Send + 'static,
{
    match tokio::spawn(section(Report { lines: Vec::new() })).await {
        Ok(rows) => report.lines.extend(rows.lines),
        Err(e) => {
            let why = e.try_into_panic().ok().and_then(|p| {
                p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            });
            report.add(name, format!("failed: {}", why.unwrap_or_else(|| "cancelled".into())));
        }
    }
}

/// [`guarded`] for a section `$section(&mut Report, &RealBackends)` on the real backends.
macro_rules! guarded_on_real {
    ($report:expr, $name:literal, $real:expr, $section:ident) => {{
        let real = $real.clone();
        guarded($report, $name, |mut rows| async move {
            $section(&mut rows, &real).await;
            rows
        })
        .await
    }};
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

/// Latencies and wall time of load rounds on one URL.
#[derive(Default)]
struct Load {
    latencies: Vec<Duration>,
    seconds: f64,
}

impl Load {
    fn add(&mut self, (latencies, seconds): (Vec<Duration>, f64)) {
        self.latencies.extend(latencies);
        self.seconds += seconds;
    }

    /// (requests/s, p50, p99)
    fn summary(mut self) -> (f64, Duration, Duration) {
        self.latencies.sort();
        let rps = self.latencies.len() as f64 / self.seconds.max(f64::EPSILON);
        (rps, percentile(&self.latencies, 0.5), percentile(&self.latencies, 0.99))
    }
}

/// One round of fixed-concurrency closed-loop load on a URL from this process: (latencies,
/// seconds); with `read_body` each answer's body is read whole before the next request.
async fn load_reading(url: &str, token: Option<&str>, read_body: bool) -> (Vec<Duration>, f64) {
    let client = reqwest::Client::builder().pool_max_idle_per_host(LOAD_CONCURRENCY).build().expect("client");
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..LOAD_CONCURRENCY {
        let (client, url, token, stop) = (client.clone(), url.to_owned(), token.map(str::to_owned), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let mut req = client.get(&url);
                if let Some(t) = &token {
                    req = req.bearer_auth(t);
                }
                let ok = match req.send().await {
                    Ok(r) if r.status().is_success() => !read_body || r.bytes().await.is_ok(),
                    _ => false,
                };
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
    (all, started.elapsed().as_secs_f64())
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

/// What one run of wrk measured.
#[derive(Debug, Clone, Copy, Default)]
struct Wrk {
    rps: f64,
    mean: Duration,
    p50: Duration,
    p99: Duration,
    /// Requests answered in the run.
    requests: u64,
    /// CPU time the gateway process (and Redis, on the real backends) spent during the run.
    gateway_cpu: Duration,
    redis_cpu: Option<Duration>,
}

/// CPU time (user and system) a process has used so far, from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Duration {
    static TICKS_PER_SECOND: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let hz = *TICKS_PER_SECOND.get_or_init(|| {
        let out = std::process::Command::new("getconf").arg("CLK_TCK").output().expect("getconf");
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("CLK_TCK")
    });
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    // The fields after the command name, which is in parentheses and may hold spaces:
    // state is the first, utime and stime the 12th and 13th.
    let rest = &stat[stat.rfind(')').expect("stat has a name") + 1..];
    let fields: Vec<u64> = rest.split_whitespace().skip(1).map(|f| f.parse().unwrap_or(0)).collect();
    Duration::from_micros((fields[10] + fields[11]) * 1_000_000 / hz)
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

/// The Redis server's process, when one runs on this machine.
fn redis_pid() -> Option<u32> {
    let out = std::process::Command::new("pgrep").args(["-x", "redis-server"]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().next()?.trim().parse().ok()
}

/// `wrk`'s durations: `512.00us`, `1.20ms`, `2.01s`.
fn wrk_duration(text: &str) -> Option<Duration> {
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic())?);
    let n: f64 = number.parse().ok()?;
    let secs = match unit {
        "us" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" => n * 60.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

/// Closed-loop load on `url` from `connections` keep-alive connections of wrk, in a process of
/// its own (it shares the machine's CPUs with the server, as any client on it would).
/// `wrk` on `url`, with the CPU the gateway process `pid` (and Redis, `redis`) spent meanwhile.
async fn wrk_cpu(url: &str, token: Option<&str>, pid: u32, redis: Option<u32>) -> Wrk {
    let (gateway, cache) = (cpu_time(pid), redis.map(cpu_time));
    let mut run = wrk(url, token, LOAD_CONCURRENCY, LOAD_SECONDS).await;
    run.gateway_cpu = cpu_time(pid).saturating_sub(gateway);
    run.redis_cpu = redis.zip(cache).map(|(r, before)| cpu_time(r).saturating_sub(before));
    run
}

async fn wrk(url: &str, token: Option<&str>, connections: usize, seconds: u64) -> Wrk {
    let mut cmd = std::process::Command::new("wrk");
    cmd.args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s"), "--latency"]);
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    cmd.arg(url);
    let out =
        tokio::task::spawn_blocking(move || cmd.output()).await.expect("join").expect("wrk runs (apt-get install wrk)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !text.contains("Non-2xx"), "wrk {url}: {text}");
    let field = |prefix: &str| -> Option<&str> {
        text.lines().map(str::trim).find_map(|l| l.strip_prefix(prefix)).and_then(|rest| rest.split_whitespace().next())
    };
    Wrk {
        rps: field("Requests/sec:").and_then(|v| v.parse().ok()).expect("requests/s"),
        mean: field("Latency").and_then(wrk_duration).expect("mean latency"),
        p50: field("50%").and_then(wrk_duration).expect("p50"),
        p99: field("99%").and_then(wrk_duration).expect("p99"),
        requests: text
            .lines()
            .find_map(|l| l.trim().split_once(" requests in ").and_then(|(n, _)| n.trim().parse().ok()))
            .expect("requests"),
        gateway_cpu: Duration::ZERO,
        redis_cpu: None,
    }
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

/// The gateway against a bare handler, each loaded by wrk in its own process: `/usage`, the
/// poll of a running job (what a client polling every 1-2 s sees) and of a complete one (its
/// first comment thread, read from the database), through a release `cova serve` process on
/// the given backends (`extra` settings), with access logs on as deployed.
async fn gateway_overhead(report: &mut Report, label: &str, extra: &[(&str, String)]) {
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

/// Comments of the Instagram post the `instagram` section collects.
const INSTAGRAM_COMMENTS: u64 = 1_000;

/// Collecting a 1,000-comment Instagram post at the default pace (`platforms.instagram.
/// requests_per_second`), with a session (every comment) and logged out (a visitor's part),
/// against the rate bound: the requests it took, spaced at the pace.
async fn instagram_collection(report: &mut Report) {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("sim");
    let mut config = cova_config::Config::default();
    let rate = config.platforms.instagram.requests_per_second;
    cova_tests::use_simulator(&mut config, &sim);
    config.platforms.instagram.requests_per_second = rate;
    let code = cova_sim::instagram_shortcode(cova_sim::InstagramScenario::Normal, INSTAGRAM_COMMENTS);
    let post: cova_platforms::PostRef = format!("instagram:{code}").parse().expect("ref");
    for (name, sessions) in [("session", vec!["sim-session".to_owned().into()]), ("logged_out", Vec::new())] {
        let mut platforms_config = config.platforms.clone();
        platforms_config.instagram.sessions = sessions;
        let platforms = cova_platforms::Platforms::new(&platforms_config).expect("platforms");
        sim.clear_requests();
        let started = Instant::now();
        let mut sink = cova_platforms::VecSink::default();
        let outcome = platforms.collect_comments(&post, INSTAGRAM_COMMENTS as u32, &mut sink).await.expect("collect");
        // The metadata read comes first in a job: its requests belong to the collection.
        let took = started.elapsed().as_secs_f64();
        let ig: Vec<_> = sim.requests().into_iter().filter(|r| r.path.starts_with("/ig/")).collect();
        let requests = ig.len();
        // Each route keeps its own pace: the visitor's (the page, the post) and the session's
        // (its REST pages), one after the other. On each, the first request goes at once and
        // each later one waits its slot.
        let with_session = ig.iter().filter(|r| r.path.starts_with("/ig/api/v1/media/")).count();
        let paced = |n: usize| n.saturating_sub(1) as f64 / rate;
        let bound = paced(with_session) + paced(requests - with_session);
        report.add(
            &format!("instagram_collect_{INSTAGRAM_COMMENTS}_{name}"),
            format!(
                "{took:.1} s for {} of {} comments{} in {requests} requests at {rate} per second; rate bound {bound:.1} s ({:.3}×)",
                outcome.collected,
                outcome.reported_total.unwrap_or(0),
                if outcome.partial { " (a visitor's part)" } else { "" },
                took / bound.max(f64::EPSILON)
            ),
        );
    }
    sim.stop().await;
}

/// Requests in flight per host for the collection bench: the politeness budget it runs with.
const COLLECT_IN_FLIGHT: usize = 8;

async fn collection_speed(report: &mut Report) {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("sim");
    let mut config = cova_config::Config::default();
    let default_rate = config.platforms.tiktok.requests_per_second;
    cova_tests::use_simulator(&mut config, &sim);
    config.platforms.tiktok.max_concurrency_per_host = COLLECT_IN_FLIGHT;
    let id = tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS);
    let post: cova_platforms::PostRef = format!("tiktok:{id}").parse().expect("ref");
    let count = |path: &str| sim.requests().iter().filter(|r| r.path.ends_with(path)).count() as f64;
    // The sequential chain's pages, counted without latency: the bound is the chain walked at it.
    let mut chain_config = config.platforms.clone();
    chain_config.tiktok.list_prefetch = 0;
    let chain = cova_platforms::Platforms::new(&chain_config).expect("platforms");
    sim.clear_requests();
    let mut sink = cova_platforms::VecSink::default();
    chain.collect_comments(&post, COLLECT_COMMENTS as u32, &mut sink).await.expect("collect");
    let (chain_top, chain_replies) = (count("/comment/list/"), count("/comment/list/reply/"));

    let platforms = cova_platforms::Platforms::new(&config.platforms).expect("platforms");
    sim.set_latency_ms(PLATFORM_LATENCY_MS);
    sim.clear_requests();
    let started = Instant::now();
    let mut sink = cova_platforms::VecSink::default();
    let outcome = platforms.collect_comments(&post, COLLECT_COMMENTS as u32, &mut sink).await.expect("collect");
    let took = started.elapsed();
    let (top, replies) = (count("/comment/list/"), count("/comment/list/reply/"));
    let latency = PLATFORM_LATENCY_MS as f64 / 1000.0;
    let bound = chain_top * latency;
    let tiktok = &config.platforms.tiktok;
    report.add(
        "collect_politeness_budget",
        format!(
            "{COLLECT_IN_FLIGHT} requests in flight per host (up to {} top-level chains, {} reply lists), {PLATFORM_LATENCY_MS} ms per request, no rate limit",
            1 + tiktok.list_prefetch,
            tiktok.reply_parallelism
        ),
    );
    // The fewest requests the page sizes allow: every page full (35 here), no reply request
    // for a parent whose preview holds its replies (2 here).
    let truth = sim.expected_post(&id.to_string());
    let page = f64::from(SimConfig::default().tiktok_page_max);
    let minimum_list = (truth.comments.len() as f64 / page).ceil();
    let minimum_replies: f64 =
        truth.comments.iter().filter(|c| c.replies.len() > 2).map(|c| (c.replies.len() as f64 / page).ceil()).sum();
    report.add(
        "collect_5000_requests_vs_minimum",
        format!(
            "{:.3} ({} vs {minimum_list} list + {minimum_replies} reply pages)",
            (top + replies) / (minimum_list + minimum_replies),
            top + replies
        ),
    );
    report.add(
        "collect_5000_comments",
        format!("{:.2} s ({} comments, {top} list + {replies} reply pages)", took.as_secs_f64(), outcome.collected),
    );
    report.add(
        "collect_5000_sequential_chain",
        format!("{chain_top} list + {chain_replies} reply pages; bound {bound:.2} s ({chain_top} list pages one after the other)"),
    );
    report.add("collect_5000_ratio_to_bound", format!("{:.2}", took.as_secs_f64() / bound));
    report.add(
        "collect_5000_requests_vs_chain",
        format!(
            "{:.2} ({} vs {})",
            (top + replies) / (chain_top + chain_replies),
            top + replies,
            chain_top + chain_replies
        ),
    );
    report.add(
        "collect_5000_at_default_rate",
        format!(
            "{:.1} s at least ({} requests at {default_rate} per second per host)",
            (top + replies) / default_rate,
            top + replies
        ),
    );

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

/// A TikTok URL of a simulated 20-comment post; `n` makes it distinct.
fn post_of_20(n: u64) -> String {
    // Ids outside the simulator's numbered range carry `id % 1000` comments.
    format!("https://www.tiktok.com/@a/video/{}", 6_000_000_000_000_000_000u64 + n * 1_000 + 20)
}

/// Jobs per second with `processes` scraper processes when platform latency dominates, with
/// the politeness pace at `requests_per_second` per host and route, shared by the processes
/// (0: lifted), and `proxies` egress proxies (TCP relays to the simulator) besides. Enough
/// accounts (three running analyses each) keep every process' slots full.
async fn throughput(real: &RealBackends, processes: usize, requests_per_second: f64, proxies: usize) -> Fleet {
    let sim = SimConfig { latency_ms: PLATFORM_LATENCY_MS, ..SimConfig::default() };
    let mut app = real.app(sim, Scraper::External).await;
    app.config.platforms.tiktok.requests_per_second = requests_per_second;
    let mut relays = Vec::new();
    for _ in 0..proxies {
        let upstream = cova_tests::proxy::upstream_of(&app.config.platforms.tiktok.web_base_url);
        relays.push(cova_tests::proxy::Proxy::spawn(upstream).await);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let mut more = Vec::new();
    if !relays.is_empty() {
        let list: Vec<String> = relays.iter().map(|r| format!("\"http://{}\"", r.addr)).collect();
        let file = dir.path().join("proxies.toml");
        std::fs::write(&file, format!("[platforms.tiktok]\nproxies = [{}]\n", list.join(", "))).expect("config");
        more.push(("COVA_CONFIG", file.display().to_string()));
    }
    let scrapers: Vec<RoleProcess> = (0..processes).map(|_| RoleProcess::scraper_with(&app, &more)).collect();
    let accounts = THROUGHPUT_ACCOUNTS * processes.max(1) as u64;
    let mut clients = Vec::new();
    for _ in 0..accounts {
        let (account, token) = app.integrator().await;
        // A job holds up to 5,000 comments until the post's count lowers the hold.
        app.grant(&account, 5_000 * JOBS_PER_ACCOUNT as i64).await;
        clients.push(app.client(Some(&token)));
    }
    let cpu_before: Duration = scrapers.iter().map(|p| cpu_time(p.child.id())).sum();
    let mut submitters = tokio::task::JoinSet::new();
    for (a, client) in (0..).zip(clients) {
        submitters.spawn(async move {
            for k in 0..JOBS_PER_ACCOUNT {
                submit(&client, &post_of_20(a * JOBS_PER_ACCOUNT + k)).await;
            }
        });
    }
    while let Some(done) = submitters.join_next().await {
        done.expect("submitter");
    }
    let jobs = (accounts * JOBS_PER_ACCOUNT) as i64;
    let deadline = Instant::now() + Duration::from_secs(300);
    let progress = loop {
        let p = app.job_progress().await;
        if p.complete + p.failed == jobs {
            break p;
        }
        assert!(Instant::now() < deadline, "jobs did not finish: {p:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(progress.failed, 0, "no job fails");
    let span_ms = progress.last_finished_at.unwrap_or(0) - progress.first_created_at.unwrap_or(0);
    let scraper_cpu = scrapers.iter().map(|p| cpu_time(p.child.id())).sum::<Duration>().saturating_sub(cpu_before);
    // Every message a job caused: its command, its events, and what the events fanned out to.
    let messages = count_rows(app.db(), "SELECT COUNT(*) AS n FROM outbox").await;
    drop(scrapers);
    app.stop().await;
    Fleet {
        jobs_per_second: jobs as f64 / (span_ms.max(1) as f64 / 1000.0),
        scraper_cpu_per_job: scraper_cpu / u32::try_from(jobs).unwrap_or(u32::MAX),
        messages_per_job: messages as f64 / jobs as f64,
    }
}

/// Submits a post as an integrator would: an answer of 503 or 429 (the gateway's database
/// pool or limits while the machine is saturated) is retried after a moment; answers the job.
async fn submit(client: &cova_tests::client::Client, url: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let reply = client.analyze(url, None).await;
        let busy = matches!(reply.status.as_u16(), 503 | 429);
        if !busy || Instant::now() > deadline {
            assert!(reply.status.is_success(), "analyze: {} {:?}", reply.status, reply.body);
            return reply.ok();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a fleet run measured.
struct Fleet {
    jobs_per_second: f64,
    scraper_cpu_per_job: Duration,
    messages_per_job: f64,
}

/// A `SELECT COUNT(*) AS n …` (or any one bigint named `n`) on the database.
/// What the kept comments take on PostgreSQL, with their indexes and TOAST: the sum of the
/// days' partitions (the partitioned table itself holds nothing).
const JOB_COMMENTS_BYTES: &str = "SELECT COALESCE(SUM(pg_total_relation_size(inhrelid)), 0)::BIGINT AS n \
     FROM pg_inherits WHERE inhparent = 'job_comments'::regclass";

async fn count_rows(db: &cova_storage::Db, sql: &str) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct N {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = db.conn().await.expect("conn");
    conn.tx().get_result::<N, _>(diesel::sql_query(sql)).await.expect("query").n
}

/// The scraper fleet: 1, 2, 4 and 8 processes on one queue with the politeness pace lifted
/// (what the processes can do), then 1 and 4 at the default pace (what the platform allows).
async fn throughput_and_scale(report: &mut Report, real: &RealBackends) {
    let first = throughput(real, 1, 0.0, 0).await;
    let one = first.jobs_per_second;
    report.add("throughput_1_scraper", format!("{one:.1} jobs/s (politeness pace lifted, 100 ms per request)"));
    report.add(
        "scraper_cpu_per_1000_comments",
        format!(
            "{:.1} CPU-ms ({:.2} CPU-ms per job of 20 comments, one scraper process)",
            first.scraper_cpu_per_job.as_secs_f64() * 1000.0 * 1000.0 / 20.0,
            first.scraper_cpu_per_job.as_secs_f64() * 1000.0
        ),
    );
    report.add("messages_per_job", format!("{:.2} outbox messages (command and events)", first.messages_per_job));
    for n in [2usize, 4, 8] {
        let fleet = throughput(real, n, 0.0, 0).await.jobs_per_second;
        report.add(&format!("throughput_{n}_scrapers"), format!("{fleet:.1} jobs/s"));
        report.add(&format!("throughput_scaling_{n}_vs_1"), format!("{:.2}", fleet / one));
    }
    let rate = cova_config::Config::default().platforms.tiktok.requests_per_second;
    for (n, proxies) in [(1usize, 0usize), (4, 0), (4, 2)] {
        let paced = throughput(real, n, rate, proxies).await.jobs_per_second;
        let (row, routes) = match proxies {
            0 => (format!("throughput_{n}_scrapers_default_pace"), "one route".to_owned()),
            p => {
                (format!("throughput_{n}_scrapers_default_pace_{p}_proxies"), format!("{p} proxies, each its own pace"))
            }
        };
        report.add(
            &row,
            format!("{paced:.1} jobs/s ({rate} requests/s per host and route, shared by the processes; {routes})"),
        );
    }
}

/// AI runs per account in the AI fleet bench: as many as an account may have running.
const AI_RUNS_PER_ACCOUNT: u64 = cova_domain::limits::MAX_RUNNING_AI_JOBS as u64;

/// AI jobs per second with `processes` `cova ai-worker` processes (the OpenAI-compatible
/// analyzer against the simulator's model at `PLATFORM_LATENCY_MS` per request). The posts
/// are collected first, by as many scraper processes; then every post's AI run is queued at
/// once, 16 accounts' worth per process.
async fn ai_throughput(real: &RealBackends, processes: usize) -> f64 {
    let sim = SimConfig { latency_ms: PLATFORM_LATENCY_MS, ..SimConfig::default() };
    let mut app = real.app(sim, Scraper::External).await;
    app.config.platforms.tiktok.requests_per_second = 0.0;
    let accounts = 16 * processes as u64;
    let jobs = (accounts * AI_RUNS_PER_ACCOUNT) as i64;
    let scrapers: Vec<RoleProcess> = (0..processes).map(|_| RoleProcess::scraper(&app)).collect();
    let mut collecting = tokio::task::JoinSet::new();
    for a in 0..accounts {
        let (account, token) = app.integrator().await;
        app.grant(&account, 10_000).await;
        let client = app.client(Some(&token));
        collecting.spawn(async move {
            let mut refs = Vec::new();
            for k in 0..AI_RUNS_PER_ACCOUNT {
                let job = submit(&client, &post_of_20(a * AI_RUNS_PER_ACCOUNT + k)).await;
                refs.push(job["ref"].as_str().unwrap_or_default().to_owned());
            }
            (client, refs)
        });
    }
    // Each account's client with the refs it collected (the tasks end in any order).
    let collected: Vec<(cova_tests::client::Client, Vec<String>)> = collecting.join_all().await;
    let deadline = Instant::now() + Duration::from_secs(300);
    while app.job_progress().await.complete < jobs {
        assert!(Instant::now() < deadline, "the posts were not collected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(scrapers);

    let c = &app.config;
    let ai = common::Cova::sharing(
        c,
        &[
            ("COVA_AI__ANALYZER", "openai".to_owned()),
            ("COVA_AI__OPENAI__BASE_URL", c.ai.openai.base_url.clone()),
            ("COVA_AI__OPENAI__API_KEY", cova_sim::LLM_API_KEY.to_owned()),
            ("COVA_AI__OPENAI__MODEL", c.ai.openai.model.clone()),
        ],
    );
    let workers: Vec<RoleProcess> =
        (0..processes).map(|_| RoleProcess { child: ai.start_until("ai-worker", "consuming") }).collect();
    let mut running = tokio::task::JoinSet::new();
    for (client, refs) in collected {
        running.spawn(async move {
            for r#ref in refs {
                let quote = client.post_json("/api/v1/ai/quote", serde_json::json!({"ref": r#ref})).await.ok();
                let run = client.post_json("/api/v1/ai/run", serde_json::json!({"quote_id": quote["quote_id"]})).await;
                assert!(run.status.is_success(), "AI run: {} {:?}", run.status, run.body);
            }
        });
    }
    running.join_all().await;
    let deadline = Instant::now() + Duration::from_secs(300);
    let done = "SELECT COUNT(*) AS n FROM jobs WHERE kind = 'ai' AND status IN ('complete', 'failed')";
    while count_rows(app.db(), done).await < jobs {
        assert!(Instant::now() < deadline, "the AI jobs did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(workers);
    let failed = count_rows(app.db(), "SELECT COUNT(*) AS n FROM jobs WHERE kind = 'ai' AND status = 'failed'").await;
    assert_eq!(failed, 0, "no AI job fails");
    let span_ms =
        count_rows(app.db(), "SELECT MAX(finished_at) - MIN(created_at) AS n FROM jobs WHERE kind = 'ai'").await;
    app.stop().await;
    jobs as f64 / (span_ms.max(1) as f64 / 1000.0)
}

/// The ai-worker fleet: 1, 2 and 4 processes on one queue.
async fn ai_fleet(report: &mut Report, real: &RealBackends) {
    let one = ai_throughput(real, 1).await;
    let concurrency = cova_config::Config::default().ai.concurrency;
    report.add(
        "ai_throughput_1_worker",
        format!(
            "{one:.1} AI jobs/s ({concurrency} at once per process; model at {PLATFORM_LATENCY_MS} ms per request)"
        ),
    );
    for n in [2usize, 4] {
        let fleet = ai_throughput(real, n).await;
        report.add(&format!("ai_throughput_{n}_workers"), format!("{fleet:.1} AI jobs/s"));
        report.add(&format!("ai_throughput_scaling_{n}_vs_1"), format!("{:.2}", fleet / one));
    }
}

/// Peak RSS of one scraper process collecting a 5,000-comment post, next to the JSON size
/// of what it collected.
async fn scraper_memory(report: &mut Report, real: &RealBackends) {
    let app = real.app(SimConfig::default(), Scraper::External).await;
    let scraper = RoleProcess::scraper(&app);
    let idle = scraper.memory_kib("VmRSS");
    let (account, token) = app.integrator().await;
    app.grant(&account, 10_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS);
    let job = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
    let job_id = job["job_id"].as_str().expect("job id").to_owned();
    let done = client.wait_job(&job_id).await;
    assert_eq!(done["status"], "complete", "{done}");
    let peak = scraper.memory_kib("VmHWM");
    let result = &done["result"];
    assert!(result["next_cursor"].is_null(), "one page holds the whole result");
    let json = serde_json::to_vec(&result["comments"]).expect("json").len();
    report.add("scraper_peak_rss_5000_comments", format!("{:.1} MiB ({:.1} MiB idle)", mib(peak), mib(idle)));
    // What a kept comment costs PostgreSQL: its row with indexes and TOAST, kept 14 days.
    let rows = count_rows(app.db(), "SELECT COUNT(*) AS n FROM job_comments").await;
    let bytes = count_rows(app.db(), JOB_COMMENTS_BYTES).await;
    report.add(
        "postgres_bytes_per_comment",
        format!(
            "{:.0} bytes ({rows} rows, {:.2} MiB with indexes)",
            bytes as f64 / rows.max(1) as f64,
            mib(bytes as u64 / 1024)
        ),
    );
    report.add(
        "scraper_collected_json_5000_comments",
        format!("{:.2} MiB ({} comments)", json as f64 / (1024.0 * 1024.0), result["comments_total"]),
    );
    drop(scraper);
    app.stop().await;
}

/// Seeds `accounts` accounts with a pack and `per_account` watched library entries each, one
/// of which per account is due at `due_at`; the others are due a day later.
async fn seed_watches(db: &cova_storage::Db, accounts: i64, per_account: i64, due_at: i64) {
    let month = cova_domain::time::month_of(due_at);
    let later = due_at + 86_400_000;
    let total = accounts * per_account;
    // The row numbers 1..=n: generate_series on PostgreSQL, a recursive CTE on SQLite.
    let numbers = |n: i64| {
        if db.is_postgres() {
            format!("SELECT g AS n FROM generate_series(1, {n}) g")
        } else {
            format!("WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {n}) SELECT n FROM s")
        }
    };
    // A million rows take longer than a request may: no statement timeout while seeding.
    let untimed = if db.is_postgres() { "SET statement_timeout = 0; " } else { "" };
    let sql = format!(
        "{untimed}INSERT INTO accounts (id, email, email_confirmed_at, active_tokens, free_comments_left, created_at) \
           SELECT 'acct-' || n, 'w' || n || '@example.com', 0, 0, 0, 0 FROM ({accounts_q}) a; \
         INSERT INTO balances (account_id, month, granted, reserved, spent) \
           SELECT 'acct-' || n, '{month}', 100000, 0, 0 FROM ({accounts_q}) a; \
         INSERT INTO analyses (id, account_id, ref, url, platform, status, created_at, saved_at, \
                               watch_enabled, watch_interval_min, watch_next_run_at) \
           SELECT 'an-' || n, 'acct-' || (n % {accounts} + 1), 'tiktok:' || (7000000000000000000 + n), \
                  'https://www.tiktok.com/@a/video/' || (7000000000000000000 + n), 'tiktok', 'metadata_only', 0, 0, \
                  TRUE, 60, CASE WHEN n <= {accounts} THEN {due_at} ELSE {later} END FROM ({watches_q}) w; \
         ANALYZE;",
        accounts_q = numbers(accounts),
        watches_q = numbers(total),
    );
    let mut conn = db.conn().await.expect("conn");
    conn.tx().batch_execute(&sql).await.expect("seed watches");
}

/// One scheduler tick over `1,000 × per_account` watches (100,000 on SQLite, 1,000,000 on
/// PostgreSQL) and 100,000 followed creators: with 1,000 due (each run started through the
/// outbox), then with none due (the scan alone). Only this scheduler runs on the database.
async fn scheduler_scan(report: &mut Report, label: &str, database: TestDatabase, per_account: i64) {
    let mut config = cova_config::Config::default();
    config.database = database.config.clone();
    let backends = cova_runtime::Backends::connect(&config).await.expect("backends");
    backends.db.migrate().await.expect("migrate");
    let now = cova_domain::time::now_ms();
    seed_watches(&backends.db, 1_000, per_account, now - 1_000).await;
    let size = if per_account >= 1_000 { format!("{}m", per_account / 1_000) } else { format!("{}k", per_account) };
    seed_creators(&backends.db, 1_000, 100, now - 1_000).await;
    let db = backends.db.clone();
    let platforms = cova_platforms::Platforms::new(&config.platforms).expect("platforms");
    let scheduler = cova_scheduler::Scheduler::new(
        backends,
        cova_config::SchedulerConfig::default(),
        Arc::new(tokio::sync::Notify::new()),
        platforms,
    );
    let started = Instant::now();
    let tick = scheduler.tick().await.expect("tick");
    let busy = started.elapsed();
    assert_eq!(tick.started, 1_000, "{tick:?}");
    let started = Instant::now();
    let idle_tick = scheduler.tick().await.expect("tick");
    let idle = started.elapsed();
    assert_eq!(idle_tick.started, 0);
    let concurrency = cova_scheduler::starts_at_once(&cova_config::SchedulerConfig::default(), &db);
    report.add(
        &format!("scheduler_tick_{size}_watches_1000_due_{label}"),
        format!("{} (groups of {} runs, {concurrency} at once)", ms(busy), cova_scheduler::RUNS_PER_TRANSACTION),
    );
    report.add(&format!("scheduler_tick_{size}_watches_none_due_{label}"), ms(idle));

    // The creators' due scan: what the creator pass claims before listing (its platform
    // requests are the simulator's business, measured by the fleet benches).
    let batch = i64::try_from(cova_config::SchedulerConfig::default().creator_concurrency).unwrap_or(4);
    let started = Instant::now();
    let mut claimed = 0;
    loop {
        let due = cova_storage::repo::creators::claim_due(&db, now, batch).await.expect("claim");
        claimed += due.len();
        if (due.len() as i64) < batch {
            break;
        }
    }
    let busy = started.elapsed();
    assert_eq!(claimed, 1_000);
    let started = Instant::now();
    let none = cova_storage::repo::creators::claim_due(&db, now, batch).await.expect("claim");
    let idle = started.elapsed();
    assert!(none.is_empty());
    report.add(&format!("creator_scan_100k_creators_1000_due_{label}"), ms(busy));
    report.add(&format!("creator_scan_100k_creators_none_due_{label}"), ms(idle));
    let _ = database.drop_database().await;
}

/// Scrapes kept per day and comments per scrape for the purge bench: 14 days of them are
/// 5,000,800 comment rows.
const PURGE_JOBS_PER_DAY: i64 = 100;
const PURGE_COMMENTS_PER_JOB: i64 = 3_572;

/// The janitor's purge on PostgreSQL over 14 days of kept breakdowns (5,000,800 comments):
/// one day's worth expiring, then two days' worth (time proportional to what expires), with a
/// scrape appending pages of 50 comments beside it (its p99 against the same scrape alone), and
/// the table's size before and after.
async fn purge_at_scale(report: &mut Report, real: &RealBackends) {
    use cova_storage::repo::jobs::{StoredComment, append_comments};
    const DAY: i64 = 86_400_000;
    let database = TestDatabase::postgres(&real.database).await;
    let db = database.db().await;
    let now = cova_domain::time::now_ms();
    let today = cova_storage::repo::comment_days::day_of(now);
    let jobs = PURGE_JOBS_PER_DAY * 14;
    let total = jobs * PURGE_COMMENTS_PER_JOB;
    // Job g's scrape started on day `today - 14 + k` (k = its day among the 14) and its breakdown
    // expires 14 days later: the oldest day at `now`, the next at `now` + a day, and so on.
    let day_of_job = format!("({today} - 14 + (g - 1) / {PURGE_JOBS_PER_DAY})");
    let sql = format!(
        "SET statement_timeout = 0; \
         SELECT cova_comments_day(d) FROM generate_series({today} - 14, {today} + 1) d; \
         INSERT INTO accounts (id, email, email_confirmed_at, active_tokens, free_comments_left, created_at) \
           VALUES ('acct-p', 'p@example.com', 0, 0, 0, 0); \
         INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at, finished_at, comments_day) \
           SELECT 'job-' || g, 'acct-p', 'analyze', 'tiktok:' || (7000000000000000000 + g), \
                  'https://www.tiktok.com/@a/video/' || (7000000000000000000 + g), 'complete', 0, 0, {day_of_job} \
           FROM generate_series(1, {jobs}) g; \
         INSERT INTO analyses (id, account_id, ref, url, platform, status, created_at, saved_at, last_scraped_at, \
                               expires_at, last_job_id, comments_day, comment_count) \
           SELECT 'an-' || g, 'acct-p', 'tiktok:' || (7000000000000000000 + g), \
                  'https://www.tiktok.com/@a/video/' || (7000000000000000000 + g), 'tiktok', 'ready', 0, 0, 0, \
                  {now} - 1000 + ((g - 1) / {PURGE_JOBS_PER_DAY}) * {DAY}, 'job-' || g, {day_of_job}, \
                  {PURGE_COMMENTS_PER_JOB} \
           FROM generate_series(1, {jobs}) g; \
         INSERT INTO job_comments (job_id, comment_id, parent_id, position, body, likes, posted_at, search, thread, \
                                   comments_day) \
           SELECT 'job-' || job, 'c' || g, NULL, g, \
                  '{{\"id\":\"' || g || '\",\"text\":\"a comment of about the usual length, with a few words\",' \
                  || '\"author\":{{\"handle\":\"someone\",\"name\":\"Some One\"}},\"likes\":3,\"reply_count\":0}}', \
                  3, 0, 'a comment of about the usual length, with a few words someone some one', g, \
                  {today} - 14 + (job - 1) / {PURGE_JOBS_PER_DAY} \
           FROM (SELECT g, (g - 1) / {PURGE_COMMENTS_PER_JOB} + 1 AS job FROM generate_series(1, {total}) g) rows; \
         INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at, started_at, comments_day) \
           SELECT 'live-' || g, 'acct-p', 'analyze', 'tiktok:' || g, 'https://www.tiktok.com/@a/video/' || g, \
                  'in_progress', 0, {now}, {today} FROM generate_series(1, 2) g; \
         INSERT INTO job_leases (job_id, owner, expires_at) \
           SELECT 'live-' || g, 'bench', {far} FROM generate_series(1, 2) g; \
         ANALYZE;",
        far = now + 100 * DAY,
    );
    let mut conn = db.conn().await.expect("conn");
    conn.tx().batch_execute(&sql).await.expect("seed 5,000,800 comments");
    drop(conn);
    let size = async || count_rows(&db, JOB_COMMENTS_BYTES).await as u64;
    let before = size().await;

    // A scrape storing pages of 50 comments until told to stop: each page's latency.
    let scrape = |job: &'static str, stop: Arc<std::sync::atomic::AtomicBool>, pages: usize| {
        let db = db.clone();
        async move {
            let mut latencies = Vec::new();
            for page in 0.. {
                if page >= pages && stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let batch: Vec<StoredComment> = (0..50)
                    .map(|i| StoredComment {
                        comment_id: format!("p{page}-{i}"),
                        parent_id: None,
                        body: r#"{"text":"a new comment"}"#.to_owned(),
                        likes: 0,
                        posted_at: 0,
                        search: "a new comment".to_owned(),
                    })
                    .collect();
                let started = Instant::now();
                append_comments(&db, job, ("bench", 100 * DAY), &batch, None, now).await.expect("append");
                latencies.push(started.elapsed());
            }
            latencies.sort();
            latencies
        }
    };
    let done = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let alone = scrape("live-1", done, 200).await;

    // The janitor's purge: the breakdowns expire, then their days' partitions are dropped.
    let purge = async |at: i64| {
        let started = Instant::now();
        let mut breakdowns = 0;
        loop {
            let n = cova_storage::repo::analyses::expire_due(&db, at, 500).await.expect("purge");
            breakdowns += n;
            if n < 500 {
                break;
            }
        }
        let days = cova_storage::repo::comment_days::drop_unused(&db, at).await.expect("drop days");
        (started.elapsed(), breakdowns as i64, days.len())
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let beside = tokio::spawn(scrape("live-2", stop.clone(), 20));
    let (one_day, first, first_days) = purge(now).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let beside = beside.await.expect("scrape");
    let (two_days, second, second_days) = purge(now + 2 * DAY).await;
    assert_eq!((first, second), (PURGE_JOBS_PER_DAY, 2 * PURGE_JOBS_PER_DAY), "a day's worth, then two");
    assert_eq!((first_days, second_days), (1, 2), "a day's partition, then two");
    let after = size().await;
    // A new day's scrapes go to their own partition: the table holds the days still used.
    let refill = format!(
        "SET statement_timeout = 0; \
         INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at, finished_at, comments_day) \
           SELECT 'new-' || g, 'acct-p', 'analyze', 'tiktok:' || g, 'https://www.tiktok.com/@a/video/' || g, \
                  'complete', 0, 0, {next} FROM generate_series(1, {PURGE_JOBS_PER_DAY}) g; \
         INSERT INTO job_comments (job_id, comment_id, parent_id, position, body, likes, posted_at, search, thread, \
                                   comments_day) \
           SELECT 'new-' || ((g - 1) / {PURGE_COMMENTS_PER_JOB} + 1), 'c' || g, NULL, g, \
                  '{{\"id\":\"' || g || '\",\"text\":\"a comment of about the usual length, with a few words\",' \
                  || '\"author\":{{\"handle\":\"someone\",\"name\":\"Some One\"}},\"likes\":3,\"reply_count\":0}}', \
                  3, 0, 'a comment of about the usual length, with a few words someone some one', g, {next} \
           FROM generate_series(1, {day}) g;",
        next = today + 1,
        day = PURGE_JOBS_PER_DAY * PURGE_COMMENTS_PER_JOB,
    );
    let mut conn = db.conn().await.expect("conn");
    conn.tx().batch_execute(&refill).await.expect("a new day's scrapes");
    drop(conn);
    let refilled = size().await;
    let kept = count_rows(&db, "SELECT COUNT(*) AS n FROM job_comments WHERE job_id LIKE 'job-%'").await;
    assert_eq!(kept, total - 3 * PURGE_JOBS_PER_DAY * PURGE_COMMENTS_PER_JOB, "exactly the expired rows went");

    let rows = |days: i64| days * PURGE_JOBS_PER_DAY * PURGE_COMMENTS_PER_JOB;
    let rate = |d: Duration, days: i64| rows(days) as f64 / d.as_secs_f64();
    report.add(
        "purge_5m_comments_one_day",
        format!(
            "{} for {} breakdowns, {} comments ({:.0} comments/s; their day's partition dropped)",
            ms(one_day),
            PURGE_JOBS_PER_DAY,
            rows(1),
            rate(one_day, 1)
        ),
    );
    report.add(
        "purge_5m_comments_two_days",
        format!(
            "{} for {} comments ({:.2}× the one-day purge for 2× the rows)",
            ms(two_days),
            rows(2),
            two_days.as_secs_f64() / one_day.as_secs_f64()
        ),
    );
    report.add(
        "purge_scrape_page_p99",
        format!(
            "{} beside the purge ({} pages of 50), {} alone (p50 {} / {})",
            ms(percentile(&beside, 0.99)),
            beside.len(),
            ms(percentile(&alone, 0.99)),
            ms(percentile(&beside, 0.5)),
            ms(percentile(&alone, 0.5))
        ),
    );
    report.add(
        "purge_table_size",
        format!(
            "job_comments {:.0} MiB with 5,000,800 rows in 14 day partitions, {:.0} MiB after 3 days purged (their partitions dropped), {:.0} MiB after a new day's {} rows",
            mib(before / 1024),
            mib(after / 1024),
            mib(refilled / 1024),
            PURGE_JOBS_PER_DAY * PURGE_COMMENTS_PER_JOB
        ),
    );
    let _ = database.drop_database().await;
}

/// Seeds `per_account` followed creators for each of the accounts `seed_watches` made, one of
/// which per account is due at `due_at`; the others are due a day later.
async fn seed_creators(db: &cova_storage::Db, accounts: i64, per_account: i64, due_at: i64) {
    let later = due_at + 86_400_000;
    let total = accounts * per_account;
    let numbers = if db.is_postgres() {
        format!("SELECT g AS n FROM generate_series(1, {total}) g")
    } else {
        format!("WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {total}) SELECT n FROM s")
    };
    let sql = format!(
        "INSERT INTO creators (id, account_id, ref, platform, listing, profile, created_at, since_at, \
                               watch_enabled, watch_interval_min, next_run_at) \
           SELECT 'cr-' || n, 'acct-' || (n % {accounts} + 1), 'tiktok:user:' || (6800000000000000000 + n), \
                  'tiktok', 'MS4w' || n, '{{}}', 0, 0, TRUE, 360, \
                  CASE WHEN n <= {accounts} THEN {due_at} ELSE {later} END FROM ({numbers}) c;"
    );
    let mut conn = db.conn().await.expect("conn");
    conn.tx().batch_execute(&sql).await.expect("seed creators");
}

/// A release `cova serve` process on the embedded backends: the time to export a
/// 5,000-comment breakdown, and the process's peak memory around it (streamed, not buffered).
async fn export_speed(report: &mut Report) {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator");
    // The load is the measure here, not the request limit.
    let serve = ServeProcess::start(&sim, &[("COVA_LIMITS__API_REQUESTS_PER_MINUTE", "100000000".to_owned())]).await;
    let id = tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS);
    let job_id = serve.collect(id).await;
    result_speed(report, &serve, &job_id).await;
    let http = reqwest::Client::new();
    for format in ["csv", "jsonl", "xlsx"] {
        let before = serve.mib("VmRSS");
        let started = Instant::now();
        let res = http
            .get(format!("{}/api/v1/analyses/tiktok:{id}/export?format={format}", serve.base))
            .bearer_auth(&serve.token)
            .send()
            .await
            .expect("export");
        assert_eq!(res.status(), 200);
        let bytes = res.bytes().await.expect("body").len();
        let took = started.elapsed();
        report.add(
            &format!("export_5000_comments_{format}"),
            format!(
                "{} ({:.2} MiB; process RSS {:.1} MiB before, peak {:.1} MiB)",
                ms(took),
                bytes as f64 / (1024.0 * 1024.0),
                before,
                serve.mib("VmHWM")
            ),
        );
    }
    drop(serve);
    sim.stop().await;
}

/// The workspace's comments table with a 5,000-comment post, in headless Chromium (Debian's
/// `chromium` and `chromium-driver`): the time from the result's arrival (its response's end
/// in the browser's resource timing) to the first rows on screen, sorting and filtering (from
/// the redraw's start to the frame after it, the page's own `performance.measure`), scrolling
/// (frame intervals from `requestAnimationFrame` and long animation frames from the browser's
/// timeline while the table scrolls from top to bottom), and the page's size (DOM nodes, JS heap).
async fn workspace_table(report: &mut Report) {
    use cova_tests::browser::Driver;
    if !std::path::Path::new("/usr/bin/chromedriver").exists() {
        report.add("workspace_table_5000", "skipped (chromium and chromium-driver are not installed)");
        return;
    }
    let app = cova_tests::spawn_app_with_sim(SimConfig::default(), |c| {
        c.limits.api_requests_per_minute = 10_000_000;
        c.auth.token_cache_ms = 0;
    })
    .await;
    let email = "table@example.com";
    cova_tests::workspace::signed_up(&app, email).await;
    let account = cova_storage::repo::accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 10_000).await;
    let token = app.token(&account, "analyze:write,library:write").await;
    let id = tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS);
    let job = app.client(Some(&token)).collect(id).await;
    let job_id = job["job_id"].as_str().expect("job id").to_owned();

    let driver = Driver::start().await;
    let base = app.base_url.clone();
    driver.goto(&format!("{base}/#/login")).await;
    driver.fill("#login-email", email).await;
    driver.fill("#login-password", cova_tests::workspace::PASSWORD).await;
    driver.click("#login-submit").await;
    driver.wait_url("the dashboard", |u| u.ends_with("#/dashboard")).await;
    driver.execute("localStorage.setItem('cova.commentsView', 'table');", serde_json::json!([])).await;

    let mut first_rows = Vec::new();
    for _ in 0..5 {
        // A fresh page each time (the timeline starts over), then the job opened from it.
        driver.goto(&format!("{base}/#/dashboard")).await;
        driver.execute("location.reload();", serde_json::json!([])).await;
        driver.find("#latest-link").await;
        driver.goto(&format!("{base}/#/analyze?job={job_id}")).await;
        driver.find("#comments-table tr.comment-row").await;
        let took = wait_measure(&driver, 1, &format!(
            "const r = performance.getEntriesByType('resource').filter(e => e.name.endsWith('/api/v1/analyze/{job_id}')).at(-1); \
             const d = performance.getEntriesByName('cova:comments-drawn').at(-1); \
             return r && d ? d.startTime + d.duration - r.responseEnd : null;"
        ))
        .await;
        first_rows.push(took);
    }
    let (rows, heap_mib, nodes) = page_size(&driver).await;
    report.add(
        "workspace_table_5000_first_rows",
        format!(
            "{} (median of 5; result parsed, keys built, chart and first rows drawn; {rows} rows in the DOM)",
            ms_f(median(&mut first_rows))
        ),
    );

    // Sorting: a header clicked, each way, five times.
    let mut sorts = Vec::new();
    for k in 0..10 {
        let before = measures(&driver).await;
        let column = if k % 4 < 2 { "likes" } else { "time" };
        driver.click(&format!("#comments-table button[data-sort={column}]")).await;
        sorts.push(
            wait_measure(
                &driver,
                before + 1,
                "return performance.getEntriesByName('cova:comments-drawn').at(-1).duration;",
            )
            .await,
        );
    }
    // Filtering: a search typed (the page waits 150 ms for typing to pause; not counted).
    let mut filters = Vec::new();
    for word in ["price", "where", "", "buy", "love", ""] {
        let before = measures(&driver).await;
        driver.set_value("#comments-search", word).await;
        filters.push(
            wait_measure(
                &driver,
                before + 1,
                "return performance.getEntriesByName('cova:comments-drawn').at(-1).duration;",
            )
            .await,
        );
    }
    report.add(
        "workspace_table_5000_sort",
        format!(
            "median {}, max {} (10 header clicks: likes and time, each way)",
            ms_f(median(&mut sorts)),
            ms_f(sorts.iter().cloned().fold(0.0, f64::max))
        ),
    );
    report.add(
        "workspace_table_5000_filter",
        format!(
            "median {}, max {} (6 searches; after the 150 ms typing pause)",
            ms_f(median(&mut filters)),
            ms_f(filters.iter().cloned().fold(0.0, f64::max))
        ),
    );

    // Scrolling from the top to the bottom, a step per frame.
    let scrolled = driver
        .execute_async(
            "const done = arguments[0]; const s = document.querySelector('.comments-scroller'); s.scrollTop = 0; \
             const long = []; let obs = null; \
             try { obs = new PerformanceObserver(l => long.push(...l.getEntries().map(e => e.duration))); obs.observe({type: 'long-animation-frame'}); } catch (e) {} \
             const stamps = []; const step = Math.max(40, (s.scrollHeight - s.clientHeight) / 600); \
             const tick = (t) => { stamps.push(t); \
               if (s.scrollTop + s.clientHeight >= s.scrollHeight - 1 || stamps.length > 2000) { \
                 setTimeout(() => { obs?.disconnect(); \
                   const gaps = stamps.slice(1).map((x, i) => x - stamps[i]).sort((a, b) => a - b); \
                   done({frames: gaps.length, p50: gaps[Math.floor(gaps.length * 0.5)], p95: gaps[Math.floor(gaps.length * 0.95)], \
                         max: gaps.at(-1), slow: gaps.filter(g => g > 25).length, long: long.length, longest: Math.max(0, ...long), \
                         rows: document.querySelectorAll('#comments-table tr.comment-row').length}); }, 100); \
                 return; } \
               s.scrollTop += step; requestAnimationFrame(tick); }; \
             requestAnimationFrame(tick);",
            serde_json::json!([]),
        )
        .await;
    let f = |k: &str| scrolled[k].as_f64().unwrap_or(f64::NAN);
    report.add(
        "workspace_table_5000_scroll",
        format!(
            "{} frames top to bottom: interval p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms; {} frames over 25 ms; {} long animation frames (longest {:.0} ms); {} rows in the DOM at the end",
            f("frames"), f("p50"), f("p95"), f("max"), f("slow"), f("long"), f("longest"), f("rows")
        ),
    );
    let (rows_after, heap_after, nodes_after) = page_size(&driver).await;
    report.add(
        "workspace_table_5000_page_size",
        format!("{nodes} DOM nodes, {heap_mib:.1} MiB JS heap on opening; {nodes_after} nodes, {heap_after:.1} MiB after scrolling to the end ({rows_after} rows drawn)"),
    );
    driver.quit().await;
    app.stop().await;
}

/// How many `cova:comments-drawn` measures the page has.
async fn measures(driver: &cova_tests::browser::Driver) -> usize {
    driver
        .execute("return performance.getEntriesByName('cova:comments-drawn').length;", serde_json::json!([]))
        .await
        .as_u64()
        .unwrap_or(0) as usize
}

/// Waits for the page's `at_least`-th `cova:comments-drawn` measure, then returns `script`'s
/// number (milliseconds).
async fn wait_measure(driver: &cova_tests::browser::Driver, at_least: usize, script: &str) -> f64 {
    cova_tests::eventually("the page's measure", async || measures(driver).await >= at_least).await;
    cova_tests::until("a number", async || driver.execute(script, serde_json::json!([])).await.as_f64()).await
}

/// Rows drawn, JS heap in use (MiB) and DOM nodes of the page now.
async fn page_size(driver: &cova_tests::browser::Driver) -> (u64, f64, u64) {
    let v = driver
        .execute(
            "return [document.querySelectorAll('#comments-table tr.comment-row').length, \
                     (performance.memory?.usedJSHeapSize ?? 0) / 1048576, document.getElementsByTagName('*').length];",
            serde_json::json!([]),
        )
        .await;
    (v[0].as_u64().unwrap_or(0), v[1].as_f64().unwrap_or(0.0), v[2].as_u64().unwrap_or(0))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms_f(x: f64) -> String {
    format!("{x:.1} ms")
}

/// `GET /analyze/{job_id}` of a complete 5,000-comment job, whole, by 4 clients at once (wrk
/// in its own process, the server in another): latency, size, and the server's peak memory
/// over its RSS before.
async fn result_speed(report: &mut Report, serve: &ServeProcess, job_id: &str) {
    const CLIENTS: usize = 4;
    let url = format!("{}/api/v1/analyze/{job_id}", serve.base);
    let http = reqwest::Client::new();
    let size =
        http.get(&url).bearer_auth(&serve.token).send().await.expect("result").bytes().await.expect("body").len();
    // Anonymous memory, sampled while the load runs: the database file that SQLite reads through
    // a memory map also counts in RSS, but it is the page cache, shared by every request.
    let pid = serve.child.id();
    let before = mib(memory_kib(pid, "RssAnon"));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(memory_kib(pid, "RssAnon"));
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        })
    };
    let run = wrk(&url, Some(&serve.token), CLIENTS, 10).await;
    stop.store(true, Ordering::Relaxed);
    let peak = mib(sampler.join().expect("sampler"));
    report.add(
        "result_5000_comments_4_clients",
        format!(
            "mean {}, p50 {}, p99 {}, {:.0} answers/s ({:.2} MiB each; anonymous memory {before:.1} MiB before, peak {peak:.1} MiB: {:.1} MiB per answer in flight)",
            ms(run.mean),
            ms(run.p50),
            ms(run.p99),
            run.rps,
            size as f64 / (1024.0 * 1024.0),
            (peak - before) / CLIENTS as f64
        ),
    );
}

/// The cover of a collected post served by `GET /media/file`: requests per second for a
/// 200 KB image, and the process's peak memory while a slow client reads a 20 MB one.
async fn media_serving(report: &mut Report) {
    const SMALL: usize = 200 * 1024;
    const LARGE: usize = 20 * 1024 * 1024;
    let id = tiktok_post_id(TikTokScenario::Normal, 12);
    let cover_of = async |serve: &ServeProcess| -> (String, usize) {
        let client = cova_tests::Client::new(&serve.base, Some(&serve.token));
        let entry = client.entry(&format!("tiktok:{id}"), "").await.ok();
        let url = format!("{}{}", serve.base, entry["metadata"]["media"][0]["url"].as_str().expect("a cover"));
        let probe = reqwest::Client::new().get(&url).bearer_auth(&serve.token).send().await.expect("cover");
        assert_eq!(probe.status(), 200);
        (url, probe.bytes().await.expect("body").len())
    };
    let unlimited = ("COVA_LIMITS__API_REQUESTS_PER_MINUTE", "1000000000".to_owned());

    let sim = cova_sim::spawn(SimConfig { image_bytes: SMALL, ..SimConfig::default() }).await.expect("simulator");
    let serve = ServeProcess::start(&sim, std::slice::from_ref(&unlimited)).await;
    serve.collect(id).await;
    let (url, size) = cover_of(&serve).await;
    let mut served = Load::default();
    for _ in 0..LOAD_ROUNDS {
        served.add(load_reading(&url, Some(&serve.token), true).await);
    }
    let (rps, p50, p99) = served.summary();
    report.add(
        "media_served_200kb_rps",
        format!(
            "{rps:.0} ({:.0} MiB/s; p50 {}, p99 {}; {size} bytes)",
            rps * size as f64 / 1_048_576.0,
            ms(p50),
            ms(p99)
        ),
    );
    drop(serve);
    sim.stop().await;

    let sim = cova_sim::spawn(SimConfig { image_bytes: LARGE, ..SimConfig::default() }).await.expect("simulator");
    let max = ("COVA_MEDIA__MAX_BYTES", (32 * 1024 * 1024).to_string());
    let serve = ServeProcess::start(&sim, &[unlimited, max]).await;
    serve.collect(id).await;
    let (url, size) = cover_of(&serve).await;
    assert!(size >= LARGE);
    // Downloading and probing the file raised the peak: measure the streaming alone.
    tokio::time::sleep(Duration::from_millis(200)).await;
    serve.reset_peak();
    let before = serve.mib("VmRSS");
    let res = reqwest::Client::new().get(&url).bearer_auth(&serve.token).send().await.expect("cover");
    let mut body = res.bytes_stream();
    let mut read = 0;
    while let Some(chunk) = futures::StreamExt::next(&mut body).await {
        read += chunk.expect("chunk").len();
        // A slow reader: a server that buffered the file would hold all of it now.
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    assert_eq!(read, size);
    let peak = serve.mib("VmHWM");
    report.add(
        "media_stream_20mb_peak_rss",
        format!(
            "{peak:.1} MiB ({before:.1} MiB before: +{:.1} MiB for a {:.1} MiB file)",
            peak - before,
            size as f64 / 1_048_576.0
        ),
    );
    drop(serve);
    sim.stop().await;
}

/// Fifty keywords of mixed scripts against the comment texts of the 5,000-comment post
/// (each text matched as the notifier does: normalised, then one automaton pass).
fn keyword_matching(report: &mut Report, texts: &[String]) {
    let mut keywords: Vec<String> =
        ["price", "preis", "🔥", "where to buy", "refund", "scam", "価格", "배송", "cuánto", "GlowLab"]
            .into_iter()
            .map(str::to_owned)
            .collect();
    keywords.extend((keywords.len()..50).map(|n| format!("keyword{n}")));
    let matcher = cova_domain::text::Matcher::new(&keywords);
    let rounds = 20;
    let started = Instant::now();
    let mut hits = 0usize;
    for _ in 0..rounds {
        for text in texts {
            hits += std::hint::black_box(matcher.find(text)).len();
        }
    }
    let took = started.elapsed();
    let matched = texts.len() * rounds;
    report.add(
        "keyword_matching_50_keywords",
        format!("{:.0} comments/s ({matched} comments, {} hits)", matched as f64 / took.as_secs_f64(), hits),
    );
}

/// CPU per spike decision over 14 days of comments per 10 minutes (2,016 buckets, a one-hour
/// window), as a check after each watch run costs it; a steady and a bursty series alike.
fn spike_decisions(report: &mut Report) {
    use cova_domain::spikes::{Sensitivity, volume};
    let steady: Vec<u64> = (0..14 * 144_u64).map(|i| 2 + (i * 7919) % 3).collect();
    let mut bursty = steady.clone();
    bursty.extend([20, 25, 30, 28, 26, 24]);
    let t = Sensitivity::Balanced.thresholds();
    let rounds = 2_000;
    let started = Instant::now();
    let mut spikes = 0;
    for k in 0..rounds {
        let counts = if k % 2 == 0 { &steady } else { &bursty };
        if matches!(std::hint::black_box(volume(counts, 6, 10, t)), cova_domain::spikes::Volume::Spike { .. }) {
            spikes += 1;
        }
    }
    let per = started.elapsed() / rounds;
    assert_eq!(spikes, rounds / 2, "a spike on each bursty series and none on the steady one");
    report.add(
        "spike_decision_14_days",
        format!("{:.1} µs per decision ({rounds} decisions over 2,016 ten-minute buckets; {spikes} spikes, all on the bursty series)", per.as_secs_f64() * 1e6),
    );
}

/// The whole spike check of a post after a collection, as the notifier runs it (reading every
/// comment of the post, counting them per 10 minutes, labelling the window's and up to 1,000 of
/// the baseline's with the offline analyzer, deciding), on the embedded backends: a post of two
/// weeks of comments at 6 and at 12 an hour.
async fn spike_checks(report: &mut Report) {
    use cova_sim::Tone;
    const HOUR: i64 = 3_600_000;
    for per_hour in [6_i64, 12] {
        let (app, clock) = cova_tests::spawn_on_clock("2026-06-01T00:00:00Z", |c| {
            c.limits.api_requests_per_minute = 100_000_000;
        })
        .await;
        let t0 = clock.now_ms();
        app.sim.set_clock_ms(t0);
        let (account, token) = app.integrator().await;
        app.grant(&account, 1_000_000).await;
        let client = app.client(Some(&token));
        let n = 14 * 24 * per_hour;
        // An id outside the simulator's scenarios: a post of no comments but those posted here.
        let id = (6_900_000_000_000_100_000 + per_hour * 1_000).to_string();
        let posted: Vec<(i64, Tone)> =
            (0..n).map(|i| ((t0 + i * HOUR / per_hour + 1_000) / 1000, Tone::Usual)).collect();
        app.sim.post_comments(&id, &posted);
        let end = t0 + 14 * 24 * HOUR;
        clock.set(end);
        app.sim.set_clock_ms(end);
        let job = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
        let done = client.wait_job(job["job_id"].as_str().expect("job")).await;
        assert_eq!(done["result"]["comments_total"], n, "the whole fortnight collected");
        app.notifier_caught_up().await;
        let r#ref = format!("tiktok:{id}");
        let rounds = 20;
        let cpu_before = cpu_time(std::process::id());
        let started = Instant::now();
        for _ in 0..rounds {
            let raised = cova_runtime::spike_alerts::check(app.db(), &account.id, &r#ref, end).await.expect("check");
            assert_eq!(raised, 0, "a steady post");
        }
        let per = started.elapsed() / rounds;
        let cpu = cpu_time(std::process::id()).saturating_sub(cpu_before) / rounds;
        report.add(
            &format!("spike_check_14_days_{n}_comments"),
            format!(
                "{} per check ({rounds} checks of a steady post of {n} comments over two weeks; embedded backends; process CPU {} per check)",
                ms(per),
                ms(cpu)
            ),
        );
        app.stop().await;
    }
}

/// F1 of one class from (truth, predicted) pairs.
fn f1<T: PartialEq + Copy>(pairs: &[(T, T)], class: T) -> f64 {
    let tp = pairs.iter().filter(|(t, p)| *t == class && *p == class).count() as f64;
    let fp = pairs.iter().filter(|(t, p)| *t != class && *p == class).count() as f64;
    let fn_ = pairs.iter().filter(|(t, p)| *t == class && *p != class).count() as f64;
    if tp == 0.0 { 0.0 } else { 2.0 * tp / (2.0 * tp + fp + fn_) }
}

fn accuracy<T: PartialEq>(pairs: &[(T, T)]) -> f64 {
    pairs.iter().filter(|(t, p)| t == p).count() as f64 / pairs.len().max(1) as f64
}

/// The offline analyzer against the labelled set (`tests/data/labelled-comments.jsonl`):
/// sentiment accuracy and macro-F1, question and spam F1, per language and overall; then its
/// speed on the 5,000-comment post, everything computed (topics, questions, summary).
async fn analyzer_quality(report: &mut Report, texts: &[String]) {
    use cova_analyzers::{Analyzer, Comment, Label, Offline};
    let path = format!("{}/../../tests/data/labelled-comments.jsonl", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read_to_string(&path).expect("the labelled set");
    let rows: Vec<serde_json::Value> =
        data.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    let offline = Offline::new();
    let mut langs: Vec<String> = rows.iter().map(|r| r["lang"].as_str().unwrap_or_default().to_owned()).collect();
    langs.sort();
    langs.dedup();
    langs.push("all".into());
    for lang in &langs {
        let subset: Vec<&serde_json::Value> =
            rows.iter().filter(|r| lang == "all" || r["lang"] == lang.as_str()).collect();
        let mut sentiment = Vec::new();
        let mut question = Vec::new();
        let mut spam = Vec::new();
        let mut detected = Vec::new();
        for r in &subset {
            let got = offline.label(r["text"].as_str().unwrap_or_default());
            let truth = Label::parse(r["sentiment"].as_str().unwrap_or_default()).unwrap_or(Label::Neutral);
            sentiment.push((truth, got.sentiment));
            question.push((r["question"].as_bool().unwrap_or(false), got.question));
            spam.push((r["spam"].as_bool().unwrap_or(false), got.spam));
            detected.push((r["lang"].as_str().unwrap_or_default() == got.language, true));
        }
        let macro_f1 = Label::ALL.iter().map(|l| f1(&sentiment, *l)).sum::<f64>() / 3.0;
        report.add(
            &format!("analyzer_offline_{lang}"),
            format!(
                "{} comments: sentiment accuracy {:.2}, macro-F1 {:.2}; question F1 {:.2}; spam F1 {:.2}; language detected {:.2}",
                subset.len(),
                accuracy(&sentiment),
                macro_f1,
                f1(&question, true),
                f1(&spam, true),
                accuracy(&detected)
            ),
        );
    }
    let comments: Vec<Comment> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Comment { id: i.to_string(), text: t.clone(), ..Comment::default() })
        .collect();
    let phrases = vec!["where to buy".to_owned(), "price".to_owned(), "shipping".to_owned()];
    let started = Instant::now();
    let result = offline.analyze(&comments, &phrases).await.expect("offline analysis");
    let took = started.elapsed();
    report.add(
        "analyzer_offline_speed_5000_comments",
        format!(
            "{:.0} comments/s ({} in {}, {} topics)",
            comments.len() as f64 / took.as_secs_f64(),
            result.comments,
            ms(took),
            result.topics.len()
        ),
    );
}

/// The comment texts of the simulator's 5,000-comment post, replies included.
async fn post_texts() -> Vec<String> {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator");
    let post = sim.expected_post(&tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS).to_string());
    sim.stop().await;
    post.comments.iter().flat_map(|c| std::iter::once(c).chain(c.replies.iter())).map(|c| c.text.clone()).collect()
}

/// What a receiver takes to answer a webhook in the delivery benches.
const RECEIVER_LATENCY: Duration = Duration::from_millis(50);

/// HTTPS receivers `hook{n}.bench` (in this process) answering after [`RECEIVER_LATENCY`].
async fn receivers(ca: &cova_tests::receiver::TestCa, n: usize) -> Vec<cova_tests::receiver::Receiver> {
    let mut listening = Vec::new();
    for k in 0..n {
        let r = cova_tests::receiver::Receiver::spawn(ca, &format!("hook{k}.bench")).await;
        r.set_latency(RECEIVER_LATENCY);
        listening.push(r);
    }
    listening
}

/// Lets the app's notifiers reach the receivers by name (the test CA, loopback allowed).
fn reach_receivers(c: &mut cova_config::Config, ca: &cova_tests::receiver::TestCa, receivers: usize) {
    for k in 0..receivers {
        cova_tests::use_receivers(c, ca, &format!("hook{k}.bench"));
    }
}

/// An account per receiver with its webhook channel on; answers the accounts' ids.
async fn hooked_accounts(app: &TestApp, listening: &[cova_tests::receiver::Receiver]) -> Vec<String> {
    let mut accounts = Vec::new();
    for r in listening {
        let (account, token) = app.integrator().await;
        app.grant(&account, 1_000).await;
        let hook = serde_json::json!({"webhook": {"url": format!("{}/hook", r.base_url)}});
        app.client(Some(&token)).put_json("/api/v1/notification-channels", hook).await.ok();
        accounts.push(account.id.clone());
    }
    accounts
}

/// Queues `n` keyword alerts round-robin over `accounts`, makes them due at once and answers
/// how long it took from then until the receivers had them all.
async fn deliver_all(
    app: &TestApp,
    accounts: &[String],
    listening: &[cova_tests::receiver::Receiver],
    n: usize,
) -> Duration {
    use cova_storage::repo::channels::Channel;
    use cova_storage::repo::deliveries::{self, NewDelivery};
    let before: usize = listening.iter().map(|r| r.count()).sum();
    // Queued an hour ahead, then made due by one statement: the clock starts with all of them
    // due, whatever queuing them one by one took.
    let later = cova_domain::time::now_ms() + 3_600_000;
    let body = r#"{"type":"keyword.alert","id":"bench"}"#;
    for k in 0..n {
        let event_id = format!("bench-{k}");
        let delivery = NewDelivery {
            account_id: &accounts[k % accounts.len()],
            event_id: &event_id,
            event_type: "keyword.alert",
            channel: Channel::Webhook,
            payload: body,
        };
        deliveries::enqueue(&app.backends.db, delivery, later).await.expect("enqueue");
    }
    let due = format!(
        "UPDATE deliveries SET next_attempt_at = {} WHERE next_attempt_at = {later}",
        cova_domain::time::now_ms()
    );
    let mut conn = app.backends.db.conn().await.expect("conn");
    conn.tx().batch_execute(&due).await.expect("due");
    drop(conn);
    let started = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(300);
    while listening.iter().map(|r| r.count()).sum::<usize>() < before + n {
        assert!(Instant::now() < deadline, "the deliveries did not arrive");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

/// Webhook deliveries queued at once, sent by the notifier of `cova serve` (embedded
/// backends) to HTTPS receivers that take [`RECEIVER_LATENCY`] per request, over connections
/// kept per receiver: one receiver, bounded by the per-receiver limit, then eight, then fifty
/// (bounded by the notifier's own concurrency).
async fn delivery_throughput(report: &mut Report) {
    for receivers in [1usize, 8, 50] {
        let deliveries: usize = if receivers >= 50 { 5_000 } else { 800 };
        let ca = cova_tests::receiver::TestCa::new();
        let listening = self::receivers(&ca, receivers).await;
        let app = spawn_app_on(TestDatabase::sqlite(), SimConfig::default(), Scraper::InProcess, |c| {
            c.limits.api_requests_per_minute = 10_000_000;
            reach_receivers(c, &ca, receivers);
        })
        .await;
        let per_receiver = app.config.notifier.per_receiver;
        let concurrency = app.config.notifier.concurrency;
        let accounts = hooked_accounts(&app, &listening).await;
        let took = deliver_all(&app, &accounts, &listening, deliveries).await;
        let bound = (concurrency.min(receivers * per_receiver)) as f64 / RECEIVER_LATENCY.as_secs_f64();
        report.add(
            &format!("delivery_throughput_{receivers}_receivers_50ms"),
            format!(
                "{:.0} deliveries/s ({deliveries} deliveries; bound {bound:.0}/s at {per_receiver} per receiver, {concurrency} per notifier)",
                deliveries as f64 / took.as_secs_f64()
            ),
        );
        app.stop().await;
    }
}

/// The notifier fleet: 1, 2 and 4 `cova notifier` processes on PostgreSQL, Redis and
/// RabbitMQ sending 5,000 webhooks to 50 receivers at [`RECEIVER_LATENCY`] (the receivers
/// run in this process, on the same two cores).
async fn notifier_fleet(report: &mut Report, real: &RealBackends) {
    const RECEIVERS: usize = 50;
    const DELIVERIES: usize = 5_000;
    let ca = cova_tests::receiver::TestCa::new();
    let listening = receivers(&ca, RECEIVERS).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("notifier.toml");
    let hosts: String = (0..RECEIVERS).map(|k| format!("\"hook{k}.bench\" = \"127.0.0.1\"\n")).collect();
    let toml = format!(
        "[notifier]\ntick_ms = 50\nallow_private = [\"127.0.0.1/32\"]\nextra_ca_pem = \"{}\"\n[notifier.hosts]\n{hosts}",
        ca.pem_path()
    );
    std::fs::write(&config, toml).expect("notifier config");
    let mut one = 0.0;
    for processes in [1usize, 2, 4] {
        let database = TestDatabase::postgres(&real.database).await;
        let app = spawn_app_on(database, SimConfig::default(), Scraper::External, |c| {
            c.limits.api_requests_per_minute = 10_000_000;
            c.cache.url = real.cache.clone();
            c.queue.url = real.queue.clone();
            reach_receivers(c, &ca, RECEIVERS);
        })
        .await;
        let accounts = hooked_accounts(&app, &listening).await;
        let notifiers: Vec<RoleProcess> = (0..processes).map(|_| RoleProcess::notifier(&app, &config)).collect();
        let cpu = || notifiers.iter().map(|p| cpu_time(p.child.id())).sum::<Duration>();
        let cpu_before = cpu();
        let took = deliver_all(&app, &accounts, &listening, DELIVERIES).await;
        let per_delivery = cpu().saturating_sub(cpu_before) / DELIVERIES as u32;
        let rate = DELIVERIES as f64 / took.as_secs_f64();
        if processes == 1 {
            one = rate;
        }
        report.add(
            &format!("delivery_fleet_{processes}_notifiers"),
            format!(
                "{rate:.0} deliveries/s ({DELIVERIES} to {RECEIVERS} receivers at 50 ms; PostgreSQL; notifier CPU {:.0} µs per delivery)",
                per_delivery.as_secs_f64() * 1e6
            ),
        );
        if processes > 1 {
            report.add(&format!("delivery_fleet_scaling_{processes}_vs_1"), format!("{:.2}", rate / one));
        }
        drop(notifiers);
        app.stop().await;
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut report = Report { lines: Vec::new() };
    // Recording as a deployed process does (metrics.addr is on by default), so the gateway's
    // figures include the cost of its request metrics.
    cova_metrics::install();
    let real = RealBackends::from_env();
    // One section alone: `COVA_BENCH_ONLY=gateway`. Its rows replace theirs in the results,
    // whose header then says which rows are newer than the full run.
    if let Ok(only) = std::env::var("COVA_BENCH_ONLY") {
        rt.block_on(async {
            match only.as_str() {
                "media" => media_serving(&mut report).await,
                "workspace" => workspace_table(&mut report).await,
                "spikes" => {
                    spike_decisions(&mut report);
                    spike_checks(&mut report).await;
                }
                "export" => export_speed(&mut report).await,
                "collect" => collection_speed(&mut report).await,
                "instagram" => instagram_collection(&mut report).await,
                "pace" => pace::run(&mut report, &real).await,
                "delivery" => {
                    delivery_throughput(&mut report).await;
                    if real.reachable() {
                        guarded_on_real!(&mut report, "delivery_fleet", real, notifier_fleet);
                    }
                }
                "fleet" => {
                    if real.reachable() {
                        guarded_on_real!(&mut report, "throughput", real, throughput_and_scale);
                        scraper_memory(&mut report, &real).await;
                        guarded_on_real!(&mut report, "ai_fleet", real, ai_fleet);
                    }
                }
                "ai" => {
                    if real.reachable() {
                        guarded_on_real!(&mut report, "ai_fleet", real, ai_fleet);
                    }
                }
                "purge" => {
                    if real.reachable() {
                        purge_at_scale(&mut report, &real).await;
                    }
                }
                "scheduler" => {
                    scheduler_scan(&mut report, "embedded", TestDatabase::sqlite(), 100).await;
                    if real.reachable() {
                        scheduler_scan(&mut report, "real", TestDatabase::postgres(&real.database).await, 1_000).await;
                    }
                }
                "gateway" => {
                    gateway_overhead(&mut report, "embedded", &[]).await;
                    if real.reachable() {
                        real.gateway_overhead(&mut report).await;
                    }
                }
                other => panic!(
                    "COVA_BENCH_ONLY={other}: the sections run alone are `gateway`, `collect`, `media`, `export`, `scheduler`, `purge`, `fleet`, `ai`, `delivery`, `workspace`, `spikes`, `instagram` and `pace`"
                ),
            }
        });
        merge_results(&report, &only);
        return;
    }
    rt.block_on(async {
        gateway_overhead(&mut report, "embedded", &[]).await;
        let app = embedded_app().await;
        job_overhead(&mut report, "embedded", &app).await;
        app.stop().await;
        scheduler_scan(&mut report, "embedded", TestDatabase::sqlite(), 100).await;
        export_speed(&mut report).await;
        workspace_table(&mut report).await;
        media_serving(&mut report).await;
        let texts = post_texts().await;
        keyword_matching(&mut report, &texts);
        spike_decisions(&mut report);
        spike_checks(&mut report).await;
        analyzer_quality(&mut report, &texts).await;
        delivery_throughput(&mut report).await;

        if real.reachable() {
            real.gateway_overhead(&mut report).await;
            let app = real.app(SimConfig::default(), Scraper::InProcess).await;
            job_overhead(&mut report, "real", &app).await;
            app.stop().await;
            scheduler_scan(&mut report, "real", TestDatabase::postgres(&real.database).await, 1_000).await;
            purge_at_scale(&mut report, &real).await;
            guarded_on_real!(&mut report, "throughput", real, throughput_and_scale);
            scraper_memory(&mut report, &real).await;
            guarded_on_real!(&mut report, "ai_fleet", real, ai_fleet);
            guarded_on_real!(&mut report, "delivery_fleet", real, notifier_fleet);
        } else {
            report.add("real_backends", "skipped (PostgreSQL, Redis or RabbitMQ not reachable)");
        }
        collection_speed(&mut report).await;
        instagram_collection(&mut report).await;
        pace::run(&mut report, &real).await;
    });
    write_results(&report);
}

/// Replaces the rows of a section run alone in the results (new rows go last) and notes the run.
fn merge_results(report: &Report, section: &str) {
    let path = format!("{}/../../bench/results.md", env!("CARGO_MANIFEST_DIR"));
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("no {path} to merge into: run the whole bench first");
        return;
    };
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut header = Vec::new();
    for line in text.lines() {
        match line.strip_prefix("| ").and_then(|l| l.strip_suffix(" |")).and_then(|l| l.split_once(" | ")) {
            Some(("name", _)) => {}
            Some((name, value)) => rows.push((name.to_owned(), value.to_owned())),
            None if line.starts_with("|---") || line.is_empty() => {}
            None => header.push(line.to_owned()),
        }
    }
    rows.retain(|(name, _)| !report.lines.iter().any(|(n, _)| n == name));
    rows.extend(report.lines.iter().cloned());
    let commit = git_commit();
    let when = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    header.retain(|l| !l.starts_with(&format!("- section `{section}` re-run alone")));
    header.push(format!("- section `{section}` re-run alone: {when}, commit {commit}, {}", machine()));
    let mut out = String::new();
    // The title, a blank line, then the header's list.
    let (title, list) = header.split_first().map_or(("", &[][..]), |(t, l)| (t.as_str(), l));
    let _ = writeln!(out, "{title}\n\n{}\n", list.join("\n"));
    let _ = writeln!(out, "| name | value |\n|---|---|");
    for (name, value) in &rows {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    if let Err(e) = std::fs::write(&path, out) {
        eprintln!("writing {path}: {e}");
    }
}

/// The commit measured, marked when the working tree differs from it (the results file aside).
fn git_commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let changed = git(&["status", "--porcelain", "--untracked-files=no"]);
    if changed.lines().any(|l| !l.ends_with("bench/results.md")) {
        format!("{commit} with uncommitted changes")
    } else {
        commit
    }
}

/// The CPUs the bench ran on.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    format!("{cpus} CPUs, {cpu}")
}

fn write_results(report: &Report) {
    let mut out = String::new();
    let commit = git_commit();
    let _ = writeln!(out, "# cova benchmark results\n");
    let _ = writeln!(out, "- date: {}", chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let _ = writeln!(out, "- commit: {commit}");
    let _ = writeln!(out, "- machine: {}", machine());
    let _ =
        writeln!(out, "- embedded: SQLite file, in-process queue, in-memory cache; real: PostgreSQL, Redis, RabbitMQ");
    let _ = writeln!(out, "- metrics: the Prometheus recorder installed, as in a deployed process");
    let _ = writeln!(
        out,
        "- load: wrk in its own process, {LOAD_CONCURRENCY} keep-alive connections, {LOAD_ROUNDS} rounds of {LOAD_SECONDS} s alternating the bare handler (in the bench process) and the gateway (a release `cova serve` process, access logs on); {JOBS} sequential jobs for job overhead; platform latency {PLATFORM_LATENCY_MS} ms for collection and throughput ({} jobs of 20 comments from {THROUGHPUT_ACCOUNTS} accounts per release `cova scraper` process, three running per account); CPU per request and per job from `/proc/<pid>/stat` of the gateway, Redis and scraper processes\n",
        THROUGHPUT_ACCOUNTS * JOBS_PER_ACCOUNT
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
