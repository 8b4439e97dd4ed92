//! Jobs waiting for the balance: parked by [`super::size_hold`] until the account's other jobs
//! give comments back, then looked at again: their command is sent anew through the outbox and
//! a scraper sizes them again. Which ones to wake is the money rules' to say.

use super::new::lock_account;
use crate::repo::balances::account_in;
use crate::repo::outbox::insert_in as outbox_in;
use crate::schema::jobs;
use crate::{Change, Db, Result, in_transaction, with_conn};
use cova_domain::JobStatus;
use cova_domain::money::{self, Stage};
use cova_domain::time::month_of;
use cova_messages::{AnalyzeCommand, Outgoing};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

/// Inside a transaction: sends the commands of `ids` again and notes when they were looked at.
macro_rules! wake_in {
    ($c:ident, $ids:expr, $trace:expr, $now:expr) => {{
        let ids: &[String] = $ids;
        for id in ids {
            outbox_in!($c, &Outgoing::command(&AnalyzeCommand { job_id: id.clone() }), $trace, $now);
        }
        if !ids.is_empty() {
            diesel::update(jobs::table.filter(jobs::id.eq_any(ids)))
                .filter(jobs::hold_stage.eq(Stage::Waiting))
                .set(jobs::waiting_since.eq($now))
                .execute($c)
                .await?;
        }
    }};
}

/// A job of the account ended: its waiting jobs are looked at again
/// ([`money::woken_by_an_end`]). Answers how many were woken.
pub async fn wake_waiting(db: &Db, account_id: &str, trace: &str, now: i64) -> Result<usize> {
    let month = month_of(now);
    let mut conn = db.conn().await?;
    let woken: Vec<String> = in_transaction!(&mut conn, |c| {
        lock_account!(c, account_id);
        let account = account_in!(c, account_id, &month)?;
        let ids: Vec<String> = money::woken_by_an_end(&account).into_iter().map(str::to_owned).collect();
        wake_in!(c, &ids, trace, now);
        Ok(ids)
    })?;
    drop(conn);
    announce(db, &woken).await;
    Ok(woken.len())
}

/// The scheduler's safety net, should a wake have been lost: the waiting jobs looked at more
/// than `after_ms` ago whose account runs no job that could give comments back
/// ([`money::stale_waiters`]) are woken, for up to `limit` accounts. Answers how many.
pub async fn wake_stale(db: &Db, after_ms: i64, limit: i64, now: i64) -> Result<usize> {
    let month = month_of(now);
    let mut conn = db.conn().await?;
    let accounts: Vec<String> = with_conn!(&mut conn, |c| {
        jobs::table
            .filter(jobs::hold_stage.eq(Stage::Waiting))
            .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
            .filter(jobs::waiting_since.le(now - after_ms))
            .select(jobs::account_id)
            .distinct()
            .limit(limit)
            .load(c)
            .await
    })?;
    let mut woken = Vec::new();
    for account_id in &accounts {
        let ids: Vec<String> = in_transaction!(&mut conn, |c| {
            lock_account!(c, account_id.as_str());
            let account = account_in!(c, account_id, &month)?;
            let stale: Vec<String> = money::stale_waiters(&account).into_iter().map(str::to_owned).collect();
            let due: Vec<String> = jobs::table
                .filter(jobs::id.eq_any(&stale))
                .filter(jobs::waiting_since.le(now - after_ms))
                .select(jobs::id)
                .load(c)
                .await?;
            wake_in!(c, &due, "{}", now);
            Ok(due)
        })?;
        woken.extend(ids);
    }
    drop(conn);
    announce(db, &woken).await;
    Ok(woken.len())
}

async fn announce(db: &Db, woken: &[String]) {
    if !woken.is_empty() {
        let changes: Vec<Change<'_>> = woken.iter().map(|id| Change::Job(id)).collect();
        db.changed(&changes).await;
    }
}
