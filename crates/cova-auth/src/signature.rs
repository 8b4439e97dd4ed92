//! Webhook signatures: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`, the
//! scheme of Stripe's `Stripe-Signature`. cova signs its own webhooks with it (`X-Signature`,
//! with `X-Event-Id` identifying the event across retries) and verifies the payment provider's.
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

/// The `X-Signature` value for `body` sent at `t` (unix seconds).
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(t.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    format!("t={t},v1={}", hex::encode(ctx.sign().as_ref()))
}

/// What a receiver does: true when `header` signs `body` with `secret` and its timestamp is
/// within `tolerance_s` of `now` (unix seconds).
pub fn verify(header: &str, secret: &str, body: &[u8], now: i64, tolerance_s: i64) -> bool {
    let mut t = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => signatures.extend(hex::decode(v).ok()),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    if (now - t).abs() > tolerance_s {
        return false;
    }
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(body);
    signatures.iter().any(|s| hmac::verify(&key, &message, s).is_ok())
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
