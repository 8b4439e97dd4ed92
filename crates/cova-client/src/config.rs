//! Where the client finds the service and its token: `--url` / `COVA_URL`, `COVA_TOKEN`, and
//! the client config file `$XDG_CONFIG_HOME/cova/client.toml` (else `~/.config/cova/client.toml`):
//!
//! ```toml
//! url = "https://cova.example.com"
//! token = "cova_…"
//! ```
//!
//! The file is read with a small parser of `key = "value"` lines (TOML basic or literal
//! strings, `#` comments); it knows only `url` and `token`.

use super::ClientError;
use super::exit::Exit;
use std::path::{Path, PathBuf};
use url::Url;

/// The service when neither `--url`, `COVA_URL` nor the config file names one.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// Where to call and with which token (no `Debug`: it holds the token).
pub struct Settings {
    pub base: Url,
    pub token: String,
}

impl Settings {
    /// `url` is `--url` or `COVA_URL` (clap reads both); the token comes from `COVA_TOKEN`,
    /// else from the config file.
    pub fn resolve(url: Option<&str>) -> Result<Self, ClientError> {
        let path = config_path();
        let url = non_empty(url.map(str::to_owned));
        let from_env = non_empty(std::env::var("COVA_TOKEN").ok());
        // The file is read only for what the flag and the environment leave unset: a broken
        // file never stops a command that does not need it.
        let file = match &path {
            Some(path) if url.is_none() || from_env.is_none() => FileSettings::load(path)?,
            _ => FileSettings::default(),
        };
        let url = url.or_else(|| non_empty(file.url)).unwrap_or_else(|| DEFAULT_URL.to_owned());
        let base = parse_base(&url)?;
        let token = from_env.or_else(|| non_empty(file.token)).ok_or_else(|| {
            let place =
                path.as_deref().map_or_else(|| "the client config file".to_owned(), |p| p.display().to_string());
            ClientError::new(
                Exit::Auth,
                format!("no token: set COVA_TOKEN, or `token = \"cova_…\"` in {place} (never on the command line)"),
            )
        })?;
        if !cova_auth::looks_like_token(&token) {
            return Err(ClientError::new(
                Exit::Auth,
                "the token is not a cova token (`cova_` and 36 letters or digits); check COVA_TOKEN or the client config file",
            ));
        }
        Ok(Self { base, token })
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The service's base URL: `http` or `https`, without query or fragment; a path is kept as a
/// prefix (for a service behind a proxy at `https://host/cova`).
pub fn parse_base(raw: &str) -> Result<Url, ClientError> {
    let usage = |why: &str| ClientError::new(Exit::Usage, format!("the service URL {raw:?} {why}"));
    let mut url = Url::parse(raw).map_err(|e| usage(&format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() || url.host_str().is_none() {
        return Err(usage("must be an http:// or https:// URL"));
    }
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

/// `$XDG_CONFIG_HOME/cova/client.toml` when XDG_CONFIG_HOME is an absolute path, else
/// `$HOME/.config/cova/client.toml`.
pub fn config_path() -> Option<PathBuf> {
    let dir = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".config")))?;
    Some(dir.join("cova").join("client.toml"))
}

/// What the config file sets.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FileSettings {
    pub url: Option<String>,
    pub token: Option<String>,
}

impl FileSettings {
    /// Reads the file; a missing file sets nothing.
    fn load(path: &Path) -> Result<Self, ClientError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(ClientError::new(Exit::Other, format!("cannot read {}: {e}", path.display()))),
        };
        let settings =
            Self::parse(&text).map_err(|e| ClientError::new(Exit::Other, format!("{}: {e}", path.display())))?;
        if settings.token.is_some() {
            warn_if_readable_by_others(path);
        }
        Ok(settings)
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let mut settings = Self::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = n + 1;
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("line {at}: expected `key = \"value\"`"));
            };
            let key = key.trim();
            let value = string_value(value.trim())
                .ok_or_else(|| format!("line {at}: the value of `{key}` must be a quoted string"))?;
            let slot = match key {
                "url" => &mut settings.url,
                "token" => &mut settings.token,
                other => return Err(format!("line {at}: unknown key `{other}` (expected `url` or `token`)")),
            };
            if slot.is_some() {
                return Err(format!("line {at}: `{key}` is set twice"));
            }
            *slot = Some(value);
        }
        Ok(settings)
    }
}

/// A TOML basic string (`"…"`, with `\"`, `\\`, `\n`, `\t` escapes) or literal string
/// (`'…'`), optionally followed by a `#` comment.
fn string_value(raw: &str) -> Option<String> {
    let mut chars = raw.chars();
    let value = match chars.next()? {
        '\'' => {
            let rest = chars.as_str();
            let end = rest.find('\'')?;
            chars = rest[end + 1..].chars();
            rest[..end].to_owned()
        }
        '"' => {
            let mut out = String::new();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => match chars.next()? {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        _ => return None,
                    },
                    c => out.push(c),
                }
            }
            out
        }
        _ => return None,
    };
    let tail = chars.as_str().trim();
    (tail.is_empty() || tail.starts_with('#')).then_some(value)
}

/// A token in a file others can read is as good as published.
fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            eprintln!(
                "cova: warning: {} holds a token and other users can read it; run `chmod 600 {}`",
                path.display(),
                path.display()
            );
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_sets_url_and_token() {
        let text = "# cova client\n\nurl = \"https://cova.example.com\"  # the service\ntoken = 'cova_abc'\n";
        let parsed = FileSettings::parse(text).expect("parses");
        assert_eq!(
            parsed,
            FileSettings { url: Some("https://cova.example.com".into()), token: Some("cova_abc".into()) }
        );
        assert_eq!(FileSettings::parse("").expect("empty"), FileSettings::default());
        let escaped = FileSettings::parse(r#"token = "a\"b\\c""#).expect("escapes");
        assert_eq!(escaped.token.as_deref(), Some("a\"b\\c"));
    }

    #[test]
    fn malformed_files_name_the_line() {
        for (text, needle) in [
            ("url", "line 1"),
            ("url = https://x", "quoted string"),
            ("\ntokn = \"x\"", "line 2: unknown key `tokn`"),
            ("url = \"a\"\nurl = \"b\"", "set twice"),
            ("url = \"a\" trailing", "quoted string"),
            ("url = \"unterminated", "quoted string"),
            ("[client]", "line 1"),
        ] {
            let err = FileSettings::parse(text).expect_err(text);
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_base_url_must_be_http() {
        assert_eq!(parse_base("http://127.0.0.1:8080").expect("ok").as_str(), "http://127.0.0.1:8080/");
        assert_eq!(parse_base("https://h/cova/?x=1#f").expect("ok").as_str(), "https://h/cova/");
        for bad in ["ftp://h", "127.0.0.1:8080", "not a url", "mailto:a@b.co", "file:///tmp"] {
            let err = parse_base(bad).expect_err(bad);
            assert_eq!(err.exit, Exit::Usage, "{bad}");
        }
    }
}
