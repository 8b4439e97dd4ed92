//! `cova client analyze` with several posts: started as batches of up to
//! [`MAX_BATCH_URLS`], one line per post; with `--wait`, every collected post's comments in
//! one combined file or one file per post, and each post that was not collected named on stderr.

use super::args::{AnalyzeArgs, ResultFormat};
use super::exit::Exit;
use super::http::{Api, BatchItemView, BatchView, view};
use super::output::{self, Sink};
use super::progress::Progress;
use super::{ClientError, Polled, poll_until_done, write_job};
use cova_domain::limits::MAX_BATCH_URLS;
use serde_json::Value;

pub async fn run(api: &Api, urls: &[String], a: &AnalyzeArgs) -> Result<(), ClientError> {
    let mut batches = Vec::new();
    for chunk in urls.chunks(MAX_BATCH_URLS) {
        let batch: BatchView = view(&api.batch(chunk, a.max_comments).await?)?;
        eprintln!("cova: batch {} started for {} posts", batch.batch_id, batch.items.len());
        batches.push(batch);
    }
    if !a.wait {
        for item in batches.iter().flat_map(|b| &b.items) {
            output::print_line(&line(item))?;
        }
        return verdict(&batches);
    }
    let mut ended = Vec::with_capacity(batches.len());
    for batch in &batches {
        ended.push(wait(api, &batch.batch_id).await?);
    }
    let format = a.output.format.unwrap_or(ResultFormat::Json);
    let done: Vec<&BatchItemView> =
        ended.iter().flat_map(|b| &b.items).filter(|i| i.state == "complete" && i.job.is_some()).collect();
    match &a.output_dir {
        Some(dir) => {
            for item in &done {
                let (Some(job), Some(r#ref)) = (&item.job, &item.r#ref) else { continue };
                let name = format!("{}.{}", r#ref.replace(':', "-"), extension(format));
                let mut sink = Sink::open(Some(&dir.join(name)))?;
                let polled = api.job(&job.job_id, Some(1), None).await?;
                write_job(api, &job.job_id, &polled, format, &mut sink, false).await?;
                sink.finish()?;
            }
        }
        None => {
            let mut sink = Sink::open(a.output.output.as_deref())?;
            if format == ResultFormat::Json {
                let mut jobs = Vec::with_capacity(done.len());
                for item in &done {
                    if let Some(job) = &item.job {
                        jobs.push(api.whole_job(&job.job_id).await?);
                    }
                }
                output::write_json(&mut sink, &Value::Array(jobs))?;
            } else {
                for (n, item) in done.iter().enumerate() {
                    let Some(job) = &item.job else { continue };
                    let polled = api.job(&job.job_id, Some(1), None).await?;
                    write_job(api, &job.job_id, &polled, format, &mut sink, n > 0).await?;
                }
            }
            sink.finish()?;
        }
    }
    for item in ended.iter().flat_map(|b| &b.items).filter(|i| i.state != "complete") {
        eprintln!("cova: {}", line(item));
    }
    verdict(&ended)
}

/// `<job_id> <state> <url>`, with the deduplication or why the post was refused.
fn line(item: &BatchItemView) -> String {
    let job = item.job.as_ref().map_or("-", |j| j.job_id.as_str());
    let mut line = format!("{job} {} {}", item.state, item.url);
    if let Some(dedup) = item.job.as_ref().and_then(|j| j.deduplicated.as_deref()) {
        line.push(' ');
        line.push_str(dedup);
    }
    let error = item.error.as_ref().or_else(|| item.job.as_ref().and_then(|j| j.error.as_ref()));
    if let Some(e) = error {
        line.push_str(&format!(" {}: {}", e.code, e.detail));
    }
    line
}

/// Success when every post was taken (or collected, once waited for); else the class of the
/// first post that was not, so that a script can tell a short balance from a bad URL.
fn verdict(batches: &[BatchView]) -> Result<(), ClientError> {
    let items: Vec<&BatchItemView> = batches.iter().flat_map(|b| &b.items).collect();
    let missed: Vec<&&BatchItemView> =
        items.iter().filter(|i| matches!(i.state.as_str(), "refused" | "failed" | "cancelled")).collect();
    let Some(first) = missed.first() else { return Ok(()) };
    let exit = match (&first.error, first.state.as_str()) {
        (Some(e), _) => Exit::from_answer(0, Some(&e.code)),
        (None, "failed") => Exit::JobFailed,
        _ => Exit::Other,
    };
    Err(ClientError::new(
        exit,
        format!("{} of {} posts were not collected (each is named above)", missed.len(), items.len()),
    ))
}

/// Polls a batch until none of its posts waits or runs.
async fn wait(api: &Api, id: &str) -> Result<BatchView, ClientError> {
    let show = |bar: &mut Progress, batch: &Value| {
        let state: BatchView = view(batch)?;
        let over = state.items.iter().filter(|i| !matches!(i.state.as_str(), "waiting" | "running")).count();
        bar.status(&format!("batch {id}"), &format!("{over} of {} posts done", state.items.len()));
        let status = if state.status == "running" { "running" } else { "complete" };
        Ok(Polled { status: status.to_owned(), error: None })
    };
    view(&poll_until_done("batch", id, || api.batch_state(id), show).await?)
}

fn extension(format: ResultFormat) -> &'static str {
    match format {
        ResultFormat::Json => "json",
        ResultFormat::Csv => "csv",
        ResultFormat::Jsonl => "jsonl",
    }
}
