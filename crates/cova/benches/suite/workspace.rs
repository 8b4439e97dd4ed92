//! `COVA_BENCH_ONLY=workspace`: the workspace's comments table with a 5,000-comment post in
//! headless Chromium.

use super::{COLLECT_COMMENTS, Report};
use cova_sim::{SimConfig, TikTokScenario, tiktok_post_id};

/// The workspace's comments table with a 5,000-comment post, in headless Chromium (Debian's
/// `chromium` and `chromium-driver`): the time from the result's arrival (its response's end
/// in the browser's resource timing) to the first rows on screen, sorting and filtering (from
/// the redraw's start to the frame after it, the page's own `performance.measure`), scrolling
/// (frame intervals from `requestAnimationFrame` and long animation frames from the browser's
/// timeline while the table scrolls from top to bottom), and the page's size (DOM nodes, JS heap).
async fn workspace_table(report: &mut Report) {
    use cova_tests::browser::Driver;
    if !std::path::Path::new("/usr/bin/chromedriver").exists() {
        report.add("workspace_table_5000", "skipped (chromium and chromium-driver are not installed)");
        return;
    }
    let app = cova_tests::spawn_app_with_sim(SimConfig::default(), |c| {
        c.limits.api_requests_per_minute = 10_000_000;
        c.auth.token_cache_ms = 0;
    })
    .await;
    let email = "table@example.com";
    cova_tests::workspace::signed_up(&app, email).await;
    let account = cova_storage::repo::accounts::find_by_email(app.db(), email).await.expect("db").expect("account");
    app.grant(&account, 10_000).await;
    let token = app.token(&account, "analyze:write,library:write").await;
    let id = tiktok_post_id(TikTokScenario::Normal, COLLECT_COMMENTS);
    let job = app.client(Some(&token)).collect(id).await;
    let job_id = job["job_id"].as_str().expect("job id").to_owned();

    let driver = Driver::start().await;
    let base = app.base_url.clone();
    driver.goto(&format!("{base}/#/login")).await;
    driver.fill("#login-email", email).await;
    driver.fill("#login-password", cova_tests::workspace::PASSWORD).await;
    driver.click("#login-submit").await;
    driver.wait_url("the dashboard", |u| u.ends_with("#/dashboard")).await;
    driver.execute("localStorage.setItem('cova.commentsView', 'table');", serde_json::json!([])).await;

    let mut first_rows = Vec::new();
    for _ in 0..5 {
        // A fresh page each time (the timeline starts over), then the job opened from it.
        driver.goto(&format!("{base}/#/dashboard")).await;
        driver.execute("location.reload();", serde_json::json!([])).await;
        driver.find("#latest-link").await;
        driver.goto(&format!("{base}/#/analyze?job={job_id}")).await;
        driver.find("#comments-table tr.comment-row").await;
        let took = wait_measure(&driver, 1, &format!(
            "const r = performance.getEntriesByType('resource').filter(e => e.name.endsWith('/api/v1/analyze/{job_id}')).at(-1); \
             const d = performance.getEntriesByName('cova:comments-drawn').at(-1); \
             return r && d ? d.startTime + d.duration - r.responseEnd : null;"
        ))
        .await;
        first_rows.push(took);
    }
    let (rows, heap_mib, nodes) = page_size(&driver).await;
    report.add(
        "workspace_table_5000_first_rows",
        format!(
            "{} (median of 5; result parsed, keys built, chart and first rows drawn; {rows} rows in the DOM)",
            ms_f(median(&mut first_rows))
        ),
    );

    // Sorting: a header clicked, each way, five times.
    let mut sorts = Vec::new();
    for k in 0..10 {
        let before = measures(&driver).await;
        let column = if k % 4 < 2 { "likes" } else { "time" };
        driver.click(&format!("#comments-table button[data-sort={column}]")).await;
        sorts.push(
            wait_measure(
                &driver,
                before + 1,
                "return performance.getEntriesByName('cova:comments-drawn').at(-1).duration;",
            )
            .await,
        );
    }
    // Filtering: a search typed (the page waits 150 ms for typing to pause; not counted).
    let mut filters = Vec::new();
    for word in ["price", "where", "", "buy", "love", ""] {
        let before = measures(&driver).await;
        driver.set_value("#comments-search", word).await;
        filters.push(
            wait_measure(
                &driver,
                before + 1,
                "return performance.getEntriesByName('cova:comments-drawn').at(-1).duration;",
            )
            .await,
        );
    }
    report.add(
        "workspace_table_5000_sort",
        format!(
            "median {}, max {} (10 header clicks: likes and time, each way)",
            ms_f(median(&mut sorts)),
            ms_f(sorts.iter().cloned().fold(0.0, f64::max))
        ),
    );
    report.add(
        "workspace_table_5000_filter",
        format!(
            "median {}, max {} (6 searches; after the 150 ms typing pause)",
            ms_f(median(&mut filters)),
            ms_f(filters.iter().cloned().fold(0.0, f64::max))
        ),
    );

    // Scrolling from the top to the bottom, a step per frame.
    let scrolled = driver
        .execute_async(
            "const done = arguments[0]; const s = document.querySelector('.comments-scroller'); s.scrollTop = 0; \
             const long = []; let obs = null; \
             try { obs = new PerformanceObserver(l => long.push(...l.getEntries().map(e => e.duration))); obs.observe({type: 'long-animation-frame'}); } catch (e) {} \
             const stamps = []; const step = Math.max(40, (s.scrollHeight - s.clientHeight) / 600); \
             const tick = (t) => { stamps.push(t); \
               if (s.scrollTop + s.clientHeight >= s.scrollHeight - 1 || stamps.length > 2000) { \
                 setTimeout(() => { obs?.disconnect(); \
                   const gaps = stamps.slice(1).map((x, i) => x - stamps[i]).sort((a, b) => a - b); \
                   done({frames: gaps.length, p50: gaps[Math.floor(gaps.length * 0.5)], p95: gaps[Math.floor(gaps.length * 0.95)], \
                         max: gaps.at(-1), slow: gaps.filter(g => g > 25).length, long: long.length, longest: Math.max(0, ...long), \
                         rows: document.querySelectorAll('#comments-table tr.comment-row').length}); }, 100); \
                 return; } \
               s.scrollTop += step; requestAnimationFrame(tick); }; \
             requestAnimationFrame(tick);",
            serde_json::json!([]),
        )
        .await;
    let f = |k: &str| scrolled[k].as_f64().unwrap_or(f64::NAN);
    report.add(
        "workspace_table_5000_scroll",
        format!(
            "{} frames top to bottom: interval p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms; {} frames over 25 ms; {} long animation frames (longest {:.0} ms); {} rows in the DOM at the end",
            f("frames"), f("p50"), f("p95"), f("max"), f("slow"), f("long"), f("longest"), f("rows")
        ),
    );
    let (rows_after, heap_after, nodes_after) = page_size(&driver).await;
    report.add(
        "workspace_table_5000_page_size",
        format!("{nodes} DOM nodes, {heap_mib:.1} MiB JS heap on opening; {nodes_after} nodes, {heap_after:.1} MiB after scrolling to the end ({rows_after} rows drawn)"),
    );
    driver.quit().await;
    app.stop().await;
}

/// How many `cova:comments-drawn` measures the page has.
async fn measures(driver: &cova_tests::browser::Driver) -> usize {
    driver
        .execute("return performance.getEntriesByName('cova:comments-drawn').length;", serde_json::json!([]))
        .await
        .as_u64()
        .unwrap_or(0) as usize
}

/// Waits for the page's `at_least`-th `cova:comments-drawn` measure, then returns `script`'s
/// number (milliseconds).
async fn wait_measure(driver: &cova_tests::browser::Driver, at_least: usize, script: &str) -> f64 {
    cova_tests::eventually("the page's measure", async || measures(driver).await >= at_least).await;
    cova_tests::until("a number", async || driver.execute(script, serde_json::json!([])).await.as_f64()).await
}

/// Rows drawn, JS heap in use (MiB) and DOM nodes of the page now.
async fn page_size(driver: &cova_tests::browser::Driver) -> (u64, f64, u64) {
    let v = driver
        .execute(
            "return [document.querySelectorAll('#comments-table tr.comment-row').length, \
                     (performance.memory?.usedJSHeapSize ?? 0) / 1048576, document.getElementsByTagName('*').length];",
            serde_json::json!([]),
        )
        .await;
    (v[0].as_u64().unwrap_or(0), v[1].as_f64().unwrap_or(0.0), v[2].as_u64().unwrap_or(0))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms_f(x: f64) -> String {
    format!("{x:.1} ms")
}

pub(super) async fn run(report: &mut Report) {
    workspace_table(report).await;
}
