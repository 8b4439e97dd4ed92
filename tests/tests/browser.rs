//! The workspace in headless Chromium, end to end: sign up, confirm from the captured e-mail,
//! log in, buy a pack on the simulator's checkout page, analyze a post and watch the progress
//! bar complete, read the comments, create a token and use it with curl, log out.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them), so it is
//! ignored in a plain `cargo test` and runs with `--include-ignored` (CI, `make test-real`,
//! `make screenshots`). With `COVA_SCREENSHOTS=<dir>` it also writes a PNG of each main page.

use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};
use cova_storage::repo::{accounts, balances};
use cova_tests::browser::Driver;
use cova_tests::workspace::PASSWORD;
use cova_tests::{TestApp, spawn_app_with_sim};
use std::path::PathBuf;
use std::process::Command;

struct Shots(Option<PathBuf>);

impl Shots {
    fn from_env() -> Self {
        let dir = std::env::var_os("COVA_SCREENSHOTS").map(PathBuf::from);
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir).expect("screenshot directory");
        }
        Shots(dir)
    }

    async fn take(&self, driver: &Driver, name: &str) {
        if let Some(dir) = &self.0 {
            // Let fonts and the last answer settle so the picture shows the page, not its loading.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            std::fs::write(dir.join(format!("{name}.png")), driver.screenshot().await).expect("screenshot written");
        }
    }
}

/// Runs curl off the async threads: the app under test shares this runtime (its Redis
/// connection's driver, for one), and a blocking wait here would stall it.
async fn curl(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || Command::new("curl").args(&args).output().expect("curl runs"))
        .await
        .expect("curl finished")
}

async fn app() -> TestApp {
    // A little latency per platform request, so the progress bar has steps to show.
    let sim = SimConfig { latency_ms: 20, ..SimConfig::default() };
    spawn_app_with_sim(sim, |c| {
        c.auth.token_cache_ms = 0;
        c.billing.free_allowance = 0;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn the_workspace_in_a_browser() {
    let app = app().await;
    let shots = Shots::from_env();
    let driver = Driver::start().await;
    let base = app.base_url.clone();
    let email = "reader@example.com";

    // Sign up.
    driver.goto(&format!("{base}/#/signup")).await;
    shots.take(&driver, "signup").await;
    driver.fill("#signup-email", email).await;
    driver.fill("#signup-password", PASSWORD).await;
    driver.click("#signup-submit").await;
    driver.wait_text("#signup-done", "the e-mail notice", |t| t.to_lowercase().contains("e-mail")).await;

    // Confirm with the link from the captured e-mail.
    let link = cova_tests::workspace::mailed_link(&app, email, "confirm").await;
    driver.goto(&link).await;
    driver.wait_text("#confirm-status", "confirmed", |t| t.contains("confirmed")).await;

    // Log in.
    driver.goto(&format!("{base}/#/login")).await;
    shots.take(&driver, "login").await;
    driver.fill("#login-email", email).await;
    driver.fill("#login-password", PASSWORD).await;
    driver.click("#login-submit").await;
    driver.wait_text("#nav-email", "the account", |t| t == email).await;
    driver.wait_url("the dashboard", |u| u.ends_with("#/dashboard")).await;
    let cookie = driver.execute("return document.cookie", serde_json::json!([])).await;
    assert_eq!(cookie, "", "the session cookie is HttpOnly: no script can read it");

    // Buy a pack through the provider's checkout page; the webhook grants it.
    driver.goto(&format!("{base}/#/billing")).await;
    driver.find("button.buy-pack[data-pack=\"2k\"]").await;
    shots.take(&driver, "billing").await;
    driver.click("button.buy-pack[data-pack=\"2k\"]").await;
    driver.wait_url("the provider's checkout", |u| u.starts_with(&app.sim.payments_base_url())).await;
    driver.click("#pay").await;
    driver.wait_url("the return to billing", |u| u.starts_with(&format!("{base}/#/billing?checkout="))).await;
    driver.wait_text("#checkout-status", "paid", |t| t == "paid").await;
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    assert_eq!(balances::current(app.db(), &account.id, app.now()).await.expect("balance").granted, 2_000);
    driver.goto(&format!("{base}/#/dashboard")).await;
    driver.wait_text("#balance-available", "the pack", |t| t.replace([',', '.', '\u{a0}', ' '], "") == "2000").await;
    shots.take(&driver, "dashboard").await;

    // Analyze a post: preview, then collect while the progress bar fills.
    let id = tiktok_post_id(TikTokScenario::Normal, 240);
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.fill("#analyze-url", &format!("https://www.tiktok.com/@someone/video/{id}")).await;
    driver.click("#preview-submit").await;
    driver.find("#preview").await;
    driver.click("#analyze-submit").await;
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let status = driver.text("#analyze-status").await;
        let value = driver.property("#analyze-progress", "value").await.as_f64().unwrap_or(0.0);
        let max = driver.property("#analyze-progress", "max").await.as_f64().unwrap_or(0.0);
        if seen.last().map(|(s, v, _): &(String, f64, f64)| (s.as_str(), *v)) != Some((status.as_str(), value)) {
            seen.push((status.clone(), value, max));
        }
        if status == "complete" || status == "failed" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the job did not finish: {seen:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (status, value, max) = seen.last().cloned().expect("a status");
    assert_eq!(status, "complete", "{seen:?}");
    assert!(max > 0.0 && value == max, "the bar is full at the end: {seen:?}");
    let values: Vec<f64> = seen.iter().map(|(_, v, _)| *v).collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "the bar never goes back: {seen:?}");

    // The comments, nested as the API returns them.
    driver.find("#comments li.comment").await;
    let truth = app.sim.expected_post(&id.to_string());
    let top = truth.comments.len();
    let all = truth.total_comments();
    assert_eq!(driver.count("#comments > li.comment").await, top);
    assert_eq!(driver.count("#comments li.comment").await, all);
    shots.take(&driver, "analyze").await;
    driver.click("#save-analysis").await;

    // AI on the collected comments: quote, consent, run, and the charts of the result.
    driver.goto(&format!("{base}/#/ai?ref=tiktok:{id}")).await;
    driver.click("#ai-quote").await;
    driver.click("#ai-consent").await;
    driver.click("#ai-run").await;
    driver.wait_text("#ai-status", "complete", |t| t.contains("complete")).await;
    driver.find("#ai-result svg").await;
    assert!(driver.count("#ai-result svg").await >= 3, "sentiment, languages and topics are drawn");
    shots.take(&driver, "ai").await;

    // A token, shown once, used with curl in the same test.
    driver.goto(&format!("{base}/#/tokens")).await;
    driver.fill("#token-name", "from the browser").await;
    driver.click("input[name=scope][value=\"analyze:write\"]").await;
    driver.click("input[name=scope][value=\"library:write\"]").await;
    driver.click("#token-create").await;
    let token = driver.wait_text("#token-value", "the token", |t| t.starts_with("cova_")).await;
    shots.take(&driver, "tokens").await;
    let auth = format!("Authorization: Bearer {token}");
    let out =
        curl(&["--silent", "--show-error", "--fail-with-body", "-H", &auth, &format!("{base}/api/v1/analyses/saved")])
            .await;
    assert!(
        out.status.success(),
        "curl: {} {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let saved: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON from curl");
    assert_eq!(saved["items"][0]["ref"], format!("tiktok:{id}"), "the saved analysis, seen with the new token");
    // Shown once: a reload lists the token by its prefix only.
    driver.goto(&format!("{base}/#/dashboard")).await;
    driver.goto(&format!("{base}/#/tokens")).await;
    let listed = driver.wait_text("#tokens-list", "the token", |t| t.contains("from the browser")).await;
    assert!(!listed.contains(&token) && listed.contains(&token[..13]), "{listed}");
    let page = driver.execute("return document.body.innerText", serde_json::json!([])).await;
    assert!(!page.as_str().unwrap_or_default().contains(&token), "the value is not shown again");

    // The other pages render for the screenshots (and must not break).
    for page in ["library", "alerts"] {
        driver.goto(&format!("{base}/#/{page}")).await;
        driver.find("main").await;
        shots.take(&driver, page).await;
    }
    driver.resize(390, 844).await;
    driver.goto(&format!("{base}/#/dashboard")).await;
    driver.find("#nav-logout").await;
    shots.take(&driver, "dashboard-phone").await;
    driver.resize(1280, 900).await;

    // Log out: the session ends, and the account pages send the browser to the login.
    driver.click("#nav-logout").await;
    driver.wait_url("the login page", |u| u.ends_with("#/login")).await;
    let status = driver
        .execute_async(
            "const done = arguments[0]; fetch('/api/v1/usage').then(r => done(r.status), () => done(0));",
            serde_json::json!([]),
        )
        .await;
    assert_eq!(status, 401);
    let out = curl(&[
        "--silent",
        "--output",
        "/dev/null",
        "--write-out",
        "%{http_code}",
        "-H",
        &auth,
        &format!("{base}/api/v1/usage"),
    ])
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200", "the token outlives the browser session");
    driver.quit().await;
    app.stop().await;
}
