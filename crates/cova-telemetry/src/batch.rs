//! Log lines written to stderr in batches: each line goes into a shared buffer, which is
//! written out when it holds [`BATCH_BYTES`] or every [`FLUSH_EVERY`] (by a thread that only
//! wakes on that tick), and when the process ends normally. A write per line, one per request,
//! would cost the request path more than the rest of its logging; a line waits at most
//! [`FLUSH_EVERY`], and a process killed outright loses at most that much.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Written out at once beyond this size.
const BATCH_BYTES: usize = 32 * 1024;
/// How long a line may wait in the buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Shared {
    buffer: Mutex<Buffer>,
    stopped: Condvar,
}

#[derive(Default)]
struct Buffer {
    bytes: Vec<u8>,
    stop: bool,
}

impl Shared {
    fn flush(&self) {
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        write_out(&mut buffer.bytes);
    }
}

fn write_out(bytes: &mut Vec<u8>) {
    if !bytes.is_empty() {
        // Nowhere to report a failing stderr; the lines are dropped rather than piling up.
        let _ = std::io::stderr().lock().write_all(bytes);
        bytes.clear();
    }
}

/// The writer handed to the log layer (one per line).
#[derive(Clone)]
pub struct BatchWriter(Arc<Shared>);

impl Write for BatchWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut buffer = self.0.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        buffer.bytes.extend_from_slice(buf);
        if buffer.bytes.len() >= BATCH_BYTES {
            write_out(&mut buffer.bytes);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchWriter {
    type Writer = BatchWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Writes what is buffered and stops the ticking thread when dropped.
pub struct Flusher {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.shared.buffer.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        self.shared.stopped.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.shared.flush();
    }
}

/// The process' batch, for [`flush`].
static CURRENT: std::sync::OnceLock<Arc<Shared>> = std::sync::OnceLock::new();

/// Writes what is buffered now (before the process exits without unwinding).
pub fn flush() {
    if let Some(shared) = CURRENT.get() {
        shared.flush();
    }
}

/// A batching writer to stderr and the guard that flushes it.
pub fn stderr() -> (BatchWriter, Flusher) {
    let shared = Arc::new(Shared::default());
    let _ = CURRENT.set(shared.clone());
    let ticking = shared.clone();
    let thread = std::thread::Builder::new()
        .name("cova-logs".into())
        .spawn(move || {
            let mut buffer = ticking.buffer.lock().unwrap_or_else(PoisonError::into_inner);
            while !buffer.stop {
                write_out(&mut buffer.bytes);
                buffer = ticking.stopped.wait_timeout(buffer, FLUSH_EVERY).unwrap_or_else(PoisonError::into_inner).0;
            }
        })
        .ok();
    (BatchWriter(shared.clone()), Flusher { shared, thread })
}
