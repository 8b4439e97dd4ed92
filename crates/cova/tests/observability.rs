//! What an operator sees of a job: `/metrics`, `/readyz` and `/healthz` on the metrics
//! address of each process, with the job, queue, platform and balance series counting exactly
//! what happened; and, on the real backends, one trace from the request through the outbox and
//! the queue to the scraper's platform calls, across processes.

use cova_sim::{ExportedSpan, SimConfig, TikTokScenario, tiktok_post_id};
use cova_testdb::TestDatabase;
use cova_tests::{eventually, until};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::Child;
use std::time::Instant;

use crate::common::{Cova, Log, metrics_base, series, sum_where};

const COMMENTS: u64 = 120;

struct Running {
    procs: Vec<Child>,
    base: String,
    /// Metrics addresses: the gateway's, then the scraper's (the same process when embedded).
    gateway_ops: String,
    scraper_ops: String,
    token: String,
    cova: Cova,
}

impl Drop for Running {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

/// Starts cova against the simulator: `cova serve` on the embedded queue, or `cova gateway`
/// plus `cova scraper` when a real queue is configured, with traces exported to the simulator.
async fn start(db: &TestDatabase, sim: &cova_sim::SimHandle, split: bool) -> Running {
    let prefix = format!("o{:x}{}", std::process::id(), rand_suffix());
    let queue_url = split.then(|| common_real("COVA_TEST_QUEUE_URL"));
    let mut extra = vec![
        ("COVA_TELEMETRY__OTLP_ENDPOINT", sim.base_url().to_owned()),
        ("COVA_TELEMETRY__OTLP_PROTOCOL", "json".to_owned()),
        ("COVA_MEDIA__PREFETCH_WAIT_MS", "0".to_owned()),
    ];
    extra.extend(queue_url.clone().map(|url| ("COVA_QUEUE__URL", url)));
    let cova = Cova::on_sim(&db.config.url, sim.base_url(), &prefix, &extra);
    run_ok(&cova, &["migrate"]);
    run_ok(&cova, &["admin", "accounts", "create", "--email", "ops@example.com"]);
    run_ok(&cova, &["admin", "packs", "grant", "--email", "ops@example.com", "--comments", "5000"]);
    let token =
        run_ok(&cova, &["admin", "tokens", "create", "--email", "ops@example.com", "--scopes", "analyze:write"])
            .lines()
            .last()
            .expect("token")
            .to_owned();
    let (front, base, front_log) = cova.start_logging(if split { "gateway" } else { "serve" });
    let gateway_ops = metrics_base(&front_log).await;
    let mut procs = vec![front];
    let scraper_ops = if split {
        let (worker, log): (Child, Log) = cova.start_collecting("scraper", "scraper consuming");
        procs.push(worker);
        metrics_base(&log).await
    } else {
        gateway_ops.clone()
    };
    Running { procs, base, gateway_ops, scraper_ops, token, cova }
}

fn rand_suffix() -> u32 {
    Instant::now().elapsed().subsec_nanos() ^ std::process::id().rotate_left(7)
}

fn common_real(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: this test needs the real backend (make test-real)"))
}

fn run_ok(cova: &Cova, args: &[&str]) -> String {
    let out = cova.run(args);
    assert!(out.status.success(), "cova {args:?}: {}", crate::common::stderr(&out));
    crate::common::stdout(&out)
}

async fn analyze(run: &Running, http: &reqwest::Client) -> Value {
    let url = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, COMMENTS));
    let res = http
        .post(format!("{}/api/v1/analyze", run.base))
        .bearer_auth(&run.token)
        .json(&json!({ "url": url }))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 202);
    let created: Value = res.json().await.expect("json");
    let id = created["job_id"].as_str().expect("job id");
    let job = cova_tests::Client::new(&run.base, Some(&run.token)).wait_job(id).await;
    assert_eq!(job["status"], "complete", "{job}");
    job
}

async fn get(http: &reqwest::Client, url: &str) -> (u16, String) {
    let res = http.get(url).send().await.expect("get");
    (res.status().as_u16(), res.text().await.expect("body"))
}

/// Waits until the job's events have been handled everywhere (the counters are final).
async fn metrics_once(http: &reqwest::Client, ops: &str, ready: impl Fn(&str) -> bool) -> String {
    until("the metrics to settle", async || {
        let (status, text) = get(http, &format!("{ops}/metrics")).await;
        assert_eq!(status, 200);
        ready(&text).then_some(text)
    })
    .await
}

async fn metrics_count_a_job(split: bool) {
    let db = if split {
        TestDatabase::postgres(&common_real(cova_testdb::DATABASE_URL_VAR)).await
    } else {
        TestDatabase::create().await
    };
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator");
    let run = start(&db, &sim, split).await;
    let http = reqwest::Client::new();
    let job = analyze(&run, &http).await;

    // The operator's view of the same job.
    let shown = run_ok(&run.cova, &["admin", "jobs", "show", job["job_id"].as_str().expect("job id")]);
    assert!(shown.lines().any(|l| l.starts_with("status") && l.ends_with(" complete")), "{shown}");
    assert!(shown.lines().any(|l| l.starts_with("comments") && l.contains(&format!(" {COMMENTS}"))), "{shown}");
    assert!(shown.contains("settled"), "{shown}");

    let scraper =
        metrics_once(&http, &run.scraper_ops, |t| series(t, r#"cova_queue_consumed_total{queue="scraper"}"#) >= 1.0)
            .await;
    assert_eq!(series(&scraper, r#"cova_jobs_total{kind="analyze",status="complete"}"#), 1.0, "{scraper}");
    assert_eq!(series(&scraper, r#"cova_job_comments_total{kind="analyze"}"#), COMMENTS as f64, "{scraper}");
    assert_eq!(series(&scraper, r#"cova_queue_consumed_total{queue="scraper"}"#), 1.0, "{scraper}");
    assert_eq!(series(&scraper, r#"cova_queue_retried_total{queue="scraper"}"#), 0.0, "{scraper}");
    assert!(scraper.contains("cova_job_duration_seconds_bucket{kind=\"analyze\""), "{scraper}");
    assert_eq!(series(&scraper, r#"cova_queue_depth{queue="scraper"}"#), 0.0, "{scraper}");
    assert_eq!(series(&scraper, r#"cova_queue_dead_letters{queue="scraper"}"#), 0.0, "{scraper}");

    // Every request the platform saw is counted once, by host and outcome.
    let platform_calls =
        sim.requests().iter().filter(|r| !r.path.starts_with("/v1/") && !r.path.starts_with("/cdn/")).count() as f64;
    assert!(platform_calls >= 2.0, "the post page and at least one comment page");
    let gateway = metrics_once(&http, &run.gateway_ops, |_| true).await;
    // Any process' relay may publish an outbox row: split, count both processes.
    let both = |name: &str, label: &str| {
        sum_where(&scraper, name, label) + if split { sum_where(&gateway, name, label) } else { 0.0 }
    };
    assert_eq!(both("cova_platform_requests_total", r#"host="127.0.0.1""#), platform_calls, "{scraper}");
    assert_eq!(both("cova_platform_requests_total", r#"outcome="ok""#), platform_calls, "{scraper}");
    assert_eq!(both("cova_queue_published_total", r#"routing_key="scraper""#), 1.0, "{gateway}");
    assert_eq!(both("cova_queue_published_total", r#"routing_key="job.complete""#), 1.0, "{scraper}");

    // Balance movements add up: every comment held was charged or given back.
    let reserved = both("cova_balance_comments_total", r#"movement="reserved""#);
    let settled = both("cova_balance_comments_total", r#"movement="settled""#);
    let released = both("cova_balance_comments_total", r#"movement="released""#);
    assert_eq!(settled, COMMENTS as f64);
    assert_eq!(reserved, settled + released, "{gateway}\n{scraper}");

    // The gateway counts requests by route template, never by raw path.
    assert_eq!(
        series(&gateway, r#"cova_http_requests_total{route="/api/v1/analyze",method="POST",status="202"}"#),
        1.0,
        "{gateway}"
    );
    assert!(sum_where(&gateway, "cova_http_requests_total", r#"route="/api/v1/analyze/{job_id}""#) >= 1.0, "{gateway}");
    assert!(!gateway.contains(r#"route="/api/v1/analyze/0"#), "raw ids never become series: {gateway}");
    assert!(gateway.contains("cova_outbox_backlog 0"), "{gateway}");

    // Probes on the metrics address; the public port never serves metrics.
    for ops in [&run.gateway_ops, &run.scraper_ops] {
        assert_eq!(get(&http, &format!("{ops}/healthz")).await.0, 200);
        let (status, body) = get(&http, &format!("{ops}/readyz")).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(r#""queue":"ok""#), "{body}");
    }
    assert_eq!(get(&http, &format!("{}/metrics", run.base)).await.0, 404);
    cleanup(run).await;
    sim.stop().await;
    let _ = db.drop_database().await;
}

async fn cleanup(run: Running) {
    // The processes stop first (dropping `run` kills them), so that none declares a queue or
    // writes a key after.
    let left = Cova { vars: run.cova.vars.clone() };
    drop(run);
    left.forget().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_a_job_in_one_process() {
    metrics_count_a_job(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and RabbitMQ: run with make test-real"]
async fn metrics_count_a_job_across_processes() {
    metrics_count_a_job(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and RabbitMQ: run with make test-real"]
async fn one_trace_runs_from_the_request_to_the_platform_calls() {
    let db = TestDatabase::postgres(&common_real(cova_testdb::DATABASE_URL_VAR)).await;
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator");
    let run = start(&db, &sim, true).await;
    let http = reqwest::Client::new();
    analyze(&run, &http).await;

    // Spans are exported in batches: wait for the platform calls to arrive.
    let spans = until("the platform calls' and the outbox's spans", async || {
        let spans = sim.spans();
        let platform = spans.iter().filter(|s| s.name == "platform_request").count();
        (platform >= 2 && spans.iter().any(|s| s.name == "outbox_publish")).then_some(spans)
    })
    .await;
    let by_id: HashMap<&str, &ExportedSpan> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let parent = |s: &ExportedSpan| by_id.get(s.parent_span_id.as_str()).copied();

    // Walk up from a platform call: job → message (scraper process) → outbox publish →
    // request (gateway process), all one trace.
    let call = spans.iter().find(|s| s.name == "platform_request").expect("a platform call");
    let mut chain = vec![call];
    while let Some(p) = chain.last().and_then(|s| parent(s)) {
        chain.push(p);
    }
    let names: Vec<(&str, &str)> = chain.iter().map(|s| (s.name.as_str(), s.service.as_str())).collect();
    assert_eq!(
        names,
        [
            ("platform_request", "cova-scraper"),
            ("job", "cova-scraper"),
            ("message", "cova-scraper"),
            // Whichever process' relay published the command.
            ("outbox_publish", chain.get(3).map_or("", |s| s.service.as_str())),
            ("request", "cova-gateway"),
        ],
        "{spans:?}"
    );
    assert!(chain.iter().all(|s| s.trace_id == call.trace_id), "one trace id along the chain");
    assert!(chain.last().is_some_and(|root| root.parent_span_id.is_empty()), "the request is the root");
    // Every platform call of the job is in that trace.
    let calls: Vec<&ExportedSpan> = spans.iter().filter(|s| s.name == "platform_request").collect();
    assert!(calls.iter().all(|s| s.trace_id == call.trace_id), "{calls:?}");

    cleanup(run).await;
    sim.stop().await;
    let _ = db.drop_database().await;
}

/// A scraper whose broker is unreachable is alive but visibly not ready, on its metrics
/// address (its only port), and says which backend is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_its_broker_is_not_ready() {
    let db = TestDatabase::create().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let cova = Cova {
        vars: vec![
            ("COVA_DATABASE__URL".into(), db.config.url.clone()),
            // Nothing listens there: the port was free a moment ago.
            ("COVA_QUEUE__URL".into(), format!("amqp://guest:guest@127.0.0.1:{closed}/%2f")),
        ],
    };
    run_ok(&cova, &["migrate"]);
    let (mut scraper, log) = cova.start_collecting("scraper", "cova metrics on ");
    let ops = metrics_base(&log).await;
    let http = reqwest::Client::new();
    assert_eq!(get(&http, &format!("{ops}/healthz")).await.0, 200, "alive");
    let res = http.get(format!("{ops}/readyz")).send().await.expect("readyz");
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("5"));
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["code"], "unavailable", "{body}");
    assert!(body["detail"].as_str().is_some_and(|d| d.contains("queue")), "{body}");
    assert_eq!(body["checks"]["database"], "ok", "{body}");
    let _ = scraper.kill();
    let _ = scraper.wait();
    let _ = db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and RabbitMQ: run with make test-real"]
async fn a_broker_reconnect_that_succeeds_is_a_warning_not_an_error() {
    let queue_url = common_real("COVA_TEST_QUEUE_URL");
    let db = TestDatabase::postgres(&common_real(cova_testdb::DATABASE_URL_VAR)).await;
    let proxy = cova_tests::proxy::Proxy::spawn(cova_tests::proxy::upstream_of(&queue_url)).await;
    let prefix = format!("r{:x}{}", std::process::id(), rand_suffix());
    let cova = Cova {
        vars: vec![
            ("COVA_DATABASE__URL".into(), db.config.url.clone()),
            ("COVA_QUEUE__URL".into(), cova_tests::proxy::through(&queue_url, &proxy)),
            ("COVA_QUEUE__PREFIX".into(), prefix.clone()),
            ("COVA_CACHE__PREFIX".into(), prefix),
            ("COVA_TELEMETRY__LOG_FORMAT".into(), "json".into()),
        ],
    };
    let migrated = cova.run(&["migrate"]);
    assert!(migrated.status.success(), "{}", crate::common::stderr(&migrated));
    let (mut scraper, log) = cova.start_collecting("scraper", "scraper consuming");
    // Two cuts; each time the consumer comes back.
    for cut in 1..=2 {
        proxy.cut();
        eventually(&format!("a reconnect after cut {cut}"), async || {
            let lines = log.lines();
            lines.iter().filter(|l| l.contains("scraper consuming") || l.contains("consumer reconnected")).count() > cut
        })
        .await;
    }
    let _ = scraper.kill();
    let _ = scraper.wait();
    let lines = log.lines();
    let errors: Vec<&String> = lines.iter().filter(|l| l.contains("\"level\":\"ERROR\"")).collect();
    assert!(errors.is_empty(), "a reconnect that succeeded logged errors: {errors:#?}");
    assert!(lines.iter().any(|l| l.contains("\"level\":\"WARN\"") && l.contains("reconnect")), "{lines:#?}");
    // Through the proxy's address, which is gone with the proxy: the broker's own.
    let mut left = cova;
    left.vars.retain(|(k, _)| k != "COVA_QUEUE__URL");
    left.vars.push(("COVA_QUEUE__URL".into(), queue_url));
    left.forget().await;
    db.drop_database().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and RabbitMQ: run with make test-real"]
async fn a_role_opens_only_the_backends_it_uses() {
    let queue_url = common_real("COVA_TEST_QUEUE_URL");
    let db = TestDatabase::postgres(&common_real(cova_testdb::DATABASE_URL_VAR)).await;
    let prefix = format!("m{:x}{}", std::process::id(), rand_suffix());
    let cova = Cova {
        vars: vec![
            ("COVA_DATABASE__URL".into(), db.config.url.clone()),
            ("COVA_QUEUE__URL".into(), queue_url),
            ("COVA_QUEUE__PREFIX".into(), prefix.clone()),
            ("COVA_CACHE__PREFIX".into(), prefix),
            // No media store can be made of this: only the roles that keep images mind.
            ("COVA_MEDIA__URL".into(), "ftp://not-a-store/media".into()),
        ],
    };
    let migrated = cova.run(&["migrate"]);
    assert!(migrated.status.success(), "{}", crate::common::stderr(&migrated));
    let (mut notifier, _) = cova.start_collecting("notifier", "notifier consuming");
    let (mut ai, _) = cova.start_collecting("ai-worker", "ai-worker consuming");
    for p in [&mut notifier, &mut ai] {
        let _ = p.kill();
        let _ = p.wait();
    }
    let out = cova.run(&["scraper"]);
    assert!(!out.status.success(), "the scraper keeps images: it needs its store");
    assert!(crate::common::stderr(&out).contains("media.url"), "{}", crate::common::stderr(&out));
    cova.forget().await;
    db.drop_database().await.ok();
}
