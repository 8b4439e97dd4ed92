//! Spans reach an OTLP/HTTP collector when `telemetry.otlp_endpoint` is set.

use cova_config::TelemetryConfig;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

/// A one-shot collector: records the first request line and body size, answers 200.
fn collector() -> (String, mpsc::Receiver<(String, usize)>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            let mut reader = BufReader::new(stream);
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = reader.get_mut().write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
            let _ = tx.send((request_line.trim().to_owned(), body.len()));
        }
    });
    (url, rx)
}

#[test]
fn spans_are_exported_over_otlp_http() {
    let (endpoint, received) = collector();
    let cfg = TelemetryConfig { otlp_endpoint: Some(endpoint), log_level: "info".into(), ..TelemetryConfig::default() };
    let guard = cova_telemetry::init(&cfg).expect("telemetry starts");
    tracing::info_span!("request", request.id = "abc").in_scope(|| tracing::info!("inside a span"));
    drop(guard); // flushes the batch
    let (line, size) = received.recv_timeout(Duration::from_secs(10)).expect("the collector received an export");
    assert!(line.starts_with("POST /v1/traces"), "{line}");
    assert!(size > 0);
}

#[test]
fn a_bad_log_filter_names_its_key() {
    let cfg = TelemetryConfig { log_level: "cova=[".into(), ..TelemetryConfig::default() };
    let err = cova_telemetry::init(&cfg).err().expect("invalid filter");
    assert!(err.to_string().contains("telemetry.log_level"), "{err}");
}
