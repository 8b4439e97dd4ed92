//! Comment texts as tokens: words (case-folded, with an accent-free form for lookups of
//! texts typed without accents), emoji, @mentions, #hashtags, numbers and links.

use cova_domain::text::normalize;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;
use unicode_segmentation::UnicodeSegmentation;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Word,
    Emoji,
    Mention,
    Hashtag,
    Number,
    Link,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    /// NFKC + case-folded (for a hashtag: without `#`).
    pub norm: String,
    /// `norm` without accents: `increible` for `increíble`.
    pub plain: String,
    /// Written in capitals (two letters or more), which strengthens a sentiment word.
    pub caps: bool,
    /// Index of the clause (clauses end at `.`, `!`, `?`, `,` and `;`).
    pub clause: usize,
}

/// Top-level domains that make a bare `name.tld` a link.
const LINK_TLDS: &[&str] = &[
    "com", "net", "org", "ly", "io", "me", "co", "xyz", "shop", "site", "link", "info", "biz", "store", "online",
    "app", "gg", "to", "id", "br", "es", "de", "fr", "pt", "click", "top", "vip", "club",
];

pub fn is_link(chunk: &str) -> bool {
    let lower = chunk.to_ascii_lowercase();
    if lower.contains("http://") || lower.contains("https://") || lower.starts_with("www.") {
        return true;
    }
    // `shop.example.com/x`, `bit.ly/abc`: a dotted name ending in a known TLD (before a path).
    let host = lower.trim_matches(|c: char| !c.is_alphanumeric()).split('/').next().unwrap_or_default();
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() >= 2
        && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && parts.last().is_some_and(|tld| LINK_TLDS.contains(tld))
        && parts[0].chars().any(|c| c.is_ascii_alphabetic())
}

pub fn is_emoji(c: char) -> bool {
    matches!(c as u32,
        0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0x2300..=0x23FF | 0x2190..=0x21FF
        | 0x3030 | 0x303D | 0x3297 | 0x3299 | 0x00A9 | 0x00AE | 0x203C | 0x2049 | 0x2122 | 0x2139)
}

/// Joiners and modifiers that belong to an emoji without being one.
fn is_emoji_part(c: char) -> bool {
    matches!(c as u32, 0xFE0F | 0xFE0E | 0x200D | 0x20E3 | 0x1F3FB..=0x1F3FF | 0xE0020..=0xE007F)
}

pub fn deaccent(s: &str) -> String {
    s.nfd().filter(|c| !is_combining_mark(*c)).nfc().collect()
}

/// Variants of a word with letter runs of three or more shortened (`goooood` → `good`, `god`).
pub fn squeezed(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let has_run = chars.windows(3).any(|w| w[0] == w[1] && w[1] == w[2]);
    if !has_run {
        return Vec::new();
    }
    let squeeze = |keep: usize| {
        let mut out = String::new();
        let mut run = 0;
        let mut last = None;
        for &c in &chars {
            run = if Some(c) == last { run + 1 } else { 1 };
            last = Some(c);
            if run <= keep {
                out.push(c);
            }
        }
        out
    };
    vec![squeeze(2), squeeze(1)]
}

/// True when the text has letters or digits no emoji: emoji-only comments carry no words.
pub fn emoji_only(text: &str) -> bool {
    let mut any = false;
    for c in text.chars() {
        if c.is_whitespace() || is_emoji_part(c) {
            continue;
        }
        if is_emoji(c) {
            any = true;
        } else if c.is_alphanumeric() {
            return false;
        }
    }
    any
}

pub fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut clause = 0;
    for chunk in text.split_whitespace() {
        let ends_clause = chunk.ends_with(['.', '!', '?', ',', ';', '。', '！', '？', '¡', '¿']);
        if is_link(chunk) {
            tokens.push(Token {
                kind: Kind::Link,
                norm: chunk.to_owned(),
                plain: chunk.to_owned(),
                caps: false,
                clause,
            });
        } else if let Some(rest) = chunk.strip_prefix('@').filter(|r| !r.is_empty()) {
            let norm = normalize(rest.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '.'));
            tokens.push(Token { kind: Kind::Mention, plain: norm.clone(), norm, caps: false, clause });
        } else {
            let mut hashtag = false;
            let segments: Vec<&str> = chunk.split_word_bounds().collect();
            for (i, segment) in segments.iter().copied().enumerate() {
                if segment == "#" {
                    hashtag = true;
                    continue;
                }
                let punctuation =
                    segment.chars().any(|c| matches!(c, '.' | '!' | '?' | ',' | ';' | '。' | '！' | '？'));
                if punctuation && !segment.chars().any(char::is_alphanumeric) {
                    // Inside a chunk (`good,but`); a chunk's last mark is counted below.
                    if i + 1 < segments.len() {
                        clause += 1;
                    }
                    continue;
                }
                let first = segment.chars().next().unwrap_or(' ');
                let kind = if is_emoji(first) {
                    Kind::Emoji
                } else if segment.chars().all(|c| c.is_numeric() || c == '.' || c == ',') && first.is_numeric() {
                    Kind::Number
                } else if segment.chars().any(char::is_alphabetic) {
                    if std::mem::take(&mut hashtag) { Kind::Hashtag } else { Kind::Word }
                } else {
                    continue;
                };
                let letters: Vec<char> = segment.chars().filter(|c| c.is_alphabetic()).collect();
                let caps = letters.len() >= 2 && letters.iter().all(|c| c.is_uppercase());
                let norm = if kind == Kind::Emoji {
                    segment.chars().filter(|c| !is_emoji_part(*c)).collect()
                } else {
                    normalize(segment)
                };
                tokens.push(Token { kind, plain: deaccent(&norm), norm, caps, clause });
            }
        }
        if ends_clause {
            clause += 1;
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, String)> {
        tokenize(text).into_iter().map(|t| (t.kind, t.norm)).collect()
    }

    #[test]
    fn words_emoji_mentions_links() {
        assert_eq!(
            kinds("LOVE it😍😍 @Ana_B check www.shop.com #GlowUp 20€"),
            vec![
                (Kind::Word, "love".into()),
                (Kind::Word, "it".into()),
                (Kind::Emoji, "😍".into()),
                (Kind::Emoji, "😍".into()),
                (Kind::Mention, "ana_b".into()),
                (Kind::Word, "check".into()),
                (Kind::Link, "www.shop.com".into()),
                (Kind::Hashtag, "glowup".into()),
                (Kind::Number, "20".into()),
            ]
        );
        assert!(tokenize("LOVE it")[0].caps);
        assert_eq!(tokenize("increíble")[0].plain, "increible");
        assert_eq!(kinds("❤️")[0], (Kind::Emoji, "❤".into()));
    }

    #[test]
    fn clauses_links_and_runs() {
        let t = tokenize("good, but bad. ok");
        assert_eq!(t.iter().map(|t| t.clause).collect::<Vec<_>>(), vec![0, 1, 1, 2]);
        assert!(is_link("bit.ly/abc") && is_link("https://x.y") && !is_link("e.g.") && !is_link("3.5"));
        assert_eq!(squeezed("goooood"), vec!["good".to_owned(), "god".to_owned()]);
        assert!(squeezed("good").is_empty());
        assert!(emoji_only("😍 🔥🔥 ❤️") && !emoji_only("ok 😍") && !emoji_only("..."));
    }
}
