//! Running roles: `serve` (everything in one process) and the split roles.

use anyhow::{Context, bail};
use cova_config::{Config, DatabaseBackend, redact_url};
use cova_gateway::AppState;
use cova_messages::AnalyzeCommand;
use cova_platforms::Platforms;
use cova_queue::Message;
use cova_runtime::Backends;
use cova_scraper::Scraper;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    All,
    Gateway,
    Scraper,
}

impl Roles {
    fn http(self) -> bool {
        matches!(self, Roles::All | Roles::Gateway)
    }

    fn scraper(self) -> bool {
        matches!(self, Roles::All | Roles::Scraper)
    }
}

/// How long workers get to reach a commit after a stop signal.
const DRAIN: Duration = Duration::from_secs(30);

pub async fn migrate(config: Config) -> anyhow::Result<()> {
    let db = cova_storage::Db::connect(&config.database).context("opening the database")?;
    db.migrate().await.context("migrating")?;
    println!("database schema is up to date ({})", redact_url(&config.database.url));
    Ok(())
}

pub async fn run(config: Config, roles: Roles) -> anyhow::Result<()> {
    if roles != Roles::All && config.is_embedded() {
        bail!(
            "queue.url is memory://: the in-process queue only connects roles inside one `cova serve`; \
             set COVA_QUEUE__URL=amqp://… to run roles as separate processes"
        );
    }
    let _telemetry = cova_telemetry::init(&config.telemetry).context("starting telemetry")?;
    let backends = Backends::connect(&config).await?;
    if matches!(DatabaseBackend::parse(&config.database.url), Ok(DatabaseBackend::Sqlite(_))) {
        backends.db.migrate().await.context("migrating the embedded database")?;
    }
    let platforms = Platforms::new(&config.platforms).context("configuring the platform adapters")?;
    let stop = CancellationToken::new();
    let outbox = Arc::new(Notify::new());
    let mut workers = tokio::task::JoinSet::new();
    workers.spawn(cova_runtime::outbox::relay(backends.clone(), outbox.clone(), stop.clone()));
    if roles.scraper() {
        let scraper = Scraper::new(backends.clone(), platforms.clone(), config.scraper.clone(), outbox.clone());
        let stop = stop.clone();
        workers.spawn(async move {
            if let Err(e) = scraper.run(stop).await {
                tracing::error!(error = %e, "the scraper could not start consuming");
            }
        });
    }
    if roles == Roles::All && config.is_embedded() {
        requeue_unfinished(&backends).await;
    }
    tracing::info!(
        database = %redact_url(&config.database.url),
        queue = %redact_url(&config.queue.url),
        cache = %redact_url(&config.cache.url),
        roles = ?roles,
        "cova starting"
    );

    if roles.http() {
        let listener =
            TcpListener::bind(&config.http.addr).with_context(|| format!("binding http.addr {}", config.http.addr))?;
        let addr = listener.local_addr().context("reading the bound address")?;
        tracing::info!(http.addr = %addr, "cova listening on http://{addr}");
        let state = AppState::new(config, backends, platforms, outbox);
        let server = cova_gateway::server(state, listener).context("starting the HTTP server")?;
        let handle = server.handle();
        let stopper = tokio::spawn(async move {
            shutdown_signal().await;
            tracing::info!("shutting down: draining in-flight requests");
            handle.stop(true).await;
        });
        server.await.context("HTTP server")?;
        stopper.abort();
    } else {
        shutdown_signal().await;
        tracing::info!("shutting down: letting running jobs reach a commit");
    }
    stop.cancel();
    if tokio::time::timeout(DRAIN, async { while workers.join_next().await.is_some() {} }).await.is_err() {
        tracing::warn!("workers did not stop in time; unacknowledged jobs will be redelivered");
    }
    tracing::info!("stopped");
    Ok(())
}

/// The in-process queue starts empty: re-issue the commands of jobs a previous run left
/// unfinished (collection is idempotent, so a job that was mid-way simply starts over).
async fn requeue_unfinished(backends: &Backends) {
    match cova_storage::repo::jobs::unfinished(&backends.db).await {
        Ok(ids) => {
            for job_id in ids {
                let payload = AnalyzeCommand { job_id: job_id.clone() }.to_json().into_bytes();
                if let Err(e) =
                    backends.queue.publish(Message::new(cova_storage::repo::jobs::SCRAPER_ROLE, payload)).await
                {
                    tracing::error!(job.id = %job_id, error = %e, "re-queueing an unfinished job failed");
                }
            }
        }
        Err(e) => tracing::error!(error = %e, "listing unfinished jobs failed"),
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
