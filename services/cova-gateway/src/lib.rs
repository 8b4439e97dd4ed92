//! The gateway: cova's HTTP API. Authentication, scopes, rate limits, CORS and the error
//! catalogue live here; work is handed to the worker roles through the queue.

mod auth;
mod backend_errors;
mod metering;
mod middleware;
mod routes;

pub use auth::Principal;

use actix_web::dev::Server;
use actix_web::{App, HttpServer, web};
use cova_config::Config;
use cova_runtime::Backends;
use std::net::TcpListener;
use std::sync::Arc;

/// Everything a request handler needs; shared by all HTTP workers.
pub struct AppState {
    pub config: Config,
    pub backends: Backends,
    pub platforms: cova_platforms::Platforms,
    /// Wakes the outbox relay when a request wrote a command.
    pub outbox: Arc<tokio::sync::Notify>,
    /// Peers whose `X-Forwarded-For` is believed (`http.trusted_proxies`).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    tokens: auth::TokenCache,
}

impl AppState {
    pub fn new(
        config: Config,
        backends: Backends,
        platforms: cova_platforms::Platforms,
        outbox: Arc<tokio::sync::Notify>,
    ) -> Arc<Self> {
        let tokens = auth::TokenCache::new(std::time::Duration::from_millis(config.auth.token_cache_ms));
        // Validated at load; an entry that does not parse cannot reach here.
        let trusted_proxies = config.http.trusted_proxies.iter().filter_map(|ip| ip.parse().ok()).collect();
        Arc::new(Self { config, backends, platforms, outbox, trusted_proxies, tokens })
    }
}

/// Builds the HTTP server on an already bound listener (tests bind port 0).
/// Signals are not handled here: the caller stops the server through its handle.
pub fn server(state: Arc<AppState>, listener: TcpListener) -> std::io::Result<Server> {
    let workers = state.config.http.workers;
    let shutdown = state.config.http.shutdown_timeout_s;
    let data = web::Data::from(state);
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(backend_errors::json_config(data.config.http.body_limit_bytes))
            .app_data(backend_errors::path_config())
            .app_data(backend_errors::query_config())
            .app_data(web::PayloadConfig::new(data.config.http.body_limit_bytes))
            // Outermost last: request context → CORS → token-in-URL refusal → routes, so that
            // even the refusal carries CORS headers a browser can read.
            .wrap(actix_web::middleware::from_fn(middleware::refuse_token_in_url))
            .wrap(middleware::cors())
            .wrap(actix_web::middleware::from_fn(middleware::request_context))
            .configure(routes::configure)
            .default_service(web::to(backend_errors::route_not_found))
    })
    .disable_signals()
    .shutdown_timeout(shutdown)
    .listen(listener)?;
    if workers > 0 {
        server = server.workers(workers);
    }
    Ok(server.run())
}
