//! `GET /api/v1/comments/search` (scope `library:write`): full-text search over every comment
//! the account keeps in its library, across posts, creators and platforms, with filters, three
//! orders and an opaque cursor.

use super::analyses::parse_ref;
use crate::error::HttpResult;
use crate::input;
use crate::metering::authorized;
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine as _;
use cova_analyzers::Label;
use cova_analyzers::search::Query;
use cova_auth::Scope;
use cova_domain::limits::{SEARCH_MAX_DEPTH, SEARCH_MAX_REFS, SEARCH_PAGE_DEFAULT, SEARCH_PAGE_MAX};
use cova_domain::time::{parse_rfc3339, rfc3339};
use cova_errors::ApiError;
use cova_storage::repo::search::{self, Filter, Hit, Order, Words};
use serde_json::{Value, json};

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Every parameter; `ref` alone may repeat.
const PARAMETERS: [&str; 15] = [
    "q",
    "platform",
    "ref",
    "creator",
    "since",
    "until",
    "language",
    "sentiment",
    "min_likes",
    "replies",
    "media",
    "author",
    "sort",
    "limit",
    "cursor",
];

/// A search as the request asks it.
struct Asked {
    query: Query,
    filter: Filter,
    order: Order,
    limit: i64,
    offset: i64,
    /// What a cursor must come with: the query, its filters and order, digested.
    fingerprint: String,
}

/// Reads the query string: unknown parameters, repeats and bad values are 400 in words.
fn asked(query_string: &str) -> Result<Asked, ApiError> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (key, value) in url::form_urlencoded::parse(query_string.as_bytes()) {
        if !PARAMETERS.contains(&key.as_ref()) {
            return Err(ApiError::validation(format!(
                "Unknown parameter `{}`: the search takes {}.",
                key.chars().take(40).collect::<String>(),
                PARAMETERS.map(|p| format!("`{p}`")).join(", ")
            )));
        }
        if key != "ref" && pairs.iter().any(|(k, _)| *k == key) {
            return Err(ApiError::validation(format!("`{key}` is given twice; give it once.")));
        }
        input::text(&key, &value)?;
        pairs.push((key.into_owned(), value.into_owned()));
    }
    let get = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let q = get("q").ok_or_else(|| ApiError::validation("`q` is missing: give the words to search for."))?;
    let query = Query::parse(q).map_err(|e| ApiError::validation(e.detail()))?;
    let one_of = |name: &str, values: &[&str]| -> Result<Option<String>, ApiError> {
        match get(name) {
            None => Ok(None),
            Some(v) if values.contains(&v) => Ok(Some(v.to_owned())),
            Some(_) => Err(ApiError::validation(format!("`{name}` must be {}.", in_words(values)))),
        }
    };
    let platforms: Vec<&str> = cova_platforms::Platform::ALL.iter().map(|p| p.as_str()).collect();
    let platform = one_of("platform", &platforms)?;
    let refs: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "ref")
        .map(|(_, v)| parse_ref(v).map(|r| r.to_string()))
        .collect::<Result<_, _>>()?;
    if refs.len() > SEARCH_MAX_REFS {
        return Err(ApiError::validation(format!("At most {SEARCH_MAX_REFS} `ref` parameters; search fewer posts.")));
    }
    let creator = get("creator").map(super::creators::parse_ref).transpose()?;
    let time = |name: &str| -> Result<Option<i64>, ApiError> {
        get(name)
            .map(|v| {
                parse_rfc3339(v).ok_or_else(|| {
                    ApiError::validation(format!("`{name}` must be an RFC 3339 time, such as 2026-12-01T00:00:00Z."))
                })
            })
            .transpose()
    };
    let (since, until) = (time("since")?, time("until")?);
    if let (Some(s), Some(u)) = (since, until)
        && s >= u
    {
        return Err(ApiError::validation("`since` must be before `until`: the time range is upside down."));
    }
    let language = match get("language") {
        None => None,
        Some(l) if l == "und" || (l.len() == 2 && l.bytes().all(|b| b.is_ascii_lowercase())) => Some(l.to_owned()),
        Some(_) => {
            return Err(ApiError::validation("`language` must be a two-letter ISO 639-1 code, such as es, or und."));
        }
    };
    let sentiment =
        one_of("sentiment", &["positive", "neutral", "negative"])?.and_then(|s| Label::parse(&s)).map(Label::code);
    let min_likes = match get("min_likes") {
        None => 0,
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| ApiError::validation("`min_likes` must be a whole number, 0 or more."))?,
    };
    let replies = one_of("replies", &["only", "exclude"])?.map(|r| r == "only");
    let media = one_of("media", &["true", "false"])?.map(|m| m == "true");
    let author = match get("author").map(|a| a.trim().trim_start_matches('@')) {
        None => None,
        Some("") => return Err(ApiError::validation("`author` is empty: give a handle, such as @emma_rose0.")),
        Some(a) if a.chars().count() > 100 => {
            return Err(ApiError::validation("`author` is longer than 100 characters."));
        }
        Some(a) => Some(a.to_lowercase()),
    };
    let order = match one_of("sort", &["relevance", "newest", "likes"])?.as_deref() {
        None | Some("relevance") => Order::Relevance,
        Some("newest") => Order::Newest,
        _ => Order::Likes,
    };
    let limit = match get("limit") {
        None => SEARCH_PAGE_DEFAULT,
        Some(v) => v.parse::<i64>().ok().filter(|n| (1..=SEARCH_PAGE_MAX).contains(n)).ok_or_else(|| {
            ApiError::validation(format!("`limit` must be a whole number between 1 and {SEARCH_PAGE_MAX}."))
        })?,
    };
    let filter =
        Filter { platform, refs, creator, since, until, language, sentiment, min_likes, replies, media, author };
    let fingerprint = fingerprint(&query, &filter, order);
    let offset = match get("cursor") {
        None => 0,
        Some(c) => decode_cursor(c, &fingerprint)?,
    };
    Ok(Asked { query, filter, order, limit, offset, fingerprint })
}

fn in_words(values: &[&str]) -> String {
    match values {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// A digest of what a page depends on besides its position.
fn fingerprint(query: &Query, filter: &Filter, order: Order) -> String {
    let text = format!("{}\u{1}{filter:?}\u{1}{order:?}", query.fts5());
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn encode_cursor(fingerprint: &str, offset: i64) -> String {
    BASE64.encode(format!("{fingerprint}|{offset}"))
}

fn decode_cursor(cursor: &str, fingerprint: &str) -> Result<i64, ApiError> {
    let raw = BASE64.decode(cursor).ok().and_then(|b| String::from_utf8(b).ok());
    let (of, offset) = raw
        .as_deref()
        .and_then(|r| r.split_once('|'))
        .and_then(|(f, o)| Some((f.to_owned(), o.parse::<i64>().ok().filter(|o| *o >= 0)?)))
        .ok_or_else(|| ApiError::validation("`cursor` is not one this API returned."))?;
    if of != fingerprint {
        return Err(ApiError::validation(
            "`cursor` belongs to another search: give it with the same `q`, filters and `sort` as the page that returned it.",
        ));
    }
    if offset >= SEARCH_MAX_DEPTH {
        return Err(ApiError::validation(format!(
            "A search pages through its first {SEARCH_MAX_DEPTH} comments at most: narrow the query or its filters."
        )));
    }
    Ok(offset)
}

/// `GET /comments/search`.
pub async fn search(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, asked) =
        authorized(&req, &state, Scope::LibraryWrite, async |_| asked(req.query_string())).await?;
    let fts5 = asked.query.fts5();
    let tsquery = asked.query.tsquery();
    let words = Words { fts5: &fts5, tsquery: &tsquery };
    let limit = asked.limit.min(SEARCH_MAX_DEPTH - asked.offset);
    let hits = search::comments(
        &state.backends.db,
        &principal.account_id,
        words,
        &asked.filter,
        asked.order,
        (asked.offset, limit),
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let next = asked.offset + hits.len() as i64;
    let next_cursor =
        (hits.len() as i64 == limit && next < SEARCH_MAX_DEPTH).then(|| encode_cursor(&asked.fingerprint, next));
    let items: Vec<Value> = hits.iter().map(|h| item(h, &asked.query)).collect();
    Ok(meter.json(HttpResponse::Ok(), &json!({"items": items, "next_cursor": next_cursor})))
}

/// One hit as the API shows it: the comment, its post, the words that matched.
fn item(hit: &Hit, query: &Query) -> Value {
    let mut comment: Value = serde_json::from_str(&hit.body).unwrap_or_else(|_| json!({}));
    if let Some(c) = comment.as_object_mut() {
        c.remove("replies");
        c.insert("parent_id".into(), json!(hit.parent_id));
        c.insert("first_seen_at".into(), json!(hit.first_seen_at.map(rfc3339)));
    }
    let text = comment["text"].as_str().unwrap_or_default();
    let matches = query.matches(text, hit.language.as_deref());
    let metadata: Value = hit.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default();
    let title = cova_domain::export::post_title(&metadata);
    json!({
        "comment": comment,
        "post": {
            "ref": hit.r#ref,
            "platform": hit.platform,
            "url": hit.url,
            "title": (!title.is_empty()).then_some(title),
            "author": metadata["author"]["handle"].as_str(),
        },
        "matches": matches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_read_and_refused_in_words() {
        let ok = asked("q=refund&platform=tiktok&ref=tiktok:7000000000000000012&ref=tiktok:7000000000000000013&since=2026-12-01T00:00:00Z&until=2026-12-02T00:00:00Z&language=es&sentiment=negative&min_likes=3&replies=only&media=true&author=%40Emma&sort=likes&limit=5").expect("valid");
        assert_eq!(ok.filter.refs.len(), 2);
        assert_eq!(
            (ok.filter.author.as_deref(), ok.filter.replies, ok.order),
            (Some("emma"), Some(true), Order::Likes)
        );
        for bad in [
            "",
            "q=",
            "q=%20%20",
            "q=!!!",
            "q=a&x=1",
            "q=a&q=b",
            "q=a&platform=vimeo",
            "q=a&ref=nope",
            "q=a&since=yesterday",
            "q=a&since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z",
            "q=a&language=spanish",
            "q=a&sentiment=angry",
            "q=a&min_likes=-1",
            "q=a&replies=yes",
            "q=a&media=1",
            "q=a&author=@",
            "q=a&sort=best",
            "q=a&limit=0",
            "q=a&limit=101",
            "q=a&cursor=xyz",
            "q=a%00b",
        ] {
            let err = asked(bad).err().unwrap_or_else(|| panic!("{bad} is refused"));
            assert!(!err.detail.is_empty() && err.code == cova_errors::ErrorCode::ValidationError, "{bad}");
        }
    }

    #[test]
    fn a_cursor_goes_with_its_own_search_and_no_deeper_than_the_limit() {
        let first = asked("q=refund&sort=newest").expect("valid");
        let cursor = encode_cursor(&first.fingerprint, 20);
        assert_eq!(asked(&format!("q=refund&sort=newest&cursor={cursor}")).expect("same search").offset, 20);
        assert!(asked(&format!("q=refund&sort=likes&cursor={cursor}")).is_err(), "another order");
        assert!(asked(&format!("q=refunds%20now&sort=newest&cursor={cursor}")).is_err(), "another query");
        let deep = encode_cursor(&first.fingerprint, SEARCH_MAX_DEPTH);
        assert!(asked(&format!("q=refund&sort=newest&cursor={deep}")).is_err());
    }
}
