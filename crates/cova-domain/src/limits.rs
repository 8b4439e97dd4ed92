//! The numbers of the specification's "Limits" table and of the product decisions.

use std::time::Duration;

/// A limit stated as "N per window": no more than `limit` in ANY window of `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub limit: u32,
    pub period: Duration,
}

impl Window {
    pub const fn new(limit: u32, period: Duration) -> Self {
        Self { limit, period }
    }
}

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// Metadata with a token or a session: 10 per rolling 2 hours per account.
pub const METADATA: Window = Window::new(10, Duration::from_secs(2 * HOUR));
/// Metadata from the service's own page without sign-in: 10 per day per client IP.
pub const METADATA_ANONYMOUS: Window = Window::new(10, Duration::from_secs(DAY));
/// Workspace sign-ups per client IP.
pub const SIGNUP_PER_IP: Window = Window::new(5, Duration::from_secs(HOUR));
/// Login and password-reset attempts per client IP, and per e-mail address (known or not).
pub const LOGIN_PER_IP: Window = Window::new(10, Duration::from_secs(15 * MINUTE));
pub const LOGIN_PER_EMAIL: Window = Window::new(5, Duration::from_secs(15 * MINUTE));
/// How long e-mailed links work: confirming the address, resetting the password.
pub const CONFIRM_LINK_VALIDITY: Duration = Duration::from_secs(DAY);
pub const RESET_LINK_VALIDITY: Duration = Duration::from_secs(HOUR);
/// What has ended (sessions, used or expired e-mailed links, expired AI quotes) is kept this
/// long for inspection, then purged by the janitor.
pub const ENDED_KEPT: Duration = Duration::from_secs(DAY);
/// Sandbox, per client IP: 5 per minute and 30 per hour.
pub const SANDBOX_PER_MINUTE: Window = Window::new(5, Duration::from_secs(MINUTE));
pub const SANDBOX_PER_HOUR: Window = Window::new(30, Duration::from_secs(HOUR));

/// A metadata answer is reused this long per post.
pub const METADATA_CACHE: Duration = Duration::from_secs(5 * MINUTE);

/// List previews' lookups per account, apart from the metadata limit: a list of 100 posts
/// counted twice an hour. Sized from the platforms' pace: at Instagram's default (0.45 requests
/// a second, two requests a post) one route reads about 800 posts an hour, so one account's
/// previews take at most a quarter of it, and each turn is shared fairly with the accounts
/// waiting (`pace`).
pub const PREVIEW_LOOKUPS: Window = Window::new(200, Duration::from_secs(HOUR));
/// Failed lookups (a post that cannot be read, a short or share link that leads nowhere) are
/// free, but an account (or a visitor's address) has at most this many in any hour; past it,
/// lookups are refused with 429 `rate_limited` until the oldest failure is an hour old.
pub const FAILED_LOOKUPS: Window = Window::new(30, Duration::from_secs(HOUR));
/// A post's comment count, read by any lookup, preview or collection, answers list previews
/// this long.
pub const KNOWN_COUNT: Duration = Duration::from_secs(HOUR);
/// A failed lookup answers again (without asking the platform) this long.
pub const FAILED_LOOKUP_KEPT: Duration = Duration::from_secs(10 * MINUTE);
/// The longest a request waits for a short or share link to be followed; past it, it answers
/// with what is known and the link is followed on, for the next request.
pub const LINK_WAIT: Duration = Duration::from_secs(5);
/// A list preview answers within this, whatever its length: the counts not known yet are read
/// after the answer.
pub const PREVIEW_ANSWER: Duration = Duration::from_secs(2);

/// Comments collected per post at most (top-level and replies count one each).
pub const MAX_COMMENTS_PER_POST: i64 = 5_000;
/// URLs in one `POST /analyze/batch`.
pub const MAX_BATCH_URLS: usize = 100;
/// Analyses queued or in progress at once per account; the next is 429 `concurrency_limit`.
pub const MAX_RUNNING_ANALYSES: i64 = 3;
/// AI jobs queued or in progress at once per account (counted apart from the analyses, so
/// that an AI run never waits for collections, nor the other way round); the next is 429
/// `concurrency_limit`.
pub const MAX_RUNNING_AI_JOBS: i64 = 3;
/// A completed job is returned instead of a new one for this long (`recent_result`).
pub const RECENT_RESULT: Duration = Duration::from_secs(5 * MINUTE);
/// An `Idempotency-Key` is remembered this long.
pub const IDEMPOTENCY: Duration = Duration::from_secs(DAY);
/// Active tokens per account; the next creation is 409 `token_limit`.
pub const MAX_ACTIVE_TOKENS: i32 = 5;

/// A saved breakdown and its comment media live this long after the last full scrape.
pub const LIBRARY_LIFETIME: Duration = Duration::from_secs(14 * DAY);
/// Allowed watch intervals in minutes, and the default.
pub const WATCH_INTERVAL_MIN: std::ops::RangeInclusive<i64> = 30..=10_080;
pub const WATCH_INTERVAL_DEFAULT_MIN: i64 = 360;
/// How often a followed creator is listed (`PUT /creators/{ref}/watch`).
pub const CREATOR_INTERVAL_MIN: std::ops::RangeInclusive<i64> = 60..=10_080;
pub const CREATOR_INTERVAL_DEFAULT_MIN: i64 = 360;
/// How long each post found through a creator is watched after it was published.
pub const CREATOR_FOLLOW_DAYS: std::ops::RangeInclusive<i64> = 0..=14;
pub const CREATOR_FOLLOW_DAYS_DEFAULT: i64 = 3;
/// How far before the creator was added its posts are taken (default 0: only newer ones).
pub const CREATOR_BACKFILL_DAYS: std::ops::RangeInclusive<i64> = 0..=30;
/// A watch run that finds three analyses of its account running tries again this much later.
pub const WATCH_BUSY_RETRY: Duration = Duration::from_secs(5 * MINUTE);
/// Library entries per page of `GET /analyses/saved`, by default and at most.
pub const LIBRARY_PAGE_DEFAULT: i64 = 20;
pub const LIBRARY_PAGE_MAX: i64 = 100;
/// Comments per page of `GET /comments/search`, by default and at most; how deep its pages go;
/// how many posts (`ref`) one search may name.
pub const SEARCH_PAGE_DEFAULT: i64 = 20;
pub const SEARCH_PAGE_MAX: i64 = 100;
pub const SEARCH_MAX_DEPTH: i64 = 10_000;
pub const SEARCH_MAX_REFS: usize = 50;
/// Keywords per account, and the length of one (in characters, after trimming).
pub const MAX_KEYWORDS: usize = 50;
/// A token's name, in characters.
pub const TOKEN_NAME_CHARS: std::ops::RangeInclusive<usize> = 1..=64;
pub const KEYWORD_CHARS: std::ops::RangeInclusive<usize> = 1..=64;

/// The delay before the next attempt of a notification delivery after `attempt` failed ones:
/// 1 min doubling, at most 8 h, so that twelve attempts span about a day.
pub fn delivery_retry(attempt: u32) -> Duration {
    let base = Duration::from_secs(60).saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1).min(16)));
    base.min(Duration::from_secs(8 * HOUR))
}

/// Watch phrases per analysis, and the length of one (in characters, after trimming).
pub const MAX_WATCH_PHRASES: usize = 3;
pub const WATCH_PHRASE_CHARS: std::ops::RangeInclusive<usize> = 1..=120;
/// An AI quote can be run this long after it was given.
pub const AI_QUOTE_VALIDITY: Duration = Duration::from_secs(15 * MINUTE);
/// Comments per comment unit of an AI charge.
pub const AI_COMMENTS_PER_UNIT: i64 = 10;

/// The charge of an AI job on `comments` comments, in comment units: one per ten, at least one.
pub const fn ai_charge(comments: i64) -> i64 {
    let units = (comments + AI_COMMENTS_PER_UNIT - 1) / AI_COMMENTS_PER_UNIT;
    if units < 1 { 1 } else { units }
}

/// A duration as a message to a person says it: `14 days`, `24 hours`, `an hour`,
/// `15 minutes`, in the largest whole unit (so that a message stating a limit renders it from
/// the constant instead of restating it).
pub fn in_words(d: Duration) -> String {
    let secs = d.as_secs();
    let (n, unit) = [(DAY, "day"), (HOUR, "hour"), (MINUTE, "minute"), (1, "second")]
        .into_iter()
        .find(|(size, _)| secs >= *size && secs.is_multiple_of(*size))
        .map_or((secs, "second"), |(size, unit)| (secs / size, unit));
    match n {
        1 if unit == "hour" => "an hour".to_owned(),
        1 => format!("a {unit}"),
        n => format!("{n} {unit}s"),
    }
}

/// A window as a message to a person says it: `200 an hour`, `10 every 2 hours`.
pub fn window_in_words(w: Window) -> String {
    let period = in_words(w.period);
    if period.starts_with("a ") || period.starts_with("an ") {
        format!("{} {period}", w.limit)
    } else {
        format!("{} every {period}", w.limit)
    }
}

/// Milliseconds of a duration, for the storage layer's unix-millisecond columns.
pub const fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

/// The hold rule. A job holds comments on the balance while it runs, so that the balance can
/// never be overdrawn; it is charged what it collected at the end and the rest returns.
pub mod hold {
    use super::MAX_COMMENTS_PER_POST;

    /// What a job holds when it is accepted and the post's size is not known yet: one
    /// comment, which proves the balance is not empty without blocking the account's other
    /// analyses. The scraper raises it once the post reports its size ([`needed`]).
    pub const OPENING: i64 = 1;

    /// What collecting a post needs: its reported comment count plus room for comments added
    /// meanwhile and for rounded counts, at most the per-post cap. Unknown size: the cap.
    pub fn needed(reported: Option<i64>) -> i64 {
        match reported {
            Some(n) => n.max(0).saturating_add((n.max(0) / 10).max(50)).min(MAX_COMMENTS_PER_POST),
            None => MAX_COMMENTS_PER_POST,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hold_rule() {
        assert_eq!(hold::needed(Some(12)), 62);
        assert_eq!(hold::needed(Some(1_000)), 1_100);
        assert_eq!(hold::needed(Some(4_990)), 5_000);
        assert_eq!(hold::needed(None), 5_000);
    }

    #[test]
    fn deliveries_are_retried_over_about_a_day() {
        assert_eq!(delivery_retry(1), Duration::from_secs(60));
        assert_eq!(delivery_retry(2), Duration::from_secs(120));
        let total: u64 = (1..12).map(|a| delivery_retry(a).as_secs()).sum();
        assert!((20 * 3_600..=30 * 3_600).contains(&total), "{total} s over eleven retries");
    }

    #[test]
    fn the_specification_table() {
        assert_eq!((METADATA.limit, METADATA.period.as_secs()), (10, 7_200));
        assert_eq!((SANDBOX_PER_MINUTE.limit, SANDBOX_PER_HOUR.limit), (5, 30));
        assert_eq!(ms(IDEMPOTENCY), 86_400_000);
        assert_eq!(ms(LIBRARY_LIFETIME), 14 * 86_400_000);
        assert_eq!(in_words(LIBRARY_LIFETIME), "14 days");
        assert_eq!(in_words(RESET_LINK_VALIDITY), "an hour");
        assert_eq!(in_words(CONFIRM_LINK_VALIDITY), "a day");
        assert_eq!(in_words(AI_QUOTE_VALIDITY), "15 minutes");
        assert_eq!(in_words(Duration::from_secs(90)), "90 seconds");
    }
}
