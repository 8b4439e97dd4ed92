//! The money rules, decided in one place: whether a job may start (a pack for the paid
//! features, the balance, the concurrency limit, and its opening hold), how much a running job
//! holds once its post's size is known (or whether it waits for the account's other jobs to
//! give comments back), which waiting batch items may start, and which parked jobs to look at
//! again.
//!
//! Pure functions over an [`Account`]: a snapshot of one account's balance, free allowance and
//! running jobs, which storage reads under the account's lock and into which it writes what was
//! decided. Nothing else decides about money.
//!
//! The rule that shares a balance fairly: a job never starts collecting on a sliver while
//! comments it needs may still come back. Once its post's size is known, a job holds what the
//! post needs (its count plus room, see [`crate::limits::hold`]) when the balance has it, else
//! exactly the count when the balance covers that; when it does not, the job waits
//! ([`Stage::Waiting`], giving its opening hold back, so that the jobs before it get whole
//! posts) while any other running job holds comments, and is cut at the true remainder only
//! once none does; with nothing left at all it ends `quota_exceeded`, charging nothing. A job
//! that waits holds nothing and is waited for by no one, so two jobs never wait for each other.
//! A batch starts its next URL only once the one before it has been sized, so that the URLs of
//! one list never compete for a balance before their sizes are known.

use crate::limits::{MAX_COMMENTS_PER_POST, MAX_RUNNING_AI_JOBS, MAX_RUNNING_ANALYSES, hold};
use crate::{JobKind, Truncation};

/// Where a running job stands with the balance (stored with the job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "diesel", derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow), diesel(sql_type = diesel::sql_types::Text))]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Admitted; its post's size is not read yet, so it holds only its opening hold.
    Opening,
    /// Its hold is sized: it collects (an AI job runs) up to it, then settles.
    Sized,
    /// Parked until the account's other jobs give comments back; it holds nothing (its opening
    /// hold went back) and is looked at again when one of them ends.
    Waiting,
}

impl Stage {
    pub const ALL: [Stage; 3] = [Stage::Opening, Stage::Sized, Stage::Waiting];

    pub const fn as_str(self) -> &'static str {
        match self {
            Stage::Opening => "opening",
            Stage::Sized => "sized",
            Stage::Waiting => "waiting",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// One running (queued or in progress) job of the account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub id: String,
    pub kind: JobKind,
    pub batch_id: Option<String>,
    /// Comments it holds on the balance (its free-allowance part included).
    pub hold: i64,
    pub stage: Stage,
}

/// One account's money and running jobs at one instant, read under the account's lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Account {
    /// Comments of the packs granted this month (0: no pack this month).
    pub granted: i64,
    /// What this month's packs still have: granted − held − spent.
    pub available: i64,
    /// What is left of the free signup allowance (spent only by a session's new analyses).
    pub free_left: i64,
    /// The account's running jobs, both kinds.
    pub running: Vec<Running>,
}

/// A hold: how many comments, and how many of them come from the free allowance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hold {
    pub amount: i64,
    pub free: i64,
}

impl Hold {
    /// The part taken from the month's packs.
    pub const fn pack(&self) -> i64 {
        self.amount - self.free
    }
}

/// True when a pack was granted this month (`granted` comments): what the paid features
/// (refresh, watch, AI, keywords and spike alerts, following creators) require.
pub const fn pack_bought(granted: i64) -> bool {
    granted > 0
}

/// What a caller may spend, as its quota headers and a list preview show it: the month's packs
/// and, for a workspace session (`free_allowance`), what is left of the free allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Granted this month (and the free allowance left, when it may be spent).
    pub limit: i64,
    /// Still available now.
    pub available: i64,
}

/// The [`Quota`] of a balance of `granted` with `available` left, and `free_left` of the free
/// allowance, spendable only when `free_allowance`.
pub fn quota(granted: i64, available: i64, free_left: i64, free_allowance: bool) -> Quota {
    let free = if free_allowance { free_left.max(0) } else { 0 };
    Quota { limit: granted + free, available: available.max(0) + free }
}

impl Account {
    /// True when a pack was granted this month (see [`pack_bought`]).
    pub const fn has_pack(&self) -> bool {
        pack_bought(self.granted)
    }

    /// Running jobs of `kind`.
    pub fn running_of(&self, kind: JobKind) -> i64 {
        self.running.iter().filter(|j| j.kind == kind).count() as i64
    }

    /// What a job may draw on: the month's packs, and the free allowance when it may spend it.
    pub fn spendable(&self, free_allowance: bool) -> i64 {
        quota(self.granted, self.available, self.free_left, free_allowance).available
    }

    /// Comments that may still come back to the balance: what the running jobs other than
    /// `except` hold, leaving out the jobs that wait themselves (they are waited for by no one).
    pub fn returnable(&self, except: &str) -> i64 {
        self.running.iter().filter(|j| j.id != except && j.stage != Stage::Waiting).map(|j| j.hold).sum()
    }

    /// The snapshot once a job admitted with `hold` is running: what a group of admissions
    /// decided one after another (watch runs, batch items) sees.
    pub fn admit(&mut self, id: &str, kind: JobKind, batch_id: Option<&str>, hold: Hold, stage: Stage) {
        self.available -= hold.pack();
        self.free_left -= hold.free;
        self.running.push(Running {
            id: id.to_owned(),
            kind,
            batch_id: batch_id.map(str::to_owned),
            hold: hold.amount,
            stage,
        });
    }

    fn job(&self, id: &str) -> Option<&Running> {
        self.running.iter().find(|j| j.id == id)
    }
}

/// Whether a job may start, and with what hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Start it, holding this.
    Admit(Hold),
    /// A paid feature without a pack this month (402 `payment_required`).
    PaymentRequired,
    /// Nothing available (402 `quota_exceeded`).
    QuotaExceeded,
    /// The account's limit of jobs of this kind running at once (429 `concurrency_limit`).
    ConcurrencyLimit,
}

/// A comment collection asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnalyzeRequest {
    /// A re-scrape asked for (a refresh, a watch run): a paid feature, never on the allowance.
    pub refresh: bool,
    /// Started from a cookie session: may spend the free allowance before the packs.
    pub session: bool,
    /// The post's comment count when already known (fresh metadata): the opening hold covers
    /// the post at once.
    pub known_comments: Option<i64>,
    /// The customer's cap on the comments collected for the post.
    pub max_comments: Option<i64>,
}

impl AnalyzeRequest {
    /// Whether this job may spend the free allowance.
    pub const fn free_allowance(&self) -> bool {
        self.session && !self.refresh
    }
}

/// Admits a comment collection: a refresh needs a pack; something must be available; at most
/// [`MAX_RUNNING_ANALYSES`] run at once. The opening hold is what the post needs when its count
/// is known, else [`hold::OPENING`]; never more than is available, from the free allowance
/// first when the job may spend it.
pub fn admit_analyze(account: &Account, request: &AnalyzeRequest) -> Admission {
    if request.refresh && !account.has_pack() {
        return Admission::PaymentRequired;
    }
    let free = request.free_allowance();
    let spendable = account.spendable(free);
    if spendable <= 0 {
        return Admission::QuotaExceeded;
    }
    if account.running_of(JobKind::Analyze) >= MAX_RUNNING_ANALYSES {
        return Admission::ConcurrencyLimit;
    }
    let wanted = match request.known_comments {
        Some(n) => Need::of(Some(n), 0, request.max_comments).target,
        None => hold::OPENING,
    };
    let amount = wanted.clamp(1, spendable);
    let free_part = if free { amount.min(account.free_left.max(0)) } else { 0 };
    Admission::Admit(Hold { amount, free: free_part })
}

/// Admits an AI run of a quote charging `charge`: a paid feature; the whole charge must be
/// available; at most [`MAX_RUNNING_AI_JOBS`] run at once. It holds its charge.
pub fn admit_ai(account: &Account, charge: i64) -> Admission {
    if !account.has_pack() {
        return Admission::PaymentRequired;
    }
    if account.available < charge {
        return Admission::QuotaExceeded;
    }
    if account.running_of(JobKind::Ai) >= MAX_RUNNING_AI_JOBS {
        return Admission::ConcurrencyLimit;
    }
    Admission::Admit(Hold { amount: charge, free: 0 })
}

/// The caps on one collection: the customer's `max_comments`, never above the per-post cap.
pub fn collection_cap(max_comments: Option<i64>) -> i64 {
    max_comments.map_or(MAX_COMMENTS_PER_POST, |m| m.clamp(1, MAX_COMMENTS_PER_POST))
}

/// What a collection needs from the balance once its post's size is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Need {
    /// The new comments the post reports (what a whole collection charges), capped.
    count: i64,
    /// The count plus room for comments added meanwhile, capped: what the job would like.
    target: i64,
}

impl Need {
    /// `previous` comments are already in the account's analysis: only new ones are charged.
    fn of(reported: Option<i64>, previous: i64, max_comments: Option<i64>) -> Self {
        let cap = collection_cap(max_comments);
        match reported {
            // An unknown size needs the whole cap.
            None => Need { count: cap, target: cap },
            Some(n) => {
                let new = if previous > 0 { (n.max(0) - previous).max(0) } else { n.max(0) };
                Need { count: new.min(cap), target: hold::needed(Some(new)).min(cap) }
            }
        }
    }
}

/// What a job found out about its post, and what it holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// The post's comment count as the platform reports it (`None`: it reports none).
    pub reported: Option<i64>,
    /// Comments the account's analysis of the post already has (a re-scrape pays for new ones).
    pub previous: i64,
    /// The customer's cap on the comments collected.
    pub max_comments: Option<i64>,
    /// The job's hold now.
    pub hold: Hold,
    /// The job may spend the free allowance (a session's new analysis,
    /// [`AnalyzeRequest::free_allowance`]): it grows from it first.
    pub free_allowance: bool,
}

/// How a job goes on once its post's size is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sized {
    /// Collect with this hold.
    Collect(Collect),
    /// Wait for the account's other jobs to give comments back, holding nothing meanwhile.
    /// `wake`: the account's other waiting jobs, to look at again now that this one's opening
    /// hold came back.
    Wait { wake: Vec<String> },
    /// Nothing is left and nothing can come back: the job ends `quota_exceeded`, charged nothing.
    QuotaExceeded,
}

/// A sized collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collect {
    /// The hold from now on.
    pub hold: Hold,
    /// Comments collected at most, the ones already known to a re-scrape included.
    pub limit: i64,
    /// Why the collection was cut if the post has more than `limit`.
    pub stops_for: Truncation,
    /// The post's own count (capped by the per-post cap), for progress.
    pub expected: Option<i64>,
}

/// Sizes the hold of job `job_id` of `account` to its post, or parks it (see the module's rule).
/// A hold is lowered from its pack part first and raised from the free allowance first when the
/// job may spend it.
pub fn size_hold(account: &Account, job_id: &str, sizing: &Sizing) -> Sized {
    let need = Need::of(sizing.reported, sizing.previous, sizing.max_comments);
    let own = sizing.hold.amount.max(0);
    let free_allowed = sizing.free_allowance;
    let can = own + account.spendable(free_allowed);
    let amount = if can >= need.target {
        need.target
    } else if can >= need.count {
        // Not enough for the room as well: the count alone, leaving the rest to other posts.
        need.count.max(hold::OPENING).min(can)
    } else if account.returnable(job_id) > 0 {
        let newly_waiting = account.job(job_id).is_none_or(|j| j.stage != Stage::Waiting);
        let wake = if newly_waiting && own > 0 {
            account
                .running
                .iter()
                .filter(|j| j.id != job_id && j.stage == Stage::Waiting)
                .map(|j| j.id.clone())
                .collect()
        } else {
            Vec::new()
        };
        return Sized::Wait { wake };
    } else if can <= 0 {
        return Sized::QuotaExceeded;
    } else {
        // Nothing can come back: the true remainder.
        can
    };
    let hold = moved(sizing.hold, amount, account.free_left.max(0), free_allowed);
    let cap = collection_cap(sizing.max_comments);
    let limit = (hold.amount + sizing.previous.max(0)).min(cap);
    let stops_for = if limit < cap {
        Truncation::Balance
    } else if cap < MAX_COMMENTS_PER_POST {
        Truncation::MaxComments
    } else {
        Truncation::PostCap
    };
    let expected = sizing.reported.map(expected);
    Sized::Collect(Collect { hold, limit, stops_for, expected })
}

/// What a job's progress expects: the post's own count as reported, capped by the per-post
/// cap (never what the balance could pay).
pub fn expected(reported: i64) -> i64 {
    reported.clamp(0, MAX_COMMENTS_PER_POST)
}

/// `from` moved to `amount`: lowered from its pack part first, raised from the free allowance
/// first when allowed (never beyond what is left of it).
fn moved(from: Hold, amount: i64, free_left: i64, free_allowed: bool) -> Hold {
    if amount <= from.amount {
        let pack = (from.pack() - (from.amount - amount)).max(0);
        Hold { amount, free: amount - pack }
    } else {
        let raise = amount - from.amount;
        let from_free = if free_allowed { raise.min(free_left) } else { 0 };
        Hold { amount, free: from.free + from_free }
    }
}

/// A batch item waiting to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchItem<'a> {
    pub batch_id: &'a str,
    /// The post's comment count when known (its metadata was read for a preview, or by the
    /// creator listing that found it).
    pub known_comments: Option<i64>,
    pub max_comments: Option<i64>,
    /// The batch was started from a cookie session (its jobs may spend the free allowance).
    pub session: bool,
}

/// What to do with the next waiting batch item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchStep {
    /// Start its job now.
    Start,
    /// Leave it (and the items after it) waiting until one of the account's jobs ends.
    Wait,
    /// The balance is gone and nothing will come back: the batch's waiting items end
    /// `quota_exceeded`.
    RefuseBatch,
}

/// Whether the next waiting item of a batch starts. It waits for a free slot; it waits while the
/// URL before it in its batch has not been sized (the balance that one takes is not known yet);
/// it waits while a job of the account waits for the balance (they go first); it does not
/// start while the balance it needs is held by running jobs that may give it back; and when
/// nothing is available and nothing can come back, its batch is refused.
pub fn next_batch_step(account: &Account, item: &BatchItem<'_>) -> BatchStep {
    if account.running_of(JobKind::Analyze) >= MAX_RUNNING_ANALYSES {
        return BatchStep::Wait;
    }
    let sibling_unsized =
        account.running.iter().any(|j| j.stage == Stage::Opening && j.batch_id.as_deref() == Some(item.batch_id));
    if sibling_unsized || account.running.iter().any(|j| j.stage == Stage::Waiting) {
        return BatchStep::Wait;
    }
    let spendable = account.spendable(item.session);
    let returnable = account.returnable("");
    if spendable <= 0 {
        return if returnable > 0 { BatchStep::Wait } else { BatchStep::RefuseBatch };
    }
    if let Some(known) = item.known_comments {
        let need = Need::of(Some(known), 0, item.max_comments).count;
        if need > spendable && returnable > 0 {
            return BatchStep::Wait;
        }
    }
    BatchStep::Start
}

/// The account's waiting jobs that nothing will wake: no other job that could give comments
/// back is running. (A job end wakes the waiting jobs of its account; this is the safety net
/// for a wake that was lost.)
pub fn stale_waiters(account: &Account) -> Vec<&str> {
    if account.returnable("") > 0 {
        return Vec::new();
    }
    account.running.iter().filter(|j| j.stage == Stage::Waiting).map(|j| j.id.as_str()).collect()
}

/// How many posts of a list the balance covers whole, in list order: each post needs its count
/// (capped by `max_comments`); a post of unknown size ends the count.
pub fn covered_whole(spendable: i64, counts: &[Option<i64>], max_comments: Option<i64>) -> usize {
    let mut left = spendable.max(0);
    let mut covered = 0;
    for count in counts {
        let Some(n) = count else { break };
        let need = Need::of(Some(*n), 0, max_comments).count;
        if need > left {
            break;
        }
        left -= need;
        covered += 1;
    }
    covered
}

/// What collecting a post of `count` comments charges at most under `max_comments`.
pub fn charge_at_most(count: i64, max_comments: Option<i64>) -> i64 {
    Need::of(Some(count), 0, max_comments).count
}

/// How a hold ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settlement {
    /// Charged: the free-allowance part first, then the packs.
    pub charged: Hold,
    /// Given back to where it came from.
    pub returned: Hold,
}

/// Ends `hold`: a completed job is charged what it `collected` (never more than the hold, from
/// the free part first); a failed one (`None`) is charged nothing. The rest goes back.
pub fn settle(hold: Hold, collected: Option<i64>) -> Settlement {
    let charged = collected.unwrap_or(0).clamp(0, hold.amount.max(0));
    let free_charged = charged.min(hold.free);
    let charged = Hold { amount: charged, free: free_charged };
    let returned = Hold { amount: hold.amount - charged.amount, free: hold.free - free_charged };
    Settlement { charged, returned }
}

/// The comments new to an analysis that a `hold` does not pay for, in collection order (a
/// parent before its replies): a new comment is kept while the hold has room and its parent
/// is kept or already known; the others (returned) are dropped, never charged.
pub fn beyond_hold(new: &[(String, Option<String>)], hold: i64) -> Vec<&str> {
    let is_new: std::collections::HashSet<&str> = new.iter().map(|(id, _)| id.as_str()).collect();
    let mut kept = std::collections::HashSet::new();
    let mut dropped = Vec::new();
    for (id, parent) in new {
        let parent_ok = parent.as_deref().is_none_or(|p| !is_new.contains(p) || kept.contains(p));
        if parent_ok && (kept.len() as i64) < hold {
            kept.insert(id.as_str());
        } else {
            dropped.push(id.as_str());
        }
    }
    dropped
}

/// Which waiting jobs a job's end wakes: every waiting job of its account (comments came back,
/// or a slot freed).
pub fn woken_by_an_end(account: &Account) -> Vec<&str> {
    account.running.iter().filter(|j| j.stage == Stage::Waiting).map(|j| j.id.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, hold: i64, stage: Stage) -> Running {
        Running { id: id.into(), kind: JobKind::Analyze, batch_id: None, hold, stage }
    }

    fn account(granted: i64, held: i64, spent: i64, running: Vec<Running>) -> Account {
        Account { granted, available: granted - held - spent, free_left: 0, running }
    }

    fn sizing(reported: i64, hold: i64) -> Sizing {
        Sizing {
            reported: Some(reported),
            previous: 0,
            max_comments: None,
            hold: Hold { amount: hold, free: 0 },
            free_allowance: false,
        }
    }

    #[test]
    fn admission_follows_the_order_of_checks() {
        let empty = account(0, 0, 0, vec![]);
        let refresh = AnalyzeRequest { refresh: true, ..AnalyzeRequest::default() };
        assert_eq!(admit_analyze(&empty, &refresh), Admission::PaymentRequired);
        assert_eq!(admit_analyze(&empty, &AnalyzeRequest::default()), Admission::QuotaExceeded);
        let busy = account(
            100,
            3,
            0,
            vec![job("a", 1, Stage::Opening), job("b", 1, Stage::Sized), job("c", 1, Stage::Waiting)],
        );
        assert_eq!(admit_analyze(&busy, &AnalyzeRequest::default()), Admission::ConcurrencyLimit);
        let open = account(100, 0, 0, vec![]);
        assert_eq!(admit_analyze(&open, &AnalyzeRequest::default()), Admission::Admit(Hold { amount: 1, free: 0 }));
        let known = AnalyzeRequest { known_comments: Some(12), ..AnalyzeRequest::default() };
        assert_eq!(admit_analyze(&open, &known), Admission::Admit(Hold { amount: 62, free: 0 }));
        let capped =
            AnalyzeRequest { known_comments: Some(1_000), max_comments: Some(40), ..AnalyzeRequest::default() };
        assert_eq!(admit_analyze(&open, &capped), Admission::Admit(Hold { amount: 40, free: 0 }));
        // A session's analysis spends the allowance first; a refresh never does.
        let session = Account { free_left: 30, ..account(0, 0, 0, vec![]) };
        let asked = AnalyzeRequest { session: true, known_comments: Some(12), ..AnalyzeRequest::default() };
        assert_eq!(admit_analyze(&session, &asked), Admission::Admit(Hold { amount: 30, free: 30 }));
        assert_eq!(admit_analyze(&session, &AnalyzeRequest { refresh: true, ..asked }), Admission::PaymentRequired);
    }

    #[test]
    fn an_ai_run_holds_its_whole_charge() {
        assert_eq!(admit_ai(&account(0, 0, 0, vec![]), 3), Admission::PaymentRequired);
        assert_eq!(admit_ai(&account(10, 8, 0, vec![]), 3), Admission::QuotaExceeded);
        assert_eq!(admit_ai(&account(10, 0, 0, vec![]), 3), Admission::Admit(Hold { amount: 3, free: 0 }));
        let ai = |id: &str| Running { kind: JobKind::Ai, ..job(id, 1, Stage::Sized) };
        assert_eq!(admit_ai(&account(10, 3, 0, vec![ai("a"), ai("b"), ai("c")]), 1), Admission::ConcurrencyLimit);
    }

    #[test]
    fn a_post_the_balance_covers_gets_its_count_and_room() {
        let a = account(1_000, 1, 0, vec![job("j", 1, Stage::Opening)]);
        let Sized::Collect(c) = size_hold(&a, "j", &sizing(12, 1)) else { panic!("collects") };
        assert_eq!((c.hold.amount, c.limit, c.expected, c.stops_for), (62, 62, Some(12), Truncation::Balance));
        // Too little for the room: the count alone.
        let a = account(30, 1, 0, vec![job("j", 1, Stage::Opening)]);
        let Sized::Collect(c) = size_hold(&a, "j", &sizing(12, 1)) else { panic!("collects") };
        assert_eq!(c.hold.amount, 12);
        // An opening hold larger than the post needs is lowered.
        let a = account(1_000, 500, 0, vec![job("j", 500, Stage::Opening)]);
        let Sized::Collect(c) = size_hold(&a, "j", &sizing(12, 500)) else { panic!("collects") };
        assert_eq!(c.hold.amount, 62);
    }

    #[test]
    fn a_post_the_balance_cannot_cover_waits_while_comments_may_come_back() {
        // 25 on three posts of 10: the first two hold 10 each, the third waits for them.
        let mut a = account(
            25,
            3,
            0,
            vec![job("1", 1, Stage::Opening), job("2", 1, Stage::Opening), job("3", 1, Stage::Opening)],
        );
        for id in ["1", "2"] {
            let Sized::Collect(c) = size_hold(&a, id, &sizing(10, 1)) else { panic!("{id} collects") };
            assert_eq!(c.hold.amount, 10);
            a.available -= c.hold.amount - 1;
            a.running.iter_mut().filter(|j| j.id == id).for_each(|j| (j.hold, j.stage) = (10, Stage::Sized));
        }
        assert_eq!(size_hold(&a, "3", &sizing(10, 1)), Sized::Wait { wake: vec![] });
        // It waits holding nothing; both others end having collected 10: the third is cut at
        // the true remainder, 5.
        a.running.retain(|j| j.id == "3");
        (a.running[0].stage, a.running[0].hold) = (Stage::Waiting, 0);
        a.available = 25 - 20;
        let Sized::Collect(c) = size_hold(&a, "3", &sizing(10, 0)) else { panic!("collects") };
        assert_eq!((c.hold.amount, c.limit, c.stops_for, c.expected), (5, 5, Truncation::Balance, Some(10)));
    }

    #[test]
    fn a_job_waits_only_for_jobs_that_do_not_wait() {
        let a = account(
            25,
            1,
            0,
            vec![job("1", 0, Stage::Waiting), job("2", 1, Stage::Opening), job("3", 0, Stage::Waiting)],
        );
        // "2" cannot be covered and only waiting jobs (holding nothing) run: it is cut now.
        let Sized::Collect(c) = size_hold(&a, "2", &sizing(1_000, 1)) else { panic!("collects") };
        assert_eq!(c.hold.amount, 25);
        // Had "2" been collecting, "1" would wait for it; a job that starts waiting gives its
        // opening hold back and wakes the others, who may use it.
        let a = account(
            25,
            2,
            0,
            vec![job("1", 1, Stage::Opening), job("2", 1, Stage::Opening), job("3", 0, Stage::Waiting)],
        );
        assert_eq!(size_hold(&a, "1", &sizing(1_000, 1)), Sized::Wait { wake: vec!["3".into()] });
        assert_eq!(size_hold(&a, "3", &sizing(1_000, 0)), Sized::Wait { wake: vec![] });
        assert_eq!(stale_waiters(&a), Vec::<&str>::new());
        let a = account(25, 0, 25, vec![job("1", 0, Stage::Waiting), job("3", 0, Stage::Waiting)]);
        assert_eq!(stale_waiters(&a), vec!["1", "3"]);
        // Nothing left and nothing to come back: the job ends, charged nothing.
        assert_eq!(size_hold(&a, "1", &sizing(10, 0)), Sized::QuotaExceeded);
    }

    #[test]
    fn a_rescrape_holds_for_new_comments_and_a_cap_bounds_the_collection() {
        let a = account(1_000, 1, 0, vec![job("j", 1, Stage::Opening)]);
        let rescrape = Sizing { previous: 990, ..sizing(1_000, 1) };
        let Sized::Collect(c) = size_hold(&a, "j", &rescrape) else { panic!("collects") };
        assert_eq!((c.hold.amount, c.limit, c.expected), (60, 1_050, Some(1_000)));
        let capped = Sizing { max_comments: Some(100), ..sizing(1_000, 1) };
        let Sized::Collect(c) = size_hold(&a, "j", &capped) else { panic!("collects") };
        assert_eq!((c.hold.amount, c.limit, c.stops_for, c.expected), (100, 100, Truncation::MaxComments, Some(1_000)));
        let huge = sizing(9_000, 1);
        let a = account(10_000, 1, 0, vec![job("j", 1, Stage::Opening)]);
        let Sized::Collect(c) = size_hold(&a, "j", &huge) else { panic!("collects") };
        assert_eq!((c.hold.amount, c.limit, c.stops_for, c.expected), (5_000, 5_000, Truncation::PostCap, Some(5_000)));
    }

    #[test]
    fn a_session_hold_grows_from_the_allowance_first_and_shrinks_from_the_packs_first() {
        let a = Account { free_left: 20, ..account(100, 5, 0, vec![job("j", 10, Stage::Opening)]) };
        let s = Sizing { hold: Hold { amount: 10, free: 5 }, free_allowance: true, ..sizing(40, 10) };
        let Sized::Collect(c) = size_hold(&a, "j", &s) else { panic!("collects") };
        assert_eq!(c.hold, Hold { amount: 90, free: 25 });
        let s = Sizing { hold: Hold { amount: 100, free: 30 }, free_allowance: true, ..sizing(5, 100) };
        let Sized::Collect(c) = size_hold(&a, "j", &s) else { panic!("collects") };
        assert_eq!(c.hold, Hold { amount: 55, free: 30 });
        let s = Sizing { hold: Hold { amount: 100, free: 30 }, free_allowance: true, ..sizing(0, 100) };
        let Sized::Collect(c) = size_hold(&a, "j", &s) else { panic!("collects") };
        assert_eq!(c.hold, Hold { amount: 50, free: 30 });
    }

    #[test]
    fn batch_items_wait_for_slots_for_waiting_jobs_and_for_the_balance_they_need() {
        let item = BatchItem { batch_id: "b", known_comments: None, max_comments: None, session: false };
        let three =
            account(100, 3, 0, vec![job("1", 1, Stage::Sized), job("2", 1, Stage::Sized), job("3", 1, Stage::Sized)]);
        assert_eq!(next_batch_step(&three, &item), BatchStep::Wait);
        let waiting = account(100, 2, 0, vec![job("1", 1, Stage::Sized), job("2", 0, Stage::Waiting)]);
        assert_eq!(next_batch_step(&waiting, &item), BatchStep::Wait);
        let sibling = Running { batch_id: Some("b".into()), ..job("1", 1, Stage::Opening) };
        assert_eq!(next_batch_step(&account(100, 1, 0, vec![sibling.clone()]), &item), BatchStep::Wait, "sized first");
        let other = Running { batch_id: Some("other".into()), ..sibling };
        assert_eq!(next_batch_step(&account(100, 1, 0, vec![other]), &item), BatchStep::Start);
        let spent = account(100, 10, 90, vec![job("1", 10, Stage::Sized)]);
        assert_eq!(next_batch_step(&spent, &item), BatchStep::Wait);
        assert_eq!(next_batch_step(&account(100, 0, 100, vec![]), &item), BatchStep::RefuseBatch);
        let known = BatchItem { known_comments: Some(50), ..item };
        let short = account(100, 60, 10, vec![job("1", 60, Stage::Sized)]);
        assert_eq!(next_batch_step(&short, &known), BatchStep::Wait);
        assert_eq!(next_batch_step(&short, &item), BatchStep::Start);
        assert_eq!(next_batch_step(&account(100, 0, 70, vec![]), &known), BatchStep::Start, "cut at the remainder");
    }

    #[test]
    fn a_list_preview_counts_the_posts_the_balance_covers_whole() {
        assert_eq!(covered_whole(1_984, &[Some(265); 10], None), 7);
        assert_eq!(covered_whole(100, &[Some(10), None, Some(10)], None), 1);
        assert_eq!(covered_whole(100, &[Some(265); 3], Some(50)), 2);
        assert_eq!(charge_at_most(265, Some(50)), 50);
    }

    #[test]
    fn a_hold_is_charged_from_the_allowance_first_and_never_beyond_itself() {
        let hold = Hold { amount: 50, free: 20 };
        assert_eq!(
            settle(hold, Some(30)),
            Settlement { charged: Hold { amount: 30, free: 20 }, returned: Hold { amount: 20, free: 0 } }
        );
        assert_eq!(settle(hold, Some(10)).returned, Hold { amount: 40, free: 10 });
        assert_eq!(settle(hold, Some(99)).charged.amount, 50);
        assert_eq!(settle(hold, None).returned, hold);
    }

    #[test]
    fn new_comments_beyond_the_hold_are_dropped_with_their_replies() {
        let row = |id: &str, parent: Option<&str>| (id.to_owned(), parent.map(str::to_owned));
        let new =
            [row("a", None), row("a1", Some("a")), row("b", None), row("b1", Some("b")), row("k1", Some("known"))];
        assert_eq!(beyond_hold(&new, 2), vec!["b", "b1", "k1"]);
        assert_eq!(beyond_hold(&new, 5), Vec::<&str>::new());
        assert_eq!(beyond_hold(&new[2..], 1), vec!["b1", "k1"]);
    }

    #[test]
    fn stages_round_trip() {
        for s in Stage::ALL {
            assert_eq!(Stage::parse(s.as_str()), Some(s));
        }
    }
}
