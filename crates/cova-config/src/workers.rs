//! The roles that collect: scraper processes (`scraper.*`) and the scheduler that starts
//! watches and creator listings (`scheduler.*`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScraperConfig {
    /// Jobs one scraper process collects at once.
    pub concurrency: usize,
    /// Deliveries of one job before a transient failure (platform or backend down) fails it.
    pub max_attempts: u32,
    /// First retry delay; doubles per attempt.
    pub retry_base_ms: u64,
    /// How long a job's claim holds without renewal; a live worker renews it every third of
    /// it, so this is how soon a killed worker's job is taken over.
    pub lease_ms: u64,
}

impl Default for ScraperConfig {
    fn default() -> Self {
        Self { concurrency: 4, max_attempts: 5, retry_base_ms: 2_000, lease_ms: 15_000 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// How often due watches and expired breakdowns are looked for.
    pub tick_ms: u64,
    /// Watches (and breakdowns) handled per claim.
    pub batch: i64,
    /// Creators listed at once by one scheduler process (each a few platform requests).
    pub creator_concurrency: usize,
    /// Due watches started at once by one scheduler process (each a short transaction, so
    /// at most `database.pool_size`).
    pub start_concurrency: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self { tick_ms: 1_000, batch: 500, creator_concurrency: 4, start_concurrency: 8 }
    }
}
