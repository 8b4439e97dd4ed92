//! Logs and traces (`telemetry.*`) and the private metrics and health listener (`metrics.*`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `auto` (`pretty` when stderr is a terminal, else `json`), `json` (one object per line)
    /// or `pretty`.
    pub log_format: String,
    /// `tracing` filter directive, e.g. `info` or `cova=debug,info`.
    pub log_level: String,
    /// OTLP/HTTP endpoint (e.g. `http://collector:4318`); traces are exported when set.
    pub otlp_endpoint: Option<String>,
    /// OTLP/HTTP body encoding: `protobuf` (what every collector takes) or `json`.
    pub otlp_protocol: String,
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            log_format: "auto".into(),
            log_level: "info".into(),
            otlp_endpoint: None,
            otlp_protocol: "protobuf".into(),
            service_name: "cova".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Private listen address of every process for `/metrics` (Prometheus), `/healthz` and
    /// `/readyz`; empty turns it off. Keep it off the public network: the gateway's public
    /// port never serves metrics.
    pub addr: String,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { addr: "127.0.0.1:9464".into() }
    }
}

impl MetricsConfig {
    /// The address to listen on, `None` when turned off.
    pub fn addr(&self) -> Option<&str> {
        Some(self.addr.trim()).filter(|a| !a.is_empty())
    }
}
