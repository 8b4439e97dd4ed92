//! Route table. Every resource answers 405 `method_not_allowed` for methods it does not serve.

mod account;
mod ai;
mod analyses;
mod analyze;
mod batch;
mod billing;
mod creators;
mod export;
mod health;
mod history;
mod media;
mod metadata;
mod notifications;
mod reference;
pub(crate) mod sandbox;
mod search;
mod spikes;
mod stream;
mod tokens;
mod usage;
mod views;
mod workspace;

use crate::backend_errors::method_not_allowed;
use actix_web::http::Method;
use actix_web::{FromRequest, Handler, HttpRequest, Responder, Route, web};

/// A route of `method` to `handler`, with the method kept for the resource's `Allow`.
fn on<F, Args>(method: Method, handler: F) -> (Method, Route)
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    (method.clone(), web::method(method).to(handler))
}

/// A resource serving `routes`; any other method is 405 with the `Allow` header naming them.
fn resource(path: &str, routes: impl IntoIterator<Item = (Method, Route)>) -> actix_web::Resource {
    let mut resource = web::resource(path);
    let mut allowed = Vec::new();
    for (method, route) in routes {
        allowed.push(method.to_string());
        resource = resource.route(route);
    }
    let allow = allowed.join(", ");
    resource.default_service(web::to(move |req: HttpRequest| method_not_allowed(req, allow.clone())))
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/healthz", [on(Method::GET, health::healthz)]))
        .service(resource("/readyz", [on(Method::GET, health::readyz)]))
        .service(resource("/docs", [on(Method::GET, reference::page)]))
        // `HEAD /` answers like `GET /` without the body (monitors and link checkers ask so).
        .service(resource("/", [on(Method::GET, workspace::index), on(Method::HEAD, workspace::index)]))
        .service(resource("/app.js", [on(Method::GET, workspace::script)]))
        .service(resource("/chart.js", [on(Method::GET, workspace::chart)]))
        .service(resource("/app.css", [on(Method::GET, workspace::style)]))
        .service(
            web::scope("/api/v1")
                .service(resource("/auth/signup", [on(Method::POST, account::signup)]))
                .service(resource("/auth/confirm", [on(Method::POST, account::confirm)]))
                .service(resource("/auth/login", [on(Method::POST, account::login)]))
                .service(resource("/auth/logout", [on(Method::POST, account::logout)]))
                .service(resource("/auth/session", [on(Method::GET, account::current)]))
                .service(resource("/auth/reset", [on(Method::POST, account::reset)]))
                .service(resource("/auth/reset/confirm", [on(Method::POST, account::reset_confirm)]))
                .service(resource("/tokens", [on(Method::GET, tokens::list), on(Method::POST, tokens::create)]))
                .service(resource("/tokens/{id}", [on(Method::DELETE, tokens::revoke)]))
                .service(resource("/billing/packs", [on(Method::GET, billing::packs)]))
                .service(resource("/billing/checkout", [on(Method::POST, billing::checkout)]))
                .service(resource("/billing/purchases", [on(Method::GET, billing::list)]))
                .service(resource("/billing/webhook", [on(Method::POST, billing::webhook)]))
                .service(resource("/openapi.json", [on(Method::GET, reference::openapi)]))
                .service(resource("/usage", [on(Method::GET, usage::get_usage)]))
                .service(resource("/metadata", [on(Method::POST, metadata::post_metadata)]))
                .service(resource(
                    "/analyze",
                    [on(Method::POST, analyze::post_analyze), on(Method::GET, history::analyze_jobs)],
                ))
                .service(resource("/analyze/batch", [on(Method::POST, batch::create)]))
                .service(resource("/analyze/batch/preview", [on(Method::POST, batch::preview)]))
                .service(resource("/analyze/batch/{id}", [on(Method::GET, batch::get)]))
                .service(resource("/analyze/batch/{id}/cancel", [on(Method::POST, batch::cancel)]))
                .service(resource("/creators", [on(Method::GET, creators::list), on(Method::POST, creators::add)]))
                .service(resource(
                    "/creators/{ref}",
                    [on(Method::GET, creators::get), on(Method::DELETE, creators::remove)],
                ))
                .service(resource("/creators/{ref}/refresh", [on(Method::POST, creators::refresh)]))
                .service(resource("/creators/{ref}/watch", [on(Method::PUT, creators::set_watch)]))
                .service(resource("/analyze/{job_id}", [on(Method::GET, analyze::get_job)]))
                .service(resource("/analyze/{job_id}/export", [on(Method::GET, export::export_job)]))
                .service(resource("/analyses/saved", [on(Method::GET, analyses::list)]))
                .service(resource("/comments/search", [on(Method::GET, search::search)]))
                .service(resource("/comments/search/export", [on(Method::GET, search::export)]))
                .service(resource("/analyses/session", [on(Method::GET, analyses::session)]))
                .service(resource("/analyses/save-metadata", [on(Method::POST, analyses::save_metadata)]))
                .service(resource(
                    "/analyses/{ref}",
                    [on(Method::GET, analyses::get), on(Method::DELETE, analyses::delete)],
                ))
                .service(resource("/analyses/{ref}/save", [on(Method::POST, analyses::save)]))
                .service(resource("/analyses/{ref}/watch", [on(Method::PUT, analyses::watch)]))
                .service(resource("/analyses/{ref}/refresh", [on(Method::POST, analyses::refresh)]))
                .service(resource("/analyses/{ref}/export", [on(Method::GET, export::export)]))
                .service(resource(
                    "/keywords",
                    [on(Method::GET, notifications::get_keywords), on(Method::PUT, notifications::put_keywords)],
                ))
                .service(resource("/keyword-alerts", [on(Method::GET, notifications::get_alerts)]))
                .service(resource("/spike-alerts", [on(Method::GET, spikes::get_alerts)]))
                .service(resource(
                    "/spike-alerts/settings",
                    [on(Method::GET, spikes::get_settings), on(Method::PUT, spikes::put_settings)],
                ))
                .service(resource(
                    "/spike-alerts/settings/{ref}",
                    [
                        on(Method::GET, spikes::get_subject),
                        on(Method::PUT, spikes::put_subject),
                        on(Method::DELETE, spikes::delete_subject),
                    ],
                ))
                .service(resource(
                    "/notification-channels",
                    [on(Method::GET, notifications::get_channels), on(Method::PUT, notifications::put_channels)],
                ))
                .service(resource(
                    "/notification-channels/webhook/rotate-secret",
                    [on(Method::POST, notifications::rotate_secret)],
                ))
                .service(resource("/notification-channels/test", [on(Method::POST, notifications::test_channels)]))
                .service(resource(
                    "/notification-channels/deliveries",
                    [on(Method::GET, notifications::get_deliveries)],
                ))
                .service(resource(
                    "/notification-channels/deliveries/{id}/replay",
                    [on(Method::POST, notifications::replay)],
                ))
                .service(resource("/ai/quote", [on(Method::POST, ai::quote)]))
                .service(resource("/ai/run", [on(Method::POST, ai::run)]))
                .service(resource("/ai/jobs", [on(Method::GET, history::ai_jobs)]))
                .service(resource("/ai/jobs/{id}", [on(Method::GET, ai::get_job)]))
                .service(resource("/ai/{ref}/queries", [on(Method::PUT, ai::put_queries)]))
                .service(resource("/media/file", [on(Method::GET, media::file)]))
                .service(resource("/media/download", [on(Method::GET, media::download)]))
                .service(resource("/sandbox/metadata", [on(Method::POST, sandbox::metadata)]))
                .service(resource("/sandbox/analyze", [on(Method::POST, sandbox::analyze)])),
        );
}
