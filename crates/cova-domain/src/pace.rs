//! Who goes next on a platform route: the rules of the one queue every platform request of a
//! deployment waits in, per (host, egress route, session).
//!
//! - **The pace.** A route serves one request per interval: a turn is given only once the
//!   interval since the last turn has passed ([`Queue::next_at`]), and the next one is counted
//!   from the moment a turn is taken, so two turns are never closer than the interval.
//! - **Fair across accounts** (deficit round robin, one request per round): every waiting
//!   account gets one turn per round; within a round the account served longest ago goes
//!   first (one never served, first of all). A request therefore waits for at most one turn of
//!   each other account waiting, whatever their backlogs, plus the turn under way.
//! - **A person first.** [`Class::Interactive`] requests (a person waits: a metadata lookup, a
//!   list's counts, a job's first pages) go before [`Class::Background`] ones (watch runs,
//!   creator listings, the rest of a collection), except that background gets a turn after
//!   [`BACKGROUND_EVERY`] interactive turns in a row while it waits: never starved.
//! - **No turn for an answered request.** A request whose asker went away leaves the queue
//!   ([`Queue::cancel`]); a waiter not heard from for [`TICKET_LEASE_US`] (its process died) is
//!   dropped by the next change.
//!
//! Plain data, so that the same rules run over a queue kept in process or in a shared cache
//! (read, changed by these functions, written back if nobody changed it meanwhile). Times are
//! microseconds on the caller's clock.

use serde::{Deserialize, Serialize};

/// Interactive turns in a row, while background requests wait, after which one background
/// request goes.
pub const BACKGROUND_EVERY: u32 = 4;
/// A waiting request not heard from for this long is dropped (its process is gone).
pub const TICKET_LEASE_US: i64 = 15_000_000;
/// A waiter looks at the queue again at least this often (renewing its place well within the
/// lease, and noticing a turn that came early because others left).
pub const MAX_POLL_US: i64 = 2_000_000;
/// A process that used a queue within this time counts towards the share each process takes
/// of the pace when the shared queue cannot be reached.
pub const MEMBER_TTL_US: i64 = 600_000_000;
/// An asker whose lookups failed this often within the failed-lookups window
/// ([`crate::limits::FAILED_LOOKUPS`]) waits behind people: its further lookups are background
/// (a flood of links that lead nowhere then delays nobody's job, and is still never starved).
/// One: a link that leads nowhere is rare in a person's list and the rule of a flood, whose
/// every interactive turn is one another account's person waits for; a person's list with a
/// dead link is counted as fast as before while nobody else waits.
pub const DEMOTE_AFTER_FAILURES: u32 = 1;

/// A person's job: its first this many platform requests go before background work, the rest
/// are background. Four covers what a person sees first on every platform (the post, its
/// metadata, the first page of comments and the first page of replies): the whole of a small
/// post, so that another account's flood never stands between a person and a short result.
pub const JOB_FIRST_REQUESTS: u32 = 4;

/// The class of a lookup (a list's count, a link followed after its request was answered) by
/// an asker whose lookups failed `failures` times lately.
pub const fn lookup_class(failures: u32) -> Class {
    if failures >= DEMOTE_AFTER_FAILURES { Class::Background } else { Class::Interactive }
}

/// What is remembered of an account that was served and waits no more (its place in the round
/// order), for this long.
const SERVED_TTL_US: i64 = 3_600_000_000;

/// Whether a person waits for the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Class {
    /// A person waits: a metadata lookup, a list's counts, a short link, a job's first pages.
    Interactive,
    /// Nobody waits: watch runs, creator listings, the rest of a collection.
    Background,
}

impl Class {
    const fn index(self) -> usize {
        match self {
            Self::Interactive => 0,
            Self::Background => 1,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Background => "background",
        }
    }
}

/// One waiting request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    pub id: u64,
    /// [`account_key`] of the account it serves.
    pub account: u64,
    pub class: Class,
    /// The round of its class in which it goes.
    pub round: u64,
    /// Dropped after this, unless renewed.
    pub lease_until: i64,
}

/// An account's place in the round order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    pub account: u64,
    /// Per class, when its last turn was taken (0: never).
    pub last_turn: [i64; 2],
    /// Per class, the round of its last turn (none: never served in that class).
    pub last_round: [Option<u64>; 2],
}

/// A process that uses the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub process: u64,
    pub seen_at: i64,
}

/// The queue of one route.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queue {
    /// The earliest time of the next turn.
    pub next_at: i64,
    /// The last ticket id given.
    pub seq: u64,
    /// Per class, the round being served.
    pub round: [u64; 2],
    /// Interactive turns in a row while background requests waited.
    pub streak: u32,
    pub tickets: Vec<Ticket>,
    pub served: Vec<Served>,
    pub members: Vec<Member>,
}

/// What a waiting request is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Its turn: send now.
    Go,
    /// Not yet: look again at `at` (an estimate from its place; the head's is exact).
    Wait { at: i64 },
    /// It is not in the queue (dropped after its lease): ask again.
    Gone,
}

/// The key of an account in a queue: a hash of its id (FNV-1a, stable across processes and
/// builds), so that a queue holds numbers, not account ids. Requests asked by no account (a
/// tool, an anonymous visitor) share key 0.
pub fn account_key(account: &str) -> u64 {
    if account.is_empty() {
        return 0;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in account.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash.max(1)
}

impl Queue {
    fn served(&self, account: u64) -> Option<&Served> {
        self.served.iter().find(|s| s.account == account)
    }

    fn last_turn(&self, account: u64, class: Class) -> i64 {
        self.served(account).map_or(0, |s| s.last_turn[class.index()])
    }

    /// Adds a request of `account` to the queue; its ticket id.
    pub fn enqueue(&mut self, account: u64, class: Class, now: i64) -> u64 {
        self.prune(now);
        let c = class.index();
        // One request per account per round: after its last waiting one, or after the round
        // of its last turn; never before the round being served.
        let after = self
            .tickets
            .iter()
            .filter(|t| t.account == account && t.class == class)
            .map(|t| t.round + 1)
            .max()
            .or_else(|| self.served(account).and_then(|s| s.last_round[c]).map(|r| r + 1))
            .unwrap_or(0);
        self.seq += 1;
        let id = self.seq;
        self.tickets.push(Ticket {
            id,
            account,
            class,
            round: after.max(self.round[c]),
            lease_until: now + TICKET_LEASE_US,
        });
        id
    }

    /// Takes `ticket` out of the queue: its asker went away.
    pub fn cancel(&mut self, ticket: u64) {
        if let Some(index) = self.tickets.iter().position(|t| t.id == ticket) {
            let gone = self.tickets.remove(index);
            self.close_gap(&gone);
        }
    }

    /// The account's later requests of its class move up a round into the place a request
    /// left: an account never loses a round to a request that did not go.
    fn close_gap(&mut self, gone: &Ticket) {
        let floor = self.round[gone.class.index()];
        for t in self.tickets.iter_mut().filter(|t| t.account == gone.account && t.class == gone.class) {
            if t.round > gone.round && t.round > floor {
                t.round -= 1;
            }
        }
    }

    /// Drops the tickets whose lease ran out and what is no longer worth remembering.
    pub fn prune(&mut self, now: i64) {
        let expired: Vec<Ticket> = self.tickets.iter().filter(|t| t.lease_until < now).cloned().collect();
        for gone in &expired {
            self.cancel(gone.id);
        }
        let waiting: Vec<u64> = self.tickets.iter().map(|t| t.account).collect();
        self.served.retain(|s| {
            now - s.last_turn.iter().max().copied().unwrap_or(0) < SERVED_TTL_US || waiting.contains(&s.account)
        });
        self.members.retain(|m| now - m.seen_at < MEMBER_TTL_US);
    }

    /// Notes that `process` uses this queue.
    pub fn seen(&mut self, process: u64, now: i64) {
        match self.members.iter_mut().find(|m| m.process == process) {
            Some(m) => m.seen_at = m.seen_at.max(now),
            None => self.members.push(Member { process, seen_at: now }),
        }
    }

    /// The processes that used the queue lately (at least 1): while the shared queue cannot be
    /// reached, each paces itself at this share of the rate.
    pub fn sharers(&self, now: i64) -> u32 {
        let n = self.members.iter().filter(|m| now - m.seen_at < MEMBER_TTL_US).count();
        u32::try_from(n).unwrap_or(u32::MAX).max(1)
    }

    /// The order within a class: round first, then the account served longest ago, then arrival.
    fn order(&self, t: &Ticket) -> (u64, i64, u64) {
        (t.round, self.last_turn(t.account, t.class), t.id)
    }

    fn best(&self, class: Class) -> Option<&Ticket> {
        self.tickets.iter().filter(|t| t.class == class).min_by_key(|t| self.order(t))
    }

    /// The class whose request goes next, when any waits.
    fn next_class(&self) -> Option<Class> {
        let interactive = self.tickets.iter().any(|t| t.class == Class::Interactive);
        let background = self.tickets.iter().any(|t| t.class == Class::Background);
        match (interactive, background) {
            (true, true) if self.streak >= BACKGROUND_EVERY => Some(Class::Background),
            (true, _) => Some(Class::Interactive),
            (false, true) => Some(Class::Background),
            (false, false) => None,
        }
    }

    /// The ticket whose turn is next, when any waits.
    pub fn next(&self) -> Option<u64> {
        self.next_class().and_then(|c| self.best(c)).map(|t| t.id)
    }

    /// Roughly how many turns go before `ticket` (exact for the head: 0).
    pub fn position(&self, ticket: &Ticket) -> u64 {
        let key = self.order(ticket);
        let ahead = self.tickets.iter().filter(|t| t.class == ticket.class && self.order(t) < key).count() as u64;
        let others = self.tickets.iter().filter(|t| t.class != ticket.class).count() as u64;
        if others == 0 {
            return ahead;
        }
        let every = u64::from(BACKGROUND_EVERY);
        match ticket.class {
            // One background turn after every `BACKGROUND_EVERY` interactive ones.
            Class::Interactive => ahead + (ahead + u64::from(self.streak)) / every,
            Class::Background => {
                let first = every.saturating_sub(u64::from(self.streak)).min(others);
                first + ahead * (every + 1)
            }
        }
    }

    /// Whether `ticket` may go now, and takes its turn if so. A ticket that waits has its lease
    /// renewed once half of it has gone (so that most looks change nothing).
    pub fn take(&mut self, ticket: u64, now: i64, interval: i64) -> Turn {
        self.prune(now);
        let Some(index) = self.tickets.iter().position(|t| t.id == ticket) else {
            return Turn::Gone;
        };
        if self.tickets[index].lease_until - now < TICKET_LEASE_US / 2 {
            self.tickets[index].lease_until = now + TICKET_LEASE_US;
        }
        if self.next() != Some(ticket) || now < self.next_at {
            let place = self.position(&self.tickets[index]);
            let start = self.next_at.max(now);
            let at = start.saturating_add(interval.saturating_mul(i64::try_from(place).unwrap_or(i64::MAX)));
            return Turn::Wait { at };
        }
        let taken = self.tickets.remove(index);
        let c = taken.class.index();
        let background_waits = self.tickets.iter().any(|t| t.class == Class::Background);
        self.streak = match taken.class {
            Class::Interactive if background_waits => self.streak + 1,
            _ => 0,
        };
        self.round[c] = self.round[c].max(taken.round);
        match self.served.iter_mut().find(|s| s.account == taken.account) {
            Some(s) => {
                s.last_turn[c] = now;
                s.last_round[c] = Some(taken.round);
            }
            None => {
                let (mut last_turn, mut last_round) = ([0; 2], [None; 2]);
                last_turn[c] = now;
                last_round[c] = Some(taken.round);
                self.served.push(Served { account: taken.account, last_turn, last_round });
            }
        }
        // Counted from the turn taken, so that two turns are never closer than the interval.
        self.next_at = now + interval;
        Turn::Go
    }

    /// Whether the queue needs keeping at all: nothing waits and the pace is free again.
    pub fn is_idle(&self, now: i64) -> bool {
        self.tickets.is_empty() && now >= self.next_at
    }
}

/// How long a waiter sleeps before looking again after being told to wait until `at`.
pub fn poll_after(at: i64, now: i64) -> i64 {
    (at - now).clamp(0, MAX_POLL_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: i64 = 1_000;

    /// Takes turns for whoever is next, one per interval, until the queue is empty; the
    /// accounts served, in order.
    fn drain(q: &mut Queue, mut now: i64) -> Vec<u64> {
        let mut order = Vec::new();
        while let Some(next) = q.next() {
            now = now.max(q.next_at);
            let account = q.tickets.iter().find(|t| t.id == next).map(|t| t.account);
            assert_eq!(q.take(next, now, I), Turn::Go);
            order.extend(account);
        }
        order
    }

    #[test]
    fn accounts_take_turns_whatever_their_backlog() {
        let mut q = Queue::default();
        for _ in 0..5 {
            q.enqueue(1, Class::Interactive, 0);
        }
        q.enqueue(2, Class::Interactive, 0);
        q.enqueue(3, Class::Interactive, 0);
        q.enqueue(2, Class::Interactive, 0);
        assert_eq!(drain(&mut q, 0), vec![1, 2, 3, 1, 2, 1, 1, 1]);
    }

    #[test]
    fn a_newcomer_goes_before_a_backlog_at_the_next_turn() {
        let mut q = Queue::default();
        for _ in 0..10 {
            q.enqueue(1, Class::Interactive, 0);
        }
        let first = q.next().expect("a ticket");
        assert_eq!(q.take(first, 0, I), Turn::Go);
        let newcomer = q.enqueue(2, Class::Interactive, 10);
        assert_eq!(q.next(), Some(newcomer));
        assert_eq!(q.take(newcomer, 10, I), Turn::Wait { at: I }, "the pace still holds");
        assert_eq!(q.take(newcomer, I, I), Turn::Go);
    }

    #[test]
    fn the_pace_counts_from_the_turn_taken() {
        let mut q = Queue::default();
        let a = q.enqueue(1, Class::Interactive, 0);
        assert_eq!(q.take(a, 5_000, I), Turn::Go);
        let b = q.enqueue(1, Class::Interactive, 5_001);
        assert_eq!(q.take(b, 5_500, I), Turn::Wait { at: 6_000 });
        assert_eq!(q.take(b, 6_000, I), Turn::Go);
    }

    #[test]
    fn background_goes_after_interactive_but_is_never_starved() {
        let mut q = Queue::default();
        for _ in 0..3 {
            q.enqueue(9, Class::Background, 0);
        }
        for account in 100..112 {
            q.enqueue(account, Class::Interactive, 0);
        }
        let order = drain(&mut q, 0);
        let background: Vec<usize> = order.iter().enumerate().filter(|(_, a)| **a == 9).map(|(i, _)| i).collect();
        assert_eq!(background, vec![4, 9, 14], "one background turn after every four interactive ones");
    }

    #[test]
    fn a_cancelled_request_leaves_no_empty_round_behind() {
        let mut q = Queue::default();
        let first = q.enqueue(1, Class::Interactive, 0);
        q.enqueue(1, Class::Interactive, 0);
        for _ in 0..3 {
            q.enqueue(2, Class::Interactive, 0);
        }
        q.cancel(first);
        assert_eq!(drain(&mut q, 0), vec![1, 2, 2, 2], "account 1's second request takes the first one's round");
    }

    #[test]
    fn a_cancelled_request_never_gets_a_turn() {
        let mut q = Queue::default();
        let a = q.enqueue(1, Class::Interactive, 0);
        let b = q.enqueue(2, Class::Interactive, 0);
        q.cancel(a);
        assert_eq!(q.next(), Some(b));
        assert_eq!(q.take(a, 0, I), Turn::Gone);
    }

    #[test]
    fn a_silent_waiter_is_dropped_after_its_lease() {
        let mut q = Queue::default();
        let dead = q.enqueue(1, Class::Interactive, 0);
        let alive = q.enqueue(2, Class::Interactive, 0);
        // The live one keeps looking; the dead one never does.
        let mut now = 0;
        while now < TICKET_LEASE_US {
            now += MAX_POLL_US;
            assert!(matches!(q.take(alive, now, I), Turn::Wait { .. } | Turn::Go));
            if q.tickets.iter().all(|t| t.id != alive) {
                break;
            }
        }
        assert!(q.tickets.iter().all(|t| t.id != dead), "dropped once its lease ran out");
    }

    #[test]
    fn the_head_is_told_the_exact_time_and_others_an_estimate() {
        let mut q = Queue::default();
        let a = q.enqueue(1, Class::Interactive, 0);
        let b = q.enqueue(2, Class::Interactive, 0);
        let c = q.enqueue(3, Class::Interactive, 0);
        assert_eq!(q.take(a, 0, I), Turn::Go);
        assert_eq!(q.take(c, 10, I), Turn::Wait { at: 2 * I });
        assert_eq!(q.take(b, 10, I), Turn::Wait { at: I });
    }

    #[test]
    fn an_asker_whose_lookups_keep_failing_waits_behind_people() {
        assert_eq!(lookup_class(0), Class::Interactive);
        assert_eq!(lookup_class(DEMOTE_AFTER_FAILURES - 1), Class::Interactive);
        assert_eq!(lookup_class(DEMOTE_AFTER_FAILURES), Class::Background);
    }

    #[test]
    fn account_keys_are_stable_and_distinct() {
        assert_eq!(account_key(""), 0);
        assert_eq!(
            account_key("01a2013a-5ae9-767f-a904-3cf980a56d40"),
            account_key("01a2013a-5ae9-767f-a904-3cf980a56d40")
        );
        assert_ne!(account_key("a"), account_key("b"));
        assert_ne!(account_key("a"), 0);
    }

    #[test]
    fn sharers_count_the_processes_seen_lately() {
        let mut q = Queue::default();
        assert_eq!(q.sharers(0), 1);
        q.seen(7, 0);
        q.seen(8, 10);
        q.seen(7, 20);
        assert_eq!(q.sharers(30), 2);
        assert_eq!(q.sharers(MEMBER_TTL_US + 15), 1);
    }
}
