//! The bounded in-memory histories of the simulator (recorded requests, spans, mails, Telegram
//! messages, model requests, payment sessions and events): a simulator left running for hours
//! keeps only the newest [`crate::SimConfig::history`] entries of each kind.
//!
//! (The module is not called `ring`: that would shadow the `ring` crate the simulator signs with.)

use std::collections::VecDeque;

/// The newest `cap` items pushed, oldest first; pushing onto a full ring drops the oldest.
#[derive(Debug, Clone)]
pub(crate) struct Ring<T> {
    items: VecDeque<T>,
    cap: usize,
    /// Items ever pushed, dropped ones included: numbering that outlives the bound.
    pushed: u64,
}

impl<T> Ring<T> {
    /// A ring keeping at most `cap` items; 0 keeps none.
    pub fn new(cap: usize) -> Self {
        // No preallocation: most histories stay far below a cap meant for hours of traffic.
        Self { items: VecDeque::new(), cap, pushed: 0 }
    }

    pub fn push(&mut self, item: T) {
        self.pushed += 1;
        if self.cap == 0 {
            return;
        }
        if self.items.len() == self.cap {
            self.items.pop_front();
        }
        self.items.push_back(item);
    }

    /// Items ever pushed, including those dropped or cleared since.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.items.iter()
    }

    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> {
        self.items.iter_mut()
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
}

impl<T: Clone> Ring<T> {
    /// A copy of what is kept, oldest first.
    pub fn to_vec(&self) -> Vec<T> {
        self.items.iter().cloned().collect()
    }
}

impl<T> Extend<T> for Ring<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for item in items {
            self.push(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn keeps_the_newest_cap_items_in_order() {
        let mut ring = Ring::new(3);
        ring.extend(1..=2);
        assert_eq!(ring.to_vec(), [1, 2]);
        ring.extend(3..=5);
        assert_eq!(ring.to_vec(), [3, 4, 5], "the oldest are dropped first");
        assert_eq!(ring.iter().rev().copied().collect::<Vec<_>>(), [5, 4, 3]);
        assert_eq!(ring.pushed(), 5);
        for item in ring.iter_mut() {
            *item *= 10;
        }
        assert_eq!(ring.to_vec(), [30, 40, 50]);
        ring.clear();
        assert!(ring.to_vec().is_empty());
        ring.push(6);
        assert_eq!((ring.to_vec(), ring.pushed()), (vec![6], 6));
    }

    #[test]
    fn a_zero_cap_keeps_nothing() {
        let mut ring = Ring::new(0);
        ring.push("a");
        assert!(ring.to_vec().is_empty());
        assert_eq!(ring.pushed(), 1);
    }
}
