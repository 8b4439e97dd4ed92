//! What the in-process queue of the embedded mode holds, kept in the database so that a
//! restart loses nothing: a message per queue, written before it is handed over, rewritten
//! when it is retried, deleted when it is acknowledged.

use crate::schema::queue_journal;
use crate::{Db, Result};
use diesel::prelude::*;

/// One kept message.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = queue_journal)]
pub struct Kept {
    pub queue: String,
    pub id: String,
    pub routing_key: String,
    /// The message body (JSON).
    pub payload: String,
    /// The message's headers, as a JSON object.
    pub headers: String,
    pub attempt: i32,
    pub kept_at: i64,
}

/// Keeps the message (a retried one replaces what was kept of it).
pub async fn put(db: &Db, kept: &Kept) -> Result<()> {
    let values = (
        queue_journal::routing_key.eq(&kept.routing_key),
        queue_journal::payload.eq(&kept.payload),
        queue_journal::headers.eq(&kept.headers),
        queue_journal::attempt.eq(kept.attempt),
        queue_journal::kept_at.eq(kept.kept_at),
    );
    db.conn()
        .await?
        .tx()
        .execute(
            diesel::insert_into(queue_journal::table)
                .values((queue_journal::queue.eq(&kept.queue), queue_journal::id.eq(&kept.id), values))
                .on_conflict((queue_journal::queue, queue_journal::id))
                .do_update()
                .set(values),
        )
        .await?;
    Ok(())
}

pub async fn delete(db: &Db, queue: &str, id: &str) -> Result<()> {
    db.conn().await?.tx().execute(diesel::delete(queue_journal::table.find((queue, id)))).await?;
    Ok(())
}

/// Everything kept, oldest first.
pub async fn load(db: &Db) -> Result<Vec<Kept>> {
    Ok(db.conn().await?.tx().load_as::<Kept, _>(queue_journal::table.order(queue_journal::kept_at.asc())).await?)
}
