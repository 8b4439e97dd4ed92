//! Jobs waiting for the balance: parked by [`super::size_hold`] until the account's other jobs
//! give comments back, then looked at again: their command is sent anew through the outbox and
//! a scraper sizes them again. Which ones to wake is the money rules' to say.

use super::new::lock;
use crate::repo::{balances, outbox};
use crate::schema::jobs;
use crate::{Change, Db, Result, Tx};
use cova_domain::JobStatus;
use cova_domain::money::{self, Stage};
use cova_domain::time::month_of;
use cova_messages::{AnalyzeCommand, Outgoing};
use diesel::prelude::*;

/// Sends the commands of `ids` again and notes when they were looked at.
async fn wake_in(tx: &mut Tx<'_>, ids: &[String], trace: &str, now: i64) -> Result<()> {
    for id in ids {
        outbox::queue(tx, &Outgoing::command(&AnalyzeCommand { job_id: id.clone() }), trace, now).await?;
    }
    if !ids.is_empty() {
        tx.execute(
            diesel::update(jobs::table.filter(jobs::id.eq_any(ids)))
                .filter(jobs::hold_stage.eq(Stage::Waiting))
                .set(jobs::waiting_since.eq(now)),
        )
        .await?;
    }
    Ok(())
}

/// A job of the account ended: its waiting jobs are looked at again
/// ([`money::woken_by_an_end`]). Answers how many were woken.
pub async fn wake_waiting(db: &Db, account_id: &str, trace: &str, now: i64) -> Result<usize> {
    let month = month_of(now);
    let mut t = db.begin().await?;
    let mut tx = t.tx();
    lock(&mut tx, account_id).await?;
    let account = balances::account_in(&mut tx, account_id, &month).await?;
    let woken: Vec<String> = money::woken_by_an_end(&account).into_iter().map(str::to_owned).collect();
    wake_in(&mut tx, &woken, trace, now).await?;
    t.commit().await?;
    announce(db, &woken).await;
    Ok(woken.len())
}

/// The scheduler's safety net, should a wake have been lost: the waiting jobs looked at more
/// than `after_ms` ago whose account runs no job that could give comments back
/// ([`money::stale_waiters`]) are woken, for up to `limit` accounts. Answers how many.
pub async fn wake_stale(db: &Db, after_ms: i64, limit: i64, now: i64) -> Result<usize> {
    let month = month_of(now);
    let accounts: Vec<String> = db
        .conn()
        .await?
        .tx()
        .load(
            jobs::table
                .filter(jobs::hold_stage.eq(Stage::Waiting))
                .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
                .filter(jobs::waiting_since.le(now - after_ms))
                .select(jobs::account_id)
                .distinct()
                .limit(limit),
        )
        .await?;
    let mut woken = Vec::new();
    for account_id in &accounts {
        let mut t = db.begin().await?;
        let mut tx = t.tx();
        lock(&mut tx, account_id).await?;
        let account = balances::account_in(&mut tx, account_id, &month).await?;
        let stale: Vec<String> = money::stale_waiters(&account).into_iter().map(str::to_owned).collect();
        let due: Vec<String> = tx
            .load(
                jobs::table
                    .filter(jobs::id.eq_any(&stale))
                    .filter(jobs::waiting_since.le(now - after_ms))
                    .select(jobs::id),
            )
            .await?;
        wake_in(&mut tx, &due, "{}", now).await?;
        t.commit().await?;
        woken.extend(due);
    }
    announce(db, &woken).await;
    Ok(woken.len())
}

async fn announce(db: &Db, woken: &[String]) {
    if !woken.is_empty() {
        let changes: Vec<Change<'_>> = woken.iter().map(|id| Change::Job(id)).collect();
        db.changed(&changes).await;
    }
}
