//! The queue contract on the configured backend: in-process by default, RabbitMQ when
//! `COVA_TEST_QUEUE_URL` is set (CI runs both). Every test uses its own names.

use cova_config::QueueConfig;
use cova_queue::{Message, Queue, QueueError};
use std::time::Duration;

async fn queue() -> Queue {
    let url = std::env::var("COVA_TEST_QUEUE_URL").unwrap_or_else(|_| "memory://".into());
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let q = Queue::connect(&QueueConfig { url, prefix, prefetch: 4 }, &["scraper", "notifier"]).await.expect("queue");
    q.ping().await.expect("configured queue reachable");
    q
}

async fn next(c: &mut cova_queue::Consumer) -> cova_queue::Delivery {
    tokio::time::timeout(Duration::from_secs(10), c.next()).await.expect("a delivery in time").expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_is_confirmed_and_consumed_once_acked() {
    let q = queue().await;
    let mut c = q.consume("scraper").await.expect("consume");
    let mut m = Message::new("scraper", br#"{"job_id":"j1"}"#.to_vec());
    m.headers.insert("traceparent".into(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
    q.publish(m.clone()).await.expect("publish");
    let d = next(&mut c).await;
    assert_eq!(d.message().payload, m.payload);
    assert_eq!(d.message().id, m.id);
    assert_eq!(d.message().attempt, 1);
    assert_eq!(d.message().headers.get("traceparent"), m.headers.get("traceparent"));
    d.ack().await.expect("ack");
    assert!(tokio::time::timeout(Duration::from_millis(300), c.next()).await.is_err(), "nothing else queued");
    q.teardown().await.expect("teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unroutable_messages_are_refused() {
    let q = queue().await;
    let err = q.publish(Message::new("no-such-role", vec![1])).await.expect_err("unroutable");
    assert!(matches!(err, QueueError::Unroutable(_)), "{err}");
    q.teardown().await.expect("teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_redelivers_later_with_the_next_attempt_number() {
    let q = queue().await;
    let mut c = q.consume("notifier").await.expect("consume");
    q.publish(Message::new("notifier", b"x".to_vec())).await.expect("publish");
    let d = next(&mut c).await;
    let started = std::time::Instant::now();
    d.retry(Duration::from_millis(200)).await.expect("retry");
    let d = next(&mut c).await;
    assert!(started.elapsed() >= Duration::from_millis(900), "redelivered after its tier (1 s)");
    assert_eq!(d.message().attempt, 2);
    assert_eq!(d.message().payload, b"x");
    assert_eq!(d.message().routing_key, "notifier", "the routing key survives the retry queue");
    d.dead_letter("gave up").await.expect("dead letter");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), c.next()).await.is_err(),
        "dead letters are not redelivered"
    );
    assert_eq!(q.dead_letter_count("notifier").await.expect("count"), 1);
    q.teardown().await.expect("teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_message_comes_back_with_the_same_attempt_number() {
    let q = queue().await;
    let mut c = q.consume("scraper").await.expect("consume");
    q.publish(Message::new("scraper", b"held".to_vec())).await.expect("publish");
    let d = next(&mut c).await;
    d.retry(Duration::from_millis(50)).await.expect("retry");
    let d = next(&mut c).await;
    assert_eq!(d.message().attempt, 2);
    // The job is held elsewhere: waiting for it is not an attempt.
    d.defer(Duration::from_millis(150)).await.expect("defer");
    let d = next(&mut c).await;
    assert_eq!((d.message().attempt, d.message().payload.as_slice()), (2, b"held".as_slice()));
    d.ack().await.expect("ack");
    q.teardown().await.expect("teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_retry_is_not_held_back_by_a_long_one() {
    let q = queue().await;
    let mut c = q.consume("scraper").await.expect("consume");
    q.publish(Message::new("scraper", b"long".to_vec())).await.expect("publish");
    q.publish(Message::new("scraper", b"short".to_vec())).await.expect("publish");
    let first = next(&mut c).await;
    let second = next(&mut c).await;
    let (long, short) = if first.message().payload == b"long" { (first, second) } else { (second, first) };
    long.retry(Duration::from_secs(30)).await.expect("retry long");
    short.retry(Duration::from_millis(50)).await.expect("retry short");
    // Held behind the long one, the short retry would come back after 30 s: `next` gives up first.
    let d = next(&mut c).await;
    assert_eq!(d.message().payload, b"short", "the short retry came back first");
    d.ack().await.expect("ack");
    q.teardown().await.expect("teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_published_while_no_consumer_is_connected_are_delivered_once_one_binds() {
    let q = queue().await;
    // The durable queue exists once a consumer has declared it...
    let consumer = q.consume_events("audit.events", &["job.*"]).await.expect("consume events");
    drop(consumer);
    // ...and keeps what is published while nobody consumes.
    for n in 0..3 {
        let mut m = Message::new("job.complete", format!("{{\"n\":{n}}}").into_bytes());
        m.id = format!("event-{n}");
        q.publish_event(m).await.expect("publish");
    }
    q.publish_event(Message::new("keyword.alert", b"{}".to_vec())).await.expect("publish unbound");
    // A consumer that is still going away gives back what reached it before it went.
    cova_testdb::eventually("the three bound events waiting in the queue", async || {
        q.depth("audit.events").await.expect("depth") == 3
    })
    .await;
    let mut c = q.consume_events("audit.events", &["job.*"]).await.expect("consume again");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let d = next(&mut c).await;
        assert_eq!(d.message().routing_key, "job.complete");
        seen.push(d.message().id.clone());
        d.ack().await.expect("ack");
    }
    seen.sort();
    assert_eq!(seen, ["event-0", "event-1", "event-2"]);
    assert!(tokio::time::timeout(Duration::from_millis(300), c.next()).await.is_err(), "nothing else, once each");
    q.teardown().await.expect("teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_subscribers_and_need_none() {
    let q = queue().await;
    q.publish_event(Message::new("job.complete", b"nobody listens".to_vec())).await.expect("no subscriber is fine");
    let mut events = q.subscribe_events().await.expect("subscribe");
    q.publish_event(Message::new("job.failed", br#"{"type":"job.failed"}"#.to_vec())).await.expect("publish");
    let got = tokio::time::timeout(Duration::from_secs(10), events.next()).await.expect("in time").expect("event");
    assert_eq!(got.routing_key, "job.failed");
    assert_eq!(got.payload, br#"{"type":"job.failed"}"#);
    q.teardown().await.expect("teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs RabbitMQ: run with make test-real"]
async fn after_a_teardown_nothing_declares_the_topology_again() {
    let url = std::env::var("COVA_TEST_QUEUE_URL").expect("COVA_TEST_QUEUE_URL names the broker");
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let q = Queue::connect(&QueueConfig { url, prefix, prefetch: 4 }, &["scraper"]).await.expect("queue");
    q.publish(Message::new("scraper", vec![1])).await.expect("publish");
    q.teardown().await.expect("teardown");
    // A late publish (a task that outlived its process's stop) would otherwise reconnect and
    // declare every queue and exchange again, left on the broker for good.
    let err = q.publish(Message::new("scraper", vec![2])).await.expect_err("refused after the teardown");
    assert!(err.is_unavailable(), "{err}");
    assert!(q.ping().await.is_err(), "no connection is opened again");
}
