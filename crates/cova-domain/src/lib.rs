//! cova's product rules, declared once: the limits of the interface specification (and of the
//! product decisions where it says "not shown"), the job states and kinds, the hold rule, and
//! time (calendar months, RFC 3339, a clock tests can move).
//!
//! Pure: no I/O and no backend. Every layer imports these rules instead of restating them.
//! (The `diesel` feature lets the database layer store the vocabulary as text.)

pub mod ai;
pub mod export;
pub mod job;
pub mod library;
pub mod limits;
pub mod money;
pub mod pace;
pub mod spikes;
#[cfg(feature = "diesel")]
mod sql;
pub mod text;
pub mod time;

pub use job::{BatchItemState, Dedup, JobKind, JobStatus, Truncation, list_ended};
pub use library::AnalysisStatus;
pub use time::{Clock, ManualClock};
