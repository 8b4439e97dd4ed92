//! `COVA_BENCH_ONLY=purge`: the janitor's purge of 14 days of kept comments on PostgreSQL.

use super::{JOB_COMMENTS_BYTES, RealBackends, Report, count_rows, mib, ms, percentile};
use cova_tests::TestDatabase;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Scrapes kept per day and comments per scrape for the purge bench: 14 days of them are
/// 5,000,800 comment rows.
const PURGE_JOBS_PER_DAY: i64 = 100;
const PURGE_COMMENTS_PER_JOB: i64 = 3_572;

/// The janitor's purge on PostgreSQL over 14 days of kept breakdowns (5,000,800 comments):
/// one day's worth expiring, then two days' worth (time proportional to what expires), with a
/// scrape appending pages of 50 comments beside it (its p99 against the same scrape alone), and
/// the table's size before and after.
pub(super) async fn purge_at_scale(report: &mut Report, real: &RealBackends) {
    use cova_storage::repo::jobs::{StoredComment, append_comments};
    const DAY: i64 = 86_400_000;
    let database = TestDatabase::postgres(&real.database).await.for_bulk_seeding();
    let db = database.db().await;
    let now = cova_domain::time::now_ms();
    let today = cova_storage::repo::comment_days::day_of(now);
    let jobs = PURGE_JOBS_PER_DAY * 14;
    let total = jobs * PURGE_COMMENTS_PER_JOB;
    // Job g's scrape started on day `today - 14 + k` (k = its day among the 14) and its breakdown
    // expires 14 days later: the oldest day at `now`, the next at `now` + a day, and so on.
    let day_of_job = format!("({today} - 14 + (g - 1) / {PURGE_JOBS_PER_DAY})");
    let sql = format!(
        "SET statement_timeout = 0; \
         SELECT cova_comments_day(d) FROM generate_series({today} - 14, {today} + 1) d; \
         INSERT INTO accounts (id, email, email_confirmed_at, active_tokens, free_comments_left, created_at) \
           VALUES ('acct-p', 'p@example.com', 0, 0, 0, 0); \
         INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at, finished_at, comments_day) \
           SELECT 'job-' || g, 'acct-p', 'analyze', 'tiktok:' || (7000000000000000000 + g), \
                  'https://www.tiktok.com/@a/video/' || (7000000000000000000 + g), 'complete', 0, 0, {day_of_job} \
           FROM generate_series(1, {jobs}) g; \
         INSERT INTO analyses (id, account_id, ref, url, platform, status, created_at, saved_at, last_scraped_at, \
                               expires_at, last_job_id, comments_day, comment_count) \
           SELECT 'an-' || g, 'acct-p', 'tiktok:' || (7000000000000000000 + g), \
                  'https://www.tiktok.com/@a/video/' || (7000000000000000000 + g), 'tiktok', 'ready', 0, 0, 0, \
                  {now} - 1000 + ((g - 1) / {PURGE_JOBS_PER_DAY}) * {DAY}, 'job-' || g, {day_of_job}, \
                  {PURGE_COMMENTS_PER_JOB} \
           FROM generate_series(1, {jobs}) g; \
         INSERT INTO job_comments (job_id, comment_id, parent_id, position, body, likes, posted_at, search, thread, \
                                   comments_day) \
           SELECT 'job-' || job, 'c' || g, NULL, g, \
                  '{{\"id\":\"' || g || '\",\"text\":\"a comment of about the usual length, with a few words\",' \
                  || '\"author\":{{\"handle\":\"someone\",\"name\":\"Some One\"}},\"likes\":3,\"reply_count\":0}}', \
                  3, 0, 'a comment of about the usual length, with a few words someone some one', g, \
                  {today} - 14 + (job - 1) / {PURGE_JOBS_PER_DAY} \
           FROM (SELECT g, (g - 1) / {PURGE_COMMENTS_PER_JOB} + 1 AS job FROM generate_series(1, {total}) g) rows; \
         INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at, started_at, comments_day) \
           SELECT 'live-' || g, 'acct-p', 'analyze', 'tiktok:' || g, 'https://www.tiktok.com/@a/video/' || g, \
                  'in_progress', 0, {now}, {today} FROM generate_series(1, 2) g; \
         INSERT INTO job_leases (job_id, owner, expires_at) \
           SELECT 'live-' || g, 'bench', {far} FROM generate_series(1, 2) g; \
         ANALYZE;",
        far = now + 100 * DAY,
    );
    let mut conn = db.conn().await.expect("conn");
    conn.tx().batch_execute(&sql).await.expect("seed 5,000,800 comments");
    drop(conn);
    let size = async || count_rows(&db, JOB_COMMENTS_BYTES).await as u64;
    let before = size().await;

    // A scrape storing pages of 50 comments until told to stop: each page's latency.
    let scrape = |job: &'static str, stop: Arc<std::sync::atomic::AtomicBool>, pages: usize| {
        let db = db.clone();
        async move {
            let mut latencies = Vec::new();
            for page in 0.. {
                if page >= pages && stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let batch: Vec<StoredComment> = (0..50)
                    .map(|i| StoredComment {
                        comment_id: format!("p{page}-{i}"),
                        parent_id: None,
                        body: r#"{"text":"a new comment"}"#.to_owned(),
                        likes: 0,
                        posted_at: 0,
                        search: "a new comment".to_owned(),
                        terms: "a new comment".to_owned(),
                        ..StoredComment::default()
                    })
                    .collect();
                let started = Instant::now();
                append_comments(&db, job, ("bench", 100 * DAY), &batch, None, now).await.expect("append");
                latencies.push(started.elapsed());
            }
            latencies.sort();
            latencies
        }
    };
    let done = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let alone = scrape("live-1", done, 200).await;

    // The janitor's purge: the breakdowns expire, then their days' partitions are dropped.
    let purge = async |at: i64| {
        let started = Instant::now();
        let mut breakdowns = 0;
        loop {
            let n = cova_storage::repo::analyses::expire_due(&db, at, 500).await.expect("purge");
            breakdowns += n;
            if n < 500 {
                break;
            }
        }
        let days = cova_storage::repo::comment_days::drop_unused(&db, at).await.expect("drop days");
        (started.elapsed(), breakdowns as i64, days.len())
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let beside = tokio::spawn(scrape("live-2", stop.clone(), 20));
    let (one_day, first, first_days) = purge(now).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let beside = beside.await.expect("scrape");
    let (two_days, second, second_days) = purge(now + 2 * DAY).await;
    assert_eq!((first, second), (PURGE_JOBS_PER_DAY, 2 * PURGE_JOBS_PER_DAY), "a day's worth, then two");
    assert_eq!((first_days, second_days), (1, 2), "a day's partition, then two");
    let after = size().await;
    // A new day's scrapes go to their own partition: the table holds the days still used.
    let refill = format!(
        "SET statement_timeout = 0; \
         INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at, finished_at, comments_day) \
           SELECT 'new-' || g, 'acct-p', 'analyze', 'tiktok:' || g, 'https://www.tiktok.com/@a/video/' || g, \
                  'complete', 0, 0, {next} FROM generate_series(1, {PURGE_JOBS_PER_DAY}) g; \
         INSERT INTO job_comments (job_id, comment_id, parent_id, position, body, likes, posted_at, search, thread, \
                                   comments_day) \
           SELECT 'new-' || ((g - 1) / {PURGE_COMMENTS_PER_JOB} + 1), 'c' || g, NULL, g, \
                  '{{\"id\":\"' || g || '\",\"text\":\"a comment of about the usual length, with a few words\",' \
                  || '\"author\":{{\"handle\":\"someone\",\"name\":\"Some One\"}},\"likes\":3,\"reply_count\":0}}', \
                  3, 0, 'a comment of about the usual length, with a few words someone some one', g, {next} \
           FROM generate_series(1, {day}) g;",
        next = today + 1,
        day = PURGE_JOBS_PER_DAY * PURGE_COMMENTS_PER_JOB,
    );
    let mut conn = db.conn().await.expect("conn");
    conn.tx().batch_execute(&refill).await.expect("a new day's scrapes");
    drop(conn);
    let refilled = size().await;
    let kept = count_rows(&db, "SELECT COUNT(*) AS n FROM job_comments WHERE job_id LIKE 'job-%'").await;
    assert_eq!(kept, total - 3 * PURGE_JOBS_PER_DAY * PURGE_COMMENTS_PER_JOB, "exactly the expired rows went");

    let rows = |days: i64| days * PURGE_JOBS_PER_DAY * PURGE_COMMENTS_PER_JOB;
    let rate = |d: Duration, days: i64| rows(days) as f64 / d.as_secs_f64();
    report.add(
        "purge_5m_comments_one_day",
        format!(
            "{} for {} breakdowns, {} comments ({:.0} comments/s; their day's partition dropped)",
            ms(one_day),
            PURGE_JOBS_PER_DAY,
            rows(1),
            rate(one_day, 1)
        ),
    );
    report.add(
        "purge_5m_comments_two_days",
        format!(
            "{} for {} comments ({:.2}× the one-day purge for 2× the rows)",
            ms(two_days),
            rows(2),
            two_days.as_secs_f64() / one_day.as_secs_f64()
        ),
    );
    report.add(
        "purge_scrape_page_p99",
        format!(
            "{} beside the purge ({} pages of 50), {} alone (p50 {} / {})",
            ms(percentile(&beside, 0.99)),
            beside.len(),
            ms(percentile(&alone, 0.99)),
            ms(percentile(&beside, 0.5)),
            ms(percentile(&alone, 0.5))
        ),
    );
    report.add(
        "purge_table_size",
        format!(
            "job_comments {:.0} MiB with 5,000,800 rows in 14 day partitions, {:.0} MiB after 3 days purged (their partitions dropped), {:.0} MiB after a new day's {} rows",
            mib(before / 1024),
            mib(after / 1024),
            mib(refilled / 1024),
            PURGE_JOBS_PER_DAY * PURGE_COMMENTS_PER_JOB
        ),
    );
    let _ = database.drop_database().await;
}

pub(super) async fn run(report: &mut Report, real: &RealBackends) {
    if real.reachable() {
        purge_at_scale(report, real).await;
    }
}
