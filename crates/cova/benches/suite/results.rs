//! `bench/results.md`: written whole by a full run, or with a section's rows replaced when that
//! section runs alone.

use super::{
    JOBS, JOBS_PER_ACCOUNT, LOAD_CONCURRENCY, LOAD_ROUNDS, LOAD_SECONDS, PLATFORM_LATENCY_MS, Report,
    THROUGHPUT_ACCOUNTS,
};
use std::fmt::Write as _;

/// Replaces the rows of a section run alone in the results (new rows go last) and notes the run.
pub(super) fn merge_results(report: &Report, section: &str) {
    let path = format!("{}/../../bench/results.md", env!("CARGO_MANIFEST_DIR"));
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("no {path} to merge into: run the whole bench first");
        return;
    };
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut header = Vec::new();
    for line in text.lines() {
        match line.strip_prefix("| ").and_then(|l| l.strip_suffix(" |")).and_then(|l| l.split_once(" | ")) {
            Some(("name", _)) => {}
            Some((name, value)) => rows.push((name.to_owned(), value.to_owned())),
            None if line.starts_with("|---") || line.is_empty() => {}
            None => header.push(line.to_owned()),
        }
    }
    rows.retain(|(name, _)| !report.lines.iter().any(|(n, _)| n == name));
    rows.extend(report.lines.iter().cloned());
    let commit = git_commit();
    let when = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    header.retain(|l| !l.starts_with(&format!("- section `{section}` re-run alone")));
    header.push(format!("- section `{section}` re-run alone: {when}, commit {commit}, {}", machine()));
    let mut out = String::new();
    // The title, a blank line, then the header's list.
    let (title, list) = header.split_first().map_or(("", &[][..]), |(t, l)| (t.as_str(), l));
    let _ = writeln!(out, "{title}\n\n{}\n", list.join("\n"));
    let _ = writeln!(out, "| name | value |\n|---|---|");
    for (name, value) in &rows {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    if let Err(e) = std::fs::write(&path, out) {
        eprintln!("writing {path}: {e}");
    }
}

/// The commit measured, marked when the working tree differs from it (the results file aside).
fn git_commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let changed = git(&["status", "--porcelain", "--untracked-files=no"]);
    if changed.lines().any(|l| !l.ends_with("bench/results.md")) {
        format!("{commit} with uncommitted changes")
    } else {
        commit
    }
}

/// The CPUs the bench ran on.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    format!("{cpus} CPUs, {cpu}")
}

pub(super) fn write_results(report: &Report) {
    let mut out = String::new();
    let commit = git_commit();
    let _ = writeln!(out, "# cova benchmark results\n");
    let _ = writeln!(out, "- date: {}", chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let _ = writeln!(out, "- commit: {commit}");
    let _ = writeln!(out, "- machine: {}", machine());
    let _ =
        writeln!(out, "- embedded: SQLite file, in-process queue, in-memory cache; real: PostgreSQL, Redis, RabbitMQ");
    let _ = writeln!(out, "- metrics: the Prometheus recorder installed, as in a deployed process");
    let _ = writeln!(
        out,
        "- load: wrk in its own process, {LOAD_CONCURRENCY} keep-alive connections, {LOAD_ROUNDS} rounds of {LOAD_SECONDS} s alternating the bare handler (in the bench process) and the gateway (a release `cova serve` process, access logs on); {JOBS} sequential jobs for job overhead; platform latency {PLATFORM_LATENCY_MS} ms for collection and throughput ({} jobs of 20 comments from {THROUGHPUT_ACCOUNTS} accounts per release `cova scraper` process, three running per account); CPU per request and per job from `/proc/<pid>/stat` of the gateway, Redis and scraper processes\n",
        THROUGHPUT_ACCOUNTS * JOBS_PER_ACCOUNT
    );
    let _ = writeln!(out, "| name | value |\n|---|---|");
    for (name, value) in &report.lines {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    let path = format!("{}/../../bench/results.md", env!("CARGO_MANIFEST_DIR"));
    if let Err(e) = std::fs::write(&path, out) {
        eprintln!("writing {path}: {e}");
    }
}
