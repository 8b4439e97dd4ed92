//! A browser's view of the workspace over HTTP: a cookie jar, the CSRF token, the page's
//! origin; and sign-up through the e-mail the simulator's SMTP receiver captured.

use crate::TestApp;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

pub const PASSWORD: &str = "correct horse battery staple";

/// A signed-in (or not yet) browser: cookies kept, the CSRF token of its session sent on
/// unsafe requests, `Origin` set to the app's own origin like a page of the workspace would.
pub struct Browser {
    pub http: reqwest::Client,
    pub base: String,
    pub csrf: Option<String>,
}

impl Browser {
    pub fn new(app: &TestApp) -> Self {
        let http = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .expect("http client");
        Self { http, base: app.base_url.clone(), csrf: None }
    }

    /// A request as the workspace page makes it: own `Origin`, and the CSRF header once known.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).header("origin", &self.base);
        if let Some(csrf) = &self.csrf {
            req = req.header("x-csrf-token", csrf);
        }
        req
    }

    /// Sends and returns the status, headers and JSON body (`Null` when empty).
    pub async fn send(&self, req: reqwest::RequestBuilder) -> (StatusCode, HeaderMap, Value) {
        let res = req.send().await.expect("request sent");
        let (status, headers) = (res.status(), res.headers().clone());
        let bytes = res.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
        };
        if !status.is_success() {
            assert!(body["detail"].is_string() && body["code"].is_string(), "{status}: not {{detail, code}}: {body}");
        }
        (status, headers, body)
    }

    /// Sends and returns the status, headers and raw body (downloads).
    pub async fn raw(&self, req: reqwest::RequestBuilder) -> (StatusCode, HeaderMap, Vec<u8>) {
        let res = req.send().await.expect("request sent");
        let (status, headers) = (res.status(), res.headers().clone());
        (status, headers, res.bytes().await.expect("body").to_vec())
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.request(method, path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let (status, _, body) = self.send(req).await;
        (status, body)
    }

    /// Logs in and keeps the session's CSRF token.
    pub async fn login(&mut self, email: &str, password: &str) -> Value {
        let (status, body) =
            self.call(Method::POST, "/api/v1/auth/login", Some(json!({"email": email, "password": password}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        self.csrf = body["csrf_token"].as_str().map(str::to_owned);
        body
    }
}

/// The link of `kind` (`confirm` or `reset`) in the newest e-mail to `email` that has one
/// (mail goes out in the background: waits for it).
pub async fn mailed_link(app: &TestApp, email: &str, kind: &str) -> String {
    let marker = format!("/#/{kind}/");
    let text = crate::until(&format!("an e-mail with a {kind} link to {email}"), async || {
        app.sim
            .mails()
            .into_iter()
            .rev()
            .filter(|m| m.to.iter().any(|to| to.eq_ignore_ascii_case(email)))
            .map(|m| m.body_text())
            .find(|text| text.contains(&marker))
    })
    .await;
    let at = text.find(&marker).expect("marker");
    let start = text[..at].rfind("http").expect("link start");
    let end = text[at..].find(char::is_whitespace).map_or(text.len(), |n| at + n);
    text[start..end].to_owned()
}

/// The token at the end of an e-mailed link.
pub fn link_token(link: &str) -> String {
    link.rsplit('/').next().expect("token").to_owned()
}

/// Signs up and confirms through the e-mailed link; returns a browser that is not signed in.
pub async fn signed_up(app: &TestApp, email: &str) -> Browser {
    let browser = Browser::new(app);
    let (status, body) =
        browser.call(Method::POST, "/api/v1/auth/signup", Some(json!({"email": email, "password": PASSWORD}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let link = mailed_link(app, email, "confirm").await;
    assert!(link.starts_with(&app.base_url), "the link names the app: {link}");
    let (status, body) =
        browser.call(Method::POST, "/api/v1/auth/confirm", Some(json!({"token": link_token(&link)}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    browser
}

/// A confirmed account, signed in.
pub async fn signed_in(app: &TestApp, email: &str) -> Browser {
    let mut browser = signed_up(app, email).await;
    browser.login(email, PASSWORD).await;
    browser
}

/// The value of the session cookie an answer set, if any.
pub fn set_cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v: &HeaderValue| v.to_str().ok())
        .find_map(|v| v.strip_prefix("cova_session=").map(|rest| rest.split(';').next().unwrap_or("").to_owned()))
}
