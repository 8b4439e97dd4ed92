//! `COVA_BENCH_ONLY=ai`: the ai-worker fleet on the real backends. The offline analyzer's quality
//! on the labelled set and its speed (`analyzer_quality`) are here too; only the whole bench
//! runs them.

use super::{PLATFORM_LATENCY_MS, RealBackends, Report, RoleProcess, common, count_rows, ms, post_of_20, submit};
use cova_sim::SimConfig;
use cova_tests::Scraper;
use std::time::{Duration, Instant};

/// AI runs per account in the AI fleet bench: as many as an account may have running.
const AI_RUNS_PER_ACCOUNT: u64 = cova_domain::limits::MAX_RUNNING_AI_JOBS as u64;

/// AI jobs per second with `processes` `cova ai-worker` processes (the OpenAI-compatible
/// analyzer against the simulator's model at `PLATFORM_LATENCY_MS` per request). The posts
/// are collected first, by as many scraper processes; then every post's AI run is queued at
/// once, 16 accounts' worth per process.
async fn ai_throughput(real: &RealBackends, processes: usize) -> f64 {
    let sim = SimConfig { latency_ms: PLATFORM_LATENCY_MS, ..SimConfig::default() };
    let mut app = real.app(sim, Scraper::External).await;
    app.config.platforms.tiktok.requests_per_second = 0.0;
    let accounts = 16 * processes as u64;
    let jobs = (accounts * AI_RUNS_PER_ACCOUNT) as i64;
    let scrapers: Vec<RoleProcess> = (0..processes).map(|_| RoleProcess::scraper(&app)).collect();
    let mut collecting = tokio::task::JoinSet::new();
    for a in 0..accounts {
        let (account, token) = app.integrator().await;
        app.grant(&account, 10_000).await;
        let client = app.client(Some(&token));
        collecting.spawn(async move {
            let mut refs = Vec::new();
            for k in 0..AI_RUNS_PER_ACCOUNT {
                let job = submit(&client, &post_of_20(a * AI_RUNS_PER_ACCOUNT + k)).await;
                refs.push(job["ref"].as_str().unwrap_or_default().to_owned());
            }
            (client, refs)
        });
    }
    // Each account's client with the refs it collected (the tasks end in any order).
    let collected: Vec<(cova_tests::client::Client, Vec<String>)> = collecting.join_all().await;
    let deadline = Instant::now() + Duration::from_secs(300);
    while app.job_progress().await.complete < jobs {
        assert!(Instant::now() < deadline, "the posts were not collected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(scrapers);

    let c = &app.config;
    let ai = common::Cova::sharing(
        c,
        &[
            ("COVA_AI__ANALYZER", "openai".to_owned()),
            ("COVA_AI__OPENAI__BASE_URL", c.ai.openai.base_url.clone()),
            ("COVA_AI__OPENAI__API_KEY", cova_sim::LLM_API_KEY.to_owned()),
            ("COVA_AI__OPENAI__MODEL", c.ai.openai.model.clone()),
        ],
    );
    let workers: Vec<RoleProcess> =
        (0..processes).map(|_| RoleProcess { child: ai.start_until("ai-worker", "consuming") }).collect();
    let mut running = tokio::task::JoinSet::new();
    for (client, refs) in collected {
        running.spawn(async move {
            for r#ref in refs {
                let quote = client.post_json("/api/v1/ai/quote", serde_json::json!({"ref": r#ref})).await.ok();
                let run = client.post_json("/api/v1/ai/run", serde_json::json!({"quote_id": quote["quote_id"]})).await;
                assert!(run.status.is_success(), "AI run: {} {:?}", run.status, run.body);
            }
        });
    }
    running.join_all().await;
    let deadline = Instant::now() + Duration::from_secs(300);
    let done = "SELECT COUNT(*) AS n FROM jobs WHERE kind = 'ai' AND status IN ('complete', 'failed')";
    while count_rows(app.db(), done).await < jobs {
        assert!(Instant::now() < deadline, "the AI jobs did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(workers);
    let failed = count_rows(app.db(), "SELECT COUNT(*) AS n FROM jobs WHERE kind = 'ai' AND status = 'failed'").await;
    assert_eq!(failed, 0, "no AI job fails");
    let span_ms =
        count_rows(app.db(), "SELECT MAX(finished_at) - MIN(created_at) AS n FROM jobs WHERE kind = 'ai'").await;
    app.stop().await;
    jobs as f64 / (span_ms.max(1) as f64 / 1000.0)
}

/// The ai-worker fleet: 1, 2 and 4 processes on one queue.
pub(super) async fn ai_fleet(report: &mut Report, real: &RealBackends) {
    let one = ai_throughput(real, 1).await;
    let concurrency = cova_config::Config::default().ai.concurrency;
    report.add(
        "ai_throughput_1_worker",
        format!(
            "{one:.1} AI jobs/s ({concurrency} at once per process; model at {PLATFORM_LATENCY_MS} ms per request)"
        ),
    );
    for n in [2usize, 4] {
        let fleet = ai_throughput(real, n).await;
        report.add(&format!("ai_throughput_{n}_workers"), format!("{fleet:.1} AI jobs/s"));
        report.add(&format!("ai_throughput_scaling_{n}_vs_1"), format!("{:.2}", fleet / one));
    }
}

/// The offline analyzer against the labelled set (`tests/data/labelled-comments.jsonl`):
/// sentiment accuracy and macro-F1, question and spam F1, per language and overall; then its
/// speed on the 5,000-comment post, everything computed (topics, questions, summary).
pub(super) async fn analyzer_quality(report: &mut Report, texts: &[String]) {
    use cova_analyzers::{Analyzer, Comment, Label, Offline};
    let path = format!("{}/../../tests/data/labelled-comments.jsonl", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read_to_string(&path).expect("the labelled set");
    let rows: Vec<serde_json::Value> =
        data.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    let offline = Offline::new();
    let mut langs: Vec<String> = rows.iter().map(|r| r["lang"].as_str().unwrap_or_default().to_owned()).collect();
    langs.sort();
    langs.dedup();
    langs.push("all".into());
    for lang in &langs {
        let subset: Vec<&serde_json::Value> =
            rows.iter().filter(|r| lang == "all" || r["lang"] == lang.as_str()).collect();
        let mut sentiment = Vec::new();
        let mut question = Vec::new();
        let mut spam = Vec::new();
        let mut detected = Vec::new();
        for r in &subset {
            let got = offline.label(r["text"].as_str().unwrap_or_default());
            let truth = Label::parse(r["sentiment"].as_str().unwrap_or_default()).unwrap_or(Label::Neutral);
            sentiment.push((truth, got.sentiment));
            question.push((r["question"].as_bool().unwrap_or(false), got.question));
            spam.push((r["spam"].as_bool().unwrap_or(false), got.spam));
            detected.push((r["lang"].as_str().unwrap_or_default() == got.language, true));
        }
        let macro_f1 = Label::ALL.iter().map(|l| f1(&sentiment, *l)).sum::<f64>() / 3.0;
        report.add(
            &format!("analyzer_offline_{lang}"),
            format!(
                "{} comments: sentiment accuracy {:.2}, macro-F1 {:.2}; question F1 {:.2}; spam F1 {:.2}; language detected {:.2}",
                subset.len(),
                accuracy(&sentiment),
                macro_f1,
                f1(&question, true),
                f1(&spam, true),
                accuracy(&detected)
            ),
        );
    }
    let comments: Vec<Comment> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Comment { id: i.to_string(), text: t.clone(), ..Comment::default() })
        .collect();
    let phrases = vec!["where to buy".to_owned(), "price".to_owned(), "shipping".to_owned()];
    let started = Instant::now();
    let result = offline.analyze(&comments, &phrases).await.expect("offline analysis");
    let took = started.elapsed();
    report.add(
        "analyzer_offline_speed_5000_comments",
        format!(
            "{:.0} comments/s ({} in {}, {} topics)",
            comments.len() as f64 / took.as_secs_f64(),
            result.comments,
            ms(took),
            result.topics.len()
        ),
    );
    // What each newly stored comment costs once: its labels, judged by the first spike check
    // after its collection (on the blocking pool, as there).
    let cpu_before = super::cpu_time(std::process::id());
    let judged = Offline::label_all(texts.to_vec()).await;
    let per_1000 = super::cpu_time(std::process::id()).saturating_sub(cpu_before) * 1_000 / judged.len().max(1) as u32;
    report.add(
        "sentiment_judged_once_per_1000_comments",
        format!(
            "{} of CPU ({} comments of the 5,000-comment post; judged once, at the first spike check after the collection that stored them; compare scraper_cpu_per_1000_comments)",
            ms(per_1000),
            judged.len()
        ),
    );
    // The same comments with the sentiments a spike check stored (an AI job on a post of the
    // library reads them): the same result, without judging the texts' sentiment again.
    let stored: Vec<Comment> =
        comments.iter().map(|c| Comment { sentiment: Some(offline.label(&c.text).sentiment), ..c.clone() }).collect();
    let started = Instant::now();
    let with_labels = offline.analyze(&stored, &phrases).await.expect("offline analysis");
    let took_stored = started.elapsed();
    assert_eq!(with_labels, result, "stored labels give the same result");
    report.add(
        "analyzer_offline_speed_5000_comments_stored_labels",
        format!(
            "{:.0} comments/s ({} in {}, the stored sentiments read instead of judged: {:.0} % of the time above, the same result)",
            comments.len() as f64 / took_stored.as_secs_f64(),
            with_labels.comments,
            ms(took_stored),
            took_stored.as_secs_f64() / took.as_secs_f64() * 100.0
        ),
    );
}

/// F1 of one class from (truth, predicted) pairs.
fn f1<T: PartialEq + Copy>(pairs: &[(T, T)], class: T) -> f64 {
    let tp = pairs.iter().filter(|(t, p)| *t == class && *p == class).count() as f64;
    let fp = pairs.iter().filter(|(t, p)| *t != class && *p == class).count() as f64;
    let fn_ = pairs.iter().filter(|(t, p)| *t == class && *p != class).count() as f64;
    if tp == 0.0 { 0.0 } else { 2.0 * tp / (2.0 * tp + fp + fn_) }
}

fn accuracy<T: PartialEq>(pairs: &[(T, T)]) -> f64 {
    pairs.iter().filter(|(t, p)| t == p).count() as f64 / pairs.len().max(1) as f64
}

pub(super) async fn run(report: &mut Report, real: &RealBackends) {
    if real.reachable() {
        guarded_on_real!(report, "ai_fleet", real, ai_fleet);
    }
}
