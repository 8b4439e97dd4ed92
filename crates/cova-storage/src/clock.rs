//! Time helpers: the storage layer takes `now` from its callers so tests can move the clock.

use chrono::{DateTime, Datelike, TimeZone, Utc};

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
    }
}
