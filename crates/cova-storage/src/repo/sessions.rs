//! Browser sessions of the workspace. The cookie carries a secret whose SHA-256 is
//! `secret_hash`; `id` stays the same for the session's life (jobs name it) while the secret
//! and the CSRF token are rotated at privilege changes.

use crate::schema::{accounts, sessions};
use crate::{Account, Db, Result, Tx};
use cova_auth::secret;
use diesel::prelude::*;

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
    let insert = diesel::insert_into(sessions::table).values((
        sessions::id.eq(&session.id),
        sessions::account_id.eq(&session.account_id),
        sessions::secret_hash.eq(&cookie.hash),
        sessions::csrf_token.eq(&session.csrf_token),
        sessions::created_at.eq(now),
        sessions::last_seen_at.eq(now),
        sessions::idle_expires_at.eq(session.idle_expires_at),
        sessions::expires_at.eq(session.expires_at),
    ));
    db.conn().await?.tx().execute(insert).await?;
    Ok(Opened { session, cookie: cookie.value })
}

/// The live session opened by this cookie value, with its account.
pub async fn find(db: &Db, cookie: &str, now: i64) -> Result<Option<(Session, Account)>> {
    let hash = secret::hash(cookie);
    let query = sessions::table
        .inner_join(accounts::table)
        .filter(sessions::secret_hash.eq(&hash))
        .filter(sessions::revoked_at.is_null())
        .filter(sessions::idle_expires_at.gt(now))
        .filter(sessions::expires_at.gt(now));
    Ok(db.conn().await?.tx().first_as::<(Session, Account), _>(query).await.optional()?)
}

/// Pushes the idle expiry forward (never past the absolute one). Callers do it at most once a
/// minute per session, so a busy page does not write on every request.
pub async fn touch(db: &Db, session: &Session, life: Lifetime, now: i64) -> Result<()> {
    let idle = (now + life.idle_ms).min(session.expires_at);
    let touch = diesel::update(sessions::table.find(&session.id))
        .filter(sessions::revoked_at.is_null())
        .set((sessions::last_seen_at.eq(now), sessions::idle_expires_at.eq(idle)));
    db.conn().await?.tx().execute(touch).await?;
    Ok(())
}

/// New cookie value and CSRF token for the same session (a privilege change). `None` when
/// the session is no longer live.
pub async fn rotate(db: &Db, session_id: &str, now: i64) -> Result<Option<Opened>> {
    let cookie = secret::generate();
    let csrf = secret::generate().value;
    let mut t = db.begin().await?;
    let session = rotate_in(&mut t.tx(), session_id, &cookie.hash, &csrf, now).await?;
    t.commit().await?;
    Ok(session.map(|session| Opened { session, cookie: cookie.value }))
}

/// The body of [`rotate`]'s transaction: the session with its new secret's hash and CSRF
/// token, if it is still live.
async fn rotate_in(tx: &mut Tx<'_>, session_id: &str, hash: &str, csrf: &str, now: i64) -> Result<Option<Session>> {
    let updated = tx
        .execute(
            diesel::update(sessions::table.find(session_id))
                .filter(sessions::revoked_at.is_null())
                .filter(sessions::expires_at.gt(now))
                .set((sessions::secret_hash.eq(hash), sessions::csrf_token.eq(csrf))),
        )
        .await?;
    if updated == 0 {
        return Ok(None);
    }
    Ok(Some(tx.first_as::<Session, _>(sessions::table.find(session_id)).await?))
}

/// Ends one session (logout).
pub async fn revoke(db: &Db, session_id: &str, now: i64) -> Result<()> {
    let revoke = diesel::update(sessions::table.find(session_id))
        .filter(sessions::revoked_at.is_null())
        .set(sessions::revoked_at.eq(now));
    db.conn().await?.tx().execute(revoke).await?;
    Ok(())
}

/// The account's live sessions (for rotation when its e-mail is confirmed).
pub async fn live_of_account(db: &Db, account_id: &str, now: i64) -> Result<Vec<Session>> {
    let query = sessions::table
        .filter(sessions::account_id.eq(account_id))
        .filter(sessions::revoked_at.is_null())
        .filter(sessions::expires_at.gt(now));
    Ok(db.conn().await?.tx().load_as::<Session, _>(query).await?)
}

/// Deletes sessions that ended more than a day ago (the janitor's step).
pub async fn purge_ended(db: &Db, now: i64) -> Result<usize> {
    let cutoff = now - cova_domain::limits::ms(cova_domain::limits::ENDED_KEPT);
    let ended = sessions::table.filter(
        sessions::expires_at.lt(cutoff).or(sessions::idle_expires_at.lt(cutoff)).or(sessions::revoked_at.lt(cutoff)),
    );
    Ok(db.conn().await?.tx().execute(diesel::delete(ended)).await?)
}
