//! Searching every comment an account keeps (`GET /api/v1/comments/search`) on the backend's
//! own full-text engine: what it finds is what the terms say of the simulator's comments, across
//! posts, with each filter and order, page by page; another account's comments, a removed
//! entry's and an older scrape's are never found; bad input is 400 in words and no query is a
//! server error.

use cova_analyzers::search::Query;
use cova_sim::{TikTokScenario, Tone, tiktok_post_id};
use cova_tests::{Client, TestApp, spawn_app};
use reqwest::Method;
use serde_json::Value;
use std::collections::BTreeSet;

/// Every comment and reply of the simulator's post, with its language: (id, text, language, is reply).
fn truth(app: &TestApp, id: u64) -> Vec<(String, String, String, bool)> {
    let post = app.sim.expected_post(&id.to_string());
    post.comments
        .iter()
        .flat_map(|c| std::iter::once((c, false)).chain(c.replies.iter().map(|r| (r, true))))
        .map(|(c, reply)| (c.id.clone(), c.text.clone(), c.language.clone(), reply))
        .collect()
}

/// What a one-word query finds in the simulator's posts, by the terms both engines index.
fn expected(app: &TestApp, ids: &[u64], q: &str) -> BTreeSet<String> {
    let query = Query::parse(q).expect("a query");
    ids.iter()
        .flat_map(|id| truth(app, *id))
        .filter(|(_, text, lang, _)| !query.matches(text, Some(lang)).is_empty())
        .map(|(id, ..)| id)
        .collect()
}

/// Every hit of a search, page by page (`limit` each), checking each page's cursor.
async fn all_hits(client: &Client, params: &[(&str, &str)], limit: usize) -> Vec<Value> {
    let limit = limit.to_string();
    let mut hits = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut p: Vec<(&str, &str)> = params.to_vec();
        p.push(("limit", &limit));
        if let Some(c) = &cursor {
            p.push(("cursor", c));
        }
        let page = client.search(&p).await.ok();
        let items = page["items"].as_array().expect("items").clone();
        assert!(items.len() <= limit.parse().unwrap_or(0));
        hits.extend(items);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return hits,
        }
    }
}

fn ids(hits: &[Value]) -> BTreeSet<String> {
    hits.iter().map(|h| h["comment"]["id"].as_str().expect("id").to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_the_accounts_kept_comments_with_every_filter_and_order() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 10_000).await;
    let client = app.client(Some(&token));
    let posts = [tiktok_post_id(TikTokScenario::Normal, 160), tiktok_post_id(TikTokScenario::Normal, 90)];
    for id in posts {
        client.collect(id).await;
    }
    let refs: Vec<String> = posts.iter().map(|id| format!("tiktok:{id}")).collect();
    // Another account's post with the same words is never found by this one.
    let (other, other_token) = app.integrator().await;
    app.grant(&other, 1_000).await;
    let other_client = app.client(Some(&other_token));
    let theirs = tiktok_post_id(TikTokScenario::Normal, 70);
    other_client.collect(theirs).await;

    let want = expected(&app, &posts, "price");
    assert!(want.len() >= 5, "the simulator's posts talk about prices: {}", want.len());
    let hits = all_hits(&client, &[("q", "price")], 7).await;
    assert_eq!(hits.len(), want.len(), "each comment once");
    assert_eq!(ids(&hits), want, "every kept comment that says it, and no other");
    for hit in &hits {
        assert!(refs.contains(&hit["post"]["ref"].as_str().unwrap_or_default().to_owned()), "{hit}");
        assert!(hit["post"]["url"].as_str().is_some_and(|u| u.starts_with("https://")), "{hit}");
        assert!(!hit["matches"].as_array().expect("matches").is_empty(), "{hit}");
        assert!(hit["comment"].get("replies").is_none() && hit["comment"].get("parent_id").is_some(), "{hit}");
    }
    assert_eq!(ids(&all_hits(&other_client, &[("q", "price")], 100).await), expected(&app, &[theirs], "price"));

    // Filters and orders.
    let one = all_hits(&client, &[("q", "price"), ("ref", &refs[1])], 100).await;
    assert_eq!(ids(&one), expected(&app, &posts[1..], "price"));
    let two = all_hits(&client, &[("q", "price"), ("ref", &refs[0]), ("ref", &refs[1])], 100).await;
    assert_eq!(ids(&two), want);
    assert!(all_hits(&client, &[("q", "price"), ("platform", "youtube")], 100).await.is_empty());
    let replies = all_hits(&client, &[("q", "price"), ("replies", "only")], 100).await;
    let tops = all_hits(&client, &[("q", "price"), ("replies", "exclude")], 100).await;
    assert!(replies.iter().all(|h| h["comment"]["parent_id"].is_string()));
    assert!(tops.iter().all(|h| h["comment"]["parent_id"].is_null()));
    assert_eq!(replies.len() + tops.len(), want.len());
    let liked = all_hits(&client, &[("q", "price"), ("sort", "likes")], 100).await;
    let likes: Vec<i64> = liked.iter().map(|h| h["comment"]["likes"].as_i64().unwrap_or(0)).collect();
    assert!(likes.windows(2).all(|w| w[0] >= w[1]), "most liked first: {likes:?}");
    let floor = likes[likes.len() / 2].to_string();
    assert!(
        all_hits(&client, &[("q", "price"), ("min_likes", &floor)], 100)
            .await
            .iter()
            .all(|h| { h["comment"]["likes"].as_i64().unwrap_or(0) >= floor.parse::<i64>().unwrap_or(0) })
    );
    let newest = all_hits(&client, &[("q", "price"), ("sort", "newest")], 100).await;
    let times: Vec<&str> = newest.iter().map(|h| h["comment"]["created_at"].as_str().unwrap_or_default()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
    let oldest = times.last().copied().unwrap_or_default();
    let since = all_hits(&client, &[("q", "price"), ("since", oldest)], 100).await;
    assert_eq!(since.len(), want.len(), "since is inclusive");
    assert!(all_hits(&client, &[("q", "price"), ("until", oldest)], 100).await.is_empty(), "until is exclusive");
    let languages: BTreeSet<String> =
        hits.iter().filter_map(|h| h["comment"]["language"].as_str().map(str::to_owned)).collect();
    for language in &languages {
        let found = all_hits(&client, &[("q", "price"), ("language", language)], 100).await;
        assert!(!found.is_empty() && found.iter().all(|h| h["comment"]["language"] == language.as_str()));
    }
    let author = hits
        .iter()
        .find_map(|h| h["comment"]["author"]["handle"].as_str())
        .expect("a hit with the author's handle")
        .to_uppercase();
    let by = all_hits(&client, &[("q", "price"), ("author", &format!("@{author}"))], 100).await;
    assert!(
        !by.is_empty()
            && by
                .iter()
                .all(|h| h["comment"]["author"]["handle"].as_str().map(str::to_uppercase) == Some(author.clone()))
    );

    // Emoji are words too.
    let fire = all_hits(&client, &[("q", "🔥")], 100).await;
    assert_eq!(ids(&fire), expected(&app, &posts, "🔥"));
    assert!(!fire.is_empty());

    // The download of every hit, with the post's columns, in each format.
    let export = async |format: &str| {
        let req = client.request(Method::GET, "/api/v1/comments/search/export").query(&[
            ("q", "price"),
            ("format", format),
            ("sort", "likes"),
        ]);
        let (status, headers, body) = client.raw(req).await;
        assert_eq!(status.as_u16(), 200, "{format}: {}", String::from_utf8_lossy(&body));
        let disposition = headers.get("content-disposition").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert_eq!(disposition, format!("attachment; filename=\"comments-search.{format}\""));
        body
    };
    let csv = export("csv").await;
    let mut reader = csv::Reader::from_reader(csv.strip_prefix("\u{feff}".as_bytes()).expect("a byte order mark"));
    let header = reader.headers().expect("header").clone();
    assert_eq!(&header[0], "post_url");
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
    assert_eq!(records.iter().map(|r| r[2].to_owned()).collect::<BTreeSet<_>>(), want, "CSV");
    assert!(records.iter().all(|r| r[0].starts_with("https://www.tiktok.com/")), "each row names its post");
    let jsonl = String::from_utf8(export("jsonl").await).expect("utf-8");
    let lines: Vec<Value> = jsonl.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(lines.iter().map(|l| l["id"].as_str().unwrap_or_default().to_owned()).collect::<BTreeSet<_>>(), want);
    let likes: Vec<i64> = lines.iter().map(|l| l["likes"].as_i64().unwrap_or(0)).collect();
    assert!(likes.windows(2).all(|w| w[0] >= w[1]), "in the search's order");
    use calamine::Reader as _;
    let mut book = calamine::Xlsx::new(std::io::Cursor::new(export("xlsx").await)).expect("an XLSX workbook");
    let sheet = book.worksheet_range_at(0).expect("a sheet").expect("readable");
    let ids_in_sheet: BTreeSet<String> = sheet.rows().skip(1).map(|r| r[2].to_string()).collect();
    assert_eq!(ids_in_sheet, want, "XLSX");
    let (status, err) = client
        .send::<Value>(
            client.request(Method::GET, "/api/v1/comments/search/export").query(&[("q", "price"), ("limit", "5")]),
        )
        .await
        .err();
    assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{}", err.detail);

    // A newer scrape replaces the old one's comments in the results, never doubles them.
    let again = client.refresh(&refs[0]).await.ok();
    client.wait_job(again["job_id"].as_str().expect("job_id")).await;
    assert_eq!(all_hits(&client, &[("q", "price")], 100).await.len(), want.len());
    // A removed entry's comments are gone.
    let (status, _, _) = client.raw(client.request(Method::DELETE, &format!("/api/v1/analyses/{}", refs[0]))).await;
    assert_eq!(status.as_u16(), 204);
    assert_eq!(ids(&all_hits(&client, &[("q", "price")], 100).await), expected(&app, &posts[1..], "price"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phrases_word_forms_and_sentiment() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    // A post of the simulator's angry comments only ("… I want a refund!" among them).
    let id = 6_900_000_000_000_300_000_u64;
    let now = app.now() / 1000;
    let posted: Vec<(i64, Tone)> = (0..20).map(|i| (now - 3_600 + i * 60, Tone::Negative)).collect();
    app.sim.post_comments(&id.to_string(), &posted);
    client.collect(id).await;
    app.notifier_caught_up().await;
    let refunds = all_hits(&client, &[("q", "refunds")], 100).await;
    assert!(!refunds.is_empty(), "a word form finds the word");
    assert!(refunds.iter().all(|h| h["comment"]["text"].as_str().unwrap_or_default().contains("refund")));
    assert_eq!(refunds[0]["matches"], serde_json::json!(["refund"]));
    let phrase = all_hits(&client, &[("q", "\"want a refund\"")], 100).await;
    assert_eq!(ids(&phrase), ids(&refunds));
    assert!(all_hits(&client, &[("q", "\"refund want\"")], 100).await.is_empty(), "a phrase keeps its order");
    // The labels the spike check kept: angry comments are negative.
    let negative = all_hits(&client, &[("q", "refund"), ("sentiment", "negative")], 100).await;
    assert_eq!(ids(&negative), ids(&refunds));
    assert!(all_hits(&client, &[("q", "refund"), ("sentiment", "positive")], 100).await.is_empty());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_told_and_no_query_is_a_server_error() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    client.collect(tiktok_post_id(TikTokScenario::Normal, 40)).await;
    let long = "a".repeat(201);
    for params in [
        vec![],
        vec![("q", "")],
        vec![("q", long.as_str())],
        vec![("q", "price"), ("colour", "red")],
        vec![("q", "price"), ("since", "2026-12-02T00:00:00Z"), ("until", "2026-12-01T00:00:00Z")],
        vec![("q", "price"), ("limit", "500")],
        vec![("q", "price"), ("sentiment", "angry")],
    ] {
        let (status, err) = client.search(&params).await.err();
        assert_eq!((status.as_u16(), err.code.as_str()), (400, "validation_error"), "{params:?}: {}", err.detail);
        assert!(!err.detail.is_empty());
    }
    let first = client.search(&[("q", "price"), ("limit", "1")]).await.ok();
    let cursor = first["next_cursor"].as_str().expect("more than one");
    let (status, err) = client.search(&[("q", "scam"), ("cursor", cursor)]).await.err();
    assert_eq!(status.as_u16(), 400, "another query's cursor");
    assert!(err.detail.contains("another search"), "{}", err.detail);

    // Whatever the query, the engines never see their own syntax: 200 or 400, never 5xx.
    use rand::{Rng, SeedableRng};
    let alphabet: Vec<char> = "price scam \"'()*-:^+~.,;!?#@&|<>{}[]\\/%_🔥é NEAR OR AND NOT".chars().collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(51);
    for _ in 0..300 {
        let len = rng.random_range(1..30);
        let q: String = (0..len).map(|_| alphabet[rng.random_range(0..alphabet.len())]).collect();
        let (status, _, body) =
            client.raw(client.request(Method::GET, "/api/v1/comments/search").query(&[("q", q.as_str())])).await;
        assert!(matches!(status.as_u16(), 200 | 400), "{q:?}: {status} {}", String::from_utf8_lossy(&body));
    }
    app.stop().await;
}

/// A workspace session's analysis is not in the library until it is saved: the search finds its
/// comments only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_analysis_is_searched_once_it_is_saved() {
    let app = spawn_app().await;
    let email = "finder@example.com";
    let browser = cova_tests::workspace::signed_in(&app, email).await;
    let account = cova_storage::repo::accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 1_000).await;
    let id = tiktok_post_id(TikTokScenario::Normal, 30);
    let (status, job) = browser
        .call(Method::POST, "/api/v1/analyze", Some(serde_json::json!({"url": cova_tests::tiktok_url(id)})))
        .await;
    assert_eq!(status.as_u16(), 202, "{job}");
    let path = format!("/api/v1/analyze/{}", job["job_id"].as_str().expect("job_id"));
    cova_tests::eventually("the session's job completes", async || {
        browser.call(Method::GET, &path, None).await.1["status"] == "complete"
    })
    .await;
    let first = app.sim.expected_post(&id.to_string()).comments[0].text.clone();
    let word: String = first.split_whitespace().find(|w| w.chars().all(char::is_alphabetic)).unwrap_or("x").to_owned();
    let search = format!("/api/v1/comments/search?q={word}");
    let (status, found) = browser.call(Method::GET, &search, None).await;
    assert_eq!(status.as_u16(), 200, "{found}");
    assert_eq!(found["items"], serde_json::json!([]), "not in the library: not searched");
    let (status, saved) = browser.call(Method::POST, &format!("/api/v1/analyses/tiktok:{id}/save"), None).await;
    assert_eq!(status.as_u16(), 200, "{saved}");
    let (_, found) = browser.call(Method::GET, &search, None).await;
    assert!(!found["items"].as_array().expect("items").is_empty(), "saved: found");
    app.stop().await;
}
