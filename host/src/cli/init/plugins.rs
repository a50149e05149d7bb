//! Where the built tool plugins are, for the file `rojos init` writes: the folder of the
//! running `rojos` binary (cargo puts `librojos_tool_*.so` beside it), or `--plugins DIR`.
//! Paths are written relative to the config's folder when they are inside it, else absolute,
//! so the file works where it is written.

use std::path::{Path, PathBuf};

use super::error::InitError;

/// The built-in tools, in the repository's `rojos.toml` order (the first listed keeps a name).
pub(super) const BUILTIN: [&str; 7] = [
    "read_path_meta",
    "get_text_content",
    "write_text_content",
    "list_files",
    "create_directory",
    "move_path",
    "delete_path",
];

/// The tools that move or delete the user's files; the file marks them.
pub(super) const DESTRUCTIVE: [&str; 2] = ["move_path", "delete_path"];

/// The folder to look in: `given`, or the running binary's own folder.
///
/// # Errors
///
/// [`InitError::NoBinaryFolder`] when the binary's path cannot be found.
pub(super) fn folder(given: Option<&Path>) -> Result<PathBuf, InitError> {
    if let Some(dir) = given {
        return Ok(dir.to_owned());
    }
    let exe = std::env::current_exe().map_err(InitError::NoBinaryFolder)?;
    Ok(exe.parent().unwrap_or(Path::new("/")).to_owned())
}

/// Each built-in tool's library in `dir` as the config at `config_dir` must name it, with its
/// tool name. `config_dir` must be canonical.
///
/// # Errors
///
/// [`InitError::NoPlugins`] naming the folder and the missing libraries;
/// [`InitError::NotUtf8`] for a path TOML cannot hold.
pub(super) fn paths(
    dir: &Path,
    config_dir: &Path,
) -> Result<Vec<(String, &'static str)>, InitError> {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let missing: Vec<String> = BUILTIN
        .iter()
        .map(|tool| file_name(tool))
        .filter(|file| !canonical.join(file).is_file())
        .collect();
    if !missing.is_empty() {
        return Err(InitError::NoPlugins {
            dir: canonical,
            missing: missing.join(", "),
        });
    }
    BUILTIN
        .iter()
        .map(|tool| {
            let path = canonical.join(file_name(tool));
            let written = path.strip_prefix(config_dir).unwrap_or(&path);
            let text = written
                .to_str()
                .ok_or_else(|| InitError::NotUtf8(path.clone()))?;
            Ok((text.to_owned(), *tool))
        })
        .collect()
}

/// `librojos_tool_list_files.so` for `list_files`.
fn file_name(tool: &str) -> String {
    format!("librojos_tool_{tool}.so")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(dir: &Path) {
        for tool in BUILTIN {
            std::fs::write(dir.join(file_name(tool)), b"").unwrap();
        }
    }

    #[test]
    fn plugins_inside_the_config_folder_are_written_relative_to_it() {
        let config = tempfile::tempdir().unwrap();
        let config_dir = config.path().canonicalize().unwrap();
        let build = config_dir.join("target/release");
        std::fs::create_dir_all(&build).unwrap();
        built(&build);
        let found = paths(&build, &config_dir).unwrap();
        assert_eq!(found.len(), 7);
        assert_eq!(
            found[0],
            (
                "target/release/librojos_tool_read_path_meta.so".to_owned(),
                "read_path_meta"
            )
        );
    }

    #[test]
    fn plugins_elsewhere_are_written_absolute() {
        let (config, build) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        built(build.path());
        let found = paths(build.path(), &config.path().canonicalize().unwrap()).unwrap();
        let expected = build
            .path()
            .canonicalize()
            .unwrap()
            .join("librojos_tool_delete_path.so");
        assert_eq!(found[6].0, expected.to_str().unwrap());
    }

    #[test]
    fn a_folder_without_the_plugins_names_the_missing_ones() {
        let build = tempfile::tempdir().unwrap();
        built(build.path());
        std::fs::remove_file(build.path().join("librojos_tool_move_path.so")).unwrap();
        let e = paths(build.path(), Path::new("/nowhere")).unwrap_err();
        assert!(
            e.to_string().contains("missing librojos_tool_move_path.so"),
            "{e}"
        );
    }
}
