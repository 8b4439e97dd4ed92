//! Reading a scrape's comments (a job's result, an analysis' breakdown, an export): pages of
//! top-level comments with their replies, sorted and filtered in the database; the stored
//! comment bodies are handed out as they are, and written as JSON by copying them
//! ([`write_page`]), never parsed again. A complete job's first page is kept written
//! ([`FirstPage`]).

use super::comment_days::rows_of;
use crate::schema::{job_comments, jobs};
use crate::{Db, Read, Result, Tx};
use cova_domain::time::rfc3339;
use diesel::dsl;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use std::collections::HashMap;

/// One stored comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Collection order (platform order for top-level comments).
    pub position: i64,
    pub comment_id: String,
    pub parent_id: Option<String>,
    /// The comment as the API shows it (JSON, without `replies`).
    pub body: String,
    pub first_seen_at: Option<i64>,
    /// The offline analyzer's sentiment code, once judged (see `store_sentiments`).
    pub sentiment: Option<i16>,
}

type RowTuple = (i64, String, Option<String>, String, Option<i64>, Option<i16>);

/// The columns of a [`Row`], in [`RowTuple`] order.
const COLUMNS: (
    job_comments::position,
    job_comments::comment_id,
    job_comments::parent_id,
    job_comments::body,
    job_comments::first_seen_at,
    job_comments::sentiment,
) = (
    job_comments::position,
    job_comments::comment_id,
    job_comments::parent_id,
    job_comments::body,
    job_comments::first_seen_at,
    job_comments::sentiment,
);

fn row((position, comment_id, parent_id, body, first_seen_at, sentiment): RowTuple) -> Row {
    Row { position, comment_id, parent_id, body, first_seen_at, sentiment }
}

/// The order of top-level comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// As the platform lists them.
    #[default]
    Platform,
    /// Most liked first.
    Likes,
    /// Most recently posted first.
    Newest,
}

/// Where a page starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// After this position (platform order).
    Position(i64),
    /// After this many top-level comments (any order).
    Offset(i64),
}

#[derive(Debug, Clone, Default)]
pub struct Query {
    pub sort: Sort,
    /// Lower-cased text to find in a comment's text or author.
    pub text: Option<String>,
    /// Only comments first seen at or after this time (a scrape's new comments).
    pub seen_since: Option<i64>,
    pub from: Option<From>,
    pub limit: i64,
}

impl Query {
    fn filtered(&self) -> bool {
        self.text.is_some() || self.seen_since.is_some()
    }
}

/// A page: top-level comments, and the replies of those (all of them; only the matching ones
/// when the query filters). With a filter, a top-level comment is listed when it or one of its
/// replies matches.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub top: Vec<Row>,
    pub replies: Vec<Row>,
}

/// A `LIKE` pattern matching `text` anywhere, its wildcards (`%`, `_`) and the escape taken literally.
pub fn like_pattern(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    format!("%{escaped}%")
}

/// The top-level comments a page lists, in its order, selecting `$select`, as a boxed query. A
/// boxed query names its database, so this is built in each arm of a `match` on the connection,
/// which picks it (a macro, where a generic function would need a bound per clause).
macro_rules! top_level {
    ($job_id:expr, $day:expr, $query:expr, $matching:expr, $select:expr) => {{
        let mut top = job_comments::table
            .filter(rows_of($job_id, $day))
            .filter(job_comments::parent_id.is_null())
            .select($select)
            .into_boxed();
        if let Some(matching) = $matching {
            top = top.filter(job_comments::comment_id.eq_any(matching));
        }
        top = match $query.sort {
            Sort::Platform => top.order(job_comments::position.asc()),
            Sort::Likes => top.order((job_comments::likes.desc(), job_comments::position.asc())),
            Sort::Newest => top.order(latest_first()),
        };
        match $query.from {
            Some(From::Position(p)) => top = top.filter(job_comments::position.gt(p)),
            Some(From::Offset(n)) => top = top.offset(n.max(0)),
            None => {}
        }
        top.limit($query.limit)
    }};
}

/// Applies the query's filters to a boxed query of comments.
fn filters<Q>(mut q: Q, query: &Query) -> Q
where
    Q: diesel::query_dsl::methods::FilterDsl<dsl::Escape<dsl::Like<job_comments::search, String>>, Output = Q>
        + diesel::query_dsl::methods::FilterDsl<dsl::GtEq<job_comments::first_seen_at, i64>, Output = Q>,
{
    if let Some(text) = &query.text {
        q = q.filter(job_comments::search.like(like_pattern(text)).escape('\\'));
    }
    if let Some(since) = query.seen_since {
        q = q.filter(job_comments::first_seen_at.ge(since));
    }
    q
}

/// The day a scrape's comments are stored under ([`super::comment_days`]); none when there is
/// no such scrape. Every read names the day, so that PostgreSQL plans and reads that day's
/// partition alone.
fn comments_day(job_id: &str) -> dsl::Select<dsl::Find<jobs::table, &str>, jobs::comments_day> {
    jobs::table.find(job_id).select(jobs::comments_day)
}

/// Posted in `[from, to)` (unix ms); a comment of unknown time (0) never is.
fn posted_within(
    from: i64,
    to: i64,
) -> dsl::And<dsl::GtEq<job_comments::posted_at, i64>, dsl::Lt<job_comments::posted_at, i64>> {
    job_comments::posted_at.ge(from.max(1)).and(job_comments::posted_at.lt(to))
}

/// The latest first, ties in collection order.
fn latest_first() -> (dsl::Desc<job_comments::posted_at>, dsl::Asc<job_comments::position>) {
    (job_comments::posted_at.desc(), job_comments::position.asc())
}

/// [`comments_day`], read on `tx`.
async fn day_in(tx: &mut Tx<'_>, job_id: &str) -> Result<Option<i64>> {
    Ok(tx.first::<Option<i64>, _>(comments_day(job_id)).await.optional()?.flatten())
}

/// A page of a scrape's comments (see [`Page`]), read on a connection for short reads. Its
/// queries are boxed, so each is written in a `match` on the connection: a boxed query names its
/// database.
pub async fn page(db: &Db, job_id: &str, query: &Query) -> Result<Page> {
    let mut conn = db.read_conn().await?;
    let read = &mut conn.read();
    let Some(day) = read.first::<Option<i64>, _>(comments_day(job_id)).await.optional()?.flatten() else {
        return Ok(Page::default());
    };
    if query.filtered() {
        filtered_page(read, job_id, day, query).await
    } else if query.sort == Sort::Platform {
        platform_page(read, job_id, day, query).await
    } else {
        sorted_page(read, job_id, day, query).await
    }
}

/// A page in platform order, unfiltered: one statement prepared once, the threads (a
/// top-level comment and its replies) of the page's top-level comments, by the index on
/// threads; every comment of the selected threads, a parent before its replies.
async fn platform_page(read: &mut Read<'_>, job_id: &str, day: i64, query: &Query) -> Result<Page> {
    let position = job_comments::position.nullable();
    let order = (job_comments::thread.asc(), job_comments::position.asc());
    let rows: Vec<RowTuple> = match read {
        Read::Pg(c) => {
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::thread.eq_any(top_level!(job_id, day, query, None::<Vec<String>>, position)))
                .order(order)
                .select(COLUMNS)
                .load(&mut **c)
                .await?
        }
        Read::Sqlite(c) => {
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::thread.eq_any(top_level!(job_id, day, query, None::<Vec<String>>, position)))
                .order(order)
                .select(COLUMNS)
                .load(&mut **c)
                .await?
        }
    };
    let (top, replies) = rows.into_iter().map(row).partition(|r| r.parent_id.is_none());
    Ok(Page { top, replies })
}

/// A page in another order, unfiltered: two statements, each prepared once, the page's
/// top-level comments, then the replies of the same selection (a subquery rather than a list
/// of bound ids).
async fn sorted_page(read: &mut Read<'_>, job_id: &str, day: i64, query: &Query) -> Result<Page> {
    let top: Vec<RowTuple> = match read {
        Read::Pg(c) => top_level!(job_id, day, query, None::<Vec<String>>, COLUMNS).load(&mut **c).await?,
        Read::Sqlite(c) => top_level!(job_id, day, query, None::<Vec<String>>, COLUMNS).load(&mut **c).await?,
    };
    if top.is_empty() {
        return Ok(Page::default());
    }
    let id = job_comments::comment_id.nullable();
    let replies: Vec<RowTuple> = match read {
        Read::Pg(c) => {
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::parent_id.eq_any(top_level!(job_id, day, query, None::<Vec<String>>, id)))
                .order(job_comments::position.asc())
                .select(COLUMNS)
                .load(&mut **c)
                .await?
        }
        Read::Sqlite(c) => {
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::parent_id.eq_any(top_level!(job_id, day, query, None::<Vec<String>>, id)))
                .order(job_comments::position.asc())
                .select(COLUMNS)
                .load(&mut **c)
                .await?
        }
    };
    Ok(Page { top: top.into_iter().map(row).collect(), replies: replies.into_iter().map(row).collect() })
}

/// A filtered page: a top-level comment is listed when it or one of its replies matches.
async fn filtered_page(read: &mut Read<'_>, job_id: &str, day: i64, query: &Query) -> Result<Page> {
    let parents = job_comments::table
        .filter(rows_of(job_id, day))
        .filter(job_comments::parent_id.is_not_null())
        .select(job_comments::parent_id)
        .distinct();
    let found: Vec<Option<String>> = match read {
        Read::Pg(c) => filters(parents.into_boxed(), query).load(&mut **c).await?,
        Read::Sqlite(c) => filters(parents.into_boxed(), query).load(&mut **c).await?,
    };
    let mut listed: Vec<String> = found.into_iter().flatten().collect();
    let own = job_comments::table
        .filter(rows_of(job_id, day))
        .filter(job_comments::parent_id.is_null())
        .select(job_comments::comment_id);
    let own: Vec<String> = match read {
        Read::Pg(c) => filters(own.into_boxed(), query).load(&mut **c).await?,
        Read::Sqlite(c) => filters(own.into_boxed(), query).load(&mut **c).await?,
    };
    listed.extend(own);
    let top: Vec<RowTuple> = match read {
        Read::Pg(c) => top_level!(job_id, day, query, Some(listed), COLUMNS).load(&mut **c).await?,
        Read::Sqlite(c) => top_level!(job_id, day, query, Some(listed), COLUMNS).load(&mut **c).await?,
    };
    let top: Vec<Row> = top.into_iter().map(row).collect();
    let ids: Vec<&str> = top.iter().map(|r| r.comment_id.as_str()).collect();
    let mut replies = Vec::new();
    for chunk in ids.chunks(500) {
        let of_chunk = job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::parent_id.eq_any(chunk.to_vec()))
            .order(job_comments::position.asc())
            .select(COLUMNS);
        let rows: Vec<RowTuple> = match read {
            Read::Pg(c) => filters(of_chunk.into_boxed(), query).load(&mut **c).await?,
            Read::Sqlite(c) => filters(of_chunk.into_boxed(), query).load(&mut **c).await?,
        };
        replies.extend(rows.into_iter().map(row));
    }
    Ok(Page { top, replies })
}

/// Up to `limit` comments of a scrape after `after` (a position), in collection order, a
/// parent before its replies: an export reads the whole breakdown in such chunks.
pub async fn chunk(db: &Db, job_id: &str, after: i64, limit: i64) -> Result<Vec<Row>> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(Vec::new()) };
    let rows: Vec<RowTuple> = tx
        .load(
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::position.gt(after))
                .order(job_comments::position.asc())
                .limit(limit)
                .select(COLUMNS),
        )
        .await?;
    Ok(rows.into_iter().map(row).collect())
}

/// How many comments of a scrape (replies included) were posted before `at` (unix ms): what a
/// post had at an age, counted from its comments' own times.
pub async fn count_before(db: &Db, job_id: &str, at: i64) -> Result<u64> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(0) };
    let n: i64 = tx
        .get_result(
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::posted_at.gt(0))
                .filter(job_comments::posted_at.lt(at))
                .count(),
        )
        .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

#[derive(diesel::QueryableByName)]
struct Bucket {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    bucket: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    comments: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    earliest: i64,
}

/// The spans a spike check reads of a scrape (unix ms): `buckets` spans of `width` ms from
/// `start` on, the latest `window` of them (those from `window_start` on) and the time before.
#[derive(Debug, Clone, Copy)]
pub struct Spans {
    pub start: i64,
    pub width: i64,
    pub buckets: usize,
    pub window_start: i64,
    /// How many of the latest labels are read in the window, and before it.
    pub window_labels: i64,
    pub before_labels: i64,
}

/// What a spike check reads of a scrape, from the time index alone (never the rows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    /// Comments posted in each bucket, oldest first.
    pub counts: Vec<u64>,
    /// When the first of those counted was posted.
    pub first: Option<i64>,
    /// The stored sentiment codes (`None`: not judged yet) of the latest comments of the window,
    /// and of those before it: the latest first, ties in collection order.
    pub window: Vec<Option<i16>>,
    pub before: Vec<Option<i16>>,
}

/// A spike check's reads of a scrape ([`Timeline`]) in one transaction: the comments counted
/// per bucket by the database in one pass, and the stored labels of the latest ones.
pub async fn timeline(db: &Db, job_id: &str, spans: Spans) -> Result<Timeline> {
    use diesel::sql_types::{BigInt, Text};
    let mut out = Timeline { counts: vec![0u64; spans.buckets], ..Timeline::default() };
    let width = spans.width.max(1);
    let end = spans.start.saturating_add(width.saturating_mul(i64::try_from(spans.buckets).unwrap_or(i64::MAX)));
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(out) };
    let sql = crate::pool::bind_params(
        tx.is_postgres(),
        "SELECT (posted_at - ?) / ? AS bucket, COUNT(*) AS comments, MIN(posted_at) AS earliest FROM job_comments \
         WHERE job_id = ? AND comments_day = ? AND posted_at >= ? AND posted_at < ? GROUP BY 1",
    );
    let query = diesel::sql_query(sql)
        .bind::<BigInt, _>(spans.start)
        .bind::<BigInt, _>(width)
        .bind::<Text, _>(job_id)
        .bind::<BigInt, _>(day)
        .bind::<BigInt, _>(spans.start.max(1))
        .bind::<BigInt, _>(end);
    for b in tx.load::<Bucket, _>(query).await? {
        if let Some(slot) = usize::try_from(b.bucket).ok().and_then(|i| out.counts.get_mut(i)) {
            *slot = u64::try_from(b.comments).unwrap_or(0);
            out.first = Some(out.first.map_or(b.earliest, |f| f.min(b.earliest)));
        }
    }
    let labels = |from: i64, to: i64, limit: i64| {
        job_comments::table
            .filter(rows_of(job_id, day))
            .filter(posted_within(from, to))
            .order(latest_first())
            .limit(limit)
            .select(job_comments::sentiment)
    };
    let window_start = spans.window_start.clamp(spans.start, end);
    out.window = tx.load(labels(window_start, end, spans.window_labels)).await?;
    out.before = tx.load(labels(spans.start, window_start, spans.before_labels)).await?;
    Ok(out)
}

/// The stored sentiment codes of a scrape's first `limit` comments in collection order.
pub async fn first_sentiments(db: &Db, job_id: &str, limit: i64) -> Result<Vec<Option<i16>>> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(Vec::new()) };
    Ok(tx
        .load(
            job_comments::table
                .filter(rows_of(job_id, day))
                .order(job_comments::position.asc())
                .limit(limit)
                .select(job_comments::sentiment),
        )
        .await?)
}

/// Up to `limit` comments of a scrape whose sentiment is not stored yet: `(comment id, body)`.
pub async fn unjudged(db: &Db, job_id: &str, limit: i64) -> Result<Vec<(String, String)>> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(Vec::new()) };
    Ok(tx
        .load(
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::sentiment.is_null())
                .order(job_comments::position.asc())
                .limit(limit)
                .select((job_comments::comment_id, job_comments::body)),
        )
        .await?)
}

/// Stores the sentiment code of each `(comment id, code)` of a scrape, row by row: each write
/// holds one row's lock at a time, so that it never deadlocks with a removal of the same rows
/// (a label not written is judged again later).
pub async fn store_sentiments(db: &Db, job_id: &str, judged: &[(String, i16)]) -> Result<()> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(()) };
    for (comment_id, code) in judged {
        let row = job_comments::table.filter(rows_of(job_id, day)).filter(job_comments::comment_id.eq(comment_id));
        tx.execute(diesel::update(row).set(job_comments::sentiment.eq(*code))).await?;
    }
    Ok(())
}

/// Up to `limit` comments of a scrape posted in `[from, to)` (unix ms), the latest first.
pub async fn posted_in(db: &Db, job_id: &str, (from, to): (i64, i64), limit: i64) -> Result<Vec<Row>> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(Vec::new()) };
    let rows: Vec<RowTuple> = tx
        .load(
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(posted_within(from, to))
                .order(latest_first())
                .limit(limit)
                .select(COLUMNS),
        )
        .await?;
    Ok(rows.into_iter().map(row).collect())
}

/// When the first comment of a scrape posted at or after `since` (unix ms) was posted.
pub async fn first_posted_since(db: &Db, job_id: &str, since: i64) -> Result<Option<i64>> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(None) };
    Ok(tx
        .first::<Option<i64>, _>(
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::posted_at.ge(since.max(1)))
                .select(diesel::dsl::min(job_comments::posted_at)),
        )
        .await?)
}

/// The comments of a scrape first seen at `at` (the scrape's new comments), in collection order.
pub async fn first_seen_at(db: &Db, job_id: &str, at: i64) -> Result<Vec<Row>> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let Some(day) = day_in(tx, job_id).await? else { return Ok(Vec::new()) };
    let rows: Vec<RowTuple> = tx
        .load(
            job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::first_seen_at.eq(at))
                .order(job_comments::position.asc())
                .select(COLUMNS),
        )
        .await?;
    Ok(rows.into_iter().map(row).collect())
}

/// Writes one stored comment: its body with `first_seen_at` and, when given, its `replies`.
/// Bodies are JSON objects written by cova; one that is not is left out (false, nothing
/// written), as an unreadable one always was.
pub fn write_comment(out: &mut Vec<u8>, row: &Row, replies: Option<&[&Row]>) -> bool {
    let body = row.body.trim();
    let Some(open) = body.strip_suffix('}').filter(|_| body.starts_with('{')) else {
        tracing::warn!(comment.id = %row.comment_id, "a stored comment is not a JSON object; left out");
        return false;
    };
    out.extend_from_slice(open.as_bytes());
    if !open.trim_end().ends_with('{') {
        out.push(b',');
    }
    out.extend_from_slice(b"\"first_seen_at\":");
    match row.first_seen_at {
        Some(t) => {
            out.push(b'"');
            out.extend_from_slice(rfc3339(t).as_bytes());
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    if let Some(replies) = replies {
        out.extend_from_slice(b",\"replies\":[");
        let mut first_reply = true;
        for reply in replies {
            push_comment(out, reply, None, &mut first_reply);
        }
        out.push(b']');
    }
    out.push(b'}');
    true
}

/// Appends one stored comment as an element of a JSON array being written.
fn push_comment(out: &mut Vec<u8>, row: &Row, replies: Option<&[&Row]>, first: &mut bool) {
    let mark = out.len();
    if !*first {
        out.push(b',');
    }
    if write_comment(out, row, replies) {
        *first = false;
    } else {
        out.truncate(mark);
    }
}

/// Appends a page's top-level comments, each with its replies, to a JSON array being written.
pub fn write_page(out: &mut Vec<u8>, page: &Page, first: &mut bool) {
    let by_parent = replies_by_parent(page);
    for top in &page.top {
        let replies = by_parent.get(top.comment_id.as_str()).map_or(&[][..], Vec::as_slice);
        push_comment(out, top, Some(replies), first);
    }
}

/// A page's replies by the id of the comment they answer, in their order.
fn replies_by_parent(page: &Page) -> HashMap<&str, Vec<&Row>> {
    let mut by_parent: HashMap<&str, Vec<&Row>> = HashMap::new();
    for reply in &page.replies {
        if let Some(parent) = &reply.parent_id {
            by_parent.entry(parent.as_str()).or_default().push(reply);
        }
    }
    by_parent
}

/// What the stream wrote: the top-level comments, and the position of the last one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Written {
    pub top_level: i64,
    pub last_position: Option<i64>,
}

impl Written {
    /// What has been written once `page` follows.
    pub fn then(self, page: &Page) -> Written {
        Written {
            top_level: self.top_level + page.top.len() as i64,
            last_position: page.top.last().map(|r| r.position).or(self.last_position),
        }
    }
}

/// A complete job's first top-level comments, each written whole (with its replies), kept
/// beside the job's copy so that a poll is answered without reading them again, and while the
/// database does not answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct FirstPage {
    /// `(position, JSON)` of each top-level comment, in platform order.
    pub tops: Vec<(i64, String)>,
    /// These are all of the job's top-level comments.
    pub all: bool,
}

/// Top-level comments a first page keeps at most, and its size at most.
pub const FIRST_PAGE_TOPS: i64 = 50;
pub const FIRST_PAGE_MAX_BYTES: usize = 64 * 1024;

impl FirstPage {
    /// Writes a page (read with [`FIRST_PAGE_TOPS`] as its limit) as kept; fewer comments
    /// when they would pass [`FIRST_PAGE_MAX_BYTES`].
    pub fn of(page: &Page) -> Self {
        let by_parent = replies_by_parent(page);
        let (mut tops, mut bytes) = (Vec::new(), 0);
        for top in &page.top {
            let replies = by_parent.get(top.comment_id.as_str()).map_or(&[][..], Vec::as_slice);
            let mut out = Vec::new();
            if !write_comment(&mut out, top, Some(replies)) {
                continue;
            }
            bytes += out.len();
            if bytes > FIRST_PAGE_MAX_BYTES {
                return FirstPage { tops, all: false };
            }
            tops.push((top.position, String::from_utf8_lossy(&out).into_owned()));
        }
        FirstPage { tops, all: (page.top.len() as i64) < FIRST_PAGE_TOPS }
    }

    /// The first `limit` top-level comments as array elements, when this page holds them.
    pub fn serve(&self, limit: i64) -> Option<(Vec<u8>, Written)> {
        let held = self.tops.len() as i64;
        if limit > held && !self.all {
            return None;
        }
        let n = usize::try_from(limit.min(held)).unwrap_or(0);
        let mut out = Vec::with_capacity(self.tops[..n].iter().map(|(_, j)| j.len() + 1).sum());
        for (i, (_, json)) in self.tops[..n].iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(json.as_bytes());
        }
        let written = Written { top_level: n as i64, last_position: self.tops[..n].last().map(|(p, _)| *p) };
        Some((out, written))
    }
}

/// Reads and writes a complete job's first page (see [`FirstPage`]).
pub async fn first_page(db: &Db, job_id: &str) -> Result<FirstPage> {
    let read = page(db, job_id, &Query { limit: FIRST_PAGE_TOPS, ..Query::default() }).await?;
    Ok(FirstPage::of(&read))
}
