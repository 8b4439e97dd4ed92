//! The command line of `cova client`.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

// The options of `cova client`; its help text is on `cli::Command::Client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Base URL of the cova service [default: `url` of the client config file, else http://127.0.0.1:8080].
    #[arg(long, global = true, env = "COVA_URL", value_name = "URL")]
    pub url: Option<String>,
    /// Seconds each HTTP request may take, its answer included.
    #[arg(
        long,
        global = true,
        default_value_t = 30,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub timeout: u64,
    #[command(subcommand)]
    pub command: ClientCommand,
}

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Starts collecting the comments of a post and prints `<job_id> <status>`; with several
    /// posts (or --from-file), starts them as batches and prints one line per post. With
    /// --wait, waits for the jobs and writes every comment.
    Analyze(AnalyzeArgs),
    /// Waits for an analyze job started earlier and writes every comment.
    Job(JobArgs),
    /// Prints the free metadata of a post (no comments).
    Metadata {
        /// A TikTok or YouTube post URL.
        #[arg(value_name = "POST_URL")]
        post_url: String,
    },
    /// Prints this month's comment balance and the account's limits.
    Usage,
    /// The account's library of analysed posts.
    #[command(subcommand)]
    Library(LibraryCommand),
    /// AI analyses of a post's collected comments.
    #[command(subcommand)]
    Ai(AiCommand),
    /// Searches every comment the account keeps (its library's posts, across platforms) and
    /// writes what it finds: json, the hits with their posts and matched words; csv, jsonl and
    /// xlsx, the service's export (the columns of a job's export).
    Search(SearchArgs),
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words to find (every one), "a quoted phrase", #hashtags or emoji.
    #[arg(value_name = "QUERY")]
    pub query: String,
    /// Only comments posted since: a duration back from now (30m, 24h, 7d) or an RFC 3339 time.
    #[arg(long, value_name = "WHEN", value_parser = parse_when)]
    pub since: Option<String>,
    /// Only comments posted before: a duration back from now (30m, 24h, 7d) or an RFC 3339 time.
    #[arg(long, value_name = "WHEN", value_parser = parse_when)]
    pub until: Option<String>,
    /// Only comments of this platform's posts.
    #[arg(long, value_enum)]
    pub platform: Option<Platform>,
    /// Only comments of this post (`<platform>:<post_id>`); repeat it for several.
    #[arg(long = "ref", value_name = "REF")]
    pub refs: Vec<String>,
    /// Only comments of this followed creator's posts (its ref, as the creators list shows it).
    #[arg(long, value_name = "CREATOR_REF")]
    pub creator: Option<String>,
    /// Only comments in this language (ISO 639-1, e.g. es; und for unknown).
    #[arg(long, value_name = "CODE")]
    pub language: Option<String>,
    /// Only comments with this stored sentiment.
    #[arg(long, value_enum)]
    pub sentiment: Option<Sentiment>,
    /// Only comments with at least N likes.
    #[arg(long, value_name = "N")]
    pub min_likes: Option<u64>,
    /// Replies only, or top-level comments only.
    #[arg(long, value_enum)]
    pub replies: Option<Replies>,
    /// Only comments with images (true) or without (false).
    #[arg(long, value_name = "BOOL")]
    pub media: Option<bool>,
    /// Only comments by this author's handle (with or without @).
    #[arg(long, value_name = "HANDLE")]
    pub author: Option<String>,
    /// The order of hits.
    #[arg(long, value_enum, default_value_t = SearchSort::Relevance)]
    pub sort: SearchSort,
    /// json: `{"items": […]}` with every hit; csv, jsonl and xlsx: one row per comment.
    #[arg(long, value_enum, default_value_t = ExportFormat::Json)]
    pub format: ExportFormat,
    /// Write to FILE (through FILE.tmp, renamed once complete) instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Sentiment {
    Positive,
    Neutral,
    Negative,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Replies {
    Only,
    Exclude,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchSort {
    Relevance,
    Newest,
    Likes,
}

/// `7d`, `24h`, `30m` (that long before now) or an RFC 3339 time, as an RFC 3339 time.
fn parse_when(raw: &str) -> Result<String, String> {
    if cova_domain::time::parse_rfc3339(raw).is_some() {
        return Ok(raw.to_owned());
    }
    let unit_at = raw.char_indices().last().map_or(0, |(i, _)| i);
    let (number, unit) = raw.split_at(unit_at);
    let minutes: i64 = match (number.parse::<i64>(), unit) {
        (Ok(n), "m") if n >= 0 => n,
        (Ok(n), "h") if n >= 0 => n.saturating_mul(60),
        (Ok(n), "d") if n >= 0 => n.saturating_mul(24 * 60),
        _ => return Err(format!("`{raw}` is neither a duration such as 7d, 24h or 30m nor an RFC 3339 time")),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Ok(cova_domain::time::rfc3339(now.saturating_sub(minutes.saturating_mul(60_000))))
}

impl SearchArgs {
    /// The search's query parameters.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut p = vec![("q", self.query.clone())];
        let mut add = |k: &'static str, v: Option<String>| {
            if let Some(v) = v {
                p.push((k, v));
            }
        };
        add("since", self.since.clone());
        add("until", self.until.clone());
        add("platform", self.platform.map(|x| x.as_str().to_owned()));
        add("creator", self.creator.clone());
        add("language", self.language.clone());
        add("sentiment", self.sentiment.and_then(|s| s.to_possible_value()).map(|v| v.get_name().to_owned()));
        add("min_likes", self.min_likes.map(|n| n.to_string()));
        add("replies", self.replies.and_then(|r| r.to_possible_value()).map(|v| v.get_name().to_owned()));
        add("media", self.media.map(|m| m.to_string()));
        add("author", self.author.clone());
        add("sort", self.sort.to_possible_value().map(|v| v.get_name().to_owned()));
        p.extend(self.refs.iter().map(|r| ("ref", r.clone())));
        p
    }
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// TikTok or YouTube post URLs.
    #[arg(value_name = "POST_URL")]
    pub post_urls: Vec<String>,
    /// Read post URLs from FILE as well, one per line (`-` for stdin); blank lines and lines
    /// starting with `#` are skipped.
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,
    /// Wait until the jobs end (polling once a second; a progress bar on stderr when it is a
    /// terminal), then write the result.
    #[arg(long)]
    pub wait: bool,
    /// Collect (and pay for) at most N comments of each post, replies included (1 to 5000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=5000))]
    pub max_comments: Option<u32>,
    /// Start nothing: print what the posts would cost (each post's comment count, the total,
    /// and how many posts the balance covers whole), as `POST /analyze/batch/preview` answers
    /// once the counts it reads after answering have arrived (asked again every 2 seconds).
    #[arg(long, conflicts_with_all = ["wait", "output_dir"])]
    pub preview: bool,
    #[command(flatten)]
    pub output: ResultOutput,
    /// With --wait and several posts: one file per post in DIR, named `<platform>-<id>.<ext>`,
    /// instead of one combined file (csv and jsonl: one header, rows of every post; json: an
    /// array of jobs).
    #[arg(long, value_name = "DIR", conflicts_with = "output")]
    pub output_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct JobArgs {
    /// The `job_id` printed by `cova client analyze`.
    pub job_id: String,
    #[command(flatten)]
    pub output: ResultOutput,
}

// Where and how a job's comments are written (flattened into `analyze` and `job`; a doc
// comment here would become their about text).
#[derive(Debug, Args)]
pub struct ResultOutput {
    /// json: the job with every comment and its replies, as the API returns it; csv and jsonl:
    /// one row or line per comment, replies included [default: json].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<ResultFormat>,
    /// Write to FILE (through FILE.tmp, renamed once complete) instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResultFormat {
    Json,
    Csv,
    Jsonl,
}

#[derive(Debug, Subcommand)]
pub enum LibraryCommand {
    /// Prints the whole library as `{"items": […]}`, most recently saved first.
    List(ListArgs),
    /// Prints one entry with its whole breakdown (every comment and reply).
    Get {
        /// The post's ref, `<platform>:<post_id>` (e.g. tiktok:7000000000000000012).
        #[arg(value_name = "REF")]
        reference: String,
    },
    /// Downloads an entry's breakdown.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only entries of this platform.
    #[arg(long, value_enum)]
    pub platform: Option<Platform>,
    /// Only entries with this status.
    #[arg(long, value_enum)]
    pub status: Option<EntryStatus>,
    /// Only watched entries (true) or unwatched ones (false).
    #[arg(long, value_name = "BOOL")]
    pub watched: Option<bool>,
    /// Text to find in the post's title or description, or its author's handle or name.
    #[arg(long, value_name = "TEXT")]
    pub query: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Platform {
    Tiktok,
    Youtube,
    Instagram,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Tiktok => "tiktok",
            Platform::Youtube => "youtube",
            Platform::Instagram => "instagram",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EntryStatus {
    Ready,
    Expired,
    #[value(name = "metadata_only")]
    MetadataOnly,
}

impl EntryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Ready => "ready",
            EntryStatus::Expired => "expired",
            EntryStatus::MetadataOnly => "metadata_only",
        }
    }
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The post's ref, `<platform>:<post_id>` (e.g. tiktok:7000000000000000012).
    #[arg(value_name = "REF")]
    pub reference: String,
    /// csv, jsonl and xlsx: the service's export, one row per comment; json: the entry with
    /// every comment and its replies.
    #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
    pub format: ExportFormat,
    /// Write to FILE (through FILE.tmp, renamed once complete) instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Csv,
    Jsonl,
    Xlsx,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum AiCommand {
    /// Quotes an AI run on a post's collected comments, runs the quote and prints the AI job;
    /// with --wait, waits until it ends and prints it with its result. Running it is consent to
    /// send the comment texts to the model the service is configured with.
    Run(AiRunArgs),
    /// Prints an AI job; with --wait, waits until it ends.
    Job {
        /// The AI job's id (`id` of the job `cova client ai run` printed).
        id: String,
        /// Wait until the AI job ends (polling once a second).
        #[arg(long)]
        wait: bool,
    },
}

#[derive(Debug, Args)]
pub struct AiRunArgs {
    /// The post's ref, `<platform>:<post_id>` (e.g. tiktok:7000000000000000012).
    #[arg(value_name = "REF")]
    pub reference: String,
    /// Comma-separated parts of the result: summary, sentiment, topics, questions, languages,
    /// spam, phrase_matches [default: all].
    #[arg(long, value_delimiter = ',', value_name = "TASKS")]
    pub tasks: Vec<String>,
    /// Run only if the quoted charge (comment units) is at most this; otherwise exit 5
    /// without running.
    #[arg(long, value_name = "UNITS")]
    pub max_charge: Option<u64>,
    /// Wait until the AI job ends (polling once a second), then print it with its result.
    #[arg(long)]
    pub wait: bool,
}
