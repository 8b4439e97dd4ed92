//! Route table. Every resource answers 405 `method_not_allowed` for methods it does not serve.

mod health;
mod usage;

use crate::backend_errors::method_not_allowed;
use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/healthz").route(web::get().to(health::healthz)).default_service(web::to(method_not_allowed)),
    )
    .service(web::resource("/readyz").route(web::get().to(health::readyz)).default_service(web::to(method_not_allowed)))
    .service(web::scope("/api/v1").service(
        web::resource("/usage").route(web::get().to(usage::get_usage)).default_service(web::to(method_not_allowed)),
    ));
}
