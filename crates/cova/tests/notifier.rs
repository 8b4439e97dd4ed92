//! A `cova notifier` process killed (SIGKILL) while it delivers loses no delivery: the events
//! wait in its durable queue, the deliveries in the database, and a new process sends them.
//! Needs PostgreSQL and RabbitMQ (a split role needs a shared queue): `make test-real`.

use cova_app::Role;
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::receiver::{Receiver, Reply, TestCa};
use cova_tests::{TestDatabase, eventually, real_backend, spawn_stack, until_within, use_receivers};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and RabbitMQ: run with make test-real"]
async fn a_killed_notifier_loses_no_delivery() {
    real_backend(cova_testdb::DATABASE_URL_VAR);
    real_backend("COVA_TEST_QUEUE_URL");
    let ca = TestCa::new();
    // A host name without dots: it is also a key of COVA_NOTIFIER__HOSTS__<name>.
    let receiver = Receiver::spawn(&ca, "hookstest").await;
    // Slow answers keep deliveries in flight when the process dies.
    receiver.script((0..6).map(|_| Reply::Slow(Duration::from_millis(700), 200)));
    // Every role but the notifier runs here; the notifier is the process killed below.
    let app = spawn_stack(
        TestDatabase::create().await,
        SimConfig::default(),
        |b| b.roles([Role::Gateway, Role::Scraper, Role::Scheduler]),
        |c| use_receivers(c, &ca, "hookstest"),
    )
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let hook = format!("{}/hook", receiver.base_url);
    client.put_json("/api/v1/notification-channels", json!({"webhook": {"url": hook, "job_events": true}})).await.ok();
    client.put_json("/api/v1/keywords", json!({"keywords": ["price", "preis", "🔥"]})).await.ok();

    let cova = crate::common::Cova::sharing(
        &app.config,
        &[
            ("COVA_NOTIFIER__ALLOW_PRIVATE", "127.0.0.1/32".into()),
            ("COVA_NOTIFIER__HOSTS__HOOKSTEST", "127.0.0.1".into()),
            ("COVA_NOTIFIER__EXTRA_CA_PEM", ca.pem_path()),
            ("COVA_NOTIFIER__TICK_MS", "50".into()),
            // Short timeouts: the killed process's claims pass to the next one after 9 s.
            ("COVA_NOTIFIER__TIMEOUT_MS", "2000".into()),
            ("COVA_NOTIFIER__CONNECT_TIMEOUT_MS", "1000".into()),
        ],
    );
    let id = tiktok_post_id(TikTokScenario::Normal, 90);
    let job = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
    client.wait_job(job["job_id"].as_str().expect("id")).await;

    let mut first = cova.start_until("notifier", "deliveries running");
    eventually("the first notifier to deliver", async || !receiver.received().is_empty()).await;
    let _ = first.kill();
    let _ = first.wait();
    let mut second = cova.start_until("notifier", "deliveries running");
    let log = async || -> Vec<Value> {
        client.get::<Value>("/api/v1/notification-channels/deliveries?limit=500").await.ok()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // The killed process's claims pass to the second one only once they time out (9 s).
    until_within("every delivery to complete", Duration::from_secs(90), async || {
        let items = log().await;
        (!items.is_empty() && items.iter().all(|d| d["state"] == "delivered")).then_some(())
    })
    .await;
    let _ = second.kill();
    let _ = second.wait();
    let items = log().await;
    let expected: BTreeSet<String> =
        items.iter().map(|d| d["event_id"].as_str().unwrap_or_default().to_owned()).collect();
    let received: BTreeSet<String> =
        receiver.received().iter().filter_map(|r| r.header("x-event-id").map(str::to_owned)).collect();
    assert!(expected.len() > 1, "alerts and the job webhook: {items:?}");
    assert_eq!(received, expected, "every event reached the receiver (at least once)");
    app.stop().await;
}
