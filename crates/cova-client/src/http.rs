//! The HTTP calls of the client, one method per documented endpoint (docs/API.md). Answers are
//! kept as JSON values (printed as the API returns them); the few fields the client acts on
//! are read through the small views at the end.

use super::ClientError;
use super::exit::Exit;
use super::output::Sink;
use reqwest::header::RETRY_AFTER;
use reqwest::{Client, RequestBuilder, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::Write as _;

/// How often a preview is asked again while its posts are being counted.
pub const PREVIEW_AGAIN: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a preview waits for its counts at most.
pub const PREVIEW_PATIENCE: std::time::Duration = std::time::Duration::from_secs(600);
use std::time::Duration;
use url::Url;

/// A cova service, called with one token.
pub struct Api {
    http: Client,
    base: Url,
    token: String,
    timeout: Duration,
}

impl Api {
    pub fn new(base: Url, token: String, timeout: Duration) -> Result<Self, ClientError> {
        let http = Client::builder()
            .user_agent(concat!("cova-client/", env!("CARGO_PKG_VERSION")))
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| ClientError::new(Exit::Other, format!("cannot set up the HTTP client: {e}")))?;
        Ok(Self { http, base, token, timeout })
    }

    // ---- endpoints ----

    /// `POST /api/v1/analyze`: a new job (202) or the job that already covers the post (200).
    pub async fn analyze(&self, post_url: &str, max_comments: Option<u32>) -> Result<Value, ClientError> {
        let mut body = json!({ "url": post_url });
        if let Some(cap) = max_comments {
            body["max_comments"] = json!(cap);
        }
        self.post(&["analyze"], &body).await
    }

    /// `POST /api/v1/analyze/batch`: the batch with one item per URL.
    pub async fn batch(&self, post_urls: &[String], max_comments: Option<u32>) -> Result<Value, ClientError> {
        self.post(&["analyze", "batch"], &list_body(post_urls, max_comments)).await
    }

    /// `POST /api/v1/analyze/batch/preview`: what the list would cost, starting nothing, asked
    /// again every [`PREVIEW_AGAIN`] while some of its posts are being counted (`counting`), up
    /// to [`PREVIEW_PATIENCE`]: the answer then says which are still being counted.
    pub async fn preview(&self, post_urls: &[String], max_comments: Option<u32>) -> Result<Value, ClientError> {
        let body = list_body(post_urls, max_comments);
        let deadline = tokio::time::Instant::now() + PREVIEW_PATIENCE;
        loop {
            let preview = self.post(&["analyze", "batch", "preview"], &body).await?;
            let counting = preview["counting"].as_u64().unwrap_or(0);
            if counting == 0 || tokio::time::Instant::now() + PREVIEW_AGAIN > deadline {
                return Ok(preview);
            }
            tokio::time::sleep(PREVIEW_AGAIN).await;
        }
    }

    /// `GET /api/v1/analyze/batch/{id}`.
    pub async fn batch_state(&self, id: &str) -> Result<Value, ClientError> {
        self.get(&["analyze", "batch", id], &[]).await
    }

    /// `GET /api/v1/analyze/{job_id}`, one page of the result (`limit` top-level comments).
    pub async fn job(&self, id: &str, limit: Option<u32>, cursor: Option<&str>) -> Result<Value, ClientError> {
        let limit = limit.map(|l| l.to_string());
        let mut query = Vec::new();
        if let Some(limit) = &limit {
            query.push(("limit", limit.as_str()));
        }
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor));
        }
        self.get(&["analyze", id], &query).await
    }

    /// The complete job with every comment of its result: the pages joined, `next_cursor` null.
    pub async fn whole_job(&self, id: &str) -> Result<Value, ClientError> {
        let mut job = self.job(id, None, None).await?;
        let mut cursor = next_cursor(&job["result"]);
        while let Some(after) = cursor {
            let page = self.job(id, None, Some(after.as_str())).await?;
            cursor = next_cursor(&page["result"]).filter(|c| *c != after);
            let more = page["result"]["comments"].as_array().cloned().unwrap_or_default();
            if more.is_empty() {
                break;
            }
            if let Some(comments) =
                job.get_mut("result").and_then(|r| r.get_mut("comments")).and_then(Value::as_array_mut)
            {
                comments.extend(more);
            }
        }
        if let Some(result) = job.get_mut("result").and_then(Value::as_object_mut) {
            result.insert("next_cursor".into(), Value::Null);
        }
        Ok(job)
    }

    /// `POST /api/v1/metadata`.
    pub async fn metadata(&self, post_url: &str) -> Result<Value, ClientError> {
        self.post(&["metadata"], &json!({ "url": post_url })).await
    }

    /// `GET /api/v1/usage`.
    pub async fn usage(&self) -> Result<Value, ClientError> {
        self.get(&["usage"], &[]).await
    }

    /// `GET /api/v1/analyses/saved`, every page: `{"items": [...], "next_cursor": null}`.
    pub async fn library(&self, filters: &[(&str, &str)]) -> Result<Value, ClientError> {
        self.every_item(&["analyses", "saved"], filters).await
    }

    /// Every page of a cursor-paged list (100 items a request), joined:
    /// `{"items": [...], "next_cursor": null}`.
    async fn every_item(&self, at: &[&str], params: &[(&str, &str)]) -> Result<Value, ClientError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut query = vec![("limit", "100")];
            query.extend_from_slice(params);
            if let Some(c) = &cursor {
                query.push(("cursor", c.as_str()));
            }
            let page = self.get(at, &query).await?;
            let more = page["items"].as_array().cloned().unwrap_or_default();
            let next = next_cursor(&page).filter(|c| Some(c) != cursor.as_ref());
            let done = more.is_empty() || next.is_none();
            items.extend(more);
            if done {
                break;
            }
            cursor = next;
        }
        Ok(json!({ "items": items, "next_cursor": null }))
    }

    /// `GET /api/v1/analyses/{ref}` with every comment: the pages joined, `next_cursor` null.
    pub async fn entry(&self, reference: &str) -> Result<Value, ClientError> {
        let mut entry = self.get(&["analyses", reference], &[]).await?;
        let mut cursor = next_cursor(&entry);
        while let Some(after) = cursor {
            let page = self.get(&["analyses", reference], &[("cursor", after.as_str())]).await?;
            cursor = next_cursor(&page).filter(|c| *c != after);
            let more = page["comments"].as_array().cloned().unwrap_or_default();
            if more.is_empty() {
                break;
            }
            if let Some(comments) = entry.get_mut("comments").and_then(Value::as_array_mut) {
                comments.extend(more);
            }
        }
        if let Some(obj) = entry.as_object_mut() {
            obj.insert("next_cursor".into(), Value::Null);
        }
        Ok(entry)
    }

    /// `GET /api/v1/analyses/{ref}/export?format=…`, streamed into `sink` as it arrives.
    pub async fn export(&self, reference: &str, format: &str, sink: &mut Sink) -> Result<(), ClientError> {
        self.download(&["analyses", reference, "export"], format, sink, false).await
    }

    /// `GET /api/v1/analyze/{job_id}/export?format=…`, streamed into `sink`; `continued` drops
    /// what a file already written starts with (a CSV's byte order mark and header), so that
    /// several jobs make one file.
    pub async fn export_job(
        &self,
        id: &str,
        format: &str,
        sink: &mut Sink,
        continued: bool,
    ) -> Result<(), ClientError> {
        self.download(&["analyze", id, "export"], format, sink, continued).await
    }

    /// `GET /api/v1/comments/search`, every page joined (at most the search's 10,000 hits).
    pub async fn search(&self, params: &[(&str, &str)]) -> Result<Value, ClientError> {
        self.every_item(&["comments", "search"], params).await
    }

    /// `GET /api/v1/comments/search/export?format=…&…`, streamed into `sink`.
    pub async fn search_export(
        &self,
        params: &[(&str, &str)],
        format: &str,
        sink: &mut Sink,
    ) -> Result<(), ClientError> {
        let mut query = vec![("format", format)];
        query.extend_from_slice(params);
        self.download_with(&["comments", "search", "export"], &query, sink, false).await
    }

    async fn download(&self, at: &[&str], format: &str, sink: &mut Sink, continued: bool) -> Result<(), ClientError> {
        self.download_with(at, &[("format", format)], sink, continued).await
    }

    async fn download_with(
        &self,
        at: &[&str],
        query: &[(&str, &str)],
        sink: &mut Sink,
        continued: bool,
    ) -> Result<(), ClientError> {
        let format = query.iter().find(|(k, _)| *k == "format").map_or("", |(_, v)| *v);
        let url = self.endpoint(at, query);
        let mut res = self.send(self.http.get(url)).await?;
        // The first line of a CSV is its header; nothing to skip in JSON Lines.
        let mut skipping = continued && format == "csv";
        while let Some(chunk) = res.chunk().await.map_err(|e| self.body_error(&e))? {
            let mut bytes = &chunk[..];
            if skipping {
                match bytes.iter().position(|b| *b == b'\n') {
                    Some(end) => {
                        bytes = &bytes[end + 1..];
                        skipping = false;
                    }
                    None => continue,
                }
            }
            sink.write_all(bytes).map_err(|e| sink.write_error(&e))?;
        }
        Ok(())
    }

    /// `POST /api/v1/ai/quote`; no tasks means all of them.
    pub async fn ai_quote(&self, reference: &str, tasks: &[String]) -> Result<Value, ClientError> {
        let body =
            if tasks.is_empty() { json!({ "ref": reference }) } else { json!({ "ref": reference, "tasks": tasks }) };
        self.post(&["ai", "quote"], &body).await
    }

    /// `POST /api/v1/ai/run`.
    pub async fn ai_run(&self, quote_id: &str) -> Result<Value, ClientError> {
        self.post(&["ai", "run"], &json!({ "quote_id": quote_id })).await
    }

    /// `GET /api/v1/ai/jobs/{id}`.
    pub async fn ai_job(&self, id: &str) -> Result<Value, ClientError> {
        self.get(&["ai", "jobs", id], &[]).await
    }

    // ---- plumbing ----

    /// `base` + `/api/v1/` + the segments (each percent-encoded as needed) + the query.
    fn endpoint(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    async fn get(&self, segments: &[&str], query: &[(&str, &str)]) -> Result<Value, ClientError> {
        let res = self.send(self.http.get(self.endpoint(segments, query))).await?;
        self.json(res).await
    }

    async fn post(&self, segments: &[&str], body: &Value) -> Result<Value, ClientError> {
        let res = self.send(self.http.post(self.endpoint(segments, &[])).json(body)).await?;
        self.json(res).await
    }

    /// Sends with the token; an answer other than 2xx becomes its error.
    async fn send(&self, req: RequestBuilder) -> Result<Response, ClientError> {
        let res = req.bearer_auth(&self.token).send().await.map_err(|e| self.transport_error(&e))?;
        if res.status().is_success() {
            return Ok(res);
        }
        let status = res.status().as_u16();
        let retry_after =
            res.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
        // A body that cannot be read still leaves the status to classify the error.
        let body = res.text().await.unwrap_or_default();
        Err(ClientError::from_answer(status, &body, retry_after))
    }

    async fn json(&self, res: Response) -> Result<Value, ClientError> {
        res.json::<Value>().await.map_err(|e| self.body_error(&e))
    }

    fn transport_error(&self, e: &reqwest::Error) -> ClientError {
        if e.is_builder() {
            return ClientError::new(Exit::Other, format!("cannot build the request: {}", root_cause(e)));
        }
        let detail = if e.is_timeout() {
            format!("no answer from {} within {} s (--timeout)", self.base, self.timeout.as_secs())
        } else if e.is_connect() {
            format!("cannot connect to {}: {}", self.base, root_cause(e))
        } else {
            format!("the request to {} failed: {}", self.base, root_cause(e))
        };
        ClientError::new(Exit::Unavailable, detail)
    }

    fn body_error(&self, e: &reqwest::Error) -> ClientError {
        if e.is_decode() {
            ClientError::new(
                Exit::Other,
                format!("the answer from {} is not the JSON cova sends (is --url a cova service?)", self.base),
            )
        } else if e.is_timeout() {
            ClientError::new(
                Exit::Unavailable,
                format!("the answer from {} did not arrive within {} s (--timeout)", self.base, self.timeout.as_secs()),
            )
        } else {
            ClientError::new(
                Exit::Unavailable,
                format!("the answer from {} was cut short: {}", self.base, root_cause(e)),
            )
        }
    }
}

/// The innermost cause: "Connection refused (os error 111)" rather than "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

fn next_cursor(v: &Value) -> Option<String> {
    v["next_cursor"].as_str().filter(|c| !c.is_empty()).map(str::to_owned)
}

impl ClientError {
    /// The error for an answer other than 2xx: `{detail, code}` when the body is cova's error
    /// body, else the status line.
    pub fn from_answer(status: u16, body: &str, retry_after: Option<u64>) -> Self {
        #[derive(Deserialize)]
        struct ErrorBody {
            detail: String,
            code: String,
        }
        let (mut detail, code) = match serde_json::from_str::<ErrorBody>(body) {
            Ok(b) => (b.detail, Some(b.code)),
            Err(_) => {
                let reason = reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason());
                (
                    format!("the service answered HTTP {status} {}", reason.unwrap_or_default()).trim_end().to_owned(),
                    None,
                )
            }
        };
        if let Some(s) = retry_after {
            let _ = write!(detail, "; retry after {s} s");
        }
        Self { exit: Exit::from_answer(status, code.as_deref()), detail, code, retry_after }
    }
}

// ---- views: the fields the client acts on ----

/// Reads a view out of an answer; an answer without the documented fields is an error.
pub fn view<T: DeserializeOwned>(v: &Value) -> Result<T, ClientError> {
    T::deserialize(v).map_err(|e| ClientError::new(Exit::Other, format!("unexpected answer from the service: {e}")))
}

/// An analyze job (`POST /analyze`, `GET /analyze/{job_id}`).
#[derive(Debug, Deserialize)]
pub struct JobView {
    pub job_id: String,
    pub status: String,
    #[serde(default)]
    pub progress: ProgressView,
    pub error: Option<ErrorView>,
    pub result: Option<ResultView>,
    pub deduplicated: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ProgressView {
    #[serde(default)]
    pub comments_collected: u64,
    pub comments_expected: Option<u64>,
}

/// The `error` of a failed job.
#[derive(Debug, Deserialize)]
pub struct ErrorView {
    pub code: String,
    #[serde(default)]
    pub detail: String,
}

#[derive(Debug, Deserialize)]
pub struct ResultView {
    pub analysis_id: String,
    #[serde(default)]
    pub released: bool,
}

/// A batch (`POST /analyze/batch`, `GET /analyze/batch/{id}`).
#[derive(Debug, Deserialize)]
pub struct BatchView {
    pub batch_id: String,
    /// `running`, `complete` or `cancelled`.
    pub status: String,
    pub items: Vec<BatchItemView>,
}

#[derive(Debug, Deserialize)]
pub struct BatchItemView {
    pub url: String,
    /// `waiting`, `running`, `complete`, `failed`, `refused` or `cancelled`.
    pub state: String,
    pub r#ref: Option<String>,
    pub job: Option<JobView>,
    pub error: Option<ErrorView>,
}

/// An AI quote (`POST /ai/quote`).
#[derive(Debug, Deserialize)]
pub struct QuoteView {
    pub quote_id: String,
    pub comments: u64,
    pub charge: u64,
}

/// An AI job (`POST /ai/run`, `GET /ai/jobs/{id}`).
#[derive(Debug, Deserialize)]
pub struct AiJobView {
    pub id: String,
    pub status: String,
    pub error: Option<ErrorView>,
}

/// The body of a list of posts.
fn list_body(post_urls: &[String], max_comments: Option<u32>) -> Value {
    let mut body = json!({ "urls": post_urls });
    if let Some(cap) = max_comments {
        body["max_comments"] = json!(cap);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(base: &str) -> Api {
        let base = super::super::config::parse_base(base).expect("base");
        Api::new(base, "cova_x".into(), Duration::from_secs(1)).expect("client")
    }

    #[test]
    fn endpoints_keep_a_path_prefix_and_encode_segments() {
        let a = api("http://127.0.0.1:8080");
        assert_eq!(a.endpoint(&["usage"], &[]).as_str(), "http://127.0.0.1:8080/api/v1/usage");
        assert_eq!(
            a.endpoint(&["analyses", "tiktok:7000000000000000012", "export"], &[("format", "csv")]).as_str(),
            "http://127.0.0.1:8080/api/v1/analyses/tiktok:7000000000000000012/export?format=csv"
        );
        assert_eq!(
            a.endpoint(&["analyze", "a/b?c"], &[("cursor", "p1&x")]).as_str(),
            "http://127.0.0.1:8080/api/v1/analyze/a%2Fb%3Fc?cursor=p1%26x"
        );
        let prefixed = api("https://example.com/cova/");
        assert_eq!(prefixed.endpoint(&["usage"], &[]).as_str(), "https://example.com/cova/api/v1/usage");
    }

    #[test]
    fn error_answers_keep_detail_and_code() {
        let e = ClientError::from_answer(402, r#"{"detail":"No comments left.","code":"quota_exceeded"}"#, None);
        assert_eq!((e.exit, e.code.as_deref()), (Exit::Balance, Some("quota_exceeded")));
        assert_eq!(e.to_string(), "No comments left. (quota_exceeded)");
        let e = ClientError::from_answer(429, r#"{"detail":"Slow down.","code":"rate_limited"}"#, Some(7));
        assert_eq!(e.to_string(), "Slow down.; retry after 7 s (rate_limited)");
        assert_eq!(e.retry_after, Some(7));
        let e = ClientError::from_answer(502, "<html>bad gateway</html>", None);
        assert_eq!((e.exit, e.code.as_deref()), (Exit::Unavailable, None));
        assert_eq!(e.to_string(), "the service answered HTTP 502 Bad Gateway");
    }
}
