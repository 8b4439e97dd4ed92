//! The composition root: which roles run, on which backends. `cova serve` and the split roles,
//! the test harness and the benchmarks all start cova through [`Stack`], so a role is added in
//! one place: a queue-consuming role is a handler on the worker runtime plus one line in
//! [`StackBuilder::start`].

mod ops;
mod pace;
pub use pace::CacheQueues;

use anyhow::{Context, bail};
use cova_config::{Config, DatabaseBackend};
use cova_domain::Clock;
use cova_platforms::Platforms;
use cova_runtime::{Backends, Handler, JobStep, worker};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// A role of the `cova` binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The HTTP API.
    Gateway,
    /// Collects comments for analyze jobs.
    Scraper,
    /// Starts due watch runs, lets an account's work go on when its jobs end (waiting jobs,
    /// batch URLs), and purges expired breakdowns.
    Scheduler,
    /// Raises keyword alerts and delivers notifications.
    Notifier,
    /// Runs AI jobs on collected comments.
    AiWorker,
}

impl Role {
    /// Every role: what `cova serve` runs in one process.
    pub const ALL: [Role; 5] = [Role::Gateway, Role::Scraper, Role::Scheduler, Role::Notifier, Role::AiWorker];

    /// Whether the role keeps or serves images (its process opens the media store).
    pub const fn uses_media(self) -> bool {
        matches!(self, Role::Gateway | Role::Scraper | Role::Scheduler)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Role::Gateway => "gateway",
            Role::Scraper => "scraper",
            Role::Scheduler => "scheduler",
            Role::Notifier => "notifier",
            Role::AiWorker => "ai-worker",
        }
    }
}

type ExtraWorker = Box<dyn FnOnce(&Backends, CancellationToken, &mut JoinSet<()>) + Send>;

/// Chooses what a [`Stack`] runs.
pub struct StackBuilder {
    config: Config,
    roles: Vec<Role>,
    listener: Option<TcpListener>,
    backends: Option<Backends>,
    clock: Option<Clock>,
    extra: Vec<ExtraWorker>,
}

impl StackBuilder {
    pub fn roles(mut self, roles: impl IntoIterator<Item = Role>) -> Self {
        for role in roles {
            if !self.roles.contains(&role) {
                self.roles.push(role);
            }
        }
        self
    }

    /// Serves HTTP on this listener instead of binding `http.addr` (tests bind port 0).
    pub fn listener(mut self, listener: TcpListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Runs on these backends instead of connecting from the configuration.
    pub fn backends(mut self, backends: Backends) -> Self {
        self.backends = Some(backends);
        self
    }

    /// Runs the product rules on this clock (tests move time by hand).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Runs one more queue-consuming role on the worker runtime.
    pub fn worker<H: Handler>(mut self, handler: H) -> Self {
        self.extra.push(Box::new(move |backends, stop, tasks| {
            tasks.spawn(worker::run(backends.clone(), Arc::new(handler), stop));
        }));
        self
    }

    /// Connects, binds the HTTP port (before any worker starts, so a busy port stops the start
    /// at once), and starts the roles, each with the outbox relay of the process.
    pub async fn start(self) -> anyhow::Result<Stack> {
        let config = self.config;
        let has = |r: Role| self.roles.contains(&r);
        if !Role::ALL.iter().all(|r| self.roles.contains(r)) && config.is_embedded() {
            bail!(
                "queue.url is memory://: the in-process queue only connects roles inside one `cova serve`; \
                 set COVA_QUEUE__URL=amqp://… to run roles as separate processes"
            );
        }
        let mut backends = match self.backends {
            Some(b) => b,
            None => Backends::connect_opening(&config, self.roles.iter().any(|r| r.uses_media())).await?,
        };
        if let Some(clock) = self.clock {
            backends = backends.with_clock(clock);
        }
        if matches!(DatabaseBackend::parse(&config.database.url), Ok(DatabaseBackend::Sqlite(_))) {
            backends.db.migrate().await.context("migrating the embedded database")?;
        }
        let listener = match (has(Role::Gateway), self.listener) {
            (false, _) => None,
            (true, Some(l)) => Some(l),
            (true, None) => Some(
                TcpListener::bind(&config.http.addr)
                    .with_context(|| format!("binding http.addr {} (COVA_HTTP__ADDR)", config.http.addr))?,
            ),
        };
        let metrics_listener = match config.metrics.addr() {
            None => None,
            Some(addr) => Some(TcpListener::bind(addr).with_context(|| {
                format!("binding metrics.addr {addr} (COVA_METRICS__ADDR; empty turns the listener off)")
            })?),
        };
        // The pace per platform host and egress route is kept in the cache, for the fleet.
        let pace: Arc<dyn cova_platforms::QueueStore> = Arc::new(pace::CacheQueues(backends.cache.clone()));
        let platforms = Platforms::paced(&config.platforms, Some(pace)).context("configuring the platform adapters")?;
        let notify = Arc::new(
            cova_notify::Sender::new(&config.notifier).map_err(|e| anyhow::anyhow!("configuring notifier.*: {e}"))?,
        );
        let stop = CancellationToken::new();
        let outbox = Arc::new(Notify::new());
        let mut tasks = JoinSet::new();
        tasks.spawn(cova_runtime::outbox::relay(backends.clone(), outbox.clone(), stop.clone()));

        // The queue-consuming roles, one line each.
        if has(Role::Scraper) {
            let scraper = cova_scraper::Scraper::new(
                backends.clone(),
                platforms.clone(),
                config.scraper.clone(),
                &config.media,
                outbox.clone(),
            );
            tasks.spawn(worker::run(backends.clone(), Arc::new(JobStep::new(scraper)), stop.clone()));
        }
        if has(Role::AiWorker) {
            let ai = cova_ai::AiWorker::new(backends.clone(), config.ai.clone(), outbox.clone())
                .map_err(|e| anyhow::anyhow!("configuring ai.*: {e}"))?;
            tasks.spawn(worker::run(backends.clone(), Arc::new(JobStep::new(ai)), stop.clone()));
        }
        if has(Role::Notifier) {
            let queued = Arc::new(Notify::new());
            let events = config.notifier.event_concurrency;
            let notifier = cova_notifier::Notifier::new(backends.clone(), events, outbox.clone(), queued.clone());
            tasks.spawn(worker::run(backends.clone(), Arc::new(notifier), stop.clone()));
            let deliverer =
                cova_notifier::Deliverer::new(backends.clone(), notify.clone(), config.notifier.clone(), queued);
            tasks.spawn(Arc::new(deliverer).run(stop.clone()));
        }

        if has(Role::Scheduler) {
            let flow = cova_runtime::Flow::new(backends.clone(), outbox.clone());
            tasks.spawn(worker::run(backends.clone(), Arc::new(flow), stop.clone()));
        }

        // The periodic roles.
        if has(Role::Scheduler) {
            let scheduler = cova_scheduler::Scheduler::new(
                backends.clone(),
                config.scheduler.clone(),
                outbox.clone(),
                platforms.clone(),
            );
            tasks.spawn(scheduler.run(stop.clone()));
        }
        for extra in self.extra {
            extra(&backends, stop.clone(), &mut tasks);
        }

        if config.is_embedded() {
            // The in-process queue starts empty: what a previous run left in its journal is
            // handed back to the roles (commands not yet done, events not yet handled).
            match backends.queue.restore().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(messages = n, "messages an earlier run left unhandled are queued again"),
                Err(e) => {
                    tracing::error!(error = %e, "reading the queue's journal failed; unfinished work waits for `cova admin jobs requeue`")
                }
            }
            outbox.notify_one();
        }
        let ops = match metrics_listener {
            Some(listener) => {
                let addr = listener.local_addr().context("reading the metrics address")?;
                let server = ops::server(backends.clone(), listener).context("starting the metrics listener")?;
                let handle = server.handle();
                let running = tokio::spawn(async move {
                    if let Err(e) = server.await {
                        tracing::error!(error = %e, "the metrics listener stopped with an error");
                    }
                });
                tracing::info!(metrics.addr = %addr, "cova metrics on http://{addr}/metrics");
                Some(Http { addr, handle, running })
            }
            None => None,
        };
        let http = match listener {
            Some(listener) => {
                let addr = listener.local_addr().context("reading the bound address")?;
                let mut config = config.clone();
                if config.workspace.public_url.is_empty() {
                    // E-mailed links name the address actually bound (port 0 in tests).
                    config.workspace.public_url = format!("http://{addr}");
                }
                let state = cova_gateway::AppState::new(config, backends.clone(), platforms, outbox.clone(), notify)
                    .context("starting the gateway")?;
                let server = cova_gateway::server(state, listener).context("starting the HTTP server")?;
                let handle = server.handle();
                let running = tokio::spawn(async move {
                    if let Err(e) = server.await {
                        tracing::error!(error = %e, "the HTTP server stopped with an error");
                    }
                });
                Some(Http { addr, handle, running })
            }
            None => None,
        };
        Ok(Stack { backends, http, ops, tasks, stop, outbox })
    }
}

struct Http {
    addr: SocketAddr,
    handle: actix_web::dev::ServerHandle,
    running: tokio::task::JoinHandle<()>,
}

/// cova running: its roles, its relay and (with the gateway) its HTTP server.
pub struct Stack {
    backends: Backends,
    http: Option<Http>,
    /// The metrics and probes listener (`metrics.addr`).
    ops: Option<Http>,
    tasks: JoinSet<()>,
    stop: CancellationToken,
    outbox: Arc<Notify>,
}

impl Stack {
    pub fn builder(config: Config) -> StackBuilder {
        StackBuilder { config, roles: Vec::new(), listener: None, backends: None, clock: None, extra: Vec::new() }
    }

    /// Where the HTTP API listens, when the gateway runs.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(|h| h.addr)
    }

    /// Where `/metrics`, `/healthz` and `/readyz` are served, unless `metrics.addr` is empty.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.ops.as_ref().map(|h| h.addr)
    }

    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// Wakes the outbox relay (after writing to the outbox from outside the roles).
    pub fn wake_outbox(&self) {
        self.outbox.notify_one();
    }

    /// Stops: the HTTP server first (in-flight requests finish), then the workers, which stop
    /// taking messages and get `drain` to reach a commit. False when some did not.
    pub async fn stop(mut self, drain: Duration) -> bool {
        if let Some(http) = self.http.take() {
            http.handle.stop(true).await;
            let _ = http.running.await;
        }
        self.stop.cancel();
        let drained =
            tokio::time::timeout(drain, async { while self.tasks.join_next().await.is_some() {} }).await.is_ok();
        if !drained {
            tracing::warn!("workers did not stop in time; unacknowledged messages will be redelivered");
            self.tasks.abort_all();
        }
        // Last, so the probes answer while the workers drain.
        if let Some(ops) = self.ops.take() {
            ops.handle.stop(false).await;
            let _ = ops.running.await;
        }
        drained
    }
}
