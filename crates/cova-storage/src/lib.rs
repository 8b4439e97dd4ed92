//! cova's storage: one diesel schema and one set of repository functions over PostgreSQL
//! (diesel-async + deadpool) and SQLite (diesel-async's sync wrapper, bundled SQLite).
//!
//! Each repository function is written once, as a plain function over a connection of either
//! database ([`Tx`], [`Read`]); a transaction is a value ([`Transaction`], opened by
//! [`Db::begin`]). Times are unix milliseconds, months are `YYYY-MM` in UTC; the callers pass
//! `now`, so rules that depend on time run on the clock they choose.

mod answering;
pub mod changes;
mod error;
mod health;
pub mod pool;
pub mod repo;
pub mod schema;
mod tx;

pub use changes::{Change, Changes};
pub use error::StorageError;
pub use pool::{Db, DbConn, ReadConn};
pub use repo::accounts::Account;
pub use repo::balances::{Balance, Reservation};
pub use repo::tokens::{NewToken, TokenRecord};
pub use tx::{Read, Transaction, Tx};

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
