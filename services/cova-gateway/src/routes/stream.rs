//! Comments written from their stored JSON: a job's result and a library entry write their
//! comments a chunk of top-level comments (with their replies) at a time, copying each stored
//! body into the answer instead of parsing and re-serialising it. Memory per request is one
//! chunk, whatever the size of the breakdown.

use actix_web::http::header::ContentType;
use actix_web::web::Bytes;
use actix_web::{HttpResponse, HttpResponseBuilder};
use cova_domain::time::rfc3339;
use cova_storage::repo::breakdown::{self, From, Page, Query, Row, Sort};
use cova_storage::{Db, StorageError};
use futures::StreamExt;
use std::collections::HashMap;

/// Top-level comments read and written per step.
const CHUNK: i64 = 250;

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
    let mut by_parent: HashMap<&str, Vec<&Row>> = HashMap::new();
    for reply in &page.replies {
        if let Some(parent) = &reply.parent_id {
            by_parent.entry(parent.as_str()).or_default().push(reply);
        }
    }
    for top in &page.top {
        let replies = by_parent.get(top.comment_id.as_str()).map_or(&[][..], Vec::as_slice);
        push_comment(out, top, Some(replies), first);
    }
}

/// What the stream wrote: the top-level comments, and the position of the last one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Written {
    pub top_level: i64,
    pub last_position: Option<i64>,
}

impl Written {
    /// What has been written once `page` follows.
    fn then(self, page: &Page) -> Written {
        Written {
            top_level: self.top_level + page.top.len() as i64,
            last_position: page.top.last().map(|r| r.position).or(self.last_position),
        }
    }
}

/// The comments `query` selects of `job_id`'s scrape as the elements of a JSON array, read in
/// one statement: for a page that fits one chunk (a poll's), rendered whole to be kept.
pub async fn render_page(db: &Db, job_id: &str, query: &Query) -> Result<(Vec<u8>, Written), StorageError> {
    let query = Query { limit: query.limit.min(CHUNK), ..query.clone() };
    let page = breakdown::page(db, job_id, &query).await?;
    let mut out = Vec::with_capacity(page.top.len() * 600);
    write_page(&mut out, &page, &mut true);
    Ok((out, Written::default().then(&page)))
}

struct State<F> {
    db: Db,
    job_id: Option<String>,
    query: Query,
    suffix: Option<F>,
    written: Written,
    first: bool,
    /// The comments are all written (or there are none): only the suffix is left.
    exhausted: bool,
}

impl<F: FnOnce(Written) -> String> State<F> {
    /// Reads the next chunk and appends it to `out`.
    async fn next_chunk(&mut self, out: &mut Vec<u8>) -> Result<(), StorageError> {
        let remaining = self.query.limit - self.written.top_level;
        let Some(job_id) = self.job_id.as_deref().filter(|_| remaining > 0 && !self.exhausted) else {
            self.exhausted = true;
            return Ok(());
        };
        let chunk =
            Query { limit: remaining.min(CHUNK), from: next_from(&self.query, self.written), ..self.query.clone() };
        let page = breakdown::page(&self.db, job_id, &chunk).await?;
        out.reserve(page.top.len() * 600);
        write_page(out, &page, &mut self.first);
        self.written = self.written.then(&page);
        if (page.top.len() as i64) < chunk.limit || self.written.top_level >= self.query.limit {
            self.exhausted = true;
        }
        Ok(())
    }

    fn suffix(&mut self) -> String {
        self.suffix.take().map(|f| f(self.written)).unwrap_or_default()
    }
}

/// `prefix`, then the comments of `job_id`'s scrape that `query` selects (none without a
/// scrape) as the elements of a JSON array, then `suffix(written)`. The prefix ends with `[`
/// and the suffix starts with `]`. The first chunk is read before the answer starts, so a
/// database that does not answer is a 503 and an answer that fits one chunk (a page, a poll)
/// goes out whole with its length; a longer one streams the rest a chunk at a time, and a
/// database failure after that can only end it early (the log says why).
pub async fn respond<F>(
    db: Db,
    job_id: Option<String>,
    query: Query,
    prefix: String,
    suffix: F,
    mut builder: HttpResponseBuilder,
) -> Result<HttpResponse, StorageError>
where
    F: FnOnce(Written) -> String + 'static,
{
    let mut st =
        State { db, job_id, query, suffix: Some(suffix), written: Written::default(), first: true, exhausted: false };
    let mut head = prefix.into_bytes();
    st.next_chunk(&mut head).await?;
    builder.content_type(ContentType::json());
    if st.exhausted {
        head.extend_from_slice(st.suffix().as_bytes());
        return Ok(builder.body(head));
    }
    let rest = futures::stream::unfold(Some(st), |st| async move {
        let mut st = st?;
        if st.exhausted {
            let suffix = st.suffix();
            return Some((Ok(Bytes::from(suffix)), None));
        }
        let mut out = Vec::new();
        match st.next_chunk(&mut out).await {
            Ok(()) => Some((Ok(Bytes::from(out)), Some(st))),
            Err(e) => {
                tracing::warn!(error = %e, "reading comments failed mid-answer; the answer ends early");
                Some((Err(actix_web::error::ErrorServiceUnavailable("database unavailable")), None))
            }
        }
    });
    let body = futures::stream::once(futures::future::ready(Ok::<_, actix_web::Error>(Bytes::from(head)))).chain(rest);
    Ok(builder.streaming(body))
}

/// Where the next chunk starts: after the last position in platform order, else after the
/// comments already written.
fn next_from(query: &Query, written: Written) -> Option<From> {
    match (query.from, query.sort) {
        (Some(From::Offset(n)), _) => Some(From::Offset(n + written.top_level)),
        (_, Sort::Platform) => written.last_position.map(From::Position).or(query.from),
        (start, _) if written.top_level == 0 => start,
        _ => Some(From::Offset(written.top_level)),
    }
}

/// A JSON object's text without its closing `}`, to continue with more members.
pub fn open_object<T: serde::Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_default();
    if text.ends_with('}') {
        text.pop();
    }
    text
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

    /// The rendering the stream replaces: each body parsed, `first_seen_at` added, replies
    /// nested; the reference the written JSON must equal.
    fn parsed(page: Page) -> Vec<Value> {
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

    #[test]
    fn stored_bodies_are_nested_as_the_parsed_rendering_would() {
        let page = Page {
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
        };
        let mut out = b"[".to_vec();
        let mut first = true;
        write_page(&mut out, &page, &mut first);
        // A second page continues the same array.
        let more = Page { top: vec![row(9, "d", None, json!({"id": "d"}), None)], replies: vec![] };
        write_page(&mut out, &more, &mut first);
        out.push(b']');
        let written: Value = serde_json::from_slice(&out).expect("valid JSON");
        let mut expected = parsed(page);
        expected.extend(parsed(more));
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

    #[test]
    fn chunks_continue_where_the_last_ended() {
        let platform = Query { limit: 10, ..Query::default() };
        let after = Written { top_level: 3, last_position: Some(41) };
        assert_eq!(next_from(&platform, Written::default()), None);
        assert_eq!(next_from(&platform, after), Some(From::Position(41)));
        let offset = Query { from: Some(From::Offset(20)), sort: Sort::Likes, ..platform.clone() };
        assert_eq!(next_from(&offset, after), Some(From::Offset(23)));
        let likes = Query { sort: Sort::Likes, ..platform };
        assert_eq!(next_from(&likes, after), Some(From::Offset(3)));
    }
}
