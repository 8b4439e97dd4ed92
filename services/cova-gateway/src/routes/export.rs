//! `GET /api/v1/analyses/{ref}/export?format=csv|jsonl|xlsx`: the breakdown as a download, one
//! row per comment (replies after their parent, with its id), for spreadsheets and pipelines.
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
use cova_domain::export::{self, COLUMNS, inert};
use cova_domain::time::rfc3339;
use cova_errors::ApiError;
use cova_platforms::PostRef;
use cova_storage::Db;
use cova_storage::repo::analyses;
use cova_storage::repo::breakdown::{self, Row};
use futures::Stream;
use serde::Deserialize;
use serde_json::Value;

/// Comments read from the database per step of the stream.
const CHUNK: i64 = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Csv,
    Jsonl,
    Xlsx,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
            Format::Xlsx => "xlsx",
        }
    }

    fn content_type(self) -> &'static str {
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

pub async fn export(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let principal = authenticate(&req, &state).await?;
    let (r#ref, format) = before_limit(&state, &principal, &Limit::api(&state, &principal.account_id), async {
        principal.require(Scope::LibraryWrite)?;
        crate::input::text("ref", &path)?;
        let r#ref = path.parse::<PostRef>().map_err(|e| ApiError::validation(e.detail().to_owned()))?;
        let params = web::Query::<Params>::from_query(req.query_string()).map_err(backend_errors::query)?;
        let format = match params.format.as_deref() {
            None | Some("csv") => Format::Csv,
            Some("jsonl") => Format::Jsonl,
            Some("xlsx") => Format::Xlsx,
            Some(_) => return Err(ApiError::validation("`format` must be csv, jsonl or xlsx.")),
        };
        Ok((r#ref, format))
    })
    .await?;
    let (meter, _) = Meter::api(&state, &principal).await?;
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
    let filename = format!("{}-{}.{}", r#ref.platform.as_str(), r#ref.id, format.extension());
    let mut res = HttpResponse::Ok();
    res.content_type(format.content_type())
        .insert_header(("content-disposition", format!("attachment; filename=\"{filename}\"")));
    let db = state.backends.db.clone();
    let source = (principal.account_id.clone(), r#ref.to_string(), job.clone());
    match format {
        Format::Csv => Ok(meter.stream(res, rows(db, source, encode_csv))),
        Format::Jsonl => Ok(meter.stream(res, rows(db, source, encode_jsonl))),
        Format::Xlsx => {
            let file = write_xlsx(&db, &job).await.map_err(|e| meter.fail(e))?;
            if !still_breakdown(&db, &principal.account_id, &r#ref.to_string(), &job).await {
                return Err(meter
                    .fail(ApiError::new(
                        cova_errors::ErrorCode::Unavailable,
                        "The breakdown changed while it was exported; export again.",
                    ))
                    .into());
            }
            Ok(meter.stream(res, file_chunks(file)))
        }
    }
}

/// The stored comments of `job` in chunks, each encoded by `encode` (given whether it is the
/// first chunk, so a header can lead).
fn rows(
    db: Db,
    (account, r#ref, job): (String, String, String),
    encode: fn(&[Row], bool) -> Bytes,
) -> impl Stream<Item = Result<Bytes, actix_web::Error>> {
    futures::stream::unfold(Some(-1_i64), move |after| {
        let (db, account, r#ref, job) = (db.clone(), account.clone(), r#ref.clone(), job.clone());
        async move {
            let after = after?;
            match breakdown::chunk(&db, &job, after, CHUNK).await {
                Ok(chunk) => {
                    let first = after < 0;
                    if chunk.is_empty() && !first {
                        return None;
                    }
                    let next = (chunk.len() as i64 == CHUNK).then(|| chunk.last().map_or(after, |r| r.position));
                    // The last chunk: if a new scrape or a purge released these comments while
                    // they were read, the download must not look complete.
                    if next.is_none() && !still_breakdown(&db, &account, &r#ref, &job).await {
                        tracing::warn!(job.id = %job, "export stopped: the breakdown changed while it was read");
                        return Some((
                            Err(actix_web::error::ErrorConflict("the breakdown changed; export again")),
                            None,
                        ));
                    }
                    Some((Ok(encode(&chunk, first)), next))
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

/// True while `job`'s comments are still the account's breakdown of `ref`.
async fn still_breakdown(db: &Db, account: &str, r#ref: &str, job: &str) -> bool {
    matches!(analyses::get(db, account, r#ref).await, Ok(Some(a)) if a.breakdown_job() == Some(job))
}

/// The cells of one comment, in [`COLUMNS`] order.
fn cells(row: &Row) -> [String; 14] {
    let v: Value = serde_json::from_str(&row.body).unwrap_or(Value::Null);
    let first_seen = row.first_seen_at.map(rfc3339).unwrap_or_default();
    export::cells(&v, &row.comment_id, row.parent_id.as_deref().unwrap_or_default(), &first_seen)
}

fn encode_csv(chunk: &[Row], first: bool) -> Bytes {
    let mut out = csv::Writer::from_writer(Vec::with_capacity(chunk.len() * 256));
    if first {
        let _ = out.write_record(COLUMNS);
    }
    for row in chunk {
        let _ = out.write_record(cells(row).into_iter().map(inert));
    }
    Bytes::from(out.into_inner().unwrap_or_default())
}

/// One comment per line: its stored body with `first_seen_at`, written as it is stored.
fn encode_jsonl(chunk: &[Row], _first: bool) -> Bytes {
    let mut out = Vec::with_capacity(chunk.len() * 512);
    for row in chunk {
        if super::stream::write_comment(&mut out, row, None) {
            out.push(b'\n');
        }
    }
    Bytes::from(out)
}

/// Writes the workbook to a temporary file: comments are read in chunks and handed to a
/// blocking writer thread, which keeps only the current row in memory.
async fn write_xlsx(db: &Db, job: &str) -> Result<tempfile::NamedTempFile, ApiError> {
    let file = tempfile::NamedTempFile::new().map_err(|e| {
        tracing::error!(error = %e, "no temporary file for an export");
        ApiError::internal()
    })?;
    let path = file.path().to_owned();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Row>>(2);
    let writer = tokio::task::spawn_blocking(move || -> Result<(), rust_xlsxwriter::XlsxError> {
        let mut workbook = rust_xlsxwriter::Workbook::new();
        let sheet = workbook.add_worksheet_with_constant_memory()?;
        for (col, name) in COLUMNS.iter().enumerate() {
            sheet.write_string(0, col as u16, *name)?;
        }
        let mut line: u32 = 1;
        while let Ok(chunk) = rx.recv() {
            for row in &chunk {
                for (col, cell) in cells(row).into_iter().enumerate() {
                    let col = col as u16;
                    match COLUMNS[col as usize] {
                        "likes" | "reply_count" => {
                            sheet.write_number(line, col, cell.parse::<f64>().unwrap_or(0.0))?;
                        }
                        "pinned" | "liked_by_author" => {
                            sheet.write_boolean(line, col, cell == "true")?;
                        }
                        _ => {
                            sheet.write_string(line, col, cell)?;
                        }
                    }
                }
                line += 1;
            }
        }
        workbook.save(&path)
    });
    let mut after = -1;
    loop {
        let chunk = breakdown::chunk(db, job, after, CHUNK).await.map_err(backend_errors::storage)?;
        let last = chunk.last().map(|r| r.position);
        let done = (chunk.len() as i64) < CHUNK;
        if !chunk.is_empty() && tx.send(chunk).is_err() {
            break;
        }
        match last {
            Some(p) if !done => after = p,
            _ => break,
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
fn file_chunks(file: tempfile::NamedTempFile) -> impl Stream<Item = Result<Bytes, actix_web::Error>> {
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
        }
    }

    #[test]
    fn csv_rows_carry_the_parent_and_neutralise_formulas() {
        let out = encode_csv(&[row("1", None, "=HYPERLINK(\"x\")"), row("2", Some("1"), "a, \"b\"")], true);
        let mut reader = csv::Reader::from_reader(&out[..]);
        assert_eq!(reader.headers().expect("header").iter().collect::<Vec<_>>(), COLUMNS);
        let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
        assert_eq!(&records[0][2], "'=HYPERLINK(\"x\")");
        assert_eq!((&records[1][0], &records[1][1], &records[1][2]), ("2", "1", "a, \"b\""));
    }
}
