use diesel::result::{DatabaseErrorKind, Error as DieselError};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("not found")]
    NotFound,
    /// A uniqueness or check rule refused the write (e.g. duplicate e-mail).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database cannot be reached or did not answer in time: callers answer 503.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Database(String),
    #[error("migration failed: {0}")]
    Migration(String),
}

impl StorageError {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StorageError::Unavailable(_))
    }
}

impl From<DieselError> for StorageError {
    fn from(e: DieselError) -> Self {
        match e {
            DieselError::NotFound => StorageError::NotFound,
            DieselError::DatabaseError(
                DatabaseErrorKind::UniqueViolation | DatabaseErrorKind::CheckViolation,
                info,
            ) => StorageError::Conflict(info.message().to_owned()),
            DieselError::DatabaseError(
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
                info,
            ) => StorageError::Unavailable(info.message().to_owned()),
            DieselError::DatabaseError(_, info) if is_transient(info.message()) => {
                StorageError::Unavailable(info.message().to_owned())
            }
            other => StorageError::Database(other.to_string()),
        }
    }
}

/// Messages that mean "try again later" rather than "this query is wrong".
fn is_transient(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    ["database is locked", "statement timeout", "canceling statement", "connection", "terminating"]
        .iter()
        .any(|needle| m.contains(needle))
}
