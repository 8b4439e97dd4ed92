//! Post URL parsing and normalisation: every URL form of a post maps to one [`PostRef`].

use crate::PlatformError;
use std::fmt;
use std::str::FromStr;
use url::Url;

/// A supported platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    TikTok,
    YouTube,
    Instagram,
}

impl Platform {
    pub const ALL: [Platform; 3] = [Platform::TikTok, Platform::YouTube, Platform::Instagram];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::TikTok => "tiktok",
            Self::YouTube => "youtube",
            Self::Instagram => "instagram",
        }
    }

    /// The platform's name as people write it.
    pub fn name(self) -> &'static str {
        match self {
            Self::TikTok => "TikTok",
            Self::YouTube => "YouTube",
            Self::Instagram => "Instagram",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The platform-independent identity of a post, `<platform>:<post id>`; the dedup key of cova.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PostRef {
    pub platform: Platform,
    pub id: String,
}

impl PostRef {
    pub fn tiktok(id: u64) -> Self {
        Self { platform: Platform::TikTok, id: id.to_string() }
    }

    /// The canonical public URL of the post (TikTok accepts `_` when the handle is unknown).
    pub fn canonical_url(&self) -> String {
        match self.platform {
            Platform::TikTok => format!("https://www.tiktok.com/@_/video/{}", self.id),
            Platform::YouTube => format!("https://www.youtube.com/shorts/{}", self.id),
            Platform::Instagram => format!("https://www.instagram.com/reel/{}/", self.id),
        }
    }
}

impl fmt::Display for PostRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.platform.as_str(), self.id)
    }
}

impl FromStr for PostRef {
    type Err = PlatformError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            PlatformError::InvalidUrl(format!(
                "`{}` is not a ref of the form tiktok:<id>, youtube:<id> or instagram:<shortcode>",
                clip(s)
            ))
        };
        let (platform, id) = s.split_once(':').ok_or_else(bad)?;
        match platform {
            "tiktok" => tiktok_id(id).map(PostRef::tiktok).ok_or_else(bad),
            "youtube" if is_youtube_id(id) => Ok(PostRef { platform: Platform::YouTube, id: id.to_string() }),
            // Only the public code names a post: a private post's long code is not a ref.
            "instagram" if crate::instagram::shortcode::public_code(id) == Some(id) => {
                Ok(PostRef { platform: Platform::Instagram, id: id.to_string() })
            }
            _ => Err(bad()),
        }
    }
}

impl serde::Serialize for PostRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for PostRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Which short-link service a TikTok short link belongs to; decides the host it is requested on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShortHost {
    /// `vm.tiktok.com/<code>/`
    Vm,
    /// `vt.tiktok.com/<code>/`
    Vt,
    /// `www.tiktok.com/t/<code>/`
    Web,
    /// `www.instagram.com/share/<code>/` (the code may hold a `reel/` or `p/` part).
    InstagramShare,
}

/// A TikTok short link that must be resolved over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortLink {
    pub host: ShortHost,
    pub code: String,
}

impl ShortLink {
    /// The path requested on the short-link host (the same on the real hosts and on a configured base).
    pub fn path(&self) -> String {
        match self.host {
            ShortHost::Vm | ShortHost::Vt => format!("/{}/", self.code),
            ShortHost::Web => format!("/t/{}/", self.code),
            ShortHost::InstagramShare => format!("/share/{}/", self.code),
        }
    }

    /// The URL on the real platform.
    pub fn public_url(&self) -> String {
        let host = match self.host {
            ShortHost::Vm => "vm.tiktok.com",
            ShortHost::Vt => "vt.tiktok.com",
            ShortHost::Web => "www.tiktok.com",
            ShortHost::InstagramShare => "www.instagram.com",
        };
        format!("https://{host}{}", self.path())
    }
}

/// The result of parsing without network access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedUrl {
    Post(PostRef),
    ShortLink(ShortLink),
}

const MAX_INPUT: usize = 4096;

/// A web URL as typed by a user: parsed (an `https://` added when no scheme was given), with
/// its lower-case host and its non-empty path segments. Errors say what was wrong.
pub(crate) struct WebUrl {
    pub url: Url,
    pub host: String,
}

impl WebUrl {
    pub fn segments(&self) -> Vec<&str> {
        self.url.path_segments().map(|s| s.filter(|p| !p.is_empty()).collect()).unwrap_or_default()
    }
}

pub(crate) fn web_url(trimmed: &str) -> Result<WebUrl, PlatformError> {
    if trimmed.is_empty() {
        return Err(PlatformError::InvalidUrl("The link is empty: paste the post's address.".into()));
    }
    if trimmed.len() > MAX_INPUT {
        return Err(PlatformError::InvalidUrl(format!(
            "The link is longer than {MAX_INPUT} characters: paste the post's address alone."
        )));
    }
    let with_scheme = if trimmed.contains("://") { trimmed.to_string() } else { format!("https://{trimmed}") };
    // The parser's own words ("invalid international domain name") mean nothing to a person.
    let url = Url::parse(&with_scheme).map_err(|_| not_a_link(trimmed))?;
    if url.scheme() != "https" && url.scheme() != "http" {
        return Err(PlatformError::InvalidUrl(format!(
            "Links starting with `{}:` are not supported: paste the post's https link.",
            clip(url.scheme())
        )));
    }
    let host = url
        .host_str()
        .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .ok_or_else(|| not_a_link(trimmed))?;
    let looks_like_host =
        host.contains('.') || host.contains(':') || url.host().is_some_and(|h| !matches!(h, url::Host::Domain(_)));
    if !looks_like_host {
        return Err(not_a_link(trimmed));
    }
    Ok(WebUrl { url, host })
}

/// What cannot be read as a web address, said with what to do instead.
fn not_a_link(input: &str) -> PlatformError {
    PlatformError::InvalidUrl(format!(
        "`{}` is not a web address: paste the post's link, such as https://www.tiktok.com/@user/video/7301234567890123456.",
        clip(input)
    ))
}

/// Parses any supported post URL form. Never panics; errors say what was wrong.
pub fn parse_url(input: &str) -> Result<ParsedUrl, PlatformError> {
    let trimmed = input.trim();
    let web = web_url(trimmed)?;
    let (url, host) = (&web.url, web.host.as_str());
    let segments = web.segments();
    if is_tiktok_host(host) {
        if host == "vm.tiktok.com" || host == "vt.tiktok.com" {
            let kind = if host == "vm.tiktok.com" { ShortHost::Vm } else { ShortHost::Vt };
            return match segments.as_slice() {
                [code] if is_short_code(code) => {
                    Ok(ParsedUrl::ShortLink(ShortLink { host: kind, code: code.to_string() }))
                }
                _ => Err(not_a_post(trimmed, "a TikTok short link looks like https://vm.tiktok.com/<code>/")),
            };
        }
        return parse_tiktok_path(&segments).ok_or_else(|| {
            not_a_post(trimmed, "expected a TikTok post URL such as https://www.tiktok.com/@user/video/<id>")
        });
    }
    if is_youtube_host(host) {
        return parse_youtube(host, &segments, url).map(ParsedUrl::Post).ok_or_else(|| {
            not_a_post(
                trimmed,
                "expected a YouTube Shorts URL such as https://www.youtube.com/shorts/<11-character id>",
            )
        });
    }
    if crate::instagram::urls::is_instagram_host(host) {
        use crate::instagram::urls::{Named, parse_path};
        return match parse_path(&segments) {
            Some(Named::Post(code)) => Ok(ParsedUrl::Post(PostRef { platform: Platform::Instagram, id: code })),
            Some(Named::Share(path)) => Ok(ParsedUrl::ShortLink(ShortLink {
                host: ShortHost::InstagramShare,
                code: path.trim_start_matches("/share/").trim_end_matches('/').to_owned(),
            })),
            None => Err(not_a_post(
                trimmed,
                "expected an Instagram post URL such as https://www.instagram.com/reel/<code>/",
            )),
        };
    }
    Err(unsupported_host(host))
}

/// The error of a host that is none of the platforms'.
pub(crate) fn unsupported_host(host: &str) -> PlatformError {
    PlatformError::InvalidUrl(format!(
        "Unsupported platform: `{}` is not a TikTok, YouTube or Instagram host.",
        clip(host)
    ))
}

/// Parses the path of a TikTok web URL (host already checked); also used on redirect targets.
pub(crate) fn parse_tiktok_path(segments: &[&str]) -> Option<ParsedUrl> {
    let post = |id: &str| tiktok_id(id).map(|id| ParsedUrl::Post(PostRef::tiktok(id)));
    match segments {
        [user, "video" | "photo", id, ..] if user.starts_with('@') => post(id),
        ["share", "video", id, ..] => post(id),
        ["embed", "v2", id, ..] => post(id),
        ["embed", id, ..] => post(id),
        ["v", file, ..] => post(file.strip_suffix(".html")?),
        ["t", code] if is_short_code(code) => {
            Some(ParsedUrl::ShortLink(ShortLink { host: ShortHost::Web, code: code.to_string() }))
        }
        _ => None,
    }
}

fn parse_youtube(host: &str, segments: &[&str], url: &Url) -> Option<PostRef> {
    let id = if host == "youtu.be" {
        segments.first().map(|s| s.to_string())
    } else {
        match segments {
            ["shorts" | "embed" | "live" | "v", id, ..] => Some(id.to_string()),
            ["watch"] => url.query_pairs().find(|(k, _)| k == "v").map(|(_, v)| v.into_owned()),
            _ => None,
        }
    }?;
    is_youtube_id(&id).then_some(PostRef { platform: Platform::YouTube, id })
}

pub(crate) fn is_tiktok_host(host: &str) -> bool {
    host == "tiktok.com" || host.ends_with(".tiktok.com") || host == "tiktokv.com" || host.ends_with(".tiktokv.com")
}

pub(crate) fn is_youtube_host(host: &str) -> bool {
    matches!(host, "youtube.com" | "www.youtube.com" | "m.youtube.com" | "youtu.be" | "www.youtu.be")
}

/// TikTok ids are non-zero 64-bit decimals.
fn tiktok_id(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok().filter(|id| *id > 0)
}

pub(crate) fn is_youtube_id(s: &str) -> bool {
    s.len() == 11 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_short_code(s: &str) -> bool {
    (4..=32).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn not_a_post(input: &str, hint: &str) -> PlatformError {
    PlatformError::InvalidUrl(format!("Not a post URL: `{}`; {hint}", clip(input)))
}

/// Bounds user input echoed in error details.
pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 120;
    if s.chars().count() <= MAX { s.to_string() } else { format!("{}…", s.chars().take(MAX).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: &str = "7279848477109062945";

    fn post(input: &str) -> PostRef {
        match parse_url(input) {
            Ok(ParsedUrl::Post(p)) => p,
            other => panic!("{input}: {other:?}"),
        }
    }

    #[test]
    fn every_tiktok_form_maps_to_one_ref() {
        let forms = [
            format!("https://www.tiktok.com/@scout2015/video/{ID}"),
            format!("https://www.tiktok.com/@scout2015/video/{ID}?is_from_webapp=1&sender_device=pc&_r=1&_t=ZT-8"),
            format!("https://www.tiktok.com/@/video/{ID}"),
            format!("https://www.tiktok.com/@_/video/{ID}/"),
            format!("https://www.tiktok.com/@some.user/photo/{ID}?lang=en"),
            format!("https://www.tiktok.com/share/video/{ID}"),
            format!("https://www.tiktokv.com/share/video/{ID}/"),
            format!("https://www.tiktok.com/embed/{ID}"),
            format!("https://www.tiktok.com/embed/v2/{ID}"),
            format!("https://m.tiktok.com/v/{ID}.html"),
            format!("http://tiktok.com/@x/video/{ID}#comments"),
            format!("www.tiktok.com/@x/video/{ID}"),
            format!("  HTTPS://WWW.TIKTOK.COM/@x/video/{ID}  "),
        ];
        for f in forms {
            assert_eq!(post(&f).to_string(), format!("tiktok:{ID}"), "{f}");
        }
    }

    #[test]
    fn short_links_are_recognised() {
        let cases = [
            ("https://vm.tiktok.com/ZMhvqKXyz/", ShortHost::Vm, "/ZMhvqKXyz/"),
            ("https://vt.tiktok.com/ZSabc123/?_r=1", ShortHost::Vt, "/ZSabc123/"),
            ("https://www.tiktok.com/t/ZTRabcd/", ShortHost::Web, "/t/ZTRabcd/"),
        ];
        for (input, host, path) in cases {
            match parse_url(input) {
                Ok(ParsedUrl::ShortLink(l)) => {
                    assert_eq!(l.host, host);
                    assert_eq!(l.path(), path);
                }
                other => panic!("{input}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_youtube_form_maps_to_one_ref() {
        for f in [
            "https://www.youtube.com/shorts/BGQWPY4IigY",
            "https://youtube.com/shorts/BGQWPY4IigY?feature=share",
            "https://m.youtube.com/shorts/BGQWPY4IigY",
            "https://youtu.be/BGQWPY4IigY?si=abc",
            "https://www.youtube.com/watch?v=BGQWPY4IigY&t=3s",
            "https://m.youtube.com/watch?feature=share&v=BGQWPY4IigY",
        ] {
            assert_eq!(post(f).to_string(), "youtube:BGQWPY4IigY", "{f}");
        }
    }

    #[test]
    fn every_instagram_form_maps_to_one_ref() {
        for f in [
            "https://www.instagram.com/reel/CKZ7-7Ghk2j/",
            "https://www.instagram.com/reels/CKZ7-7Ghk2j",
            "https://instagram.com/p/CKZ7-7Ghk2j/?igsh=MWQ1ZGUxMzBkMA==",
            "https://m.instagram.com/tv/CKZ7-7Ghk2j/",
            "https://www.instagram.com/brand.official/reel/CKZ7-7Ghk2j/",
            "instagr.am/p/CKZ7-7Ghk2j",
        ] {
            assert_eq!(post(f).to_string(), "instagram:CKZ7-7Ghk2j", "{f}");
        }
        match parse_url("https://www.instagram.com/share/reel/BAHwX1abc/") {
            Ok(ParsedUrl::ShortLink(l)) => {
                assert_eq!((l.host, l.path()), (ShortHost::InstagramShare, "/share/reel/BAHwX1abc/".to_owned()));
            }
            other => panic!("{other:?}"),
        }
        let r: PostRef = "instagram:CKZ7-7Ghk2j".parse().expect("valid ref");
        assert_eq!(r.canonical_url(), "https://www.instagram.com/reel/CKZ7-7Ghk2j/");
        assert!(format!("instagram:CKZ7-7Ghk2j{}", "x".repeat(28)).parse::<PostRef>().is_err());
    }

    #[test]
    fn errors_name_what_was_wrong() {
        let detail = |s: &str| parse_url(s).expect_err(s).to_string();
        assert!(detail("").contains("The link is empty"));
        assert!(detail("http://").contains("is not a web address"));
        assert!(detail("just some words").contains("is not a web address"));
        assert!(detail("tiktok").contains("is not a web address"));
        assert!(detail("ftp://www.tiktok.com/@x/video/1").contains("`ftp:` are not supported"));
        // A person's words, not the parser's, and a sentence: capital first, what to do next.
        let words = detail("hello there");
        assert!(!words.contains("international") && words.contains("paste the post's link"), "{words}");
        assert!(detail("https://www.facebook.com/reel/abc").contains("Unsupported platform"));
        assert!(detail("https://www.instagram.com/brand/").contains("Not a post URL"));
        assert!(detail("https://www.instagram.com/stories/brand/123/").contains("Not a post URL"));
        assert!(detail("https://www.tiktok.com/@scout2015").contains("Not a post URL"));
        assert!(detail("https://www.tiktok.com/@x/video/abc").contains("Not a post URL"));
        assert!(detail("https://www.tiktok.com/@x/video/0").contains("Not a post URL"));
        assert!(detail("https://www.tiktok.com/@x/video/99999999999999999999").contains("Not a post URL"));
        assert!(detail("https://www.youtube.com/shorts/short").contains("Not a post URL"));
        assert!(detail("https://www.youtube.com/watch?x=1").contains("Not a post URL"));
        assert!(detail("https://vm.tiktok.com/").contains("Not a post URL"));
        for s in ["", "https://x.y/z"] {
            assert_eq!(parse_url(s).expect_err(s).code().as_str(), "validation_error");
        }
    }

    #[test]
    fn refs_parse_and_print() {
        let r: PostRef = "tiktok:123".parse().expect("valid ref");
        assert_eq!(r, PostRef::tiktok(123));
        let y: PostRef = "youtube:BGQWPY4IigY".parse().expect("valid ref");
        assert_eq!(y.to_string(), "youtube:BGQWPY4IigY");
        for bad in ["tiktok:", "tiktok:x1", "youtube:short", "vimeo:1", "123"] {
            assert!(bad.parse::<PostRef>().is_err(), "{bad}");
        }
        assert_eq!(serde_json::to_string(&r).expect("serialise"), "\"tiktok:123\"");
    }

    proptest! {
        #[test]
        fn parser_never_panics(s in "\\PC{0,200}") {
            let _ = parse_url(&s);
            let _ = s.parse::<PostRef>();
        }

        #[test]
        fn parser_never_panics_on_url_like_input(
            host in prop::sample::select(vec!["www.tiktok.com", "vm.tiktok.com", "m.tiktok.com", "youtu.be", "www.youtube.com", "tiktokv.com"]),
            path in "[/@a-zA-Z0-9._?=&%#-]{0,80}",
        ) {
            let _ = parse_url(&format!("https://{host}/{path}"));
        }

        #[test]
        fn tiktok_canonical_forms_round_trip(id in 1u64.., handle in "[a-z0-9._]{0,24}", photo in any::<bool>(), tracking in "[a-z_]{1,8}=[a-zA-Z0-9]{0,8}") {
            let kind = if photo { "photo" } else { "video" };
            let r = post(&format!("https://www.tiktok.com/@{handle}/{kind}/{id}?{tracking}"));
            prop_assert_eq!(&r, &PostRef::tiktok(id));
            prop_assert_eq!(post(&r.canonical_url()), r.clone());
            prop_assert_eq!(r.to_string().parse::<PostRef>().ok(), Some(r));
        }

        #[test]
        fn youtube_canonical_forms_round_trip(id in "[0-9A-Za-z_-]{11}") {
            let r = post(&format!("https://youtu.be/{id}"));
            prop_assert_eq!(&r.id, &id);
            prop_assert_eq!(post(&r.canonical_url()), r.clone());
            prop_assert_eq!(post(&format!("https://www.youtube.com/watch?v={id}")), r.clone());
            prop_assert_eq!(r.to_string().parse::<PostRef>().ok(), Some(r));
        }
    }
}
