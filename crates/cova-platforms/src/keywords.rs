//! Salient words of a post description.

use crate::model::DescriptionKeywords;
use std::collections::HashMap;

const MAX_WORDS: usize = 12;

/// Function words of the languages seen most in descriptions; dropping them leaves the topic words.
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "you",
    "your",
    "are",
    "was",
    "with",
    "this",
    "that",
    "from",
    "have",
    "has",
    "not",
    "but",
    "all",
    "can",
    "out",
    "our",
    "who",
    "what",
    "when",
    "how",
    "why",
    "its",
    "it's",
    "too",
    "just",
    "get",
    "got",
    "into",
    "about",
    "they",
    "them",
    "their",
    "there",
    "here",
    "been",
    "will",
    "would",
    "should",
    "could",
    "than",
    "then",
    "more",
    "most",
    "very",
    "some",
    "any",
    "also",
    "only",
    "over",
    "like",
    "one",
    "his",
    "her",
    "she",
    "him",
    "had",
    "did",
    "does",
    "don't",
    "i'm",
    "we're",
    "you're",
    "let",
    "lets",
    "let's",
    "off",
    "yet",
    "now",
    "new",
    "via",
    "per",
    "los",
    "las",
    "del",
    "que",
    "por",
    "para",
    "una",
    "con",
    "der",
    "die",
    "das",
    "und",
    "ein",
    "eine",
    "mit",
    "les",
    "des",
    "une",
    "est",
    "pour",
    "dans",
    "sur",
    "pas",
    "com",
    "uma",
    "não",
    "fyp",
    "foryou",
    "foryoupage",
    "viral",
];

/// Hashtags, mentions and the salient words (lowercase, stopwords and words under 3 letters dropped,
/// most frequent first, ties in order of appearance).
pub fn description_keywords(desc: &str) -> DescriptionKeywords {
    let mut out = DescriptionKeywords::default();
    let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
    for (pos, token) in desc.split_whitespace().enumerate() {
        if let Some(tag) = token.strip_prefix('#') {
            for part in tag.split('#') {
                let name = trim_word(part).to_lowercase();
                if !name.is_empty() && !out.hashtags.contains(&name) {
                    out.hashtags.push(name);
                }
            }
            continue;
        }
        if let Some(user) = token.strip_prefix('@') {
            let name = user.trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'));
            let name = name.trim_end_matches('.').to_string();
            if !name.is_empty() && !out.mentions.contains(&name) {
                out.mentions.push(name);
            }
            continue;
        }
        if token.contains("://") {
            continue;
        }
        let word = trim_word(token).to_lowercase();
        if word.chars().count() < 3 || STOPWORDS.contains(&word.as_str()) || word.chars().all(|c| c.is_numeric()) {
            continue;
        }
        let entry = counts.entry(word).or_insert((0, pos));
        entry.0 += 1;
    }
    let mut words: Vec<(String, (usize, usize))> = counts.into_iter().collect();
    words.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    out.words = words.into_iter().take(MAX_WORDS).map(|(w, _)| w).collect();
    out
}

fn trim_word(s: &str) -> &str {
    s.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\''))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_tags_mentions_and_ranks_words() {
        let k = description_keywords(
            "Serum review: the serum that fixed my skin! Price in bio @glow.lab #skincare #GlowUp#fyp serum, skin. \
             https://example.com/x",
        );
        assert_eq!(k.hashtags, vec!["skincare", "glowup", "fyp"]);
        assert_eq!(k.mentions, vec!["glow.lab"]);
        assert_eq!(k.words[0], "serum");
        assert_eq!(k.words[1], "skin");
        assert!(k.words.contains(&"price".to_string()));
        assert!(!k.words.iter().any(|w| w == "the" || w == "my" || w == "in" || w.contains("example")));
    }

    #[test]
    fn empty_description() {
        assert_eq!(description_keywords(""), DescriptionKeywords::default());
    }
}
