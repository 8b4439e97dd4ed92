//! The real `cova` binary, as a new user and an operator drive it: admin commands with the
//! operator contract's exit codes, then `cova serve` answering `/api/v1/usage`.

use cova_testdb::TestDatabase;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Cova, stderr, stdout};

async fn env(db: &TestDatabase) -> Cova {
    let prefix = format!("t{:x}{:x}", std::process::id(), Instant::now().elapsed().as_nanos() ^ 0x5eed);
    let mut vars = vec![
        ("COVA_DATABASE__URL".to_string(), db.config.url.clone()),
        ("COVA_CACHE__PREFIX".to_string(), prefix.clone()),
        ("COVA_QUEUE__PREFIX".to_string(), prefix),
        ("COVA_HTTP__ADDR".to_string(), "127.0.0.1:0".to_string()),
    ];
    if let Ok(url) = std::env::var("COVA_TEST_CACHE_URL") {
        vars.push(("COVA_CACHE__URL".into(), url));
    }
    Cova { vars }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_flow_then_usage_over_http() {
    let db = TestDatabase::create().await;
    let env = env(&db).await;

    let out = env.run(&["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["migrate"]);
    assert!(out.status.success(), "migrate is idempotent: {}", stderr(&out));

    let out = env.run(&["admin", "accounts", "create", "--email", "ops@example.com"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.run(&["admin", "accounts", "create", "--email", "ops@example.com"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("cova: ") && err.contains("already exists"), "{err}");

    let out = env.run(&["admin", "packs", "grant", "--email", "ops@example.com", "--comments", "2000"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.run(&["admin", "packs", "grant", "--email", "nobody@example.com", "--comments", "5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no account"), "{}", stderr(&out));

    // Operators read accounts, balances and jobs as aligned tables.
    let out = env.run(&["admin", "accounts", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing = stdout(&out);
    let header = listing.lines().next().expect("header");
    let row = listing.lines().find(|l| l.starts_with("ops@example.com")).expect("the account's row");
    assert_eq!(header.find("AVAILABLE"), row.find("2000"), "columns line up:\n{listing}");
    let out = env.run(&["admin", "usage", "--email", "ops@example.com"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let usage = stdout(&out);
    assert!(usage.lines().any(|l| l.starts_with("available") && l.ends_with(" 2000")), "{usage}");
    assert!(usage.lines().any(|l| l.starts_with("running jobs") && l.ends_with(" 0")), "{usage}");
    let out = env.run(&["admin", "jobs", "show", "no-such-job"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no job no-such-job"), "{}", stderr(&out));
    let out = env.run(&["admin", "accounts", "list", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2), "a bad flag is a usage error");
    let out = env.run(&["config", "print"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("[metrics]"), "{}", stdout(&out));

    let out = env.run(&[
        "admin",
        "tokens",
        "create",
        "--email",
        "ops@example.com",
        "--scopes",
        "metadata:read,analyze:write",
        "--name",
        "ci",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let token = stdout(&out).lines().last().expect("a last line").to_owned();
    assert!(cova_auth::looks_like_token(&token), "the token alone is the last line: {token}");

    let out = env.run(&["admin", "tokens", "list", "--email", "ops@example.com"]);
    assert_eq!(out.status.code(), Some(0));
    let listing = stdout(&out);
    let prefix = cova_auth::display_prefix(&token);
    assert!(listing.contains(&prefix) && listing.contains("active"), "{listing}");
    assert!(!listing.contains(&token), "the full token is never listed");

    for i in 0..4 {
        let out = env.run(&[
            "admin",
            "tokens",
            "create",
            "--email",
            "ops@example.com",
            "--scopes",
            "metadata:read",
            "--name",
            &format!("n{i}"),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let out = env.run(&["admin", "tokens", "create", "--email", "ops@example.com", "--scopes", "metadata:read"]);
    assert_eq!(out.status.code(), Some(1), "a 6th active token is refused");
    assert!(
        stderr(&out).contains(&format!("{} active tokens", cova_domain::limits::MAX_ACTIVE_TOKENS)),
        "{}",
        stderr(&out)
    );

    let out = env.run(&["admin", "tokens", "create", "--email", "ops@example.com", "--scopes", "root"]);
    assert_eq!(out.status.code(), Some(2), "usage error");
    let out = env.run(&["admin", "tokens", "revoke", "--email", "ops@example.com"]);
    assert_eq!(out.status.code(), Some(2), "missing --prefix");

    // Free a slot, and keep the first token for the HTTP part.
    let listing = stdout(&env.run(&["admin", "tokens", "list", "--email", "ops@example.com"]));
    let other_prefix = listing
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
        .find(|p| *p != prefix)
        .expect("another token");
    let out = env.run(&["admin", "tokens", "revoke", "--email", "ops@example.com", "--prefix", &other_prefix]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.run(&["admin", "tokens", "revoke", "--email", "ops@example.com", "--prefix", &other_prefix]);
    assert_eq!(out.status.code(), Some(1), "already revoked");

    let (mut child, base) = env.start("serve", true);
    let base = base.expect("base url");
    let http = reqwest::Client::new();
    let res = http.get(format!("{base}/api/v1/usage")).bearer_auth(&token).send().await.expect("usage");
    assert_eq!(res.status(), 200);
    let usage: serde_json::Value = res.json().await.expect("json");
    assert_eq!(usage["comments"]["remaining"], 2000);
    assert_eq!(usage["tokens"]["active"], 4);
    assert_eq!(usage["account"]["email"], "ops@example.com");
    let res = http.get(format!("{base}/api/v1/usage")).send().await.expect("usage without token");
    assert_eq!(res.status(), 401);

    // SIGTERM: graceful stop, exit 0.
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let exit = cova_tests::until("cova serve to stop on SIGTERM", async || child.try_wait().expect("wait")).await;
    assert!(exit.success(), "{exit:?}");
    env.forget().await;
    let _ = db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_name_the_key_and_exit_1() {
    let db = TestDatabase::create().await;
    let env = env(&db).await;
    let out = env.command(&["migrate"]).env("COVA_HTTP__ADR", "x").output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("did you mean COVA_HTTP__ADDR?"), "{}", stderr(&out));
    let out = env.command(&["migrate"]).env("COVA_HTTP_ADDR", "127.0.0.1:1").output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("did you mean COVA_HTTP__ADDR?"), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "printed once: {}", stderr(&out));
    let out = env.command(&["migrate"]).env("COVA_QUEUE__URL", "kafka://x").output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("queue.url"), "{}", stderr(&out));
    // A split role cannot use the in-process queue.
    let out = env.run(&["gateway"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("memory://"), "{}", stderr(&out));
    let _ = db.drop_database().await;
}

/// Sends raw bytes on a new connection and returns the first line of the answer.
fn raw_http(base: &str, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let _ = stream.write_all(request);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_faults_log_no_error_and_tokens_in_paths_are_redacted() {
    let db = TestDatabase::create().await;
    let env = env(&db).await;
    assert!(env.run(&["migrate"]).status.success());
    let (mut child, base, log) = env.start_logging("serve");
    let status = raw_http(&base, b"GET /api/v1/usage HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n");
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    let status = raw_http(
        &base,
        b"POST /api/v1/analyze HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}",
    );
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    let token = "cova_7Hq2Lx9Rk3Vb5Nz1Pc8Wd4Ym6Ts0Gf2Ja5Ke9Uh";
    let status = raw_http(
        &base,
        format!("GET /api/v1/analyze/{token} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    assert!(status.starts_with("HTTP/1.1 401"), "{status}");
    // The log is read in the background: every request's lines are in before the process stops.
    let refused = |l: &String| l.contains("malformed request refused") && l.contains("WARN");
    let redacted = |l: &String| l.contains("/api/v1/analyze/cova_[redacted]");
    cova_tests::eventually("the three requests in the log", async || {
        let lines = log.lines();
        lines.iter().filter(|l| refused(l)).count() >= 2 && lines.iter().any(redacted)
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let lines = log.lines();
    let errors: Vec<&String> = lines.iter().filter(|l| l.contains("\"level\":\"ERROR\"")).collect();
    assert!(errors.is_empty(), "a client's fault is not an error: {errors:?}");
    assert!(lines.iter().all(|l| !l.contains(&token[5..])), "the token never reaches the log");
    env.forget().await;
    let _ = db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restore_jobs_whose_commands_are_gone_are_issued_again() {
    use cova_storage::repo::jobs::{self, CreateOutcome, NewAnalyze};
    use cova_storage::repo::{accounts, balances, outbox};
    let db_handle = TestDatabase::create().await;
    let env = env(&db_handle).await;
    let mut config = db_handle.config.clone();
    config.encryption_keys = Some(cova_testdb::TEST_ENCRYPTION_KEY.to_owned().into());
    let db = cova_storage::Db::connect(&config).expect("pool");
    db.migrate().await.expect("migrate");
    let now = cova_domain::time::now_ms();
    let account = accounts::create(&db, "restore@example.com", true, 0, now).await.expect("account");
    balances::grant(&db, &account.id, 100, "test", now).await.expect("grant");
    let created = jobs::create_analyze(
        &db,
        NewAnalyze {
            account_id: &account.id,
            token_id: None,
            session_id: None,
            r#ref: "tiktok:7000000000000000012",
            url: "https://www.tiktok.com/@a/video/7000000000000000012",
            idempotency_key: None,
            known_comments: None,
            refresh: false,
            batch_id: None,
            max_comments: cova_storage::repo::jobs::Cap::Set(None),
        },
        "{}",
        now - 600_000,
    )
    .await
    .expect("create");
    let CreateOutcome::Created { job, .. } = created else { panic!("a new job: {created:?}") };
    // The dump was taken after its command left for a broker that is gone now.
    let claimed = outbox::claim(&db, 10, now).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    outbox::mark_sent(&db, &claimed[0].id, now).await.expect("sent");
    assert!(outbox::claim(&db, 10, now + 60_000).await.expect("claim").is_empty());

    let out = env.run(&["admin", "jobs", "requeue", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(&job.id) && stdout(&out).contains("would re-issue 1 job(s)"), "{}", stdout(&out));
    assert!(outbox::claim(&db, 10, now + 60_000).await.expect("claim").is_empty(), "a dry run issues nothing");
    let out = env.run(&["admin", "jobs", "requeue", "--older-than-s", "900"]);
    assert!(stdout(&out).contains("re-issued 0 job(s)"), "too young: {}", stdout(&out));
    let out = env.run(&["admin", "jobs", "requeue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("re-issued 1 job(s)"), "{}", stdout(&out));
    let again = outbox::claim(&db, 10, now + 60_000).await.expect("claim");
    assert_eq!(again.len(), 1);
    assert!(again[0].payload.contains(&job.id), "{}", again[0].payload);

    // Keys: a new one is printed, and nothing else happens: run with the defaults in an empty
    // directory, it opens, makes and writes nothing.
    let empty = tempfile::tempdir().expect("an empty directory");
    let out = Cova { vars: Vec::new() }.command(&["admin", "secrets", "new-key"]).current_dir(empty.path()).output();
    let out = out.expect("cova runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(cova_auth::sealing::Keyring::parse(stdout(&out).trim()).is_ok_and(|k| !k.is_empty()));
    let left: Vec<_> = std::fs::read_dir(empty.path()).expect("read").map(|e| e.expect("entry").file_name()).collect();
    assert!(left.is_empty(), "new-key wrote {left:?}");
    // The server's configuration file is offered by `cova --help`, not by the client's help.
    let help = |args: &[&str]| stdout(&Cova { vars: Vec::new() }.command(args).output().expect("cova runs"));
    assert!(help(&["--help"]).contains("--config"));
    assert!(!help(&["client", "--help"]).contains("--config"), "{}", help(&["client", "--help"]));
    assert!(!help(&["client", "analyze", "--help"]).contains("--config"));
    let out = env.run(&["admin", "secrets", "reseal"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("sealed 0 account(s)"), "{}", stdout(&out));
    db_handle.drop_database().await.ok();
}
