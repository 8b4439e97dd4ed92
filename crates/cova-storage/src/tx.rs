//! A connection of either database as one value that plain functions take: [`Tx`] (inside a
//! transaction, or for a few statements alone) and [`Read`] (short reads on hot paths).
//!
//! A repository function is an ordinary `async fn(tx: &mut Tx<'_>, …)`: it builds diesel
//! queries as usual and runs each with [`Tx::execute`], [`Tx::load`], [`Tx::first`] or
//! [`Tx::get_result`] (and `load_as`/`first_as` for a `Selectable` row). Those methods are
//! where the two databases meet: each requires that the query runs on both connection types,
//! so every query is checked against PostgreSQL and SQLite where it is written, and the code
//! around it is compiled once. Where the databases differ (`FOR UPDATE SKIP LOCKED`, multi-row
//! inserts, partitions), a function matches on the `Tx` in plain code.
//!
//! A transaction is a value too: [`Db::begin`] opens one (on SQLite `BEGIN IMMEDIATE`, because
//! read-then-write transactions otherwise fail with "database is locked" under concurrency),
//! [`Transaction::tx`] lends its connection to the functions, [`Transaction::commit`] ends it.
//! Dropped without a commit (an early return, an error returned with `?`, a cancelled request),
//! it is rolled back at once by a task of its own, so that no lock outlives it (on SQLite an
//! open transaction holds the database's write lock); a connection whose rollback fails is
//! closed instead of going back to the pool.
//!
//! ```ignore
//! let mut t = db.begin().await?;
//! let account = balances::account_in(&mut t.tx(), account_id, &month).await?;
//! balances::reserve_in(&mut t.tx(), account_id, job_id, &month, hold, now).await?;
//! t.commit().await?;
//! ```

use crate::pool::{DbConn, ReadConn, SqliteConn, SqliteReadConn};
use crate::{Db, Result};
use diesel::dsl::{AsSelect, Limit, Select};
use diesel::pg::Pg;
use diesel::query_builder::QueryId;
use diesel::query_dsl::methods::{LimitDsl, SelectDsl};
use diesel::sqlite::Sqlite;
use diesel::{QueryResult, Selectable, SelectableHelper};
use diesel_async::methods::{ExecuteDsl, LoadQuery};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, TransactionManager};

/// A connection of either database, inside a transaction or not.
pub enum Tx<'c> {
    Pg(&'c mut AsyncPgConnection),
    Sqlite(&'c mut SqliteConn),
}

/// A connection for short reads ([`Db::read_conn`]): on SQLite a read-only one that runs its
/// statement on the calling thread.
pub enum Read<'c> {
    Pg(&'c mut AsyncPgConnection),
    Sqlite(&'c mut SqliteReadConn),
}

/// A transaction under way ([`Db::begin`]): it has its connection until it ends.
pub struct Transaction {
    conn: Option<DbConn>,
}

impl Db {
    /// Opens a transaction on a pooled connection.
    pub async fn begin(&self) -> Result<Transaction> {
        let mut conn = self.conn().await?;
        match &mut conn {
            DbConn::Pg(c) => {
                <AsyncPgConnection as AsyncConnection>::TransactionManager::begin_transaction(&mut **c).await?
            }
            DbConn::Sqlite(c) => {
                c.spawn_blocking(|c| {
                    diesel::connection::AnsiTransactionManager::begin_transaction_sql(c, "BEGIN IMMEDIATE")
                })
                .await?
            }
        }
        Ok(Transaction { conn: Some(conn) })
    }
}

impl Transaction {
    /// The transaction's connection, for the functions that run in it.
    pub fn tx(&mut self) -> Tx<'_> {
        match &mut self.conn {
            Some(conn) => conn.tx(),
            None => unreachable!("a transaction has its connection until it is committed or dropped"),
        }
    }

    /// Commits it; on an error the transaction is rolled back (when dropped).
    pub async fn commit(mut self) -> Result<()> {
        if let Some(conn) = &mut self.conn {
            match conn {
                DbConn::Pg(c) => {
                    <AsyncPgConnection as AsyncConnection>::TransactionManager::commit_transaction(&mut **c).await?
                }
                DbConn::Sqlite(c) => {
                    <SqliteConn as AsyncConnection>::TransactionManager::commit_transaction(&mut **c).await?
                }
            }
        }
        // Committed: the connection goes back to the pool.
        self.conn = None;
        Ok(())
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(roll_back(conn));
            }
            // No runtime to roll back on: closed, and the database rolls it back.
            Err(_) => conn.discard(),
        }
    }
}

/// Rolls back a transaction that ended without a commit; closes the connection when that fails.
async fn roll_back(mut conn: DbConn) {
    let rolled_back = match &mut conn {
        DbConn::Pg(c) => {
            <AsyncPgConnection as AsyncConnection>::TransactionManager::rollback_transaction(&mut **c).await
        }
        DbConn::Sqlite(c) => <SqliteConn as AsyncConnection>::TransactionManager::rollback_transaction(&mut **c).await,
    };
    if let Err(e) = rolled_back {
        tracing::debug!(error = %e, "rolling back an unfinished transaction failed; its connection is closed");
        conn.discard();
    }
}

impl DbConn {
    /// The connection, for the functions that run on it (each statement on its own).
    pub fn tx(&mut self) -> Tx<'_> {
        match self {
            DbConn::Pg(c) => Tx::Pg(c),
            DbConn::Sqlite(c) => Tx::Sqlite(c),
        }
    }
}

impl ReadConn {
    /// The connection, for the functions that read on it.
    pub fn read(&mut self) -> Read<'_> {
        match self {
            ReadConn::Pg(c) => Read::Pg(c),
            ReadConn::Sqlite(c) => Read::Sqlite(c),
        }
    }
}

impl<'c> From<&'c mut AsyncPgConnection> for Tx<'c> {
    fn from(c: &'c mut AsyncPgConnection) -> Self {
        Tx::Pg(c)
    }
}

impl<'c> From<&'c mut SqliteConn> for Tx<'c> {
    fn from(c: &'c mut SqliteConn) -> Self {
        Tx::Sqlite(c)
    }
}

// The methods return `impl Future + Send` rather than being `async fn`: a caller's future then
// never has to look inside them to prove that it can move between threads (with `async fn`
// and the query's lifetime in their bounds, the compiler cannot prove it for spawned or boxed
// callers).
#[allow(clippy::manual_async_fn)]
impl<'c> Tx<'c> {
    pub fn is_postgres(&self) -> bool {
        matches!(self, Tx::Pg(_))
    }

    /// Runs a statement; the number of rows it changed.
    pub fn execute<'a, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<usize>> + Send + 'a
    where
        Q: ExecuteDsl<AsyncPgConnection> + ExecuteDsl<SqliteConn> + Send + 'a,
    {
        async move {
            match self {
                Tx::Pg(c) => query.execute(&mut **c).await,
                Tx::Sqlite(c) => query.execute(&mut **c).await,
            }
        }
    }

    /// Every row of a query.
    pub fn load<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<Vec<U>>> + Send + 'a
    where
        Q: LoadQuery<'a, AsyncPgConnection, U> + LoadQuery<'a, SqliteConn, U> + Send + 'a,
        U: Send + 'a,
    {
        async move {
            match self {
                Tx::Pg(c) => query.load(&mut **c).await,
                Tx::Sqlite(c) => query.load(&mut **c).await,
            }
        }
    }

    /// The first row of a query (`NotFound` when there is none; see `OptionalExtension`).
    pub fn first<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<U>> + Send + 'a
    where
        Q: LimitDsl + Send + 'a,
        Limit<Q>: LoadQuery<'a, AsyncPgConnection, U> + LoadQuery<'a, SqliteConn, U> + Send + 'a,
        U: Send + 'static,
    {
        async move {
            match self {
                Tx::Pg(c) => query.first(&mut **c).await,
                Tx::Sqlite(c) => query.first(&mut **c).await,
            }
        }
    }

    /// The one row a statement returns (`INSERT … RETURNING`, a count).
    pub fn get_result<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<U>> + Send + 'a
    where
        Q: LoadQuery<'a, AsyncPgConnection, U> + LoadQuery<'a, SqliteConn, U> + Send + 'a,
        U: Send + 'static,
    {
        async move {
            match self {
                Tx::Pg(c) => query.get_result(&mut **c).await,
                Tx::Sqlite(c) => query.get_result(&mut **c).await,
            }
        }
    }

    /// Every row of a query, as a `Selectable` struct (its columns selected for the database at
    /// hand: a selection names its backend, so it is made here rather than where the query is).
    pub fn load_as<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<Vec<U>>> + Send + 'a
    where
        U: Selectable<Pg> + Selectable<Sqlite> + Send + 'a,
        <U as Selectable<Pg>>::SelectExpression: QueryId,
        <U as Selectable<Sqlite>>::SelectExpression: QueryId,
        Q: SelectDsl<AsSelect<U, Pg>> + SelectDsl<AsSelect<U, Sqlite>> + Send + 'a,
        Select<Q, AsSelect<U, Pg>>: LoadQuery<'a, AsyncPgConnection, U> + Send + 'a,
        Select<Q, AsSelect<U, Sqlite>>: LoadQuery<'a, SqliteConn, U> + Send + 'a,
    {
        async move {
            match self {
                Tx::Pg(c) => query.select(<U as SelectableHelper<Pg>>::as_select()).load(&mut **c).await,
                Tx::Sqlite(c) => query.select(<U as SelectableHelper<Sqlite>>::as_select()).load(&mut **c).await,
            }
        }
    }

    /// The first row of a query, as a `Selectable` struct (see [`Tx::load_as`]).
    pub fn first_as<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<U>> + Send + 'a
    where
        U: Selectable<Pg> + Selectable<Sqlite> + Send + 'static,
        <U as Selectable<Pg>>::SelectExpression: QueryId,
        <U as Selectable<Sqlite>>::SelectExpression: QueryId,
        Q: SelectDsl<AsSelect<U, Pg>> + SelectDsl<AsSelect<U, Sqlite>> + Send + 'a,
        Select<Q, AsSelect<U, Pg>>: LimitDsl + Send,
        Select<Q, AsSelect<U, Sqlite>>: LimitDsl + Send,
        Limit<Select<Q, AsSelect<U, Pg>>>: LoadQuery<'a, AsyncPgConnection, U> + Send + 'a,
        Limit<Select<Q, AsSelect<U, Sqlite>>>: LoadQuery<'a, SqliteConn, U> + Send + 'a,
    {
        async move {
            match self {
                Tx::Pg(c) => query.select(<U as SelectableHelper<Pg>>::as_select()).first(&mut **c).await,
                Tx::Sqlite(c) => query.select(<U as SelectableHelper<Sqlite>>::as_select()).first(&mut **c).await,
            }
        }
    }

    /// Runs raw SQL (`;`-separated statements, no results).
    pub fn batch_execute<'a>(&'a mut self, sql: &'a str) -> impl Future<Output = QueryResult<()>> + Send + 'a {
        use diesel_async::SimpleAsyncConnection;
        async move {
            match self {
                Tx::Pg(c) => c.batch_execute(sql).await,
                Tx::Sqlite(c) => c.batch_execute(sql).await,
            }
        }
    }
}

#[allow(clippy::manual_async_fn)]
impl<'c> Read<'c> {
    /// Every row of a query.
    pub fn load<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<Vec<U>>> + Send + 'a
    where
        Q: LoadQuery<'a, AsyncPgConnection, U> + LoadQuery<'a, SqliteReadConn, U> + Send + 'a,
        U: Send + 'a,
    {
        async move {
            match self {
                Read::Pg(c) => query.load(&mut **c).await,
                Read::Sqlite(c) => query.load(&mut **c).await,
            }
        }
    }

    /// The first row of a query (`NotFound` when there is none).
    pub fn first<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<U>> + Send + 'a
    where
        Q: LimitDsl + Send + 'a,
        Limit<Q>: LoadQuery<'a, AsyncPgConnection, U> + LoadQuery<'a, SqliteReadConn, U> + Send + 'a,
        U: Send + 'static,
    {
        async move {
            match self {
                Read::Pg(c) => query.first(&mut **c).await,
                Read::Sqlite(c) => query.first(&mut **c).await,
            }
        }
    }

    /// Every row of a query, as a `Selectable` struct (see [`Tx::load_as`]).
    pub fn load_as<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<Vec<U>>> + Send + 'a
    where
        U: Selectable<Pg> + Selectable<Sqlite> + Send + 'a,
        <U as Selectable<Pg>>::SelectExpression: QueryId,
        <U as Selectable<Sqlite>>::SelectExpression: QueryId,
        Q: SelectDsl<AsSelect<U, Pg>> + SelectDsl<AsSelect<U, Sqlite>> + Send + 'a,
        Select<Q, AsSelect<U, Pg>>: LoadQuery<'a, AsyncPgConnection, U> + Send + 'a,
        Select<Q, AsSelect<U, Sqlite>>: LoadQuery<'a, SqliteReadConn, U> + Send + 'a,
    {
        async move {
            match self {
                Read::Pg(c) => query.select(<U as SelectableHelper<Pg>>::as_select()).load(&mut **c).await,
                Read::Sqlite(c) => query.select(<U as SelectableHelper<Sqlite>>::as_select()).load(&mut **c).await,
            }
        }
    }

    /// The first row of a query, as a `Selectable` struct (see [`Tx::load_as`]).
    pub fn first_as<'a, U, Q>(&'a mut self, query: Q) -> impl Future<Output = QueryResult<U>> + Send + 'a
    where
        U: Selectable<Pg> + Selectable<Sqlite> + Send + 'static,
        <U as Selectable<Pg>>::SelectExpression: QueryId,
        <U as Selectable<Sqlite>>::SelectExpression: QueryId,
        Q: SelectDsl<AsSelect<U, Pg>> + SelectDsl<AsSelect<U, Sqlite>> + Send + 'a,
        Select<Q, AsSelect<U, Pg>>: LimitDsl + Send,
        Select<Q, AsSelect<U, Sqlite>>: LimitDsl + Send,
        Limit<Select<Q, AsSelect<U, Pg>>>: LoadQuery<'a, AsyncPgConnection, U> + Send + 'a,
        Limit<Select<Q, AsSelect<U, Sqlite>>>: LoadQuery<'a, SqliteReadConn, U> + Send + 'a,
    {
        async move {
            match self {
                Read::Pg(c) => query.select(<U as SelectableHelper<Pg>>::as_select()).first(&mut **c).await,
                Read::Sqlite(c) => query.select(<U as SelectableHelper<Sqlite>>::as_select()).first(&mut **c).await,
            }
        }
    }
}
