//! The one creation step of every job, whatever its kind, as the pieces each kind's creating
//! transaction is built of: the account's row lock (so that one account's requests run one
//! after another), the `Idempotency-Key` that answered before, and the new
//! job itself, written with its key and its command in the outbox. Each kind adds its own
//! checks and hold between them ([`super::analyze::create_analyze`], [`super::ai::create_ai`]).
//!
//! Macros, because each runs inside the kind's transaction on either database's connection.

use super::Job;

/// What an `Idempotency-Key` answered before. Short-lived on the stack, so the size gap is
/// harmless.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Repeat {
    /// The same request: its job, as it is now.
    Same(Job),
    /// The key answered another request.
    Conflict,
}

/// A job about to be written.
pub(crate) struct NewJob<'a> {
    pub id: &'a str,
    pub account_id: &'a str,
    pub token_id: Option<&'a str>,
    pub session_id: Option<&'a str>,
    pub kind: cova_domain::JobKind,
    pub r#ref: &'a str,
    pub url: &'a str,
    pub comments_expected: Option<i64>,
    pub batch_id: Option<&'a str>,
    /// Where it starts with the balance: an analyze job's post is not read yet; an AI job's
    /// hold is its whole charge.
    pub hold_stage: cova_domain::money::Stage,
    pub max_comments: Option<i64>,
    /// It may spend the free allowance (a session's new analysis).
    pub free_allowance: bool,
}

/// Inside a transaction: takes the account's row lock with a no-op update (PostgreSQL; SQLite
/// is already serialised), so the account's concurrent job requests run one after another.
macro_rules! lock_account {
    ($c:ident, $account_id:expr) => {
        diesel::update($crate::schema::accounts::table.find($account_id))
            .set($crate::schema::accounts::active_tokens.eq($crate::schema::accounts::active_tokens))
            .execute($c)
            .await?;
    };
}
pub(crate) use lock_account;

/// Inside a transaction: remembers that `key` (if any) answered with `job_id` for the request
/// `key_ref` (a post's ref, or `quote:<id>` for an AI run).
macro_rules! remember_key {
    ($c:ident, $account_id:expr, $key:expr, $job_id:expr, $key_ref:expr, $now:expr) => {
        if let Some(key) = $key {
            use $crate::schema::idempotency_keys as k;
            diesel::insert_into(k::table)
                .values((
                    k::account_id.eq($account_id),
                    k::key.eq(key),
                    k::job_id.eq($job_id),
                    k::ref_.eq($key_ref),
                    k::created_at.eq($now),
                ))
                .on_conflict_do_nothing()
                .execute($c)
                .await?;
        }
    };
}
pub(crate) use remember_key;

/// Inside a transaction: what the account's `Idempotency-Key` (if any) answered before, after
/// forgetting the account's keys older than [`cova_domain::limits::IDEMPOTENCY`]: the same
/// job for the same request (`key_ref`), a conflict for another. Evaluates to
/// `Option<Repeat>`.
macro_rules! repeated {
    ($c:ident, $account_id:expr, $key:expr, $key_ref:expr, $now:expr) => {{
        use cova_domain::limits;
        use $crate::repo::jobs::new::Repeat;
        use $crate::schema::idempotency_keys as k;
        match $key {
            None => None,
            Some(key) => {
                diesel::delete(k::table)
                    .filter(k::account_id.eq($account_id))
                    .filter(k::created_at.le($now - limits::ms(limits::IDEMPOTENCY)))
                    .execute($c)
                    .await?;
                let earlier = k::table
                    .find(($account_id, key))
                    .select((k::job_id, k::ref_))
                    .first::<(String, String)>($c)
                    .await
                    .optional()?;
                match earlier {
                    None => None,
                    Some((_, earlier_ref)) if earlier_ref.as_str() != AsRef::<str>::as_ref($key_ref) => {
                        Some(Repeat::Conflict)
                    }
                    Some((job_id, _)) => $crate::repo::jobs::find_job!($c, &job_id)?.map(Repeat::Same),
                }
            }
        }
    }};
}
pub(crate) use repeated;

/// The column values of a new `queued` job: one row of an insert, alone or among many.
macro_rules! job_values {
    ($new:expr, $now:expr) => {{
        use $crate::schema::jobs;
        let new: &$crate::repo::jobs::new::NewJob<'_> = $new;
        (
            jobs::id.eq(new.id),
            jobs::account_id.eq(new.account_id),
            jobs::token_id.eq(new.token_id),
            jobs::session_id.eq(new.session_id),
            jobs::kind.eq(new.kind),
            jobs::ref_.eq(new.r#ref),
            jobs::url.eq(new.url),
            jobs::status.eq(cova_domain::JobStatus::Queued),
            jobs::created_at.eq($now),
            jobs::comments_collected.eq(0),
            jobs::comments_expected.eq(new.comments_expected),
            jobs::truncated.eq(false),
            jobs::batch_id.eq(new.batch_id),
            jobs::hold_stage.eq(new.hold_stage),
            jobs::max_comments.eq(new.max_comments),
            jobs::free_allowance.eq(new.free_allowance),
        )
    }};
}
pub(crate) use job_values;

/// Inside a transaction: writes the new job `queued`, remembers the request's key for it, and
/// writes its command to the outbox. Evaluates to `Result<Job>` (the job as written).
macro_rules! insert_job {
    ($c:ident, $new:expr, $key:expr, $key_ref:expr, $command:expr, $trace:expr, $now:expr) => {{
        let new: &$crate::repo::jobs::new::NewJob<'_> = $new;
        diesel::insert_into($crate::schema::jobs::table)
            .values($crate::repo::jobs::new::job_values!(new, $now))
            .execute($c)
            .await?;
        $crate::repo::jobs::new::remember_key!($c, new.account_id, $key, new.id, $key_ref, $now);
        $crate::repo::outbox::insert_in!($c, $command, $trace, $now);
        $crate::repo::jobs::find_job!($c, new.id)?.ok_or($crate::StorageError::NotFound)
    }};
}
pub(crate) use insert_job;
