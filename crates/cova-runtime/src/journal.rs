//! The in-process queue's journal in the database (see [`cova_queue::Journal`]).

use cova_queue::{Journal, Message, QueueError};
use cova_storage::Db;
use cova_storage::repo::queue_journal::{self, Kept};
use futures::future::BoxFuture;

pub(crate) struct DbJournal {
    db: Db,
}

impl DbJournal {
    pub(crate) fn new(db: Db) -> Self {
        Self { db }
    }
}

fn unavailable(e: cova_storage::StorageError) -> QueueError {
    QueueError::Unavailable(format!("the queue's journal: {e}"))
}

impl Journal for DbJournal {
    fn put<'a>(&'a self, queue: &'a str, message: &'a Message) -> BoxFuture<'a, cova_queue::Result<()>> {
        Box::pin(async move {
            let kept = Kept {
                queue: queue.to_owned(),
                id: message.id.clone(),
                routing_key: message.routing_key.clone(),
                // Messages are JSON, always UTF-8.
                payload: String::from_utf8_lossy(&message.payload).into_owned(),
                headers: serde_json::to_string(&message.headers).unwrap_or_else(|_| "{}".into()),
                attempt: i32::try_from(message.attempt).unwrap_or(i32::MAX),
                kept_at: cova_domain::time::now_ms(),
            };
            queue_journal::put(&self.db, &kept).await.map_err(unavailable)
        })
    }

    fn delete<'a>(&'a self, queue: &'a str, id: &'a str) -> BoxFuture<'a, cova_queue::Result<()>> {
        Box::pin(async move { queue_journal::delete(&self.db, queue, id).await.map_err(unavailable) })
    }

    fn load(&self) -> BoxFuture<'_, cova_queue::Result<Vec<(String, Message)>>> {
        Box::pin(async move {
            let kept = queue_journal::load(&self.db).await.map_err(unavailable)?;
            Ok(kept
                .into_iter()
                .map(|k| {
                    let message = Message {
                        id: k.id,
                        routing_key: k.routing_key,
                        payload: k.payload.into_bytes(),
                        headers: serde_json::from_str(&k.headers).unwrap_or_default(),
                        attempt: u32::try_from(k.attempt).unwrap_or(1),
                    };
                    (k.queue, message)
                })
                .collect())
        })
    }
}
