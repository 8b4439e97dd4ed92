//! The platforms' request pace kept in the cache: every process on the same cache (a fleet
//! on Redis, or the one process on the in-memory cache) shares one pace per host and route.

use futures::future::BoxFuture;
use std::time::Duration;

pub(crate) struct CachePace(pub cova_cache::Cache);

impl cova_platforms::PaceStore for CachePace {
    fn next_slot<'a>(&'a self, key: &'a str, interval: Duration) -> BoxFuture<'a, Result<Duration, String>> {
        Box::pin(async move { self.0.next_slot(key, interval).await.map_err(|e| e.to_string()) })
    }
}
