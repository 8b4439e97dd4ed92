//! What the top-level pages fetched so far prove about TikTok's comment list, whose cursor is
//! an offset. Pages are fetched ahead of the chain at guessed offsets; a page counts only for
//! the offsets its returned cursor vouches for (`[start, cursor)`: comments beyond the cursor
//! are overlap the server will serve again), and pages that vouch for the same offset must
//! name the same comment there. A page that breaks either rule contradicts the offset model
//! and the collection goes back to the sequential chain.

use std::collections::HashMap;

/// A page that does not fit the offset model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contradiction(pub String);

/// The offsets `[start, end)` a page fetched at `start` vouches for, from its returned cursor;
/// `None` when the cursor does not move past `start` although the page has comments.
pub(crate) fn vouched_end(start: u64, got: u64, cursor: Option<u64>) -> Option<u64> {
    match cursor {
        Some(c) if c > start => Some(c),
        _ if got == 0 => Some(start),
        _ => None,
    }
}

#[derive(Debug, Default)]
pub(crate) struct Coverage {
    /// Every offset below this is vouched for by a page.
    covered: u64,
    /// The comment id seen at each vouched offset.
    ids: HashMap<u64, String>,
    /// The most comments one page brought, and the smallest advance among such full pages:
    /// the stride of the next guesses (a full page that overlaps its successor advances less).
    max_got: u64,
    stride: u64,
}

impl Coverage {
    /// A cover that starts at `offset`, remembering nothing before it (the sequential chain's).
    pub fn resumed_at(offset: u64) -> Self {
        Self { covered: offset, ..Self::default() }
    }

    pub fn covered(&self) -> u64 {
        self.covered
    }

    /// The distance between guessed offsets; 0 until a page has arrived.
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// Records the page fetched at `start` with the ids it returned in order and its cursor;
    /// returns the end of what it vouches for. Offsets already vouched for must hold the same ids.
    pub fn record(&mut self, start: u64, ids: &[&str], cursor: Option<u64>) -> Result<u64, Contradiction> {
        let got = ids.len() as u64;
        let end = vouched_end(start, got, cursor).ok_or_else(|| {
            Contradiction(format!("the page at offset {start} returned cursor {cursor:?} with {got} comments"))
        })?;
        for (offset, id) in (start..end).zip(ids) {
            match self.ids.get(&offset) {
                Some(known) if known != id => {
                    return Err(Contradiction(format!(
                        "offset {offset} held comment {known} and now holds {id}: the list moved"
                    )));
                }
                Some(_) => {}
                None => {
                    self.ids.insert(offset, (*id).to_owned());
                }
            }
        }
        let advance = end - start;
        if got > 0 && advance > 0 {
            if got > self.max_got {
                (self.max_got, self.stride) = (got, advance);
            } else if got == self.max_got {
                self.stride = self.stride.min(advance);
            }
        }
        if start <= self.covered && end > self.covered {
            self.covered = end;
        }
        Ok(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(range: std::ops::Range<u64>) -> Vec<String> {
        range.map(|i| format!("c{i}")).collect()
    }

    fn record(c: &mut Coverage, start: u64, range: std::ops::Range<u64>, cursor: u64) -> Result<u64, Contradiction> {
        let owned = ids(range);
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        c.record(start, &refs, Some(cursor))
    }

    #[test]
    fn pages_extend_the_cover_in_any_arrival_order() {
        let mut c = Coverage::default();
        assert_eq!(record(&mut c, 35, 35..70, 70), Ok(70));
        // A page ahead of the cover proves nothing yet.
        assert_eq!(c.covered(), 0);
        assert_eq!(record(&mut c, 0, 0..35, 35), Ok(35));
        assert_eq!(c.covered(), 35);
        assert_eq!(c.stride(), 35);
    }

    #[test]
    fn overlap_beyond_the_cursor_is_not_vouched_for_and_shrinks_the_stride() {
        let mut c = Coverage::default();
        // 35 comments, but the cursor says the last two come again.
        assert_eq!(record(&mut c, 0, 0..35, 33), Ok(33));
        assert_eq!(c.covered(), 33);
        assert_eq!(c.stride(), 33);
        assert_eq!(record(&mut c, 33, 33..68, 68), Ok(68));
        assert_eq!(c.stride(), 33, "the smallest advance of a full page");
    }

    #[test]
    fn a_short_page_leaves_a_gap_the_chain_must_fill() {
        let mut c = Coverage::default();
        record(&mut c, 0, 0..35, 35).expect("fits");
        record(&mut c, 35, 35..66, 66).expect("fits");
        record(&mut c, 70, 70..105, 105).expect("fits");
        assert_eq!(c.covered(), 66, "offsets 66..70 are not vouched for");
        record(&mut c, 66, 66..101, 101).expect("fits");
        assert_eq!(c.covered(), 101);
        assert_eq!(c.stride(), 35, "short pages do not set the stride");
    }

    #[test]
    fn a_moved_list_or_a_cursor_that_is_no_offset_contradicts() {
        let mut c = Coverage::default();
        record(&mut c, 0, 0..35, 35).expect("fits");
        // New comments were posted at the top: offset 30 now holds what was at 25.
        let shifted = record(&mut c, 30, 25..60, 65);
        assert!(shifted.is_err(), "{shifted:?}");
        let mut c = Coverage::default();
        let refs = ["a", "b"];
        assert!(c.record(10, &refs, Some(10)).is_err());
        assert!(c.record(10, &refs, None).is_err());
        // An empty page vouches for nothing and ends nothing.
        assert_eq!(c.record(10, &[], Some(0)), Ok(10));
    }
}
