//! Keyword alerts: the comments of a post in the account's library matched against the
//! account's keywords. A post is matched whole when it enters the library (saved from a
//! session, or kept by a token job or a followed creator), then after each collection for the
//! comments that collection found first. A comment alerts once per keyword, whatever path
//! matched it first.

use cova_domain::money;
use cova_domain::text::Matcher;
use cova_messages::{AlertAuthor, AlertComment};
use cova_storage::Db;
use cova_storage::StorageError;
use cova_storage::repo::alerts::{self, NewAlert};
use cova_storage::repo::breakdown::{self, Row};
use cova_storage::repo::{analyses, balances, creators, keywords};

/// Comments read per query when a whole post is matched.
const CHUNK: i64 = 1_000;

/// Which comments of the post's breakdown are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comments {
    /// The post entered the library: every comment it has.
    All,
    /// A collection finished at this time: the comments it saw first.
    FirstSeenAt(i64),
}

/// Matches and records the alerts; returns how many are new (their `keyword.alert` events
/// are in the outbox: the caller wakes its relay). Nothing happens for a post outside the
/// library, an account without keywords or without a pack this month (a paid feature).
pub async fn raise(db: &Db, account_id: &str, r#ref: &str, which: Comments, now: i64) -> Result<usize, StorageError> {
    let list = keywords::list(db, account_id).await?;
    if list.is_empty() || !money::pack_bought(balances::current(db, account_id, now).await?.granted) {
        return Ok(0);
    }
    let Some(analysis) = analyses::get_saved(db, account_id, r#ref).await? else { return Ok(0) };
    let Some(job) = analysis.breakdown_job() else { return Ok(0) };
    let matcher = Matcher::new(&list);
    let mut found = Vec::new();
    match which {
        // The comments a job saw first carry its finish time, also in the breakdown of a
        // later scrape that completed before this one was matched.
        Comments::FirstSeenAt(at) => found_in(&matcher, &breakdown::first_seen_at(db, job, at).await?, &mut found),
        Comments::All => {
            let mut after = -1;
            loop {
                let rows = breakdown::chunk(db, job, after, CHUNK).await?;
                found_in(&matcher, &rows, &mut found);
                match rows.last() {
                    Some(last) if rows.len() as i64 == CHUNK => after = last.position,
                    _ => break,
                }
            }
        }
    }
    // An alert on a post found through a creator names the creator.
    let creator = match &analysis.creator_ref {
        Some(creator) => creators::get(db, account_id, creator).await?.map(|c| c.named()),
        None => None,
    };
    let trace = cova_telemetry::current_trace_json();
    let created = alerts::record(db, account_id, r#ref, creator.as_ref(), &found, &trace, now).await?;
    if !created.is_empty() {
        tracing::info!(account.id = %account_id, r#ref = %r#ref, alerts = created.len(), ?which, "keyword alerts raised");
    }
    Ok(created.len())
}

fn found_in(matcher: &Matcher, rows: &[Row], found: &mut Vec<NewAlert>) {
    for row in rows {
        let Ok(comment) = serde_json::from_str::<serde_json::Value>(&row.body) else { continue };
        let text = comment["text"].as_str().unwrap_or_default();
        for keyword in matcher.find(text) {
            found.push(NewAlert {
                keyword: keyword.to_owned(),
                comment: AlertComment {
                    id: row.comment_id.clone(),
                    text: text.to_owned(),
                    author: AlertAuthor {
                        id: comment["author"]["id"].as_str().unwrap_or_default().to_owned(),
                        handle: comment["author"]["handle"].as_str().map(str::to_owned),
                        name: comment["author"]["name"].as_str().map(str::to_owned),
                    },
                },
            });
        }
    }
}
