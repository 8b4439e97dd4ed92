//! The offline analyzer: every rule runs in this process, so results are immediate, free and
//! reproducible, and no comment text leaves cova.

use crate::lexicon::{EMOJI, Lang, PROMO};
use crate::phrases::stem;
use crate::tokens::{Kind, Token, emoji_only, squeezed, tokenize};
use crate::{
    Analysis, AnalyzeError, Analyzer, Comment, CommentLabels, EXAMPLES, Label, MAX_TOPICS, QuestionGroup, Topic,
};
use cova_domain::text::normalize;
use std::collections::HashMap;

/// A comment scoring at least this (or at most its negative) is positive (negative).
const SENTIMENT_THRESHOLD: f32 = 1.5;
/// The same normalised text this often from one author (and long enough) is copy-paste
/// flooding. Different people asking the same thing ("does it ship to Canada?") is not.
const REPEATED: usize = 3;
const REPEATED_MIN_CHARS: usize = 15;
/// Representative comments quoted in the summary.
const QUOTED: usize = 2;

#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

/// One comment, read once.
struct Read {
    tokens: Vec<Token>,
    lang: Option<Lang>,
    labels: CommentLabels,
}

impl Offline {
    pub const MODEL: &'static str = "cova-offline/1";

    pub fn new() -> Self {
        Self
    }

    /// Labels one comment on its own (repeated-text spam needs the others: see `analyze`).
    pub fn label(&self, text: &str) -> CommentLabels {
        read(text, None).labels
    }

    /// Labels many comments on their own, off the async workers: judging a few hundred
    /// comments takes long enough to stall every request a worker serves meanwhile (a spike
    /// check judging a fresh collection once held both workers of a two-core gateway for
    /// 0.6 s, which the database's request bound took for an outage).
    pub async fn label_all(texts: Vec<String>) -> Vec<CommentLabels> {
        off_the_workers(move || texts.iter().map(|t| read(t, None).labels).collect()).await
    }
}

/// Runs CPU-bound analysis on the blocking pool (inline where no runtime can take it: a
/// current-thread runtime's only thread would wait for it anyway).
async fn off_the_workers<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if !multi {
        return work();
    }
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done,
        // Only a panic in the work, or a runtime shutting down, gets here.
        Err(e) => std::panic::resume_unwind(e.try_into_panic().unwrap_or_else(|_| Box::new("the runtime shut down"))),
    }
}

/// Reads one comment; `known` is the sentiment judged of the same text before.
fn read(text: &str, known: Option<Label>) -> Read {
    let tokens = tokenize(text);
    let (language, lang) = detect(text, &tokens);
    let labels = CommentLabels {
        sentiment: known.unwrap_or_else(|| sentiment(text, &tokens, lang)),
        question: is_question(text, &tokens, lang),
        spam: is_spam(text, &tokens),
        language,
    };
    Read { tokens, lang, labels }
}

/// The lexicons to consult for a comment: its language's (with English, which slang borrows
/// from everywhere), or all of them when the language is unknown.
fn lexicons(lang: Option<Lang>) -> Vec<Lang> {
    match lang {
        Some(Lang::En) => vec![Lang::En],
        Some(l) => vec![l, Lang::En],
        None => Lang::ALL.to_vec(),
    }
}

/// ISO 639-1 (or 639-3 when there is none) of the text's language, and our [`Lang`] if it
/// is one. Short comments fool statistical detectors, so when the detector is unsure the
/// language whose function words the text uses most decides.
/// The language cova stems a text in, when it is one of those it knows.
pub(crate) fn detect_lang(text: &str, tokens: &[Token]) -> Option<Lang> {
    detect(text, tokens).1
}

fn detect(text: &str, tokens: &[Token]) -> (String, Option<Lang>) {
    let words: Vec<&Token> = tokens.iter().filter(|t| t.kind == Kind::Word).collect();
    if words.is_empty() {
        return ("und".into(), None);
    }
    let mut votes: Vec<(Lang, usize)> = Lang::ALL
        .iter()
        .map(|l| {
            let lex = l.lexicon();
            let hits = words
                .iter()
                .filter(|w| {
                    lex.stopwords.contains(&w.norm)
                        || lex.question_words.contains(&w.norm)
                        || lex.negators.contains(&w.norm)
                        || lex.sentiment.contains_key(&w.norm)
                })
                .count();
            (*l, hits)
        })
        .collect();
    votes.sort_by_key(|v| std::cmp::Reverse(v.1));
    let lexical = (votes[0].1 > 0 && votes[0].1 > votes[1].1).then_some(votes[0].0);
    let detected = whatlang::detect(text);
    if let Some(info) = &detected {
        let ours = from_whatlang(info.lang());
        if info.is_reliable() || (lexical.is_none() && info.confidence() >= 0.5) {
            return (iso639_1(info.lang()), ours);
        }
        // The detector and the words agree, or the words decide.
        if let Some(l) = lexical {
            return (l.code().into(), Some(l));
        }
        if info.confidence() >= 0.2 {
            return (iso639_1(info.lang()), ours);
        }
    }
    match lexical {
        Some(l) => (l.code().into(), Some(l)),
        None => ("und".into(), None),
    }
}

fn from_whatlang(lang: whatlang::Lang) -> Option<Lang> {
    use whatlang::Lang as W;
    match lang {
        W::Eng => Some(Lang::En),
        W::Spa => Some(Lang::Es),
        W::Por => Some(Lang::Pt),
        W::Deu => Some(Lang::De),
        W::Fra => Some(Lang::Fr),
        W::Ind => Some(Lang::Id),
        _ => None,
    }
}

fn iso639_1(lang: whatlang::Lang) -> String {
    use whatlang::Lang as W;
    let code = match lang {
        W::Eng => "en",
        W::Spa => "es",
        W::Por => "pt",
        W::Deu => "de",
        W::Fra => "fr",
        W::Ind => "id",
        W::Ita => "it",
        W::Nld => "nl",
        W::Rus => "ru",
        W::Ukr => "uk",
        W::Pol => "pl",
        W::Tur => "tr",
        W::Ara => "ar",
        W::Hin => "hi",
        W::Jpn => "ja",
        W::Kor => "ko",
        W::Cmn => "zh",
        W::Vie => "vi",
        W::Tha => "th",
        W::Tgl => "tl",
        W::Swe => "sv",
        W::Dan => "da",
        W::Fin => "fi",
        W::Ron => "ro",
        W::Ces => "cs",
        W::Ell => "el",
        W::Heb => "he",
        W::Hun => "hu",
        W::Pes => "fa",
        W::Ben => "bn",
        W::Urd => "ur",
        W::Cat => "ca",
        other => return other.code().to_owned(),
    };
    code.to_owned()
}

/// The sentiment weight of the word (or phrase) starting at `tokens[i]`, and how many tokens
/// it spans.
fn weight_at(tokens: &[Token], i: usize, langs: &[Lang]) -> Option<(f32, usize)> {
    let token = &tokens[i];
    match token.kind {
        Kind::Emoji => return EMOJI.get(&token.norm).map(|w| (*w, 1)),
        Kind::Word | Kind::Hashtag => {}
        _ => return None,
    }
    for lang in langs {
        let lex = lang.lexicon();
        // The longest phrase first, within the clause.
        for n in (2..=lex.longest_phrase.min(tokens.len() - i)).rev() {
            let span = &tokens[i..i + n];
            if span.iter().any(|t| t.clause != token.clause || t.kind != Kind::Word) {
                continue;
            }
            for plain in [false, true] {
                let phrase: Vec<&str> =
                    span.iter().map(|t| if plain { t.plain.as_str() } else { t.norm.as_str() }).collect();
                if let Some(w) = lex.sentiment.get(&phrase.join(" ")) {
                    return Some((*w, n));
                }
            }
        }
        let single = [token.norm.clone(), token.plain.clone()].into_iter().chain(squeezed(&token.plain));
        for form in single {
            if let Some(w) = lex.sentiment.get(&form).filter(|_| usable(langs, *lang, &form)) {
                return Some((*w, 1));
            }
        }
    }
    None
}

/// Whether `lang`'s lists apply to `word` in a comment consulting `langs`: English, consulted
/// next to the comment's own language, does not apply to that language's stop words
/// (Portuguese "no" is "in the", French "dont" is "of which").
fn usable(langs: &[Lang], lang: Lang, word: &str) -> bool {
    !(lang == Lang::En && langs.len() == 2 && langs[0] != Lang::En && langs[0].lexicon().stopwords.contains(word))
}

fn in_any(
    langs: &[Lang],
    word: &str,
    set: impl Fn(&crate::lexicon::Lexicon) -> &std::collections::HashSet<String>,
) -> bool {
    langs.iter().any(|l| set(l.lexicon()).contains(word) && usable(langs, *l, word))
}

/// Question words that also open exclamations ("what a view", "que lindo", "wie schön").
const EXCLAMATIVE: &[&str] =
    &["what", "how", "que", "qué", "quê", "como", "cómo", "wie", "was", "quel", "quelle", "quels", "quelles", "betapa"];

/// Lexicon sentiment with negation (up to three words back in the clause), intensifiers and
/// diminishers before the word (Indonesian ones also after it), capitals, contrast (the part
/// after "but" counts more) and exclamation marks.
fn sentiment(text: &str, tokens: &[Token], lang: Option<Lang>) -> Label {
    let langs = lexicons(lang);
    let contrast_at = tokens.iter().rposition(|t| {
        t.kind == Kind::Word && (in_any(&langs, &t.plain, |l| &l.contrast) || in_any(&langs, &t.norm, |l| &l.contrast))
    });
    let mut score = 0.0f32;
    // A negator turns the first sentiment word after it, not every one ("pas cher et efficace").
    let mut spent: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let Some((mut w, span)) = weight_at(tokens, i, &langs) else {
            i += 1;
            continue;
        };
        let clause = tokens[i].clause;
        let mut negated = false;
        for (j, t) in tokens.iter().enumerate().take(i).skip(i.saturating_sub(3)) {
            if t.clause == clause
                && t.kind == Kind::Word
                && !spent.contains(&j)
                && (in_any(&langs, &t.norm, |l| &l.negators) || in_any(&langs, &t.plain, |l| &l.negators))
            {
                negated = !negated;
                spent.push(j);
            }
        }
        if i > 0 && tokens[i - 1].clause == clause {
            let prev = &tokens[i - 1].plain;
            if in_any(&langs, prev, |l| &l.intensifiers) {
                w *= 1.5;
            } else if in_any(&langs, prev, |l| &l.diminishers) {
                w *= 0.5;
            }
        }
        if let Some(next) = tokens.get(i + span).filter(|t| t.clause == clause)
            && lang == Some(Lang::Id)
            && in_any(&[Lang::Id], &next.plain, |l| &l.intensifiers)
        {
            w *= 1.5;
        }
        if tokens[i].caps {
            w *= 1.3;
        }
        if negated {
            w *= -0.75;
        }
        if let Some(c) = contrast_at {
            w *= if i > c { 1.5 } else { 0.5 };
        }
        score += w;
        i += span;
    }
    let exclamations = text.chars().filter(|c| *c == '!').count().min(3) as f32;
    score *= 1.0 + 0.1 * exclamations;
    if score >= SENTIMENT_THRESHOLD {
        Label::Positive
    } else if score <= -SENTIMENT_THRESHOLD {
        Label::Negative
    } else {
        Label::Neutral
    }
}

/// A question mark, or a clause opening with a question word ("where can i buy it"), unless
/// that word opens an exclamation instead ("que lindo", "what a view!").
fn is_question(text: &str, tokens: &[Token], lang: Option<Lang>) -> bool {
    if emoji_only(text) {
        return false;
    }
    if text.contains(['?', '¿', '？']) {
        return true;
    }
    if text.trim_end().ends_with('!') {
        return false;
    }
    let langs = lexicons(lang);
    let words: Vec<&Token> = tokens.iter().filter(|t| t.kind == Kind::Word).collect();
    for (i, word) in words.iter().enumerate() {
        // Indonesian puts the question word where the answer goes ("beli di mana").
        let opens_clause = i == 0 || words[i - 1].clause != word.clause || lang == Some(Lang::Id);
        if !opens_clause {
            continue;
        }
        for n in (1..=3).rev() {
            let Some(span) = words.get(i..i + n) else { continue };
            if span.iter().any(|t| t.clause != word.clause) {
                continue;
            }
            let phrase: Vec<&str> = span.iter().map(|t| t.norm.as_str()).collect();
            let plain: Vec<&str> = span.iter().map(|t| t.plain.as_str()).collect();
            let (phrase, plain) = (phrase.join(" "), plain.join(" "));
            if in_any(&langs, &phrase, |l| &l.question_words) || in_any(&langs, &plain, |l| &l.question_words) {
                // "que lindo", "what a beautiful…": after these, a sentiment word makes an
                // exclamation ("is it good" stays a question).
                let exclaims = n == 1
                    && EXCLAMATIVE.contains(&phrase.as_str())
                    && (i + n..(i + n + 2).min(words.len())).any(|j| {
                        words[j].clause == word.clause
                            && langs.iter().any(|l| {
                                l.lexicon().sentiment.contains_key(&words[j].norm)
                                    || l.lexicon().sentiment.contains_key(&words[j].plain)
                            })
                    });
                if !exclaims {
                    return true;
                }
            }
        }
    }
    false
}

/// Links, promotion patterns and phone numbers. Copy-paste flooding needs the other
/// comments and is found in `analyze`.
fn is_spam(text: &str, tokens: &[Token]) -> bool {
    if tokens.iter().any(|t| t.kind == Kind::Link) {
        return true;
    }
    let normalized = normalize(text);
    let plain = crate::tokens::deaccent(&normalized);
    let bounded = |haystack: &str| {
        PROMO.find_iter(haystack).any(|m| {
            let before = haystack[..m.start()].chars().next_back();
            let after = haystack[m.end()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
    };
    if bounded(&normalized) || bounded(&plain) {
        return true;
    }
    // A phone number: nine digits or more in one run of digits, spaces, dashes and a plus.
    let mut digits = 0;
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits += 1;
            if digits >= 9 {
                return true;
            }
        } else if !matches!(c, ' ' | '-' | '+' | '(' | ')' | '.') {
            digits = 0;
        }
    }
    false
}

/// The words of a comment that can name a topic: not function words, not sentiment or
/// question words, three characters at least (one for ideographs).
fn content(token: &Token, langs: &[Lang]) -> bool {
    match token.kind {
        Kind::Hashtag => true,
        Kind::Word => {
            // Ideographs and kana come one character a token (no dictionary segmentation here):
            // runs of them would be character n-grams, not phrases.
            let long = if token.plain.chars().any(|c| c as u32 >= 0x2E80) {
                token.plain.chars().count() >= 2
            } else {
                token.plain.chars().count() >= 3
            };
            long && !token.plain.chars().all(|c| c.is_numeric())
                && !langs.iter().any(|l| {
                    let lex = l.lexicon();
                    lex.is_function_word(&token.norm)
                        || lex.is_function_word(&token.plain)
                        || lex.sentiment.contains_key(&token.plain)
                        || lex.question_words.contains(&token.plain)
                })
        }
        _ => false,
    }
}

/// Words that name the same thing in the languages cova reads, so that a topic asked about in
/// several of them is one topic: shown under its first name, counted once per comment.
const CONCEPTS: &[&[&str]] = &[
    &[
        "price", "prices", "precio", "precios", "preço", "preços", "preco", "precos", "preis", "preise", "prix",
        "harga", "cost",
    ],
    &["shipping", "envío", "envio", "frete", "versand", "livraison", "ongkir"],
    &["size", "sizes", "talla", "tallas", "tamanho", "tamanhos", "größe", "grösse", "taille", "ukuran"],
    &["link", "enlace", "lien", "tautan"],
    &["color", "colour", "colors", "colours", "cor", "cores", "farbe", "couleur", "warna"],
];

/// The concept a lone word names, if any (by its plain, lower-cased form).
fn concept(plain: &str) -> Option<&'static str> {
    CONCEPTS.iter().find(|words| words.contains(&plain)).map(|words| words[0])
}

/// Whether a word is written in Latin letters (digits and marks aside).
fn latin(word: &str) -> bool {
    word.chars().filter(|c| c.is_alphabetic()).all(|c| (c as u32) < 0x0250 || ('\u{1E00}'..='\u{1EFF}').contains(&c))
}

/// Candidate keyphrases of one comment: runs of content words (one to three words), keyed
/// by their stems; with the words as written. A lone word that names a [`CONCEPTS`] entry is
/// keyed and shown by the concept. A lone word of a language cova has no lexicon for, in a
/// script other than Latin, is no candidate: without its function words, a common verb ending
/// ("있어요") cannot be told from a topic.
fn candidates(read: &Read) -> Vec<(Vec<String>, String)> {
    let langs = lexicons(read.lang);
    let mut out: Vec<(Vec<String>, String)> = Vec::new();
    let mut run: Vec<&Token> = Vec::new();
    let mut flush = |run: &mut Vec<&Token>| {
        for n in 1..=3.min(run.len()) {
            for window in run.windows(n) {
                if n == 1 && window[0].kind != Kind::Hashtag {
                    if let Some(name) = concept(&window[0].plain) {
                        let key = vec![format!("={name}")];
                        if !out.iter().any(|(k, _)| *k == key) {
                            out.push((key, name.to_owned()));
                        }
                        continue;
                    }
                    if read.lang.is_none() && !latin(&window[0].plain) {
                        continue;
                    }
                }
                let key: Vec<String> = window.iter().map(|t| stem(read.lang, &t.plain)).collect();
                let surface: Vec<&str> = window.iter().map(|t| t.norm.as_str()).collect();
                let surface = if window[0].kind == Kind::Hashtag && n == 1 {
                    format!("#{}", surface[0])
                } else {
                    surface.join(" ")
                };
                if !out.iter().any(|(k, _)| *k == key) {
                    out.push((key, surface));
                }
            }
        }
        run.clear();
    };
    for token in &read.tokens {
        if content(token, &langs) && run.last().is_none_or(|last| last.clause == token.clause) {
            run.push(token);
        } else {
            flush(&mut run);
            if content(token, &langs) {
                run.push(token);
            }
        }
    }
    flush(&mut run);
    out
}

struct Candidate {
    key: Vec<String>,
    /// Comments (by index) that contain it.
    comments: Vec<usize>,
    surfaces: HashMap<String, usize>,
}

impl Candidate {
    fn score(&self) -> f64 {
        self.comments.len() as f64 * (1.0 + 0.6 * (self.key.len() as f64 - 1.0))
    }

    fn surface(&self) -> String {
        let mut surfaces: Vec<(&String, &usize)> = self.surfaces.iter().collect();
        surfaces.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        surfaces.first().map(|(s, _)| (*s).clone()).unwrap_or_default()
    }
}

/// Keyphrases by the number of comments using them, longer phrases preferred; a phrase
/// inside (or around) a chosen one is not chosen again.
fn keyphrases(per_comment: &[Vec<(Vec<String>, String)>], eligible: &[bool]) -> Vec<Candidate> {
    let mut index: HashMap<Vec<String>, Candidate> = HashMap::new();
    for (i, list) in per_comment.iter().enumerate() {
        if !eligible[i] {
            continue;
        }
        for (key, surface) in list {
            let c = index.entry(key.clone()).or_insert_with(|| Candidate {
                key: key.clone(),
                comments: Vec::new(),
                surfaces: HashMap::new(),
            });
            c.comments.push(i);
            *c.surfaces.entry(surface.clone()).or_default() += 1;
        }
    }
    let mut all: Vec<Candidate> = index.into_values().filter(|c| c.comments.len() >= 2).collect();
    all.sort_by(|a, b| b.score().total_cmp(&a.score()).then_with(|| a.key.cmp(&b.key)));
    let contains = |outer: &[String], inner: &[String]| outer.windows(inner.len()).any(|w| w == inner);
    let mut chosen: Vec<Candidate> = Vec::new();
    for c in all {
        if chosen.iter().any(|k| contains(&k.key, &c.key) || contains(&c.key, &k.key)) {
            continue;
        }
        chosen.push(c);
    }
    chosen
}

#[async_trait::async_trait]
impl Analyzer for Offline {
    fn model(&self) -> String {
        Self::MODEL.to_owned()
    }

    async fn analyze(&self, comments: &[Comment], phrases: &[String]) -> Result<Analysis, AnalyzeError> {
        let (comments, phrases) = (comments.to_vec(), phrases.to_vec());
        Ok(off_the_workers(move || analyze(&comments, &phrases)).await)
    }
}

fn analyze(comments: &[Comment], phrases: &[String]) -> Analysis {
    let mut reads: Vec<Read> = comments.iter().map(|c| read(&c.text, c.sentiment)).collect();
    // Copy-paste flooding: one author posting the same long text again and again (comments
    // of unknown authors count as one author's).
    let mut seen: HashMap<(&str, String), Vec<usize>> = HashMap::new();
    for (i, c) in comments.iter().enumerate() {
        let key = normalize(&c.text);
        if key.chars().count() >= REPEATED_MIN_CHARS {
            seen.entry((c.author.as_str(), key)).or_default().push(i);
        }
    }
    for copies in seen.values().filter(|v| v.len() >= REPEATED) {
        for &i in copies {
            reads[i].labels.spam = true;
        }
    }
    let labels: Vec<CommentLabels> = reads.iter().map(|r| r.labels.clone()).collect();
    let (sentiment, languages, spam_share, spam_ids) = crate::tally(comments, &labels);

    let per_comment: Vec<Vec<(Vec<String>, String)>> = reads.iter().map(candidates).collect();
    let eligible: Vec<bool> = reads.iter().map(|r| !r.labels.spam).collect();
    let ranked = keyphrases(&per_comment, &eligible);
    let topics: Vec<Topic> = ranked
        .iter()
        .take(MAX_TOPICS)
        .map(|c| Topic {
            phrase: c.surface(),
            count: c.comments.len(),
            comment_ids: c.comments.iter().take(EXAMPLES).map(|&i| comments[i].id.clone()).collect(),
        })
        .collect();

    // Questions, grouped by what they ask about: the best-ranked keyphrase among questions.
    let asking: Vec<bool> = reads.iter().map(|r| r.labels.question && !r.labels.spam).collect();
    let question_phrases = keyphrases(&per_comment, &asking);
    let mut groups: Vec<QuestionGroup> = Vec::new();
    let mut grouped = vec![false; comments.len()];
    for phrase in &question_phrases {
        let members: Vec<usize> = phrase.comments.iter().copied().filter(|&i| !grouped[i]).collect();
        if members.len() < 2 {
            continue;
        }
        for &i in &members {
            grouped[i] = true;
        }
        groups.push(group(phrase.surface(), &members, comments));
    }
    let rest: Vec<usize> = (0..comments.len()).filter(|&i| asking[i] && !grouped[i]).collect();
    if !rest.is_empty() {
        groups.push(group("other".into(), &rest, comments));
    }
    groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| (a.topic == "other").cmp(&(b.topic == "other"))));

    let langs: Vec<Option<Lang>> = reads.iter().map(|r| r.lang).collect();
    let phrase_matches = crate::phrases::find(phrases, comments, &langs);
    let summary = summarise(comments, &reads, &ranked, &topics, &groups, &sentiment);
    Analysis {
        model: Offline::MODEL.to_owned(),
        comments: comments.len(),
        summary,
        sentiment,
        topics,
        questions: groups,
        languages,
        spam_share,
        spam_ids,
        phrase_matches,
        tokens_used: None,
    }
}

fn group(topic: String, members: &[usize], comments: &[Comment]) -> QuestionGroup {
    QuestionGroup {
        topic,
        count: members.len(),
        comment_ids: members.iter().map(|&i| comments[i].id.clone()).collect(),
        example: members.first().map(|&i| comments[i].text.clone()).unwrap_or_default(),
    }
}

/// An extractive summary: the shape of the conversation in one sentence each (sentiment,
/// topics, questions, spam), then the comments that best represent the main topics.
fn summarise(
    comments: &[Comment],
    reads: &[Read],
    ranked: &[Candidate],
    topics: &[Topic],
    groups: &[QuestionGroup],
    sentiment: &crate::Sentiment,
) -> String {
    if comments.is_empty() {
        return "No comments to analyse.".to_owned();
    }
    let pct = |share: f64| (share * 100.0).round() as i64;
    let mut parts = vec![format!(
        "{} comments: {}% positive, {}% neutral, {}% negative.",
        comments.len(),
        pct(sentiment.positive),
        pct(sentiment.neutral),
        pct(sentiment.negative)
    )];
    if !topics.is_empty() {
        let names: Vec<&str> = topics.iter().take(3).map(|t| t.phrase.as_str()).collect();
        parts.push(format!("Most discussed: {}.", names.join(", ")));
    }
    let asked: usize = groups.iter().map(|g| g.count).sum();
    if asked > 0 {
        match groups.iter().find(|g| g.topic != "other") {
            Some(top) => parts.push(format!("{asked} ask questions, most often about {}.", top.topic)),
            None => parts.push(format!("{asked} ask questions.")),
        }
    }
    let spam = reads.iter().filter(|r| r.labels.spam).count();
    if spam > 0 {
        parts.push(format!("{spam} look like spam."));
    }
    // Representative comments: those covering the most-used keyphrases, per word.
    let weight: HashMap<usize, f64> = {
        let mut w: HashMap<usize, f64> = HashMap::new();
        for c in ranked.iter().take(MAX_TOPICS * 2) {
            for &i in &c.comments {
                *w.entry(i).or_default() += c.score();
            }
        }
        w
    };
    let mut quotable: Vec<(usize, f64)> = weight
        .into_iter()
        .filter(|(i, _)| {
            let len = comments[*i].text.chars().count();
            !reads[*i].labels.spam && (20..=200).contains(&len)
        })
        .map(|(i, w)| (i, w / (1.0 + (reads[i].tokens.len() as f64).ln())))
        .collect();
    quotable.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Distinct texts: many people often write the very same comment.
    let mut quoted: Vec<String> = Vec::new();
    let mut quotes: Vec<String> = Vec::new();
    for (i, _) in &quotable {
        let key = normalize(&comments[*i].text);
        if quotes.len() < QUOTED && !quoted.contains(&key) {
            quoted.push(key);
            quotes.push(format!("“{}”", comments[*i].text.trim()));
        }
    }
    if !quotes.is_empty() {
        parts.push(format!("Typical: {}.", quotes.join("; ")));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(text: &str) -> CommentLabels {
        Offline::new().label(text)
    }

    #[test]
    fn judging_runs_beside_the_async_workers_and_says_what_judging_alone_says() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().expect("runtime");
        let (worker, judge, labels) = runtime.block_on(async {
            let (worker, judge) = tokio::spawn(async {
                let worker = std::thread::current().id();
                (worker, off_the_workers(|| std::thread::current().id()).await)
            })
            .await
            .expect("task");
            let labels = Offline::label_all(vec!["I love it".into(), "this is awful, total scam".into()]).await;
            (worker, judge, labels)
        });
        assert_ne!(worker, judge, "the judging ran on the async worker");
        assert_eq!(labels, vec![label("I love it"), label("this is awful, total scam")]);
        // Without a multi-threaded runtime it runs in place.
        let single = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let here = std::thread::current().id();
        assert_eq!(single.block_on(off_the_workers(|| std::thread::current().id())), here);
    }

    #[test]
    fn sentiment_with_negation_intensity_and_emoji() {
        assert_eq!(label("I love this serum so much").sentiment, Label::Positive);
        assert_eq!(label("this is not good at all").sentiment, Label::Negative);
        assert_eq!(label("not bad honestly").sentiment, Label::Positive);
        assert_eq!(label("😍😍😍").sentiment, Label::Positive);
        assert_eq!(label("🤮").sentiment, Label::Negative);
        assert_eq!(label("posted at 5pm").sentiment, Label::Neutral);
        assert_eq!(label("me encanta, es increible").sentiment, Label::Positive);
        assert_eq!(label("no me gustó nada, una estafa").sentiment, Label::Negative);
        assert_eq!(label("das ist echt nicht gut").sentiment, Label::Negative);
        assert_eq!(label("produknya bagus banget kak").sentiment, Label::Positive);
        assert_eq!(label("looked great but it broke after a week, terrible").sentiment, Label::Negative);
    }

    #[test]
    fn questions_with_and_without_marks() {
        assert!(label("where can i buy this").question);
        assert!(label("¿cuánto cuesta?").question);
        assert!(label("ini beli di mana kak").question);
        assert!(!label("que lindo").question, "an exclamation");
        assert!(!label("love it").question);
        assert!(!label("😍").question);
    }

    #[test]
    fn stored_labels_are_taken_as_judged_and_give_the_same_result() {
        let texts = ["I love this serum so much", "this is not good at all", "posted at 5pm", "me encanta 😍"];
        let fresh: Vec<Comment> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Comment { id: i.to_string(), text: (*t).into(), ..Comment::default() })
            .collect();
        let stored: Vec<Comment> =
            fresh.iter().map(|c| Comment { sentiment: Some(label(&c.text).sentiment), ..c.clone() }).collect();
        assert_eq!(analyze(&stored, &[]), analyze(&fresh, &[]), "the same function of the same text");
        // A stored label is not judged again: it is what the result counts.
        let mut told = stored.clone();
        told[0].sentiment = Some(Label::Negative);
        let labels = analyze(&told, &[]).sentiment.labels;
        assert_eq!((labels[0].label, labels[1].label), (Label::Negative, Label::Negative));
    }

    #[test]
    fn spam_signals() {
        assert!(label("check my profile for free followers").spam);
        assert!(label("get it at shop-deals.xyz now").spam);
        assert!(label("wa 0812 3456 7890 order now").spam);
        assert!(!label("this song is so good").spam);
        let flood: Vec<Comment> = (0..4)
            .map(|i| Comment {
                id: i.to_string(),
                text: "Visit me for a great surprise today".into(),
                author: "bot".into(),
                sentiment: None,
            })
            .chain([Comment { id: "x".into(), text: "nice video".into(), author: "fan".into(), sentiment: None }])
            .collect();
        let a = analyze(&flood, &[]);
        assert_eq!(a.spam_ids.len(), 4, "copy-paste flooding");
        assert_eq!(a.spam_share, 0.8);
        let asking: Vec<Comment> = (0..5)
            .map(|i| Comment {
                id: i.to_string(),
                text: "does it ship to Canada?".into(),
                author: format!("fan{i}"),
                ..Comment::default()
            })
            .collect();
        assert!(analyze(&asking, &[]).spam_ids.is_empty(), "many people asking the same is not spam");
    }

    #[test]
    fn languages_are_detected() {
        assert_eq!(label("the packaging is really nice and the delivery was fast").language, "en");
        assert_eq!(label("el envío tardó muchísimo pero llegó bien").language, "es");
        assert_eq!(label("qual o nome da música").language, "pt");
        assert_eq!(label("wo kann man das kaufen").language, "de");
        assert_eq!(label("c'est quoi la marque de ce rouge à lèvres").language, "fr");
        assert_eq!(label("kak ini beli di mana ya").language, "id");
        assert_eq!(label("🔥🔥").language, "und");
    }

    #[test]
    fn a_topic_asked_in_several_languages_is_one_and_lone_foreign_fragments_are_none() {
        let comments: Vec<Comment> = [
            "what's the price?",
            "¿cuál es el precio?",
            "qual o preço?",
            "Preis bitte",
            "어디서 살 수 있어요?",
            "사고 싶어요 있어요",
            "그거 있어요",
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| Comment { id: i.to_string(), text: (*t).into(), author: format!("a{i}"), ..Comment::default() })
        .collect();
        let a = analyze(&comments, &[]);
        let price = a.topics.iter().find(|t| t.phrase == "price").expect("price is a topic");
        assert_eq!(price.count, 4, "{:?}", a.topics);
        assert!(!a.topics.iter().any(|t| ["precio", "preço", "preis"].contains(&t.phrase.as_str())), "{:?}", a.topics);
        assert!(!a.topics.iter().any(|t| t.phrase == "있어요"), "{:?}", a.topics);
    }

    #[test]
    fn topics_questions_summary_and_phrases() {
        let texts = [
            "the GlowLab serum smells amazing",
            "does the glowlab serum work on dry skin?",
            "where to buy the glowlab serum?",
            "glowlab serum is overpriced",
            "price of the desk lamp?",
            "where to buy the desk lamp",
            "first",
            "check my profile 🔥",
        ];
        let comments: Vec<Comment> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Comment { id: format!("c{i}"), text: (*t).into(), ..Comment::default() })
            .collect();
        let a = analyze(&comments, &["where to buy".into(), "not there".into()]);
        assert_eq!(a.topics[0].phrase, "glowlab serum", "{:?}", a.topics);
        assert_eq!(a.topics[0].count, 4);
        assert!(a.topics.iter().any(|t| t.phrase == "desk lamp"), "{:?}", a.topics);
        assert_eq!(a.questions.iter().map(|g| g.count).sum::<usize>(), 4, "{:?}", a.questions);
        assert!(a.questions.iter().any(|g| g.topic == "glowlab serum" && g.count == 2), "{:?}", a.questions);
        assert_eq!(a.phrase_matches[0].comment_ids, ["c2", "c5"]);
        assert_eq!(a.phrase_matches[1].count, 0);
        assert_eq!(a.spam_ids, ["c7"]);
        assert_eq!(a.sentiment.labels.len(), 8);
        assert!(a.summary.starts_with("8 comments:") && a.summary.contains("glowlab serum"), "{}", a.summary);
        let twice = [
            ("a", "the desk lamp is bright enough"),
            ("b", "the desk lamp is bright enough"),
            ("c", "that desk lamp looks bright"),
        ];
        let twice: Vec<Comment> = twice
            .iter()
            .map(|(id, t)| Comment { id: (*id).into(), text: (*t).into(), author: (*id).into(), sentiment: None })
            .collect();
        let summary = analyze(&twice, &[]).summary;
        assert_eq!(summary.matches("the desk lamp is bright enough").count(), 1, "a text is quoted once: {summary}");
        assert_eq!((a.model.as_str(), a.tokens_used), (Offline::MODEL, None));
        let empty = analyze(&[], &[]);
        assert_eq!((empty.comments, empty.sentiment.positive), (0, 0.0));
    }
}
