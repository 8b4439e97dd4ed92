//! AI jobs (`ai.*`) and the OpenAI-compatible endpoint they may use (`ai.openai.*`).

use serde::{Deserialize, Serialize};

/// Which analyzer AI jobs use (`ai.analyzer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnalyzerKind {
    /// Built-in analysis without any network call.
    Offline,
    /// An OpenAI-compatible chat-completions endpoint (`ai.openai.*`).
    Openai,
}

/// AI jobs (`ai.*`): the ai-worker role and its analyzer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AiConfig {
    pub analyzer: AnalyzerKind,
    /// AI jobs one ai-worker process runs at once.
    pub concurrency: usize,
    /// Deliveries of one AI command before its job fails (transient model failures).
    pub max_attempts: u32,
    pub retry_base_ms: u64,
    /// How long an AI job's claim holds without renewal (renewed every third of it while the
    /// job runs): how soon a killed ai-worker's job is taken over.
    pub lease_ms: u64,
    pub openai: OpenAiConfig,
}

impl Default for AiConfig {
    fn default() -> Self {
        Self {
            analyzer: AnalyzerKind::Offline,
            concurrency: 2,
            max_attempts: 5,
            retry_base_ms: 2_000,
            lease_ms: 60_000,
            openai: OpenAiConfig::default(),
        }
    }
}

/// An OpenAI-compatible endpoint (`ai.openai.*`): a hosted model or a local llama.cpp / vLLM.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenAiConfig {
    /// The API root; requests go to `<base_url>/chat/completions`.
    pub base_url: String,
    #[serde(skip_serializing)]
    pub api_key: Option<secrecy::SecretString>,
    pub model: String,
    /// Estimated prompt tokens per request; comments are batched to stay under it.
    pub batch_tokens: usize,
    pub timeout_ms: u64,
    /// Attempts of one request on a transient failure (429, 5xx, timeout, invalid answer).
    pub request_attempts: u32,
    /// The wait before the second attempt, doubled before each further one.
    pub retry_base_ms: u64,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            model: "gpt-4o-mini".into(),
            batch_tokens: 6_000,
            timeout_ms: 60_000,
            request_attempts: 3,
            retry_base_ms: 1_000,
        }
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("batch_tokens", &self.batch_tokens)
            .field("timeout_ms", &self.timeout_ms)
            .field("request_attempts", &self.request_attempts)
            .field("retry_base_ms", &self.retry_base_ms)
            .finish()
    }
}
