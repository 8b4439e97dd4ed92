//! The worker runtime and the composition root, seen from a role's author: a new
//! queue-consuming role is a handler plus one line in the builder, and it gets acks after
//! commit, retries with backoff, dead letters and the outbox relay for free. Runs on the
//! embedded queue and on RabbitMQ alike.

use cova_app::Role;
use cova_messages::{Command, Outgoing};
use cova_runtime::{Delivered, Handler, Outcome, Source};
use cova_sim::SimConfig;
use cova_storage::repo::outbox;
use cova_tests::{TestApp, TestDatabase, eventually, spawn_stack};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The toy role's command: fail `fail_first` times, then succeed; `poison` never can.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Ping {
    n: u32,
    fail_first: u32,
    poison: bool,
}

impl Command for Ping {
    const ROLE: &'static str = "toy";
}

#[derive(Clone, Default)]
struct Toy {
    /// (n, attempt) of every delivery handled.
    seen: Arc<Mutex<Vec<(u32, u32)>>>,
}

impl Handler for Toy {
    type Message = Ping;

    fn name(&self) -> &'static str {
        "toy"
    }

    fn source(&self) -> Source {
        Source::commands::<Ping>()
    }

    fn concurrency(&self) -> usize {
        2
    }

    fn retry_delay(&self, _attempt: u32) -> Duration {
        Duration::from_millis(50)
    }

    async fn handle(&self, ping: Ping, delivery: Delivered) -> Outcome {
        self.seen.lock().expect("lock").push((ping.n, delivery.attempt));
        if ping.poison {
            Outcome::Poison("a toy that cannot be handled".into())
        } else if delivery.attempt <= ping.fail_first {
            Outcome::Retry("not yet".into())
        } else {
            Outcome::Done
        }
    }
}

async fn send(app: &TestApp, ping: &Ping) {
    outbox::insert(app.db(), &Outgoing::command(ping), "{}", app.now()).await.expect("outbox");
    app.wake_outbox();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_role_is_a_handler_plus_one_line_in_the_builder() {
    let toy = Toy::default();
    let seen = toy.seen.clone();
    let app =
        spawn_stack(TestDatabase::create().await, SimConfig::default(), |b| b.roles(Role::ALL).worker(toy), |_| {})
            .await;
    send(&app, &Ping { n: 1, fail_first: 0, poison: false }).await;
    send(&app, &Ping { n: 2, fail_first: 2, poison: false }).await;
    send(&app, &Ping { n: 3, fail_first: 0, poison: true }).await;
    eventually("every ping is settled", async || {
        let seen = seen.lock().expect("lock").clone();
        seen.contains(&(1, 1)) && seen.contains(&(2, 3)) && seen.contains(&(3, 1))
    })
    .await;
    eventually("the poisoned ping is dead-lettered", async || {
        app.backends.queue.dead_letter_count("toy").await.expect("count") == 1
    })
    .await;
    // Every delivery has been settled (acked, retried or dead-lettered): nothing else comes.
    eventually("five deliveries settled", async || app.backends.progress.count("settled:toy") >= 5).await;
    let mut seen = seen.lock().expect("lock").clone();
    seen.sort();
    assert_eq!(
        seen,
        [(1, 1), (2, 1), (2, 2), (2, 3), (3, 1)],
        "acked once done, retried with attempts, poison not retried"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisoned_outbox_row_does_not_stop_the_rows_behind_it() {
    let toy = Toy::default();
    let seen = toy.seen.clone();
    let app =
        spawn_stack(TestDatabase::create().await, SimConfig::default(), |b| b.roles(Role::ALL).worker(toy), |_| {})
            .await;
    // A command for a role nobody declared: the broker cannot route it.
    let unroutable =
        Outgoing { routing_key: "nobody-home", ..Outgoing::command(&Ping { n: 0, fail_first: 0, poison: false }) };
    outbox::insert(app.db(), &unroutable, "{}", app.now()).await.expect("outbox");
    for n in 1..=3 {
        send(&app, &Ping { n, fail_first: 0, poison: false }).await;
    }
    eventually("the rows behind the bad one are delivered", async || seen.lock().expect("lock").len() == 3).await;
    eventually("the bad row is recorded as failing", async || {
        let rows = outbox::claim(app.db(), 100, app.now() + 3_600_000).await.expect("claim");
        rows.iter().any(|r| r.routing_key == "nobody-home" && r.attempts >= 1 && r.last_error.is_some())
    })
    .await;
    // The relay marks a row sent once the broker confirms it, which may be after a consumer
    // has handled the message: the rows behind leave the backlog soon after they are seen.
    eventually("only the bad row left in the outbox", async || outbox::backlog(app.db()).await.expect("backlog") == 1)
        .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_not_yet_handled_when_the_process_stops_are_handled_after_it_restarts() {
    let app = cova_tests::spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = cova_sim::tiktok_post_id(cova_sim::TikTokScenario::Normal, 60);
    client.collect(id).await;
    let job_end = app.outbox_payloads("event").await.into_iter().next().expect("the job's end event");
    // Keywords set after the job ended: only a job end handled from now on raises alerts.
    client.put_json("/api/v1/keywords", serde_json::json!({"keywords": ["price", "Preis"]})).await.ok();
    let all = cova_domain::text::Matcher::new(&["price", "Preis"]);
    let truth = app.sim.expected_post(&id.to_string());
    let matching = truth
        .comments
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.replies.iter()))
        .map(|c| all.find(&c.text).len())
        .sum::<usize>();
    assert!(matching > 0, "the post has comments with the keywords");

    // The roles stop; a job's end is published and nobody handles it before the process is
    // gone (as when the process stops between the relay's publish and the notifier's turn).
    let stopped = app.halt().await;
    let mut message = cova_queue::Message::new("job.complete", job_end.into_bytes());
    message.id = "replayed-job-end".into();
    stopped.backends.queue.publish_event(message).await.expect("publish");

    let app = stopped.start(|b| b.roles(Role::ALL)).await;
    let client = app.client(Some(&token));
    cova_tests::eventually("the keyword alerts of the unhandled job end", async || {
        let alerts = client.get::<serde_json::Value>("/api/v1/keyword-alerts?limit=500").await.ok();
        alerts["items"].as_array().is_some_and(|a| a.len() == matching)
    })
    .await;
    app.stop().await;
}
