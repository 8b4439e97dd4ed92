//! `COVA_BENCH_ONLY=media`: images served by `GET /media/file` from a release `cova serve`
//! process: requests per second for a small one, peak memory while a large one streams.

use super::{LOAD_CONCURRENCY, LOAD_ROUNDS, LOAD_SECONDS, Report, ServeProcess, ms, percentile};
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

pub(super) async fn run(report: &mut Report) {
    media_serving(report).await;
}
