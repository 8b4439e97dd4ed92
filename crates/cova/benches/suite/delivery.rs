//! `COVA_BENCH_ONLY=delivery`: webhook deliveries to HTTPS receivers, by the notifier of
//! `cova serve` and, on the real backends, by a fleet of `cova notifier` processes. Keyword
//! matching as the notifier does it (`keyword_matching`) is here too; only the whole bench runs it.

use super::{RealBackends, Report, RoleProcess, cpu_time};
use cova_sim::SimConfig;
use cova_tests::{Scraper, TestApp, TestDatabase, spawn_app_on};
use std::time::{Duration, Instant};

/// Webhook deliveries queued at once, sent by the notifier of `cova serve` (embedded
/// backends) to HTTPS receivers that take [`RECEIVER_LATENCY`] per request, over connections
/// kept per receiver: one receiver, bounded by the per-receiver limit, then eight, then fifty
/// (bounded by the notifier's own concurrency).
pub(super) async fn delivery_throughput(report: &mut Report) {
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
pub(super) async fn notifier_fleet(report: &mut Report, real: &RealBackends) {
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

/// Fifty keywords of mixed scripts against the comment texts of the 5,000-comment post
/// (each text matched as the notifier does: normalised, then one automaton pass).
pub(super) fn keyword_matching(report: &mut Report, texts: &[String]) {
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

pub(super) async fn run(report: &mut Report, real: &RealBackends) {
    delivery_throughput(report).await;
    if real.reachable() {
        guarded_on_real!(report, "delivery_fleet", real, notifier_fleet);
    }
}
