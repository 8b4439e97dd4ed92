//! Single-use links sent by e-mail: confirm the address, reset the password. Only the SHA-256
//! of the link's token is stored; using a link is one conditional UPDATE, so it works once, and
//! it voids the account's other outstanding links of the same purpose in the same transaction
//! (an older reset link must not outlive the one that was used). A password change voids every
//! link of the account ([`void_all_in`]).

use crate::schema::email_links;
use crate::{Db, Result, Tx};
use cova_auth::secret;
use diesel::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Confirm,
    Reset,
}

impl Purpose {
    pub const fn as_str(self) -> &'static str {
        match self {
            Purpose::Confirm => "confirm",
            Purpose::Reset => "reset",
        }
    }
}

/// A new link token for the account, valid `ttl_ms`; the value goes into the e-mail only.
pub async fn issue(db: &Db, account_id: &str, purpose: Purpose, ttl_ms: i64, now: i64) -> Result<String> {
    let token = secret::generate();
    let link = diesel::insert_into(email_links::table).values((
        email_links::token_hash.eq(&token.hash),
        email_links::account_id.eq(account_id),
        email_links::purpose.eq(purpose.as_str()),
        email_links::created_at.eq(now),
        email_links::expires_at.eq(now + ttl_ms),
    ));
    db.conn().await?.tx().execute(link).await?;
    Ok(token.value)
}

/// Uses the link: the account it belongs to, once, while it is valid; `None` for an unknown,
/// used, expired or other-purpose token.
pub async fn redeem(db: &Db, token: &str, purpose: Purpose, now: i64) -> Result<Option<String>> {
    if !secret::well_formed(token) {
        return Ok(None);
    }
    let hash = secret::hash(token);
    let mut t = db.begin().await?;
    let account_id = redeem_in(&mut t.tx(), &hash, purpose, now).await?;
    t.commit().await?;
    Ok(account_id)
}

/// The body of [`redeem`]'s transaction: uses the link, then voids the account's other
/// outstanding links of the same purpose.
async fn redeem_in(tx: &mut Tx<'_>, hash: &str, purpose: Purpose, now: i64) -> Result<Option<String>> {
    let used = diesel::update(email_links::table.find(hash))
        .filter(email_links::purpose.eq(purpose.as_str()))
        .filter(email_links::used_at.is_null())
        .filter(email_links::expires_at.gt(now))
        .set(email_links::used_at.eq(now))
        .returning(email_links::account_id);
    let account_id = tx.get_result::<String, _>(used).await.optional()?;
    if let Some(account_id) = &account_id {
        tx.execute(
            diesel::update(email_links::table)
                .filter(email_links::account_id.eq(account_id))
                .filter(email_links::purpose.eq(purpose.as_str()))
                .filter(email_links::used_at.is_null())
                .set(email_links::used_at.eq(now)),
        )
        .await?;
    }
    Ok(account_id)
}

/// Inside a transaction: voids every outstanding link of the account (its password changed,
/// so neither an older reset link nor a confirmation link may act for it any more).
pub(crate) async fn void_all_in(tx: &mut Tx<'_>, account_id: &str, now: i64) -> Result<usize> {
    let outstanding =
        email_links::table.filter(email_links::account_id.eq(account_id)).filter(email_links::used_at.is_null());
    Ok(tx.execute(diesel::update(outstanding).set(email_links::used_at.eq(now))).await?)
}

/// The account of a valid link, without using it up.
pub async fn peek(db: &Db, token: &str, purpose: Purpose, now: i64) -> Result<Option<String>> {
    if !secret::well_formed(token) {
        return Ok(None);
    }
    let hash = secret::hash(token);
    let query = email_links::table
        .find(&hash)
        .filter(email_links::purpose.eq(purpose.as_str()))
        .filter(email_links::used_at.is_null())
        .filter(email_links::expires_at.gt(now))
        .select(email_links::account_id);
    Ok(db.conn().await?.tx().first::<String, _>(query).await.optional()?)
}

/// Deletes links used or expired more than a day ago (they can act for nobody any more).
pub async fn purge(db: &Db, now: i64) -> Result<usize> {
    let cutoff = now - cova_domain::limits::ms(cova_domain::limits::ENDED_KEPT);
    let ended = email_links::table.filter(email_links::expires_at.lt(cutoff).or(email_links::used_at.lt(cutoff)));
    Ok(db.conn().await?.tx().execute(diesel::delete(ended)).await?)
}
