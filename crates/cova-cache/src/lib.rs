//! Shared fast state behind one interface: TTL key/value, set-if-absent, sliding-log windows
//! (the specification's "N per window" limits) and GCRA (smoothing limits such as the general
//! requests per minute), in process (`memory://`) or in Redis (`redis://`, shared by every
//! replica, atomic by Lua scripts on the server's clock).

mod gcra;
mod memory;
mod redis_cache;
mod window;

pub use cova_domain::limits::Window;
pub use gcra::{Decision, Rate};
pub use window::Op;

use cova_config::{CacheBackend, CacheConfig};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache did not answer (down, or slower than `cache.timeout_ms`): callers answer 503.
    #[error("cache unavailable: {0}")]
    Unavailable(String),
}

pub type Result<T> = std::result::Result<T, CacheError>;

/// One read of a [`Cache::batch`].
#[derive(Debug, Clone, Copy)]
pub enum Read<'a> {
    /// Spends `cost` units of `rate` on `key` (0 only reads), as [`Cache::rate_limit`].
    Rate { key: &'a str, rate: Rate, cost: u32 },
    /// Applies `op` to the window of `key`, as [`Cache::window`].
    Window { key: &'a str, window: Window, op: Op<'a> },
    /// The stamped value of `key`, as [`Cache::get_stamped`].
    Stamped { key: &'a str },
    /// The plain value of `key`, as [`Cache::get`].
    Plain { key: &'a str },
}

/// A value that is replaced only by a writer that read its current version
/// ([`Cache::load_versioned`], [`Cache::store_versioned`]), with the cache's time when read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// 0 when absent.
    pub version: u64,
    pub bytes: Option<Vec<u8>>,
    /// The cache's clock (Redis's `TIME`; this process' in memory), in µs since the epoch: every
    /// process sharing the value reads one clock.
    pub now_us: i64,
}

/// The answer to one [`Read`], in the same place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Decision(Decision),
    Value(Option<Vec<u8>>),
}

#[derive(Clone)]
enum Backend {
    Memory(memory::MemoryCache),
    Redis(Box<redis_cache::RedisCache>),
}

/// A handle on the configured cache; cheap to clone. Every key is namespaced by `cache.prefix`.
#[derive(Clone)]
pub struct Cache {
    backend: Backend,
    prefix: String,
    timeout: Duration,
    breaker: std::sync::Arc<Breaker>,
}

/// How long calls fail at once after a cache failure, instead of each waiting for the timeout
/// of a cache that is away; the first call after it tries the cache again.
pub const BREAKER_OPEN: Duration = Duration::from_secs(1);

/// Shared by every clone of one cache handle: until when calls fail without trying.
#[derive(Default)]
struct Breaker {
    /// Milliseconds since [`EPOCH`]; 0 = closed.
    open_until: std::sync::atomic::AtomicU64,
}

static EPOCH: std::sync::LazyLock<std::time::Instant> = std::sync::LazyLock::new(std::time::Instant::now);

fn since_epoch() -> u64 {
    EPOCH.elapsed().as_millis() as u64
}

impl Breaker {
    fn is_open(&self) -> bool {
        since_epoch() < self.open_until.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn open(&self) {
        let until = since_epoch() + BREAKER_OPEN.as_millis() as u64;
        self.open_until.store(until, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Cache {
    /// Connects lazily: a Redis that is down makes calls fail with `Unavailable` until it returns.
    pub fn connect(cfg: &CacheConfig) -> Result<Self> {
        let timeout = Duration::from_millis(cfg.timeout_ms.max(1));
        let backend = match CacheBackend::parse(&cfg.url).map_err(|e| CacheError::Unavailable(e.to_string()))? {
            CacheBackend::Memory => Backend::Memory(memory::MemoryCache::default()),
            CacheBackend::Redis(url) => Backend::Redis(Box::new(redis_cache::RedisCache::new(&url, timeout)?)),
        };
        Ok(Self { backend, prefix: cfg.prefix.clone(), timeout, breaker: Default::default() })
    }

    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Memory(_) => "memory",
            Backend::Redis(_) => "redis",
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}:{key}", self.prefix)
    }

    /// A Redis call, bounded by `cache.timeout_ms`; while the cache failed moments ago
    /// ([`BREAKER_OPEN`]) it fails at once, so that a cache that is away costs requests no wait.
    async fn bounded<T>(&self, fut: impl Future<Output = Result<T>>) -> Result<T> {
        if self.breaker.is_open() {
            return Err(CacheError::Unavailable("the cache failed moments ago; not tried".into()));
        }
        let result = tokio::time::timeout(self.timeout, fut)
            .await
            .unwrap_or_else(|_| Err(CacheError::Unavailable("cache timed out".into())));
        if result.is_err() {
            self.breaker.open();
        }
        result
    }

    /// Whether the cache is in memory (it cannot be away).
    pub fn is_memory(&self) -> bool {
        matches!(self.backend, Backend::Memory(_))
    }

    /// A cache of this process alone, in memory (the request path's fallback while a shared
    /// cache is away).
    pub fn in_memory(prefix: &str) -> Self {
        Self {
            backend: Backend::Memory(memory::MemoryCache::default()),
            prefix: prefix.to_owned(),
            timeout: Duration::from_secs(1),
            breaker: Default::default(),
        }
    }

    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => Ok(m.get(&key)),
            Backend::Redis(r) => self.bounded(r.get(&key)).await,
        }
    }

    pub async fn set(&self, key: &str, value: &[u8], ttl: Duration) -> Result<()> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => {
                m.set(&key, value, ttl);
                Ok(())
            }
            Backend::Redis(r) => self.bounded(r.set(&key, value, ttl)).await,
        }
    }

    /// Stores the value only if the key is absent; true when it was stored.
    pub async fn set_nx(&self, key: &str, value: &[u8], ttl: Duration) -> Result<bool> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => Ok(m.set_nx(&key, value, ttl)),
            Backend::Redis(r) => self.bounded(r.set_nx(&key, value, ttl)).await,
        }
    }

    pub async fn delete(&self, key: &str) -> Result<()> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => {
                m.delete(&key);
                Ok(())
            }
            Backend::Redis(r) => self.bounded(r.delete(&key)).await,
        }
    }

    /// Spends `cost` units of the limit `rate` on `key` if allowed (GCRA; atomic in Redis).
    /// `cost` 0 only reads the state; see [`Cache::refund`] to give units back.
    pub async fn rate_limit(&self, key: &str, rate: Rate, cost: u32) -> Result<Decision> {
        self.gcra(key, rate, i64::from(cost)).await
    }

    /// Gives back `cost` units spent earlier (e.g. a metadata lookup that failed).
    pub async fn refund(&self, key: &str, rate: Rate, cost: u32) -> Result<Decision> {
        self.gcra(key, rate, -i64::from(cost)).await
    }

    async fn gcra(&self, key: &str, rate: Rate, cost: i64) -> Result<Decision> {
        let key = self.key(&format!("rl:{key}"));
        match &self.backend {
            Backend::Memory(m) => Ok(m.gcra(&key, rate, cost)),
            Backend::Redis(r) => self.bounded(r.gcra(&key, rate, cost)).await,
        }
    }

    /// The value of `key` with its version, to be replaced by [`Cache::store_versioned`].
    pub async fn load_versioned(&self, key: &str) -> Result<Versioned> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => Ok(m.load_versioned(&key)),
            Backend::Redis(r) => self.bounded(r.load_versioned(&key)).await,
        }
    }

    /// Stores `bytes` as the next version of `key` only if its version is still `expected`
    /// (0: absent); false when another writer came first (read again and retry).
    pub async fn store_versioned(&self, key: &str, expected: u64, bytes: &[u8], ttl: Duration) -> Result<bool> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => Ok(m.store_versioned(&key, expected, bytes, ttl)),
            Backend::Redis(r) => self.bounded(r.store_versioned(&key, expected, bytes, ttl)).await,
        }
    }

    /// Makes the rate limit of `key` count as spent until `ahead` from now, at least (what a
    /// process counted alone while the cache was away, handed back to it). Never lowers it.
    pub async fn raise_rate(&self, key: &str, ahead: Duration) -> Result<()> {
        let key = self.key(&format!("rl:{key}"));
        match &self.backend {
            // An in-process cache is never away: nothing was counted elsewhere.
            Backend::Memory(_) => Ok(()),
            Backend::Redis(r) => self.bounded(r.raise(&key, ahead)).await,
        }
    }

    /// Applies `op` to the sliding-log window `window` of `key`: a hit is admitted only while
    /// fewer than `window.limit` were admitted in the last `window.period`.
    pub async fn window(&self, key: &str, window: Window, op: Op<'_>) -> Result<Decision> {
        let key = self.key(&format!("wl:{key}"));
        match &self.backend {
            Backend::Memory(m) => Ok(m.window(&key, window, op)),
            Backend::Redis(r) => self.bounded(r.window(&key, window, op)).await,
        }
    }

    /// Several reads in one round trip (one pipeline on Redis), answered in order. Keys are
    /// the caller's, as for the single calls.
    pub async fn batch(&self, reads: &[Read<'_>]) -> Result<Vec<Reply>> {
        let keys: Vec<String> = reads
            .iter()
            .map(|r| match r {
                Read::Rate { key, .. } => self.key(&format!("rl:{key}")),
                Read::Window { key, .. } => self.key(&format!("wl:{key}")),
                Read::Stamped { key } | Read::Plain { key } => self.key(key),
            })
            .collect();
        let reads: Vec<Read<'_>> = reads
            .iter()
            .zip(&keys)
            .map(|(r, key)| match *r {
                Read::Rate { rate, cost, .. } => Read::Rate { key, rate, cost },
                Read::Window { window, op, .. } => Read::Window { key, window, op },
                Read::Stamped { .. } => Read::Stamped { key },
                Read::Plain { .. } => Read::Plain { key },
            })
            .collect();
        match &self.backend {
            Backend::Memory(m) => Ok(reads
                .iter()
                .map(|r| match *r {
                    Read::Rate { key, rate, cost } => Reply::Decision(m.gcra(key, rate, i64::from(cost))),
                    Read::Window { key, window, op } => Reply::Decision(m.window(key, window, op)),
                    Read::Stamped { key } => Reply::Value(m.get_stamped(key)),
                    Read::Plain { key } => Reply::Value(m.get(key)),
                })
                .collect()),
            Backend::Redis(r) => self.bounded(r.batch(&reads)).await,
        }
    }

    // Stamped values: a copy of state that lives elsewhere (a database row), kept current by
    // the writers of that state. A writer, once its change is committed, takes a stamp and then
    // reads the state; a reader that finds no value takes the current stamp and then reads it.
    // Either stores what it read under its stamp, and a value is stored only while no later
    // stamp was handed out: whatever order the puts arrive in, a stored value was read after
    // the last change that took a stamp. A writer whose stamp finds no value held may skip the
    // read: the next reader stores one.

    /// Hands out the next stamp of `key` (a writer, after its change committed), and whether a
    /// value is held. A new entry expires after `ttl`; an existing one keeps its expiry.
    pub async fn stamp(&self, key: &str, ttl: Duration) -> Result<(u64, bool)> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => Ok(m.stamp(&key, ttl)),
            Backend::Redis(r) => self.bounded(r.stamp(&key, ttl)).await,
        }
    }

    /// The last stamp handed out for `key` (0 for none): what a reader that found no value
    /// stores what it reads under.
    pub async fn current_stamp(&self, key: &str) -> Result<u64> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => Ok(m.current_stamp(&key)),
            Backend::Redis(r) => self.bounded(r.current_stamp(&key)).await,
        }
    }

    /// Stores `value` read under `stamp` for `ttl`, unless a later stamp was handed out; true
    /// when stored.
    pub async fn put_stamped(&self, key: &str, stamp: u64, value: &[u8], ttl: Duration) -> Result<bool> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => Ok(m.put_stamped(&key, stamp, value, ttl)),
            Backend::Redis(r) => self.bounded(r.put_stamped(&key, stamp, value, ttl)).await,
        }
    }

    pub async fn get_stamped(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let key = self.key(key);
        match &self.backend {
            Backend::Memory(m) => Ok(m.get_stamped(&key)),
            Backend::Redis(r) => {
                self.bounded(r.batch(&[Read::Stamped { key: &key }])).await.map(|mut replies| match replies.pop() {
                    Some(Reply::Value(v)) => v,
                    _ => None,
                })
            }
        }
    }

    pub async fn ping(&self) -> Result<()> {
        match &self.backend {
            Backend::Memory(_) => Ok(()),
            Backend::Redis(r) => self.bounded(r.ping()).await,
        }
    }
}
