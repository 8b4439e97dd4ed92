//! A stand-in for Stripe Checkout. cova creates a session with `POST /v1/checkout/sessions`
//! (form-encoded, `Authorization: Bearer sim_sk_test`) and sends the buyer to the session's
//! `url`, a plain HTML page under `/pay/checkout/<id>`. Its Pay button completes the session:
//! the simulator posts a signed `checkout.session.completed` event to the configured webhook,
//! waits for the answer, and only then redirects the browser to `success_url` — the event
//! arriving before the buyer returns, as it can with Stripe.

use crate::history::Ring;
use crate::server::{Req, State, lock};
use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rand::distr::{Alphanumeric, SampleString};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// The API key the simulated provider accepts.
pub const SECRET_KEY: &str = "sim_sk_test";
/// The secret webhook signatures are made with.
pub const WEBHOOK_SECRET: &str = "whsec_sim";

const SESSIONS_PATH: &str = "/v1/checkout/sessions";
const PAGE_PREFIX: &str = "/pay/checkout/";
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// Stripe's sessions expire after a day.
const SESSION_TTL_S: i64 = 24 * 3600;
/// Currencies whose amounts have no minor unit.
const ZERO_DECIMAL: &[&str] =
    &["bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf"];

/// One `checkout.session.completed` event as the simulator sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PaymentEvent {
    pub id: String,
    pub session_id: String,
    /// The exact JSON body that was signed and posted.
    pub body: String,
    /// The receiver's HTTP status; `None` when no webhook was configured or nothing answered.
    pub status: Option<u16>,
}

/// What a create-session request asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Order {
    pub success_url: String,
    pub cancel_url: String,
    pub client_reference_id: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// Sum of unit amount × quantity over the line items, in the currency's minor unit.
    pub amount_total: i64,
    pub currency: String,
    /// The line items' product names, joined.
    pub product_name: String,
}

#[derive(Debug, Clone)]
struct Session {
    id: String,
    created: i64,
    order: Order,
    paid: bool,
}

impl Session {
    /// The session as Stripe's API shows it.
    fn object(&self, base: &str) -> Value {
        let (payment_status, status) = if self.paid { ("paid", "complete") } else { ("unpaid", "open") };
        // Stripe drops the URL once the session is no longer open.
        let url = (!self.paid).then(|| format!("{base}{PAGE_PREFIX}{}", self.id));
        json!({
            "id": self.id,
            "object": "checkout.session",
            "livemode": false,
            "mode": "payment",
            "url": url,
            "payment_status": payment_status,
            "status": status,
            "client_reference_id": self.order.client_reference_id,
            "metadata": self.order.metadata,
            "amount_subtotal": self.order.amount_total,
            "amount_total": self.order.amount_total,
            "currency": self.order.currency,
            "success_url": self.order.success_url,
            "cancel_url": self.order.cancel_url,
            "created": self.created,
            "expires_at": self.created + SESSION_TTL_S,
        })
    }
}

/// The provider's state, kept in the simulator's shared state.
pub(crate) struct Payments {
    webhook: Mutex<Option<String>>,
    /// The newest sessions; an older one is unknown (its page and API answer 404).
    sessions: Mutex<Ring<Session>>,
    /// The newest events; an older one can no longer be replayed.
    events: Mutex<Ring<PaymentEvent>>,
}

impl Payments {
    /// Keeps the newest `history` sessions and events.
    pub fn new(history: usize) -> Self {
        Self {
            webhook: Mutex::new(None),
            sessions: Mutex::new(Ring::new(history)),
            events: Mutex::new(Ring::new(history)),
        }
    }

    pub fn set_webhook(&self, url: &str) {
        *lock(&self.webhook) = Some(url.to_owned());
    }

    pub fn events(&self) -> Vec<PaymentEvent> {
        lock(&self.events).to_vec()
    }

    pub fn sessions(&self, base: &str) -> Vec<Value> {
        lock(&self.sessions).iter().map(|s| s.object(base)).collect()
    }

    /// Sends a recorded event again, same body and id, with a fresh signature; `None` for an
    /// event no longer kept (see [`crate::SimConfig::history`]).
    pub async fn replay(&self, event_id: &str) -> Option<u16> {
        let url = lock(&self.webhook).clone()?;
        let body = lock(&self.events).iter().find(|e| e.id == event_id).map(|e| e.body.clone())?;
        deliver(&url, &body).await
    }

    /// Posts the completion event of a session that was just paid and records it.
    async fn complete(&self, session: &Session, base: &str) {
        let event_id = format!("evt_{}", random_id());
        let body = json!({
            "id": event_id,
            "object": "event",
            "api_version": "2024-06-20",
            "type": "checkout.session.completed",
            "created": chrono::Utc::now().timestamp(),
            "livemode": false,
            "pending_webhooks": 1,
            "data": {"object": session.object(base)},
        })
        .to_string();
        let url = lock(&self.webhook).clone();
        let status = match url {
            Some(url) => deliver(&url, &body).await,
            None => None,
        };
        lock(&self.events).push(PaymentEvent { id: event_id, session_id: session.id.clone(), body, status });
    }
}

fn random_id() -> String {
    Alphanumeric.sample_string(&mut rand::rng(), 24)
}

/// The lowercase hex HMAC-SHA256 of `message` under `key`.
fn hmac_hex(key: &[u8], message: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    hex::encode(ring::hmac::sign(&key, message).as_ref())
}

/// The `Stripe-Signature` header of `body` sent at `timestamp` (unix seconds), signed with
/// [`WEBHOOK_SECRET`]: `t=<timestamp>,v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`. Tests use
/// it to post events of their own.
pub fn signature_header(timestamp: i64, body: &str) -> String {
    let signed = format!("{timestamp}.{body}");
    format!("t={timestamp},v1={}", hmac_hex(WEBHOOK_SECRET.as_bytes(), signed.as_bytes()))
}

/// Posts a signed event; the receiver's status, or `None` if it could not be reached.
async fn deliver(url: &str, body: &str) -> Option<u16> {
    // A client per delivery: senders run on different runtimes (server workers, tests), and a
    // pooled connection must not outlive the runtime that opened it.
    let client = reqwest::Client::builder()
        .timeout(WEBHOOK_TIMEOUT)
        // Stripe counts a redirect as a failed delivery instead of following it.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("user-agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
        .header("stripe-signature", signature_header(chrono::Utc::now().timestamp(), body))
        .body(body.to_owned())
        .send()
        .await
        .ok()?;
    Some(response.status().as_u16())
}

/// Answers the provider's API and checkout pages; `None` for any other path.
pub(crate) async fn handle(state: &State, r: &Req) -> Option<HttpResponse> {
    if r.path.starts_with("/v1/checkout/") {
        return Some(api(state, r));
    }
    let rest = r.path.strip_prefix(PAGE_PREFIX)?;
    Some(match (r.method.as_str(), rest.split_once('/')) {
        ("GET", None) => page(state, rest),
        ("POST", Some((id, "pay"))) => pay(state, id).await,
        (_, None | Some((_, "pay"))) => HttpResponse::MethodNotAllowed().finish(),
        _ => not_found_page(),
    })
}

fn api(state: &State, r: &Req) -> HttpResponse {
    match api_key(&r.headers) {
        None => {
            return stripe_error(
                StatusCode::UNAUTHORIZED,
                None,
                "You did not provide an API key. Provide it in the Authorization header (Authorization: Bearer YOUR_SECRET_KEY).",
            );
        }
        Some(key) if key != SECRET_KEY => {
            return stripe_error(StatusCode::UNAUTHORIZED, None, "Invalid API Key provided.");
        }
        Some(_) => {}
    }
    let retrieve = r.path.strip_prefix(SESSIONS_PATH).and_then(|p| p.strip_prefix('/'));
    match (r.method.as_str(), retrieve) {
        ("POST", None) if r.path == SESSIONS_PATH => create(state, &r.body),
        ("GET", Some(id)) if !id.is_empty() => match find(state, id) {
            Some(s) => HttpResponse::Ok().json(s.object(&state.base)),
            None => stripe_error(StatusCode::NOT_FOUND, Some("id"), &format!("No such checkout.session: '{id}'")),
        },
        _ => {
            stripe_error(StatusCode::NOT_FOUND, None, &format!("Unrecognized request URL ({}: {}).", r.method, r.path))
        }
    }
}

/// The key of a request: Stripe takes it as a bearer token or as the basic-auth user name.
fn api_key(headers: &BTreeMap<String, String>) -> Option<String> {
    let (scheme, credentials) = headers.get("authorization")?.trim().split_once(' ')?;
    let credentials = credentials.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(credentials.to_owned());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = String::from_utf8(STANDARD.decode(credentials).ok()?).ok()?;
        return Some(decoded.split_once(':').map_or(decoded.as_str(), |(user, _)| user).to_owned());
    }
    None
}

fn create(state: &State, body: &[u8]) -> HttpResponse {
    let order = match parse_form(body) {
        Ok(order) => order,
        Err(e) => return stripe_error(StatusCode::BAD_REQUEST, Some(e.param.as_str()), &e.message),
    };
    let session =
        Session { id: format!("cs_test_{}", random_id()), created: chrono::Utc::now().timestamp(), order, paid: false };
    let object = session.object(&state.base);
    lock(&state.payments.sessions).push(session);
    HttpResponse::Ok().json(object)
}

/// Why a create-session form was refused, as Stripe reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FormError {
    pub param: String,
    pub message: String,
}

fn missing(param: &str) -> FormError {
    FormError { param: param.to_owned(), message: format!("Missing required param: {param}.") }
}

fn invalid(param: &str, message: String) -> FormError {
    FormError { param: param.to_owned(), message }
}

#[derive(Debug, Default)]
struct LineItem {
    quantity: Option<String>,
    currency: Option<String>,
    unit_amount: Option<String>,
    name: Option<String>,
}

/// Reads Stripe's bracket notation: `line_items[<i>][price_data][…]` and `metadata[<key>]`.
/// Currencies the simulated provider takes (a few of Stripe's); anything else is refused as
/// Stripe refuses an unsupported currency.
const CURRENCIES: &[&str] = &["usd", "eur", "gbp", "jpy", "chf", "cad", "aud", "pln", "sek", "brl", "inr"];

pub(crate) fn parse_form(body: &[u8]) -> Result<Order, FormError> {
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    let mut items: BTreeMap<u32, LineItem> = BTreeMap::new();
    for (key, value) in url::form_urlencoded::parse(body) {
        if let Some(name) = key.strip_prefix("metadata[").and_then(|k| k.strip_suffix(']')) {
            metadata.insert(name.to_owned(), value.into_owned());
            continue;
        }
        if let Some(rest) = key.strip_prefix("line_items[") {
            let (index, field) = rest.split_once(']').ok_or_else(|| invalid(&key, format!("Invalid array: {key}.")))?;
            let index: u32 = index.parse().map_err(|_| invalid(&key, format!("Invalid array index: {key}.")))?;
            let item = items.entry(index).or_default();
            let value = Some(value.into_owned());
            // Other line item fields (tax rates, images, descriptions…) are accepted and ignored.
            match field {
                "[quantity]" => item.quantity = value,
                "[price_data][currency]" => item.currency = value,
                "[price_data][unit_amount]" => item.unit_amount = value,
                "[price_data][product_data][name]" => item.name = value,
                _ => {}
            }
            continue;
        }
        fields.insert(key.into_owned(), value.into_owned());
    }
    if let Some(mode) = fields.get("mode")
        && mode != "payment"
    {
        return Err(invalid("mode", format!("The simulator supports mode=payment only, not '{mode}'.")));
    }
    let required_url = |param: &str| -> Result<String, FormError> {
        let value = fields.get(param).ok_or_else(|| missing(param))?;
        match url::Url::parse(value) {
            Ok(u) if u.scheme() == "http" || u.scheme() == "https" => Ok(value.clone()),
            _ => Err(invalid(param, "Not a valid URL".to_owned())),
        }
    };
    let success_url = required_url("success_url")?;
    let cancel_url = required_url("cancel_url")?;
    if items.is_empty() {
        return Err(missing("line_items"));
    }
    let mut amount_total: i64 = 0;
    let mut currency: Option<String> = None;
    let mut names = Vec::new();
    for (i, item) in items {
        let param = |field: &str| format!("line_items[{i}]{field}");
        let unit_amount = item.unit_amount.ok_or_else(|| missing(&param("[price_data][unit_amount]")))?;
        let unit_amount =
            unit_amount.parse::<i64>().ok().filter(|a| *a >= 0).ok_or_else(|| {
                invalid(&param("[price_data][unit_amount]"), format!("Invalid integer: {unit_amount}"))
            })?;
        let quantity = match item.quantity {
            Some(q) => q
                .parse::<i64>()
                .ok()
                .filter(|q| *q >= 1)
                .ok_or_else(|| invalid(&param("[quantity]"), format!("Invalid integer: {q}")))?,
            None => 1,
        };
        let item_currency =
            item.currency.ok_or_else(|| missing(&param("[price_data][currency]")))?.to_ascii_lowercase();
        if !CURRENCIES.contains(&item_currency.as_str()) {
            return Err(invalid(&param("[price_data][currency]"), format!("Invalid currency: {item_currency}.")));
        }
        if currency.as_ref().is_some_and(|c| *c != item_currency) {
            return Err(invalid(
                &param("[price_data][currency]"),
                "All line items must use the same currency.".to_owned(),
            ));
        }
        currency = Some(item_currency);
        names.push(item.name.ok_or_else(|| missing(&param("[price_data][product_data][name]")))?);
        amount_total = unit_amount
            .checked_mul(quantity)
            .and_then(|a| a.checked_add(amount_total))
            .ok_or_else(|| invalid("line_items", "The total amount is too large.".to_owned()))?;
    }
    Ok(Order {
        success_url,
        cancel_url,
        client_reference_id: fields.get("client_reference_id").cloned(),
        metadata,
        amount_total,
        currency: currency.unwrap_or_default(),
        product_name: names.join(", "),
    })
}

fn stripe_error(status: StatusCode, param: Option<&str>, message: &str) -> HttpResponse {
    let mut error = json!({"type": "invalid_request_error", "message": message});
    if let Some(param) = param {
        error["param"] = json!(param);
    }
    HttpResponse::build(status).json(json!({"error": error}))
}

fn find(state: &State, id: &str) -> Option<Session> {
    lock(&state.payments.sessions).iter().find(|s| s.id == id).cloned()
}

fn page(state: &State, id: &str) -> HttpResponse {
    let Some(s) = find(state, id) else { return not_found_page() };
    let status = if s.paid { "paid" } else { "unpaid" };
    let html = format!(
        r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>cova-sim checkout</title></head>
<body>
<h1>cova-sim checkout</h1>
<p id="product">{name}</p>
<p id="amount">{amount}</p>
<p id="status">{status}</p>
<form method="post" action="/pay/checkout/{id}/pay"><button id="pay" type="submit">Pay</button></form>
<p><a id="cancel" href="{cancel}">Cancel</a></p>
</body>
</html>
"#,
        name = escape(&s.order.product_name),
        amount = escape(&format_amount(s.order.amount_total, &s.order.currency)),
        id = escape(&s.id),
        cancel = escape(&s.order.cancel_url),
    );
    HttpResponse::Ok().content_type("text/html; charset=utf-8").body(html)
}

async fn pay(state: &State, id: &str) -> HttpResponse {
    // Checked and flipped under one lock, so a double click sends one event.
    let (session, first) = {
        let mut sessions = lock(&state.payments.sessions);
        let Some(s) = sessions.iter_mut().find(|s| s.id == id) else { return not_found_page() };
        let first = !s.paid;
        s.paid = true;
        (s.clone(), first)
    };
    if first {
        state.payments.complete(&session, &state.base).await;
    }
    let location = session.order.success_url.replace("{CHECKOUT_SESSION_ID}", &session.id);
    HttpResponse::SeeOther().insert_header(("location", location)).finish()
}

fn not_found_page() -> HttpResponse {
    HttpResponse::NotFound().content_type("text/html; charset=utf-8").body(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>cova-sim checkout</title></head>\
         <body><h1>Checkout session not found</h1></body></html>\n",
    )
}

/// `1990` and `eur` → `19.90 EUR`.
fn format_amount(amount: i64, currency: &str) -> String {
    let code = currency.to_ascii_uppercase();
    if ZERO_DECIMAL.contains(&currency) {
        format!("{amount} {code}")
    } else {
        format!("{}.{:02} {code}", amount / 100, amount % 100)
    }
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // RFC 4231, test case 2.
        assert_eq!(
            hmac_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn signature_header_signs_timestamp_dot_body() {
        let body = r#"{"id":"evt_1"}"#;
        let header = signature_header(1_700_000_000, body);
        assert_eq!(header, "t=1700000000,v1=816036cf539f3288ccd19a12919d6aab6c2bf49ad6c5467a48db62bca2682772");
        // The way a receiver checks it.
        let (t, v1) = header.strip_prefix("t=").and_then(|h| h.split_once(",v1=")).expect("t=…,v1=…");
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, WEBHOOK_SECRET.as_bytes());
        let tag = hex::decode(v1).expect("hex");
        assert!(ring::hmac::verify(&key, format!("{t}.{body}").as_bytes(), &tag).is_ok());
        assert!(ring::hmac::verify(&key, format!("{t}.{body} ").as_bytes(), &tag).is_err());
        assert_ne!(signature_header(1_700_000_001, body), header, "the timestamp is signed");
    }

    fn form(pairs: &[(&str, &str)]) -> Vec<u8> {
        url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish().into_bytes()
    }

    const COMPLETE: &[(&str, &str)] = &[
        ("mode", "payment"),
        ("success_url", "https://cova.test/billing/done?session={CHECKOUT_SESSION_ID}"),
        ("cancel_url", "https://cova.test/billing"),
        ("client_reference_id", "ws_42"),
        ("line_items[0][quantity]", "1"),
        ("line_items[0][price_data][currency]", "EUR"),
        ("line_items[0][price_data][unit_amount]", "1990"),
        ("line_items[0][price_data][product_data][name]", "1,000 credits"),
        ("metadata[workspace_id]", "ws_42"),
        ("metadata[credits]", "1000"),
        ("metadata[note]", "a [bracketed] & encoded value"),
    ];

    #[test]
    fn parses_line_items_and_metadata() {
        let order = parse_form(&form(COMPLETE)).expect("valid");
        assert_eq!(order.success_url, "https://cova.test/billing/done?session={CHECKOUT_SESSION_ID}");
        assert_eq!(order.cancel_url, "https://cova.test/billing");
        assert_eq!(order.client_reference_id.as_deref(), Some("ws_42"));
        assert_eq!(order.amount_total, 1990);
        assert_eq!(order.currency, "eur");
        assert_eq!(order.product_name, "1,000 credits");
        let metadata: Vec<(&str, &str)> = order.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            metadata,
            [("credits", "1000"), ("note", "a [bracketed] & encoded value"), ("workspace_id", "ws_42")]
        );
    }

    #[test]
    fn sums_several_line_items() {
        let mut pairs = COMPLETE.to_vec();
        pairs.extend([
            ("line_items[1][quantity]", "3"),
            ("line_items[1][price_data][currency]", "eur"),
            ("line_items[1][price_data][unit_amount]", "500"),
            ("line_items[1][price_data][product_data][name]", "Extra"),
        ]);
        let order = parse_form(&form(&pairs)).expect("valid");
        assert_eq!(order.amount_total, 1990 + 3 * 500);
        assert_eq!(order.product_name, "1,000 credits, Extra");
    }

    #[test]
    fn refuses_incomplete_forms_naming_the_param() {
        fn without(name: &str) -> Vec<(&'static str, &'static str)> {
            COMPLETE.iter().copied().filter(|(k, _)| *k != name).collect()
        }
        for (dropped, param) in [
            ("success_url", "success_url"),
            ("cancel_url", "cancel_url"),
            ("line_items[0][price_data][unit_amount]", "line_items[0][price_data][unit_amount]"),
            ("line_items[0][price_data][currency]", "line_items[0][price_data][currency]"),
        ] {
            let e = parse_form(&form(&without(dropped))).expect_err(dropped);
            assert_eq!(e.param, param);
            assert!(e.message.starts_with("Missing required param"), "{}", e.message);
        }
        let mut pairs = COMPLETE.to_vec();
        pairs.retain(|(k, _)| !k.starts_with("line_items"));
        assert_eq!(parse_form(&form(&pairs)).expect_err("no items").param, "line_items");
        let mut pairs = COMPLETE.to_vec();
        pairs.push(("line_items[0][price_data][unit_amount]", "12.5"));
        pairs.retain(|p| *p != ("line_items[0][price_data][unit_amount]", "1990"));
        assert!(parse_form(&form(&pairs)).expect_err("not an integer").message.contains("Invalid integer"));
        let mut pairs = COMPLETE.to_vec();
        pairs[0] = ("mode", "subscription");
        assert_eq!(parse_form(&form(&pairs)).expect_err("mode").param, "mode");
        let mut pairs = COMPLETE.to_vec();
        pairs[1] = ("success_url", "javascript:alert(1)");
        assert_eq!(parse_form(&form(&pairs)).expect_err("url").param, "success_url");
    }

    #[test]
    fn reads_the_key_from_bearer_or_basic_auth() {
        let headers = |v: &str| BTreeMap::from([("authorization".to_owned(), v.to_owned())]);
        assert_eq!(api_key(&headers("Bearer sim_sk_test")).as_deref(), Some("sim_sk_test"));
        let basic = format!("Basic {}", STANDARD.encode("sim_sk_test:"));
        assert_eq!(api_key(&headers(&basic)).as_deref(), Some("sim_sk_test"));
        assert_eq!(api_key(&BTreeMap::new()), None);
    }

    #[test]
    fn formats_amounts_and_escapes_html() {
        assert_eq!(format_amount(1990, "eur"), "19.90 EUR");
        assert_eq!(format_amount(5, "usd"), "0.05 USD");
        assert_eq!(format_amount(500, "jpy"), "500 JPY");
        assert_eq!(escape(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
