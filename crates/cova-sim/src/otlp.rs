//! An OTLP/HTTP trace collector: accepts every export, and keeps the spans of JSON-encoded
//! ones (`telemetry.otlp_protocol = "json"`) so tests can check which span is whose parent,
//! across processes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One span as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportedSpan {
    /// The exporting process' `service.name`.
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
}

/// The spans of one `ExportTraceServiceRequest` in its JSON form; nothing for other bodies.
pub(crate) fn spans(body: &[u8]) -> Vec<ExportedSpan> {
    let Ok(export) = serde_json::from_slice::<Value>(body) else { return Vec::new() };
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut out = Vec::new();
    for resource in export.get("resourceSpans").and_then(Value::as_array).into_iter().flatten() {
        let service = resource
            .pointer("/resource/attributes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|a| a.get("key").and_then(Value::as_str) == Some("service.name"))
            .and_then(|a| a.pointer("/value/stringValue"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        for scope in resource.get("scopeSpans").and_then(Value::as_array).into_iter().flatten() {
            for span in scope.get("spans").and_then(Value::as_array).into_iter().flatten() {
                out.push(ExportedSpan {
                    service: service.clone(),
                    name: text(span, "name"),
                    trace_id: text(span, "traceId").to_lowercase(),
                    span_id: text(span, "spanId").to_lowercase(),
                    parent_span_id: text(span, "parentSpanId").to_lowercase(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_read_with_their_service_and_parent() {
        let body = br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"cova-gateway"}}]},
            "scopeSpans":[{"spans":[{"traceId":"AB12","spanId":"01","parentSpanId":"","name":"request"},
                                    {"traceId":"ab12","spanId":"02","parentSpanId":"01","name":"outbox_publish"}]}]}]}"#;
        let spans = spans(body);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].service, "cova-gateway");
        assert_eq!(spans[0].trace_id, "ab12");
        assert_eq!(spans[1].parent_span_id, "01");
        assert!(super::spans(b"\x0a\x01protobuf").is_empty());
    }
}
