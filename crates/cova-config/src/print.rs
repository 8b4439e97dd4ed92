//! The effective configuration as TOML for `cova config print` and the start-up log: every
//! setting with its value, URL passwords masked and secrets shown only as set or not.

use crate::{Config, redact_url};
use config::ValueKind;
use secrecy::SecretString;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Keys whose value is a URL that may carry a password.
const URL_KEYS: &[&str] = &["database.url", "queue.url", "cache.url", "media.url", "smtp.url"];
const MASK: &str = "***";

impl Config {
    /// The effective configuration as TOML, safe to paste into a ticket.
    pub fn to_redacted_toml(&self) -> String {
        let mut root: BTreeMap<String, ValueKind> = BTreeMap::new();
        if let Ok(built) = config::Config::try_from(self)
            && let Ok(map) = built.try_deserialize::<config::Map<String, config::Value>>()
        {
            root = map.into_iter().map(|(k, v)| (k, v.kind)).collect();
        }
        let secret = |s: &Option<SecretString>| match s {
            Some(_) => ValueKind::String(MASK.to_owned()),
            None => ValueKind::Nil,
        };
        put(&mut root, "database.encryption_keys", secret(&self.database.encryption_keys));
        put(&mut root, "notifier.telegram_bot_token", secret(&self.notifier.telegram_bot_token));
        put(&mut root, "media.s3_secret_access_key", secret(&self.media.s3_secret_access_key));
        put(&mut root, "ai.openai.api_key", secret(&self.ai.openai.api_key));
        put(&mut root, "payments.secret_key", secret(&self.payments.secret_key));
        put(&mut root, "payments.webhook_secret", secret(&self.payments.webhook_secret));
        for (path, value) in self.platform_urls() {
            put(&mut root, path, ValueKind::String(value));
        }
        for key in URL_KEYS {
            if let Some(ValueKind::String(url)) = get(&root, key) {
                let masked = redact_url(&url);
                put(&mut root, key, ValueKind::String(masked));
            }
        }
        let mut out = String::new();
        write_table(&mut out, "", &root);
        out
    }

    /// The platform base URLs (the rest of `platforms.*` holds secrets).
    pub fn platform_urls(&self) -> Vec<(&'static str, String)> {
        let mut urls = vec![
            ("platforms.tiktok.web_base_url", self.platforms.tiktok.web_base_url.clone()),
            ("platforms.youtube.api_base_url", self.platforms.youtube.api_base_url.clone()),
            ("platforms.instagram.web_base_url", self.platforms.instagram.web_base_url.clone()),
        ];
        if let Some(short) = &self.platforms.tiktok.short_link_base_url {
            urls.push(("platforms.tiktok.short_link_base_url", short.clone()));
        }
        urls
    }
}

fn get(root: &BTreeMap<String, ValueKind>, path: &str) -> Option<ValueKind> {
    let mut parts = path.split('.');
    let mut current = root.get(parts.next()?)?.clone();
    for part in parts {
        let ValueKind::Table(table) = current else { return None };
        current = table.get(part)?.kind.clone();
    }
    Some(current)
}

fn put(root: &mut BTreeMap<String, ValueKind>, path: &str, value: ValueKind) {
    let parts: Vec<&str> = path.split('.').collect();
    let Some((last, parents)) = parts.split_last() else { return };
    let mut map: BTreeMap<String, ValueKind> = std::mem::take(root);
    insert(&mut map, parents, last, value);
    *root = map;
}

fn insert(map: &mut BTreeMap<String, ValueKind>, parents: &[&str], last: &str, value: ValueKind) {
    match parents.split_first() {
        None => {
            map.insert(last.to_owned(), value);
        }
        Some((first, rest)) => {
            let entry = map.entry((*first).to_owned()).or_insert_with(|| ValueKind::Table(Default::default()));
            if !matches!(entry, ValueKind::Table(_)) {
                *entry = ValueKind::Table(Default::default());
            }
            if let ValueKind::Table(table) = entry {
                let mut inner: BTreeMap<String, ValueKind> =
                    std::mem::take(table).into_iter().map(|(k, v)| (k, v.kind)).collect();
                insert(&mut inner, rest, last, value);
                *table = inner.into_iter().map(|(k, v)| (k, config::Value::new(None, v))).collect();
            }
        }
    }
}

fn write_table(out: &mut String, prefix: &str, table: &BTreeMap<String, ValueKind>) {
    let mut sections = Vec::new();
    for (key, value) in table {
        match value {
            ValueKind::Table(inner) => sections.push((key, inner)),
            ValueKind::Nil => {
                let _ = writeln!(out, "# {} is not set", bare_key(key));
            }
            other => {
                let _ = writeln!(out, "{} = {}", bare_key(key), scalar(other));
            }
        }
    }
    for (key, inner) in sections {
        let name = if prefix.is_empty() { bare_key(key) } else { format!("{prefix}.{}", bare_key(key)) };
        let inner: BTreeMap<String, ValueKind> = inner.iter().map(|(k, v)| (k.clone(), v.kind.clone())).collect();
        let _ = writeln!(out, "\n[{name}]");
        write_table(out, &name, &inner);
    }
}

fn bare_key(key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        key.to_owned()
    } else {
        quote(key)
    }
}

fn scalar(value: &ValueKind) -> String {
    match value {
        ValueKind::Nil => "\"\"".to_owned(),
        ValueKind::Boolean(b) => b.to_string(),
        ValueKind::I64(n) => n.to_string(),
        ValueKind::I128(n) => n.to_string(),
        ValueKind::U64(n) => n.to_string(),
        ValueKind::U128(n) => n.to_string(),
        ValueKind::Float(f) => format!("{f:?}"),
        ValueKind::String(s) => quote(s),
        ValueKind::Array(items) => {
            let items: Vec<String> = items.iter().map(|v| scalar(&v.kind)).collect();
            format!("[{}]", items.join(", "))
        }
        // Inline, so that an array of tables (`billing.packs`) stays one line.
        ValueKind::Table(table) => {
            let mut fields: Vec<(&String, &config::Value)> = table.iter().collect();
            fields.sort_by_key(|(k, _)| k.as_str());
            let fields: Vec<String> =
                fields.iter().map(|(k, v)| format!("{} = {}", bare_key(k), scalar(&v.kind))).collect();
            format!("{{ {} }}", fields.join(", "))
        }
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_passwords_never_print() {
        let env = [
            ("COVA_DATABASE__URL", "postgres://cova:hunter2@db:5432/cova"),
            ("COVA_DATABASE__ENCRYPTION_KEYS", "c2VhbGluZy1rZXk="),
            ("COVA_QUEUE__URL", "amqp://guest:s3cret@mq:5672/%2f"),
            ("COVA_NOTIFIER__TELEGRAM_BOT_TOKEN", "123:ABCDEF"),
            ("COVA_AI__OPENAI__API_KEY", "sk-very-secret"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let cfg = Config::load_from(None, env).expect("valid");
        let text = cfg.to_redacted_toml();
        for secret in ["hunter2", "s3cret", "ABCDEF", "sk-very-secret", "c2VhbGluZy1rZXk="] {
            assert!(!text.contains(secret), "{secret} printed:\n{text}");
        }
        assert!(text.contains("url = \"postgres://cova:***@db:5432/cova\""), "{text}");
        assert!(text.contains("telegram_bot_token = \"***\""), "{text}");
        assert!(text.contains("encryption_keys = \"***\""), "{text}");
        assert!(text.contains("[http]\naddr = \"127.0.0.1:8080\""), "{text}");
        assert!(text.contains("web_base_url = \"https://www.tiktok.com\""), "{text}");
    }

    #[test]
    fn the_printed_file_loads_back_to_the_same_settings() {
        let cfg = Config::default();
        let dir = std::env::temp_dir().join(format!("cova-print-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("cova.toml");
        let text = cfg.to_redacted_toml();
        assert!(text.contains("# otlp_endpoint is not set"), "{text}");
        std::fs::write(&file, text).expect("write");
        let loaded = Config::load_from(Some(&file), std::iter::empty()).expect("loads back");
        assert_eq!(loaded.http.addr, cfg.http.addr);
        assert_eq!(loaded.media.cdn_hosts, cfg.media.cdn_hosts);
        assert_eq!(loaded.metrics.addr, cfg.metrics.addr);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
