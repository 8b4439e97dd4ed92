//! Instagram Reels end to end, against the simulator's Instagram: every URL form to one ref;
//! a post read logged out (the visitor's part, said and charged honestly) and with a session
//! (every comment and reply); each wall with its code and nothing charged; a batch of the three
//! platforms; exports and keyword alerts of an Instagram post; a followed account with a pinned
//! reel and a new name.

use cova_domain::ManualClock;
use cova_domain::text::Matcher;
use cova_sim::{
    InstagramScenario as I, SimCreator, SimCreatorPost, TikTokScenario, YouTubeScenario, instagram_shortcode,
    tiktok_post_id, youtube_video_id,
};
use cova_tests::{
    Client, TestApp, assert_valid, eventually, flat_comments, schema, spawn_app, spawn_app_with, spawn_on_clock, until,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn reel(scenario: I, comments: u64) -> (String, String) {
    let code = instagram_shortcode(scenario, comments);
    (format!("https://www.instagram.com/reel/{code}/?igsh=abc"), format!("instagram:{code}"))
}

async fn used(client: &Client) -> (i64, i64) {
    let u = client.usage().await.ok();
    (u.comments.used, u.comments.reserved)
}

async fn run(client: &Client, url: &str) -> Value {
    let queued = client.analyze(url, None).await.ok();
    client.wait_job(queued["job_id"].as_str().expect("job_id")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logged_out_a_post_gives_the_visitors_part_says_so_and_charges_only_that() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let (url, r#ref) = reel(I::Normal, 120);
    let code = r#ref.trim_start_matches("instagram:");
    let truth = app.sim.expected_instagram_post(code).expect("a simulated post");

    // Every URL form names the same post.
    for form in [
        url.clone(),
        format!("https://instagram.com/p/{code}"),
        format!("https://www.instagram.com/{}/reel/{code}/", truth.metadata.author_handle),
        format!("https://www.instagram.com/share/reel/{code}/"),
    ] {
        let meta = client.metadata(&form).await.ok();
        assert_eq!((meta["ref"].as_str(), meta["platform"].as_str()), (Some(r#ref.as_str()), Some("instagram")));
    }
    let meta = client.metadata(&url).await.ok();
    assert_eq!(meta["author"]["handle"], truth.metadata.author_handle.as_str(), "{meta}");
    assert_eq!(meta["metrics"]["comments"], 120);
    assert_eq!(meta["description"], truth.metadata.description.as_str());
    assert_eq!(meta["url"], format!("https://www.instagram.com/reel/{code}/"));

    let job = run(&client, &url).await;
    assert_eq!(job["status"], "complete", "{job}");
    let result = &job["result"];
    let visible: Vec<&str> =
        truth.comments.iter().take(cova_sim::instagram::VISITOR_LIMIT).map(|c| c.id.as_str()).collect();
    let got: Vec<&str> =
        result["comments"].as_array().expect("comments").iter().map(|c| c["id"].as_str().unwrap_or("")).collect();
    assert_eq!(got, visible, "what a visitor is shown, each once");
    assert_eq!((&result["truncated"], &result["truncated_reason"]), (&json!(true), &json!("visitor_view")));
    assert_eq!(result["comments_total"], 15, "{result}");
    assert_eq!(job["progress"]["comments_expected"], 120, "the post's own count beside it: {job}");
    assert_eq!(used(&client).await, (15, 0), "charged what was collected, the rest of the hold returned");

    // The library entry, its export and its cover kept in cova's store.
    let e = client.entry(&r#ref, "").await.ok();
    assert_eq!((e["platform"].as_str(), e["comment_count"].as_u64()), (Some("instagram"), Some(15)), "{e}");
    let (status, headers, csv) =
        client.raw(client.request(Method::GET, &format!("/api/v1/analyses/{}/export?format=csv", r#ref))).await;
    assert_eq!(status, StatusCode::OK);
    let disposition = headers.get("content-disposition").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert_eq!(disposition, format!("attachment; filename=\"instagram-{code}.csv\""));
    assert_eq!(String::from_utf8_lossy(&csv).lines().count(), 16, "a header and the 15 comments");
    let media = meta["media"].as_array().expect("media");
    assert!(media.iter().any(|m| m["type"] == "cover"), "{meta}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_session_every_comment_and_reply_is_collected_and_charged() {
    let app = spawn_app_with(|c| c.platforms.instagram.sessions = vec!["sim-session".to_owned().into()]).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let (url, r#ref) = reel(I::Normal, 90);
    let truth = app.sim.expected_instagram_post(r#ref.trim_start_matches("instagram:")).expect("a post");
    let job = run(&client, &url).await;
    assert_eq!(job["status"], "complete", "{job}");
    let result = &job["result"];
    assert_eq!((&result["truncated"], &result["truncated_reason"]), (&json!(false), &Value::Null));
    let comments = result["comments"].as_array().expect("comments");
    let top: Vec<&str> = comments.iter().map(|c| c["id"].as_str().unwrap_or("")).collect();
    let want: Vec<&str> = truth.comments.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(top, want);
    for (c, t) in comments.iter().zip(&truth.comments) {
        let replies: Vec<&str> =
            c["replies"].as_array().expect("replies").iter().map(|r| r["id"].as_str().unwrap_or("")).collect();
        assert_eq!(replies, t.replies.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), "{}", t.id);
    }
    assert_eq!(flat_comments(&result["comments"]).len(), 90);
    assert_eq!(used(&client).await, (90, 0));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_under_a_checkpoint_is_set_aside_and_its_route_reads_logged_out() {
    let checkpointed = cova_sim::instagram::CHECKPOINTED_SESSION.to_owned();
    let app = spawn_app_with(|c| c.platforms.instagram.sessions = vec![checkpointed.into()]).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");
    for n in [50, 51] {
        let (url, r#ref) = reel(I::Normal, n);
        let job = run(&client, &url).await;
        assert_eq!((&job["status"], &job["result"]["truncated_reason"]), (&json!("complete"), &json!("visitor_view")));
        assert_eq!(job["result"]["comments_total"], 15, "{job}");
        // The job's event, as its schema says.
        let event = until("the job.complete event", async || {
            let message = tokio::time::timeout(std::time::Duration::from_secs(20), events.next()).await.ok()??;
            let event = serde_json::from_slice::<Value>(&message.payload).ok()?;
            (message.routing_key == "job.complete" && event["ref"] == r#ref.as_str()).then_some(event)
        })
        .await;
        assert_valid(&schema("job-event.schema.json"), &event);
    }
    // Only the first collection asked with the session: then it was set aside.
    let with_session = app.sim.requests().iter().filter(|r| r.path.contains("/api/v1/media/")).count();
    assert_eq!(with_session, 1, "one REST request met the checkpoint, none after");
    assert_eq!(used(&client).await, (30, 0));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_wall_fails_with_its_code_and_charges_nothing() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 500).await;
    let client = app.client(Some(&token));
    for (scenario, code, words) in [
        (I::Private, "audience_restricted", "private"),
        (I::LoginWall, "audience_restricted", "logged-in viewers"),
        (I::Deleted, "parse_error", "deleted"),
        (I::UnknownShape, "parse_error", "shape cova does not know"),
    ] {
        let (url, _) = reel(scenario, 12);
        let job = run(&client, &url).await;
        assert_eq!(job["status"], "failed", "{scenario:?}: {job}");
        assert_eq!(job["error"]["code"], code, "{scenario:?}");
        let detail = job["error"]["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(words), "{scenario:?}: {detail}");
        // The metadata endpoint answers the same wall at once.
        let (status, err) = client.metadata(&url).await.err();
        assert_eq!(err.code, code, "{scenario:?}: {status}");
    }
    // Comments turned off: a post without comments, not a failure.
    let (url, _) = reel(I::CommentsOff, 12);
    let job = run(&client, &url).await;
    assert_eq!((&job["status"], &job["result"]["comments_total"]), (&json!("complete"), &json!(0)), "{job}");
    // "Please wait a few minutes" is waited out.
    let (url, _) = reel(I::RateLimitedFirst2, 8);
    assert_eq!(run(&client, &url).await["status"], "complete");
    let charged = used(&client).await.0;
    assert!(charged > 0 && charged <= 8, "only the rate-limited post's comments: {charged}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_on_the_address_is_unavailable_and_charges_nothing() {
    let app = spawn_app_with(|c| c.scraper.max_attempts = 2).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 500).await;
    let client = app.client(Some(&token));
    let (url, _) = reel(I::Checkpoint, 12);
    let job = run(&client, &url).await;
    assert_eq!((&job["status"], &job["error"]["code"]), (&json!("failed"), &json!("unavailable")), "{job}");
    let detail = job["error"]["detail"].as_str().unwrap_or_default();
    assert!(!detail.contains("checkpoint") && !detail.contains("HTTP"), "in words: {detail}");
    assert_eq!(used(&client).await, (0, 0));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_mixes_the_three_platforms_and_alerts_on_an_instagram_post() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&token));
    let (ig_url, ig_ref) = reel(I::Normal, 40);
    let code = ig_ref.trim_start_matches("instagram:").to_owned();
    let truth = app.sim.expected_instagram_post(&code).expect("a post");
    // A word of a comment a visitor is shown: it must raise an alert.
    let word = truth.comments[3].text.split_whitespace().find(|w| w.chars().count() >= 4).expect("a word");
    let word: String = word.chars().filter(|c| c.is_alphanumeric()).collect();
    client.put_json("/api/v1/keywords", json!({"keywords": [word]})).await.ok();
    let urls = [
        format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, 30)),
        format!("https://www.youtube.com/shorts/{}", youtube_video_id(YouTubeScenario::Normal, 20)),
        ig_url,
    ];
    let batch = client.post_json("/api/v1/analyze/batch", json!({ "urls": urls })).await.ok();
    let id = batch["batch_id"].as_str().expect("batch_id").to_owned();
    let done = until("the batch ends", async || {
        let b = client.get::<Value>(&format!("/api/v1/analyze/batch/{id}")).await.ok();
        b["finished_at"].is_string().then_some(b)
    })
    .await;
    let items = done["items"].as_array().expect("items");
    let states: Vec<(&str, &str)> =
        items.iter().map(|i| (i["ref"].as_str().unwrap_or(""), i["state"].as_str().unwrap_or(""))).collect();
    assert!(states.iter().all(|(_, s)| *s == "complete"), "{states:?}");
    assert_eq!(states[2].0, ig_ref);
    assert_eq!(items[2]["truncated_reason"], "visitor_view", "{}", items[2]);

    // Keyword alerts of the Instagram post: those of the comments it collected.
    let matcher = Matcher::new(&[word.as_str()]);
    let expected = truth.comments.iter().take(15).filter(|c| !matcher.find(&c.text).is_empty()).count();
    assert!(expected >= 1);
    eventually("the Instagram post's alerts", async || {
        let alerts = client.get::<Value>("/api/v1/keyword-alerts?limit=100").await.ok();
        alerts["items"].as_array().is_some_and(|a| a.iter().filter(|x| x["ref"] == ig_ref.as_str()).count() == expected)
    })
    .await;
    // The JSON Lines export of the post, one comment a line.
    let (status, _, body) =
        client.raw(client.request(Method::GET, &format!("/api/v1/analyses/{ig_ref}/export?format=jsonl"))).await;
    assert_eq!((status, String::from_utf8_lossy(&body).lines().count()), (StatusCode::OK, 15));
    app.stop().await;
}

const START: &str = "2026-06-10T12:00:00Z";
const HOUR: i64 = 3_600_000;
const ACCOUNT_ID: u64 = 5_512;

fn set_time(app: &TestApp, clock: &ManualClock, at: i64) {
    clock.set(at);
    app.sim.set_clock_ms(at);
}

async fn add(client: &Client, url: &str) -> (StatusCode, Value) {
    let (status, _, body) =
        client.raw(client.request(Method::POST, "/api/v1/creators").json(&json!({ "url": url }))).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_account_is_its_id_its_pinned_reel_never_ends_the_listing_and_new_reels_are_collected() {
    let (app, clock) = spawn_on_clock(START, |_| {}).await;
    let added_at = clock.now_ms();
    app.sim.set_clock_ms(added_at);
    let code = |n: u64| instagram_shortcode(I::Normal, n);
    let mut brand = SimCreator::instagram(ACCOUNT_ID, "brand.reels");
    // An old pinned reel first on the profile, and a reel of two hours ago.
    brand.posts = vec![
        SimCreatorPost { id: code(3), published_at_ms: added_at - 40 * 24 * HOUR, pinned: true },
        SimCreatorPost { id: code(4), published_at_ms: added_at - 2 * HOUR, pinned: false },
    ];
    app.sim.add_creator(brand);
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let creator_ref = format!("instagram:user:{ACCOUNT_ID}");
    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");

    let (status, creator) = add(&client, "https://www.instagram.com/brand.reels/reels/").await;
    assert_eq!(status, StatusCode::CREATED, "{creator}");
    assert_eq!(
        (creator["ref"].as_str(), creator["platform"].as_str()),
        (Some(creator_ref.as_str()), Some("instagram"))
    );
    assert_eq!(creator["handle"], "brand.reels");
    let (status, err) = add(&client, "https://www.instagram.com/nobody.here/").await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{err}");

    let watch = json!({"enabled": true, "interval_min": 60, "follow_days": 1});
    let (status, _, _) =
        client.raw(client.request(Method::PUT, &format!("/api/v1/creators/{creator_ref}/watch")).json(&watch)).await;
    assert_eq!(status, StatusCode::OK);
    let found = async || {
        let c = client.get::<Value>(&format!("/api/v1/creators/{creator_ref}")).await.ok();
        c["found"]["items"].as_array().map(|a| a.iter().map(|p| p["ref"].as_str().unwrap_or("").to_owned()).collect())
    };
    eventually("the first listing", async || {
        let c = client.get::<Value>(&format!("/api/v1/creators/{creator_ref}")).await.ok();
        c["watch"]["last_run_at"].is_string()
    })
    .await;
    assert_eq!(found().await, Some(Vec::<String>::new()), "the old pinned reel is not new");

    // The account changes its name, then publishes two reels.
    app.sim.rename_creator(&ACCOUNT_ID.to_string(), "brand.renamed");
    for (n, at) in [(5, 2 * HOUR), (6, 3 * HOUR)] {
        app.sim.publish(
            &ACCOUNT_ID.to_string(),
            SimCreatorPost { id: code(n), published_at_ms: added_at + at, pinned: false },
        );
    }
    set_time(&app, &clock, added_at + 4 * HOUR);
    let want = vec![format!("instagram:{}", code(6)), format!("instagram:{}", code(5))];
    eventually("both new reels found and collected", async || {
        if found().await.as_ref() != Some(&want) {
            return false;
        }
        let mut ready = true;
        for r in &want {
            ready &= client.entry(r, "").await.ok()["status"] == "ready";
        }
        ready
    })
    .await;
    let e = client.entry(&want[0], "").await.ok();
    assert_eq!(e["creator_ref"], creator_ref.as_str(), "{e}");
    let event = until("a creator.post_found event", async || {
        let message = tokio::time::timeout(std::time::Duration::from_secs(20), events.next()).await.ok()??;
        (message.routing_key == "creator.post_found").then(|| serde_json::from_slice::<Value>(&message.payload).ok())?
    })
    .await;
    assert_valid(&schema("creator-event.schema.json"), &event);
    assert_eq!(event["creator"]["ref"], creator_ref.as_str());
    // The renamed account is the same creator.
    let (status, again) = add(&client, "https://www.instagram.com/brand.renamed/").await;
    assert_eq!((status, again["ref"].as_str()), (StatusCode::OK, Some(creator_ref.as_str())), "{again}");
    assert_eq!(again["handle"], "brand.renamed");
    app.stop().await;
}
