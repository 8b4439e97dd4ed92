//! Reading a scrape's comments (a job's result, an analysis' breakdown, an export): pages of
//! top-level comments with their replies, sorted and filtered in the database; the stored
//! comment bodies are handed out as they are.

use super::comment_days::rows_of;
use crate::schema::job_comments;
use crate::{Db, Result, with_conn, with_read_conn};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

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
