//! `COVA_BENCH_ONLY=export`: a 5,000-comment breakdown exported and its result read whole, from
//! a release `cova serve` process, with the process's memory around it.

use super::{COLLECT_COMMENTS, Report, ServeProcess, memory_kib, mib, ms, wrk};
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

pub(super) async fn run(report: &mut Report) {
    export_speed(report).await;
}
