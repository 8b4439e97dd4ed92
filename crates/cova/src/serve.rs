//! Running roles: `serve` (every role in one process) and the split roles, all through the
//! composition root (`cova-app`).

use anyhow::Context;
use cova_app::{Role, Stack};
use cova_config::{Config, redact_url};
use std::time::Duration;

/// How long workers get to reach a commit after a stop signal.
const DRAIN: Duration = Duration::from_secs(30);

pub async fn migrate(config: Config) -> anyhow::Result<()> {
    let db = cova_storage::Db::connect(&config.database).context("opening the database")?;
    db.migrate().await.context("migrating")?;
    println!("database schema is up to date ({})", redact_url(&config.database.url));
    Ok(())
}

/// `cova config check`: the configuration loaded and validated (or this is never reached),
/// then every backend probed.
pub async fn check(config: Config) -> anyhow::Result<()> {
    println!("configuration is valid");
    let backends = cova_runtime::Backends::connect(&config).await.context("connecting")?;
    let readiness = backends.readiness(Duration::from_secs(5)).await;
    let urls = [&config.database.url, &config.cache.url, &config.queue.url, &config.media.url];
    for ((name, result), url) in readiness.checks.iter().zip(urls) {
        match result {
            Ok(()) => println!("{name:<9} ok      {}", redact_url(url)),
            Err(e) => println!("{name:<9} FAILED  {}: {e}", redact_url(url)),
        }
    }
    if !readiness.ready() {
        anyhow::bail!("some backends are unreachable (see above)");
    }
    Ok(())
}

pub async fn run(mut config: Config, roles: &[Role]) -> anyhow::Result<()> {
    // A split role names itself in traces unless the operator chose a name.
    if let [role] = roles
        && config.telemetry.service_name == cova_config::TelemetryConfig::default().service_name
    {
        config.telemetry.service_name = format!("cova-{}", role.name());
    }
    let _telemetry = cova_telemetry::init(&config.telemetry).context("starting telemetry")?;
    let names: Vec<&str> = roles.iter().map(|r| r.name()).collect();
    let platforms: Vec<String> = config.platform_urls().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        roles = ?names,
        database = %redact_url(&config.database.url),
        queue = %redact_url(&config.queue.url),
        cache = %redact_url(&config.cache.url),
        media = %redact_url(&config.media.url),
        http.addr = roles.contains(&Role::Gateway).then_some(config.http.addr.as_str()),
        metrics.addr = config.metrics.addr(),
        platforms = %platforms.join(" "),
        "cova starting"
    );
    let stack = Stack::builder(config).roles(roles.iter().copied()).start().await?;
    if let Some(addr) = stack.http_addr() {
        tracing::info!(http.addr = %addr, "cova listening on http://{addr}");
    }
    shutdown_signal().await;
    tracing::info!("shutting down: finishing in-flight requests and jobs (a second Ctrl-C stops at once)");
    tokio::spawn(async {
        shutdown_signal().await;
        tracing::warn!("second stop signal: stopping at once; unacknowledged jobs will be redelivered");
        cova_telemetry::flush_logs();
        std::process::exit(130);
    });
    stack.stop(DRAIN).await;
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
