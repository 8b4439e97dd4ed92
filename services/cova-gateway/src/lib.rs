//! The gateway: cova's HTTP API. Authentication, scopes, rate limits, CORS and the rendering
//! of the error catalogue live here; work is handed to the worker roles through the outbox.

mod auth;
mod backend_errors;
mod error;
mod http_server;
mod input;
mod later;
mod lookup;
mod metering;
mod middleware;
mod routes;
mod session;

pub use auth::Principal;
pub use middleware::loggable_path;

use actix_web::dev::Server;
use actix_web::{App, web};
use cova_config::Config;
use cova_runtime::Backends;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

/// Everything a request handler needs; shared by all HTTP workers.
pub struct AppState {
    pub config: Config,
    pub backends: Backends,
    pub platforms: cova_platforms::Platforms,
    /// Wakes the outbox relay when a request wrote a command.
    pub outbox: Arc<tokio::sync::Notify>,
    /// Peers whose `X-Forwarded-For` is believed (`http.trusted_proxies`).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Checks and tests customers' notification channels.
    pub notify: Arc<cova_notify::Sender>,
    /// The workspace's e-mail (confirmation, password reset).
    pub mailer: Arc<cova_mail::Mailer>,
    /// The payment provider that sells packs.
    pub payments: cova_billing::Payments,
    tokens: auth::TokenCache,
    inflight: lookup::InFlight,
    /// Lookups that go on after their request was answered (list previews' counts, links).
    pub(crate) later: later::Later,
    /// Limits counted in this process alone while the shared cache does not answer.
    pub(crate) fallback: metering::Fallback,
}

/// Settings the gateway cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("smtp: {0}")]
    Mail(#[from] cova_mail::MailError),
    #[error("payments: {0}")]
    Payments(#[from] cova_billing::PaymentsError),
}

impl AppState {
    pub fn new(
        config: Config,
        backends: Backends,
        platforms: cova_platforms::Platforms,
        outbox: Arc<tokio::sync::Notify>,
        notify: Arc<cova_notify::Sender>,
    ) -> Result<Arc<Self>, StateError> {
        let mailer = Arc::new(cova_mail::Mailer::from_config(&config.smtp)?);
        let payments = cova_billing::Payments::new(&config.payments)?;
        let tokens = auth::TokenCache::new(Duration::from_millis(config.auth.token_cache_ms));
        // Validated at load; an entry that does not parse cannot reach here.
        let trusted_proxies = config.http.trusted_proxies.iter().filter_map(|ip| ip.parse().ok()).collect();
        let later = later::Later::new(platforms.clone(), backends.cache.clone(), backends.clock.clone());
        Ok(Arc::new(Self {
            later,
            fallback: metering::Fallback::new(config.limits.gateways),
            config,
            backends,
            platforms,
            outbox,
            trusted_proxies,
            notify,
            mailer,
            payments,
            tokens,
            inflight: Default::default(),
        }))
    }

    /// Now, on the clock the product rules run on.
    pub fn now(&self) -> i64 {
        self.backends.clock.now_ms()
    }
}

/// Builds the HTTP server on an already bound listener (tests bind port 0).
/// Signals are not handled here: the caller stops the server through its handle.
pub fn server(state: Arc<AppState>, listener: TcpListener) -> std::io::Result<Server> {
    let settings = http_server::Settings {
        workers: state.config.http.workers,
        shutdown_timeout_s: state.config.http.shutdown_timeout_s,
        head_timeout: Duration::from_millis(state.config.http.body_timeout_ms),
        keep_alive: Duration::from_secs(5),
    };
    let data = web::Data::from(state);
    http_server::serve(listener, settings, move || {
        App::new()
            .app_data(data.clone())
            .app_data(backend_errors::path_config())
            .app_data(backend_errors::query_config())
            // Outermost last: request context → CORS → URL guard → routes, so that even the
            // URL guard's refusal carries CORS headers a browser can read.
            .wrap(actix_web::middleware::from_fn(middleware::guard_url))
            .wrap(middleware::cors())
            .wrap(actix_web::middleware::from_fn(middleware::credentialed_cors))
            .wrap(actix_web::middleware::from_fn(middleware::request_context))
            .configure(routes::configure)
            .default_service(web::to(backend_errors::route_not_found))
    })
}
