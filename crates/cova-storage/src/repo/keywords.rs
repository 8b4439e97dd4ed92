//! The account's keyword list.

use crate::schema::keywords;
use crate::{Db, Result, Tx};
use diesel::prelude::*;

/// The keywords as the customer wrote them, in their order.
pub async fn list(db: &Db, account_id: &str) -> Result<Vec<String>> {
    let query = keywords::table
        .filter(keywords::account_id.eq(account_id))
        .order(keywords::position.asc())
        .select(keywords::keyword);
    Ok(db.conn().await?.tx().load(query).await?)
}

/// Replaces the list with `(keyword, normalised form)` pairs (already deduplicated).
pub async fn replace(db: &Db, account_id: &str, list: &[(String, String)]) -> Result<()> {
    let mut t = db.begin().await?;
    replace_in(&mut t.tx(), account_id, list).await?;
    t.commit().await?;
    Ok(())
}

/// The body of [`replace`]'s transaction.
async fn replace_in(tx: &mut Tx<'_>, account_id: &str, list: &[(String, String)]) -> Result<()> {
    tx.execute(diesel::delete(keywords::table.filter(keywords::account_id.eq(account_id)))).await?;
    for (i, (keyword, normalized)) in list.iter().enumerate() {
        tx.execute(diesel::insert_into(keywords::table).values((
            keywords::account_id.eq(account_id),
            keywords::keyword.eq(keyword),
            keywords::normalized.eq(normalized),
            keywords::position.eq(i as i32),
        )))
        .await?;
    }
    Ok(())
}
