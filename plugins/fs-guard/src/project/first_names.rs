//! `FirstNames`: the listing entries with the smallest names among all those seen, at most a
//! fixed number of them, and a count of all. A folder of millions of entries is read through
//! it holding only `max_list_entries` entries: the largest name kept sits at the top of a
//! max-heap and is dropped when a smaller one arrives. Knows nothing about folders.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::ListEntry;

/// A listing entry ordered by its name only (names in one folder are unique).
#[derive(Debug)]
struct ByName(ListEntry);

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for ByName {}

impl PartialOrd for ByName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.name.cmp(&other.0.name)
    }
}

/// The at most `max` entries with the smallest names, and how many entries were offered.
#[derive(Debug)]
pub(super) struct FirstNames {
    max: usize,
    kept: BinaryHeap<ByName>,
    total: usize,
}

impl FirstNames {
    /// Keeps at most `max` entries.
    pub(super) fn new(max: usize) -> Self {
        FirstNames {
            max,
            // Not `with_capacity(max)`: `max` may be huge while the folder is small.
            kept: BinaryHeap::new(),
            total: 0,
        }
    }

    /// Counts `entry`, and keeps it if its name is among the `max` smallest so far.
    pub(super) fn offer(&mut self, entry: ListEntry) {
        self.total += 1;
        if self.kept.len() < self.max {
            self.kept.push(ByName(entry));
            return;
        }
        let Some(mut largest) = self.kept.peek_mut() else {
            return; // `max` is 0: nothing is ever kept.
        };
        if entry.name < largest.0.name {
            *largest = ByName(entry);
        }
    }

    /// How many entries are held now: never more than `max`.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.kept.len()
    }

    /// The kept entries sorted by name, and the number of entries offered.
    pub(super) fn finish(self) -> (Vec<ListEntry>, usize) {
        let entries = self
            .kept
            .into_sorted_vec()
            .into_iter()
            .map(|e| e.0)
            .collect();
        (entries, self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EntryType;

    fn entry(name: String) -> ListEntry {
        ListEntry {
            name,
            kind: EntryType::File,
            symlink: false,
        }
    }

    /// Names in a scrambled but reproducible order (a multiplicative step modulo a prime).
    fn scrambled(count: u64) -> impl Iterator<Item = String> {
        (0..count).map(move |i| format!("n{:06}", (i * 7919) % 100_003))
    }

    #[test]
    fn keeps_the_smallest_names_sorted_and_counts_every_offer() {
        for max in [0, 1, 3, 10, 2_000, 5_000] {
            let mut first = FirstNames::new(max);
            for name in scrambled(2_000) {
                first.offer(entry(name));
                assert!(first.held() <= max, "held {} with max {max}", first.held());
            }
            let (entries, total) = first.finish();
            let mut reference: Vec<String> = scrambled(2_000).collect();
            reference.sort_unstable();
            reference.truncate(max);
            let names: Vec<String> = entries.into_iter().map(|e| e.name).collect();
            assert_eq!(names, reference, "max {max}");
            assert_eq!(total, 2_000);
        }
    }

    #[test]
    fn names_compare_by_bytes_as_the_listing_always_did() {
        let mut first = FirstNames::new(3);
        for name in ["b", "a", "B", "é", "Z", "_"] {
            first.offer(entry(name.to_owned()));
        }
        let (entries, total) = first.finish();
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["B", "Z", "_"]);
        assert_eq!(total, 6);
    }
}
