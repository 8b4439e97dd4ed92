//! Sliding-log windows: a limit stated as "N per window" admits no more than N in ANY window
//! of that length. Each admitted request is one entry (a time and a unique member); entries
//! older than the window are dropped before counting. Redis runs the same steps as one Lua
//! script over a sorted set (see `redis_cache.rs`).

use crate::Decision;
use cova_domain::limits::Window;
use std::collections::VecDeque;
use std::time::Duration;

/// What to do with the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// Admit one request under `member` if the window has room.
    Hit(&'a str),
    /// Only read the state.
    Peek,
    /// Give back the entry `member` (a request that turned out to be free).
    Undo(&'a str),
}

/// The in-memory log of one key: (time in ms, member), oldest first.
pub(crate) type Log = VecDeque<(i64, String)>;

/// Applies `op` to `log` at `now_ms` and says what the caller may do.
pub(crate) fn step(log: &mut Log, now_ms: i64, window: Window, op: Op<'_>) -> Decision {
    let period = window.period.as_millis() as i64;
    while log.front().is_some_and(|(t, _)| *t <= now_ms - period) {
        log.pop_front();
    }
    let mut allowed = true;
    match op {
        Op::Hit(member) => {
            if log.len() < window.limit as usize {
                log.push_back((now_ms, member.to_owned()));
            } else {
                allowed = false;
            }
        }
        Op::Undo(member) => log.retain(|(_, m)| m != member),
        Op::Peek => {}
    }
    let until = |t: Option<&(i64, String)>| t.map_or(0, |(t, _)| (t + period - now_ms).max(0));
    decision(allowed, window.limit, log.len() as u32, until(log.front()), until(log.back()))
}

/// The decision from the state after the step: `oldest_ms` is when the oldest entry leaves
/// (a slot frees), `newest_ms` when the last one does (the window is empty again).
pub(crate) fn decision(allowed: bool, limit: u32, count: u32, oldest_ms: i64, newest_ms: i64) -> Decision {
    let remaining = limit.saturating_sub(count);
    Decision {
        allowed,
        limit,
        remaining,
        retry_after: if allowed && remaining > 0 { Duration::ZERO } else { Duration::from_millis(oldest_ms as u64) },
        reset_after: Duration::from_millis(newest_ms as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    #[test]
    fn no_more_than_the_limit_in_any_window() {
        let w = Window::new(5, Duration::from_secs(60));
        let mut log = Log::new();
        for i in 0..5 {
            assert!(step(&mut log, i * 1_000, w, Op::Hit(&format!("r{i}"))).allowed);
        }
        // 15 s after the first five: a GCRA would admit more; a window must not.
        let d = step(&mut log, 15_000, w, Op::Hit("r5"));
        assert!(!d.allowed);
        assert_eq!((d.remaining, d.retry_after_secs()), (0, 45), "free again when the oldest leaves");
        // Once the first request is a window old, exactly one fits.
        assert!(step(&mut log, MIN, w, Op::Hit("r6")).allowed);
        assert!(!step(&mut log, MIN, w, Op::Hit("r7")).allowed);
    }

    #[test]
    fn undo_gives_back_and_peek_spends_nothing() {
        let w = Window::new(10, Duration::from_secs(7_200));
        let mut log = Log::new();
        assert_eq!(step(&mut log, 0, w, Op::Hit("a")).remaining, 9);
        assert_eq!(step(&mut log, 1, w, Op::Peek).remaining, 9);
        let d = step(&mut log, 2, w, Op::Undo("a"));
        assert_eq!((d.remaining, d.allowed), (10, true));
        assert!(log.is_empty());
    }
}
