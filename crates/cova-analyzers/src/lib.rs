//! What an AI job computes from the comment texts of an analysis, and the two analyzers that
//! compute it behind one trait:
//!
//! - [`Offline`]: no network; language detection, lexicon sentiment with negation, intensifiers
//!   and emoji, statistical keyphrases, question and spam rules, an extractive summary.
//! - [`OpenAi`]: any OpenAI-compatible chat-completions endpoint, asked for structured JSON in
//!   batches that fit a token budget, its answers validated before they are used.
//!
//! Watch-phrase matches are computed the same way for both ([`phrases`]), so they do not
//! depend on a model's mood.

mod lexicon;
mod offline;
mod openai;
pub mod phrases;
pub mod search;
mod tokens;

pub use lexicon::Lang;
pub use offline::Offline;
pub use openai::OpenAi;

use cova_config::{AiConfig, AnalyzerKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One comment to analyse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Comment {
    pub id: String,
    pub text: String,
    /// The author's platform id; empty when unknown. Never sent to a model.
    pub author: String,
    /// The sentiment the offline analyzer gave this comment before (kept with the stored
    /// comment): the offline analyzer takes it instead of judging the text again, since it is
    /// the same function of the same text. A model ignores it.
    pub sentiment: Option<Label>,
}

/// Sentiment of one comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Positive,
    Neutral,
    Negative,
}

impl Label {
    pub const ALL: [Label; 3] = [Label::Positive, Label::Neutral, Label::Negative];

    pub const fn as_str(self) -> &'static str {
        match self {
            Label::Positive => "positive",
            Label::Neutral => "neutral",
            Label::Negative => "negative",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The label as stored with a comment (its place in [`Label::ALL`]).
    pub const fn code(self) -> i16 {
        match self {
            Label::Positive => 0,
            Label::Neutral => 1,
            Label::Negative => 2,
        }
    }

    /// The label of a stored code.
    pub fn from_code(code: i16) -> Option<Self> {
        usize::try_from(code).ok().and_then(|i| Self::ALL.get(i).copied())
    }
}

/// What an analyzer says of one comment.
#[derive(Debug, Clone, PartialEq)]
pub struct CommentLabels {
    /// ISO 639-1 code, or `und` when it cannot be told.
    pub language: String,
    pub sentiment: Label,
    pub question: bool,
    pub spam: bool,
}

/// The result of an AI job (the `result` of `GET /ai/jobs/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Which analyzer produced it, e.g. `cova-offline/1` or `openai:gpt-4o-mini`.
    pub model: String,
    /// Comments analysed.
    pub comments: usize,
    pub summary: String,
    pub sentiment: Sentiment,
    pub topics: Vec<Topic>,
    pub questions: Vec<QuestionGroup>,
    /// Share of comments per language (ISO 639-1, `und` when unknown).
    pub languages: BTreeMap<String, f64>,
    pub spam_share: f64,
    pub spam_ids: Vec<String>,
    pub phrase_matches: Vec<PhraseMatch>,
    /// Tokens the model used (prompt + completion); `null` for the offline analyzer.
    pub tokens_used: Option<u64>,
}

impl Analysis {
    /// The labels it judged of comments that came without one: worth keeping with them, so that
    /// no later spike check or AI job judges them again. Only the offline analyzer's (a spike
    /// check's own judgement); a model's labels are another function of the text, so none.
    pub fn newly_judged(&self, comments: &[Comment]) -> Vec<(String, Label)> {
        if self.model != Offline::MODEL {
            return Vec::new();
        }
        let unjudged: std::collections::HashSet<&str> =
            comments.iter().filter(|c| c.sentiment.is_none()).map(|c| c.id.as_str()).collect();
        self.sentiment
            .labels
            .iter()
            .filter(|l| unjudged.contains(l.id.as_str()))
            .map(|l| (l.id.clone(), l.label))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sentiment {
    pub positive: f64,
    pub neutral: f64,
    pub negative: f64,
    /// The label of every analysed comment.
    pub labels: Vec<LabelledComment>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelledComment {
    pub id: String,
    pub label: Label,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topic {
    pub phrase: String,
    /// Comments that mention it.
    pub count: usize,
    /// Up to [`EXAMPLES`] of them.
    pub comment_ids: Vec<String>,
}

/// Comments asking about the same thing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionGroup {
    /// What they ask about (a keyphrase), or `other`.
    pub topic: String,
    pub count: usize,
    pub comment_ids: Vec<String>,
    /// The text of one of them.
    pub example: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhraseMatch {
    pub phrase: String,
    pub count: usize,
    pub comment_ids: Vec<String>,
}

/// Example comment ids kept per topic.
pub const EXAMPLES: usize = 5;
/// Topics kept in a result.
pub const MAX_TOPICS: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// Worth another try later (the model endpoint is down, slow or rate limiting).
    #[error("{0}")]
    Transient(String),
    /// The model's answers never matched the result schema.
    #[error("{0}")]
    Permanent(String),
    /// The model endpoint refused the request (credentials, model name): the operator's to fix.
    #[error("{0}")]
    Refused(String),
}

/// An analyzer of comment texts.
#[async_trait::async_trait]
pub trait Analyzer: Send + Sync {
    /// The `model` of its results.
    fn model(&self) -> String;

    /// Analyses `comments` (all of them, nothing more) and matches the watch `phrases`.
    async fn analyze(&self, comments: &[Comment], phrases: &[String]) -> Result<Analysis, AnalyzeError>;
}

/// The analyzer the configuration chooses.
pub fn from_config(config: &AiConfig) -> Result<Box<dyn Analyzer>, String> {
    Ok(match config.analyzer {
        AnalyzerKind::Offline => Box::new(Offline::new()),
        AnalyzerKind::Openai => Box::new(OpenAi::new(&config.openai)?),
    })
}

/// Rounds a share to four decimals, so results read well and compare exactly.
pub(crate) fn share(part: usize, total: usize) -> f64 {
    if total == 0 { 0.0 } else { (part as f64 / total as f64 * 10_000.0).round() / 10_000.0 }
}

/// The parts of a result that follow from per-comment labels, whoever produced them.
pub(crate) fn tally(
    comments: &[Comment],
    labels: &[CommentLabels],
) -> (Sentiment, BTreeMap<String, f64>, f64, Vec<String>) {
    let total = comments.len();
    let count = |l: Label| labels.iter().filter(|c| c.sentiment == l).count();
    let sentiment = Sentiment {
        positive: share(count(Label::Positive), total),
        neutral: share(count(Label::Neutral), total),
        negative: share(count(Label::Negative), total),
        labels: comments
            .iter()
            .zip(labels)
            .map(|(c, l)| LabelledComment { id: c.id.clone(), label: l.sentiment })
            .collect(),
    };
    let mut per_language: BTreeMap<String, usize> = BTreeMap::new();
    for l in labels {
        *per_language.entry(l.language.clone()).or_default() += 1;
    }
    let languages = per_language.into_iter().map(|(lang, n)| (lang, share(n, total))).collect();
    let spam_ids: Vec<String> =
        comments.iter().zip(labels).filter(|(_, l)| l.spam).map(|(c, _)| c.id.clone()).collect();
    (sentiment, languages, share(spam_ids.len(), total), spam_ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_rounded_and_safe() {
        assert_eq!(share(1, 3), 0.3333);
        assert_eq!(share(0, 0), 0.0);
        assert_eq!(Label::parse("negative"), Some(Label::Negative));
        assert_eq!(Label::parse("angry"), None);
    }

    #[tokio::test]
    async fn only_the_offline_analyzers_labels_of_unjudged_comments_are_kept() {
        let comment = |id: &str, text: &str, sentiment| Comment {
            id: id.into(),
            text: text.into(),
            author: "a".into(),
            sentiment,
        };
        let comments = vec![
            comment("1", "I love this, wonderful", None),
            comment("2", "terrible, a waste of money", Some(Label::Negative)),
            comment("3", "awful and broken", None),
        ];
        let analysis = Offline::new().analyze(&comments, &[]).await.expect("offline analysis");
        let kept = analysis.newly_judged(&comments);
        let label = |id: &str| analysis.sentiment.labels.iter().find(|l| l.id == id).map(|l| l.label);
        assert_eq!(kept, vec![("1".to_owned(), label("1").expect("1")), ("3".to_owned(), label("3").expect("3"))]);
        let model = Analysis { model: "openai:gpt-4o-mini".into(), ..analysis };
        assert!(model.newly_judged(&comments).is_empty(), "a model's labels are not the stored judgement");
    }
}
