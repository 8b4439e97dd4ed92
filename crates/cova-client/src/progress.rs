//! A one-line progress display on stderr, drawn only when stderr is a terminal (so scripts and
//! log files never see it): `[#########               ] 1,234 / 5,000 comments`.

use std::io::{IsTerminal, Write};

/// Cells of the bar.
const WIDTH: u64 = 30;

pub struct Progress {
    enabled: bool,
    drawn: bool,
}

impl Progress {
    /// Draws on stderr if it is a terminal; otherwise every call does nothing.
    pub fn on_stderr() -> Self {
        Self { enabled: std::io::stderr().is_terminal(), drawn: false }
    }

    /// An analyze job's progress.
    pub fn comments(&mut self, status: &str, collected: u64, expected: Option<u64>) {
        if self.enabled {
            self.draw(&comments_line(status, collected, expected));
        }
    }

    /// Any other job's state.
    pub fn status(&mut self, what: &str, status: &str) {
        if self.enabled {
            self.draw(&format!("{what}: {status}"));
        }
    }

    fn draw(&mut self, line: &str) {
        let mut err = std::io::stderr().lock();
        // `\r` back to the start of the line, `ESC [ K` clears what a longer line left.
        let _ = write!(err, "\r{line}\x1b[K");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Ends the line, so that what follows on stderr starts on a line of its own.
    pub fn finish(&mut self) {
        if self.drawn {
            let _ = writeln!(std::io::stderr());
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `[####      ] 1,234 / 5,000 comments`, or without an expected count
/// `[          ] 12 comments (queued)`.
pub fn comments_line(status: &str, collected: u64, expected: Option<u64>) -> String {
    match expected {
        Some(total) if total > 0 => {
            let filled = collected.min(total) * WIDTH / total;
            format!("[{}] {} / {} comments", bar(filled), grouped(collected), grouped(total))
        }
        _ => format!("[{}] {} comments ({status})", bar(0), grouped(collected)),
    }
}

fn bar(filled: u64) -> String {
    (0..WIDTH).map(|i| if i < filled { '#' } else { ' ' }).collect()
}

/// `1234567` as `1,234,567`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(1_234), "1,234");
        assert_eq!(grouped(5_000), "5,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn the_bar_fills_with_the_collected_share() {
        let line = comments_line("in_progress", 1_234, Some(5_000));
        assert_eq!(line, format!("[{}{}] 1,234 / 5,000 comments", "#".repeat(7), " ".repeat(23)));
        let full = comments_line("complete", 12, Some(12));
        assert_eq!(full, format!("[{}] 12 / 12 comments", "#".repeat(30)));
        // Platform counts are approximate: more than expected is a full bar, never more.
        assert_eq!(comments_line("in_progress", 20, Some(12)), format!("[{}] 20 / 12 comments", "#".repeat(30)));
        assert_eq!(comments_line("queued", 0, None), format!("[{}] 0 comments (queued)", " ".repeat(30)));
        assert_eq!(comments_line("in_progress", 3, Some(0)), format!("[{}] 3 comments (in_progress)", " ".repeat(30)));
    }
}
