//! The transactional outbox: messages written with the state they announce, published by a
//! relay afterwards, so no job waits forever because a publish was lost.
//!
//! Relays of several replicas share the table: each claims a batch for a while (on PostgreSQL
//! with `FOR UPDATE SKIP LOCKED`, so two relays never claim the same row), publishes it, and
//! marks each row sent. A row that fails is retried later with backoff; after
//! [`MAX_ATTEMPTS`] failures it is parked for an operator and the relay goes on with the rest.

use crate::schema::outbox;
use crate::{Db, Result};
use diesel::prelude::*;

/// Failures of one row before it is parked.
pub const MAX_ATTEMPTS: i32 = 10;
/// How long a claim keeps other relays off a batch (a relay that dies mid-batch frees it then).
pub const CLAIM_MS: i64 = 30_000;

/// Queues one message (its destination and routing key come from the message), in the caller's
/// transaction.
pub async fn queue(tx: &mut crate::Tx<'_>, message: &cova_messages::Outgoing, headers: &str, now: i64) -> Result<()> {
    tx.execute(diesel::insert_into(outbox::table).values(NewMessage::of(message, headers, now))).await?;
    Ok(())
}

/// One queued message: one row of an insert, alone or among many.
#[derive(Insertable)]
#[diesel(table_name = outbox)]
pub(crate) struct NewMessage<'a> {
    id: String,
    destination: &'a str,
    routing_key: &'a str,
    payload: &'a str,
    headers: &'a str,
    created_at: i64,
}

impl<'a> NewMessage<'a> {
    pub(crate) fn of(message: &'a cova_messages::Outgoing, headers: &'a str, now: i64) -> Self {
        Self {
            id: crate::repo::new_id(),
            destination: message.destination.as_str(),
            routing_key: message.routing_key,
            payload: &message.payload,
            headers,
            created_at: now,
        }
    }
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = outbox)]
pub struct OutboxMessage {
    pub id: String,
    pub destination: String,
    pub routing_key: String,
    pub payload: String,
    /// JSON object of string headers (W3C trace context).
    pub headers: String,
    pub created_at: i64,
    pub sent_at: Option<i64>,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub next_attempt_at: i64,
    pub claimed_until: i64,
    pub parked_at: Option<i64>,
}

/// Queues a message outside any other write (e.g. a command re-issued at start).
pub async fn insert(db: &Db, message: &cova_messages::Outgoing, headers: &str, now: i64) -> Result<()> {
    queue(&mut db.conn().await?.tx(), message, headers, now).await
}

/// Claims up to `limit` due rows, oldest first, for [`CLAIM_MS`]: unsent, not parked, not
/// waiting for a retry and not claimed by another relay.
pub async fn claim(db: &Db, limit: i64, now: i64) -> Result<Vec<OutboxMessage>> {
    let mut t = db.begin().await?;
    let due = outbox::sent_at
        .is_null()
        .and(outbox::parked_at.is_null())
        .and(outbox::next_attempt_at.le(now))
        .and(outbox::claimed_until.le(now));
    let ids = crate::claim_rows!(
        &mut t.tx(),
        outbox::table,
        outbox::id,
        due,
        outbox::created_at.asc(),
        limit,
        outbox::claimed_until.eq(now + CLAIM_MS)
    )?;
    t.commit().await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut conn = db.conn().await?;
    let claimed = outbox::table.filter(outbox::id.eq_any(&ids)).order(outbox::created_at.asc());
    Ok(conn.tx().load_as::<OutboxMessage, _>(claimed).await?)
}

pub async fn mark_sent(db: &Db, id: &str, now: i64) -> Result<()> {
    let sent = diesel::update(outbox::table.find(id)).set((outbox::sent_at.eq(now), outbox::claimed_until.eq(0)));
    db.conn().await?.tx().execute(sent).await?;
    Ok(())
}

/// Gives a claimed row back without counting a failure (the broker was down, not the row).
pub async fn release(db: &Db, ids: &[String]) -> Result<()> {
    let give_back = diesel::update(outbox::table.filter(outbox::id.eq_any(ids))).set(outbox::claimed_until.eq(0));
    db.conn().await?.tx().execute(give_back).await?;
    Ok(())
}

/// Records a failed publish of this row: tried again after `retry_in_ms`, or parked once it
/// has failed [`MAX_ATTEMPTS`] times. Returns true when it was parked.
pub async fn record_failure(db: &Db, id: &str, error: &str, retry_in_ms: i64, now: i64) -> Result<bool> {
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    let error: String = error.chars().take(500).collect();
    let attempts = tx
        .get_result::<i32, _>(
            diesel::update(outbox::table.find(id))
                .set((
                    outbox::attempts.eq(outbox::attempts + 1),
                    outbox::last_error.eq(&error),
                    outbox::next_attempt_at.eq(now + retry_in_ms),
                    outbox::claimed_until.eq(0),
                ))
                .returning(outbox::attempts),
        )
        .await?;
    if attempts >= MAX_ATTEMPTS {
        tx.execute(diesel::update(outbox::table.find(id)).set(outbox::parked_at.eq(now))).await?;
        return Ok(true);
    }
    Ok(false)
}

/// Parked rows, oldest first (for operators).
pub async fn parked(db: &Db, limit: i64) -> Result<Vec<OutboxMessage>> {
    let query = outbox::table.filter(outbox::parked_at.is_not_null()).order(outbox::created_at.asc()).limit(limit);
    Ok(db.conn().await?.tx().load_as::<OutboxMessage, _>(query).await?)
}

/// Rows waiting to be published (not parked): the relay's backlog.
pub async fn backlog(db: &Db) -> Result<i64> {
    let query = outbox::table.filter(outbox::sent_at.is_null()).filter(outbox::parked_at.is_null()).count();
    Ok(db.conn().await?.tx().get_result::<i64, _>(query).await?)
}

/// Sent messages older than `before` are deleted (the outbox is not an archive).
pub async fn prune(db: &Db, before: i64) -> Result<usize> {
    Ok(db.conn().await?.tx().execute(diesel::delete(outbox::table.filter(outbox::sent_at.lt(before)))).await?)
}
