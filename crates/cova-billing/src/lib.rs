//! Selling packs through a payment provider with Stripe's API: cova opens a Checkout Session
//! (`POST /v1/checkout/sessions`, form-encoded, the secret key as Bearer) and sends the browser
//! to its page; the provider's webhook, signed with `Stripe-Signature`, reports the payment.
//! The base URL and keys are configuration (`payments.*`), so cova-sim's fake provider and the
//! real one are used alike.

use cova_config::{PackConfig, PaymentsConfig};
use secrecy::ExposeSecret;
use serde::Deserialize;
use std::time::Duration;

pub const SIGNATURE_HEADER: &str = "stripe-signature";

#[derive(Debug, thiserror::Error)]
pub enum PaymentsError {
    #[error("payments are not configured (payments.secret_key is not set)")]
    NotConfigured,
    #[error("the payment provider did not answer: {0}")]
    Unavailable(String),
    #[error("the payment provider refused the checkout: {0}")]
    Refused(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookError {
    #[error("payments.webhook_secret is not set")]
    NotConfigured,
    #[error("the Stripe-Signature header does not sign this body, or its timestamp is outside the tolerance")]
    BadSignature,
    #[error("the event is not JSON of the expected shape: {0}")]
    Malformed(String),
}

/// A checkout the browser is sent to.
#[derive(Debug, Clone, Deserialize)]
pub struct Checkout {
    pub id: String,
    pub url: String,
}

/// What cova opens a checkout for.
pub struct CheckoutRequest<'a> {
    pub pack: &'a PackConfig,
    pub account_id: &'a str,
    pub email: &'a str,
    pub success_url: &'a str,
    pub cancel_url: &'a str,
}

/// A verified webhook event, reduced to what cova acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: String,
    pub kind: String,
    /// For `checkout.session.*` events: the session and whether it is paid.
    pub checkout: Option<CheckoutState>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutState {
    pub id: String,
    /// `payment_status` is `paid`.
    pub paid: bool,
    /// `amount_total`, in the currency's minor unit, and `currency` (lower case), as the
    /// provider charged them: cova grants only when they are the checkout's own.
    pub amount_total: Option<i64>,
    pub currency: Option<String>,
}

#[derive(Deserialize)]
struct RawEvent {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    data: RawData,
}

#[derive(Deserialize)]
struct RawData {
    object: serde_json::Value,
}

#[derive(Deserialize)]
struct ProviderError {
    error: ProviderErrorBody,
}

#[derive(Deserialize)]
struct ProviderErrorBody {
    message: Option<String>,
}

pub struct Payments {
    http: reqwest::Client,
    config: PaymentsConfig,
}

impl Payments {
    pub fn new(config: &PaymentsConfig) -> Result<Self, PaymentsError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| PaymentsError::Unavailable(e.to_string()))?;
        Ok(Self { http, config: config.clone() })
    }

    /// Opens a Checkout Session for one pack. The account and pack ride along as metadata and
    /// `client_reference_id`, but cova trusts only its own record of the session id.
    pub async fn create_checkout(&self, req: CheckoutRequest<'_>) -> Result<Checkout, PaymentsError> {
        let key = self.config.secret_key.as_ref().ok_or(PaymentsError::NotConfigured)?;
        let url = format!("{}/v1/checkout/sessions", self.config.api_base_url.trim_end_matches('/'));
        let name = format!("cova: {} comments", req.pack.comments);
        let amount = req.pack.amount.to_string();
        let form = [
            ("mode", "payment"),
            ("success_url", req.success_url),
            ("cancel_url", req.cancel_url),
            ("client_reference_id", req.account_id),
            ("customer_email", req.email),
            ("line_items[0][quantity]", "1"),
            ("line_items[0][price_data][currency]", &req.pack.currency),
            ("line_items[0][price_data][unit_amount]", &amount),
            ("line_items[0][price_data][product_data][name]", &name),
            ("metadata[pack]", &req.pack.id),
            ("metadata[account_id]", req.account_id),
        ];
        let response = self
            .http
            .post(url)
            .bearer_auth(key.expose_secret())
            .form(&form)
            .send()
            .await
            .map_err(|e| PaymentsError::Unavailable(e.without_url().to_string()))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| PaymentsError::Unavailable(e.to_string()))?;
        if status.is_server_error() {
            return Err(PaymentsError::Unavailable(format!("HTTP {status}")));
        }
        if !status.is_success() {
            let message = serde_json::from_slice::<ProviderError>(&body)
                .ok()
                .and_then(|e| e.error.message)
                .unwrap_or_else(|| format!("HTTP {status}"));
            return Err(PaymentsError::Refused(message));
        }
        serde_json::from_slice(&body).map_err(|e| PaymentsError::Unavailable(format!("unreadable answer: {e}")))
    }

    /// Checks the signature (timestamp within `payments.webhook_tolerance_s` of `now_s`) and
    /// reads the event.
    pub fn verify_webhook(&self, header: &str, body: &[u8], now_s: i64) -> Result<Event, WebhookError> {
        let secret = self.config.webhook_secret.as_ref().ok_or(WebhookError::NotConfigured)?;
        let tolerance = i64::try_from(self.config.webhook_tolerance_s).unwrap_or(i64::MAX);
        if !cova_auth::signature::verify(header, secret.expose_secret(), body, now_s, tolerance) {
            return Err(WebhookError::BadSignature);
        }
        parse_event(body)
    }
}

fn parse_event(body: &[u8]) -> Result<Event, WebhookError> {
    let raw: RawEvent = serde_json::from_slice(body).map_err(|e| WebhookError::Malformed(e.to_string()))?;
    let checkout = if raw.kind.starts_with("checkout.session.") {
        let object = &raw.data.object;
        let id = object["id"].as_str().ok_or_else(|| WebhookError::Malformed("data.object.id is missing".into()))?;
        Some(CheckoutState {
            id: id.to_owned(),
            paid: object["payment_status"].as_str() == Some("paid"),
            amount_total: object["amount_total"].as_i64(),
            currency: object["currency"].as_str().map(str::to_ascii_lowercase),
        })
    } else {
        None
    };
    Ok(Event { id: raw.id, kind: raw.kind, checkout })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payments() -> Payments {
        let config =
            PaymentsConfig { webhook_secret: Some("whsec_test".to_owned().into()), ..PaymentsConfig::default() };
        Payments::new(&config).expect("client")
    }

    const EVENT: &[u8] = br#"{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":{"id":"cs_1","payment_status":"paid","amount_total":900,"currency":"USD"}}}"#;

    #[test]
    fn webhooks_are_verified_then_read() {
        let p = payments();
        let header = cova_auth::signature::sign("whsec_test", 1_700_000_000, EVENT);
        let event = p.verify_webhook(&header, EVENT, 1_700_000_100).expect("valid");
        assert_eq!(event.id, "evt_1");
        assert_eq!(
            event.checkout,
            Some(CheckoutState {
                id: "cs_1".into(),
                paid: true,
                amount_total: Some(900),
                currency: Some("usd".into())
            })
        );
        assert_eq!(p.verify_webhook(&header, EVENT, 1_700_000_301), Err(WebhookError::BadSignature), "too old");
        let forged = cova_auth::signature::sign("whsec_other", 1_700_000_000, EVENT);
        assert_eq!(p.verify_webhook(&forged, EVENT, 1_700_000_000), Err(WebhookError::BadSignature));
        let body = br#"{"id":"evt_2"}"#;
        let header = cova_auth::signature::sign("whsec_test", 1_700_000_000, body);
        assert!(matches!(p.verify_webhook(&header, body, 1_700_000_000), Err(WebhookError::Malformed(_))));
    }

    #[test]
    fn other_events_carry_no_checkout() {
        let body = br#"{"id":"evt_3","type":"charge.refunded","data":{"object":{"id":"ch_1"}}}"#;
        assert_eq!(parse_event(body).expect("event").checkout, None);
    }

    #[tokio::test]
    async fn without_a_key_no_checkout_is_attempted() {
        let pack = PackConfig { id: "2k".into(), comments: 2000, amount: 900, currency: "usd".into() };
        let request =
            CheckoutRequest { pack: &pack, account_id: "a", email: "a@b.co", success_url: "x", cancel_url: "y" };
        assert!(matches!(
            Payments::new(&PaymentsConfig::default()).expect("client").create_checkout(request).await,
            Err(PaymentsError::NotConfigured)
        ));
    }
}
