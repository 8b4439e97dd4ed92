//! cova-sim: a local HTTP server impersonating TikTok's web endpoints and the YouTube Data API
//! (with Telegram, an LLM endpoint, an OTLP collector and a Stripe-compatible payment provider
//! beside them, and an SMTP receiver), so cova's tests, demos and benchmarks run without
//! internet. Every post is generated deterministically from the seed and its id; the id also
//! selects the comment count and the failure scenario (see [`rules`] and the README).

pub mod cdn;
mod creators;
mod history;
pub mod instagram;
mod llm;
pub mod otlp;
mod payments;
pub mod rules;
mod server;
mod smtp;
mod telegram;
mod tiktok;
mod truth;
mod youtube;

pub use creators::{SimCreator, SimCreatorPost};
pub use llm::{API_KEY as LLM_API_KEY, LlmRequest};
pub use otlp::ExportedSpan;
pub use payments::{
    PaymentEvent, SECRET_KEY as PAYMENTS_SECRET_KEY, WEBHOOK_SECRET as PAYMENTS_WEBHOOK_SECRET,
    signature_header as payments_signature_header,
};
pub use rules::{
    InstagramScenario, TikTokScenario, YouTubeScenario, decode_instagram_pk, decode_short_code, decode_tiktok_id,
    decode_youtube_id, instagram_pk, instagram_shortcode, short_code, shortcode_of, tiktok_post_id, youtube_video_id,
};
pub use server::{RecordedRequest, SimHandle, serve, spawn};
pub use smtp::SentMail;
pub use telegram::TelegramMessage;
pub use truth::{SimComment, SimImage, SimMetadata, SimPost, SimSound, Tone};

/// Simulator settings. Per-id scenarios always apply; the switches below add failures to every post.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// Delay added to every request.
    pub latency_ms: u64,
    /// The key YouTube requests must carry.
    pub youtube_api_key: String,
    /// Serve the (solvable) challenge page before every TikTok post page until it is solved.
    pub challenge_all: bool,
    /// The first k requests per post and endpoint answer HTTP 200 with an empty body.
    pub empty_body_first: u32,
    /// The first k requests per post and endpoint answer HTTP 429.
    pub too_many_requests_first: u32,
    /// Every k-th request per post and endpoint answers HTTP 503 (0 = never).
    pub server_error_every: u32,
    /// Most comments a TikTok page returns, whatever `count` asked (TikTok's practical maximum).
    pub tiktok_page_max: u32,
    /// Every CDN image is padded to at least this many bytes (benchmarks of larger files).
    pub image_bytes: usize,
    /// Entries kept of each in-memory history (recorded requests, OTLP spans, mails, Telegram
    /// messages, model requests, checkout sessions, payment events); the oldest go first, so a
    /// simulator running for hours stays bounded. 0 keeps none.
    pub history: usize,
}

/// Entries of each history kept by default: far more than a test or benchmark inspects.
pub const DEFAULT_HISTORY: usize = 10_000;

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            latency_ms: 0,
            youtube_api_key: "sim-key".into(),
            challenge_all: false,
            empty_body_first: 0,
            too_many_requests_first: 0,
            server_error_every: 0,
            tiktok_page_max: 35,
            image_bytes: 0,
            history: DEFAULT_HISTORY,
        }
    }
}
