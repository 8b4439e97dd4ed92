//! The word lists of the offline analyzer (`lexicon/*.txt`, compiled into the binary) and the
//! languages it knows well: sentiment words with weights, negators, intensifiers, diminishers,
//! contrast words, question words, stop words and promotion patterns per language, plus
//! emoji weights for every language.

use crate::tokens::deaccent;
use cova_domain::text::normalize;
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

/// The languages with word lists (sentiment, stop words, stemming where Snowball has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    En,
    Es,
    Pt,
    De,
    Fr,
    Id,
}

impl Lang {
    pub const ALL: [Lang; 6] = [Lang::En, Lang::Es, Lang::Pt, Lang::De, Lang::Fr, Lang::Id];

    pub const fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Es => "es",
            Lang::Pt => "pt",
            Lang::De => "de",
            Lang::Fr => "fr",
            Lang::Id => "id",
        }
    }

    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.code() == code)
    }

    fn source(self) -> &'static str {
        match self {
            Lang::En => include_str!("../lexicon/en.txt"),
            Lang::Es => include_str!("../lexicon/es.txt"),
            Lang::Pt => include_str!("../lexicon/pt.txt"),
            Lang::De => include_str!("../lexicon/de.txt"),
            Lang::Fr => include_str!("../lexicon/fr.txt"),
            Lang::Id => include_str!("../lexicon/id.txt"),
        }
    }

    pub fn lexicon(self) -> &'static Lexicon {
        &LEXICONS[self as usize]
    }

    /// The Snowball stemmer of the language (Indonesian has none: words stay as written).
    pub fn stemmer(self) -> Option<&'static rust_stemmers::Stemmer> {
        STEMMERS[self as usize].as_ref()
    }
}

#[derive(Debug, Default)]
pub struct Lexicon {
    /// Sentiment weight of a word or a phrase (negative for negative words).
    pub sentiment: HashMap<String, f32>,
    /// Most words in a sentiment phrase, so lookups know how far to look ahead.
    pub longest_phrase: usize,
    pub negators: HashSet<String>,
    pub intensifiers: HashSet<String>,
    pub diminishers: HashSet<String>,
    pub contrast: HashSet<String>,
    /// Words and phrases that open a question.
    pub question_words: HashSet<String>,
    pub stopwords: HashSet<String>,
    /// Lower-case patterns of promotion and scams.
    pub promo: Vec<String>,
}

impl Lexicon {
    fn parse(source: &str) -> Self {
        let mut lexicon = Lexicon::default();
        // Accent-free forms that differ from their entry (section, form, weight): added once
        // every stop word is known, unless they are one ("schön" → "schon", "cómo" → "como").
        let mut derived: Vec<(String, String, f32)> = Vec::new();
        let mut section = String::new();
        for line in source.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.to_owned();
                continue;
            }
            let (entry, weight) = match line.split_once('\t') {
                Some((e, w)) => (e.trim(), w.trim().parse::<f32>().unwrap_or(1.0)),
                None => (line, 1.0),
            };
            let entry = normalize(entry);
            if entry.is_empty() {
                continue;
            }
            let weight = if section == "negative" { -weight } else { weight };
            let plain = deaccent(&entry);
            if plain != entry && section != "promo" && section != "stopwords" {
                derived.push((section.clone(), plain, weight));
            }
            lexicon.add(&section, entry, weight);
        }
        for (section, plain, weight) in derived {
            if !lexicon.stopwords.contains(&plain) {
                lexicon.add(&section, plain, weight);
            }
        }
        lexicon
    }

    fn add(&mut self, section: &str, entry: String, weight: f32) {
        match section {
            "positive" | "negative" => {
                self.longest_phrase = self.longest_phrase.max(entry.split(' ').count());
                self.sentiment.entry(entry).or_insert(weight);
            }
            "negators" => _ = self.negators.insert(entry),
            "intensifiers" => _ = self.intensifiers.insert(entry),
            "diminishers" => _ = self.diminishers.insert(entry),
            "contrast" => _ = self.contrast.insert(entry),
            "question_words" => _ = self.question_words.insert(entry),
            "stopwords" => _ = self.stopwords.insert(entry),
            "promo" => self.promo.push(entry),
            _ => {}
        }
    }

    /// True for a word that carries no topic: a stop word, or a sentiment-neutral helper.
    pub fn is_function_word(&self, word: &str) -> bool {
        self.stopwords.contains(word)
            || self.negators.contains(word)
            || self.intensifiers.contains(word)
            || self.diminishers.contains(word)
            || self.contrast.contains(word)
    }
}

static LEXICONS: LazyLock<Vec<Lexicon>> =
    LazyLock::new(|| Lang::ALL.iter().map(|l| Lexicon::parse(l.source())).collect());

static STEMMERS: LazyLock<Vec<Option<rust_stemmers::Stemmer>>> = LazyLock::new(|| {
    use rust_stemmers::{Algorithm, Stemmer};
    Lang::ALL
        .iter()
        .map(|l| match l {
            Lang::En => Some(Stemmer::create(Algorithm::English)),
            Lang::Es => Some(Stemmer::create(Algorithm::Spanish)),
            Lang::Pt => Some(Stemmer::create(Algorithm::Portuguese)),
            Lang::De => Some(Stemmer::create(Algorithm::German)),
            Lang::Fr => Some(Stemmer::create(Algorithm::French)),
            Lang::Id => None,
        })
        .collect()
});

/// Emoji sentiment weights (the same in every language), without variation selectors.
pub static EMOJI: LazyLock<HashMap<String, f32>> = LazyLock::new(|| {
    let parsed = Lexicon::parse(include_str!("../lexicon/emoji.txt"));
    parsed
        .sentiment
        .into_iter()
        .map(|(k, v)| (k.chars().filter(|c| !matches!(*c as u32, 0xFE0F | 0xFE0E)).collect(), v))
        .collect()
});

/// Every language's promotion patterns, one automaton.
pub static PROMO: LazyLock<aho_corasick::AhoCorasick> = LazyLock::new(|| {
    let mut patterns: Vec<String> = Lang::ALL.iter().flat_map(|l| l.lexicon().promo.iter().cloned()).collect();
    patterns.sort();
    patterns.dedup();
    aho_corasick::AhoCorasick::new(&patterns).unwrap_or_else(|_| {
        aho_corasick::AhoCorasick::new(Vec::<String>::new())
            .unwrap_or_else(|_| unreachable!("an empty automaton builds"))
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_has_its_lists() {
        for lang in Lang::ALL {
            let l = lang.lexicon();
            let positive = l.sentiment.values().filter(|w| **w > 0.0).count();
            let negative = l.sentiment.values().filter(|w| **w < 0.0).count();
            assert!(positive >= 100 && negative >= 100, "{lang:?}: {positive} positive, {negative} negative");
            assert!(l.negators.len() >= 5 && l.stopwords.len() >= 100 && l.question_words.len() >= 10, "{lang:?}");
            assert!(!l.promo.is_empty(), "{lang:?}");
        }
        assert!(EMOJI.get("❤").is_some_and(|w| *w > 0.0), "hearts without the variation selector");
        assert!(EMOJI.len() >= 40);
    }

    #[test]
    fn entries_are_found_without_accents() {
        let es = Lang::Es.lexicon();
        assert_eq!(es.sentiment.get("increible"), es.sentiment.get("increíble"));
        assert!(Lang::from_code("pt").is_some_and(|l| l.stemmer().is_some()) && Lang::Id.stemmer().is_none());
    }
}
