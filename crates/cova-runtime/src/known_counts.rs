//! What cova knows of a post's comment count: every read of a post (a metadata lookup, a list
//! preview's count, a collection) leaves it in the cache for [`KNOWN_COUNT`], so that a list
//! preview answers at once with the counts already known and looks up only the others.

use cova_cache::Cache;
use cova_domain::limits::KNOWN_COUNT;
use serde::{Deserialize, Serialize};

/// A post's comment count as a platform reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    /// `None` when the platform reports no count.
    pub comments: Option<i64>,
    /// The post's author turned its comments off (`None`: the platform's page does not say).
    #[serde(default)]
    pub comments_off: Option<bool>,
    /// When it was read (ms since the epoch).
    pub read_at: i64,
}

pub fn key(r#ref: &str) -> String {
    format!("count:{ref}")
}

/// Remembers what a read of the post said; a cache that does not answer only costs a later
/// lookup.
pub async fn remember(cache: &Cache, r#ref: &str, count: Count) {
    let Ok(bytes) = serde_json::to_vec(&count) else { return };
    if let Err(e) = cache.set(&key(r#ref), &bytes, KNOWN_COUNT).await {
        tracing::debug!(error = %e, "remembering a post's comment count failed");
    }
}

/// The count read in the last [`KNOWN_COUNT`], if any.
pub async fn known(cache: &Cache, r#ref: &str) -> Result<Option<Count>, cova_cache::CacheError> {
    Ok(cache.get(&key(r#ref)).await?.and_then(|b| serde_json::from_slice(&b).ok()))
}
