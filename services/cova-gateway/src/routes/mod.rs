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
mod stream;
mod tokens;
mod usage;
mod views;
mod workspace;

use crate::backend_errors::method_not_allowed;
use actix_web::{Route, web};

fn resource(path: &str, route: Route) -> actix_web::Resource {
    web::resource(path).route(route).default_service(web::to(method_not_allowed))
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/healthz", web::get().to(health::healthz)))
        .service(resource("/readyz", web::get().to(health::readyz)))
        .service(resource("/docs", web::get().to(reference::page)))
        // `HEAD /` answers like `GET /` without the body (monitors and link checkers ask so).
        .service(
            web::resource("/")
                .route(web::get().to(workspace::index))
                .route(web::head().to(workspace::index))
                .default_service(web::to(method_not_allowed)),
        )
        .service(resource("/app.js", web::get().to(workspace::script)))
        .service(resource("/chart.js", web::get().to(workspace::chart)))
        .service(resource("/app.css", web::get().to(workspace::style)))
        .service(
            web::scope("/api/v1")
                .service(resource("/auth/signup", web::post().to(account::signup)))
                .service(resource("/auth/confirm", web::post().to(account::confirm)))
                .service(resource("/auth/login", web::post().to(account::login)))
                .service(resource("/auth/logout", web::post().to(account::logout)))
                .service(resource("/auth/session", web::get().to(account::current)))
                .service(resource("/auth/reset", web::post().to(account::reset)))
                .service(resource("/auth/reset/confirm", web::post().to(account::reset_confirm)))
                .service(
                    web::resource("/tokens")
                        .route(web::get().to(tokens::list))
                        .route(web::post().to(tokens::create))
                        .default_service(web::to(method_not_allowed)),
                )
                .service(resource("/tokens/{id}", web::delete().to(tokens::revoke)))
                .service(resource("/billing/packs", web::get().to(billing::packs)))
                .service(resource("/billing/checkout", web::post().to(billing::checkout)))
                .service(resource("/billing/purchases", web::get().to(billing::list)))
                .service(resource("/billing/webhook", web::post().to(billing::webhook)))
                .service(resource("/openapi.json", web::get().to(reference::openapi)))
                .service(resource("/usage", web::get().to(usage::get_usage)))
                .service(resource("/metadata", web::post().to(metadata::post_metadata)))
                .service(
                    web::resource("/analyze")
                        .route(web::post().to(analyze::post_analyze))
                        .route(web::get().to(history::analyze_jobs))
                        .default_service(web::to(method_not_allowed)),
                )
                .service(resource("/analyze/batch", web::post().to(batch::create)))
                .service(resource("/analyze/batch/preview", web::post().to(batch::preview)))
                .service(resource("/analyze/batch/{id}", web::get().to(batch::get)))
                .service(resource("/analyze/batch/{id}/cancel", web::post().to(batch::cancel)))
                .service(resource("/creators", web::get().to(creators::list)).route(web::post().to(creators::add)))
                .service(
                    resource("/creators/{ref}", web::get().to(creators::get)).route(web::delete().to(creators::remove)),
                )
                .service(resource("/creators/{ref}/refresh", web::post().to(creators::refresh)))
                .service(resource("/creators/{ref}/watch", web::put().to(creators::set_watch)))
                .service(resource("/analyze/{job_id}", web::get().to(analyze::get_job)))
                .service(resource("/analyze/{job_id}/export", web::get().to(export::export_job)))
                .service(resource("/analyses/saved", web::get().to(analyses::list)))
                .service(resource("/analyses/session", web::get().to(analyses::session)))
                .service(resource("/analyses/save-metadata", web::post().to(analyses::save_metadata)))
                .service(
                    web::resource("/analyses/{ref}")
                        .route(web::get().to(analyses::get))
                        .route(web::delete().to(analyses::delete))
                        .default_service(web::to(method_not_allowed)),
                )
                .service(resource("/analyses/{ref}/save", web::post().to(analyses::save)))
                .service(resource("/analyses/{ref}/watch", web::put().to(analyses::watch)))
                .service(resource("/analyses/{ref}/refresh", web::post().to(analyses::refresh)))
                .service(resource("/analyses/{ref}/export", web::get().to(export::export)))
                .service(
                    web::resource("/keywords")
                        .route(web::get().to(notifications::get_keywords))
                        .route(web::put().to(notifications::put_keywords))
                        .default_service(web::to(method_not_allowed)),
                )
                .service(resource("/keyword-alerts", web::get().to(notifications::get_alerts)))
                .service(
                    web::resource("/notification-channels")
                        .route(web::get().to(notifications::get_channels))
                        .route(web::put().to(notifications::put_channels))
                        .default_service(web::to(method_not_allowed)),
                )
                .service(resource(
                    "/notification-channels/webhook/rotate-secret",
                    web::post().to(notifications::rotate_secret),
                ))
                .service(resource("/notification-channels/test", web::post().to(notifications::test_channels)))
                .service(resource("/notification-channels/deliveries", web::get().to(notifications::get_deliveries)))
                .service(resource(
                    "/notification-channels/deliveries/{id}/replay",
                    web::post().to(notifications::replay),
                ))
                .service(resource("/ai/quote", web::post().to(ai::quote)))
                .service(resource("/ai/run", web::post().to(ai::run)))
                .service(resource("/ai/jobs", web::get().to(history::ai_jobs)))
                .service(resource("/ai/jobs/{id}", web::get().to(ai::get_job)))
                .service(resource("/ai/{ref}/queries", web::put().to(ai::put_queries)))
                .service(resource("/media/file", web::get().to(media::file)))
                .service(resource("/media/download", web::get().to(media::download)))
                .service(resource("/sandbox/metadata", web::post().to(sandbox::metadata)))
                .service(resource("/sandbox/analyze", web::post().to(sandbox::analyze))),
        );
}
