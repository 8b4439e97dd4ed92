//! `GET /api/v1/analyses/{ref}/export?format=csv|jsonl|xlsx` and
//! `GET /api/v1/analyze/{job_id}/export`: comments as a download, one row per comment (replies after their parent, with its id), for spreadsheets and pipelines.
//! CSV and JSON Lines are streamed in chunks straight from the database; an XLSX workbook is a
//! zip archive that can only be sent once complete, so it is written row by row to a temporary
//! file in constant memory and then streamed from there.

use crate::auth::authenticate;
use crate::error::HttpResult;
use crate::metering::{Limit, Meter, before_limit};
use crate::{AppState, backend_errors};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_domain::export::{self, COLUMNS, Cell, Post, inert};
use cova_domain::time::rfc3339;
use cova_domain::{JobKind, JobStatus};
use cova_errors::ApiError;
use cova_platforms::PostRef;
use cova_storage::Db;
use cova_storage::repo::breakdown::{self, Row};
use cova_storage::repo::{analyses, jobs};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};

/// Comments read from the database per step of the stream.
const CHUNK: i64 = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Csv,
    Jsonl,
    Xlsx,
}

impl Format {
    /// The `format` parameter: CSV when absent.
    pub(super) fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        match raw {
            None | Some("csv") => Ok(Format::Csv),
            Some("jsonl") => Ok(Format::Jsonl),
            Some("xlsx") => Ok(Format::Xlsx),
            Some(_) => Err(ApiError::validation("`format` must be csv, jsonl or xlsx.")),
        }
    }

    pub(super) fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
            Format::Xlsx => "xlsx",
        }
    }

    pub(super) fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Jsonl => "application/x-ndjson",
            Format::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    format: Option<String>,
}

fn format_of(req: &HttpRequest) -> Result<Format, ApiError> {
    let params = web::Query::<Params>::from_query(req.query_string()).map_err(backend_errors::query)?;
    Format::parse(params.format.as_deref())
}

/// The post columns of a download's rows, owned.
#[derive(Default)]
pub(super) struct Posted {
    pub url: String,
    pub title: String,
    /// Where media paths point: the configured public URL, else the address the request used.
    pub origin: String,
}

impl Posted {
    pub(super) fn post(&self) -> Post<'_> {
        Post { url: &self.url, title: &self.title, origin: &self.origin }
    }
}

/// One row of a download: a stored comment and its post.
pub(super) struct Line {
    pub row: Row,
    pub post: std::sync::Arc<Posted>,
}

/// Where media paths of a download point: the configured public URL, else the address this
/// request used.
pub(super) fn origin(req: &HttpRequest, state: &AppState) -> String {
    if state.config.workspace.public_url.is_empty() {
        let info = req.connection_info();
        format!("{}://{}", info.scheme(), info.host())
    } else {
        state.config.workspace.base_url(&state.config.http.addr)
    }
}

/// What one export reads and the post columns it writes.
#[derive(Clone)]
struct Source {
    account: String,
    r#ref: String,
    job: String,
    post: std::sync::Arc<Posted>,
}

impl Source {
    fn new(req: &HttpRequest, state: &AppState, entry: &analyses::Analysis, job: String) -> Self {
        let metadata: Value = entry.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default();
        let post = Posted { url: entry.url.clone(), title: export::post_title(&metadata), origin: origin(req, state) };
        Source { account: entry.account_id.clone(), r#ref: entry.r#ref.clone(), job, post: std::sync::Arc::new(post) }
    }
}

/// `GET /analyses/{ref}/export`: the breakdown of a library entry.
pub async fn export(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let principal = authenticate(&req, &state).await?;
    let (r#ref, format) = before_limit(&state, &principal, &Limit::api(&state, &principal.account_id), async {
        principal.require(Scope::LibraryWrite)?;
        crate::input::text("ref", &path)?;
        let r#ref = path.parse::<PostRef>().map_err(|e| ApiError::validation(e.detail().to_owned()))?;
        Ok((r#ref, format_of(&req)?))
    })
    .await?;
    let (meter, _) = Meter::api(&state, &principal).await?;
    // A newer scrape can replace the breakdown while a workbook is written; the export then
    // starts again from the new one, as a request a moment later would have.
    for _ in 0..EXPORT_ATTEMPTS {
        let entry = analyses::get_saved(&state.backends.db, &principal.account_id, &r#ref.to_string())
            .await
            .map_err(|e| meter.fail(backend_errors::storage(e)))?
            .ok_or_else(|| meter.fail(ApiError::not_found(format!("`{ref}` is not in this account's library."))))?;
        let Some(job) = entry.breakdown_job().map(str::to_owned) else {
            return Err(meter
                .fail(ApiError::not_found(format!(
                    "`{ref}` has no breakdown to export (it is {}); refresh it first.",
                    entry.status.as_str()
                )))
                .into());
        };
        let source = Source::new(&req, &state, &entry, job);
        if let Some(body) = body(&state.backends.db, source, format).await.map_err(|e| meter.fail(e))? {
            return Ok(send(&state.backends.db, meter, body, format));
        }
    }
    Err(meter
        .fail(ApiError::new(
            cova_errors::ErrorCode::Unavailable,
            format!("`{ref}` was collected again while it was exported, {EXPORT_ATTEMPTS} times; export it again."),
        ))
        .into())
}

/// `GET /analyze/{job_id}/export`: the comments of any finished analyze job of the account
/// while they are kept, whether or not its post is in the library (a cookie session's
/// analyses are not).
pub async fn export_job(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let principal = authenticate(&req, &state).await?;
    let format = before_limit(&state, &principal, &Limit::api(&state, &principal.account_id), async {
        principal.require(Scope::AnalyzeWrite)?;
        format_of(&req)
    })
    .await?;
    let (meter, _) = Meter::api(&state, &principal).await?;
    let db = &state.backends.db;
    let no_job = || ApiError::not_found("No such job.");
    let job = match uuid::Uuid::parse_str(&path) {
        Ok(_) => jobs::get_for_account(db, &path, &principal.account_id)
            .await
            .map_err(|e| meter.fail(backend_errors::storage(e)))?
            .filter(|j| j.kind == JobKind::Analyze),
        Err(_) => None,
    };
    let job = job.ok_or_else(|| meter.fail(no_job()))?;
    if job.status != JobStatus::Complete {
        return Err(meter
            .fail(ApiError::not_found(format!(
                "Job {} has no comments to export: it is {}. Export it once it is complete.",
                job.id,
                job.status.in_words()
            )))
            .into());
    }
    let entry = analyses::get(db, &principal.account_id, &job.r#ref)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .filter(|a| a.breakdown_job() == Some(job.id.as_str()))
        .ok_or_else(|| meter.fail(no_longer_kept(&job.id)))?;
    let source = Source::new(&req, &state, &entry, job.id.clone());
    match body(db, source, format).await.map_err(|e| meter.fail(e))? {
        Some(body) => Ok(send(db, meter, body, format)),
        // Replaced while its workbook was written: the same answer as a moment later.
        None => Err(meter.fail(no_longer_kept(&job.id)).into()),
    }
}

/// How many times a library export starts again when its breakdown is replaced meanwhile.
const EXPORT_ATTEMPTS: usize = 3;

fn no_longer_kept(job: &str) -> ApiError {
    ApiError::not_found(format!(
        "The comments of job {job} are no longer kept: a newer scrape of the post replaced them, or {} \
         passed. Export the newer job, or collect the post again.",
        cova_domain::limits::in_words(cova_domain::limits::LIBRARY_LIFETIME)
    ))
}

/// What a download sends: rows streamed from the database, or a finished workbook.
enum Body {
    Rows(Source),
    Workbook(Source, tempfile::NamedTempFile),
}

/// Prepares the download of `source`; `None` when its comments stopped being the breakdown
/// while a workbook was written (a streamed format notices that at its last chunk instead).
async fn body(db: &Db, source: Source, format: Format) -> Result<Option<Body>, ApiError> {
    if format != Format::Xlsx {
        return Ok(Some(Body::Rows(source)));
    }
    let file = write_xlsx(db, &source).await?;
    Ok(still_breakdown(db, &source).await.then_some(Body::Workbook(source, file)))
}

fn send(db: &Db, meter: Meter, body: Body, format: Format) -> HttpResponse {
    let (Body::Rows(source) | Body::Workbook(source, _)) = &body;
    let (platform, id) = source.r#ref.split_once(':').unwrap_or(("post", source.r#ref.as_str()));
    let filename = format!("{platform}-{id}.{}", format.extension());
    let mut res = HttpResponse::Ok();
    res.content_type(format.content_type())
        .insert_header(("content-disposition", format!("attachment; filename=\"{filename}\"")));
    match (body, format) {
        (Body::Workbook(_, file), _) => meter.stream(res, file_chunks(file)),
        (Body::Rows(source), Format::Jsonl) => meter.stream(res, rows(db.clone(), source, encode_jsonl)),
        (Body::Rows(source), _) => meter.stream(res, rows(db.clone(), source, encode_csv)),
    }
}

/// The stored comments of `job` in chunks, each encoded by `encode` (given whether it is the
/// first chunk, so a header can lead).
fn rows(
    db: Db,
    source: Source,
    encode: fn(&[Row], bool, &Post<'_>) -> Bytes,
) -> impl Stream<Item = Result<Bytes, actix_web::Error>> {
    futures::stream::unfold(Some(-1_i64), move |after| {
        let (db, source) = (db.clone(), source.clone());
        async move {
            let after = after?;
            match breakdown::chunk(&db, &source.job, after, CHUNK).await {
                Ok(chunk) => {
                    let first = after < 0;
                    if chunk.is_empty() && !first {
                        return None;
                    }
                    let next = (chunk.len() as i64 == CHUNK).then(|| chunk.last().map_or(after, |r| r.position));
                    // The last chunk: if a new scrape or a purge released these comments while
                    // they were read, the download must not look complete.
                    if next.is_none() && !still_breakdown(&db, &source).await {
                        tracing::warn!(job.id = %source.job, "export stopped: the breakdown changed while it was read");
                        return Some((
                            Err(actix_web::error::ErrorConflict("the breakdown changed; export again")),
                            None,
                        ));
                    }
                    Some((Ok(encode(&chunk, first, &source.post.post())), next))
                }
                Err(e) => {
                    // Headers are out: the download ends short, and the log says why.
                    tracing::warn!(error = %e, "export stopped: reading comments failed");
                    Some((Err(actix_web::error::ErrorServiceUnavailable("export interrupted")), None))
                }
            }
        }
    })
}

/// True while the source's comments are still the account's breakdown of its post.
async fn still_breakdown(db: &Db, source: &Source) -> bool {
    matches!(analyses::get(db, &source.account, &source.r#ref).await,
             Ok(Some(a)) if a.breakdown_job() == Some(source.job.as_str()))
}

/// The cells of one comment, in [`COLUMNS`] order.
fn cells(row: &Row, post: &Post<'_>) -> [String; 16] {
    let v: Value = serde_json::from_str(&row.body).unwrap_or(Value::Null);
    let first_seen = row.first_seen_at.map(rfc3339).unwrap_or_default();
    export::cells(&v, &row.comment_id, row.parent_id.as_deref().unwrap_or_default(), &first_seen, post)
}

pub(super) fn encode_csv(chunk: &[Row], first: bool, post: &Post<'_>) -> Bytes {
    let mut buf = Vec::with_capacity(chunk.len() * 256 + 3);
    if first {
        buf.extend_from_slice(export::BOM.as_bytes());
    }
    let mut out = csv::Writer::from_writer(buf);
    if first {
        let _ = out.write_record(COLUMNS);
    }
    for row in chunk {
        let _ = out.write_record(cells(row, post).into_iter().map(inert));
    }
    Bytes::from(out.into_inner().unwrap_or_default())
}

/// One comment per line: its stored body with `first_seen_at`, its media links made absolute
/// (a file read elsewhere still opens them), then `post_url` and `post_title` (the CSV's first
/// columns), so that the lines of several posts joined in one file stay apart.
pub(super) fn encode_jsonl(chunk: &[Row], _first: bool, post: &Post<'_>) -> Bytes {
    let mut out = Vec::with_capacity(chunk.len() * 640);
    for row in chunk {
        let Ok(Value::Object(mut comment)) = serde_json::from_str::<Value>(&row.body) else {
            tracing::warn!(comment.id = %row.comment_id, "a stored comment is not a JSON object; left out");
            continue;
        };
        comment.insert("first_seen_at".into(), json!(row.first_seen_at.map(rfc3339)));
        comment.entry("parent_id").or_insert_with(|| json!(row.parent_id));
        let mut comment = Value::Object(comment);
        export::absolute_media(&mut comment, post.origin);
        comment["post_url"] = json!(post.url);
        comment["post_title"] = json!(post.title);
        if serde_json::to_writer(&mut out, &comment).is_ok() {
            out.push(b'\n');
        }
    }
    Bytes::from(out)
}

/// The workbook of a scrape's comments (see [`workbook`]).
async fn write_xlsx(db: &Db, source: &Source) -> Result<tempfile::NamedTempFile, ApiError> {
    let (mut after, mut done) = (-1, false);
    workbook(async || {
        if done {
            return Ok(None);
        }
        let chunk = breakdown::chunk(db, &source.job, after, CHUNK).await.map_err(backend_errors::storage)?;
        done = (chunk.len() as i64) < CHUNK;
        after = chunk.last().map_or(after, |r| r.position);
        Ok(Some(chunk.into_iter().map(|row| Line { row, post: source.post.clone() }).collect()))
    })
    .await
}

/// Writes a workbook to a temporary file: rows come from `next` in chunks (`None` after the
/// last) and are handed to a blocking writer thread, which keeps only the current row in
/// memory. One sheet named "Comments", its header row frozen, numbers, booleans and times as
/// typed cells.
pub(super) async fn workbook(
    mut next: impl AsyncFnMut() -> Result<Option<Vec<Line>>, ApiError>,
) -> Result<tempfile::NamedTempFile, ApiError> {
    let file = tempfile::NamedTempFile::new().map_err(|e| {
        tracing::error!(error = %e, "no temporary file for an export");
        ApiError::internal()
    })?;
    let path = file.path().to_owned();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Line>>(2);
    let writer = tokio::task::spawn_blocking(move || -> Result<(), rust_xlsxwriter::XlsxError> {
        use rust_xlsxwriter::{ExcelDateTime, Format as Style, Workbook};
        let mut workbook = Workbook::new();
        let (bold, time) = (Style::new().set_bold(), Style::new().set_num_format("yyyy-mm-dd hh:mm:ss"));
        let sheet = workbook.add_worksheet_with_constant_memory()?;
        sheet.set_name("Comments")?;
        sheet.set_freeze_panes(1, 0)?;
        for (col, name) in COLUMNS.iter().enumerate() {
            sheet.write_string_with_format(0, col as u16, *name, &bold)?;
        }
        let mut line: u32 = 1;
        while let Ok(chunk) = rx.recv() {
            for comment in &chunk {
                for (col, cell) in cells(&comment.row, &comment.post.post()).into_iter().enumerate() {
                    let (col, column) = (col as u16, COLUMNS[col]);
                    match export::kind(column) {
                        Cell::Number => {
                            sheet.write_number(line, col, cell.parse::<f64>().unwrap_or(0.0))?;
                        }
                        Cell::Boolean => {
                            sheet.write_boolean(line, col, cell == "true")?;
                        }
                        Cell::Time if !cell.is_empty() => match ExcelDateTime::parse_from_str(&cell) {
                            Ok(at) => {
                                sheet.write_datetime_with_format(line, col, &at, &time)?;
                            }
                            Err(_) => {
                                sheet.write_string(line, col, cell)?;
                            }
                        },
                        Cell::Time => {}
                        // A string cell is text, never a formula: a comment starting with
                        // `@name` or `=` stays as written (the CSV needs its guard, this does not).
                        Cell::Text => {
                            sheet.write_string(line, col, cell)?;
                        }
                    }
                }
                line += 1;
            }
        }
        workbook.save(&path)
    });
    while let Some(chunk) = next().await? {
        if !chunk.is_empty() && tx.send(chunk).is_err() {
            break;
        }
    }
    drop(tx);
    match writer.await {
        Ok(Ok(())) => Ok(file),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "writing an XLSX export failed");
            Err(ApiError::internal())
        }
        Err(e) => {
            tracing::error!(error = %e, "the XLSX writer stopped");
            Err(ApiError::internal())
        }
    }
}

/// A finished file, sent in 64 KiB chunks; it is deleted when the stream ends.
pub(super) fn file_chunks(file: tempfile::NamedTempFile) -> impl Stream<Item = Result<Bytes, actix_web::Error>> {
    use tokio::io::AsyncReadExt;
    let path = file.path().to_owned();
    futures::stream::unfold((None::<tokio::fs::File>, Some(file)), move |(open, keep)| {
        let path = path.clone();
        async move {
            let keep = keep?;
            let mut f = match open {
                Some(f) => f,
                None => match tokio::fs::File::open(&path).await {
                    Ok(f) => f,
                    Err(e) => return Some((Err(actix_web::error::ErrorInternalServerError(e)), (None, None))),
                },
            };
            let mut buf = vec![0; 64 * 1024];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(Bytes::from(buf)), (Some(f), Some(keep))))
                }
                Err(e) => Some((Err(actix_web::error::ErrorInternalServerError(e)), (None, None))),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, parent: Option<&str>, text: &str) -> Row {
        Row {
            position: 0,
            comment_id: id.into(),
            parent_id: parent.map(str::to_owned),
            body: serde_json::json!({"id": id, "text": text, "author": {"id": "u", "handle": "h"}, "likes": 3})
                .to_string(),
            first_seen_at: Some(0),
            sentiment: None,
        }
    }

    #[test]
    fn json_lines_name_their_post_and_link_media_absolutely() {
        let post =
            Post { url: "https://www.tiktok.com/@a/video/7", title: "A \"quoted\" title", origin: "https://c.example" };
        let mut with_image = row("2", Some("1"), "}");
        with_image.body =
            with_image.body.replace("\"likes\"", "\"media\":[{\"url\":\"/api/v1/media/file?id=9\"}],\"likes\"");
        let out = encode_jsonl(&[row("1", None, "hi"), with_image], false, &post);
        let lines: Vec<Value> =
            std::str::from_utf8(&out).expect("utf-8").lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
        assert_eq!(lines.len(), 2);
        for line in &lines {
            assert_eq!((line["post_url"].as_str(), line["post_title"].as_str()), (Some(post.url), Some(post.title)));
            assert!(line.get("replies").is_none());
        }
        assert_eq!((lines[1]["id"].as_str(), lines[1]["text"].as_str()), (Some("2"), Some("}")));
        assert_eq!((lines[0]["parent_id"].clone(), lines[1]["parent_id"].as_str()), (Value::Null, Some("1")));
        assert_eq!(lines[1]["media"][0]["url"], "https://c.example/api/v1/media/file?id=9");
        assert_eq!(lines[0]["first_seen_at"], "1970-01-01T00:00:00Z");
    }

    #[test]
    fn csv_rows_carry_the_parent_and_neutralise_formulas() {
        let post = Post { url: "https://www.tiktok.com/@a/video/7", title: "Title", origin: "http://h" };
        let out = encode_csv(&[row("1", None, "=HYPERLINK(\"x\")"), row("2", Some("1"), "a, \"b\"")], true, &post);
        let body = out.strip_prefix(export::BOM.as_bytes()).expect("a byte order mark first");
        let mut reader = csv::Reader::from_reader(body);
        assert_eq!(reader.headers().expect("header").iter().collect::<Vec<_>>(), COLUMNS);
        let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
        assert_eq!((&records[0][0], &records[0][1]), (post.url, "Title"));
        assert_eq!(&records[0][4], "'=HYPERLINK(\"x\")");
        assert_eq!((&records[1][2], &records[1][3], &records[1][4]), ("2", "1", "a, \"b\""));
        // Only the first chunk carries the mark and the header.
        assert!(!encode_csv(&[row("3", None, "x")], false, &post).starts_with(export::BOM.as_bytes()));
    }
}
