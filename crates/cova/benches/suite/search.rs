//! `COVA_BENCH_ONLY=search`: searching every kept comment of one account, on SQLite (200,000
//! comments over 400 posts) and PostgreSQL (1,000,000 over 2,000 posts): a one-word query, a
//! two-word phrase and a filtered query (platform, the last 7 days, a language), p50 and p95
//! of the storage's search as the endpoint runs it; the index's size per comment; and what the
//! search terms add to storing 1,000 comments.

use super::{RealBackends, Report, count_rows, cpu_time, ms, percentile};
use cova_analyzers::search::{Query, index_terms};
use cova_storage::Db;
use cova_storage::repo::search::{self, Filter, Order, Words};
use cova_tests::TestDatabase;
use std::time::{Duration, Instant};

const DAY: i64 = 86_400_000;
/// Each query is run this many times for its percentiles.
const ROUNDS: usize = 60;
/// Storing 1,000 comments is timed this many times with the index and without.
const WRITE_ROUNDS: usize = 5;

/// The distinct comments the kept ones are drawn from: the simulator's 5,000-comment post,
/// each with its terms and language as the scraper stores them.
fn texts(source: &[String]) -> Vec<(String, String, String)> {
    source
        .iter()
        .map(|t| {
            let language = cova_analyzers::Offline::new().label(t).language;
            (t.clone(), index_terms(t, Some(&language)), language)
        })
        .collect()
}

/// SQL's quoted literal of `s`.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Seeds one account with `posts` ready posts of `per_post` comments each, posted over the
/// last 14 days, drawn from `texts`; every third post is a YouTube one.
async fn seed(db: &Db, texts: &[(String, String, String)], posts: i64, per_post: i64, now: i64) {
    let postgres = db.is_postgres();
    let day = cova_storage::repo::comment_days::day_of(now);
    let mut statements = vec![
        "CREATE TABLE bench_texts (i BIGINT PRIMARY KEY, text TEXT NOT NULL, terms TEXT NOT NULL, language TEXT NOT NULL)"
            .to_owned(),
    ];
    for (k, chunk) in texts.chunks(500).enumerate() {
        let values: Vec<String> = chunk
            .iter()
            .enumerate()
            .map(|(i, (text, terms, language))| {
                format!("({}, {}, {}, {})", k * 500 + i, literal(text), literal(terms), literal(language))
            })
            .collect();
        statements.push(format!("INSERT INTO bench_texts VALUES {}", values.join(", ")));
    }
    let n = texts.len();
    let total = posts * per_post;
    let series = |to: i64| {
        if postgres {
            format!("generate_series(1::bigint, {to}) AS s(g)")
        } else {
            format!(
                "(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {to}) SELECT g FROM s) s"
            )
        }
    };
    let json = if postgres { "json_build_object" } else { "json_object" };
    let concat_text = if postgres { "::text" } else { "" };
    if postgres {
        statements.push(format!("SELECT cova_comments_day({day})"));
    }
    statements.extend([
        "INSERT INTO accounts (id, email, email_confirmed_at, active_tokens, free_comments_left, created_at) \
         VALUES ('acct-s', 's@example.com', 0, 0, 0, 0)"
            .to_owned(),
        format!(
            "INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at, finished_at, comments_day) \
             SELECT 'job-' || g, 'acct-s', 'analyze', 'tiktok:' || (7100000000000000000 + g), \
                    'https://www.tiktok.com/@a/video/' || (7100000000000000000 + g), 'complete', 0, 0, {day} FROM {}",
            series(posts)
        ),
        format!(
            "INSERT INTO analyses (id, account_id, ref, url, platform, status, created_at, saved_at, last_scraped_at, \
                                   expires_at, last_job_id, comments_day, comment_count) \
             SELECT 'an-' || g, 'acct-s', 'tiktok:' || (7100000000000000000 + g), \
                    'https://www.tiktok.com/@a/video/' || (7100000000000000000 + g), \
                    CASE WHEN g % 3 = 0 THEN 'youtube' ELSE 'tiktok' END, 'ready', 0, 0, {now}, {expires}, \
                    'job-' || g, {day}, {per_post} FROM {}",
            series(posts),
            expires = now + 14 * DAY,
        ),
        format!(
            "INSERT INTO job_comments (job_id, comment_id, parent_id, position, body, likes, posted_at, search, thread, \
                                       comments_day, terms, language, author, media) \
             SELECT 'job-' || ((g - 1) / {per_post} + 1), 'c' || g, \
                    CASE WHEN g % 4 = 0 THEN 'c' || (g - 1) END, g, \
                    {json}('id', 'c' || g, 'text', t.text, 'author', {json}('handle', 'user' || (g % 5000)), \
                           'likes', g % 500, 'language', t.language){concat_text}, \
                    g % 500, {now} - (g * 7919) % {span}, '', g, {day}, t.terms, t.language, 'user' || (g % 5000), \
                    g % 50 = 0 \
             FROM {} JOIN bench_texts t ON t.i = (g * 7919) % {n}",
            series(total),
            span = 14 * DAY,
        ),
    ]);
    statements.push("DROP TABLE bench_texts".to_owned());
    if !postgres {
        // Rows written here, not by the scraper's page write, enter SQLite's index at once.
        statements.push("INSERT INTO comment_terms (comment_terms) VALUES ('rebuild')".to_owned());
    }
    statements.push("ANALYZE".to_owned());
    let mut conn = db.conn().await.expect("conn");
    for sql in statements {
        conn.tx().batch_execute(&sql).await.unwrap_or_else(|e| panic!("seeding: {e}: {}", &sql[..sql.len().min(200)]));
    }
}

/// p50 and p95 of a search, in words, and how many it found on its first page.
async fn timed(db: &Db, q: &str, filter: &Filter) -> (Duration, Duration, usize) {
    let query = Query::parse(q).expect("a query");
    let (fts5, tsquery) = (query.fts5(), query.tsquery());
    let words = Words { fts5: &fts5, tsquery: &tsquery };
    let mut times = Vec::with_capacity(ROUNDS);
    let mut found = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let (hits, _) = search::comments(db, "acct-s", words, filter, Order::Relevance, (0, 20)).await.expect("search");
        times.push(started.elapsed());
        found = hits.len();
    }
    times.sort();
    (percentile(&times, 0.50), percentile(&times, 0.95), found)
}

async fn queries(report: &mut Report, db: &Db, name: &str, what: &str, now: i64) {
    let filtered = Filter {
        platform: Some("tiktok".into()),
        since: Some(now - 7 * DAY),
        language: Some("en".into()),
        ..Filter::default()
    };
    for (row, q, filter, words) in [
        ("one_word", "price", Filter::default(), "`price`"),
        ("phrase", "\"ship to\"", Filter::default(), "the phrase \"ship to\""),
        ("filtered", "price", filtered, "`price`, TikTok, the last 7 days, English"),
    ] {
        let (p50, p95, found) = timed(db, q, &filter).await;
        report.add(
            &format!("search_{name}_{row}"),
            format!(
                "p50 {}, p95 {} ({words}; {what}; best 20 by relevance, {found} on the page; {ROUNDS} runs)",
                ms(p50),
                ms(p95)
            ),
        );
    }
}

/// Storing 1,000 comments in pages of 50 as the scraper does, with their search terms (and
/// their index) and without: CPU of making the terms, and the write time.
async fn storing_cost(report: &mut Report, texts: &[(String, String, String)]) {
    use cova_storage::repo::jobs::{StoredComment, append_comments};
    let started = cpu_time(std::process::id());
    let rounds = 5;
    for _ in 0..rounds {
        for (text, _, language) in texts.iter().take(1_000) {
            std::hint::black_box(index_terms(text, Some(language)));
        }
    }
    let terms_cpu = cpu_time(std::process::id()).saturating_sub(started) / rounds;
    // Each variant five times, interleaved, on a fresh database each time: one run of 20 pages
    // moved by a quarter from one bench run to the next.
    let mut writes: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for with_terms in [false, true].repeat(WRITE_ROUNDS) {
        let database = TestDatabase::sqlite();
        let db = database.db().await;
        let now = cova_domain::time::now_ms();
        seed(&db, &texts[..10], 1, 1, now).await;
        if !with_terms {
            let mut conn = db.conn().await.expect("conn");
            // No index: a view that takes the pages' rows and keeps nothing.
            conn.tx()
                .batch_execute(
                    "DROP TABLE comment_terms; CREATE VIEW comment_terms (rowid, terms) AS SELECT 0, '' WHERE 0; \
                     CREATE TRIGGER comment_terms_none INSTEAD OF INSERT ON comment_terms BEGIN SELECT 1; END",
                )
                .await
                .expect("the index replaced by nothing");
        }
        let far = now + 100 * DAY;
        let day = cova_storage::repo::comment_days::day_of(now);
        let mut conn = db.conn().await.expect("conn");
        conn.tx()
            .batch_execute(&format!(
                "INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at, started_at, comments_day) \
                 VALUES ('live', 'acct-s', 'analyze', 'tiktok:1', 'https://www.tiktok.com/@a/video/1', 'in_progress', 0, \
                 {now}, {day}); INSERT INTO job_leases (job_id, owner, expires_at) VALUES ('live', 'bench', {far})"
            ))
            .await
            .expect("a running job");
        drop(conn);
        let pages: Vec<Vec<StoredComment>> = texts[..1_000]
            .chunks(50)
            .enumerate()
            .map(|(p, chunk)| {
                chunk
                    .iter()
                    .enumerate()
                    .map(|(i, (text, terms, language))| StoredComment {
                        comment_id: format!("{p}-{i}"),
                        body: serde_json::json!({"id": format!("{p}-{i}"), "text": text}).to_string(),
                        search: text.to_lowercase(),
                        terms: if with_terms { terms.clone() } else { String::new() },
                        language: Some(language.clone()),
                        ..StoredComment::default()
                    })
                    .collect()
            })
            .collect();
        let started = Instant::now();
        for page in &pages {
            append_comments(&db, "live", ("bench", 100 * DAY), page, None, now).await.expect("append");
        }
        writes[usize::from(with_terms)].push(started.elapsed());
    }
    let [without, with] = writes.map(|mut w| {
        w.sort();
        percentile(&w, 0.50)
    });
    report.add(
        "search_cost_of_storing_1000_comments",
        format!(
            "{} of CPU making the terms + writes {} with the FTS5 index against {} without (+{:.0} %; SQLite, pages of 50 as the scraper stores them, median of {WRITE_ROUNDS} runs each; compare scraper_cpu_per_1000_comments)",
            ms(terms_cpu),
            ms(with),
            ms(without),
            (with.as_secs_f64() / without.as_secs_f64() - 1.0) * 100.0
        ),
    );
}

pub(super) async fn run(report: &mut Report, real: &RealBackends, source: &[String]) {
    let texts = texts(source);
    let now = cova_domain::time::now_ms();
    storing_cost(report, &texts).await;

    let database = TestDatabase::sqlite();
    let db = database.db().await;
    let started = Instant::now();
    seed(&db, &texts, 400, 500, now).await;
    let seeded = started.elapsed();
    queries(report, &db, "sqlite", "200,000 kept comments over 400 posts of one account, SQLite", now).await;
    let index =
        count_rows(&db, "SELECT COALESCE(SUM(pgsize), 0) AS n FROM dbstat WHERE name LIKE 'comment_terms%'").await;
    report.add(
        "search_sqlite_index_bytes_per_comment",
        format!(
            "{:.0} bytes (FTS5 tables of 200,000 comments: {:.1} MiB; seeded in {})",
            index as f64 / 200_000.0,
            index as f64 / 1_048_576.0,
            ms(seeded)
        ),
    );

    if !real.reachable() {
        report.add("search_real", "skipped (PostgreSQL, Redis or RabbitMQ not reachable)");
        return;
    }
    let database = TestDatabase::postgres(&real.database).await.for_bulk_seeding();
    let db = database.db().await;
    let started = Instant::now();
    seed(&db, &texts, 2_000, 500, now).await;
    let seeded = started.elapsed();
    queries(report, &db, "postgres", "1,000,000 kept comments over 2,000 posts of one account, PostgreSQL", now).await;
    let index = count_rows(
        &db,
        "SELECT COALESCE(SUM(pg_relation_size(relid)), 0)::BIGINT AS n FROM pg_partition_tree('job_comments_terms_idx')",
    )
    .await;
    report.add(
        "search_postgres_index_bytes_per_comment",
        format!(
            "{:.0} bytes (GIN index of 1,000,000 comments: {:.1} MiB; seeded in {})",
            index as f64 / 1_000_000.0,
            index as f64 / 1_048_576.0,
            ms(seeded)
        ),
    );
    let _ = database.drop_database().await;
}
