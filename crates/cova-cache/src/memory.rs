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
