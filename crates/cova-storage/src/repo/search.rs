//! Searching every comment an account keeps (the current breakdown of each ready entry of its
//! library) with each backend's full-text engine: PostgreSQL's text search over the stored
//! vector `job_comments.terms_vector` and its GIN index `job_comments_terms_idx`, SQLite's FTS5
//! table `comment_terms`. Both read the terms cova wrote with each comment; the query arrives
//! already in each engine's syntax (`cova_analyzers::search::Query`).

use crate::Db;
use crate::Result;
use crate::schema::analyses;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, SmallInt, Text};

/// Which comments a search may return besides matching the words; `None` is "any".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub platform: Option<String>,
    /// Post refs; empty is every post.
    pub refs: Vec<String>,
    pub creator: Option<String>,
    /// The comment's own time (unix ms), `since` inclusive, `until` exclusive.
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub language: Option<String>,
    /// A stored sentiment code.
    pub sentiment: Option<i16>,
    pub min_likes: i64,
    /// `Some(true)`: replies only; `Some(false)`: top-level comments only.
    pub replies: Option<bool>,
    pub media: Option<bool>,
    /// A lower-cased author handle.
    pub author: Option<String>,
}

/// The order of hits; ties go newest first, then by job and comment id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    #[default]
    Relevance,
    Newest,
    Likes,
}

/// The query in each engine's syntax.
#[derive(Debug, Clone, Copy)]
pub struct Words<'a> {
    pub fts5: &'a str,
    pub tsquery: &'a str,
}

/// One comment found, with its post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub r#ref: String,
    pub platform: String,
    pub url: String,
    /// The post's metadata (JSON), when it was read.
    pub metadata: Option<String>,
    pub comment_id: String,
    pub parent_id: Option<String>,
    /// The comment as the API shows it (JSON, without `replies`).
    pub body: String,
    pub first_seen_at: Option<i64>,
    pub language: Option<String>,
}

/// A post of the hits: its scrape's job, ref, platform, URL and metadata.
type PostRow = (Option<String>, String, String, String, Option<String>);

#[derive(QueryableByName)]
struct Found {
    #[diesel(sql_type = Text)]
    job_id: String,
    #[diesel(sql_type = Text)]
    comment_id: String,
    #[diesel(sql_type = Nullable<Text>)]
    parent_id: Option<String>,
    #[diesel(sql_type = Text)]
    body: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    first_seen_at: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    language: Option<String>,
}

/// The account's posts a search looks in: the scrape of each ready entry of its library (saved:
/// not a workspace session's unsaved analysis) that passes the post filters; a creator filter
/// names a creator the account still follows. `json_each` and `jsonb_array_elements_text` read the refs as one JSON array.
fn posts_sql(postgres: bool) -> String {
    let refs =
        if postgres { "SELECT jsonb_array_elements_text(CAST(? AS jsonb))" } else { "SELECT value FROM json_each(?)" };
    let ready = cova_domain::AnalysisStatus::Ready.as_str();
    format!(
        "SELECT a.last_job_id FROM analyses a WHERE a.account_id = ? AND a.status = '{ready}' \
         AND a.saved_at IS NOT NULL AND a.last_job_id IS NOT NULL AND (? IS NULL OR a.platform = ?) \
         AND (? = '[]' OR a.ref IN ({refs})) \
         AND (? IS NULL OR (a.creator_ref = ? AND EXISTS (SELECT 1 FROM creators f \
              WHERE f.account_id = a.account_id AND f.ref = a.creator_ref)))"
    )
}

/// The comment filters, on `c`.
const COMMENT_FILTERS: &str = "(? IS NULL OR c.posted_at >= ?) AND (? IS NULL OR c.posted_at < ?) \
     AND (? IS NULL OR COALESCE(c.language, 'und') = ?) AND (? IS NULL OR c.sentiment = ?) AND c.likes >= ? \
     AND (? IS NULL OR (c.parent_id IS NOT NULL) = ?) AND (? IS NULL OR c.media = ?) \
     AND (? IS NULL OR c.author = ?)";

const COLUMNS: &str = "c.job_id, c.comment_id, c.parent_id, c.body, c.first_seen_at, c.language";

/// A page of the account's comments that match `words` and `filter`, in `order`, skipping
/// `offset` hits, and how many rows the page read: a hit whose post a refresh replaced between
/// the two reads is left out, but the page still counts it, so that paging goes on.
pub async fn comments(
    db: &Db,
    account_id: &str,
    words: Words<'_>,
    filter: &Filter,
    order: Order,
    (offset, limit): (i64, i64),
) -> Result<(Vec<Hit>, usize)> {
    let mut conn = db.conn().await?;
    let tx = &mut conn.tx();
    let postgres = tx.is_postgres();
    let vector = "c.terms_vector";
    let (from, matching, rank) = if postgres {
        (
            "job_comments c".to_owned(),
            format!("{vector} @@ to_tsquery('simple', ?)"),
            format!("ts_rank({vector}, to_tsquery('simple', ?)) DESC"),
        )
    } else {
        (
            "comment_terms JOIN job_comments c ON c.rowid = comment_terms.rowid".to_owned(),
            "comment_terms MATCH ?".to_owned(),
            "bm25(comment_terms)".to_owned(),
        )
    };
    // Ids compared byte by byte on both databases, so that ties come in the same order.
    let ties = if postgres {
        "c.posted_at DESC, c.job_id COLLATE \"C\", c.comment_id COLLATE \"C\""
    } else {
        "c.posted_at DESC, c.job_id, c.comment_id"
    };
    let order_by = match order {
        Order::Relevance => format!("{rank}, {ties}"),
        Order::Newest => ties.to_owned(),
        Order::Likes => format!("c.likes DESC, {ties}"),
    };
    let sql = crate::pool::bind_params(
        postgres,
        &format!(
            "SELECT {COLUMNS} FROM {from} WHERE {matching} AND c.job_id IN ({}) AND {COMMENT_FILTERS} \
             ORDER BY {order_by} LIMIT ? OFFSET ?",
            posts_sql(postgres)
        ),
    );
    let engine_words = if postgres { words.tsquery } else { words.fts5 };
    let refs = serde_json::to_string(&filter.refs).unwrap_or_else(|_| "[]".into());
    let query = diesel::sql_query(sql)
        .bind::<Text, _>(engine_words)
        .bind::<Text, _>(account_id)
        .bind::<Nullable<Text>, _>(filter.platform.as_deref())
        .bind::<Nullable<Text>, _>(filter.platform.as_deref())
        .bind::<Text, _>(&refs)
        .bind::<Text, _>(&refs)
        .bind::<Nullable<Text>, _>(filter.creator.as_deref())
        .bind::<Nullable<Text>, _>(filter.creator.as_deref())
        .bind::<Nullable<BigInt>, _>(filter.since)
        .bind::<Nullable<BigInt>, _>(filter.since)
        .bind::<Nullable<BigInt>, _>(filter.until)
        .bind::<Nullable<BigInt>, _>(filter.until)
        .bind::<Nullable<Text>, _>(filter.language.as_deref())
        .bind::<Nullable<Text>, _>(filter.language.as_deref())
        .bind::<Nullable<SmallInt>, _>(filter.sentiment)
        .bind::<Nullable<SmallInt>, _>(filter.sentiment)
        .bind::<BigInt, _>(filter.min_likes)
        .bind::<Nullable<Bool>, _>(filter.replies)
        .bind::<Nullable<Bool>, _>(filter.replies)
        .bind::<Nullable<Bool>, _>(filter.media)
        .bind::<Nullable<Bool>, _>(filter.media)
        .bind::<Nullable<Text>, _>(filter.author.as_deref())
        .bind::<Nullable<Text>, _>(filter.author.as_deref());
    let found: Vec<Found> = if order == Order::Relevance && postgres {
        tx.load(query.bind::<Text, _>(engine_words).bind::<BigInt, _>(limit).bind::<BigInt, _>(offset)).await?
    } else {
        tx.load(query.bind::<BigInt, _>(limit).bind::<BigInt, _>(offset)).await?
    };
    let read = found.len();
    if found.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let mut jobs: Vec<&str> = found.iter().map(|f| f.job_id.as_str()).collect();
    jobs.sort_unstable();
    jobs.dedup();
    let posts: Vec<PostRow> = tx
        .load(
            analyses::table
                .filter(analyses::account_id.eq(account_id))
                .filter(analyses::last_job_id.eq_any(jobs))
                .select((analyses::last_job_id, analyses::ref_, analyses::platform, analyses::url, analyses::metadata)),
        )
        .await?;
    let hits = found
        .into_iter()
        .filter_map(|f| {
            let (_, r#ref, platform, url, metadata) =
                posts.iter().find(|p| p.0.as_deref() == Some(f.job_id.as_str()))?.clone();
            Some(Hit {
                r#ref,
                platform,
                url,
                metadata,
                comment_id: f.comment_id,
                parent_id: f.parent_id,
                body: f.body,
                first_seen_at: f.first_seen_at,
                language: f.language,
            })
        })
        .collect();
    Ok((hits, read))
}

#[derive(QueryableByName)]
struct LastRow {
    #[diesel(sql_type = BigInt)]
    rowid: i64,
}

/// SQLite: the last row id of `job_comments` so far, before a page is stored (0 on PostgreSQL,
/// whose index is kept by the database).
pub(crate) async fn last_row(tx: &mut crate::Tx<'_>) -> Result<i64> {
    if tx.is_postgres() {
        return Ok(0);
    }
    let last: LastRow =
        tx.get_result(diesel::sql_query("SELECT COALESCE(MAX(rowid), 0) AS rowid FROM job_comments")).await?;
    Ok(last.rowid)
}

/// SQLite: puts the comments stored after row `after` ([`last_row`]) into the FTS5 index, in one
/// statement. FTS5 writes out what it holds at the end of each statement, so a row-by-row
/// insert (a trigger) made a segment per comment to merge later. New rows get ids above the last
/// one, and the page's transaction is the only writer. Nothing to do on PostgreSQL.
pub(crate) async fn index_rows_after(tx: &mut crate::Tx<'_>, after: i64) -> Result<()> {
    if tx.is_postgres() {
        return Ok(());
    }
    let sql = "INSERT INTO comment_terms (rowid, terms) SELECT rowid, terms FROM job_comments WHERE rowid > ?";
    tx.execute(diesel::sql_query(sql).bind::<BigInt, _>(after)).await?;
    Ok(())
}
