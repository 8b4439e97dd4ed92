//! The JavaScript proof-of-work page TikTok serves instead of data to suspected bots.
//!
//! Contract (served identically by cova-sim): the page has no rehydration script, says
//! "Please wait...", and carries two elements:
//! - `id="cs"`: standard base64 of `{"v": {"a": "<base64 salt>", "c": "<hex SHA-256>"}, "s": <bound>}`;
//! - `id="wci"`: the name of the cookie to set.
//!
//! The answer is the integer `n` in `0..=s` with `SHA-256(salt || decimal(n)) == c`. The cookie value
//! is standard base64 of the challenge object with `"d": n` added; the page is then fetched again.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub cookie_name: String,
    pub salt: Vec<u8>,
    pub target: [u8; 32],
    pub bound: u64,
    raw: serde_json::Map<String, Value>,
}

/// Recognises a challenge page; `None` when the page is something else.
pub(crate) fn detect(html: &str) -> Option<Result<Challenge, String>> {
    let encoded = element_text(html, "cs")?;
    Some(decode(&encoded, element_text(html, "wci")))
}

fn decode(encoded: &str, cookie_name: Option<String>) -> Result<Challenge, String> {
    let cookie_name =
        cookie_name.filter(|n| is_cookie_name(n)).ok_or("challenge page without a valid cookie name (id=\"wci\")")?;
    let bytes = STANDARD.decode(encoded.trim()).map_err(|_| "challenge data (id=\"cs\") is not base64")?;
    let raw: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes).map_err(|_| "challenge data (id=\"cs\") is not a JSON object")?;
    let v = raw.get("v").ok_or("challenge data lacks `v`")?;
    let salt = v.get("a").and_then(Value::as_str).ok_or("challenge data lacks `v.a`")?;
    let salt = STANDARD.decode(salt).map_err(|_| "challenge salt `v.a` is not base64")?;
    let target = v.get("c").and_then(Value::as_str).ok_or("challenge data lacks `v.c`")?;
    let target: [u8; 32] = hex::decode(target)
        .ok()
        .and_then(|t| t.try_into().ok())
        .ok_or("challenge target `v.c` is not a hex SHA-256 digest")?;
    let bound = raw.get("s").and_then(Value::as_u64).ok_or("challenge data lacks the bound `s`")?;
    Ok(Challenge { cookie_name, salt, target, bound, raw })
}

impl Challenge {
    /// Searches for the answer; `None` when no integer up to the bound (and `limit`) matches.
    pub fn solve(&self, limit: u64) -> Option<u64> {
        let mut buf = Vec::with_capacity(self.salt.len() + 20);
        (0..=self.bound.min(limit)).find(|n| {
            buf.clear();
            buf.extend_from_slice(&self.salt);
            buf.extend_from_slice(n.to_string().as_bytes());
            ring::digest::digest(&ring::digest::SHA256, &buf).as_ref() == self.target
        })
    }

    /// The cookie value that proves the answer.
    pub fn cookie_value(&self, answer: u64) -> String {
        let mut obj = self.raw.clone();
        obj.insert("d".into(), Value::from(answer));
        STANDARD.encode(Value::Object(obj).to_string())
    }
}

fn is_cookie_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The text content of the element carrying `id="<id>"` (or `id='<id>'`).
pub(crate) fn element_text(html: &str, id: &str) -> Option<String> {
    let start = [format!("id=\"{id}\""), format!("id='{id}'")].iter().find_map(|needle| html.find(needle.as_str()))?;
    let open_end = start + html[start..].find('>')? + 1;
    let close = open_end + html[open_end..].find('<')?;
    let text = html[open_end..close].trim();
    (!text.is_empty()).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = include_str!("../../tests/fixtures/tiktok_challenge.html");

    #[test]
    fn solves_the_stored_challenge_page() {
        let c = detect(PAGE).expect("challenge detected").expect("challenge decodes");
        assert_eq!(c.cookie_name, "_wafchallengeid");
        assert_eq!(c.salt, b"cova-fixture-salt");
        let n = c.solve(1_000_000).expect("solvable");
        assert_eq!(n, 4242);
        let cookie = STANDARD.decode(c.cookie_value(n)).expect("cookie is base64");
        let cookie: Value = serde_json::from_slice(&cookie).expect("cookie is JSON");
        assert_eq!(cookie["d"], 4242);
        assert_eq!(cookie["v"]["a"], "Y292YS1maXh0dXJlLXNhbHQ=");
    }

    #[test]
    fn unsolvable_within_bound() {
        let c = detect(PAGE).expect("challenge detected").expect("challenge decodes");
        assert_eq!(c.solve(4241), None);
    }

    #[test]
    fn malformed_challenges_are_errors_not_panics() {
        let page = |cs: &str, wci: &str| format!("<div id=\"cs\">{cs}</div><div id=\"wci\">{wci}</div>");
        assert!(detect("<html>Please wait...</html>").is_none());
        assert!(detect(&page("!!!", "x")).expect("detected").is_err());
        assert!(detect(&page(&STANDARD.encode("{}"), "x")).expect("detected").is_err());
        assert!(
            detect(&page(&STANDARD.encode(r#"{"v":{"a":"AA==","c":"zz"},"s":1}"#), "x")).expect("detected").is_err()
        );
        assert!(
            detect(&page(&STANDARD.encode(r#"{"v":{"a":"AA==","c":"00"},"s":1}"#), "bad name;"))
                .expect("detected")
                .is_err()
        );
    }
}
