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

use crate::schema::{accounts, balances, jobs, ledger, reservations};
use crate::{Change, Db, Result, StorageError, Tx};
use cova_domain::money::{Account, Hold, Running};
use cova_domain::time::{month_end_ms, month_of};
use cova_domain::{JobKind, JobStatus};
use cova_metrics::Movement;
use diesel::prelude::*;
use serde::Serialize;
use std::collections::HashMap;

/// Adds `comments` to the account's balance of `month` with its ledger line; the balance's
/// `(granted, reserved, spent)` after the grant.
pub(crate) async fn grant_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    month: &str,
    comments: i64,
    note: &str,
    now: i64,
) -> Result<(i64, i64, i64)> {
    use diesel::upsert::excluded;
    tx.execute(
        diesel::insert_into(balances::table)
            .values((
                balances::account_id.eq(account_id),
                balances::month.eq(month),
                balances::granted.eq(comments),
                balances::reserved.eq(0),
                balances::spent.eq(0),
            ))
            .on_conflict((balances::account_id, balances::month))
            .do_update()
            .set(balances::granted.eq(balances::granted + excluded(balances::granted))),
    )
    .await?;
    tx.execute(diesel::insert_into(ledger::table).values((
        ledger::id.eq(crate::repo::new_id()),
        ledger::account_id.eq(account_id),
        ledger::month.eq(month),
        ledger::kind.eq("grant"),
        ledger::amount.eq(comments),
        ledger::note.eq(note),
        ledger::created_at.eq(now),
    )))
    .await?;
    let query =
        balances::table.find((account_id, month)).select((balances::granted, balances::reserved, balances::spent));
    Ok(tx.first(query).await?)
}

/// Places the hold the money rules decided for `job_id`, its free part from the account's free
/// allowance and the rest from the month's balance, each a conditional UPDATE that succeeds only
/// while enough is left, and records the reservation. On `false` nothing was held (the caller's
/// transaction must still be rolled back or abandoned).
pub(crate) async fn reserve_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    job_id: &str,
    month: &str,
    hold: Hold,
    now: i64,
) -> Result<bool> {
    let free_ok = hold.free == 0
        || tx
            .execute(
                diesel::update(accounts::table.find(account_id))
                    .filter(accounts::free_comments_left.ge(hold.free))
                    .set(accounts::free_comments_left.eq(accounts::free_comments_left - hold.free)),
            )
            .await?
            == 1;
    let pack_ok = free_ok
        && (hold.pack() == 0
            || tx
                .execute(
                    diesel::update(balances::table.find((account_id, month)))
                        .filter((balances::granted - balances::reserved - balances::spent).ge(hold.pack()))
                        .set(balances::reserved.eq(balances::reserved + hold.pack())),
                )
                .await?
                == 1);
    if pack_ok {
        let held = NewHold::of(account_id, job_id, month, hold, now);
        tx.execute(diesel::insert_into(reservations::table).values(held)).await?;
    }
    Ok(pack_ok)
}

/// A new hold for a job: one row of an insert, alone or among many.
#[derive(Insertable)]
#[diesel(table_name = reservations)]
pub(crate) struct NewHold<'a> {
    job_id: &'a str,
    account_id: &'a str,
    month: &'a str,
    amount: i64,
    free_amount: i64,
    state: &'static str,
    charged: i64,
    created_at: i64,
}

impl<'a> NewHold<'a> {
    pub(crate) fn of(account_id: &'a str, job_id: &'a str, month: &'a str, hold: Hold, now: i64) -> Self {
        Self {
            job_id,
            account_id,
            month,
            amount: hold.amount,
            free_amount: hold.free,
            state: "held",
            charged: 0,
            created_at: now,
        }
    }
}

/// With the account's lock held: moves the job's held reservation from `from` to `to` (as the
/// money rules sized it), each part by a conditional UPDATE that never takes more than is left.
/// False when the balance or the reservation changed under it (the caller rolls back).
pub(crate) async fn move_hold_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    job_id: &str,
    month: &str,
    (from, to): (Hold, Hold),
) -> Result<bool> {
    let (pack, free) = (to.pack() - from.pack(), to.free - from.free);
    let free_ok = free == 0
        || tx
            .execute(
                diesel::update(accounts::table.find(account_id))
                    .filter(accounts::free_comments_left.ge(free.max(0)))
                    .set(accounts::free_comments_left.eq(accounts::free_comments_left - free)),
            )
            .await?
            == 1;
    let pack_ok = free_ok
        && (pack == 0
            || tx
                .execute(
                    diesel::update(balances::table.find((account_id, month)))
                        .filter((balances::granted - balances::reserved - balances::spent).ge(pack.max(0)))
                        .set(balances::reserved.eq(balances::reserved + pack)),
                )
                .await?
                == 1);
    let moved = pack_ok
        && tx
            .execute(
                diesel::update(reservations::table.find(job_id))
                    .filter(reservations::state.eq("held"))
                    .filter(reservations::amount.eq(from.amount))
                    .set((reservations::amount.eq(to.amount), reservations::free_amount.eq(to.free))),
            )
            .await?
            == 1;
    Ok(moved)
}

/// With the accounts' locks held (see `jobs::new::lock_account`): each account as the money
/// rules see it ([`Account`]): this month's balance, the free allowance and its running jobs
/// with their holds and stages, read for all of them in three statements (every id present).
pub(crate) async fn accounts_in(tx: &mut Tx<'_>, ids: &[&str], month: &str) -> Result<HashMap<String, Account>> {
    let mut found: HashMap<String, Account> = ids.iter().map(|id| ((*id).to_owned(), Account::default())).collect();
    let months: Vec<(String, i64, i64)> = tx
        .load(balances::table.filter(balances::account_id.eq_any(ids)).filter(balances::month.eq(month)).select((
            balances::account_id,
            balances::granted,
            balances::granted - balances::reserved - balances::spent,
        )))
        .await?;
    for (id, granted, available) in months {
        if let Some(a) = found.get_mut(&id) {
            (a.granted, a.available) = (granted, available);
        }
    }
    let free: Vec<(String, i64)> = tx
        .load(accounts::table.filter(accounts::id.eq_any(ids)).select((accounts::id, accounts::free_comments_left)))
        .await?;
    for (id, free_left) in free {
        if let Some(a) = found.get_mut(&id) {
            a.free_left = free_left;
        }
    }
    type RunningRow = (String, String, JobKind, Option<String>, cova_domain::money::Stage, Option<i64>);
    let rows: Vec<RunningRow> = tx
        .load(
            jobs::table
                .left_join(
                    reservations::table.on(reservations::job_id.eq(jobs::id).and(reservations::state.eq("held"))),
                )
                .filter(jobs::account_id.eq_any(ids))
                .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
                .select((
                    jobs::account_id,
                    jobs::id,
                    jobs::kind,
                    jobs::batch_id,
                    jobs::hold_stage,
                    reservations::amount.nullable(),
                )),
        )
        .await?;
    for (account_id, id, kind, batch_id, stage, hold) in rows {
        if let Some(a) = found.get_mut(&account_id) {
            a.running.push(Running { id, kind, batch_id, hold: hold.unwrap_or(0), stage });
        }
    }
    Ok(found)
}

/// With the account's lock held: the one account as the money rules see it (see
/// [`accounts_in`]).
pub async fn account_in(tx: &mut Tx<'_>, account_id: &str, month: &str) -> Result<Account> {
    let mut all = accounts_in(tx, &[account_id], month).await?;
    Ok(all.remove(account_id).unwrap_or_default())
}

/// The job's held reservation, with the month whose balance it is held on, if any.
pub(crate) async fn held_in(tx: &mut Tx<'_>, job_id: &str) -> Result<Option<(Hold, String)>> {
    let query = reservations::table.find(job_id).filter(reservations::state.eq("held")).select((
        reservations::amount,
        reservations::free_amount,
        reservations::month,
    ));
    Ok(tx
        .first::<(i64, i64, String), _>(query)
        .await
        .optional()?
        .map(|(amount, free, month)| (Hold { amount, free }, month)))
}

/// Settles (`Some(collected)`: charges at most the hold) or releases (`None`) the job's
/// reservation, once; `None` when it was not held.
pub(crate) async fn close_in(
    tx: &mut Tx<'_>,
    job_id: &str,
    collected: Option<i64>,
    now: i64,
) -> Result<Option<Closed>> {
    let query = reservations::table.find(job_id).filter(reservations::state.eq("held"));
    let Some(held) = tx.first_as::<Reservation, _>(query).await.optional()? else { return Ok(None) };
    let settled = cova_domain::money::settle(Hold { amount: held.amount, free: held.free_amount }, collected);
    let closed = tx
        .execute(diesel::update(reservations::table.find(job_id)).filter(reservations::state.eq("held")).set((
            reservations::state.eq(if collected.is_some() { "settled" } else { "released" }),
            reservations::charged.eq(settled.charged.amount),
            reservations::closed_at.eq(now),
        )))
        .await?;
    if closed == 0 {
        return Ok(None);
    }
    let pack_held = held.amount - held.free_amount;
    if pack_held > 0 {
        tx.execute(diesel::update(balances::table.find((&held.account_id, &held.month))).set((
            balances::reserved.eq(balances::reserved - pack_held),
            balances::spent.eq(balances::spent + settled.charged.pack()),
        )))
        .await?;
    }
    if settled.returned.free > 0 {
        tx.execute(
            diesel::update(accounts::table.find(&held.account_id))
                .set(accounts::free_comments_left.eq(accounts::free_comments_left + settled.returned.free)),
        )
        .await?;
    }
    let parts = [(settled.charged.pack(), None), (settled.charged.free, Some("free allowance"))];
    for (amount, note) in parts {
        if amount > 0 {
            tx.execute(diesel::insert_into(ledger::table).values((
                ledger::id.eq(crate::repo::new_id()),
                ledger::account_id.eq(&held.account_id),
                ledger::month.eq(&held.month),
                ledger::kind.eq("charge"),
                ledger::amount.eq(amount),
                ledger::job_id.eq(job_id),
                ledger::note.eq(note),
                ledger::created_at.eq(now),
            )))
            .await?;
        }
    }
    Ok(Some(Closed { charged: settled.charged.amount, released: settled.returned.amount }))
}

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
    let query =
        balances::table.find((account_id, &month)).select((balances::granted, balances::reserved, balances::spent));
    let row = db.conn().await?.tx().first(query).await.optional()?;
    Ok(balance_of(month, now, row))
}

/// Adds a pack of `comments` to the current month and records it in the ledger.
pub async fn grant(db: &Db, account_id: &str, comments: i64, note: &str, now: i64) -> Result<Balance> {
    if comments <= 0 {
        return Err(StorageError::Conflict("a grant must be a positive number of comments".into()));
    }
    let month = month_of(now);
    let mut t = db.begin().await?;
    let row = grant_in(&mut t.tx(), account_id, &month, comments, note, now).await?;
    t.commit().await?;
    db.changed(&[Change::Account(account_id)]).await;
    Ok(balance_of(month, now, Some(row)))
}

pub async fn reservation(db: &Db, job_id: &str) -> Result<Option<Reservation>> {
    Ok(db.conn().await?.tx().first_as::<Reservation, _>(reservations::table.find(job_id)).await.optional()?)
}
