//! Full-text search terms, the same for both search engines (PostgreSQL's text search and
//! SQLite's FTS5): a comment's words are indexed as terms (case-folded, without accents,
//! stemmed in the comment's language; an emoji as its code point; a hashtag or mention as its
//! word), and a query is read into the terms each of its words can be in any language cova
//! stems. Each engine only ever sees plain alphanumeric terms separated by spaces, so both find
//! the same comments and no query can be a syntax error to either.

use crate::lexicon::Lang;
use crate::phrases::stem;
use crate::tokens::{Kind, Token, tokenize};
use std::collections::BTreeSet;

/// The longest query, in characters (after trimming).
pub const MAX_QUERY_CHARS: usize = 200;
/// The most words and quoted phrases in a query.
pub const MAX_QUERY_PARTS: usize = 10;

/// What a query cannot be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    Empty,
    TooLong,
    NoWords,
    TooManyParts,
}

impl QueryError {
    /// The reason, in words, for the integrator.
    pub fn detail(&self) -> String {
        match self {
            QueryError::Empty => "`q` is empty: give the words to search for.".into(),
            QueryError::TooLong => format!("`q` is longer than {MAX_QUERY_CHARS} characters: search for fewer words."),
            QueryError::NoWords => {
                "`q` has no word, number, emoji or hashtag to search for (punctuation alone is not searched).".into()
            }
            QueryError::TooManyParts => {
                format!("`q` has more than {MAX_QUERY_PARTS} words or quoted phrases: search for fewer.")
            }
        }
    }
}

/// A query: every part must be in a comment; a part is one word or a quoted phrase, found in
/// any of its forms (each form a sequence of terms, next to each other and in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    parts: Vec<Vec<Vec<String>>>,
}

/// The language a stored comment's words are stemmed in: the one the platform gave, else the
/// one the offline analyzer detects.
fn lang_of(text: &str, tokens: &[Token], language: Option<&str>) -> Option<Lang> {
    match language.filter(|l| !l.is_empty() && *l != "und") {
        Some(code) => Lang::from_code(code),
        None => crate::offline::detect_lang(text, tokens),
    }
}

/// The term of one token in `lang`, or `None` for what is not searched (links, punctuation).
fn term(token: &Token, lang: Option<Lang>) -> Option<String> {
    let term = match token.kind {
        Kind::Link => return None,
        // By code points (skin tones, variation selectors and joiners left out), so that 👍🏽
        // is found by 👍.
        Kind::Emoji => token
            .norm
            .chars()
            .filter(|c| !matches!(*c as u32, 0xFE00..=0xFE0F | 0x200D | 0x1F3FB..=0x1F3FF))
            .map(|c| format!("e{:x}", c as u32))
            .next()?,
        Kind::Word | Kind::Hashtag | Kind::Mention | Kind::Number => match lang {
            Some(Lang::Id) => indonesian(&token.plain),
            _ => stem(lang, &token.plain),
        }
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect(),
    };
    (!term.is_empty()).then_some(term)
}

/// Indonesian word forms for search: the particle (`-lah`, `-kah`, `-tah`, `-pun`), then the
/// possessive (`-ku`, `-mu`, `-nya`) come off a word that stays longer than four letters (the
/// first two steps of Tala's stemmer; its affix steps confuse more words than they join).
fn indonesian(word: &str) -> String {
    let mut word = word;
    for set in [&["lah", "kah", "tah", "pun"][..], &["nya", "ku", "mu"][..]] {
        if let Some(base) = set.iter().find_map(|s| word.strip_suffix(s).filter(|b| b.chars().count() > 4)) {
            word = base;
        }
    }
    word.to_owned()
}

/// What a comment is indexed as: its terms in order, separated by spaces.
pub fn index_terms(text: &str, language: Option<&str>) -> String {
    let tokens = tokenize(text);
    let lang = lang_of(text, &tokens, language);
    tokens.iter().filter_map(|t| term(t, lang)).collect::<Vec<_>>().join(" ")
}

/// The forms of a sequence of tokens: their terms stemmed in each language cova stems, and
/// unstemmed (for comments in other languages).
fn forms(tokens: &[Token]) -> Vec<Vec<String>> {
    let mut forms: BTreeSet<Vec<String>> = BTreeSet::new();
    for lang in Lang::ALL.into_iter().map(Some).chain([None]) {
        let terms: Vec<String> = tokens.iter().filter_map(|t| term(t, lang)).collect();
        if !terms.is_empty() {
            forms.insert(terms);
        }
    }
    forms.into_iter().collect()
}

impl Query {
    /// Reads `q`: double quotes make a phrase (an unclosed quote runs to the end), anything else
    /// is words; punctuation is text, never an operator.
    pub fn parse(q: &str) -> Result<Self, QueryError> {
        let q = q.trim();
        if q.is_empty() {
            return Err(QueryError::Empty);
        }
        if q.chars().count() > MAX_QUERY_CHARS {
            return Err(QueryError::TooLong);
        }
        let mut parts = Vec::new();
        for (i, chunk) in q.split('"').enumerate() {
            let tokens = tokenize(chunk);
            if i % 2 == 1 {
                let phrase = forms(&tokens);
                if !phrase.is_empty() {
                    parts.push(phrase);
                }
            } else {
                parts.extend(tokens.iter().map(|t| forms(std::slice::from_ref(t))).filter(|f| !f.is_empty()));
            }
        }
        parts.dedup();
        match parts.len() {
            0 => Err(QueryError::NoWords),
            n if n > MAX_QUERY_PARTS => Err(QueryError::TooManyParts),
            _ => Ok(Query { parts }),
        }
    }

    /// The query in FTS5's syntax: `("a b" OR "c") AND ("d")`. Terms are alphanumeric, so
    /// quoting them is all the escaping there is.
    pub fn fts5(&self) -> String {
        let part = |forms: &Vec<Vec<String>>| {
            let alternatives: Vec<String> = forms.iter().map(|f| format!("\"{}\"", f.join(" "))).collect();
            format!("({})", alternatives.join(" OR "))
        };
        self.parts.iter().map(part).collect::<Vec<_>>().join(" AND ")
    }

    /// The query in PostgreSQL's `to_tsquery` syntax: `(a <-> b | c) & (d)`, each term quoted.
    pub fn tsquery(&self) -> String {
        let part = |forms: &Vec<Vec<String>>| {
            let alternatives: Vec<String> =
                forms.iter().map(|f| f.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(" <-> ")).collect();
            format!("({})", alternatives.join(" | "))
        };
        self.parts.iter().map(part).collect::<Vec<_>>().join(" & ")
    }

    /// The words of a comment's text that match a term of the query, as the text writes them
    /// (case-folded), each once, in order: what a reader highlights.
    pub fn matches(&self, text: &str, language: Option<&str>) -> Vec<String> {
        let wanted: BTreeSet<&str> = self.parts.iter().flatten().flatten().map(String::as_str).collect();
        let tokens = tokenize(text);
        let lang = lang_of(text, &tokens, language);
        let mut seen = BTreeSet::new();
        tokens
            .iter()
            .filter(|t| term(t, lang).is_some_and(|term| wanted.contains(term.as_str())))
            .map(|t| if t.kind == Kind::Hashtag { format!("#{}", t.norm) } else { t.norm.clone() })
            .filter(|w| seen.insert(w.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a comment is found, by the terms both engines see: every part has a form whose
    /// terms are next to each other, in order, in the comment's terms.
    fn finds(q: &str, text: &str, language: Option<&str>) -> bool {
        let query = Query::parse(q).expect("a query");
        let terms: Vec<String> = index_terms(text, language).split(' ').map(str::to_owned).collect();
        query.parts.iter().all(|forms| forms.iter().any(|f| terms.windows(f.len()).any(|w| w == f.as_slice())))
    }

    #[test]
    fn case_accents_and_word_forms_in_six_languages() {
        assert!(finds("refund", "I want a REFUND now", Some("en")));
        assert!(finds("refunds", "still waiting for my refund", Some("en")));
        assert!(finds("reembolso", "quiero mis reembolsos ya", Some("es")));
        assert!(finds("envio", "el envío tardó muchísimo", Some("es")));
        assert!(finds("entregas", "a entrega atrasou", Some("pt")));
        assert!(finds("Lieferung", "die lieferungen kamen zu spät", Some("de")));
        assert!(finds("livraison", "les livraisons sont lentes", Some("fr")));
        assert!(finds("pengiriman", "pengirimannya cepat banget kak", Some("id")));
        assert!(!finds("refund", "love this colour", Some("en")));
    }

    #[test]
    fn emoji_hashtags_mentions_and_phrases() {
        assert!(finds("🔥", "so good 🔥🔥", None));
        assert!(finds("👍", "ok 👍🏽", None));
        assert!(finds("#sneakers", "new drop #Sneakers", None));
        assert!(finds("sneakers", "new drop #sneakers", None));
        assert!(finds("\"free shipping\"", "Is there free shipping to Canada?", Some("en")));
        assert!(!finds("\"free shipping\"", "shipping is not free", Some("en")));
        assert!(finds("shipping free", "shipping is not free", Some("en")), "words, in any order");
    }

    #[test]
    fn a_language_not_given_is_detected_for_stemming() {
        assert!(finds("reembolso", "quiero mis reembolsos, es una estafa", None));
    }

    #[test]
    fn operators_and_punctuation_are_text_and_bad_queries_are_told() {
        for q in ["a OR b", "-x", "x*", "(a)", "\"unclosed", "NEAR(a b)", "a:b", "'; DROP TABLE x; --", "^", "''"] {
            if let Ok(query) = Query::parse(q) {
                let fts = query.fts5();
                assert!(fts.chars().filter(|c| *c == '"').count() % 2 == 0, "{q}: {fts}");
                assert!(!query.tsquery().contains(";"), "{q}");
            }
        }
        assert_eq!(Query::parse("   "), Err(QueryError::Empty));
        assert_eq!(Query::parse("!!! ..."), Err(QueryError::NoWords));
        assert_eq!(Query::parse(&"a".repeat(201)), Err(QueryError::TooLong));
        assert_eq!(Query::parse("a b c d e f g h i j k"), Err(QueryError::TooManyParts));
        assert!(Query::parse("a b c d e f g h i j").is_ok());
    }

    #[test]
    fn matches_are_the_words_as_written() {
        let query = Query::parse("refund #sneakers").expect("query");
        assert_eq!(
            query.matches("Refunds? I got a refund for my #Sneakers, refund!", Some("en")),
            ["refunds", "refund", "#sneakers"]
        );
    }

    #[test]
    fn any_text_gives_safe_engine_queries() {
        use rand::{Rng, SeedableRng};
        let alphabet: Vec<char> = "ab \"'()*-:^+~.,;!?#@🔥é\u{0}\\{}[]<>|&".chars().collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(51);
        for _ in 0..5_000 {
            let len = rng.random_range(0..40);
            let q: String = (0..len).map(|_| alphabet[rng.random_range(0..alphabet.len())]).collect();
            if let Ok(query) = Query::parse(&q) {
                for term in query.parts.iter().flatten().flatten() {
                    assert!(!term.is_empty() && term.chars().all(char::is_alphanumeric), "{q:?}: {term:?}");
                }
            }
        }
    }
}
