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

use crate::schema::{accounts, balances, reservations};
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

/// Inside a transaction: holds `amount` for `job_id`, `free` of it (at most what the
/// allowance has; 0 but for a session's analysis) from the account's free allowance and the
/// rest from the month's balance if it is still available (conditional UPDATEs), and records
/// the reservation. Evaluates to `Result<bool>`; on `false` nothing was held (the caller's
/// transaction must still be rolled back or abandoned).
macro_rules! reserve_in {
    ($c:ident, $account_id:expr, $job_id:expr, $month:expr, $amount:expr, $free:expr, $now:expr) => {{
        use $crate::schema::{accounts, balances, reservations};
        let amount: i64 = $amount;
        let free: i64 = $free.clamp(0, amount);
        let from_pack = amount - free;
        let free_ok = free == 0
            || diesel::update(accounts::table.find($account_id))
                .filter(accounts::free_comments_left.ge(free))
                .set(accounts::free_comments_left.eq(accounts::free_comments_left - free))
                .execute($c)
                .await?
                == 1;
        let pack_ok = free_ok
            && (from_pack == 0
                || diesel::update(balances::table.find(($account_id, $month)))
                    .filter((balances::granted - balances::reserved - balances::spent).ge(from_pack))
                    .set(balances::reserved.eq(balances::reserved + from_pack))
                    .execute($c)
                    .await?
                    == 1);
        if pack_ok {
            diesel::insert_into(reservations::table)
                .values($crate::repo::balances::held_values!($account_id, $job_id, $month, amount, free, $now))
                .execute($c)
                .await?;
        }
        pack_ok
    }};
}
pub(crate) use reserve_in;

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
                    // The free part is charged first; each part's remainder goes back to its source.
                    let free_charged = charged.min(held.free_amount);
                    let pack_charged = charged - free_charged;
                    let pack_held = held.amount - held.free_amount;
                    if pack_held > 0 {
                        diesel::update(balances::table.find((&held.account_id, &held.month)))
                            .set((
                                balances::reserved.eq(balances::reserved - pack_held),
                                balances::spent.eq(balances::spent + pack_charged),
                            ))
                            .execute($c)
                            .await?;
                    }
                    if held.free_amount > free_charged {
                        diesel::update(accounts::table.find(&held.account_id))
                            .set(
                                accounts::free_comments_left
                                    .eq(accounts::free_comments_left + (held.free_amount - free_charged)),
                            )
                            .execute($c)
                            .await?;
                    }
                    for (amount, note) in [(pack_charged, None), (free_charged, Some("free allowance"))] {
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
                    Ok(Some($crate::repo::balances::Closed { charged, released: held.amount - charged }))
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
            if !reserve_in!(c, account_id, job_id, &month, amount, 0, now) {
                // Someone else reserved in between: read again.
                return Ok(None);
            }
            Ok(Some((amount, true)))
        })?;
        drop(conn);
        if let Some((amount, new)) = outcome {
            if new {
                cova_metrics::balance(Movement::Reserved, amount);
                db.changed(&[Change::Account(account_id)]).await;
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
    drop(conn);
    let Some(closed) = closed else { return Ok(None) };
    closed.record();
    if let Some(held) = reservation(db, job_id).await? {
        db.changed(&[Change::Account(&held.account_id)]).await;
    }
    Ok(Some(closed.charged))
}

/// Moves a job's hold towards `target` once the post has reported its size: lowers it
/// (returning the difference at once, the pack part before the free part) or raises it by as
/// much as is still available, never more: from the free allowance first when the hold started
/// on it (a session's new analysis), then from the month's packs. Returns the hold now in place, `None` when the reservation is
/// already closed.
pub async fn adjust_hold(db: &Db, job_id: &str, target: i64) -> Result<Option<i64>> {
    let target = target.max(1);
    for _ in 0..RESERVE_ATTEMPTS {
        let mut conn = db.conn().await?;
        let outcome: Option<Option<(i64, i64, String)>> = in_transaction!(&mut conn, |c| {
            let held = reservations::table
                .find(job_id)
                .filter(reservations::state.eq("held"))
                .select(Reservation::as_select())
                .first(c)
                .await
                .optional()?;
            let Some(held) = held else { return Ok(Some(None)) };
            let balance = balances::table.find((&held.account_id, &held.month));
            let account = accounts::table.find(&held.account_id);
            // (pack part, free part) of the change. A lowering returns the pack part first; a
            // raise draws on the free allowance first, and only for a session's job.
            let (pack_change, free_change) = if target <= held.amount {
                let change = target - held.amount;
                let pack_held = held.amount - held.free_amount;
                (change.max(-pack_held), change - change.max(-pack_held))
            } else {
                let wanted = target - held.amount;
                // Only a hold that started on the allowance (a session's new analysis; never a
                // refresh or a token's job) may grow from it.
                let free_left = if held.free_amount > 0 {
                    account.select(accounts::free_comments_left).first::<i64>(c).await?
                } else {
                    0
                };
                let from_free = wanted.min(free_left.max(0));
                let available = balance
                    .select(balances::granted - balances::reserved - balances::spent)
                    .first::<i64>(c)
                    .await
                    .optional()?
                    .unwrap_or(0);
                ((wanted - from_free).min(available.max(0)), from_free)
            };
            let change = pack_change + free_change;
            if change == 0 {
                return Ok(Some(Some((held.amount, 0, held.account_id))));
            }
            if free_change != 0 {
                // Conditional like the pack part: a raise never takes more than is left.
                let moved = diesel::update(account)
                    .filter(accounts::free_comments_left.ge(free_change.max(0)))
                    .set(accounts::free_comments_left.eq(accounts::free_comments_left - free_change))
                    .execute(c)
                    .await?;
                if moved == 0 {
                    return Ok(None);
                }
            }
            if pack_change != 0 {
                // Conditional on what is available now, so a raise can never overdraw.
                let moved = diesel::update(balance)
                    .filter((balances::granted - balances::reserved - balances::spent).ge(pack_change.max(0)))
                    .set(balances::reserved.eq(balances::reserved + pack_change))
                    .execute(c)
                    .await?;
                if moved == 0 {
                    // Lost a race: give the free part back before trying again.
                    diesel::update(account)
                        .set(accounts::free_comments_left.eq(accounts::free_comments_left + free_change))
                        .execute(c)
                        .await?;
                    return Ok(None);
                }
            }
            diesel::update(reservations::table.find(job_id))
                .filter(reservations::state.eq("held"))
                .set((
                    reservations::amount.eq(held.amount + change),
                    reservations::free_amount.eq(held.free_amount + free_change),
                ))
                .execute(c)
                .await?;
            Ok(Some(Some((held.amount + change, change, held.account_id))))
        })?;
        drop(conn);
        let Some(hold) = outcome else { continue };
        let Some((amount, change, account_id)) = hold else { return Ok(None) };
        if change != 0 {
            if change > 0 {
                cova_metrics::balance(Movement::Reserved, change);
            } else {
                cova_metrics::balance(Movement::Released, -change);
            }
            db.changed(&[Change::Account(&account_id)]).await;
        }
        return Ok(Some(amount));
    }
    Err(StorageError::Unavailable("the balance is too contended; retry".into()))
}

pub async fn reservation(db: &Db, job_id: &str) -> Result<Option<Reservation>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        reservations::table.find(job_id).select(Reservation::as_select()).first(c).await.optional()
    })?)
}
