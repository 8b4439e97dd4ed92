//! `cova client …`: the integrator's command line over a cova service's HTTP API. It reads no
//! server configuration and starts no telemetry: it needs only a URL and a token (see
//! `config.rs`). Errors end the process with the exit code of their class (see `exit.rs`).

mod args;
mod batch;
mod config;
pub mod exit;
mod http;
mod output;
mod progress;

pub use self::args::ClientArgs;

use self::args::{
    AiCommand, AiRunArgs, ClientCommand, ExportArgs, ExportFormat, LibraryCommand, ResultFormat, ResultOutput,
    SearchArgs,
};
use self::exit::Exit;
use self::http::{AiJobView, Api, JobView, QuoteView, view};
use self::output::Sink;
use self::progress::Progress;
use serde_json::Value;
use std::io::IsTerminal;
use std::time::Duration;

/// How often a job is polled: the API asks for once every 1 to 2 seconds, and a job that
/// ends is then known a second after it ends at most.
const POLL: Duration = Duration::from_millis(1_000);
/// Failed polls in a row (the service unreachable, 503, 429) tolerated while waiting.
const POLL_RETRIES: u32 = 5;
/// The longest pause a `Retry-After` may impose on a poll.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// An error of `cova client`: what to tell the user (`detail`, and the API's `code` when there
/// is one) and the exit code's class.
#[derive(Debug)]
pub struct ClientError {
    pub exit: Exit,
    pub detail: String,
    pub code: Option<String>,
    /// Seconds the service asked to wait (`Retry-After`).
    pub retry_after: Option<u64>,
}

impl ClientError {
    pub fn new(exit: Exit, detail: impl Into<String>) -> Self {
        Self { exit, detail: detail.into(), code: None, retry_after: None }
    }

    /// Worth polling again: the service is unreachable or busy for now.
    fn is_transient(&self) -> bool {
        self.exit == Exit::Unavailable || self.code.as_deref() == Some("rate_limited")
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} ({code})", self.detail),
            None => f.write_str(&self.detail),
        }
    }
}

impl std::error::Error for ClientError {}

pub async fn run(args: ClientArgs) -> Result<(), ClientError> {
    check_usage(&args.command)?;
    let settings = config::Settings::resolve(args.url.as_deref())?;
    let api = Api::new(settings.base, settings.token, Duration::from_secs(args.timeout))?;
    match args.command {
        ClientCommand::Analyze(a) => {
            let urls = post_urls(&a)?;
            if a.preview {
                let mut previews = Vec::new();
                for chunk in urls.chunks(cova_domain::limits::MAX_BATCH_URLS) {
                    previews.push(api.preview(chunk, a.max_comments).await?);
                }
                return match previews.as_slice() {
                    [one] => output::print_json(one),
                    _ => output::print_json(&serde_json::Value::Array(previews)),
                };
            }
            if a.wait {
                // Before anything is started and paid for.
                output::check_destination(a.output.output.as_deref())?;
                if let Some(dir) = &a.output_dir {
                    output::check_directory(dir)?;
                }
            }
            if let [url] = urls.as_slice()
                && a.output_dir.is_none()
            {
                return analyze_one(&api, url, &a).await;
            }
            batch::run(&api, &urls, &a).await
        }
        ClientCommand::Job(j) => deliver(&api, &j.job_id, &j.output).await,
        ClientCommand::Metadata { post_url } => output::print_json(&api.metadata(&post_url).await?),
        ClientCommand::Usage => output::print_json(&api.usage().await?),
        ClientCommand::Library(LibraryCommand::List(l)) => {
            let mut filters = Vec::new();
            if let Some(p) = l.platform {
                filters.push(("platform", p.as_str().to_owned()));
            }
            if let Some(s) = l.status {
                filters.push(("status", s.as_str().to_owned()));
            }
            if let Some(w) = l.watched {
                filters.push(("watched", w.to_string()));
            }
            if let Some(q) = l.query {
                filters.push(("q", q));
            }
            let filters: Vec<(&str, &str)> = filters.iter().map(|(k, v)| (*k, v.as_str())).collect();
            output::print_json(&api.library(&filters).await?)
        }
        ClientCommand::Library(LibraryCommand::Get { reference }) => output::print_json(&api.entry(&reference).await?),
        ClientCommand::Library(LibraryCommand::Export(e)) => export(&api, &e).await,
        ClientCommand::Ai(AiCommand::Run(r)) => ai_run(&api, &r).await,
        ClientCommand::Ai(AiCommand::Job { id, wait }) => {
            let job = if wait { wait_ai(&api, &id).await? } else { api.ai_job(&id).await? };
            output::print_json(&job)
        }
        ClientCommand::Search(s) => search(&api, &s).await,
    }
}

/// `search`: every hit as JSON, or the service's export of them.
async fn search(api: &Api, args: &SearchArgs) -> Result<(), ClientError> {
    let params = args.params();
    let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    write_file_or_json(
        args.output.as_deref(),
        args.format,
        async || api.search(&params).await,
        async |format, sink| api.search_export(&params, format, sink).await,
    )
    .await
}

/// One post: its job, and with --wait its comments.
async fn analyze_one(api: &Api, url: &str, a: &args::AnalyzeArgs) -> Result<(), ClientError> {
    let job = api.analyze(url, a.max_comments).await?;
    let state: JobView = view(&job)?;
    if a.wait {
        return deliver(api, &state.job_id, &a.output).await;
    }
    let mut line = format!("{} {}", state.job_id, state.status);
    if let Some(dedup) = &state.deduplicated {
        line.push(' ');
        line.push_str(dedup);
    }
    output::print_line(&line)
}

/// The post URLs of `analyze`: the arguments, then the lines of --from-file.
fn post_urls(a: &args::AnalyzeArgs) -> Result<Vec<String>, ClientError> {
    let mut urls = a.post_urls.clone();
    if let Some(path) = &a.from_file {
        let text = if path.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(path)
        }
        .map_err(|e| ClientError::new(Exit::Other, format!("cannot read {}: {e}", path.display())))?;
        urls.extend(text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned));
    }
    if urls.is_empty() {
        return Err(ClientError::new(Exit::Usage, "no post URL: give one or more, or --from-file FILE"));
    }
    Ok(urls)
}

/// Argument combinations clap cannot check, refused before anything is sent (exit 2).
fn check_usage(command: &ClientCommand) -> Result<(), ClientError> {
    match command {
        ClientCommand::Analyze(a)
            if !a.wait && (a.output.format.is_some() || a.output.output.is_some() || a.output_dir.is_some()) =>
        {
            Err(ClientError::new(
                Exit::Usage,
                "--format, --output and --output-dir need --wait (without it only the job ids are printed)",
            ))
        }
        ClientCommand::Library(LibraryCommand::Export(ExportArgs { format: ExportFormat::Xlsx, output, .. }))
        | ClientCommand::Search(SearchArgs { format: ExportFormat::Xlsx, output, .. })
            if output.as_deref().is_none_or(|p| p.as_os_str() == "-") && std::io::stdout().is_terminal() =>
        {
            Err(ClientError::new(
                Exit::Usage,
                "an XLSX file is binary: write it with --output FILE, or redirect stdout",
            ))
        }
        _ => Ok(()),
    }
}

/// Waits for an analyze job, then writes its comments in the format asked.
///
/// JSON is the job as `GET /analyze/{job_id}` returns it, every page joined. CSV and JSON Lines
/// are the service's export of the job (`GET /analyze/{job_id}/export`); should a later scrape
/// have replaced its comments meanwhile, the post's current breakdown is written instead.
async fn deliver(api: &Api, job_id: &str, out: &ResultOutput) -> Result<(), ClientError> {
    let dest = out.output.as_deref();
    output::check_destination(dest)?;
    let done = wait_job(api, job_id).await?;
    let mut sink = Sink::open(dest)?;
    write_job(api, job_id, &done, out.format.unwrap_or(ResultFormat::Json), &mut sink, false).await?;
    sink.finish()
}

/// Writes a complete job's comments into `sink`; `continued` when the sink already holds
/// another job's (a combined file: no second CSV header).
pub(crate) async fn write_job(
    api: &Api,
    job_id: &str,
    done: &Value,
    format: ResultFormat,
    sink: &mut Sink,
    continued: bool,
) -> Result<(), ClientError> {
    let result = view::<JobView>(done)?
        .result
        .ok_or_else(|| ClientError::new(Exit::Other, format!("job {job_id} is complete but has no result")))?;
    if result.released {
        eprintln!(
            "cova: note: a later scrape of {} replaced the comments of job {job_id}; {}",
            result.analysis_id,
            match format {
                ResultFormat::Csv | ResultFormat::Jsonl => "writing the post's current breakdown",
                ResultFormat::Json => "its result has no comments any more",
            }
        );
    }
    let rows = match format {
        ResultFormat::Json => return output::write_json(sink, &api.whole_job(job_id).await?),
        ResultFormat::Csv => "csv",
        ResultFormat::Jsonl => "jsonl",
    };
    if result.released {
        api.export(&result.analysis_id, rows, sink).await
    } else {
        api.export_job(job_id, rows, sink, continued).await
    }
}

/// Polls an analyze job (one comment per poll: the cheap form) until it ends; returns the
/// complete job, or the job's failure as an error (exit 6).
async fn wait_job(api: &Api, job_id: &str) -> Result<Value, ClientError> {
    let show = |bar: &mut Progress, job: &Value| {
        let state: JobView = view(job)?;
        bar.comments(&state.status, state.progress.comments_collected, state.progress.comments_expected);
        Ok(Polled { status: state.status, error: state.error })
    };
    poll_until_done("job", job_id, || api.job(job_id, Some(1), None), show).await
}

/// Polls an AI job until it ends; returns the complete job, or its failure as an error.
async fn wait_ai(api: &Api, id: &str) -> Result<Value, ClientError> {
    let show = |bar: &mut Progress, job: &Value| {
        let state: AiJobView = view(job)?;
        bar.status(&format!("AI job {}", state.id), &state.status);
        Ok(Polled { status: state.status, error: state.error })
    };
    poll_until_done("AI job", id, || api.ai_job(id), show).await
}

/// What one poll tells: the job's status and, once it failed, why.
pub(crate) struct Polled {
    pub(crate) status: String,
    pub(crate) error: Option<http::ErrorView>,
}

/// The one polling loop: every [`POLL`], a transient failure (unreachable, 503, 429) tolerated
/// [`POLL_RETRIES`] times in a row after its `Retry-After`, until the job is `complete` (its
/// JSON) or `failed` (exit 6).
pub(crate) async fn poll_until_done<Fut>(
    what: &str,
    id: &str,
    mut fetch: impl FnMut() -> Fut,
    mut show: impl FnMut(&mut Progress, &Value) -> Result<Polled, ClientError>,
) -> Result<Value, ClientError>
where
    Fut: std::future::Future<Output = Result<Value, ClientError>>,
{
    let mut bar = Progress::on_stderr();
    let mut failures = 0;
    loop {
        let pause = match fetch().await {
            Ok(job) => {
                failures = 0;
                let polled = show(&mut bar, &job)?;
                match polled.status.as_str() {
                    "complete" => return Ok(job),
                    "failed" => {
                        bar.finish();
                        return Err(job_failed(what, id, polled.error));
                    }
                    _ => POLL,
                }
            }
            Err(e) if e.is_transient() && failures < POLL_RETRIES => {
                failures += 1;
                backoff(&e)
            }
            Err(e) => return Err(e),
        };
        tokio::time::sleep(pause).await;
    }
}

fn backoff(e: &ClientError) -> Duration {
    e.retry_after.map_or(POLL, |s| Duration::from_secs(s).clamp(POLL, MAX_BACKOFF))
}

fn job_failed(what: &str, id: &str, error: Option<http::ErrorView>) -> ClientError {
    let (detail, code) = match error {
        Some(e) => (format!("{what} {id} failed: {}", e.detail), Some(e.code)),
        None => (format!("{what} {id} failed"), None),
    };
    ClientError { exit: Exit::JobFailed, detail, code, retry_after: None }
}

/// `library export`: the service's file for csv, jsonl and xlsx; the entry with every comment
/// for json.
async fn export(api: &Api, args: &ExportArgs) -> Result<(), ClientError> {
    write_file_or_json(
        args.output.as_deref(),
        args.format,
        async || api.entry(&args.reference).await,
        async |format, sink| api.export(&args.reference, format, sink).await,
    )
    .await
}

/// Writes into `dest` (stdout when `None`) what `json` answers for json, else the service's
/// file in `format`, streamed by `file`.
async fn write_file_or_json(
    dest: Option<&std::path::Path>,
    format: ExportFormat,
    json: impl AsyncFnOnce() -> Result<Value, ClientError>,
    file: impl AsyncFnOnce(&str, &mut Sink) -> Result<(), ClientError>,
) -> Result<(), ClientError> {
    output::check_destination(dest)?;
    let format = match format {
        ExportFormat::Json => {
            let value = json().await?;
            let mut sink = Sink::open(dest)?;
            output::write_json(&mut sink, &value)?;
            return sink.finish();
        }
        ExportFormat::Csv => "csv",
        ExportFormat::Jsonl => "jsonl",
        ExportFormat::Xlsx => "xlsx",
    };
    let mut sink = Sink::open(dest)?;
    file(format, &mut sink).await?;
    sink.finish()
}

/// `ai run`: quote, check the charge against `--max-charge`, run the quote, and with `--wait`
/// poll the AI job until it ends.
async fn ai_run(api: &Api, args: &AiRunArgs) -> Result<(), ClientError> {
    let quote: QuoteView = view(&api.ai_quote(&args.reference, &args.tasks).await?)?;
    if let Some(max) = args.max_charge
        && quote.charge > max
    {
        return Err(ClientError::new(
            Exit::Balance,
            format!(
                "the AI run of {} ({} comments) costs {} comment units, more than --max-charge {max}; nothing was run",
                args.reference, quote.comments, quote.charge
            ),
        ));
    }
    if std::io::stderr().is_terminal() {
        eprintln!(
            "cova: running quote {}: {} comments, {} comment units",
            quote.quote_id, quote.comments, quote.charge
        );
    }
    let job = api.ai_run(&quote.quote_id).await?;
    if !args.wait {
        return output::print_json(&job);
    }
    let id = view::<AiJobView>(&job)?.id;
    output::print_json(&wait_ai(api, &id).await?)
}
