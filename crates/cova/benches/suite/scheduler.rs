//! `COVA_BENCH_ONLY=scheduler`: one scheduler tick over seeded watches and followed creators, on
//! SQLite and, when reachable, PostgreSQL.

use super::{RealBackends, Report, ms};
use cova_tests::TestDatabase;
use std::sync::Arc;
use std::time::Instant;

/// One scheduler tick over `1,000 × per_account` watches (100,000 on SQLite, 1,000,000 on
/// PostgreSQL) and 100,000 followed creators: with 1,000 due (each run started through the
/// outbox), then with none due (the scan alone). Only this scheduler runs on the database.
pub(super) async fn scheduler_scan(report: &mut Report, label: &str, database: TestDatabase, per_account: i64) {
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

pub(super) async fn run(report: &mut Report, real: &RealBackends) {
    scheduler_scan(report, "embedded", TestDatabase::sqlite().for_bulk_seeding(), 100).await;
    if real.reachable() {
        scheduler_scan(report, "real", TestDatabase::postgres(&real.database).await.for_bulk_seeding(), 1_000).await;
    }
}
