//! Environment variable names checked against the settings that exist, so that a typo such as
//! `COVA_HTTP_ADDR` (one underscore where the section ends) is named with its correction
//! instead of surfacing as serde's "unknown field `http_addr`".

use crate::{Config, ConfigError};
use serde_json::Value;
use std::collections::BTreeMap;

/// Sections whose keys are not all in the serialised defaults (they hold secrets or open
/// maps); serde still refuses an unknown key under them.
const OPEN_SECTIONS: &[&str] = &["platforms"];

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Leaf,
    /// A table and whether the defaults list any key in it (an empty one is an open map,
    /// e.g. `notifier.hosts`).
    Table {
        empty: bool,
    },
}

fn known_paths() -> BTreeMap<String, Kind> {
    let mut out = BTreeMap::new();
    // serde_json keeps empty lists and maps, which the configuration's own values drop.
    if let Ok(Value::Object(root)) = serde_json::to_value(Config::default()) {
        for (key, value) in root {
            walk(&key, value, &mut out);
        }
    }
    // Secrets are never serialised; they are settings all the same.
    for &secret in crate::SECRET_KEYS {
        out.insert(secret.to_owned(), Kind::Leaf);
    }
    out
}

fn walk(path: &str, value: Value, out: &mut BTreeMap<String, Kind>) {
    match value {
        Value::Object(table) => {
            out.insert(path.to_owned(), Kind::Table { empty: table.is_empty() });
            for (key, value) in table {
                walk(&format!("{path}.{key}"), value, out);
            }
        }
        _ => {
            out.insert(path.to_owned(), Kind::Leaf);
        }
    }
}

fn env_name(path: &str) -> String {
    format!("COVA_{}", path.to_uppercase().replace('.', "__"))
}

/// `Ok` when `var` (a `COVA_…` name) names a setting.
pub(crate) fn check_env_name(var: &str) -> Result<(), ConfigError> {
    let known = known_paths();
    let path = var.trim_start_matches("COVA_").to_lowercase().replace("__", ".");
    if accepts(&known, &path) {
        return Ok(());
    }
    let hint = suggestion(&known, var).map(|s| format!(": did you mean {s}?")).unwrap_or_default();
    Err(ConfigError::UnknownVariable { var: var.to_owned(), hint })
}

fn accepts(known: &BTreeMap<String, Kind>, path: &str) -> bool {
    if known.get(path) == Some(&Kind::Leaf) {
        return true;
    }
    let segments: Vec<&str> = path.split('.').collect();
    if segments.len() > 1 && OPEN_SECTIONS.contains(&segments[0]) {
        return true;
    }
    // A key inside an open map (`COVA_NOTIFIER__HOSTS__EXAMPLE_COM`).
    (1..segments.len()).any(|n| known.get(&segments[..n].join(".")) == Some(&Kind::Table { empty: true }))
}

fn suggestion(known: &BTreeMap<String, Kind>, var: &str) -> Option<String> {
    let squash = |s: &str| s.replace("__", "_");
    let leaves = known.iter().filter(|(_, k)| **k == Kind::Leaf).map(|(p, _)| env_name(p));
    let mut best: Option<(usize, String)> = None;
    for candidate in leaves {
        let distance = if squash(&candidate) == squash(var) { 0 } else { edit_distance(&candidate, var) };
        if distance <= 3 && best.as_ref().is_none_or(|(d, _)| distance < *d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, name)| name)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb { previous } else { 1 + previous.min(row[j]).min(row[j + 1]) };
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(var: &str) -> String {
        check_env_name(var).expect_err("refused").to_string()
    }

    #[test]
    fn settings_and_open_maps_are_accepted() {
        for var in [
            "COVA_HTTP__ADDR",
            "COVA_DATABASE__URL",
            "COVA_NOTIFIER__TELEGRAM_BOT_TOKEN",
            "COVA_MEDIA__S3_SECRET_ACCESS_KEY",
            "COVA_AI__OPENAI__API_KEY",
            "COVA_NOTIFIER__HOSTS__HOOKS_EXAMPLE_COM",
            "COVA_PLATFORMS__TIKTOK__WEB_BASE_URL",
            "COVA_METRICS__ADDR",
        ] {
            assert!(check_env_name(var).is_ok(), "{var}");
        }
    }

    #[test]
    fn a_single_underscore_is_named_with_its_correction() {
        let message = hint("COVA_HTTP_ADDR");
        assert!(message.contains("did you mean COVA_HTTP__ADDR?"), "{message}");
        assert!(message.contains("double underscore"), "{message}");
        assert!(hint("COVA_DATABASE_URL").contains("COVA_DATABASE__URL"));
    }

    #[test]
    fn a_misspelt_key_gets_the_nearest_setting() {
        assert!(hint("COVA_HTTP__ADR").contains("did you mean COVA_HTTP__ADDR?"));
        let far = hint("COVA_SOMETHING_ELSE_ENTIRELY");
        assert!(!far.contains("did you mean"), "{far}");
    }
}
