//! Two `cova scheduler` processes on one PostgreSQL database never start the same watch run
//! twice: 1,000 due watches among a million give exactly 1,000 runs. Needs PostgreSQL and
//! RabbitMQ (split roles need a shared queue), so it runs with `make test-real`.

use cova_testdb::TestDatabase;
use cova_tests::{real_backend, until_within};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use std::time::Duration;

/// Each test runs two scheduler processes over 200 rows; beside each other and two more tests
/// (four at a time on two cores), one CI run starved them until a period listed too late.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Accounts, each with one due watch among `WATCHES_PER_ACCOUNT`.
const ACCOUNTS: i64 = 1_000;
const WATCHES_PER_ACCOUNT: i64 = 1_000;

async fn count(url: &str, sql: &str) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct N {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = AsyncPgConnection::establish(url).await.expect("connect");
    diesel::sql_query(sql).get_result::<N>(&mut conn).await.expect("count").n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and RabbitMQ: run with make test-real"]
async fn two_schedulers_start_each_due_watch_exactly_once() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let admin = real_backend(cova_testdb::DATABASE_URL_VAR);
    let queue_url = real_backend("COVA_TEST_QUEUE_URL");
    let db = TestDatabase::postgres(&admin).await;
    db.db().await;
    let url = db.config.url.clone();
    let now = cova_domain::time::now_ms();
    let month = cova_domain::time::month_of(now);
    let tomorrow = now + 86_400_000;
    let total = ACCOUNTS * WATCHES_PER_ACCOUNT;
    let mut conn = AsyncPgConnection::establish(&url).await.expect("connect");
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, email, email_confirmed_at, active_tokens, free_comments_left, created_at) \
           SELECT 'acct-' || g, 'w' || g || '@example.com', 0, 0, 0, 0 FROM generate_series(1, {ACCOUNTS}) g; \
         INSERT INTO balances (account_id, month, granted, reserved, spent) \
           SELECT 'acct-' || g, '{month}', 1000, 0, 0 FROM generate_series(1, {ACCOUNTS}) g; \
         INSERT INTO analyses (id, account_id, ref, url, platform, status, created_at, saved_at, \
                               watch_enabled, watch_interval_min, watch_next_run_at) \
           SELECT 'an-' || g, 'acct-' || (g % {ACCOUNTS} + 1), 'tiktok:' || (7000000000000000000 + g), \
                  'https://www.tiktok.com/@a/video/' || (7000000000000000000 + g), 'tiktok', 'metadata_only', \
                  0, 0, TRUE, 60, CASE WHEN g <= {ACCOUNTS} THEN 0 ELSE {tomorrow} END \
           FROM generate_series(1, {total}) g; \
         ANALYZE analyses;"
    ))
    .await
    .expect("seed a million watches, 1,000 of them due");
    let prefix = format!("s{}", std::process::id());
    let env = crate::common::Cova {
        vars: [
            ("COVA_DATABASE__URL", url.as_str()),
            ("COVA_QUEUE__URL", queue_url.as_str()),
            ("COVA_QUEUE__PREFIX", prefix.as_str()),
            ("COVA_CACHE__PREFIX", prefix.as_str()),
            ("COVA_SCHEDULER__TICK_MS", "20"),
            ("COVA_SCHEDULER__BATCH", "50"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    };
    let (mut first, first_log) = env.start_collecting("scheduler", "scheduler running");
    let (mut second, second_log) = env.start_collecting("scheduler", "scheduler running");
    let url_ref = url.as_str();
    let started = |n: i64| async move {
        let sql = "SELECT COUNT(*) AS n FROM analyses WHERE watch_last_run_at IS NOT NULL";
        until_within(&format!("the schedulers to start {n} runs"), Duration::from_secs(90), async || {
            (count(url_ref, sql).await >= n).then_some(())
        })
        .await;
    };
    started(ACCOUNTS).await;
    // Both keep ticking over the million: one more watch made due is started, which proves
    // the ticks after the first thousand ran, and nothing else may have started.
    conn.batch_execute(&format!("UPDATE analyses SET watch_next_run_at = 0 WHERE id = 'an-{total}'"))
        .await
        .expect("one more due");
    started(ACCOUNTS + 1).await;
    for child in [&mut first, &mut second] {
        let _ = child.kill();
        let _ = child.wait();
    }
    // What the schedulers say they did: every watch started by exactly one of them, none
    // found already running (which a double claim would show as `joined`).
    let tally = |log: &crate::common::Log| {
        let (mut started, mut joined) = (0, 0);
        for line in log.lines().iter().filter(|l| l.contains("\"scheduler tick\"")) {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
            started += v["started"].as_i64().unwrap_or(0);
            joined += v["joined"].as_i64().unwrap_or(0);
        }
        (started, joined)
    };
    let runs = ACCOUNTS + 1;
    let ((a, a_joined), (b, b_joined)) = (tally(&first_log), tally(&second_log));
    assert_eq!((a + b, a_joined + b_joined), (runs, 0), "no watch started twice ({a} + {b})");
    assert_eq!(count(&url, "SELECT COUNT(*) AS n FROM jobs").await, runs, "exactly one run per due watch");
    assert_eq!(count(&url, "SELECT COUNT(DISTINCT account_id || ref) AS n FROM jobs").await, runs);
    assert_eq!(count(&url, "SELECT COUNT(*) AS n FROM outbox WHERE destination = 'command'").await, runs);
    assert_eq!(
        count(&url, &format!("SELECT COUNT(*) AS n FROM analyses WHERE watch_next_run_at < {now}")).await,
        0,
        "every run was rescheduled an interval on"
    );
    let q = cova_queue::Queue::connect_with(
        &cova_config::QueueConfig { url: queue_url, prefix, prefetch: 1 },
        cova_messages::roles::ALL,
        cova_messages::event_queues::ALL,
    )
    .await
    .expect("queue");
    let _ = q.teardown().await;
    let _ = db.drop_database().await;
}

const CREATORS: i64 = 200;

/// Two `cova scheduler` processes list each due creator once per period: 200 followed creators,
/// two periods, exactly two post-list requests per creator at the simulator and one found post
/// each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and RabbitMQ: run with make test-real"]
async fn two_schedulers_list_each_due_creator_once_per_period() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let admin = real_backend(cova_testdb::DATABASE_URL_VAR);
    let queue_url = real_backend("COVA_TEST_QUEUE_URL");
    let db = TestDatabase::postgres(&admin).await;
    db.db().await;
    let url = db.config.url.clone();
    // Following needs a pack this month.
    let month = cova_domain::time::month_of(cova_domain::time::now_ms());
    let sim = cova_sim::spawn(cova_sim::SimConfig::default()).await.expect("simulator");
    let first_id: u64 = 6_900_000_000_000_000_000;
    for g in 1..=CREATORS as u64 {
        let mut creator = cova_sim::SimCreator::tiktok(first_id + g, &format!("c{g}"));
        creator.posts = vec![cova_sim::SimCreatorPost {
            id: (7_000_000_000_000_000_000 + g).to_string(),
            published_at_ms: 1_000_000,
            pinned: false,
        }];
        sim.add_creator(creator);
    }
    let mut conn = AsyncPgConnection::establish(&url).await.expect("connect");
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, email, email_confirmed_at, active_tokens, free_comments_left, created_at) \
           VALUES ('acct', 'c@example.com', 0, 0, 0, 0); \
         INSERT INTO balances (account_id, month, granted, reserved, spent) VALUES ('acct', '{month}', 1000, 0, 0); \
         INSERT INTO creators (id, account_id, ref, platform, listing, profile, created_at, since_at, \
                               watch_enabled, watch_interval_min, collect_comments, follow_days, next_run_at) \
           SELECT 'cr-' || g, 'acct', 'tiktok:user:' || ({first_id} + g), 'tiktok', 'MS4wLjABAAAA' || ({first_id} + g), \
                  json_build_object('platform', 'tiktok', 'id', ({first_id} + g)::text, \
                                    'listing', 'MS4wLjABAAAA' || ({first_id} + g), 'handle', 'c' || g, \
                                    'name', NULL, 'avatar_url', NULL, 'followers', NULL, 'posts', NULL, \
                                    'verified', NULL)::text, \
                  0, 0, TRUE, 60, FALSE, 0, 0 FROM generate_series(1, {CREATORS}) g;"
    ))
    .await
    .expect("seed 200 due creators");
    let prefix = format!("c{}", std::process::id());
    let env = crate::common::Cova {
        vars: [
            ("COVA_DATABASE__URL", url.as_str()),
            ("COVA_QUEUE__URL", queue_url.as_str()),
            ("COVA_QUEUE__PREFIX", prefix.as_str()),
            ("COVA_CACHE__PREFIX", prefix.as_str()),
            ("COVA_SCHEDULER__TICK_MS", "20"),
            ("COVA_SCHEDULER__CREATOR_CONCURRENCY", "8"),
            ("COVA_PLATFORMS__TIKTOK__WEB_BASE_URL", sim.base_url()),
            ("COVA_PLATFORMS__TIKTOK__REQUESTS_PER_SECOND", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    };
    let (mut first, _) = env.start_collecting("scheduler", "scheduler running");
    let (mut second, _) = env.start_collecting("scheduler", "scheduler running");
    let period = |n: i64| format!("SELECT COUNT(*) AS n FROM creators WHERE last_run_at >= {n}");
    let listed = async |since: i64, what: &str| {
        until_within(what, Duration::from_secs(90), async || {
            (count(&url, &period(since)).await >= CREATORS).then_some(())
        })
        .await;
    };
    listed(1, "the schedulers to list every creator").await;
    // A second period: every creator due again (with as long to list them as the first had).
    let marker = cova_domain::time::now_ms();
    conn.batch_execute("UPDATE creators SET next_run_at = 0").await.expect("due again");
    listed(marker, "the schedulers to list every creator again").await;
    for child in [&mut first, &mut second] {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut listings: std::collections::BTreeMap<String, u32> = Default::default();
    for r in sim.requests().iter().filter(|r| r.path == "/api/post/item_list/") {
        *listings.entry(r.param("secUid").unwrap_or_default().to_owned()).or_default() += 1;
    }
    assert_eq!(listings.len() as i64, CREATORS, "every creator listed");
    assert!(listings.values().all(|n| *n == 2), "each creator listed once per period: {listings:?}");
    assert_eq!(count(&url, "SELECT COUNT(*) AS n FROM creator_posts").await, CREATORS, "one post found each");
    let found = "SELECT COUNT(*) AS n FROM outbox WHERE routing_key = 'creator.post_found'";
    assert_eq!(count(&url, found).await, CREATORS, "announced once each");
    let q = cova_queue::Queue::connect_with(
        &cova_config::QueueConfig { url: queue_url, prefix, prefetch: 1 },
        cova_messages::roles::ALL,
        cova_messages::event_queues::ALL,
    )
    .await
    .expect("queue");
    let _ = q.teardown().await;
    let _ = db.drop_database().await;
}
