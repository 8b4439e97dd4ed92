use crate::schema::jobs;
use crate::{Db, Result, with_conn};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

/// Job states in which a job counts against the per-account concurrency limit.
pub const RUNNING_STATES: [&str; 2] = ["queued", "in_progress"];

/// Jobs of the account that are queued or in progress.
pub async fn count_running(db: &Db, account_id: &str) -> Result<i64> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        jobs::table
            .filter(jobs::account_id.eq(account_id))
            .filter(jobs::status.eq_any(RUNNING_STATES))
            .count()
            .get_result::<i64>(c)
            .await
    })?)
}
