//! Comments written from their stored JSON: a job's result and a library entry write their
//! comments a chunk of top-level comments (with their replies) at a time, copying each stored
//! body into the answer instead of parsing and re-serialising it. Memory per request is one
//! chunk, whatever the size of the breakdown.

use actix_web::http::header::ContentType;
use actix_web::web::Bytes;
use actix_web::{HttpResponse, HttpResponseBuilder};
pub use cova_storage::repo::breakdown::Written;
use cova_storage::repo::breakdown::{self, From, Query, Sort, write_page};
use cova_storage::{Db, StorageError};
use futures::StreamExt;

/// Top-level comments read and written per step.
const CHUNK: i64 = 250;

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
