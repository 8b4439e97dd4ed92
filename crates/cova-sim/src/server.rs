//! The HTTP server, shared state and request recorder.

use crate::history::Ring;
use crate::truth::{Gen, SimPost};
use crate::{SimConfig, tiktok, youtube};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Generated posts kept in memory; the cache is dropped when it grows past this.
const POST_CACHE: usize = 64;

/// One request as the simulator saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    /// `cookie`, `user-agent` and every `x-*` header, names in lowercase.
    pub headers: BTreeMap<String, String>,
    /// Size of the request body.
    #[serde(default)]
    pub body_bytes: usize,
    /// When the simulator received it, in µs since the epoch: the pace as the platform sees it.
    #[serde(default)]
    pub received_us: i64,
}

impl RecordedRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

pub(crate) struct State {
    pub cfg: SimConfig,
    pub base: String,
    latency_ms: AtomicU64,
    /// Whether answers flow; a paused simulator holds them ([`SimHandle::pause`]).
    open: tokio::sync::watch::Sender<bool>,
    /// Seconds the CDN's clock is ahead of the wall clock ([`SimHandle::expire_cdn_links`]).
    cdn_ahead_s: AtomicI64,
    /// The recorder. This and the histories below keep the newest `cfg.history` entries.
    requests: Mutex<Ring<RecordedRequest>>,
    counters: Mutex<HashMap<String, u32>>,
    posts: Mutex<HashMap<String, Arc<SimPost>>>,
    /// Comments added to posts since they were generated, by post key.
    /// New top-level comments per post: (appended, posted at the top of the list).
    grown: Mutex<HashMap<String, (u64, u64)>>,
    /// Comments posted at chosen times with a chosen tone, by post key ([`SimHandle::post_comments`]).
    timed: Mutex<HashMap<String, Vec<(i64, crate::truth::Tone)>>>,
    /// Messages sent to the fake Telegram Bot API.
    telegram: Mutex<Ring<crate::telegram::TelegramMessage>>,
    /// Requests to the fake chat-completions endpoint.
    llm: Mutex<Ring<crate::llm::LlmRequest>>,
    /// Spans received by the OTLP collector (JSON exports).
    spans: Mutex<Ring<crate::otlp::ExportedSpan>>,
    /// The fake payment provider's sessions, webhook and sent events.
    pub(crate) payments: crate::payments::Payments,
    /// Mail accepted by the SMTP receiver (shared with its task).
    mails: Arc<Mutex<Ring<crate::smtp::SentMail>>>,
    /// Creators and their posts ([`SimHandle::add_creator`]).
    pub(crate) creators: Mutex<Vec<crate::creators::SimCreator>>,
    /// The clock posts are published on (unix ms); 0 follows the wall clock.
    clock_ms: AtomicI64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain data behind these locks stays valid even if a handler panicked.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    fn new(cfg: SimConfig, base: String) -> Self {
        let cap = cfg.history;
        Self {
            latency_ms: AtomicU64::new(cfg.latency_ms),
            open: tokio::sync::watch::Sender::new(true),
            cdn_ahead_s: AtomicI64::new(0),
            cfg,
            base,
            requests: Mutex::new(Ring::new(cap)),
            counters: Mutex::new(HashMap::new()),
            posts: Mutex::new(HashMap::new()),
            grown: Mutex::new(HashMap::new()),
            timed: Mutex::new(HashMap::new()),
            telegram: Mutex::new(Ring::new(cap)),
            llm: Mutex::new(Ring::new(cap)),
            spans: Mutex::new(Ring::new(cap)),
            payments: crate::payments::Payments::new(cap),
            mails: Arc::new(Mutex::new(Ring::new(cap))),
            creators: Mutex::new(Vec::new()),
            clock_ms: AtomicI64::new(0),
        }
    }

    /// The time posts are published by (unix ms): the test's clock when it set one.
    pub(crate) fn now_ms(&self) -> i64 {
        match self.clock_ms.load(Ordering::Relaxed) {
            0 => chrono::Utc::now().timestamp_millis(),
            ms => ms,
        }
    }

    /// Adds a creator, replacing the one with its platform and id.
    fn add_creator(&self, creator: crate::creators::SimCreator) {
        let mut creators = lock(&self.creators);
        creators.retain(|c| !(c.platform == creator.platform && c.id == creator.id));
        creators.push(creator);
    }

    /// A signed CDN link to `path`, valid for the CDN's TTL from now.
    pub(crate) fn cdn_link(&self, path: &str) -> String {
        crate::cdn::link(&self.base, path, self.cdn_now() + crate::cdn::LINK_TTL_S)
    }

    fn cached(&self, key: String, make: impl FnOnce(&Gen<'_>) -> SimPost) -> Arc<SimPost> {
        if let Some(p) = lock(&self.posts).get(&key) {
            return p.clone();
        }
        // Links handed out now stay valid for the CDN's TTL.
        let expires = self.cdn_now() + crate::cdn::LINK_TTL_S;
        let generator = Gen { seed: self.cfg.seed, base: &self.base, expires };
        let mut post = make(&generator);
        let (appended, on_top) = lock(&self.grown).get(&key).copied().unwrap_or((0, 0));
        generator.grow(&mut post, appended);
        generator.grow_on_top(&mut post, on_top);
        if let Some(timed) = lock(&self.timed).get(&key) {
            generator.post_at(&mut post, timed);
        }
        let post = Arc::new(post);
        let mut posts = lock(&self.posts);
        if posts.len() >= POST_CACHE {
            posts.clear();
        }
        posts.insert(key, post.clone());
        post
    }

    pub fn tiktok_post(&self, id: u64) -> Arc<SimPost> {
        self.cached(format!("tiktok:{id}"), |g| g.tiktok(id))
    }

    pub fn instagram_post(&self, pk: u64) -> Arc<SimPost> {
        self.cached(format!("instagram:{pk}"), |g| g.instagram(pk))
    }

    pub fn youtube_post(&self, id: &str) -> Arc<SimPost> {
        self.cached(format!("youtube:{id}"), |g| g.youtube(id))
    }

    /// The CDN's clock (unix seconds).
    fn cdn_now(&self) -> i64 {
        chrono::Utc::now().timestamp() + self.cdn_ahead_s.load(Ordering::Relaxed)
    }

    /// Every link handed out so far expires; posts read from now on carry fresh links.
    fn expire_cdn_links(&self) {
        self.cdn_ahead_s.fetch_add(crate::cdn::LINK_TTL_S + 60, Ordering::Relaxed);
        lock(&self.posts).clear();
    }

    /// Counts requests per key; returns this request's 1-based number.
    pub fn bump(&self, key: &str) -> u32 {
        let mut counters = lock(&self.counters);
        let n = counters.entry(key.to_string()).or_insert(0);
        *n += 1;
        *n
    }

    fn record(&self, r: RecordedRequest) {
        lock(&self.requests).push(r);
    }
}

/// A request as handlers see it.
pub(crate) struct Req {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: BTreeMap<String, String>,
    pub body: web::Bytes,
}

impl Req {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .get("cookie")?
            .split(';')
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

async fn dispatch(req: HttpRequest, body: web::Bytes, state: web::Data<State>) -> HttpResponse {
    let headers: BTreeMap<String, String> = req
        .headers()
        .iter()
        .filter(|(k, _)| {
            let k = k.as_str();
            k == "cookie" || k == "user-agent" || k == "authorization" || k.starts_with("x-")
        })
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let r = Req {
        method: req.method().as_str().to_string(),
        path: req.path().to_string(),
        query: url::form_urlencoded::parse(req.query_string().as_bytes()).into_owned().collect(),
        headers,
        body,
    };
    if let Some(rest) = r.path.strip_prefix("/__sim/") {
        return control(&state, &r, rest);
    }
    state.record(RecordedRequest {
        method: r.method.clone(),
        path: r.path.clone(),
        query: r.query.clone(),
        headers: r.headers.clone(),
        body_bytes: r.body.len(),
        received_us: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
    });
    // Checkout comes before the collector, which would take any POST under /v1/.
    if let Some(answer) = crate::payments::handle(&state, &r).await {
        return answer;
    }
    // An OTLP/HTTP collector that accepts every export: tests that need spans recorded point
    // `telemetry.otlp_endpoint` here and read the exports from the recorder.
    if r.method == "POST" && r.path.starts_with("/v1/") {
        if r.path == "/v1/traces" {
            lock(&state.spans).extend(crate::otlp::spans(&r.body));
        }
        let json = req
            .headers()
            .get("content-type")
            .and_then(|t| t.to_str().ok())
            .is_some_and(|t| t.starts_with("application/json"));
        return if json {
            HttpResponse::Ok().content_type("application/json").body("{}")
        } else {
            HttpResponse::Ok().content_type("application/x-protobuf").finish()
        };
    }
    let latency = state.latency_ms.load(Ordering::Relaxed);
    if latency > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(latency)).await;
    }
    // A closed gate only waits; the sender lives as long as the state, so this cannot fail.
    let _ = state.open.subscribe().wait_for(|open| *open).await;
    if r.method == "POST" && r.path == crate::llm::PATH {
        let calls = |model: &str| state.bump(&format!("llm:{model}"));
        let (answer, delay) = crate::llm::handle(&r.headers, &r.body, &mut lock(&state.llm), calls);
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        return answer;
    }
    if r.path.starts_with("/youtube/v3/") {
        return youtube::handle(&state, &r);
    }
    if r.method == "POST"
        && let Some(answer) = crate::telegram::handle(&r.path, &r.body, &mut lock(&state.telegram))
    {
        return answer;
    }
    if let Some(path) = r.path.strip_prefix("/ig/") {
        return crate::instagram::handle(&state, &r, path);
    }
    if let Some(path) = r.path.strip_prefix("/cdn/") {
        return crate::cdn::handle(&r, path, state.cdn_now(), state.cfg.image_bytes);
    }
    tiktok::handle(&state, &r)
}

/// Simulator control endpoints (never recorded).
fn control(state: &State, r: &Req, rest: &str) -> HttpResponse {
    match (r.method.as_str(), rest) {
        ("GET", "requests") => HttpResponse::Ok().json(lock(&state.requests).to_vec()),
        ("POST", "cdn/expire") => {
            state.expire_cdn_links();
            HttpResponse::NoContent().finish()
        }
        // Holds every platform answer until resumed ([`SimHandle::pause`]).
        ("POST", "pause") => {
            state.open.send_replace(false);
            HttpResponse::NoContent().finish()
        }
        ("POST", "resume") => {
            state.open.send_replace(true);
            HttpResponse::NoContent().finish()
        }
        // Adds (or replaces) a creator with its posts, for demos: `SimCreator` as JSON.
        ("POST", "creators") => match serde_json::from_slice::<crate::creators::SimCreator>(&r.body) {
            Ok(creator) => {
                state.add_creator(creator);
                HttpResponse::NoContent().finish()
            }
            Err(e) => {
                HttpResponse::BadRequest().json(serde_json::json!({"error": format!("expected a SimCreator: {e}")}))
            }
        },
        ("DELETE", "requests") => {
            lock(&state.requests).clear();
            HttpResponse::NoContent().finish()
        }
        // A stand-in signing service following cova's signer contract.
        ("POST", "sign") => {
            let url = serde_json::from_slice::<serde_json::Value>(&r.body)
                .ok()
                .and_then(|v| v.get("url").and_then(|u| u.as_str()).map(str::to_string));
            let Some(url) = url else {
                return HttpResponse::BadRequest().json(serde_json::json!({"error": "expected {\"url\": ...}"}));
            };
            let digest = hex::encode(ring::digest::digest(&ring::digest::SHA256, url.as_bytes()));
            HttpResponse::Ok().json(serde_json::json!({
                "query": {"X-Bogus": format!("DFSz{}", &digest[..16])},
                "headers": {"X-Gnarly": format!("sim-{}", &digest[16..32])},
            }))
        }
        ("GET", p) if p.starts_with("post/") => {
            let post = match p.trim_start_matches("post/").split_once('/') {
                Some(("tiktok", id)) => id.parse().ok().map(|id| state.tiktok_post(id)),
                Some(("youtube", id)) => Some(state.youtube_post(id)),
                _ => None,
            };
            match post {
                Some(p) => HttpResponse::Ok().json(&*p),
                None => HttpResponse::NotFound()
                    .json(serde_json::json!({"error": "use /__sim/post/tiktok/<id> or /__sim/post/youtube/<id>"})),
            }
        }
        _ => HttpResponse::NotFound().json(serde_json::json!({"error": "unknown simulator endpoint"})),
    }
}

/// A valid 1×1 PNG: the start of every simulated cover, avatar and comment image.
pub(crate) const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0a, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A running simulator; stops on drop or [`SimHandle::stop`].
pub struct SimHandle {
    state: Arc<State>,
    addr: SocketAddr,
    smtp_addr: SocketAddr,
    smtp: tokio::task::AbortHandle,
    server: actix_web::dev::ServerHandle,
}

impl SimHandle {
    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.state.base
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Adds a creator (or replaces the one with its platform and id).
    pub fn add_creator(&self, creator: crate::creators::SimCreator) {
        self.state.add_creator(creator);
    }

    /// Publishes a post of the creator with this id (listed once the clock reaches its time).
    pub fn publish(&self, creator_id: &str, post: crate::creators::SimCreatorPost) {
        if let Some(c) = lock(&self.state.creators).iter_mut().find(|c| c.id == creator_id) {
            c.posts.push(post);
        }
    }

    /// The creator's owner changes its handle; its id stays.
    pub fn rename_creator(&self, creator_id: &str, handle: &str) {
        if let Some(c) = lock(&self.state.creators).iter_mut().find(|c| c.id == creator_id) {
            c.handle = handle.to_owned();
        }
    }

    /// Sets the clock posts are published by (unix ms), as a test's clock moves.
    pub fn set_clock_ms(&self, now_ms: i64) {
        self.state.clock_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Recorded requests, oldest first: the newest [`SimConfig::history`] of them.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).to_vec()
    }

    /// Makes every CDN link handed out so far expire, as hours passing would.
    pub fn expire_cdn_links(&self) {
        self.state.expire_cdn_links();
    }

    pub fn clear_requests(&self) {
        lock(&self.state.requests).clear();
    }

    /// The full truth of an Instagram post, by its shortcode.
    pub fn expected_instagram_post(&self, code: &str) -> Option<SimPost> {
        crate::rules::pk_of(code).map(|pk| (*self.state.instagram_post(pk)).clone())
    }

    /// The full truth of a post: a decimal id is a TikTok post, anything else a YouTube video.
    pub fn expected_post(&self, id: &str) -> SimPost {
        match id.parse::<u64>() {
            Ok(n) => (*self.state.tiktok_post(n)).clone(),
            Err(_) => (*self.state.youtube_post(id)).clone(),
        }
    }

    /// Requests the fake chat-completions endpoint received (the newest [`SimConfig::history`]).
    pub fn llm_requests(&self) -> Vec<crate::llm::LlmRequest> {
        lock(&self.state.llm).to_vec()
    }

    /// The base URL to configure as `ai.openai.base_url`.
    pub fn llm_base_url(&self) -> String {
        format!("{}/llm/v1", self.state.base)
    }

    /// Spans exported to the OTLP collector as JSON, in arrival order (the newest [`SimConfig::history`]).
    pub fn spans(&self) -> Vec<crate::otlp::ExportedSpan> {
        lock(&self.state.spans).to_vec()
    }

    /// Messages sent to the fake Telegram Bot API, in order (the newest [`SimConfig::history`]).
    pub fn telegram_messages(&self) -> Vec<crate::telegram::TelegramMessage> {
        lock(&self.state.telegram).to_vec()
    }

    /// The API base to configure as the payment provider's (the simulator's own base URL).
    pub fn payments_base_url(&self) -> String {
        self.state.base.clone()
    }

    /// Where `checkout.session.completed` events are posted from now on.
    pub fn set_payments_webhook(&self, url: &str) {
        self.state.payments.set_webhook(url);
    }

    /// Events sent (or due, when no webhook was configured), in order (the newest [`SimConfig::history`]).
    pub fn payment_events(&self) -> Vec<crate::payments::PaymentEvent> {
        self.state.payments.events()
    }

    /// Sends a recorded event again — the same body and event id, a fresh signature — and
    /// returns the receiver's status; `None` for an unknown event, no webhook or no answer.
    /// Only events still kept can be replayed: the newest [`SimConfig::history`].
    pub async fn replay_payment_event(&self, event_id: &str) -> Option<u16> {
        self.state.payments.replay(event_id).await
    }

    /// Checkout sessions (the newest [`SimConfig::history`]), as the provider's API shows them.
    pub fn checkout_sessions(&self) -> Vec<serde_json::Value> {
        self.state.payments.sessions(&self.state.base)
    }

    pub fn smtp_addr(&self) -> SocketAddr {
        self.smtp_addr
    }

    /// `smtp://127.0.0.1:<port>`: the SMTP receiver (plain text, no TLS, no authentication).
    pub fn smtp_url(&self) -> String {
        format!("smtp://{}", self.smtp_addr)
    }

    /// Mail accepted by the SMTP receiver, in order (the newest [`SimConfig::history`]).
    pub fn mails(&self) -> Vec<crate::smtp::SentMail> {
        lock(&self.state.mails).to_vec()
    }

    pub fn clear_mails(&self) {
        lock(&self.state.mails).clear();
    }

    /// The newest mail addressed to `to` (any case), waiting up to `timeout` for one to arrive.
    pub async fn wait_for_mail(&self, to: &str, timeout: std::time::Duration) -> Option<crate::smtp::SentMail> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found =
                lock(&self.state.mails).iter().rev().find(|m| m.to.iter().any(|r| r.eq_ignore_ascii_case(to))).cloned();
            if found.is_some() || tokio::time::Instant::now() >= deadline {
                return found;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Posts `extra` new top-level comments under a post (a decimal id is TikTok, anything else
    /// YouTube); later requests see them, as a re-scrape would.
    pub fn add_comments(&self, id: &str, extra: u64) {
        self.grow(id, |g| g.0 += extra);
    }

    /// Posts `extra` new top-level comments at the top of the list: every comment already
    /// there moves `extra` places down, so offsets read before name other comments after.
    pub fn add_comments_on_top(&self, id: &str, extra: u64) {
        self.grow(id, |g| g.1 += extra);
    }

    /// New top-level comments under a post (a decimal id is TikTok, anything else YouTube),
    /// posted at the given times (unix seconds) with the given tone: a test makes a post's rate
    /// jump or its comments turn negative on its own clock. Later requests see them, in time
    /// order after the comments already there.
    pub fn post_comments(&self, id: &str, comments: &[(i64, crate::truth::Tone)]) {
        let key = Self::key_of(id);
        lock(&self.state.timed).entry(key.clone()).or_default().extend_from_slice(comments);
        lock(&self.state.posts).remove(&key);
    }

    fn key_of(id: &str) -> String {
        match id.parse::<u64>() {
            Ok(_) => format!("tiktok:{id}"),
            Err(_) => format!("youtube:{id}"),
        }
    }

    fn grow(&self, id: &str, change: impl FnOnce(&mut (u64, u64))) {
        let key = Self::key_of(id);
        change(lock(&self.state.grown).entry(key.clone()).or_default());
        lock(&self.state.posts).remove(&key);
    }

    /// Holds every answer (but the OTLP collector's) until [`SimHandle::resume`]: a test can act while
    /// collections are known to be waiting on the platform, whatever the machine's speed.
    pub fn pause(&self) {
        self.state.open.send_replace(false);
    }

    pub fn resume(&self) {
        self.state.open.send_replace(true);
    }

    pub fn set_latency_ms(&self, ms: u64) {
        self.state.latency_ms.store(ms, Ordering::Relaxed);
    }

    pub async fn stop(self) {
        self.smtp.abort();
        self.server.stop(false).await;
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.smtp.abort();
        // The stop command is sent when `stop` is called; awaiting it is optional.
        drop(self.server.stop(false));
    }
}

fn build(listener: TcpListener, state: Arc<State>, signals: bool) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::from(state);
    // Trace exports of a whole job run to megabytes; the default 256 KiB would refuse them.
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(web::PayloadConfig::new(64 * 1024 * 1024))
            .default_service(web::to(dispatch))
    })
    .workers(2)
    .shutdown_timeout(1);
    if !signals {
        server = server.disable_signals();
    }
    Ok(server.listen(listener)?.run())
}

/// Starts the HTTP server on `listener` (not yet polled) and the SMTP receiver on a free
/// loopback port.
async fn start(
    listener: TcpListener,
    cfg: SimConfig,
    signals: bool,
) -> std::io::Result<(SimHandle, actix_web::dev::Server)> {
    let addr = listener.local_addr()?;
    let smtp_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let smtp_addr = smtp_listener.local_addr()?;
    let state = Arc::new(State::new(cfg, format!("http://{addr}")));
    let server = build(listener, state.clone(), signals)?;
    let smtp = tokio::spawn(crate::smtp::run(smtp_listener, state.mails.clone())).abort_handle();
    let handle = SimHandle { state, addr, smtp_addr, smtp, server: server.handle() };
    Ok((handle, server))
}

/// Starts a simulator on 127.0.0.1 with an OS-assigned port (must run inside a tokio runtime).
pub async fn spawn(cfg: SimConfig) -> std::io::Result<SimHandle> {
    let (handle, server) = start(TcpListener::bind("127.0.0.1:0")?, cfg, false).await?;
    tokio::spawn(server);
    Ok(handle)
}

/// Runs a simulator on `addr` until the process is interrupted (the `cova-sim` binary);
/// `ready` gets the running simulator first, to configure it and print its addresses.
pub async fn serve(addr: SocketAddr, cfg: SimConfig, ready: impl FnOnce(&SimHandle)) -> std::io::Result<()> {
    let (handle, server) = start(TcpListener::bind(addr)?, cfg, true).await?;
    ready(&handle);
    let result = server.await;
    drop(handle);
    result
}
