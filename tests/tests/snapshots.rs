//! The request path reads copies of account and job state kept in the cache (the quota
//! headers, `/usage`, a job's poll). These scenarios prove the copies follow every change at
//! once: a balance held, granted, charged; a token created or revoked; a job started, finished,
//! or released by a later scrape; and, on Redis, a change made by another process.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::{CACHE_URL_VAR, real_backend, spawn_app, spawn_app_with_sim, tiktok_url};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_headers_and_usage_follow_every_change_at_once() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    // Read once, so that every later answer comes from the copy.
    let usage = client.usage().await.ok();
    assert_eq!((usage.comments.remaining, usage.concurrency.running, usage.tokens.active), (1_000, 0, 1));

    // A job held for: its answer and every later one show the hold.
    app.sim.pause();
    let created = client.analyze(&tiktok_url(tiktok_post_id(TikTokScenario::Normal, 40)), None).await;
    assert_eq!(created.status, 202);
    let remaining_after_hold = created.header_u64("x-quota-remaining").expect("quota header");
    assert!(remaining_after_hold < 1_000, "the hold shows at once: {remaining_after_hold}");
    let job_id = created.ok()["job_id"].as_str().expect("id").to_owned();
    let usage = client.usage().await.ok();
    assert_eq!(usage.comments.remaining as u64, remaining_after_hold);
    assert_eq!(usage.concurrency.running, 1);
    let poll = client.job(&job_id).await;
    assert_eq!(poll.header_u64("x-quota-remaining"), Some(remaining_after_hold));
    assert_ne!(poll.ok()["status"], "complete");

    // A pack granted and a token created and revoked, each visible in the next answer.
    app.grant(&account, 500).await;
    let second = app.token(&account, "metadata:read").await;
    let usage = client.usage().await.ok();
    assert_eq!(usage.comments.limit, 1_500);
    assert_eq!(usage.tokens.active, 2);
    let revoked = cova_storage::repo::tokens::revoke_by_prefix(app.db(), &account.id, &second[..13], app.now())
        .await
        .expect("revoke");
    assert_eq!(revoked, 1);
    assert_eq!(client.usage().await.ok().tokens.active, 1);

    // The job ends: the first poll that says so shows the charge, and nothing runs any more.
    app.sim.resume();
    let done = client.wait_job(&job_id).await;
    assert_eq!(done["status"], "complete", "{done}");
    let poll = client.job(&job_id).await;
    assert_eq!(poll.header_u64("x-quota-remaining"), Some(1_500 - 40));
    let usage = client.usage().await.ok();
    assert_eq!((usage.comments.used, usage.comments.reserved, usage.concurrency.running), (40, 0, 0));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_result_is_released_at_once_by_a_later_scrape() {
    let app = spawn_app().await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    let id = tiktok_post_id(TikTokScenario::Normal, 12);
    let first = client.collect(id).await;
    let first_id = first["job_id"].as_str().expect("id").to_owned();
    let poll = client.job(&format!("{first_id}?limit=1")).await.ok();
    assert_eq!(poll["result"]["released"], false);
    assert_eq!(poll["result"]["comments"].as_array().map(Vec::len), Some(1));
    // The first page, kept once rendered, is the result's first page.
    let whole = client.job(&first_id).await.ok();
    for limit in [1, 2] {
        let page = client.job(&format!("{first_id}?limit={limit}")).await.ok();
        let kept = client.job(&format!("{first_id}?limit={limit}")).await.ok();
        assert_eq!(page, kept);
        let all = whole["result"]["comments"].as_array().expect("comments");
        assert_eq!(page["result"]["comments"].as_array().map(Vec::as_slice), all.get(..limit));
        let next = page["result"]["next_cursor"].as_str().expect("a next page");
        let rest = client.job(&format!("{first_id}?limit=100&cursor={next}")).await.ok();
        assert_eq!(rest["result"]["comments"].get(0), all.get(limit), "{rest}");
    }

    let refresh = client.refresh(&format!("tiktok:{id}")).await.ok();
    let second = client.wait_job(refresh["job_id"].as_str().expect("id")).await;
    assert_eq!(second["status"], "complete", "{second}");
    // The copy of the first job changed with the commit that released its comments.
    let poll = client.job(&format!("{first_id}?limit=1")).await.ok();
    assert_eq!(poll["result"]["released"], true, "{poll}");
    assert_eq!(poll["result"]["comments"].as_array().map(Vec::len), Some(0));
    app.stop().await;
}

/// A pack granted by another process (as `cova admin packs grant` does) shows in the next
/// answer of the gateway, through the shared cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: run with make test-real"]
async fn a_change_made_by_another_process_shows_at_once() {
    let cache_url = real_backend(CACHE_URL_VAR);
    let app = spawn_app_with_sim(SimConfig::default(), |c| c.cache.url = cache_url).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 100).await;
    let client = app.client(Some(&token));
    assert_eq!(client.usage().await.ok().comments.limit, 100);
    // Another process: its own pool on the same database, its own cache client.
    let other = cova_storage::Db::connect(&app.config.database).expect("database");
    cova_runtime::Backends::refresh_shared_snapshots(&other, &app.config).expect("cache");
    cova_storage::repo::balances::grant(&other, &account.id, 250, "elsewhere", app.now()).await.expect("grant");
    let reply = client.usage().await;
    assert_eq!(reply.header_u64("x-quota-limit"), Some(350));
    assert_eq!(reply.ok().comments.limit, 350);
    app.stop().await;
}
