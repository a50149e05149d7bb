//! The file system under the hosts' folders (`TMPDIR`, else `/tmp`), which the figures depend
//! on: on ext4 without a journal, creating a file costs more the longer a run goes (the inode
//! allocator skips inodes freed in the last minutes, a check made only without a journal), so
//! one binary's CPU per conversation drifts from run to run; on a tmpfs no durable write
//! reaches a disk. bench/PROFILE.md, "The file system under the bench".

use std::path::Path;

/// `statfs` magic numbers (statfs(2)).
const EXT4_MAGIC: i64 = 0xEF53;
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Other file systems a bench may run on, by `statfs` magic number: each keeps a journal or
/// writes copies, so nothing is said of them but their name.
const OTHER_FILE_SYSTEMS: [(i64, &str); 5] = [
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0x2FC1_2FC1, "zfs"),
    (0x6969, "nfs"),
    (
        0x794C_7630,
        "overlayfs (its writes go to the file system under it)",
    ),
];

/// What the bench says of the file system under `dir`: its kind, and what to do when the
/// figures measured on it would mislead.
pub(crate) fn describe(dir: &Path) -> String {
    let Ok(fs) = rustix::fs::statfs(dir) else {
        return "file system not known".to_owned();
    };
    match fs.f_type {
        EXT4_MAGIC => match has_journal(dir) {
            Some(true) => "ext4 with a journal".to_owned(),
            Some(false) => {
                "ext4 WITHOUT a journal: creating files costs more the longer a run goes, \
                so the figures drift between runs of one binary; set TMPDIR to a folder on a \
                journaled file system (bench/PROFILE.md, \"The file system under the bench\")"
                    .to_owned()
            }
            None => "ext4 (whether it has a journal is not known)".to_owned(),
        },
        TMPFS_MAGIC => "tmpfs: no durable write reaches a disk, so the hosts' fsyncs cost \
            nothing a deployment's would; set TMPDIR to a folder on a disk"
            .to_owned(),
        other => OTHER_FILE_SYSTEMS
            .iter()
            .find(|&&(magic, _)| magic == other)
            .map_or_else(
                || format!("a file system of statfs type {other:#x}"),
                |(_, name)| (*name).to_owned(),
            ),
    }
}

/// Whether the ext4 file system under `dir` keeps a journal: jbd2, which keeps ext4's
/// journals, lists each as `<device>-<journal inode>` in `/proc/fs/jbd2`. `None` when the
/// device cannot be named.
fn has_journal(dir: &Path) -> Option<bool> {
    let device = rustix::fs::stat(dir).ok()?.st_dev;
    let link = std::fs::read_link(format!(
        "/sys/dev/block/{}:{}",
        rustix::fs::major(device),
        rustix::fs::minor(device)
    ))
    .ok()?;
    let name = link.file_name()?.to_str()?.to_owned();
    let journals: Vec<String> = std::fs::read_dir("/proc/fs/jbd2")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    Some(lists_journal_of(&journals, &name))
}

/// Whether `journals` (the entries of `/proc/fs/jbd2`) has one of block device `device`.
fn lists_journal_of(journals: &[String], device: &str) -> bool {
    journals.iter().any(|journal| {
        journal.rsplit_once('-').is_some_and(|(of, inode)| {
            of == device && !inode.is_empty() && inode.bytes().all(|b| b.is_ascii_digit())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_is_the_device_s_own_entry_in_jbd2() {
        let journals = ["loop0-8".to_owned(), "dm-0-8".to_owned()];
        assert!(lists_journal_of(&journals, "loop0"));
        assert!(
            lists_journal_of(&journals, "dm-0"),
            "a device named with a dash"
        );
        assert!(!lists_journal_of(&journals, "vda"));
        assert!(
            !lists_journal_of(&journals, "loop"),
            "a prefix is another device"
        );
        assert!(!lists_journal_of(&journals, "dm"));
        assert!(!lists_journal_of(&[], "vda"), "no journal at all");
    }

    #[test]
    fn a_file_system_that_is_not_ext4_is_named_by_its_type() {
        // procfs's magic number is 0x9fa0.
        assert_eq!(
            describe(Path::new("/proc")),
            "a file system of statfs type 0x9fa0"
        );
        assert_eq!(
            describe(Path::new("/no/such/folder")),
            "file system not known"
        );
    }
}
