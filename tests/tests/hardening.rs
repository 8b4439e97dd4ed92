//! What an outside review found and what must stay fixed: e-mailed links that outlive their
//! successor, payments granted without checking the amount, passwords typed another way,
//! answers a browser could sniff as another type.

use cova_storage::repo::{accounts, balances};
use cova_tests::workspace::{Browser, PASSWORD, link_token, mailed_link, signed_in};
use cova_tests::{TestApp, spawn_app_with};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn app() -> TestApp {
    spawn_app_with(|c| {
        c.auth.token_cache_ms = 0;
    })
    .await
}

async fn ask_reset(app: &TestApp, email: &str) -> String {
    app.sim.clear_mails();
    let (status, _) = Browser::new(app).call(Method::POST, "/api/v1/auth/reset", Some(json!({"email": email}))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    link_token(&mailed_link(app, email, "reset").await)
}

async fn set_password(app: &TestApp, token: &str, password: &str) -> (StatusCode, Value) {
    Browser::new(app)
        .call(Method::POST, "/api/v1/auth/reset/confirm", Some(json!({"token": token, "password": password})))
        .await
}

#[tokio::test]
async fn using_an_e_mailed_link_voids_every_other_link_of_the_account() {
    let app = app().await;
    let email = "ria@example.com";
    // Signed up, not yet confirmed: its confirmation link is outstanding.
    let (status, _) = Browser::new(&app)
        .call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": email, "password": PASSWORD})))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let confirm = link_token(&mailed_link(&app, email, "confirm").await);
    let older = ask_reset(&app, email).await;
    let newer = ask_reset(&app, email).await;
    assert_ne!(older, newer);

    let (status, body) = set_password(&app, &newer, "the newest passphrase").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = set_password(&app, &older, "an attacker's passphrase").await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")), "{body}");
    let (status, body) =
        Browser::new(&app).call(Method::POST, "/api/v1/auth/confirm", Some(json!({"token": confirm}))).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")), "{body}");
    Browser::new(&app).login(email, "the newest passphrase").await;

    // A new link after the change works once, and the one before it no more.
    let first = ask_reset(&app, email).await;
    let second = ask_reset(&app, email).await;
    assert_eq!(set_password(&app, &first, "yet another passphrase").await.0, StatusCode::OK);
    assert_eq!(set_password(&app, &second, "and one more passphrase").await.0, StatusCode::BAD_REQUEST);
    app.stop().await;
}

#[tokio::test]
async fn passwords_are_compared_in_their_normal_form_and_control_characters_are_refused() {
    let app = app().await;
    let browser = Browser::new(&app);
    for (password, why) in [
        ("１２３４５６７８９０", "fullwidth digits are the breached 1234567890"),
        ("a long pass\u{0}phrase", "a NUL byte"),
        ("a long pass\nphrase", "a line break"),
    ] {
        let (status, body) = browser
            .call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": "nfkc@example.com", "password": password})))
            .await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")), "{why}");
    }
    // Typed with fullwidth digits at sign-up, ASCII digits at login: the same password.
    let email = "nfkc@example.com";
    let (status, _) = browser
        .call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": email, "password": "river stone ２０２６"})))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    Browser::new(&app).login(email, "river stone 2026").await;
    app.stop().await;
}

/// A correctly signed `checkout.session.completed` for `checkout`, paying `amount` `currency`.
async fn paid_event(app: &TestApp, checkout: &str, amount: i64, currency: &str) -> StatusCode {
    let body = json!({
        "id": format!("evt_forged_{amount}_{currency}"),
        "object": "event",
        "type": "checkout.session.completed",
        "data": {"object": {
            "id": checkout, "object": "checkout.session", "payment_status": "paid", "status": "complete",
            "amount_total": amount, "currency": currency,
        }},
    })
    .to_string();
    let signature = cova_sim::payments_signature_header(app.now() / 1000, &body);
    reqwest::Client::new()
        .post(format!("{}/api/v1/billing/webhook", app.base_url))
        .header("stripe-signature", signature)
        .body(body)
        .send()
        .await
        .expect("sent")
        .status()
}

#[tokio::test]
async fn a_payment_grants_its_pack_only_for_the_checkouts_amount_and_currency() {
    let app = app().await;
    let email = "pay@example.com";
    let browser = signed_in(&app, email).await;
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    let granted = || async { balances::current(app.db(), &account.id, app.now()).await.expect("balance").granted };
    let (_, packs) = browser.call(Method::GET, "/api/v1/billing/packs", None).await;
    let price = |id: &str| {
        packs["packs"].as_array().expect("packs").iter().find(|p| p["id"] == id).expect("pack")["price"].clone()
    };
    let (status, big) = browser.call(Method::POST, "/api/v1/billing/checkout", Some(json!({"pack": "50k"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{big}");
    let big_id = big["checkout_id"].as_str().expect("id");
    let (_, small) = browser.call(Method::POST, "/api/v1/billing/checkout", Some(json!({"pack": "2k"}))).await;
    let small_id = small["checkout_id"].as_str().expect("id");
    let small_amount = price("2k")["amount"].as_i64().expect("amount");

    // Signed by the provider's key, but not what the checkout costs: acknowledged, nothing granted.
    assert_eq!(paid_event(&app, big_id, 1, "usd").await, StatusCode::OK);
    assert_eq!(paid_event(&app, small_id, small_amount, "jpy").await, StatusCode::OK);
    assert_eq!(granted().await, 0);
    let (_, purchases) = browser.call(Method::GET, "/api/v1/billing/purchases", None).await;
    let statuses: Vec<&str> =
        purchases["purchases"].as_array().expect("list").iter().filter_map(|p| p["status"].as_str()).collect();
    assert_eq!(statuses, ["review", "review"], "{purchases}");

    // The real payment of the small checkout still grants it, once.
    let pay = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let res = pay.post(format!("{}/pay", small["url"].as_str().expect("url"))).send().await.expect("pay");
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(granted().await, 2_000);
    assert_eq!(paid_event(&app, small_id, small_amount, "usd").await, StatusCode::OK);
    assert_eq!(granted().await, 2_000, "a paid checkout is never granted twice");
    app.stop().await;
}

#[tokio::test]
async fn every_answer_says_nosniff_and_the_reference_page_runs_only_its_own_script() {
    let app = app().await;
    let http = reqwest::Client::new();
    for (path, status) in [
        ("/api/v1/usage", 401),
        ("/api/v1/nope", 404),
        ("/healthz", 200),
        ("/api/v1/openapi.json", 200),
        ("/", 200),
        ("/docs", 200),
    ] {
        let res = http.get(format!("{}{path}", app.base_url)).send().await.expect("answer");
        assert_eq!(res.status().as_u16(), status, "{path}");
        assert_eq!(
            res.headers().get("x-content-type-options").and_then(|v| v.to_str().ok()),
            Some("nosniff"),
            "{path}"
        );
    }
    let (account, token) = app.integrator().await;
    app.grant(&account, 10).await;
    let res = http.get(format!("{}/api/v1/usage", app.base_url)).bearer_auth(&token).send().await.expect("usage");
    assert_eq!(res.headers().get("x-content-type-options").and_then(|v| v.to_str().ok()), Some("nosniff"));

    let docs = http.get(format!("{}/docs", app.base_url)).send().await.expect("docs");
    let header = |name: &str| docs.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let csp = header("content-security-policy");
    assert!(!csp.contains("unsafe-inline") && csp.contains("script-src 'sha256-"), "{csp}");
    assert_eq!(header("referrer-policy"), "no-referrer");
    app.stop().await;
}

#[tokio::test]
async fn the_workspace_page_answers_head_like_get_without_a_body() {
    let app = app().await;
    let http = reqwest::Client::new();
    let get = http.get(format!("{}/", app.base_url)).send().await.expect("GET /");
    let get_type = get.headers().get("content-type").cloned();
    assert_eq!(get.status(), StatusCode::OK);
    assert!(get.text().await.expect("page").contains("<html"), "GET / is the workspace page");

    let head = http.head(format!("{}/", app.base_url)).send().await.expect("HEAD /");
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(head.headers().get("content-type").cloned(), get_type);
    assert!(head.text().await.expect("no body").is_empty(), "HEAD / carries no body");

    // Other methods are still refused with the catalogue's answer.
    let post = http.post(format!("{}/", app.base_url)).send().await.expect("POST /");
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
    let body: Value = post.json().await.expect("error body");
    assert!(body["code"].is_string() && body["detail"].is_string(), "{body}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_janitor_purges_quotes_links_and_sessions_a_day_after_they_ended() {
    use cova_storage::repo::{email_links, sessions};
    use cova_storage::schema;
    use diesel::prelude::*;
    let (app, clock) = cova_tests::spawn_on_clock("2026-11-25T12:00:00Z", |_| {}).await;
    let (account, token) = app.integrator().await;
    app.grant(&account, 1_000).await;
    let client = app.client(Some(&token));
    client.collect(cova_sim::tiktok_post_id(cova_sim::TikTokScenario::Normal, 5)).await;
    let quote = client
        .post_json(
            "/api/v1/ai/quote",
            json!({"ref": format!("tiktok:{}", cova_sim::tiktok_post_id(cova_sim::TikTokScenario::Normal, 5))}),
        )
        .await
        .ok();
    assert!(quote["quote_id"].is_string(), "{quote}");
    let hour = 3_600_000;
    email_links::issue(app.db(), &account.id, email_links::Purpose::Reset, hour, app.now()).await.expect("link");
    let life = sessions::Lifetime { idle_ms: hour, max_ms: 2 * hour };
    sessions::open(app.db(), &account.id, life, app.now()).await.expect("session");
    let counts = || async {
        let mut conn = app.db().conn().await.expect("conn");
        let mut tx = conn.tx();
        let quotes: i64 = tx.get_result(schema::ai_quotes::table.count()).await.expect("quotes");
        let links: i64 = tx.get_result(schema::email_links::table.count()).await.expect("links");
        let sessions: i64 = tx.get_result(schema::sessions::table.count()).await.expect("sessions");
        (quotes, links, sessions)
    };
    assert_eq!(counts().await, (1, 1, 1));
    // Three days later all three ended more than a day ago; what is made now stays.
    clock.advance(std::time::Duration::from_secs(3 * 86_400));
    email_links::issue(app.db(), &account.id, email_links::Purpose::Reset, hour, app.now()).await.expect("link");
    cova_tests::eventually("the janitor's tick", async || counts().await == (0, 1, 0)).await;
    app.stop().await;
}

#[tokio::test]
async fn a_checkout_the_provider_refuses_is_a_502_with_its_reason() {
    let app = spawn_app_with(|c| {
        c.billing.packs[0].currency = "xyz".into();
    })
    .await;
    let browser = signed_in(&app, "refused@example.com").await;
    let (status, body) = browser.call(Method::POST, "/api/v1/billing/checkout", Some(json!({"pack": "2k"}))).await;
    assert_eq!((status.as_u16(), body["code"].as_str()), (502, Some("payment_refused")), "{body}");
    assert!(body["detail"].as_str().unwrap_or_default().contains("Invalid currency: xyz"), "{body}");
    let (_, purchases) = browser.call(Method::GET, "/api/v1/billing/purchases", None).await;
    assert_eq!(purchases["purchases"], json!([]), "nothing recorded");
    app.stop().await;
}
