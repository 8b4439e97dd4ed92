//! The days comments are stored under. A scrape attempt stores its comments under the UTC day it
//! started (`jobs.comments_day`, copied to `job_comments` and to the analysis it becomes).
//!
//! On PostgreSQL each day is a partition of `job_comments` (`job_comments_d<day>`), made before
//! the first row needs it and dropped whole once no breakdown and no running job uses it: a day
//! expires at the cost of a catalog change, whatever its size, and the table never holds more
//! than the days still in use. SQLite keeps one plain table: its purge deletes rows
//! ([`crate::repo::analyses::purge_expired`]).

use crate::schema::job_comments;
use crate::{Db, DbConn, Result};
use diesel::sql_types::{Array, BigInt, Bool, Text};
use diesel::{BoolExpressionMethods, ExpressionMethods};
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};

pub use cova_domain::time::DAY_MS;

/// Days younger than this many days before today are never dropped, used or not: a process
/// whose clock lags a little may still start a scrape under yesterday.
pub const NEWEST_DROPPABLE: i64 = 2;

/// How often the janitor looks at the days ([`drop_unused`]): they change once a day.
pub const LOOK_EVERY_MS: i64 = 60_000;

/// Keeps two janitors from detaching the same partition at once (`pg_try_advisory_lock`).
const DROP_LOCK: i64 = 0x636f_7661_6461_7973; // "covadays"

/// The UTC day (days since the epoch) of a time in milliseconds.
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// The rows a scrape stored: its job and the day it stored them under, so that PostgreSQL plans
/// and reads that day's partition alone.
pub(crate) fn rows_of(
    job_id: &str,
    day: i64,
) -> diesel::dsl::And<diesel::dsl::Eq<job_comments::job_id, &str>, diesel::dsl::Eq<job_comments::comments_day, i64>> {
    job_comments::job_id.eq(job_id).and(job_comments::comments_day.eq(day))
}

/// Makes sure the partition of `day` exists (PostgreSQL; nothing to do on SQLite). Each process
/// remembers the days it made sure of, so a day costs it one round trip.
pub async fn ensure(db: &Db, day: i64) -> Result<()> {
    if !db.is_postgres() || db.comment_days.known(day) {
        return Ok(());
    }
    let DbConn::Pg(mut conn) = db.conn().await? else {
        return Ok(());
    };
    diesel::sql_query("SELECT cova_comments_day($1)").bind::<BigInt, _>(day).execute(&mut *conn).await?;
    db.comment_days.remember(day);
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct Partition {
    #[diesel(sql_type = Text)]
    name: String,
    /// A detach that was interrupted (its second step is still to run).
    #[diesel(sql_type = Bool)]
    pending: bool,
    /// Detached, but the drop that follows did not happen.
    #[diesel(sql_type = Bool)]
    detached: bool,
}

#[derive(diesel::QueryableByName)]
struct Locked {
    #[diesel(sql_type = Bool)]
    locked: bool,
}

#[derive(diesel::QueryableByName)]
struct Day {
    #[diesel(sql_type = BigInt)]
    day: i64,
}

/// The janitor's step on PostgreSQL: drops the partitions of days at least
/// [`NEWEST_DROPPABLE`] days old that no breakdown (`analyses.last_job_id`) and no queued or
/// running job uses, and makes today's and tomorrow's. Returns the days dropped, oldest first;
/// none when another replica is at it, and always none on SQLite.
///
/// The detach is `CONCURRENTLY`: it waits for the queries already reading the table instead of
/// locking writers out, and one that was interrupted is finished on the next call.
pub async fn drop_unused(db: &Db, now: i64) -> Result<Vec<i64>> {
    if !db.is_postgres() {
        return Ok(Vec::new());
    }
    let today = day_of(now);
    for day in [today, today + 1] {
        ensure(db, day).await?;
    }
    let DbConn::Pg(mut conn) = db.conn().await? else {
        return Ok(Vec::new());
    };
    let locked = diesel::sql_query("SELECT pg_try_advisory_lock($1) AS locked")
        .bind::<BigInt, _>(DROP_LOCK)
        .get_result::<Locked>(&mut *conn)
        .await?
        .locked;
    if !locked {
        return Ok(Vec::new());
    }
    let dropped = drop_unused_locked(&mut conn, today - NEWEST_DROPPABLE).await;
    if conn.batch_execute(&format!("SELECT pg_advisory_unlock({DROP_LOCK})")).await.is_err() {
        // A session lock must not go back to the pool with its connection: closed instead.
        conn.close();
    }
    for day in dropped.iter().flatten() {
        db.comment_days.forget(*day);
    }
    dropped
}

async fn drop_unused_locked(c: &mut AsyncPgConnection, newest: i64) -> Result<Vec<i64>> {
    // The days' tables in this schema, attached or not: a table made by `cova_comments_day` is
    // attached in the same statement, so one that is not was detached here before.
    let partitions: Vec<Partition> = diesel::sql_query(
        "SELECT c.relname::TEXT AS name, COALESCE(i.inhdetachpending, FALSE) AS pending, \
                i.inhrelid IS NULL AS detached \
         FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid \
         WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace \
           AND c.relname LIKE 'job\\_comments\\_d%'",
    )
    .load(c)
    .await?;
    let mut days: Vec<(i64, Partition)> = partitions
        .into_iter()
        .filter_map(|p| Some((p.name.strip_prefix("job_comments_d")?.parse().ok()?, p)))
        .filter(|(day, _)| *day <= newest)
        .collect();
    days.sort_by_key(|(day, _)| *day);
    // Of the attached days, those still used, in one statement (two index probes a day).
    let attached: Vec<i64> = days.iter().filter(|(_, p)| !p.pending && !p.detached).map(|(day, _)| *day).collect();
    let used: std::collections::HashSet<i64> = diesel::sql_query(
        "SELECT d AS day FROM unnest($1) AS d \
         WHERE EXISTS (SELECT 1 FROM analyses WHERE comments_day = d AND last_job_id IS NOT NULL) \
            OR EXISTS (SELECT 1 FROM jobs WHERE comments_day = d AND status IN ('queued', 'in_progress'))",
    )
    .bind::<Array<BigInt>, _>(&attached)
    .load::<Day>(c)
    .await?
    .into_iter()
    .map(|d| d.day)
    .collect();
    let mut dropped = Vec::new();
    for (day, partition) in days.into_iter().filter(|(day, _)| !used.contains(day)) {
        // Nothing can start using the day again: a scrape attempt takes the day it starts on,
        // and an analysis only ever moves to a newer scrape.
        let name = &partition.name;
        let detach = match (partition.detached, partition.pending) {
            (true, _) => None,
            (false, true) => Some("FINALIZE"),
            (false, false) => Some("CONCURRENTLY"),
        };
        if let Some(step) = detach {
            c.batch_execute(&format!("ALTER TABLE job_comments DETACH PARTITION \"{name}\" {step}")).await?;
        }
        c.batch_execute(&format!("DROP TABLE \"{name}\"")).await?;
        dropped.push(day);
    }
    Ok(dropped)
}

/// The days this process has made sure of ([`ensure`]), shared by the clones of a [`Db`].
#[derive(Clone, Default)]
pub(crate) struct KnownDays(std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<i64>>>);

impl KnownDays {
    fn known(&self, day: i64) -> bool {
        self.0.lock().is_ok_and(|days| days.contains(&day))
    }

    fn forget(&self, day: i64) {
        if let Ok(mut days) = self.0.lock() {
            days.remove(&day);
        }
    }

    fn remember(&self, day: i64) {
        if let Ok(mut days) = self.0.lock() {
            // Only the newest few matter; the set stays small in a process that runs for years.
            while days.len() >= 8 {
                days.pop_first();
            }
            days.insert(day);
        }
    }
}
