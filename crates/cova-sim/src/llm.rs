//! A deterministic stand-in for an OpenAI-compatible chat-completions endpoint
//! (`POST /llm/v1/chat/completions`), answering cova's analyzer prompts with labels derived
//! from simple rules, and recording what it was sent. The model name picks a behaviour:
//! `sim-fail` always answers 500, `sim-flaky` answers 503 to its first two requests,
//! `sim-garbage` answers JSON of the wrong shape, `sim-slow` takes 1.5 s; any other model
//! answers at once. Requests need `Authorization: Bearer sim-llm-key`.

use crate::history::Ring;
use actix_web::HttpResponse;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub const API_KEY: &str = "sim-llm-key";
pub(crate) const PATH: &str = "/llm/v1/chat/completions";

/// One request as the simulator received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LlmRequest {
    pub model: String,
    /// Comments in the request (0 for a summary merge).
    pub comments: usize,
    /// Summaries in a merge request.
    pub summaries: usize,
}

const POSITIVE: &[&str] = &["love", "great", "amazing", "best", "perfect", "😍", "🔥", "❤"];
const NEGATIVE: &[&str] = &["bad", "worst", "scam", "hate", "broke", "terrible", "overpriced"];
const SPAM: &[&str] = &["http", "check my", "follow me", "promo code"];

/// The answer to a request, and how long to wait before giving it. `calls` counts a model's
/// requests (1-based) apart from `seen`, which drops old ones: `sim-flaky` must not fail again
/// once its first requests leave the history.
pub(crate) fn handle(
    headers: &BTreeMap<String, String>,
    body: &[u8],
    seen: &mut Ring<LlmRequest>,
    calls: impl FnOnce(&str) -> u32,
) -> (HttpResponse, u64) {
    let authorized =
        headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("authorization") && *v == format!("Bearer {API_KEY}"));
    if !authorized {
        return (HttpResponse::Unauthorized().json(json!({"error": {"message": "Incorrect API key provided"}})), 0);
    }
    let request: Value = serde_json::from_slice(body).unwrap_or_default();
    let model = request["model"].as_str().unwrap_or_default().to_owned();
    let input: Value = request["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or_default();
    let comments = input["comments"].as_array().cloned().unwrap_or_default();
    let summaries = input["summaries"].as_array().map_or(0, Vec::len);
    seen.push(LlmRequest { model: model.clone(), comments: comments.len(), summaries });
    let calls = calls(&model);
    match model.as_str() {
        "sim-fail" => return (HttpResponse::InternalServerError().json(json!({"error": {"message": "boom"}})), 0),
        "sim-flaky" if calls <= 2 => return (HttpResponse::ServiceUnavailable().finish(), 0),
        _ => {}
    }
    let content = if model == "sim-garbage" {
        json!({"labels": "none"})
    } else if summaries > 0 {
        json!({"summary": format!("Combined summary of {summaries} parts.")})
    } else {
        label(&comments)
    };
    let tokens = body.len() / 4;
    let answer = json!({
        "id": format!("chatcmpl-sim-{}", seen.pushed()),
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content.to_string()}}],
        "usage": {"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20},
    });
    (HttpResponse::Ok().json(answer), if model == "sim-slow" { 1_500 } else { 0 })
}

fn label(comments: &[Value]) -> Value {
    let has = |text: &str, words: &[&str]| words.iter().any(|w| text.contains(w));
    let mut words: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let labels: Vec<Value> = comments
        .iter()
        .map(|c| {
            let i = c["i"].as_u64().unwrap_or(0);
            let text = c["text"].as_str().unwrap_or_default().to_lowercase();
            for w in text.split(|ch: char| !ch.is_alphanumeric()).filter(|w| w.chars().count() >= 5) {
                let seen = words.entry(w.to_owned()).or_default();
                if !seen.contains(&i) {
                    seen.push(i);
                }
            }
            let sentiment = if has(&text, NEGATIVE) {
                "negative"
            } else if has(&text, POSITIVE) {
                "positive"
            } else {
                "neutral"
            };
            json!({"i": i, "language": "en", "sentiment": sentiment, "question": text.contains('?'), "spam": has(&text, SPAM)})
        })
        .collect();
    let mut topics: Vec<(String, Vec<u64>)> = words.into_iter().filter(|(_, ids)| ids.len() >= 2).collect();
    topics.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    topics.truncate(5);
    json!({
        "comments": labels,
        "topics": topics.into_iter().map(|(phrase, ids)| json!({"phrase": phrase, "comments": ids})).collect::<Vec<_>>(),
        "summary": format!("Simulated summary of {} comments.", comments.len()),
    })
}
