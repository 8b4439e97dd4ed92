//! `cova-sim --addr 127.0.0.1:9090 --seed 1 --latency-ms 0 --payments-webhook URL --history 10000`

use clap::Parser;
use cova_sim::SimConfig;
use std::net::SocketAddr;

/// Local simulator of TikTok's web endpoints and the YouTube Data API.
#[derive(Parser, Debug)]
#[command(name = "cova-sim", version)]
struct Args {
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:9090", env = "COVA_SIM_ADDR")]
    addr: SocketAddr,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Delay added to every request, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// API key the YouTube endpoints accept.
    #[arg(long, default_value = "sim-key")]
    youtube_api_key: String,
    /// Serve the solvable challenge page before every TikTok post page.
    #[arg(long)]
    challenge_all: bool,
    /// The first k requests per post and endpoint answer HTTP 200 with an empty body.
    #[arg(long, default_value_t = 0)]
    empty_body_first: u32,
    /// The first k requests per post and endpoint answer HTTP 429.
    #[arg(long, default_value_t = 0)]
    too_many_requests_first: u32,
    /// Every k-th request per post and endpoint answers HTTP 503 (0 = never).
    #[arg(long, default_value_t = 0)]
    server_error_every: u32,
    /// Where the payment provider posts `checkout.session.completed` events.
    #[arg(long)]
    payments_webhook: Option<String>,
    /// Entries kept of each in-memory history (recorded requests, spans, mails, Telegram
    /// messages, model requests, checkout sessions, payment events); the oldest go first.
    // At least 1: keeping nothing would leave wait-for-mail and event replays nothing to find.
    #[arg(long, default_value_t = cova_sim::DEFAULT_HISTORY, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    history: usize,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let cfg = SimConfig {
        seed: args.seed,
        latency_ms: args.latency_ms,
        youtube_api_key: args.youtube_api_key,
        challenge_all: args.challenge_all,
        empty_body_first: args.empty_body_first,
        too_many_requests_first: args.too_many_requests_first,
        server_error_every: args.server_error_every,
        history: args.history,
        ..SimConfig::default()
    };
    let seed = cfg.seed;
    let webhook = args.payments_webhook;
    cova_sim::serve(args.addr, cfg, |sim| {
        eprintln!("cova-sim listening on {} (seed {seed})", sim.base_url());
        eprintln!("  SMTP:     {}", sim.smtp_url());
        eprintln!("  payments: {} (key {})", sim.payments_base_url(), cova_sim::PAYMENTS_SECRET_KEY);
        match &webhook {
            Some(url) => {
                sim.set_payments_webhook(url);
                eprintln!("  webhook:  {url} (secret {})", cova_sim::PAYMENTS_WEBHOOK_SECRET);
            }
            None => eprintln!("  webhook:  none (--payments-webhook URL)"),
        }
    })
    .await
}
