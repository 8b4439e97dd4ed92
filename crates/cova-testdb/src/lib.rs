//! Isolated databases for tests: a fresh SQLite file, or a fresh PostgreSQL database when
//! `COVA_TEST_DATABASE_URL` names a server. Used by every test that needs a database; a crate
//! of its own so that `cova-storage` carries no test code and no test-only dependency. Also
//! the waits every crate's tests share ([`until`], [`eventually`]).

mod wait;

pub use wait::{WAIT, eventually, until, until_within};

use cova_config::DatabaseConfig;
use cova_storage::{Db, Result, StorageError};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use rand::Rng;
use tokio::sync::OnceCell;

/// The key test databases on PostgreSQL seal their secrets with (one for all of them, so that
/// every process a test starts on its database reads what the others stored).
pub const TEST_ENCRYPTION_KEY: &str = "Y292YS10ZXN0LWtleS1ub3QtZm9yLXByb2R1Y3Rpb24=";

/// Selects the database the test suite runs on; unset = embedded SQLite.
pub const DATABASE_URL_VAR: &str = "COVA_TEST_DATABASE_URL";
const PG_TEST_PREFIX: &str = "cova_t_";

pub struct TestDatabase {
    pub config: DatabaseConfig,
    pg: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDatabase {
    /// A new empty database, migrated. Panics (failing the test) when the configured server is unreachable.
    pub async fn create() -> Self {
        match std::env::var(DATABASE_URL_VAR) {
            Ok(url) if url.starts_with("postgres") => Self::postgres(&url).await,
            _ => Self::sqlite(),
        }
    }

    /// A new empty SQLite file in a temp dir (whatever the environment says).
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir for the test database");
        let path = dir.path().join("cova.db");
        let config = DatabaseConfig { url: format!("sqlite://{}", path.display()), ..DatabaseConfig::default() };
        Self { config, pg: None, _dir: Some(dir) }
    }

    /// A new empty database on the PostgreSQL server at `admin_url` (whatever the environment says).
    pub async fn postgres(admin_url: &str) -> Self {
        static CLEANED: OnceCell<()> = OnceCell::const_new();
        CLEANED.get_or_init(|| drop_stale_databases(admin_url)).await;
        let name = format!("{PG_TEST_PREFIX}{}_{:08x}", std::process::id(), rand::rng().random::<u32>());
        let mut admin = AsyncPgConnection::establish(admin_url)
            .await
            .unwrap_or_else(|e| panic!("{DATABASE_URL_VAR} is set but PostgreSQL is unreachable: {e}"));
        admin.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await.expect("create test database");
        let url = with_database(admin_url, &name);
        let key = Some(TEST_ENCRYPTION_KEY.to_owned().into());
        let config = DatabaseConfig { url, pool_size: 16, encryption_keys: key, ..DatabaseConfig::default() };
        Self { config, pg: Some((admin_url.to_owned(), name)), _dir: None }
    }

    /// The same database for benchmarks that seed a million rows in one statement: longer than
    /// the default statement bound allows, on the server (`statement_timeout`) and in cova's
    /// wait for its answer. Its pools allow an hour per statement.
    pub fn for_bulk_seeding(mut self) -> Self {
        self.config.statement_timeout_ms = 3_600_000;
        self
    }

    /// A pool on the database, with the schema migrated.
    pub async fn db(&self) -> Db {
        let db = Db::connect(&self.config).expect("test pool");
        db.migrate().await.expect("migrate test database");
        db
    }

    /// Drops a PostgreSQL test database (SQLite files go with the temp dir).
    pub async fn drop_database(self) -> Result<()> {
        if let Some((admin_url, name)) = &self.pg {
            let mut admin =
                AsyncPgConnection::establish(admin_url).await.map_err(|e| StorageError::Unavailable(e.to_string()))?;
            admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await?;
        }
        Ok(())
    }
}

fn with_database(url: &str, name: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            u.set_path(&format!("/{name}"));
            u.to_string()
        }
        Err(_) => format!("{}/{name}", url.rsplit_once('/').map_or(url, |(base, _)| base)),
    }
}

/// Removes databases left by test processes that have exited (a panicking test skips its own drop).
async fn drop_stale_databases(admin_url: &str) {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    #[derive(QueryableByName)]
    struct Name {
        #[diesel(sql_type = diesel::sql_types::Text)]
        datname: String,
    }
    let Ok(mut admin) = AsyncPgConnection::establish(admin_url).await else { return };
    let names: Vec<Name> =
        diesel::sql_query(format!("SELECT datname FROM pg_database WHERE datname LIKE '{PG_TEST_PREFIX}%'"))
            .load(&mut admin)
            .await
            .unwrap_or_default();
    for Name { datname } in names {
        let pid = datname.trim_start_matches(PG_TEST_PREFIX).split('_').next().and_then(|p| p.parse::<u32>().ok());
        let alive = pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{datname}\" WITH (FORCE)")).await;
        }
    }
}
