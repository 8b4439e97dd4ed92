//! `COVA_BENCH_ONLY=spikes`: a spike decision over two weeks of buckets, and a post's whole spike
//! check as the notifier runs it.

use super::{RealBackends, Report, cpu_time, ms};
use std::time::{Duration, Instant};

/// Where a spike check runs: the embedded backends, or PostgreSQL (with Redis and RabbitMQ).
#[derive(Clone, Copy)]
enum On<'a> {
    Embedded,
    Real(&'a RealBackends),
}

impl On<'_> {
    fn words(self) -> &'static str {
        match self {
            On::Embedded => "embedded backends",
            On::Real(_) => "PostgreSQL",
        }
    }

    /// The row name's suffix: none on the embedded backends, as before there were two.
    fn suffix(self) -> &'static str {
        match self {
            On::Embedded => "",
            On::Real(_) => "_real",
        }
    }

    /// Every role on a clock the bench moves, from 2026-06-01.
    async fn app(self) -> (cova_tests::TestApp, cova_domain::ManualClock) {
        let fast = |c: &mut cova_config::Config| c.limits.api_requests_per_minute = 100_000_000;
        match self {
            On::Embedded => cova_tests::spawn_on_clock("2026-06-01T00:00:00Z", fast).await,
            On::Real(real) => {
                let database = cova_tests::TestDatabase::postgres(&real.database).await;
                cova_tests::spawn_on_clock_with(database, "2026-06-01T00:00:00Z", |c| {
                    fast(c);
                    c.cache.url = real.cache.clone();
                    c.queue.url = real.queue.clone();
                })
                .await
            }
        }
    }

    /// CPU spent so far by what answers a check: this process, and on PostgreSQL the server
    /// processes of its connections to the bench's database (not the server's background
    /// workers, whose autovacuum after the seeding is no check's cost).
    async fn cpu(self, db: &cova_storage::Db) -> (Duration, Duration) {
        let server = match self {
            On::Embedded => Duration::ZERO,
            On::Real(_) => backend_pids(db).await.into_iter().map(cpu_time).sum(),
        };
        (cpu_time(std::process::id()), server)
    }
}

/// The PostgreSQL server processes serving connections to `db`'s database.
async fn backend_pids(db: &cova_storage::Db) -> Vec<u32> {
    #[derive(diesel::QueryableByName)]
    struct Pid {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        pid: i32,
    }
    let mut conn = db.conn().await.expect("conn");
    let sql = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()";
    let pids: Vec<Pid> = conn.tx().load(diesel::sql_query(sql)).await.expect("backends");
    pids.into_iter().filter_map(|p| u32::try_from(p.pid).ok()).collect()
}

/// CPU per round between two readings of [`On::cpu`], in words.
async fn cpu_words(on: On<'_>, db: &cova_storage::Db, before: (Duration, Duration), rounds: u32) -> String {
    let (process, server) = on.cpu(db).await;
    let process = process.saturating_sub(before.0) / rounds;
    match on {
        On::Embedded => format!("{} of CPU", ms(process)),
        On::Real(_) => {
            let server = server.saturating_sub(before.1) / rounds;
            format!(
                "{} of CPU ({} in cova, {} in the PostgreSQL processes serving it)",
                ms(process + server),
                ms(process),
                ms(server)
            )
        }
    }
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

/// The whole spike check of a post after a collection, as the notifier runs it (the comments
/// counted per 10 minutes by the database, the stored labels of the window's and up to 1,000 of
/// the baseline's read, deciding), on the embedded backends: a post of two weeks of comments at
/// 6 and at 12 an hour.
async fn spike_checks(report: &mut Report, on: On<'_>) {
    use cova_sim::Tone;
    const HOUR: i64 = 3_600_000;
    for per_hour in [6_i64, 12] {
        let (app, clock) = on.app().await;
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
        let cpu_before = on.cpu(app.db()).await;
        let started = Instant::now();
        for _ in 0..rounds {
            let raised = cova_runtime::spike_alerts::check(app.db(), &account.id, &r#ref, end).await.expect("check");
            assert_eq!(raised, 0, "a steady post");
        }
        let per = started.elapsed() / rounds;
        report.add(
            &format!("spike_check_14_days_{n}_comments{}", on.suffix()),
            format!(
                "{} per check ({rounds} checks of a steady post of {n} comments over two weeks; {}; {} per check)",
                ms(per),
                on.words(),
                cpu_words(on, app.db(), cpu_before, rounds).await
            ),
        );
        app.stop().await;
    }
}

/// A spike check after a re-scrape that added 0, 20 and 200 comments (in the last hour) to a
/// post of 2,000, 4,000 and 4,700 over two weeks (5,000 is the per-post limit): the check itself (buckets counted by the
/// database, labels read), and the judging of the new comments, done once by the first check.
async fn checks_after_a_rescrape(report: &mut Report, on: On<'_>) {
    use cova_sim::Tone;
    const HOUR: i64 = 3_600_000;
    for (k, n) in [2_000_i64, 4_000, 4_700].into_iter().enumerate() {
        let (app, clock) = on.app().await;
        let t0 = clock.now_ms();
        app.sim.set_clock_ms(t0);
        let (account, token) = app.integrator().await;
        app.grant(&account, 1_000_000).await;
        let client = app.client(Some(&token));
        let id = 6_900_000_000_000_200_000 + k as u64 * 1_000;
        let span = 14 * 24 * HOUR;
        let posted: Vec<(i64, Tone)> = (0..n).map(|i| ((t0 + i * span / n + 1_000) / 1000, Tone::Usual)).collect();
        app.sim.post_comments(&id.to_string(), &posted);
        let mut now = t0 + span;
        clock.set(now);
        app.sim.set_clock_ms(now);
        client.collect(id).await;
        let r#ref = format!("tiktok:{id}");
        for added in [0_i64, 20, 200] {
            let new: Vec<(i64, Tone)> =
                (0..added).map(|i| ((now + 1_000 + i * HOUR / 2 / added.max(1)) / 1000, Tone::Usual)).collect();
            app.sim.post_comments(&id.to_string(), &new);
            now += HOUR;
            clock.set(now);
            app.sim.set_clock_ms(now);
            let queued = client.refresh(&r#ref).await.ok();
            let done = client.wait_job(queued["job_id"].as_str().expect("job")).await;
            assert_eq!(done["status"], "complete", "{done}");
            app.notifier_caught_up().await;
            // What the first check judged once: the new comments (first seen now), labelled again.
            let job = done["job_id"].as_str().expect("job_id");
            let fresh = cova_storage::repo::breakdown::first_seen_at(app.db(), job, now).await.expect("new rows");
            assert_eq!(fresh.len() as i64, added, "the re-scrape's new comments");
            let offline = cova_analyzers::Offline::new();
            let texts: Vec<String> = fresh
                .iter()
                .map(|r| serde_json::from_str::<serde_json::Value>(&r.body).expect("a body")["text"].to_string())
                .collect();
            let before = cpu_time(std::process::id());
            for text in &texts {
                std::hint::black_box(offline.label(text));
            }
            let judging = cpu_time(std::process::id()).saturating_sub(before);
            let rounds = 20;
            let before = on.cpu(app.db()).await;
            let started = Instant::now();
            for _ in 0..rounds {
                cova_runtime::spike_alerts::check(app.db(), &account.id, &r#ref, now).await.expect("check");
            }
            let wall = started.elapsed() / rounds;
            report.add(
                &format!("spike_check_after_rescrape_{n}_plus_{added}{}", on.suffix()),
                format!(
                    "{} per check, {} ({rounds} checks; a post of {n} comments over two weeks, re-scraped with {added} new; {}) + {} judging the new comments once, at the first check after the scrape",
                    cpu_words(on, app.db(), before, rounds).await,
                    ms(wall),
                    on.words(),
                    ms(judging)
                ),
            );
        }
        app.stop().await;
    }
}

/// The decisions, then the checks on the embedded backends and, where they are reachable, on
/// PostgreSQL.
pub(super) async fn run(report: &mut Report, real: &RealBackends) {
    spike_decisions(report);
    let mut backends = vec![On::Embedded];
    if real.reachable() {
        backends.push(On::Real(real));
    } else {
        report.add("spike_checks_real", "skipped (PostgreSQL, Redis or RabbitMQ not reachable)");
    }
    for on in backends {
        spike_checks(report, on).await;
        checks_after_a_rescrape(report, on).await;
    }
}
