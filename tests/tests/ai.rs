//! AI jobs end to end: quote → run → poll → complete with every result field, the charge
//! held and settled exactly, consent recorded, watch phrases and their matches, quotes that
//! expire on a test clock or were used, the refusals (402/404/400), a model endpoint that
//! fails (nothing charged) or answers garbage, batches to a token budget that never send more
//! than the quoted comments, and the `kind: ai` events and commands against their schemas.

use cova_config::AnalyzerKind;
use cova_domain::text::Matcher;
use cova_domain::time::parse_rfc3339;
use cova_sim::{TikTokScenario, tiktok_post_id};
use cova_tests::{Client, TestApp, spawn_app, spawn_app_with, spawn_on_clock, tiktok_url};
use serde_json::{Value, json};
use std::time::Duration;

/// Collects the post and answers its ref.
async fn collected(client: &Client, id: u64) -> String {
    client.collect(id).await;
    format!("tiktok:{id}")
}

async fn wait_ai(client: &Client, id: &str) -> Value {
    cova_tests::until_within(&format!("AI job {id} to finish"), Duration::from_secs(60), async || {
        let job = client.get::<Value>(&format!("/api/v1/ai/jobs/{id}")).await.ok();
        (job["status"] == "complete" || job["status"] == "failed").then_some(job)
    })
    .await
}

async fn quote(client: &Client, r#ref: &str) -> Value {
    client.post_json("/api/v1/ai/quote", json!({"ref": r#ref})).await.ok()
}

async fn run(client: &Client, quote: &Value) -> Value {
    client.post_json("/api/v1/ai/run", json!({"quote_id": quote["quote_id"]})).await.ok()
}

/// Every comment text of the simulator's post, replies included.
fn texts(app: &TestApp, id: u64) -> Vec<String> {
    let post = app.sim.expected_post(&id.to_string());
    post.comments.iter().flat_map(|c| std::iter::once(c).chain(c.replies.iter())).map(|c| c.text.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quote_run_poll_and_complete_with_every_field() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 120);
    let r#ref = collected(&client, id).await;
    let phrases = client
        .put_json(&format!("/api/v1/ai/{ref}/queries"), json!({"queries": ["  price ", "where to buy"]}))
        .await
        .ok();
    assert_eq!(phrases["queries"], json!(["price", "where to buy"]), "trimmed and stored");

    let q = quote(&client, &r#ref).await;
    let comments = texts(&app, id).len() as i64;
    assert_eq!((q["ref"].as_str(), q["comments"].as_i64()), (Some(r#ref.as_str()), Some(comments)));
    assert_eq!(q["charge"].as_i64(), Some((comments + 9) / 10), "one unit per ten comments, rounded up");
    let expires = parse_rfc3339(q["expires_at"].as_str().expect("expires_at")).expect("time");
    assert!((expires - app.now() - 15 * 60_000).abs() < 5_000, "valid 15 minutes");

    let before = client.usage().await.ok().comments;
    let started = run(&client, &q).await;
    assert_eq!((started["status"].as_str(), started["ref"].as_str()), (Some("queued"), Some(r#ref.as_str())));
    let done = wait_ai(&client, started["id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "complete", "{done}");
    assert!(done["finished_at"].is_string() && done["created_at"].is_string());
    let result = &done["result"];
    for field in ["summary", "sentiment", "topics", "questions", "languages", "spam_share", "phrase_matches", "model"] {
        assert!(!result[field].is_null(), "result.{field} in {result}");
    }
    assert_eq!(result["model"], "cova-offline/1");
    assert_eq!(result["comments"].as_i64(), Some(comments));
    let s = &result["sentiment"];
    let total = s["positive"].as_f64().unwrap_or(0.0)
        + s["neutral"].as_f64().unwrap_or(0.0)
        + s["negative"].as_f64().unwrap_or(0.0);
    assert!((total - 1.0).abs() < 0.001, "shares add up: {s}");
    assert_eq!(s["labels"].as_array().map(Vec::len), Some(comments as usize), "a label per comment");
    let languages: f64 = result["languages"].as_object().expect("languages").values().filter_map(Value::as_f64).sum();
    assert!((languages - 1.0).abs() < 0.001);
    assert!(!result["topics"].as_array().expect("topics").is_empty());

    // Watch phrases: the comments that contain "price" as a word (the simulator has no other form).
    let matches = result["phrase_matches"].as_array().expect("phrase_matches");
    assert_eq!(matches.len(), 2);
    let price = Matcher::new(&["price"]);
    let expected = texts(&app, id).iter().filter(|t| !price.find(t).is_empty()).count();
    assert!(expected > 0, "the simulator's post talks about prices");
    assert_eq!((matches[0]["phrase"].as_str(), matches[0]["count"].as_u64()), (Some("price"), Some(expected as u64)));
    assert_eq!(matches[0]["comment_ids"].as_array().map(Vec::len), Some(expected));

    // Charged exactly the quote, once.
    let after = client.usage().await.ok().comments;
    assert_eq!(after.used - before.used, q["charge"].as_i64().expect("charge"));
    assert_eq!(after.reserved, 0);
    // Consent: the token, the ref, the job.
    let consents = cova_storage::repo::ai::consents(app.db(), &account.id).await.expect("consents");
    assert_eq!(consents.len(), 1);
    assert_eq!(
        (consents[0].r#ref.as_str(), consents[0].job_id.as_str()),
        (r#ref.as_str(), started["id"].as_str().unwrap_or_default())
    );
    assert!(consents[0].token_id.is_some());

    // Another account sees nothing of it.
    let (_, other) = app.integrator().await;
    let (status, err) = app
        .client(Some(&other))
        .get::<Value>(&format!("/api/v1/ai/jobs/{}", started["id"].as_str().unwrap_or_default()))
        .await
        .err();
    assert_eq!((status.as_u16(), err.code.as_str()), (404, "not_found"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quote_expires_runs_once_and_names_its_tasks() {
    let (app, clock) = spawn_on_clock("2026-06-10T12:00:00Z", |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let r#ref = collected(&client, tiktok_post_id(TikTokScenario::Normal, 30)).await;

    let old = quote(&client, &r#ref).await;
    clock.advance(Duration::from_millis(15 * 60_000 + 1));
    let (status, err) = client.post_json("/api/v1/ai/run", json!({"quote_id": old["quote_id"]})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    assert!(err.detail.contains("expired"), "{}", err.detail);

    let q = client.post_json("/api/v1/ai/quote", json!({"ref": r#ref, "tasks": ["sentiment", "topics"]})).await.ok();
    assert_eq!(q["tasks"], json!(["sentiment", "topics"]));
    let keyed = |key: &str| {
        client
            .request(reqwest::Method::POST, "/api/v1/ai/run")
            .header("Idempotency-Key", key)
            .json(&json!({"quote_id": q["quote_id"]}))
    };
    let first = client.send::<Value>(keyed("ai-run-1")).await;
    assert_eq!(first.status.as_u16(), 202);
    let first = first.ok();
    let again = client.send::<Value>(keyed("ai-run-1")).await;
    assert_eq!(again.status.as_u16(), 200, "the same key answers the same job");
    assert_eq!(again.ok()["id"], first["id"]);
    let (status, err) = client.post_json("/api/v1/ai/run", json!({"quote_id": q["quote_id"]})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "never a second job");
    assert!(err.detail.contains("already"), "{}", err.detail);
    let (status, err) = client.send::<Value>(keyed("ai-run-1").json(&json!({"quote_id": old["quote_id"]}))).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (409, "idempotency_conflict"));

    let done = wait_ai(&client, first["id"].as_str().expect("id")).await;
    let result = done["result"].as_object().expect("result");
    assert!(result.contains_key("sentiment") && result.contains_key("topics"));
    assert!(
        !result.contains_key("summary") && !result.contains_key("phrase_matches"),
        "only the quoted tasks: {result:?}"
    );

    // Another account's quote and an unknown one are "not found".
    let (_, other) = app.integrator().await;
    let (status, _) =
        app.client(Some(&other)).post_json("/api/v1/ai/run", json!({"quote_id": old["quote_id"]})).await.err();
    assert_eq!(status.as_u16(), 404);
    let (status, _) = client.post_json("/api/v1/ai/run", json!({"quote_id": "no-such-quote"})).await.err();
    assert_eq!(status.as_u16(), 404);
    let (status, err) = client.post_json("/api/v1/ai/quote", json!({"ref": r#ref, "tasks": ["mood"]})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_say_why() {
    // Late in the month: the jump to the next one below stays inside the library's 14 days, so
    // the janitor never purges the breakdown between the quote and the run.
    let (app, clock) = spawn_on_clock("2026-06-25T12:00:00Z", |_| {}).await;
    let (account, token) = app.integrator().await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 40);
    // Exactly what the post takes: nothing is left for an AI charge.
    app.grant(&account, texts(&app, id).len() as i64).await;
    let r#ref = collected(&client, id).await;
    let q = quote(&client, &r#ref).await;
    let (status, err) = client.post_json("/api/v1/ai/run", json!({"quote_id": q["quote_id"]})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "quota_exceeded"));

    // Not in the account's data at all; only metadata (nothing collected).
    let (status, err) = client.post_json("/api/v1/ai/quote", json!({"ref": "tiktok:7000000000000000001"})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (404, "not_found"));
    let meta_url = tiktok_url(tiktok_post_id(TikTokScenario::Normal, 12));
    client.post_json("/api/v1/analyses/save-metadata", json!({"url": meta_url})).await.ok();
    let meta_ref = format!("tiktok:{}", tiktok_post_id(TikTokScenario::Normal, 12));
    let (status, err) = client.post_json("/api/v1/ai/quote", json!({"ref": meta_ref})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "payment_required"));
    assert!(err.detail.contains("not collected"), "{}", err.detail);
    let (status, err) = client.post_json("/api/v1/ai/quote", json!({"ref": "not a ref"})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"));

    // Next month there is no pack.
    clock.set(parse_rfc3339("2026-07-01T00:00:01Z").expect("a time"));
    let q = quote(&client, &r#ref).await;
    let (status, err) = client.post_json("/api/v1/ai/run", json!({"quote_id": q["quote_id"]})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (402, "payment_required"));

    // Watch phrases: 0..=3, each 1..=120 characters after trimming; only for the account's analyses.
    let path = format!("/api/v1/ai/{ref}/queries");
    for (body, why) in [
        (json!({"queries": ["a", "b", "c", "d"]}), "at most 3"),
        (json!({"queries": ["   "]}), "1 to 120"),
        (json!({"queries": ["x".repeat(121)]}), "1 to 120"),
        (json!({"phrases": ["a"]}), "queries"),
    ] {
        let (status, err) = client.put_json(&path, body).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{why}");
    }
    assert_eq!(client.put_json(&path, json!({"queries": []})).await.ok()["queries"], json!([]));
    let (status, _) =
        client.put_json("/api/v1/ai/tiktok:7000000000000000001/queries", json!({"queries": []})).await.err();
    assert_eq!(status.as_u16(), 404);

    // The scope.
    let narrow = app.token(&account, "analyze:write").await;
    let (status, err) = app.client(Some(&narrow)).post_json("/api/v1/ai/quote", json!({"ref": r#ref})).await.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (403, "forbidden_scope"));
    app.stop().await;
}

/// The app with the OpenAI-compatible analyzer on the simulator's endpoint, as `model`.
async fn with_model(model: &str, batch_tokens: usize) -> TestApp {
    let model = model.to_owned();
    spawn_app_with(move |c| {
        c.ai.analyzer = AnalyzerKind::Openai;
        c.ai.openai.model = model;
        c.ai.openai.batch_tokens = batch_tokens;
        c.ai.max_attempts = 2;
        // The retries' waits are not what these tests look at.
        c.ai.retry_base_ms = 10;
        c.ai.openai.retry_base_ms = 10;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_endpoint_in_batches_never_gets_more_than_the_quote() {
    let app = with_model("sim-model", 800).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 150);
    let r#ref = collected(&client, id).await;
    let q = quote(&client, &r#ref).await;
    let done = wait_ai(&client, run(&client, &q).await["id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "complete", "{done}");
    let requests = app.sim.llm_requests();
    let batches: Vec<_> = requests.iter().filter(|r| r.comments > 0).collect();
    assert!(batches.len() > 1, "a token budget of 800 splits 150 comments: {requests:?}");
    assert_eq!(
        batches.iter().map(|r| r.comments).sum::<usize>() as i64,
        q["comments"].as_i64().expect("comments"),
        "each quoted comment once, nothing more"
    );
    let result = &done["result"];
    assert_eq!(result["model"], "openai:sim-model");
    assert!(result["tokens_used"].as_u64().is_some_and(|t| t > 0));
    assert_eq!(result["summary"], format!("Combined summary of {} parts.", batches.len()));
    assert_eq!(
        result["sentiment"]["labels"].as_array().map(Vec::len),
        Some(q["comments"].as_u64().unwrap_or(0) as usize)
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_model_fails_the_job_and_charges_nothing() {
    for (model, code) in [("sim-fail", "unavailable"), ("sim-garbage", "parse_error")] {
        let app = with_model(model, 6_000).await;
        let (account, token) = app.integrator().await;
        app.grant(&account, 1_000).await;
        let client = app.client(Some(&token));
        let r#ref = collected(&client, tiktok_post_id(TikTokScenario::Normal, 20)).await;
        let before = client.usage().await.ok().comments;
        let q = quote(&client, &r#ref).await;
        let done = wait_ai(&client, run(&client, &q).await["id"].as_str().expect("id")).await;
        assert_eq!(
            (done["status"].as_str(), done["error"]["code"].as_str()),
            (Some("failed"), Some(code)),
            "{model}: {done}"
        );
        assert!(done["result"].is_null());
        let after = client.usage().await.ok().comments;
        assert_eq!((after.used, after.reserved), (before.used, 0), "{model}: nothing charged, nothing held");
        app.stop().await;
    }
    // A flaky endpoint is asked again and the job completes.
    let app = with_model("sim-flaky", 6_000).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let r#ref = collected(&client, tiktok_post_id(TikTokScenario::Normal, 20)).await;
    let q = quote(&client, &r#ref).await;
    let done = wait_ai(&client, run(&client, &q).await["id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "complete", "{done}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ai_events_and_commands_match_their_schemas() {
    let app = spawn_app().await;
    let mut events = app.backends.queue.subscribe_events().await.expect("subscribe");
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let r#ref = collected(&client, tiktok_post_id(TikTokScenario::Normal, 10)).await;
    let started = run(&client, &quote(&client, &r#ref).await).await;
    wait_ai(&client, started["id"].as_str().expect("id")).await;

    let event_schema = cova_tests::schema("job-event.schema.json");
    let body = cova_tests::until("the AI job's event", async || {
        let message = tokio::time::timeout(Duration::from_secs(20), events.next()).await.ok()??;
        let body: Value = serde_json::from_slice(&message.payload).expect("JSON");
        cova_tests::assert_valid(&event_schema, &body);
        (body["kind"] == "ai").then_some(body)
    })
    .await;
    assert_eq!(
        (body["type"].as_str(), body["job_id"].as_str(), body["ref"].as_str()),
        (Some("job.complete"), started["id"].as_str(), Some(r#ref.as_str()))
    );
    assert!(body["error"].is_null());
    let command_schema = cova_tests::schema("ai-command.schema.json");
    let commands: Vec<Value> =
        app.outbox_payloads("command").await.iter().map(|p| serde_json::from_str(p).expect("JSON")).collect();
    let ai: Vec<&Value> = commands.iter().filter(|c| c["job_id"] == started["id"]).collect();
    assert_eq!(ai.len(), 1);
    cova_tests::assert_valid(&command_schema, ai[0]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_three_ai_jobs_of_an_account_run_at_once() {
    // Each request to this model takes 1.5 s: the first jobs are still running when the
    // fourth is asked for.
    let app = with_model("sim-slow", 100_000).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 10_000).await;
    let client = app.client(Some(&token));
    let mut quotes = Vec::new();
    for n in 1..=4 {
        let r#ref = collected(&client, tiktok_post_id(TikTokScenario::Normal, 10 + n)).await;
        quotes.push(quote(&client, &r#ref).await);
    }
    let mut started = Vec::new();
    for q in &quotes[..3] {
        started.push(run(&client, q).await["id"].as_str().expect("id").to_owned());
    }
    let reply = client.post_json("/api/v1/ai/run", json!({"quote_id": quotes[3]["quote_id"]})).await;
    assert!(reply.header_u64("retry-after").is_some(), "a 429 says when to come back");
    let (status, err) = reply.err();
    assert_eq!((status.as_u16(), err.code.as_str()), (429, "concurrency_limit"), "{}", err.detail);
    assert!(err.detail.contains("3 AI jobs"), "{}", err.detail);
    // Nothing was held for the refused run; once one has finished, the quote runs.
    let usage = client.usage().await.ok();
    let held: i64 = quotes[..3].iter().map(|q| q["charge"].as_i64().expect("charge")).sum();
    assert_eq!(usage.comments.reserved, held);
    wait_ai(&client, &started[0]).await;
    let fourth = run(&client, &quotes[3]).await;
    assert_eq!(wait_ai(&client, fourth["id"].as_str().expect("id")).await["status"], "complete");
    app.stop().await;
}

/// The offline analyzer's sentiment is judged once per stored comment: an AI job that finds
/// comments without a stored label (as rows stored before labels were kept have) keeps the
/// labels it judged, and a later AI job reads them instead of judging the texts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ai_job_keeps_the_sentiments_it_judged_and_the_next_reads_them() {
    use cova_storage::repo::breakdown;
    use cova_storage::schema::job_comments;
    use diesel::prelude::*;
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 60);
    let job = client.collect(id).await;
    let job = job["job_id"].as_str().expect("job_id").to_owned();
    let r#ref = format!("tiktok:{id}");
    let comments = texts(&app, id).len() as i64;
    // The spike check after the collection judged them; forget it, as for rows stored before.
    app.notifier_caught_up().await;
    {
        let mut conn = app.db().conn().await.expect("conn");
        let forget = diesel::update(job_comments::table.filter(job_comments::job_id.eq(&job)))
            .set(job_comments::sentiment.eq(None::<i16>));
        conn.tx().execute(forget).await.expect("labels forgotten");
    }
    assert_eq!(breakdown::unjudged(app.db(), &job, 1_000).await.expect("unjudged").len() as i64, comments);

    let first = wait_ai(&client, run(&client, &quote(&client, &r#ref).await).await["id"].as_str().expect("id")).await;
    assert_eq!(first["status"], "complete", "{first}");
    let codes: Vec<Option<i16>> = first["result"]["sentiment"]["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .map(|l| cova_analyzers::Label::parse(l["label"].as_str().unwrap_or_default()).map(|l| l.code()))
        .collect();
    assert_eq!(codes.len() as i64, comments);
    cova_tests::eventually("the judged sentiments are kept", async || {
        breakdown::first_sentiments(app.db(), &job, comments).await.expect("codes") == codes
    })
    .await;

    // Stored labels are read, not judged again: told that every comment is negative, the next
    // job says so.
    let negative = cova_analyzers::Label::Negative.code();
    let ids: Vec<(String, i16)> = breakdown::chunk(app.db(), &job, -1, 1_000)
        .await
        .expect("rows")
        .into_iter()
        .map(|r| (r.comment_id, negative))
        .collect();
    breakdown::store_sentiments(app.db(), &job, &ids).await.expect("stored");
    let second = wait_ai(&client, run(&client, &quote(&client, &r#ref).await).await["id"].as_str().expect("id")).await;
    let s = &second["result"]["sentiment"];
    assert_eq!((s["negative"].as_f64(), s["positive"].as_f64()), (Some(1.0), Some(0.0)), "{s}");
    app.stop().await;
}
