//! Spike alerts: the account's settings (and a post's or creator's own), the alerts raised,
//! numbered with the keyword alerts (`accounts.alert_seq`) so that each list polls after the
//! last number seen, and the `spike.alert` event queued with each alert in one transaction.

use crate::schema::{accounts, spike_alerts, spike_settings};
use crate::{Db, Result, Tx};
use cova_domain::spikes::{self, Kind, Sensitivity, Settings};
use cova_messages::{Outgoing, SpikeAlertEvent};
use diesel::prelude::*;

/// The subject of the account's own settings.
pub const ACCOUNT: &str = "";

type SettingsRow = (bool, String, Option<i64>, i64);

fn settings_of((enabled, sensitivity, min_comments, cooldown_min): SettingsRow) -> Settings {
    Settings {
        enabled,
        sensitivity: Sensitivity::parse(&sensitivity).unwrap_or(Sensitivity::Balanced),
        min_comments: min_comments.and_then(|m| u64::try_from(m).ok()),
        cooldown_min: u32::try_from(cooldown_min).unwrap_or(u32::MAX),
    }
}

/// The settings stored for `subject` (the account's: [`ACCOUNT`]), if any.
pub async fn stored(db: &Db, account_id: &str, subject: &str) -> Result<Option<Settings>> {
    let query = spike_settings::table.find((account_id, subject)).select((
        spike_settings::enabled,
        spike_settings::sensitivity,
        spike_settings::min_comments,
        spike_settings::cooldown_min,
    ));
    let row = db.conn().await?.tx().first::<SettingsRow, _>(query).await.optional()?;
    Ok(row.map(settings_of))
}

/// What applies to a post: its own settings, else its creator's, else the account's, else the
/// defaults.
pub async fn effective(db: &Db, account_id: &str, r#ref: &str, creator: Option<&str>) -> Result<Settings> {
    for subject in [Some(r#ref), creator, Some(ACCOUNT)].into_iter().flatten() {
        if let Some(s) = stored(db, account_id, subject).await? {
            return Ok(s);
        }
    }
    Ok(Settings::default())
}

/// Stores the settings of `subject`.
pub async fn put(db: &Db, account_id: &str, subject: &str, s: &Settings, now: i64) -> Result<()> {
    let values = (
        spike_settings::enabled.eq(s.enabled),
        spike_settings::sensitivity.eq(s.sensitivity.as_str()),
        spike_settings::min_comments.eq(s.min_comments.and_then(|m| i64::try_from(m).ok())),
        spike_settings::cooldown_min.eq(i64::from(s.cooldown_min)),
        spike_settings::updated_at.eq(now),
    );
    let upsert = diesel::insert_into(spike_settings::table)
        .values((spike_settings::account_id.eq(account_id), spike_settings::subject.eq(subject), values))
        .on_conflict((spike_settings::account_id, spike_settings::subject))
        .do_update()
        .set(values);
    db.conn().await?.tx().execute(upsert).await?;
    Ok(())
}

/// Removes the settings of a post or creator (it follows the account's again); true when
/// there were some.
pub async fn remove(db: &Db, account_id: &str, subject: &str) -> Result<bool> {
    let n = db.conn().await?.tx().execute(diesel::delete(spike_settings::table.find((account_id, subject)))).await?;
    Ok(n > 0)
}

/// When the last alert of `kind` on the post ended (its window's end).
pub async fn last_end(db: &Db, account_id: &str, r#ref: &str, kind: Kind) -> Result<Option<i64>> {
    let query = spike_alerts::table
        .filter(spike_alerts::account_id.eq(account_id))
        .filter(spike_alerts::ref_.eq(r#ref))
        .filter(spike_alerts::kind.eq(kind.as_str()))
        .select(diesel::dsl::max(spike_alerts::window_end));
    Ok(db.conn().await?.tx().first::<Option<i64>, _>(query).await?)
}

/// A recorded alert: its number and the event it was announced with (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = spike_alerts)]
pub struct Alert {
    pub id: String,
    pub seq: i64,
    pub kind: String,
    #[diesel(column_name = ref_)]
    pub r#ref: String,
    pub window_start: i64,
    pub window_end: i64,
    pub body: String,
    pub created_at: i64,
}

/// Records the alert and queues its `spike.alert` event, in one transaction, unless it is the
/// same spike as the last alert of its kind on the post (`cova_domain::spikes::cooling`, asked
/// again under the account row's lock, so that two concurrent checks of one spike, or a job's
/// completion delivered twice, record one alert). Returns the alert when it was recorded.
pub async fn record(
    db: &Db,
    event: &SpikeAlertEvent,
    kind: Kind,
    (window_start, window_end): (i64, i64),
    cooldown_min: u32,
    trace: &str,
    now: i64,
) -> Result<Option<Alert>> {
    let mut t = db.begin().await?;
    let alert = record_in(&mut t.tx(), event, kind, (window_start, window_end), cooldown_min, trace, now).await?;
    t.commit().await?;
    Ok(alert)
}

/// The body of [`record`]'s transaction.
async fn record_in(
    tx: &mut Tx<'_>,
    event: &SpikeAlertEvent,
    kind: Kind,
    (window_start, window_end): (i64, i64),
    cooldown_min: u32,
    trace: &str,
    now: i64,
) -> Result<Option<Alert>> {
    let body = serde_json::to_string(event).unwrap_or_default();
    // Locks the account's row until commit: alerts are numbered in commit order, and two
    // checks of one spike are told apart under the lock.
    let seq: i64 = tx
        .get_result(
            diesel::update(accounts::table.find(&event.account_id))
                .set(accounts::alert_seq.eq(accounts::alert_seq + 1))
                .returning(accounts::alert_seq),
        )
        .await?;
    let last: Option<i64> = tx
        .first(
            spike_alerts::table
                .filter(spike_alerts::account_id.eq(&event.account_id))
                .filter(spike_alerts::ref_.eq(&event.r#ref))
                .filter(spike_alerts::kind.eq(kind.as_str()))
                .select(diesel::dsl::max(spike_alerts::window_end)),
        )
        .await?;
    if spikes::cooling(kind, last, window_end, cooldown_min) {
        tx.execute(diesel::update(accounts::table.find(&event.account_id)).set(accounts::alert_seq.eq(seq - 1)))
            .await?;
        return Ok(None);
    }
    tx.execute(diesel::insert_into(spike_alerts::table).values((
        spike_alerts::id.eq(&event.id),
        spike_alerts::account_id.eq(&event.account_id),
        spike_alerts::seq.eq(seq),
        spike_alerts::kind.eq(&event.kind),
        spike_alerts::ref_.eq(&event.r#ref),
        spike_alerts::window_start.eq(window_start),
        spike_alerts::window_end.eq(window_end),
        spike_alerts::body.eq(&body),
        spike_alerts::created_at.eq(now),
    )))
    .await?;
    crate::repo::outbox::queue(tx, &Outgoing::event(event), trace, now).await?;
    Ok(Some(Alert {
        id: event.id.clone(),
        seq,
        kind: event.kind.clone(),
        r#ref: event.r#ref.clone(),
        window_start,
        window_end,
        body,
        created_at: now,
    }))
}

/// The account's spike alerts numbered after `since`, oldest first; of one post when `ref` is
/// given.
pub async fn after(db: &Db, account_id: &str, r#ref: Option<&str>, since: i64, limit: i64) -> Result<Vec<Alert>> {
    let numbered = spike_alerts::table
        .filter(spike_alerts::account_id.eq(account_id))
        .filter(spike_alerts::seq.gt(since))
        .order(spike_alerts::seq.asc())
        .limit(limit);
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    Ok(match r#ref {
        Some(r) => tx.load_as::<Alert, _>(numbered.filter(spike_alerts::ref_.eq(r))).await?,
        None => tx.load_as::<Alert, _>(numbered).await?,
    })
}
