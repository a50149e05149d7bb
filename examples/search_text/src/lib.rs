//! `search_text`: an example user tool, the template (`examples/tool-template`) filled in.
//! It finds a string in the text files of a project folder.
//!
//! - Args: `{"query": "<text>", "path": ".", "max_results": 100}`; `query` is required and
//!   non-empty (one line), `path` (a folder, or one file) defaults to the project root,
//!   `max_results` to 100 (at most 1,000).
//! - Result: `[{"path":"a/b.txt","line":3,"text":"…the line…"}]`, in folder order (files
//!   by name, then subfolders), lines numbered from 1, a long line cut to an excerpt around
//!   the match. When the search stopped early (more than `max_results` matches, or the
//!   budget of files or bytes was spent), the result is instead
//!   `{"matches":[…],"truncated":true,"note":"why, and how to narrow the search"}`.
//! - Matching is by exact substring, case-sensitive, line by line.
//! - What is read: regular files of UTF-8 text up to `max_read_bytes`, through
//!   `rojos-fs-guard` (never `std::fs`), so nothing outside the project root is ever read or
//!   listed. Symlinks are skipped (each file is visited once, under its own name, and no link
//!   loop is followed), and so are `.git` folders, binary or non-UTF-8 files, files over the
//!   read limit, FIFOs, sockets and devices (never opened). At most 5,000 files, 2,000 folders
//!   and 32 MiB of text are visited per call.
//! - Errors: `invalid_arguments` (empty or multi-line query, `max_results` out of range),
//!   and for `path` itself: `not_found`, `outside_root`, `refused`.

#![forbid(unsafe_code)]

use rojos_fs_guard::{parse_args, EntryType, ListEntry, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// `max_results` when the model gives none.
pub const DEFAULT_MAX_RESULTS: u64 = 100;
/// The largest `max_results` accepted.
pub const MAX_RESULTS: u64 = 1_000;
/// The longest line text returned, in characters; longer lines are cut around the match.
pub const MAX_LINE_CHARS: usize = 300;
/// Folders never searched.
pub const SKIPPED_FOLDERS: &[&str] = &[".git"];

/// Finds a string in the project's text files.
#[derive(Debug)]
pub struct SearchText;

/// The tool's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The text to find (non-empty, one line).
    pub query: String,
    /// The folder (or file) to search, relative to the project root.
    #[serde(default = "project_root")]
    pub path: String,
    /// How many matches to return at most.
    #[serde(default)]
    pub max_results: Option<u64>,
}

fn project_root() -> String {
    ".".to_owned()
}

/// How much one call may visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Files read.
    pub files: usize,
    /// Folders listed.
    pub folders: usize,
    /// Bytes of text read (the last file read may pass it by up to `max_read_bytes`).
    pub bytes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            files: 5_000,
            folders: 2_000,
            bytes: 32 << 20,
        }
    }
}

/// One matching line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Match {
    /// The file, relative to the project root.
    pub path: String,
    /// The line number, from 1.
    pub line: u64,
    /// The line (without its line break), or an excerpt around the match.
    pub text: String,
}

/// The outcome of a search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The matches, at most `max_results`.
    pub matches: Vec<Match>,
    /// Why the search stopped early, for the model; `None` if everything was searched.
    pub stopped: Option<String>,
}

impl Found {
    /// The tool result: the plain array, or `{"matches":[…],"truncated":true,"note":…}`.
    pub fn to_json(&self) -> Value {
        match &self.stopped {
            None => json!(self.matches),
            Some(note) => json!({ "matches": self.matches, "truncated": true, "note": note }),
        }
    }
}

/// Runs the tool on an open project.
///
/// # Errors
///
/// See the crate documentation.
pub fn run(dir: &ProjectDir, args: Args) -> Result<String, ToolError> {
    Ok(search(dir, &args, Budget::default())?.to_json().to_string())
}

/// Searches with an explicit [`Budget`].
///
/// # Errors
///
/// See the crate documentation.
pub fn search(dir: &ProjectDir, args: &Args, budget: Budget) -> Result<Found, ToolError> {
    let query = args.query.as_str();
    if query.is_empty() {
        return Err(ToolError::invalid_arguments(
            "query is empty: give the text to find",
        ));
    }
    if query.contains(['\n', '\r']) {
        return Err(ToolError::invalid_arguments(
            "query holds a line break: lines are searched one at a time, give text from one line",
        ));
    }
    let max_results = match args.max_results {
        None => DEFAULT_MAX_RESULTS,
        Some(n) if (1..=MAX_RESULTS).contains(&n) => n,
        Some(n) => {
            return Err(ToolError::invalid_arguments(format!(
                "max_results is {n}: give a number from 1 to {MAX_RESULTS}"
            )))
        }
    };
    // `meta` refuses what leads out, and says what is wrong with the model's own path.
    let start = dir.meta(&args.path)?;
    let mut walk = Walk {
        dir,
        query,
        max_results: usize::try_from(max_results).unwrap_or(usize::MAX),
        budget,
        files: 0,
        folders: 0,
        bytes: 0,
        found: Found {
            matches: Vec::new(),
            stopped: None,
        },
    };
    let base = display_path(&args.path);
    match start.kind {
        EntryType::File => {
            walk.file(&base);
        }
        EntryType::Directory => {
            // The starting folder is listed by the model's own path, so its errors are its.
            let listing = dir.list(&args.path)?;
            walk.folders = 1;
            walk.folder(&base, listing.entries);
        }
    }
    Ok(walk.found)
}

/// A search in progress.
struct Walk<'a> {
    dir: &'a ProjectDir,
    query: &'a str,
    max_results: usize,
    budget: Budget,
    files: usize,
    folders: usize,
    bytes: u64,
    found: Found,
}

impl Walk<'_> {
    /// Searches the `entries` of folder `path` (`""` for the root), then its subfolders,
    /// depth first: in each folder the files, then each subfolder in turn, all in name order.
    /// A folder is listed only when its turn comes (an explicit stack of paths keeps deep
    /// trees off the call stack and few listings in memory).
    fn folder(&mut self, path: &str, entries: Vec<ListEntry>) {
        let mut pending: Vec<String> = Vec::new();
        let mut current = Some((path.to_owned(), entries));
        loop {
            let (folder, entries) = match current.take() {
                Some(next) => next,
                None => {
                    let Some(sub) = pending.pop() else { return };
                    if self.folders >= self.budget.folders {
                        self.stop(format!(
                            "stopped after listing {} folders: search a subfolder with 'path'",
                            self.folders
                        ));
                        return;
                    }
                    self.folders += 1;
                    // A folder that vanished, or was swapped for a link that leads out, is
                    // refused by fs-guard and skipped.
                    match self.dir.list(&sub) {
                        Ok(listing) => (sub, listing.entries),
                        Err(_) => continue,
                    }
                }
            };
            let mut subfolders = Vec::new();
            for entry in entries {
                // A symlink is skipped: its target, if inside, is searched under its own name.
                if entry.symlink {
                    continue;
                }
                let child = join(&folder, &entry.name);
                match entry.kind {
                    EntryType::File => {
                        if !self.file(&child) {
                            return;
                        }
                    }
                    EntryType::Directory => {
                        if !SKIPPED_FOLDERS.contains(&entry.name.as_str()) {
                            subfolders.push(child);
                        }
                    }
                }
            }
            pending.extend(subfolders.into_iter().rev());
        }
    }

    /// Searches one file. Returns false once the search has stopped.
    fn file(&mut self, path: &str) -> bool {
        if self.files >= self.budget.files {
            return self.stop(format!(
                "stopped after reading {} files: search a subfolder with 'path'",
                self.files
            ));
        }
        if self.bytes >= self.budget.bytes {
            return self.stop(format!(
                "stopped after reading {} bytes of text: search a subfolder with 'path'",
                self.bytes
            ));
        }
        self.files += 1;
        // Binary, not UTF-8, over max_read_bytes, special, vanished, or swapped for a link
        // that leads out: refused by fs-guard, skipped here.
        let Ok(text) = self.dir.read_text(path) else {
            return true;
        };
        self.bytes += text.len() as u64;
        for (number, line) in text.lines().enumerate() {
            let Some(at) = line.find(self.query) else {
                continue;
            };
            if self.found.matches.len() >= self.max_results {
                return self.stop(format!(
                    "stopped after {} matches (max_results): narrow the search with 'path' or \
                     a longer 'query'",
                    self.max_results
                ));
            }
            self.found.matches.push(Match {
                path: path.to_owned(),
                line: number as u64 + 1,
                text: excerpt(line, at),
            });
        }
        true
    }

    /// Ends the search, saying why. Returns false, for [`Walk::file`].
    fn stop(&mut self, note: String) -> bool {
        self.found.stopped = Some(note);
        false
    }
}

/// The model's folder path as a prefix of result paths: no trailing `/`, no leading `./`,
/// and `""` for the root.
fn display_path(path: &str) -> String {
    let mut path = path.trim_end_matches('/');
    while let Some(rest) = path.strip_prefix("./") {
        path = rest.trim_start_matches('/');
    }
    if path == "." {
        String::new()
    } else {
        path.to_owned()
    }
}

fn join(folder: &str, name: &str) -> String {
    if folder.is_empty() {
        name.to_owned()
    } else {
        format!("{folder}/{name}")
    }
}

/// The line, or when it is longer than [`MAX_LINE_CHARS`] a window of that many characters
/// starting a little before the match at byte `at`, with `…` where it was cut.
fn excerpt(line: &str, at: usize) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        return line.to_owned();
    }
    let start = line[..at]
        .char_indices()
        .rev()
        .nth(MAX_LINE_CHARS / 4)
        .map_or(0, |(i, _)| i);
    let end = line[start..]
        .char_indices()
        .nth(MAX_LINE_CHARS)
        .map_or(line.len(), |(i, _)| start + i);
    let mut text = String::with_capacity(end - start + 6);
    if start > 0 {
        text.push('…');
    }
    text.push_str(&line[start..end]);
    if end < line.len() {
        text.push('…');
    }
    text
}

impl Tool for SearchText {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "search_text",
            "Find a text in the project's files: returns [{path, line, text}] for each line \
             that contains it (exact, case-sensitive), up to max_results. Searches the whole \
             project, or only the folder or file given as 'path'. Binary files, very large \
             files, symbolic links and .git are skipped. When there are more matches, returns \
             {matches, truncated: true, note}.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The text to find, on one line, e.g. 'fn main'"
                },
                "path": {
                    "type": "string",
                    "description": "Folder (or file) to search, relative to the project root; default '.' (everything)"
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "description": "Most matching lines to return (default 100)"
                }
            },
            "required": ["query"],
            "additionalProperties": false
        }))
    }

    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args = parse_args(args)?;
        let dir = ProjectDir::from_context(ctx)?;
        run(&dir, args)
    }
}

export_tool!(SearchText);

#[cfg(test)]
mod tests;
