//! `FirstNames`: the first listing entries among all those seen, in listing order (folders
//! before files, each group by name), at most a fixed number of them, and a count of all. A
//! folder of millions of entries is read through it holding only `max_list_entries` entries:
//! the last entry kept sits at the top of a max-heap and is dropped when an earlier one
//! arrives. So a capped listing keeps its folders first, then the files with the smallest
//! names.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::entry::{EntryType, ListEntry};

/// A listing entry in listing order: folders before files, then by name (names in one folder
/// are unique).
#[derive(Debug)]
struct InListingOrder(ListEntry);

impl PartialEq for InListingOrder {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for InListingOrder {}

impl PartialOrd for InListingOrder {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InListingOrder {
    fn cmp(&self, other: &Self) -> Ordering {
        listing_order(&self.0, &other.0)
    }
}

/// Folders before files, then by name (byte order).
pub(super) fn listing_order(a: &ListEntry, b: &ListEntry) -> Ordering {
    let is_file = |e: &ListEntry| e.kind != EntryType::Directory;
    is_file(a)
        .cmp(&is_file(b))
        .then_with(|| a.name.cmp(&b.name))
}

/// The at most `max` first entries in listing order, and how many entries were offered.
#[derive(Debug)]
pub(super) struct FirstNames {
    max: usize,
    kept: BinaryHeap<InListingOrder>,
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

    /// Counts `entry`, and keeps it if it is among the `max` first so far.
    pub(super) fn offer(&mut self, entry: ListEntry) {
        self.total += 1;
        if self.kept.len() < self.max {
            self.kept.push(InListingOrder(entry));
            return;
        }
        let Some(mut largest) = self.kept.peek_mut() else {
            return; // `max` is 0: nothing is ever kept.
        };
        if listing_order(&entry, &largest.0) == Ordering::Less {
            *largest = InListingOrder(entry);
        }
    }

    /// How many entries are held now: never more than `max`.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.kept.len()
    }

    /// The kept entries in listing order, and the number of entries offered.
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

    #[test]
    fn folders_are_kept_before_any_file_however_their_names_sort() {
        let mut first = FirstNames::new(3);
        for i in 0..50 {
            first.offer(entry(format!("a-file-{i:02}")));
        }
        for name in ["zz-last", "y-folder"] {
            first.offer(ListEntry {
                name: name.to_owned(),
                kind: EntryType::Directory,
                symlink: false,
            });
        }
        let (entries, total) = first.finish();
        let shown: Vec<(&str, EntryType)> =
            entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(
            shown,
            [
                ("y-folder", EntryType::Directory),
                ("zz-last", EntryType::Directory),
                ("a-file-00", EntryType::File),
            ]
        );
        assert_eq!(total, 52);
    }
}
