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
            // Fonts loaded, the page drawn with them and a smooth scroll come to rest, so the
            // picture shows the page, not its loading or its way to the part shown.
            driver
                .execute_async(
                    "const done = arguments[arguments.length - 1]; let last = -1; \
                     const settle = () => { if (window.scrollY === last) { done(); return; } \
                       last = window.scrollY; requestAnimationFrame(() => requestAnimationFrame(settle)); }; \
                     document.fonts.ready.then(() => requestAnimationFrame(settle));",
                    serde_json::json!([]),
                )
                .await;
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
    // The purchase reads as a pack of comments, not as the pack's id.
    let bought = driver.wait_text("#purchases tbody", "the purchase", |t| t.contains("paid")).await;
    assert!(bought.contains("A pack of 2,000") && !bought.contains("2k"), "{bought}");
    let notice = driver.property("#checkout-notice", "className").await;
    assert_eq!(notice, "card success", "the payment's success is styled as one");
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
    // Every step the bar shows on the way, until the job ends.
    let mut seen: Vec<(String, f64, f64)> = Vec::new();
    cova_tests::until_within("the job to finish in the page", std::time::Duration::from_secs(120), async || {
        let status = driver.text("#analyze-status").await;
        let value = driver.property("#analyze-progress", "value").await.as_f64().unwrap_or(0.0);
        let max = driver.property("#analyze-progress", "max").await.as_f64().unwrap_or(0.0);
        if seen.last().map(|(s, v, _)| (s.as_str(), *v)) != Some((status.as_str(), value)) {
            seen.push((status.clone(), value, max));
        }
        (status == "complete" || status == "failed").then_some(())
    })
    .await;
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
    // As a person would, the page is left once it says the post is saved (leaving at once
    // could abort the request before it is sent).
    driver.wait_text("#save-status", "saved", |t| t.starts_with("Saved")).await;

    // A post whose comments are off says so in words, not as an empty success.
    let off = tiktok_post_id(TikTokScenario::CommentsOff, 12);
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.fill("#analyze-url", &format!("https://www.tiktok.com/@someone/video/{off}")).await;
    driver.click("#analyze-submit").await;
    let said = driver.wait_text("#result-note", "the comments-off result", |t| !t.is_empty()).await;
    assert!(said.contains("turned its comments off") && said.contains("nothing was charged"), "{said}");
    let progress = driver.text("#analyze-count").await;
    assert!(!progress.contains("of the post's"), "no count of comments that cannot be read: {progress}");

    // AI on the collected comments: quote, consent, run, and the charts of the result.
    driver.goto(&format!("{base}/#/ai?ref=tiktok:{id}")).await;
    // The post is offered by its title, picked already: no ref to type.
    let picked = driver
        .wait_text("#ai-ref", "the library's posts", |t| !t.contains("The post you opened") && !t.is_empty())
        .await;
    assert!(!picked.contains("tiktok:"), "posts named by their titles: {picked}");
    let chosen = driver.execute("return document.querySelector('#ai-ref').value;", serde_json::json!([])).await;
    assert_eq!(chosen, serde_json::json!(format!("tiktok:{id}")));
    driver.click("#ai-quote").await;
    driver.click("#ai-consent").await;
    driver.click("#ai-run").await;
    driver
        .wait_text("#ai-status", "complete", |t| {
            assert!(!t.contains('_'), "the state in words, not {t:?}");
            assert!(!t.contains("collecting"), "an AI run collects nothing: {t:?}");
            t.contains("complete")
        })
        .await;
    let running = driver.text("#ai-quote-info").await;
    assert!(running.contains("Analysis started") && !running.contains("job"), "in words, no job id: {running}");
    driver.find("#ai-result svg").await;
    assert!(driver.count("#ai-result svg").await >= 3, "sentiment, languages and topics are drawn");
    let result = driver.text("#ai-result").await;
    assert!(result.contains("of this post analysed by") && !result.contains("tiktok:"), "no ref: {result}");
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

/// Logs `email` in through the login form (the account exists and is confirmed).
async fn log_in(driver: &Driver, base: &str, email: &str) {
    driver.goto(&format!("{base}/#/login")).await;
    driver.fill("#login-email", email).await;
    driver.fill("#login-password", PASSWORD).await;
    driver.click("#login-submit").await;
    driver.wait_url("the dashboard", |u| u.ends_with("#/dashboard")).await;
}

/// A confirmed account holding `comments` from a pack, signed in through the login form of a
/// new browser.
async fn signed_in_browser(
    app: &TestApp,
    email: &str,
    comments: i64,
) -> (Driver, cova_storage::repo::accounts::Account) {
    let driver = Driver::start().await;
    cova_tests::workspace::signed_up(app, email).await;
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, comments).await;
    log_in(&driver, &app.base_url, email).await;
    (driver, account)
}

/// The bucket size (ms) and the number of columns the comments-over-time chart draws for
/// these times (unix seconds) on a clock `offset_min` behind UTC (the browser's
/// `getTimezoneOffset`): the smallest size from a minute to a year that fits the span from the
/// first comment to the last in at most 30 buckets.
fn time_buckets(times: &[i64], offset_min: i64) -> (i64, usize) {
    let shift = offset_min * 60_000;
    let ms: Vec<i64> = times.iter().map(|t| t * 1_000 - shift).collect();
    let (t0, t1) = (*ms.iter().min().expect("times"), *ms.iter().max().expect("times"));
    let (minute, hour, day) = (60_000_i64, 3_600_000_i64, 86_400_000_i64);
    let units = [
        minute,
        5 * minute,
        10 * minute,
        15 * minute,
        30 * minute,
        hour,
        3 * hour,
        6 * hour,
        12 * hour,
        day,
        7 * day,
        30 * day,
        365 * day,
    ];
    let unit = units.into_iter().find(|u| t1.div_euclid(*u) - t0.div_euclid(*u) < 30).unwrap_or(365 * day);
    (unit, usize::try_from(t1.div_euclid(unit) - t0.div_euclid(unit) + 1).expect("a count"))
}

/// The columns of the comments-over-time chart (their counts, in time order) and its bucket size.
async fn columns(driver: &Driver) -> (Vec<f64>, i64) {
    let got = driver
        .execute(
            "const svg = document.querySelector('#chart-comments-time svg'); \
             return [[...svg.querySelectorAll('rect.chart-column')].map(c => Number(c.dataset.y)), Number(svg.dataset.unit)];",
            serde_json::json!([]),
        )
        .await;
    let ys = got[0].as_array().expect("columns").iter().map(|y| y.as_f64().expect("a number")).collect();
    (ys, got[1].as_i64().expect("a unit"))
}

/// The browser's offset from UTC in minutes at `at_s` (unix seconds), as `getTimezoneOffset` says it.
async fn browser_offset(driver: &Driver, at_s: i64) -> i64 {
    driver
        .execute("return new Date(arguments[0] * 1000).getTimezoneOffset();", serde_json::json!([at_s]))
        .await
        .as_i64()
        .expect("an offset")
}

/// The numbers drawn as a chart's points, in drawing order.
async fn points(driver: &Driver, chart: &str) -> Vec<f64> {
    let ys = driver
        .execute(
            "return [...document.querySelectorAll(arguments[0] + ' circle.chart-point')].map(c => Number(c.dataset.y));",
            serde_json::json!([chart]),
        )
        .await;
    ys.as_array().expect("points").iter().map(|y| y.as_f64().expect("a number")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn the_daily_path_in_a_browser() {
    let app = spawn_app_with_sim(SimConfig { latency_ms: 20, ..SimConfig::default() }, |c| {
        c.auth.token_cache_ms = 0;
        c.billing.free_allowance = 300;
    })
    .await;
    let shots = Shots::from_env();
    let driver = Driver::start().await;
    let base = app.base_url.clone();
    let email = "daily@example.com";
    cova_tests::workspace::signed_up(&app, email).await;
    log_in(&driver, &base, email).await;

    // The headline counts the free allowance the session can spend, then the packs too.
    let digits = |t: &str| t.chars().filter(char::is_ascii_digit).collect::<String>();
    driver.wait_text("#balance-available", "the allowance", |t| digits(t) == "300").await;
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 5_000).await;
    driver.goto(&format!("{base}/#/library")).await;
    driver.goto(&format!("{base}/#/dashboard")).await;
    driver.wait_text("#balance-available", "packs and allowance", |t| digits(t) == "5300").await;
    driver.find("#balance-split").await;

    // Preview: the post's size against what can be spent.
    let id = tiktok_post_id(TikTokScenario::Normal, 240);
    let url = format!("https://www.tiktok.com/@someone/video/{id}");
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.fill("#analyze-url", &url).await;
    driver.click("#preview-submit").await;
    let cost = driver.wait_text("#cost-preview", "the cost", |t| !t.is_empty()).await;
    assert!(cost.contains("240 comments") && cost.contains("5,300") && cost.contains("enough"), "{cost}");

    // Enter in the field collects (it does not preview again).
    driver.fill("#analyze-url", &format!("{url}\u{E007}")).await;
    driver.wait_text("#analyze-status", "complete", |t| t == "complete").await;
    let truth = app.sim.expected_post(&id.to_string());
    let all = truth.total_comments();
    driver.wait_text("#comments-count", "the count", |t| t.contains(&format!("of {all} comments"))).await;
    assert!(driver.count("#save-analysis").await == 1, "a session's analysis offers to be saved");
    shots.take(&driver, "analyze").await;

    // Collecting it again minutes later shows that collection, and says nothing was charged.
    driver.fill("#analyze-url", &url).await;
    driver.click("#analyze-submit").await;
    let reused = driver.wait_text("#reused-note", "the reused collection", |t| !t.is_empty()).await;
    assert!(reused.contains("was collected") && reused.contains("nothing was charged again"), "{reused}");
    driver.wait_text("#comments-count", "the same count", |t| t.contains(&format!("of {all} comments"))).await;

    // The chart of when the comments were written: a point per span, every comment counted.
    let times: Vec<i64> =
        truth.comments.iter().flat_map(|c| std::iter::once(c).chain(&c.replies)).map(|c| c.create_time).collect();
    driver.find("#chart-comments-time rect.chart-column").await;
    let (drawn, unit) = columns(&driver).await;
    let offset = browser_offset(&driver, times[0]).await;
    assert_eq!((unit, drawn.len()), time_buckets(&times, offset), "{drawn:?}");
    assert_eq!(drawn.iter().sum::<f64>() as usize, all, "every comment is in the chart");

    // The table: a filter and its count, the search marked; only the rows in view are drawn.
    driver.set_value("#comments-view", "table").await;
    driver.wait_text("#comments-count", "every comment", |t| t.starts_with(&format!("Showing {all} of {all}"))).await;
    let rows = driver.count("#comments-table tbody tr.comment-row").await;
    assert!(rows > 5 && rows < all, "{rows} of {all} rows drawn");
    assert_eq!(driver.property("#comments-table", "ariaRowCount").await, serde_json::json!((all + 1).to_string()));
    let pinned = truth.comments.iter().filter(|c| c.pinned).count();
    driver.click("#filter-pinned").await;
    driver.wait_text("#comments-count", "the pinned", |t| t.starts_with(&format!("Showing {pinned} of {all}"))).await;
    assert_eq!(driver.count("#comments-table tbody tr.comment-row").await, pinned);
    driver.click("#filter-pinned").await;
    let word = truth.comments[0].text.split_whitespace().max_by_key(|w| w.len()).expect("a word").to_lowercase();
    driver.fill("#comments-search", &word).await;
    driver.wait_text("#comments-count", "the matches", |t| !t.starts_with(&format!("Showing {all} "))).await;
    assert!(driver.count("#comments-table mark").await >= 1, "the matches are marked");
    driver.click("#comments-table button[data-sort=likes]").await;
    let likes = driver
        .execute("return [...document.querySelectorAll('#comments-table tbody tr.comment-row')].map(r => Number(r.children[3].textContent.replace(/\\D/g, '')));", serde_json::json!([]))
        .await;
    let likes: Vec<i64> = likes.as_array().expect("likes").iter().filter_map(serde_json::Value::as_i64).collect();
    assert!(likes.windows(2).all(|w| w[0] >= w[1]), "sorted by likes: {likes:?}");
    shots.take(&driver, "comments-table").await;

    // An unsupported URL: its error, and nothing of the previous post under it.
    driver.fill("#analyze-url", "https://example.com/video/1").await;
    driver.click("#analyze-submit").await;
    driver.wait_text(".alert", "the refusal", |t| t.contains("TikTok")).await;
    assert_eq!(driver.count("#comments li.comment").await + driver.count("#comments-table tbody tr").await, 0);

    // Save it, refresh it from the library: the row follows the job, and the job's page knows
    // the post is saved.
    app.client(Some(&app.token(&account, "library:write").await))
        .post_json(&format!("/api/v1/analyses/tiktok:{id}/save"), serde_json::json!({}))
        .await
        .ok();
    driver.goto(&format!("{base}/#/library")).await;
    driver.click(&format!("tr[data-ref=\"tiktok:{id}\"] .library-refresh")).await;
    driver
        .wait_text(&format!("tr[data-ref=\"tiktok:{id}\"] .status"), "the job's end", |t| t.starts_with("complete"))
        .await;
    driver.click(&format!("tr[data-ref=\"tiktok:{id}\"] .status a")).await;
    driver.wait_text("#save-status", "saved", |t| t == "In your library.").await;
    assert_eq!(driver.count("#save-analysis").await + driver.count("#save-hint").await, 0, "no \"save it first\"");

    // Its page: two collections, the second with nothing new.
    driver.goto(&format!("{base}/#/analyze?ref=tiktok:{id}")).await;
    driver.find("#chart-refreshes").await;
    let refreshes = points(&driver, "#chart-refreshes").await;
    assert_eq!(refreshes, vec![all as f64, 0.0], "new comments per collection");

    // A list of posts: three at a time, one refused, each finished post linked.
    let list: Vec<String> = [30_u64, 31, 32, 33]
        .iter()
        .map(|n| format!("https://www.tiktok.com/@someone/video/{}", tiktok_post_id(TikTokScenario::Normal, *n)))
        .chain(["https://example.com/not-a-post".to_owned()])
        .collect();
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.set_value("#analyze-url", &list.join("\n")).await;
    driver.click("#analyze-submit").await;
    driver.wait_text("#batch-summary", "the list's end", |t| t.contains("The list is done")).await;
    assert_eq!(driver.count("#batch tbody tr").await, 5);
    assert_eq!(driver.count("#batch [data-state=complete]").await, 4);
    assert_eq!(driver.count("#batch [data-state=refused]").await, 1);
    let page = driver.text("#batch").await;
    assert!(!page.contains("in_progress") && !page.contains('`'), "states and reasons in words: {page}");
    shots.take(&driver, "batch").await;
    driver.click("#batch a.batch-open").await;
    driver.wait_text("#analyze-status", "the post", |t| t == "complete").await;

    // The jobs page: every collection, newest first, each with its result.
    driver.goto(&format!("{base}/#/jobs")).await;
    driver.find("#jobs tbody tr[data-id]").await;
    assert_eq!(driver.count("#jobs tbody tr[data-id]").await, 6, "the post, its refresh and the list's four");
    assert!(driver.count("#jobs a.job-open").await >= 5);
    shots.take(&driver, "jobs").await;
    driver.click("#jobs a.job-open").await;
    driver.wait_text("#analyze-status", "the job", |t| t == "complete").await;

    driver.quit().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn rough_edges_found_in_the_walk_through() {
    // A server without a Telegram bot.
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        c.auth.token_cache_ms = 0;
        c.notifier.telegram_bot_token = None;
    })
    .await;
    let shots = Shots::from_env();
    let driver = Driver::start().await;
    let base = app.base_url.clone();
    let email = "edges@example.com";
    cova_tests::workspace::signed_up(&app, email).await;
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 5_000).await;
    log_in(&driver, &base, email).await;

    // 1. Channels: no channel, no ticked box; a channel typed in is on by default, and off
    // again once its field is cleared; without a bot, no Telegram chat is offered, in words;
    // the test's answer is a sentence.
    driver.goto(&format!("{base}/#/alerts")).await;
    driver.find("#telegram-chat-id").await;
    driver.wait_text("#alerts-matched", "what is matched", |t| !t.contains("Loading")).await;
    for channel in ["#telegram-enabled", "#webhook-enabled"] {
        assert_eq!(driver.property(channel, "checked").await, false, "{channel}: no channel, nothing enabled");
        assert_eq!(driver.property(channel, "disabled").await, true, "{channel}");
    }
    let unavailable = driver.wait_text("#telegram-unavailable", "why there is no Telegram", |t| !t.is_empty()).await;
    assert!(unavailable.contains("not available") && unavailable.contains("webhook"), "{unavailable}");
    assert_eq!(driver.property("#telegram-chat-id", "disabled").await, true, "no bot, no chat to type");
    driver.fill("#webhook-url", "https://hooks.example.com/cova").await;
    assert_eq!(driver.property("#webhook-enabled", "checked").await, true, "a URL typed in is on");
    assert_eq!(driver.property("#webhook-enabled", "disabled").await, false);
    driver.fill("#webhook-url", "").await;
    assert_eq!(driver.property("#webhook-enabled", "checked").await, false, "a cleared URL is off");
    assert_eq!(driver.property("#webhook-enabled", "disabled").await, true);
    shots.take(&driver, "alerts-no-telegram").await;
    driver.fill("#webhook-url", "http://hooks.example.com/cova").await;
    driver.click("#channels-save").await;
    let refused = driver.wait_text(".alert", "the refusal", |t| t.contains("webhook")).await;
    assert!(refused.contains("the webhook URL") && !refused.contains('`'), "field names in words: {refused}");
    driver.fill("#webhook-url", "").await;
    driver.click("#channels-test").await;
    let tested = driver.wait_text("#channels-test-result", "the test", |t| !t.is_empty()).await;
    assert!(tested.contains("Telegram: not set or turned off, nothing sent"), "{tested}");

    // 6. Revoking a token asks first; Cancel keeps it.
    driver.goto(&format!("{base}/#/tokens")).await;
    driver.fill("#token-name", "to revoke").await;
    driver.click("input[name=scope][value=\"analyze:write\"]").await;
    driver.click("#token-create").await;
    driver.wait_text("#token-value", "the token", |t| t.starts_with("cova_")).await;
    driver.click(".token-revoke").await;
    let asked = driver.answer_dialog(false).await;
    assert!(asked.contains("to revoke"), "{asked}");
    assert_eq!(driver.count(".token-revoke").await, 1, "cancelled: the token stays");
    driver.click(".token-revoke").await;
    driver.answer_dialog(true).await;
    driver.wait_text("#tokens-list", "no token", |t| t.contains("No active tokens")).await;

    // 8. AI: watch phrases listed with their comments, topics by count, the runs kept on the
    // post's page and on the jobs page.
    let id = tiktok_post_id(TikTokScenario::Normal, 120);
    let token = app.token(&account, "analyze:write,library:write,ai:write").await;
    let client = app.client(Some(&token));
    client.collect(id).await;
    client.put_json(&format!("/api/v1/ai/tiktok:{id}/queries"), serde_json::json!({"queries": ["price"]})).await.ok();
    driver.goto(&format!("{base}/#/ai?ref=tiktok:{id}")).await;
    driver.click("#ai-quote").await;
    driver.click("#ai-consent").await;
    driver.click("#ai-run").await;
    driver
        .wait_text("#ai-status", "complete", |t| {
            assert!(!t.contains('_'), "the state in words, not {t:?}");
            t.contains("complete")
        })
        .await;
    driver.wait_text("#ai-phrases .phrase-comments li", "a comment", |t| t.contains(':')).await;
    let counts = driver
        .execute("return [...document.querySelectorAll('#chart-topics .chart-value')].map(t => Number(t.textContent.replace(/\\D/g, '')));", serde_json::json!([]))
        .await;
    let counts: Vec<i64> = counts.as_array().expect("counts").iter().filter_map(serde_json::Value::as_i64).collect();
    assert!(!counts.is_empty() && counts.windows(2).all(|w| w[0] >= w[1]), "topics by count: {counts:?}");
    // Languages are languages: comments in none cova can tell are said apart, in words.
    let languages = driver.text("#chart-languages").await;
    assert!(!languages.contains("und") && !languages.contains("undetermined"), "{languages}");
    shots.take(&driver, "ai").await;
    driver.goto(&format!("{base}/#/analyze?ref=tiktok:{id}")).await;
    driver.find("#ai-runs tbody tr[data-id]").await;
    assert_eq!(driver.count("#ai-runs tbody tr[data-id]").await, 1);
    // The chart comes after the table: it reads each run's result first.
    driver.find("#chart-sentiment-time circle.chart-point").await;
    assert_eq!(points(&driver, "#chart-sentiment-time").await.len(), 2, "positive and negative of the run");
    driver.goto(&format!("{base}/#/jobs")).await;
    driver.find("#ai-jobs tbody tr[data-id] a.ai-open").await;
    // Tasks and states in words: no `phrase_matches`, no `in_progress`.
    let runs = driver.text("#ai-jobs tbody").await;
    assert!(runs.contains("watch phrases") && !runs.contains('_'), "{runs}");
    driver.click("#ai-jobs a.ai-open").await;
    driver.wait_text("#ai-status", "the result", |t| t.contains("complete")).await;

    // 4. The library row follows its job without a reload.
    client.post_json(&format!("/api/v1/analyses/tiktok:{id}/save"), serde_json::json!({})).await.ok();
    driver.goto(&format!("{base}/#/library")).await;
    let row = format!("tr[data-ref=\"tiktok:{id}\"]");
    driver.click(&format!("{row} .library-refresh")).await;
    driver.wait_text(&format!("{row} .status"), "the end of the refresh", |t| t.starts_with("complete")).await;
    driver.wait_text(&format!("{row} .entry-status"), "ready", |t| t == "ready").await;

    driver.quit().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn following_a_creator_in_a_browser() {
    let app = spawn_app_with_sim(SimConfig::default(), |c| c.auth.token_cache_ms = 0).await;
    let shots = Shots::from_env();
    let driver = Driver::start().await;
    let base = app.base_url.clone();
    let email = "creators@example.com";
    cova_tests::workspace::signed_up(&app, email).await;
    log_in(&driver, &base, email).await;
    let creator_id: u64 = 6_800_000_000_000_000_042;
    app.sim.add_creator(cova_sim::SimCreator::tiktok(creator_id, "glowshop"));

    // A URL that names no account is refused in words.
    driver.goto(&format!("{base}/#/creators")).await;
    driver.fill("#creator-url", "https://www.tiktok.com/@nobody_at_all").await;
    driver.click("#creator-add-submit").await;
    let refused = driver.wait_text(".alert", "the refusal", |t| !t.is_empty()).await;
    assert!(refused.contains("@nobody_at_all") && refused.contains("does not exist"), "{refused}");

    driver.fill("#creator-url", "https://www.tiktok.com/@glowshop").await;
    driver.click("#creator-add-submit").await;
    driver.wait_text("#creator-status", "added", |t| t.contains("@glowshop")).await;
    let row = "tr[data-ref=\"tiktok:user:6800000000000000042\"]";
    driver.find(row).await;

    // Following needs a pack: the box goes back and the page says why.
    driver.click(&format!("{row} .creator-follow")).await;
    let refused = driver.wait_text(".alert", "the refusal", |t| t.contains("pack")).await;
    assert!(refused.contains("Buy a comment pack"), "{refused}");
    assert_eq!(driver.property(&format!("{row} .creator-follow"), "checked").await, false);
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 1_000).await;

    // A new post, found on demand and collected.
    let post = tiktok_post_id(TikTokScenario::Normal, 12);
    app.sim.publish(
        &creator_id.to_string(),
        cova_sim::SimCreatorPost { id: post.to_string(), published_at_ms: app.now() - 1, pinned: false },
    );
    driver.click(&format!("{row} .creator-refresh")).await;
    driver.wait_text(&format!("{row} .status"), "the run", |t| t.starts_with("Found 1 new post")).await;

    // Now followed, with the pack.
    driver.click(&format!("{row} .creator-follow")).await;
    driver
        .wait_text(&format!("{row} .creator-note"), "following", |t| t.starts_with("Looks for new posts every 6 hours"))
        .await;

    // The post listed with a link to its analysis.
    driver.click(&format!("{row} .creator-posts")).await;
    driver.wait_text("#creator-posts tbody", "the post", |t| t.contains(&format!("tiktok:{post}"))).await;
    shots.take(&driver, "creators").await;

    // Spike alerts for the creator's posts: off for this creator only, from its page.
    let whose = driver.wait_text("#creator-spike-whose", "whose settings", |t| !t.is_empty()).await;
    assert!(whose.contains("follows the settings that apply to it now"), "{whose}");
    assert_eq!(driver.property("#creator-spike-enabled", "checked").await, true);
    driver.click("#creator-spike-enabled").await;
    driver.click("#creator-spike-save").await;
    driver.wait_text("#creator-spike-status", "saved", |t| t.contains("saved")).await;
    let meaning = driver.text("#creator-spike-meaning").await;
    assert_eq!(meaning, "Spike alerts are turned off for this creator.");
    driver
        .execute("document.querySelector('#creator-spikes').scrollIntoView({block: 'start'});", serde_json::json!([]))
        .await;
    shots.take(&driver, "creator-spike-settings").await;
    let client = app.client(Some(&app.token(&account, "keywords:write").await));
    let own =
        client.get::<serde_json::Value>("/api/v1/spike-alerts/settings/tiktok:user:6800000000000000042").await.ok();
    assert_eq!((&own["own"], &own["enabled"]), (&serde_json::json!(true), &serde_json::json!(false)), "{own}");
    let account_wide = client.get::<serde_json::Value>("/api/v1/spike-alerts/settings").await.ok();
    assert_eq!(account_wide["enabled"], true, "the account's settings are untouched: {account_wide}");
    cova_tests::eventually("the post collected", async || app.job_progress().await.complete == 1).await;
    driver.click("#creator-posts a.creator-post").await;
    driver.wait_url("the analysis", |u| u.contains("#/analyze")).await;
    driver.wait_text("#comments-count", "the comments", |t| t.contains("12 comments")).await;

    driver.quit().await;
    app.stop().await;
}

/// A list's cost before it starts, and each row saying where the balance cut it: 25 comments
/// on three posts of 10 cover two whole, and the third is cut at the 5 left once the others
/// have settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn a_list_is_previewed_and_says_where_the_balance_cut_it() {
    let app = spawn_app_with_sim(SimConfig { latency_ms: 40, ..SimConfig::default() }, |c| {
        c.auth.token_cache_ms = 0;
        c.billing.free_allowance = 0;
    })
    .await;
    let shots = Shots::from_env();
    let base = app.base_url.clone();
    let (driver, _) = signed_in_browser(&app, "lists@example.com", 25).await;

    // Posts of exactly 10 comments.
    let list: Vec<String> = (0..3)
        .map(|k| format!("https://www.tiktok.com/@someone/video/{}", 6_900_000_000_000_000_010_u64 + 1_000 * k))
        .collect();
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.set_value("#analyze-url", &list.join("\n")).await;

    // A limit that is not a whole number is refused in words before anything is sent.
    driver.fill("#analyze-max", "0").await;
    driver.click("#preview-submit").await;
    let refused = driver.wait_text(".alert", "the refusal", |t| !t.is_empty()).await;
    assert!(refused.contains("whole number"), "{refused}");
    driver.fill("#analyze-max", "").await;

    driver.click("#preview-submit").await;
    // Answered at once, the counts arrive while the page asks again.
    let counting = driver.wait_text("#list-preview-summary", "the counting", |t| !t.is_empty()).await;
    assert!(counting.contains("Counting 3 more posts"), "{counting}");
    let summary =
        driver.wait_text("#list-preview-summary", "the counts", |t| t.contains("3 posts, 30 comments counted")).await;
    assert!(summary.contains("You have 25") && !summary.contains("Counting"), "{summary}");
    assert!(summary.contains("enough for 2 posts of 3 whole"), "{summary}");
    assert_eq!(driver.count("#list-preview-table tbody tr.covered").await, 2);
    assert_eq!(driver.count("#list-preview-table .not-covered").await, 1);
    driver
        .execute(
            "document.querySelector('#list-preview-summary').scrollIntoView({block: 'start'});",
            serde_json::json!([]),
        )
        .await;
    shots.take(&driver, "list-preview").await;

    driver.click("#analyze-submit").await;
    driver.wait_text("#batch-summary", "the list's end", |t| t.contains("The list is done")).await;
    assert_eq!(driver.count("#batch [data-state=complete]").await, 3);
    let cut = driver.wait_text("#batch .batch-cut", "the cut row", |t| !t.is_empty()).await;
    assert!(cut.contains("your comment balance ran out (5 of its 10)"), "{cut}");
    assert_eq!(driver.count("#batch .batch-cut").await, 1, "only the post the balance could not cover");
    driver
        .execute(
            "document.querySelector('#batch .batch-cut').scrollIntoView({block: 'center'});",
            serde_json::json!([]),
        )
        .await;
    shots.take(&driver, "list-cut-row").await;

    // While running, a row counts towards what its job can reach (the list's cap, when lower
    // than the post), and a post cut by the balance names its capped count as "or more".
    let words = driver
        .execute(
            "return [listCountWords(arguments[0]), progressWords(arguments[1]), progressWords(arguments[2])];",
            serde_json::json!([
                {"state": "running", "job": {"max_comments": 300, "progress": {"comments_collected": 238, "comments_expected": 400}}},
                {"status": "running", "max_comments": 300, "progress": {"comments_collected": 238, "comments_expected": 400}},
                {"status": "complete", "max_comments": null, "progress": {"comments_collected": 349, "comments_expected": 5000},
                 "result": {"truncated": true, "truncated_reason": "balance", "comments_total": 349}},
            ]),
        )
        .await;
    let words: Vec<String> = serde_json::from_value(words).expect("the page's words");
    assert_eq!(words[0], "238 of 300");
    assert_eq!(words[1], "238 of at most 300 comments (your limit per post)");
    assert_eq!(
        words[2],
        "349 comments collected — cut short: your comment balance ran out (349 of its 5,000 or more)."
    );
    driver.quit().await;
    app.stop().await;
}

/// The page's own fetch of `path` (with the session's cookie), as base64 of the body.
async fn download(driver: &Driver, path: &str) -> Vec<u8> {
    use base64::Engine;
    let b64 = driver
        .execute_async(
            "const done = arguments[1]; fetch(arguments[0]).then(r => r.blob()).then(b => { \
               const f = new FileReader(); f.onload = () => done(f.result.split(',')[1] ?? ''); f.readAsDataURL(b); \
             }, () => done(''));",
            serde_json::json!([path]),
        )
        .await;
    base64::engine::general_purpose::STANDARD.decode(b64.as_str().unwrap_or_default()).expect("base64")
}

/// The rough edges of the second walk-through, each as a person meets it: keyword alerts on
/// a first collection once it is saved, the dashboard after the allowance and after logging in
/// again, messages in words (host names whole, no status codes, no operator advice), a failed
/// job without a moving bar, exports without stray apostrophes and with whole links, the jobs
/// page naming its posts, a revoked token's value gone, a used confirmation link, the last
/// creator removed, and a list that is one sentence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn the_second_walk_through_in_a_browser() {
    let app = spawn_app_with_sim(SimConfig::default(), |c| {
        c.auth.token_cache_ms = 0;
        c.billing.free_allowance = 50;
    })
    .await;
    let shots = Shots::from_env();
    let driver = Driver::start().await;
    let base = app.base_url.clone();
    let email = "second@example.com";
    // Signed up through the page, so that the confirmation link is one the person holds.
    cova_tests::workspace::signed_up(&app, email).await;
    let confirm_link = cova_tests::workspace::mailed_link(&app, email, "confirm").await;
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 2_000).await;
    log_in(&driver, &base, email).await;

    // A used confirmation link, opened while signed in, says all is well.
    driver.goto(&confirm_link).await;
    let said = driver.wait_text("#confirm-status", "the answer", |t| !t.ends_with('…')).await;
    assert!(said.contains("already confirmed"), "{said}");
    assert_eq!(driver.count(".alert:not(:empty)").await, 0, "no error for a link that did its job");

    // 1. Keywords first, then a post collected here and saved: its comments alert at once.
    let id = tiktok_post_id(TikTokScenario::Normal, 66);
    let truth = app.sim.expected_post(&id.to_string());
    let keyword = "price";
    let matcher = cova_domain::text::Matcher::new(&[keyword]);
    let matching = truth
        .comments
        .iter()
        .flat_map(|c| std::iter::once(c).chain(&c.replies))
        .filter(|c| !matcher.find(&c.text).is_empty())
        .count();
    assert!(matching > 0, "the sim's post has comments with {keyword:?}");
    driver.goto(&format!("{base}/#/alerts")).await;
    driver.fill("#keywords", keyword).await;
    driver.click("#keywords-save").await;
    driver.wait_text("#keywords-status", "saved", |t| t.starts_with("Saved")).await;
    let matched = driver.wait_text("#alerts-matched", "what is matched", |t| !t.contains("Loading")).await;
    assert!(matched.contains("No post in your library yet"), "{matched}");
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.fill("#analyze-url", &format!("https://www.tiktok.com/@someone/video/{id}")).await;
    driver.click("#analyze-submit").await;
    driver.wait_text("#analyze-status", "complete", |t| t == "complete").await;
    driver.click("#save-analysis").await;
    driver.wait_text("#save-status", "saved", |t| t.starts_with("Saved")).await;
    driver.goto(&format!("{base}/#/alerts")).await;
    let title = truth.metadata.title.clone().unwrap_or_else(|| truth.metadata.description.clone());
    let first_words: String = title.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    driver.wait_text("#alerts-matched", "the saved post", |t| t.contains(&first_words)).await;
    driver.find("#alerts li.alert-item").await;
    cova_tests::eventually("every matching comment alerted", async || {
        driver.click("#alerts-refresh").await;
        driver.count("#alerts li.alert-item").await == matching
    })
    .await;
    // Saving again alerts nothing twice.
    app.client(Some(&app.token(&account, "library:write").await))
        .post_json(&format!("/api/v1/analyses/tiktok:{id}/save"), serde_json::json!({}))
        .await
        .ok();
    driver.click("#alerts-refresh").await;
    assert_eq!(driver.count("#alerts li.alert-item").await, matching);
    // Each alert names its post as a spike alert does: by its title, not its ref.
    let named = driver.text("#alerts li.alert-item .comment-head a").await;
    assert!(named.contains(&first_words) && !named.contains("tiktok:"), "{named}");
    shots.take(&driver, "alerts-matched").await;

    // 4. The dashboard once the allowance is spent, and after logging in again.
    driver.goto(&format!("{base}/#/dashboard")).await;
    driver.find("#latest-link").await;
    let page = driver.text("main").await;
    assert!(!page.contains("false") && !page.contains("undefined"), "{page}");
    driver.click("#nav-logout").await;
    driver.wait_url("the login page", |u| u.ends_with("#/login")).await;
    log_in(&driver, &base, email).await;
    let latest = driver.wait_text("#latest-title", "the latest collection", |t| !t.is_empty()).await;
    assert!(latest.starts_with(&first_words), "{latest} names the post of {title}");
    shots.take(&driver, "dashboard-returning").await;

    // 5. Host names keep their dots.
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.fill("#analyze-url", "https://vimeo.com/123456").await;
    driver.click("#analyze-submit").await;
    let refused = driver.wait_text(".alert", "the refusal", |t| !t.is_empty()).await;
    assert!(refused.contains("vimeo.com"), "{refused}");

    // 14. A sentence pasted as a list is refused once, as one.
    driver.set_value("#analyze-url", "hello there").await;
    driver.click("#analyze-submit").await;
    let refused = driver.wait_text(".alert", "the refusal", |t| t.contains("hello there")).await;
    assert_eq!(driver.count("#batch tbody tr").await, 0, "not a list of two: {refused}");

    // 6 and 10. A post TikTok does not show in cova's country: what happened in words, no
    // status code or jargon, and no progress bar left moving.
    let blocked = tiktok_post_id(TikTokScenario::RegionBlocked, 10);
    driver.fill("#analyze-url", &format!("https://www.tiktok.com/@someone/video/{blocked}")).await;
    driver.click("#analyze-submit").await;
    driver.wait_text("#analyze-status", "failed", |t| t == "failed").await;
    let why = driver.wait_text(".alert", "the reason", |t| !t.is_empty()).await;
    assert!(why.contains("country"), "{why}");
    for jargon in ["status", "client", "configure", "signer", "proxies"] {
        assert!(!why.to_lowercase().contains(jargon), "{jargon:?} in {why}");
    }
    let hidden =
        driver.execute("return document.querySelector('#analyze-progress').hidden;", serde_json::json!([])).await;
    assert_eq!(hidden, true, "no bar under a failed job");
    assert!(driver.text("#analyze-count").await.contains("nothing was charged"));

    // 13. The jobs page names each post, links its JSON Lines, and that file links whole.
    driver.goto(&format!("{base}/#/jobs")).await;
    let named = driver.wait_text("#jobs tbody tr[data-id] .job-title", "the post's title", |t| !t.is_empty()).await;
    assert!(named.starts_with(&first_words), "{named}");
    let author = driver.text("#jobs tbody tr[data-id] .job-author").await;
    assert!(author.contains(&truth.metadata.author_handle), "{author}");
    let jsonl_href = driver.property("#jobs a.job-export-jsonl", "href").await;
    let jsonl = download(&driver, jsonl_href.as_str().expect("a link")).await;
    let lines: Vec<serde_json::Value> = String::from_utf8(jsonl)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), truth.total_comments());
    let mut links = 0;
    for line in &lines {
        assert_eq!(line["post_url"].as_str().map(|u| u.contains(&id.to_string())), Some(true), "{line}");
        assert!(line["parent_id"].is_null() || line["parent_id"].is_string());
        for m in line["media"].as_array().into_iter().flatten() {
            let url = m["url"].as_str().unwrap_or_default();
            assert!(url.starts_with("http"), "a whole link: {url}");
            links += 1;
        }
    }
    assert!(links > 0, "the post has comment images");

    // 8. Mentions stay as written in XLSX; the CSV keeps its guard.
    driver.goto(&format!("{base}/#/analyze?ref=tiktok:{id}")).await;
    let href = driver.property("#export-xlsx", "href").await;
    let xlsx = download(&driver, href.as_str().expect("a link")).await;
    use calamine::Reader as _;
    let mut book = calamine::Xlsx::new(std::io::Cursor::new(xlsx)).expect("an XLSX workbook");
    let sheet = book.worksheet_range_at(0).expect("a sheet").expect("readable");
    let texts: Vec<String> = sheet.rows().skip(1).map(|r| r[4].to_string()).collect();
    assert!(texts.iter().any(|t| t.starts_with('@')), "a comment starts with a mention");
    assert!(texts.iter().all(|t| !t.starts_with("'")), "no stray apostrophe in XLSX");
    let href = driver.property("#export-csv", "href").await;
    let csv = String::from_utf8(download(&driver, href.as_str().expect("a link")).await).expect("utf-8");
    assert!(csv.contains(",'@"), "the CSV guards a cell that a spreadsheet could run");

    // 12. A revoked token's value leaves the page.
    driver.goto(&format!("{base}/#/tokens")).await;
    driver.fill("#token-name", "short-lived").await;
    driver.click("input[name=scope][value=\"analyze:write\"]").await;
    driver.click("#token-create").await;
    let value = driver.wait_text("#token-value", "the token", |t| t.starts_with("cova_")).await;
    driver.wait_text("#tokens-list", "the new token listed", |t| t.contains("short-lived")).await;
    let token_id = driver
        .execute(
            "return [...document.querySelectorAll('#tokens-list tr[data-id]')].find(r => r.textContent.includes('short-lived')).dataset.id;",
            serde_json::json!([]),
        )
        .await;
    driver.click(&format!(".token-revoke[data-id=\"{}\"]", token_id.as_str().expect("the token's id"))).await;
    driver.answer_dialog(true).await;
    driver.wait_text("#tokens-list", "the token gone", |t| !t.contains("short-lived")).await;
    let hidden = driver.execute("return document.querySelector('#token-created').hidden;", serde_json::json!([])).await;
    assert_eq!(hidden, true, "the box of the new token is closed");
    let page = driver.execute("return document.body.innerText", serde_json::json!([])).await;
    assert!(!page.as_str().unwrap_or_default().contains(&value), "the revoked value is gone");

    // 14. Removing the last creator says the list is empty.
    app.sim.add_creator(cova_sim::SimCreator::tiktok(6_800_000_000_000_000_077, "lastone"));
    driver.goto(&format!("{base}/#/creators")).await;
    driver.fill("#creator-url", "https://www.tiktok.com/@lastone").await;
    driver.click("#creator-add-submit").await;
    driver.find(".creator-delete").await;
    driver.click(".creator-delete").await;
    driver.answer_dialog(true).await;
    driver.wait_text("#creators tbody", "the empty list", |t| t.contains("No creator left")).await;

    // 14. On a phone: a comment row is a few lines, and chart text stays readable.
    driver.resize(390, 844).await;
    driver.goto(&format!("{base}/#/analyze?ref=tiktok:{id}")).await;
    driver.set_value("#comments-view", "table").await;
    driver.find("#comments-table tr.comment-row").await;
    let tallest = driver
        .execute(
            "return Math.max(...[...document.querySelectorAll('#comments-table tr.comment-row')].map(r => r.getBoundingClientRect().height));",
            serde_json::json!([]),
        )
        .await
        .as_f64()
        .expect("a height");
    assert!(tallest < 220.0, "a row on a phone is {tallest} px tall");
    let smallest = driver
        .execute(
            "return Math.min(...[...document.querySelectorAll('#chart-comments-time text')].map(t => t.getBoundingClientRect().height));",
            serde_json::json!([]),
        )
        .await
        .as_f64()
        .expect("a height");
    assert!(smallest >= 10.0, "chart text on a phone is {smallest} px");
    // Both axis titles inside the chart, not cut at its edge.
    let cut = driver
        .execute(
            "const svg = document.querySelector('#chart-comments-time svg').getBoundingClientRect(); \
             return [...document.querySelectorAll('#chart-comments-time .chart-axis-title')] \
               .map(t => [t.textContent, t.getBoundingClientRect()]) \
               .filter(([, r]) => r.top < svg.top - 0.5 || r.bottom > svg.bottom + 0.5 || r.left < svg.left - 0.5 || r.right > svg.right + 0.5) \
               .map(([text]) => text);",
            serde_json::json!([]),
        )
        .await;
    assert_eq!(cut, serde_json::json!([]), "axis titles cut on a phone");
    // A reply's card shows no count of replies (it has none), where a comment's says how many.
    let cards = driver
        .execute(
            "return [...document.querySelectorAll('#comments-table tr.comment-row')].map(r => r.innerText);",
            serde_json::json!([]),
        )
        .await;
    let cards: Vec<&str> = cards.as_array().expect("cards").iter().filter_map(serde_json::Value::as_str).collect();
    assert!(cards.iter().any(|c| c.contains('↳')), "a reply among the rows drawn: {cards:?}");
    assert!(cards.iter().all(|c| !c.contains("— replies")), "{cards:?}");
    driver
        .execute(
            "document.querySelector('#chart-comments-time').scrollIntoView({block: 'start'});",
            serde_json::json!([]),
        )
        .await;
    shots.take(&driver, "comments-chart-phone").await;
    driver.set_value("#comments-view", "threads").await;
    driver.resize(1280, 900).await;

    driver.quit().await;
    app.stop().await;
}

/// A young post's comments over time in minutes with both axes labelled, and a big post's
/// table: only the rows in view drawn, sorted both ways by a header that says so, every row
/// reachable by scrolling, the view kept on the next visit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn a_young_post_and_a_big_table_in_a_browser() {
    let app = spawn_app_with_sim(SimConfig::default(), |c| c.auth.token_cache_ms = 0).await;
    let shots = Shots::from_env();
    let base = app.base_url.clone();
    let (driver, account) = signed_in_browser(&app, "tables@example.com", 10_000).await;

    // A post half an hour old: counted in minutes, every comment in a column, axes labelled.
    let young = tiktok_post_id(TikTokScenario::Normal, 66);
    let truth = app.sim.expected_post(&young.to_string());
    let times: Vec<i64> =
        truth.comments.iter().flat_map(|c| std::iter::once(c).chain(&c.replies)).map(|c| c.create_time).collect();
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.fill("#analyze-url", &format!("https://www.tiktok.com/@someone/video/{young}")).await;
    driver.click("#analyze-submit").await;
    driver.wait_text("#analyze-status", "complete", |t| t == "complete").await;
    driver.find("#chart-comments-time rect.chart-column").await;
    let (drawn, unit) = columns(&driver).await;
    let offset = browser_offset(&driver, times[0]).await;
    assert_eq!((unit, drawn.len()), time_buckets(&times, offset), "{drawn:?}");
    assert!(unit < 3_600_000 && drawn.len() > 3, "a young post is counted in minutes: {unit} ms, {drawn:?}");
    assert_eq!(drawn.iter().sum::<f64>() as usize, truth.total_comments());
    assert!(driver.count("#chart-comments-time .y-tick").await >= 3, "the value axis has its steps");
    assert!(driver.count("#chart-comments-time .x-tick").await >= 2, "the time axis has its times");
    let chart = driver.text("#chart-comments-time").await;
    assert!(chart.contains("Comments per") && chart.contains("minute"), "the bucket is named: {chart}");
    driver
        .execute(
            "document.querySelector('#chart-comments-time').scrollIntoView({block: 'center'});",
            serde_json::json!([]),
        )
        .await;
    shots.take(&driver, "comments-over-time").await;

    app.client(Some(&app.token(&account, "library:write").await))
        .post_json(&format!("/api/v1/analyses/tiktok:{young}/save"), serde_json::json!({}))
        .await
        .ok();

    // A big post in the table.
    let big = tiktok_post_id(TikTokScenario::Normal, 2_000);
    let all = app.sim.expected_post(&big.to_string()).total_comments();
    driver.fill("#analyze-url", &format!("https://www.tiktok.com/@someone/video/{big}")).await;
    driver.click("#analyze-submit").await;
    driver.wait_text("#analyze-status", "complete", |t| t == "complete").await;
    driver.set_value("#comments-view", "table").await;
    driver
        .wait_text("#comments-count", "every comment", |t| t.starts_with(&format!("Showing {} of", fmt_thousands(all))))
        .await;
    let drawn = driver.count("#comments-table tr.comment-row").await;
    assert!(drawn > 5 && drawn < 80, "{drawn} rows drawn of {all}");

    // A header sorts, and sorts back; the column says which way.
    let likes = async || -> Vec<i64> {
        let v = driver
            .execute("return [...document.querySelectorAll('#comments-table tr.comment-row')].map(r => Number(r.children[3].textContent.replace(/\\D/g, '')));", serde_json::json!([]))
            .await;
        v.as_array().expect("likes").iter().filter_map(serde_json::Value::as_i64).collect()
    };
    driver.click("#comments-table button[data-sort=likes]").await;
    let th = "#comments-table th:nth-child(4)";
    assert_eq!(
        driver
            .execute("return document.querySelector(arguments[0]).getAttribute('aria-sort');", serde_json::json!([th]))
            .await,
        "descending"
    );
    let down = likes().await;
    assert!(down.windows(2).all(|w| w[0] >= w[1]) && down[0] > 0, "most liked first: {down:?}");
    // The Sort menu says the table's order, whichever way a header sorted it.
    let menu = "const s = document.querySelector('#comments-sort'); return s.options[s.selectedIndex].text;";
    assert_eq!(driver.execute(menu, serde_json::json!([])).await, "Most liked");
    driver.click("#comments-table button[data-sort=likes]").await;
    assert_eq!(
        driver
            .execute("return document.querySelector(arguments[0]).getAttribute('aria-sort');", serde_json::json!([th]))
            .await,
        "ascending"
    );
    let up = likes().await;
    assert!(up.windows(2).all(|w| w[0] <= w[1]), "least liked first: {up:?}");
    assert_eq!(driver.execute(menu, serde_json::json!([])).await, "Least liked");
    assert_eq!(driver.count("#comments-table th[aria-sort]").await, 1, "one column is sorted");

    // Scrolled to the end: the last row is there, and still only the rows in view.
    driver
        .execute(
            "const s = document.querySelector('.comments-scroller'); s.scrollTop = s.scrollHeight;",
            serde_json::json!([]),
        )
        .await;
    let last = (all + 1).to_string();
    cova_tests::eventually("the last row drawn", async || {
        driver
            .execute(
                "const s = document.querySelector('.comments-scroller'); s.scrollTop = s.scrollHeight;",
                serde_json::json!([]),
            )
            .await;
        driver.count(&format!("#comments-table tr[aria-rowindex=\"{last}\"]")).await == 1
    })
    .await;
    assert!(driver.count("#comments-table tr.comment-row").await < 80);
    shots.take(&driver, "comments-table-big").await;

    // The table is the view next time.
    driver.goto(&format!("{base}/#/analyze?ref=tiktok:{young}")).await;
    driver.find("#comments-table tr.comment-row").await;
    assert_eq!(driver.property("#comments-view", "value").await, "table");
    driver.quit().await;
    app.stop().await;
}

/// `n` as the page writes it in English (1,234).
fn fmt_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn an_instagram_post_and_account_in_a_browser() {
    let app = spawn_app_with_sim(SimConfig::default(), |c| c.auth.token_cache_ms = 0).await;
    let shots = Shots::from_env();
    let base = app.base_url.clone();
    let (driver, _account) = signed_in_browser(&app, "reels@example.com", 1_000).await;
    let code = cova_sim::instagram_shortcode(cova_sim::InstagramScenario::Normal, 60);
    let truth = app.sim.expected_instagram_post(&code).expect("a simulated post");

    // A reel read logged out: its platform named, and the part a visitor is shown said in words.
    driver.goto(&format!("{base}/#/analyze")).await;
    driver.fill("#analyze-url", &format!("https://www.instagram.com/reel/{code}/")).await;
    driver.click("#preview-submit").await;
    let preview = driver.text("#preview .preview").await;
    assert!(preview.contains("Instagram · video"), "{preview}");
    assert!(preview.contains(&format!("@{}", truth.metadata.author_handle)), "{preview}");
    driver.click("#analyze-submit").await;
    driver.wait_text("#analyze-status", "complete", |t| t == "complete").await;
    let said = driver.text("#truncation").await;
    assert!(said.contains("Instagram shows a visitor only part of a post's comments"), "{said}");
    assert!(said.contains("Refreshing the post later collects what Instagram shows then"), "{said}");
    assert!(!said.contains("visitor_view") && !said.contains("balance"), "{said}");
    // The job panel says why it has fewer than the post, not only how many.
    let count = driver.text("#analyze-count").await;
    let why =
        "15 comments collected — only the part of its comments Instagram shows a visitor, without replies (15 of its ";
    assert!(count.starts_with(why) && count.contains("only they were charged"), "{count}");
    driver.wait_text("#comments-count", "the comments", |t| t.contains("15")).await;
    // A comment whose replies Instagram did not show says so beside its count.
    let counts = driver
        .execute(
            "return [...document.querySelectorAll('#comments .reply-count')].map((e) => e.textContent);",
            serde_json::json!([]),
        )
        .await;
    let counts: Vec<String> = serde_json::from_value(counts).expect("reply counts");
    assert!(!counts.is_empty(), "no comment with replies among the 15 shown");
    assert!(counts.iter().all(|t| t.ends_with("on Instagram, which shows no replies to a visitor")), "{counts:?}");
    shots.take(&driver, "instagram-post").await;

    // An Instagram account, added by its URL, is listed as one.
    app.sim.add_creator(cova_sim::SimCreator::instagram(5_512, "glow.reels"));
    driver.goto(&format!("{base}/#/creators")).await;
    driver.fill("#creator-url", "https://www.instagram.com/glow.reels/").await;
    driver.click("#creator-add-submit").await;
    driver.wait_text("#creator-status", "added", |t| t.contains("@glow.reels")).await;
    let row = driver.text("tr[data-ref=\"instagram:user:5512\"]").await;
    assert!(row.contains("Instagram"), "{row}");
    driver.quit().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn a_spike_in_a_browser() {
    use cova_sim::Tone;
    let (app, clock) = cova_tests::spawn_on_clock("2026-06-01T00:00:00Z", |c| c.auth.token_cache_ms = 0).await;
    let shots = Shots::from_env();
    let base = app.base_url.clone();
    let hour = 3_600_000_i64;
    let t0 = clock.now_ms();
    app.sim.set_clock_ms(t0);
    let email = "spikes@example.com";
    cova_tests::workspace::signed_up(&app, email).await;
    let account = accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 5_000).await;
    let client = app.client(Some(&app.token(&account, "analyze:write,library:write,keywords:write").await));

    // A day at twelve comments an hour, then a burst of 50 in the last half hour.
    let id = tiktok_post_id(TikTokScenario::Normal, 0).to_string();
    let usual: Vec<(i64, Tone)> = (0..24 * 12).map(|i| ((t0 + i * hour / 12 + 90_000) / 1000, Tone::Usual)).collect();
    app.sim.post_comments(&id, &usual);
    let day = t0 + 24 * hour;
    clock.set(day);
    app.sim.set_clock_ms(day);
    let first = client.analyze(&format!("https://www.tiktok.com/@a/video/{id}"), None).await.ok();
    client.wait_job(first["job_id"].as_str().expect("job")).await;
    let at = day + 3 * hour;
    let mut more: Vec<(i64, Tone)> = (0..36).map(|i| ((day + i * hour / 12 + 90_000) / 1000, Tone::Usual)).collect();
    more.extend((0..50).map(|i| ((at - 30 * 60_000 + i * 36_000) / 1000, Tone::Usual)));
    app.sim.post_comments(&id, &more);
    clock.set(at);
    app.sim.set_clock_ms(at);
    let refresh = client.refresh(&format!("tiktok:{id}")).await.ok();
    client.wait_job(refresh["job_id"].as_str().expect("job")).await;
    cova_tests::eventually("the spike alert", async || {
        let r = client.get::<serde_json::Value>("/api/v1/spike-alerts").await;
        r.status == 200 && r.ok()["items"].as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    // A cooldown set in minutes through the API, which the page shows in hours.
    client.put_json("/api/v1/spike-alerts/settings", serde_json::json!({"cooldown_min": 90})).await.ok();

    let driver = Driver::start().await;
    log_in(&driver, &base, email).await;
    driver.goto(&format!("{base}/#/alerts")).await;
    let said = driver.wait_text("#spike-alerts .spike-item", "the spike", |t| !t.is_empty()).await;
    assert!(said.contains("Drawing comments fast") && said.contains("in the hour to"), "{said}");
    assert!(!said.contains("volume") && !said.contains("expected"), "in words: {said}");
    let meaning = driver.text("#spike-meaning").await;
    assert!(
        meaning.contains("20 comments") && meaning.contains("3 times") && meaning.contains("90 minutes"),
        "{meaning}"
    );
    driver
        .execute("document.querySelector('#spike-form').scrollIntoView({block: 'start'});", serde_json::json!([]))
        .await;
    shots.take(&driver, "spike-alerts").await;

    // The settings: stricter, saved, and said in figures.
    driver.set_value("#spike-sensitivity", "strict").await;
    driver.click("#spike-save").await;
    driver.wait_text("#spike-status", "saved", |t| t.contains("saved")).await;
    let meaning = driver.text("#spike-meaning").await;
    assert!(meaning.contains("50 comments") && meaning.contains("5 times"), "{meaning}");
    let stored = client.get::<serde_json::Value>("/api/v1/spike-alerts/settings").await.ok();
    assert_eq!(stored["cooldown_min"], 90, "saving another field keeps the cooldown: {stored}");

    // The post's chart marks the spike over the columns of its hour.
    driver.click("#spike-alerts .spike-item a").await;
    driver.find("#chart-comments-time rect.chart-mark").await;
    let marked = driver
        .execute(
            "const m = document.querySelector('#chart-comments-time rect.chart-mark'); const x0 = +m.getAttribute('x'), x1 = x0 + +m.getAttribute('width'); return [...document.querySelectorAll('#chart-comments-time rect.chart-column')].filter(c => +c.getAttribute('x') >= x0 && +c.getAttribute('x') + +c.getAttribute('width') <= x1).map(c => +c.dataset.y);",
            serde_json::json!([]),
        )
        .await;
    let marked: Vec<f64> = marked.as_array().expect("columns").iter().filter_map(serde_json::Value::as_f64).collect();
    let tallest = driver
        .execute("return Math.max(...[...document.querySelectorAll('#chart-comments-time rect.chart-column')].map(c => +c.dataset.y));", serde_json::json!([]))
        .await
        .as_f64()
        .expect("a number");
    assert!(
        !marked.is_empty() && marked.contains(&tallest),
        "the burst's column is marked: {marked:?}, tallest {tallest}"
    );
    // The same hours turning negative too: both words readable, one under the other.
    let overlapping = driver
        .execute(
            "const fig = document.querySelector('#chart-comments-time'); \
             const m = fig.querySelector('rect.chart-mark'); \
             CovaChart.mark(fig, [{start: +m.dataset.start, end: +m.dataset.end, kind: 'sentiment', label: 'turned negative'}]); \
             const boxes = [...fig.querySelectorAll('.chart-mark-label')].map(l => l.getBoundingClientRect()); \
             const svg = fig.querySelector('svg').getBoundingClientRect(); \
             const inside = boxes.every(b => b.left >= svg.left - 0.5 && b.right <= svg.right + 0.5); \
             return inside && boxes.length === 2 && !(boxes[0].left < boxes[1].right && boxes[1].left < boxes[0].right \
               && boxes[0].top < boxes[1].bottom && boxes[1].top < boxes[0].bottom);",
            serde_json::json!([]),
        )
        .await;
    assert_eq!(
        overlapping,
        serde_json::json!(true),
        "two marks of the same hours print their words apart, on the chart"
    );
    driver
        .execute(
            "document.querySelector('#chart-comments-time').scrollIntoView({block: 'center'});",
            serde_json::json!([]),
        )
        .await;
    shots.take(&driver, "spike-chart").await;
    let judged = driver.wait_text("#spike-judging", "what the checks judge", |t| !t.is_empty()).await;
    assert!(judged.contains("compares this post's latest hour of comments with its own rate"), "{judged}");

    // The post's own settings, from its page: saved, then given back to the account's.
    let whose = driver.wait_text("#post-spike-whose", "whose settings", |t| !t.is_empty()).await;
    assert!(whose.contains("follows the settings that apply to it now"), "{whose}");
    let reset_hidden =
        driver.execute("return document.querySelector('#post-spike-reset').hidden;", serde_json::json!([])).await;
    assert_eq!(reset_hidden, serde_json::json!(true), "nothing of its own to remove yet");
    driver.set_value("#post-spike-sensitivity", "sensitive").await;
    driver.click("#post-spike-save").await;
    driver.wait_text("#post-spike-status", "saved", |t| t.contains("saved")).await;
    let path = format!("/api/v1/spike-alerts/settings/tiktok:{id}");
    let own = client.get::<serde_json::Value>(&path).await.ok();
    assert_eq!(
        (&own["own"], &own["sensitivity"]),
        (&serde_json::json!(true), &serde_json::json!("sensitive")),
        "{own}"
    );
    let account_wide = client.get::<serde_json::Value>("/api/v1/spike-alerts/settings").await.ok();
    assert_eq!(account_wide["sensitivity"], "strict", "the account keeps its own: {account_wide}");
    assert!(driver.text("#post-spike-whose").await.contains("settings of its own"));
    driver
        .execute("document.querySelector('#post-spikes').scrollIntoView({block: 'start'});", serde_json::json!([]))
        .await;
    shots.take(&driver, "post-spike-settings").await;
    driver.click("#post-spike-reset").await;
    driver.wait_text("#post-spike-status", "given back", |t| t.contains("account's settings again")).await;
    let back = client.get::<serde_json::Value>(&path).await.ok();
    assert_eq!(
        (&back["own"], &back["sensitivity"]),
        (&serde_json::json!(false), &serde_json::json!("strict")),
        "{back}"
    );

    // A post collected two hours after its first comment says it is too young to judge.
    // An id outside the simulator's scenarios: a post of no comments of its own.
    let young = "6900000000000005000";
    app.sim.post_comments(
        young,
        &(0..20).map(|i| ((at - 2 * hour + i * 360_000) / 1000, Tone::Usual)).collect::<Vec<_>>(),
    );
    let job = client.analyze(&format!("https://www.tiktok.com/@a/video/{young}"), None).await.ok();
    client.wait_job(job["job_id"].as_str().expect("job")).await;
    driver.goto(&format!("{base}/#/analyze?ref=tiktok:{young}")).await;
    let waiting = driver.wait_text("#spike-judging", "the young post's wait", |t| !t.is_empty()).await;
    assert!(waiting.contains("too young to judge") && waiting.contains("7 hours"), "{waiting}");
    assert!(!waiting.contains("volume_from") && !waiting.contains("waiting"), "in words: {waiting}");
    driver
        .execute("document.querySelector('#spike-judging').scrollIntoView({block: 'center'});", serde_json::json!([]))
        .await;
    shots.take(&driver, "spike-young-post").await;
    driver.quit().await;
    app.stop().await;
}

/// The search of every kept comment, from the header's box: hits grouped by post and as one
/// list, the matched words marked, a filter, a refusal said in words, and a hit opened in its
/// post's thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver (installed by .ci/run); runs with --include-ignored"]
async fn searching_every_kept_comment_in_a_browser() {
    let app = spawn_app_with_sim(SimConfig::default(), |c| c.auth.token_cache_ms = 0).await;
    let shots = Shots::from_env();
    let base = app.base_url.clone();
    let (driver, account) = signed_in_browser(&app, "search@example.com", 1_000).await;
    let token = app.token(&account, "analyze:write").await;
    let client = app.client(Some(&token));
    let posts = [tiktok_post_id(TikTokScenario::Normal, 120), tiktok_post_id(TikTokScenario::Normal, 60)];
    for id in posts {
        client.collect(id).await;
    }
    let query = cova_analyzers::search::Query::parse("price").expect("a query");
    let priced: Vec<(u64, String, bool)> = posts
        .iter()
        .flat_map(|id| {
            let post = app.sim.expected_post(&id.to_string());
            post.comments
                .iter()
                .flat_map(|c| std::iter::once((c, false)).chain(c.replies.iter().map(|r| (r, true))))
                .filter(|(c, _)| !query.matches(&c.text, Some(&c.language)).is_empty())
                .map(|(c, reply)| (*id, c.id.clone(), reply))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(priced.len() > 2, "the simulator's posts talk about prices");

    // The header's box opens the search page with the words, grouped by post.
    driver.goto(&format!("{base}/#/library")).await;
    driver.fill("#nav-search-q", "Price").await;
    driver.execute("document.getElementById('nav-search').requestSubmit();", serde_json::json!([])).await;
    driver.wait_url("the search page", |u| u.contains("#/search?q=Price")).await;
    let found = format!("{} comments found in your library.", priced.len());
    driver.wait_text("#search-status", "the hits", |t| t == found).await;
    assert_eq!(driver.count(".search-hit").await, priced.len());
    let groups = priced.iter().map(|p| p.0).collect::<std::collections::BTreeSet<_>>().len();
    assert_eq!(driver.count(".search-group").await, groups, "one group per post");
    let marks = driver
        .execute(
            "return [...document.querySelectorAll('.search-hit')].map((li) => \
               [...li.querySelectorAll('mark')].map((m) => m.textContent.toLowerCase()));",
            serde_json::json!([]),
        )
        .await;
    let marks: Vec<Vec<String>> = serde_json::from_value(marks).expect("marks");
    assert!(marks.iter().all(|m| !m.is_empty() && m.iter().all(|w| w == "price")), "{marks:?}");
    shots.take(&driver, "search").await;

    // One list; then replies only.
    driver.set_value("#search-group", "list").await;
    assert_eq!(driver.count("#search-list .search-hit").await, priced.len());
    driver.set_value("#search-replies", "only").await;
    driver.click("#search-submit").await;
    let replies = priced.iter().filter(|p| p.2).count();
    assert!(replies > 0 && replies < priced.len(), "replies and comments talk about prices");
    let said = format!(
        "{} found in your library.",
        if replies == 1 { "1 comment".to_owned() } else { format!("{replies} comments") }
    );
    driver.wait_text("#search-status", "replies only", |t| t == said).await;
    assert_eq!(driver.count(".search-hit").await, replies);

    // A filter the API would refuse is said in words, before anything is sent.
    driver.set_value("#search-replies", "").await;
    driver.fill("#search-language", "spanish").await;
    driver.click("#search-submit").await;
    driver.wait_text(".alert", "the refusal", |t| t.contains("two-letter code")).await;
    driver.fill("#search-language", "").await;
    driver.click("#search-submit").await;
    driver.wait_text("#search-status", "all hits again", |t| t == found).await;

    // A hit opens in its post's thread, marked there, even for a reader of the table view.
    driver.execute("localStorage.setItem('cova.commentsView', 'table');", serde_json::json!([])).await;
    let first = driver.execute("return document.querySelector('.search-hit').dataset.id;", serde_json::json!([])).await;
    let first = first.as_str().expect("a hit's id").to_owned();
    driver.click(".search-hit .open-thread").await;
    driver.wait_url("the post's page", |u| u.contains("#/analyze?") && u.contains(&first)).await;
    let focused = driver.find(&format!(".comment.focused[data-id=\"{first}\"]")).await;
    drop(focused);
    let kept = driver.execute("return localStorage.getItem('cova.commentsView');", serde_json::json!([])).await;
    assert_eq!(kept, "table", "the reader's own view stays saved");
    driver.quit().await;
    app.stop().await;
}
