//! Test harness: spawns the real gateway on port 0 over isolated backends and talks to it
//! over HTTP with a typed client.
//!
//! Backends come from the environment, so the same scenarios run embedded (default) and on
//! real servers: `COVA_TEST_DATABASE_URL` (postgres://…), `COVA_TEST_CACHE_URL` (redis://…),
//! `COVA_TEST_QUEUE_URL` (amqp://…). Each test gets its own database, key prefix and queue names.

pub mod browser;
pub mod client;
pub mod proxy;
pub mod receiver;
pub mod workspace;

pub use client::{ApiError, Client, Reply, Usage};
pub use cova_testdb::TestDatabase;
/// How scenarios wait for what happens in the background: the waits every crate's tests share.
pub use cova_testdb::{WAIT, eventually, until, until_within};

use cova_app::{Role, Stack};
use cova_auth::ScopeSet;
use cova_config::Config;
use cova_runtime::Backends;
use cova_storage::repo::tokens::NewToken;
use cova_storage::repo::{accounts, balances, tokens};
use cova_storage::{Account, Db};
use rand::Rng;
use std::net::TcpListener;
use std::time::Duration;

pub const CACHE_URL_VAR: &str = "COVA_TEST_CACHE_URL";
pub const QUEUE_URL_VAR: &str = "COVA_TEST_QUEUE_URL";

pub struct TestApp {
    pub base_url: String,
    pub config: Config,
    pub backends: Backends,
    /// The platform simulator this app's adapters talk to.
    pub sim: cova_sim::SimHandle,
    stack: Stack,
    database: TestDatabase,
}

/// The URL of a real backend for a test that cannot run without one (such tests are
/// `#[ignore]`d and run by `make test-real`): a missing variable fails the test, it is never
/// skipped as passed.
pub fn real_backend(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: this test needs the real backend (make test-real)"))
}

/// A unique name part for this test's keys and queues.
fn unique() -> String {
    format!("t{:012x}", rand::rng().random::<u64>() & 0xffff_ffff_ffff)
}

/// The test configuration on isolated backends; `adjust` may change it before start.
pub async fn test_config(database: &TestDatabase) -> Config {
    let mut config = Config::default();
    config.database = database.config.clone();
    config.http.addr = "127.0.0.1:0".into();
    // Many stacks share one test process; a test that reads metrics asks for a port of its own.
    config.metrics.addr = String::new();
    config.http.workers = 2;
    config.http.shutdown_timeout_s = 1;
    config.cache.url = std::env::var(CACHE_URL_VAR).unwrap_or_else(|_| "memory://".into());
    config.queue.url = std::env::var(QUEUE_URL_VAR).unwrap_or_else(|_| "memory://".into());
    let name = unique();
    use_test_media(&mut config, &name).await;
    config.cache.prefix = name.clone();
    config.queue.prefix = name;
    config.scheduler.tick_ms = 100;
    config
}

/// The public URL of a TikTok post (of the simulator, when the adapters point at it).
pub fn tiktok_url(id: u64) -> String {
    format!("https://www.tiktok.com/@someone/video/{id}")
}

/// Comments as a result or an entry nests them (`[{…, replies: […]}]`), flattened: each
/// top-level comment followed by its replies.
pub fn flat_comments(comments: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for c in comments.as_array().expect("comments") {
        out.push(c.clone());
        out.extend(c["replies"].as_array().cloned().unwrap_or_default());
    }
    out
}

/// The bucket every test's media live in (each under its own prefix) on the S3 test server.
pub const S3_BUCKET: &str = "cova-test";

/// This test's media store: on the S3-compatible server of `COVA_TEST_S3_ENDPOINT` when it is
/// set (the real-backend pass), else a directory of its own.
pub async fn use_test_media(config: &mut Config, name: &str) {
    match std::env::var(S3_ENDPOINT_VAR) {
        Ok(endpoint) => {
            // Test servers accept an unsigned bucket creation; an existing bucket answers 409.
            let created = reqwest::Client::new().put(format!("{endpoint}/{S3_BUCKET}")).send().await;
            assert!(created.is_ok(), "the S3 test server at {endpoint} is unreachable: {created:?}");
            config.media.url = format!("s3://{S3_BUCKET}/{name}");
            config.media.s3_endpoint = Some(endpoint);
            config.media.s3_access_key_id = Some("test".into());
            config.media.s3_secret_access_key = Some("test".to_owned().into());
            config.media.s3_allow_http = true;
        }
        Err(_) => {
            config.media.url = std::env::temp_dir().join("cova-test-media").join(name).display().to_string();
        }
    }
}

pub const S3_ENDPOINT_VAR: &str = "COVA_TEST_S3_ENDPOINT";

/// The JSON Schema of a message, from `proto-schemas/`.
pub fn schema(name: &str) -> jsonschema::Validator {
    let path = format!("{}/../proto-schemas/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let schema: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::validator_for(&schema).expect("schema compiles")
}

pub fn assert_valid(validator: &jsonschema::Validator, instance: &serde_json::Value) {
    let errors: Vec<String> = validator.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{instance} does not match: {errors:?}");
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Points the platform adapters at the simulator, with retry delays short enough for tests.
pub fn use_simulator(config: &mut Config, sim: &cova_sim::SimHandle) {
    let base = sim.base_url().to_owned();
    let p = &mut config.platforms;
    p.tiktok.web_base_url = base.clone();
    p.tiktok.short_link_base_url = Some(base.clone());
    p.tiktok.retry_base_ms = 5;
    p.tiktok.retry_max_ms = 20;
    p.tiktok.requests_per_second = 0.0;
    p.youtube.api_base_url = base.clone();
    p.youtube.api_key = Some("sim-key".to_owned().into());
    p.youtube.retry_base_ms = 5;
    p.youtube.retry_max_ms = 20;
    p.youtube.requests_per_second = 0.0;
    p.instagram.web_base_url = format!("{base}/ig");
    p.instagram.retry_base_ms = 5;
    p.instagram.retry_max_ms = 20;
    p.instagram.requests_per_second = 0.0;
    config.scraper.retry_base_ms = 20;
    config.notifier.telegram_api_base_url = sim.base_url().to_owned();
    config.notifier.telegram_bot_token = Some("sim-bot".to_owned().into());
    config.notifier.tick_ms = 50;
    // The fake chat-completions endpoint, for tests that choose `ai.analyzer = openai`.
    config.ai.openai.base_url = sim.llm_base_url();
    config.ai.openai.api_key = Some(cova_sim::LLM_API_KEY.to_owned().into());
    config.ai.openai.model = "sim-model".into();
    config.ai.retry_base_ms = 20;
    // The simulator's CDN is on loopback, on its own port only.
    config.media.cdn_hosts = vec![sim.base_url().to_owned()];
    config.media.allow_private = vec!["127.0.0.1/32".into()];
    // The workspace's mail and payments go to the simulator's SMTP receiver and provider.
    config.smtp.url = sim.smtp_url();
    config.payments.api_base_url = sim.payments_base_url();
    config.payments.secret_key = Some(cova_sim::PAYMENTS_SECRET_KEY.to_owned().into());
    config.payments.webhook_secret = Some(cova_sim::PAYMENTS_WEBHOOK_SECRET.to_owned().into());
}

/// Lets the notifier reach the test's webhook receivers: `host` resolves to loopback, loopback
/// is admitted, and the test authority is trusted.
pub fn use_receivers(config: &mut Config, ca: &receiver::TestCa, host: &str) {
    config.notifier.allow_private = vec!["127.0.0.1/32".into()];
    config.notifier.hosts.insert(host.to_owned(), "127.0.0.1".into());
    config.notifier.extra_ca_pem = Some(ca.pem_path());
}

pub async fn spawn_app_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_with_sim(cova_sim::SimConfig::default(), adjust).await
}

pub async fn spawn_app_with_sim(sim_config: cova_sim::SimConfig, adjust: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_on(TestDatabase::create().await, sim_config, Scraper::InProcess, adjust).await
}

/// Where the app's jobs are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scraper {
    /// A scraper runs inside the test process, as in `cova serve`.
    InProcess,
    /// Only the gateway and the outbox relay run here; `cova scraper` processes (started by
    /// the caller against the same backends) collect the jobs.
    External,
}

/// The gateway on a given database, with its own simulator and queue names.
pub async fn spawn_app_on(
    database: TestDatabase,
    sim_config: cova_sim::SimConfig,
    scraper: Scraper,
    adjust: impl FnOnce(&mut Config),
) -> TestApp {
    spawn_stack(
        database,
        sim_config,
        |builder| match scraper {
            Scraper::InProcess => builder.roles(Role::ALL),
            Scraper::External => builder.roles([Role::Gateway]),
        },
        adjust,
    )
    .await
}

/// The app with the roles (and extra workers, clock…) that `build` chooses, through the same
/// composition root as `cova serve`.
/// Every role on a clock the test moves, starting at `start` (RFC 3339).
pub async fn spawn_on_clock(start: &str, adjust: impl FnOnce(&mut Config)) -> (TestApp, cova_domain::ManualClock) {
    spawn_on_clock_with(TestDatabase::create().await, start, adjust).await
}

/// [`spawn_on_clock`] on a given database.
pub async fn spawn_on_clock_with(
    database: TestDatabase,
    start: &str,
    adjust: impl FnOnce(&mut Config),
) -> (TestApp, cova_domain::ManualClock) {
    let clock =
        cova_domain::ManualClock::starting_at(cova_domain::time::parse_rfc3339(start).expect("an RFC 3339 time"));
    let app = spawn_stack(
        database,
        cova_sim::SimConfig::default(),
        |b| b.roles(cova_app::Role::ALL).clock(clock.clock()),
        adjust,
    )
    .await;
    (app, clock)
}

pub async fn spawn_stack(
    database: TestDatabase,
    sim_config: cova_sim::SimConfig,
    build: impl FnOnce(cova_app::StackBuilder) -> cova_app::StackBuilder,
    adjust: impl FnOnce(&mut Config),
) -> TestApp {
    let mut config = test_config(&database).await;
    let sim = cova_sim::spawn(sim_config).await.expect("simulator");
    use_simulator(&mut config, &sim);
    adjust(&mut config);
    config.validate().expect("valid test configuration");
    let backends = Backends::connect(&config).await.expect("backends");
    backends.db.migrate().await.expect("migrate");
    // A configured real backend that is down fails the test instead of skipping it (a media
    // store may be down on purpose: the test then says so itself).
    let readiness = backends.readiness(Duration::from_secs(5)).await;
    let down: Vec<_> = readiness.checks.iter().filter(|(name, r)| *name != "media" && r.is_err()).collect();
    assert!(down.is_empty(), "test backends unreachable: {down:?}");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let builder = Stack::builder(config.clone()).backends(backends.clone()).listener(listener);
    let stack = build(builder).start().await.expect("cova starts");
    let backends = stack.backends().clone();
    let addr = stack.http_addr().expect("the gateway runs");
    sim.set_payments_webhook(&format!("http://{addr}/api/v1/billing/webhook"));
    TestApp { base_url: format!("http://{addr}"), config, backends, sim, stack, database }
}

/// A [`TestApp`] whose process stopped ([`TestApp::halt`]): its backends (the in-process
/// queue among them) are still here, as a dead process' database and queue journal are.
pub struct Stopped {
    pub config: Config,
    pub backends: Backends,
    pub sim: cova_sim::SimHandle,
    database: TestDatabase,
}

impl Stopped {
    /// Starts the process again on the same database, with fresh backends (an in-process queue
    /// and cache start empty, as after a restart) and the roles `build` chooses. The new stack
    /// listens on a port of its own.
    pub async fn start(self, build: impl FnOnce(cova_app::StackBuilder) -> cova_app::StackBuilder) -> TestApp {
        let Stopped { config, sim, database, backends } = self;
        drop(backends);
        let backends = Backends::connect(&config).await.expect("backends");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let builder = Stack::builder(config.clone()).backends(backends).listener(listener);
        let stack = build(builder).start().await.expect("cova starts again");
        let backends = stack.backends().clone();
        let addr = stack.http_addr().expect("the gateway runs");
        sim.set_payments_webhook(&format!("http://{addr}/api/v1/billing/webhook"));
        TestApp { base_url: format!("http://{addr}"), config, backends, sim, stack, database }
    }
}

/// How far the app's jobs have got, read from the database (timestamps in ms).
#[derive(Debug, Clone, Copy, Default)]
pub struct JobProgress {
    pub total: i64,
    pub complete: i64,
    pub failed: i64,
    pub first_created_at: Option<i64>,
    pub last_finished_at: Option<i64>,
}

impl TestApp {
    pub fn db(&self) -> &Db {
        &self.backends.db
    }

    /// Now, on the app's clock.
    pub fn now(&self) -> i64 {
        self.backends.clock.now_ms()
    }

    /// Wakes the outbox relay after a test wrote to the outbox itself.
    pub fn wake_outbox(&self) {
        self.stack.wake_outbox();
    }

    pub fn client(&self, token: Option<&str>) -> Client {
        Client::new(&self.base_url, token)
    }

    /// A confirmed account with a unique e-mail.
    pub async fn account(&self) -> Account {
        let email = format!("{}@example.com", unique());
        accounts::create(self.db(), &email, true, 500, self.now()).await.expect("create account")
    }

    pub async fn grant(&self, account: &Account, comments: i64) {
        balances::grant(self.db(), &account.id, comments, "test", self.now()).await.expect("grant");
    }

    /// Creates a token with these scopes (comma list) and returns its value.
    pub async fn token(&self, account: &Account, scopes: &str) -> String {
        let generated = cova_auth::generate();
        let scopes = ScopeSet::parse_list(scopes).expect("scopes");
        tokens::create(
            self.db(),
            NewToken { account_id: &account.id, name: "test", scopes, token: &generated },
            self.now(),
        )
        .await
        .expect("create token")
        .expect("token allowed");
        generated.value
    }

    /// An account with a token holding every scope.
    pub async fn integrator(&self) -> (Account, String) {
        let account = self.account().await;
        let token = self.token(&account, "metadata:read,analyze:write,library:write,ai:write,keywords:write").await;
        (account, token)
    }

    /// The refs bookmarked in the account's library.
    pub async fn library(&self, account_id: &str) -> Vec<String> {
        use cova_storage::schema::analyses;
        use diesel::prelude::*;
        let query = analyses::table
            .filter(analyses::account_id.eq(account_id))
            .filter(analyses::saved_at.is_not_null())
            .select(analyses::ref_);
        self.db().conn().await.expect("conn").tx().load::<String, _>(query).await.expect("library")
    }

    /// Payloads written to the outbox for a destination (`command` or `event`).
    pub async fn outbox_payloads(&self, destination: &str) -> Vec<String> {
        self.outbox_rows(destination).await.into_iter().map(|(payload, _)| payload).collect()
    }

    /// (payload, headers JSON) of the outbox rows for a destination.
    pub async fn outbox_rows(&self, destination: &str) -> Vec<(String, String)> {
        use cova_storage::schema::outbox;
        use diesel::prelude::*;
        let query = outbox::table
            .filter(outbox::destination.eq(destination))
            .order(outbox::created_at.asc())
            .select((outbox::payload, outbox::headers));
        self.db().conn().await.expect("conn").tx().load::<(String, String), _>(query).await.expect("outbox")
    }

    pub async fn job_progress(&self) -> JobProgress {
        use cova_storage::schema::jobs;
        use diesel::prelude::*;
        let query = jobs::table.select((jobs::status, jobs::created_at, jobs::finished_at));
        let rows: Vec<(String, i64, Option<i64>)> =
            self.db().conn().await.expect("conn").tx().load(query).await.expect("jobs");
        JobProgress {
            total: rows.len() as i64,
            complete: rows.iter().filter(|r| r.0 == "complete").count() as i64,
            failed: rows.iter().filter(|r| r.0 == "failed").count() as i64,
            first_created_at: rows.iter().map(|r| r.1).min(),
            last_finished_at: rows.iter().filter_map(|r| r.2).max(),
        }
    }

    /// Stops the stack's roles, keeping its database, backends, simulator and media store: a
    /// process that stopped. [`Stopped::start`] starts it again.
    pub async fn halt(self) -> Stopped {
        let TestApp { config, sim, stack, database, backends, .. } = self;
        stack.stop(Duration::from_secs(10)).await;
        Stopped { config, backends, sim, database }
    }

    /// Waits until the periodic task `task` (e.g. `cova_scheduler::TICK`) has started and
    /// finished a pass after this call: what it would do now has been done (the positive signal
    /// a test waits for before asserting that something did not happen).
    pub async fn next_pass(&self, task: &str) {
        let seen = self.backends.progress.count(task);
        eventually(&format!("two passes of {task}"), async || self.backends.progress.count(task) >= seen + 2).await;
    }

    /// Waits until every event published so far has been handled by the notifier (settled on
    /// its queue): what the events would raise (alerts, deliveries) has been recorded.
    pub async fn notifier_caught_up(&self) {
        use cova_storage::schema::outbox;
        use diesel::prelude::*;
        let (queue, bound) = cova_messages::event_queues::NOTIFIER;
        let settled = format!("settled:{queue}");
        eventually("the notifier has handled every event", async || {
            let mut conn = self.db().conn().await.expect("conn");
            let mut tx = conn.tx();
            // The events the notifier is bound to (the flow's own, such as `job.sized`, are not).
            let its = || outbox::destination.eq("event").and(outbox::routing_key.eq_any(bound));
            let events: i64 = tx.get_result(outbox::table.filter(its()).count()).await.expect("outbox");
            let unsent: i64 = tx
                .get_result(outbox::table.filter(its()).filter(outbox::sent_at.is_null()).count())
                .await
                .expect("outbox");
            unsent == 0 && self.backends.progress.count(&settled) >= u64::try_from(events).unwrap_or(0)
        })
        .await;
    }

    pub async fn stop(self) {
        self.stack.stop(Duration::from_secs(10)).await;
        self.sim.stop().await;
        let _ = self.backends.queue.teardown().await;
        let _ = self.database.drop_database().await;
        if !self.config.media.url.starts_with("s3://") {
            let _ = std::fs::remove_dir_all(&self.config.media.url);
        }
        forget_keys(&self.config.cache).await;
    }
}

/// Deletes the keys a test left under its prefix on a shared Redis (copies of results live
/// for days); the in-process cache goes with the process.
pub async fn forget_keys(cache: &cova_config::CacheConfig) {
    if !cache.url.starts_with("redis") {
        return;
    }
    let Ok(client) = redis::Client::open(cache.url.as_str()) else { return };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else { return };
    let pattern = format!("{}:*", cache.prefix);
    let mut cursor: u64 = 0;
    loop {
        let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(500)
            .query_async(&mut conn)
            .await
        else {
            return;
        };
        if !keys.is_empty() {
            let _: redis::RedisResult<i64> = redis::cmd("UNLINK").arg(&keys).query_async(&mut conn).await;
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}
