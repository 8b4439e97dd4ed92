//! Redis store: one connection manager (reconnecting by itself), GCRA as one Lua script so
//! that every replica shares the same limit atomically and by the server's clock.

use crate::Window;
use crate::gcra::{Decision, Rate};
use crate::window::Op;
use crate::{CacheError, Read, Reply, Result};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};
use std::cell::RefCell;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Mirrors `gcra::step`. Returns {allowed, remaining, retry_after_us, reset_after_us}.
const GCRA_LUA: &str = r#"
local t = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local function remaining(x)
  local r = math.floor((tau - (x - now)) / t)
  if r < 0 then r = 0 end
  if r > limit then r = limit end
  return r
end
if cost <= 0 then
  local new_tat = tat + cost * t
  if new_tat < now then new_tat = now end
  if cost < 0 then
    if new_tat > now then
      redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil((new_tat - now) / 1000))
    else
      redis.call('DEL', KEYS[1])
    end
  end
  return {1, remaining(new_tat), 0, new_tat - now}
end
local new_tat = tat + cost * t
local allow_at = new_tat - tau
if now < allow_at then
  return {0, remaining(tat), allow_at - now, tat - now}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil((new_tat - now) / 1000))
return {1, remaining(new_tat), 0, new_tat - now}
"#;

/// Raises a GCRA key's TAT to at least now + ARGV[1] µs (what a gateway counted alone while
/// the cache was away), never lowers it.
const RAISE_LUA: &str = r#"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local want = now + tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if want > tat then
  redis.call('SET', KEYS[1], want, 'PX', math.ceil((want - now) / 1000))
end
return 1
"#;

/// Mirrors `window::step` over a sorted set (score = time in ms, member = request id).
/// ARGV: period_ms, limit, op (`hit`, `peek`, `undo`), member.
/// Returns {allowed, count, oldest_leaves_in_ms, newest_leaves_in_ms}.
const WINDOW_LUA: &str = r#"
local period = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
local allowed = 1
if ARGV[3] == 'undo' then
  redis.call('ZREM', KEYS[1], ARGV[4])
end
local count = redis.call('ZCARD', KEYS[1])
if ARGV[3] == 'hit' then
  if count < limit then
    redis.call('ZADD', KEYS[1], now, ARGV[4])
    redis.call('PEXPIRE', KEYS[1], period)
    count = count + 1
  else
    allowed = 0
  end
end
local function leaves(entry)
  if #entry == 0 then return 0 end
  local t = tonumber(entry[2]) + period - now
  if t < 0 then return 0 end
  return t
end
local oldest = leaves(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES'))
local newest = leaves(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES'))
return {allowed, count, oldest, newest}
"#;

/// Stamped values (see `Cache::stamp`) are hashes: `n` the last stamp handed out, `v` the
/// value. ARGV: ttl_ms. Returns {the new stamp, 1 when a value is held}; a new hash expires
/// after ttl_ms, an existing one keeps its expiry (a writer that dies here prolongs nothing).
const STAMP_LUA: &str = r#"
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('HEXISTS', KEYS[1], 'v')}
"#;

/// ARGV: stamp, value, ttl_ms. Stores the value only when no later stamp was handed out.
const PUT_STAMPED_LUA: &str = r#"
local stamp = tonumber(ARGV[1])
if tonumber(redis.call('HGET', KEYS[1], 'n') or '0') > stamp then return 0 end
redis.call('HSET', KEYS[1], 'n', stamp, 'v', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;

/// A versioned value is a hash: `n` its version, `v` its bytes. Returns {version, value or
/// false, the server's time in µs}: every process that shares a value reads one clock.
const LOAD_VERSIONED_LUA: &str = r#"
local got = redis.call('HMGET', KEYS[1], 'n', 'v')
local time = redis.call('TIME')
return {tonumber(got[1] or '0'), got[2] or false, tonumber(time[1]) * 1000000 + tonumber(time[2])}
"#;

/// ARGV: expected version, value, ttl_ms. Stores the value as the next version only when the
/// stored version is still the expected one (0: absent); 1 when stored.
const STORE_VERSIONED_LUA: &str = r#"
local version = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
if version ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'n', version + 1, 'v', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;

#[derive(Clone)]
pub(crate) struct RedisCache {
    client: redis::Client,
    timeout: Duration,
    /// Tells this cache's connections apart in each thread's table; they are dropped with it.
    alive: Arc<()>,
    script: Arc<Script>,
    raise_script: Arc<Script>,
    window_script: Arc<Script>,
    stamp_script: Arc<Script>,
    put_stamped_script: Arc<Script>,
    load_versioned_script: Arc<Script>,
    store_versioned_script: Arc<Script>,
}

thread_local! {
    /// Each thread's connection to each cache: a request then never waits for a connection
    /// driven by another thread (two thread wake-ups per round trip). Keyed by the cache's
    /// `alive` token, whose weak half says when the cache is gone.
    static CONNECTIONS: RefCell<Vec<(Weak<()>, ConnectionManager)>> = const { RefCell::new(Vec::new()) };
}

fn unavailable(e: impl std::fmt::Display) -> CacheError {
    CacheError::Unavailable(e.to_string())
}

fn ttl_ms(ttl: Duration) -> u64 {
    ttl.as_millis().max(1) as u64
}

fn gcra_decision(rate: Rate, (allowed, remaining, retry_us, reset_us): (i64, i64, i64, i64)) -> Decision {
    Decision {
        allowed: allowed == 1,
        limit: rate.limit,
        remaining: remaining.clamp(0, i64::from(rate.limit)) as u32,
        retry_after: Duration::from_micros(retry_us.max(0) as u64),
        reset_after: Duration::from_micros(reset_us.max(0) as u64),
    }
}

fn window_args(op: Op<'_>) -> (&'static str, &str) {
    match op {
        Op::Hit(m) => ("hit", m),
        Op::Peek => ("peek", ""),
        Op::Undo(m) => ("undo", m),
    }
}

fn window_decision(window: Window, (allowed, count, oldest, newest): (i64, i64, i64, i64)) -> Decision {
    let count = u32::try_from(count.max(0)).unwrap_or(u32::MAX);
    crate::window::decision(allowed == 1, window.limit, count, oldest, newest)
}

impl RedisCache {
    pub fn new(url: &str, timeout: Duration) -> Result<Self> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        Ok(Self {
            client,
            timeout,
            alive: Arc::new(()),
            script: Arc::new(Script::new(GCRA_LUA)),
            raise_script: Arc::new(Script::new(RAISE_LUA)),
            window_script: Arc::new(Script::new(WINDOW_LUA)),
            stamp_script: Arc::new(Script::new(STAMP_LUA)),
            put_stamped_script: Arc::new(Script::new(PUT_STAMPED_LUA)),
            load_versioned_script: Arc::new(Script::new(LOAD_VERSIONED_LUA)),
            store_versioned_script: Arc::new(Script::new(STORE_VERSIONED_LUA)),
        })
    }

    /// This thread's connection (reconnecting by itself), made on first use, so a Redis that is
    /// down at start only delays.
    async fn conn(&self) -> Result<ConnectionManager> {
        let mine = |(alive, _): &(Weak<()>, ConnectionManager)| std::ptr::eq(alive.as_ptr(), Arc::as_ptr(&self.alive));
        if let Some(conn) = CONNECTIONS.with(|c| c.borrow().iter().find(|e| mine(e)).map(|(_, conn)| conn.clone())) {
            return Ok(conn);
        }
        let cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(2));
        let manager = ConnectionManager::new_with_config(self.client.clone(), cfg).await.map_err(unavailable)?;
        CONNECTIONS.with(|c| {
            let mut conns = c.borrow_mut();
            conns.retain(|(alive, _)| alive.strong_count() > 0);
            if !conns.iter().any(&mine) {
                conns.push((Arc::downgrade(&self.alive), manager.clone()));
            }
        });
        Ok(manager)
    }

    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.conn().await?.get(key).await.map_err(unavailable)
    }

    pub async fn set(&self, key: &str, value: &[u8], ttl: Duration) -> Result<()> {
        let ms = ttl.as_millis().max(1) as u64;
        self.conn().await?.pset_ex::<_, _, ()>(key, value, ms).await.map_err(unavailable)
    }

    pub async fn set_nx(&self, key: &str, value: &[u8], ttl: Duration) -> Result<bool> {
        let ms = ttl.as_millis().max(1) as u64;
        let reply: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(ms)
            .query_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        Ok(reply.is_some())
    }

    pub async fn delete(&self, key: &str) -> Result<()> {
        self.conn().await?.del::<_, ()>(key).await.map_err(unavailable)
    }

    pub async fn gcra(&self, key: &str, rate: Rate, cost: i64) -> Result<Decision> {
        let mut conn = self.conn().await?;
        let reply: (i64, i64, i64, i64) = self
            .script
            .key(key)
            .arg(rate.interval_us())
            .arg(rate.tolerance_us())
            .arg(cost)
            .arg(rate.limit)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(gcra_decision(rate, reply))
    }

    pub async fn raise(&self, key: &str, ahead: Duration) -> Result<()> {
        let mut conn = self.conn().await?;
        let _: i64 = self
            .raise_script
            .key(key)
            .arg(ahead.as_micros() as u64)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    pub async fn window(&self, key: &str, window: Window, op: Op<'_>) -> Result<Decision> {
        let (name, member) = window_args(op);
        let mut conn = self.conn().await?;
        let reply: (i64, i64, i64, i64) = self
            .window_script
            .key(key)
            .arg(window.period.as_millis() as u64)
            .arg(window.limit)
            .arg(name)
            .arg(member)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(window_decision(window, reply))
    }

    pub async fn stamp(&self, key: &str, ttl: Duration) -> Result<(u64, bool)> {
        let mut conn = self.conn().await?;
        let (n, held): (i64, i64) =
            self.stamp_script.key(key).arg(ttl_ms(ttl)).invoke_async(&mut conn).await.map_err(unavailable)?;
        Ok((n.max(0) as u64, held == 1))
    }

    pub async fn current_stamp(&self, key: &str) -> Result<u64> {
        let n: Option<i64> = self.conn().await?.hget(key, "n").await.map_err(unavailable)?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    pub async fn put_stamped(&self, key: &str, stamp: u64, value: &[u8], ttl: Duration) -> Result<bool> {
        let mut conn = self.conn().await?;
        let stored: i64 = self
            .put_stamped_script
            .key(key)
            .arg(stamp)
            .arg(value)
            .arg(ttl_ms(ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(stored == 1)
    }

    pub async fn load_versioned(&self, key: &str) -> Result<crate::Versioned> {
        let mut conn = self.conn().await?;
        let (version, bytes, now_us): (i64, Option<Vec<u8>>, i64) =
            self.load_versioned_script.key(key).invoke_async(&mut conn).await.map_err(unavailable)?;
        Ok(crate::Versioned { version: version.max(0) as u64, bytes, now_us })
    }

    pub async fn store_versioned(&self, key: &str, expected: u64, bytes: &[u8], ttl: Duration) -> Result<bool> {
        let mut conn = self.conn().await?;
        let stored: i64 = self
            .store_versioned_script
            .key(key)
            .arg(expected)
            .arg(bytes)
            .arg(ttl_ms(ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(stored == 1)
    }

    /// Every read in one pipeline: one round trip. The scripts are invoked by hash; a server
    /// that does not know them (restarted, flushed) gets them loaded and the batch again.
    pub async fn batch(&self, reads: &[Read<'_>]) -> Result<Vec<Reply>> {
        let mut conn = self.conn().await?;
        let mut pipe = redis::pipe();
        for read in reads {
            match *read {
                Read::Rate { key, rate, cost } => {
                    pipe.cmd("EVALSHA")
                        .arg(self.script.get_hash())
                        .arg(1)
                        .arg(key)
                        .arg(rate.interval_us())
                        .arg(rate.tolerance_us())
                        .arg(i64::from(cost))
                        .arg(rate.limit);
                }
                Read::Window { key, window, op } => {
                    let (name, member) = window_args(op);
                    pipe.cmd("EVALSHA")
                        .arg(self.window_script.get_hash())
                        .arg(1)
                        .arg(key)
                        .arg(window.period.as_millis() as u64)
                        .arg(window.limit)
                        .arg(name)
                        .arg(member);
                }
                Read::Stamped { key } => {
                    pipe.cmd("HGET").arg(key).arg("v");
                }
                Read::Plain { key } => {
                    pipe.cmd("GET").arg(key);
                }
            }
        }
        let values: Vec<redis::Value> = match pipe.query_async(&mut conn).await {
            Ok(values) => values,
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.script.load_async(&mut conn).await.map_err(unavailable)?;
                self.window_script.load_async(&mut conn).await.map_err(unavailable)?;
                pipe.query_async(&mut conn).await.map_err(unavailable)?
            }
            Err(e) => return Err(unavailable(e)),
        };
        if values.len() != reads.len() {
            return Err(unavailable(format!("{} replies to {} reads", values.len(), reads.len())));
        }
        reads
            .iter()
            .zip(values)
            .map(|(read, value)| {
                Ok(match *read {
                    Read::Rate { rate, .. } => {
                        Reply::Decision(gcra_decision(rate, redis::from_redis_value(value).map_err(unavailable)?))
                    }
                    Read::Window { window, .. } => {
                        Reply::Decision(window_decision(window, redis::from_redis_value(value).map_err(unavailable)?))
                    }
                    Read::Stamped { .. } | Read::Plain { .. } => {
                        Reply::Value(redis::from_redis_value(value).map_err(unavailable)?)
                    }
                })
            })
            .collect()
    }

    pub async fn ping(&self) -> Result<()> {
        let _: String = redis::cmd("PING").query_async(&mut self.conn().await?).await.map_err(unavailable)?;
        Ok(())
    }
}
