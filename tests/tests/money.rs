//! A balance shared fairly by running jobs (`cova_domain::money`, end to end): a post is cut
//! only when the balance really cannot cover it, at the true remainder, while the jobs that may
//! give comments back are waited for (visibly); a list stops exactly where the balance does;
//! `comments_expected` is the post's own count; a customer's `max_comments` caps a job, a list
//! and the re-scrapes that follow; a list's cost is previewed before it starts; and a list's
//! URLs are checked one by one like `POST /analyze`'s.

use cova_sim::SimConfig;
use cova_tests::{Client, eventually, spawn_app, spawn_app_with_sim, tiktok_url, until};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// A TikTok post of the simulator with exactly `comments` comments (below 1,000), `k` telling
/// posts of the same size apart.
fn post_of(comments: u64, k: u64) -> String {
    format!("https://www.tiktok.com/@someone/video/{}", 6_900_000_000_000_000_000 + comments + 1_000 * k)
}

async fn create_batch(client: &Client, body: Value) -> (StatusCode, Value) {
    let (status, _, bytes) = client.raw(client.request(Method::POST, "/api/v1/analyze/batch").json(&body)).await;
    (status, serde_json::from_slice(&bytes).expect("JSON answer"))
}

async fn finished_batch(client: &Client, id: &str) -> Value {
    until(&format!("batch {id} finished"), async || {
        let batch = client.get::<Value>(&format!("/api/v1/analyze/batch/{id}")).await.ok();
        batch["finished_at"].is_string().then_some(batch)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balance_of_25_on_three_posts_of_10_collects_10_10_and_5() {
    // Slow pages: the three jobs are sized before any has finished collecting.
    // Polled often: the general limit is lifted.
    let app = spawn_app_with_sim(SimConfig { latency_ms: 300, ..SimConfig::default() }, |c| {
        c.limits.api_requests_per_minute = 100_000;
    })
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 25).await;
    let client = app.client(Some(&token));
    let mut ids = Vec::new();
    for k in 0..3 {
        let job = client.analyze(&post_of(10, k), None).await.ok();
        ids.push(job["job_id"].as_str().expect("job_id").to_owned());
    }
    // The one whose post the balance cannot cover while the others collect waits, and says so.
    eventually("a job waiting for the balance", async || {
        for id in &ids {
            let job = client.job(id).await.ok();
            if job["progress"]["waiting_for"] == "balance" {
                assert_eq!(job["status"], "in_progress", "{job}");
                assert_eq!(job["progress"]["comments_expected"], 10, "the post's own count: {job}");
                return true;
            }
        }
        false
    })
    .await;
    let mut collected = Vec::new();
    for id in &ids {
        let job = client.wait_job(id).await;
        assert_eq!(job["status"], "complete", "{job}");
        assert_eq!(job["progress"]["comments_expected"], 10, "never what the balance could pay: {job}");
        assert!(job["progress"]["waiting_for"].is_null(), "{job}");
        let result = &job["result"];
        collected.push(result["comments_total"].as_i64().expect("total"));
        if result["comments_total"] == 5 {
            assert_eq!((&result["truncated"], &result["truncated_reason"]), (&json!(true), &json!("balance")), "{job}");
        } else {
            assert_eq!(result["truncated"], false, "{job}");
        }
    }
    collected.sort_unstable();
    assert_eq!(collected, [5, 10, 10], "no post cut to a sliver while comments came back");
    let usage = client.usage().await.ok();
    assert_eq!((usage.comments.used, usage.comments.reserved), (25, 0), "the whole balance, exactly");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_twenty_posts_of_10_on_120_collects_twelve_whole_and_refuses_eight() {
    let app = spawn_app_with_sim(SimConfig { latency_ms: 40, ..SimConfig::default() }, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 120).await;
    let client = app.client(Some(&token));
    let urls: Vec<String> = (0..20).map(|k| post_of(10, k)).collect();
    let (status, batch) = create_batch(&client, json!({ "urls": urls })).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{batch}");
    let done = finished_batch(&client, batch["batch_id"].as_str().expect("batch_id")).await;
    let items = done["items"].as_array().expect("items");
    let complete: Vec<&Value> = items.iter().filter(|i| i["state"] == "complete").collect();
    assert_eq!(complete.len(), 12, "{done}");
    for item in &complete {
        assert_eq!(item["job"]["progress"]["comments_collected"], 10, "whole: {item}");
        assert!(item["truncated_reason"].is_null(), "{item}");
    }
    let refused: Vec<&Value> = items.iter().filter(|i| i["state"] == "refused").collect();
    assert_eq!(refused.len(), 8, "{done}");
    assert!(refused.iter().all(|i| i["error"]["code"] == "quota_exceeded" && i["job"].is_null()), "{done}");
    let usage = client.usage().await.ok();
    assert_eq!((usage.comments.used, usage.comments.reserved), (120, 0));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_cut_by_the_balance_says_so_on_its_row() {
    let app = spawn_app_with_sim(SimConfig { latency_ms: 40, ..SimConfig::default() }, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 25).await;
    let client = app.client(Some(&token));
    let urls: Vec<String> = (0..3).map(|k| post_of(10, k)).collect();
    let (_, batch) = create_batch(&client, json!({ "urls": urls })).await;
    let done = finished_batch(&client, batch["batch_id"].as_str().expect("batch_id")).await;
    let cut: Vec<&Value> =
        done["items"].as_array().expect("items").iter().filter(|i| i["truncated_reason"] == "balance").collect();
    assert_eq!(cut.len(), 1, "{done}");
    let progress = &cut[0]["job"]["progress"];
    assert_eq!((&progress["comments_collected"], &progress["comments_expected"]), (&json!(5), &json!(10)));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_comments_caps_a_job_a_list_and_the_rescrapes_that_follow() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let url = post_of(40, 1);
    let job = client.post_json("/api/v1/analyze", json!({"url": url, "max_comments": 15})).await.ok();
    assert_eq!(job["max_comments"], 15, "{job}");
    let done = client.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(done["result"]["comments_total"], 15, "{done}");
    assert_eq!(done["result"]["truncated_reason"], "max_comments", "{done}");
    assert_eq!(done["progress"]["comments_expected"], 40, "the post's own count: {done}");
    assert_eq!(client.usage().await.ok().comments.used, 15);

    // A refresh takes the same cap unless asked otherwise.
    let r#ref = done["ref"].as_str().expect("ref").to_owned();
    let again = client.refresh(&r#ref).await.ok();
    assert_eq!(again["max_comments"], 15, "{again}");
    client.wait_job(again["job_id"].as_str().expect("id")).await;
    let lifted = client.post_json(&format!("/api/v1/analyses/{ref}/refresh"), json!({"max_comments": null})).await.ok();
    assert!(lifted["max_comments"].is_null(), "{lifted}");
    let whole = client.wait_job(lifted["job_id"].as_str().expect("id")).await;
    assert_eq!((&whole["result"]["comments_total"], &whole["result"]["truncated"]), (&json!(40), &json!(false)));
    assert_eq!(client.usage().await.ok().comments.used, 40, "only the 25 new ones charged");

    // A list's cap applies to each of its posts; an integral number is an integer.
    let (_, batch) =
        create_batch(&client, json!({"urls": [post_of(30, 2), post_of(8, 2)], "max_comments": 20.0})).await;
    let list = finished_batch(&client, batch["batch_id"].as_str().expect("batch_id")).await;
    let totals: Vec<&Value> =
        list["items"].as_array().expect("items").iter().map(|i| &i["job"]["progress"]["comments_collected"]).collect();
    assert_eq!(totals, [&json!(20), &json!(8)], "{list}");
    assert_eq!(list["items"][0]["truncated_reason"], "max_comments");

    for bad in [json!(0), json!(5_001), json!(2.5), json!("10")] {
        let (status, err) = client.post_json("/api/v1/analyze", json!({"url": url, "max_comments": bad})).await.err();
        assert_eq!((status, err.code.as_str()), (StatusCode::BAD_REQUEST, "validation_error"), "{bad}: {}", err.detail);
    }
    app.stop().await;
}

/// The same preview asked until every count it started has arrived.
async fn counted_preview(client: &Client, body: Value) -> Value {
    until("the list's counts", async || {
        let preview = client.post_json("/api/v1/analyze/batch/preview", body.clone()).await.ok();
        (preview["counting"] == 0).then_some(preview)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_preview_counts_each_post_the_total_and_what_the_balance_covers_whole() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_984).await;
    let client = app.client(Some(&token));
    let mut urls: Vec<String> = (0..10).map(|k| post_of(265, k)).collect();
    urls.push(post_of(265, 3));
    urls.push("not a url".into());
    // Answered at once with what is known: nothing yet, every post being counted.
    let (status, headers, body) =
        client.raw(client.request(Method::POST, "/api/v1/analyze/batch/preview").json(&json!({ "urls": urls }))).await;
    assert_eq!(status, StatusCode::OK);
    let first: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!((&first["posts"], &first["counting"]), (&json!(10), &json!(10)), "{first}");
    assert_eq!((&first["items"][0]["counting"], &first["items"][0]["comments"]), (&json!(true), &Value::Null));
    // The general limit's headers, not a lookup window's.
    let limit: u64 = headers["x-ratelimit-limit"].to_str().ok().and_then(|v| v.parse().ok()).expect("limit");
    assert!(limit > 10, "the general limit, not the metadata window: {limit}");

    // The same preview again, once the counts have arrived.
    let preview = counted_preview(&client, json!({ "urls": urls })).await;
    assert_eq!(preview["posts"], 10, "{preview}");
    assert_eq!((&preview["counted"], &preview["total_comments"]), (&json!(10), &json!(2_650)));
    assert_eq!((&preview["available"], &preview["covered_whole"]), (&json!(1_984), &json!(7)), "{preview}");
    let items = preview["items"].as_array().expect("items");
    assert_eq!((&items[0]["comments"], &items[0]["covered"]), (&json!(265), &json!(true)));
    assert_eq!(items[7]["covered"], false, "the eighth post is not covered whole");
    assert_eq!((&items[10]["same_as"], &items[10]["charge_at_most"]), (&json!(3), &json!(0)), "named twice, paid once");
    assert_eq!(items[11]["error"]["code"], "validation_error");
    let usage = client.usage().await.ok();
    assert_eq!(usage.metadata.remaining, 10, "previews leave the metadata limit untouched");
    assert_eq!(usage.comments.used, 0, "a preview charges nothing");

    // A count known from a preview is free afterwards, and caps apply to it at once.
    let preview = client
        .post_json("/api/v1/analyze/batch/preview", json!({"urls": [post_of(265, 0)], "max_comments": 100}))
        .await
        .ok();
    assert_eq!((&preview["items"][0]["comments"], &preview["items"][0]["charge_at_most"]), (&json!(265), &json!(100)));
    assert_eq!(preview["counting"], 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_have_their_own_budget_and_failed_lookups_are_free_but_bounded() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let client = app.client(Some(&token));
    // Two lists of 100 posts an hour are counted (200 preview lookups); the next post is not.
    for list in 0..2 {
        let urls: Vec<String> = (0..100).map(|k| post_of(12, 100 * list + k)).collect();
        let preview = counted_preview(&client, json!({ "urls": urls })).await;
        assert_eq!((&preview["counted"], &preview["total_comments"]), (&json!(100), &json!(1_200)), "{preview}");
    }
    let preview = client.post_json("/api/v1/analyze/batch/preview", json!({"urls": [post_of(12, 999)]})).await.ok();
    let item = &preview["items"][0];
    assert_eq!((&item["error"]["code"], &item["counting"]), (&json!("rate_limited"), &json!(false)), "{preview}");
    assert!(item["error"]["detail"].as_str().is_some_and(|d| d.contains("200 an hour")), "{item}");
    // The metadata limit is the specification's own, untouched by previews.
    let meta = client.post_json("/api/v1/metadata", json!({"url": post_of(12, 999)})).await.ok();
    assert_eq!(meta["metrics"]["comments"], 12);

    // Posts that do not exist: each lookup fails, is free, and counts; past 30, refused.
    let (_, other) = app.integrator().await;
    let client = app.client(Some(&other));
    let missing = |k: u64| tiktok_url(cova_sim::tiktok_post_id(cova_sim::TikTokScenario::NotFound, k));
    let urls: Vec<String> = (0..40).map(missing).collect();
    let preview = counted_preview(&client, json!({ "urls": urls })).await;
    let failed =
        preview["items"].as_array().expect("items").iter().filter(|i| i["error"]["code"] == "parse_error").count();
    let refused =
        preview["items"].as_array().expect("items").iter().filter(|i| i["error"]["code"] == "rate_limited").count();
    // Each lookup looks at the failures before it asks; an account has at most two lookups
    // under way per platform, so at most two more than the bound reach the platform.
    assert!((30..=32).contains(&failed) && failed + refused == 40, "{failed} failed, {refused} refused: {preview}");
    let usage = client.usage().await.ok();
    assert_eq!(usage.metadata.remaining, 10, "failures are free");
    let (status, err) = client.post_json("/api/v1/metadata", json!({"url": missing(99)})).await.err();
    assert_eq!((status, err.code.as_str()), (StatusCode::TOO_MANY_REQUESTS, "rate_limited"), "{}", err.detail);
    assert!(err.detail.contains("30 lookups of this account failed"), "{}", err.detail);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_url_of_a_list_is_checked_like_one_and_filters_that_name_nothing_are_refused() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let nul = format!("{}\u{0}", post_of(5, 1));
    let long = format!("{}?{}", post_of(5, 2), "a".repeat(2_100));
    let (status, batch) = create_batch(&client, json!({"urls": [post_of(5, 3), nul, long]})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "the list is accepted, its bad URLs refused alone: {batch}");
    let items = batch["items"].as_array().expect("items");
    for bad in [1, 2] {
        assert_eq!(
            (&items[bad]["state"], &items[bad]["error"]["code"]),
            (&json!("refused"), &json!("validation_error"))
        );
        let shown = items[bad]["url"].as_str().expect("url");
        assert!(!shown.contains('\u{0}') && shown.chars().count() <= 2_049, "kept as it can be shown");
    }
    let id = batch["batch_id"].as_str().expect("id").to_owned();
    let done = finished_batch(&client, &id).await;
    assert_eq!(done["status"], "complete");
    // A finished batch stays what it was.
    let cancelled = client.post_json(&format!("/api/v1/analyze/batch/{id}/cancel"), json!({})).await.ok();
    assert_eq!((&cancelled["status"], &cancelled["cancelled_at"]), (&json!("complete"), &Value::Null));

    for path in ["/api/v1/analyze?ref=evil", "/api/v1/analyze?batch=garbage", "/api/v1/ai/jobs?ref=evil"] {
        let (status, err) = client.get::<Value>(path).await.err();
        assert_eq!((status, err.code.as_str()), (StatusCode::BAD_REQUEST, "validation_error"), "{path}");
    }
    app.stop().await;
}
