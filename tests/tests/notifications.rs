//! Keywords, channels, alerts and deliveries end to end: keyword alerts for new comments
//! only, once each, in order; signed webhooks a receiver can verify; job webhooks only when
//! asked for; retries with the same event id on a test clock; channels turned off by 410 and
//! refusing receivers; webhook URLs that would reach private addresses refused.

use cova_domain::ManualClock;
use cova_domain::text::Matcher;
use cova_domain::time::parse_rfc3339;
use cova_sim::{TikTokScenario, tiktok_post_id};
use cova_tests::receiver::{Receiver, Reply, TestCa};
use cova_tests::{Client, TestApp, eventually, spawn_app, spawn_app_with, spawn_on_clock, tiktok_url, use_receivers};
use serde_json::{Value, json};

const HOST: &str = "hooks.test";

/// Every alert, paged `page` at a time with `since`.
async fn all_alerts(client: &Client, page: usize) -> Vec<Value> {
    let mut since = String::new();
    let mut all = Vec::new();
    loop {
        let reply = client.get::<Value>(&format!("/api/v1/keyword-alerts?limit={page}&since={since}")).await.ok();
        let items = reply["items"].as_array().expect("items").clone();
        since = reply["next_since"].as_str().expect("next_since").to_owned();
        let done = items.len() < page;
        all.extend(items);
        if done {
            return all;
        }
    }
}

/// (comment id, keyword) pairs the simulator's post should raise for `keywords`.
fn expected_alerts(app: &TestApp, id: u64, keywords: &[&str], skip: usize) -> Vec<(String, String)> {
    let matcher = Matcher::new(keywords);
    let truth = app.sim.expected_post(&id.to_string());
    let mut out = Vec::new();
    for c in truth.comments.iter().skip(skip) {
        for comment in std::iter::once(c).chain(if skip == 0 { c.replies.iter() } else { [].iter() }) {
            for k in matcher.find(&comment.text) {
                out.push((comment.id.clone(), k.to_owned()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyword_lists_have_limits_and_need_a_pack() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    let client = app.client(Some(&token));
    let (status, err) = client.put_json("/api/v1/keywords", json!({"keywords": ["price"]})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "payment_required"));
    app.grant(&account, 100).await;
    for (body, why) in [
        (json!({"keywords": vec!["k"; 51]}), "51 keywords"),
        (json!({"keywords": ["x".repeat(65)]}), "65 characters"),
        (json!({"keywords": ["   "]}), "empty after trimming"),
        (json!({"keywords": "price"}), "not a list"),
        (json!({"keywords": ["a\u{0}b"]}), "a control character"),
    ] {
        let (status, err) = client.put_json("/api/v1/keywords", body).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{why}");
    }
    let stored = client
        .put_json("/api/v1/keywords", json!({"keywords": [" Price ", "PRICE", "ＰＲＩＣＥ", "where to buy"]}))
        .await
        .ok();
    assert_eq!(stored["keywords"], json!(["Price", "where to buy"]), "duplicates after normalisation collapse");
    assert_eq!(client.get::<Value>("/api/v1/keywords").await.ok(), stored);
    let narrow = app.token(&account, "analyze:write").await;
    let (status, _) = app.client(Some(&narrow)).get::<Value>("/api/v1/keywords").await.err();
    assert_eq!(status.as_u16(), 403);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_come_for_new_comments_only_exactly_once_and_in_order() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&token));
    let keywords = ["price", "Preis", "🔥"];
    client.put_json("/api/v1/keywords", json!({"keywords": keywords})).await.ok();
    let id = tiktok_post_id(TikTokScenario::Normal, 120);
    client.collect(id).await;
    let expected = expected_alerts(&app, id, &keywords, 0);
    assert!(expected.len() >= 5, "the post has matching comments: {expected:?}");
    eventually("every alert is recorded", async || all_alerts(&client, 500).await.len() >= expected.len()).await;
    app.notifier_caught_up().await;
    let alerts = all_alerts(&client, 7).await;
    let mut got: Vec<(String, String)> = alerts
        .iter()
        .map(|a| (a["comment"]["id"].as_str().expect("id").to_owned(), a["keyword"].as_str().expect("kw").to_owned()))
        .collect();
    let times: Vec<i64> =
        alerts.iter().map(|a| parse_rfc3339(a["created_at"].as_str().expect("at")).expect("time")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "newest last");
    got.sort();
    assert_eq!(got, expected, "each (comment, keyword) exactly once, paged without gaps or repeats");
    let first = &alerts[0];
    assert_eq!(first["ref"], format!("tiktok:{id}"));
    assert!(first["comment"]["text"].is_string() && first["comment"]["author"].is_object(), "{first}");

    // New comments on the post: a refresh alerts for them only; a second one for none.
    app.sim.add_comments(&id.to_string(), 40);
    let before = all_alerts(&client, 500).await.len();
    let refresh = client.refresh(&format!("tiktok:{id}")).await.ok();
    client.wait_job(refresh["job_id"].as_str().expect("id")).await;
    let truth = app.sim.expected_post(&id.to_string());
    let old_top = truth.comments.len() - 40;
    let fresh = expected_alerts(&app, id, &keywords, old_top);
    eventually("the new comments' alerts", async || all_alerts(&client, 500).await.len() >= before + fresh.len()).await;
    let again = client.refresh(&format!("tiktok:{id}")).await.ok();
    client.wait_job(again["job_id"].as_str().expect("id")).await;
    app.notifier_caught_up().await;
    assert_eq!(all_alerts(&client, 500).await.len(), before + fresh.len(), "known comments never alert again");
    app.stop().await;
}

/// A post collected from a session is not in the library when it completes: its comments are
/// matched when it is saved, once (saving again raises nothing), and a later collection
/// alerts only for what it found first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_analysis_alerts_when_it_is_saved_and_once() {
    use reqwest::Method;
    let app = spawn_app().await;
    let email = "alerts-on-save@example.com";
    let browser = cova_tests::workspace::signed_in(&app, email).await;
    let account = cova_storage::repo::accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 5_000).await;
    let keywords = ["price", "Preis"];
    let (status, body) = browser.call(Method::PUT, "/api/v1/keywords", Some(json!({"keywords": keywords}))).await;
    assert_eq!(status.as_u16(), 200, "{body}");
    let id = tiktok_post_id(TikTokScenario::Normal, 90);
    let (status, job) = browser.call(Method::POST, "/api/v1/analyze", Some(json!({"url": tiktok_url(id)}))).await;
    assert_eq!(status.as_u16(), 202, "{job}");
    let job_id = job["job_id"].as_str().expect("job id").to_owned();
    eventually("the session's job complete", async || {
        browser.call(Method::GET, &format!("/api/v1/analyze/{job_id}?limit=1"), None).await.1["status"] == "complete"
    })
    .await;
    app.notifier_caught_up().await;
    let token = app.token(&account, "analyze:write,library:write,keywords:write").await;
    let client = app.client(Some(&token));
    assert_eq!(all_alerts(&client, 500).await.len(), 0, "not in the library yet: nothing matched");

    let (status, body) = browser.call(Method::POST, &format!("/api/v1/analyses/tiktok:{id}/save"), None).await;
    assert_eq!(status.as_u16(), 200, "{body}");
    let expected = expected_alerts(&app, id, &keywords, 0);
    assert!(expected.len() >= 3, "the post has matching comments: {expected:?}");
    let alerts = all_alerts(&client, 500).await;
    let mut got: Vec<(String, String)> = alerts
        .iter()
        .map(|a| (a["comment"]["id"].as_str().expect("id").to_owned(), a["keyword"].as_str().expect("kw").to_owned()))
        .collect();
    got.sort();
    assert_eq!(got, expected, "every matching comment of the first collection, once, as soon as it is saved");
    browser.call(Method::POST, &format!("/api/v1/analyses/tiktok:{id}/save"), None).await;
    assert_eq!(all_alerts(&client, 500).await.len(), expected.len(), "saving again raises nothing");
    app.notifier_caught_up().await;

    // A later collection: only the comments it found first.
    app.sim.add_comments(&id.to_string(), 30);
    let refresh = client.refresh(&format!("tiktok:{id}")).await.ok();
    client.wait_job(refresh["job_id"].as_str().expect("id")).await;
    let old_top = app.sim.expected_post(&id.to_string()).comments.len() - 30;
    let fresh = expected_alerts(&app, id, &keywords, old_top);
    eventually("the new comments' alerts", async || {
        all_alerts(&client, 500).await.len() >= expected.len() + fresh.len()
    })
    .await;
    app.notifier_caught_up().await;
    assert_eq!(all_alerts(&client, 500).await.len(), expected.len() + fresh.len());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_signed_and_job_webhooks_come_only_when_asked_for() {
    let ca = TestCa::new();
    let receiver = Receiver::spawn(&ca, HOST).await;
    let app = spawn_app_with(|c| use_receivers(c, &ca, HOST)).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let hook = format!("{}/cova", receiver.base_url);
    let set = client
        .put_json("/api/v1/notification-channels", json!({"webhook": {"url": hook, "job_events": true}}))
        .await
        .ok();
    let secret = set["webhook"]["secret"].as_str().expect("the secret, once").to_owned();
    assert!(secret.starts_with("whsec_"));
    let shown = client.get::<Value>("/api/v1/notification-channels").await.ok();
    assert!(shown["webhook"].get("secret").is_none(), "never shown again: {shown}");
    assert_eq!(
        (shown["webhook"]["enabled"].as_bool(), shown["webhook"]["job_events"].as_bool()),
        (Some(true), Some(true))
    );
    client.put_json("/api/v1/keywords", json!({"keywords": ["price"]})).await.ok();

    let id = tiktok_post_id(TikTokScenario::Normal, 60);
    let job = client.collect(id).await;
    let alerts = expected_alerts(&app, id, &["price"], 0).len();
    eventually("the job webhook and the alerts arrive", async || receiver.received().len() > alerts).await;
    let now = cova_domain::time::now_ms() / 1000;
    let mut job_hooks = 0;
    for r in receiver.received() {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/cova"));
        let signature = r.header("x-signature").expect("X-Signature");
        assert!(cova_notify::verify(signature, &secret, &r.body, now, 300), "a valid, fresh signature");
        assert!(!cova_notify::verify(signature, "whsec_other", &r.body, now, 300));
        let event_id = r.header("x-event-id").expect("X-Event-Id");
        assert!(!event_id.is_empty());
        // v2 signs the event id too: the same request under another id does not verify.
        assert!(cova_notify::verify_event(signature, &secret, event_id, &r.body, now, 300));
        assert!(!cova_notify::verify_event(signature, &secret, "another-id", &r.body, now, 300));
        // Signed the Standard Webhooks way too, over the same event id.
        assert_eq!(r.header("webhook-id"), Some(event_id));
        let t: i64 = r.header("webhook-timestamp").and_then(|t| t.parse().ok()).expect("webhook-timestamp");
        assert!((now - t).abs() <= 300);
        let standard = cova_auth::signature::sign_standard(&secret, event_id, t, &r.body).expect("a base64 secret");
        assert_eq!(r.header("webhook-signature"), Some(standard.as_str()));
        let body = r.json();
        if body["type"] == "job.complete" {
            job_hooks += 1;
            assert_eq!(
                body,
                json!({"type": "job.complete", "kind": "analyze", "job_id": job["job_id"], "ref": format!("tiktok:{id}"), "url": job["url"], "error": null}),
                "exactly the specification's fields"
            );
        } else {
            assert_eq!(body["type"], "keyword.alert");
            assert_eq!(body["keyword"], "price");
            assert!(body["comment"]["id"].is_string());
        }
    }
    assert_eq!(job_hooks, 1);

    // A failed job is announced too; with job_events off, neither is.
    let failed = client.analyze(&tiktok_url(tiktok_post_id(TikTokScenario::Deleted, 3)), None).await.ok();
    client.wait_job(failed["job_id"].as_str().expect("id")).await;
    eventually("job.failed arrives", async || receiver.received().iter().any(|r| r.json()["type"] == "job.failed"))
        .await;
    client.put_json("/api/v1/notification-channels", json!({"webhook": {"url": hook, "job_events": false}})).await.ok();
    let count = receiver.received().len();
    client.collect(tiktok_post_id(TikTokScenario::Normal, 5)).await;
    app.notifier_caught_up().await;
    app.next_pass(cova_notifier::PASS).await;
    assert_eq!(receiver.received().len(), count, "job_events off: nothing sent");

    // The test event: signed, answered with what the receiver said.
    let tested = client.post_json("/api/v1/notification-channels/test", json!({})).await.ok();
    assert_eq!((tested["webhook"]["ok"].as_bool(), tested["webhook"]["status"].as_u64()), (Some(true), Some(200)));
    assert!(tested["telegram"].is_null());
    let last = receiver.received().pop().expect("the test event");
    assert_eq!(last.json()["type"], "test");
    // Rotation: a new secret, which signs from now on.
    let rotated = client.post_json("/api/v1/notification-channels/webhook/rotate-secret", json!({})).await.ok();
    let new_secret = rotated["secret"].as_str().expect("secret");
    assert_ne!(new_secret, secret);
    client.post_json("/api/v1/notification-channels/test", json!({})).await.ok();
    let last = receiver.received().pop().expect("the second test event");
    assert!(cova_notify::verify(
        last.header("x-signature").expect("sig"),
        new_secret,
        &last.body,
        cova_domain::time::now_ms() / 1000,
        300
    ));
    app.stop().await;
}

async fn on_clock(ca: &TestCa) -> (TestApp, ManualClock) {
    spawn_on_clock("2026-06-10T12:00:00Z", |c| use_receivers(c, ca, HOST)).await
}

async fn deliveries(client: &Client) -> Vec<Value> {
    client.get::<Value>("/api/v1/notification-channels/deliveries").await.ok()["items"]
        .as_array()
        .expect("items")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_gets_the_event_again_with_the_same_event_id() {
    let ca = TestCa::new();
    let receiver = Receiver::spawn(&ca, HOST).await;
    receiver.script([
        Reply::Status(500),
        Reply::Status(502),
        Reply::Status(503),
        Reply::Status(500),
        Reply::Status(429),
    ]);
    let (app, clock) = on_clock(&ca).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let hook = format!("{}/hook", receiver.base_url);
    client.put_json("/api/v1/notification-channels", json!({"webhook": {"url": hook, "job_events": true}})).await.ok();
    client.collect(tiktok_post_id(TikTokScenario::Normal, 4)).await;
    for attempt in 1..=5 {
        eventually(&format!("attempt {attempt}"), async || receiver.received().len() == attempt).await;
        // The receiver has the request before the notifier has recorded its answer (the
        // attempt itself is counted when it is claimed, before it is sent).
        eventually(&format!("attempt {attempt} recorded"), async || {
            let log = deliveries(&client).await;
            let next = log[0]["next_attempt_at"].as_str().and_then(parse_rfc3339).unwrap_or(0);
            log[0]["attempts"].as_i64() == Some(attempt as i64) && next > clock.now_ms()
        })
        .await;
        let log = deliveries(&client).await;
        let pending = &log[0];
        assert_eq!((pending["state"].as_str(), pending["attempts"].as_i64()), (Some("pending"), Some(attempt as i64)));
        // No real waiting: the clock jumps past the backoff (at most 8 h, with jitter).
        let next = parse_rfc3339(pending["next_attempt_at"].as_str().expect("next")).expect("time");
        assert!(next > clock.now_ms(), "backing off");
        // The log shows whole seconds.
        clock.set(next + 1_000);
    }
    eventually("the sixth attempt is delivered", async || deliveries(&client).await[0]["state"] == "delivered").await;
    let received = receiver.received();
    assert_eq!(received.len(), 6, "five failures, then the one that succeeded");
    let ids: std::collections::BTreeSet<&str> = received.iter().filter_map(|r| r.header("x-event-id")).collect();
    assert_eq!(ids.len(), 1, "the same X-Event-Id on every attempt");
    let log = deliveries(&client).await;
    assert_eq!((log[0]["attempts"].as_i64(), log[0]["last_status"].as_i64()), (Some(6), Some(200)));

    // Replay sends it once more.
    let replayed = client
        .post_json(
            &format!("/api/v1/notification-channels/deliveries/{}/replay", log[0]["id"].as_str().expect("id")),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(replayed["state"], "pending");
    eventually("the replay arrives", async || receiver.received().len() == 7).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receivers_that_refuse_for_good_get_their_channel_turned_off() {
    let ca = TestCa::new();
    let receiver = Receiver::spawn(&ca, HOST).await;
    receiver.script([Reply::Status(410)]);
    let app = spawn_app_with(|c| use_receivers(c, &ca, HOST)).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let hook = format!("{}/gone", receiver.base_url);
    client
        .put_json(
            "/api/v1/notification-channels",
            json!({"webhook": {"url": hook, "job_events": true}, "telegram": {"chat_id": "-403"}}),
        )
        .await
        .ok();
    client.put_json("/api/v1/keywords", json!({"keywords": ["price", "preis"]})).await.ok();
    client.collect(tiktok_post_id(TikTokScenario::Normal, 60)).await;
    eventually("both channels are turned off", async || {
        let c = client.get::<Value>("/api/v1/notification-channels").await.ok();
        c["webhook"]["enabled"] == false && c["telegram"]["enabled"] == false
    })
    .await;
    let channels = client.get::<Value>("/api/v1/notification-channels").await.ok();
    assert!(channels["webhook"]["disabled_reason"].as_str().unwrap_or_default().contains("410"), "{channels}");
    assert!(channels["telegram"]["disabled_reason"].as_str().unwrap_or_default().contains("403"), "{channels}");
    // Turning a channel on again clears the reason.
    let on = client.put_json("/api/v1/notification-channels", json!({"webhook": {"url": hook}})).await.ok();
    assert_eq!((on["webhook"]["enabled"].as_bool(), on["webhook"]["disabled_reason"].is_null()), (Some(true), true));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_gets_the_alerts() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    client.put_json("/api/v1/notification-channels", json!({"telegram": {"chat_id": "-1001234567"}})).await.ok();
    client.put_json("/api/v1/keywords", json!({"keywords": ["price"]})).await.ok();
    let id = tiktok_post_id(TikTokScenario::Normal, 60);
    client.collect(id).await;
    let expected = expected_alerts(&app, id, &["price"], 0).len();
    eventually("every alert reaches the chat", async || app.sim.telegram_messages().len() == expected).await;
    for m in app.sim.telegram_messages() {
        assert_eq!((m.bot_token.as_str(), m.chat_id.as_str()), ("sim-bot", "-1001234567"));
        assert!(m.text.contains("price") && m.text.contains(&format!("tiktok:{id}")), "{}", m.text);
    }
    let tested = client.post_json("/api/v1/notification-channels/test", json!({})).await.ok();
    assert_eq!(tested["telegram"]["ok"], true);
    let (status, err) =
        client.put_json("/api/v1/notification-channels", json!({"telegram": {"chat_id": "not a chat"}})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_urls_that_reach_private_addresses_are_refused() {
    // No allow-list here; one public-looking name points at loopback.
    let app = spawn_app_with(|c| {
        c.notifier.hosts.insert("hooks.example.com".into(), "127.0.0.1".into());
    })
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let client = app.client(Some(&token));
    for url in [
        "https://127.0.0.1/hook",
        "https://10.0.0.1/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://hooks.example.com/hook",
        "https://user:pw@93.184.216.34/hook",
        "https://8.8.8.8:0/h",
        "http://93.184.216.34/hook",
        "file:///etc/passwd",
        "not a url",
    ] {
        let (status, err) =
            client.put_json("/api/v1/notification-channels", json!({"webhook": {"url": url}})).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{url}");
    }
    assert!(client.get::<Value>("/api/v1/notification-channels").await.ok()["webhook"].is_null(), "nothing was saved");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_never_followed() {
    let ca = TestCa::new();
    let receiver = Receiver::spawn(&ca, HOST).await;
    let elsewhere = Receiver::spawn(&ca, HOST).await;
    receiver.script([Reply::Redirect(format!("https://127.0.0.1:{}/internal", elsewhere.addr.port()))]);
    let app = spawn_app_with(|c| use_receivers(c, &ca, HOST)).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let client = app.client(Some(&token));
    client
        .put_json("/api/v1/notification-channels", json!({"webhook": {"url": format!("{}/hook", receiver.base_url)}}))
        .await
        .ok();
    let tested = client.post_json("/api/v1/notification-channels/test", json!({})).await.ok();
    // The test answers once the send is over: had the redirect been followed, it would be now.
    assert_eq!((tested["webhook"]["ok"].as_bool(), tested["webhook"]["status"].as_u64()), (Some(false), Some(302)));
    assert!(elsewhere.received().is_empty(), "the redirect target was never contacted");
    app.stop().await;
}
