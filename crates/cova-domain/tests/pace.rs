//! The platform queue's rules under random schedules: accounts send interactive and background
//! requests at random times, some in bursts of up to eighty, some askers go away (their request is
//! cancelled), some waiters die silently (their process is gone), and every live waiter looks at
//! the queue when it was told to, exactly as the scheduler's waiting loop does.
//! After every turn: never two turns closer than the interval; no cancelled request ever gets a
//! turn; a request with none of its own account's requests ahead waits for at most one turn of
//! each other account of its class (behind its own backlog: one per round); no
//! turn is left unused for longer than a waiter's longest sleep while a live request waits; and
//! never more than `BACKGROUND_EVERY` interactive turns in a row while background waits. At the
//! end every live request has had its turn.
//!
//! `COVA_PACE_SCHEDULES` sets the number of schedules (default 150); a failure prints its seed,
//! and `COVA_PACE_SEED=<seed>` replays that one schedule alone.

use cova_domain::pace::{BACKGROUND_EVERY, Class, MAX_POLL_US, Queue, TICKET_LEASE_US, Turn, poll_after};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// A small, seedable generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % u64::try_from(hi - lo + 1).unwrap_or(1)) as i64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The waiter of a request looks at the queue.
    Poll(u64),
    /// The asker of a request goes away.
    Cancel(u64),
}

#[derive(Debug)]
struct Request {
    account: u64,
    class: Class,
    enqueued: i64,
    /// Its waiter's process died: it never looks again.
    dead: bool,
    cancelled: bool,
    granted: Option<i64>,
    /// Turns given to other accounts of its class while it waited, by account.
    others: BTreeMap<u64, u32>,
    /// Turns given to its own account's earlier requests of its class while it waited.
    own: u32,
}

fn run(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let interval = rng.range(50_000, 3_000_000);
    let accounts = rng.range(1, 8) as u64;
    let mut q = Queue::default();
    let mut requests: BTreeMap<u64, Request> = BTreeMap::new();
    let mut events: BinaryHeap<Reverse<(i64, Event)>> = BinaryHeap::new();
    let mut last_turn: Option<i64> = None;
    let mut interactive_run = 0u32;
    // Cancellations since the last turn: each may leave the head's turn to a waiter asleep.
    let mut cancels = 0i64;

    // Arrivals: each account sends requests at random times, some in a burst.
    let mut arrivals: Vec<(i64, u64, Class)> = Vec::new();
    for account in 1..=accounts {
        let n = if rng.chance(20) { rng.range(30, 80) } else { rng.range(0, 12) };
        let burst = rng.chance(50);
        for _ in 0..n {
            let at = if burst { rng.range(0, interval) } else { rng.range(0, 60 * interval) };
            let class = if rng.chance(30) { Class::Background } else { Class::Interactive };
            arrivals.push((at, account, class));
        }
    }
    arrivals.sort_unstable_by_key(|a| a.0);
    let mut arrivals = arrivals.into_iter().peekable();
    let mut now = 0i64;

    loop {
        let next_event = events.peek().map(|Reverse((t, _))| *t);
        let next_arrival = arrivals.peek().map(|a| a.0);
        let Some(at) = [next_event, next_arrival].into_iter().flatten().min() else { break };
        now = now.max(at);
        if next_arrival == Some(at) && next_event.is_none_or(|e| e >= at) {
            let Some((_, account, class)) = arrivals.next() else { break };
            let id = q.enqueue(account, class, now);
            let dead = rng.chance(2);
            requests.insert(
                id,
                Request {
                    account,
                    class,
                    enqueued: now,
                    dead,
                    cancelled: false,
                    granted: None,
                    others: BTreeMap::new(),
                    own: 0,
                },
            );
            if !dead {
                events.push(Reverse((now, Event::Poll(id))));
            }
            if rng.chance(10) {
                events.push(Reverse((now + rng.range(0, 20 * interval), Event::Cancel(id))));
            }
            continue;
        }
        let Some(Reverse((_, event))) = events.pop() else { break };
        match event {
            Event::Cancel(id) => {
                let r = requests.get_mut(&id).ok_or("unknown request")?;
                if r.granted.is_none() {
                    r.cancelled = true;
                    q.cancel(id);
                    cancels += 1;
                }
            }
            Event::Poll(id) => {
                if requests[&id].cancelled || requests[&id].granted.is_some() {
                    continue;
                }
                // Who waits live at this turn, before it is taken.
                let background_waits = requests
                    .values()
                    .any(|r| r.class == Class::Background && r.granted.is_none() && !r.cancelled && !r.dead);
                match q.take(id, now, interval) {
                    Turn::Go => {
                        if let Some(last) = last_turn {
                            if now - last < interval {
                                return Err(format!("two turns {} µs apart, interval {interval}", now - last));
                            }
                            // This request waited through the whole gap: no turn may have been
                            // left unused longer than a waiter sleeps (once more per cancellation),
                            // unless a dead waiter held the head.
                            let dead_held = requests
                                .values()
                                .any(|o| o.dead && o.enqueued < now && o.enqueued + TICKET_LEASE_US >= last);
                            let bound = interval + MAX_POLL_US * (1 + cancels);
                            if requests[&id].enqueued <= last && !dead_held && now - last > bound {
                                return Err(format!(
                                    "a turn was left unused: {} µs between turns (bound {bound})",
                                    now - last
                                ));
                            }
                        }
                        last_turn = Some(now);
                        cancels = 0;
                        let (account, class) = (requests[&id].account, requests[&id].class);
                        if class == Class::Interactive && background_waits {
                            interactive_run += 1;
                            if interactive_run > BACKGROUND_EVERY {
                                return Err(format!(
                                    "{interactive_run} interactive turns in a row while background waited"
                                ));
                            }
                        } else {
                            interactive_run = 0;
                        }
                        for (other, r) in requests.iter_mut() {
                            if *other == id || r.granted.is_some() || r.cancelled || r.class != class {
                                continue;
                            }
                            if r.account == account {
                                r.own += 1;
                            } else {
                                *r.others.entry(account).or_default() += 1;
                            }
                        }
                        let r = requests.get_mut(&id).ok_or("unknown request")?;
                        if r.cancelled {
                            return Err("a cancelled request got a turn".into());
                        }
                        r.granted = Some(now);
                        check_wait(r)?;
                    }
                    Turn::Wait { at } => {
                        let sleep = poll_after(at, now).max(1);
                        events.push(Reverse((now + sleep, Event::Poll(id))));
                    }
                    Turn::Gone => {
                        return Err(format!("a live request lost its place (lease {TICKET_LEASE_US} µs)"));
                    }
                }
            }
        }
    }
    for (id, r) in &requests {
        if !r.dead && !r.cancelled && r.granted.is_none() {
            return Err(format!("request {id} of account {} never had its turn", r.account));
        }
    }
    Ok(())
}

/// The bound of one request's wait. With none of its own account's requests ahead, each other
/// account gets at most one turn of its class before it. Behind its own account's earlier
/// requests (one per round), each other account gets one turn per round, plus what was left of
/// the round under way when it arrived.
fn check_wait(r: &Request) -> Result<(), String> {
    let allowed = if r.own == 0 { 1 } else { r.own + 2 };
    match r.others.iter().find(|(_, n)| **n > allowed) {
        Some((account, turns)) => {
            Err(format!("account {} waited through {turns} turns of account {account}", r.account))
        }
        None => Ok(()),
    }
}

#[test]
fn the_queue_keeps_the_pace_and_every_bound_under_random_schedules() {
    if let Some(seed) = std::env::var("COVA_PACE_SEED").ok().and_then(|s| s.parse().ok()) {
        run(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        return;
    }
    let schedules: u64 = std::env::var("COVA_PACE_SCHEDULES").ok().and_then(|s| s.parse().ok()).unwrap_or(150);
    let mut failures = BTreeSet::new();
    for seed in 0..schedules {
        if let Err(e) = run(seed.wrapping_mul(0x2545_F491_4F6C_DD1D)) {
            failures.insert(format!("seed {}: {e}", seed.wrapping_mul(0x2545_F491_4F6C_DD1D)));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {schedules} schedules failed:\n{}",
        failures.len(),
        failures.into_iter().take(5).collect::<Vec<_>>().join("\n")
    );
}
