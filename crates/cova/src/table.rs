//! Aligned plain-text tables for operator output: columns padded to their widest cell, so the
//! output reads in a terminal and splits on runs of spaces in scripts.

use std::fmt;

pub struct Table<const N: usize> {
    header: Option<[String; N]>,
    rows: Vec<[String; N]>,
}

impl<const N: usize> Table<N> {
    pub fn new(header: [&str; N]) -> Self {
        Self { header: Some(header.map(str::to_owned)), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: [String; N]) {
        self.rows.push(cells);
    }

    /// Key/value listings read better without a header line.
    pub fn without_header(mut self) -> Self {
        self.header = None;
        self
    }
}

impl<const N: usize> fmt::Display for Table<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<&[String; N]> = self.header.iter().chain(self.rows.iter()).collect();
        let mut widths = [0usize; N];
        for line in &lines {
            for (w, cell) in widths.iter_mut().zip(line.iter()) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for line in lines {
            let mut text = String::new();
            for (i, cell) in line.iter().enumerate() {
                if i + 1 == N {
                    text.push_str(cell);
                } else {
                    let pad = widths[i] - cell.chars().count();
                    text.push_str(cell);
                    text.push_str(&" ".repeat(pad + 2));
                }
            }
            writeln!(f, "{}", text.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_whatever_the_cell_widths() {
        let mut t = Table::new(["EMAIL", "TOKENS"]);
        t.row(["a@b.co".into(), "1".into()]);
        t.row(["someone.long@example.com".into(), "12".into()]);
        let text = t.to_string();
        let starts: Vec<usize> =
            text.lines().map(|l| l.find(|c: char| c.is_ascii_digit() || c == 'T').unwrap_or(0)).collect();
        assert_eq!(text.lines().count(), 3);
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{text}");
    }
}
