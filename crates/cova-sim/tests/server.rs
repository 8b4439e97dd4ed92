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

type Hooks = std::sync::Mutex<Vec<(String, String)>>;

/// A webhook receiver that keeps each request's `Stripe-Signature` and body.
async fn receive_hook(
    req: actix_web::HttpRequest,
    body: actix_web::web::Bytes,
    hooks: actix_web::web::Data<Hooks>,
) -> actix_web::HttpResponse {
    let signature = req.headers().get("stripe-signature").and_then(|v| v.to_str().ok()).unwrap_or_default();
    hooks.lock().expect("lock").push((signature.to_owned(), String::from_utf8_lossy(&body).into_owned()));
    actix_web::HttpResponse::Ok().finish()
}

/// Starts a receiver; its URL and what it received.
fn hook_receiver() -> (String, actix_web::web::Data<Hooks>) {
    let hooks = actix_web::web::Data::new(Hooks::default());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let data = hooks.clone();
    let server = actix_web::HttpServer::new(move || {
        actix_web::App::new().app_data(data.clone()).route("/hook", actix_web::web::post().to(receive_hook))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .expect("listen")
    .run();
    tokio::spawn(server);
    (url, hooks)
}

fn verify_signature(header: &str, body: &str) -> bool {
    let Some((t, v1)) = header.strip_prefix("t=").and_then(|h| h.split_once(",v1=")) else { return false };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, cova_sim::PAYMENTS_WEBHOOK_SECRET.as_bytes());
    let tag = hex::decode(v1).unwrap_or_default();
    ring::hmac::verify(&key, format!("{t}.{body}").as_bytes(), &tag).is_ok()
}

#[tokio::test]
async fn checkout_sends_a_signed_webhook_before_redirecting() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("starts");
    let (hook, hooks) = hook_receiver();
    sim.set_payments_webhook(&hook);
    let c = client();
    let sessions = format!("{}/v1/checkout/sessions", sim.payments_base_url());
    let form = [
        ("mode", "payment"),
        ("success_url", "https://cova.test/billing/done?session={CHECKOUT_SESSION_ID}"),
        ("cancel_url", "https://cova.test/billing"),
        ("client_reference_id", "ws_1"),
        ("line_items[0][quantity]", "1"),
        ("line_items[0][price_data][currency]", "eur"),
        ("line_items[0][price_data][unit_amount]", "1990"),
        ("line_items[0][price_data][product_data][name]", "1,000 credits"),
        ("metadata[workspace_id]", "ws_1"),
        ("metadata[credits]", "1000"),
    ];
    let resp = c.post(&sessions).bearer_auth("sk_wrong").form(&form).send().await.expect("create");
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let resp = c
        .post(&sessions)
        .bearer_auth(cova_sim::PAYMENTS_SECRET_KEY)
        .form(&form[1..].iter().filter(|(k, _)| *k != "success_url").collect::<Vec<_>>())
        .send()
        .await
        .expect("create");
    assert_eq!(resp.status(), 400);

    let session: Value = c
        .post(&sessions)
        .bearer_auth(cova_sim::PAYMENTS_SECRET_KEY)
        .form(&form)
        .send()
        .await
        .expect("create")
        .json()
        .await
        .expect("json");
    let id = session["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("cs_test_"), "{id}");
    assert_eq!(session["object"], "checkout.session");
    assert_eq!(session["payment_status"], "unpaid");
    assert_eq!(session["amount_total"], 1990);
    assert_eq!(session["metadata"]["credits"], "1000");
    let url = session["url"].as_str().expect("url");
    assert_eq!(url, format!("{}/pay/checkout/{id}", sim.base_url()));
    let page = c.get(url).send().await.expect("page").text().await.expect("html");
    assert!(page.contains("<title>cova-sim checkout</title>") && page.contains("19.90 EUR"), "{page}");
    assert!(page.contains(&format!("action=\"/pay/checkout/{id}/pay\"")) && page.contains("id=\"pay\""), "{page}");
    assert_eq!(
        c.get(format!("{}/pay/checkout/cs_test_nope", sim.base_url())).send().await.expect("page").status(),
        404
    );

    let resp = c.post(format!("{url}/pay")).send().await.expect("pay");
    assert_eq!(resp.status(), 303);
    assert_eq!(resp.headers()["location"], format!("https://cova.test/billing/done?session={id}").as_str());
    // The webhook was answered before the redirect.
    let received = hooks.lock().expect("lock").clone();
    assert_eq!(received.len(), 1);
    let (signature, body) = &received[0];
    assert!(verify_signature(signature, body), "{signature}");
    let event: Value = serde_json::from_str(body).expect("event");
    assert_eq!(event["type"], "checkout.session.completed");
    assert_eq!(event["data"]["object"]["id"], id.as_str());
    assert_eq!(event["data"]["object"]["payment_status"], "paid");
    assert_eq!(event["data"]["object"]["status"], "complete");
    assert_eq!(event["data"]["object"]["client_reference_id"], "ws_1");
    let events = sim.payment_events();
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].session_id.as_str(), events[0].status), (id.as_str(), Some(200)));
    assert_eq!(events[0].body, *body);

    // Paying again only redirects.
    assert_eq!(c.post(format!("{url}/pay")).send().await.expect("pay").status(), 303);
    assert_eq!(sim.payment_events().len(), 1);
    assert_eq!(hooks.lock().expect("lock").len(), 1);

    assert_eq!(sim.replay_payment_event(&events[0].id).await, Some(200));
    let received = hooks.lock().expect("lock").clone();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].1, *body, "a replay repeats the same event");
    assert!(verify_signature(&received[1].0, &received[1].1));
    assert_eq!(sim.replay_payment_event("evt_unknown").await, None);
    assert_eq!(sim.checkout_sessions()[0]["payment_status"], "paid");
}

#[tokio::test]
async fn smtp_receiver_keeps_mail_for_wait_for_mail() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("starts");
    assert_eq!(sim.smtp_url(), format!("smtp://{}", sim.smtp_addr()));
    let mut stream = tokio::net::TcpStream::connect(sim.smtp_addr()).await.expect("connect");
    // Sent in one go: the receiver answers the commands in order.
    let dialogue = "EHLO test\r\nMAIL FROM:<cova@cova.test>\r\nRCPT TO:<ann@example.com>\r\nDATA\r\n\
                    Subject: Welcome\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nHi =E2=9C=93\r\n.\r\nQUIT\r\n";
    stream.write_all(dialogue.as_bytes()).await.expect("write");
    let mut replies = String::new();
    stream.read_to_string(&mut replies).await.expect("replies");
    assert!(
        replies.starts_with("220 ") && replies.contains("354 ") && replies.ends_with("221 2.0.0 Bye\r\n"),
        "{replies}"
    );
    let mail = sim.wait_for_mail("Ann@Example.com", std::time::Duration::from_secs(5)).await.expect("mail");
    assert_eq!(mail.subject(), "Welcome");
    assert_eq!(mail.body_text(), "Hi ✓\r\n");
    assert_eq!(sim.mails().len(), 1);
    assert!(sim.wait_for_mail("nobody@example.com", std::time::Duration::from_millis(100)).await.is_none());
}

#[tokio::test]
async fn histories_keep_only_the_newest_entries() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sim = cova_sim::spawn(SimConfig { history: 3, ..SimConfig::default() }).await.expect("starts");
    let c = client();
    let ids: Vec<u64> = (1..=5).map(|n| tiktok_post_id(TikTokScenario::Normal, n)).collect();
    for id in &ids {
        c.get(format!("{}/@sim/video/{id}", sim.base_url())).send().await.expect("post page");
    }
    let paths: Vec<String> = sim.requests().into_iter().map(|r| r.path).collect();
    let newest: Vec<String> = ids[2..].iter().map(|id| format!("/@sim/video/{id}")).collect();
    assert_eq!(paths, newest, "the oldest two are dropped, the order kept");
    let listed: Vec<RecordedRequest> =
        c.get(format!("{}/__sim/requests", sim.base_url())).send().await.expect("list").json().await.expect("json");
    assert_eq!(listed.into_iter().map(|r| r.path).collect::<Vec<_>>(), newest);

    // Telegram's message ids keep counting past the bound.
    let mut message_ids = Vec::new();
    for n in 1..=4 {
        let sent: Value = c
            .post(format!("{}/botT/sendMessage", sim.base_url()))
            .json(&serde_json::json!({"chat_id": 7, "text": format!("m{n}")}))
            .send()
            .await
            .expect("send")
            .json()
            .await
            .expect("json");
        message_ids.push(sent["result"]["message_id"].as_u64().expect("message id"));
    }
    assert_eq!(message_ids, [1, 2, 3, 4]);
    let texts: Vec<String> = sim.telegram_messages().into_iter().map(|m| m.text).collect();
    assert_eq!(texts, ["m2", "m3", "m4"]);

    let mut stream = tokio::net::TcpStream::connect(sim.smtp_addr()).await.expect("connect");
    let mut dialogue = String::from("EHLO test\r\n");
    for n in 1..=5 {
        dialogue += &format!(
            "MAIL FROM:<cova@cova.test>\r\nRCPT TO:<ann@example.com>\r\nDATA\r\nSubject: s{n}\r\n\r\nhi\r\n.\r\n"
        );
    }
    dialogue += "QUIT\r\n";
    stream.write_all(dialogue.as_bytes()).await.expect("write");
    let mut replies = String::new();
    stream.read_to_string(&mut replies).await.expect("replies");
    assert_eq!(replies.matches("250 2.0.0 Ok: queued").count(), 5, "{replies}");
    let subjects: Vec<String> = sim.mails().iter().map(cova_sim::SentMail::subject).collect();
    assert_eq!(subjects, ["s3", "s4", "s5"]);
    let newest = sim.wait_for_mail("ann@example.com", std::time::Duration::from_secs(1)).await.expect("mail");
    assert_eq!(newest.subject(), "s5");
}
