//! Writing results: to stdout, or to a file through `FILE.tmp` renamed once complete, so that a
//! failed run never leaves half a file under the name asked for. Also the client's own
//! rendering of comments as CSV and JSON Lines, the same rows and columns as the service's
//! export (`GET /analyses/{ref}/export`), for when that export cannot be used.

use super::ClientError;
use super::exit::Exit;
use cova_domain::export::{self, COLUMNS, inert};
use serde_json::Value;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Where a result goes. Dropped without [`Sink::finish`], a file sink removes its temporary
/// file and leaves the destination as it was.
pub enum Sink {
    Stdout(BufWriter<io::Stdout>),
    File(FileSink),
}

pub struct FileSink {
    file: Option<BufWriter<File>>,
    tmp: PathBuf,
    dest: PathBuf,
}

/// `None` and `-` mean stdout.
fn file_dest(dest: Option<&Path>) -> Option<&Path> {
    dest.filter(|p| p.as_os_str() != "-")
}

/// Fails early (before a job is started and paid for) when the output file cannot be created:
/// its directory does not exist, or it names a directory.
pub fn check_destination(dest: Option<&Path>) -> Result<(), ClientError> {
    let Some(dest) = file_dest(dest) else {
        return Ok(());
    };
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(ClientError::new(
            Exit::Other,
            format!("cannot write {}: the directory {} does not exist", dest.display(), dir.display()),
        ));
    }
    if dest.is_dir() {
        return Err(ClientError::new(Exit::Other, format!("cannot write {}: it is a directory", dest.display())));
    }
    Ok(())
}

impl Sink {
    pub fn open(dest: Option<&Path>) -> Result<Self, ClientError> {
        let Some(dest) = file_dest(dest) else {
            return Ok(Sink::Stdout(BufWriter::new(io::stdout())));
        };
        let mut tmp = dest.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp)
            .map_err(|e| ClientError::new(Exit::Other, format!("cannot write {}: {e}", tmp.display())))?;
        Ok(Sink::File(FileSink { file: Some(BufWriter::new(file)), tmp, dest: dest.to_owned() }))
    }

    /// What the sink writes to, for messages.
    pub fn label(&self) -> String {
        match self {
            Sink::Stdout(_) => "stdout".to_owned(),
            Sink::File(f) => f.dest.display().to_string(),
        }
    }

    /// The error for a failed write.
    pub fn write_error(&self, e: &io::Error) -> ClientError {
        ClientError::new(Exit::Other, format!("cannot write {}: {e}", self.label()))
    }

    /// Flushes; a file is synced and renamed to its destination.
    pub fn finish(self) -> Result<(), ClientError> {
        match self {
            Sink::Stdout(mut out) => {
                out.flush().map_err(|e| ClientError::new(Exit::Other, format!("cannot write stdout: {e}")))
            }
            Sink::File(mut file) => file.commit(),
        }
    }
}

impl FileSink {
    fn commit(&mut self) -> Result<(), ClientError> {
        let Some(writer) = self.file.take() else {
            return Ok(());
        };
        let done = writer
            .into_inner()
            .map_err(io::IntoInnerError::into_error)
            .and_then(|file| file.sync_all())
            .and_then(|()| std::fs::rename(&self.tmp, &self.dest));
        done.map_err(|e| {
            let _ = std::fs::remove_file(&self.tmp);
            ClientError::new(Exit::Other, format!("cannot write {}: {e}", self.dest.display()))
        })
    }
}

impl Drop for FileSink {
    fn drop(&mut self) {
        if let Some(writer) = self.file.take() {
            drop(writer);
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Stdout(out) => out.write(buf),
            Sink::File(f) => f.file.as_mut().ok_or_else(closed)?.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Stdout(out) => out.flush(),
            Sink::File(f) => f.file.as_mut().ok_or_else(closed)?.flush(),
        }
    }
}

fn closed() -> io::Error {
    io::Error::other("the output is already closed")
}

/// Writes `value` as indented JSON and a newline.
pub fn write_json(sink: &mut Sink, value: &Value) -> Result<(), ClientError> {
    serde_json::to_writer_pretty(&mut *sink, value)
        .map_err(io::Error::from)
        .and_then(|()| sink.write_all(b"\n"))
        .map_err(|e| sink.write_error(&e))
}

/// Prints `value` as indented JSON on stdout.
pub fn print_json(value: &Value) -> Result<(), ClientError> {
    let mut sink = Sink::open(None)?;
    write_json(&mut sink, value)?;
    sink.finish()
}

/// Prints one line on stdout (an error, not a panic, when stdout is closed).
pub fn print_line(line: &str) -> Result<(), ClientError> {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| ClientError::new(Exit::Other, format!("cannot write stdout: {e}")))
}

/// Row formats the client can render itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    Csv,
    Jsonl,
}

/// Writes nested comments (top-level comments, each with `replies`) one row per comment, each
/// top-level comment followed by its replies: CSV with the export's [`COLUMNS`], or JSON Lines
/// with each comment's `replies` empty, like the export's lines.
pub fn write_rows(sink: &mut Sink, comments: &[Value], rows: Rows) -> Result<(), ClientError> {
    let written = match rows {
        Rows::Csv => write_csv(&mut *sink, comments),
        Rows::Jsonl => write_jsonl(&mut *sink, comments),
    };
    written.map_err(|e| sink.write_error(&e))
}

/// Every comment, each top-level one followed by its replies; `replies` emptied.
fn flattened(comments: &[Value]) -> impl Iterator<Item = Value> + '_ {
    comments.iter().flat_map(|top| {
        let replies = top.get("replies").and_then(Value::as_array).cloned().unwrap_or_default();
        std::iter::once(top.clone()).chain(replies).map(|mut c| {
            if let Some(obj) = c.as_object_mut() {
                obj.insert("replies".into(), Value::Array(Vec::new()));
            }
            c
        })
    })
}

fn write_csv<W: Write>(out: W, comments: &[Value]) -> io::Result<()> {
    let mut csv = csv::Writer::from_writer(out);
    csv.write_record(COLUMNS)?;
    for comment in flattened(comments) {
        csv.write_record(cells(&comment).into_iter().map(inert))?;
    }
    csv.flush()
}

fn write_jsonl<W: Write>(mut out: W, comments: &[Value]) -> io::Result<()> {
    for comment in flattened(comments) {
        serde_json::to_writer(&mut out, &comment)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// The cells of one comment, in [`COLUMNS`] order.
fn cells(c: &Value) -> [String; 14] {
    let text = |key: &str| c[key].as_str().unwrap_or_default().to_owned();
    export::cells(c, &text("id"), &text("parent_id"), &text("first_seen_at"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn comments() -> Vec<Value> {
        vec![
            json!({
                "id": "1", "parent_id": null, "text": "=SUM(A1)", "likes": 3, "reply_count": 1,
                "author": {"id": "a1", "handle": "ann", "name": "Ann, B."},
                "created_at": "2021-08-24T14:16:16Z", "first_seen_at": "2026-11-22T03:08:51Z",
                "language": "de", "pinned": true, "liked_by_author": false,
                "media": [{"url": "/api/v1/media/file?id=x"}, {"url": "/api/v1/media/file?id=y"}],
                "replies": [{
                    "id": "2", "parent_id": "1", "text": "line\nbreak", "likes": 0, "reply_count": 0,
                    "author": {"id": "a2", "handle": null, "name": null},
                    "created_at": "2021-08-24T14:16:21Z", "first_seen_at": null,
                    "language": null, "pinned": false, "liked_by_author": true, "media": [], "replies": []
                }]
            }),
            json!({"id": "3", "parent_id": null, "text": "plain", "author": {}, "replies": []}),
        ]
    }

    #[test]
    fn csv_rows_match_the_export_columns() {
        let mut out = Vec::new();
        write_csv(&mut out, &comments()).expect("csv");
        let text = String::from_utf8(out).expect("utf-8");
        let expected = "id,parent_id,text,author_id,author_handle,author_name,likes,reply_count,created_at,first_seen_at,language,pinned,liked_by_author,media_urls\n\
            1,,'=SUM(A1),a1,ann,\"Ann, B.\",3,1,2021-08-24T14:16:16Z,2026-11-22T03:08:51Z,de,true,false,/api/v1/media/file?id=x /api/v1/media/file?id=y\n\
            2,1,\"line\nbreak\",a2,,,0,0,2021-08-24T14:16:21Z,,,false,true,\n\
            3,,plain,,,,0,0,,,,false,false,\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn jsonl_has_one_comment_per_line_replies_after_their_parent() {
        let mut out = Vec::new();
        write_jsonl(&mut out, &comments()).expect("jsonl");
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        let ids: Vec<&str> = lines.iter().filter_map(|l| l["id"].as_str()).collect();
        assert_eq!(ids, ["1", "2", "3"]);
        assert!(lines.iter().all(|l| l["replies"] == json!([])), "{text}");
        assert_eq!(lines[1]["parent_id"], "1");
    }

    #[test]
    fn a_file_appears_only_once_finished() {
        let dir = tempfile::tempdir().expect("temp dir");
        let dest = dir.path().join("out.csv");
        let tmp = dir.path().join("out.csv.tmp");

        let mut sink = Sink::open(Some(dest.as_path())).expect("open");
        sink.write_all(b"half").expect("write");
        assert!(tmp.exists() && !dest.exists());
        drop(sink);
        assert!(!tmp.exists() && !dest.exists(), "an unfinished file leaves nothing behind");

        let mut sink = Sink::open(Some(dest.as_path())).expect("open");
        sink.write_all(b"whole").expect("write");
        sink.finish().expect("finish");
        assert!(!tmp.exists());
        assert_eq!(std::fs::read_to_string(dest.as_path()).expect("read"), "whole");
    }

    #[test]
    fn a_missing_directory_is_refused_before_anything_starts() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(check_destination(Some(dir.path().join("out.csv").as_path())).is_ok());
        assert!(check_destination(None).is_ok());
        assert!(check_destination(Some(Path::new("-"))).is_ok());
        let err = check_destination(Some(dir.path().join("nope").join("out.csv").as_path())).expect_err("no such dir");
        assert_eq!(err.exit, Exit::Other);
        assert!(check_destination(Some(dir.path())).is_err(), "a directory");
    }
}
