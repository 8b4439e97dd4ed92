//! Watches: library entries re-scraped at an interval. The scheduler claims due watches (one
//! replica each), starts their runs and reschedules them.

use crate::schema::analyses;
use crate::{Db, Result, with_conn};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

/// How long a claim keeps other scheduler replicas off a watch.
pub const CLAIM_MS: i64 = 60_000;

#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct DueWatch {
    pub id: String,
    pub account_id: String,
    pub r#ref: String,
    pub url: String,
    pub interval_min: i32,
    /// This claim: rescheduling happens only while it still holds (a change of the watch
    /// settings in between ends the claim and wins).
    pub claimed_until: i64,
}

/// Turns off the due watches whose follow ended (a post found through a creator is watched for
/// its first days only); answers how many.
pub async fn end_followed(db: &Db, now: i64) -> Result<usize> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        diesel::update(
            analyses::table
                .filter(analyses::watch_enabled.eq(true))
                .filter(analyses::watch_next_run_at.le(now))
                .filter(analyses::watch_until.le(now)),
        )
        .set((analyses::watch_enabled.eq(false), analyses::watch_next_run_at.eq(None::<i64>)))
        .execute(c)
        .await
    })?)
}

/// Claims up to `limit` due watches of library entries, earliest first.
pub async fn claim_due(db: &Db, now: i64, limit: i64) -> Result<Vec<DueWatch>> {
    let mut conn = db.conn().await?;
    let due = analyses::watch_enabled
        .eq(true)
        .and(analyses::saved_at.is_not_null())
        .and(analyses::watch_next_run_at.le(now))
        .and(analyses::watch_claimed_until.le(now))
        .and(analyses::watch_until.is_null().or(analyses::watch_until.gt(now)));
    let ids = crate::claim_rows!(
        &mut conn,
        analyses::table,
        analyses::id,
        due,
        analyses::watch_next_run_at.asc(),
        limit,
        analyses::watch_claimed_until.eq(now + CLAIM_MS)
    )?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut claimed = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let part: Vec<DueWatch> = with_conn!(&mut conn, |c| {
            analyses::table
                .filter(analyses::id.eq_any(chunk))
                .select((
                    analyses::id,
                    analyses::account_id,
                    analyses::ref_,
                    analyses::url,
                    analyses::watch_interval_min,
                    analyses::watch_claimed_until,
                ))
                .load(c)
                .await
        })?;
        claimed.extend(part);
    }
    Ok(claimed)
}

/// Sets a claimed watch's next run and releases it, unless the claim ended meanwhile (the
/// watch was changed or turned off). `ran_at` is set when a run was started (or joined),
/// `error` says why it was skipped.
pub async fn reschedule(
    db: &Db,
    watch: &DueWatch,
    next_run_at: i64,
    ran_at: Option<i64>,
    error: Option<&str>,
) -> Result<()> {
    let mut conn = db.conn().await?;
    let this_claim = analyses::id
        .eq(&watch.id)
        .and(analyses::watch_enabled.eq(true))
        .and(analyses::watch_claimed_until.eq(watch.claimed_until));
    with_conn!(&mut conn, |c| {
        match ran_at {
            Some(at) => {
                diesel::update(analyses::table.filter(this_claim))
                    .set((
                        analyses::watch_next_run_at.eq(next_run_at),
                        analyses::watch_last_error.eq(error),
                        analyses::watch_claimed_until.eq(0),
                        analyses::watch_last_run_at.eq(at),
                    ))
                    .execute(c)
                    .await
            }
            None => {
                diesel::update(analyses::table.filter(this_claim))
                    .set((
                        analyses::watch_next_run_at.eq(next_run_at),
                        analyses::watch_last_error.eq(error),
                        analyses::watch_claimed_until.eq(0),
                    ))
                    .execute(c)
                    .await
            }
        }
    })?;
    Ok(())
}
