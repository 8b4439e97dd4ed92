//! `COVA_BENCH_ONLY=fleet`: release scraper processes on the real backends (jobs per second as
//! the fleet grows, at the lifted and the default pace, through proxies), one scraper's memory,
//! then the ai-worker fleet of `ai.rs`.

use super::{
    COLLECT_COMMENTS, JOB_COMMENTS_BYTES, JOBS_PER_ACCOUNT, PLATFORM_LATENCY_MS, RealBackends, Report, RoleProcess,
    THROUGHPUT_ACCOUNTS, count_rows, cpu_time, mib, post_of_20, submit,
};
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::Scraper;
use std::time::{Duration, Instant};

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

/// What a fleet run measured.
struct Fleet {
    jobs_per_second: f64,
    scraper_cpu_per_job: Duration,
    messages_per_job: f64,
}

/// The scraper fleet: 1, 2, 4 and 8 processes on one queue with the politeness pace lifted
/// (what the processes can do), then 1 and 4 at the default pace (what the platform allows).
pub(super) async fn throughput_and_scale(report: &mut Report, real: &RealBackends) {
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

/// Peak RSS of one scraper process collecting a 5,000-comment post, next to the JSON size
/// of what it collected.
pub(super) async fn scraper_memory(report: &mut Report, real: &RealBackends) {
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

pub(super) async fn run(report: &mut Report, real: &RealBackends) {
    if real.reachable() {
        guarded_on_real!(report, "throughput", real, throughput_and_scale);
        scraper_memory(report, real).await;
        guarded_on_real!(report, "ai_fleet", real, super::ai::ai_fleet);
    }
}
