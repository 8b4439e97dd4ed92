//! The queues of the platforms' requests kept in the cache: every process on the same cache (a
//! fleet on Redis, or the one process on the in-memory cache) shares one queue per host and
//! route, so one pace and one order of turns (see `cova_platforms`' turns).

use cova_platforms::StoredQueue;
use futures::future::BoxFuture;
use std::time::Duration;

/// How long an unused queue is kept (each write keeps it this long again).
const KEPT: Duration = Duration::from_secs(3600);

/// The queue store of every cova process (public for the benchmarks, which measure it).
pub struct CacheQueues(pub cova_cache::Cache);

fn key(route: &str) -> String {
    format!("pace:{route}")
}

impl cova_platforms::QueueStore for CacheQueues {
    fn load<'a>(&'a self, route: &'a str) -> BoxFuture<'a, Result<StoredQueue, String>> {
        Box::pin(async move {
            let v = self.0.load_versioned(&key(route)).await.map_err(|e| e.to_string())?;
            Ok(StoredQueue { version: v.version, bytes: v.bytes, now_us: v.now_us })
        })
    }

    fn store<'a>(&'a self, route: &'a str, expected: u64, bytes: &'a [u8]) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(
            async move { self.0.store_versioned(&key(route), expected, bytes, KEPT).await.map_err(|e| e.to_string()) },
        )
    }
}
