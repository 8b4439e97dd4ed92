//! Keyword alerts: one per (account, post, comment, keyword), numbered per account in commit
//! order so that polling after the last number seen never misses or repeats one.

use crate::schema::{accounts, keyword_alerts};
use crate::{Db, Result, Tx};
use cova_messages::{AlertComment, AlertCreator, AlertEventType, KeywordAlertEvent, Outgoing};
use diesel::prelude::*;

/// A match to record.
#[derive(Debug, Clone)]
pub struct NewAlert {
    pub keyword: String,
    pub comment: AlertComment,
}

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = keyword_alerts)]
pub struct Alert {
    pub id: String,
    pub account_id: String,
    pub seq: i64,
    pub keyword: String,
    #[diesel(column_name = ref_)]
    pub r#ref: String,
    pub comment_id: String,
    /// `{id, text, author}` of the comment (JSON).
    pub comment: String,
    pub created_at: i64,
    /// `{ref, handle, name}` of the followed creator whose new post raised it (JSON).
    pub creator: Option<String>,
}

/// Records the alerts that are new (a comment already alerted for a keyword never alerts
/// again) and queues a `keyword.alert` event for each, in one transaction. Returns the new ones.
pub async fn record(
    db: &Db,
    account_id: &str,
    r#ref: &str,
    creator: Option<&AlertCreator>,
    matches: &[NewAlert],
    trace: &str,
    now: i64,
) -> Result<Vec<Alert>> {
    if matches.is_empty() {
        return Ok(Vec::new());
    }
    let mut t = db.begin().await?;
    let created = record_in(&mut t.tx(), account_id, r#ref, creator, matches, trace, now).await?;
    t.commit().await?;
    Ok(created)
}

/// The body of [`record`]'s transaction.
async fn record_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    r#ref: &str,
    creator: Option<&AlertCreator>,
    matches: &[NewAlert],
    trace: &str,
    now: i64,
) -> Result<Vec<Alert>> {
    // Locks the account's row until commit: alerts are numbered in commit order.
    let mut seq: i64 = tx
        .get_result(
            diesel::update(accounts::table.find(account_id))
                .set(accounts::alert_seq.eq(accounts::alert_seq))
                .returning(accounts::alert_seq),
        )
        .await?;
    let mut created = Vec::new();
    let creator_json = creator.and_then(|c| serde_json::to_string(c).ok());
    for m in matches {
        let id = super::new_id();
        let comment = serde_json::to_string(&m.comment).unwrap_or_default();
        let inserted = tx
            .execute(
                diesel::insert_into(keyword_alerts::table)
                    .values((
                        keyword_alerts::id.eq(&id),
                        keyword_alerts::account_id.eq(account_id),
                        keyword_alerts::seq.eq(seq + 1),
                        keyword_alerts::keyword.eq(&m.keyword),
                        keyword_alerts::ref_.eq(r#ref),
                        keyword_alerts::comment_id.eq(&m.comment.id),
                        keyword_alerts::comment.eq(&comment),
                        keyword_alerts::created_at.eq(now),
                        keyword_alerts::creator.eq(&creator_json),
                    ))
                    .on_conflict_do_nothing(),
            )
            .await?;
        if inserted == 0 {
            continue;
        }
        seq += 1;
        let event = KeywordAlertEvent {
            event_type: AlertEventType::KeywordAlert,
            id: id.clone(),
            account_id: account_id.to_owned(),
            keyword: m.keyword.clone(),
            r#ref: r#ref.to_owned(),
            comment: m.comment.clone(),
            created_at: cova_domain::time::rfc3339(now),
            creator: creator.cloned(),
        };
        crate::repo::outbox::queue(tx, &Outgoing::event(&event), trace, now).await?;
        created.push(Alert {
            id,
            account_id: account_id.to_owned(),
            seq,
            keyword: m.keyword.clone(),
            r#ref: r#ref.to_owned(),
            comment_id: m.comment.id.clone(),
            comment,
            created_at: now,
            creator: creator_json.clone(),
        });
    }
    tx.execute(diesel::update(accounts::table.find(account_id)).set(accounts::alert_seq.eq(seq))).await?;
    Ok(created)
}

/// The account's alerts numbered after `since`, oldest first.
pub async fn after(db: &Db, account_id: &str, since: i64, limit: i64) -> Result<Vec<Alert>> {
    let query = keyword_alerts::table
        .filter(keyword_alerts::account_id.eq(account_id))
        .filter(keyword_alerts::seq.gt(since))
        .order(keyword_alerts::seq.asc())
        .limit(limit);
    Ok(db.conn().await?.tx().load_as::<Alert, _>(query).await?)
}
