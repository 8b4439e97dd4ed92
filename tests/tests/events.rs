//! Every message cova publishes matches its JSON Schema in `proto-schemas/`.

use cova_sim::{TikTokScenario, tiktok_post_id};
use cova_tests::spawn_app;
use serde_json::Value;
use std::time::Duration;

use cova_tests::{assert_valid, schema, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_events_and_commands_match_their_schemas() {
    let app = spawn_app().await;
    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");
    let (account, token) = app.integrator().await;
    // Room for both jobs' holds of up to 5,000 each.
    app.grant(&account, 10_000).await;
    let client = app.client(Some(&token));
    let ok = client
        .analyze(&format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, 7)), None)
        .await
        .ok();
    let bad = client
        .analyze(&format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Deleted, 7)), None)
        .await
        .ok();
    for job in [&ok, &bad] {
        client.wait_job(job["job_id"].as_str().expect("id")).await;
    }

    let event_schema = schema("job-event.schema.json");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let message =
            tokio::time::timeout(Duration::from_secs(20), events.next()).await.expect("events in time").expect("open");
        let body: Value = serde_json::from_slice(&message.payload).expect("event is JSON");
        assert_valid(&event_schema, &body);
        assert_eq!(body["type"].as_str(), Some(message.routing_key.as_str()), "routing key = event type");
        seen.push(body);
    }
    let complete = seen.iter().find(|e| e["job_id"] == ok["job_id"]).expect("complete event");
    assert_eq!(complete["type"], "job.complete");
    assert!(complete["error"].is_null());
    assert_eq!(complete["kind"], "analyze");
    let failed = seen.iter().find(|e| e["job_id"] == bad["job_id"]).expect("failed event");
    assert_eq!(failed["type"], "job.failed");
    assert_eq!(failed["error"]["code"], "parse_error");

    // Commands: what the outbox published.
    let command_schema = schema("analyze-command.schema.json");
    let commands = app.outbox_payloads("command").await;
    assert_eq!(commands.len(), 2);
    for payload in commands {
        assert_valid(&command_schema, &serde_json::from_str(&payload).expect("command is JSON"));
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_carry_the_trace_context_of_the_request() {
    // cova-sim accepts the exports, so spans are recorded (export is tested in cova-telemetry).
    let collector = cova_sim::spawn(cova_sim::SimConfig::default()).await.expect("collector");
    let endpoint = collector.base_url().to_owned();
    let cfg =
        cova_config::TelemetryConfig { otlp_endpoint: Some(endpoint), log_level: "warn".into(), ..Default::default() };
    let _telemetry = cova_telemetry::init(&cfg).expect("telemetry");

    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let client = app.client(Some(&token));
    let job = client
        .analyze(&format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, 3)), None)
        .await
        .ok();
    client.wait_job(job["job_id"].as_str().expect("id")).await;
    let rows = app.outbox_rows("command").await;
    assert_eq!(rows.len(), 1);
    let headers: std::collections::BTreeMap<String, String> = serde_json::from_str(&rows[0].1).expect("headers JSON");
    let traceparent = headers.get("traceparent").expect("a traceparent header");
    assert_eq!(traceparent.split('-').count(), 4, "{traceparent}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyword_alert_events_match_their_schema() {
    let app = spawn_app().await;
    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    client.put_json("/api/v1/keywords", serde_json::json!({"keywords": ["price", "Preis"]})).await.ok();
    let id = tiktok_post_id(TikTokScenario::Normal, 60);
    let job = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
    client.wait_job(job["job_id"].as_str().expect("id")).await;
    let alert_schema = schema("keyword-alert-event.schema.json");
    for _ in 0..3 {
        let body = until("a keyword.alert event", async || {
            let message = tokio::time::timeout(Duration::from_secs(20), events.next()).await.ok()??;
            (message.routing_key == "keyword.alert")
                .then(|| serde_json::from_slice::<Value>(&message.payload).expect("event is JSON"))
        })
        .await;
        assert_valid(&alert_schema, &body);
        assert_eq!(body["account_id"], account.id.as_str());
        assert_eq!(body["ref"], format!("tiktok:{id}"));
    }
    app.stop().await;
}
