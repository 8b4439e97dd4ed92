//! The transactional outbox: messages written with the state they announce, published by a
//! relay afterwards, so no job waits forever because a publish was lost.

use crate::schema::outbox;
use crate::{Db, Result, with_conn};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// A command for a worker role (routing key = role).
    Command,
    /// An event on the events exchange (routing key = event type).
    Event,
}

impl Destination {
    pub fn as_str(self) -> &'static str {
        match self {
            Destination::Command => "command",
            Destination::Event => "event",
        }
    }
}

/// Inside a transaction: queues one message. Evaluates to `()` (errors propagate with `?`).
macro_rules! insert_in {
    ($c:ident, $destination:expr, $routing_key:expr, $payload:expr, $headers:expr, $now:expr) => {{
        use $crate::schema::outbox;
        diesel::insert_into(outbox::table)
            .values((
                outbox::id.eq($crate::repo::new_id()),
                outbox::destination.eq($destination.as_str()),
                outbox::routing_key.eq($routing_key),
                outbox::payload.eq($payload),
                outbox::headers.eq($headers),
                outbox::created_at.eq($now),
            ))
            .execute($c)
            .await?;
    }};
}
pub(crate) use insert_in;

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
}

/// The oldest unsent messages.
pub async fn pending(db: &Db, limit: i64) -> Result<Vec<OutboxMessage>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        outbox::table
            .filter(outbox::sent_at.is_null())
            .order(outbox::created_at.asc())
            .limit(limit)
            .select(OutboxMessage::as_select())
            .load(c)
            .await
    })?)
}

pub async fn mark_sent(db: &Db, id: &str, now: i64) -> Result<()> {
    let mut conn = db.conn().await?;
    with_conn!(&mut conn, |c| diesel::update(outbox::table.find(id)).set(outbox::sent_at.eq(now)).execute(c).await)?;
    Ok(())
}

/// Sent messages older than `before` are deleted (the outbox is not an archive).
pub async fn prune(db: &Db, before: i64) -> Result<usize> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        diesel::delete(outbox::table.filter(outbox::sent_at.lt(before))).execute(c).await
    })?)
}
