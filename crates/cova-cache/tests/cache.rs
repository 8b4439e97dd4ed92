//! The cache contract on the configured backend: memory by default, Redis when
//! `COVA_TEST_CACHE_URL` is set (CI runs both).

use cova_cache::{Cache, Rate};
use cova_config::CacheConfig;
use std::time::Duration;

fn cache() -> Cache {
    let url = std::env::var("COVA_TEST_CACHE_URL").unwrap_or_else(|_| "memory://".into());
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    Cache::connect(&CacheConfig { url, prefix, timeout_ms: 2_000 }).expect("cache")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn key_value_with_ttl_and_set_if_absent() {
    let c = cache();
    c.ping().await.expect("configured cache reachable");
    assert_eq!(c.get("a").await.expect("get"), None);
    c.set("a", b"1", Duration::from_millis(300)).await.expect("set");
    assert_eq!(c.get("a").await.expect("get").as_deref(), Some(&b"1"[..]));
    assert!(!c.set_nx("a", b"2", Duration::from_secs(5)).await.expect("set_nx"));
    assert!(c.set_nx("b", b"2", Duration::from_secs(5)).await.expect("set_nx"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(c.get("a").await.expect("get"), None, "expired");
    c.delete("b").await.expect("delete");
    assert_eq!(c.get("b").await.expect("get"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn set_if_absent_has_one_winner_under_concurrency() {
    let c = cache();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let c = c.clone();
        tasks.push(tokio::spawn(
            async move { c.set_nx("once", format!("{i}").as_bytes(), Duration::from_secs(10)).await },
        ));
    }
    let mut winners = 0;
    for t in tasks {
        if t.await.expect("join").expect("set_nx") {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcra_is_exact_under_twenty_parallel_requests() {
    let c = cache();
    let rate = Rate::new(10, Duration::from_secs(7_200));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move { c.rate_limit("meta:acct", rate, 1).await }));
    }
    let mut allowed = 0;
    for t in tasks {
        let d = t.await.expect("join").expect("rate limit");
        if d.allowed {
            allowed += 1;
        } else {
            assert!(d.retry_after_secs() >= 1);
            assert_eq!(d.remaining, 0);
        }
    }
    assert_eq!(allowed, 10);
    let peek = c.rate_limit("meta:acct", rate, 0).await.expect("peek");
    assert_eq!((peek.allowed, peek.remaining), (true, 0));
    // A refund makes room for exactly one more.
    c.refund("meta:acct", rate, 1).await.expect("refund");
    assert!(c.rate_limit("meta:acct", rate, 1).await.expect("after refund").allowed);
    assert!(!c.rate_limit("meta:acct", rate, 1).await.expect("full again").allowed);
    // Keys are independent.
    assert_eq!(c.rate_limit("meta:other", rate, 0).await.expect("peek").remaining, 10);
    // Nothing left on a shared Redis (the counter lives for its window, over an hour).
    c.delete("rl:meta:acct").await.expect("delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcra_refills_one_unit_per_interval() {
    let c = cache();
    let rate = Rate::new(2, Duration::from_millis(400));
    assert!(c.rate_limit("r", rate, 1).await.expect("1").allowed);
    assert!(c.rate_limit("r", rate, 1).await.expect("2").allowed);
    let denied = c.rate_limit("r", rate, 1).await.expect("3");
    assert!(!denied.allowed);
    assert!(denied.retry_after <= Duration::from_millis(200), "{:?}", denied.retry_after);
    tokio::time::sleep(Duration::from_millis(230)).await;
    assert!(c.rate_limit("r", rate, 1).await.expect("refilled").allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_window_admits_exactly_its_limit_under_parallel_requests_and_no_more_later() {
    use cova_cache::{Op, Window};
    let c = cache();
    let window = Window::new(10, Duration::from_secs(7_200));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move { c.window("meta:acct", window, Op::Hit(&format!("req-{i}"))).await }));
    }
    let mut admitted = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        let d = t.await.expect("join").expect("window");
        if d.allowed {
            admitted.push(i);
        } else {
            assert_eq!(d.remaining, 0);
            // The oldest entry leaves two hours after it was admitted.
            assert!((7_190..=7_200).contains(&d.retry_after_secs()), "{:?}", d.retry_after);
        }
    }
    assert_eq!(admitted.len(), 10);
    let peek = c.window("meta:acct", window, Op::Peek).await.expect("peek");
    assert_eq!((peek.allowed, peek.remaining), (true, 0));
    // Giving one entry back makes room for exactly one more.
    let undo = format!("req-{}", admitted[0]);
    assert_eq!(c.window("meta:acct", window, Op::Undo(&undo)).await.expect("undo").remaining, 1);
    assert!(c.window("meta:acct", window, Op::Hit("again")).await.expect("after undo").allowed);
    assert!(!c.window("meta:acct", window, Op::Hit("more")).await.expect("full again").allowed);
    assert_eq!(c.window("meta:other", window, Op::Peek).await.expect("peek").remaining, 10);
    c.delete("wl:meta:acct").await.expect("delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_window_frees_a_slot_only_when_its_oldest_entry_leaves() {
    use cova_cache::{Op, Window};
    let c = cache();
    let window = Window::new(2, Duration::from_millis(600));
    assert!(c.window("w", window, Op::Hit("a")).await.expect("a").allowed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(c.window("w", window, Op::Hit("b")).await.expect("b").allowed);
    let denied = c.window("w", window, Op::Hit("c")).await.expect("c");
    assert!(!denied.allowed);
    assert!(denied.retry_after <= Duration::from_millis(310), "{:?}", denied.retry_after);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(c.window("w", window, Op::Hit("d")).await.expect("a left").allowed);
    assert!(!c.window("w", window, Op::Hit("e")).await.expect("b is still in").allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stamped_value_is_stored_only_when_read_after_the_last_change() {
    let c = cache();
    let ttl = Duration::from_secs(10);
    assert_eq!(c.get_stamped("s").await.expect("get"), None);
    // A reader that found nothing reads the source under the current stamp.
    let reader = c.current_stamp("s").await.expect("current");
    // Two writers commit, then take their stamps; nothing was held yet.
    let (first, held) = c.stamp("s", ttl).await.expect("stamp");
    assert!(!held);
    let (second, _) = c.stamp("s", ttl).await.expect("stamp");
    assert!(reader < first && first < second, "{reader} {first} {second}");
    assert!(!c.put_stamped("s", reader, b"before both", ttl).await.expect("put"));
    assert!(!c.put_stamped("s", first, b"after the first", ttl).await.expect("put"));
    assert!(c.put_stamped("s", second, b"after both", ttl).await.expect("put"));
    assert_eq!(c.get_stamped("s").await.expect("get").as_deref(), Some(&b"after both"[..]));
    assert_eq!(c.stamp("s", ttl).await.expect("stamp"), (second + 1, true));
    // A put under a high stamp into an empty entry still leaves later stamps later.
    assert!(c.put_stamped("t", 40, b"x", ttl).await.expect("put"));
    assert_eq!(c.stamp("t", ttl).await.expect("stamp"), (41, true));
    // Stamped values expire like any value.
    assert!(c.put_stamped("u", 1, b"short", Duration::from_millis(200)).await.expect("put"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(c.get_stamped("u").await.expect("get"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_leave_the_value_of_the_last_stamp() {
    let c = cache();
    let ttl = Duration::from_secs(10);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let (stamp, _) = c.stamp("race", ttl).await.expect("stamp");
            // The "state" each writer read is its own stamp: the newest must win.
            tokio::time::sleep(Duration::from_millis(stamp % 5)).await;
            c.put_stamped("race", stamp, stamp.to_string().as_bytes(), ttl).await.expect("put");
            stamp
        }));
    }
    let mut last = 0;
    for t in tasks {
        last = last.max(t.await.expect("join"));
    }
    assert_eq!(c.get_stamped("race").await.expect("get"), Some(last.to_string().into_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_answers_each_read_as_the_single_calls_do() {
    use cova_cache::{Op, Read, Reply, Window};
    let c = cache();
    let rate = Rate::new(2, Duration::from_secs(60));
    let window = Window { limit: 1, period: Duration::from_secs(60) };
    c.put_stamped("snap", 1, b"{}", Duration::from_secs(10)).await.expect("put");
    c.set("plain", b"[1]", Duration::from_secs(10)).await.expect("set");
    let reads = [
        Read::Rate { key: "api", rate, cost: 1 },
        Read::Window { key: "meta", window, op: Op::Peek },
        Read::Stamped { key: "snap" },
        Read::Stamped { key: "absent" },
        Read::Plain { key: "plain" },
        Read::Plain { key: "absent" },
    ];
    let replies = c.batch(&reads).await.expect("batch");
    assert_eq!(replies.len(), 6);
    match &replies[0] {
        Reply::Decision(d) => assert!(d.allowed && d.remaining == 1, "{d:?}"),
        other => panic!("{other:?}"),
    }
    match &replies[1] {
        Reply::Decision(d) => assert_eq!((d.limit, d.remaining), (1, 1)),
        other => panic!("{other:?}"),
    }
    assert_eq!(replies[2], Reply::Value(Some(b"{}".to_vec())));
    assert_eq!(replies[3], Reply::Value(None));
    assert_eq!(replies[4], Reply::Value(Some(b"[1]".to_vec())));
    assert_eq!(replies[5], Reply::Value(None));
    // The batch spent from the same limit as the single call.
    let d = c.rate_limit("api", rate, 1).await.expect("rate");
    assert!(d.allowed && d.remaining == 0);
    match &c.batch(&reads[..1]).await.expect("batch")[0] {
        Reply::Decision(d) => assert!(!d.allowed, "{d:?}"),
        other => panic!("{other:?}"),
    }
}

/// A versioned value changes only through writers that read its current version: parallel
/// read-change-write loops (as processes sharing a platform queue run them) lose no change, and
/// one key's value is not another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_versioned_value_loses_no_change_under_parallel_writers() {
    let c = cache();
    let ttl = Duration::from_secs(60);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let v = c.load_versioned("queue").await.expect("load");
                let n: u64 = v.bytes.as_deref().and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()).unwrap_or(0);
                if c.store_versioned("queue", v.version, (n + 1).to_string().as_bytes(), ttl).await.expect("store") {
                    return;
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    let v = c.load_versioned("queue").await.expect("load");
    assert_eq!((v.version, v.bytes.as_deref()), (20, Some(&b"20"[..])), "every change kept once");
    assert!(v.now_us > 1_700_000_000_000_000, "the cache's clock in µs: {}", v.now_us);
    assert!(!c.store_versioned("queue", 19, b"stale", ttl).await.expect("store"), "a stale writer is refused");
    let other = c.load_versioned("another-queue").await.expect("load");
    assert_eq!((other.version, other.bytes), (0, None));
}
