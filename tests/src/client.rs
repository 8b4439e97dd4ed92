//! A typed client for cova's HTTP API, as an integrator would write one.

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// The error body: exactly `{detail, code}`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ApiError {
    pub detail: String,
    pub code: String,
}

/// One answer: status, headers, and the body either parsed or as the error it was.
#[derive(Debug)]
pub struct Reply<T> {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Result<T, ApiError>,
}

impl<T: std::fmt::Debug> Reply<T> {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn header_u64(&self, name: &str) -> Option<u64> {
        self.header(name).and_then(|v| v.parse().ok())
    }

    /// The success body; panics with the error otherwise.
    pub fn ok(self) -> T {
        match self.body {
            Ok(body) => body,
            Err(e) => panic!("expected success, got {} {:?}", self.status, e),
        }
    }

    /// The error body; panics on success.
    pub fn err(self) -> (StatusCode, ApiError) {
        match self.body {
            Err(e) => (self.status, e),
            Ok(body) => panic!("expected an error, got {} {:?}", self.status, body),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Usage {
    pub account: UsageAccount,
    pub comments: UsageComments,
    pub metadata: UsageLimit,
    pub requests: UsageLimit,
    pub concurrency: UsageConcurrency,
    pub tokens: UsageTokens,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UsageAccount {
    pub id: String,
    pub email: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UsageComments {
    pub month: String,
    pub limit: i64,
    pub used: i64,
    pub reserved: i64,
    pub remaining: i64,
    pub expires_at: String,
    pub per_post_limit: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UsageLimit {
    pub limit: u32,
    pub remaining: u32,
    pub window_seconds: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UsageConcurrency {
    pub limit: i64,
    pub running: i64,
    pub available: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UsageTokens {
    pub limit: i32,
    pub active: i32,
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    pub fn new(base: &str, token: Option<&str>) -> Self {
        let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build().expect("http client");
        Self { http, base: base.trim_end_matches('/').to_owned(), token: token.map(str::to_owned) }
    }

    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        req
    }

    /// Sends and decodes: 2xx into `T`, anything else into the `{detail, code}` body
    /// (a non-conforming error body fails the test).
    pub async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Reply<T> {
        let res = req.send().await.expect("request sent");
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.bytes().await.expect("body read");
        let body = if status.is_success() {
            Ok(serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{status} body does not decode: {e}: {}", String::from_utf8_lossy(&bytes))))
        } else {
            Err(serde_json::from_slice::<ApiError>(&bytes).unwrap_or_else(|e| {
                panic!("{status} error body is not {{detail, code}}: {e}: {}", String::from_utf8_lossy(&bytes))
            }))
        };
        Reply { status, headers, body }
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Reply<T> {
        self.send(self.request(Method::GET, path)).await
    }

    /// Sends and returns the status, headers and raw body, whatever they are (downloads, 204).
    pub async fn raw(&self, req: reqwest::RequestBuilder) -> (StatusCode, HeaderMap, Vec<u8>) {
        let res = req.send().await.expect("request sent");
        let status = res.status();
        let headers = res.headers().clone();
        (status, headers, res.bytes().await.expect("body read").to_vec())
    }

    pub async fn usage(&self) -> Reply<Usage> {
        self.get("/api/v1/usage").await
    }
}

impl Client {
    pub async fn analyze(&self, url: &str, idempotency_key: Option<&str>) -> Reply<serde_json::Value> {
        let mut req = self.request(Method::POST, "/api/v1/analyze").json(&serde_json::json!({ "url": url }));
        if let Some(key) = idempotency_key {
            req = req.header("idempotency-key", key);
        }
        self.send(req).await
    }

    pub async fn job(&self, job_id: &str) -> Reply<serde_json::Value> {
        self.get(&format!("/api/v1/analyze/{job_id}")).await
    }

    pub async fn post_json(&self, path: &str, body: serde_json::Value) -> Reply<serde_json::Value> {
        self.send(self.request(Method::POST, path).json(&body)).await
    }

    pub async fn put_json(&self, path: &str, body: serde_json::Value) -> Reply<serde_json::Value> {
        self.send(self.request(Method::PUT, path).json(&body)).await
    }

    /// `GET /api/v1/analyses/{ref}` with a query string (may be empty).
    pub async fn entry(&self, r#ref: &str, query: &str) -> Reply<serde_json::Value> {
        self.get(&format!("/api/v1/analyses/{ref}{query}")).await
    }

    /// `GET /api/v1/comments/search` with these parameters (`ref` may repeat).
    pub async fn search(&self, params: &[(&str, &str)]) -> Reply<serde_json::Value> {
        self.send(self.request(Method::GET, "/api/v1/comments/search").query(params)).await
    }

    pub async fn refresh(&self, r#ref: &str) -> Reply<serde_json::Value> {
        self.send(self.request(Method::POST, &format!("/api/v1/analyses/{ref}/refresh"))).await
    }

    pub async fn metadata(&self, url: &str) -> Reply<serde_json::Value> {
        self.send(self.request(Method::POST, "/api/v1/metadata").json(&serde_json::json!({ "url": url }))).await
    }

    /// Collects the TikTok post `id` and returns the finished job, which must be complete.
    pub async fn collect(&self, id: u64) -> serde_json::Value {
        let job = self.analyze(&crate::tiktok_url(id), None).await.ok();
        let done = self.wait_job(job["job_id"].as_str().expect("job_id")).await;
        assert_eq!(done["status"], "complete", "{done}");
        done
    }

    /// Waits (at most a minute) until the job is complete or failed, and returns it: the one
    /// way tests wait for a job.
    pub async fn wait_job(&self, job_id: &str) -> serde_json::Value {
        // Each look owns what it uses: tasks spawn this wait, and rustc cannot yet prove `Send`
        // a closure's future that borrows.
        let (client, id) = (self.clone(), job_id.to_owned());
        crate::until_within(&format!("job {job_id} to finish"), Duration::from_secs(60), move || {
            let (client, id) = (client.clone(), id.clone());
            async move {
                let job = client.job(&id).await.ok();
                (job["status"] == "complete" || job["status"] == "failed").then_some(job)
            }
        })
        .await
    }
}
