//! Media: covers, avatars and comment images served from cova's own store (the filesystem
//! embedded, S3-compatible storage in the real-backend pass), with conditional and range
//! requests, per-account ids, links that expired upstream, the 14-day purge on a test clock,
//! and image links that must never be followed.

use cova_domain::time::parse_rfc3339;
use cova_media::MediaError;
use cova_sim::cdn::image_bytes;
use cova_sim::{TikTokScenario, tiktok_post_id};
use cova_storage::repo::media as rows;
use cova_tests::{Client, TestApp, flat_comments, spawn_app, spawn_app_with, spawn_on_clock, tiktok_url};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;
use std::time::Duration;

/// An account with every scope and a pack; returns its client and account id.
async fn customer(app: &TestApp) -> (Client, String) {
    let (account, token) = app.integrator().await;
    app.grant(&account, 20_000).await;
    (app.client(Some(&token)), account.id)
}

/// Collects the post and returns its library entry.
async fn collect(client: &Client, id: u64) -> Value {
    client.collect(id).await;
    client.entry(&format!("tiktok:{id}"), "").await.ok()
}

async fn get(client: &Client, url: &str, headers: &[(&str, &str)]) -> (u16, HeaderMap, Vec<u8>) {
    let mut req = client.request(Method::GET, url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let (status, headers, body) = client.raw(req).await;
    (status.as_u16(), headers, body)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

fn error_code(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body).map(|v| v["code"].as_str().unwrap_or_default().to_owned()).unwrap_or_default()
}

/// The name of a simulated CDN image (what its bytes end with) from its link.
fn sim_name(source_url: &str) -> String {
    let path = source_url.split('?').next().expect("path");
    path.rsplit('/').next().expect("name").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn covers_avatars_and_comment_images_are_served_by_cova() {
    let app = spawn_app().await;
    let (client, account_id) = customer(&app).await;
    let id = tiktok_post_id(TikTokScenario::Normal, 120);
    let entry = collect(&client, id).await;

    // The metadata names cova's copies of the cover and the author's avatar.
    let media = entry["metadata"]["media"].as_array().expect("metadata media").clone();
    let kinds: Vec<&str> = media.iter().map(|m| m["type"].as_str().expect("type")).collect();
    assert_eq!(kinds, ["cover", "avatar"], "{media:?}");
    let cover = &media[0];
    let cover_url = cover["url"].as_str().expect("url");
    assert!(cover_url.starts_with("/api/v1/media/file?id="), "{cover}");
    assert_eq!(cover["width"], 576);

    // Served from the store, with the sniffed type, a strong ETag and a private cache.
    let (status, headers, body) = get(&client, cover_url, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body, image_bytes(&format!("cover-{id}.png")));
    assert_eq!(header(&headers, "content-type"), "image/png");
    assert_eq!(header(&headers, "content-length"), body.len().to_string());
    assert_eq!(header(&headers, "cache-control"), "private, max-age=86400");
    assert_eq!(header(&headers, "x-content-type-options"), "nosniff");
    assert_eq!(header(&headers, "accept-ranges"), "bytes");
    let etag = header(&headers, "etag").to_owned();
    assert!(etag.starts_with('"') && etag.len() == 66, "{etag}");
    assert!(headers.contains_key("x-ratelimit-remaining"));

    // Conditional and byte-range requests.
    let (status, headers, body) = get(&client, cover_url, &[("if-none-match", &etag)]).await;
    assert_eq!((status, body.len(), header(&headers, "etag")), (304, 0, etag.as_str()));
    let size = image_bytes(&format!("cover-{id}.png")).len();
    let (status, headers, body) = get(&client, cover_url, &[("range", "bytes=0-7")]).await;
    assert_eq!((status, body.as_slice()), (206, b"\x89PNG\r\n\x1a\n".as_slice()));
    assert_eq!(header(&headers, "content-range"), format!("bytes 0-7/{size}"));
    let (status, _, body) = get(&client, cover_url, &[("range", "bytes=-4")]).await;
    assert_eq!((status, body), (206, image_bytes(&format!("cover-{id}.png"))[size - 4..].to_vec()));
    let (status, _, body) = get(&client, cover_url, &[("range", "bytes=0-3"), ("if-range", "\"other\"")]).await;
    assert_eq!((status, body.len()), (200, size), "If-Range naming other bytes: the whole file");
    let (status, headers, body) = get(&client, cover_url, &[("range", &format!("bytes={size}-"))]).await;
    assert_eq!((status, error_code(&body).as_str()), (416, "range_not_satisfiable"));
    assert_eq!(header(&headers, "content-range"), format!("bytes */{size}"));

    // The download names the file.
    let download = cover_url.replace("/media/file", "/media/download");
    let (status, headers, body) = get(&client, &download, &[]).await;
    assert_eq!((status, body.len()), (200, size));
    assert_eq!(
        header(&headers, "content-disposition"),
        format!("attachment; filename=\"tiktok_{id}-cover-1.png\"; filename*=UTF-8''tiktok%3A{id}%2Dcover%2D1%2Epng")
    );

    // Comment images: downloaded while collecting, pointed at cova, the platform's link kept.
    let comments = flat_comments(&entry["comments"]);
    let with_images: Vec<&Value> =
        comments.iter().filter(|c| !c["media"].as_array().expect("media").is_empty()).collect();
    assert!(with_images.len() >= 3, "the post has comment images");
    for c in &with_images {
        let m = &c["media"][0];
        assert_eq!(m["type"], "image");
        assert!(m["source_url"].as_str().expect("source").contains("x-signature="), "{m}");
        let (status, headers, body) = get(&client, m["url"].as_str().expect("url"), &[]).await;
        assert_eq!((status, header(&headers, "content-type")), (200, "image/png"));
        assert_eq!(body, image_bytes(&format!("c{}.png", c["id"].as_str().expect("id"))));
    }
    let (images, fetched) = rows::count(app.db(), &account_id, &format!("tiktok:{id}")).await.expect("count");
    // The cover, the author's avatar and the comment images are in; commenters' avatars wait.
    assert!(fetched > with_images.len() as i64 && images > fetched, "avatars wait to be asked for");

    // Avatars of commenters: fetched when first asked for.
    let avatars: Vec<&Value> = comments.iter().filter(|c| c["author"]["avatar"].is_object()).collect();
    assert!(avatars.len() >= 2);
    let avatar = &avatars[0]["author"]["avatar"];
    let (status, _, body) = get(&client, avatar["url"].as_str().expect("url"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body, image_bytes(&sim_name(avatar["source_url"].as_str().expect("source"))));

    // The free metadata endpoint names the same images for the account.
    let meta = client.metadata(&tiktok_url(id)).await.ok();
    assert_eq!(meta["media"][0]["id"], cover["id"], "the same image keeps its id: {meta}");

    // Another account's ids are not this account's: 404, like an id that does not exist.
    let (other, other_account) = customer(&app).await;
    for bad in [cover_url.to_owned(), "/api/v1/media/file?id=0123456789abcdef0123456789abcdef".into()] {
        let (status, _, body) = get(&other, &bad, &[]).await;
        assert_eq!((status, error_code(&body).as_str()), (404, "not_found"), "{bad}");
    }
    for bad in ["/api/v1/media/file?id=../../etc/passwd", "/api/v1/media/download?id=x"] {
        assert_eq!(get(&client, bad, &[]).await.0, 404, "{bad}");
    }
    let (status, _, body) = get(&client, "/api/v1/media/file", &[]).await;
    assert_eq!((status, error_code(&body).as_str()), (400, "validation_error"));
    assert_eq!(get(&app.client(None), cover_url, &[]).await.0, 401);

    // A page on another origin may send the conditional and range headers and read the answers'.
    let preflight = reqwest::Client::new()
        .request(Method::OPTIONS, format!("{}{cover_url}", app.base_url))
        .header("origin", "https://integrator.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "authorization,range,if-none-match")
        .send()
        .await
        .expect("preflight");
    assert!(preflight.status().is_success(), "{:?}", preflight.status());
    let (_, headers, _) = get(&client, cover_url, &[("origin", "https://integrator.example")]).await;
    let exposed = header(&headers, "access-control-expose-headers");
    assert!(["etag", "content-range", "content-disposition"].iter().all(|h| exposed.contains(h)), "{exposed}");

    // The same post for the other account: its own ids, the same stored bytes (kept once).
    let theirs = collect(&other, id).await;
    let their_cover = theirs["metadata"]["media"][0]["id"].as_str().expect("id").to_owned();
    assert_ne!(their_cover, cover["id"].as_str().expect("id"));
    let now = app.now();
    let mine = rows::find(app.db(), &account_id, cover["id"].as_str().expect("id"), now).await.expect("row");
    let their_row = rows::find(app.db(), &other_account, &their_cover, now).await.expect("row");
    assert_eq!(mine.expect("mine").content_key, their_row.expect("theirs").content_key);

    // Hours later the platform's links have expired: what cova kept is still served; an
    // avatar never asked for cannot be fetched any more, and the answer says why.
    app.sim.expire_cdn_links();
    let (status, _, body) = get(&client, cover_url, &[]).await;
    assert_eq!((status, body), (200, image_bytes(&format!("cover-{id}.png"))));
    let image = with_images[0]["media"][0]["url"].as_str().expect("url");
    assert_eq!(get(&client, image, &[]).await.0, 200);
    let unfetched = avatars
        .iter()
        .map(|c| &c["author"]["avatar"])
        .find(|a| a["source_url"] != avatar["source_url"])
        .expect("another avatar");
    let (status, _, body) = get(&client, unfetched["url"].as_str().expect("url"), &[]).await;
    assert_eq!((status, error_code(&body).as_str()), (502, "parse_error"));
    let detail =
        serde_json::from_slice::<Value>(&body).expect("json")["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains("403") && detail.contains("expired"), "{detail}");
    assert!(!detail.contains("x-signature"), "signed links stay out of errors: {detail}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_are_purged_with_the_breakdown_and_a_refresh_brings_them_back() {
    let (app, clock) = spawn_on_clock("2026-06-10T12:00:00Z", |_| {}).await;
    let (client, account_id) = customer(&app).await;
    let id = tiktok_post_id(TikTokScenario::Normal, 40);
    let r#ref = format!("tiktok:{id}");
    let entry = collect(&client, id).await;
    let cover_id = entry["metadata"]["media"][0]["id"].as_str().expect("id").to_owned();
    let cover_url = format!("/api/v1/media/file?id={cover_id}");
    assert_eq!(get(&client, &cover_url, &[]).await.0, 200);
    let key = rows::find(app.db(), &account_id, &cover_id, app.now())
        .await
        .expect("row")
        .and_then(|r| r.content_key)
        .expect("kept");
    assert!(app.backends.media.store().size(&key).await.is_ok());

    // A day short of 14: still there (opening it does not extend it).
    clock.advance(Duration::from_secs(13 * 86_400));
    assert_eq!(get(&client, &cover_url, &[]).await.0, 200);
    let (status, headers, _) = get(&client, &cover_url, &[]).await;
    assert_eq!((status, header(&headers, "cache-control")), (200, "private, max-age=86400"));

    // Past 14 days the janitor deletes the breakdown, the images and their stored bytes.
    clock.advance(Duration::from_secs(86_400 + 60));
    // The bytes go first, then the rows that named them.
    cova_tests::eventually("the janitor deleted the images and their bytes", async || {
        app.backends.media.store().size(&key).await.is_err()
            && rows::count(app.db(), &account_id, &r#ref).await.expect("count") == (0, 0)
    })
    .await;
    assert!(matches!(app.backends.media.store().size(&key).await, Err(MediaError::NotFound)));
    let (status, _, body) = get(&client, &cover_url, &[]).await;
    assert_eq!((status, error_code(&body).as_str()), (404, "not_found"));
    assert_eq!(client.entry(&r#ref, "").await.ok()["status"], "expired");

    // A refresh collects the post again, and its images with it.
    let job = client.refresh(&r#ref).await.ok();
    assert_eq!(client.wait_job(job["job_id"].as_str().expect("job")).await["status"], "complete");
    let entry = client.entry(&r#ref, "").await.ok();
    let fresh = entry["metadata"]["media"][0]["url"].as_str().expect("url");
    assert_ne!(fresh, cover_url);
    let (status, _, body) = get(&client, fresh, &[]).await;
    assert_eq!((status, body), (200, image_bytes(&format!("cover-{id}.png"))));
    assert!(parse_rfc3339(entry["expires_at"].as_str().expect("expires")).expect("time") > clock.now_ms());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_links_off_the_allow_list_are_never_followed() {
    let app = spawn_app().await;
    let (client, _) = customer(&app).await;
    let id = tiktok_post_id(TikTokScenario::HostileMedia, 12);
    let entry = collect(&client, id).await;
    let images: Vec<Value> =
        entry["comments"].as_array().expect("comments").iter().filter_map(|c| c["media"].get(0).cloned()).collect();
    assert!(images.len() >= 4, "every top-level comment has a hostile image: {images:?}");
    let mut details = Vec::new();
    for image in &images {
        let (status, _, body) = get(&client, image["url"].as_str().expect("url"), &[]).await;
        assert_eq!((status, error_code(&body).as_str()), (502, "parse_error"), "{image}");
        let v: Value = serde_json::from_slice(&body).expect("json");
        details.push(v["detail"].as_str().unwrap_or_default().to_owned());
    }
    let said = |what: &str| details.iter().filter(|d| d.contains(what)).count();
    assert!(said("`http://localhost:") >= 2, "another host, directly or by a redirect: {details:?}");
    assert!(said("`file:` links are never fetched") >= 1, "{details:?}");
    assert!(said("`http://169.254.169.254`") >= 1, "{details:?}");
    let requests = app.sim.requests();
    assert!(requests.iter().any(|r| r.path.starts_with("/cdn/redirect/")), "the CDN redirect was looked at");
    let leaked: Vec<&str> = requests.iter().map(|r| r.path.as_str()).filter(|p| p.starts_with("/cdn/trap/")).collect();
    assert!(leaked.is_empty(), "a hostile link was followed: {leaked:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_media_store_that_is_down_answers_503_and_fails_no_job() {
    // An S3 endpoint where nothing listens.
    let app = spawn_app_with(|c| {
        c.media.url = "s3://cova-down/media".into();
        c.media.s3_endpoint = Some("http://127.0.0.1:9".into());
        c.media.s3_allow_http = true;
        c.media.s3_access_key_id = Some("test".into());
        c.media.s3_secret_access_key = Some("test".to_owned().into());
    })
    .await;
    let (client, _) = customer(&app).await;
    let entry = collect(&client, tiktok_post_id(TikTokScenario::Normal, 12)).await;
    assert_eq!(entry["status"], "ready", "the comments are in although no image could be kept");
    let cover = entry["metadata"]["media"][0]["url"].as_str().expect("a cover");
    let (status, headers, body) = get(&client, cover, &[]).await;
    assert_eq!((status, error_code(&body).as_str()), (503, "unavailable"));
    assert!(headers.contains_key("retry-after"));
    // Readiness names the store.
    let (status, _, body) = get(&client, "/readyz", &[]).await;
    assert_eq!(status, 503);
    let body: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert!(body["detail"].as_str().unwrap_or_default().contains("media unavailable"), "{body}");
    app.stop().await;
}

/// Registers one image of `slot` for the account's post, living until `until`.
async fn image(app: &cova_tests::TestApp, account: &str, slot: &str, until: i64) -> String {
    use cova_storage::repo::media::{Listed, register};
    let listed = [Listed {
        slot: slot.into(),
        kind: "image",
        source_url: "https://cdn.example/x.png".into(),
        width: None,
        height: None,
    }];
    let now = app.now();
    register(app.db(), account, "tiktok:1", &listed, now, until).await.expect("register").remove(slot).expect("id").id
}

/// One step of the janitor's or of a scrape's dealings with the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The scrape names the bytes on its image (`Media::keep`, first half).
    Name,
    /// The scrape stores them unless they are there (`Media::keep`, second half).
    Store,
    /// The janitor looks for living images naming them.
    Look,
    /// The janitor deletes them, if its look found none.
    Delete,
    /// The janitor looks again after deleting, and makes those images forget them.
    Relook,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_janitor_and_a_scrape_keeping_the_same_bytes_never_leave_an_image_without_them() {
    use Step::*;
    use cova_storage::repo::media::{find, forget_content, key_in_use, set_content};
    let app = spawn_app().await;
    let account = app.account().await;
    let media = &app.backends.media;
    let store = media.store();
    let bytes = bytes::Bytes::from(cova_sim::cdn::image_bytes("shared"));
    let key = store.prepare(bytes.clone()).expect("an image").stored.key;
    // Every order of the scrape's two steps among the janitor's three (the same calls as
    // `Media::keep` and `catalog::purge_expired` make, in the order each makes them).
    let scrape = [Name, Store];
    let janitor = [Look, Delete, Relook];
    let mut orders = Vec::new();
    for a in 0..5 {
        for b in a + 1..5 {
            let (mut s, mut j) = (scrape.iter(), janitor.iter());
            orders.push(
                (0..5)
                    .map(|i| if i == a || i == b { *s.next().expect("s") } else { *j.next().expect("j") })
                    .collect::<Vec<_>>(),
            );
        }
    }
    for (n, order) in orders.iter().enumerate() {
        let now = app.now();
        // The bytes are there, held by nobody living (an image whose life just ended).
        store.put(bytes.clone()).await.expect("stored");
        let image = image(&app, &account.id, &format!("image:{n}:0"), now + 86_400_000).await;
        let prepared = || store.prepare(bytes.clone()).expect("an image");
        let mut unused = false;
        for step in order {
            match step {
                Name => set_content(app.db(), &image, &key, "image/png", bytes.len() as i64, now).await.expect("name"),
                Store => {
                    store.keep(prepared()).await.expect("store");
                }
                Look => unused = !key_in_use(app.db(), &key, now).await.expect("look"),
                Delete if unused => store.delete(&key).await.expect("delete"),
                Delete => {}
                Relook => {
                    if unused && key_in_use(app.db(), &key, now).await.expect("relook") {
                        forget_content(app.db(), &key).await.expect("forget");
                    }
                }
            }
        }
        let row = find(app.db(), &account.id, &image, now).await.expect("db").expect("row");
        let there = store.size(&key).await.is_ok();
        assert!(row.content_key.is_none() || there, "{order:?}: the image names bytes that are gone");
        // Clean up for the next order: the image forgets them, and the bytes go.
        forget_content(app.db(), &key).await.expect("forget");
        let _ = store.delete(&key).await;
    }
    app.stop().await;
}
