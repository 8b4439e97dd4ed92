//! Races: many requests of one account at once never create more jobs, charges or limit
//! units than the rules allow.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::spawn_app_with_sim;
use serde_json::Value;
use std::collections::HashSet;

fn url(n: u64) -> String {
    format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_identical_requests_make_one_job_and_one_charge() {
    let app = spawn_app_with_sim(SimConfig { latency_ms: 50, ..SimConfig::default() }, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let client = app.client(Some(&token));
        tasks.push(tokio::spawn(async move { client.analyze(&url(25), None).await }));
    }
    let mut ids = HashSet::new();
    let mut created = 0;
    for t in tasks {
        let reply = t.await.expect("join");
        if reply.status == 202 {
            created += 1;
        }
        let body: Value = reply.ok();
        ids.insert(body["job_id"].as_str().expect("id").to_owned());
    }
    assert_eq!((created, ids.len()), (1, 1), "one job, every answer names it");
    let client = app.client(Some(&token));
    client.wait_job(ids.iter().next().expect("id")).await;
    assert_eq!(client.usage().await.ok().comments.used, 25);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_idempotency_key_twenty_times_at_once_makes_one_job() {
    let app = spawn_app_with_sim(SimConfig::default(), |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let client = app.client(Some(&token));
        tasks.push(tokio::spawn(async move { client.analyze(&url(8), Some("same-key")).await }));
    }
    let mut ids = HashSet::new();
    for t in tasks {
        ids.insert(t.await.expect("join").ok()["job_id"].as_str().expect("id").to_owned());
    }
    assert_eq!(ids.len(), 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_concurrency_limit_is_exact_under_twenty_parallel_requests() {
    // Slow platform answers while the twenty requests are decided, so that no accepted job can
    // finish (and free its slot) before the last request is answered, however loaded the
    // machine; then fast ones, so the accepted jobs finish soon.
    let app = spawn_app_with_sim(SimConfig { latency_ms: 2_000, ..SimConfig::default() }, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100_000).await;
    let mut tasks = Vec::new();
    for n in 0..20 {
        let client = app.client(Some(&token));
        tasks.push(tokio::spawn(async move { client.analyze(&url(100 + n), None).await }));
    }
    let (mut accepted, mut limited) = (Vec::new(), 0);
    for t in tasks {
        let reply = t.await.expect("join");
        match reply.status.as_u16() {
            202 => accepted.push(reply.ok()["job_id"].as_str().expect("id").to_owned()),
            429 => {
                assert_eq!(reply.err().1.code, "concurrency_limit");
                limited += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((accepted.len(), limited), (3, 17));
    app.sim.set_latency_ms(0);
    let client = app.client(Some(&token));
    let mut charged = 0;
    for id in &accepted {
        charged += client.wait_job(id).await["result"]["comments_total"].as_i64().expect("total");
    }
    assert_eq!(client.usage().await.ok().comments.used, charged);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parallel_jobs_spend_exactly_the_balance_and_never_more() {
    let app = spawn_app_with_sim(SimConfig::default(), |_| {}).await;
    // Fifty accounts would each have their own limit: one account, a balance for ten comments,
    // fifty posts of ten comments each, all at once, then again as slots free up.
    let (account, token) = app.integrator().await;
    app.grant(&account, 10).await;
    let mut tasks = Vec::new();
    for n in 0..50 {
        let client = app.client(Some(&token));
        tasks.push(tokio::spawn(async move { client.analyze(&url(10 + n), None).await }));
    }
    let mut accepted = Vec::new();
    for t in tasks {
        let reply = t.await.expect("join");
        match reply.status.as_u16() {
            202 => accepted.push(reply.ok()["job_id"].as_str().expect("id").to_owned()),
            402 | 429 => {}
            other => panic!("unexpected {other}: {:?}", reply.body),
        }
    }
    assert!(!accepted.is_empty());
    let client = app.client(Some(&token));
    let mut collected = 0;
    for id in &accepted {
        let done = client.wait_job(id).await;
        collected += done["result"]["comments_total"].as_i64().unwrap_or(0);
    }
    let usage = client.usage().await.ok();
    assert_eq!(usage.comments.used, collected, "charged exactly what was collected");
    assert!(usage.comments.used <= 10 && usage.comments.remaining >= 0);
    assert_eq!(usage.comments.used + usage.comments.remaining, 10);
    app.stop().await;
}

/// A workbook export of a post that is collected again meanwhile: the library's export answers
/// the breakdown of one scrape or the other, whole, and the old job's export the same or "no
/// longer kept" (404), never a server error.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exports_while_the_post_is_collected_again_answer_one_whole_breakdown() {
    use calamine::Reader as _;
    let app = spawn_app_with_sim(SimConfig::default(), |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 300);
    let r#ref = format!("tiktok:{id}");
    let first = client.collect(id).await;
    let first = first["job_id"].as_str().expect("job_id").to_owned();
    let rows = app.sim.expected_post(&id.to_string()).comments.iter().map(|c| 1 + c.replies.len()).sum::<usize>();

    let refresher = {
        let (client, r#ref) = (client.clone(), r#ref.clone());
        tokio::spawn(async move {
            for _ in 0..6 {
                let job = client.refresh(&r#ref).await.ok();
                let done = client.wait_job(job["job_id"].as_str().expect("job_id")).await;
                assert_eq!(done["status"], "complete", "{done}");
            }
        })
    };
    let workbook_rows = |body: &[u8]| {
        let mut book = calamine::Xlsx::new(std::io::Cursor::new(body.to_vec())).expect("an XLSX workbook");
        book.worksheet_range_at(0).expect("a sheet").expect("readable").rows().count() - 1
    };
    let (mut library, mut by_job) = (0, Vec::new());
    while !refresher.is_finished() {
        for path in [
            format!("/api/v1/analyses/{ref}/export?format=xlsx"),
            format!("/api/v1/analyze/{first}/export?format=xlsx"),
        ] {
            let (status, _, body) = client.raw(client.request(reqwest::Method::GET, &path)).await;
            if path.contains("/analyses/") {
                assert_eq!(status.as_u16(), 200, "{}", String::from_utf8_lossy(&body));
                assert_eq!(workbook_rows(&body), rows, "every comment of one scrape");
                library += 1;
            } else {
                assert!(matches!(status.as_u16(), 200 | 404), "{status}: {}", String::from_utf8_lossy(&body));
                if status == 200 {
                    assert_eq!(workbook_rows(&body), rows);
                }
                by_job.push(status.as_u16());
            }
        }
    }
    refresher.await.expect("the refreshes");
    assert!(library > 0 && by_job.last() == Some(&404), "library {library}, old job {by_job:?}");
    app.stop().await;
}
