use crate::{Result, StorageError};
use cova_config::{DatabaseBackend, DatabaseConfig};
use diesel::sqlite::SqliteConnection;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod};
use diesel_async::sync_connection_wrapper::{SpawnBlocking, SyncConnectionWrapper};
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::time::Duration;

pub type SqliteConn = SyncConnectionWrapper<SqliteConnection>;
/// A SQLite connection for short reads on hot paths ([`Db::read_conn`]).
pub type SqliteReadConn = SyncConnectionWrapper<SqliteConnection, Inline>;

/// Runs a SQLite statement on the calling thread. Each trip to tokio's blocking pool costs two
/// thread wake-ups, more than a short indexed read itself; the read pool's connections
/// (`query_only`, and in WAL mode never waiting for the writer) run theirs here.
pub struct Inline;

impl SpawnBlocking for Inline {
    fn spawn_blocking<'a, R>(
        &mut self,
        task: impl FnOnce() -> R + Send + 'static,
    ) -> BoxFuture<'a, std::result::Result<R, Box<dyn std::error::Error + Send + Sync + 'static>>>
    where
        R: Send + 'static,
    {
        futures::future::ready(Ok(task())).boxed()
    }

    fn get_runtime() -> Self {
        Inline
    }
}

/// The migrations in portable SQL, run on either database.
const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");
/// What only PostgreSQL has (the comments' partitions by day), run among the portable ones in
/// version order.
const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations-postgres");
/// What only SQLite has (the comments' FTS5 index), run among the portable ones in version order.
const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations-sqlite");

/// Both sets on SQLite; the harness runs what is pending in version order.
struct SqliteMigrations;

impl diesel::migration::MigrationSource<diesel::sqlite::Sqlite> for SqliteMigrations {
    fn migrations(
        &self,
    ) -> diesel::migration::Result<Vec<Box<dyn diesel::migration::Migration<diesel::sqlite::Sqlite>>>> {
        let mut all = diesel::migration::MigrationSource::<diesel::sqlite::Sqlite>::migrations(&MIGRATIONS)?;
        all.extend(diesel::migration::MigrationSource::<diesel::sqlite::Sqlite>::migrations(&SQLITE_MIGRATIONS)?);
        Ok(all)
    }
}

/// Both sets on PostgreSQL; the harness runs what is pending in version order.
struct PostgresMigrations;

impl diesel::migration::MigrationSource<diesel::pg::Pg> for PostgresMigrations {
    fn migrations(&self) -> diesel::migration::Result<Vec<Box<dyn diesel::migration::Migration<diesel::pg::Pg>>>> {
        let mut all = diesel::migration::MigrationSource::<diesel::pg::Pg>::migrations(&MIGRATIONS)?;
        all.extend(diesel::migration::MigrationSource::<diesel::pg::Pg>::migrations(&POSTGRES_MIGRATIONS)?);
        Ok(all)
    }
}

/// The same pool settings for both connection types (a macro: the generic bounds are unwieldy).
macro_rules! build_pool {
    ($mgr:expr, $size:expr, $wait:expr, $create:expr) => {
        Pool::builder($mgr)
            .max_size($size)
            .wait_timeout(Some($wait))
            .create_timeout(Some($create))
            .recycle_timeout(Some($create))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .map_err(|e| StorageError::Database(e.to_string()))
    };
}

#[derive(Clone)]
enum Inner {
    Pg(Pool<AsyncPgConnection>),
    /// Every statement, and reads that are short and hot ([`Db::read_conn`]).
    Sqlite {
        all: Pool<SqliteConn>,
        reads: Pool<SqliteReadConn>,
    },
}

/// A connection pool over either database. Cheap to clone.
#[derive(Clone)]
pub struct Db {
    inner: Inner,
    url: String,
    /// Seals the stored secrets that cova must read back ([`cova_auth::sealing`]).
    pub(crate) keyring: std::sync::Arc<cova_auth::sealing::Keyring>,
    /// Whether the database can be reached ([`crate::health`]); shared by every clone.
    pub(crate) health: std::sync::Arc<crate::health::Health>,
    /// `database.request_wait_ms`, `database.probe_interval_ms`, `database.connect_timeout_ms`.
    pub(crate) request_wait: Duration,
    pub(crate) probe_every: Duration,
    pub(crate) connect_timeout: Duration,
    /// Told of committed changes ([`crate::changes`]); shared by every clone.
    pub(crate) changes: crate::changes::Listener,
    /// The comment days this process made sure of ([`crate::repo::comment_days::ensure`]).
    pub(crate) comment_days: crate::repo::comment_days::KnownDays,
}

/// One pooled connection of either kind; [`DbConn::tx`] lends it to the repository functions.
/// Lives on the stack for the length of one repository call, so the size gap is harmless.
#[allow(clippy::large_enum_variant)]
pub enum DbConn {
    Pg(PgConn),
    Sqlite(Object<SqliteConn>),
}

/// A connection for short reads ([`Db::read_conn`]); [`ReadConn::read`] lends it to the functions
/// that read.
#[allow(clippy::large_enum_variant)]
pub enum ReadConn {
    Pg(PgConn),
    Sqlite(Object<SqliteReadConn>),
}

/// A pooled PostgreSQL connection that, when given back, tells the pool's health whether the
/// network dropped it meanwhile: the next request then marks the database down at once instead
/// of finding out on another dead connection.
pub struct PgConn {
    /// Always `Some` until [`PgConn::close`] takes it.
    obj: Option<Object<AsyncPgConnection>>,
    health: std::sync::Arc<crate::health::Health>,
}

impl std::ops::Deref for PgConn {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        self.obj.as_ref().expect("a connection until closed")
    }
}

impl std::ops::DerefMut for PgConn {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        self.obj.as_mut().expect("a connection until closed")
    }
}

impl PgConn {
    /// Closes the connection instead of giving it back to the pool (it holds session state).
    pub fn close(mut self) {
        self.detach();
    }

    /// Takes the connection out of the pool, to be closed when dropped.
    fn detach(&mut self) {
        if let Some(obj) = self.obj.take() {
            drop(Object::take(obj));
        }
    }
}

impl DbConn {
    /// Closes the connection instead of giving it back to the pool (a transaction left open
    /// is then rolled back by the database).
    pub(crate) fn discard(self) {
        match self {
            DbConn::Pg(c) => c.close(),
            DbConn::Sqlite(c) => drop(Object::take(c)),
        }
    }
}

impl Drop for PgConn {
    fn drop(&mut self) {
        if let Some(obj) = self.obj.as_mut()
            && diesel_async::pooled_connection::PoolableConnection::is_broken(&mut **obj)
        {
            self.health.suspect();
        }
    }
}

/// Claims rows for one worker among several replicas, in the caller's transaction `$tx` (a
/// `&mut Tx`, of [`Db::begin`]): selects the ids of up to `$limit` rows of `$table` matching
/// `$filter` in `$order` (on PostgreSQL `FOR UPDATE SKIP LOCKED`, so that concurrent claimers
/// get disjoint rows; SQLite's `BEGIN IMMEDIATE` already serialises them), applies `$set` to
/// those rows, and evaluates to `Result<Vec<String>>` of the ids. A macro because a generic
/// function would need a bound for every clause of its two statements.
///
/// ```ignore
/// let mut t = db.begin().await?;
/// let ids = claim_rows!(&mut t.tx(), outbox::table, outbox::id, due, outbox::created_at.asc(), 50, set)?;
/// t.commit().await?;
/// ```
#[macro_export]
macro_rules! claim_rows {
    ($tx:expr, $table:path, $id:expr, $filter:expr, $order:expr, $limit:expr, $set:expr) => {
        async {
            use ::diesel::prelude::*;
            let tx: &mut $crate::Tx<'_> = $tx;
            let due = $table.filter($filter).order($order).limit($limit).select($id);
            let ids: Vec<String> = match tx {
                $crate::Tx::Pg(c) => {
                    ::diesel_async::RunQueryDsl::load(due.for_update().skip_locked(), &mut **c).await?
                }
                $crate::Tx::Sqlite(c) => ::diesel_async::RunQueryDsl::load(due, &mut **c).await?,
            };
            if !ids.is_empty() {
                tx.execute(::diesel::update($table.filter($id.eq_any(&ids))).set($set)).await?;
            }
            Ok::<_, $crate::StorageError>(ids)
        }
        .await
    };
}

/// Bytes of the database file SQLite reads through a memory map instead of a `pread` per page.
const MMAP_BYTES: u64 = 1 << 30;

/// Connections to the SQLite file at `url`, running statements on `S`; `pragmas` follow the
/// common ones.
fn sqlite_manager<S>(
    url: &str,
    busy_ms: u64,
    pragmas: &'static str,
) -> AsyncDieselConnectionManager<SyncConnectionWrapper<SqliteConnection, S>>
where
    S: SpawnBlocking + Send + 'static,
{
    let mut mc = ManagerConfig::<SyncConnectionWrapper<SqliteConnection, S>>::default();
    mc.recycling_method = RecyclingMethod::Fast;
    mc.custom_setup = Box::new(move |path| {
        let path = path.to_owned();
        async move {
            let conn = <SqliteConnection as diesel::Connection>::establish(&path)?;
            let mut conn = SyncConnectionWrapper::with_runtime(conn, S::get_runtime());
            conn.batch_execute(&format!(
                "PRAGMA busy_timeout = {busy_ms}; PRAGMA journal_mode = WAL; \
                 PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
                 PRAGMA mmap_size = {MMAP_BYTES};{pragmas}"
            ))
            .await
            .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        }
        .boxed()
    });
    AsyncDieselConnectionManager::new_with_config(url, mc)
}

/// The keys of `database.encryption_keys`; without them, on SQLite, the key kept beside the
/// database file (made on first use, readable by its owner only).
fn keyring(cfg: &DatabaseConfig, backend: &DatabaseBackend) -> Result<cova_auth::sealing::Keyring> {
    use cova_auth::sealing::Keyring;
    use secrecy::ExposeSecret;
    let bad = |e: cova_auth::sealing::SealError| StorageError::Database(format!("database.encryption_keys: {e}"));
    if let Some(keys) = cfg.encryption_keys.as_ref().filter(|k| !k.expose_secret().trim().is_empty()) {
        return Keyring::parse(keys.expose_secret()).map_err(bad);
    }
    let DatabaseBackend::Sqlite(path) = backend else {
        return Err(StorageError::Database("database.encryption_keys is required with PostgreSQL".into()));
    };
    let file = path.parent().unwrap_or(std::path::Path::new(".")).join("encryption.key");
    let unreadable = |e: std::io::Error| StorageError::Unavailable(format!("{}: {e}", file.display()));
    if let Some(dir) = file.parent() {
        owner_only_dir(dir).map_err(unreadable)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(&file) {
        Ok(mut created) => {
            std::io::Write::write_all(&mut created, format!("{}\n", Keyring::generate_key()).as_bytes())
                .map_err(unreadable)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unreadable(e)),
    }
    Keyring::parse(&std::fs::read_to_string(&file).map_err(unreadable)?)
        .map_err(|e| StorageError::Database(format!("{}: {e}", file.display())))
}

impl Db {
    /// Builds the pool; connections are opened lazily, so a database that is down now
    /// makes requests answer 503 until it returns, instead of stopping the process.
    pub fn connect(cfg: &DatabaseConfig) -> Result<Self> {
        let backend = DatabaseBackend::parse(&cfg.url).map_err(|e| StorageError::Database(e.to_string()))?;
        let keyring = std::sync::Arc::new(keyring(cfg, &backend)?);
        let wait = Duration::from_millis(cfg.acquire_timeout_ms);
        let connect_timeout = Duration::from_millis(cfg.connect_timeout_ms);
        let inner = match backend {
            DatabaseBackend::Postgres(url) => {
                let statement_timeout = cfg.statement_timeout_ms;
                let io_timeout = Duration::from_millis(cfg.io_timeout_ms);
                // A statement the server runs too long ends within statement_timeout; past it
                // and the network's margin, the server itself is not answering.
                let answer_within = Duration::from_millis(statement_timeout) + io_timeout;
                let mut mc = ManagerConfig::<AsyncPgConnection>::default();
                // A connection whose server went away is closed, and recycling drops it; a
                // test query on every checkout would double the round trips of every read.
                mc.recycling_method = RecyclingMethod::Fast;
                mc.custom_setup = Box::new(move |url| {
                    let url = url.to_owned();
                    async move {
                        let mut conn = tokio::time::timeout(
                            connect_timeout,
                            establish(&url, connect_timeout, io_timeout, answer_within),
                        )
                        .await
                        .map_err(|_| diesel::ConnectionError::BadConnection("connect timed out".into()))??;
                        conn.batch_execute(&format!("SET statement_timeout = {statement_timeout}"))
                            .await
                            .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
                        Ok(conn)
                    }
                    .boxed()
                });
                let mgr = AsyncDieselConnectionManager::new_with_config(url, mc);
                Inner::Pg(build_pool!(mgr, cfg.pool_size, wait, connect_timeout)?)
            }
            DatabaseBackend::Sqlite(path) => {
                owner_only_database(&path)?;
                let url = path.to_string_lossy().into_owned();
                let busy = cfg.statement_timeout_ms;
                let all = sqlite_manager::<_>(&url, busy, "");
                // A read on the calling thread must not wait long: in WAL mode readers wait
                // only while a crashed writer's log is recovered.
                let reads = sqlite_manager::<Inline>(&url, busy.min(1_000), " PRAGMA query_only = ON;");
                Inner::Sqlite {
                    all: build_pool!(all, cfg.pool_size, wait, connect_timeout)?,
                    reads: build_pool!(reads, cfg.pool_size, wait, connect_timeout)?,
                }
            }
        };
        Ok(Self {
            inner,
            url: cfg.url.clone(),
            keyring,
            health: crate::health::shared(),
            request_wait: Duration::from_millis(cfg.request_wait_ms),
            probe_every: Duration::from_millis(cfg.probe_interval_ms),
            connect_timeout,
            changes: Default::default(),
            comment_days: Default::default(),
        })
    }

    /// The id of the key new secrets are sealed with (for the start-up line).
    pub fn sealing_key_id(&self) -> Option<&str> {
        self.keyring.current_id()
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.inner, Inner::Pg(_))
    }

    pub fn backend_name(&self) -> &'static str {
        match self.inner {
            Inner::Pg(_) => "postgres",
            Inner::Sqlite { .. } => "sqlite",
        }
    }

    pub async fn conn(&self) -> Result<DbConn> {
        self.refuse_while_down()?;
        match &self.inner {
            Inner::Pg(p) => p.get().await.map(|obj| DbConn::Pg(self.pg(obj))).map_err(|e| self.pool_error(e)),
            Inner::Sqlite { all, .. } => all.get().await.map(DbConn::Sqlite).map_err(|e| self.pool_error(e)),
        }
    }

    fn pg(&self, obj: Object<AsyncPgConnection>) -> PgConn {
        PgConn { obj: Some(obj), health: self.health.clone() }
    }

    /// A pool error as a storage error. Failing to connect marks the database down; waiting
    /// for a busy pool does not (the database answers, it is only busy).
    fn pool_error<E: std::fmt::Display>(&self, e: deadpool::managed::PoolError<E>) -> StorageError {
        let error = pool_error(e, &self.url);
        if !matches!(&error, StorageError::Unavailable(m) if m.contains(POOL_BUSY)) {
            self.mark_down(&error.to_string());
        }
        error
    }

    /// Drops the idle pooled connections (the network may have killed them without a word).
    pub(crate) fn drop_idle(&self) {
        if let Inner::Pg(p) = &self.inner {
            p.retain(|_, _| false);
        }
    }

    /// A connection for a short read on a hot path (a poll, `/usage`, a page of comments). On
    /// SQLite it runs statements on the calling thread and refuses writes; on PostgreSQL it is
    /// [`Db::conn`].
    pub async fn read_conn(&self) -> Result<ReadConn> {
        self.refuse_while_down()?;
        match &self.inner {
            Inner::Pg(p) => p.get().await.map(|obj| ReadConn::Pg(self.pg(obj))).map_err(|e| self.pool_error(e)),
            Inner::Sqlite { reads, .. } => reads.get().await.map(ReadConn::Sqlite).map_err(|e| self.pool_error(e)),
        }
    }

    /// Cheap liveness check for `/readyz`: the database is down while it is marked so.
    pub async fn ping(&self) -> Result<()> {
        self.refuse_while_down()?;
        self.ping_unchecked().await
    }

    /// `SELECT 1` on a pooled connection, whatever the mark says (the probe's own check).
    pub(crate) async fn ping_unchecked(&self) -> Result<()> {
        let mut conn = match &self.inner {
            Inner::Pg(p) => p.get().await.map(|obj| DbConn::Pg(self.pg(obj))).map_err(|e| pool_error(e, &self.url))?,
            Inner::Sqlite { all, .. } => all.get().await.map(DbConn::Sqlite).map_err(|e| pool_error(e, &self.url))?,
        };
        conn.tx().batch_execute("SELECT 1").await?;
        Ok(())
    }

    /// Creates or upgrades the schema; idempotent.
    pub async fn migrate(&self) -> Result<()> {
        let url = self.url.clone();
        let sqlite = matches!(self.inner, Inner::Sqlite { .. });
        tokio::task::spawn_blocking(move || -> Result<()> {
            if sqlite {
                let path = url.trim_start_matches("sqlite://");
                let mut conn = <SqliteConnection as diesel::Connection>::establish(path)
                    .map_err(|e| StorageError::Unavailable(e.to_string()))?;
                diesel::connection::SimpleConnection::batch_execute(&mut conn, "PRAGMA busy_timeout = 10000;")?;
                conn.run_pending_migrations(SqliteMigrations).map_err(|e| StorageError::Migration(e.to_string()))?;
            } else {
                type Wrapped = diesel_async::async_connection_wrapper::AsyncConnectionWrapper<AsyncPgConnection>;
                let mut conn = <Wrapped as diesel::Connection>::establish(&url)
                    .map_err(|e| StorageError::Unavailable(explain_connect(&e.to_string(), &url)))?;
                conn.run_pending_migrations(PostgresMigrations).map_err(|e| StorageError::Migration(e.to_string()))?;
            }
            Ok(())
        })
        .await
        .map_err(|e| StorageError::Migration(e.to_string()))?
    }
}

/// Creates a missing data directory the owner's alone (0700); one that exists is left as the
/// operator made it.
fn owner_only_dir(dir: &std::path::Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() || dir.exists() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the SQLite file (and its directory) the owner's alone, whatever the umask: it holds
/// accounts, sessions and sealed secrets. SQLite gives its `-wal` and `-shm` files the
/// database file's permissions. A file made by an older version is tightened too.
fn owner_only_database(path: &std::path::Path) -> Result<()> {
    let failed = |what: &std::path::Path, e: std::io::Error| {
        StorageError::Unavailable(format!("cannot create {}: {e}", what.display()))
    };
    if let Some(dir) = path.parent() {
        owner_only_dir(dir).map_err(|e| failed(dir, e))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(|e| failed(path, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| failed(path, e))?;
    }
    Ok(())
}

/// How a pool says it had no free connection in time (a busy pool, not a database away).
const POOL_BUSY: &str = "no free connection";

/// Opens a PostgreSQL connection whose socket gives up on the network within `io_timeout`:
/// data unacknowledged that long (`TCP_USER_TIMEOUT`) or an idle connection unanswered by
/// keepalives ends the connection, so a partition is noticed in seconds, not at the system's
/// TCP timeout. Over TCP it also gives up on a server that answers nothing for `answer_within`
/// after a request ([`crate::answering`]): a stalled server, which acknowledges every byte.
async fn establish(
    url: &str,
    connect_timeout: Duration,
    io_timeout: Duration,
    answer_within: Duration,
) -> diesel::ConnectionResult<AsyncPgConnection> {
    use std::str::FromStr;
    use tokio_postgres::config::Host;
    let bad = |e: &dyn std::fmt::Display| diesel::ConnectionError::BadConnection(e.to_string());
    let mut config = tokio_postgres::Config::from_str(url)
        .map_err(|e| diesel::ConnectionError::InvalidConnectionUrl(e.to_string()))?;
    // Keepalives count whole seconds.
    let idle = Duration::from_secs((io_timeout.as_secs() / 2).max(1));
    let ports = config.get_ports().to_vec();
    let tcp: Option<Vec<(String, u16)>> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| match host {
            Host::Tcp(name) => Some((name.clone(), ports.get(i).or(ports.first()).copied().unwrap_or(5432))),
            #[cfg(unix)]
            Host::Unix(_) => None,
        })
        .collect();
    match tcp.filter(|hosts| !hosts.is_empty()) {
        Some(hosts) => {
            let stream =
                crate::answering::connect_tcp(&hosts, connect_timeout, io_timeout, idle).await.map_err(|e| bad(&e))?;
            let (client, connection) = config
                .connect_raw(crate::answering::Answering::new(stream, answer_within), tokio_postgres::NoTls)
                .await
                .map_err(|e| bad(&e))?;
            // The connection ends when its client is dropped, or when its socket fails (the
            // client is closed then, which makes the pool drop it).
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "a database connection ended");
                }
            });
            AsyncPgConnection::try_from(client).await
        }
        // A Unix socket: no network to lose, and the server's own timeouts apply.
        None => {
            config
                .connect_timeout(connect_timeout)
                .keepalives(true)
                .keepalives_idle(idle)
                .keepalives_interval(idle)
                .keepalives_retries(2)
                .tcp_user_timeout(io_timeout);
            let (client, connection) = config.connect(tokio_postgres::NoTls).await.map_err(|e| bad(&e))?;
            AsyncPgConnection::try_from_client_and_connection(client, connection).await
        }
    }
}

fn pool_error<E: std::fmt::Display>(e: deadpool::managed::PoolError<E>, url: &str) -> StorageError {
    match e {
        deadpool::managed::PoolError::Timeout(deadpool::managed::TimeoutType::Wait) => {
            StorageError::Unavailable(format!("{POOL_BUSY} in the database pool in time"))
        }
        e => StorageError::Unavailable(explain_connect(&e.to_string(), url)),
    }
}

/// PostgreSQL's "database … does not exist" is the first thing a new operator meets: name the
/// command that fixes it.
fn explain_connect(message: &str, url: &str) -> String {
    let Some(rest) = message.split("database \"").nth(1) else { return message.to_owned() };
    let Some(name) = rest.split('"').next().filter(|_| rest.contains("does not exist")) else {
        return message.to_owned();
    };
    let target = url::Url::parse(url).ok();
    let host = target.as_ref().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_else(|| "HOST".into());
    let user =
        target.as_ref().map(|u| u.username().to_owned()).filter(|u| !u.is_empty()).unwrap_or_else(|| "postgres".into());
    format!("{message}; create it with `createdb -h {host} -U {user} {name}`, then run `cova migrate`")
}

/// SQL written with `?` placeholders, numbered `$1, $2, …` for PostgreSQL (for the few
/// statements the query builder cannot express).
pub fn bind_params(postgres: bool, sql: &str) -> String {
    if !postgres {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for ch in sql.chars() {
        if ch == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(ch);
        }
    }
    out
}
