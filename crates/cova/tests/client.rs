//! `cova client …`, the integrator's command line, run as a real process against `cova serve`
//! on the simulator: every comment written as CSV or JSON Lines, the library and AI commands,
//! and the exit code of each error class. The client's environment is only what each test
//! gives it (COVA_URL, COVA_TOKEN, and a temporary HOME and XDG_CONFIG_HOME, so the
//! developer's own ~/.config is never read).

use cova_sim::{SimConfig, SimPost, TikTokScenario, tiktok_post_id};
use cova_testdb::TestDatabase;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Output};

use crate::common::{Cova, stderr, stdout};

/// Runs `cova client <args>` with nothing of the caller's environment but PATH.
fn client(home: &Path, url: Option<&str>, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cova"));
    cmd.arg("client")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"));
    if let Some(url) = url {
        cmd.env("COVA_URL", url);
    }
    if let Some(token) = token {
        cmd.env("COVA_TOKEN", token);
    }
    cmd.output().expect("cova client runs")
}

fn run_ok(cova: &Cova, args: &[&str]) -> String {
    let out = cova.run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

fn token(cova: &Cova, email: &str, scopes: &str) -> String {
    run_ok(cova, &["admin", "tokens", "create", "--email", email, "--scopes", scopes])
        .lines()
        .last()
        .expect("the token is the last line")
        .to_owned()
}

/// Every comment id of a post on the simulator, top-level comments and replies.
fn comment_ids(post: &SimPost) -> BTreeSet<String> {
    post.comments
        .iter()
        .flat_map(|c| std::iter::once(c.id.clone()).chain(c.replies.iter().map(|r| r.id.clone())))
        .collect()
}

/// The header and the records of a CSV text.
fn records(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let text = text.strip_prefix('\u{feff}').expect("a CSV export starts with a byte order mark");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().expect("a header row").iter().map(str::to_owned).collect();
    let rows = reader.records().map(|r| r.expect("a CSV record").iter().map(str::to_owned).collect()).collect();
    (header, rows)
}

/// Asserts the exit code, and that the error is one `cova: …` line on stderr.
fn assert_fails(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "expected exit {code}: {err}");
    assert!(err.starts_with("cova: ") && err.contains(needle), "expected `{needle}` in: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

/// `cova client` for one service, with the token given per call.
struct Caller<'a> {
    home: &'a Path,
    base: &'a str,
}

impl Caller<'_> {
    fn run(&self, token: &str, args: &[&str]) -> Output {
        client(self.home, Some(self.base), Some(token), args)
    }
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cova serve` on the simulator and a fresh database, with an account of 5,000 comments and
/// two of its tokens, for the client to call.
struct Service {
    db: TestDatabase,
    /// Where its keys are, on a shared cache.
    cache: cova_config::CacheConfig,
    sim: cova_sim::SimHandle,
    serve: Serve,
    base: String,
    home: tempfile::TempDir,
    /// Every scope the client's commands use.
    full: String,
    analyze_only: String,
}

impl Service {
    async fn start() -> Self {
        let db = TestDatabase::create().await;
        let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator");
        // Each service its own keys on a shared cache (the tests of this file run at once).
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = format!("cl{}x{n}", std::process::id());
        let sim_url = sim.base_url();
        let cova = Cova::on_sim(
            &db.config.url,
            sim_url,
            &prefix,
            &[
                ("COVA_PLATFORMS__TIKTOK__RETRY_BASE_MS", "5".into()),
                ("COVA_PLATFORMS__INSTAGRAM__WEB_BASE_URL", format!("{sim_url}/ig")),
                ("COVA_PLATFORMS__INSTAGRAM__REQUESTS_PER_SECOND", "0".into()),
                ("COVA_MEDIA__PREFETCH_WAIT_MS", "0".into()),
            ],
        );
        let cache = cova_config::CacheConfig {
            url: std::env::var("COVA_TEST_CACHE_URL").unwrap_or_else(|_| "memory://".into()),
            prefix: prefix.clone(),
            ..Default::default()
        };
        run_ok(&cova, &["migrate"]);
        run_ok(&cova, &["admin", "accounts", "create", "--email", "dev@example.com"]);
        run_ok(&cova, &["admin", "packs", "grant", "--email", "dev@example.com", "--comments", "5000"]);
        let full = token(&cova, "dev@example.com", "metadata:read,analyze:write,library:write,ai:write");
        let analyze_only = token(&cova, "dev@example.com", "analyze:write");
        let (child, base) = cova.start("serve", true);
        let serve = Serve(child);
        let base = base.expect("base url");
        let home = tempfile::tempdir().expect("temp home");
        Service { db, cache, sim, serve, base, home, full, analyze_only }
    }

    fn caller(&self) -> Caller<'_> {
        Caller { home: self.home.path(), base: &self.base }
    }

    async fn stop(self) {
        drop(self.serve);
        cova_tests::forget_keys(&self.cache).await;
        self.sim.stop().await;
        let _ = self.db.drop_database().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_collects_and_exports_against_serve() {
    let service = Service::start().await;
    let (full, analyze_only) = (service.full.as_str(), service.analyze_only.as_str());
    let (home, sim, caller) = (service.home.path(), &service.sim, service.caller());

    // `usage`: the API's JSON, with the balance.
    let out = caller.run(full, &["usage"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let usage: Value = serde_json::from_str(&stdout(&out)).expect("usage is JSON");
    assert_eq!(usage["comments"]["remaining"], 5000);
    assert_eq!(usage["account"]["email"], "dev@example.com");

    // `metadata`.
    let id = tiktok_post_id(TikTokScenario::Normal, 150);
    let url = format!("https://www.tiktok.com/@someone/video/{id}");
    let out = caller.run(full, &["metadata", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let metadata: Value = serde_json::from_str(&stdout(&out)).expect("metadata is JSON");
    assert_eq!(metadata["ref"], format!("tiktok:{id}"));

    // `analyze --wait --format csv -o FILE`: one row per comment the post has, replies included.
    let post = sim.expected_post(&id.to_string());
    let file = home.join("out.csv");
    let file_arg = file.to_str().expect("a UTF-8 path");
    let out = caller.run(full, &["analyze", &url, "--wait", "--format", "csv", "-o", file_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).is_empty(), "the result went to the file: {}", stdout(&out));
    assert!(stderr(&out).is_empty(), "no progress bar when stderr is not a terminal: {}", stderr(&out));
    assert!(!home.join("out.csv.tmp").exists(), "the temporary file was renamed");
    let (header, rows) = records(&std::fs::read_to_string(file.as_path()).expect("the CSV file"));
    assert_eq!(header[..3], ["post_url", "post_title", "id"]);
    assert_eq!(header.len(), 16, "{header:?}");
    assert_eq!(rows.len(), post.total_comments(), "one data row per comment");
    let ids: BTreeSet<String> = rows.iter().map(|r| r[2].clone()).collect();
    assert_eq!(ids, comment_ids(&post));

    // `analyze --wait --format jsonl` to stdout: one JSON object per line.
    let id2 = tiktok_post_id(TikTokScenario::Normal, 40);
    let url2 = format!("https://www.tiktok.com/@someone/video/{id2}");
    let post2 = sim.expected_post(&id2.to_string());
    let out = caller.run(full, &["analyze", &url2, "--wait", "--format", "jsonl"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
    assert!(lines.iter().all(Value::is_object), "{text}");
    assert_eq!(lines.len(), post2.total_comments());
    let ids: BTreeSet<String> = lines.iter().filter_map(|l| l["id"].as_str().map(str::to_owned)).collect();
    assert_eq!(ids, comment_ids(&post2));
    // Each line names its post, so that the lines of several posts in one file stay apart.
    assert!(
        lines
            .iter()
            .all(|l| l["post_url"].as_str().is_some_and(|u| u.ends_with(&id2.to_string()))
                && l["post_title"].is_string()),
        "{text}"
    );

    // `--preview` starts nothing and says what the posts would cost; `--max-comments` caps each.
    let id3 = tiktok_post_id(TikTokScenario::Normal, 60);
    let url3 = format!("https://www.tiktok.com/@someone/video/{id3}");
    let out = caller.run(full, &["analyze", &url3, &url2, "--preview", "--max-comments", "25"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let preview: Value = serde_json::from_str(&stdout(&out)).expect("the preview is JSON");
    assert_eq!(
        (&preview["items"][0]["comments"], &preview["items"][0]["charge_at_most"]),
        (&Value::from(60), &Value::from(25))
    );
    assert_eq!(preview["covered_whole"], 2);
    let out = caller.run(full, &["analyze", &url3, "--max-comments", "25", "--wait", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let capped: Value = serde_json::from_str(&stdout(&out)).expect("the job is JSON");
    assert_eq!((&capped["max_comments"], &capped["result"]["comments_total"]), (&Value::from(25), &Value::from(25)));
    assert_eq!(capped["result"]["truncated_reason"], "max_comments");
    let out = caller.run(full, &["analyze", &url3, "--max-comments", "0"]);
    assert_eq!(out.status.code(), Some(2), "a usage error: {}", stderr(&out));

    // Without --wait: `<job_id> <status>`; the post was just collected, so the same job comes back.
    let out = caller.run(analyze_only, &["analyze", &url2]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = stdout(&out);
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.get(1..), Some(&["complete", "recent_result"][..]), "{line}");
    let job_id = fields[0].to_owned();

    // `job ID --format json`: the job with every comment.
    let out = caller.run(analyze_only, &["job", &job_id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let job: Value = serde_json::from_str(&stdout(&out)).expect("the job is JSON");
    assert_eq!(job["status"], "complete");
    assert_eq!(job["result"]["comments_total"], post2.total_comments());
    assert_eq!(job["result"]["comments"].as_array().map(Vec::len), Some(post2.comments.len()));
    assert_eq!(job["result"]["next_cursor"], Value::Null);

    // A token without library:write exports the job itself: the same rows as the library's
    // export of the post.
    let out = caller.run(analyze_only, &["job", &job_id, "--format", "csv"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut rendered = records(&stdout(&out));
    let out = caller.run(full, &["library", "export", &format!("tiktok:{id2}"), "--format", "csv"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut exported = records(&stdout(&out));
    rendered.1.sort();
    exported.1.sort();
    assert_eq!(rendered, exported, "the job's rows are the breakdown's");
    assert_eq!(rendered.1.len(), post2.total_comments());

    // `library list`, `library get`.
    let out = caller.run(full, &["library", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let library: Value = serde_json::from_str(&stdout(&out)).expect("the library is JSON");
    let refs: BTreeSet<&str> =
        library["items"].as_array().map(|a| a.iter().filter_map(|e| e["ref"].as_str()).collect()).unwrap_or_default();
    let wanted = format!("tiktok:{id}");
    let (wanted2, wanted3) = (format!("tiktok:{id2}"), format!("tiktok:{id3}"));
    assert_eq!(refs, BTreeSet::from([wanted.as_str(), wanted2.as_str(), wanted3.as_str()]));
    let out = caller.run(full, &["library", "get", &wanted]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let entry: Value = serde_json::from_str(&stdout(&out)).expect("the entry is JSON");
    assert_eq!(entry["counts"]["comments"], post.total_comments());
    assert_eq!(entry["comments"].as_array().map(Vec::len), Some(post.comments.len()));

    // An Instagram reel, read logged out: the part a visitor is shown, said as such; the
    // library lists it under its platform.
    let code = cova_sim::instagram_shortcode(cova_sim::InstagramScenario::Normal, 30);
    let reel_url = format!("https://www.instagram.com/reel/{code}/");
    let out = caller.run(full, &["analyze", &reel_url, "--wait", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reel: Value = serde_json::from_str(&stdout(&out)).expect("the job is JSON");
    assert_eq!(reel["ref"], format!("instagram:{code}"));
    assert_eq!(
        (&reel["result"]["truncated_reason"], &reel["result"]["comments_total"]),
        (&Value::from("visitor_view"), &Value::from(15))
    );
    let out = caller.run(full, &["library", "list", "--platform", "instagram"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).expect("the library is JSON");
    let refs: Vec<&str> =
        listed["items"].as_array().map(|a| a.iter().filter_map(|e| e["ref"].as_str()).collect()).unwrap_or_default();
    assert_eq!(refs, [format!("instagram:{code}")]);

    // `ai run --wait`: quoted, run, and printed with its result once complete.
    let out = caller.run(full, &["ai", "run", &wanted2, "--max-charge", "1"]);
    assert_fails(&out, 5, "--max-charge");
    let out = caller.run(full, &["ai", "run", &wanted2, "--wait", "--tasks", "summary,sentiment"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ai: Value = serde_json::from_str(&stdout(&out)).expect("the AI job is JSON");
    assert_eq!(ai["status"], "complete", "{ai}");
    assert_eq!(ai["result"]["comments"], post2.total_comments());
    assert!(ai["result"]["summary"].is_string(), "{ai}");

    // Several posts: batches, one line per post; with --wait, one combined file (one header,
    // the post's URL on every row) or one file per post. A URL that is refused is named on
    // stderr, the others are still written, and the exit code says why it was refused.
    let (a, b) = (tiktok_post_id(TikTokScenario::Normal, 7), tiktok_post_id(TikTokScenario::Normal, 9));
    let (url_a, url_b) =
        (format!("https://www.tiktok.com/@someone/video/{a}"), format!("https://www.tiktok.com/@someone/video/{b}"));
    let list = home.join("urls.txt");
    std::fs::write(&list, format!("# the week's posts\n{url_a}\n\n{url_b}\nhttps://example.com/not-a-post\n"))
        .expect("URL list");
    let combined = home.join("all.csv");
    let out = caller.run(
        full,
        &[
            "analyze",
            "--from-file",
            list.to_str().expect("path"),
            "--wait",
            "--format",
            "csv",
            "-o",
            combined.to_str().expect("path"),
        ],
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("refused https://example.com/not-a-post validation_error"), "{}", stderr(&out));
    let (header, rows) = records(&std::fs::read_to_string(&combined).expect("the combined CSV"));
    assert_eq!(header.len(), 16);
    assert_eq!(rows.len(), 7 + 9, "both posts, one header");
    let posts: BTreeSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(posts.len(), 2, "{posts:?}");
    // A missing directory is made, as `mkdir -p` would.
    let dir = home.join("exports").join("per-post");
    let out = caller.run(
        full,
        &["analyze", &url_a, &url_b, "--wait", "--format", "jsonl", "--output-dir", dir.to_str().expect("path")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for (id, n) in [(a, 7), (b, 9)] {
        let text = std::fs::read_to_string(dir.join(format!("tiktok-{id}.jsonl"))).expect("one file per post");
        assert_eq!(text.lines().count(), n);
    }
    let out = caller.run(full, &["analyze", &url_a, &url_b]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2, "one line per post: {lines:?}");
    assert!(lines[0].ends_with(&format!("{url_a} recent_result")), "{lines:?}");

    // `search`: the kept comments of the first post that talk about prices, as JSON (every hit
    // with its post and matched words) and as the service's CSV.
    let query = cova_analyzers::search::Query::parse("price").expect("a query");
    let priced: BTreeSet<String> = post
        .comments
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.replies.iter()))
        .filter(|c| !query.matches(&c.text, Some(&c.language)).is_empty())
        .map(|c| c.id.clone())
        .collect();
    assert!(!priced.is_empty(), "the simulator's post talks about prices");
    let r#ref = format!("tiktok:{id}");
    let args = ["search", "price", "--since", "3650d", "--platform", "tiktok", "--ref", r#ref.as_str()];
    let out = caller.run(full, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let found: Value = serde_json::from_str(&stdout(&out)).expect("search is JSON");
    let items = found["items"].as_array().expect("items");
    let ids: BTreeSet<String> =
        items.iter().map(|h| h["comment"]["id"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(ids, priced);
    assert!(items.iter().all(|h| h["post"]["ref"] == r#ref.as_str() && h["matches"] == serde_json::json!(["price"])));
    let out = caller.run(full, &[&args[..], &["--format", "csv", "--sort", "likes"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (header, rows) = records(&stdout(&out));
    assert_eq!((header.len(), rows.iter().map(|r| r[2].clone()).collect::<BTreeSet<_>>()), (16, priced));
    let out = caller.run(full, &["search", "price", "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(stderr(&out).contains("`yesterday` is neither a duration"), "{}", stderr(&out));

    service.stop().await;
}

/// The exit code of each class of error, and the client's config file, against a service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_classifies_errors_and_reads_its_config_against_serve() {
    let service = Service::start().await;
    let (full, analyze_only) = (service.full.as_str(), service.analyze_only.as_str());
    let (home, base, caller) = (service.home.path(), service.base.as_str(), service.caller());

    // Bad input and not found: exit 4.
    let out = caller.run(full, &["analyze", "https://example.com/not-a-post"]);
    assert_fails(&out, 4, "(validation_error)");
    let out = caller.run(full, &["library", "get", "tiktok:7000000000000000999"]);
    assert_fails(&out, 4, "(not_found)");
    let out = caller.run(analyze_only, &["job", "0193a4c2-0000-7000-8000-000000000000"]);
    assert_fails(&out, 4, "(not_found)");

    // Authentication and permission: exit 3.
    let unknown = cova_auth::generate().value;
    let out = caller.run(&unknown, &["usage"]);
    assert_fails(&out, 3, "(unauthorized)");
    let out = caller.run(analyze_only, &["library", "list"]);
    assert_fails(&out, 3, "(forbidden_scope)");
    let out = client(home, Some(base), None, &["usage"]);
    assert_fails(&out, 3, "COVA_TOKEN");

    // A job that fails: exit 6, and no output file.
    let deleted = format!("https://www.tiktok.com/@someone/video/{}", tiktok_post_id(TikTokScenario::Deleted, 5));
    let failed_file = home.join("failed.csv");
    let failed_arg = failed_file.to_str().expect("a UTF-8 path");
    let out = caller.run(full, &["analyze", &deleted, "--wait", "--format", "csv", "-o", failed_arg]);
    assert_fails(&out, 6, "(parse_error)");
    assert!(!failed_file.exists() && !home.join("failed.csv.tmp").exists(), "a failed run writes nothing");

    // The URL and the token from the client config file, when the environment has neither.
    let dir = home.join("config").join("cova");
    std::fs::create_dir_all(&dir).expect("config dir");
    let config = dir.join("client.toml");
    std::fs::write(&config, format!("# written by the test\nurl = \"{base}\"\ntoken = \"{full}\"\n"))
        .expect("config file");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let out = client(home, None, None, &["usage"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("dev@example.com"), "{}", stdout(&out));
    // COVA_TOKEN wins over the file.
    let out = client(home, None, Some(unknown.as_str()), &["usage"]);
    assert_fails(&out, 3, "(unauthorized)");
    // A broken file stops only a command that needs it: not one given the URL and the token.
    std::fs::write(config.as_path(), "tokn = \"x\"\n").expect("config file");
    let out = client(home, Some(base), Some(full), &["usage"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = client(home, Some(base), None, &["usage"]);
    assert_fails(&out, 1, "unknown key `tokn`");

    service.stop().await;
}

#[test]
fn without_a_service_errors_are_classified_before_or_at_the_connection() {
    let home = tempfile::tempdir().expect("temp home");
    let home = home.path();
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("addr"))
    };
    let token = cova_auth::generate().value;

    let out = client(home, Some(closed.as_str()), Some(token.as_str()), &["usage"]);
    assert_fails(&out, 7, "cannot connect");
    let out = client(home, Some(closed.as_str()), Some(token.as_str()), &["--timeout", "2", "library", "list"]);
    assert_fails(&out, 7, "cannot connect");

    let out = client(home, Some(closed.as_str()), None, &["usage"]);
    assert_fails(&out, 3, "no token");

    // A malformed config file stops only the commands that need it: with COVA_URL and
    // COVA_TOKEN set it is not read; without the token, the error names its line.
    let config = home.join("config").join("cova");
    std::fs::create_dir_all(&config).expect("config dir");
    std::fs::write(config.join("client.toml"), "url = \"http://a\"\nthis is not toml\n").expect("config file");
    let out = client(home, Some(closed.as_str()), Some(token.as_str()), &["usage"]);
    assert_fails(&out, 7, "cannot connect");
    let out = client(home, Some(closed.as_str()), None, &["usage"]);
    assert_fails(&out, 1, "client.toml");
    std::fs::remove_file(config.join("client.toml")).expect("config file removed");
    let out = client(home, Some(closed.as_str()), Some("hunter2"), &["usage"]);
    assert_fails(&out, 3, "not a cova token");

    let out = client(home, Some("ftp://example.com"), Some(token.as_str()), &["usage"]);
    assert_fails(&out, 2, "http");
    let out = client(home, Some(closed.as_str()), Some(token.as_str()), &["analyze", "https://x", "--format", "csv"]);
    assert_fails(&out, 2, "--wait");
    let out = client(home, Some(closed.as_str()), Some(token.as_str()), &["analyze"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error: {}", stderr(&out));
    let out = client(
        home,
        Some(closed.as_str()),
        Some(token.as_str()),
        &["analyze", "https://x", "--wait", "-o", "/nonexistent/dir/out.csv"],
    );
    assert_fails(&out, 1, "does not exist");
}
