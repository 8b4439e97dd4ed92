//! The images an account can open through cova, each named by an unguessable id. A scrape or
//! a metadata read registers the images it saw; their bytes are kept in the media store (see
//! the cova-media crate) under their content hash, recorded here once fetched.

use crate::schema::media;
use crate::{Db, Result, Tx};
use diesel::prelude::*;
use std::collections::HashMap;

/// An image as a scrape or a metadata read lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// What it is within the post (`cover`, `author`, `avatar:<id>`, `image:<comment>:<k>`).
    pub slot: String,
    /// `cover`, `avatar` or `image`.
    pub kind: &'static str,
    pub source_url: String,
    pub width: Option<i32>,
    pub height: Option<i32>,
}

/// A registered image: its id and whether cova already has its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub id: String,
    pub fetched: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = media)]
pub struct MediaRow {
    pub id: String,
    pub account_id: String,
    #[diesel(column_name = ref_)]
    pub r#ref: String,
    pub slot: String,
    pub kind: String,
    pub n: i32,
    pub source_url: String,
    pub width: Option<i32>,
    pub height: Option<i32>,
    pub content_key: Option<String>,
    pub content_type: Option<String>,
    pub size: Option<i64>,
    pub expires_at: i64,
}

/// A new, unguessable media id (122 random bits): 32 lowercase hex digits.
fn new_media_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Whether `s` has the form of a media id (anything else names no image).
pub fn is_media_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Registers the images of a post for an account, living until `expires_at`: a new slot gets
/// a new id and the next number of its kind; a known one keeps both and takes the fresh link
/// and lifetime. Returns slot → registration.
pub async fn register(
    db: &Db,
    account_id: &str,
    r#ref: &str,
    listed: &[Listed],
    now: i64,
    expires_at: i64,
) -> Result<HashMap<String, Registered>> {
    if listed.is_empty() {
        return Ok(HashMap::new());
    }
    let slots: Vec<&str> = listed.iter().map(|l| l.slot.as_str()).collect();
    let mut t = db.begin().await?;
    let registered = register_in(&mut t.tx(), account_id, r#ref, listed, &slots, now, expires_at).await?;
    t.commit().await?;
    Ok(registered)
}

/// The body of [`register`]'s transaction.
async fn register_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    r#ref: &str,
    listed: &[Listed],
    slots: &[&str],
    now: i64,
    expires_at: i64,
) -> Result<HashMap<String, Registered>> {
    let of_post = media::account_id.eq(account_id).and(media::ref_.eq(r#ref));
    let known = tx
        .load::<String, _>(media::table.filter(of_post).filter(media::slot.eq_any(slots)).select(media::slot))
        .await?;
    let mut next: HashMap<String, i32> = HashMap::new();
    if known.len() < listed.len() {
        let highest = tx
            .load::<(String, Option<i32>), _>(
                media::table.filter(of_post).group_by(media::kind).select((media::kind, diesel::dsl::max(media::n))),
            )
            .await?;
        next = highest.into_iter().map(|(k, n)| (k, n.unwrap_or(0))).collect();
    }
    for item in listed {
        if known.contains(&item.slot) {
            tx.execute(diesel::update(media::table.filter(of_post).filter(media::slot.eq(&item.slot))).set((
                media::source_url.eq(&item.source_url),
                media::width.eq(item.width),
                media::height.eq(item.height),
                media::expires_at.eq(expires_at),
            )))
            .await?;
            continue;
        }
        let n = next.entry(item.kind.to_owned()).or_insert(0);
        *n += 1;
        tx.execute(
            diesel::insert_into(media::table)
                .values((
                    media::id.eq(new_media_id()),
                    media::account_id.eq(account_id),
                    media::ref_.eq(r#ref),
                    media::slot.eq(&item.slot),
                    media::kind.eq(item.kind),
                    media::n.eq(*n),
                    media::source_url.eq(&item.source_url),
                    media::width.eq(item.width),
                    media::height.eq(item.height),
                    media::created_at.eq(now),
                    media::expires_at.eq(expires_at),
                ))
                .on_conflict((media::account_id, media::ref_, media::slot))
                .do_update()
                .set((media::source_url.eq(&item.source_url), media::expires_at.eq(expires_at))),
        )
        .await?;
    }
    let rows = tx
        .load::<(String, String, Option<String>), _>(
            media::table.filter(of_post).filter(media::slot.eq_any(slots)).select((
                media::slot,
                media::id,
                media::content_key,
            )),
        )
        .await?;
    Ok(rows.into_iter().map(|(slot, id, key)| (slot, Registered { id, fetched: key.is_some() })).collect())
}

/// The image `id` of the account, while it lives.
pub async fn find(db: &Db, account_id: &str, id: &str, now: i64) -> Result<Option<MediaRow>> {
    let query = media::table
        .filter(media::id.eq(id))
        .filter(media::account_id.eq(account_id))
        .filter(media::expires_at.gt(now));
    Ok(db.conn().await?.tx().first_as::<MediaRow, _>(query).await.optional()?)
}

/// Records that the bytes of `id` are kept under `key`.
pub async fn set_content(db: &Db, id: &str, key: &str, content_type: &str, size: i64, now: i64) -> Result<()> {
    let set = diesel::update(media::table.find(id)).set((
        media::content_key.eq(key),
        media::content_type.eq(content_type),
        media::size.eq(size),
        media::fetched_at.eq(now),
        media::fetch_error.eq(None::<String>),
    ));
    db.conn().await?.tx().execute(set).await?;
    Ok(())
}

/// Records why `id` could not be fetched, and forgets bytes that turned out to be gone.
pub async fn set_failure(db: &Db, id: &str, error: &str) -> Result<()> {
    let set = diesel::update(media::table.find(id))
        .set((media::content_key.eq(None::<String>), media::fetch_error.eq(error)));
    db.conn().await?.tx().execute(set).await?;
    Ok(())
}

/// Forgets the stored bytes `key` on every image naming them (they were deleted): each is
/// downloaded again when first asked for.
pub async fn forget_content(db: &Db, key: &str) -> Result<usize> {
    let forget =
        diesel::update(media::table.filter(media::content_key.eq(key))).set(media::content_key.eq(None::<String>));
    Ok(db.conn().await?.tx().execute(forget).await?)
}

/// Up to `limit` images whose lifetime is over: `(id, content key)`.
pub async fn due(db: &Db, now: i64, limit: i64) -> Result<Vec<(String, Option<String>)>> {
    let query = media::table
        .filter(media::expires_at.le(now))
        .order(media::expires_at.asc())
        .limit(limit)
        .select((media::id, media::content_key));
    Ok(db.conn().await?.tx().load(query).await?)
}

/// Whether a living image still uses the stored bytes `key`.
pub async fn key_in_use(db: &Db, key: &str, now: i64) -> Result<bool> {
    let query = media::table.filter(media::content_key.eq(key)).filter(media::expires_at.gt(now)).count();
    let n = db.conn().await?.tx().get_result::<i64, _>(query).await?;
    Ok(n > 0)
}

/// Deletes image rows that are still expired at `now` (a scrape may have listed one again
/// since it was found due; their bytes are dealt with by the caller first).
pub async fn delete_expired(db: &Db, ids: &[String], now: i64) -> Result<usize> {
    if ids.is_empty() {
        return Ok(0);
    }
    let expired = media::table.filter(media::id.eq_any(ids)).filter(media::expires_at.le(now));
    Ok(db.conn().await?.tx().execute(diesel::delete(expired)).await?)
}

/// How many images (living or not) the account has for a post, and how many are fetched.
pub async fn count(db: &Db, account_id: &str, r#ref: &str) -> Result<(i64, i64)> {
    let query =
        media::table.filter(media::account_id.eq(account_id)).filter(media::ref_.eq(r#ref)).select(media::content_key);
    let rows = db.conn().await?.tx().load::<Option<String>, _>(query).await?;
    Ok((rows.len() as i64, rows.iter().filter(|k| k.is_some()).count() as i64))
}
