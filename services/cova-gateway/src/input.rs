//! Request input, read and checked after authentication so that the order of checks holds
//! (401 → 403 → 400): the framework's extractors would run before the handler.
//!
//! Every text that comes in is refused with 400 `validation_error` when it holds a control
//! character (a NUL byte would otherwise reach the database).

use crate::AppState;
use actix_web::web::{self, Bytes};
use cova_errors::{ApiError, ErrorCode};
use serde::Deserialize;
use std::time::Duration;

/// Reads the whole body, at most `http.body_limit_bytes` (else 413), within
/// `http.body_timeout_ms` (else 408: the client sends too slowly, the server is fine).
pub async fn read_body(state: &AppState, payload: web::Payload) -> Result<Bytes, ApiError> {
    let limit = state.config.http.body_limit_bytes;
    let timeout = Duration::from_millis(state.config.http.body_timeout_ms);
    match tokio::time::timeout(timeout, payload.to_bytes_limited(limit)).await {
        Err(_) => Err(ApiError::new(
            ErrorCode::RequestTimeout,
            format!("The request body was not received within {} ms.", timeout.as_millis()),
        )),
        Ok(Err(_)) => {
            Err(ApiError::new(ErrorCode::PayloadTooLarge, format!("The request body is larger than {limit} bytes.")))
        }
        Ok(Ok(Err(e))) => Err(ApiError::validation(format!("The request body could not be read: {e}"))),
        Ok(Ok(Ok(bytes))) => Ok(bytes),
    }
}

/// True when `s` holds a control character (C0, DEL or C1), NUL included.
pub fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// Refuses a text field holding a control character.
pub fn text<'a>(field: &str, value: &'a str) -> Result<&'a str, ApiError> {
    if has_control(value) {
        return Err(ApiError::validation(format!("`{field}` must not contain control characters.")));
    }
    Ok(value)
}

/// A JSON body of type `T`; an empty or malformed body is 400 naming the problem.
pub fn json<T: serde::de::DeserializeOwned>(body: &Bytes, shape: &str) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::validation(format!("The body must be JSON: {shape}.")));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::validation(format!("Invalid JSON body: {}", humane(&e))))
}

/// A JSON error in the words of JSON, not of the server's types: serde names the Rust type a
/// field has (`expected u32`), which an integrator cannot act on.
fn humane(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let Some(at) = text.find("expected ") else { return text };
    let start = at + "expected ".len();
    let rest = &text[start..];
    let end = rest.find(' ').unwrap_or(rest.len());
    let json = match &rest[..end] {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        _ => return text,
    };
    format!("{}{json}{}", &text[..start], &rest[end..])
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UrlBody {
    url: String,
}

/// Longest URL accepted (real post URLs are far shorter).
pub const MAX_URL_LEN: usize = 2_048;

/// Whether `If-None-Match` names `etag` (a weak `W/` form too) or is `*`: the client's copy
/// is current, and the answer is 304.
pub fn etag_matches(req: &actix_web::HttpRequest, etag: &str) -> bool {
    req.headers()
        .get_all(actix_web::http::header::IF_NONE_MATCH)
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').map(str::trim).any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag))
}

/// A post URL as sent: trimmed, not empty, at most [`MAX_URL_LEN`] characters, no control
/// character. The same checks for `POST /analyze`, `POST /metadata` and each URL of a list.
pub fn post_url(field: &str, raw: &str) -> Result<String, ApiError> {
    let url = text(field, raw.trim())?;
    if url.is_empty() {
        return Err(ApiError::validation(format!("`{field}` must not be empty.")));
    }
    if url.chars().count() > MAX_URL_LEN {
        return Err(ApiError::validation(format!("`{field}` is longer than {MAX_URL_LEN} characters.")));
    }
    Ok(url.to_owned())
}

/// A URL that was refused, as it can be stored and shown back: control characters replaced by
/// U+FFFD and cut at [`MAX_URL_LEN`] characters (a NUL byte cannot be stored by PostgreSQL).
pub fn shown_url(raw: &str) -> String {
    let mut shown: String = raw
        .trim()
        .chars()
        .map(|c| if c.is_control() { char::REPLACEMENT_CHARACTER } else { c })
        .take(MAX_URL_LEN)
        .collect();
    if raw.trim().chars().count() > MAX_URL_LEN {
        shown.push('…');
    }
    shown
}

/// The `{"url": …}` body of the metadata and sandbox endpoints.
pub fn url_body(body: &Bytes) -> Result<String, ApiError> {
    let parsed: UrlBody = json(body, r#"{"url": "<post URL>"}"#)?;
    post_url("url", &parsed.url)
}

/// An integer of a JSON body. JSON Schema counts a number with a zero fraction (`2099.0`) as
/// an integer, so generated clients may send one: it is accepted as that integer. Anything
/// else that is not a whole number is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Integer(pub i64);

impl<'de> Deserialize<'de> for Integer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Integer;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer")
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Integer, E> {
                Ok(Integer(v))
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Integer, E> {
                i64::try_from(v).map(Integer).map_err(|_| E::custom(format!("{v} is too large")))
            }

            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Integer, E> {
                // i64::MAX as f64 rounds up to 2^63, which is already out of range.
                if v.is_finite() && v.fract() == 0.0 && v >= i64::MIN as f64 && v < i64::MAX as f64 {
                    Ok(Integer(v as i64))
                } else {
                    Err(E::custom(format!("expected an integer, found {v}")))
                }
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

/// An optional integer member of a JSON body, read as an [`Integer`] (with
/// `#[serde(default, deserialize_with = "input::optional_integer")]`): absent is `None`;
/// `null` is refused, as the document's `integer` type says.
pub fn optional_integer<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    Integer::deserialize(deserializer).map(|Integer(n)| Some(n))
}

/// A present, possibly null, member: `Some(None)` for `null`, `None` when the member is absent
/// (with `#[serde(default, deserialize_with = "present")]`).
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// The customer's cap on the comments collected for a post (`max_comments`), checked.
pub fn max_comments(value: Option<Integer>) -> Result<Option<i64>, ApiError> {
    use cova_domain::limits::MAX_COMMENTS_PER_POST;
    match value {
        None => Ok(None),
        Some(Integer(n)) if (1..=MAX_COMMENTS_PER_POST).contains(&n) => Ok(Some(n)),
        Some(Integer(n)) => Err(ApiError::validation(format!(
            "`max_comments` must be between 1 and {MAX_COMMENTS_PER_POST} (it was {n})."
        ))),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnalyzeBody {
    url: String,
    #[serde(default, deserialize_with = "present")]
    max_comments: Option<Integer>,
}

/// The body of `POST /analyze`: the post URL and the optional cap on its comments.
pub fn analyze_body(body: &Bytes) -> Result<(String, Option<i64>), ApiError> {
    let parsed: AnalyzeBody = json(body, r#"{"url": "<post URL>", "max_comments": 1000}"#)?;
    Ok((post_url("url", &parsed.url)?, max_comments(parsed.max_comments)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_refused() {
        for bad in ["https://www.tiktok.com/@a/video/1\u{0}", "a\u{7f}", "a\u{85}b", "tab\there"] {
            let body = Bytes::from(serde_json::json!({ "url": bad }).to_string());
            assert_eq!(url_body(&body).expect_err(bad).code, ErrorCode::ValidationError, "{bad:?}");
        }
        let ok = Bytes::from(r#"{"url": "https://www.tiktok.com/@a/video/1 "}"#);
        assert_eq!(url_body(&ok).expect("valid"), "https://www.tiktok.com/@a/video/1");
        assert!(!has_control("émoji 🎉 ok"));
        assert_eq!(shown_url(" a\u{0}b "), "a\u{fffd}b");
        let long = "x".repeat(MAX_URL_LEN + 5);
        assert!(post_url("url", &long).is_err());
        assert_eq!(shown_url(&long).chars().count(), MAX_URL_LEN + 1);
    }

    #[test]
    fn integral_numbers_are_integers_and_caps_are_checked() {
        let cap = |body: &str| analyze_body(&Bytes::from(body.to_owned())).map(|(_, cap)| cap);
        assert_eq!(cap(r#"{"url": "u", "max_comments": 100}"#).expect("int"), Some(100));
        assert_eq!(cap(r#"{"url": "u", "max_comments": 100.0}"#).expect("integral"), Some(100));
        assert_eq!(cap(r#"{"url": "u"}"#).expect("none"), None);
        for bad in [
            r#"{"url": "u", "max_comments": 1.5}"#,
            r#"{"url": "u", "max_comments": 0}"#,
            r#"{"url": "u", "max_comments": 5001}"#,
            r#"{"url": "u", "max_comments": "9"}"#,
        ] {
            assert_eq!(cap(bad).expect_err(bad).code, ErrorCode::ValidationError, "{bad}");
        }
    }
}
