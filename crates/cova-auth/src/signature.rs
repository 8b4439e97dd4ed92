//! Webhook signatures: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`, the
//! scheme of Stripe's `Stripe-Signature`. cova signs its own webhooks with it (`X-Signature`,
//! with `X-Event-Id` identifying the event across retries, which `v2` signs too:
//! `v2=<hex HMAC-SHA256(secret, "<t>.<event id>.<raw body>")>`) and verifies the payment
//! provider's.
//! A receiver recomputes the HMAC over the raw body, compares in constant time, and refuses
//! timestamps older than its tolerance (5 minutes).
//!
//! cova's webhooks are also signed the Standard Webhooks way (`webhook-id`,
//! `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<t>.<raw body>")>`,
//! the key being the base64 decoding of the secret after `whsec_`), so that the official
//! libraries (`standardwebhooks`, `svix`) verify them unchanged.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::hmac;

pub const SIGNATURE_HEADER: &str = "x-signature";
pub const EVENT_ID_HEADER: &str = "x-event-id";
/// The Standard Webhooks headers: the event's id (the same as `X-Event-Id`), the unix seconds
/// it was signed at, and its signature.
pub const STANDARD_ID_HEADER: &str = "webhook-id";
pub const STANDARD_TIMESTAMP_HEADER: &str = "webhook-timestamp";
pub const STANDARD_SIGNATURE_HEADER: &str = "webhook-signature";

/// The key a Standard Webhooks library derives from a `whsec_…` secret: the base64 decoding
/// of what follows the prefix (cova's secrets are hex, which is valid base64). `None` for a
/// secret that is not base64 (none that cova makes).
fn standard_key(secret: &str) -> Option<hmac::Key> {
    let bytes = BASE64.decode(secret.strip_prefix("whsec_").unwrap_or(secret)).ok()?;
    Some(hmac::Key::new(hmac::HMAC_SHA256, &bytes))
}

/// The `webhook-signature` value (`v1,<base64>`) of the event `id` with `body`, sent at `t`.
pub fn sign_standard(secret: &str, id: &str, t: i64, body: &[u8]) -> Option<String> {
    let key = standard_key(secret)?;
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(format!("{id}.{t}.").as_bytes());
    ctx.update(body);
    Some(format!("v1,{}", BASE64.encode(ctx.sign().as_ref())))
}

/// What `v1` signs: `<t>.<raw body>`.
fn v1_message(t: i64, body: &[u8]) -> Vec<u8> {
    [format!("{t}.").as_bytes(), body].concat()
}

/// What `v2` signs: `<t>.<event id>.<raw body>`.
fn v2_message(t: i64, id: &str, body: &[u8]) -> Vec<u8> {
    [format!("{t}.{id}.").as_bytes(), body].concat()
}

/// The hex HMAC-SHA256 of `message`, keyed with the secret's bytes.
fn hmac_hex(secret: &str, message: &[u8]) -> String {
    hex::encode(hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()), message).as_ref())
}

/// The `X-Signature` value for `body` sent at `t` (unix seconds).
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    format!("t={t},v1={}", hmac_hex(secret, &v1_message(t, body)))
}

/// The `X-Signature` value of one of cova's events: `v1` as [`sign`], and `v2` over the event's
/// id too, so that a captured request sent again under another `X-Event-Id` fails `v2` and a
/// receiver deduplicating on the id handles it once.
pub fn sign_event(secret: &str, t: i64, id: &str, body: &[u8]) -> String {
    format!("{},v2={}", sign(secret, t, body), hmac_hex(secret, &v2_message(t, id, body)))
}

/// Whether `header` carries a `scheme` signature of `message(t)` with `secret`, its timestamp
/// `t` within `tolerance_s` of `now`.
fn verify_scheme(
    header: &str,
    scheme: &str,
    secret: &str,
    message: impl FnOnce(i64) -> Vec<u8>,
    now: i64,
    tolerance_s: i64,
) -> bool {
    let mut t = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some((k, v)) if k == scheme => signatures.extend(hex::decode(v).ok()),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    if (now - t).abs() > tolerance_s {
        return false;
    }
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let message = message(t);
    signatures.iter().any(|s| hmac::verify(&key, &message, s).is_ok())
}

/// What a receiver does: true when `header` signs `body` with `secret` (`v1`) and its timestamp
/// is within `tolerance_s` of `now` (unix seconds).
pub fn verify(header: &str, secret: &str, body: &[u8], now: i64, tolerance_s: i64) -> bool {
    verify_scheme(header, "v1", secret, |t| v1_message(t, body), now, tolerance_s)
}

/// What a receiver of cova's events does: true when `header`'s `v2` signs the event `id` and
/// `body` with `secret`, and its timestamp is within `tolerance_s` of `now`.
pub fn verify_event(header: &str, secret: &str, id: &str, body: &[u8], now: i64, tolerance_s: i64) -> bool {
    verify_scheme(header, "v2", secret, |t| v2_message(t, id, body), now, tolerance_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_expire() {
        let header = sign("whsec_test", 1_700_000_000, br#"{"type":"test"}"#);
        assert!(header.starts_with("t=1700000000,v1="));
        assert!(verify(&header, "whsec_test", br#"{"type":"test"}"#, 1_700_000_100, 300));
        assert!(!verify(&header, "whsec_test", br#"{"type":"test "}"#, 1_700_000_100, 300), "body changed");
        assert!(!verify(&header, "other", br#"{"type":"test"}"#, 1_700_000_100, 300), "wrong secret");
        assert!(!verify(&header, "whsec_test", br#"{"type":"test"}"#, 1_700_000_301, 300), "too old");
        assert!(!verify("v1=00", "whsec_test", b"", 0, 300));
    }

    #[test]
    fn event_signatures_cover_the_event_id() {
        let body = br#"{"type":"test"}"#;
        let header = sign_event("whsec_test", 1_700_000_000, "evt_1", body);
        assert!(header.starts_with(&sign("whsec_test", 1_700_000_000, body)), "v1 unchanged: {header}");
        assert!(verify(&header, "whsec_test", body, 1_700_000_100, 300));
        assert!(verify_event(&header, "whsec_test", "evt_1", body, 1_700_000_100, 300));
        assert!(!verify_event(&header, "whsec_test", "evt_2", body, 1_700_000_100, 300), "replayed under another id");
        assert!(!verify_event(&header, "whsec_test", "evt_1", b"{}", 1_700_000_100, 300), "body changed");
        assert!(!verify_event(&header, "whsec_test", "evt_1", body, 1_700_000_301, 300), "too old");
        assert!(!verify_event(
            &sign("whsec_test", 1_700_000_000, body),
            "whsec_test",
            "evt_1",
            body,
            1_700_000_000,
            300
        ));
    }

    /// The example of the Standard Webhooks specification, which its libraries test against.
    #[test]
    fn standard_signatures_match_the_specifications_example() {
        let signed = sign_standard(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signed.as_deref(), Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
        // A secret as cova makes them: whsec_ and 64 hex digits.
        let hex_secret = format!("whsec_{}", "ab".repeat(32));
        assert!(sign_standard(&hex_secret, "id", 1, b"{}").is_some_and(|s| s.starts_with("v1,")));
        assert_eq!(sign_standard("whsec_not base64!", "id", 1, b"{}"), None);
    }
}
