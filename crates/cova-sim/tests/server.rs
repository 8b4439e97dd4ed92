//! The simulator's own HTTP surface.

use cova_sim::{
    RecordedRequest, SimConfig, TikTokScenario, YouTubeScenario, short_code, tiktok_post_id, youtube_video_id,
};
use serde_json::Value;

fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

#[tokio::test]
async fn records_requests_and_serves_the_control_endpoints() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("starts");
    let c = client();
    let id = tiktok_post_id(TikTokScenario::Normal, 20);
    let resp = c
        .get(format!("{}/api/comment/list/?aid=1988&aweme_id={id}&cursor=0&count=50", sim.base_url()))
        .header("cookie", "msToken=abc")
        .header("x-custom", "1")
        .send()
        .await
        .expect("request");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["status_code"], 0);
    assert_eq!(body["total"], 20);
    let recorded = sim.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].path, "/api/comment/list/");
    assert_eq!(recorded[0].param("aweme_id"), Some(id.to_string().as_str()));
    assert_eq!(recorded[0].header("cookie"), Some("msToken=abc"));
    assert_eq!(recorded[0].header("x-custom"), Some("1"));

    let listed: Vec<RecordedRequest> =
        c.get(format!("{}/__sim/requests", sim.base_url())).send().await.expect("list").json().await.expect("json");
    assert_eq!(listed, recorded, "control endpoints are not recorded themselves");
    c.delete(format!("{}/__sim/requests", sim.base_url())).send().await.expect("clear");
    assert!(sim.requests().is_empty());

    let truth: Value = c
        .get(format!("{}/__sim/post/tiktok/{id}", sim.base_url()))
        .send()
        .await
        .expect("truth")
        .json()
        .await
        .expect("json");
    assert_eq!(truth["id"], id.to_string());
    assert_eq!(truth["metadata"]["comments"], 20);
}

#[tokio::test]
async fn short_links_redirect_with_tracking_or_home() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("starts");
    let c = client();
    let id = tiktok_post_id(TikTokScenario::Photo, 3);
    let resp = c.head(format!("{}/{}/", sim.base_url(), short_code(id, true))).send().await.expect("head");
    assert_eq!(resp.status(), 301);
    let location = resp.headers()["location"].to_str().expect("ascii");
    assert!(location.contains(&format!("/photo/{id}?")) && location.contains("_r=1"), "{location}");
    let resp = c.get(format!("{}/t/ZZnothing/", sim.base_url())).send().await.expect("get");
    assert_eq!(resp.headers()["location"].to_str().expect("ascii"), format!("{}/", sim.base_url()));
    let resp = c.get(format!("{}/embed/v2/{id}", sim.base_url())).send().await.expect("embed");
    assert_eq!(resp.status(), 301);
}

#[tokio::test]
async fn cdn_serves_real_images_behind_signed_expiring_links() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("starts");
    let post = sim.expected_post(&tiktok_post_id(TikTokScenario::Normal, 10).to_string());
    let link = post.metadata.cover_urls[0].clone();
    assert!(link.contains("x-expires=") && link.contains("x-signature="), "{link}");
    let resp = client().get(&link).send().await.expect("image");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "image/png");
    let bytes = resp.bytes().await.expect("body");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(bytes.as_ref(), cova_sim::cdn::image_bytes(&format!("cover-{}.png", post.id)).as_slice());
    let unsigned = link.split('?').next().expect("path").to_owned();
    let tampered = link.replace("x-expires=", "x-expires=9");
    for bad in [unsigned, tampered] {
        assert_eq!(client().get(&bad).send().await.expect("request").status(), 403, "{bad}");
    }
    sim.expire_cdn_links();
    assert_eq!(client().get(&link).send().await.expect("request").status(), 403, "expired");
    let fresh = sim.expected_post(&post.id).metadata.cover_urls[0].clone();
    assert_ne!(fresh, link);
    assert_eq!(client().get(&fresh).send().await.expect("request").status(), 200, "posts read later carry fresh links");
}

#[tokio::test]
async fn youtube_checks_the_key_and_pages() {
    let sim = cova_sim::spawn(SimConfig { seed: 3, ..SimConfig::default() }).await.expect("starts");
    let c = client();
    let video = youtube_video_id(YouTubeScenario::Normal, 250);
    let url = |key: &str, token: &str| {
        format!(
            "{}/youtube/v3/commentThreads?part=snippet,replies&videoId={video}&maxResults=100&key={key}{token}",
            sim.base_url()
        )
    };
    let resp = c.get(url("nope", "")).send().await.expect("request");
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["error"]["errors"][0]["reason"], "keyInvalid");
    let page: Value = c.get(url("sim-key", "")).send().await.expect("request").json().await.expect("json");
    assert_eq!(page["items"].as_array().map(Vec::len), Some(100));
    let token = page["nextPageToken"].as_str().expect("next page");
    let page2: Value = c
        .get(url("sim-key", &format!("&pageToken={token}")))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_ne!(page2["items"][0]["id"], page["items"][0]["id"]);
    let disabled = youtube_video_id(YouTubeScenario::CommentsDisabled, 5);
    let resp = c
        .get(format!("{}/youtube/v3/commentThreads?videoId={disabled}&key=sim-key", sim.base_url()))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), 403);
}

#[tokio::test]
async fn stop_shuts_the_server_down() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("starts");
    let base = sim.base_url().to_string();
    assert!(client().get(format!("{base}/")).send().await.is_ok());
    sim.stop().await;
    assert!(client().get(format!("{base}/")).send().await.is_err());
}
