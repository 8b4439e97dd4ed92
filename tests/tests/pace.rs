//! The platforms' pace spent fairly and never for nothing, and what a platform showed said
//! honestly, end to end: comments turned off on each platform complete with nothing charged and
//! say so; a listing a platform stopped short is never a silent `complete`; an Instagram session
//! pages both ways and reads a post gated for visitors; a request answered before its turn
//! leaves nothing for the platform; a flood of links that lead nowhere reaches the platform at
//! most as often as the failed-lookup bound allows, and a list of them is answered at once.

use cova_sim::{InstagramScenario as I, TikTokScenario, YouTubeScenario, instagram_shortcode, tiktok_post_id};
use cova_tests::{Client, flat_comments, spawn_app_with, tiktok_url};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn reel(scenario: I, comments: u64) -> String {
    format!("https://www.instagram.com/reel/{}/", instagram_shortcode(scenario, comments))
}

async fn run(client: &Client, url: &str) -> Value {
    let queued = client.analyze(url, None).await.ok();
    client.wait_job(queued["job_id"].as_str().expect("job_id")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_platform_showed_is_said_and_a_listing_stopped_short_is_never_a_silent_complete() {
    let app = spawn_app_with(|c| c.platforms.instagram.sessions = vec!["sim-session".to_owned().into()]).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 2_000).await;
    let client = app.client(Some(&token));

    // Comments turned off, on each platform: complete, nothing to collect, nothing charged, said.
    let youtube =
        format!("https://www.youtube.com/shorts/{}", cova_sim::youtube_video_id(YouTubeScenario::CommentsDisabled, 9));
    let tiktok = tiktok_url(tiktok_post_id(TikTokScenario::CommentsOff, 12));
    for url in [tiktok.clone(), youtube, reel(I::CommentsOff, 12)] {
        let job = run(&client, &url).await;
        assert_eq!(job["status"], "complete", "{url}: {job}");
        let result = &job["result"];
        assert_eq!((&result["comments_off"], &result["comments_total"]), (&json!(true), &json!(0)), "{url}: {result}");
        assert_eq!((&result["truncated"], &result["comments_new"]), (&json!(false), &json!(0)), "{url}");
        let history: Value =
            client.get(&format!("/api/v1/analyze?ref={}", job["ref"].as_str().unwrap_or(""))).await.ok();
        assert_eq!(history["items"][0]["comments_off"], true, "{history}");
    }
    // TikTok's page says so: its comment list is never asked for.
    let id = tiktok_post_id(TikTokScenario::CommentsOff, 12).to_string();
    let listed = app
        .sim
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/api/comment/list/") && r.param("aweme_id") == Some(&id))
        .count();
    assert_eq!(listed, 0, "no request spent on an empty list");
    assert_eq!(client.usage().await.ok().comments.used, 0, "nothing charged");

    // A session pages both ways: every comment, not truncated.
    let job = run(&client, &reel(I::Headload, 150)).await;
    let result = &job["result"];
    assert_eq!((&result["comments_total"], &result["truncated"]), (&json!(150), &json!(false)), "{job}");
    assert_eq!(flat_comments(&result["comments"]).len(), 150);
    // A cursor Instagram stopped moving: cut short and said, only what was handed out charged.
    let before = client.usage().await.ok().comments.used;
    let job = run(&client, &reel(I::StuckCursor, 300)).await;
    let result = &job["result"];
    assert_eq!(
        (&result["truncated"], &result["truncated_reason"]),
        (&json!(true), &json!("platform_stopped")),
        "{job}"
    );
    let total = result["comments_total"].as_i64().expect("a total");
    assert!(total > 0 && total < 300, "{total}");
    assert_eq!(client.usage().await.ok().comments.used - before, total, "charged what was handed out");
    // A post gated for visitors is read with the session.
    let job = run(&client, &reel(I::Private, 40)).await;
    assert_eq!((&job["status"], &job["result"]["comments_total"]), (&json!("complete"), &json!(40)), "{job}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_answered_before_its_turn_leaves_nothing_for_the_platform() {
    // One TikTok request every 4 s; a request is answered after 2.5 s at the latest.
    let app = spawn_app_with(|c| {
        c.platforms.tiktok.requests_per_second = 0.25;
        c.http.request_timeout_ms = 2_500;
    })
    .await;
    let (_, first) = app.integrator().await;
    let (_, second) = app.integrator().await;
    let (a, b) = (app.client(Some(&first)), app.client(Some(&second)));
    a.metadata(&tiktok_url(tiktok_post_id(TikTokScenario::Normal, 1))).await.ok();
    // Its turn would come 4 s after the first: the request is answered before (503).
    let waits = tiktok_post_id(TikTokScenario::Normal, 2);
    let (status, err) = a.metadata(&tiktok_url(waits)).await.err();
    assert_eq!((status, err.code.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"), "{}", err.detail);
    // Another account's lookup gets that turn, within its own time bound.
    let meta = b.metadata(&tiktok_url(tiktok_post_id(TikTokScenario::Normal, 3))).await.ok();
    assert_eq!(meta["metrics"]["comments"], 3);
    let pages: Vec<String> =
        app.sim.requests().iter().filter(|r| r.path.starts_with("/@")).map(|r| r.path.clone()).collect();
    assert!(!pages.iter().any(|p| p.contains(&waits.to_string())), "the answered request was never sent: {pages:?}");
    assert_eq!(pages.len(), 2, "{pages:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_links_that_lead_nowhere_costs_the_platform_at_most_the_failure_bound() {
    let app = spawn_app_with(|_| {}).await;
    let (flooder, token) = app.integrator().await;
    app.grant(&flooder, 1_000).await;
    let client = app.client(Some(&token));
    let nowhere = |list: u64, k: u64| format!("https://www.instagram.com/share/nowhere{list}x{k}/");
    // Three lists of 100 such links at once: each answered at once, its links refused alone.
    let lists: Vec<_> = (0..3)
        .map(|list| {
            let client = client.clone();
            tokio::spawn(async move {
                let urls: Vec<String> = (0..100).map(|k| nowhere(list, k)).collect();
                client.post_json("/api/v1/analyze/batch/preview", json!({ "urls": urls })).await.ok()
            })
        })
        .collect();
    for list in lists {
        let preview = list.await.expect("a preview");
        assert_eq!(preview["items"].as_array().map(Vec::len), Some(100), "{preview}");
    }
    // Whatever is asked again, the links' lookups stop at the bound.
    let again = cova_tests::until("every link looked up or refused", async || {
        let urls: Vec<String> = (0..100).map(|k| nowhere(0, k)).collect();
        let preview = client.post_json("/api/v1/analyze/batch/preview", json!({ "urls": urls })).await.ok();
        (preview["counting"] == 0).then_some(preview)
    })
    .await;
    assert!(again["items"].as_array().expect("items").iter().all(|i| !i["error"].is_null()), "{again}");
    let asked = app.sim.requests().iter().filter(|r| r.path.contains("/share/nowhere")).count();
    assert!((30..=32).contains(&asked), "{asked} share links reached Instagram");
    // A list of them is answered with each link refused: nothing is lost, nothing started.
    let urls: Vec<String> = (0..100).map(|k| nowhere(4, k)).collect();
    let batch = client.post_json("/api/v1/analyze/batch", json!({ "urls": urls })).await.ok();
    let items = batch["items"].as_array().expect("items");
    assert!(items.iter().all(|i| i["state"] == "refused" && i["error"]["code"] == "rate_limited"), "{batch}");
    assert_eq!(app.sim.requests().iter().filter(|r| r.path.contains("/share/nowhere")).count(), asked);
    app.stop().await;
}

/// The platform's requests in the order it received them, from `since` on, named by whose
/// they are: `F` for a flood link, `R` for anything else (media downloads are another host).
fn order(app: &cova_tests::TestApp, since: usize) -> String {
    app.sim.requests()[since..]
        .iter()
        .filter(|r| !r.path.starts_with("/cdn/"))
        .map(|r| if r.path.contains("/share/flood") { 'F' } else { 'R' })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_one_account_delays_another_accounts_reel_by_one_turn_per_request_at_most() {
    let app = spawn_app_with(|c| {
        c.platforms.instagram.requests_per_second = 20.0;
        c.limits.api_requests_per_minute = 1_000_000;
    })
    .await;
    let (reader, token) = app.integrator().await;
    app.grant(&reader, 1_000).await;
    let reader = app.client(Some(&token));
    let (_, flood) = app.integrator().await;
    let flooder = app.client(Some(&flood));
    let since = app.sim.requests().len();
    let alone = run(&reader, &reel(I::Normal, 5)).await;
    assert_eq!(alone["status"], "complete", "{alone}");
    let reel_requests = order(&app, since).len();

    // Three lists of 100 share links that lead nowhere, then the reel while they are counted.
    for list in 0..3 {
        let urls: Vec<String> = (0..100).map(|k| format!("https://www.instagram.com/share/flood{list}x{k}/")).collect();
        let preview = flooder.post_json("/api/v1/analyze/batch/preview", json!({ "urls": urls })).await.ok();
        assert_eq!(preview["items"].as_array().map(Vec::len), Some(100), "{preview}");
    }
    let since = app.sim.requests().len();
    // Another reel of 5 comments (a media id outside the scenarios' scheme: `pk % 1000` comments).
    let flooded = run(&reader, &format!("https://www.instagram.com/reel/{}/", cova_sim::shortcode_of(6_005))).await;
    assert_eq!(flooded["status"], "complete", "{flooded}");
    // From the reel's first request to its last, each of its requests waited for one flood
    // turn at most (deficit round robin between the two accounts).
    let seen = order(&app, since);
    let (first, last) = (seen.find('R').expect("the reel's requests"), seen.rfind('R').expect("its last"));
    let during = &seen[first..=last];
    let mine = during.matches('R').count();
    assert_eq!(mine, reel_requests, "the same requests as alone: {seen}");
    assert!(during.matches('F').count() <= mine, "more than one flood turn per reel request: {seen}");
    app.stop().await;
}
