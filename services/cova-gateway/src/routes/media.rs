//! `GET /api/v1/media/file` and `GET /api/v1/media/download`: any valid token. An image the
//! account was shown (a cover, an avatar, a comment image), by the `id` cova put into the
//! metadata, the comments or the library entry. The bytes come from cova's media store; an
//! image not downloaded yet is fetched from the platform within the request. The type is the
//! sniffed one, the `ETag` the content hash; conditional and byte-range requests are answered.

use crate::AppState;
use crate::auth::authenticate;
use crate::backend_errors;
use crate::error::HttpResult;
use crate::input::etag_matches;
use crate::metering::Meter;
use actix_web::body::SizedStream;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder, web};
use cova_errors::{ApiError, ErrorCode};
use cova_media::{ImageType, KeepError, MediaError};
use cova_storage::repo::media::{self as rows, MediaRow};
use futures::StreamExt;
use std::ops::Range;

#[derive(Debug, serde::Deserialize)]
pub struct MediaQuery {
    id: Option<String>,
}

pub async fn file(req: HttpRequest, state: web::Data<AppState>, query: web::Query<MediaQuery>) -> HttpResult {
    serve(&req, &state, query.into_inner(), false).await
}

pub async fn download(req: HttpRequest, state: web::Data<AppState>, query: web::Query<MediaQuery>) -> HttpResult {
    serve(&req, &state, query.into_inner(), true).await
}

/// The stored bytes of an image: key, type and size.
struct Kept {
    key: String,
    content_type: String,
    size: u64,
}

impl Kept {
    fn of(row: &MediaRow) -> Option<Self> {
        let (key, content_type, size) = (row.content_key.clone()?, row.content_type.clone()?, row.size?);
        Some(Self { key, content_type, size: u64::try_from(size).ok()? })
    }

    /// Strong: the key is the SHA-256 of the bytes.
    fn etag(&self) -> String {
        format!("\"{}\"", self.key.trim_start_matches("sha256/"))
    }
}

async fn serve(req: &HttpRequest, state: &AppState, query: MediaQuery, attachment: bool) -> HttpResult {
    let principal = authenticate(req, state).await?;
    let (meter, _) = Meter::api(state, &principal).await?;
    let id = query.id.filter(|id| !id.is_empty()).ok_or_else(|| {
        meter.fail(ApiError::validation(
            "The query parameter `id` is required: the media id from a comment, metadata or library entry.",
        ))
    })?;
    let now = state.now();
    let gone = || {
        meter.fail(ApiError::not_found(format!(
            "No media with this id for this account: ids come from the account's own results, and media are \
             kept {} after the scrape that listed them.",
            cova_domain::limits::in_words(cova_domain::limits::LIBRARY_LIFETIME)
        )))
    };
    // Anything that is not a media id is not found, without asking the database.
    if !rows::is_media_id(&id) {
        return Err(gone().into());
    }
    let row = rows::find(&state.backends.db, &principal.account_id, &id, now)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(gone)?;
    let media = &state.backends.media;
    let mut kept = match Kept::of(&row) {
        Some(kept) => kept,
        None => fetch(state, &row).await.map_err(|e| meter.fail(e))?,
    };
    if etag_matches(req, &kept.etag()) {
        let mut answer = HttpResponse::NotModified();
        headers(&mut answer, &meter, state, &row, &kept, now);
        return Ok(answer.finish());
    }
    let range = match requested_range(req, kept.size, &kept.etag()) {
        Ok(range) => range,
        Err(()) => {
            let e = ApiError::new(
                ErrorCode::RangeNotSatisfiable,
                format!("The requested range is outside the file, which has {} bytes.", kept.size),
            );
            let mut e = meter.fail(e);
            e.headers.push(("content-range", format!("bytes */{}", kept.size)));
            return Err(e.into());
        }
    };
    let stream = match media.store().stream(&kept.key, range.clone()).await {
        Ok(stream) => stream,
        // The bytes were deleted under the row (a purge racing a new scrape): fetch again.
        Err(MediaError::NotFound) => {
            kept = fetch(state, &row).await.map_err(|e| meter.fail(e))?;
            media.store().stream(&kept.key, range.clone()).await.map_err(|e| meter.fail(store_error(e)))?
        }
        Err(e) => return Err(meter.fail(store_error(e)).into()),
    };
    let mut answer = match &range {
        Some(r) => {
            let mut partial = HttpResponse::PartialContent();
            partial.insert_header((header::CONTENT_RANGE, format!("bytes {}-{}/{}", r.start, r.end - 1, kept.size)));
            partial
        }
        None => HttpResponse::Ok(),
    };
    headers(&mut answer, &meter, state, &row, &kept, now);
    if attachment {
        answer.insert_header((header::CONTENT_DISPOSITION, disposition(&row, &kept)));
    }
    let length = range.map_or(kept.size, |r| r.end - r.start);
    let body = stream.map(|chunk| chunk.map_err(|e| std::io::Error::other(e.to_string())));
    Ok(answer.body(SizedStream::new(length, body)))
}

/// Downloads an image cova has no bytes of, within the request.
async fn fetch(state: &AppState, row: &MediaRow) -> Result<Kept, ApiError> {
    match state.backends.media.fetch(&row.id, &row.source_url).await {
        Ok(stored) => {
            Ok(Kept { key: stored.key, content_type: stored.image.content_type().to_owned(), size: stored.size as u64 })
        }
        Err(KeepError::Fetch(e)) => Err(ApiError::new(
            ErrorCode::ParseError,
            format!("cova has no copy of this image and could not download it from the platform: {e}."),
        )),
        Err(KeepError::Store(e)) => Err(store_error(e)),
        Err(KeepError::Database(e)) => Err(backend_errors::storage(e)),
    }
}

fn store_error(e: MediaError) -> ApiError {
    match e {
        MediaError::NotAnImage | MediaError::TooLarge(_) => ApiError::new(ErrorCode::ParseError, format!("{e}.")),
        other => {
            tracing::warn!(error = %other, "media store unavailable");
            ApiError::unavailable()
        }
    }
}

fn headers(answer: &mut HttpResponseBuilder, meter: &Meter, state: &AppState, row: &MediaRow, kept: &Kept, now: i64) {
    meter.apply(answer);
    // Never cached past the image's own lifetime.
    let left_s = u64::try_from((row.expires_at - now) / 1000).unwrap_or(0);
    let max_age = state.config.media.cache_max_age_s.min(left_s);
    answer
        .insert_header((header::CONTENT_TYPE, kept.content_type.as_str()))
        .insert_header((header::ETAG, kept.etag()))
        .insert_header((header::CACHE_CONTROL, format!("private, max-age={max_age}")))
        .insert_header((header::ACCEPT_RANGES, "bytes"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::CONTENT_SECURITY_POLICY, "default-src 'none'; sandbox"));
}

/// The single byte range asked for: `None` for the whole file (no `Range`, a multi-range or
/// unparsable one, which may be ignored, or an `If-Range` naming other bytes); `Err` when it
/// lies outside the file.
fn requested_range(req: &HttpRequest, size: u64, etag: &str) -> Result<Option<Range<u64>>, ()> {
    let Some(value) = req.headers().get(header::RANGE).and_then(|v| v.to_str().ok()) else { return Ok(None) };
    if let Some(if_range) = req.headers().get(header::IF_RANGE).and_then(|v| v.to_str().ok())
        && if_range.trim() != etag
    {
        return Ok(None);
    }
    parse_range(value, size)
}

fn parse_range(value: &str, size: u64) -> Result<Option<Range<u64>>, ()> {
    let Some(spec) = value.trim().strip_prefix("bytes=") else { return Ok(None) };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((first, last)) = spec.trim().split_once('-') else { return Ok(None) };
    let number = |s: &str| s.trim().parse::<u64>().ok();
    let range = match (first.trim().is_empty(), last.trim().is_empty()) {
        // The last n bytes.
        (true, false) => {
            let Some(n) = number(last) else { return Ok(None) };
            if n == 0 || size == 0 {
                return Err(());
            }
            size - n.min(size)..size
        }
        (false, _) => {
            let Some(start) = number(first) else { return Ok(None) };
            let end = if last.trim().is_empty() {
                size
            } else {
                let Some(last) = number(last) else { return Ok(None) };
                if last < start {
                    return Ok(None);
                }
                last.saturating_add(1).min(size)
            };
            if start >= size {
                return Err(());
            }
            start..end
        }
        (true, true) => return Ok(None),
    };
    Ok(Some(range))
}

/// `attachment; filename="<ref>-<kind>-<n>.<ext>"`: an ASCII-safe name, and the exact one as
/// `filename*` (RFC 6266).
fn disposition(row: &MediaRow, kept: &Kept) -> String {
    let ext = ImageType::from_content_type(&kept.content_type).map_or("bin", ImageType::extension);
    let name = format!("{}-{}-{}.{ext}", row.r#ref, row.kind, row.n);
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    let exact = percent_encoding::utf8_percent_encode(&name, percent_encoding::NON_ALPHANUMERIC);
    format!("attachment; filename=\"{safe}\"; filename*=UTF-8''{exact}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok(Some(0..10)));
        assert_eq!(parse_range("bytes=90-", 100), Ok(Some(90..100)));
        assert_eq!(parse_range("bytes=90-500", 100), Ok(Some(90..100)));
        assert_eq!(parse_range("bytes=-10", 100), Ok(Some(90..100)));
        assert_eq!(parse_range("bytes=-500", 100), Ok(Some(0..100)));
        assert_eq!(parse_range("bytes=100-", 100), Err(()));
        assert_eq!(parse_range("bytes=-0", 100), Err(()));
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Ok(None), "several ranges: the whole file");
        assert_eq!(parse_range("bytes=9-2", 100), Ok(None), "invalid: ignored");
        assert_eq!(parse_range("items=0-1", 100), Ok(None));
        assert_eq!(parse_range("bytes=x-1", 100), Ok(None));
    }
}
