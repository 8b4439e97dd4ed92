//! Time: unix milliseconds everywhere, calendar months in UTC, RFC 3339 for API bodies, and a
//! clock that tests can move (windows, expiry and schedules run on it, never on sleeps).

use chrono::{DateTime, Datelike, TimeZone, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// The time source of a process. Cheap to clone.
#[derive(Clone, Default)]
pub struct Clock {
    manual: Option<Arc<AtomicI64>>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.manual {
            Some(t) => write!(f, "Clock::manual({})", t.load(Ordering::SeqCst)),
            None => f.write_str("Clock::system"),
        }
    }
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self { manual: None }
    }

    /// Unix milliseconds now.
    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            Some(t) => t.load(Ordering::SeqCst),
            None => now_ms(),
        }
    }

    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }
}

/// A clock that only moves when told to; `clock()` hands out the [`Clock`] that follows it.
#[derive(Clone, Debug)]
pub struct ManualClock {
    at: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn starting_at(ms: i64) -> Self {
        Self { at: Arc::new(AtomicI64::new(ms)) }
    }

    /// Starts at the system time.
    pub fn now() -> Self {
        Self::starting_at(now_ms())
    }

    pub fn clock(&self) -> Clock {
        Clock { manual: Some(self.at.clone()) }
    }

    pub fn advance(&self, by: std::time::Duration) {
        self.at.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }

    pub fn set(&self, ms: i64) {
        self.at.store(ms, Ordering::SeqCst);
    }

    pub fn now_ms(&self) -> i64 {
        self.at.load(Ordering::SeqCst)
    }
}

/// A day in milliseconds (UTC days have no leap seconds in unix time).
pub const DAY_MS: i64 = 86_400_000;

/// Unix milliseconds on the system clock (prefer a [`Clock`] where a rule depends on it).
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// The calendar month (UTC) a balance belongs to, as `YYYY-MM`.
pub fn month_of(ms: i64) -> String {
    let t = DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default();
    format!("{:04}-{:02}", t.year(), t.month())
}

/// Start of the month after the one containing `ms`: when that month's balance expires.
pub fn month_end_ms(ms: i64) -> i64 {
    let t = DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default();
    let (y, m) = if t.month() == 12 { (t.year() + 1, 1) } else { (t.year(), t.month() + 1) };
    Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().map(|d| d.timestamp_millis()).unwrap_or(i64::MAX)
}

/// RFC 3339 (UTC, seconds) for API bodies.
pub fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Parses RFC 3339 into unix milliseconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_and_boundaries() {
        let nov_30_late = Utc.with_ymd_and_hms(2026, 11, 30, 23, 59, 59).single().expect("date").timestamp_millis();
        assert_eq!(month_of(nov_30_late), "2026-11");
        assert_eq!(month_of(nov_30_late + 1000), "2026-12");
        assert_eq!(rfc3339(month_end_ms(nov_30_late)), "2026-12-01T00:00:00Z");
        let dec = Utc.with_ymd_and_hms(2026, 12, 5, 0, 0, 0).single().expect("date").timestamp_millis();
        assert_eq!(rfc3339(month_end_ms(dec)), "2027-01-01T00:00:00Z");
        assert_eq!(parse_rfc3339("2027-01-01T00:00:00Z"), Some(month_end_ms(dec)));
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let manual = ManualClock::starting_at(1_000);
        let clock = manual.clock();
        assert_eq!(clock.now_ms(), 1_000);
        manual.advance(std::time::Duration::from_secs(2));
        assert_eq!(clock.now_ms(), 3_000);
        assert!(!Clock::system().is_manual());
        assert!(Clock::system().now_ms() > 1_700_000_000_000);
    }
}
