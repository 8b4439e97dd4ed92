//! Matching words in comment texts the way people expect: case-insensitive after Unicode
//! normalisation (NFKC, then full case folding, so `ＳＡＬＥ`, `Sale` and `sale` are one word
//! and `STRASSE` finds `straße`), and only on word boundaries (UAX #29), for any script: `sale`
//! is not found in `wholesale`, while each CJK ideograph and each emoji is a word of its own.
//! All terms are found in one pass over the text (Aho-Corasick), whatever their number.

use aho_corasick::{AhoCorasick, MatchKind};
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// The comparable form of a text: NFKC, case-folded, whitespace runs as one space, trimmed.
pub fn normalize(text: &str) -> String {
    let folded = caseless::default_case_fold_str(&text.nfkc().collect::<String>());
    // Folding can undo NFKC in rare cases; normalise once more so both sides agree.
    let folded: String = folded.nfkc().collect();
    folded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A set of terms (keywords, watch phrases) to find in texts.
pub struct Matcher {
    /// The terms as given, by index.
    terms: Vec<String>,
    /// The term of each pattern of the automaton.
    term_of: Vec<usize>,
    automaton: Option<AhoCorasick>,
}

impl Matcher {
    /// Builds the matcher; terms that normalise to nothing are ignored.
    pub fn new<S: AsRef<str>>(terms: &[S]) -> Self {
        let terms: Vec<String> = terms.iter().map(|t| t.as_ref().to_owned()).collect();
        let (term_of, patterns): (Vec<usize>, Vec<String>) =
            terms.iter().map(|t| normalize(t)).enumerate().filter(|(_, p)| !p.is_empty()).unzip();
        let automaton = (!patterns.is_empty())
            .then(|| AhoCorasick::builder().match_kind(MatchKind::Standard).build(&patterns).ok())
            .flatten();
        Self { terms, term_of, automaton }
    }

    /// The terms found in `text` on word boundaries, each once, in the order given.
    pub fn find<'a>(&'a self, text: &str) -> Vec<&'a str> {
        let Some(automaton) = &self.automaton else { return Vec::new() };
        let haystack = normalize(text);
        let mut bounds: Vec<usize> = haystack.split_word_bound_indices().map(|(i, _)| i).collect();
        bounds.push(haystack.len());
        let mut found = vec![false; self.terms.len()];
        for m in automaton.find_overlapping_iter(&haystack) {
            if bounds.binary_search(&m.start()).is_ok() && bounds.binary_search(&m.end()).is_ok() {
                found[self.term_of[m.pattern().as_usize()]] = true;
            }
        }
        self.terms.iter().zip(found).filter(|(_, f)| *f).map(|(t, _)| t.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_width_and_folding() {
        assert_eq!(normalize("  ＳＡＬＥ   Now "), "sale now");
        assert_eq!(normalize("STRASSE"), normalize("straße"));
        let m = Matcher::new(&["sale", "Straße", "where to buy"]);
        assert_eq!(m.find("Big SALE today"), ["sale"]);
        assert_eq!(m.find("wholesale prices"), Vec::<&str>::new(), "not inside another word");
        assert_eq!(m.find("Die STRASSE ist gesperrt"), ["Straße"]);
        assert_eq!(m.find("Where  to   BUY this?"), ["where to buy"]);
        assert_eq!(m.find("sale, sale, sale!"), ["sale"], "each term once per text");
    }

    #[test]
    fn any_script_emoji_and_cjk() {
        let m = Matcher::new(&["🔥", "价格", "café", "цена"]);
        assert_eq!(m.find("这个价格太贵了"), ["价格"], "CJK: each ideograph is a word");
        assert_eq!(m.find("so good🔥🔥"), ["🔥"]);
        assert_eq!(m.find("CAFÉ au lait"), ["café"]);
        assert_eq!(m.find("Какая цена?"), ["цена"]);
        assert_eq!(m.find("ценами"), Vec::<&str>::new());
        assert!(Matcher::new(&["   "]).find("anything").is_empty());
    }
}
