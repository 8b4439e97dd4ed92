//! Running roles: `serve` (everything in one process) and the split roles.

use anyhow::{Context, bail};
use cova_config::{Config, DatabaseBackend, redact_url};
use cova_gateway::AppState;
use cova_runtime::Backends;
use std::net::TcpListener;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    All,
    Gateway,
}

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
    let listener =
        TcpListener::bind(&config.http.addr).with_context(|| format!("binding http.addr {}", config.http.addr))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    tracing::info!(
        http.addr = %addr,
        database = %redact_url(&config.database.url),
        queue = %redact_url(&config.queue.url),
        cache = %redact_url(&config.cache.url),
        roles = ?roles,
        "cova listening on http://{addr}"
    );
    let state = AppState::new(config, backends);
    let server = cova_gateway::server(state, listener).context("starting the HTTP server")?;
    let handle = server.handle();
    let stopper = tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down: draining in-flight requests");
        handle.stop(true).await;
    });
    server.await.context("HTTP server")?;
    stopper.abort();
    tracing::info!("stopped");
    Ok(())
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
