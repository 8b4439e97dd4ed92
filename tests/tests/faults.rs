//! Backends that fail while cova works: connections cut under running jobs, backends that
//! refuse connections. Networked backends only (the embedded ones have no connection to cut).

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_tests::proxy::{Proxy, through, upstream_of};
use cova_tests::{QUEUE_URL_VAR, spawn_app_with_sim};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cutting_the_broker_connection_loses_no_job_and_charges_once() {
    let Ok(queue_url) = std::env::var(QUEUE_URL_VAR) else {
        eprintln!("{QUEUE_URL_VAR} is not set: the in-process queue has no connection to cut");
        return;
    };
    let proxy = Proxy::spawn(upstream_of(&queue_url)).await;
    let via_proxy = through(&queue_url, &proxy);
    let sim = SimConfig { latency_ms: 40, ..SimConfig::default() };
    let app = spawn_app_with_sim(sim, |c| {
        c.queue.url = via_proxy;
        c.scraper.lease_ms = 2_000;
        c.scraper.retry_base_ms = 100;
    })
    .await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 20_000).await;
    let client = app.client(Some(&token));
    let sizes = [60u64, 90, 120];
    let mut jobs = Vec::new();
    for n in sizes {
        let url = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, n));
        jobs.push(client.analyze(&url, None).await.ok()["job_id"].as_str().expect("id").to_owned());
    }
    // Cut every broker connection twice while the jobs run, then once while it refuses.
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.cut();
    }
    proxy.refuse(true);
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.refuse(false);
    // A job created while the broker was away is published once it returns.
    let late = format!("https://www.tiktok.com/@a/video/{}", tiktok_post_id(TikTokScenario::Normal, 30));
    jobs.push(client.analyze(&late, None).await.ok()["job_id"].as_str().expect("id").to_owned());

    let mut total = 0;
    for job_id in &jobs {
        let done = client.wait_job(job_id).await;
        assert_eq!(done["status"], "complete", "{done}");
        total += done["result"]["comments_total"].as_i64().expect("total");
    }
    assert_eq!(total, 60 + 90 + 120 + 30);
    let usage = client.usage().await.ok();
    assert_eq!((usage.comments.used, usage.comments.reserved), (total, 0), "each job charged exactly once");
    app.stop().await;
}
