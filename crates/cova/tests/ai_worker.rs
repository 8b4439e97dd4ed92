//! A `cova ai-worker` process killed (SIGKILL) in the middle of an AI job: the command waits
//! in the queue, a new process runs the job, and the job completes once and is charged once.
//! Needs PostgreSQL and RabbitMQ (a split role needs a shared queue): `make test-real`.

use cova_app::Role;
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{TestDatabase, eventually, real_backend, spawn_stack, until_within};
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and RabbitMQ: run with make test-real"]
async fn a_killed_ai_worker_completes_the_job_once_and_charges_once() {
    real_backend(cova_testdb::DATABASE_URL_VAR);
    real_backend("COVA_TEST_QUEUE_URL");
    // Every role but the ai-worker runs here; the ai-worker is the process killed below.
    let app = spawn_stack(
        TestDatabase::create().await,
        SimConfig::default(),
        |b| b.roles([Role::Gateway, Role::Scraper, Role::Scheduler, Role::Notifier]),
        |_| {},
    )
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 150);
    let job = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
    client.wait_job(job["job_id"].as_str().expect("id")).await;
    let quote = client.post_json("/api/v1/ai/quote", json!({"ref": format!("tiktok:{id}")})).await.ok();
    let before = client.usage().await.ok().comments;
    let run = client.post_json("/api/v1/ai/run", json!({"quote_id": quote["quote_id"]})).await.ok();
    let ai_id = run["id"].as_str().expect("id").to_owned();

    // A slow model in small batches: the job takes several seconds, so the kill lands inside it.
    let cova = crate::common::Cova::sharing(
        &app.config,
        &[
            ("COVA_AI__ANALYZER", "openai".into()),
            ("COVA_AI__OPENAI__BASE_URL", app.sim.llm_base_url()),
            ("COVA_AI__OPENAI__API_KEY", cova_sim::LLM_API_KEY.into()),
            ("COVA_AI__OPENAI__MODEL", "sim-slow".into()),
            ("COVA_AI__OPENAI__BATCH_TOKENS", "800".into()),
            // A dead worker's lease passes to the next one after 3 s.
            ("COVA_AI__LEASE_MS", "3000".into()),
            ("COVA_AI__RETRY_BASE_MS", "200".into()),
        ],
    );
    let mut first = cova.start_until("ai-worker", "ai-worker consuming");
    eventually("the first ai-worker to ask the model", async || !app.sim.llm_requests().is_empty()).await;
    let _ = first.kill();
    let _ = first.wait();
    let status = client.get::<Value>(&format!("/api/v1/ai/jobs/{ai_id}")).await.ok();
    assert_eq!(status["status"], "in_progress", "killed mid-job: {status}");

    let mut second = cova.start_until("ai-worker", "ai-worker consuming");
    // The killed worker's lease (3 s) runs out first, then the slow model answers every batch.
    let done = until_within("the second ai-worker to complete the job", Duration::from_secs(90), async || {
        let job = client.get::<Value>(&format!("/api/v1/ai/jobs/{ai_id}")).await.ok();
        (job["status"] == "complete" || job["status"] == "failed").then_some(job)
    })
    .await;
    let _ = second.kill();
    let _ = second.wait();
    assert_eq!(done["status"], "complete", "{done}");
    assert_eq!(done["result"]["comments"], quote["comments"]);
    let after = client.usage().await.ok().comments;
    assert_eq!(after.used - before.used, quote["charge"].as_i64().expect("charge"), "charged once");
    assert_eq!(after.reserved, 0);
    app.stop().await;
}
