//! Who a platform request is for: the account it serves, whether a person waits for it, and
//! whether its asker is still there. Carried with the task that makes the requests (a request
//! handler, a job, a creator run), so that every request deep in an adapter waits its turn as
//! its asker's, and none is sent once the asker has gone.

use cova_domain::pace::Class;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

tokio::task_local! {
    static DEMAND: Demand;
}

/// The asker of the requests made within [`Demand::scope`].
#[derive(Clone, Debug)]
pub struct Demand {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Set when the asker is made, or once it is known ([`Demand::identify`]).
    account: OnceLock<String>,
    /// Requests still counted as a person's; the rest are background.
    interactive_left: AtomicU32,
    /// Cancelled once the asker is answered or gone: its requests not yet sent never are.
    answered: CancellationToken,
    /// Once set, every request of the asker is background, also one already waiting (an
    /// account whose lookups keep failing moves behind people at once).
    behind: Arc<AtomicBool>,
}

impl Default for Demand {
    /// Requests asked by no account (a tool, a test): a person's, never cancelled.
    fn default() -> Self {
        Self::interactive("")
    }
}

impl Demand {
    fn new(account: &str, interactive: u32, answered: CancellationToken) -> Self {
        Self::with_flag(account, interactive, answered, Arc::default())
    }

    fn with_flag(account: &str, interactive: u32, answered: CancellationToken, behind: Arc<AtomicBool>) -> Self {
        let known = OnceLock::new();
        if !account.is_empty() {
            let _ = known.set(account.to_owned());
        }
        let interactive_left = AtomicU32::new(interactive);
        Self { inner: Arc::new(Inner { account: known, interactive_left, answered, behind }) }
    }

    /// A person waits for every request until `behind` is set (by whoever learns that the
    /// asker's lookups keep failing); from then on every request, waiting ones included, is
    /// background.
    pub fn interactive_until(account: &str, behind: Arc<AtomicBool>) -> Self {
        Self::with_flag(account, u32::MAX, CancellationToken::new(), behind)
    }

    /// A person waits for every request (a lookup, a list's counts, a short link).
    pub fn interactive(account: &str) -> Self {
        Self::new(account, u32::MAX, CancellationToken::new())
    }

    /// Nobody waits (a watch run, a creator listing).
    pub fn background(account: &str) -> Self {
        Self::new(account, 0, CancellationToken::new())
    }

    /// A person waits for the first `n` requests (a job's first pages); the rest are
    /// background.
    pub fn first_interactive(account: &str, n: u32) -> Self {
        Self::new(account, n, CancellationToken::new())
    }

    /// The same asker for another account (a request handler learns its account once it has
    /// authenticated): the same answer ends both.
    pub fn for_account(&self, account: &str) -> Self {
        Self::new(account, self.inner.interactive_left.load(Ordering::Relaxed), self.inner.answered.clone())
    }

    /// Ends with `answered`: once it is cancelled, no request of this asker is sent any more.
    pub fn answered_by(self, answered: CancellationToken) -> Self {
        Self::new(self.account(), self.inner.interactive_left.load(Ordering::Relaxed), answered)
    }

    /// Names the account of an asker made before it was known (a request, once it has
    /// authenticated); an asker already named keeps its account.
    pub fn identify(&self, account: &str) {
        if !account.is_empty() {
            let _ = self.inner.account.set(account.to_owned());
        }
    }

    /// The asker of the current task (a default one outside any scope).
    pub fn current() -> Self {
        DEMAND.try_with(Clone::clone).unwrap_or_default()
    }

    /// Runs `fut` with this asker: every platform request in it is this asker's.
    pub async fn scope<F: Future>(self, fut: F) -> F::Output {
        DEMAND.scope(self, fut).await
    }

    pub fn account(&self) -> &str {
        self.inner.account.get().map_or("", String::as_str)
    }

    /// Whether the asker's requests have been moved behind people's.
    pub(crate) fn is_behind(&self) -> bool {
        self.inner.behind.load(Ordering::Relaxed)
    }

    /// The class of the next request, counting it.
    pub(crate) fn next_class(&self) -> Class {
        if self.is_behind() {
            return Class::Background;
        }
        let counted =
            self.inner.interactive_left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| match left {
                0 => None,
                u32::MAX => Some(u32::MAX),
                n => Some(n - 1),
            });
        if counted.is_ok() { Class::Interactive } else { Class::Background }
    }

    /// Whether the asker is gone.
    pub fn is_answered(&self) -> bool {
        self.inner.answered.is_cancelled()
    }

    /// Resolves once the asker is gone.
    pub(crate) async fn answered(&self) {
        self.inner.answered.cancelled().await;
    }
}

/// `fut` with the current task's asker, for a task spawned on its behalf (spawned tasks do not
/// inherit it).
pub(crate) fn carried<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    Demand::current().scope(fut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_jobs_first_requests_are_a_persons_and_the_rest_background() {
        let demand = Demand::first_interactive("acct", 2);
        let classes: Vec<Class> = (0..4).map(|_| demand.next_class()).collect();
        assert_eq!(classes, [Class::Interactive, Class::Interactive, Class::Background, Class::Background]);
        assert_eq!(Demand::interactive("a").next_class(), Class::Interactive);
        assert_eq!(Demand::background("a").next_class(), Class::Background);
    }

    #[tokio::test]
    async fn the_asker_is_carried_and_its_answer_ends_every_copy() {
        let token = CancellationToken::new();
        let demand = Demand::interactive("").answered_by(token.clone());
        let seen = demand
            .scope(async {
                let inner = Demand::current().for_account("acct-1");
                let spawned = tokio::spawn(carried(async { Demand::current().account().to_owned() }));
                (inner, spawned.await.unwrap_or_default())
            })
            .await;
        assert_eq!(seen.0.account(), "acct-1");
        assert_eq!(seen.1, "", "a spawned task carries the asker it was spawned with");
        assert!(!seen.0.is_answered());
        token.cancel();
        assert!(seen.0.is_answered(), "the account's copy ends with the request's answer");
        assert_eq!(Demand::current().account(), "", "outside any scope: no account");
    }

    #[tokio::test]
    async fn a_request_names_its_account_once_it_is_known() {
        let demand = Demand::interactive("");
        let named = demand
            .clone()
            .scope(async {
                Demand::current().identify("acct-7");
                Demand::current().identify("acct-8");
                Demand::current().account().to_owned()
            })
            .await;
        assert_eq!((named.as_str(), demand.account()), ("acct-7", "acct-7"));
    }
}
