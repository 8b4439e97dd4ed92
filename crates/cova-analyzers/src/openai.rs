//! An OpenAI-compatible chat-completions endpoint as the analyzer: a hosted model, or a local
//! llama.cpp / vLLM server. Comments go in batches that fit `batch_tokens`, each answer must
//! be JSON of the documented shape (checked before use, asked again when it is not), and only
//! the comments given are ever sent.

use crate::lexicon::Lang;
use crate::{
    Analysis, AnalyzeError, Analyzer, Comment, CommentLabels, EXAMPLES, Label, MAX_TOPICS, QuestionGroup, Topic,
};
use cova_config::OpenAiConfig;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// Characters of one comment sent at most (a longer one is cut).
const COMMENT_CHARS: usize = 2_000;
/// What the instructions and the JSON around the comments cost, in tokens.
const PROMPT_OVERHEAD: usize = 400;

const INSTRUCTIONS: &str = "You label comments of a short video. The user message is JSON: \
{\"comments\": [{\"i\": <index>, \"text\": <comment>}]}. Answer with one JSON object only: \
{\"comments\": [{\"i\": <index>, \"language\": <ISO 639-1 code or \"und\">, \
\"sentiment\": \"positive\"|\"neutral\"|\"negative\", \"question\": <true if the comment asks something>, \
\"spam\": <true if promotional, a scam, link bait, follow-for-follow or copy-paste flooding>}] (one entry per \
comment, every index once), \"topics\": [{\"phrase\": <a short keyphrase people discuss>, \
\"comments\": [<indexes>]}] (at most 10), \"summary\": <two or three sentences on what the comments say>}.";

const MERGE_INSTRUCTIONS: &str = "The user message is JSON: {\"summaries\": [<summaries of parts of one \
video's comments>]}. Answer with one JSON object only: {\"summary\": <two or three sentences on what all the \
comments say>}.";

pub struct OpenAi {
    client: reqwest::Client,
    endpoint: String,
    api_key: Option<secrecy::SecretString>,
    model: String,
    batch_tokens: usize,
    attempts: u32,
    retry_base: Duration,
}

/// The answer of one batch, as the model must give it.
#[derive(Debug, Deserialize)]
struct BatchAnswer {
    comments: Vec<LabelAnswer>,
    #[serde(default)]
    topics: Vec<TopicAnswer>,
    summary: String,
}

#[derive(Debug, Deserialize)]
struct LabelAnswer {
    i: usize,
    language: String,
    sentiment: String,
    question: bool,
    spam: bool,
}

#[derive(Debug, Deserialize)]
struct TopicAnswer {
    phrase: String,
    comments: Vec<usize>,
}

#[derive(Debug, Deserialize)]
struct SummaryAnswer {
    summary: String,
}

/// One batch's labels and topics, by position in the batch, checked.
struct Batch {
    labels: Vec<CommentLabels>,
    topics: Vec<(String, Vec<usize>)>,
    summary: String,
}

/// Why one request did not give a usable answer.
enum Failure {
    /// Try the request again (network, 429, 5xx, an answer of the wrong shape).
    Again(String),
    /// Stop (credentials, a refused request).
    Stop(String),
}

impl OpenAi {
    pub fn new(config: &OpenAiConfig) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .connect_timeout(Duration::from_secs(10))
            .user_agent("cova-ai/1")
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            client,
            endpoint: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            api_key: config.api_key.clone(),
            model: config.model.clone(),
            batch_tokens: config.batch_tokens,
            attempts: config.request_attempts.max(1),
            retry_base: Duration::from_millis(config.retry_base_ms),
        })
    }

    /// Splits the comments into batches whose estimated prompt fits the token budget.
    fn batches<'a>(&self, comments: &'a [Comment]) -> Vec<&'a [Comment]> {
        let budget = self.batch_tokens.saturating_sub(PROMPT_OVERHEAD).max(100);
        let mut out = Vec::new();
        let (mut start, mut used) = (0, 0);
        for (i, c) in comments.iter().enumerate() {
            let cost = estimate_tokens(&c.text);
            if i > start && used + cost > budget {
                out.push(&comments[start..i]);
                (start, used) = (i, 0);
            }
            used += cost;
        }
        if start < comments.len() {
            out.push(&comments[start..]);
        }
        out
    }

    /// One chat completion with a JSON answer; the tokens it used.
    async fn complete(&self, instructions: &str, input: &Value) -> Result<(Value, u64), Failure> {
        let body = json!({
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": instructions},
                {"role": "user", "content": input.to_string()},
            ],
        });
        let mut request = self.client.post(&self.endpoint).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let response =
            request.send().await.map_err(|e| Failure::Again(format!("the model endpoint: {}", short(&e))))?;
        let status = response.status();
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(Failure::Again(format!("the model endpoint answered {status}")));
        }
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let text: String = text.chars().take(200).collect();
            return Err(Failure::Stop(format!("the model endpoint refused the request ({status}): {text}")));
        }
        let answer: Value =
            response.json().await.map_err(|e| Failure::Again(format!("the model endpoint's answer: {}", short(&e))))?;
        let tokens = answer["usage"]["total_tokens"].as_u64().unwrap_or(0);
        let content = answer["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| Failure::Again("the model's answer has no message content".into()))?;
        let parsed = serde_json::from_str::<Value>(strip_fences(content))
            .map_err(|e| Failure::Again(format!("the model's answer is not JSON: {e}")))?;
        Ok((parsed, tokens))
    }

    /// `complete` then `check`, again on a transient failure or an answer that does not
    /// check, up to the configured attempts.
    async fn ask<T>(
        &self,
        instructions: &str,
        input: &Value,
        check: impl Fn(Value) -> Result<T, String>,
    ) -> Result<(T, u64), AnalyzeError> {
        let mut tokens = 0;
        let mut last = String::new();
        for attempt in 0..self.attempts {
            if attempt > 0 {
                tokio::time::sleep(self.retry_base * (1 << (attempt - 1).min(5))).await;
            }
            match self.complete(instructions, input).await {
                Ok((value, used)) => {
                    tokens += used;
                    match check(value) {
                        Ok(t) => return Ok((t, tokens)),
                        Err(e) => last = format!("the model's answer does not match the result schema: {e}"),
                    }
                }
                Err(Failure::Again(e)) => last = e,
                Err(Failure::Stop(e)) => return Err(AnalyzeError::Refused(e)),
            }
            tracing::warn!(attempt = attempt + 1, error = %last, "model request failed");
        }
        if last.contains("result schema") {
            Err(AnalyzeError::Permanent(last))
        } else {
            Err(AnalyzeError::Transient(last))
        }
    }
}

fn short(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "could not connect".into()
    } else {
        e.to_string()
    }
}

/// Models sometimes wrap JSON in a Markdown code fence.
fn strip_fences(content: &str) -> &str {
    let t = content.trim();
    let t = t.strip_prefix("```json").or_else(|| t.strip_prefix("```")).unwrap_or(t);
    t.strip_suffix("```").unwrap_or(t).trim()
}

/// A rough token count: four characters a token, plus the JSON around a comment.
fn estimate_tokens(text: &str) -> usize {
    text.chars().count().min(COMMENT_CHARS) / 4 + 8
}

/// Checks a batch answer against the batch of `n` comments.
fn check_batch(value: Value, n: usize) -> Result<Batch, String> {
    let answer: BatchAnswer = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let mut labels: Vec<Option<CommentLabels>> = vec![None; n];
    for l in answer.comments {
        let slot = labels.get_mut(l.i).ok_or_else(|| format!("comment index {} out of range", l.i))?;
        if slot.is_some() {
            return Err(format!("comment index {} given twice", l.i));
        }
        let sentiment = Label::parse(&l.sentiment).ok_or_else(|| format!("unknown sentiment `{}`", l.sentiment))?;
        let language = l.language.trim().to_ascii_lowercase();
        if language.is_empty() || language.len() > 8 || !language.chars().all(|c| c.is_ascii_alphabetic() || c == '-') {
            return Err(format!("`{}` is not a language code", l.language));
        }
        *slot = Some(CommentLabels { language, sentiment, question: l.question, spam: l.spam });
    }
    let labels = labels
        .into_iter()
        .enumerate()
        .map(|(i, l)| l.ok_or_else(|| format!("comment {i} has no labels")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut topics = Vec::new();
    for t in answer.topics {
        let phrase = t.phrase.trim().to_owned();
        if phrase.is_empty() || phrase.chars().count() > 120 {
            continue;
        }
        if let Some(bad) = t.comments.iter().find(|&&i| i >= n) {
            return Err(format!("topic comment index {bad} out of range"));
        }
        topics.push((phrase, t.comments));
    }
    Ok(Batch { labels, topics, summary: answer.summary.trim().to_owned() })
}

#[async_trait::async_trait]
impl Analyzer for OpenAi {
    fn model(&self) -> String {
        format!("openai:{}", self.model)
    }

    async fn analyze(&self, comments: &[Comment], phrases: &[String]) -> Result<Analysis, AnalyzeError> {
        let mut labels: Vec<CommentLabels> = Vec::with_capacity(comments.len());
        let mut topics: HashMap<String, (String, Vec<usize>)> = HashMap::new();
        let mut summaries = Vec::new();
        let mut tokens = 0u64;
        let mut offset = 0;
        for batch in self.batches(comments) {
            let input = json!({
                "comments": batch.iter().enumerate().map(|(i, c)| {
                    json!({"i": i, "text": c.text.chars().take(COMMENT_CHARS).collect::<String>()})
                }).collect::<Vec<_>>()
            });
            let n = batch.len();
            let (answer, used) = self.ask(INSTRUCTIONS, &input, |v| check_batch(v, n)).await?;
            tokens += used;
            labels.extend(answer.labels);
            for (phrase, members) in answer.topics {
                let entry = topics.entry(cova_domain::text::normalize(&phrase)).or_insert_with(|| (phrase, Vec::new()));
                entry.1.extend(members.into_iter().map(|i| i + offset));
            }
            if !answer.summary.is_empty() {
                summaries.push(answer.summary);
            }
            offset += n;
        }
        let summary = match summaries.len() {
            0 => String::new(),
            1 => summaries.remove(0),
            _ => {
                let (merged, used) = self
                    .ask(MERGE_INSTRUCTIONS, &json!({"summaries": summaries}), |v| {
                        let s: SummaryAnswer = serde_json::from_value(v).map_err(|e| e.to_string())?;
                        Some(s.summary.trim().to_owned())
                            .filter(|s| !s.is_empty())
                            .ok_or_else(|| "empty summary".into())
                    })
                    .await?;
                tokens += used;
                merged
            }
        };

        let (sentiment, languages, spam_share, spam_ids) = crate::tally(comments, &labels);
        let mut ranked: Vec<(String, Vec<usize>)> = topics
            .into_values()
            .map(|(phrase, mut members)| {
                members.sort_unstable();
                members.dedup();
                (phrase, members)
            })
            .collect();
        ranked.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        ranked.truncate(MAX_TOPICS);
        let topic_list: Vec<Topic> = ranked
            .iter()
            .map(|(phrase, members)| Topic {
                phrase: phrase.clone(),
                count: members.len(),
                comment_ids: members.iter().take(EXAMPLES).map(|&i| comments[i].id.clone()).collect(),
            })
            .collect();
        // Questions grouped under the most discussed topic that includes them.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, l) in labels.iter().enumerate() {
            if !l.question || l.spam {
                continue;
            }
            let topic = ranked.iter().find(|(_, m)| m.binary_search(&i).is_ok()).map_or("other", |(p, _)| p.as_str());
            match groups.iter_mut().find(|(t, _)| t == topic) {
                Some((_, members)) => members.push(i),
                None => groups.push((topic.to_owned(), vec![i])),
            }
        }
        groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| (a.0 == "other").cmp(&(b.0 == "other"))));
        let questions = groups
            .into_iter()
            .map(|(topic, members)| QuestionGroup {
                topic,
                count: members.len(),
                example: comments[members[0]].text.clone(),
                comment_ids: members.iter().map(|&i| comments[i].id.clone()).collect(),
            })
            .collect();
        let langs: Vec<Option<Lang>> = labels.iter().map(|l| Lang::from_code(&l.language)).collect();
        Ok(Analysis {
            model: self.model(),
            comments: comments.len(),
            summary,
            sentiment,
            topics: topic_list,
            questions,
            languages,
            spam_share,
            spam_ids,
            phrase_matches: crate::phrases::find(phrases, comments, &langs),
            tokens_used: Some(tokens),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyzer(batch_tokens: usize) -> OpenAi {
        OpenAi::new(&OpenAiConfig { batch_tokens, ..OpenAiConfig::default() }).expect("client")
    }

    #[test]
    fn batches_fit_the_budget_and_keep_every_comment() {
        let comments: Vec<Comment> =
            (0..100).map(|i| Comment { id: i.to_string(), text: "x".repeat(400), ..Comment::default() }).collect();
        let batches = analyzer(1_000).batches(&comments);
        assert!(batches.len() > 1);
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), 100);
        assert!(batches.iter().all(|b| b.len() * 108 <= 600 || b.len() == 1));
        assert_eq!(analyzer(1_000).batches(&[]).len(), 0);
    }

    #[test]
    fn answers_are_checked() {
        let good = json!({"comments": [
            {"i": 1, "language": "en", "sentiment": "negative", "question": false, "spam": false},
            {"i": 0, "language": "es", "sentiment": "positive", "question": true, "spam": false}],
            "topics": [{"phrase": "price", "comments": [0]}], "summary": "ok"});
        let batch = check_batch(good, 2).expect("valid");
        assert_eq!(batch.labels[0].sentiment, Label::Positive);
        assert_eq!(batch.labels[1].language, "en");
        let missing = json!({"comments": [{"i": 0, "language": "en", "sentiment": "positive", "question": false, "spam": false}], "summary": ""});
        assert!(check_batch(missing, 2).is_err());
        let bad_label = json!({"comments": [{"i": 0, "language": "en", "sentiment": "happy", "question": false, "spam": false}], "summary": ""});
        assert!(check_batch(bad_label, 1).is_err());
        let bad_topic = json!({"comments": [{"i": 0, "language": "en", "sentiment": "neutral", "question": false, "spam": false}], "topics": [{"phrase": "x", "comments": [5]}], "summary": ""});
        assert!(check_batch(bad_topic, 1).is_err());
        assert_eq!(strip_fences("```json\n{\"a\":1}\n```"), "{\"a\":1}");
    }
}
