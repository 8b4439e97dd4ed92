//! Logging and tracing: `tracing` with JSON (or pretty) logs on stderr (stdout stays free for
//! command output such as `cova admin`), and OpenTelemetry
//! OTLP/HTTP trace export when `telemetry.otlp_endpoint` is set.

mod batch;
mod json;

/// Writes the log lines still buffered (before `std::process::exit`, which skips destructors).
pub use batch::flush as flush_logs;
use cova_config::TelemetryConfig;
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The W3C trace context of the current span, as message headers (`traceparent`, …), so a
/// job's work in another process joins the trace of the request that created it. Empty when
/// no trace is being recorded.
pub fn current_trace_headers() -> BTreeMap<String, String> {
    let cx = tracing::Span::current().context();
    let mut headers = BTreeMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut Headers(&mut headers)));
    headers
}

/// [`current_trace_headers`] as the JSON object stored beside an outbox row.
pub fn current_trace_json() -> String {
    serde_json::to_string(&current_trace_headers()).unwrap_or_else(|_| "{}".into())
}

/// Makes `span` a child of the trace carried in `headers` (no-op without one).
pub fn follow(span: &tracing::Span, headers: &BTreeMap<String, String>) {
    let mut copy = headers.clone();
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(&mut copy)));
    let _ = span.set_parent(cx);
}

struct Headers<'a>(&'a mut BTreeMap<String, String>);

impl Injector for Headers<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("telemetry.log_level: {0}")]
    Filter(String),
    #[error("telemetry.otlp_endpoint: {0}")]
    Exporter(String),
}

/// Flushes and stops trace export when dropped: keep it alive until the process ends.
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
    /// Writes the log lines still buffered when dropped.
    _logs: Option<batch::Flusher>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("cova: flushing traces failed: {e}");
        }
    }
}

/// Installs the global subscriber. Calling it again (as tests do) keeps the first one.
pub fn init(cfg: &TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    let filter = filter(&cfg.log_level)?;
    let provider = match &cfg.otlp_endpoint {
        Some(endpoint) => {
            let protocol = if cfg.otlp_protocol == "json" { Protocol::HttpJson } else { Protocol::HttpBinary };
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(protocol)
                .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
                .build()
                .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(Resource::builder().with_service_name(cfg.service_name.clone()).build())
                    .build(),
            )
        }
        None => None,
    };
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    let otel = provider.as_ref().map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("cova")).boxed());
    let pretty = match cfg.log_format.as_str() {
        "pretty" => true,
        "json" => false,
        // `auto`: people read a terminal, collectors parse everything else.
        _ => std::io::stderr().is_terminal(),
    };
    let (writer, logs) = batch::stderr();
    let fmt = if pretty {
        tracing_subscriber::fmt::layer().with_writer(writer).boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .event_format(json::JsonLines)
            .fmt_fields(json::JsonSpanFields)
            .with_writer(writer)
            .boxed()
    };
    let _ = tracing_subscriber::registry().with(fmt.with_filter(filter.and(ClientFaults))).with(otel).try_init();
    Ok(TelemetryGuard { provider, _logs: Some(logs) })
}

/// Targets cova's log lines come from: a directive naming anything else matches nothing.
const KNOWN_TARGETS: &[&str] = &[
    "cova",
    "actix",
    "lapin",
    "amq",
    "diesel",
    "reqwest",
    "hyper",
    "h2",
    "rustls",
    "opentelemetry",
    "tokio",
    "tower",
    "object_store",
    "tracing",
    "deadpool",
    "redis",
    "mio",
];

/// Libraries that are chatty at INFO (worker start-up, connection details): held at WARN
/// unless the filter names them.
const QUIET: &[&str] = &["actix_server", "actix_web", "lapin", "amq_protocol", "opentelemetry", "h2", "hyper"];

const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

/// Parses `telemetry.log_level`, refusing a directive that can match no log line (a typo such
/// as `infoo` or `cova-gateway=debug` would otherwise silence the process).
fn filter(spec: &str) -> Result<EnvFilter, TelemetryError> {
    for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let (target, level) = match directive.split_once('=') {
            Some((t, l)) => (t, Some(l)),
            None if LEVELS.contains(&directive.to_ascii_lowercase().as_str()) => continue,
            None => (directive, None),
        };
        let target = target.split(['[', '{']).next().unwrap_or_default();
        if let Some(level) = level
            && !LEVELS.contains(&level.to_ascii_lowercase().as_str())
        {
            return Err(TelemetryError::Filter(format!(
                "`{directive}`: `{level}` is not a level (use one of {})",
                LEVELS.join(", ")
            )));
        }
        if !target.is_empty() && (target.contains('-') || !KNOWN_TARGETS.iter().any(|k| target.starts_with(k))) {
            return Err(TelemetryError::Filter(format!(
                "`{directive}` matches no log line: targets are module paths with underscores such as `cova_gateway` (known prefixes: {}), levels are {}",
                KNOWN_TARGETS.join(", "),
                LEVELS.join(", ")
            )));
        }
    }
    let mut filter = EnvFilter::try_new(spec).map_err(|e| TelemetryError::Filter(e.to_string()))?;
    for quiet in QUIET {
        if !spec.contains(quiet)
            && let Ok(directive) = format!("{quiet}=warn").parse()
        {
            filter = filter.add_directive(directive);
        }
    }
    Ok(filter)
}

/// actix-http logs a request head it cannot parse at ERROR ("stream error: request parse
/// error: …"), although that is the client's fault and any client can trigger it. The gateway
/// answers such requests itself and logs them as warnings, so these lines are dropped.
struct ClientFaults;

impl ClientFaults {
    const TARGET: &'static str = "actix_http::h1::dispatcher";

    fn is_client_fault(message: &str) -> bool {
        message.starts_with("stream error: request parse error") || message.contains("message head is too large")
    }
}

impl<S> Filter<S> for ClientFaults {
    fn enabled(&self, _meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _cx: &Context<'_, S>) -> bool {
        // lapin reports every connection it loses at ERROR ("error doing IO", "Connection
        // error"), although cova reconnects by itself: the queue logs the loss at WARN, and at
        // ERROR only a broker that stays away. Every other lapin failure reaches cova's code as
        // an error, which logs it where it is handled.
        if event.metadata().target().starts_with("lapin") && *event.metadata().level() == tracing::Level::ERROR {
            return false;
        }
        if event.metadata().target() != Self::TARGET {
            return true;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        !Self::is_client_fault(&message.0)
    }
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_that_match_cova_are_accepted() {
        for spec in
            ["info", "debug", "cova=debug,info", "cova_gateway=trace,lapin=info", "warn,cova_scraper[job]=debug"]
        {
            assert!(filter(spec).is_ok(), "{spec}");
        }
    }

    #[test]
    fn a_filter_that_matches_nothing_is_refused() {
        for spec in ["infoo", "cova-gateway=debug", "gateway=debug", "cova=loud"] {
            let err = filter(spec).err().unwrap_or_else(|| panic!("{spec} accepted"));
            assert!(err.to_string().starts_with("telemetry.log_level"), "{err}");
        }
    }
}
