//! Whether a call would replace or remove something that exists now, for
//! `approve = "destructive"` (`docs/configuration.md`, "Approvals"): a tool that declares
//! `changes_paths` (it may replace or remove what is at those paths, e.g.
//! `write_text_content`) but not `destructive` is destructive for the call whose path names
//! an existing file or folder, and not for the call that only creates one. The path is
//! resolved beneath the project root by fs-guard, as the tool resolves it. A call let run
//! because its paths were missing is told so (`CallContext::create_only`), and its write
//! refuses to replace a file that appeared there since.

use std::sync::Arc;

use cap_std::fs::Dir;
use rojos_fs_guard::ProjectDir;
use rojos_llm::ToolCall;
use rojos_plugin_api::{ErrorKind, Limits};

use rojos_checkpoints::{changed_paths, Change};

use crate::registry::RegisteredTool;

/// What `call` of `tool` would do to the paths it names in its `changes_paths` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Effect {
    /// One of them names something that exists under the root (or whose state cannot be
    /// read): the call would replace or remove it.
    Replaces,
    /// None of them exists now: these paths (as the arguments name them, possibly none) are
    /// ones the call may only create, so a file appearing there before it writes is not
    /// replaced unasked (`CallContext::create_only`).
    CreatesOnly(Vec<String>),
}

/// Whether `call` of `tool` names, in one of its `changes_paths` arguments, something that
/// exists under `root`. A path the tool itself refuses (outside the project, not a valid
/// name) replaces nothing; one whose state cannot be read counts as existing, so the user
/// is asked rather than not.
pub(super) async fn effect(tool: &RegisteredTool, call: &ToolCall, root: &Arc<Dir>) -> Effect {
    let Ok(arguments) = &call.arguments else {
        return Effect::CreatesOnly(Vec::new());
    };
    let paths: Vec<String> = changed_paths(tool.changes_paths(), &[], arguments)
        .into_iter()
        .filter_map(|change| match change {
            Change::Whole(path) => Some(path),
            Change::Creation(_) => None,
        })
        .collect();
    if paths.is_empty() {
        return Effect::CreatesOnly(paths);
    }
    let root = Arc::clone(root);
    let checked = tokio::task::spawn_blocking(move || {
        let Ok(dir) = root.try_clone() else {
            return Effect::Replaces;
        };
        let dir = ProjectDir::new(dir, Limits::default());
        if paths.iter().any(|path| exists(&dir, path)) {
            Effect::Replaces
        } else {
            Effect::CreatesOnly(paths)
        }
    })
    .await;
    checked.unwrap_or(Effect::Replaces)
}

/// Whether `path` names an entry beneath `dir`'s root (an unreadable one included).
fn exists(dir: &ProjectDir, path: &str) -> bool {
    match dir.meta(path) {
        Ok(_) => true,
        Err(e) => {
            let kind = e.kind();
            !(kind == ErrorKind::NOT_FOUND
                || kind == ErrorKind::INVALID_ARGUMENTS
                || kind == ErrorKind::OUTSIDE_ROOT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> (tempfile::TempDir, ProjectDir) {
        let temp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(temp.path(), cap_std::ambient_authority()).unwrap();
        (temp, ProjectDir::new(dir, Limits::default()))
    }

    #[test]
    fn an_existing_file_or_folder_exists_and_a_missing_or_refused_path_does_not() {
        let (temp, dir) = project();
        std::fs::write(temp.path().join("a.txt"), "x").unwrap();
        std::fs::create_dir(temp.path().join("sub")).unwrap();
        assert!(exists(&dir, "a.txt"));
        assert!(exists(&dir, "sub"));
        assert!(!exists(&dir, "new.txt"));
        assert!(!exists(&dir, "missing/new.txt"));
        assert!(!exists(&dir, "../outside.txt"));
        assert!(!exists(&dir, ""));
    }
}
