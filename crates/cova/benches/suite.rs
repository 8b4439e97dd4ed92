//! `make bench`: measured side by side in one run and reported as ratios, so that a noisy
//! machine still compares. Prints `name: value` lines and writes `bench/results.md`.
//!
//! The real backends (PostgreSQL, Redis, RabbitMQ) are those of the `COVA_TEST_*_URL`
//! variables, or the local defaults; when one is unreachable its lines say they were skipped.
//! Throughput and memory run the release `cova scraper` binary as separate processes.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{Scraper, TestApp, TestDatabase, spawn_app_on};
use std::process::Child;
use std::time::{Duration, Instant};

// Defined before the section modules, which use it too.
/// [`guarded`] for a section `$section(&mut Report, &RealBackends)` on the real backends.
macro_rules! guarded_on_real {
    ($report:expr, $name:literal, $real:expr, $section:path) => {{
        let real = $real.clone();
        $crate::guarded($report, $name, |mut rows| async move {
            $section(&mut rows, &real).await;
            rows
        })
        .await
    }};
}

#[path = "../tests/common/mod.rs"]
mod common;
// One module per section that `COVA_BENCH_ONLY` runs alone, each with its `run`; `results`
// writes `bench/results.md`.
#[path = "suite/ai.rs"]
mod ai;
#[path = "suite/collect.rs"]
mod collect;
#[path = "suite/delivery.rs"]
mod delivery;
#[path = "suite/export.rs"]
mod export;
#[path = "suite/fleet.rs"]
mod fleet;
#[path = "suite/gateway.rs"]
mod gateway;
#[path = "suite/instagram.rs"]
mod instagram;
#[path = "suite/media.rs"]
mod media;
#[path = "suite/pace.rs"]
mod pace;
#[path = "suite/purge.rs"]
mod purge;
#[path = "suite/results.rs"]
mod results;
#[path = "suite/scheduler.rs"]
mod scheduler;
#[path = "suite/search.rs"]
mod search;
#[path = "suite/spikes.rs"]
mod spikes;
#[path = "suite/workspace.rs"]
mod workspace;

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

/// A TikTok URL of a simulated 20-comment post; `n` makes it distinct.
fn post_of_20(n: u64) -> String {
    // Ids outside the simulator's numbered range carry `id % 1000` comments.
    format!("https://www.tiktok.com/@a/video/{}", 6_000_000_000_000_000_000u64 + n * 1_000 + 20)
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

/// What the kept comments take on PostgreSQL, with their indexes and TOAST: the sum of the
/// days' partitions (the partitioned table itself holds nothing).
const JOB_COMMENTS_BYTES: &str = "SELECT COALESCE(SUM(pg_total_relation_size(inhrelid)), 0)::BIGINT AS n \
     FROM pg_inherits WHERE inhparent = 'job_comments'::regclass";

/// A `SELECT COUNT(*) AS n …` (or any one bigint named `n`) on the database.
async fn count_rows(db: &cova_storage::Db, sql: &str) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct N {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = db.conn().await.expect("conn");
    conn.tx().get_result::<N, _>(diesel::sql_query(sql)).await.expect("query").n
}

/// The comment texts of the simulator's 5,000-comment post, replies included.
async fn post_texts() -> Vec<String> {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator");
    let post = sim.expected_post(&tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS).to_string());
    sim.stop().await;
    post.comments.iter().flat_map(|c| std::iter::once(c).chain(c.replies.iter())).map(|c| c.text.clone()).collect()
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
                "media" => media::run(&mut report).await,
                "workspace" => workspace::run(&mut report).await,
                "spikes" => spikes::run(&mut report, &real).await,
                "analyzer" => ai::analyzer_quality(&mut report, &post_texts().await).await,
                "search" => search::run(&mut report, &real, &post_texts().await).await,
                "export" => export::run(&mut report).await,
                "collect" => collect::run(&mut report).await,
                "instagram" => instagram::run(&mut report).await,
                "pace" => pace::run(&mut report, &real).await,
                "delivery" => delivery::run(&mut report, &real).await,
                "fleet" => fleet::run(&mut report, &real).await,
                "ai" => ai::run(&mut report, &real).await,
                "purge" => purge::run(&mut report, &real).await,
                "scheduler" => scheduler::run(&mut report, &real).await,
                "gateway" => gateway::run(&mut report, &real).await,
                other => panic!(
                    "COVA_BENCH_ONLY={other}: the sections run alone are `gateway`, `collect`, `media`, `export`, `scheduler`, `purge`, `fleet`, `ai`, `delivery`, `workspace`, `spikes`, `analyzer`, `search`, `instagram` and `pace`"
                ),
            }
        });
        results::merge_results(&report, &only);
        return;
    }
    // The whole run's order is the results' row order (embedded parts first, then the real
    // backends', then the platforms' collections), so sections with both parts run part by part.
    rt.block_on(async {
        gateway::gateway_overhead(&mut report, "embedded", &[]).await;
        let app = embedded_app().await;
        gateway::job_overhead(&mut report, "embedded", &app).await;
        app.stop().await;
        scheduler::scheduler_scan(&mut report, "embedded", TestDatabase::sqlite(), 100).await;
        export::run(&mut report).await;
        workspace::run(&mut report).await;
        media::run(&mut report).await;
        let texts = post_texts().await;
        delivery::keyword_matching(&mut report, &texts);
        spikes::run(&mut report, &real).await;
        ai::analyzer_quality(&mut report, &texts).await;
        search::run(&mut report, &real, &texts).await;
        delivery::delivery_throughput(&mut report).await;

        if real.reachable() {
            gateway::gateway_overhead_real(&mut report, &real).await;
            let app = real.app(SimConfig::default(), Scraper::InProcess).await;
            gateway::job_overhead(&mut report, "real", &app).await;
            app.stop().await;
            scheduler::scheduler_scan(&mut report, "real", TestDatabase::postgres(&real.database).await, 1_000).await;
            purge::purge_at_scale(&mut report, &real).await;
            guarded_on_real!(&mut report, "throughput", real, fleet::throughput_and_scale);
            fleet::scraper_memory(&mut report, &real).await;
            guarded_on_real!(&mut report, "ai_fleet", real, ai::ai_fleet);
            guarded_on_real!(&mut report, "delivery_fleet", real, delivery::notifier_fleet);
        } else {
            report.add("real_backends", "skipped (PostgreSQL, Redis or RabbitMQ not reachable)");
        }
        collect::run(&mut report).await;
        instagram::run(&mut report).await;
        pace::run(&mut report, &real).await;
    });
    results::write_results(&report);
}
