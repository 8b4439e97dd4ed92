//! Lenient accessors: platform JSON mixes numbers and decimal strings for the same field.

use serde_json::Value;

/// A non-negative integer given as a number or a decimal string.
pub(crate) fn u64_of(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.is_finite()).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub(crate) fn i64_of(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub(crate) fn f64_of(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A non-empty string, or a number printed as one (ids come both ways).
pub(crate) fn str_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(crate) fn bool_of(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_i64().map(|i| i != 0),
        _ => None,
    }
}

/// The first non-empty string of a `url_list` style array, or the value itself when it is a string.
pub(crate) fn first_url(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Array(a) => a.iter().find_map(first_url),
        Value::Object(o) => o.get("url_list").or_else(|| o.get("urlList")).and_then(first_url),
        _ => None,
    }
}

pub(crate) fn u32_of(v: &Value) -> Option<u32> {
    u64_of(v).and_then(|n| u32::try_from(n).ok())
}
