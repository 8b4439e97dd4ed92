//! Mail without an SMTP server: each message is a file under `smtp.mail_dir`, and the log names
//! the file, never the link in it (a link acts for its account).

use crate::common::Cova;
use cova_testdb::TestDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailed_link_is_in_its_file_and_never_in_the_log() {
    let db = TestDatabase::create().await;
    let mail_dir = tempfile::tempdir().expect("tempdir");
    let prefix = format!("m{:x}", std::process::id());
    let env = Cova {
        vars: vec![
            ("COVA_DATABASE__URL".into(), db.config.url.clone()),
            ("COVA_CACHE__PREFIX".into(), prefix.clone()),
            ("COVA_QUEUE__PREFIX".into(), prefix),
            ("COVA_HTTP__ADDR".into(), "127.0.0.1:0".into()),
            ("COVA_SMTP__MAIL_DIR".into(), mail_dir.path().display().to_string()),
        ],
    };
    let migrated = env.run(&["migrate"]);
    assert!(migrated.status.success(), "{}", crate::common::stderr(&migrated));
    let (mut child, base, log) = env.start_logging("serve");
    let email = "lena@example.com";
    let signup = reqwest::Client::new()
        .post(format!("{base}/api/v1/auth/signup"))
        .json(&serde_json::json!({"email": email, "password": "a long enough passphrase"}))
        .send()
        .await
        .expect("signup");
    assert_eq!(signup.status(), 202);

    // The mail goes out in the background: wait for its log line.
    let line = cova_tests::until("the mail's log line", async || {
        log.lines().into_iter().find(|l| l.contains("e-mail written to a file"))
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let logged: serde_json::Value = serde_json::from_str(&line).expect("a JSON log line");
    let file = logged["fields"]["file"].as_str().or(logged["file"].as_str()).expect("the file is named").to_owned();
    let text = std::fs::read_to_string(&file).expect("the named file exists");
    let at = text.find("/#/confirm/").expect("the link is in the file");
    let token: String = text[at + 11..].chars().take_while(|c| !c.is_whitespace()).collect();
    assert!(token.len() >= 40, "{token}");
    for line in log.lines() {
        assert!(!line.contains(&token), "a log line carries the link's token: {line}");
        assert!(!line.contains(email), "a log line carries the address: {line}");
    }
    db.drop_database().await.ok();
}
