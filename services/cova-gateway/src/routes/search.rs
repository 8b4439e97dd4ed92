//! `GET /api/v1/comments/search` (scope `library:write`): full-text search over every comment
//! the account keeps in its library, across posts, creators and platforms, with filters, three
//! orders and an opaque cursor.

use super::analyses::parse_ref;
use super::export::{Format, Line, Posted};
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
use cova_storage::repo::breakdown::Row;
use cova_storage::repo::search::{self, Filter, Hit, Order, Words};
use serde_json::{Value, json};

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Every parameter of a page; `ref` alone may repeat. An export takes the same but `limit` and
/// `cursor`, and takes `format`.
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
    /// An export's `format`.
    format: Option<String>,
}

/// What a request is: a page of hits, or the download of them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asking {
    Page,
    Export,
}

impl Asking {
    fn parameters(self) -> Vec<&'static str> {
        match self {
            Asking::Page => PARAMETERS.to_vec(),
            Asking::Export => {
                PARAMETERS.iter().copied().filter(|p| !matches!(*p, "limit" | "cursor")).chain(["format"]).collect()
            }
        }
    }
}

/// Reads the query string: unknown parameters, repeats and bad values are 400 in words.
fn asked(query_string: &str, asking: Asking) -> Result<Asked, ApiError> {
    let parameters = asking.parameters();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (key, value) in url::form_urlencoded::parse(query_string.as_bytes()) {
        if !parameters.contains(&key.as_ref()) {
            return Err(ApiError::validation(format!(
                "Unknown parameter `{}`: {} takes {}.",
                key.chars().take(40).collect::<String>(),
                if asking == Asking::Page { "the search" } else { "the search's export" },
                parameters.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
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
    let creator = get("creator")
        .map(|c| {
            super::creators::parse_ref(c).map_err(|_| {
                ApiError::validation(
                    "`creator` must be a creator ref such as tiktok:user:<id>, youtube:channel:UC… or instagram:user:<id>, as GET /api/v1/creators shows it.",
                )
            })
        })
        .transpose()?;
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
    let format = get("format").map(str::to_owned);
    Ok(Asked { query, filter, order, limit, offset, fingerprint, format })
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
        authorized(&req, &state, Scope::LibraryWrite, async |_| asked(req.query_string(), Asking::Page)).await?;
    let fts5 = asked.query.fts5();
    let tsquery = asked.query.tsquery();
    let words = Words { fts5: &fts5, tsquery: &tsquery };
    let limit = asked.limit.min(SEARCH_MAX_DEPTH - asked.offset);
    let (hits, read) = search::comments(
        &state.backends.db,
        &principal.account_id,
        words,
        &asked.filter,
        asked.order,
        (asked.offset, limit),
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let next = asked.offset + read as i64;
    let next_cursor =
        (read as i64 == limit && next < SEARCH_MAX_DEPTH).then(|| encode_cursor(&asked.fingerprint, next));
    let items: Vec<Value> = hits.iter().map(|h| item(h, &asked.query)).collect();
    Ok(meter.json(HttpResponse::Ok(), &json!({"items": items, "next_cursor": next_cursor})))
}

/// Hits read per step of an export.
const EXPORT_CHUNK: i64 = 500;

/// `GET /comments/search/export?format=csv|jsonl|xlsx`: every hit of a search (its first
/// [`SEARCH_MAX_DEPTH`], in its order) as a download with the columns of a job's export, whose
/// first two are the post's.
pub async fn export(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, asked) = authorized(&req, &state, Scope::LibraryWrite, async |_| {
        let asked = asked(req.query_string(), Asking::Export)?;
        let format = Format::parse(asked.format.as_deref())?;
        Ok((asked, format))
    })
    .await?;
    let (asked, format) = asked;
    let origin = super::export::origin(&req, &state);
    let search = Search {
        db: state.backends.db.clone(),
        account: principal.account_id.clone(),
        fts5: asked.query.fts5(),
        tsquery: asked.query.tsquery(),
        filter: asked.filter,
        order: asked.order,
        origin,
    };
    let mut res = HttpResponse::Ok();
    res.content_type(format.content_type()).insert_header((
        "content-disposition",
        format!("attachment; filename=\"comments-search.{}\"", format.extension()),
    ));
    match format {
        Format::Xlsx => {
            let mut offset = 0;
            let file = super::export::workbook(async || {
                if offset >= SEARCH_MAX_DEPTH {
                    return Ok(None);
                }
                let (lines, read) = search.lines(offset).await?;
                offset = if (read as i64) < EXPORT_CHUNK { SEARCH_MAX_DEPTH } else { offset + EXPORT_CHUNK };
                Ok(Some(lines))
            })
            .await
            .map_err(|e| meter.fail(e))?;
            Ok(meter.stream(res, super::export::file_chunks(file)))
        }
        Format::Csv | Format::Jsonl => {
            let encode = if format == Format::Csv { super::export::encode_csv } else { super::export::encode_jsonl };
            let search = std::rc::Rc::new(search);
            let stream = futures::stream::unfold(Some(0_i64), move |offset| {
                let search = search.clone();
                async move {
                    let offset = offset?;
                    match search.lines(offset).await {
                        Ok((lines, read)) => {
                            let mut out = Vec::new();
                            for (i, line) in lines.iter().enumerate() {
                                out.extend_from_slice(&encode(
                                    std::slice::from_ref(&line.row),
                                    offset == 0 && i == 0,
                                    &line.post.post(),
                                ));
                            }
                            if offset == 0 && lines.is_empty() {
                                // The header alone: an empty result is still a file.
                                out.extend_from_slice(&encode(&[], true, &super::export::Posted::default().post()));
                            }
                            let next = offset + EXPORT_CHUNK;
                            let more = read as i64 == EXPORT_CHUNK && next < SEARCH_MAX_DEPTH;
                            Some((Ok(actix_web::web::Bytes::from(out)), more.then_some(next)))
                        }
                        Err(e) => {
                            // Headers are out: the download ends short, and the log says why.
                            tracing::warn!(detail = %e.detail, "search export stopped: reading comments failed");
                            Some((Err(actix_web::error::ErrorServiceUnavailable("export interrupted")), None))
                        }
                    }
                }
            });
            Ok(meter.stream(res, stream))
        }
    }
}

/// An export's search, read step by step.
struct Search {
    db: cova_storage::Db,
    account: String,
    fts5: String,
    tsquery: String,
    filter: Filter,
    order: Order,
    origin: String,
}

impl Search {
    /// The hits from `offset` on, as rows of a download, and how many rows were read.
    async fn lines(&self, offset: i64) -> Result<(Vec<Line>, usize), ApiError> {
        let words = Words { fts5: &self.fts5, tsquery: &self.tsquery };
        let (hits, read) =
            search::comments(&self.db, &self.account, words, &self.filter, self.order, (offset, EXPORT_CHUNK))
                .await
                .map_err(backend_errors::storage)?;
        let mut posts: Vec<std::sync::Arc<Posted>> = Vec::new();
        let lines = hits
            .into_iter()
            .enumerate()
            .map(|(i, hit)| {
                let post = match posts.iter().find(|p| p.url == hit.url) {
                    Some(p) => p.clone(),
                    None => {
                        let metadata: Value =
                            hit.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default();
                        let p = std::sync::Arc::new(Posted {
                            url: hit.url.clone(),
                            title: cova_domain::export::post_title(&metadata),
                            origin: self.origin.clone(),
                        });
                        posts.push(p.clone());
                        p
                    }
                };
                let row = Row {
                    position: offset + i as i64,
                    comment_id: hit.comment_id,
                    parent_id: hit.parent_id,
                    body: hit.body,
                    first_seen_at: hit.first_seen_at,
                    sentiment: None,
                };
                Line { row, post }
            })
            .collect::<Vec<_>>();
        Ok((lines, read))
    }
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

    fn asked_page(q: &str) -> Result<Asked, ApiError> {
        asked(q, Asking::Page)
    }

    #[test]
    fn parameters_are_read_and_refused_in_words() {
        let ok = asked_page("q=refund&platform=tiktok&ref=tiktok:7000000000000000012&ref=tiktok:7000000000000000013&since=2026-12-01T00:00:00Z&until=2026-12-02T00:00:00Z&language=es&sentiment=negative&min_likes=3&replies=only&media=true&author=%40Emma&sort=likes&limit=5").expect("valid");
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
            let err = asked(bad, Asking::Page).err().unwrap_or_else(|| panic!("{bad} is refused"));
            assert!(!err.detail.is_empty() && err.code == cova_errors::ErrorCode::ValidationError, "{bad}");
        }
    }

    #[test]
    fn a_cursor_goes_with_its_own_search_and_no_deeper_than_the_limit() {
        let first = asked_page("q=refund&sort=newest").expect("valid");
        let cursor = encode_cursor(&first.fingerprint, 20);
        assert_eq!(asked_page(&format!("q=refund&sort=newest&cursor={cursor}")).expect("same search").offset, 20);
        assert!(asked_page(&format!("q=refund&sort=likes&cursor={cursor}")).is_err(), "another order");
        assert!(asked_page(&format!("q=refunds%20now&sort=newest&cursor={cursor}")).is_err(), "another query");
        let deep = encode_cursor(&first.fingerprint, SEARCH_MAX_DEPTH);
        assert!(asked_page(&format!("q=refund&sort=newest&cursor={deep}")).is_err());
    }
}
