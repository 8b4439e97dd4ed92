//! The comment balance: one row per account and month, reserve → settle/release per job.
//!
//! Overdraft is impossible twice over: every reservation is a conditional UPDATE that only
//! succeeds while enough is available, and a CHECK constraint refuses any row where
//! `reserved + spent > granted`.

use crate::schema::{balances, ledger, reservations};
use crate::{Db, Result, StorageError, in_transaction, with_conn};
use cova_domain::time::{month_end_ms, month_of};
use cova_metrics::Movement;
use diesel::prelude::*;
use diesel::upsert::excluded;
use diesel_async::RunQueryDsl;
use serde::Serialize;

/// Inside a transaction: holds `amount` on the month's balance for `job_id` if it is still
/// available (conditional UPDATE) and records the reservation. Evaluates to `Result<bool>`.
macro_rules! reserve_in {
    ($c:ident, $account_id:expr, $job_id:expr, $month:expr, $amount:expr, $now:expr) => {{
        use $crate::schema::{balances, reservations};
        let amount: i64 = $amount;
        let updated = diesel::update(balances::table.find(($account_id, $month)))
            .filter((balances::granted - balances::reserved - balances::spent).ge(amount))
            .set(balances::reserved.eq(balances::reserved + amount))
            .execute($c)
            .await?;
        if updated == 1 {
            diesel::insert_into(reservations::table)
                .values((
                    reservations::job_id.eq($job_id),
                    reservations::account_id.eq($account_id),
                    reservations::month.eq($month),
                    reservations::amount.eq(amount),
                    reservations::state.eq("held"),
                    reservations::charged.eq(0),
                    reservations::created_at.eq($now),
                ))
                .execute($c)
                .await?;
        }
        updated == 1
    }};
}
pub(crate) use reserve_in;

/// Inside a transaction: settles (`Some(collected)`: charges at most the hold) or releases
/// (`None`) the job's reservation, once. Evaluates to `Result<Option<Closed>>`.
macro_rules! close_in {
    ($c:ident, $job_id:expr, $collected:expr, $now:expr) => {{
        use $crate::repo::balances::Reservation;
        use $crate::schema::{balances, ledger, reservations};
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
                let charged = collected.unwrap_or(0).clamp(0, held.amount);
                let closed = diesel::update(reservations::table.find($job_id))
                    .filter(reservations::state.eq("held"))
                    .set((
                        reservations::state.eq(if collected.is_some() { "settled" } else { "released" }),
                        reservations::charged.eq(charged),
                        reservations::closed_at.eq($now),
                    ))
                    .execute($c)
                    .await?;
                if closed == 0 {
                    Ok(None)
                } else {
                    diesel::update(balances::table.find((&held.account_id, &held.month)))
                        .set((
                            balances::reserved.eq(balances::reserved - held.amount),
                            balances::spent.eq(balances::spent + charged),
                        ))
                        .execute($c)
                        .await?;
                    if charged > 0 {
                        diesel::insert_into(ledger::table)
                            .values((
                                ledger::id.eq($crate::repo::new_id()),
                                ledger::account_id.eq(&held.account_id),
                                ledger::month.eq(&held.month),
                                ledger::kind.eq("charge"),
                                ledger::amount.eq(charged),
                                ledger::job_id.eq($job_id),
                                ledger::created_at.eq($now),
                            ))
                            .execute($c)
                            .await?;
                    }
                    Ok(Some(Closed { charged, released: held.amount - charged }))
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

/// How often a reservation that lost a race re-reads the balance before giving up.
const RESERVE_ATTEMPTS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
}

fn balance_of(month: String, now: i64, row: Option<(i64, i64, i64)>) -> Balance {
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
    let row = in_transaction!(&mut conn, |c| {
        diesel::insert_into(balances::table)
            .values((
                balances::account_id.eq(account_id),
                balances::month.eq(&month),
                balances::granted.eq(comments),
                balances::reserved.eq(0),
                balances::spent.eq(0),
            ))
            .on_conflict((balances::account_id, balances::month))
            .do_update()
            .set(balances::granted.eq(balances::granted + excluded(balances::granted)))
            .execute(c)
            .await?;
        diesel::insert_into(ledger::table)
            .values((
                ledger::id.eq(super::new_id()),
                ledger::account_id.eq(account_id),
                ledger::month.eq(&month),
                ledger::kind.eq("grant"),
                ledger::amount.eq(comments),
                ledger::note.eq(note),
                ledger::created_at.eq(now),
            ))
            .execute(c)
            .await?;
        Ok(balances::table
            .find((account_id, &month))
            .select((balances::granted, balances::reserved, balances::spent))
            .first::<(i64, i64, i64)>(c)
            .await?)
    })?;
    Ok(balance_of(month, now, Some(row)))
}

/// Reserves up to `wanted` comments for `job_id`: min(wanted, available). Returns the amount
/// held, 0 when nothing is available. Repeating it for the same job returns the first hold.
pub async fn reserve(db: &Db, account_id: &str, job_id: &str, wanted: i64, now: i64) -> Result<i64> {
    if wanted <= 0 {
        return Ok(0);
    }
    let month = month_of(now);
    for _ in 0..RESERVE_ATTEMPTS {
        let mut conn = db.conn().await?;
        let outcome: Option<(i64, bool)> = in_transaction!(&mut conn, |c| {
            let existing =
                reservations::table.find(job_id).select(reservations::amount).first::<i64>(c).await.optional()?;
            if let Some(held) = existing {
                return Ok(Some((held, false)));
            }
            let row = balances::table
                .find((account_id, &month))
                .select((balances::granted, balances::reserved, balances::spent))
                .first::<(i64, i64, i64)>(c)
                .await
                .optional()?;
            let available = row.map_or(0, |(g, r, s)| g - r - s);
            if available <= 0 {
                return Ok(Some((0, false)));
            }
            let amount = wanted.min(available);
            if !reserve_in!(c, account_id, job_id, &month, amount, now) {
                // Someone else reserved in between: read again.
                return Ok(None);
            }
            Ok(Some((amount, true)))
        })?;
        if let Some((amount, new)) = outcome {
            if new {
                cova_metrics::balance(Movement::Reserved, amount);
            }
            return Ok(amount);
        }
    }
    Err(StorageError::Unavailable("the balance is too contended; retry".into()))
}

/// Charges `collected` (at most the hold) and returns the rest. Happens at most once per job:
/// returns `None` when the reservation was already closed (or never existed).
pub async fn settle(db: &Db, job_id: &str, collected: i64, now: i64) -> Result<Option<i64>> {
    close(db, job_id, Some(collected), now).await
}

/// Returns the whole hold; a failed job charges nothing. At most once per job.
pub async fn release(db: &Db, job_id: &str, now: i64) -> Result<Option<i64>> {
    close(db, job_id, None, now).await
}

async fn close(db: &Db, job_id: &str, collected: Option<i64>, now: i64) -> Result<Option<i64>> {
    let mut conn = db.conn().await?;
    let closed: Option<Closed> = in_transaction!(&mut conn, |c| close_in!(c, job_id, collected, now))?;
    Ok(closed.map(|closed| {
        closed.record();
        closed.charged
    }))
}

/// Moves a job's hold towards `target` once the post has reported its size: lowers it
/// (returning the difference to the balance at once) or raises it by as much as the balance
/// still has available, never more. Returns the hold now in place, `None` when the
/// reservation is already closed.
pub async fn adjust_hold(db: &Db, job_id: &str, target: i64) -> Result<Option<i64>> {
    let target = target.max(1);
    for _ in 0..RESERVE_ATTEMPTS {
        let mut conn = db.conn().await?;
        let outcome: Option<Option<(i64, i64)>> = in_transaction!(&mut conn, |c| {
            let held = reservations::table
                .find(job_id)
                .filter(reservations::state.eq("held"))
                .select(Reservation::as_select())
                .first(c)
                .await
                .optional()?;
            let Some(held) = held else { return Ok(Some(None)) };
            let balance = balances::table.find((&held.account_id, &held.month));
            let change = if target <= held.amount {
                target - held.amount
            } else {
                let available =
                    balance.select(balances::granted - balances::reserved - balances::spent).first::<i64>(c).await?;
                (target - held.amount).min(available.max(0))
            };
            if change == 0 {
                return Ok(Some(Some((held.amount, 0))));
            }
            // Conditional on what is available now, so a raise can never overdraw.
            let moved = diesel::update(balance)
                .filter((balances::granted - balances::reserved - balances::spent).ge(change.max(0)))
                .set(balances::reserved.eq(balances::reserved + change))
                .execute(c)
                .await?;
            if moved == 0 {
                return Ok(None);
            }
            diesel::update(reservations::table.find(job_id))
                .filter(reservations::state.eq("held"))
                .set(reservations::amount.eq(held.amount + change))
                .execute(c)
                .await?;
            Ok(Some(Some((held.amount + change, change))))
        })?;
        if let Some(hold) = outcome {
            return Ok(hold.map(|(amount, change)| {
                if change > 0 {
                    cova_metrics::balance(Movement::Reserved, change);
                } else {
                    cova_metrics::balance(Movement::Released, -change);
                }
                amount
            }));
        }
    }
    Err(StorageError::Unavailable("the balance is too contended; retry".into()))
}

pub async fn reservation(db: &Db, job_id: &str) -> Result<Option<Reservation>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        reservations::table.find(job_id).select(Reservation::as_select()).first(c).await.optional()
    })?)
}
