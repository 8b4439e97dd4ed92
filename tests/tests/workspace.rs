//! The workspace over HTTP: sign-up through the e-mailed link, cookie sessions (fixation,
//! rotation, logout, reset), CSRF on every unsafe cookie route, credentialed CORS, the free
//! allowance, tokens, packs paid through the simulator's provider, anonymous metadata.

use cova_sim::{TikTokScenario, tiktok_post_id};
use cova_storage::repo::{accounts, balances, sessions};
use cova_tests::workspace::{Browser, PASSWORD, link_token, mailed_link, set_cookie_value, signed_in, signed_up};
use cova_tests::{Client, TestApp, spawn_app_with};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn post(comments: u64) -> String {
    format!("https://www.tiktok.com/@someone/video/{}", tiktok_post_id(TikTokScenario::Normal, comments))
}

async fn app() -> TestApp {
    spawn_app_with(|c| {
        c.auth.token_cache_ms = 0;
        c.billing.free_allowance = 100;
        c.workspace.allowed_origins = vec!["https://partner.example.com".into()];
    })
    .await
}

#[tokio::test]
async fn sign_up_confirm_log_in_and_out() {
    let app = app().await;
    let email = "ana@example.com";
    let browser = Browser::new(&app);
    // Weak passwords are refused before anything is stored or sent.
    for weak in ["short", "password1234", "ana.ana.ana@example.com!"] {
        let (status, body) =
            browser.call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": email, "password": weak}))).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")), "{weak}");
    }
    let (status, first) =
        browser.call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": email, "password": PASSWORD}))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let link = mailed_link(&app, email, "confirm").await;

    // A second sign-up answers the same and mails no link: nothing tells who has an account.
    app.sim.clear_mails();
    let (status, again) =
        browser.call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": email, "password": PASSWORD}))).await;
    assert_eq!((status, &again), (StatusCode::ACCEPTED, &first));
    let mail = app.sim.wait_for_mail(email, std::time::Duration::from_secs(10)).await.expect("a mail");
    assert!(mail.subject().contains("already have"), "{}", mail.subject());
    assert!(!mail.body_text().contains("#/confirm/"));

    // Logging in before confirming works (only tokens need the confirmation).
    let mut browser = Browser::new(&app);
    let session = browser.login(email, PASSWORD).await;
    assert_eq!(session["account"]["email_confirmed"], false);
    assert_eq!(session["account"]["free_comments_left"], 100);

    let (status, body) =
        browser.call(Method::POST, "/api/v1/auth/confirm", Some(json!({"token": "x".repeat(43)}))).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")));
    // Confirming is a privilege change: the session's cookie is rotated.
    let before = browser.call(Method::GET, "/api/v1/auth/session", None).await.1;
    let (status, headers, body) = browser
        .send(browser.request(Method::POST, "/api/v1/auth/confirm").json(&json!({"token": link_token(&link)})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(set_cookie_value(&headers).is_some(), "a rotated cookie");
    let (status, body) =
        browser.call(Method::POST, "/api/v1/auth/confirm", Some(json!({"token": link_token(&link)}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a link works once: {body}");
    let (status, after) = browser.call(Method::GET, "/api/v1/auth/session", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(after["account"]["email_confirmed"], true);
    assert_ne!(after["csrf_token"], before["csrf_token"], "the CSRF token rotates with the session");
    browser.csrf = after["csrf_token"].as_str().map(str::to_owned);

    // Same account data as a token, same limits, and the quota counts the free allowance.
    let (status, headers, usage) = browser.send(browser.request(Method::GET, "/api/v1/usage")).await;
    assert_eq!(status, StatusCode::OK, "{usage}");
    assert_eq!(usage["account"]["email"], email);
    assert_eq!(headers["x-quota-remaining"], "100");

    // Logout revokes the session: the cookie value is worthless afterwards, even replayed.
    let (cookie, csrf) = raw_login(&app, email).await;
    let res = reqwest::Client::new()
        .post(format!("{}/api/v1/auth/logout", app.base_url))
        .header("cookie", format!("cova_session={cookie}"))
        .header("x-csrf-token", csrf)
        .header("origin", &app.base_url)
        .send()
        .await
        .expect("logout");
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert!(res.headers()["set-cookie"].to_str().expect("ascii").contains("Max-Age=0"));
    let (status, body) = with_cookie(&app, &cookie, Method::GET, "/api/v1/usage").await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("unauthorized")));
    // The browser's own session is another one, still alive until its logout.
    assert_eq!(browser.call(Method::GET, "/api/v1/usage", None).await.0, StatusCode::OK);
    assert_eq!(browser.call(Method::POST, "/api/v1/auth/logout", None).await.0, StatusCode::NO_CONTENT);
    assert_eq!(browser.call(Method::GET, "/api/v1/usage", None).await.0, StatusCode::UNAUTHORIZED);

    // Wrong password and unknown e-mail answer alike; then the per-address limit bites.
    let stranger = Browser::new(&app);
    let (s1, wrong) = stranger
        .call(Method::POST, "/api/v1/auth/login", Some(json!({"email": email, "password": "nope nope nope"})))
        .await;
    let (s2, unknown) = stranger
        .call(Method::POST, "/api/v1/auth/login", Some(json!({"email": "nobody@example.com", "password": PASSWORD})))
        .await;
    assert_eq!((s1, s2), (StatusCode::UNAUTHORIZED, StatusCode::UNAUTHORIZED));
    assert_eq!(wrong, unknown);
    let mut last = StatusCode::OK;
    for _ in 0..5 {
        let (status, headers, _) = stranger
            .send(
                stranger
                    .request(Method::POST, "/api/v1/auth/login")
                    .json(&json!({"email": email, "password": "nope nope nope"})),
            )
            .await;
        last = status;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(headers.contains_key("retry-after"));
            break;
        }
    }
    assert_eq!(last, StatusCode::TOO_MANY_REQUESTS, "5 attempts per address per 15 minutes");
    app.stop().await;
}

/// Logs in without a cookie jar: the session cookie's value and the CSRF token.
async fn raw_login(app: &TestApp, email: &str) -> (String, String) {
    let res = reqwest::Client::new()
        .post(format!("{}/api/v1/auth/login", app.base_url))
        .json(&json!({"email": email, "password": PASSWORD}))
        .send()
        .await
        .expect("login");
    let cookie = set_cookie_value(res.headers()).expect("session cookie");
    let body: Value = res.json().await.expect("json");
    (cookie, body["csrf_token"].as_str().expect("csrf").to_owned())
}

async fn with_cookie(app: &TestApp, cookie: &str, method: Method, path: &str) -> (StatusCode, Value) {
    let res = reqwest::Client::new()
        .request(method, format!("{}{path}", app.base_url))
        .header("cookie", format!("cova_session={cookie}"))
        .send()
        .await
        .expect("sent");
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn sessions_resist_fixation_and_end_with_logout_and_reset() {
    let app = app().await;
    let email = "bo@example.com";
    signed_up(&app, email).await;
    // A value planted before login is not a session, and login never adopts it.
    let planted = "A".repeat(43);
    assert_eq!(with_cookie(&app, &planted, Method::GET, "/api/v1/usage").await.0, StatusCode::UNAUTHORIZED);
    let res = reqwest::Client::new()
        .post(format!("{}/api/v1/auth/login", app.base_url))
        .header("cookie", format!("cova_session={planted}"))
        .json(&json!({"email": email, "password": PASSWORD}))
        .send()
        .await
        .expect("login");
    let cookie = set_cookie_value(res.headers()).expect("a new cookie");
    assert_ne!(cookie, planted);
    let header = res.headers()["set-cookie"].to_str().expect("ascii").to_owned();
    assert!(header.contains("HttpOnly") && header.contains("SameSite=Lax") && header.contains("Path=/"), "{header}");
    assert!(!header.contains("Secure"), "plain http here: {header}");
    assert_eq!(with_cookie(&app, &cookie, Method::GET, "/api/v1/usage").await.0, StatusCode::OK);

    // A password reset ends every session of the account.
    let mut other = signed_in(&app, "bo2@example.com").await;
    let stranger = Browser::new(&app);
    app.sim.clear_mails();
    let (status, known) = stranger.call(Method::POST, "/api/v1/auth/reset", Some(json!({"email": email}))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, unknown) =
        stranger.call(Method::POST, "/api/v1/auth/reset", Some(json!({"email": "ghost@example.com"}))).await;
    assert_eq!(known, unknown, "the same answer for unknown addresses");
    let token = link_token(&mailed_link(&app, email, "reset").await);
    let (status, body) = stranger
        .call(Method::POST, "/api/v1/auth/reset/confirm", Some(json!({"token": token, "password": "qwerty123456"})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a breached password is refused: {body}");
    let new_password = "a brand new passphrase";
    let (status, body) = stranger
        .call(Method::POST, "/api/v1/auth/reset/confirm", Some(json!({"token": token, "password": new_password})))
        .await;
    assert_eq!(status, StatusCode::OK, "the link survived the refused attempt: {body}");
    assert_eq!(with_cookie(&app, &cookie, Method::GET, "/api/v1/usage").await.0, StatusCode::UNAUTHORIZED);
    let (status, _) =
        stranger.call(Method::POST, "/api/v1/auth/login", Some(json!({"email": email, "password": PASSWORD}))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the old password is gone");
    let mut again = Browser::new(&app);
    again.login(email, new_password).await;
    // Another account's session is untouched.
    other.csrf =
        other.call(Method::GET, "/api/v1/auth/session", None).await.1["csrf_token"].as_str().map(str::to_owned);
    assert_eq!(other.call(Method::GET, "/api/v1/usage", None).await.0, StatusCode::OK);
    app.stop().await;
}

/// Every unsafe route of `/api/v1` an account uses, with a body it would accept.
fn unsafe_routes(r: &str) -> Vec<(Method, String, Value)> {
    vec![
        (Method::POST, "/api/v1/metadata".into(), json!({"url": post(10)})),
        (Method::POST, "/api/v1/analyze".into(), json!({"url": post(10)})),
        (Method::POST, format!("/api/v1/analyses/{r}/save"), json!({})),
        (Method::DELETE, format!("/api/v1/analyses/{r}"), Value::Null),
        (Method::PUT, format!("/api/v1/analyses/{r}/watch"), json!({"enabled": false, "interval_min": 360})),
        (Method::POST, format!("/api/v1/analyses/{r}/refresh"), json!({})),
        (Method::POST, "/api/v1/analyses/save-metadata".into(), json!({"url": post(10)})),
        (Method::POST, "/api/v1/ai/quote".into(), json!({"ref": r})),
        (Method::POST, "/api/v1/ai/run".into(), json!({"quote_id": "q", "consent": true})),
        (Method::PUT, format!("/api/v1/ai/{r}/queries"), json!({"queries": ["where"]})),
        (Method::PUT, "/api/v1/keywords".into(), json!({"keywords": ["x"]})),
        (Method::PUT, "/api/v1/notification-channels".into(), json!({})),
        (Method::POST, "/api/v1/notification-channels/webhook/rotate-secret".into(), json!({})),
        (Method::POST, "/api/v1/notification-channels/test".into(), json!({})),
        (Method::POST, "/api/v1/notification-channels/deliveries/x/replay".into(), json!({})),
        (Method::POST, "/api/v1/tokens".into(), json!({"name": "n", "scopes": ["metadata:read"]})),
        (Method::DELETE, "/api/v1/tokens/x".into(), Value::Null),
        (Method::POST, "/api/v1/billing/checkout".into(), json!({"pack": "2k"})),
        (Method::POST, "/api/v1/auth/logout".into(), Value::Null),
    ]
}

#[tokio::test]
async fn csrf_is_required_on_every_unsafe_cookie_route() {
    let app = app().await;
    let browser = signed_in(&app, "cy@example.com").await;
    let csrf = browser.csrf.clone().expect("csrf");
    let r = format!("tiktok:{}", tiktok_post_id(TikTokScenario::Normal, 10));
    for (method, path, body) in unsafe_routes(&r) {
        let build = |csrf: Option<&str>, origin: &str| {
            let mut req =
                browser.http.request(method.clone(), format!("{}{path}", app.base_url)).header("origin", origin);
            if let Some(c) = csrf {
                req = req.header("x-csrf-token", c);
            }
            if !body.is_null() {
                req = req.json(&body);
            }
            req
        };
        for (csrf, origin, why) in [
            (None, app.base_url.as_str(), "missing token"),
            (Some("wrong"), app.base_url.as_str(), "wrong token"),
            (Some(csrf.as_str()), "https://evil.example.com", "cross-origin"),
            // A listed origin may use the cookie, but still needs the token.
            (None, "https://partner.example.com", "listed origin without token"),
        ] {
            let (status, _, answer) = browser.send(build(csrf, origin)).await;
            assert_eq!(
                (status, answer["code"].as_str()),
                (StatusCode::FORBIDDEN, Some("csrf_failed")),
                "{method} {path}: {why}"
            );
        }
        // Without Origin, a cross-site Sec-Fetch-Site is refused too.
        let req = browser
            .http
            .request(method.clone(), format!("{}{path}", app.base_url))
            .header("x-csrf-token", &csrf)
            .header("sec-fetch-site", "cross-site");
        let (status, _, answer) = browser.send(req).await;
        assert_eq!(
            (status, answer["code"].as_str()),
            (StatusCode::FORBIDDEN, Some("csrf_failed")),
            "{method} {path}: cross-site"
        );
    }
    // With the token and from its own origin, the same request passes the check.
    let (status, body) = browser.call(Method::PUT, "/api/v1/keywords", Some(json!({"keywords": ["x"]}))).await;
    assert_ne!(body["code"], "csrf_failed", "{status} {body}");
    let (status, _) = browser.call(Method::POST, "/api/v1/auth/logout", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    app.stop().await;
}

#[tokio::test]
async fn a_token_beside_the_cookie_wins_and_cors_credentials_only_for_listed_origins() {
    let app = app().await;
    let browser = signed_in(&app, "di@example.com").await;
    let (status, created) = browser
        .call(Method::POST, "/api/v1/tokens", Some(json!({"name": "ci", "scopes": ["analyze:write", "library:write"]})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["token"].as_str().expect("value").to_owned();
    // The session starts a job (free allowance); the token has none: the session endpoint
    // answers for whichever credential is used, and with both, the token's.
    let (status, job) = browser.call(Method::POST, "/api/v1/analyze", Some(json!({"url": post(20)}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let (status, mine) = browser.call(Method::GET, "/api/v1/analyses/session", None).await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(mine["job"]["job_id"], job["job_id"]);
    let both = browser.request(Method::GET, "/api/v1/analyses/session").bearer_auth(&token);
    let (status, _, body) = browser.send(both).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "the token's view: {body}");
    // An unsafe request with a token and the cookie but no CSRF header is the token's: no
    // CSRF check, and no free allowance (another post, so that no deduplication answers).
    let both = browser
        .http
        .post(format!("{}/api/v1/analyze", app.base_url))
        .bearer_auth(&token)
        .json(&json!({"url": post(21)}));
    let (status, _, body) = browser.send(both).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::PAYMENT_REQUIRED, Some("quota_exceeded")),
        "tokens never spend the free allowance"
    );

    let http = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        http.request(Method::OPTIONS, format!("{}/api/v1/usage", app.base_url))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "x-csrf-token, content-type")
            .send()
    };
    let listed = preflight("https://partner.example.com").await.expect("preflight");
    assert_eq!(listed.headers()["access-control-allow-origin"], "https://partner.example.com");
    assert_eq!(listed.headers()["access-control-allow-credentials"], "true");
    let other = preflight("https://elsewhere.example.com").await.expect("preflight");
    assert_eq!(other.headers()["access-control-allow-origin"], "*");
    assert!(!other.headers().contains_key("access-control-allow-credentials"));
    let bearer = Client::new(&app.base_url, Some(&token));
    let (_, headers, _) = bearer
        .raw(bearer.request(Method::GET, "/api/v1/usage").header("origin", "https://elsewhere.example.com"))
        .await;
    assert_eq!(headers["access-control-allow-origin"], "*", "Bearer requests from any origin, without credentials");
    app.stop().await;
}

#[tokio::test]
async fn the_free_allowance_is_spent_only_by_session_jobs() {
    let app = app().await;
    let email = "eve@example.com";
    let browser = signed_in(&app, email).await;
    let (_, created) = browser
        .call(Method::POST, "/api/v1/tokens", Some(json!({"name": "t", "scopes": ["analyze:write", "library:write"]})))
        .await;
    let token = Client::new(&app.base_url, created["token"].as_str());
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");

    // With a token and no pack: 402, the allowance untouched.
    let (status, err) = token.analyze(&post(49), None).await.err();
    assert_eq!((status, err.code.as_str()), (StatusCode::PAYMENT_REQUIRED, "quota_exceeded"));
    // From the session: paid from the allowance, and not saved to the library.
    let (status, job) = browser.call(Method::POST, "/api/v1/analyze", Some(json!({"url": post(49)}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let done = token.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(done["result"]["comments_total"], 49, "{done}");
    let left = accounts::get(app.db(), &account.id).await.expect("account").free_comments_left;
    assert_eq!(left, 100 - 49, "49 comments from the free allowance");
    let (_, saved) = browser.call(Method::GET, "/api/v1/analyses/saved", None).await;
    assert_eq!(saved["items"].as_array().map(Vec::len), Some(0), "session jobs are not saved: {saved}");
    let (status, latest) = browser.call(Method::GET, "/api/v1/analyses/session", None).await;
    assert_eq!((status, &latest["job"]["job_id"]), (StatusCode::OK, &job["job_id"]));

    // A session job bigger than what is left holds all of it and no more without a pack.
    let (status, job) = browser.call(Method::POST, "/api/v1/analyze", Some(json!({"url": post(80)}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let done = token.wait_job(job["job_id"].as_str().expect("id")).await;
    assert_eq!(done["result"]["truncated"], true, "{done}");
    assert_eq!(accounts::get(app.db(), &account.id).await.expect("account").free_comments_left, 0);
    let (status, body) = browser.call(Method::POST, "/api/v1/analyze", Some(json!({"url": post(30)}))).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::PAYMENT_REQUIRED, Some("quota_exceeded")));

    // With a pack, tokens pay from it and the (spent) allowance stays out of it.
    app.grant(&account, 1_000).await;
    let done = token.collect(tiktok_post_id(TikTokScenario::Normal, 30)).await;
    assert_eq!(done["status"], "complete");
    let balance = balances::current(app.db(), &account.id, app.now()).await.expect("balance");
    assert_eq!(balance.spent, 30);
    app.stop().await;
}

#[tokio::test]
async fn tokens_are_created_after_confirmation_shown_once_and_revoked() {
    let app = app().await;
    let email = "fay@example.com";
    // Signed in but not confirmed: no tokens yet.
    let mut unconfirmed = Browser::new(&app);
    let (status, _) = unconfirmed
        .call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": email, "password": PASSWORD})))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    unconfirmed.login(email, PASSWORD).await;
    let (status, body) =
        unconfirmed.call(Method::POST, "/api/v1/tokens", Some(json!({"name": "a", "scopes": ["metadata:read"]}))).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("email_unconfirmed")));
    let link = mailed_link(&app, email, "confirm").await;
    unconfirmed.call(Method::POST, "/api/v1/auth/confirm", Some(json!({"token": link_token(&link)}))).await;
    let mut browser = Browser::new(&app);
    browser.login(email, PASSWORD).await;

    for bad in [
        json!({"name": "", "scopes": ["metadata:read"]}),
        json!({"name": "a", "scopes": []}),
        json!({"name": "a", "scopes": ["admin"]}),
    ] {
        let (status, body) = browser.call(Method::POST, "/api/v1/tokens", Some(bad.clone())).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")), "{bad}");
    }
    let mut values = Vec::new();
    for n in 0..5 {
        let (status, created) = browser
            .call(Method::POST, "/api/v1/tokens", Some(json!({"name": format!("t{n}"), "scopes": ["metadata:read"]})))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        values.push((
            created["id"].as_str().expect("id").to_owned(),
            created["token"].as_str().expect("value").to_owned(),
        ));
    }
    let (status, body) =
        browser.call(Method::POST, "/api/v1/tokens", Some(json!({"name": "sixth", "scopes": ["metadata:read"]}))).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::CONFLICT, Some("token_limit")));
    let (_, list) = browser.call(Method::GET, "/api/v1/tokens", None).await;
    let listed = list["tokens"].as_array().expect("tokens");
    assert_eq!(listed.len(), 5);
    assert!(
        listed.iter().all(|t| t.get("token").is_none() && t["prefix"].as_str().is_some_and(|p| p.starts_with("cova_")))
    );
    assert!(!list.to_string().contains(&values[0].1), "the value is never listed");

    // A token works with Bearer, cannot manage tokens, and stops when revoked.
    let (id, value) = values[0].clone();
    let bearer = Client::new(&app.base_url, Some(&value));
    assert_eq!(bearer.usage().await.status, StatusCode::OK);
    let (status, err) = bearer.send::<Value>(bearer.request(Method::GET, "/api/v1/tokens")).await.err();
    assert_eq!((status, err.code.as_str()), (StatusCode::FORBIDDEN, "session_required"));
    let (status, _) = browser.call(Method::DELETE, &format!("/api/v1/tokens/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(bearer.usage().await.status, StatusCode::UNAUTHORIZED);
    let (status, body) = browser.call(Method::DELETE, &format!("/api/v1/tokens/{id}"), None).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
    let (status, _) =
        browser.call(Method::POST, "/api/v1/tokens", Some(json!({"name": "again", "scopes": ["metadata:read"]}))).await;
    assert_eq!(status, StatusCode::CREATED, "a revoked token frees its place");
    app.stop().await;
}

#[tokio::test]
async fn a_paid_checkout_grants_its_pack_once() {
    let app = app().await;
    let email = "gil@example.com";
    let browser = signed_in(&app, email).await;
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    let (status, packs) = browser.call(Method::GET, "/api/v1/billing/packs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(packs["packs"][0], json!({"id": "2k", "comments": 2000, "price": {"amount": 900, "currency": "usd"}}));
    let (status, body) = browser.call(Method::POST, "/api/v1/billing/checkout", Some(json!({"pack": "nope"}))).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")));
    let (status, checkout) = browser.call(Method::POST, "/api/v1/billing/checkout", Some(json!({"pack": "2k"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{checkout}");
    let url = checkout["url"].as_str().expect("url");
    assert!(url.starts_with(&app.sim.payments_base_url()), "{url}");
    let (_, purchases) = browser.call(Method::GET, "/api/v1/billing/purchases", None).await;
    assert_eq!(purchases["purchases"][0]["status"], "pending");

    // Paying sends the signed webhook before the browser is sent back.
    let pay = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let res = pay.post(format!("{url}/pay")).send().await.expect("pay");
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let back = res.headers()["location"].to_str().expect("ascii").to_owned();
    assert_eq!(back, format!("{}/#/billing?checkout={}", app.base_url, checkout["checkout_id"].as_str().expect("id")));
    let granted = || async { balances::current(app.db(), &account.id, app.now()).await.expect("balance").granted };
    assert_eq!(granted().await, 2_000, "granted by the time the browser returns");
    let events = app.sim.payment_events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].status, Some(200));

    // The provider repeats the event (and a second payment attempt sends none): granted once.
    for _ in 0..3 {
        assert_eq!(app.sim.replay_payment_event(&events[0].id).await, Some(200));
    }
    let _ = pay.post(format!("{url}/pay")).send().await.expect("pay again");
    assert_eq!(granted().await, 2_000);
    let (_, purchases) = browser.call(Method::GET, "/api/v1/billing/purchases", None).await;
    assert_eq!(purchases["purchases"][0]["status"], "paid");

    // Forged or stale signatures are refused and grant nothing.
    let hook = format!("{}/api/v1/billing/webhook", app.base_url);
    let body = events[0].body.clone();
    let stale = cova_sim::payments_signature_header(app.now() / 1000 - 3_600, &body);
    for signature in ["t=1,v1=00".to_owned(), stale] {
        let res = reqwest::Client::new()
            .post(&hook)
            .header("stripe-signature", signature)
            .body(body.clone())
            .send()
            .await
            .expect("sent");
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    }
    assert_eq!(granted().await, 2_000);
    // A token cannot open checkouts.
    let (_, created) =
        browser.call(Method::POST, "/api/v1/tokens", Some(json!({"name": "t", "scopes": ["metadata:read"]}))).await;
    let bearer = Client::new(&app.base_url, created["token"].as_str());
    let (status, err) = bearer.post_json("/api/v1/billing/checkout", json!({"pack": "2k"})).await.err();
    assert_eq!((status, err.code.as_str()), (StatusCode::FORBIDDEN, "session_required"));
    app.stop().await;
}

/// The page token the workspace page was served with.
async fn page_token(app: &TestApp) -> String {
    let html = reqwest::get(format!("{}/", app.base_url)).await.expect("page").text().await.expect("html");
    let at = html.find("name=\"cova-page-token\" content=\"").expect("the page token meta") + 32;
    html[at..].split('"').next().expect("token").to_owned()
}

#[tokio::test]
async fn anonymous_metadata_only_from_the_page_ten_a_day() {
    let app = app().await;
    let token = page_token(&app).await;
    let http = reqwest::Client::new();
    let lookup = |page_token: Option<&str>, origin: &str, comments: u64| {
        let mut req = http
            .post(format!("{}/api/v1/metadata", app.base_url))
            .header("origin", origin)
            .json(&json!({"url": post(comments)}));
        if let Some(t) = page_token {
            req = req.header("x-cova-page-token", t);
        }
        req.send()
    };
    let refused = [
        (None, app.base_url.clone(), "no page token"),
        (Some(token.as_str()), "https://evil.example.com".to_owned(), "another origin"),
        (Some("B".repeat(43).leak() as &str), app.base_url.clone(), "a token the page never had"),
    ];
    for (t, origin, why) in refused {
        let res = lookup(t, &origin, 11).await.expect("sent");
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{why}");
    }
    for n in 0..10 {
        let res = lookup(Some(&token), &app.base_url, 11 + n).await.expect("sent");
        assert_eq!(res.status(), StatusCode::OK, "lookup {n}");
        let remaining: u64 = res.headers()["x-ratelimit-remaining"].to_str().expect("ascii").parse().expect("number");
        assert_eq!(remaining, 9 - n);
    }
    // A cache hit is free; a new post is the 11th lookup of the day.
    assert_eq!(lookup(Some(&token), &app.base_url, 11).await.expect("sent").status(), StatusCode::OK);
    let res = lookup(Some(&token), &app.base_url, 30).await.expect("sent");
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(res.headers().contains_key("retry-after"));
    app.stop().await;
}

#[tokio::test]
async fn sessions_and_links_expire_on_the_clock() {
    let (app, clock) = cova_tests::spawn_on_clock("2026-11-02T09:00:00Z", |c| {
        c.workspace.session_idle_min = 30;
        c.workspace.session_max_hours = 2;
    })
    .await;
    let minutes = |n: u64| std::time::Duration::from_secs(60 * n);
    // A confirmation link works for 24 hours.
    let browser = Browser::new(&app);
    let email = "late@example.com";
    let (status, _) =
        browser.call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": email, "password": PASSWORD}))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let token = link_token(&mailed_link(&app, email, "confirm").await);
    clock.advance(minutes(24 * 60 + 1));
    let (status, body) = browser.call(Method::POST, "/api/v1/auth/confirm", Some(json!({"token": token}))).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("validation_error")), "expired link");

    // Idle: every request keeps the session alive for 30 more minutes; silence ends it.
    let mut browser = signed_up(&app, "idle@example.com").await;
    let idle = accounts::find_by_email(app.db(), "idle@example.com").await.expect("db").expect("account");
    browser.login("idle@example.com", PASSWORD).await;
    for _ in 0..2 {
        clock.advance(minutes(29));
        assert_eq!(browser.call(Method::GET, "/api/v1/usage", None).await.0, StatusCode::OK);
        kept_alive(&app, &idle.id).await;
    }
    clock.advance(minutes(31));
    let (status, body) = browser.call(Method::GET, "/api/v1/usage", None).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("unauthorized")), "idle too long");

    // Absolute: however active, a session ends 2 hours after login.
    browser.login("idle@example.com", PASSWORD).await;
    for _ in 0..4 {
        clock.advance(minutes(25));
        assert_eq!(browser.call(Method::GET, "/api/v1/usage", None).await.0, StatusCode::OK);
        kept_alive(&app, &idle.id).await;
    }
    clock.advance(minutes(21));
    assert_eq!(
        browser.call(Method::GET, "/api/v1/usage", None).await.0,
        StatusCode::UNAUTHORIZED,
        "past the absolute end"
    );
    app.stop().await;
}

/// Waits until a request at the clock's present has pushed the account's session forward: the
/// gateway writes the idle expiry in the background, and the clock must not move before it lands.
async fn kept_alive(app: &TestApp, account_id: &str) {
    let now = app.now();
    cova_tests::eventually("the session's idle expiry pushed forward", async || {
        let live = sessions::live_of_account(app.db(), account_id, now).await.expect("sessions");
        live.iter().any(|s| s.last_seen_at == now)
    })
    .await;
}
