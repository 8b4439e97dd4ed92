//! `/api/v1/billing/…`: the pack catalogue, checkouts with the payment provider, the
//! account's purchases, and the provider's webhook that grants a paid pack (once per checkout).

use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::metering::authorized_any;
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_billing::{CheckoutRequest, PaymentsError, SIGNATURE_HEADER, WebhookError};
use cova_domain::time::rfc3339;
use cova_errors::{ApiError, ErrorCode};
use cova_storage::repo::purchases::{self, NewPurchase, Paid, Payment, Purchase};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckoutBody {
    pack: String,
}

/// `GET /billing/packs`: the catalogue (any credential).
pub async fn packs(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (_, meter, ()) = authorized_any(&req, &state, async |_| Ok(())).await?;
    let packs: Vec<_> = state
        .config
        .billing
        .packs
        .iter()
        .map(|p| json!({"id": p.id, "comments": p.comments, "price": {"amount": p.amount, "currency": p.currency}}))
        .collect();
    Ok(meter.json(HttpResponse::Ok(), &json!({ "packs": packs })))
}

/// `POST /billing/checkout {pack}` → 201 `{checkout_id, url}` (cookie session only).
pub async fn checkout(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, meter, pack) = authorized_any(&req, &state, async |p| {
        p.require_session()?;
        let body: CheckoutBody = input::json(&read_body(&state, payload).await?, r#"{"pack": "2k"}"#)?;
        state.config.billing.pack(body.pack.trim()).cloned().ok_or_else(|| {
            let ids: Vec<&str> = state.config.billing.packs.iter().map(|p| p.id.as_str()).collect();
            ApiError::validation(format!("Unknown pack; the packs are: {}.", ids.join(", ")))
        })
    })
    .await?;
    let base = state.config.workspace.base_url(&state.config.http.addr);
    let request = CheckoutRequest {
        pack: &pack,
        account_id: &principal.account_id,
        email: &principal.email,
        success_url: &format!("{base}/#/billing?checkout={{CHECKOUT_SESSION_ID}}"),
        cancel_url: &format!("{base}/#/billing"),
    };
    let checkout = state.payments.create_checkout(request).await.map_err(|e| {
        tracing::warn!(error = %e, "opening a checkout failed");
        meter.fail(match e {
            PaymentsError::NotConfigured | PaymentsError::Unavailable(_) => ApiError::unavailable(),
            // The provider's reason is meant for people (Stripe's messages are); the operator
            // fixes what it names (a currency, an amount the provider does not take).
            PaymentsError::Refused(reason) => ApiError::new(
                ErrorCode::PaymentRefused,
                format!("The payment provider refused to open the checkout: {reason}"),
            ),
        })
    })?;
    purchases::open(
        &state.backends.db,
        NewPurchase {
            checkout_id: &checkout.id,
            account_id: &principal.account_id,
            pack: &pack.id,
            comments: pack.comments,
            amount: pack.amount,
            currency: &pack.currency,
        },
        state.now(),
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    tracing::info!(account.id = %principal.account_id, checkout.id = %checkout.id, pack = %pack.id, "checkout opened");
    Ok(meter.json(HttpResponse::Created(), &json!({"checkout_id": checkout.id, "url": checkout.url})))
}

/// `paid`; `review` when the provider reported a payment that differs from the checkout (the
/// operator settles it); else `pending`.
fn purchase_status(p: &Purchase) -> &'static str {
    match (p.paid_at, &p.mismatch) {
        (Some(_), _) => "paid",
        (None, Some(_)) => "review",
        (None, None) => "pending",
    }
}

fn purchase_view(p: &Purchase) -> serde_json::Value {
    json!({
        "checkout_id": p.checkout_id,
        "pack": p.pack,
        "comments": p.comments,
        "price": {"amount": p.amount, "currency": p.currency},
        "status": purchase_status(p),
        "created_at": rfc3339(p.created_at),
        "paid_at": p.paid_at.map(rfc3339),
    })
}

/// `GET /billing/purchases`: the account's purchases, newest first (the last 100).
pub async fn list(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = authorized_any(&req, &state, async |_| Ok(())).await?;
    let all = purchases::list(&state.backends.db, &principal.account_id, 100)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    Ok(meter.json(HttpResponse::Ok(), &json!({"purchases": all.iter().map(purchase_view).collect::<Vec<_>>()})))
}

/// `POST /billing/webhook`: the provider's signed event. A paid checkout grants its pack to
/// the current month once, however often (and whenever) the event arrives.
pub async fn webhook(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let body = read_body(&state, payload).await?;
    let signature = req.headers().get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
    let now = state.now();
    let event = state.payments.verify_webhook(signature, &body, now.div_euclid(1000)).map_err(|e| match e {
        WebhookError::NotConfigured => {
            tracing::error!("a payment webhook arrived but payments.webhook_secret is not set");
            ApiError::unavailable()
        }
        WebhookError::BadSignature => ApiError::validation(e.to_string()),
        WebhookError::Malformed(_) => ApiError::validation(e.to_string()),
    })?;
    if let Some(checkout) = event.checkout.filter(|c| c.paid) {
        let payment = Payment { amount: checkout.amount_total, currency: checkout.currency.as_deref() };
        let paid = purchases::pay(&state.backends.db, &checkout.id, &event.id, payment, now)
            .await
            .map_err(backend_errors::storage)?;
        match paid {
            Paid::Granted { account_id, balance } => tracing::info!(
                account.id = %account_id, checkout.id = %checkout.id, event.id = %event.id,
                granted = balance.granted, "pack paid and granted"
            ),
            Paid::AlreadyPaid => {
                tracing::info!(checkout.id = %checkout.id, event.id = %event.id, "repeated payment event; nothing granted")
            }
            // A person must look: either the provider's configuration or a forged event.
            Paid::Mismatch { account_id, reason } => tracing::error!(
                account.id = %account_id, checkout.id = %checkout.id, event.id = %event.id, reason,
                "payment event does not match its checkout; nothing granted"
            ),
            // Acknowledged all the same: the provider would otherwise retry it for days.
            Paid::Unknown => {
                tracing::warn!(checkout.id = %checkout.id, event.id = %event.id, "payment event for a checkout cova did not open")
            }
        }
    }
    Ok(HttpResponse::Ok().json(json!({"received": true})))
}
