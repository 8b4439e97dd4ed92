//! The comment balance: one row per account and month, reserve → settle/release per job.
//!
//! Overdraft is impossible twice over: every reservation is a conditional UPDATE that only
//! succeeds while enough is available, and a CHECK constraint refuses any row where
//! `reserved + spent > granted`.
//!
//! The free allowance (`accounts.free_comments_left`, jobs started from a cookie session only)
//! is spent before the month's packs: such a hold takes `free_amount` from the allowance (a
//! conditional UPDATE too, under `free_comments_left >= 0`) and the rest from the month. A
//! charge comes out of the free part first; what is not charged goes back where it came from.

use crate::schema::{balances, reservations};
use crate::{Change, Db, Result, StorageError, in_transaction, with_conn};
use cova_domain::time::{month_end_ms, month_of};
use cova_metrics::Movement;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Serialize;

/// Inside a transaction: adds `comments` to the account's balance of `month` with its ledger
/// line. Evaluates to `Result<(granted, reserved, spent)>` after the grant.
macro_rules! grant_in {
    ($c:ident, $account_id:expr, $month:expr, $comments:expr, $note:expr, $now:expr) => {{
        use diesel::upsert::excluded;
        use $crate::schema::{balances, ledger};
        let comments: i64 = $comments;
        diesel::insert_into(balances::table)
            .values((
                balances::account_id.eq($account_id),
                balances::month.eq($month),
                balances::granted.eq(comments),
                balances::reserved.eq(0),
                balances::spent.eq(0),
            ))
            .on_conflict((balances::account_id, balances::month))
            .do_update()
            .set(balances::granted.eq(balances::granted + excluded(balances::granted)))
            .execute($c)
            .await?;
        diesel::insert_into(ledger::table)
            .values((
                ledger::id.eq($crate::repo::new_id()),
                ledger::account_id.eq($account_id),
                ledger::month.eq($month),
                ledger::kind.eq("grant"),
                ledger::amount.eq(comments),
                ledger::note.eq($note),
                ledger::created_at.eq($now),
            ))
            .execute($c)
            .await?;
        let row: $crate::Result<(i64, i64, i64)> = Ok(balances::table
            .find(($account_id, $month))
            .select((balances::granted, balances::reserved, balances::spent))
            .first::<(i64, i64, i64)>($c)
            .await?);
        row
    }};
}
pub(crate) use grant_in;

/// Inside a transaction: places the hold the money rules decided for `job_id` (a
/// `cova_domain::money::Hold`), its free part from the account's free allowance and the rest
/// from the month's balance, each a conditional UPDATE that succeeds only while enough is left,
/// and records the reservation. Evaluates to `Result<bool>`; on `false` nothing was held (the
/// caller's transaction must still be rolled back or abandoned).
macro_rules! reserve_in {
    ($c:ident, $account_id:expr, $job_id:expr, $month:expr, $hold:expr, $now:expr) => {{
        use $crate::schema::{accounts, balances, reservations};
        let hold: cova_domain::money::Hold = $hold;
        let free_ok = hold.free == 0
            || diesel::update(accounts::table.find($account_id))
                .filter(accounts::free_comments_left.ge(hold.free))
                .set(accounts::free_comments_left.eq(accounts::free_comments_left - hold.free))
                .execute($c)
                .await?
                == 1;
        let pack_ok = free_ok
            && (hold.pack() == 0
                || diesel::update(balances::table.find(($account_id, $month)))
                    .filter((balances::granted - balances::reserved - balances::spent).ge(hold.pack()))
                    .set(balances::reserved.eq(balances::reserved + hold.pack()))
                    .execute($c)
                    .await?
                    == 1);
        if pack_ok {
            diesel::insert_into(reservations::table)
                .values($crate::repo::balances::held_values!(
                    $account_id,
                    $job_id,
                    $month,
                    hold.amount,
                    hold.free,
                    $now
                ))
                .execute($c)
                .await?;
        }
        pack_ok
    }};
}
pub(crate) use reserve_in;

/// Inside a transaction holding the account's lock: moves the job's held reservation from
/// `from` to `to` (both `cova_domain::money::Hold`, as the money rules sized it), each part by
/// a conditional UPDATE that never takes more than is left. Evaluates to `Result<bool>`: false
/// when the balance or the reservation changed under it (the caller rolls back).
macro_rules! move_hold_in {
    ($c:ident, $account_id:expr, $job_id:expr, $month:expr, $from:expr, $to:expr) => {{
        use $crate::schema::{accounts, balances, reservations};
        let (from, to): (cova_domain::money::Hold, cova_domain::money::Hold) = ($from, $to);
        let (pack, free) = (to.pack() - from.pack(), to.free - from.free);
        let free_ok = free == 0
            || diesel::update(accounts::table.find($account_id))
                .filter(accounts::free_comments_left.ge(free.max(0)))
                .set(accounts::free_comments_left.eq(accounts::free_comments_left - free))
                .execute($c)
                .await?
                == 1;
        let pack_ok = free_ok
            && (pack == 0
                || diesel::update(balances::table.find(($account_id, $month)))
                    .filter((balances::granted - balances::reserved - balances::spent).ge(pack.max(0)))
                    .set(balances::reserved.eq(balances::reserved + pack))
                    .execute($c)
                    .await?
                    == 1);
        let moved = pack_ok
            && diesel::update(reservations::table.find($job_id))
                .filter(reservations::state.eq("held"))
                .filter(reservations::amount.eq(from.amount))
                .set((reservations::amount.eq(to.amount), reservations::free_amount.eq(to.free)))
                .execute($c)
                .await?
                == 1;
        moved
    }};
}
pub(crate) use move_hold_in;

/// Inside a transaction holding the accounts' locks (see `jobs::new::lock_account!`): each
/// account as the money rules see it ([`cova_domain::money::Account`]): this month's balance,
/// the free allowance and its running jobs with their holds and stages, read for all of them
/// in three statements. Evaluates to `Result<HashMap<String, Account>>` (every id present).
macro_rules! accounts_in {
    ($c:ident, $account_ids:expr, $month:expr) => {{
        use $crate::schema::{accounts, balances, jobs, reservations};
        let ids: &[&str] = $account_ids;
        let mut found: std::collections::HashMap<String, cova_domain::money::Account> =
            ids.iter().map(|id| ((*id).to_owned(), cova_domain::money::Account::default())).collect();
        let months: Vec<(String, i64, i64)> = balances::table
            .filter(balances::account_id.eq_any(ids))
            .filter(balances::month.eq($month))
            .select((balances::account_id, balances::granted, balances::granted - balances::reserved - balances::spent))
            .load($c)
            .await?;
        for (id, granted, available) in months {
            if let Some(a) = found.get_mut(&id) {
                (a.granted, a.available) = (granted, available);
            }
        }
        let free: Vec<(String, i64)> = accounts::table
            .filter(accounts::id.eq_any(ids))
            .select((accounts::id, accounts::free_comments_left))
            .load($c)
            .await?;
        for (id, free_left) in free {
            if let Some(a) = found.get_mut(&id) {
                a.free_left = free_left;
            }
        }
        type RunningRow =
            (String, String, cova_domain::JobKind, Option<String>, cova_domain::money::Stage, Option<i64>);
        let rows: Vec<RunningRow> = jobs::table
            .left_join(reservations::table.on(reservations::job_id.eq(jobs::id).and(reservations::state.eq("held"))))
            .filter(jobs::account_id.eq_any(ids))
            .filter(jobs::status.eq_any(cova_domain::JobStatus::RUNNING_STR))
            .select((
                jobs::account_id,
                jobs::id,
                jobs::kind,
                jobs::batch_id,
                jobs::hold_stage,
                reservations::amount.nullable(),
            ))
            .load($c)
            .await?;
        for (account_id, id, kind, batch_id, stage, hold) in rows {
            if let Some(a) = found.get_mut(&account_id) {
                a.running.push(cova_domain::money::Running { id, kind, batch_id, hold: hold.unwrap_or(0), stage });
            }
        }
        let accounts: $crate::Result<std::collections::HashMap<String, cova_domain::money::Account>> = Ok(found);
        accounts
    }};
}
pub(crate) use accounts_in;

/// Inside a transaction holding the account's lock: the one account as the money rules see it
/// (see [`accounts_in!`]). Evaluates to `Result<Account>`.
macro_rules! account_in {
    ($c:ident, $account_id:expr, $month:expr) => {{
        let id: &str = $account_id;
        let mut all = $crate::repo::balances::accounts_in!($c, &[id], $month)?;
        let account: $crate::Result<cova_domain::money::Account> = Ok(all.remove(id).unwrap_or_default());
        account
    }};
}
pub(crate) use account_in;

/// Inside a transaction: the job's held reservation as a `cova_domain::money::Hold`, with the
/// month whose balance it is held on, if any. Evaluates to `Result<Option<(Hold, String)>>`.
macro_rules! held_in {
    ($c:ident, $job_id:expr) => {{
        use $crate::schema::reservations;
        let held: $crate::Result<Option<(cova_domain::money::Hold, String)>> = Ok(reservations::table
            .find($job_id)
            .filter(reservations::state.eq("held"))
            .select((reservations::amount, reservations::free_amount, reservations::month))
            .first::<(i64, i64, String)>($c)
            .await
            .optional()?
            .map(|(amount, free, month)| (cova_domain::money::Hold { amount, free }, month)));
        held
    }};
}
pub(crate) use held_in;

/// The column values of a new hold of `amount` comments (`free` of them from the free
/// allowance) for a job: one row of an insert, alone or among many.
macro_rules! held_values {
    ($account_id:expr, $job_id:expr, $month:expr, $amount:expr, $free:expr, $now:expr) => {{
        use $crate::schema::reservations;
        (
            reservations::job_id.eq($job_id),
            reservations::account_id.eq($account_id),
            reservations::month.eq($month),
            reservations::amount.eq($amount),
            reservations::free_amount.eq($free),
            reservations::state.eq("held"),
            reservations::charged.eq(0),
            reservations::created_at.eq($now),
        )
    }};
}
pub(crate) use held_values;

/// Inside a transaction: settles (`Some(collected)`: charges at most the hold) or releases
/// (`None`) the job's reservation, once. Evaluates to `Result<Option<Closed>>`.
macro_rules! close_in {
    ($c:ident, $job_id:expr, $collected:expr, $now:expr) => {{
        use $crate::repo::balances::Reservation;
        use $crate::schema::{accounts, balances, ledger, reservations};
        let collected: Option<i64> = $collected;
        let held = reservations::table
            .find($job_id)
            .filter(reservations::state.eq("held"))
            .select(Reservation::as_select())
            .first($c)
            .await
            .optional()?;
        let outcome: $crate::Result<Option<$crate::repo::balances::Closed>> = match held {
            None => Ok(None),
            Some(held) => {
                let settled = cova_domain::money::settle(
                    cova_domain::money::Hold { amount: held.amount, free: held.free_amount },
                    collected,
                );
                let closed = diesel::update(reservations::table.find($job_id))
                    .filter(reservations::state.eq("held"))
                    .set((
                        reservations::state.eq(if collected.is_some() { "settled" } else { "released" }),
                        reservations::charged.eq(settled.charged.amount),
                        reservations::closed_at.eq($now),
                    ))
                    .execute($c)
                    .await?;
                if closed == 0 {
                    Ok(None)
                } else {
                    let pack_held = held.amount - held.free_amount;
                    if pack_held > 0 {
                        diesel::update(balances::table.find((&held.account_id, &held.month)))
                            .set((
                                balances::reserved.eq(balances::reserved - pack_held),
                                balances::spent.eq(balances::spent + settled.charged.pack()),
                            ))
                            .execute($c)
                            .await?;
                    }
                    if settled.returned.free > 0 {
                        diesel::update(accounts::table.find(&held.account_id))
                            .set(accounts::free_comments_left.eq(accounts::free_comments_left + settled.returned.free))
                            .execute($c)
                            .await?;
                    }
                    let parts = [(settled.charged.pack(), None), (settled.charged.free, Some("free allowance"))];
                    for (amount, note) in parts {
                        if amount > 0 {
                            diesel::insert_into(ledger::table)
                                .values((
                                    ledger::id.eq($crate::repo::new_id()),
                                    ledger::account_id.eq(&held.account_id),
                                    ledger::month.eq(&held.month),
                                    ledger::kind.eq("charge"),
                                    ledger::amount.eq(amount),
                                    ledger::job_id.eq($job_id),
                                    ledger::note.eq(note),
                                    ledger::created_at.eq($now),
                                ))
                                .execute($c)
                                .await?;
                        }
                    }
                    Ok(Some($crate::repo::balances::Closed {
                        charged: settled.charged.amount,
                        released: settled.returned.amount,
                    }))
                }
            }
        };
        outcome
    }};
}
pub(crate) use close_in;

/// How a hold ended: charged, and returned to the balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed {
    pub charged: i64,
    pub released: i64,
}

impl Closed {
    /// Call once the transaction that closed the hold has committed.
    pub(crate) fn record(&self) {
        cova_metrics::balance(Movement::Settled, self.charged);
        cova_metrics::balance(Movement::Released, self.released);
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Balance {
    pub month: String,
    pub granted: i64,
    pub reserved: i64,
    pub spent: i64,
    pub available: i64,
    /// Unix ms when what is left expires (start of the next month, UTC).
    pub expires_at: i64,
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = reservations)]
pub struct Reservation {
    pub job_id: String,
    pub account_id: String,
    pub month: String,
    pub amount: i64,
    pub state: String,
    pub charged: i64,
    pub created_at: i64,
    pub closed_at: Option<i64>,
    /// The part of `amount` taken from the free allowance.
    pub free_amount: i64,
}

pub(crate) fn balance_of(month: String, now: i64, row: Option<(i64, i64, i64)>) -> Balance {
    let (granted, reserved, spent) = row.unwrap_or((0, 0, 0));
    Balance { month, granted, reserved, spent, available: granted - reserved - spent, expires_at: month_end_ms(now) }
}

/// The balance of the month containing `now`; earlier months have expired.
pub async fn current(db: &Db, account_id: &str, now: i64) -> Result<Balance> {
    let month = month_of(now);
    let mut conn = db.conn().await?;
    let row = with_conn!(&mut conn, |c| {
        balances::table
            .find((account_id, &month))
            .select((balances::granted, balances::reserved, balances::spent))
            .first::<(i64, i64, i64)>(c)
            .await
            .optional()
    })?;
    Ok(balance_of(month, now, row))
}

/// True when the account bought (was granted) a comment pack this month: what the paid
/// features (watch, refresh, AI, keywords) require.
pub async fn has_pack(db: &Db, account_id: &str, now: i64) -> Result<bool> {
    Ok(current(db, account_id, now).await?.granted > 0)
}

/// Adds a pack of `comments` to the current month and records it in the ledger.
pub async fn grant(db: &Db, account_id: &str, comments: i64, note: &str, now: i64) -> Result<Balance> {
    if comments <= 0 {
        return Err(StorageError::Conflict("a grant must be a positive number of comments".into()));
    }
    let month = month_of(now);
    let mut conn = db.conn().await?;
    let row = in_transaction!(&mut conn, |c| grant_in!(c, account_id, &month, comments, note, now))?;
    drop(conn);
    db.changed(&[Change::Account(account_id)]).await;
    Ok(balance_of(month, now, Some(row)))
}

pub async fn reservation(db: &Db, job_id: &str) -> Result<Option<Reservation>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        reservations::table.find(job_id).select(Reservation::as_select()).first(c).await.optional()
    })?)
}
