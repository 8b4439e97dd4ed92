//! The account's notification channels: a Telegram chat and an HTTPS webhook. The webhook's
//! secret and the chat id are stored sealed ([`cova_auth::sealing`], bound to the account's
//! row); [`Channels`] holds them open.

use crate::schema::channels;
use crate::{Db, Result, StorageError, Tx};
use cova_auth::sealing::Keyring;
use diesel::prelude::*;

#[derive(Debug, Clone, Default, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = channels)]
pub struct Channels {
    pub telegram_chat_id: Option<String>,
    pub telegram_enabled: bool,
    /// Why cova turned the channel off (the receiver refused for good).
    pub telegram_disabled_reason: Option<String>,
    pub webhook_url: Option<String>,
    pub webhook_enabled: bool,
    pub webhook_job_events: bool,
    pub webhook_secret: Option<String>,
    pub webhook_disabled_reason: Option<String>,
}

/// The two channels by name, as deliveries record them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Telegram,
    Webhook,
}

impl Channel {
    pub const fn as_str(self) -> &'static str {
        match self {
            Channel::Telegram => "telegram",
            Channel::Webhook => "webhook",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "telegram" => Some(Channel::Telegram),
            "webhook" => Some(Channel::Webhook),
            _ => None,
        }
    }
}

/// The two sealed columns, and where a sealed value belongs (its column and row).
const CHAT_ID: &str = "channels.telegram_chat_id";
const SECRET: &str = "channels.webhook_secret";

fn context(column: &str, account_id: &str) -> String {
    format!("{column}:{account_id}")
}

fn sealed(keys: &Keyring, column: &str, account_id: &str, value: &Option<String>) -> Result<Option<String>> {
    value
        .as_deref()
        .map(|v| keys.seal(v, &context(column, account_id)))
        .transpose()
        .map_err(|e| StorageError::Database(format!("sealing {column}: {e}")))
}

fn opened(keys: &Keyring, column: &str, account_id: &str, value: Option<String>) -> Result<Option<String>> {
    value
        .map(|v| keys.open(&v, &context(column, account_id)))
        .transpose()
        .map_err(|e| StorageError::Database(format!("{column} of account {account_id} cannot be opened: {e}")))
}

/// The row as stored, with its sealed columns opened.
fn open_row(keys: &Keyring, account_id: &str, mut row: Channels) -> Result<Channels> {
    row.telegram_chat_id = opened(keys, CHAT_ID, account_id, row.telegram_chat_id)?;
    row.webhook_secret = opened(keys, SECRET, account_id, row.webhook_secret)?;
    Ok(row)
}

pub async fn get(db: &Db, account_id: &str) -> Result<Channels> {
    let found = db.conn().await?.tx().first_as::<Channels, _>(channels::table.find(account_id)).await.optional()?;
    found.map_or_else(|| Ok(Channels::default()), |row| open_row(&db.keyring, account_id, row))
}

/// Stores the channels; `new_secret` is used when a webhook has no secret yet (and is then the
/// one returned, once). Turning a channel on clears cova's reason for having turned it off.
pub async fn put(db: &Db, account_id: &str, next: &Channels, new_secret: &str, now: i64) -> Result<(Channels, bool)> {
    let mut t = db.begin().await?;
    let put = put_in(&mut t.tx(), &db.keyring, account_id, next, new_secret, now).await?;
    t.commit().await?;
    Ok(put)
}

/// The body of [`put`]'s transaction.
async fn put_in(
    tx: &mut Tx<'_>,
    keys: &Keyring,
    account_id: &str,
    next: &Channels,
    new_secret: &str,
    now: i64,
) -> Result<(Channels, bool)> {
    let current = tx.first_as::<Channels, _>(channels::table.find(account_id)).await.optional()?;
    let current = current.map_or_else(|| Ok(Channels::default()), |row| open_row(keys, account_id, row))?;
    let secret_created = next.webhook_url.is_some() && current.webhook_secret.is_none();
    let secret = match (&next.webhook_url, current.webhook_secret) {
        (None, _) => None,
        (Some(_), Some(existing)) => Some(existing),
        (Some(_), None) => Some(new_secret.to_owned()),
    };
    let reason = |enabled: bool, old: Option<String>| if enabled { None } else { old };
    let stored = Channels {
        telegram_chat_id: next.telegram_chat_id.clone(),
        telegram_enabled: next.telegram_enabled,
        telegram_disabled_reason: reason(next.telegram_enabled, current.telegram_disabled_reason),
        webhook_url: next.webhook_url.clone(),
        webhook_enabled: next.webhook_enabled,
        webhook_job_events: next.webhook_job_events,
        webhook_secret: secret,
        webhook_disabled_reason: reason(next.webhook_enabled, current.webhook_disabled_reason),
    };
    let chat_id = sealed(keys, CHAT_ID, account_id, &stored.telegram_chat_id)?;
    let secret = sealed(keys, SECRET, account_id, &stored.webhook_secret)?;
    let values = (
        channels::telegram_chat_id.eq(&chat_id),
        channels::telegram_enabled.eq(stored.telegram_enabled),
        channels::telegram_disabled_reason.eq(&stored.telegram_disabled_reason),
        channels::webhook_url.eq(&stored.webhook_url),
        channels::webhook_enabled.eq(stored.webhook_enabled),
        channels::webhook_job_events.eq(stored.webhook_job_events),
        channels::webhook_secret.eq(&secret),
        channels::webhook_disabled_reason.eq(&stored.webhook_disabled_reason),
        channels::updated_at.eq(now),
    );
    tx.execute(
        diesel::insert_into(channels::table)
            .values((channels::account_id.eq(account_id), values))
            .on_conflict(channels::account_id)
            .do_update()
            .set(values),
    )
    .await?;
    Ok((stored, secret_created))
}

/// Replaces the webhook's secret; `None` when no webhook is set.
pub async fn rotate_secret(db: &Db, account_id: &str, secret: &str, now: i64) -> Result<Option<Channels>> {
    let sealed_secret = sealed(&db.keyring, SECRET, account_id, &Some(secret.to_owned()))?;
    let mut t = db.begin().await?;
    let row = rotate_secret_in(&mut t.tx(), account_id, sealed_secret.as_deref(), now).await?;
    t.commit().await?;
    row.map(|row| open_row(&db.keyring, account_id, row)).transpose()
}

/// The body of [`rotate_secret`]'s transaction: the row as stored, when there is a webhook.
async fn rotate_secret_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    sealed_secret: Option<&str>,
    now: i64,
) -> Result<Option<Channels>> {
    let updated = tx
        .execute(
            diesel::update(channels::table.find(account_id))
                .filter(channels::webhook_url.is_not_null())
                .set((channels::webhook_secret.eq(sealed_secret), channels::updated_at.eq(now))),
        )
        .await?;
    if updated == 0 {
        return Ok(None);
    }
    Ok(Some(tx.first_as::<Channels, _>(channels::table.find(account_id)).await?))
}

/// Seals again, with the current key, every stored secret that is not sealed with it (sealed
/// with an older key, or stored before sealing): after a key rotation, so the old key can go.
/// Returns how many accounts' channels were rewritten.
pub async fn reseal_all(db: &Db) -> Result<usize> {
    let accounts = db.conn().await?.tx().load::<String, _>(channels::table.select(channels::account_id)).await?;
    let mut rewritten = 0;
    for account_id in accounts {
        // One transaction per row: a concurrent change of the channels is never overwritten.
        let mut t = db.begin().await?;
        let resealed = reseal_in(&mut t.tx(), &db.keyring, &account_id).await?;
        t.commit().await?;
        rewritten += usize::from(resealed);
    }
    Ok(rewritten)
}

/// The body of [`reseal_all`]'s transaction for one row: true when it was rewritten.
async fn reseal_in(tx: &mut Tx<'_>, keys: &Keyring, account_id: &str) -> Result<bool> {
    let (chat_id, secret) = tx
        .first::<(Option<String>, Option<String>), _>(
            channels::table.find(account_id).select((channels::telegram_chat_id, channels::webhook_secret)),
        )
        .await?;
    let stale = |v: &Option<String>| v.as_deref().is_some_and(|v| !keys.is_current(v));
    if !stale(&chat_id) && !stale(&secret) {
        return Ok(false);
    }
    let chat_id = sealed(keys, CHAT_ID, account_id, &opened(keys, CHAT_ID, account_id, chat_id)?)?;
    let secret = sealed(keys, SECRET, account_id, &opened(keys, SECRET, account_id, secret)?)?;
    tx.execute(
        diesel::update(channels::table.find(account_id))
            .set((channels::telegram_chat_id.eq(&chat_id), channels::webhook_secret.eq(&secret))),
    )
    .await?;
    Ok(true)
}

/// Turns a channel off because its receiver refused for good, saying why.
pub async fn disable(db: &Db, account_id: &str, channel: Channel, reason: &str, now: i64) -> Result<()> {
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    let row = channels::table.find(account_id);
    match channel {
        Channel::Telegram => {
            tx.execute(diesel::update(row).set((
                channels::telegram_enabled.eq(false),
                channels::telegram_disabled_reason.eq(reason),
                channels::updated_at.eq(now),
            )))
            .await?
        }
        Channel::Webhook => {
            tx.execute(diesel::update(row).set((
                channels::webhook_enabled.eq(false),
                channels::webhook_disabled_reason.eq(reason),
                channels::updated_at.eq(now),
            )))
            .await?
        }
    };
    Ok(())
}
