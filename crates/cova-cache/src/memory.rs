//! In-process store for the embedded single-process mode.

use crate::Window;
use crate::gcra::{self, Decision, Rate};
use crate::window::{self, Log, Op};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone)]
enum Value {
    Bytes(Vec<u8>),
    Tat(i64),
    Log(Log),
    /// A stamped value: the last stamp handed out, and the value.
    Stamped {
        next: u64,
        held: Option<Vec<u8>>,
    },
    /// A value replaced only by a writer that read its current version.
    Versioned {
        version: u64,
        bytes: Vec<u8>,
    },
}

struct Entry {
    value: Value,
    expires: Instant,
}

#[derive(Default)]
struct State {
    entries: HashMap<String, Entry>,
    writes: u64,
}

#[derive(Clone, Default)]
pub(crate) struct MemoryCache {
    state: Arc<Mutex<State>>,
}

/// Expired entries are swept every this many writes, keeping memory bounded without a timer.
const SWEEP_EVERY: u64 = 1024;

impl MemoryCache {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave an entry half-written; keep serving.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn live(state: &State, key: &str, now: Instant) -> Option<Value> {
        state.entries.get(key).filter(|e| e.expires > now).map(|e| e.value.clone())
    }

    fn insert(state: &mut State, key: &str, value: Value, ttl: Duration, now: Instant) {
        state.writes += 1;
        if state.writes.is_multiple_of(SWEEP_EVERY) {
            state.entries.retain(|_, e| e.expires > now);
        }
        state.entries.insert(key.to_owned(), Entry { value, expires: now + ttl });
    }

    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        match Self::live(&self.lock(), key, Instant::now()) {
            Some(Value::Bytes(b)) => Some(b),
            _ => None,
        }
    }

    pub fn set(&self, key: &str, value: &[u8], ttl: Duration) {
        Self::insert(&mut self.lock(), key, Value::Bytes(value.to_vec()), ttl, Instant::now());
    }

    pub fn set_nx(&self, key: &str, value: &[u8], ttl: Duration) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        if Self::live(&state, key, now).is_some() {
            return false;
        }
        Self::insert(&mut state, key, Value::Bytes(value.to_vec()), ttl, now);
        true
    }

    pub fn delete(&self, key: &str) {
        self.lock().entries.remove(key);
    }

    /// The entry's expiry when it is live, else `now + ttl` (a new entry).
    fn expiry(state: &State, key: &str, now: Instant, ttl: Duration) -> Instant {
        state.entries.get(key).filter(|e| e.expires > now).map_or(now + ttl, |e| e.expires)
    }

    pub fn stamp(&self, key: &str, ttl: Duration) -> (u64, bool) {
        let now = Instant::now();
        let mut state = self.lock();
        let expires = Self::expiry(&state, key, now, ttl);
        let (next, held) = match Self::live(&state, key, now) {
            Some(Value::Stamped { next, held }) => (next + 1, held),
            _ => (1, None),
        };
        let is_held = held.is_some();
        Self::insert(&mut state, key, Value::Stamped { next, held }, expires - now, now);
        (next, is_held)
    }

    pub fn current_stamp(&self, key: &str) -> u64 {
        match Self::live(&self.lock(), key, Instant::now()) {
            Some(Value::Stamped { next, .. }) => next,
            _ => 0,
        }
    }

    pub fn put_stamped(&self, key: &str, stamp: u64, value: &[u8], ttl: Duration) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        if let Some(Value::Stamped { next, .. }) = Self::live(&state, key, now)
            && next > stamp
        {
            return false;
        }
        Self::insert(&mut state, key, Value::Stamped { next: stamp, held: Some(value.to_vec()) }, ttl, now);
        true
    }

    pub fn get_stamped(&self, key: &str) -> Option<Vec<u8>> {
        let state = self.lock();
        match state.entries.get(key) {
            Some(Entry { value: Value::Stamped { held: Some(v), .. }, expires }) if *expires > Instant::now() => {
                Some(v.clone())
            }
            _ => None,
        }
    }

    pub fn window(&self, key: &str, limit: Window, op: Op<'_>) -> Decision {
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let now = Instant::now();
        let mut state = self.lock();
        let mut log = match state.entries.remove(key) {
            Some(Entry { value: Value::Log(log), expires }) if expires > now => log,
            _ => Log::new(),
        };
        let decision = window::step(&mut log, now_ms, limit, op);
        if !log.is_empty() {
            Self::insert(&mut state, key, Value::Log(log), limit.period, now);
        }
        decision
    }

    /// The value of `key` with its version (0 and nothing when absent) and the time now.
    pub fn load_versioned(&self, key: &str) -> crate::Versioned {
        let now_us = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64);
        match Self::live(&self.lock(), key, Instant::now()) {
            Some(Value::Versioned { version, bytes }) => crate::Versioned { version, bytes: Some(bytes), now_us },
            _ => crate::Versioned { version: 0, bytes: None, now_us },
        }
    }

    /// Stores `bytes` as the next version of `key` if its version is still `expected`.
    pub fn store_versioned(&self, key: &str, expected: u64, bytes: &[u8], ttl: Duration) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        let current = match Self::live(&state, key, now) {
            Some(Value::Versioned { version, .. }) => version,
            _ => 0,
        };
        if current != expected {
            return false;
        }
        Self::insert(&mut state, key, Value::Versioned { version: current + 1, bytes: bytes.to_vec() }, ttl, now);
        true
    }

    pub fn gcra(&self, key: &str, rate: Rate, cost: i64) -> Decision {
        let now_us = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64);
        let now = Instant::now();
        let mut state = self.lock();
        let stored = match Self::live(&state, key, now) {
            Some(Value::Tat(t)) => Some(t),
            _ => None,
        };
        let (decision, store) = gcra::step(stored, now_us, rate, cost);
        if let Some(tat) = store {
            let ttl = Duration::from_micros((tat - now_us).max(1) as u64);
            Self::insert(&mut state, key, Value::Tat(tat), ttl, now);
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_read_before_the_last_stamp_is_never_stored() {
        let c = MemoryCache::default();
        let ttl = Duration::from_secs(5);
        // A reader that found nothing takes the current stamp (0) before reading the source.
        let reader = c.current_stamp("k");
        let (w1, held) = c.stamp("k", ttl);
        assert_eq!((reader, w1, held), (0, 1, false));
        let (w2, _) = c.stamp("k", ttl);
        assert!(!c.put_stamped("k", reader, b"zero", ttl), "read before both changes");
        assert!(!c.put_stamped("k", w1, b"one", ttl), "read before the second change");
        assert!(c.put_stamped("k", w2, b"two", ttl));
        assert_eq!(c.get_stamped("k").as_deref(), Some(&b"two"[..]));
        // Equal stamps: both were read after the same last change; either may stand.
        assert!(c.put_stamped("k", w2, b"two again", ttl));
        assert_eq!(c.stamp("k", ttl), (3, true));
    }

    #[test]
    fn stamps_restart_with_their_entry_after_expiry() {
        let c = MemoryCache::default();
        assert!(c.put_stamped("k", 7, b"v", Duration::from_millis(20)));
        assert_eq!(c.stamp("k", Duration::from_secs(1)), (8, true));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(c.get_stamped("k"), None, "expired with its entry");
        assert_eq!(c.current_stamp("k"), 0);
    }

    #[test]
    fn ttl_and_set_nx() {
        let c = MemoryCache::default();
        assert!(c.set_nx("k", b"1", Duration::from_millis(30)));
        assert!(!c.set_nx("k", b"2", Duration::from_millis(30)));
        assert_eq!(c.get("k").as_deref(), Some(&b"1"[..]));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(c.get("k"), None);
        assert!(c.set_nx("k", b"3", Duration::from_secs(1)));
    }
}
