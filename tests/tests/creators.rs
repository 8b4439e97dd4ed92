//! Following creators, on a clock the test moves (the simulator publishes on the same clock):
//! new posts found by the scheduler, collected once and charged once, saved with the creator's
//! mark, watched for their first days and then no longer; pinned old posts not taken as new;
//! private and missing accounts answered like posts; a handle change keeping the ref; a
//! refresh; keyword alerts naming the creator; the `creator.post_found` event and webhook.

use cova_domain::ManualClock;
use cova_domain::time::parse_rfc3339;
use cova_sim::{SimCreator, SimCreatorPost, TikTokScenario, YouTubeScenario, tiktok_post_id, youtube_video_id};
use cova_tests::{Client, TestApp, assert_valid, eventually, schema, spawn_on_clock, until};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

const START: &str = "2026-06-10T12:00:00Z";
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;
const BRAND: u64 = 6_800_000_000_000_000_001;
const BRAND_REF: &str = "tiktok:user:6800000000000000001";

async fn on_clock(adjust: impl FnOnce(&mut cova_config::Config)) -> (TestApp, ManualClock) {
    let (app, clock) = spawn_on_clock(START, adjust).await;
    app.sim.set_clock_ms(clock.now_ms());
    (app, clock)
}

/// Moves the app's clock and the simulator's together.
fn set_time(app: &TestApp, clock: &ManualClock, at: i64) {
    clock.set(at);
    app.sim.set_clock_ms(at);
}

fn post_of(comments: u64, published_at_ms: i64, pinned: bool) -> SimCreatorPost {
    SimCreatorPost { id: tiktok_post_id(TikTokScenario::Normal, comments).to_string(), published_at_ms, pinned }
}

fn post_ref(comments: u64) -> String {
    format!("tiktok:{}", tiktok_post_id(TikTokScenario::Normal, comments))
}

async fn call(client: &Client, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = client.request(method, path);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let (status, _, bytes) = client.raw(req).await;
    (status, if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("JSON answer") })
}

async fn add(client: &Client, url: &str) -> (StatusCode, Value) {
    call(client, Method::POST, "/api/v1/creators", Some(json!({ "url": url }))).await
}

async fn found(client: &Client) -> Vec<String> {
    let creator = client.get::<Value>(&format!("/api/v1/creators/{BRAND_REF}")).await.ok();
    creator["found"]["items"]
        .as_array()
        .expect("found")
        .iter()
        .map(|p| p["ref"].as_str().expect("ref").to_owned())
        .collect()
}

async fn used(client: &Client) -> i64 {
    client.usage().await.ok().comments.used
}

async fn entry(client: &Client, r#ref: &str) -> Value {
    client.get::<Value>(&format!("/api/v1/analyses/{ref}")).await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_creator_s_new_posts_are_collected_once_kept_and_followed_for_their_days() {
    let (app, clock) = on_clock(|_| {}).await;
    let added_at = clock.now_ms();
    // Before it is added: an old pinned post (first on the profile) and a post of two hours ago.
    let mut brand = SimCreator::tiktok(BRAND, "brand");
    brand.posts = vec![post_of(3, added_at - 40 * DAY, true), post_of(4, added_at - 2 * HOUR, false)];
    app.sim.add_creator(brand);
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");

    let (status, creator) = add(&client, "https://www.tiktok.com/@brand").await;
    assert_eq!(status, StatusCode::CREATED, "{creator}");
    assert_eq!((creator["ref"].as_str(), creator["handle"].as_str()), (Some(BRAND_REF), Some("brand")));
    assert_eq!(creator["posts"], 2);
    assert!(creator["avatar_url"].as_str().is_some_and(|u| u.starts_with("/api/v1/media/file?id=")), "{creator}");
    assert_eq!(creator["watch"]["enabled"], false, "adding is not following");
    let (status, again) = add(&client, "https://m.tiktok.com/@brand/").await;
    assert_eq!((status, &again["ref"]), (StatusCode::OK, &creator["ref"]));

    let (status, watch) = call(
        &client,
        Method::PUT,
        &format!("/api/v1/creators/{BRAND_REF}/watch"),
        Some(json!({"enabled": true, "interval_min": 60, "follow_days": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{watch}");
    assert_eq!(watch["next_run_at"].as_str().and_then(parse_rfc3339), Some(added_at), "the first run is due at once");

    // The first run takes nothing: the pinned post is old, the other one predates the creator.
    let listed = async || {
        client.get::<Value>(&format!("/api/v1/creators/{BRAND_REF}")).await.ok()["watch"]["last_run_at"].is_string()
    };
    eventually("the first listing", listed).await;
    assert!(found(&client).await.is_empty());

    // Three posts over a day, each listed once the clock reaches it.
    for (comments, at) in [(5, 2 * HOUR), (6, 9 * HOUR), (7, 20 * HOUR)] {
        app.sim.publish(&BRAND.to_string(), post_of(comments, added_at + at, false));
    }
    let mut spent = 0;
    for (n, (hours, comments)) in [(3, 5), (10, 6), (21, 7)].into_iter().enumerate() {
        set_time(&app, &clock, added_at + hours * HOUR);
        spent += comments;
        eventually(&format!("post {} found and collected", n + 1), async || {
            found(&client).await.len() == n + 1 && used(&client).await == spent
        })
        .await;
    }
    assert_eq!(found(&client).await, [post_ref(7), post_ref(6), post_ref(5)], "newest first, each once");
    let creator = client.get::<Value>(&format!("/api/v1/creators/{BRAND_REF}")).await.ok();
    for item in creator["found"]["items"].as_array().expect("items") {
        assert!(item["batch_id"].is_string() && item["pinned"] == false, "{item}");
    }
    // Each found post is in the library, marked with the creator and watched for a day after
    // it was published.
    for (comments, at) in [(5, 2 * HOUR), (6, 9 * HOUR), (7, 20 * HOUR)] {
        let e = entry(&client, &post_ref(comments)).await;
        assert_eq!(e["creator_ref"], BRAND_REF, "{e}");
        assert_eq!(e["comment_count"], comments);
        assert_eq!(e["watch"]["enabled"], true);
        assert_eq!(e["watch"]["until"].as_str().and_then(parse_rfc3339), Some(added_at + at + DAY));
    }
    let saved = client.get::<Value>("/api/v1/analyses/saved").await.ok();
    assert_eq!(saved["items"].as_array().expect("items").len(), 3, "only the found posts: {saved}");

    // One event per post, as its schema says.
    let validator = schema("creator-event.schema.json");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = until("a creator.post_found event", async || {
            let message = tokio::time::timeout(Duration::from_secs(20), events.next()).await.ok()??;
            (message.routing_key == "creator.post_found")
                .then(|| serde_json::from_slice::<Value>(&message.payload).ok())?
        })
        .await;
        assert_valid(&validator, &event);
        assert_eq!(event["creator"]["handle"], "brand");
        seen.push(event["ref"].as_str().expect("ref").to_owned());
    }
    seen.sort();
    let mut expected = vec![post_ref(5), post_ref(6), post_ref(7)];
    expected.sort();
    assert_eq!(seen, expected);

    // A day after the last one was published, none is watched any more; no run starts.
    set_time(&app, &clock, added_at + 20 * HOUR + DAY + 7 * HOUR);
    eventually("every follow ended", async || {
        let mut ended = true;
        for comments in [5, 6, 7] {
            ended &= entry(&client, &post_ref(comments)).await["watch"]["enabled"] == false;
        }
        ended
    })
    .await;
    let jobs = app.job_progress().await.total;
    set_time(&app, &clock, added_at + 3 * DAY);
    app.next_pass(cova_scheduler::TICK).await;
    app.next_pass(cova_scheduler::CREATOR_TICK).await;
    assert_eq!(app.job_progress().await.total, jobs, "no run after the follow ended");
    assert_eq!(used(&client).await, 18, "each post charged once for its comments");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creators_are_answered_like_posts_keyed_by_id_refreshed_on_demand_and_limited() {
    let (app, clock) = on_clock(|c| c.limits.creators_per_account = 2).await;
    let now = clock.now_ms();
    app.sim.add_creator(SimCreator::tiktok(BRAND, "brand"));
    let mut private = SimCreator::tiktok(BRAND + 1, "secretive");
    private.private = true;
    app.sim.add_creator(private);
    // A channel without the Shorts playlist: its uploads are listed, Shorts told by duration.
    let mut channel = SimCreator::youtube("abcdefghijklmnopqrstuv", "BrandTV");
    channel.shorts_playlist = false;
    app.sim.add_creator(channel);
    app.sim.add_creator(SimCreator::tiktok(BRAND + 2, "third"));
    let (account, token) = app.integrator().await;
    let client = app.client(Some(&token));

    // Private and missing accounts, and what is not a creator URL.
    let (status, err) = add(&client, "https://www.tiktok.com/@secretive").await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("audience_restricted")));
    let (status, err) = add(&client, "https://www.tiktok.com/@nobody_here").await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{err}");
    let (status, err) = add(&client, "https://www.youtube.com/@NoSuchChannel").await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{err}");
    for bad in ["https://www.tiktok.com/@brand/video/7000000000000000001", "https://example.com/@brand", ""] {
        let (status, err) = add(&client, bad).await;
        assert_eq!((status, err["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")), "{bad}: {err}");
    }

    // A YouTube channel by handle; its ref is the channel id.
    let (status, channel) = add(&client, "https://www.youtube.com/@BrandTV/shorts").await;
    assert_eq!(status, StatusCode::CREATED, "{channel}");
    assert_eq!(channel["ref"], "youtube:channel:UCabcdefghijklmnopqrstuv");

    // A handle change: the same creator, its new handle shown.
    let (status, tiktok) = add(&client, "https://www.tiktok.com/@brand").await;
    assert_eq!(status, StatusCode::CREATED);
    app.sim.rename_creator(&BRAND.to_string(), "brand.new");
    let (status, renamed) = add(&client, "https://www.tiktok.com/@brand.new").await;
    assert_eq!(
        (status, &renamed["ref"], renamed["handle"].as_str()),
        (StatusCode::OK, &tiktok["ref"], Some("brand.new"))
    );

    // Two is this account's limit.
    let (status, err) = add(&client, "https://www.tiktok.com/@third").await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::CONFLICT, Some("creator_limit")), "{err}");

    // Following needs a pack; a refresh does not, and collects what it finds.
    let watch_path = format!("/api/v1/creators/{BRAND_REF}/watch");
    let (status, err) = call(&client, Method::PUT, &watch_path, Some(json!({"enabled": true}))).await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::PAYMENT_REQUIRED, Some("payment_required")));
    let (status, err) =
        call(&client, Method::PUT, &watch_path, Some(json!({"enabled": true, "interval_min": 30}))).await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")));
    app.grant(&account, 100).await;
    app.sim.publish(&BRAND.to_string(), post_of(9, now + HOUR, false));
    set_time(&app, &clock, now + 2 * HOUR);
    let (status, run) = call(&client, Method::POST, &format!("/api/v1/creators/{BRAND_REF}/refresh"), None).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["found"], json!([post_ref(9)]));
    let batch = run["batch_id"].as_str().expect("a batch collects it").to_owned();
    let done = until("the batch finished", async || {
        let b = client.get::<Value>(&format!("/api/v1/analyze/batch/{batch}")).await.ok();
        b["finished_at"].is_string().then_some(b)
    })
    .await;
    assert_eq!(done["counts"]["complete"], 1, "{done}");
    assert_eq!(used(&client).await, 9, "listing is free; the post's comments are charged");
    // The channel's new Short, the same way.
    let short = youtube_video_id(YouTubeScenario::Normal, 4);
    let channel_id = "UCabcdefghijklmnopqrstuv";
    app.sim.publish(channel_id, SimCreatorPost { id: short.clone(), published_at_ms: now + HOUR, pinned: false });
    let (status, run) =
        call(&client, Method::POST, &format!("/api/v1/creators/youtube:channel:{channel_id}/refresh"), None).await;
    assert_eq!((status, &run["found"]), (StatusCode::OK, &json!([format!("youtube:{short}")])), "{run}");
    eventually("the Short collected", async || used(&client).await == 13).await;
    // Nothing new since: the next refresh finds nothing.
    let (_, run) = call(&client, Method::POST, &format!("/api/v1/creators/{BRAND_REF}/refresh"), None).await;
    assert_eq!(run["found"], json!([]));
    let listed = client.get::<Value>("/api/v1/creators").await.ok();
    assert_eq!(listed["items"].as_array().expect("items").len(), 2);

    // Removing the creator keeps what it found in the library.
    let (status, _) = call(&client, Method::DELETE, &format!("/api/v1/creators/{BRAND_REF}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, err) = call(&client, Method::GET, &format!("/api/v1/creators/{BRAND_REF}"), None).await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
    assert_eq!(entry(&client, &post_ref(9)).await["creator_ref"], BRAND_REF);
    let (status, err) = call(&client, Method::GET, "/api/v1/creators/tiktok:brand", None).await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyword_alert_on_a_found_post_names_the_creator() {
    let (app, clock) = on_clock(|_| {}).await;
    let now = clock.now_ms();
    app.sim.add_creator(SimCreator::tiktok(BRAND, "brand"));
    let (account, token) = app.integrator().await;
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&token));
    client.put_json("/api/v1/keywords", json!({"keywords": ["price", "Preis", "🔥"]})).await.ok();
    add(&client, "https://www.tiktok.com/@brand").await;
    app.sim.publish(&BRAND.to_string(), post_of(120, now + HOUR, false));
    set_time(&app, &clock, now + 2 * HOUR);
    let (status, run) = call(&client, Method::POST, &format!("/api/v1/creators/{BRAND_REF}/refresh"), None).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    eventually("alerts raised on the found post", async || {
        app.outbox_payloads("event").await.iter().any(|p| p.contains("\"keyword.alert\""))
    })
    .await;
    let validator = schema("keyword-alert-event.schema.json");
    for payload in app.outbox_payloads("event").await.iter().filter(|p| p.contains("\"keyword.alert\"")) {
        let alert: Value = serde_json::from_str(payload).expect("JSON");
        assert_valid(&validator, &alert);
        assert_eq!(alert["creator"]["ref"], BRAND_REF, "{alert}");
        assert_eq!(alert["creator"]["handle"], "brand");
    }
    // An integrator who polls the alerts can tell the creator too; a post collected by hand
    // has none.
    let listed = client.get::<Value>("/api/v1/keyword-alerts").await.ok();
    let items = listed["items"].as_array().expect("items");
    assert!(!items.is_empty());
    for alert in items {
        assert_eq!(
            (alert["creator"]["ref"].as_str(), alert["creator"]["handle"].as_str()),
            (Some(BRAND_REF), Some("brand"))
        );
    }
    let by_hand = tiktok_post_id(TikTokScenario::Normal, 60);
    client.collect(by_hand).await;
    let by_hand_ref = format!("tiktok:{by_hand}");
    let listed = cova_tests::until("the alerts of the post collected by hand", async || {
        let listed = client.get::<Value>("/api/v1/keyword-alerts").await.ok();
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        let own: Vec<Value> = items.into_iter().filter(|a| a["ref"] == by_hand_ref.as_str()).collect();
        (!own.is_empty()).then_some(own)
    })
    .await;
    assert!(listed.iter().all(|a| a.get("creator").is_none()), "{listed:?}");
    // The search by creator finds the comments of the creator's posts alone.
    let all = client.search(&[("q", "price"), ("limit", "100")]).await.ok();
    let posts = |page: &Value| -> std::collections::BTreeSet<String> {
        page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| h["post"]["ref"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert!(posts(&all).contains(&by_hand_ref) && posts(&all).len() == 2, "{:?}", posts(&all));
    let theirs = client.search(&[("q", "price"), ("limit", "100"), ("creator", BRAND_REF)]).await.ok();
    assert_eq!(posts(&theirs).len(), 1, "{:?}", posts(&theirs));
    assert!(!posts(&theirs).contains(&by_hand_ref));
    // A creator no longer followed: its filter finds nothing (its posts stay in the library).
    let (status, _) = call(&client, Method::DELETE, &format!("/api/v1/creators/{BRAND_REF}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let gone = client.search(&[("q", "price"), ("limit", "100"), ("creator", BRAND_REF)]).await.ok();
    assert_eq!(gone["items"], json!([]));
    assert_eq!(posts(&client.search(&[("q", "price"), ("limit", "100")]).await.ok()).len(), 2);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_creator_is_skipped_with_the_reason_in_a_month_without_a_pack() {
    let (app, clock) = on_clock(|_| {}).await;
    let added_at = clock.now_ms();
    app.sim.add_creator(SimCreator::tiktok(BRAND, "brand"));
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    add(&client, "https://www.tiktok.com/@brand").await;
    let watch_path = format!("/api/v1/creators/{BRAND_REF}/watch");
    let (status, _) = call(&client, Method::PUT, &watch_path, Some(json!({"enabled": true}))).await;
    assert_eq!(status, StatusCode::OK);
    let creator = async || client.get::<Value>(&format!("/api/v1/creators/{BRAND_REF}")).await.ok();
    eventually("the first listing", async || creator().await["watch"]["last_run_at"].is_string()).await;

    // July: June's pack is over. The due run is skipped, says why, and lists nothing.
    app.sim.publish(&BRAND.to_string(), post_of(8, added_at + 24 * DAY, false));
    app.sim.clear_requests();
    set_time(&app, &clock, added_at + 25 * DAY);
    let skipped = until("the skipped run", async || {
        let c = creator().await;
        c["watch"]["last_error"].as_str().map(str::to_owned)
    })
    .await;
    assert!(skipped.contains("pack"), "{skipped}");
    assert!(found(&client).await.is_empty());
    assert!(!app.sim.requests().iter().any(|r| r.path == "/api/post/item_list/"), "nothing listed without a pack");
    app.stop().await;
}
