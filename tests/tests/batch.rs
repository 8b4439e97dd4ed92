//! Many posts at once and the history of every job: `POST /analyze/batch` (the three-running
//! rule, payment as each job starts, the rest refused when the balance has run out, the same
//! key answering the same batch, cancel), the `batch.complete` event, `GET /analyze` and
//! `GET /ai/jobs` with paging and filters, exports by job id (a session's analysis included),
//! and why a collection stopped short.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::workspace::signed_in;
use cova_tests::{Client, assert_valid, schema, spawn_app, spawn_app_with_sim, until};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

/// A post of one comment, `k` telling them apart (ids outside the simulator's scenario scheme
/// hold `id % 1000` comments).
fn one_comment_post(k: u64) -> String {
    format!("https://www.tiktok.com/@someone/video/{}", 6_900_000_000_000_000_001 + 1_000 * k)
}

fn post(comments: u64) -> String {
    format!("https://www.tiktok.com/@someone/video/{}", tiktok_post_id(TikTokScenario::Normal, comments))
}

async fn create(client: &Client, urls: &[String], key: Option<&str>) -> (StatusCode, Value) {
    let mut req = client.request(Method::POST, "/api/v1/analyze/batch").json(&json!({ "urls": urls }));
    if let Some(key) = key {
        req = req.header("idempotency-key", key);
    }
    let (status, _, body) = client.raw(req).await;
    (status, serde_json::from_slice(&body).expect("JSON answer"))
}

/// Polls the batch until every URL has ended.
async fn finished(client: &Client, id: &str) -> Value {
    watched(client, id).await.0
}

/// Polls the batch until every URL has ended; also answers the most of its jobs seen running at
/// once (each answer reads the jobs' states in one statement: a consistent view).
async fn watched(client: &Client, id: &str) -> (Value, u64) {
    let mut most = 0;
    let batch = until(&format!("batch {id} finished"), async || {
        let batch = client.get::<Value>(&format!("/api/v1/analyze/batch/{id}")).await.ok();
        most = most.max(count(&batch, "running"));
        batch["finished_at"].is_string().then_some(batch)
    })
    .await;
    (batch, most)
}

fn count(batch: &Value, state: &str) -> u64 {
    batch["counts"][state].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_runs_three_at_a_time_pays_as_it_goes_and_stops_when_the_balance_is_spent() {
    // Pages take a while, so that jobs overlap.
    let app = spawn_app_with_sim(SimConfig { latency_ms: 40, ..SimConfig::default() }, |_| {}).await;
    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");
    let (account, token) = app.integrator().await;
    app.grant(&account, 12).await;
    let client = app.client(Some(&token));
    let urls: Vec<String> = (0..20).map(one_comment_post).collect();

    let (status, batch) = create(&client, &urls, Some("nightly-1")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{batch}");
    let id = batch["batch_id"].as_str().expect("batch_id").to_owned();
    let items = batch["items"].as_array().expect("items");
    assert_eq!(items.len(), 20);
    // The first starts at once; each next one once the one before it has been sized.
    assert_eq!(count(&batch, "running"), 1, "{batch}");
    assert_eq!(count(&batch, "waiting"), 19);
    for (n, item) in items.iter().enumerate() {
        assert_eq!(item["position"], n);
        assert_eq!(item["url"], urls[n]);
    }
    // Each started job is answered as POST /analyze answers it.
    let first = &items[0]["job"];
    assert!(first["status"] == "queued" || first["status"] == "in_progress", "{first}");
    assert!(first["job_id"].is_string() && first["ref"].is_string());
    assert!(items[5]["job"].is_null());

    // The same key and list: the same batch; another list under that key: a conflict.
    let (status, again) = create(&client, &urls, Some("nightly-1")).await;
    assert_eq!((status, &again["batch_id"]), (StatusCode::OK, &batch["batch_id"]));
    let (status, err) = create(&client, &urls[..3], Some("nightly-1")).await;
    assert_eq!((status, err["code"].as_str()), (StatusCode::CONFLICT, Some("idempotency_conflict")));

    let (done, most) = watched(&client, &id).await;
    assert_eq!(done["status"], "complete");
    assert!(most <= 3, "never a fourth running job: {most}");
    eprintln!("at most {most} of the batch's jobs were seen running at once");
    assert_eq!(count(&done, "complete"), 12, "{done}");
    assert_eq!(count(&done, "refused"), 8, "{done}");
    for item in done["items"].as_array().expect("items").iter().filter(|i| i["state"] == "refused") {
        assert_eq!(item["error"]["code"], "quota_exceeded", "{item}");
        assert!(item["job"].is_null(), "nothing started, nothing charged: {item}");
    }
    let usage = client.usage().await.ok();
    assert_eq!((usage.comments.used, usage.comments.reserved), (12, 0), "charged exactly what was collected");

    // Every job of the batch is in the history, filtered by the batch.
    let page = client.get::<Value>(&format!("/api/v1/analyze?batch={id}&limit=100")).await.ok();
    assert_eq!(page["items"].as_array().map(Vec::len), Some(12));
    assert!(page["items"].as_array().expect("items").iter().all(|j| j["batch_id"] == id.as_str()));

    // The event, once, against its schema.
    let batch_schema = schema("batch-event.schema.json");
    let event = until("the batch.complete event", async || {
        let message = tokio::time::timeout(Duration::from_secs(20), events.next()).await.ok()??;
        (message.routing_key == "batch.complete").then(|| serde_json::from_slice::<Value>(&message.payload).ok())?
    })
    .await;
    assert_valid(&batch_schema, &event);
    assert_eq!(
        (&event["batch_id"], &event["total"], &event["complete"], &event["refused"]),
        (&json!(id), &json!(20), &json!(12), &json!(8))
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_batch_starts_nothing_more_and_charges_only_what_ran() {
    let app = spawn_app_with_sim(SimConfig { latency_ms: 150, ..SimConfig::default() }, |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let urls: Vec<String> = (0..8).map(one_comment_post).collect();
    let (_, batch) = create(&client, &urls, None).await;
    let id = batch["batch_id"].as_str().expect("batch_id").to_owned();

    // Once two of its URLs run, the batch is cancelled.
    until("two URLs of the batch running", async || {
        let batch = client.get::<Value>(&format!("/api/v1/analyze/batch/{id}")).await.ok();
        (count(&batch, "running") + count(&batch, "complete") >= 2).then_some(())
    })
    .await;
    let cancelled = client.post_json(&format!("/api/v1/analyze/batch/{id}/cancel"), json!({})).await.ok();
    assert_eq!(cancelled["status"], "cancelled");
    assert!(cancelled["cancelled_at"].is_string());
    let ran = 8 - count(&cancelled, "cancelled");
    assert!((2..=3).contains(&ran), "{cancelled}");

    let done = finished(&client, &id).await;
    assert_eq!(count(&done, "complete"), ran, "the jobs already running finish: {done}");
    assert_eq!(count(&done, "cancelled"), 8 - ran);
    assert_eq!(client.usage().await.ok().comments.used as u64, ran, "nothing charged for what never started");
    let page = client.get::<Value>(&format!("/api/v1/analyze?batch={id}")).await.ok();
    assert_eq!(page["items"].as_array().map(|i| i.len() as u64), Some(ran), "no job started after the cancel");

    let (status, err) = client.post_json("/api/v1/analyze/batch/no-such-batch/cancel", json!({})).await.err();
    assert_eq!((status, err.code.as_str()), (StatusCode::NOT_FOUND, "not_found"));
    // Another account sees no such batch.
    let (_, other) = app.integrator().await;
    let (status, _) = app.client(Some(&other)).get::<Value>(&format!("/api/v1/analyze/batch/{id}")).await.err();
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_url_of_a_batch_is_refused_alone_and_a_bad_list_as_a_whole() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let urls = vec![
        post(5),
        "https://example.com/video/1".to_owned(),
        "not a url".to_owned(),
        post(5),
        format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Deleted, 3)),
    ];
    let (status, batch) = create(&client, &urls, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{batch}");
    let items = batch["items"].as_array().expect("items");
    for bad in [1, 2] {
        assert_eq!(items[bad]["state"], "refused");
        assert_eq!(items[bad]["error"]["code"], "validation_error", "{}", items[bad]);
        assert!(items[bad]["error"]["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
    let id = batch["batch_id"].as_str().expect("id").to_owned();
    let done = finished(&client, &id).await;
    let items = done["items"].as_array().expect("items");
    // The same post twice: one job, the second URL answered with it, as running or as just
    // finished (a 5-comment job can end before the list reaches its second URL).
    assert_eq!(items[0]["job"]["job_id"], items[3]["job"]["job_id"], "{done}");
    let reason = items[3]["job"]["deduplicated"].as_str();
    assert!(matches!(reason, Some("in_flight" | "recent_result")), "{done}");
    assert_eq!(items[4]["state"], "failed");
    assert_eq!(items[4]["job"]["error"]["code"], "parse_error");
    assert_eq!(client.usage().await.ok().comments.used, 5);

    for body in [json!({"urls": []}), json!({"urls": vec![post(1); 101]}), json!({"url": post(1)})] {
        let (status, err) = client.post_json("/api/v1/analyze/batch", body).await.err();
        assert_eq!((status, err.code.as_str()), (StatusCode::BAD_REQUEST, "validation_error"), "{}", err.detail);
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_pages_newest_first_with_filters_and_links_what_lives() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let mut ids = Vec::new();
    for n in [3, 4, 5] {
        ids.push(client.collect(tiktok_post_id(TikTokScenario::Normal, n)).await["job_id"].clone());
    }
    let failed = client
        .analyze(&format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Deleted, 2)), None)
        .await
        .ok();
    client.wait_job(failed["job_id"].as_str().expect("id")).await;

    let first = client.get::<Value>("/api/v1/analyze?limit=2").await.ok();
    let items = first["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["job_id"], failed["job_id"], "newest first");
    assert_eq!(items[0]["status"], "failed");
    assert!(items[0]["links"].is_null(), "a failed job has no result");
    assert_eq!(items[1]["job_id"], ids[2]);
    assert_eq!(items[1]["links"]["result"], format!("/api/v1/analyze/{}", ids[2].as_str().expect("id")));
    assert_eq!(items[1]["comments_new"], 5);
    // Each job names its post as a list shows it: title and author.
    let truth = app.sim.expected_post(&tiktok_post_id(TikTokScenario::Normal, 5).to_string()).metadata;
    let title = truth.title.clone().unwrap_or(truth.description.clone());
    assert!(
        title.starts_with(items[1]["post"]["title"].as_str().expect("a title").trim_end_matches('…')),
        "{}",
        items[1]
    );
    assert_eq!(items[1]["post"]["author"]["handle"], truth.author_handle);
    assert!(items[0]["post"].is_null() || items[0]["post"].is_object(), "a post never read has none");
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let second = client.get::<Value>(&format!("/api/v1/analyze?limit=2&cursor={cursor}")).await.ok();
    let rest: Vec<&Value> = second["items"].as_array().expect("items").iter().map(|j| &j["job_id"]).collect();
    assert_eq!(rest, vec![&ids[1], &ids[0]]);
    assert!(second["next_cursor"].is_null());

    let complete = client.get::<Value>("/api/v1/analyze?status=complete").await.ok();
    assert_eq!(complete["items"].as_array().map(Vec::len), Some(3));
    let r#ref = format!("tiktok:{}", tiktok_post_id(TikTokScenario::Normal, 4));
    let one = client.get::<Value>(&format!("/api/v1/analyze?ref={ref}")).await.ok();
    assert_eq!(one["items"][0]["job_id"], ids[1]);
    let later = client.get::<Value>("/api/v1/analyze?created_after=2999-01-01T00:00:00Z").await.ok();
    assert_eq!(later["items"], json!([]));

    // A newer scrape of the post releases the older job's comments: its link goes.
    client.refresh(&r#ref).await.ok();
    let newer = cova_tests::until("the refresh to finish", async || {
        let page = client.get::<Value>(&format!("/api/v1/analyze?ref={ref}")).await.ok();
        (page["items"][0]["status"] == "complete").then_some(page)
    })
    .await;
    assert!(newer["items"][1]["links"].is_null(), "released: {newer}");
    assert_eq!(newer["items"][0]["comments_new"], 0, "nothing new on the refresh");

    for query in ["status=done", "cursor=nope", "limit=0", "created_before=yesterday", "colour=red"] {
        let (status, err) = client.get::<Value>(&format!("/api/v1/analyze?{query}")).await.err();
        assert_eq!((status, err.code.as_str()), (StatusCode::BAD_REQUEST, "validation_error"), "{query}");
    }

    // AI jobs: the same listing, by ref.
    let quote = client.post_json("/api/v1/ai/quote", json!({"ref": r#ref})).await.ok();
    let run = client.post_json("/api/v1/ai/run", json!({"quote_id": quote["quote_id"]})).await.ok();
    let ai = until("the AI job in the history", async || {
        let page = client.get::<Value>(&format!("/api/v1/ai/jobs?ref={ref}")).await.ok();
        (page["items"][0]["status"] == "complete").then_some(page)
    })
    .await;
    assert_eq!(ai["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(ai["items"][0]["id"], run["id"], "{ai}");
    assert_eq!(ai["items"][0]["links"]["result"], format!("/api/v1/ai/jobs/{}", run["id"].as_str().expect("id")));
    let other_ref = format!("tiktok:{}", tiktok_post_id(TikTokScenario::Normal, 3));
    let none = client.get::<Value>(&format!("/api/v1/ai/jobs?ref={other_ref}")).await.ok();
    assert_eq!(none["items"], json!([]));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_finished_job_exports_even_a_sessions_that_is_not_in_the_library() {
    let app = spawn_app().await;
    let browser = signed_in(&app, "exporter@example.com").await;
    let (status, job) = browser.call(Method::POST, "/api/v1/analyze", Some(json!({"url": post(12)}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let job_id = job["job_id"].as_str().expect("id").to_owned();
    until("the session's job to finish", async || {
        let (_, j) = browser.call(Method::GET, &format!("/api/v1/analyze/{job_id}"), None).await;
        (j["status"] == "complete").then_some(())
    })
    .await;
    let r#ref = job["ref"].as_str().expect("ref").to_owned();
    let (status, _) = browser.call(Method::GET, &format!("/api/v1/analyses/{ref}/export"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "not in the library");

    let (status, headers, body) =
        browser.raw(browser.request(Method::GET, &format!("/api/v1/analyze/{job_id}/export?format=csv"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-type"].to_str().is_ok_and(|t| t.starts_with("text/csv")));
    let text = body.strip_prefix("\u{feff}".as_bytes()).expect("a UTF-8 byte order mark first");
    let mut reader = csv::Reader::from_reader(text);
    let header: Vec<String> = reader.headers().expect("header").iter().map(str::to_owned).collect();
    assert_eq!(&header[..3], ["post_url", "post_title", "id"]);
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("row")).collect();
    assert_eq!(rows.len(), 12);
    assert!(rows.iter().all(|r| r[0].starts_with("https://www.tiktok.com/")), "the post's URL on every row");
    let media: Vec<&str> = rows.iter().map(|r| &r[15]).filter(|m| !m.is_empty()).collect();
    assert!(media.iter().all(|m| m.starts_with(&app.base_url)), "absolute media links: {media:?}");

    let (status, headers, body) =
        browser.raw(browser.request(Method::GET, &format!("/api/v1/analyze/{job_id}/export?format=xlsx"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-type"].to_str().is_ok_and(|t| t.contains("spreadsheetml")));
    let mut book: calamine::Xlsx<_> = calamine::open_workbook_from_rs(std::io::Cursor::new(body)).expect("xlsx");
    use calamine::Reader as _;
    assert_eq!(book.sheet_names(), vec!["Comments".to_owned()]);
    let sheet = book.worksheet_range("Comments").expect("sheet");
    assert_eq!(sheet.height(), 13, "a header and a row per comment");
    let created = sheet.get((1, 10)).expect("created_at cell");
    assert!(matches!(created, calamine::Data::DateTime(_)), "a date cell: {created:?}");

    // Not the job of another account, not a running or unknown one.
    let (_, token) = app.integrator().await;
    let other = app.client(Some(&token));
    let (status, _) = other.get::<Value>(&format!("/api/v1/analyze/{job_id}/export")).await.err();
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, err) = other.get::<Value>("/api/v1/analyze/not-a-job/export?format=pdf").await.err();
    assert_eq!((status, err.code.as_str()), (StatusCode::BAD_REQUEST, "validation_error"));
    app.stop().await;
}
