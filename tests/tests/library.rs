//! The library: every `/analyses` endpoint, refresh and watch runs charging only new
//! comments, the 14-day lifetime on a test clock, and exports that parse back.

use cova_app::Role;
use cova_domain::ManualClock;
use cova_domain::time::parse_rfc3339;
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{
    Client, TestApp, TestDatabase, eventually, flat_comments, spawn_app, spawn_app_with_sim, spawn_stack, tiktok_url,
};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(86_400);

async fn used(client: &Client) -> i64 {
    client.usage().await.ok().comments.used
}

/// An app whose product rules run on a clock the test moves; mid-month, so that days later
/// are the same balance month.
async fn app_on_clock(sim: SimConfig) -> (TestApp, ManualClock) {
    let clock = ManualClock::starting_at(parse_rfc3339("2026-06-10T12:00:00Z").expect("a time"));
    let app = spawn_stack(TestDatabase::create().await, sim, |b| b.roles(Role::ALL).clock(clock.clock()), |_| {}).await;
    (app, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_job_is_in_the_library_with_its_breakdown() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 49);
    let r#ref = format!("tiktok:{id}");
    client.collect(id).await;

    let list = client.get::<Value>("/api/v1/analyses/saved").await.ok();
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    let item = &items[0];
    assert_eq!(
        (item["ref"].as_str(), item["status"].as_str(), item["platform"].as_str()),
        (Some(r#ref.as_str()), Some("ready"), Some("tiktok"))
    );
    assert_eq!(item["comment_count"], 49);
    assert_eq!(item["watch"]["enabled"], false);
    assert!(item["metadata"]["author"].is_object(), "the post's metadata is kept: {item}");
    let scraped = parse_rfc3339(item["last_scraped_at"].as_str().expect("scraped")).expect("time");
    let expires = parse_rfc3339(item["expires_at"].as_str().expect("expires")).expect("time");
    assert_eq!(expires - scraped, 14 * 86_400_000, "14 days after the last full scrape");

    let entry = client.entry(&r#ref, "").await.ok();
    let comments = flat_comments(&entry["comments"]);
    assert_eq!(comments.len(), 49);
    assert!(comments.iter().all(|c| c["first_seen_at"].is_string()), "every comment says when it was first seen");
    assert_eq!(entry["counts"]["comments"], 49);
    assert_eq!(entry["counts"]["new"], 49, "a first scrape's comments are all new");
    let top = entry["counts"]["top_level"].as_i64().expect("top");
    assert_eq!(entry["counts"]["replies"].as_i64().expect("replies") + top, 49);
    assert_eq!(entry["comments"].as_array().expect("comments").len() as i64, top);

    // Sorted by likes, paged by cursor.
    let mut likes = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(c) => format!("?sort=likes&limit=7&cursor={c}"),
            None => "?sort=likes&limit=7".to_owned(),
        };
        let page = client.entry(&r#ref, &query).await.ok();
        likes.extend(page["comments"].as_array().expect("page").iter().map(|c| c["likes"].as_i64().expect("likes")));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(likes.len() as i64, top);
    assert!(likes.windows(2).all(|w| w[0] >= w[1]), "most liked first: {likes:?}");

    // A text search finds comments by their text.
    let word = comments[0]["text"].as_str().expect("text").split_whitespace().max_by_key(|w| w.len()).expect("a word");
    let found = client.entry(&r#ref, &format!("?q={}", urlencode(word))).await.ok();
    let hits = flat_comments(&found["comments"]);
    assert!(!hits.is_empty());
    let lower = word.to_lowercase();
    for c in found["comments"].as_array().expect("comments") {
        let own = c["text"].as_str().unwrap_or_default().to_lowercase().contains(&lower)
            || c["author"]["handle"].as_str().unwrap_or_default().to_lowercase().contains(&lower);
        let reply = c["replies"]
            .as_array()
            .expect("replies")
            .iter()
            .any(|r| r["text"].as_str().unwrap_or_default().to_lowercase().contains(&lower));
        assert!(own || reply, "{c}");
    }
    app.stop().await;
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_remove_and_the_errors_of_the_library() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 12);
    let r#ref = format!("tiktok:{id}");
    let job = client.collect(id).await;

    // Removal: 204, out of the library, its breakdown gone.
    let (status, _, body) = client.raw(client.request(Method::DELETE, &format!("/api/v1/analyses/{ref}"))).await;
    assert_eq!((status.as_u16(), body.len()), (204, 0));
    let (status, err) = client.entry(&r#ref, "").await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (404, "not_found"));
    assert!(client.get::<Value>("/api/v1/analyses/saved").await.ok()["items"].as_array().expect("items").is_empty());
    let (status, _) =
        client.send::<Value>(client.request(Method::DELETE, &format!("/api/v1/analyses/{ref}"))).await.err();
    assert_eq!(status.as_u16(), 404, "removing twice");
    let released = client.job(job["job_id"].as_str().expect("id")).await.ok();
    assert_eq!(
        (released["result"]["released"].as_bool(), released["result"]["comments"].as_array().map(Vec::len)),
        (Some(true), Some(0))
    );

    // Saved again: back in the library, without a breakdown until it is refreshed.
    let saved = client.post_json(&format!("/api/v1/analyses/{ref}/save"), json!({})).await.ok();
    assert_eq!(saved["status"], "expired");
    let again = client.post_json(&format!("/api/v1/analyses/{ref}/save"), json!({})).await.ok();
    assert_eq!(again["saved_at"], saved["saved_at"], "saving twice creates no second entry");
    assert_eq!(client.get::<Value>("/api/v1/analyses/saved").await.ok()["items"].as_array().expect("items").len(), 1);
    let entry = client.entry(&r#ref, "").await.ok();
    assert_eq!((entry["status"].as_str(), entry["comments"].as_array().map(Vec::len)), (Some("expired"), Some(0)));

    // Unknown analyses, malformed refs, bad queries, another account, a token without the scope.
    let other = format!("tiktok:{}", tiktok_post_id(TikTokScenario::Normal, 13));
    let (status, err) = client.post_json(&format!("/api/v1/analyses/{other}/save"), json!({})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (404, "not_found"));
    for path in [
        "/api/v1/analyses/not-a-ref",
        "/api/v1/analyses/tiktok:abc",
        "/api/v1/analyses/saved?limit=0",
        "/api/v1/analyses/saved?status=gone",
        "/api/v1/analyses/saved?cursor=zz",
    ] {
        let (status, err) = client.get::<Value>(path).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{path}");
    }
    let (status, _) = client.entry(&r#ref, "?sort=oldest").await.err();
    assert_eq!(status.as_u16(), 400);
    let (_, stranger) = app.integrator().await;
    let (status, _) = app.client(Some(&stranger)).entry(&r#ref, "").await.err();
    assert_eq!(status.as_u16(), 404, "another account's entry is absent");
    let narrow = app.token(&account, "analyze:write").await;
    let (status, err) = app.client(Some(&narrow)).get::<Value>("/api/v1/analyses/saved").await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (403, "forbidden_scope"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_charges_exactly_the_new_comments_and_keeps_first_seen() {
    let (app, clock) = app_on_clock(SimConfig::default()).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 30);
    let r#ref = format!("tiktok:{id}");
    let first = client.collect(id).await;
    assert_eq!(used(&client).await, 30);
    let first_seen = client.entry(&r#ref, "").await.ok()["last_scraped_at"].clone();

    clock.advance(DAY);
    app.sim.add_comments(&id.to_string(), 7);
    let reply = client.refresh(&r#ref).await;
    assert_eq!(reply.status, 202);
    let refresh = reply.ok();
    assert_eq!(refresh["ref"], r#ref.as_str());
    let done = client.wait_job(refresh["job_id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "complete");
    assert_eq!(used(&client).await, 37, "only the 7 new comments were charged");

    let entry = client.entry(&r#ref, "").await.ok();
    assert_eq!((entry["comment_count"].as_i64(), entry["counts"]["new"].as_i64()), (Some(37), Some(7)));
    let comments = flat_comments(&entry["comments"]);
    let known = comments.iter().filter(|c| c["first_seen_at"] == first_seen).count();
    assert_eq!(known, 30, "comments already known keep their first_seen_at");
    let new = client.entry(&r#ref, "?new=true").await.ok();
    let new_ids: Vec<Value> = flat_comments(&new["comments"]).iter().map(|c| c["id"].clone()).collect();
    assert_eq!(new_ids.len(), 7);
    let truth = app.sim.expected_post(&id.to_string());
    let added: Vec<Value> = truth.comments[truth.comments.len() - 7..].iter().map(|c| json!(c.id)).collect();
    assert_eq!(new_ids, added);
    // The lifetime restarted with the refresh.
    let expires = parse_rfc3339(entry["expires_at"].as_str().expect("expires")).expect("time");
    assert_eq!(expires, clock.now_ms() + 14 * 86_400_000);
    // The first job's comments were released to the new scrape.
    let old = client.job(first["job_id"].as_str().expect("id")).await.ok();
    assert_eq!(old["result"]["released"], true);

    // Nothing new: nothing charged.
    let again = client.refresh(&r#ref).await.ok();
    client.wait_job(again["job_id"].as_str().expect("id")).await;
    assert_eq!(used(&client).await, 37);
    assert_eq!(client.entry(&r#ref, "").await.ok()["counts"]["new"], 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_needs_a_pack_and_a_balance_and_joins_a_running_job() {
    let sim = SimConfig { latency_ms: 200, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 20).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 20);
    let r#ref = format!("tiktok:{id}");
    client.collect(id).await;
    let (status, err) = client.refresh(&r#ref).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "quota_exceeded"), "the balance is spent");
    app.grant(&account, 100).await;
    let running = client.refresh(&r#ref).await.ok();
    let joined = client.refresh(&r#ref).await;
    assert_eq!(joined.status, 200);
    let joined = joined.ok();
    assert_eq!(
        (joined["job_id"].clone(), joined["deduplicated"].as_str()),
        (running["job_id"].clone(), Some("in_flight"))
    );
    client.wait_job(running["job_id"].as_str().expect("id")).await;
    let (status, _) = client.refresh(&format!("tiktok:{}", tiktok_post_id(TikTokScenario::Normal, 21))).await.err();
    assert_eq!(status.as_u16(), 404, "not in the library");

    // An account without a pack this month cannot refresh or watch.
    let (other, other_token) = app.integrator().await;
    let other_client = app.client(Some(&other_token));
    let meta = other_client.post_json("/api/v1/analyses/save-metadata", json!({"url": tiktok_url(id)})).await.ok();
    assert_eq!(meta["status"], "metadata_only");
    let (status, err) = other_client.refresh(&r#ref).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "payment_required"));
    let (status, err) = other_client
        .put_json(&format!("/api/v1/analyses/{ref}/watch"), json!({"enabled": true, "interval_min": 60}))
        .await
        .err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "payment_required"));
    // With a pack, refreshing a metadata-only entry collects its comments.
    app.grant(&other, 100).await;
    let job = other_client.refresh(&r#ref).await.ok();
    assert_eq!(other_client.wait_job(job["job_id"].as_str().expect("id")).await["status"], "complete");
    let entry = other_client.entry(&r#ref, "").await.ok();
    assert_eq!((entry["status"].as_str(), entry["comment_count"].as_i64()), (Some("ready"), Some(20)));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_settings_are_validated_and_answered_with_the_next_run() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 5);
    let r#ref = format!("tiktok:{id}");
    client.collect(id).await;
    let path = format!("/api/v1/analyses/{ref}/watch");
    for (body, why) in [
        (json!({"enabled": true, "interval_min": 5}), "too short"),
        (json!({"enabled": true, "interval_min": 10_081}), "too long"),
        (json!({"enabled": "yes"}), "not a boolean"),
        (json!({"interval_min": 60}), "enabled missing"),
        (json!({"enabled": true, "interval_min": 60.5}), "not a whole number"),
    ] {
        let (status, err) = client.put_json(&path, body).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{why}");
        if why == "too short" {
            assert!(err.detail.contains("interval_min"), "{}", err.detail);
        }
    }
    let before = cova_domain::time::now_ms();
    let on = client.put_json(&path, json!({"enabled": true, "interval_min": 60})).await.ok();
    assert_eq!((on["enabled"].as_bool(), on["interval_min"].as_i64()), (Some(true), Some(60)));
    let next = parse_rfc3339(on["next_run_at"].as_str().expect("next run")).expect("time");
    assert!(
        next >= before + 3_600_000 - 1_000 && next <= before + 3_600_000 + 6 * 60_000 + 5_000,
        "one interval plus jitter"
    );
    let listed = client.get::<Value>("/api/v1/analyses/saved?watched=true").await.ok();
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1));
    // JSON Schema counts 2099.0 as an integer, and generated clients may send it so.
    let whole = client.put_json(&path, json!({"enabled": false, "interval_min": 2099.0})).await.ok();
    assert_eq!(whole["interval_min"].as_i64(), Some(2099));
    let off = client.put_json(&path, json!({"enabled": false, "interval_min": 60})).await.ok();
    assert_eq!(
        (off["enabled"].as_bool(), off["interval_min"].as_i64(), off["next_run_at"].is_null()),
        (Some(false), Some(60), true)
    );
    let (status, _) = client
        .put_json(
            &format!("/api/v1/analyses/tiktok:{}/watch", tiktok_post_id(TikTokScenario::Normal, 6)),
            json!({"enabled": false}),
        )
        .await
        .err();
    assert_eq!(status.as_u16(), 404);
    app.stop().await;
}

/// Jobs of the app (ids), newest last.
async fn job_count(app: &TestApp) -> i64 {
    app.job_progress().await.total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_runs_at_its_interval_and_catches_up_once() {
    let (app, clock) = app_on_clock(SimConfig::default()).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 10);
    let r#ref = format!("tiktok:{id}");
    client.collect(id).await;
    client.put_json(&format!("/api/v1/analyses/{ref}/watch"), json!({"enabled": true, "interval_min": 30})).await.ok();

    clock.advance(29 * MINUTE);
    app.next_pass(cova_scheduler::TICK).await;
    assert_eq!(job_count(&app).await, 1, "not due yet");

    // Due (30 minutes plus at most 3 of jitter): the scheduler starts one run.
    app.sim.add_comments(&id.to_string(), 4);
    clock.advance(5 * MINUTE);
    eventually("the watch run is started and done", async || app.job_progress().await.complete == 2).await;
    let entry = client.entry(&r#ref, "").await.ok();
    assert_eq!((entry["comment_count"].as_i64(), entry["counts"]["new"].as_i64()), (Some(14), Some(4)));
    assert_eq!(entry["watch"]["last_run_at"].as_str().and_then(parse_rfc3339), Some(clock.now_ms()));
    assert_eq!(used(&client).await, 14);

    // Down for ten hours: one catch-up run, not twenty.
    clock.advance(10 * 60 * MINUTE);
    eventually("the catch-up run is done", async || app.job_progress().await.complete == 3).await;
    app.next_pass(cova_scheduler::TICK).await;
    assert_eq!(job_count(&app).await, 3, "one run per due watch");
    let next =
        client.entry(&r#ref, "").await.ok()["watch"]["next_run_at"].as_str().and_then(parse_rfc3339).expect("next");
    assert!(next > clock.now_ms() + 29 * 60_000, "the next run is an interval after the catch-up");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_without_a_pack_is_skipped_with_a_visible_reason() {
    let (app, clock) = app_on_clock(SimConfig::default()).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 10);
    let r#ref = format!("tiktok:{id}");
    client.collect(id).await;
    client
        .put_json(&format!("/api/v1/analyses/{ref}/watch"), json!({"enabled": true, "interval_min": 10_080}))
        .await
        .ok();
    // A month on, the pack belongs to the past month.
    clock.advance(30 * DAY);
    eventually("the run is skipped with a reason", async || {
        client.entry(&r#ref, "").await.ok()["watch"]["last_error"].is_string()
    })
    .await;
    let watch = client.entry(&r#ref, "").await.ok()["watch"].clone();
    assert!(watch["last_error"].as_str().unwrap_or_default().contains("pack"), "{watch}");
    assert!(
        watch["next_run_at"].as_str().and_then(parse_rfc3339).expect("next") > clock.now_ms(),
        "not retried every second"
    );
    assert_eq!(job_count(&app).await, 1, "no run without a pack");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breakdown_expires_after_14_days_and_a_refresh_restores_it() {
    let (app, clock) = app_on_clock(SimConfig::default()).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 15);
    let r#ref = format!("tiktok:{id}");
    let job = client.collect(id).await;
    let expires = client.entry(&r#ref, "").await.ok()["expires_at"].clone();
    // A word of its first comment, which the search finds while the comments are kept.
    let first = app.sim.expected_post(&id.to_string()).comments[0].text.clone();
    let word: String = first.split_whitespace().find(|w| w.chars().all(char::is_alphabetic)).unwrap_or("x").to_owned();
    let searched = async || client.search(&[("q", word.as_str())]).await.ok()["items"].as_array().map_or(0, Vec::len);
    assert!(searched().await > 0, "`{word}` is found");
    // Each stored page entered SQLite's index once, with nothing left out.
    full_text_index_in_step(&app).await;

    // Opening the entry or polling the job on day 13 does not extend the lifetime.
    clock.advance(13 * DAY);
    assert_eq!(client.entry(&r#ref, "").await.ok()["expires_at"], expires);
    client.job(job["job_id"].as_str().expect("id")).await.ok();
    clock.advance(DAY + MINUTE);
    eventually("the janitor purges the breakdown", async || client.entry(&r#ref, "").await.ok()["status"] == "expired")
        .await;
    let entry = client.entry(&r#ref, "").await.ok();
    assert_eq!((entry["comments"].as_array().map(Vec::len), entry["counts"]["comments"].as_i64()), (Some(0), Some(0)));
    assert_eq!(entry["expires_at"], expires, "the bookmark stays");
    // The job's copy is refreshed once the janitor's release has committed, a moment after the
    // entry shows it.
    eventually("the poll shows the comments released", async || {
        client.job(job["job_id"].as_str().expect("id")).await.ok()["result"]["released"] == true
    })
    .await;
    let (status, _, _) = client.raw(client.request(Method::GET, &format!("/api/v1/analyses/{ref}/export"))).await;
    assert_eq!(status.as_u16(), 404, "nothing to export");
    assert_eq!(searched().await, 0, "purged comments are not found");
    // SQLite's index has no row left of them (PostgreSQL's went with the day's partition).
    full_text_index_in_step(&app).await;

    let refresh = client.refresh(&r#ref).await.ok();
    client.wait_job(refresh["job_id"].as_str().expect("id")).await;
    let entry = client.entry(&r#ref, "").await.ok();
    assert_eq!((entry["status"].as_str(), flat_comments(&entry["comments"]).len()), (Some("ready"), 15));
    assert_eq!(used(&client).await, 30, "the purged comments were collected and charged again");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_parse_back_with_every_comment() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 49);
    let r#ref = format!("tiktok:{id}");
    client.collect(id).await;
    let truth = app.sim.expected_post(&id.to_string());
    let mut expected: Vec<(String, String)> = Vec::new();
    for c in &truth.comments {
        expected.push((c.id.clone(), String::new()));
        expected.extend(c.replies.iter().map(|r| (r.id.clone(), c.id.clone())));
    }
    expected.sort();
    let export = async |format: &str| {
        let path = format!("/api/v1/analyses/{ref}/export?format={format}");
        let (status, headers, body) = client.raw(client.request(Method::GET, &path)).await;
        assert_eq!(status.as_u16(), 200, "{format}: {}", String::from_utf8_lossy(&body));
        let disposition = headers.get("content-disposition").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert_eq!(disposition, format!("attachment; filename=\"tiktok-{id}.{format}\""));
        body
    };

    let csv = export("csv").await;
    let csv = csv.strip_prefix("\u{feff}".as_bytes()).expect("a byte order mark first");
    let mut reader = csv::Reader::from_reader(csv);
    let headers = reader.headers().expect("header").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).expect("column");
    let (id_col, parent_col) = (col("id"), col("parent_id"));
    let mut got: Vec<(String, String)> = reader
        .records()
        .map(|r| r.expect("record"))
        .map(|r| (r[id_col].to_owned(), r[parent_col].to_owned()))
        .collect();
    got.sort();
    assert_eq!(got, expected, "CSV: every comment, with its parent");

    let jsonl = String::from_utf8(export("jsonl").await).expect("utf-8");
    let lines: Vec<Value> =
        jsonl.lines().map(|l| serde_json::from_str::<Value>(l).expect("a JSON object per line")).collect();
    let mut got: Vec<(String, String)> = lines
        .iter()
        .map(|v| (v["id"].as_str().expect("id").to_owned(), v["parent_id"].as_str().unwrap_or_default().to_owned()))
        .collect();
    got.sort();
    assert_eq!(got, expected, "JSON Lines");
    // Media links open from a file read anywhere: whole URLs, like the CSV's.
    let links: Vec<&str> = lines
        .iter()
        .flat_map(|v| v["media"].as_array().into_iter().flatten().chain(std::iter::once(&v["author"]["avatar"])))
        .filter_map(|m| m["url"].as_str())
        .collect();
    assert!(!links.is_empty() && links.iter().all(|u| u.starts_with("http")), "{links:?}");

    let xlsx = export("xlsx").await;
    use calamine::Reader as _;
    let mut book = calamine::Xlsx::new(std::io::Cursor::new(xlsx)).expect("an XLSX workbook");
    let sheet = book.worksheet_range_at(0).expect("a sheet").expect("readable");
    let mut rows = sheet.rows();
    let header: Vec<String> = rows.next().expect("header").iter().map(|c| c.to_string()).collect();
    assert_eq!(header[..4], ["post_url", "post_title", "id", "parent_id"]);
    let mut got: Vec<(String, String)> = rows.map(|r| (r[2].to_string(), r[3].to_string())).collect();
    got.sort();
    assert_eq!(got, expected, "XLSX");

    let (status, err) = client.get::<Value>(&format!("/api/v1/analyses/{ref}/export?format=pdf")).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_entry_and_metadata_only_saves() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let (status, _) = client.get::<Value>("/api/v1/analyses/session").await.err();
    assert_eq!(status.as_u16(), 404, "nothing started with this token yet");
    let id = tiktok_post_id(TikTokScenario::Normal, 8);
    client.collect(id).await;
    let session = client.get::<Value>("/api/v1/analyses/session").await.ok();
    assert_eq!(
        (session["ref"].as_str(), session["job"]["status"].as_str()),
        (Some(format!("tiktok:{id}").as_str()), Some("complete"))
    );
    // Another token of the same account started nothing.
    let other = app.token(&account, "library:write").await;
    assert_eq!(app.client(Some(&other)).get::<Value>("/api/v1/analyses/session").await.status, 404);

    // A metadata-only save: looked up like POST /metadata (same limit), listed by status.
    let youtube = cova_sim::youtube_video_id(cova_sim::YouTubeScenario::Normal, 3);
    let reply =
        client.post_json("/api/v1/analyses/save-metadata", json!({"url": format!("https://youtu.be/{youtube}")})).await;
    assert_eq!(reply.header_u64("x-ratelimit-remaining"), Some(9));
    let saved = reply.ok();
    assert_eq!(
        (saved["status"].as_str(), saved["platform"].as_str(), saved["cached"].as_bool()),
        (Some("metadata_only"), Some("youtube"), Some(false))
    );
    let only = client.get::<Value>("/api/v1/analyses/saved?status=metadata_only").await.ok();
    assert_eq!(only["items"].as_array().map(Vec::len), Some(1));
    let platform = client.get::<Value>("/api/v1/analyses/saved?platform=tiktok").await.ok();
    assert_eq!(platform["items"].as_array().map(Vec::len), Some(1));
    let title = saved["metadata"]["title"].as_str().or(saved["metadata"]["description"].as_str()).expect("a title");
    let word = title.split_whitespace().max_by_key(|w| w.len()).expect("a word");
    let found =
        client.get::<Value>(&format!("/api/v1/analyses/saved?q={}", urlencode(&word.to_uppercase()))).await.ok();
    assert!(
        found["items"].as_array().expect("items").iter().any(|i| i["ref"] == format!("youtube:{youtube}")),
        "{found}"
    );
    let (status, err) =
        client.post_json("/api/v1/analyses/save-metadata", json!({"url": "https://example.com/x"})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    app.stop().await;
}

/// On SQLite, FTS5's own check that its index holds exactly the stored comments' terms
/// (PostgreSQL's index is the database's own).
async fn full_text_index_in_step(app: &TestApp) {
    if app.db().is_postgres() {
        return;
    }
    let mut conn = app.db().conn().await.expect("conn");
    let check = diesel::sql_query("INSERT INTO comment_terms (comment_terms) VALUES ('integrity-check')");
    conn.tx().execute(check).await.expect("the full-text index matches the comments");
}
