//! Generic cell rate algorithm: one stored number per key (the theoretical arrival time),
//! `limit` requests at once, then one every `period / limit`. Unlike a fixed window it never
//! lets twice the limit through at a window edge.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub limit: u32,
    pub period: Duration,
}

impl Rate {
    pub const fn new(limit: u32, period: Duration) -> Self {
        Self { limit, period }
    }

    pub const fn per_minute(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(60))
    }

    /// Emission interval in microseconds.
    pub(crate) fn interval_us(self) -> i64 {
        (self.period.as_micros() as i64 / i64::from(self.limit.max(1))).max(1)
    }

    pub(crate) fn tolerance_us(self) -> i64 {
        self.interval_us() * i64::from(self.limit.max(1))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    /// When denied: how long until `cost` units fit again.
    pub retry_after: Duration,
    /// How long until the full limit is available again.
    pub reset_after: Duration,
}

impl Decision {
    /// Whole seconds for `Retry-After`, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_micros().div_ceil(1_000_000).max(1) as u64
    }
}

/// The pure step shared by the in-memory store (and mirrored by the Redis script):
/// given the stored TAT (µs) and now (µs), returns the decision and the TAT to store.
pub(crate) fn step(stored_tat: Option<i64>, now: i64, rate: Rate, cost: i64) -> (Decision, Option<i64>) {
    let t = rate.interval_us();
    let tau = rate.tolerance_us();
    let tat = stored_tat.unwrap_or(now).max(now);
    let decide = |new_tat: i64, allowed: bool, retry: i64| Decision {
        allowed,
        limit: rate.limit,
        remaining: (((tau - (new_tat - now)) / t).clamp(0, i64::from(rate.limit))) as u32,
        retry_after: Duration::from_micros(retry.max(0) as u64),
        reset_after: Duration::from_micros((new_tat - now).max(0) as u64),
    };
    if cost <= 0 {
        // Peek (0) or refund (< 0): never denied.
        let new_tat = (tat + cost * t).max(now);
        let store = (cost < 0).then_some(new_tat);
        return (decide(new_tat, true, 0), store);
    }
    let new_tat = tat + cost * t;
    let allow_at = new_tat - tau;
    if now < allow_at { (decide(tat, false, allow_at - now), None) } else { (decide(new_tat, true, 0), Some(new_tat)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: i64 = 1_000_000;

    #[test]
    fn burst_then_steady_rate() {
        let rate = Rate::new(10, Duration::from_secs(7200));
        let mut tat = None;
        for i in 0..10 {
            let (d, next) = step(tat, 0, rate, 1);
            assert!(d.allowed, "request {i}");
            assert_eq!(d.remaining, 9 - i);
            tat = next;
        }
        let (d, _) = step(tat, 0, rate, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_secs(), 720);
        // One interval later exactly one more fits.
        let (d, next) = step(tat, 720 * SEC, rate, 1);
        assert!(d.allowed);
        let (d, _) = step(next, 720 * SEC, rate, 1);
        assert!(!d.allowed);
    }

    #[test]
    fn refund_gives_back_and_peek_spends_nothing() {
        let rate = Rate::per_minute(5);
        let (_, tat) = step(None, 0, rate, 1);
        let (peek, stored) = step(tat, 0, rate, 0);
        assert_eq!(peek.remaining, 4);
        assert_eq!(stored, None);
        let (refunded, tat) = step(tat, 0, rate, -1);
        assert_eq!(refunded.remaining, 5);
        assert_eq!(tat, Some(0));
    }
}
