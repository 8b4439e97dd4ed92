//! Reading a scrape's comments (a job's result, an analysis' breakdown, an export): pages of
//! top-level comments with their replies, sorted and filtered in the database; the stored
//! comment bodies are handed out as they are, and written as JSON by copying them
//! ([`write_page`]), never parsed again. A complete job's first page is kept written
//! ([`FirstPage`]).

use super::comment_days::rows_of;
use crate::schema::job_comments;
use crate::{Db, Result, with_conn, with_read_conn};
use cova_domain::time::rfc3339;
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
}

type RowTuple = (i64, String, Option<String>, String, Option<i64>);

/// The columns of a [`Row`], in [`RowTuple`] order.
const COLUMNS: (
    job_comments::position,
    job_comments::comment_id,
    job_comments::parent_id,
    job_comments::body,
    job_comments::first_seen_at,
) = (
    job_comments::position,
    job_comments::comment_id,
    job_comments::parent_id,
    job_comments::body,
    job_comments::first_seen_at,
);

fn row((position, comment_id, parent_id, body, first_seen_at): RowTuple) -> Row {
    Row { position, comment_id, parent_id, body, first_seen_at }
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

/// Applies the query's filters to a boxed `job_comments` query.
macro_rules! filters {
    ($q:expr, $query:expr) => {{
        let mut q = $q;
        if let Some(text) = &$query.text {
            q = q.filter(job_comments::search.like(like_pattern(text)).escape('\\'));
        }
        if let Some(since) = $query.seen_since {
            q = q.filter(job_comments::first_seen_at.ge(since));
        }
        q
    }};
}

/// The top-level comments a page lists, in its order, as a boxed query selecting `$select`.
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
            Sort::Newest => top.order((job_comments::posted_at.desc(), job_comments::position.asc())),
        };
        match $query.from {
            Some(From::Position(p)) => top = top.filter(job_comments::position.gt(p)),
            Some(From::Offset(n)) => top = top.offset(n.max(0)),
            None => {}
        }
        top.limit($query.limit)
    }};
}

/// Evaluates to the day a scrape's comments are stored under ([`super::comment_days`]), or
/// returns `$none` when there is no such scrape. Every read names the day, so that PostgreSQL
/// plans and reads that day's partition alone.
macro_rules! day_or {
    ($c:ident, $job_id:expr, $none:expr) => {
        match crate::schema::jobs::table
            .find($job_id)
            .select(crate::schema::jobs::comments_day)
            .first::<Option<i64>>($c)
            .await
            .optional()?
            .flatten()
        {
            Some(day) => day,
            None => return Ok($none),
        }
    };
}

pub async fn page(db: &Db, job_id: &str, query: &Query) -> Result<Page> {
    let mut conn = db.read_conn().await?;
    with_read_conn!(&mut conn, |c| {
        let day = day_or!(c, job_id, Page::default());
        if !query.filtered() && query.sort == Sort::Platform {
            // In platform order, one statement prepared once: the threads (a top-level comment
            // and its replies) of the page's top-level comments, by the index on threads.
            // Every comment of the selected threads, a parent before its replies.
            let rows: Vec<RowTuple> = job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::thread.eq_any(top_level!(
                    job_id,
                    day,
                    query,
                    None::<Vec<String>>,
                    job_comments::position.nullable()
                )))
                .order((job_comments::thread.asc(), job_comments::position.asc()))
                .select(COLUMNS)
                .load(c)
                .await?;
            let rows: Vec<Row> = rows.into_iter().map(row).collect();
            let (top, replies) = rows.into_iter().partition(|r| r.parent_id.is_none());
            return Ok(Page { top, replies });
        }
        if !query.filtered() {
            // Two statements, each prepared once: the page's top-level comments, then the
            // replies of the same selection (a subquery rather than a list of bound ids).
            let top: Vec<Row> = top_level!(job_id, day, query, None::<Vec<String>>, COLUMNS)
                .load::<RowTuple>(c)
                .await?
                .into_iter()
                .map(row)
                .collect();
            if top.is_empty() {
                return Ok(Page::default());
            }
            let ids = top_level!(job_id, day, query, None::<Vec<String>>, job_comments::comment_id.nullable());
            let replies = job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::parent_id.eq_any(ids))
                .order(job_comments::position.asc())
                .select(COLUMNS)
                .load::<RowTuple>(c)
                .await?
                .into_iter()
                .map(row)
                .collect();
            return Ok(Page { top, replies });
        }
        // With a filter: a top-level comment is listed when it or one of its replies matches.
        let q = job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::parent_id.is_not_null())
            .select(job_comments::parent_id)
            .distinct()
            .into_boxed();
        let found: Vec<Option<String>> = filters!(q, query).load(c).await?;
        let mut listed: Vec<String> = found.into_iter().flatten().collect();
        let own = job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::parent_id.is_null())
            .select(job_comments::comment_id)
            .into_boxed();
        let own: Vec<String> = filters!(own, query).load(c).await?;
        listed.extend(own);
        let top: Vec<Row> = top_level!(job_id, day, query, Some(listed), COLUMNS)
            .load::<RowTuple>(c)
            .await?
            .into_iter()
            .map(row)
            .collect();
        let ids: Vec<&str> = top.iter().map(|r| r.comment_id.as_str()).collect();
        let mut replies = Vec::new();
        for chunk in ids.chunks(500) {
            let q = job_comments::table
                .filter(rows_of(job_id, day))
                .filter(job_comments::parent_id.eq_any(chunk.to_vec()))
                .order(job_comments::position.asc())
                .select(COLUMNS)
                .into_boxed();
            replies.extend(filters!(q, query).load::<RowTuple>(c).await?.into_iter().map(row));
        }
        Ok(Page { top, replies })
    })
}

/// Up to `limit` comments of a scrape after `after` (a position), in collection order, a
/// parent before its replies: an export reads the whole breakdown in such chunks.
pub async fn chunk(db: &Db, job_id: &str, after: i64, limit: i64) -> Result<Vec<Row>> {
    let mut conn = db.conn().await?;
    let rows: Vec<RowTuple> = with_conn!(&mut conn, |c| {
        let day = day_or!(c, job_id, Vec::new());
        job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::position.gt(after))
            .order(job_comments::position.asc())
            .limit(limit)
            .select(COLUMNS)
            .load(c)
            .await
    })?;
    Ok(rows.into_iter().map(row).collect())
}

/// How many comments of a scrape (replies included) were posted before `at` (unix ms): what a
/// post had at an age, counted from its comments' own times.
pub async fn count_before(db: &Db, job_id: &str, at: i64) -> Result<u64> {
    let mut conn = db.conn().await?;
    let n: i64 = with_conn!(&mut conn, |c| {
        let day = day_or!(c, job_id, 0);
        job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::posted_at.gt(0))
            .filter(job_comments::posted_at.lt(at))
            .count()
            .get_result(c)
            .await
    })?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// When each comment of a scrape (replies included) posted at or after `since` (unix ms) was
/// posted, in no order: what a spike check counts, without reading the comments themselves.
pub async fn posted_since(db: &Db, job_id: &str, since: i64) -> Result<Vec<i64>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        let day = day_or!(c, job_id, Vec::new());
        job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::posted_at.ge(since.max(1)))
            .select(job_comments::posted_at)
            .load(c)
            .await
    })?)
}

/// Up to `limit` comments of a scrape posted in `[from, to)` (unix ms), the latest first.
pub async fn posted_in(db: &Db, job_id: &str, (from, to): (i64, i64), limit: i64) -> Result<Vec<Row>> {
    let mut conn = db.conn().await?;
    let rows: Vec<RowTuple> = with_conn!(&mut conn, |c| {
        let day = day_or!(c, job_id, Vec::new());
        job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::posted_at.ge(from.max(1)))
            .filter(job_comments::posted_at.lt(to))
            .order((job_comments::posted_at.desc(), job_comments::position.asc()))
            .limit(limit)
            .select(COLUMNS)
            .load(c)
            .await
    })?;
    Ok(rows.into_iter().map(row).collect())
}

/// When the first comment of a scrape posted at or after `since` (unix ms) was posted.
pub async fn first_posted_since(db: &Db, job_id: &str, since: i64) -> Result<Option<i64>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        let day = day_or!(c, job_id, None);
        job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::posted_at.ge(since.max(1)))
            .select(diesel::dsl::min(job_comments::posted_at))
            .first::<Option<i64>>(c)
            .await
    })?)
}

/// The comments of a scrape first seen at `at` (the scrape's new comments), in collection order.
pub async fn first_seen_at(db: &Db, job_id: &str, at: i64) -> Result<Vec<Row>> {
    let mut conn = db.conn().await?;
    let rows: Vec<RowTuple> = with_conn!(&mut conn, |c| {
        let day = day_or!(c, job_id, Vec::new());
        job_comments::table
            .filter(rows_of(job_id, day))
            .filter(job_comments::first_seen_at.eq(at))
            .order(job_comments::position.asc())
            .select(COLUMNS)
            .load(c)
            .await
    })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn row(position: i64, id: &str, parent: Option<&str>, body: Value, seen: Option<i64>) -> Row {
        Row {
            position,
            comment_id: id.into(),
            parent_id: parent.map(Into::into),
            body: body.to_string(),
            first_seen_at: seen,
        }
    }

    /// The rendering the writer replaces: each body parsed, `first_seen_at` added, replies
    /// nested; the reference the written JSON must equal.
    fn parsed(page: &Page) -> Vec<Value> {
        let comment = |row: &Row| -> Option<Value> {
            let mut v = serde_json::from_str::<Value>(&row.body).ok()?;
            v.as_object_mut()?.insert("first_seen_at".into(), json!(row.first_seen_at.map(rfc3339)));
            Some(v)
        };
        let mut by_parent: HashMap<String, Vec<Value>> = HashMap::new();
        for row in &page.replies {
            if let (Some(parent), Some(v)) = (&row.parent_id, comment(row)) {
                by_parent.entry(parent.clone()).or_default().push(v);
            }
        }
        page.top
            .iter()
            .filter_map(|row| {
                let mut v = comment(row)?;
                let replies = by_parent.remove(&row.comment_id).unwrap_or_default();
                v.as_object_mut()?.insert("replies".into(), Value::Array(replies));
                Some(v)
            })
            .collect()
    }

    fn sample() -> Page {
        Page {
            top: vec![
                row(0, "a", None, json!({"id": "a", "text": "first \"quoted\" }"}), Some(1_700_000_000_000)),
                row(3, "b", None, json!({"id": "b", "text": "no replies"}), None),
                row(5, "c", None, json!({}), None),
            ],
            replies: vec![
                row(1, "a1", Some("a"), json!({"id": "a1", "text": "r1"}), Some(1_700_000_000_000)),
                row(2, "a2", Some("a"), json!({"id": "a2", "text": "r2"}), None),
                row(6, "c1", Some("c"), json!({"id": "c1"}), None),
            ],
        }
    }

    #[test]
    fn stored_bodies_are_nested_as_the_parsed_rendering_would() {
        let page = sample();
        let mut out = b"[".to_vec();
        let mut first = true;
        write_page(&mut out, &page, &mut first);
        // A second page continues the same array.
        let more = Page { top: vec![row(9, "d", None, json!({"id": "d"}), None)], replies: vec![] };
        write_page(&mut out, &more, &mut first);
        out.push(b']');
        let written: Value = serde_json::from_slice(&out).expect("valid JSON");
        let mut expected = parsed(&page);
        expected.extend(parsed(&more));
        assert_eq!(written, Value::Array(expected));
    }

    #[test]
    fn a_body_that_is_not_an_object_is_left_out() {
        let page = Page {
            top: vec![row(0, "a", None, json!("text"), None), row(1, "b", None, json!({"id": "b"}), None)],
            replies: vec![],
        };
        let mut out = b"[".to_vec();
        write_page(&mut out, &page, &mut true);
        out.push(b']');
        let written: Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(written, json!([{"id": "b", "first_seen_at": null, "replies": []}]));
    }

    /// A kept first page serves any smaller limit as the stream would have written it, and a
    /// larger one only when it holds every comment.
    #[test]
    fn a_first_page_serves_the_pages_it_holds() {
        let page = sample();
        let kept = FirstPage::of(&page);
        assert!(kept.all, "three comments are all of them");
        for limit in 1..=5 {
            let (body, written) = kept.serve(limit).expect("held");
            let served: Value = serde_json::from_slice(&[b"[", &body[..], b"]"].concat()).expect("valid JSON");
            let n = usize::try_from(limit.min(3)).expect("small");
            assert_eq!(served, Value::Array(parsed(&page)[..n].to_vec()), "limit {limit}");
            assert_eq!(written.top_level, limit.min(3));
            assert_eq!(written.last_position, Some([0, 3, 5][n - 1]));
        }
        let cut = FirstPage { all: false, ..kept };
        assert!(cut.serve(3).is_some());
        assert!(cut.serve(4).is_none(), "a page that is not all of them cannot say what follows it");
    }

    #[test]
    fn a_first_page_stops_before_its_size_limit() {
        let long = "x".repeat(FIRST_PAGE_MAX_BYTES / 3);
        let page = Page {
            top: (0..5).map(|n| row(n, &n.to_string(), None, json!({"text": long}), None)).collect(),
            replies: vec![],
        };
        let kept = FirstPage::of(&page);
        assert_eq!((kept.tops.len(), kept.all), (2, false));
    }
}
