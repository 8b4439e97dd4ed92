//! Headless Chromium driven over WebDriver (chromedriver), for the workspace's browser tests.
//! The W3C WebDriver protocol is a handful of JSON calls; this speaks just those.
//!
//! `COVA_TEST_CHROMEDRIVER` and `COVA_TEST_CHROMIUM` override `/usr/bin/chromedriver` and
//! `/usr/bin/chromium` (Debian's `chromium-driver` and `chromium`, installed by `.ci/run`).

use serde_json::{Value, json};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a wait for the page gives up after. Waits end as soon as the page is there, so
/// this only bounds a broken page; CI runs the browser beside fault tests on two cores, where
/// a page that needs a job, a payment webhook and a redraw can take well over 20 s.
pub const WAIT: Duration = Duration::from_secs(60);

fn program(var: &str, default: &str) -> String {
    let path = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    assert!(
        Path::new(&path).exists(),
        "{path} is missing: the browser tests need Debian's chromium and chromium-driver (`.ci/run` installs them; set {var} to use another)"
    );
    path
}

/// One chromedriver process with one browser session; both end on drop.
pub struct Driver {
    http: reqwest::Client,
    base: String,
    process: Child,
    profile: tempfile::TempDir,
}

/// An element of the page, by its WebDriver reference.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Driver {
    pub async fn start() -> Driver {
        let driver = program("COVA_TEST_CHROMEDRIVER", "/usr/bin/chromedriver");
        let chromium = program("COVA_TEST_CHROMIUM", "/usr/bin/chromium");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let process = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
        let profile = tempfile::tempdir().expect("profile dir");
        let mut driver = Driver { http, base: format!("http://127.0.0.1:{port}"), process, profile };
        crate::until_within("chromedriver to be ready", WAIT, async || {
            let ready = driver.http.get(format!("{}/status", driver.base)).send().await.ok()?;
            let status = ready.json::<Value>().await.ok()?;
            (status["value"]["ready"] == true).then_some(())
        })
        .await;
        // Flags for a machine without network: no background connections, a fresh profile.
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,900",
        ];
        let mut args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        args.push(format!("--user-data-dir={}", driver.profile.path().display()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let created = driver.raw("POST", "/session", Some(caps)).await;
        let id = created["sessionId"].as_str().unwrap_or_else(|| panic!("no browser session: {created}")).to_owned();
        driver.base = format!("{}/session/{id}", driver.base);
        driver
    }

    async fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let res = req.send().await.unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        let status = res.status();
        let value: Value = res.json().await.expect("WebDriver answers JSON");
        assert!(status.is_success(), "WebDriver {method} {path}: {status} {value}");
        value["value"].clone()
    }

    async fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Value> {
        let url = format!("{}{path}", self.base);
        let req = if method == "GET" {
            self.http.get(url)
        } else {
            self.http.post(url).json(&body.unwrap_or_else(|| json!({})))
        };
        let res = req.send().await.map_err(|e| json!({"error": e.to_string()}))?;
        let ok = res.status().is_success();
        let value: Value = res.json().await.map_err(|e| json!({"error": e.to_string()}))?;
        if ok { Ok(value["value"].clone()) } else { Err(value["value"].clone()) }
    }

    pub async fn goto(&self, url: &str) {
        self.raw("POST", "/url", Some(json!({ "url": url }))).await;
    }

    pub async fn current_url(&self) -> String {
        self.raw("GET", "/url", None).await.as_str().unwrap_or_default().to_owned()
    }

    /// Runs `script` in the page (a function body; `arguments` are `args`) and returns its value.
    pub async fn execute(&self, script: &str, args: Value) -> Value {
        self.raw("POST", "/execute/sync", Some(json!({"script": script, "args": args}))).await
    }

    /// Like [`Driver::execute`] for scripts that return a promise.
    pub async fn execute_async(&self, script: &str, args: Value) -> Value {
        self.raw("POST", "/execute/async", Some(json!({"script": script, "args": args}))).await
    }

    async fn find_now(&self, css: &str) -> Option<Element> {
        let found =
            self.try_call("POST", "/element", Some(json!({"using": "css selector", "value": css}))).await.ok()?;
        found[ELEMENT_KEY].as_str().map(|id| Element(id.to_owned()))
    }

    /// Waits for an element matching `css` to exist and be displayed.
    pub async fn find(&self, css: &str) -> Element {
        crate::until_within(&format!("a visible `{css}`"), WAIT, async || {
            let el = self.find_now(css).await?;
            let displayed = self.try_call("GET", &format!("/element/{}/displayed", el.0), None).await;
            (displayed == Ok(json!(true))).then_some(el)
        })
        .await
    }

    /// How many elements match `css` now.
    pub async fn count(&self, css: &str) -> usize {
        let found = self.raw("POST", "/elements", Some(json!({"using": "css selector", "value": css}))).await;
        found.as_array().map_or(0, Vec::len)
    }

    /// Scrolls the element to the middle of the viewport (clear of sticky bars), then clicks.
    pub async fn click(&self, css: &str) {
        let el = self.find(css).await;
        let arg = json!([{ ELEMENT_KEY: el.0 }]);
        self.execute("arguments[0].scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});", arg)
            .await;
        let clicked = self.try_call("POST", &format!("/element/{}/click", el.0), Some(json!({}))).await;
        if clicked.is_err() {
            let metrics = self
                .execute(
                    "const r = arguments[0].getBoundingClientRect(); return [r.top, r.left, innerHeight, innerWidth, scrollY, document.documentElement.scrollHeight];",
                    json!([{ ELEMENT_KEY: el.0 }]),
                )
                .await;
            let _ = std::fs::write("/tmp/cova-click-failure.png", self.screenshot().await);
            panic!("clicking `{css}` on {}: {clicked:?}; rect and viewport {metrics}", self.current_url().await);
        }
    }

    /// Clears a field and types `text` into it, key by key as a person would.
    pub async fn fill(&self, css: &str, text: &str) {
        let el = self.find(css).await;
        self.raw("POST", &format!("/element/{}/clear", el.0), Some(json!({}))).await;
        self.raw("POST", &format!("/element/{}/value", el.0), Some(json!({ "text": text }))).await;
    }

    pub async fn text(&self, css: &str) -> String {
        let el = self.find(css).await;
        self.raw("GET", &format!("/element/{}/text", el.0), None).await.as_str().unwrap_or_default().to_owned()
    }

    pub async fn property(&self, css: &str, name: &str) -> Value {
        let el = self.find(css).await;
        self.raw("GET", &format!("/element/{}/property/{name}", el.0), None).await
    }

    /// Waits until the text of `css` satisfies `test`; returns it.
    pub async fn wait_text(&self, css: &str, what: &str, test: impl Fn(&str) -> bool) -> String {
        crate::until_within(&format!("`{css}` to show {what}"), WAIT, async || {
            let el = self.find_now(css).await?;
            let text = self.try_call("GET", &format!("/element/{}/text", el.0), None).await.ok()?;
            text.as_str().filter(|t| test(t)).map(str::to_owned)
        })
        .await
    }

    /// Waits until the page's URL satisfies `test`.
    pub async fn wait_url(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        let from = self.current_url().await;
        crate::until_within(&format!("the browser to reach {what} from {from}"), WAIT, async || {
            Some(self.current_url().await).filter(|url| test(url))
        })
        .await
    }

    /// Answers the page's open `confirm()` dialog (waiting for it): OK when `accept`, else Cancel.
    pub async fn answer_dialog(&self, accept: bool) -> String {
        let text = crate::until_within("a dialog to open", WAIT, async || {
            self.try_call("GET", "/alert/text", None).await.ok()
        })
        .await;
        let action = if accept { "/alert/accept" } else { "/alert/dismiss" };
        self.raw("POST", action, Some(json!({}))).await;
        text.as_str().unwrap_or_default().to_owned()
    }

    /// Sets a form control's value as a paste would, and tells the page it changed.
    pub async fn set_value(&self, css: &str, value: &str) {
        self.find(css).await;
        self.execute(
            "const el = document.querySelector(arguments[0]); el.value = arguments[1]; \
             el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true}));",
            json!([css, value]),
        )
        .await;
    }

    pub async fn resize(&self, width: u32, height: u32) {
        self.raw("POST", "/window/rect", Some(json!({"width": width, "height": height}))).await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let data = self.raw("GET", "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD.decode(data.as_str().unwrap_or_default()).expect("PNG in base64")
    }
}

impl Driver {
    /// Ends the browser session (closing Chromium), then the driver.
    pub async fn quit(self) {
        let _ = self.http.delete(&self.base).send().await;
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The browser goes with its driver; nothing may outlive the test.
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
