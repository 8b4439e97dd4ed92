//! Repository tests. They run on SQLite by default and on PostgreSQL when
//! `COVA_TEST_DATABASE_URL` is set (CI runs both).

use chrono::{TimeZone, Utc};
use cova_auth::ScopeSet;
use cova_storage::StorageError;
use cova_storage::repo::tokens::{MAX_ACTIVE_TOKENS, NewToken, TokenRefusal};
use cova_storage::repo::{accounts, balances, tokens};
use cova_testdb::TestDatabase;
use std::sync::Arc;

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).single().expect("valid date").timestamp_millis()
}

const NOW: i64 = 1_795_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn migrations_are_idempotent_and_accounts_unique() {
    let t = TestDatabase::create().await;
    let db = t.db().await;
    db.migrate().await.expect("second migrate is a no-op");
    let a = accounts::create(&db, " Ana@Example.com ", true, 500, NOW).await.expect("create");
    assert_eq!(a.email, "ana@example.com");
    assert!(a.is_confirmed());
    let dup = accounts::create(&db, "ana@example.com", true, 500, NOW).await;
    assert!(matches!(dup, Err(StorageError::Conflict(_))), "{dup:?}");
    assert!(matches!(accounts::create(&db, "not-an-email", true, 0, NOW).await, Err(StorageError::Conflict(_))));
    let found = accounts::find_by_email(&db, "ANA@example.com").await.expect("find").expect("exists");
    assert_eq!(found.id, a.id);
    t.drop_database().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_cap_revoke_and_lookup() {
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let a = accounts::create(&db, "cap@example.com", true, 0, NOW).await.expect("account");
    let scopes = ScopeSet::parse_list("metadata:read").expect("scopes");
    let mut made = Vec::new();
    for i in 0..MAX_ACTIVE_TOKENS {
        let g = cova_auth::generate();
        let rec = tokens::create(&db, NewToken { account_id: &a.id, name: &format!("t{i}"), scopes, token: &g }, NOW)
            .await
            .expect("db")
            .expect("under the cap");
        made.push((g, rec));
    }
    let sixth = cova_auth::generate();
    let refused =
        tokens::create(&db, NewToken { account_id: &a.id, name: "six", scopes, token: &sixth }, NOW).await.expect("db");
    assert_eq!(refused.err(), Some(TokenRefusal::Limit));

    let (g0, r0) = &made[0];
    let (rec, acc) = tokens::find_active_by_hash(&db, &g0.hash).await.expect("db").expect("active");
    assert_eq!(rec.id, r0.id);
    assert_eq!(acc.active_tokens, MAX_ACTIVE_TOKENS);
    assert_eq!(tokens::revoke_by_prefix(&db, &a.id, &r0.prefix, NOW).await.expect("revoke"), 1);
    assert_eq!(tokens::revoke_by_prefix(&db, &a.id, &r0.prefix, NOW).await.expect("revoke again"), 0);
    assert!(tokens::find_active_by_hash(&db, &g0.hash).await.expect("db").is_none());
    // The freed slot can be used again.
    tokens::create(&db, NewToken { account_id: &a.id, name: "six", scopes, token: &sixth }, NOW)
        .await
        .expect("db")
        .expect("slot freed by revocation");
    assert_eq!(tokens::list(&db, &a.id).await.expect("list").len(), 6);

    let unconfirmed = accounts::create(&db, "new@example.com", false, 0, NOW).await.expect("account");
    let g = cova_auth::generate();
    let refused = tokens::create(&db, NewToken { account_id: &unconfirmed.id, name: "x", scopes, token: &g }, NOW)
        .await
        .expect("db");
    assert_eq!(refused.err(), Some(TokenRefusal::EmailUnconfirmed));
    t.drop_database().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_token_creation_never_exceeds_the_cap() {
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let a = accounts::create(&db, "race@example.com", true, 0, NOW).await.expect("account");
    let scopes = ScopeSet::parse_list("analyze:write").expect("scopes");
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let db = db.clone();
        let id = a.id.clone();
        tasks.push(tokio::spawn(async move {
            let g = cova_auth::generate();
            tokens::create(&db, NewToken { account_id: &id, name: "r", scopes, token: &g }, NOW).await
        }));
    }
    let mut created = 0;
    for task in tasks {
        if task.await.expect("join").expect("db").is_ok() {
            created += 1;
        }
    }
    assert_eq!(created, MAX_ACTIVE_TOKENS);
    assert_eq!(accounts::get(&db, &a.id).await.expect("get").active_tokens, MAX_ACTIVE_TOKENS);
    t.drop_database().await.expect("drop");
}

/// A token's analyze job of `tiktok:{n}` for `account`, claimed by `owner` at `now`: it holds
/// its opening hold until the scraper sizes it.
async fn started_job(
    db: &cova_storage::Db,
    account: &str,
    n: i64,
    owner: &str,
    known: Option<i64>,
    now: i64,
) -> String {
    use cova_storage::repo::jobs::{self, Cap, CreateOutcome, NewAnalyze, Start};
    let (r#ref, url) = (format!("tiktok:{n}"), format!("https://www.tiktok.com/@a/video/{n}"));
    let new = NewAnalyze {
        account_id: account,
        token_id: None,
        session_id: None,
        r#ref: &r#ref,
        url: &url,
        idempotency_key: None,
        known_comments: known,
        refresh: false,
        batch_id: None,
        max_comments: Cap::Set(None),
    };
    let job = match jobs::create_analyze(db, new, "{}", now).await.expect("create") {
        CreateOutcome::Created { job, .. } => job,
        other => panic!("not created: {other:?}"),
    };
    let start = jobs::start(db, &job.id, owner, 3_600_000, now).await.expect("start");
    assert!(matches!(start, Start::Collect { .. }), "{start:?}");
    job.id
}

/// The holds of an account's running jobs, as stored.
async fn holds(db: &cova_storage::Db, account: &str) -> i64 {
    use cova_storage::schema::reservations;
    use diesel::{ExpressionMethods, QueryDsl};
    let query = reservations::table
        .filter(reservations::account_id.eq(account))
        .filter(reservations::state.eq("held"))
        .select(reservations::amount);
    let held: Vec<i64> = db.conn().await.expect("conn").tx().load(query).await.expect("holds");
    held.iter().sum()
}

/// Thirty jobs of ten accounts sized at once, each to a post the balance cannot cover twice:
/// under any interleaving (PostgreSQL's row locks, SQLite's single writer), each account's
/// first sized job holds the post's count and the two others wait, holding nothing; nothing is
/// overdrawn and every hold is accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_sizing_never_overdraws_and_the_rest_wait() {
    use cova_storage::repo::jobs::{self, SizeOutcome};
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let mut jobs_of = Vec::new();
    for a in 0..10 {
        let account = accounts::create(&db, &format!("size{a}@example.com"), true, 0, NOW).await.expect("account");
        balances::grant(&db, &account.id, 100, "test", NOW).await.expect("grant");
        for n in 0..3 {
            let job = started_job(&db, &account.id, a * 10 + n, "scraper", None, NOW).await;
            jobs_of.push((account.id.clone(), job));
        }
    }
    let mut tasks = Vec::new();
    for (account, job) in &jobs_of {
        let (db, account, job) = (db.clone(), account.clone(), job.clone());
        tasks.push(tokio::spawn(async move {
            (account, jobs::size_hold(&db, &job, "scraper", Some(60), 0, "{}", NOW).await.expect("size"))
        }));
    }
    let mut collecting = std::collections::HashMap::<String, usize>::new();
    for task in tasks {
        let (account, outcome) = task.await.expect("join");
        match outcome {
            SizeOutcome::Collect(c) => {
                assert_eq!((c.hold.amount, c.expected), (60, Some(60)), "the count alone: 110 does not fit");
                *collecting.entry(account).or_default() += 1;
            }
            SizeOutcome::Waiting => {}
            other => panic!("neither collecting nor waiting: {other:?}"),
        }
    }
    for (account, _) in jobs_of.iter().step_by(3) {
        assert_eq!(collecting.get(account), Some(&1), "one collects, two wait");
        let b = balances::current(&db, account, NOW).await.expect("balance");
        assert_eq!((b.reserved, b.available), (60, 40), "the waiting jobs hold nothing");
        assert_eq!(holds(&db, account).await, b.reserved);
    }
    t.drop_database().await.expect("drop");
}

/// A hold follows the post: lowered at once when the post is smaller than its opening hold,
/// raised as far as the balance allows; a job the balance cannot cover waits while another job
/// holds comments, and is sized anew, with what came back, once that job has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_follows_the_post_and_a_job_waits_for_comments_that_may_come_back() {
    use cova_storage::repo::jobs::{self, SizeOutcome};
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let a = accounts::create(&db, "hold@example.com", true, 0, NOW).await.expect("account");
    balances::grant(&db, &a.id, 1_000, "test", NOW).await.expect("grant");
    // Opened with a known count of 700 (770 held), the post turns out to have 70.
    let j = started_job(&db, &a.id, 1, "s1", Some(700), NOW).await;
    assert_eq!(balances::current(&db, &a.id, NOW).await.expect("balance").available, 230);
    let SizeOutcome::Collect(c) = jobs::size_hold(&db, &j, "s1", Some(70), 0, "{}", NOW).await.expect("size") else {
        panic!("collects")
    };
    assert_eq!(c.hold.amount, 120);
    assert_eq!(balances::current(&db, &a.id, NOW).await.expect("balance").available, 880);
    let k = started_job(&db, &a.id, 2, "s2", Some(650), NOW).await;
    let m = started_job(&db, &a.id, 3, "s3", None, NOW).await;
    // 164 left: m's post of 500 waits for what j and k hold.
    assert_eq!(jobs::size_hold(&db, &m, "s3", Some(500), 0, "{}", NOW).await.expect("size"), SizeOutcome::Waiting);
    let parked = jobs::get(&db, &m).await.expect("db").expect("job");
    assert_eq!(parked.hold_stage, cova_domain::money::Stage::Waiting);
    assert_eq!(parked.comments_expected, Some(500), "the post's own count, not what the balance could pay");
    // A sizing by a worker that no longer holds the job does nothing.
    assert_eq!(jobs::size_hold(&db, &m, "s3", Some(500), 0, "{}", NOW).await.expect("size"), SizeOutcome::Lost);
    // k fails: its hold comes back and the end wakes m (a command in the outbox).
    assert!(jobs::fail(&db, &k, "s2", "parse_error", "gone", "{}", NOW).await.expect("fail"));
    assert!(!jobs::fail(&db, &k, "s2", "parse_error", "gone", "{}", NOW).await.expect("fail again"), "once");
    assert_eq!(jobs::wake_waiting(&db, &a.id, "{}", NOW).await.expect("wake"), 1);
    jobs::start(&db, &m, "s4", 3_600_000, NOW).await.expect("start again");
    let SizeOutcome::Collect(c) = jobs::size_hold(&db, &m, "s4", Some(500), 0, "{}", NOW).await.expect("size") else {
        panic!("collects")
    };
    assert_eq!(c.hold.amount, 550);
    let b = balances::current(&db, &a.id, NOW).await.expect("balance");
    assert_eq!((b.reserved, b.spent, b.available), (670, 0, 330));
    assert_eq!(holds(&db, &a.id).await, 670);
    t.drop_database().await.expect("drop");
}

/// A completed job is charged the new comments it kept, never more than its hold (those beyond
/// it are dropped, and the result says the balance cut it); a failed one is charged nothing;
/// each hold is closed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_is_closed_once_and_never_charges_beyond_itself() {
    use cova_storage::repo::jobs::{self, Scraped, SizeOutcome, StoredComment};
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let a = accounts::create(&db, "settle@example.com", true, 0, NOW).await.expect("account");
    balances::grant(&db, &a.id, 1_000, "test", NOW).await.expect("grant");
    let j = started_job(&db, &a.id, 1, "s1", None, NOW).await;
    let SizeOutcome::Collect(c) = jobs::size_hold(&db, &j, "s1", Some(100), 0, "{}", NOW).await.expect("size") else {
        panic!("collects")
    };
    assert_eq!(c.hold.amount, 150);
    // The post grew: 200 comments arrive, 150 are paid for.
    let comments: Vec<StoredComment> = (0..200)
        .map(|n| StoredComment {
            comment_id: format!("c{n}"),
            parent_id: None,
            body: format!(r#"{{"text":"comment {n}"}}"#),
            likes: 0,
            posted_at: 0,
            search: format!("comment {n}"),
            ..StoredComment::default()
        })
        .collect();
    jobs::append_comments(&db, &j, ("s1", 3_600_000), &comments, c.expected, NOW).await.expect("append");
    assert!(jobs::complete(&db, &j, "s1", &Scraped::default(), "{}", NOW).await.expect("complete"));
    assert!(!jobs::complete(&db, &j, "s1", &Scraped::default(), "{}", NOW).await.expect("again"), "once");
    let done = jobs::get(&db, &j).await.expect("db").expect("job");
    assert_eq!((done.comments_collected, done.truncated_reason.as_deref()), (150, Some("balance")));
    let k = started_job(&db, &a.id, 2, "s2", None, NOW).await;
    assert!(jobs::fail(&db, &k, "s2", "parse_error", "gone", "{}", NOW).await.expect("fail"));
    let b = balances::current(&db, &a.id, NOW).await.expect("balance");
    assert_eq!((b.granted, b.reserved, b.spent, b.available), (1_000, 0, 150, 850));
    let (r, f) = (
        balances::reservation(&db, &j).await.expect("db").expect("exists"),
        balances::reservation(&db, &k).await.expect("db").expect("exists"),
    );
    assert_eq!((r.state.as_str(), r.charged, f.state.as_str(), f.charged), ("settled", 150, "released", 0));
    t.drop_database().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_month_boundary_expires_the_old_balance() {
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let a = accounts::create(&db, "month@example.com", true, 0, NOW).await.expect("account");
    let last_second = at(2026, 11, 30, 23, 59, 59);
    let next_month = at(2026, 12, 1, 0, 0, 0);
    balances::grant(&db, &a.id, 2_000, "pack", last_second).await.expect("grant");
    let nov = balances::current(&db, &a.id, last_second).await.expect("nov");
    assert_eq!((nov.month.as_str(), nov.available), ("2026-11", 2_000));
    let dec = balances::current(&db, &a.id, next_month).await.expect("dec");
    assert_eq!((dec.month.as_str(), dec.granted, dec.available), ("2026-12", 0, 0));
    let late = cova_storage::repo::jobs::NewAnalyze {
        account_id: &a.id,
        token_id: None,
        session_id: None,
        r#ref: "tiktok:1",
        url: "https://www.tiktok.com/@a/video/1",
        idempotency_key: None,
        known_comments: None,
        refresh: false,
        batch_id: None,
        max_comments: cova_storage::repo::jobs::Cap::Set(None),
    };
    let refused = cova_storage::repo::jobs::create_analyze(&db, late, "{}", next_month).await.expect("create");
    assert!(
        matches!(refused, cova_storage::repo::jobs::CreateOutcome::QuotaExceeded),
        "November's comments are gone: {refused:?}"
    );
    // A pack bought in December adds to December only.
    balances::grant(&db, &a.id, 500, "pack", next_month).await.expect("grant");
    assert_eq!(balances::current(&db, &a.id, next_month).await.expect("dec").available, 500);
    assert_eq!(balances::current(&db, &a.id, last_second).await.expect("nov").available, 2_000);
    t.drop_database().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_check_constraint_refuses_overdraft_written_directly() {
    use diesel::ExpressionMethods;
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let a = accounts::create(&db, "check@example.com", true, 0, NOW).await.expect("account");
    balances::grant(&db, &a.id, 5, "test", NOW).await.expect("grant");
    let mut conn = db.conn().await.expect("conn");
    let res = conn
        .tx()
        .execute(diesel::update(cova_storage::schema::balances::table).set(cova_storage::schema::balances::spent.eq(6)))
        .await;
    assert!(res.is_err(), "spent > granted must be refused by the database itself");
    t.drop_database().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outbox_claims_are_disjoint_and_a_failing_row_is_parked() {
    use cova_messages::{AnalyzeCommand, Outgoing};
    use cova_storage::repo::outbox;
    let t = TestDatabase::create().await;
    let db = t.db().await;
    for n in 0..40 {
        let command = Outgoing::command(&AnalyzeCommand { job_id: format!("j{n}") });
        outbox::insert(&db, &command, "{}", NOW + n).await.expect("insert");
    }
    // Two relays claiming at once never get the same row.
    let (a, b) = tokio::join!(outbox::claim(&db, 25, NOW + 100), outbox::claim(&db, 25, NOW + 100));
    let (a, b) = (a.expect("claim a"), b.expect("claim b"));
    assert_eq!(a.len() + b.len(), 40);
    let ids: std::collections::HashSet<_> = a.iter().chain(b.iter()).map(|r| r.id.clone()).collect();
    assert_eq!(ids.len(), 40, "disjoint claims");
    assert!(
        outbox::claim(&db, 100, NOW + 100).await.expect("claim").is_empty(),
        "claimed rows are not handed out again"
    );
    // A claim that was never settled expires.
    assert_eq!(outbox::claim(&db, 100, NOW + 100 + outbox::CLAIM_MS).await.expect("claim").len(), 40);
    // A row that keeps failing is parked after MAX_ATTEMPTS; the others stay due.
    let bad = a[0].id.clone();
    for attempt in 1..=outbox::MAX_ATTEMPTS {
        let parked = outbox::record_failure(&db, &bad, "unroutable", 10, NOW).await.expect("record");
        assert_eq!(parked, attempt == outbox::MAX_ATTEMPTS);
    }
    assert_eq!(outbox::parked(&db, 10).await.expect("parked").len(), 1);
    assert_eq!(outbox::backlog(&db).await.expect("backlog"), 39);
    t.drop_database().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn media_keep_their_ids_and_numbers_across_listings_and_expire() {
    use cova_storage::repo::media::{self, Listed};
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let a = accounts::create(&db, "media@example.com", true, 0, NOW).await.expect("account");
    let b = accounts::create(&db, "other@example.com", true, 0, NOW).await.expect("account");
    let listed = |slot: &str, kind: &'static str, url: &str| Listed {
        slot: slot.into(),
        kind,
        source_url: url.into(),
        width: Some(10),
        height: None,
    };
    let first = [listed("cover", "cover", "https://cdn/c?1"), listed("image:1:0", "image", "https://cdn/i?1")];
    let ids = media::register(&db, &a.id, "tiktok:1", &first, NOW, NOW + 1_000).await.expect("register");
    assert_eq!(ids.len(), 2);
    assert!(ids.values().all(|r| media::is_media_id(&r.id) && !r.fetched));
    // Listed again with fresh links, plus a second image: known slots keep id and number.
    let again = [listed("image:1:0", "image", "https://cdn/i?2"), listed("image:2:0", "image", "https://cdn/j?2")];
    let more = media::register(&db, &a.id, "tiktok:1", &again, NOW + 10, NOW + 5_000).await.expect("register");
    assert_eq!(more["image:1:0"].id, ids["image:1:0"].id);
    let row = |id: &str| {
        let (db, account) = (db.clone(), a.id.clone());
        let id = id.to_owned();
        async move { media::find(&db, &account, &id, NOW).await.expect("find").expect("row") }
    };
    let first_image = row(&ids["image:1:0"].id).await;
    let second_image = row(&more["image:2:0"].id).await;
    assert_eq!((first_image.n, second_image.n, first_image.source_url.as_str()), (1, 2, "https://cdn/i?2"));
    assert_eq!(first_image.expires_at, NOW + 5_000);
    // Another account never sees it; an expired one is gone.
    assert!(media::find(&db, &b.id, &ids["cover"].id, NOW).await.expect("find").is_none());
    assert!(media::find(&db, &a.id, &ids["cover"].id, NOW + 1_000).await.expect("find").is_none());
    // Bytes recorded, shared, then the expired rows deleted (and only those still expired).
    media::set_content(&db, &ids["cover"].id, "sha256/ab", "image/png", 5, NOW).await.expect("content");
    assert!(media::key_in_use(&db, "sha256/ab", NOW).await.expect("in use"));
    assert!(!media::key_in_use(&db, "sha256/ab", NOW + 1_000).await.expect("in use"));
    let due = media::due(&db, NOW + 1_000, 10).await.expect("due");
    assert_eq!(due, vec![(ids["cover"].id.clone(), Some("sha256/ab".to_owned()))]);
    let ids_due: Vec<String> = due.into_iter().map(|(id, _)| id).collect();
    assert_eq!(media::delete_expired(&db, &ids_due, NOW + 999).await.expect("delete"), 0, "not yet expired then");
    assert_eq!(media::delete_expired(&db, &ids_due, NOW + 1_000).await.expect("delete"), 1);
    assert_eq!(media::count(&db, &a.id, "tiktok:1").await.expect("count"), (2, 0));
    t.drop_database().await.expect("drop");
}

/// A listener that reads, as the cache's copies do after each change.
struct Reading(std::sync::atomic::AtomicUsize);

impl cova_storage::Changes for Reading {
    fn changed<'a>(
        &'a self,
        db: &'a cova_storage::Db,
        changes: &'a [cova_storage::Change<'a>],
    ) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            for change in changes {
                if let cova_storage::Change::Account(id) = change {
                    accounts::usage(db, id, NOW).await.expect("the listener reads");
                    self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        })
    }
}

/// Writers announce their changes after giving their connection back: a listener that needs a
/// connection of its own never waits on a pool the writers hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn announcing_a_change_needs_no_second_connection_per_writer() {
    let mut t = TestDatabase::create().await;
    t.config.pool_size = 2;
    t.config.acquire_timeout_ms = 1_000;
    let db = t.db().await;
    let a = accounts::create(&db, "pool@example.com", true, 0, NOW).await.expect("create");
    let listener = Arc::new(Reading(Default::default()));
    db.listen(listener.clone());
    let mut writers = Vec::new();
    for _ in 0..16 {
        let (db, id) = (db.clone(), a.id.clone());
        writers.push(tokio::spawn(async move { balances::grant(&db, &id, 10, "pool", NOW).await }));
    }
    for w in writers {
        w.await.expect("join").expect("every grant commits and is announced");
    }
    assert_eq!(listener.0.load(std::sync::atomic::Ordering::SeqCst), 16);
    assert_eq!(balances::current(&db, &a.id, NOW).await.expect("balance").granted, 160);
    t.drop_database().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhook_secrets_and_chat_ids_are_sealed_at_rest_and_reseal_after_a_key_rotation() {
    use cova_storage::repo::channels::{self, Channels};
    use diesel::prelude::*;
    let t = TestDatabase::create().await;
    let old_key = cova_auth::sealing::Keyring::generate_key();
    let mut config = t.config.clone();
    config.encryption_keys = Some(old_key.clone().into());
    let db = cova_storage::Db::connect(&config).expect("pool");
    db.migrate().await.expect("migrate");
    let a = accounts::create(&db, "seal@example.com", true, 0, NOW).await.expect("account");
    let next = Channels {
        telegram_chat_id: Some("-1001234567".into()),
        telegram_enabled: true,
        webhook_url: Some("https://hooks.example.com/cova".into()),
        webhook_enabled: true,
        ..Channels::default()
    };
    let (stored, created) = channels::put(&db, &a.id, &next, "whsec_the_secret", NOW).await.expect("put");
    assert!(created);
    assert_eq!(stored.webhook_secret.as_deref(), Some("whsec_the_secret"));
    let raw = || async {
        use cova_storage::schema::channels as c;
        let query = c::table.find(&a.id).select((c::telegram_chat_id, c::webhook_secret));
        let mut conn = db.conn().await.expect("conn");
        conn.tx().first::<(Option<String>, Option<String>), _>(query).await.expect("row")
    };
    let (chat, secret) = raw().await;
    let (chat, secret) = (chat.expect("chat"), secret.expect("secret"));
    assert!(!chat.contains("1001234567") && !secret.contains("the_secret"), "stored in clear: {chat} {secret}");
    let read = channels::get(&db, &a.id).await.expect("get");
    assert_eq!(
        (read.telegram_chat_id.as_deref(), read.webhook_secret.as_deref()),
        (Some("-1001234567"), Some("whsec_the_secret"))
    );

    // A dump alone opens nothing: another key cannot read the row.
    let mut stranger = t.config.clone();
    stranger.encryption_keys = Some(cova_auth::sealing::Keyring::generate_key().into());
    let other = cova_storage::Db::connect(&stranger).expect("pool");
    assert!(channels::get(&other, &a.id).await.is_err());

    // Rotation: a new key first, the old one kept for reading; reseal; then the old one can go.
    let new_key = cova_auth::sealing::Keyring::generate_key();
    let mut rotated = t.config.clone();
    rotated.encryption_keys = Some(format!("{new_key},{old_key}").into());
    let db2 = cova_storage::Db::connect(&rotated).expect("pool");
    assert_eq!(
        channels::get(&db2, &a.id).await.expect("old key still reads").webhook_secret.as_deref(),
        Some("whsec_the_secret")
    );
    assert_eq!(channels::reseal_all(&db2).await.expect("reseal"), 1);
    assert_eq!(channels::reseal_all(&db2).await.expect("reseal"), 0, "nothing left to reseal");
    let mut only_new = t.config.clone();
    only_new.encryption_keys = Some(new_key.into());
    let db3 = cova_storage::Db::connect(&only_new).expect("pool");
    let read = channels::get(&db3, &a.id).await.expect("the new key alone reads");
    assert_eq!(
        (read.telegram_chat_id.as_deref(), read.webhook_secret.as_deref()),
        (Some("-1001234567"), Some("whsec_the_secret"))
    );
    t.drop_database().await.expect("drop");
}

// ---- the crate's pure helpers (no database)

#[test]
fn placeholders_are_numbered_for_postgres() {
    use cova_storage::pool::bind_params;
    assert_eq!(bind_params(true, "a = ? AND b = ?"), "a = $1 AND b = $2");
    assert_eq!(bind_params(false, "a = ?"), "a = ?");
}

/// The build sets `SQLITE_ENABLE_QPSG` and `SQLITE_DEFAULT_MEMSTATUS=0` (`.cargo/config.toml`):
/// without the first, every query with a bound LIMIT is compiled again on each run; without the
/// second, every allocation takes one process-wide mutex.
#[test]
fn sqlite_is_built_with_the_planner_guarantee_and_without_memory_statistics() {
    use diesel::{Connection, RunQueryDsl};
    let mut conn = diesel::sqlite::SqliteConnection::establish(":memory:").expect("in-memory SQLite");
    for option in ["ENABLE_QPSG", "DEFAULT_MEMSTATUS=0"] {
        let used: i32 = diesel::select(diesel::dsl::sql::<diesel::sql_types::Integer>(&format!(
            "sqlite_compileoption_used('{option}')"
        )))
        .get_result(&mut conn)
        .expect("compile options");
        assert_eq!(used, 1, "LIBSQLITE3_FLAGS: SQLITE_{option} did not reach the SQLite build");
    }
}

#[test]
fn like_patterns_escape_wildcards() {
    assert_eq!(cova_storage::repo::breakdown::like_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
}

/// Writing stored comments as JSON ([`cova_storage::repo::breakdown`]): copied, never parsed again.
mod breakdown_writing {
    use cova_domain::time::rfc3339;
    use cova_storage::repo::breakdown::{FIRST_PAGE_MAX_BYTES, FirstPage, Page, Row, write_page};
    use serde_json::{Value, json};
    use std::collections::HashMap;

    fn row(position: i64, id: &str, parent: Option<&str>, body: Value, seen: Option<i64>) -> Row {
        Row {
            position,
            comment_id: id.into(),
            parent_id: parent.map(Into::into),
            body: body.to_string(),
            first_seen_at: seen,
            sentiment: None,
        }
    }

    /// The rendering the writer replaces: each body parsed, `first_seen_at` added, replies
    /// nested; the reference the written JSON must equal.
    fn parsed(page: &Page) -> Vec<Value> {
        let comment = |row: &Row| -> Option<Value> {
            let mut v = serde_json::from_str::<Value>(&row.body).ok()?;
            v.as_object_mut()?.insert("first_seen_at".into(), json!(row.first_seen_at.map(rfc3339)));
            Some(v)
        };
        let mut by_parent: HashMap<String, Vec<Value>> = HashMap::new();
        for row in &page.replies {
            if let (Some(parent), Some(v)) = (&row.parent_id, comment(row)) {
                by_parent.entry(parent.clone()).or_default().push(v);
            }
        }
        page.top
            .iter()
            .filter_map(|row| {
                let mut v = comment(row)?;
                let replies = by_parent.remove(&row.comment_id).unwrap_or_default();
                v.as_object_mut()?.insert("replies".into(), Value::Array(replies));
                Some(v)
            })
            .collect()
    }

    fn sample() -> Page {
        Page {
            top: vec![
                row(0, "a", None, json!({"id": "a", "text": "first \"quoted\" }"}), Some(1_700_000_000_000)),
                row(3, "b", None, json!({"id": "b", "text": "no replies"}), None),
                row(5, "c", None, json!({}), None),
            ],
            replies: vec![
                row(1, "a1", Some("a"), json!({"id": "a1", "text": "r1"}), Some(1_700_000_000_000)),
                row(2, "a2", Some("a"), json!({"id": "a2", "text": "r2"}), None),
                row(6, "c1", Some("c"), json!({"id": "c1"}), None),
            ],
        }
    }

    #[test]
    fn stored_bodies_are_nested_as_the_parsed_rendering_would() {
        let page = sample();
        let mut out = b"[".to_vec();
        let mut first = true;
        write_page(&mut out, &page, &mut first);
        // A second page continues the same array.
        let more = Page { top: vec![row(9, "d", None, json!({"id": "d"}), None)], replies: vec![] };
        write_page(&mut out, &more, &mut first);
        out.push(b']');
        let written: Value = serde_json::from_slice(&out).expect("valid JSON");
        let mut expected = parsed(&page);
        expected.extend(parsed(&more));
        assert_eq!(written, Value::Array(expected));
    }

    #[test]
    fn a_body_that_is_not_an_object_is_left_out() {
        let page = Page {
            top: vec![row(0, "a", None, json!("text"), None), row(1, "b", None, json!({"id": "b"}), None)],
            replies: vec![],
        };
        let mut out = b"[".to_vec();
        write_page(&mut out, &page, &mut true);
        out.push(b']');
        let written: Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(written, json!([{"id": "b", "first_seen_at": null, "replies": []}]));
    }

    /// A kept first page serves any smaller limit as the stream would have written it, and a
    /// larger one only when it holds every comment.
    #[test]
    fn a_first_page_serves_the_pages_it_holds() {
        let page = sample();
        let kept = FirstPage::of(&page);
        assert!(kept.all, "three comments are all of them");
        for limit in 1..=5 {
            let (body, written) = kept.serve(limit).expect("held");
            let served: Value = serde_json::from_slice(&[b"[", &body[..], b"]"].concat()).expect("valid JSON");
            let n = usize::try_from(limit.min(3)).expect("small");
            assert_eq!(served, Value::Array(parsed(&page)[..n].to_vec()), "limit {limit}");
            assert_eq!(written.top_level, limit.min(3));
            assert_eq!(written.last_position, Some([0, 3, 5][n - 1]));
        }
        let cut = FirstPage { all: false, ..kept };
        assert!(cut.serve(3).is_some());
        assert!(cut.serve(4).is_none(), "a page that is not all of them cannot say what follows it");
    }

    #[test]
    fn a_first_page_stops_before_its_size_limit() {
        let long = "x".repeat(FIRST_PAGE_MAX_BYTES / 3);
        let page = Page {
            top: (0..5).map(|n| row(n, &n.to_string(), None, json!({"text": long}), None)).collect(),
            replies: vec![],
        };
        let kept = FirstPage::of(&page);
        assert_eq!((kept.tops.len(), kept.all), (2, false));
    }
}

#[test]
fn only_the_exact_amount_in_the_checkouts_currency_pays() {
    use cova_storage::repo::purchases::{Payment, Purchase, mismatch};
    let p = Purchase {
        checkout_id: "cs_1".into(),
        account_id: "a".into(),
        pack: "50k".into(),
        comments: 50_000,
        amount: 9_900,
        currency: "usd".into(),
        created_at: 0,
        paid_at: None,
        event_id: None,
        mismatch: None,
        mismatch_event_id: None,
    };
    assert_eq!(mismatch(&p, Payment { amount: Some(9_900), currency: Some("USD") }), None);
    for (amount, currency) in
        [(Some(1), Some("usd")), (Some(9_900), Some("jpy")), (None, Some("usd")), (Some(9_900), None)]
    {
        let reason = mismatch(&p, Payment { amount, currency }).expect("refused");
        assert!(reason.contains("for a checkout of 9900 usd"), "{reason}");
    }
    assert_eq!(
        mismatch(&p, Payment { amount: Some(99_000), currency: Some("usd") }).as_deref(),
        Some("paid 99000 usd for a checkout of 9900 usd"),
        "overpaying is a mismatch too: the operator refunds it"
    );
}

/// Scrapes post `tiktok:{n}` for `account` through the scraper's calls: created and started at
/// `started`, five comments stored, completed at `finished` (left collecting when `None`).
async fn scrape(db: &cova_storage::Db, account: &str, n: i64, started: i64, finished: Option<i64>) -> String {
    let comments: Vec<(String, i64)> = (0..5).map(|c| (format!("c{c}"), 0)).collect();
    scrape_of(db, account, n, (started, finished), &comments).await
}

/// A scrape of `tiktok:{n}` that stored `comments` (`(id, posted_at)`).
async fn scrape_of(
    db: &cova_storage::Db,
    account: &str,
    n: i64,
    (started, finished): (i64, Option<i64>),
    comments: &[(String, i64)],
) -> String {
    use cova_storage::repo::jobs::{self, CreateOutcome, NewAnalyze, Scraped, Start, StoredComment};
    let (r#ref, url) = (format!("tiktok:{n}"), format!("https://www.tiktok.com/@a/video/{n}"));
    let new = NewAnalyze {
        account_id: account,
        token_id: None,
        session_id: None,
        r#ref: &r#ref,
        url: &url,
        idempotency_key: None,
        known_comments: Some(5),
        refresh: true,
        batch_id: None,
        max_comments: cova_storage::repo::jobs::Cap::Set(None),
    };
    let job = match jobs::create_analyze(db, new, "{}", started).await.expect("create") {
        CreateOutcome::Created { job, .. } => job,
        other => panic!("not created: {other:?}"),
    };
    let lease = ("scraper", 3_600_000);
    let start = jobs::start(db, &job.id, lease.0, lease.1, started).await.expect("start");
    assert!(matches!(start, Start::Collect { .. }), "{start:?}");
    let comments: Vec<StoredComment> = comments
        .iter()
        .map(|(c, posted_at)| StoredComment {
            comment_id: c.clone(),
            parent_id: None,
            body: format!(r#"{{"text":"comment {c}"}}"#),
            likes: 0,
            posted_at: *posted_at,
            search: format!("comment {c}"),
            ..StoredComment::default()
        })
        .collect();
    let expected = Some(comments.len() as i64);
    jobs::append_comments(db, &job.id, lease, &comments, expected, started).await.expect("append");
    if let Some(at) = finished {
        assert!(jobs::complete(db, &job.id, lease.0, &Scraped::default(), "{}", at).await.expect("complete"));
    }
    job.id
}

/// The purge keeps exactly the rows it must. Comments are stored under the day their scrape
/// started; an expired breakdown's rows go at once on SQLite, and on PostgreSQL with their day's
/// partition, dropped whole once no breakdown and no running job uses it: a scrape that ran past
/// midnight keeps its day, so does a job still collecting, and a day whose only breakdown moved
/// to a newer scrape goes early. Every step runs on a clock the test sets.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_partitioned_purge_keeps_exactly_the_rows_it_must() {
    use cova_storage::repo::comment_days::{self, DAY_MS, day_of};
    use cova_storage::repo::{analyses, jobs};
    const HOUR: i64 = 3_600_000;
    const KEPT: i64 = 14 * DAY_MS;
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let pg = db.is_postgres();
    seed_runs(&db, &[("a1", 10_000, 0), ("a2", 10_000, 0)], &[], &[]).await;
    let d0 = day_of(NOW) * DAY_MS;
    let (day0, day1, day2, day3) = (day_of(d0), day_of(d0) + 1, day_of(d0) + 2, day_of(d0) + 3);
    // Day 0: a scrape, and one that starts before midnight and ends after it.
    let a = scrape(&db, "a1", 1, d0 + 10 * HOUR, Some(d0 + 10 * HOUR)).await;
    let c = scrape(&db, "a1", 2, d0 + 24 * HOUR - 60_000, Some(d0 + 24 * HOUR + 60_000)).await;
    // Day 1: another account's scrape of the same post, and a job that goes on collecting.
    let e = scrape(&db, "a2", 1, d0 + 36 * HOUR, Some(d0 + 36 * HOUR)).await;
    let r = scrape(&db, "a2", 3, d0 + 36 * HOUR, None).await;
    // Day 2, then day 3: a watched post scraped again; the newer scrape takes over.
    let w1 = scrape(&db, "a1", 4, d0 + 60 * HOUR, Some(d0 + 60 * HOUR)).await;
    let w2 = scrape(&db, "a1", 4, d0 + 84 * HOUR, Some(d0 + 84 * HOUR)).await;

    let left = |job: &str| {
        let (db, job) = (db.clone(), job.to_owned());
        async move {
            use cova_storage::schema::job_comments;
            use diesel::{ExpressionMethods, QueryDsl};
            let query = job_comments::table.filter(job_comments::job_id.eq(job)).count();
            let mut conn = db.conn().await.expect("conn");
            conn.tx().get_result::<i64, _>(query).await.expect("count")
        }
    };
    // The janitor's purge at `now`: breakdowns expired (in small claims), then unused days dropped.
    let janitor = |now: i64| {
        let db = db.clone();
        async move {
            let mut expired = 0;
            loop {
                let n = analyses::expire_due(&db, now, 2).await.expect("expire");
                expired += n;
                if n < 2 {
                    break;
                }
            }
            (expired, comment_days::drop_unused(&db, now).await.expect("drop days"))
        }
    };
    let on_pg = |days: Vec<i64>| if pg { days } else { Vec::new() };
    // The days this test stored comments under, among those dropped (the janitor also makes
    // today's and tomorrow's partitions, which a later jump of the clock finds unused).
    let scraped = [day0, day1, day2, day3];
    let janitor = |now: i64| {
        let run = janitor(now);
        async move {
            let (expired, mut dropped) = run.await;
            dropped.retain(|day| scraped.contains(day));
            (expired, dropped)
        }
    };
    // An expired breakdown's rows: gone on SQLite; on PostgreSQL until its day is dropped.
    let lingering = |n: i64| if pg { n } else { 0 };
    assert_eq!(left(&w1).await, 0, "the older scrape of a post is released when the newer completes");
    for job in [&a, &c, &e, &r, &w2] {
        assert_eq!(left(job).await, 5, "{job} stored its five comments");
    }

    // Day 0 + 14 days: `a` expired. Day 0 is kept for `c`, which ended on day 1; day 2 is no
    // longer used by anything.
    assert_eq!(janitor(d0 + 10 * HOUR + KEPT).await, (1, on_pg(vec![day2])));
    assert_eq!(left(&a).await, lingering(5));
    for job in [&c, &e, &r, &w2] {
        assert_eq!(left(job).await, 5, "{job} is still used");
    }
    // Again at the same time: nothing more.
    assert_eq!(janitor(d0 + 10 * HOUR + KEPT).await, (0, Vec::new()));

    // `c` expired: day 0 goes.
    assert_eq!(janitor(d0 + 24 * HOUR + 60_000 + KEPT).await, (1, on_pg(vec![day0])));
    assert_eq!((left(&a).await, left(&c).await), (0, 0));
    // `e` expired: day 1 is kept for `r`, still collecting, until it fails.
    let at = d0 + 36 * HOUR + KEPT;
    assert_eq!(janitor(at).await, (1, Vec::new()));
    assert_eq!((left(&e).await, left(&r).await), (lingering(5), 5));
    assert!(jobs::fail(&db, &r, "scraper", "post_unavailable", "gone", "{}", at).await.expect("fail"));
    assert_eq!(janitor(at).await, (0, on_pg(vec![day1])));
    assert_eq!((left(&e).await, left(&r).await, left(&w2).await), (0, 0, 5));
    // `w2` expired: day 3 goes, and nothing is left.
    assert_eq!(janitor(d0 + 84 * HOUR + KEPT).await, (1, on_pg(vec![day3])));
    assert_eq!(left(&w2).await, 0);
    if pg {
        // A day detached whose drop did not follow (the janitor stopped in between) goes next time.
        let orphan = day0 - 30;
        let mut conn = db.conn().await.expect("conn");
        let detach = format!(
            "SELECT cova_comments_day({orphan}); ALTER TABLE job_comments DETACH PARTITION job_comments_d{orphan}"
        );
        conn.tx().batch_execute(&detach).await.expect("a detached day");
        let later = d0 + 84 * HOUR + KEPT;
        assert_eq!(comment_days::drop_unused(&db, later).await.expect("drop"), vec![orphan]);
        // Left: the days the janitor made ahead (yesterday's, today's, tomorrow's), nothing else.
        let today = day_of(later);
        #[derive(diesel::QueryableByName)]
        struct Name {
            #[diesel(sql_type = diesel::sql_types::Text)]
            name: String,
        }
        let partitions = diesel::sql_query(
            "SELECT c.relname::TEXT AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = 'job_comments'::regclass",
        );
        let names: Vec<String> =
            conn.tx().load::<Name, _>(partitions).await.expect("partitions").into_iter().map(|r| r.name).collect();
        let name = |day: i64| format!("job_comments_d{day}");
        assert!(names.contains(&name(today)) && names.contains(&name(today + 1)), "{names:?}");
        assert!(names.iter().all(|n| (today - 1..=today + 1).any(|day| n == &name(day))), "{names:?}");
    }
    t.drop_database().await.expect("drop");
}

/// Seeds accounts (`(id, granted, spent)`, no balance row when granted is negative), due
/// watches (`(account, n)`: entry `w{account}-{n}` of post `tiktok:{n}`) and running jobs
/// (`(account, n)` on post `tiktok:{n}`), all through SQL, at [`NOW`].
async fn seed_runs(
    db: &cova_storage::Db,
    accounts: &[(&str, i64, i64)],
    watches: &[(&str, i64)],
    running: &[(&str, i64)],
) {
    let month = cova_domain::time::month_of(NOW);
    let mut sql = String::new();
    for (id, granted, spent) in accounts {
        sql.push_str(&format!(
            "INSERT INTO accounts (id, email, email_confirmed_at, active_tokens, free_comments_left, created_at) \
             VALUES ('{id}', '{id}@example.com', 0, 0, 0, 0);"
        ));
        if *granted >= 0 {
            sql.push_str(&format!(
                "INSERT INTO balances (account_id, month, granted, reserved, spent) VALUES ('{id}', '{month}', {granted}, 0, {spent});"
            ));
        }
    }
    for (account, n) in watches {
        sql.push_str(&format!(
            "INSERT INTO analyses (id, account_id, ref, url, platform, status, created_at, saved_at, \
                                   watch_enabled, watch_interval_min, watch_next_run_at) \
             VALUES ('w{account}-{n}', '{account}', 'tiktok:{n}', 'https://www.tiktok.com/@a/video/{n}', 'tiktok', \
                     'ready', 0, 0, TRUE, 60, {due});",
            due = NOW - 1_000,
        ));
    }
    for (account, n) in running {
        sql.push_str(&format!(
            "INSERT INTO jobs (id, account_id, kind, ref, url, status, created_at) \
             VALUES ('run-{account}-{n}', '{account}', 'analyze', 'tiktok:{n}', 'https://www.tiktok.com/@a/video/{n}', \
                     'in_progress', 0);"
        ));
    }
    let mut conn = db.conn().await.expect("conn");
    conn.tx().batch_execute(&sql).await.expect("seed");
}

/// The scheduler's reschedule rule in these tests: an hour on, a minute on when busy.
fn next_run(
    _: &cova_storage::repo::watches::DueWatch,
    outcome: &cova_storage::repo::watches::RunStart,
) -> cova_storage::repo::watches::NextRun {
    use cova_storage::repo::watches::{NextRun, RunStart};
    match outcome {
        RunStart::Started { .. } | RunStart::Joined => NextRun { at: NOW + 3_600_000, ran_at: Some(NOW), error: None },
        RunStart::ConcurrencyLimit => NextRun { at: NOW + 60_000, ran_at: None, error: Some("busy".into()) },
        other => NextRun { at: NOW + 3_600_000, ran_at: None, error: Some(format!("{other:?}")) },
    }
}

/// A watch's schedule as read back: id, next run, last error, claim, last run.
type Schedule = (String, Option<i64>, Option<String>, i64, Option<i64>);

/// One group of due watches starts each run by the rules of a single refresh: a third
/// analysis starts and a fourth waits, a post being collected is joined, no pack and an empty
/// balance skip; the jobs, holds and outbox commands are written together, and each watch is
/// rescheduled unless its settings changed after it was claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_of_watch_runs_follows_the_rules_of_one_refresh() {
    use cova_storage::repo::watches::{self, RunStart};
    use cova_storage::schema::{analyses, balances, jobs, outbox, reservations};
    use diesel::{ExpressionMethods, QueryDsl};
    let t = TestDatabase::create().await;
    let db = t.db().await;
    seed_runs(
        &db,
        &[("busy", 1_000, 0), ("joins", 1_000, 0), ("nopack", -1, 0), ("empty", 100, 100), ("two", 1_000, 0)],
        &[("busy", 1), ("busy", 2), ("joins", 3), ("nopack", 4), ("empty", 5), ("two", 6), ("two", 7)],
        &[("busy", 10), ("busy", 11), ("joins", 3)],
    )
    .await;
    let mut due = watches::claim_due(&db, NOW, 100).await.expect("claim");
    due.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(due.len(), 7);
    assert!(watches::claim_due(&db, NOW, 100).await.expect("claim again").is_empty(), "claimed once");
    // The owner changes one watch after the claim: the claim ends and the change wins.
    let changed = due.iter().find(|w| w.id == "wtwo-7").expect("wtwo-7").id.clone();
    let mut conn = db.conn().await.expect("conn");
    let change = diesel::update(analyses::table.filter(analyses::id.eq(&changed)))
        .set((analyses::watch_claimed_until.eq(0), analyses::watch_next_run_at.eq(NOW + 42)));
    conn.tx().execute(change).await.expect("change");
    drop(conn);

    let outcomes = watches::start_runs(&db, &due, "{}", NOW, next_run).await.expect("start");
    let by_id: Vec<(&str, &RunStart)> = due.iter().map(|w| w.id.as_str()).zip(outcomes.iter()).collect();
    let kind = |id: &str| by_id.iter().find(|(w, _)| *w == id).map(|(_, o)| format!("{o:?}")).unwrap_or_default();
    assert!(kind("wbusy-1").starts_with("Started"), "{by_id:?}");
    assert_eq!(kind("wbusy-2"), "ConcurrencyLimit");
    assert_eq!(kind("wjoins-3"), "Joined");
    assert_eq!(kind("wnopack-4"), "PaymentRequired");
    assert_eq!(kind("wempty-5"), "QuotaExceeded");
    assert!(kind("wtwo-6").starts_with("Started") && kind("wtwo-7").starts_with("Started"), "{by_id:?}");

    let mut conn = db.conn().await.expect("conn");
    let mut tx = conn.tx();
    let queued: Vec<(String, String)> = tx
        .load(
            jobs::table
                .filter(jobs::status.eq("queued"))
                .order((jobs::account_id, jobs::ref_))
                .select((jobs::account_id, jobs::ref_)),
        )
        .await
        .expect("queued");
    let commands: i64 = tx.get_result(outbox::table.count()).await.expect("commands");
    let holds: i64 =
        tx.get_result(reservations::table.filter(reservations::state.eq("held")).count()).await.expect("holds");
    let reserved: Vec<(String, i64)> = tx
        .load(balances::table.order(balances::account_id).select((balances::account_id, balances::reserved)))
        .await
        .expect("reserved");
    let schedule: Vec<Schedule> = tx
        .load(analyses::table.order(analyses::id).select((
            analyses::id,
            analyses::watch_next_run_at,
            analyses::watch_last_error,
            analyses::watch_claimed_until,
            analyses::watch_last_run_at,
        )))
        .await
        .expect("schedule");
    drop(conn);
    let q = |a: &str, r: &str| (a.to_owned(), r.to_owned());
    assert_eq!(queued, vec![q("busy", "tiktok:1"), q("two", "tiktok:6"), q("two", "tiktok:7")]);
    assert_eq!((commands, holds), (3, 3), "a command and a hold per started run");
    let opening = cova_domain::limits::hold::OPENING;
    let want = |a: &str, n: i64| (a.to_owned(), n);
    assert_eq!(reserved, vec![want("busy", opening), want("empty", 0), want("joins", 0), want("two", 2 * opening)]);
    for (id, next, error, claimed, last_run) in &schedule {
        assert_eq!(*claimed, 0, "{id}: the claim is released");
        match id.as_str() {
            "wtwo-7" => assert_eq!((*next, last_run.is_none()), (Some(NOW + 42), true), "the change won"),
            "wbusy-2" => assert_eq!((*next, error.as_deref()), (Some(NOW + 60_000), Some("busy"))),
            "wbusy-1" | "wjoins-3" | "wtwo-6" => {
                assert_eq!((*next, error.as_deref(), *last_run), (Some(NOW + 3_600_000), None, Some(NOW)), "{id}")
            }
            _ => assert!(error.is_some() && last_run.is_none(), "{id}: skipped with its reason"),
        }
    }
    t.drop_database().await.expect("drop");
}

/// Groups that share accounts start at once without a deadlock, and each account still runs
/// at most three analyses: its lock serialises the groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn groups_started_at_once_never_pass_three_runs_per_account() {
    use cova_storage::repo::watches::{self, RunStart};
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let accounts = ["a", "b", "c", "d"];
    let seeded: Vec<(&str, i64, i64)> = accounts.iter().map(|a| (*a, 1_000, 0)).collect();
    let due_watches: Vec<(&str, i64)> = accounts.iter().flat_map(|a| (0..10).map(move |n| (*a, n))).collect();
    seed_runs(&db, &seeded, &due_watches, &[]).await;
    let due = watches::claim_due(&db, NOW, 100).await.expect("claim");
    assert_eq!(due.len(), 40);
    // Eight groups, each with watches of every account, in opposite orders.
    let mut groups: Vec<Vec<_>> = vec![Vec::new(); 8];
    for (i, w) in due.into_iter().enumerate() {
        groups[i % 8].push(w);
    }
    for (i, g) in groups.iter_mut().enumerate() {
        if i % 2 == 1 {
            g.reverse();
        }
    }
    let starts = groups.iter().map(|g| watches::start_runs(&db, g, "{}", NOW, next_run));
    let outcomes: Vec<RunStart> =
        futures::future::try_join_all(starts).await.expect("start").into_iter().flatten().collect();
    let started = outcomes.iter().filter(|o| matches!(o, RunStart::Started { .. })).count();
    let busy = outcomes.iter().filter(|o| **o == RunStart::ConcurrencyLimit).count();
    assert_eq!((started, busy), (12, 28), "three per account, the rest wait");
    for a in accounts {
        assert_eq!(cova_storage::repo::jobs::count_running(&db, a).await.expect("count"), 3, "{a}");
    }
    t.drop_database().await.expect("drop");
}

/// The SQLite file and the key beside it hold accounts, sessions and secrets: a new data
/// directory, the database and the key are the owner's alone, whatever the umask.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_sqlite_database_is_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let root = std::env::temp_dir().join(format!("cova-perm-{}-{}", std::process::id(), NOW));
    let data = root.join("data");
    let file = data.join("cova.db");
    let cfg = cova_config::DatabaseConfig { url: format!("sqlite://{}", file.display()), ..Default::default() };
    let db = cova_storage::Db::connect(&cfg).expect("opened");
    db.migrate().await.expect("migrated");
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700, "the data directory");
    assert_eq!(mode(&file), 0o600, "the database");
    assert_eq!(mode(&data.join("encryption.key")), 0o600, "the key");
    // A file an older version left readable by others is tightened when opened.
    drop(db);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("loosened");
    let _db = cova_storage::Db::connect(&cfg).expect("opened again");
    assert_eq!(mode(&file), 0o600);
    std::fs::remove_dir_all(&root).expect("cleaned up");
}

/// A spike alert of `kind` on `tiktok:1` whose window ends at `end`.
fn spike(account: &str, kind: cova_domain::spikes::Kind, end: i64) -> cova_messages::SpikeAlertEvent {
    let time = cova_domain::time::rfc3339;
    cova_messages::SpikeAlertEvent {
        event_type: cova_messages::SpikeEventType::SpikeAlert,
        id: cova_storage::repo::new_id(),
        account_id: account.to_owned(),
        kind: kind.as_str().to_owned(),
        r#ref: "tiktok:1".into(),
        url: "https://www.tiktok.com/@a/video/1".into(),
        title: None,
        author: None,
        window_start: time(end - 3_600_000),
        window_end: time(end),
        comments: 60,
        expected: 12.0,
        negative_share: 0.0,
        baseline_negative_share: 0.1,
        sentiment: cova_messages::SpikeSentiment { positive: 0.5, neutral: 0.5, negative: 0.0 },
        top_terms: Vec::new(),
        examples: Vec::new(),
        sensitivity: "balanced".into(),
        created_at: time(end),
        creator: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_checks_of_one_spike_record_one_alert() {
    use cova_domain::spikes::Kind;
    use cova_storage::repo::spikes;
    let t = TestDatabase::create().await;
    let db = t.db().await;
    let a = accounts::create(&db, "spike@example.com", true, 0, NOW).await.expect("account");
    let record = |kind, end| {
        let (db, event) = (db.clone(), spike(&a.id, kind, end));
        tokio::spawn(async move { spikes::record(&db, &event, kind, (end - 3_600_000, end), 360, "", end).await })
    };
    // Eight checks of the same spike at once (a job's end delivered again, two notifiers).
    let tasks: Vec<_> = (0..8).map(|_| record(Kind::Volume, NOW)).collect();
    let mut recorded = 0;
    for task in tasks {
        if task.await.expect("join").expect("db").is_some() {
            recorded += 1;
        }
    }
    assert_eq!(recorded, 1, "one alert per spike");
    // Within the cooldown (6 hours) the same kind waits; another kind does not; past it, a new
    // spike is recorded; a take-off is recorded once whatever the time.
    assert!(record(Kind::Volume, NOW + 5 * 3_600_000).await.expect("join").expect("db").is_none());
    assert!(record(Kind::Sentiment, NOW + 3_600_000).await.expect("join").expect("db").is_some());
    let later = record(Kind::Volume, NOW + 6 * 3_600_000).await.expect("join").expect("db").expect("recorded");
    assert!(record(Kind::Takeoff, NOW).await.expect("join").expect("db").is_some());
    assert!(record(Kind::Takeoff, NOW + 30 * 86_400_000).await.expect("join").expect("db").is_none());
    // Numbered in commit order without gaps from the refused ones.
    let all = spikes::after(&db, &a.id, None, 0, 100).await.expect("list");
    assert_eq!(all.iter().map(|x| x.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(all[2].id, later.id);
    t.drop_database().await.expect("drop");
}

/// A spike check's reads: the database counts comments per bucket exactly as the domain's
/// bucket rule does, and a comment's stored sentiment follows it to the next scrape of the post
/// while the comments new to it wait to be judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_counts_follow_the_domain_rule_and_sentiments_carry_to_the_next_scrape() {
    use cova_storage::repo::breakdown;
    const MIN: i64 = 60_000;
    let t = TestDatabase::create().await;
    let db = t.db().await;
    seed_runs(&db, &[("a1", 10_000, 0)], &[], &[]).await;
    let now = NOW;
    let times = [now - 1, now - 10 * MIN, now - 10 * MIN - 1, now, now - 35 * MIN - 5, now - 45 * MIN, 0];
    let first: Vec<(String, i64)> = times.iter().enumerate().map(|(i, at)| (format!("c{i}"), *at)).collect();
    let a = scrape_of(&db, "a1", 1, (now, Some(now)), &first).await;
    let width = 10 * MIN;
    let spans = |start: i64, buckets: usize, window_start: i64| breakdown::Spans {
        start,
        width,
        buckets,
        window_start,
        window_labels: 10,
        before_labels: 2,
    };
    let read = breakdown::timeline(&db, &a, spans(now - 4 * width, 4, now - width)).await.expect("timeline");
    assert_eq!(read.counts, cova_domain::spikes::counts(&times, now, 10, 4));
    assert_eq!(read.counts, vec![1, 0, 1, 2]);
    assert_eq!(read.first, Some(now - 35 * MIN - 5), "the earliest of those counted");
    assert_eq!((read.window.len(), read.before.len()), (2, 2), "two in the window; two of the two before read");
    let none = breakdown::timeline(&db, &a, spans(now + width, 2, now + 2 * width)).await.expect("timeline");
    assert_eq!(none, breakdown::Timeline { counts: vec![0, 0], ..breakdown::Timeline::default() }, "no comment");

    // Judged once: every comment waits, then none.
    assert_eq!(breakdown::unjudged(&db, &a, 100).await.expect("unjudged").len(), times.len());
    let labels: Vec<(String, i16)> =
        first.iter().enumerate().map(|(i, (id, _))| (id.clone(), (i % 3) as i16)).collect();
    breakdown::store_sentiments(&db, &a, &labels).await.expect("store");
    assert!(breakdown::unjudged(&db, &a, 100).await.expect("unjudged").is_empty());
    let read = breakdown::timeline(&db, &a, spans(now - 4 * width, 4, now - width)).await.expect("timeline");
    assert_eq!(read.window, vec![Some(0), Some(1)], "the latest first");
    assert_eq!(read.before, vec![Some(2), Some(1)], "the latest before the window, at most two");

    // The next scrape of the post: the known comments keep their labels, a new one waits.
    let mut second = first.clone();
    second.push(("new".into(), now + MIN));
    let b = scrape_of(&db, "a1", 1, (now + 2 * MIN, Some(now + 2 * MIN)), &second).await;
    let waiting = breakdown::unjudged(&db, &b, 100).await.expect("unjudged");
    assert_eq!(waiting.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), vec!["new"]);
    let carried = breakdown::first_sentiments(&db, &b, 3).await.expect("carried");
    assert_eq!(carried, vec![Some(0), Some(1), Some(2)]);
    t.drop_database().await.expect("drop");
}
