//! The account's keyword list.

use crate::schema::keywords;
use crate::{Db, Result, in_transaction, with_conn};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

/// The keywords as the customer wrote them, in their order.
pub async fn list(db: &Db, account_id: &str) -> Result<Vec<String>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        keywords::table
            .filter(keywords::account_id.eq(account_id))
            .order(keywords::position.asc())
            .select(keywords::keyword)
            .load(c)
            .await
    })?)
}

/// Replaces the list with `(keyword, normalised form)` pairs (already deduplicated).
pub async fn replace(db: &Db, account_id: &str, list: &[(String, String)]) -> Result<()> {
    let mut conn = db.conn().await?;
    in_transaction!(&mut conn, |c| {
        diesel::delete(keywords::table.filter(keywords::account_id.eq(account_id))).execute(c).await?;
        for (i, (keyword, normalized)) in list.iter().enumerate() {
            diesel::insert_into(keywords::table)
                .values((
                    keywords::account_id.eq(account_id),
                    keywords::keyword.eq(keyword),
                    keywords::normalized.eq(normalized),
                    keywords::position.eq(i as i32),
                ))
                .execute(c)
                .await?;
        }
        Ok(())
    })
}
