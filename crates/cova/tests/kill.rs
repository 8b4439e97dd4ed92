//! A worker killed mid-job (SIGKILL, no goodbye) and started again: the job completes once
//! and is charged once. On the embedded backends the killed process is `cova serve`; with a
//! networked queue the gateway keeps running and only `cova scraper` is killed.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_testdb::TestDatabase;
use cova_tests::{WAIT, until, until_within};
use serde_json::{Value, json};
use std::process::Child;
use std::time::Duration;

use crate::common::Cova;

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

async fn job(http: &reqwest::Client, base: &str, token: &str, id: &str) -> Value {
    http.get(format!("{base}/api/v1/analyze/{id}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json")
}

/// The scraper's lease in this test.
const LEASE_MS: u64 = 3_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scraper_killed_mid_job_completes_it_once_after_restart() {
    let db = TestDatabase::create().await;
    let sim = cova_sim::spawn(SimConfig { latency_ms: 30, ..SimConfig::default() }).await.expect("simulator");
    let prefix = format!("k{}", std::process::id());
    let queue_url = std::env::var("COVA_TEST_QUEUE_URL").ok();
    let mut extra = vec![
        ("COVA_PLATFORMS__TIKTOK__RETRY_BASE_MS", "5".to_owned()),
        // A short lease: the takeover is what is tested, not how long the deployed lease is.
        ("COVA_SCRAPER__LEASE_MS", LEASE_MS.to_string()),
    ];
    extra.extend(queue_url.clone().map(|url| ("COVA_QUEUE__URL", url)));
    let procs = Cova::on_sim(&db.config.url, sim.base_url(), &prefix, &extra);
    output(&procs, &["migrate"]);
    output(&procs, &["admin", "accounts", "create", "--email", "kill@example.com"]);
    output(&procs, &["admin", "packs", "grant", "--email", "kill@example.com", "--comments", "5000"]);
    let token =
        output(&procs, &["admin", "tokens", "create", "--email", "kill@example.com", "--scopes", "analyze:write"])
            .lines()
            .last()
            .expect("token")
            .to_owned();

    let split = queue_url.is_some();
    let (mut front, base) = procs.start(if split { "gateway" } else { "serve" }, true);
    let base = base.expect("base url");
    let mut worker = split.then(|| procs.start("scraper", false).0);

    let http = reqwest::Client::new();
    let comments = 600;
    let url = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, comments));
    let created: Value = http
        .post(format!("{base}/api/v1/analyze"))
        .bearer_auth(&token)
        .json(&json!({ "url": url }))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let job_id = created["job_id"].as_str().expect("job id").to_owned();

    // Wait until collection is under way, then kill the process doing it.
    let started = until("collection under way", async || {
        let j = job(&http, &base, &token, &job_id).await;
        (j["progress"]["comments_collected"].as_i64().unwrap_or(0) > 0).then_some(j)
    })
    .await;
    assert_eq!(started["status"], "in_progress", "{started}");
    // A killed worker's job is taken over once its lease runs out.
    let lease = Duration::from_millis(LEASE_MS);
    let base = if let Some(w) = worker.as_mut() {
        kill(w);
        worker = Some(procs.start("scraper", false).0);
        base
    } else {
        kill(&mut front);
        let (restarted, base) = procs.start("serve", true);
        front = restarted;
        base.expect("base url")
    };

    let done = until_within("the job to finish after the restart", lease + WAIT, async || {
        let j = job(&http, &base, &token, &job_id).await;
        (j["status"] == "complete" || j["status"] == "failed").then_some(j)
    })
    .await;
    assert_eq!(done["status"], "complete", "{}", done["error"]);
    assert_eq!(done["result"]["comments_total"], comments);
    let usage: Value = http
        .get(format!("{base}/api/v1/usage"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("usage")
        .json()
        .await
        .expect("json");
    assert_eq!(usage["comments"]["used"], comments, "charged once, exactly");
    assert_eq!(usage["comments"]["reserved"], 0);

    if let Some(w) = worker.as_mut() {
        kill(w);
    }
    kill(&mut front);
    procs.forget().await;
    sim.stop().await;
    let _ = db.drop_database().await;
}

fn output(cova: &Cova, args: &[&str]) -> String {
    let out = cova.run(args);
    assert!(out.status.success(), "{args:?}: {}", crate::common::stderr(&out));
    crate::common::stdout(&out)
}
