//! Test harness: spawns the real gateway on port 0 over isolated backends and talks to it
//! over HTTP with a typed client.
//!
//! Backends come from the environment, so the same scenarios run embedded (default) and on
//! real servers: `COVA_TEST_DATABASE_URL` (postgres://…), `COVA_TEST_CACHE_URL` (redis://…),
//! `COVA_TEST_QUEUE_URL` (amqp://…). Each test gets its own database, key prefix and queue names.

pub mod client;

pub use client::{ApiError, Client, Reply, Usage};

use cova_auth::ScopeSet;
use cova_config::Config;
use cova_runtime::Backends;
use cova_storage::clock::now_ms;
use cova_storage::repo::tokens::NewToken;
use cova_storage::repo::{accounts, balances, tokens};
use cova_storage::testing::TestDatabase;
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
    server: actix_web::dev::ServerHandle,
    database: TestDatabase,
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
    config.http.workers = 2;
    config.http.shutdown_timeout_s = 1;
    config.cache.url = std::env::var(CACHE_URL_VAR).unwrap_or_else(|_| "memory://".into());
    config.queue.url = std::env::var(QUEUE_URL_VAR).unwrap_or_else(|_| "memory://".into());
    let name = unique();
    config.cache.prefix = name.clone();
    config.queue.prefix = name;
    config
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
    let database = TestDatabase::create().await;
    let mut config = test_config(&database).await;
    adjust(&mut config);
    config.validate().expect("valid test configuration");
    let backends = Backends::connect(&config).await.expect("backends");
    backends.db.migrate().await.expect("migrate");
    // A configured real backend that is down fails the test instead of skipping it.
    let readiness = backends.readiness(Duration::from_secs(5)).await;
    assert!(readiness.ready(), "test backends unreachable: {:?}", readiness.checks);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let addr = listener.local_addr().expect("local addr");
    let state = cova_gateway::AppState::new(config.clone(), backends.clone());
    let server = cova_gateway::server(state, listener).expect("server");
    let handle = server.handle();
    tokio::spawn(server);
    TestApp { base_url: format!("http://{addr}"), config, backends, server: handle, database }
}

impl TestApp {
    pub fn db(&self) -> &Db {
        &self.backends.db
    }

    pub fn client(&self, token: Option<&str>) -> Client {
        Client::new(&self.base_url, token)
    }

    /// A confirmed account with a unique e-mail.
    pub async fn account(&self) -> Account {
        let email = format!("{}@example.com", unique());
        accounts::create(self.db(), &email, true, 500, now_ms()).await.expect("create account")
    }

    pub async fn grant(&self, account: &Account, comments: i64) {
        balances::grant(self.db(), &account.id, comments, "test", now_ms()).await.expect("grant");
    }

    /// Creates a token with these scopes (comma list) and returns its value.
    pub async fn token(&self, account: &Account, scopes: &str) -> String {
        let generated = cova_auth::generate();
        let scopes = ScopeSet::parse_list(scopes).expect("scopes");
        tokens::create(
            self.db(),
            NewToken { account_id: &account.id, name: "test", scopes, token: &generated },
            now_ms(),
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

    pub async fn stop(self) {
        self.server.stop(false).await;
        let _ = self.backends.queue.teardown().await;
        let _ = self.database.drop_database().await;
    }
}
