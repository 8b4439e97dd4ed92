//! JSON log lines, written straight into the line buffer: the same lines as
//! tracing-subscriber's JSON format (flattened event fields, the current span under `span`),
//! without its per-event maps and the re-parsing of each span's fields. One line per request
//! is logged, so this is on the gateway's hot path.

use std::fmt::{self, Write as _};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format: `{"timestamp", "level", the event's fields, "target", "span"}`.
pub struct JsonLines;

/// The span field format: a span's fields as JSON object members, kept when the span opens
/// and written into each line logged inside it.
#[derive(Default)]
pub struct JsonSpanFields;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        writer.write_str("{\"timestamp\":\"")?;
        SystemTime.format_time(&mut writer)?;
        write!(writer, "\",\"level\":\"{}\"", meta.level())?;
        let mut members = Members::new(256);
        event.record(&mut members);
        members.result?;
        if !members.out.is_empty() {
            writer.write_char(',')?;
            writer.write_str(&members.out)?;
        }
        writer.write_str(",\"target\":")?;
        // A record of the `log` crate names its own target.
        write_string(&mut writer, members.log_target.as_deref().unwrap_or(meta.target()))?;
        if let Some(span) = ctx.lookup_current() {
            writer.write_str(",\"span\":{")?;
            let extensions = span.extensions();
            if let Some(fields) = extensions.get::<FormattedFields<N>>().filter(|f| !f.fields.is_empty()) {
                writer.write_str(&fields.fields)?;
                writer.write_char(',')?;
            }
            writer.write_str("\"name\":")?;
            write_string(&mut writer, span.name())?;
            writer.write_char('}')?;
        }
        writer.write_str("}\n")
    }
}

impl<'writer> FormatFields<'writer> for JsonSpanFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut members = Members::new(0);
        fields.record(&mut members);
        members.result?;
        writer.write_str(&members.out)
    }

    /// Fields recorded later (`span.record`) join those the span opened with.
    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut members = Members::new(0);
        fields.record(&mut members);
        members.result?;
        if !members.out.is_empty() {
            if !current.fields.is_empty() {
                current.fields.push(',');
            }
            current.fields.push_str(&members.out);
        }
        Ok(())
    }
}

/// Writes recorded fields as `"name":value` members, comma-separated. The `log.*` fields of a
/// record of the `log` crate are left out, as tracing-subscriber does; its target is kept.
struct Members {
    out: String,
    log_target: Option<String>,
    result: fmt::Result,
}

impl Members {
    fn new(capacity: usize) -> Self {
        Self { out: String::with_capacity(capacity), log_target: None, result: Ok(()) }
    }

    fn member(&mut self, field: &Field) -> &mut String {
        if !self.out.is_empty() {
            self.out.push(',');
        }
        let name = field.name();
        if let Err(e) = write_string(&mut self.out, name.strip_prefix("r#").unwrap_or(name)) {
            self.result = Err(e);
        }
        self.out.push(':');
        &mut self.out
    }
}

impl Visit for Members {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        self.record_str(field, &text);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(log_field) = field.name().strip_prefix("log.") {
            if log_field == "target" {
                self.log_target = Some(value.to_owned());
            }
            return;
        }
        let out = self.member(field);
        if let Err(e) = write_string(out, value) {
            self.result = Err(e);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        let _ = write!(self.member(field), "{value}");
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name().starts_with("log.") {
            return;
        }
        let _ = write!(self.member(field), "{value}");
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        let _ = write!(self.member(field), "{value}");
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        let out = self.member(field);
        // JSON has no NaN or infinity.
        let _ = if value.is_finite() { write!(out, "{value}") } else { out.write_str("null") };
    }
}

/// A JSON string: quoted, with `"`, `\` and control characters escaped.
fn write_string(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    out.write_char('"')?;
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f | 0x7f => "",
            _ => continue,
        };
        out.write_str(&text[start..i])?;
        if escaped.is_empty() {
            write!(out, "\\u{b:04x}")?;
        } else {
            out.write_str(escaped)?;
        }
        start = i + 1;
    }
    out.write_str(&text[start..])?;
    out.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::io;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().map_err(|_| io::Error::other("poisoned"))?.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Buffer {
        fn lines(&self) -> Vec<Value> {
            let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
            String::from_utf8(bytes)
                .expect("utf-8")
                .lines()
                .map(|l| {
                    let mut v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                    v.as_object_mut().expect("object").remove("timestamp").expect("a timestamp");
                    v
                })
                .collect()
        }
    }

    fn events() {
        tracing::info!("plain");
        let error = io::Error::other("a \"quoted\"\nfailure\u{1}");
        let span =
            tracing::info_span!("request", request.id = "r-1", http.method = %"GET", later = tracing::field::Empty);
        let _in = span.enter();
        tracing::warn!(error = %error, attempt = 3u64, delta = -2i64, ok = true, ms = 0.25f64, nan = f64::NAN, "inside");
        span.record("later", 7u64);
        tracing::error!(path = "/a\\b\tc", debug = ?vec!["x"], "after a record");
        let inner = tracing::info_span!("inner");
        let _inner = inner.enter();
        tracing::info!(emoji = "é ✓", "in a span without fields");
    }

    /// The lines parse to what tracing-subscriber's own JSON format writes.
    #[test]
    fn lines_match_the_json_format_of_tracing_subscriber() {
        let (ours, theirs) = (Buffer::default(), Buffer::default());
        let (o, t) = (ours.clone(), theirs.clone());
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .event_format(JsonLines)
                    .fmt_fields(JsonSpanFields)
                    .with_writer(move || o.clone()),
            )
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(move || t.clone()),
            );
        tracing::subscriber::with_default(subscriber, events);
        let (ours, theirs) = (ours.lines(), theirs.lines());
        assert_eq!(ours.len(), 4);
        assert_eq!(ours, theirs);
        assert_eq!(ours[1]["error"], "a \"quoted\"\nfailure\u{1}");
        assert_eq!(ours[2]["span"]["later"], 7);
    }
}
