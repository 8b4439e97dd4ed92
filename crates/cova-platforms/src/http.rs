//! The HTTP client every adapter goes through: per-host concurrency, a turn in the queue of
//! each host and egress route (each proxy has its own; one queue for every process sharing a
//! [`crate::QueueStore`], see `turns`), timeouts, user agent, cookies, round-robin proxies, an
//! optional signing service, and retries with jittered exponential backoff.

use crate::PlatformError;
use crate::turns::Turns;
use rand::Rng;
use reqwest::header::{COOKIE, HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use reqwest::{Method, StatusCode};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use url::Url;

pub(crate) struct HttpSettings {
    /// The platform, first in queue keys: two platforms never share a queue, even on one host.
    pub platform: &'static str,
    pub user_agent: String,
    pub cookies: BTreeMap<String, String>,
    pub proxies: Vec<String>,
    pub proxy_rest: Duration,
    pub signer_url: Option<Url>,
    pub max_concurrency_per_host: usize,
    pub requests_per_second: f64,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub max_retries: u32,
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// The queues every request waits its turn in.
    pub turns: Arc<Turns>,
    /// Added to every route's name in queue keys (a logged-in session has a queue of its own).
    pub route_suffix: String,
}

/// One outgoing request.
pub(crate) struct Request {
    pub method: Method,
    pub url: Url,
    pub headers: Vec<(HeaderName, String)>,
    /// Replaces the configured user agent (link previews use a crawler agent).
    pub user_agent: Option<String>,
    /// Ask the signing service (when configured) before sending.
    pub sign: bool,
    /// A form body (`application/x-www-form-urlencoded`), for POST.
    pub form: Option<Vec<u8>>,
}

impl Request {
    pub fn get(url: Url) -> Self {
        Self { method: Method::GET, url, headers: Vec::new(), user_agent: None, sign: false, form: None }
    }

    /// A POST of an encoded form.
    pub fn post_form(url: Url, form: Vec<u8>) -> Self {
        Self { method: Method::POST, url, headers: Vec::new(), user_agent: None, sign: false, form: Some(form) }
    }

    pub fn signed(mut self) -> Self {
        self.sign = true;
        self
    }
}

pub(crate) struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Response {
    pub fn location(&self) -> Option<&str> {
        self.headers.get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok())
    }
}

/// What one attempt of a retried operation produced.
pub(crate) enum Attempt<T> {
    Done(T),
    /// Worth another try. `blocked` marks bot-detection symptoms (empty or non-JSON bodies), which
    /// end as a parse error instead of `Unavailable` when they persist.
    Retry {
        blocked: bool,
        detail: String,
    },
    Fail(PlatformError),
}

/// Retry bookkeeping: `loop { let a = attempt().await; if let Some(r) = retry.next(a).await { break r } }`.
pub(crate) struct Retry<'a> {
    http: &'a Http,
    what: String,
    attempts: u32,
    last: (bool, String),
}

impl Retry<'_> {
    /// The final result, or `None` after sleeping the backoff when another attempt is due.
    pub async fn next<T>(&mut self, attempt: Attempt<T>) -> Option<Result<T, PlatformError>> {
        self.attempts += 1;
        match attempt {
            Attempt::Done(v) => return Some(Ok(v)),
            Attempt::Fail(e) => return Some(Err(e)),
            Attempt::Retry { blocked, detail } => {
                tracing::debug!(attempt = self.attempts, what = %self.what, detail = %detail, "platform request failed");
                self.last = (blocked, detail);
            }
        }
        let allowed = self.http.settings.max_retries + 1;
        if self.attempts < allowed {
            tokio::time::sleep(self.http.backoff(self.attempts)).await;
            return None;
        }
        let (blocked, detail) = std::mem::take(&mut self.last);
        let what = &self.what;
        Some(Err(if blocked {
            // What to change (proxies, cookies, a signer) is for the operator, in the log.
            tracing::warn!(what = %what, detail = %detail, attempts = allowed,
                "the platform kept blocking cova's requests; configure proxies, cookies or a signer");
            PlatformError::Parse(format!(
                "The platform kept turning cova's requests away when it read the {what}; try again later."
            ))
        } else {
            PlatformError::Unavailable(format!("{what}: {detail} after {allowed} attempts; retry later"))
        }))
    }
}

impl<T> Attempt<T> {
    /// Re-types a non-`Done` attempt; a `Done` value here is a caller bug reported as a parse error.
    pub fn map_never<U>(self) -> Attempt<U> {
        match self {
            Attempt::Retry { blocked, detail } => Attempt::Retry { blocked, detail },
            Attempt::Fail(e) => Attempt::Fail(e),
            Attempt::Done(_) => Attempt::Fail(PlatformError::Parse("unexpected response".into())),
        }
    }
}

struct Route {
    client: reqwest::Client,
    rested_until: Mutex<Option<Instant>>,
    via_proxy: bool,
    /// Names the route in pace keys: `direct`, or `proxy-<host>:<port>` (never credentials).
    name: String,
}

pub(crate) struct Http {
    settings: HttpSettings,
    routes: Vec<Route>,
    next_route: AtomicUsize,
    signer: Option<reqwest::Client>,
    /// Requests in flight per host.
    gates: Mutex<HashMap<String, Arc<Semaphore>>>,
    cookies: Mutex<BTreeMap<String, String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded values stay consistent even if a holder panicked, so poisoning is ignored.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Http {
    pub fn new(settings: HttpSettings) -> Result<Self, PlatformError> {
        let builder = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(settings.connect_timeout)
                .timeout(settings.connect_timeout + settings.read_timeout)
                .pool_max_idle_per_host(settings.max_concurrency_per_host.max(1))
        };
        let build_err =
            |what: &str, e: reqwest::Error| PlatformError::Unavailable(format!("cannot build the {what}: {e}"));
        let mut routes = Vec::new();
        for (i, raw) in settings.proxies.iter().enumerate() {
            let proxy = reqwest::Proxy::all(raw).map_err(|e| {
                // The proxy URL may carry credentials: name it by position only.
                PlatformError::Unavailable(format!("platforms proxy #{} is not a valid proxy URL: {e}", i + 1))
            })?;
            let client = builder().proxy(proxy).build().map_err(|e| build_err("proxy client", e))?;
            let name = Url::parse(raw)
                .ok()
                .map(|u| {
                    format!("proxy-{}:{}", u.host_str().unwrap_or_default(), u.port_or_known_default().unwrap_or(0))
                })
                .unwrap_or_else(|| format!("proxy-{}", i + 1));
            let name = format!("{name}{}", settings.route_suffix);
            routes.push(Route { client, rested_until: Mutex::new(None), via_proxy: true, name });
        }
        if routes.is_empty() {
            let client = builder().build().map_err(|e| build_err("HTTP client", e))?;
            routes.push(Route {
                client,
                rested_until: Mutex::new(None),
                via_proxy: false,
                name: format!("direct{}", settings.route_suffix),
            });
        }
        let signer = match settings.signer_url {
            Some(_) => Some(builder().build().map_err(|e| build_err("signer client", e))?),
            None => None,
        };
        let cookies = Mutex::new(settings.cookies.clone());
        Ok(Self {
            settings,
            routes,
            next_route: AtomicUsize::new(0),
            signer,
            gates: Mutex::new(HashMap::new()),
            cookies,
        })
    }

    /// Remembers a cookie for every later request (e.g. a solved challenge).
    pub fn set_cookie(&self, name: &str, value: &str) {
        lock(&self.cookies).insert(name.to_string(), value.to_string());
    }

    /// A cookie kept for later requests.
    pub fn cookie(&self, name: &str) -> Option<String> {
        lock(&self.cookies).get(name).cloned()
    }

    /// Starts the retry bookkeeping of one operation; feed it each attempt with [`Retry::next`].
    pub fn retry(&self, what: &str) -> Retry<'_> {
        Retry { http: self, what: what.to_string(), attempts: 0, last: (false, String::new()) }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let base = self.settings.retry_base.as_millis() as u64;
        let max = self.settings.retry_max.as_millis() as u64;
        let full = base.saturating_mul(1u64 << attempt.saturating_sub(1).min(20)).min(max.max(base));
        let ms = if full == 0 { 0 } else { rand::rng().random_range(full / 2..=full) };
        Duration::from_millis(ms)
    }

    /// Sends once, in its turn; transport failures, 429 and 5xx come back as `Attempt::Retry`.
    pub async fn send(&self, req: &Request) -> Attempt<Response> {
        let host = req.url.host_str().unwrap_or_default().to_string();
        let route = self.pick_route();
        let _permit = match self.turn(&host, route).await {
            Ok(permit) => permit,
            Err(e) => return Attempt::Fail(e),
        };

        let mut url = req.url.clone();
        let mut headers = HeaderMap::new();
        if req.sign
            && let Err(detail) = self.sign(&req.method, &mut url, &mut headers).await
        {
            return Attempt::Retry { blocked: false, detail };
        }
        let ua = req.user_agent.as_deref().unwrap_or(&self.settings.user_agent);
        if let Ok(v) = HeaderValue::from_str(ua) {
            headers.insert(USER_AGENT, v);
        }
        let cookie = lock(&self.cookies).iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
        if !cookie.is_empty()
            && let Ok(v) = HeaderValue::from_str(&cookie)
        {
            headers.insert(COOKIE, v);
        }
        for (name, value) in &req.headers {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.insert(name.clone(), v);
            }
        }

        // A child span of the job (or request) in the trace; never the URL: it carries
        // signatures and cursors.
        let span = tracing::info_span!(
            "platform_request",
            otel.kind = "client",
            http.method = %req.method,
            server.address = %host,
            http.status = tracing::field::Empty
        );
        let started = Instant::now();
        let result = tracing::Instrument::instrument(
            async {
                let mut request = route.client.request(req.method.clone(), url).headers(headers);
                if let Some(form) = &req.form {
                    request = request
                        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                        .body(form.clone());
                }
                let resp = request.send().await?;
                let status = resp.status();
                let headers = resp.headers().clone();
                let body = resp.bytes().await?.to_vec();
                Ok::<_, reqwest::Error>(Response { status, headers, body })
            },
            span.clone(),
        )
        .await;
        let outcome = match &result {
            Err(_) => "transport_error",
            Ok(r) => {
                span.record("http.status", r.status.as_u16());
                match r.status {
                    StatusCode::TOO_MANY_REQUESTS => "rate_limited",
                    s if s.is_server_error() => "server_error",
                    s if s.is_client_error() => "client_error",
                    _ => "ok",
                }
            }
        };
        cova_metrics::platform_request(&host, outcome, started.elapsed());
        match result {
            Err(e) => {
                if route.via_proxy {
                    *lock(&route.rested_until) = Some(Instant::now() + self.settings.proxy_rest);
                }
                let kind = if e.is_timeout() {
                    "timed out"
                } else if e.is_connect() {
                    "connection failed"
                } else {
                    "transport error"
                };
                Attempt::Retry { blocked: false, detail: format!("{host}: {kind}") }
            }
            Ok(r) if r.status == StatusCode::TOO_MANY_REQUESTS => {
                Attempt::Retry { blocked: false, detail: format!("{host}: rate limited (HTTP 429)") }
            }
            Ok(r) if r.status.is_server_error() => {
                Attempt::Retry { blocked: false, detail: format!("{host}: HTTP {}", r.status.as_u16()) }
            }
            Ok(r) => Attempt::Done(r),
        }
    }

    fn gate(&self, host: &str) -> Arc<Semaphore> {
        lock(&self.gates)
            .entry(host.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.settings.max_concurrency_per_host.max(1))))
            .clone()
    }

    /// Waits for this request's turn in the queue of its host and route, at the configured
    /// rate: the platform counts requests per address, so each proxy has a queue of its own,
    /// and every process sending from the same address shares one. Answers the permit of the
    /// host's concurrency gate to hold while the request is in flight.
    async fn turn(&self, host: &str, route: &Route) -> Result<tokio::sync::OwnedSemaphorePermit, PlatformError> {
        let rps = self.settings.requests_per_second;
        let interval = if rps > 0.0 && rps.is_finite() { Duration::from_secs_f64(1.0 / rps) } else { Duration::ZERO };
        let key = format!("{}|{host}|{}", self.settings.platform, route.name);
        self.settings.turns.turn(&key, host, interval, &self.gate(host)).await
    }

    fn pick_route(&self) -> &Route {
        let start = self.next_route.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let n = self.routes.len();
        (0..n)
            .map(|i| &self.routes[(start + i) % n])
            .find(|r| lock(&r.rested_until).is_none_or(|until| until <= now))
            // Every proxy is resting: use the next one anyway rather than stall.
            .unwrap_or(&self.routes[start % n])
    }

    /// Signer contract: `POST <signer_url>` with `{"url", "method", "user_agent"}`; the answer
    /// `{"query": {name: value}, "headers": {name: value}}` (both optional) is added to the request.
    async fn sign(&self, method: &Method, url: &mut Url, headers: &mut HeaderMap) -> Result<(), String> {
        let (Some(signer_url), Some(client)) = (&self.settings.signer_url, &self.signer) else {
            return Ok(());
        };
        let body =
            serde_json::json!({"url": url.as_str(), "method": method.as_str(), "user_agent": self.settings.user_agent});
        let resp = client
            .post(signer_url.clone())
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("signer unreachable: {}", e.without_url()))?;
        if !resp.status().is_success() {
            return Err(format!("signer answered HTTP {}", resp.status().as_u16()));
        }
        let answer: SignerAnswer =
            resp.json().await.map_err(|e| format!("signer answer is not the expected JSON: {}", e.without_url()))?;
        if !answer.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in &answer.query {
                pairs.append_pair(k, v);
            }
        }
        for (k, v) in &answer.headers {
            let name =
                HeaderName::from_bytes(k.as_bytes()).map_err(|_| format!("signer returned a bad header name `{k}`"))?;
            let value = HeaderValue::from_str(v).map_err(|_| format!("signer returned a bad value for `{k}`"))?;
            headers.insert(name, value);
        }
        Ok(())
    }
}

#[derive(serde::Deserialize)]
struct SignerAnswer {
    #[serde(default)]
    query: BTreeMap<String, String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// Parses a JSON body, treating empty and non-JSON bodies as bot detection (retried).
pub(crate) fn json_body<T>(resp: &Response, what: &str) -> Result<serde_json::Value, Attempt<T>> {
    if resp.body.iter().all(u8::is_ascii_whitespace) {
        return Err(Attempt::Retry {
            blocked: true,
            detail: format!("{what}: HTTP {} with an empty body", resp.status.as_u16()),
        });
    }
    serde_json::from_slice(&resp.body).map_err(|_| Attempt::Retry {
        blocked: true,
        detail: format!("{what}: HTTP {} with a body that is not JSON", resp.status.as_u16()),
    })
}
