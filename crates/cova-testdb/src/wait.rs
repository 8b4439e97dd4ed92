//! How tests wait for work that happens in the background: a bounded poll for what they
//! name, never a sleep in its place, so that a slow machine only makes a test slower.

use std::time::{Duration, Instant};

/// How long [`until`] and [`eventually`] wait for what they wait for.
pub const WAIT: Duration = Duration::from_secs(30);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(50);

/// Waits (real time, at most [`WAIT`]) until `found` has something, and answers it.
pub async fn until<T>(what: &str, found: impl AsyncFnMut() -> Option<T>) -> T {
    until_within(what, WAIT, found).await
}

/// Waits (real time, at most `limit`: for work that takes longer by design, such as a lease
/// running out) until `found` has something, and answers it.
pub async fn until_within<T>(what: &str, limit: Duration, mut found: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = found().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Waits (real time, at most [`WAIT`]) until `done`.
pub async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    until_within(what, WAIT, async || done().await.then_some(())).await
}
