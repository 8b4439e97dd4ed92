//! Spans reach an OTLP/HTTP collector when `telemetry.otlp_endpoint` is set.

use cova_config::TelemetryConfig;

#[test]
fn spans_are_exported_over_otlp_http() {
    // cova-sim doubles as the collector and records every export.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let sim = rt.block_on(cova_sim::spawn(cova_sim::SimConfig::default())).expect("simulator");
    let cfg = TelemetryConfig {
        otlp_endpoint: Some(sim.base_url().to_owned()),
        log_level: "info".into(),
        ..TelemetryConfig::default()
    };
    let guard = cova_telemetry::init(&cfg).expect("telemetry starts");
    tracing::info_span!("request", request.id = "abc").in_scope(|| tracing::info!("inside a span"));
    drop(guard); // flushes the batch
    let export = rt.block_on(cova_testdb::until("an export at the collector", async || {
        sim.requests().into_iter().find(|r| r.path == "/v1/traces")
    }));
    assert_eq!(export.method, "POST");
    assert!(export.body_bytes > 0);
    drop(sim);
}

#[test]
fn a_bad_log_filter_names_its_key() {
    let cfg = TelemetryConfig { log_level: "cova=[".into(), ..TelemetryConfig::default() };
    let err = cova_telemetry::init(&cfg).err().expect("invalid filter");
    assert!(err.to_string().contains("telemetry.log_level"), "{err}");
}
