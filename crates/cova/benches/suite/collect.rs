//! `COVA_BENCH_ONLY=collect`: a 5,000-comment TikTok post collected at platform latency, against
//! its sequential chain's bound and a naive page-after-page collection.

use super::{COLLECT_COMMENTS, PLATFORM_LATENCY_MS, Report};
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use std::time::{Duration, Instant};

/// Requests in flight per host for the collection bench: the politeness budget it runs with.
const COLLECT_IN_FLIGHT: usize = 8;

async fn collection_speed(report: &mut Report) {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("sim");
    let mut config = cova_config::Config::default();
    let default_rate = config.platforms.tiktok.requests_per_second;
    cova_tests::use_simulator(&mut config, &sim);
    config.platforms.tiktok.max_concurrency_per_host = COLLECT_IN_FLIGHT;
    let id = tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS);
    let post: cova_platforms::PostRef = format!("tiktok:{id}").parse().expect("ref");
    let count = |path: &str| sim.requests().iter().filter(|r| r.path.ends_with(path)).count() as f64;
    // The sequential chain's pages, counted without latency: the bound is the chain walked at it.
    let mut chain_config = config.platforms.clone();
    chain_config.tiktok.list_prefetch = 0;
    let chain = cova_platforms::Platforms::new(&chain_config).expect("platforms");
    sim.clear_requests();
    let mut sink = cova_platforms::VecSink::default();
    chain.collect_comments(&post, COLLECT_COMMENTS as u32, &mut sink).await.expect("collect");
    let (chain_top, chain_replies) = (count("/comment/list/"), count("/comment/list/reply/"));

    let platforms = cova_platforms::Platforms::new(&config.platforms).expect("platforms");
    sim.set_latency_ms(PLATFORM_LATENCY_MS);
    sim.clear_requests();
    let started = Instant::now();
    let mut sink = cova_platforms::VecSink::default();
    let outcome = platforms.collect_comments(&post, COLLECT_COMMENTS as u32, &mut sink).await.expect("collect");
    let took = started.elapsed();
    let (top, replies) = (count("/comment/list/"), count("/comment/list/reply/"));
    let latency = PLATFORM_LATENCY_MS as f64 / 1000.0;
    let bound = chain_top * latency;
    let tiktok = &config.platforms.tiktok;
    report.add(
        "collect_politeness_budget",
        format!(
            "{COLLECT_IN_FLIGHT} requests in flight per host (up to {} top-level chains, {} reply lists), {PLATFORM_LATENCY_MS} ms per request, no rate limit",
            1 + tiktok.list_prefetch,
            tiktok.reply_parallelism
        ),
    );
    // The fewest requests the page sizes allow: every page full (35 here), no reply request
    // for a parent whose preview holds its replies (2 here).
    let truth = sim.expected_post(&id.to_string());
    let page = f64::from(SimConfig::default().tiktok_page_max);
    let minimum_list = (truth.comments.len() as f64 / page).ceil();
    let minimum_replies: f64 =
        truth.comments.iter().filter(|c| c.replies.len() > 2).map(|c| (c.replies.len() as f64 / page).ceil()).sum();
    report.add(
        "collect_5000_requests_vs_minimum",
        format!(
            "{:.3} ({} vs {minimum_list} list + {minimum_replies} reply pages)",
            (top + replies) / (minimum_list + minimum_replies),
            top + replies
        ),
    );
    report.add(
        "collect_5000_comments",
        format!("{:.2} s ({} comments, {top} list + {replies} reply pages)", took.as_secs_f64(), outcome.collected),
    );
    report.add(
        "collect_5000_sequential_chain",
        format!("{chain_top} list + {chain_replies} reply pages; bound {bound:.2} s ({chain_top} list pages one after the other)"),
    );
    report.add("collect_5000_ratio_to_bound", format!("{:.2}", took.as_secs_f64() / bound));
    report.add(
        "collect_5000_requests_vs_chain",
        format!(
            "{:.2} ({} vs {})",
            (top + replies) / (chain_top + chain_replies),
            top + replies,
            chain_top + chain_replies
        ),
    );
    report.add(
        "collect_5000_at_default_rate",
        format!(
            "{:.1} s at least ({} requests at {default_rate} per second per host)",
            (top + replies) / default_rate,
            top + replies
        ),
    );

    // The naive way: one page after the other, replies after the list, no overlap.
    let naive = naive_collect(sim.base_url(), id).await;
    report.add("collect_5000_naive_sequential", format!("{:.2} s", naive.as_secs_f64()));
    report.add("collect_5000_speedup_vs_naive", format!("{:.2}", naive.as_secs_f64() / took.as_secs_f64()));
    sim.stop().await;
}

async fn naive_collect(base: &str, id: u64) -> Duration {
    let http = reqwest::Client::new();
    let started = Instant::now();
    let mut cursor = 0u64;
    let mut parents = Vec::new();
    let mut seen = std::collections::HashSet::new();
    loop {
        let page: serde_json::Value = http
            .get(format!("{base}/api/comment/list/?aid=1988&aweme_id={id}&cursor={cursor}&count=50"))
            .send()
            .await
            .expect("page")
            .json()
            .await
            .expect("json");
        let comments = page["comments"].as_array().cloned().unwrap_or_default();
        for c in &comments {
            let cid = c["cid"].as_str().unwrap_or_default().to_owned();
            if seen.insert(cid.clone()) && c["reply_comment_total"].as_u64().unwrap_or(0) > 0 {
                parents.push(cid);
            }
        }
        let next = page["cursor"].as_u64().unwrap_or(cursor);
        if comments.is_empty() || next == cursor || seen.len() as u64 >= COLLECT_COMMENTS {
            break;
        }
        cursor = next;
    }
    for parent in parents {
        let mut cursor = 0u64;
        loop {
            let page: serde_json::Value = http
                .get(format!(
                    "{base}/api/comment/list/reply/?aid=1988&item_id={id}&comment_id={parent}&cursor={cursor}&count=50"
                ))
                .send()
                .await
                .expect("reply page")
                .json()
                .await
                .expect("json");
            let n = page["comments"].as_array().map_or(0, Vec::len);
            let next = page["cursor"].as_u64().unwrap_or(cursor);
            if n == 0 || page["has_more"].as_u64() == Some(0) || next == cursor {
                break;
            }
            cursor = next;
        }
    }
    started.elapsed()
}

pub(super) async fn run(report: &mut Report) {
    collection_speed(report).await;
}
