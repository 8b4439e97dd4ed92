//! Watch phrases found in comments: after NFKC + case folding and without accents, word for
//! word, each word compared by its stem in the comment's language (`where to buy` finds
//! "where to buy", "Where to BUY" and "where to buying"); scripts without stemming (or
//! emoji) still match word for word.

use crate::lexicon::Lang;
use crate::tokens::{Kind, Token, tokenize};
use crate::{Comment, PhraseMatch};

/// The comparable form of a word in `lang`.
pub(crate) fn stem(lang: Option<Lang>, plain: &str) -> String {
    match lang.and_then(Lang::stemmer) {
        Some(stemmer) => stemmer.stem(plain).into_owned(),
        None => plain.to_owned(),
    }
}

fn keys(tokens: &[Token], lang: Option<Lang>) -> Vec<String> {
    tokens
        .iter()
        .filter(|t| matches!(t.kind, Kind::Word | Kind::Emoji | Kind::Hashtag | Kind::Number | Kind::Mention))
        .map(|t| stem(lang, &t.plain))
        .collect()
}

/// Matches of each phrase (in the order given) in `comments`, whose languages are `langs`.
pub fn find(phrases: &[String], comments: &[Comment], langs: &[Option<Lang>]) -> Vec<PhraseMatch> {
    let tokenized: Vec<Vec<Token>> = phrases.iter().map(|p| tokenize(p)).collect();
    let mut matches: Vec<PhraseMatch> =
        phrases.iter().map(|p| PhraseMatch { phrase: p.clone(), count: 0, comment_ids: Vec::new() }).collect();
    if phrases.is_empty() {
        return matches;
    }
    // Phrase keys per language, computed once.
    let mut per_lang: Vec<(Option<Lang>, Vec<Vec<String>>)> = Vec::new();
    for (comment, lang) in comments.iter().zip(langs.iter().copied().chain(std::iter::repeat(None))) {
        let index = match per_lang.iter().position(|(l, _)| *l == lang) {
            Some(i) => i,
            None => {
                per_lang.push((lang, tokenized.iter().map(|t| keys(t, lang)).collect()));
                per_lang.len() - 1
            }
        };
        let text = keys(&tokenize(&comment.text), lang);
        for (m, phrase) in matches.iter_mut().zip(&per_lang[index].1) {
            if !phrase.is_empty() && text.windows(phrase.len()).any(|w| w == phrase.as_slice()) {
                m.count += 1;
                m.comment_ids.push(comment.id.clone());
            }
        }
    }
    matches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(id: &str, text: &str) -> Comment {
        Comment { id: id.into(), text: text.into(), ..Comment::default() }
    }

    #[test]
    fn word_for_word_by_stem_without_case_or_accents() {
        let comments = [
            comment("1", "Where to BUY this??"),
            comment("2", "where to buying lol"),
            comment("3", "somewhere to buy"),
            comment("4", "¿Dónde lo compro?"),
            comment("5", "donde lo compraste"),
            comment("6", "🔥🔥 fire"),
        ];
        let langs = [Some(Lang::En), Some(Lang::En), Some(Lang::En), Some(Lang::Es), Some(Lang::Es), None];
        let found = find(&["where to buy".into(), "dónde lo compro".into(), "🔥".into()], &comments, &langs);
        assert_eq!(found[0].comment_ids, ["1", "2"], "stems match, other words do not");
        assert_eq!(found[1].comment_ids, ["4", "5"], "accents and inflection");
        assert_eq!((found[2].count, found[2].comment_ids.as_slice()), (1, ["6".to_owned()].as_slice()));
        assert!(find(&[], &comments, &langs).is_empty());
    }
}
