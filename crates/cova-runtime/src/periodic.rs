//! The one loop of every periodic task (the scheduler's tick, the notifier's deliveries, the
//! outbox relay): a pass, then a wait of one period, cut short by a wake-up or by the stop,
//! longer (doubling) after a pass that failed; the pass in progress always finishes. Each pass
//! is counted in [`Progress`], so that a test can wait for "a pass has run since" instead of
//! sleeping.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How far the process' loops have got: passes of each periodic task (by its name) and
/// messages settled of each queue (`settled:<queue>`). Cheap to clone.
#[derive(Clone, Default)]
pub struct Progress(Arc<Mutex<HashMap<String, u64>>>);

impl Progress {
    pub fn note(&self, what: &str) {
        if let Ok(mut counts) = self.0.lock() {
            *counts.entry(what.to_owned()).or_default() += 1;
        }
    }

    pub fn count(&self, what: &str) -> u64 {
        self.0.lock().map(|counts| counts.get(what).copied().unwrap_or(0)).unwrap_or(0)
    }
}

/// What a periodic task does each time: one pass, returning once its effects are committed.
pub trait Pass: Send {
    fn pass(&mut self) -> impl Future<Output = Result<(), String>> + Send;
}

/// A periodic task's pacing.
pub struct Periodic {
    /// Its name in logs and in [`Progress`].
    pub name: &'static str,
    pub period: Duration,
    /// Lets writers start the next pass at once.
    pub wake: Option<Arc<Notify>>,
    /// The longest wait after failed passes.
    pub max_backoff: Duration,
}

impl Periodic {
    /// Runs `task`'s passes until `stop` is cancelled; gives the task back (to drain what it
    /// started).
    pub async fn run<P: Pass>(self, progress: Progress, stop: CancellationToken, mut task: P) -> P {
        let never = Arc::new(Notify::new());
        let wake = self.wake.unwrap_or(never);
        let mut wait = self.period;
        loop {
            match task.pass().await {
                Ok(()) => wait = self.period,
                Err(e) => {
                    tracing::warn!(task = self.name, error = %e, retry_ms = wait.as_millis() as u64, "{}: a pass failed; trying again", self.name);
                    wait = (wait * 2).min(self.max_backoff.max(self.period));
                }
            }
            progress.note(self.name);
            tokio::select! {
                _ = stop.cancelled() => return task,
                _ = wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}
