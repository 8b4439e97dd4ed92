//! The delivery log: one row per event and channel, delivered at least once with backoff;
//! notifier replicas claim disjoint due rows.

use super::channels::Channel;
use crate::schema::deliveries;
use crate::{Db, Result, StorageError};
use diesel::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Pending,
    Delivered,
    Failed,
}

impl State {
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Delivered => "delivered",
            State::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [State::Pending, State::Delivered, State::Failed].into_iter().find(|v| v.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: String,
    pub account_id: String,
    /// The event's id: `X-Event-Id` of every attempt.
    pub event_id: String,
    pub event_type: String,
    pub channel: Channel,
    /// The webhook body (JSON) or the Telegram message text.
    pub payload: String,
    pub state: State,
    pub attempts: i32,
    pub next_attempt_at: i64,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub delivered_at: Option<i64>,
    pub created_at: i64,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = deliveries)]
struct Row {
    id: String,
    account_id: String,
    event_id: String,
    event_type: String,
    channel: String,
    payload: String,
    state: String,
    attempts: i32,
    next_attempt_at: i64,
    last_status: Option<i32>,
    last_error: Option<String>,
    delivered_at: Option<i64>,
    created_at: i64,
}

impl TryFrom<Row> for Delivery {
    type Error = StorageError;

    fn try_from(r: Row) -> Result<Self> {
        let bad = |what: &str| StorageError::Database(format!("delivery {} has unknown {what}", r.id));
        Ok(Delivery {
            channel: Channel::parse(&r.channel).ok_or_else(|| bad("channel"))?,
            state: State::parse(&r.state).ok_or_else(|| bad("state"))?,
            id: r.id,
            account_id: r.account_id,
            event_id: r.event_id,
            event_type: r.event_type,
            payload: r.payload,
            attempts: r.attempts,
            next_attempt_at: r.next_attempt_at,
            last_status: r.last_status,
            last_error: r.last_error,
            delivered_at: r.delivered_at,
            created_at: r.created_at,
        })
    }
}

fn typed(rows: Vec<Row>) -> Result<Vec<Delivery>> {
    rows.into_iter().map(Delivery::try_from).collect()
}

pub struct NewDelivery<'a> {
    pub account_id: &'a str,
    pub event_id: &'a str,
    pub event_type: &'a str,
    pub channel: Channel,
    pub payload: &'a str,
}

/// Queues a delivery, once per event and channel (a redelivered event queues nothing new).
pub async fn enqueue(db: &Db, new: NewDelivery<'_>, now: i64) -> Result<bool> {
    let insert = diesel::insert_into(deliveries::table)
        .values((
            deliveries::id.eq(super::new_id()),
            deliveries::account_id.eq(new.account_id),
            deliveries::event_id.eq(new.event_id),
            deliveries::event_type.eq(new.event_type),
            deliveries::channel.eq(new.channel.as_str()),
            deliveries::payload.eq(new.payload),
            deliveries::state.eq(State::Pending.as_str()),
            deliveries::next_attempt_at.eq(now),
            deliveries::created_at.eq(now),
        ))
        .on_conflict_do_nothing();
    let inserted = db.conn().await?.tx().execute(insert).await?;
    Ok(inserted == 1)
}

/// Claims up to `limit` due deliveries, oldest first, for `lease_ms` (longer than one send
/// can take), which keeps other notifiers off them. A claim counts the attempt it is for
/// (`attempts` + 1) before anything is sent, so that every send is counted even when
/// recording its outcome fails and the claim's expiry sends it again; a claim given back
/// unsent ([`release`]) uncounts it.
pub async fn claim_due(db: &Db, now: i64, limit: i64, lease_ms: i64) -> Result<Vec<Delivery>> {
    let mut t = db.begin().await?;
    let due = deliveries::state
        .eq(State::Pending.as_str())
        .and(deliveries::next_attempt_at.le(now))
        .and(deliveries::claimed_until.le(now));
    let ids = crate::claim_rows!(
        &mut t.tx(),
        deliveries::table,
        deliveries::id,
        due,
        deliveries::next_attempt_at.asc(),
        limit,
        (deliveries::claimed_until.eq(now + lease_ms), deliveries::attempts.eq(deliveries::attempts + 1))
    )?;
    t.commit().await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut conn = db.conn().await?;
    let rows = conn.tx().load_as::<Row, _>(deliveries::table.filter(deliveries::id.eq_any(&ids))).await?;
    typed(rows)
}

/// The outcome of one attempt.
pub enum Attempt<'a> {
    Delivered {
        status: i32,
    },
    /// Try again at `next_at`.
    Retry {
        status: Option<i32>,
        error: &'a str,
        next_at: i64,
    },
    /// Given up for good.
    Failed {
        status: Option<i32>,
        error: &'a str,
    },
}

pub async fn record(db: &Db, id: &str, attempt: Attempt<'_>, now: i64) -> Result<()> {
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    let row = deliveries::table.filter(deliveries::id.eq(id.to_owned()));
    match attempt {
        Attempt::Delivered { status } => {
            tx.execute(diesel::update(row).set((
                deliveries::state.eq(State::Delivered.as_str()),
                deliveries::last_status.eq(status),
                deliveries::last_error.eq(None::<String>),
                deliveries::delivered_at.eq(now),
                deliveries::claimed_until.eq(0),
            )))
            .await?
        }
        Attempt::Retry { status, error, next_at } => {
            tx.execute(diesel::update(row).set((
                deliveries::last_status.eq(status),
                deliveries::last_error.eq(error),
                deliveries::next_attempt_at.eq(next_at),
                deliveries::claimed_until.eq(0),
            )))
            .await?
        }
        Attempt::Failed { status, error } => {
            tx.execute(diesel::update(row).set((
                deliveries::state.eq(State::Failed.as_str()),
                deliveries::last_status.eq(status),
                deliveries::last_error.eq(error),
                deliveries::claimed_until.eq(0),
            )))
            .await?
        }
    };
    Ok(())
}

/// The account's delivery log, newest first; `before` is the (created_at, id) of the last
/// entry of the previous page.
pub async fn list(db: &Db, account_id: &str, before: Option<(i64, String)>, limit: i64) -> Result<Vec<Delivery>> {
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    let of_account = deliveries::table
        .filter(deliveries::account_id.eq(account_id))
        .order((deliveries::created_at.desc(), deliveries::id.desc()))
        .limit(limit);
    let rows = match &before {
        Some((at, id)) => {
            let older = deliveries::created_at.lt(*at).or(deliveries::created_at.eq(*at).and(deliveries::id.lt(id)));
            tx.load_as::<Row, _>(of_account.filter(older)).await?
        }
        None => tx.load_as::<Row, _>(of_account).await?,
    };
    typed(rows)
}

/// Sends a delivery again from its first attempt; `None` when the account has no such delivery.
pub async fn replay(db: &Db, account_id: &str, id: &str, now: i64) -> Result<Option<Delivery>> {
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    let delivery = deliveries::table.filter(deliveries::id.eq(id)).filter(deliveries::account_id.eq(account_id));
    // A pending delivery is on its way already (maybe being sent): left as it is.
    tx.execute(diesel::update(delivery).filter(deliveries::state.ne(State::Pending.as_str())).set((
        deliveries::state.eq(State::Pending.as_str()),
        deliveries::attempts.eq(0),
        deliveries::next_attempt_at.eq(now),
        deliveries::claimed_until.eq(0),
        deliveries::delivered_at.eq(None::<i64>),
    )))
    .await?;
    let rows = tx.load_as::<Row, _>(delivery).await?;
    Ok(typed(rows)?.into_iter().next())
}

/// Gives claimed deliveries back unsent (their receiver was busy): the attempts their claims
/// counted are uncounted.
pub async fn release(db: &Db, ids: &[String]) -> Result<()> {
    let give_back = diesel::update(deliveries::table.filter(deliveries::id.eq_any(ids)))
        .set((deliveries::claimed_until.eq(0), deliveries::attempts.eq(deliveries::attempts - 1)));
    db.conn().await?.tx().execute(give_back).await?;
    Ok(())
}
