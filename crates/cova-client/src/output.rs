//! Writing results: to stdout, or to a file through `FILE.tmp` renamed once complete, so that a
//! failed run never leaves half a file under the name asked for.

use super::ClientError;
use super::exit::Exit;
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

/// Makes the directory for one file per post before any job starts (with its parents, as
/// `mkdir -p`); fails early when the path is a file or cannot be created.
pub fn check_directory(dir: &Path) -> Result<(), ClientError> {
    if dir.exists() && !dir.is_dir() {
        return Err(ClientError::new(
            Exit::Other,
            format!("cannot write into {}: it is a file, not a directory", dir.display()),
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| ClientError::new(Exit::Other, format!("cannot create the directory {}: {e}", dir.display())))
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

#[cfg(test)]
mod tests {
    use super::*;

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
