//! The Prometheus series every cova role exports, declared once: each name, its labels and
//! its unit live here, and the roles record through the functions below so that a label set
//! cannot drift between call sites. Recording is a no-op until [`install`] runs (unit tests,
//! tools); a process installs once and serves [`render`] on its metrics address.

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;

pub const HTTP_REQUESTS: &str = "cova_http_requests_total";
pub const HTTP_DURATION: &str = "cova_http_request_duration_seconds";
pub const JOBS: &str = "cova_jobs_total";
pub const JOB_DURATION: &str = "cova_job_duration_seconds";
pub const JOB_COMMENTS: &str = "cova_job_comments_total";
pub const QUEUE_PUBLISHED: &str = "cova_queue_published_total";
pub const QUEUE_CONSUMED: &str = "cova_queue_consumed_total";
pub const QUEUE_RETRIED: &str = "cova_queue_retried_total";
pub const QUEUE_DEAD_LETTERED: &str = "cova_queue_dead_lettered_total";
pub const QUEUE_DEPTH: &str = "cova_queue_depth";
pub const QUEUE_DEAD_LETTERS: &str = "cova_queue_dead_letters";
pub const OUTBOX_BACKLOG: &str = "cova_outbox_backlog";
pub const PLATFORM_REQUESTS: &str = "cova_platform_requests_total";
pub const PLATFORM_PARSE_ERRORS: &str = "cova_platform_parse_errors_total";
pub const PLATFORM_DURATION: &str = "cova_platform_request_duration_seconds";
pub const PLATFORM_WAIT: &str = "cova_platform_turn_wait_seconds";
pub const PLATFORM_DROPPED: &str = "cova_platform_requests_dropped_total";
pub const PLATFORM_PACE_FALLBACK: &str = "cova_platform_pace_fallback_total";
pub const BALANCE_COMMENTS: &str = "cova_balance_comments_total";
pub const DELIVERIES: &str = "cova_notifier_deliveries_total";
pub const DATABASE_REACHABLE: &str = "cova_database_reachable";
pub const DATABASE_OUTAGES: &str = "cova_database_outages_total";

/// Latency buckets in seconds: 1 ms to 2 min, covering a cached poll and a long collection.
const BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder (once; later calls return the same handle). `None` when
/// another recorder was installed first, which only an embedding program would do.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new().set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS);
            let handle = builder.ok()?.install_recorder().ok()?;
            describe();
            Some(handle)
        })
        .clone()
}

/// The exposition text of every series recorded so far (empty before [`install`]).
pub fn render() -> String {
    match HANDLE.get() {
        Some(Some(handle)) => {
            handle.run_upkeep();
            handle.render()
        }
        _ => String::new(),
    }
}

fn describe() {
    describe_counter!(HTTP_REQUESTS, "HTTP requests answered by the gateway, by route template, method and status.");
    describe_histogram!(HTTP_DURATION, Unit::Seconds, "Time to answer an HTTP request, by route template and method.");
    describe_counter!(JOBS, "Jobs finished, by kind (analyze, ai) and final status (complete, failed).");
    describe_histogram!(JOB_DURATION, Unit::Seconds, "Time from a worker starting a job to its end, by kind.");
    describe_counter!(JOB_COMMENTS, "Comments collected by finished analyze jobs.");
    describe_counter!(QUEUE_PUBLISHED, "Messages published to the queue, by routing key.");
    describe_counter!(QUEUE_CONSUMED, "Messages handled and acknowledged, by queue.");
    describe_counter!(QUEUE_RETRIED, "Messages sent back for a later delivery after a transient failure, by queue.");
    describe_counter!(QUEUE_DEAD_LETTERED, "Messages parked in a dead-letter queue, by queue.");
    describe_gauge!(QUEUE_DEPTH, "Messages waiting in a queue, read when metrics are scraped (consumer lag).");
    describe_gauge!(QUEUE_DEAD_LETTERS, "Messages in a queue's dead-letter queue, read when metrics are scraped.");
    describe_gauge!(OUTBOX_BACKLOG, "Outbox rows not yet published, read when metrics are scraped.");
    describe_counter!(PLATFORM_REQUESTS, "Requests to video platforms, by host and outcome.");
    describe_counter!(
        PLATFORM_PARSE_ERRORS,
        "Platform answers of a shape cova does not know, by platform and what was read: a rise means the platform changed."
    );
    describe_histogram!(PLATFORM_DURATION, Unit::Seconds, "Time of one platform request, by host.");
    describe_histogram!(
        PLATFORM_WAIT,
        Unit::Seconds,
        "Time a platform request waited for its turn in its route's queue, by host and class (interactive, background)."
    );
    describe_counter!(
        PLATFORM_DROPPED,
        "Platform requests never sent because their asker was answered or went away while they waited, by host."
    );
    describe_counter!(
        PLATFORM_PACE_FALLBACK,
        "Platform requests paced by this process alone, at its share of the rate, because the shared queue did not answer, by host."
    );
    describe_counter!(
        BALANCE_COMMENTS,
        "Comments moved on balances: reserved by a job, settled (charged) or released."
    );
    describe_counter!(DELIVERIES, "Notification delivery attempts, by channel kind and outcome.");
    describe_gauge!(DATABASE_REACHABLE, "1 while this process finds the database reachable, 0 while it marks it down.");
    describe_counter!(
        DATABASE_OUTAGES,
        "Times this process found the database unreachable and began to answer from copies."
    );
}

/// One HTTP answer; `route` is the route template (`/api/v1/analyze/{id}`), never the raw
/// path, so ids cannot explode the series count.
pub fn http_request(route: &str, method: &str, status: u16, elapsed: Duration) {
    let (route, method) = (route.to_owned(), method.to_owned());
    counter!(HTTP_REQUESTS, "route" => route.clone(), "method" => method.clone(), "status" => status.to_string())
        .increment(1);
    histogram!(HTTP_DURATION, "route" => route, "method" => method).record(elapsed.as_secs_f64());
}

/// A job kind, as in the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    Analyze,
    Ai,
}

impl JobKind {
    fn label(self) -> &'static str {
        match self {
            JobKind::Analyze => "analyze",
            JobKind::Ai => "ai",
        }
    }
}

/// A job reached its end (`status`: `complete` or `failed`) after `elapsed` in the worker.
pub fn job_finished(kind: JobKind, status: &'static str, elapsed: Duration, comments: u64) {
    counter!(JOBS, "kind" => kind.label(), "status" => status).increment(1);
    histogram!(JOB_DURATION, "kind" => kind.label()).record(elapsed.as_secs_f64());
    if comments > 0 {
        counter!(JOB_COMMENTS, "kind" => kind.label()).increment(comments);
    }
}

pub fn queue_published(routing_key: &str) {
    counter!(QUEUE_PUBLISHED, "routing_key" => routing_key.to_owned()).increment(1);
}

/// What the worker runtime did with a delivery of `queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Acked,
    Retried,
    DeadLettered,
}

pub fn queue_settled(queue: &'static str, how: Settled) {
    let name = match how {
        Settled::Acked => QUEUE_CONSUMED,
        Settled::Retried => QUEUE_RETRIED,
        Settled::DeadLettered => QUEUE_DEAD_LETTERED,
    };
    counter!(name, "queue" => queue).increment(1);
}

pub fn queue_depth(queue: &'static str, waiting: u64, dead: u64) {
    gauge!(QUEUE_DEPTH, "queue" => queue).set(waiting as f64);
    gauge!(QUEUE_DEAD_LETTERS, "queue" => queue).set(dead as f64);
}

pub fn outbox_backlog(rows: i64) {
    gauge!(OUTBOX_BACKLOG).set(rows as f64);
}

/// One platform request: `outcome` is `ok`, `client_error`, `rate_limited`, `server_error`
/// or `transport_error`.
pub fn platform_request(host: &str, outcome: &'static str, elapsed: Duration) {
    counter!(PLATFORM_REQUESTS, "host" => host.to_owned(), "outcome" => outcome).increment(1);
    histogram!(PLATFORM_DURATION, "host" => host.to_owned()).record(elapsed.as_secs_f64());
}

/// A platform request got its turn after waiting `waited` in its route's queue.
pub fn platform_turn(host: &str, class: &'static str, waited: Duration) {
    histogram!(PLATFORM_WAIT, "host" => host.to_owned(), "class" => class).record(waited.as_secs_f64());
}

/// A platform request left its queue unsent: its asker was answered or went away.
pub fn platform_request_dropped(host: &str) {
    counter!(PLATFORM_DROPPED, "host" => host.to_owned()).increment(1);
}

/// A platform request paced by this process alone while the shared queue did not answer.
pub fn platform_pace_fallback(host: &str) {
    counter!(PLATFORM_PACE_FALLBACK, "host" => host.to_owned()).increment(1);
}

/// A platform answered `what` (a page, a query) in a shape cova does not know.
pub fn platform_parse_error(platform: &'static str, what: &'static str) {
    counter!(PLATFORM_PARSE_ERRORS, "platform" => platform, "what" => what).increment(1);
}

/// A balance movement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    Reserved,
    Settled,
    Released,
}

pub fn balance(movement: Movement, comments: i64) {
    let label = match movement {
        Movement::Reserved => "reserved",
        Movement::Settled => "settled",
        Movement::Released => "released",
    };
    if let Ok(n) = u64::try_from(comments)
        && n > 0
    {
        counter!(BALANCE_COMMENTS, "movement" => label).increment(n);
    }
}

/// The database was found unreachable (`false`) or answers again (`true`).
pub fn database_reachable(reachable: bool) {
    gauge!(DATABASE_REACHABLE).set(if reachable { 1.0 } else { 0.0 });
    if !reachable {
        counter!(DATABASE_OUTAGES).increment(1);
    }
}

/// One delivery attempt: `channel` is `telegram` or `webhook`; `outcome` is `delivered`,
/// `retrying`, `failed` or `disabled`.
pub fn delivery(channel: &str, outcome: &'static str) {
    counter!(DELIVERIES, "channel" => channel.to_owned(), "outcome" => outcome).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_series_are_rendered_with_their_labels() {
        let _ = install();
        http_request("/api/v1/usage", "GET", 200, Duration::from_millis(3));
        job_finished(JobKind::Analyze, "complete", Duration::from_secs(2), 120);
        balance(Movement::Reserved, 500);
        balance(Movement::Released, 0);
        let text = render();
        assert!(
            text.contains(r#"cova_http_requests_total{route="/api/v1/usage",method="GET",status="200"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"cova_jobs_total{kind="analyze",status="complete"} 1"#), "{text}");
        assert!(text.contains(r#"cova_job_comments_total{kind="analyze"} 120"#), "{text}");
        assert!(text.contains(r#"cova_balance_comments_total{movement="reserved"} 500"#), "{text}");
        assert!(!text.contains(r#"movement="released""#), "a zero movement records nothing: {text}");
        assert!(text.contains("cova_http_request_duration_seconds_bucket"), "{text}");
    }
}
