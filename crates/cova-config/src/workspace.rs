//! The web workspace (`workspace.*`) and the e-mail it sends (`smtp.*`).

use serde::{Deserialize, Serialize};

/// The web workspace: cookie sessions and the links its e-mails carry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Where people reach cova, e.g. `https://cova.example.com`: the base of e-mailed links,
    /// and `https` makes the session cookie `Secure` with the `__Host-` prefix. Empty: `http://<http.addr>`.
    pub public_url: String,
    /// Other origins whose pages may use the cookie session (credentialed CORS).
    pub allowed_origins: Vec<String>,
    /// A session ends after this long without a request.
    pub session_idle_min: u64,
    /// A session ends this long after login, however active.
    pub session_max_hours: u64,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        Self { public_url: String::new(), allowed_origins: Vec::new(), session_idle_min: 720, session_max_hours: 168 }
    }
}

impl WorkspaceConfig {
    /// The base of e-mailed links, without a trailing `/`.
    pub fn base_url(&self, http_addr: &str) -> String {
        if self.public_url.is_empty() {
            format!("http://{http_addr}")
        } else {
            self.public_url.trim_end_matches('/').to_owned()
        }
    }

    /// Whether the session cookie must be `Secure` (and carry the `__Host-` prefix).
    pub fn secure_cookies(&self) -> bool {
        self.public_url.starts_with("https://")
    }
}

/// Outgoing e-mail (confirmation and password reset).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SmtpConfig {
    /// `smtp://host:port` (plain; add `?tls=required` for STARTTLS), `smtps://host:465` (TLS),
    /// with `user:password@` when the server wants a login. Empty: each message is written as
    /// an `.eml` file under `mail_dir`, and the file is logged.
    pub url: String,
    pub from: String,
    pub mail_dir: String,
    pub timeout_ms: u64,
}

impl Default for SmtpConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            from: "cova <no-reply@cova.localhost>".into(),
            mail_dir: "data/mail".into(),
            timeout_ms: 10_000,
        }
    }
}
