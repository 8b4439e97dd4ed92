//! Browser sessions of the workspace. The cookie carries a secret whose SHA-256 is
//! `secret_hash`; `id` stays the same for the session's life (jobs name it) while the secret
//! and the CSRF token are rotated at privilege changes.

use crate::schema::{accounts, sessions};
use crate::{Account, Db, Result, in_transaction, with_conn};
use cova_auth::secret;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = sessions)]
pub struct Session {
    pub id: String,
    pub account_id: String,
    pub csrf_token: String,
    pub created_at: i64,
    pub last_seen_at: i64,
    pub idle_expires_at: i64,
    pub expires_at: i64,
}

/// How long sessions live, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Lifetime {
    pub idle_ms: i64,
    pub max_ms: i64,
}

/// A session and the cookie value that opens it (given to the browser once).
#[derive(Debug, Clone)]
pub struct Opened {
    pub session: Session,
    pub cookie: String,
}

/// Starts a session for the account (at login: always a new id and secret, so a value planted
/// before login is worthless after it).
pub async fn open(db: &Db, account_id: &str, life: Lifetime, now: i64) -> Result<Opened> {
    let cookie = secret::generate();
    let session = Session {
        id: super::new_id(),
        account_id: account_id.to_owned(),
        csrf_token: secret::generate().value,
        created_at: now,
        last_seen_at: now,
        idle_expires_at: (now + life.idle_ms).min(now + life.max_ms),
        expires_at: now + life.max_ms,
    };
    let mut conn = db.conn().await?;
    with_conn!(&mut conn, |c| {
        diesel::insert_into(sessions::table)
            .values((
                sessions::id.eq(&session.id),
                sessions::account_id.eq(&session.account_id),
                sessions::secret_hash.eq(&cookie.hash),
                sessions::csrf_token.eq(&session.csrf_token),
                sessions::created_at.eq(now),
                sessions::last_seen_at.eq(now),
                sessions::idle_expires_at.eq(session.idle_expires_at),
                sessions::expires_at.eq(session.expires_at),
            ))
            .execute(c)
            .await
    })?;
    Ok(Opened { session, cookie: cookie.value })
}

/// The live session opened by this cookie value, with its account.
pub async fn find(db: &Db, cookie: &str, now: i64) -> Result<Option<(Session, Account)>> {
    let hash = secret::hash(cookie);
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        sessions::table
            .inner_join(accounts::table)
            .filter(sessions::secret_hash.eq(&hash))
            .filter(sessions::revoked_at.is_null())
            .filter(sessions::idle_expires_at.gt(now))
            .filter(sessions::expires_at.gt(now))
            .select((Session::as_select(), Account::as_select()))
            .first(c)
            .await
            .optional()
    })?)
}

/// Pushes the idle expiry forward (never past the absolute one). Callers do it at most once a
/// minute per session, so a busy page does not write on every request.
pub async fn touch(db: &Db, session: &Session, life: Lifetime, now: i64) -> Result<()> {
    let idle = (now + life.idle_ms).min(session.expires_at);
    let mut conn = db.conn().await?;
    with_conn!(&mut conn, |c| {
        diesel::update(sessions::table.find(&session.id))
            .filter(sessions::revoked_at.is_null())
            .set((sessions::last_seen_at.eq(now), sessions::idle_expires_at.eq(idle)))
            .execute(c)
            .await
    })?;
    Ok(())
}

/// New cookie value and CSRF token for the same session (a privilege change). `None` when
/// the session is no longer live.
pub async fn rotate(db: &Db, session_id: &str, now: i64) -> Result<Option<Opened>> {
    let cookie = secret::generate();
    let csrf = secret::generate().value;
    let mut conn = db.conn().await?;
    in_transaction!(&mut conn, |c| {
        let updated = diesel::update(sessions::table.find(session_id))
            .filter(sessions::revoked_at.is_null())
            .filter(sessions::expires_at.gt(now))
            .set((sessions::secret_hash.eq(&cookie.hash), sessions::csrf_token.eq(&csrf)))
            .execute(c)
            .await?;
        if updated == 0 {
            return Ok(None);
        }
        let session = sessions::table.find(session_id).select(Session::as_select()).first(c).await?;
        Ok(Some(Opened { session, cookie: cookie.value.clone() }))
    })
}

/// Ends one session (logout).
pub async fn revoke(db: &Db, session_id: &str, now: i64) -> Result<()> {
    let mut conn = db.conn().await?;
    with_conn!(&mut conn, |c| {
        diesel::update(sessions::table.find(session_id))
            .filter(sessions::revoked_at.is_null())
            .set(sessions::revoked_at.eq(now))
            .execute(c)
            .await
    })?;
    Ok(())
}

/// The account's live sessions (for rotation when its e-mail is confirmed).
pub async fn live_of_account(db: &Db, account_id: &str, now: i64) -> Result<Vec<Session>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        sessions::table
            .filter(sessions::account_id.eq(account_id))
            .filter(sessions::revoked_at.is_null())
            .filter(sessions::expires_at.gt(now))
            .select(Session::as_select())
            .load(c)
            .await
    })?)
}

/// Deletes sessions that ended more than a day ago (the janitor's step).
pub async fn purge_ended(db: &Db, now: i64) -> Result<usize> {
    let cutoff = now - cova_domain::limits::ms(cova_domain::limits::ENDED_KEPT);
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        diesel::delete(
            sessions::table.filter(
                sessions::expires_at
                    .lt(cutoff)
                    .or(sessions::idle_expires_at.lt(cutoff))
                    .or(sessions::revoked_at.lt(cutoff)),
            ),
        )
        .execute(c)
        .await
    })?)
}
