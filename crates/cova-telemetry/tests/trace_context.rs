//! W3C trace context travels through message headers: work on the other side joins the trace.

use cova_config::TelemetryConfig;

#[test]
fn a_follower_span_continues_the_senders_trace() {
    // cova-sim accepts the exports (export itself is tested in otlp.rs).
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let sim = rt.block_on(cova_sim::spawn(cova_sim::SimConfig::default())).expect("simulator");
    let endpoint = sim.base_url().to_owned();
    let cfg = TelemetryConfig { otlp_endpoint: Some(endpoint), ..TelemetryConfig::default() };
    let _guard = cova_telemetry::init(&cfg).expect("telemetry");

    let sender = tracing::info_span!("request");
    let headers = sender.in_scope(cova_telemetry::current_trace_headers);
    let traceparent = headers.get("traceparent").expect("traceparent header").clone();
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[1].len(), 32);

    let receiver = tracing::info_span!("job");
    cova_telemetry::follow(&receiver, &headers);
    let continued = receiver.in_scope(cova_telemetry::current_trace_headers);
    let continued_parts: Vec<String> =
        continued.get("traceparent").expect("traceparent").split('-').map(str::to_owned).collect();
    assert_eq!(continued_parts[1], parts[1], "same trace id");
    assert_ne!(continued_parts[2], parts[2], "a new span within it");

    // Without a trace, nothing is invented.
    let none = cova_telemetry::current_trace_headers();
    assert!(none.is_empty(), "{none:?}");
}
