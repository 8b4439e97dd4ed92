//! Every platform request waits its turn in the queue of its route (host, egress route,
//! session), one queue for every process of a deployment: the rules of `cova_domain::pace`
//! (the pace, fairness across accounts, a person first, no turn for an answered request)
//! applied to a queue kept in a [`QueueStore`] shared by the processes (the cache), or in this
//! process when none is given.
//!
//! A waiter reads the queue, changes it by the rules and writes it back only if nobody wrote
//! meanwhile (else it reads again). It looks again when the rules say its turn may have come
//! (the head: exactly at the next turn), at the latest every `MAX_POLL_US`, and at once when
//! one of this process' waiters left. It takes its turn only holding a permit of its host's
//! concurrency gate, so that a turn is always used at once.
//!
//! While the shared store does not answer, each process paces itself at its share of the
//! rate: the rate divided by the processes that used the route's queue in the last ten
//! minutes, as last seen ([`UNSEEN_SHARERS`] when never seen). It says so once in the log and
//! counts each such request (`cova_platform_pace_fallback_total`).

use crate::PlatformError;
use crate::demand::Demand;
use cova_domain::pace::{self, Class, Queue, Turn, account_key};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A queue as the shared store holds it.
pub struct StoredQueue {
    /// 0 when there is none.
    pub version: u64,
    pub bytes: Option<Vec<u8>>,
    /// The store's clock, in µs since the epoch: every process reads one clock.
    pub now_us: i64,
}

/// Keeps the queue of every route for every process that shares it: read with its version,
/// written back only if that version is still the stored one.
pub trait QueueStore: Send + Sync {
    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<StoredQueue, String>>;
    /// Stores `bytes` if the stored version is still `expected`; false when another writer came
    /// first.
    fn store<'a>(&'a self, key: &'a str, expected: u64, bytes: &'a [u8]) -> BoxFuture<'a, Result<bool, String>>;
}

/// The processes assumed to share a route whose queue this process never saw, while the
/// shared store does not answer.
pub const UNSEEN_SHARERS: u32 = 4;
/// A write that loses this many races in a row counts as a store that does not answer.
const CONFLICT_TRIES: usize = 32;
/// The shortest look-again delay (µs): a waiter never spins.
const MIN_POLL_US: i64 = 1_000;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn system_now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Where a waiter's queue is.
#[derive(Clone, Copy)]
enum Place {
    Shared,
    /// This process' own, paced at the rate divided by `share`.
    Local {
        share: i64,
    },
}

/// The queues of one deployment's platform requests, as this process sees them.
pub struct Turns {
    shared: Option<Arc<dyn QueueStore>>,
    /// Every queue when none is shared; the fallback queues while the shared one is away.
    local: Mutex<HashMap<String, Queue>>,
    /// Wakes this process' waiters of a queue when one of them leaves it.
    wake: Mutex<HashMap<String, Arc<Notify>>>,
    /// This process' changes of a shared queue, one at a time: its own waiters then never
    /// race each other's writes (only other processes' writes can make one read again).
    changing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Per queue, the processes that shared it when last seen.
    sharers: Mutex<HashMap<String, u32>>,
    /// This process, in the queues' list of members.
    process: u64,
    /// Whether the shared store is away (said once in the log).
    away: AtomicBool,
}

/// Takes a request's ticket out of its queue if its waiting future is dropped before its turn.
struct Leave {
    turns: Arc<Turns>,
    key: String,
    place: Place,
    ticket: Option<u64>,
}

impl Drop for Leave {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else { return };
        let (turns, key, place) = (self.turns.clone(), std::mem::take(&mut self.key), self.place);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { turns.leave(place, &key, ticket).await });
        }
    }
}

impl Turns {
    pub fn new(shared: Option<Arc<dyn QueueStore>>) -> Self {
        Self {
            shared,
            local: Mutex::default(),
            wake: Mutex::default(),
            changing: Mutex::default(),
            sharers: Mutex::default(),
            process: rand::random::<u64>().max(1),
            away: AtomicBool::new(false),
        }
    }

    fn wake(&self, key: &str) -> Arc<Notify> {
        lock(&self.wake).entry(key.to_owned()).or_default().clone()
    }

    /// Waits for the turn of one request to `host` in the queue `key`, at one request per
    /// `interval` (none: unpaced), as the current task's asker's. Answers the permit of `gate`
    /// to hold while the request is in flight, or why the request is not sent (its asker was
    /// answered or went away).
    pub async fn turn(
        self: &Arc<Self>,
        key: &str,
        host: &str,
        interval: Duration,
        gate: &Arc<Semaphore>,
    ) -> Result<OwnedSemaphorePermit, PlatformError> {
        let demand = Demand::current();
        let started = std::time::Instant::now();
        let class = demand.next_class();
        let interval_us = i64::try_from(interval.as_micros()).unwrap_or(i64::MAX);
        let outcome = if interval_us == 0 {
            tokio::select! {
                permit = gate.clone().acquire_owned() => permit.map_err(|_| shutting_down()),
                () = demand.answered() => Err(answered()),
            }
        } else {
            let account = account_key(demand.account());
            let mut outcome = None;
            if self.shared.is_some() {
                match self.wait(Place::Shared, key, (account, class), interval_us, gate, &demand).await {
                    Ok(done) => {
                        self.answers_again();
                        outcome = Some(done);
                    }
                    Err(e) => self.fall_back(key, host, &e),
                }
            }
            match outcome {
                Some(done) => done,
                None => {
                    let share = i64::from(if self.shared.is_some() { self.share(key) } else { 1 });
                    self.wait(Place::Local { share }, key, (account, class), interval_us, gate, &demand)
                        .await
                        .unwrap_or_else(|e| Err(PlatformError::Unavailable(e)))
                }
            }
        };
        match &outcome {
            Ok(_) => cova_metrics::platform_turn(host, class.as_str(), started.elapsed()),
            Err(_) => cova_metrics::platform_request_dropped(host),
        }
        outcome
    }

    /// The wait itself; `Err` when the shared store does not answer.
    async fn wait(
        self: &Arc<Self>,
        place: Place,
        key: &str,
        (account, class): (u64, Class),
        interval_us: i64,
        gate: &Arc<Semaphore>,
        demand: &Demand,
    ) -> Result<Result<OwnedSemaphorePermit, PlatformError>, String> {
        let interval_us = match place {
            Place::Shared => interval_us,
            Place::Local { share } => interval_us.saturating_mul(share.max(1)),
        };
        let wake = self.wake(key);
        let mut leave = Leave { turns: self.clone(), key: key.to_owned(), place, ticket: None };
        let mut class = class;
        loop {
            let woken = wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // The permit first: a turn taken is used at once.
            let permit = tokio::select! {
                permit = gate.clone().acquire_owned() => permit.map_err(|_| shutting_down()),
                () = demand.answered() => Err(answered()),
            };
            let permit = match permit {
                Ok(permit) => permit,
                Err(e) => return Ok(Err(e)),
            };
            let ticket = leave.ticket;
            let process = self.process;
            // Moved behind people while waiting: its place becomes a background one.
            let demoted = class == Class::Interactive && demand.is_behind();
            if demoted {
                class = Class::Background;
            }
            let ((id, turn), now) = self
                .change(place, key, |q, now| {
                    let id = match ticket {
                        Some(id) if !demoted => id,
                        held => {
                            if let Some(id) = held {
                                q.cancel(id);
                            }
                            q.seen(process, now);
                            q.enqueue(account, class, now)
                        }
                    };
                    (id, q.take(id, now, interval_us))
                })
                .await?;
            leave.ticket = Some(id);
            let at = match turn {
                Turn::Go => {
                    leave.ticket = None;
                    return Ok(Ok(permit));
                }
                // Dropped after a silence longer than its lease (a stalled process): again.
                Turn::Gone => {
                    leave.ticket = None;
                    continue;
                }
                Turn::Wait { at } => at,
            };
            drop(permit);
            let sleep = Duration::from_micros(u64::try_from(pace::poll_after(at, now).max(MIN_POLL_US)).unwrap_or(0));
            tokio::select! {
                () = tokio::time::sleep(sleep) => {}
                () = &mut woken => {}
                () = demand.answered() => {
                    // Out of the queue now rather than when the guard's task gets to it.
                    if let Some(ticket) = leave.ticket.take() {
                        self.leave(place, key, ticket).await;
                    }
                    return Ok(Err(answered()));
                }
            }
        }
    }

    /// Takes `ticket` out of its queue and lets this process' other waiters look again.
    async fn leave(&self, place: Place, key: &str, ticket: u64) {
        if let Err(e) = self.change(place, key, |q, _| q.cancel(ticket)).await {
            tracing::debug!(error = %e, "leaving a platform queue failed; the ticket's lease ends it");
        }
        self.wake(key).notify_waiters();
    }

    /// Applies `f` to the queue `key` (read, changed, written back if nobody wrote meanwhile)
    /// with the queue's clock; its result and that time.
    async fn change<R>(
        &self,
        place: Place,
        key: &str,
        mut f: impl FnMut(&mut Queue, i64) -> R,
    ) -> Result<(R, i64), String> {
        let store = match (place, &self.shared) {
            (Place::Shared, Some(store)) => store,
            _ => {
                let now = system_now_us();
                let mut queues = lock(&self.local);
                let queue = queues.entry(key.to_owned()).or_default();
                let result = f(queue, now);
                if queue.is_idle(now) && queue.served.is_empty() {
                    queues.remove(key);
                }
                return Ok((result, now));
            }
        };
        let one_at_a_time = lock(&self.changing).entry(key.to_owned()).or_default().clone();
        // While the store is away, one waiter at a time tries it; the others pace themselves
        // at once rather than wait for each other's time-outs.
        let _mine = if self.away.load(Ordering::Relaxed) {
            one_at_a_time.try_lock_owned().map_err(|_| "the shared queue is being tried again".to_owned())?
        } else {
            one_at_a_time.lock_owned().await
        };
        for _ in 0..CONFLICT_TRIES {
            let loaded = store.load(key).await?;
            // A queue written by another version of cova, or damaged, starts afresh.
            let mut queue: Queue =
                loaded.bytes.as_deref().and_then(|b| postcard::from_bytes(b).ok()).unwrap_or_default();
            let result = f(&mut queue, loaded.now_us);
            let bytes = postcard::to_allocvec(&queue).map_err(|e| e.to_string())?;
            lock(&self.sharers).insert(key.to_owned(), queue.sharers(loaded.now_us));
            if loaded.bytes.as_deref() == Some(bytes.as_slice()) || store.store(key, loaded.version, &bytes).await? {
                return Ok((result, loaded.now_us));
            }
        }
        Err(format!("the queue {key} kept changing under {CONFLICT_TRIES} writes in a row"))
    }

    /// This process' share of a route's rate while the shared queue is away.
    fn share(&self, key: &str) -> u32 {
        lock(&self.sharers).get(key).copied().unwrap_or(UNSEEN_SHARERS).max(1)
    }

    fn fall_back(&self, key: &str, host: &str, error: &str) {
        cova_metrics::platform_pace_fallback(host);
        if !self.away.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %error,
                share = self.share(key),
                "the shared queue of platform requests does not answer: this process paces each route \
                 itself at the route's rate divided by the processes that shared it"
            );
        }
    }

    fn answers_again(&self) {
        if self.away.swap(false, Ordering::Relaxed) {
            tracing::info!("the shared queue of platform requests answers again");
        }
    }
}

fn answered() -> PlatformError {
    PlatformError::Abandoned("the request was answered or its asker went away before its turn".into())
}

fn shutting_down() -> PlatformError {
    PlatformError::Unavailable("the HTTP client is shutting down".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    /// A shared store in memory that can be made to fail, counting writes.
    #[derive(Default)]
    struct Store {
        queues: Mutex<HashMap<String, (u64, Vec<u8>)>>,
        down: AtomicBool,
    }

    impl QueueStore for Store {
        fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<StoredQueue, String>> {
            Box::pin(async move {
                if self.down.load(Ordering::Relaxed) {
                    return Err("down".into());
                }
                let (version, bytes) = lock(&self.queues).get(key).cloned().unzip();
                Ok(StoredQueue { version: version.unwrap_or(0), bytes, now_us: system_now_us() })
            })
        }

        fn store<'a>(&'a self, key: &'a str, expected: u64, bytes: &'a [u8]) -> BoxFuture<'a, Result<bool, String>> {
            Box::pin(async move {
                let mut queues = lock(&self.queues);
                let current = queues.get(key).map_or(0, |(v, _)| *v);
                if current != expected {
                    return Ok(false);
                }
                queues.insert(key.to_owned(), (current + 1, bytes.to_vec()));
                Ok(true)
            })
        }
    }

    fn gate() -> Arc<Semaphore> {
        Arc::new(Semaphore::new(4))
    }

    #[tokio::test]
    async fn processes_sharing_a_store_take_turns_one_interval_apart() {
        let store: Arc<dyn QueueStore> = Arc::new(Store::default());
        let (one, two) = (Arc::new(Turns::new(Some(store.clone()))), Arc::new(Turns::new(Some(store))));
        let interval = Duration::from_millis(20);
        let times = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, turns) in [one.clone(), two.clone(), one, two].into_iter().enumerate() {
            let times = times.clone();
            tasks.push(tokio::spawn(Demand::interactive(&format!("acct-{i}")).scope(async move {
                let g = gate();
                for _ in 0..3 {
                    let _permit = turns.turn("h|direct", "h", interval, &g).await.expect("a turn");
                    lock(&times).push(system_now_us());
                }
            })));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let mut times = lock(&times).clone();
        times.sort_unstable();
        assert_eq!(times.len(), 12);
        for pair in times.windows(2) {
            // Turns are taken on the store's clock, which is this one here.
            assert!(pair[1] - pair[0] >= 19_000, "turns {} µs apart", pair[1] - pair[0]);
        }
    }

    #[tokio::test]
    async fn a_request_moved_behind_people_while_waiting_lets_another_accounts_go_first() {
        let turns = Arc::new(Turns::new(None));
        let g = gate();
        // Long enough that both wait while the test looks (a look takes up to 50 ms).
        let interval = Duration::from_secs(1);
        drop(turns.turn("h|direct", "h", interval, &g).await.expect("the first turn"));
        let order = Arc::new(Mutex::new(Vec::new()));
        let behind = Arc::new(AtomicBool::new(false));
        let waiter = |demand: Demand, name: &'static str| {
            let (turns, g, order) = (turns.clone(), g.clone(), order.clone());
            tokio::spawn(demand.scope(async move {
                drop(turns.turn("h|direct", "h", interval, &g).await.expect("a turn"));
                lock(&order).push(name);
            }))
        };
        // The flood's lookup waits first, as a person's; then another account's request.
        let flood = waiter(Demand::interactive_until("flood", behind.clone()), "flood");
        let queued = |n: usize| lock(&turns.local).get("h|direct").is_some_and(|q| q.tickets.len() == n);
        cova_testdb::eventually("the flood's ticket", async || queued(1)).await;
        let person = waiter(Demand::interactive("person"), "person");
        cova_testdb::eventually("both tickets", async || queued(2)).await;
        // Its lookups keep failing: it moves behind people before its turn.
        behind.store(true, Ordering::Relaxed);
        for task in [flood, person] {
            task.await.expect("task");
        }
        assert_eq!(*lock(&order), ["person", "flood"]);
    }

    #[tokio::test]
    async fn an_answered_request_leaves_the_queue_and_is_never_sent() {
        let turns = Arc::new(Turns::new(None));
        let g = gate();
        let interval = Duration::from_secs(3600);
        // The first takes the pace; the second would wait an hour.
        drop(turns.turn("h|direct", "h", interval, &g).await.expect("the first turn"));
        let token = CancellationToken::new();
        let waiting = {
            let turns = turns.clone();
            let g = g.clone();
            tokio::spawn(
                Demand::interactive("a")
                    .answered_by(token.clone())
                    .scope(async move { turns.turn("h|direct", "h", interval, &g).await.map(drop) }),
            )
        };
        tokio::task::yield_now().await;
        token.cancel();
        let outcome = waiting.await.expect("task");
        assert!(matches!(outcome, Err(PlatformError::Abandoned(_))), "{outcome:?}");
        let queue = lock(&turns.local).get("h|direct").cloned().unwrap_or_default();
        assert!(queue.tickets.is_empty(), "its ticket left the queue: {queue:?}");
    }

    #[tokio::test]
    async fn a_store_that_does_not_answer_leaves_each_process_its_share_of_the_pace() {
        let store = Arc::new(Store::default());
        let turns = Arc::new(Turns::new(Some(store.clone() as Arc<dyn QueueStore>)));
        let g = gate();
        let interval = Duration::from_millis(10);
        // Seen with another process: two share the route.
        {
            let mut q = Queue::default();
            q.seen(12345, system_now_us());
            let bytes = postcard::to_allocvec(&q).expect("encode");
            lock(&store.queues).insert("h|direct".into(), (1, bytes));
        }
        drop(turns.turn("h|direct", "h", interval, &g).await.expect("a shared turn"));
        assert_eq!(turns.share("h|direct"), 2);
        store.down.store(true, Ordering::Relaxed);
        let mut times = Vec::new();
        for _ in 0..3 {
            drop(turns.turn("h|direct", "h", interval, &g).await.expect("a local turn"));
            times.push(system_now_us());
        }
        for pair in times.windows(2) {
            assert!(pair[1] - pair[0] >= 19_000, "at half the rate: {} µs apart", pair[1] - pair[0]);
        }
        assert!(turns.away.load(Ordering::Relaxed));
        store.down.store(false, Ordering::Relaxed);
        drop(turns.turn("h|direct", "h", interval, &g).await.expect("shared again"));
        assert!(!turns.away.load(Ordering::Relaxed));
    }
}
