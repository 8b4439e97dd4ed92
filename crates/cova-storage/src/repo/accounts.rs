use crate::schema::accounts;
use crate::{Change, Db, Read, Result, StorageError, Tx};
use diesel::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Serialize, Deserialize)]
#[diesel(table_name = accounts)]
pub struct Account {
    pub id: String,
    pub email: String,
    pub email_confirmed_at: Option<i64>,
    pub active_tokens: i32,
    pub free_comments_left: i64,
    pub created_at: i64,
    /// argon2id PHC string; `None` for accounts made by `cova admin` until a reset sets one.
    #[serde(skip)]
    pub password_hash: Option<String>,
}

impl Account {
    pub fn is_confirmed(&self) -> bool {
        self.email_confirmed_at.is_some()
    }
}

/// Creates an account; `confirmed` marks the e-mail as confirmed now. Duplicate e-mail → `Conflict`.
pub async fn create(db: &Db, email: &str, confirmed: bool, free_allowance: i64, now: i64) -> Result<Account> {
    let email = normalise_email(email)?;
    let account = Account {
        id: super::new_id(),
        email,
        email_confirmed_at: confirmed.then_some(now),
        active_tokens: 0,
        free_comments_left: free_allowance,
        created_at: now,
        password_hash: None,
    };
    let insert = diesel::insert_into(accounts::table)
        .values((
            accounts::id.eq(&account.id),
            accounts::email.eq(&account.email),
            accounts::email_confirmed_at.eq(account.email_confirmed_at),
            accounts::active_tokens.eq(0),
            accounts::free_comments_left.eq(account.free_comments_left),
            accounts::created_at.eq(account.created_at),
        ))
        .on_conflict_do_nothing();
    let inserted = db.conn().await?.tx().execute(insert).await?;
    if inserted == 0 {
        return Err(StorageError::Conflict(format!("an account with e-mail {} already exists", account.email)));
    }
    Ok(account)
}

/// Signs up: an unconfirmed account with a password. `None` when the e-mail is taken.
pub async fn sign_up(
    db: &Db,
    email: &str,
    password_hash: &str,
    free_allowance: i64,
    now: i64,
) -> Result<Option<Account>> {
    let account = match create(db, email, false, free_allowance, now).await {
        Ok(account) => account,
        Err(StorageError::Conflict(_)) if find_by_email(db, email).await?.is_some() => return Ok(None),
        Err(e) => return Err(e),
    };
    let set = diesel::update(accounts::table.find(&account.id)).set(accounts::password_hash.eq(password_hash));
    db.conn().await?.tx().execute(set).await?;
    Ok(Some(Account { password_hash: Some(password_hash.to_owned()), ..account }))
}

/// Marks the e-mail confirmed (once; a later call keeps the first time).
pub async fn confirm_email(db: &Db, account_id: &str, now: i64) -> Result<()> {
    let confirm = diesel::update(accounts::table.find(account_id))
        .filter(accounts::email_confirmed_at.is_null())
        .set(accounts::email_confirmed_at.eq(now));
    db.conn().await?.tx().execute(confirm).await?;
    db.changed(&[Change::Account(account_id)]).await;
    Ok(())
}

/// Sets a new password (a reset link also proves the mailbox, so the e-mail is confirmed),
/// revokes every session of the account and voids its outstanding e-mailed links, in one
/// transaction.
pub async fn set_password(db: &Db, account_id: &str, password_hash: &str, now: i64) -> Result<()> {
    let mut t = db.begin().await?;
    set_password_in(&mut t.tx(), account_id, password_hash, now).await?;
    t.commit().await?;
    db.changed(&[Change::Account(account_id)]).await;
    Ok(())
}

/// The body of [`set_password`]'s transaction.
async fn set_password_in(tx: &mut Tx<'_>, account_id: &str, password_hash: &str, now: i64) -> Result<()> {
    use crate::schema::sessions;
    tx.execute(diesel::update(accounts::table.find(account_id)).set(accounts::password_hash.eq(password_hash))).await?;
    tx.execute(
        diesel::update(accounts::table.find(account_id))
            .filter(accounts::email_confirmed_at.is_null())
            .set(accounts::email_confirmed_at.eq(now)),
    )
    .await?;
    tx.execute(
        diesel::update(sessions::table.filter(sessions::account_id.eq(account_id)))
            .filter(sessions::revoked_at.is_null())
            .set(sessions::revoked_at.eq(now)),
    )
    .await?;
    super::email_links::void_all_in(tx, account_id, now).await?;
    Ok(())
}

pub async fn find_by_email(db: &Db, email: &str) -> Result<Option<Account>> {
    let email = normalise_email(email)?;
    let query = accounts::table.filter(accounts::email.eq(&email));
    Ok(db.conn().await?.tx().first_as::<Account, _>(query).await.optional()?)
}

pub async fn get(db: &Db, id: &str) -> Result<Account> {
    Ok(db.conn().await?.tx().first_as::<Account, _>(accounts::table.find(id)).await?)
}

/// What `GET /usage` shows of the account, read in one query; also the cached copy of the
/// account every authenticated answer reads its quota headers from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub account: Account,
    pub balance: super::balances::Balance,
    /// Analyses queued or in progress.
    pub running: i64,
}

pub async fn usage(db: &Db, id: &str, now: i64) -> Result<Usage> {
    use crate::schema::{balances, jobs};
    use cova_domain::{JobKind, JobStatus};
    use diesel_async::RunQueryDsl as Run;
    let month = cova_domain::time::month_of(now);
    // Written without literal SQL or bound IN lists, so that the statement is prepared once.
    let running = jobs::table
        .filter(jobs::account_id.eq(id))
        .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
        .filter(jobs::status.eq(JobStatus::Queued.as_str()).or(jobs::status.eq(JobStatus::InProgress.as_str())))
        .count()
        .single_value();
    let query = accounts::table
        .left_join(balances::table.on(balances::account_id.eq(accounts::id).and(balances::month.eq(month.clone()))))
        .filter(accounts::id.eq(id));
    let balance = (balances::granted, balances::reserved, balances::spent).nullable();
    type Row = (Account, Option<(i64, i64, i64)>, Option<i64>);
    // The account's selection names its database, so the statement is finished per database.
    let mut conn = db.read_conn().await?;
    let (account, balance, running): Row = match conn.read() {
        Read::Pg(c) => Run::first(query.select((Account::as_select(), balance, running)), c).await?,
        Read::Sqlite(c) => Run::first(query.select((Account::as_select(), balance, running)), c).await?,
    };
    Ok(Usage { account, balance: super::balances::balance_of(month, now, balance), running: running.unwrap_or(0) })
}

/// Accounts in order of creation, at most `limit` after skipping `offset`.
pub async fn list(db: &Db, limit: i64, offset: i64) -> Result<Vec<Account>> {
    let query = accounts::table.order((accounts::created_at.asc(), accounts::id.asc())).limit(limit).offset(offset);
    Ok(db.conn().await?.tx().load_as::<Account, _>(query).await?)
}

/// Lower-cased and trimmed; a minimal shape check (the confirmation mail is the real proof).
pub fn normalise_email(raw: &str) -> Result<String> {
    let email = raw.trim().to_lowercase();
    let valid = email.len() <= 254
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && domain.contains('.') && !domain.starts_with('.') && !domain.ends_with('.')
        })
        && !email.chars().any(char::is_whitespace);
    if valid { Ok(email) } else { Err(StorageError::Conflict(format!("`{}` is not an e-mail address", raw.trim()))) }
}
