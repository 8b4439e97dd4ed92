use crate::schema::{accounts, api_tokens};
use crate::{Account, Change, Db, Result, Tx};
use cova_auth::{GeneratedToken, ScopeSet};
use diesel::prelude::*;

/// The spec's cap on active tokens per account (also a CHECK in the schema).
pub use cova_domain::limits::MAX_ACTIVE_TOKENS;

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, serde::Serialize, serde::Deserialize)]
#[diesel(table_name = api_tokens)]
pub struct TokenRecord {
    pub id: String,
    pub account_id: String,
    pub name: String,
    pub prefix: String,
    pub token_hash: String,
    pub scopes: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

impl TokenRecord {
    /// Scopes as stored; an unreadable list grants nothing.
    pub fn scope_set(&self) -> ScopeSet {
        ScopeSet::parse_list(&self.scopes).unwrap_or_default()
    }
}

pub struct NewToken<'a> {
    pub account_id: &'a str,
    pub name: &'a str,
    pub scopes: ScopeSet,
    pub token: &'a GeneratedToken,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRefusal {
    /// The account already has five active tokens.
    Limit,
    /// Tokens are only created after the e-mail is confirmed.
    EmailUnconfirmed,
}

/// Creates a token unless the account is unconfirmed or at its cap. The counter update and the
/// insert share one transaction, so concurrent creations can never exceed the cap.
pub async fn create(db: &Db, new: NewToken<'_>, now: i64) -> Result<Result<TokenRecord, TokenRefusal>> {
    let record = TokenRecord {
        id: super::new_id(),
        account_id: new.account_id.to_owned(),
        name: new.name.to_owned(),
        prefix: new.token.prefix.clone(),
        token_hash: new.token.hash.clone(),
        scopes: new.scopes.to_list(),
        created_at: now,
        last_used_at: None,
        revoked_at: None,
    };
    let mut t = db.begin().await?;
    let created = create_in(&mut t.tx(), record).await?;
    t.commit().await?;
    if created.is_ok() {
        db.changed(&[Change::Account(new.account_id)]).await;
    }
    Ok(created)
}

/// The body of [`create`]'s transaction.
async fn create_in(tx: &mut Tx<'_>, record: TokenRecord) -> Result<Result<TokenRecord, TokenRefusal>> {
    let bumped = tx
        .execute(
            diesel::update(accounts::table)
                .filter(accounts::id.eq(&record.account_id))
                .filter(accounts::email_confirmed_at.is_not_null())
                .filter(accounts::active_tokens.lt(MAX_ACTIVE_TOKENS))
                .set(accounts::active_tokens.eq(accounts::active_tokens + 1)),
        )
        .await?;
    if bumped == 0 {
        let confirmed = tx
            .first::<Option<i64>, _>(accounts::table.find(&record.account_id).select(accounts::email_confirmed_at))
            .await?;
        return Ok(Err(if confirmed.is_none() { TokenRefusal::EmailUnconfirmed } else { TokenRefusal::Limit }));
    }
    tx.execute(diesel::insert_into(api_tokens::table).values((
        api_tokens::id.eq(&record.id),
        api_tokens::account_id.eq(&record.account_id),
        api_tokens::name.eq(&record.name),
        api_tokens::prefix.eq(&record.prefix),
        api_tokens::token_hash.eq(&record.token_hash),
        api_tokens::scopes.eq(&record.scopes),
        api_tokens::created_at.eq(record.created_at),
    )))
    .await?;
    Ok(Ok(record))
}

pub async fn list(db: &Db, account_id: &str) -> Result<Vec<TokenRecord>> {
    let query = api_tokens::table.filter(api_tokens::account_id.eq(account_id)).order(api_tokens::created_at.asc());
    Ok(db.conn().await?.tx().load_as::<TokenRecord, _>(query).await?)
}

/// Revokes the account's active tokens with this display prefix; returns how many.
pub async fn revoke_by_prefix(db: &Db, account_id: &str, prefix: &str, now: i64) -> Result<usize> {
    let mut t = db.begin().await?;
    let revoked = revoke_by_prefix_in(&mut t.tx(), account_id, prefix, now).await?;
    t.commit().await?;
    announce_revoked(db, account_id, &revoked).await;
    Ok(revoked.len())
}

/// The body of [`revoke_by_prefix`]'s transaction: the revoked tokens' hashes.
async fn revoke_by_prefix_in(tx: &mut Tx<'_>, account_id: &str, prefix: &str, now: i64) -> Result<Vec<String>> {
    let revoked = tx
        .load::<String, _>(
            diesel::update(api_tokens::table)
                .filter(api_tokens::account_id.eq(account_id))
                .filter(api_tokens::prefix.eq(prefix))
                .filter(api_tokens::revoked_at.is_null())
                .set(api_tokens::revoked_at.eq(now))
                .returning(api_tokens::token_hash),
        )
        .await?;
    if !revoked.is_empty() {
        let n = i32::try_from(revoked.len()).unwrap_or(MAX_ACTIVE_TOKENS);
        tx.execute(
            diesel::update(accounts::table.find(account_id))
                .set(accounts::active_tokens.eq(accounts::active_tokens - n)),
        )
        .await?;
    }
    Ok(revoked)
}

async fn announce_revoked(db: &Db, account_id: &str, hashes: &[String]) {
    if hashes.is_empty() {
        return;
    }
    let mut changes = vec![Change::Account(account_id)];
    changes.extend(hashes.iter().map(|h| Change::TokenRevoked(h)));
    db.changed(&changes).await;
}

/// Revokes one active token of the account by id; false when there is no such active token.
pub async fn revoke(db: &Db, account_id: &str, token_id: &str, now: i64) -> Result<bool> {
    let mut t = db.begin().await?;
    let revoked = revoke_in(&mut t.tx(), account_id, token_id, now).await?;
    t.commit().await?;
    announce_revoked(db, account_id, &revoked).await;
    Ok(!revoked.is_empty())
}

/// The body of [`revoke`]'s transaction: the revoked token's hash (none or one).
async fn revoke_in(tx: &mut Tx<'_>, account_id: &str, token_id: &str, now: i64) -> Result<Vec<String>> {
    let revoked = tx
        .load::<String, _>(
            diesel::update(api_tokens::table.find(token_id))
                .filter(api_tokens::account_id.eq(account_id))
                .filter(api_tokens::revoked_at.is_null())
                .set(api_tokens::revoked_at.eq(now))
                .returning(api_tokens::token_hash),
        )
        .await?;
    if !revoked.is_empty() {
        tx.execute(
            diesel::update(accounts::table.find(account_id))
                .set(accounts::active_tokens.eq(accounts::active_tokens - 1)),
        )
        .await?;
    }
    Ok(revoked)
}

/// The active (not revoked) token with this hash and its account.
pub async fn find_active_by_hash(db: &Db, hash: &str) -> Result<Option<(TokenRecord, Account)>> {
    let query = api_tokens::table
        .inner_join(accounts::table)
        .filter(api_tokens::token_hash.eq(hash))
        .filter(api_tokens::revoked_at.is_null());
    Ok(db.conn().await?.tx().first_as::<(TokenRecord, Account), _>(query).await.optional()?)
}

/// Records use, at most once a minute per token so busy tokens do not write on every request.
pub async fn touch_last_used(db: &Db, token_id: &str, now: i64) -> Result<()> {
    let touch = diesel::update(api_tokens::table.find(token_id))
        .filter(api_tokens::last_used_at.is_null().or(api_tokens::last_used_at.lt(now - 60_000)))
        .set(api_tokens::last_used_at.eq(now));
    db.conn().await?.tx().execute(touch).await?;
    Ok(())
}
