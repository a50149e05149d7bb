//! The paths a changing call names ([`Change`], [`changed_paths`]) and how recorded paths
//! relate: one inside another ([`covered`], [`related`]), or reached through a link
//! ([`through_link`]).

use cap_std::fs::Dir;
use serde_json::{Map, Value};

/// A path a call changes, as its tool declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// It may replace or remove what is there (`changes_paths`): all of it is recorded.
    Whole(String),
    /// It only creates what is missing there (`creates_paths`): only that is recorded.
    Creation(String),
}

impl Change {
    pub(super) fn path(&self) -> &str {
        match self {
            Change::Whole(path) | Change::Creation(path) => path,
        }
    }
}

/// The paths a call changes: the string values of the tool's `changes_paths` and
/// `creates_paths` arguments (a missing or non-string one names nothing; the schema check
/// refuses such calls).
pub fn changed_paths(
    changes: &[String],
    creates: &[String],
    arguments: &Map<String, Value>,
) -> Vec<Change> {
    let named = |names: &[String], change: fn(String) -> Change| {
        names
            .iter()
            .filter_map(|name| arguments.get(name)?.as_str().map(|p| change(p.to_owned())))
            .collect::<Vec<_>>()
    };
    let mut all = named(changes, Change::Whole);
    all.extend(named(creates, Change::Creation));
    all
}

/// Whether one of two paths is the other or inside it.
pub(super) fn related(a: &str, b: &str) -> bool {
    covered(std::iter::once(a), b) || covered(std::iter::once(b), a)
}

/// Whether any of `paths` (relative to `root`, as fs-guard resolved them) goes through a
/// symbolic link, or cannot be told: a call through a link changes what the link leads to,
/// which no recorded path names. One resolution per path, beneath the root, that refuses any
/// link on the way (`ELOOP`) and opens the last name without following it; a missing name
/// ends the path (nothing beyond it can be reached), any other failure counts as a link.
pub(super) fn through_link(root: &Dir, paths: &[String]) -> bool {
    use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
    let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    paths.iter().any(|path| {
        match rustix::fs::openat2(root, path.as_str(), flags, Mode::empty(), how) {
            Ok(last) => rustix::fs::fstat(&last).map_or(true, |stat| {
                FileType::from_raw_mode(stat.st_mode) == FileType::Symlink
            }),
            Err(rustix::io::Errno::NOENT) => false,
            Err(_) => true,
        }
    })
}

/// Whether `path` is recorded already (among the `recorded` paths), itself or inside a
/// recorded folder.
pub(super) fn covered<'a>(mut recorded: impl Iterator<Item = &'a str>, path: &str) -> bool {
    recorded.any(|recorded| {
        path == recorded
            || path
                .strip_prefix(recorded)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_inside_a_recorded_folder_is_covered_but_a_sibling_prefix_is_not() {
        let recorded = || ["docs"].into_iter();
        assert!(covered(recorded(), "docs"));
        assert!(covered(recorded(), "docs/a.txt"));
        assert!(!covered(recorded(), "docs2/a.txt"));
        assert!(!covered(recorded(), "doc"));
    }

    #[test]
    fn only_string_values_of_declared_arguments_are_changed_paths() {
        let args: Map<String, Value> =
            serde_json::from_str(r#"{"from": "a.txt", "to": "b/", "recursive": true, "path": 3}"#)
                .expect("json");
        let declared = ["from".to_owned(), "to".to_owned(), "path".to_owned()];
        let whole = |p: &str| Change::Whole(p.to_owned());
        assert_eq!(
            changed_paths(&declared, &[], &args),
            [whole("a.txt"), whole("b/")]
        );
        assert_eq!(
            changed_paths(&declared[..1], &declared[1..2], &args),
            [whole("a.txt"), Change::Creation("b/".to_owned())]
        );
        assert!(changed_paths(&[], &[], &args).is_empty());
    }
}
