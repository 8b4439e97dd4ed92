//! Spike alerts end to end, on a clock the test moves, with the simulator posting comments at
//! chosen times: none on a steady post collected three times over two weeks; one alert for a
//! burst, with its figures, on a signed webhook, Telegram and the polled list; none while the
//! spike goes on (the cooldown); a turn to negative comments on a post with settings of its
//! own; a followed creator's new post taking off against the creator's earlier posts at the
//! same age, once, with young posts saying what they wait for.

use cova_domain::ManualClock;
use cova_sim::{SimCreator, SimCreatorPost, TikTokScenario, Tone, tiktok_post_id};
use cova_tests::receiver::{Receiver, TestCa};
use cova_tests::{Client, TestApp, assert_valid, eventually, schema, spawn_on_clock, until, use_receivers};
use serde_json::{Value, json};

const START: &str = "2026-06-01T00:00:00Z";
const HOUR: i64 = 3_600_000;
const HOST: &str = "hooks.test";

/// Comments at `per_hour` on average from `from` to `to` (unix ms): each hour's count drawn
/// from a Poisson law (a fixed seed), spread evenly over the hour.
fn steady(from: i64, to: i64, per_hour: f64, seed: &mut u64, tone: Tone) -> Vec<(i64, Tone)> {
    let mut next = || {
        *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut out = Vec::new();
    let mut hour = from;
    while hour < to {
        // Knuth's method: fine for small means.
        let limit = (-per_hour).exp();
        let (mut k, mut p) = (0u32, next());
        while p > limit {
            k += 1;
            p *= next();
        }
        let span = (to - hour).min(HOUR);
        for i in 0..k {
            out.push(((hour + span * (2 * i64::from(i) + 1) / (2 * i64::from(k))) / 1000, tone));
        }
        hour += HOUR;
    }
    out
}

/// `n` comments evenly over the `minutes` before `to`.
/// The steady post's usual comments an hour.
const RATE: f64 = 4.0;

fn burst(to: i64, minutes: i64, n: i64, tone: Tone) -> Vec<(i64, Tone)> {
    (0..n).map(|i| ((to - minutes * 60_000 + minutes * 60_000 * i / n) / 1000, tone)).collect()
}

fn set_time(app: &TestApp, clock: &ManualClock, at: i64) {
    clock.set(at);
    app.sim.set_clock_ms(at);
}

async fn collected(client: &Client, reply: Value) {
    let job = client.wait_job(reply["job_id"].as_str().expect("job_id")).await;
    assert_eq!(job["status"], "complete", "{job}");
}

async fn alerts(client: &Client) -> Vec<Value> {
    client.get::<Value>("/api/v1/spike-alerts?limit=500").await.ok()["items"].as_array().expect("items").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_post_never_alerts_and_a_burst_alerts_once_on_every_channel() {
    let ca = TestCa::new();
    let receiver = Receiver::spawn(&ca, HOST).await;
    let (app, clock) = spawn_on_clock(START, |c| {
        use_receivers(c, &ca, HOST);
        // The test's clock stands still between steps while it polls: the minute's limit
        // would count two weeks of polling as one minute.
        c.limits.api_requests_per_minute = 100_000;
    })
    .await;
    let t0 = clock.now_ms();
    set_time(&app, &clock, t0);
    let (account, token) = app.integrator().await;
    app.grant(&account, 20_000).await;
    let client = app.client(Some(&token));
    let hook = format!("{}/cova", receiver.base_url);
    let set = client
        .put_json(
            "/api/v1/notification-channels",
            json!({"webhook": {"url": hook}, "telegram": {"chat_id": "-1001234567"}}),
        )
        .await
        .ok();
    let secret = set["webhook"]["secret"].as_str().expect("the secret").to_owned();
    let defaults = client.get::<Value>("/api/v1/spike-alerts/settings").await.ok();
    assert_eq!((&defaults["enabled"], &defaults["sensitivity"]), (&json!(true), &json!("balanced")), "{defaults}");
    assert_eq!(defaults["judged"]["min_comments"], 20);

    // Two weeks of a steady post at 4 comments an hour, collected three times: no alert.
    // A post of no comments of its own: the test posts them all, at chosen times.
    let id = tiktok_post_id(TikTokScenario::Normal, 0).to_string();
    let r#ref = format!("tiktok:{id}");
    let mut seed = 7;
    // Each collection reads the whole post again and is followed by a spike check.
    let step = 112 * HOUR;
    app.sim.post_comments(&id, &steady(t0, t0 + step, RATE, &mut seed, Tone::Usual));
    set_time(&app, &clock, t0 + step);
    collected(&client, client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok()).await;
    for k in 1..3 {
        let (from, to) = (t0 + k * step, t0 + (k + 1) * step);
        app.sim.post_comments(&id, &steady(from, to, RATE, &mut seed, Tone::Usual));
        set_time(&app, &clock, to);
        collected(&client, client.refresh(&r#ref).await.ok()).await;
    }
    app.notifier_caught_up().await;
    assert!(alerts(&client).await.is_empty(), "no alert on a steady post");
    let fortnight = t0 + 3 * step;

    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");
    // A burst: 60 comments in the last 40 minutes besides the usual ones.
    let at = fortnight + 6 * HOUR;
    let mut posted = steady(fortnight, at, RATE, &mut seed, Tone::Usual);
    posted.extend(burst(at, 40, 60, Tone::Usual));
    app.sim.post_comments(&id, &posted);
    set_time(&app, &clock, at);
    collected(&client, client.refresh(&r#ref).await.ok()).await;
    eventually("the spike alert", async || alerts(&client).await.len() == 1).await;
    let alert = alerts(&client).await.remove(0);
    assert_eq!((&alert["kind"], &alert["ref"]), (&json!("volume"), &json!(r#ref)), "{alert}");
    let in_window = posted.iter().filter(|(t, _)| *t * 1000 >= at - HOUR).count() as u64;
    assert_eq!(alert["comments"], in_window, "{alert}");
    let expected = alert["expected"].as_f64().expect("expected");
    assert!((2.0..=6.0).contains(&expected), "about 4 an hour usually: {alert}");
    assert_eq!(alert["window_end"], cova_domain::time::rfc3339(at));
    assert_eq!(alert["examples"].as_array().map(Vec::len), Some(3), "{alert}");
    assert!(alert["top_terms"].is_array() && alert["sentiment"]["positive"].is_number(), "{alert}");
    assert!(alert.get("account_id").is_none());
    let event = until("the spike.alert event", async || {
        let message = tokio::time::timeout(std::time::Duration::from_secs(20), events.next()).await.ok()??;
        (message.routing_key == "spike.alert").then(|| serde_json::from_slice::<Value>(&message.payload).ok())?
    })
    .await;
    assert_valid(&schema("spike-alert-event.schema.json"), &event);
    assert_eq!((&event["id"], &event["account_id"]), (&alert["id"], &json!(account.id)));

    // Delivered: a signed webhook and a Telegram message in words.
    eventually("the webhook", async || receiver.received().iter().any(|r| r.json()["type"] == "spike.alert")).await;
    let hooked = receiver.received().into_iter().find(|r| r.json()["type"] == "spike.alert").expect("the webhook");
    let now = app.now() / 1000;
    let signature = hooked.header("x-signature").expect("x-signature");
    assert!(cova_notify::verify(signature, &secret, &hooked.body, now, 300), "a valid signature");
    assert_eq!(hooked.json()["id"], alert["id"]);
    eventually("the Telegram message", async || {
        app.sim.telegram_messages().iter().any(|m| m.text.starts_with("Spike:"))
    })
    .await;
    let message = app.sim.telegram_messages().into_iter().find(|m| m.text.starts_with("Spike:")).expect("message");
    assert!(message.text.contains(&format!("{in_window} in the last hour")), "{}", message.text);

    // The spike goes on half an hour later: the same spike, no second alert.
    let later = at + HOUR / 2;
    app.sim.post_comments(&id, &burst(later, 30, 40, Tone::Usual));
    set_time(&app, &clock, later);
    collected(&client, client.refresh(&r#ref).await.ok()).await;
    app.notifier_caught_up().await;
    assert_eq!(alerts(&client).await.len(), 1, "one alert per spike");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_turning_negative_is_told_with_its_own_settings() {
    let (app, clock) = spawn_on_clock(START, |c| c.limits.api_requests_per_minute = 100_000).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&token));
    let mut seed = 11;
    // A day of usual comments at 12 an hour, collected; then its settings of its own (a lower
    // minimum), and an hour in which most comments turn negative.
    let other = tiktok_post_id(TikTokScenario::Normal, 3).to_string();
    let other_ref = format!("tiktok:{other}");
    let day_start = clock.now_ms() + 24 * HOUR;
    set_time(&app, &clock, day_start);
    app.sim.post_comments(&other, &steady(day_start - 24 * HOUR, day_start, 12.0, &mut seed, Tone::Usual));
    collected(&client, client.analyze(&format!("https://www.tiktok.com/@a/video/{other}"), None).await.ok()).await;
    let own =
        client.put_json(&format!("/api/v1/spike-alerts/settings/{other_ref}"), json!({"min_comments": 10})).await.ok();
    assert_eq!(
        (&own["own"], &own["min_comments"], &own["judged"]["min_comments"]),
        (&json!(true), &json!(10), &json!(10))
    );
    let turn = day_start + HOUR;
    let mut angry = burst(turn, 55, 10, Tone::Negative);
    angry.extend(burst(turn, 50, 4, Tone::Usual));
    app.sim.post_comments(&other, &angry);
    set_time(&app, &clock, turn);
    collected(&client, client.refresh(&other_ref).await.ok()).await;
    eventually("the sentiment alert", async || alerts(&client).await.len() == 1).await;
    let dip = alerts(&client).await.remove(0);
    assert_eq!((&dip["kind"], &dip["ref"]), (&json!("sentiment"), &json!(other_ref)), "{dip}");
    let share = dip["negative_share"].as_f64().expect("share");
    assert!(share >= 0.7 && dip["baseline_negative_share"].as_f64().is_some_and(|b| b < 0.4), "{dip}");
    // Polling one post's alerts, after a number already seen.
    let first = client.get::<Value>(&format!("/api/v1/spike-alerts?ref={other_ref}")).await.ok();
    assert_eq!(first["items"].as_array().map(Vec::len), Some(1));
    let since = first["next_since"].as_str().expect("next_since");
    let none = client.get::<Value>(&format!("/api/v1/spike-alerts?since={since}")).await.ok();
    assert_eq!(none["items"], json!([]));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_checked_and_follow_the_post_or_the_account() {
    // 60 requests a minute: one comes back a second later (at 600, every 100 ms, which a busy
    // machine took between the two reads of the remaining count below).
    let (app, _clock) = spawn_on_clock(START, |c| c.limits.api_requests_per_minute = 60).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    for (body, words) in [
        (json!({"sensitivity": "loud"}), "sensitive, balanced or strict"),
        (json!({"min_comments": 2}), "between 5 and 10000"),
        (json!({"cooldown_min": 5}), "between 30 and 10080"),
        (json!({"enabled": "yes"}), ""),
        (json!({"colour": "red"}), ""),
    ] {
        let (status, err) = client.put_json("/api/v1/spike-alerts/settings", body.clone()).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{body}");
        assert!(err.detail.contains(words), "{body}: {}", err.detail);
    }
    let strict = client
        .put_json("/api/v1/spike-alerts/settings", json!({"sensitivity": "strict", "cooldown_min": 120}))
        .await
        .ok();
    assert_eq!((&strict["sensitivity"], &strict["judged"]["min_comments"]), (&json!("strict"), &json!(50)));
    // A value out of bounds is request input: refused before the rate limit (no request
    // spent) and before the post is looked up.
    let id = tiktok_post_id(TikTokScenario::Normal, 12);
    let remaining = |h: &reqwest::header::HeaderMap| {
        h.get("x-ratelimit-remaining").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
    };
    let (_, before, _) = client.raw(client.request(reqwest::Method::GET, "/api/v1/spike-alerts/settings")).await;
    let (status, after, _) = client
        .raw(
            client
                .request(reqwest::Method::PUT, &format!("/api/v1/spike-alerts/settings/tiktok:{id}"))
                .json(&json!({"cooldown_min": 5})),
        )
        .await;
    assert_eq!(status.as_u16(), 400, "the value before the post's absence");
    let (_, next, _) = client.raw(client.request(reqwest::Method::GET, "/api/v1/spike-alerts/settings")).await;
    assert_eq!(remaining(&next).map(|n| n + 1), remaining(&before), "the 400 spent no request: {after:?}");
    // A post outside the library has no settings to set; one in it follows the account's.
    let (status, _) =
        client.put_json(&format!("/api/v1/spike-alerts/settings/tiktok:{id}"), json!({"enabled": false})).await.err();
    assert_eq!(status.as_u16(), 404);
    let (status, _) = client.get::<Value>("/api/v1/spike-alerts/settings/not-a-ref").await.err();
    assert_eq!(status.as_u16(), 400);
    client.collect(id).await;
    let path = format!("/api/v1/spike-alerts/settings/tiktok:{id}");
    let follows = client.get::<Value>(&path).await.ok();
    assert_eq!((&follows["own"], &follows["sensitivity"]), (&json!(false), &json!("strict")));
    // The simulator's comments on it are years old: nothing recent to judge, and it says so.
    let judging = &follows["judging"];
    assert_eq!((&judging["volume"], &judging["volume_from"]), (&json!("waiting"), &Value::Null), "{follows}");
    assert!(judging["detail"].as_str().is_some_and(|d| d.starts_with("No comment in the last two weeks")), "{follows}");
    let off = client.put_json(&path, json!({"enabled": false})).await.ok();
    assert_eq!((&off["own"], &off["enabled"], &off["cooldown_min"]), (&json!(true), &json!(false), &json!(120)));
    let (_, _, body) = client.raw(client.request(reqwest::Method::DELETE, &path)).await;
    let back: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!((&back["own"], &back["enabled"]), (&json!(false), &json!(true)));
    app.stop().await;
}

const BRAND: u64 = 6_800_000_000_000_000_001;
const BRAND_REF: &str = "tiktok:user:6800000000000000001";

/// A creator's post of no comments of its own (an id outside the simulator's scenarios): the
/// test posts them all.
fn creator_post(k: u64) -> String {
    (6_900_000_000_000_000_000 + k * 1_000).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creators_new_post_taking_off_is_told_once_and_a_young_post_says_what_it_waits_for() {
    let (app, clock) = spawn_on_clock(START, |c| c.limits.api_requests_per_minute = 100_000).await;
    let t0 = clock.now_ms();
    set_time(&app, &clock, t0);
    app.sim.add_creator(SimCreator::tiktok(BRAND, "brand"));
    let (account, token) = app.integrator().await;
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&token));
    client.put_json("/api/v1/notification-channels", json!({"telegram": {"chat_id": "-1001234567"}})).await.ok();
    let added = client
        .raw(
            client
                .request(reqwest::Method::POST, "/api/v1/creators")
                .json(&json!({"url": "https://www.tiktok.com/@brand"})),
        )
        .await;
    assert_eq!(added.0.as_u16(), 201, "{}", String::from_utf8_lossy(&added.2));
    let refresh = async || {
        let (status, _, body) =
            client.raw(client.request(reqwest::Method::POST, &format!("/api/v1/creators/{BRAND_REF}/refresh"))).await;
        assert_eq!(status.as_u16(), 200, "{}", String::from_utf8_lossy(&body));
    };
    let count_of = async |r#ref: &str| {
        let (status, _, body) =
            client.raw(client.request(reqwest::Method::GET, &format!("/api/v1/analyses/{ref}"))).await;
        if status.as_u16() != 200 {
            return None;
        }
        serde_json::from_slice::<Value>(&body).ok()?["comment_count"].as_u64()
    };

    // Three earlier posts a day apart, each with 90 comments in its first 3 hours and 9 in its
    // 4th, collected when 4 hours old. The creator's comments are usually negative.
    for k in 0..3 {
        let published = t0 + HOUR + k as i64 * 24 * HOUR;
        let id = creator_post(k);
        app.sim
            .publish(&BRAND.to_string(), SimCreatorPost { id: id.clone(), published_at_ms: published, pinned: false });
        let mut posted = burst(published + 3 * HOUR, 180, 90, Tone::Negative);
        posted.extend(burst(published + 4 * HOUR, 60, 9, Tone::Negative));
        app.sim.post_comments(&id, &posted);
        set_time(&app, &clock, published + 4 * HOUR);
        refresh().await;
        let r#ref = format!("tiktok:{id}");
        eventually("the earlier post collected", async || count_of(&r#ref).await == Some(99)).await;
        if k == 0 {
            // Too young to judge, and it says so: 4 hours of comments, no earlier post yet.
            let shown = client.get::<Value>(&format!("/api/v1/spike-alerts/settings/{ref}")).await.ok();
            let judging = &shown["judging"];
            assert_eq!(
                (&judging["volume"], &judging["takeoff"], &judging["earlier_posts"]),
                (&json!("waiting"), &json!("waiting"), &json!(0)),
                "{shown}"
            );
            let first = posted.iter().map(|(t, _)| t * 1000).min().expect("comments");
            assert_eq!(judging["volume_from"], cova_domain::time::rfc3339(first + 410 * 60_000), "{shown}");
            assert!(
                judging["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("Too young to judge") && d.contains("(0 so far)")),
                "{shown}"
            );
        }
    }
    app.notifier_caught_up().await;
    assert!(alerts(&client).await.is_empty(), "the earlier posts are usual");

    // The new post: 100 comments in its first hour, against 30 for each earlier post then;
    // negative like the creator's usual comments, which is no dip in sentiment (its own
    // history is too short: its creator's earlier posts are its usual share).
    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");
    let published = t0 + 73 * HOUR;
    let id = creator_post(3);
    let r#ref = format!("tiktok:{id}");
    app.sim.publish(&BRAND.to_string(), SimCreatorPost { id: id.clone(), published_at_ms: published, pinned: false });
    app.sim.post_comments(&id, &burst(published + HOUR, 60, 100, Tone::Negative));
    let at = published + HOUR;
    set_time(&app, &clock, at);
    refresh().await;
    eventually("the take-off alert", async || alerts(&client).await.len() == 1).await;
    let alert = alerts(&client).await.remove(0);
    assert_eq!(
        (&alert["kind"], &alert["ref"], &alert["comments"]),
        (&json!("takeoff"), &json!(r#ref), &json!(100)),
        "{alert}"
    );
    assert_eq!(alert["expected"], 30.0, "the earlier posts' median at an hour old: {alert}");
    assert!(alert["baseline_negative_share"].as_f64().is_some_and(|b| b > 0.6), "the creator's usual: {alert}");
    assert_eq!(alert["window_start"], cova_domain::time::rfc3339(published), "{alert}");
    assert_eq!(alert["creator"]["ref"], BRAND_REF, "{alert}");
    assert_eq!(alert["examples"].as_array().map(Vec::len), Some(3), "{alert}");
    let event = until("the spike.alert event", async || {
        let message = tokio::time::timeout(std::time::Duration::from_secs(20), events.next()).await.ok()??;
        (message.routing_key == "spike.alert").then(|| serde_json::from_slice::<Value>(&message.payload).ok())?
    })
    .await;
    assert_valid(&schema("spike-alert-event.schema.json"), &event);
    eventually("the Telegram message", async || {
        app.sim
            .telegram_messages()
            .iter()
            .any(|m| m.text.contains("is taking off: 100 comments in its first 60 minutes"))
    })
    .await;
    let shown = client.get::<Value>(&format!("/api/v1/spike-alerts/settings/{ref}")).await.ok();
    assert_eq!(
        (&shown["judging"]["takeoff"], &shown["judging"]["earlier_posts"]),
        (&json!("judged"), &json!(3)),
        "{shown}"
    );

    // The same job's end handled again, twice at once: no second alert.
    let db = app.db();
    let (a, b) = tokio::join!(
        cova_runtime::spike_alerts::check(db, &account.id, &r#ref, at),
        cova_runtime::spike_alerts::check(db, &account.id, &r#ref, at)
    );
    assert_eq!((a.expect("check"), b.expect("check")), (0, 0));
    // Still taking off an hour later: a post takes off once.
    app.sim.post_comments(&id, &burst(at + HOUR, 60, 40, Tone::Negative));
    set_time(&app, &clock, at + HOUR);
    collected(&client, client.refresh(&r#ref).await.ok()).await;
    app.notifier_caught_up().await;
    assert_eq!(alerts(&client).await.len(), 1, "one take-off per post, and no dip in sentiment");
    app.stop().await;
}
