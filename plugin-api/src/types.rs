//! The JSON documents that cross the plugin boundary: the tool's manifest, the context of a
//! call, and a tool's error. Fields are added, never removed or retyped; every reader
//! ignores fields it does not know, so host and plugins of neighbouring versions agree.

use std::borrow::Cow;

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;

/// What a tool author declares: the model-facing name, description and parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls (`^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`).
    pub name: String,
    /// What the tool does, written for the model.
    pub description: String,
    /// JSON schema of the arguments object. The host validates every call against it
    /// (`additionalProperties: false` is honoured) and offers the model a portable subset.
    pub parameters: Value,
    /// True for tools that destroy or move data; clients may ask before running them.
    #[serde(default)]
    pub destructive: bool,
    /// The names of the arguments that hold paths the tool changes (creates, writes, moves,
    /// deletes), e.g. `["from", "to"]`. Before such a call runs, the host records those paths'
    /// earlier state so the user can undo the run's file changes (docs/plugins.md). Empty:
    /// the tool changes no files; a manifest without the field (plugins built before it)
    /// reads as empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes_paths: Vec<String>,
    /// The names of the arguments that hold paths the tool only creates: it makes what is
    /// missing there (and the folders on the way) and leaves what exists as it is, e.g.
    /// `create_directory`'s `["path"]`. The host records only what is missing there, so an
    /// undo removes what the call created; an existing folder, however large, is not copied.
    /// A manifest without the field reads as empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub creates_paths: Vec<String>,
}

impl ToolSpec {
    /// A tool with no parameters; add them with [`ToolSpec::parameters`].
    pub fn new(name: &str, description: &str) -> Self {
        ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters: serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
            destructive: false,
            changes_paths: Vec::new(),
            creates_paths: Vec::new(),
        }
    }

    /// Sets the JSON schema of the arguments object.
    pub fn parameters(mut self, schema: Value) -> Self {
        self.parameters = schema;
        self
    }

    /// Marks the tool as destructive.
    pub fn destructive(mut self) -> Self {
        self.destructive = true;
        self
    }

    /// Declares the arguments that name paths the tool changes (see
    /// [`ToolSpec::changes_paths`](struct.ToolSpec.html#structfield.changes_paths)).
    pub fn changes_paths(mut self, arguments: &[&str]) -> Self {
        self.changes_paths = arguments.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    /// Declares the arguments that name paths the tool only creates (see
    /// [`ToolSpec::creates_paths`](struct.ToolSpec.html#structfield.creates_paths)).
    pub fn creates_paths(mut self, arguments: &[&str]) -> Self {
        self.creates_paths = arguments.iter().map(|a| (*a).to_owned()).collect();
        self
    }
}

/// What a plugin reports about itself at load time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The tool this plugin provides.
    #[serde(flatten)]
    pub spec: ToolSpec,
    /// [`crate::JSON_API`] of the plugin-api the plugin was built with.
    pub api: u32,
    /// The plugin-api crate version the plugin was built with.
    pub plugin_api_version: String,
    /// Whether the plugin was built with `panic = "unwind"`; the host refuses `abort`
    /// builds, whose panics would kill it.
    pub panic_unwind: bool,
}

/// Limits the host applies to file tools (`[limits]` in `rojos.toml`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Largest file `get_text_content` returns, in bytes.
    pub max_read_bytes: u64,
    /// Largest text `write_text_content` writes, in bytes.
    pub max_write_bytes: u64,
    /// Most entries `list_files` returns.
    pub max_list_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_read_bytes: 1 << 20,
            max_write_bytes: 1 << 20,
            max_list_entries: 10_000,
        }
    }
}

/// What the host tells a tool about the call it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallContext {
    /// The project the call works on.
    pub project_id: String,
    /// An open directory descriptor of `<storage>/<projectId>/root/`, valid for the whole
    /// call and owned by the host. Open it with `rojos_fs_guard::ProjectDir::from_context`,
    /// which duplicates it; never close it.
    pub root_fd: i32,
    /// Limits to apply.
    #[serde(default)]
    pub limits: Limits,
    /// Paths, as the call's arguments name them, that the host found missing when it let the
    /// call run without asking the user (`approve = "destructive"` asks before a call
    /// replaces something that exists). The tool must only create there: if something has
    /// appeared at such a path since, it must refuse rather than replace it, so a file made
    /// meanwhile is never replaced unasked (`rojos_fs_guard` does so for every write). Empty
    /// for most calls; a context without the field (hosts before it) reads as empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub create_only: Vec<String>,
}

/// The class of a tool failure, as text so new kinds can be added without breaking anyone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorKind(pub Cow<'static, str>);

impl ErrorKind {
    /// The arguments do not fit the tool's parameters.
    pub const INVALID_ARGUMENTS: ErrorKind = ErrorKind(Cow::Borrowed("invalid_arguments"));
    /// The path names nothing.
    pub const NOT_FOUND: ErrorKind = ErrorKind(Cow::Borrowed("not_found"));
    /// The path leads outside the project root.
    pub const OUTSIDE_ROOT: ErrorKind = ErrorKind(Cow::Borrowed("outside_root"));
    /// The path exists but is of the wrong kind, or the operation is refused.
    pub const REFUSED: ErrorKind = ErrorKind(Cow::Borrowed("refused"));
    /// A size limit was exceeded.
    pub const TOO_LARGE: ErrorKind = ErrorKind(Cow::Borrowed("too_large"));
    /// The content is not UTF-8 text.
    pub const NOT_TEXT: ErrorKind = ErrorKind(Cow::Borrowed("not_text"));
    /// The file changed since the version the call expected (a stale write): read it again.
    pub const STALE: ErrorKind = ErrorKind(Cow::Borrowed("stale"));
    /// Any other I/O failure.
    pub const IO: ErrorKind = ErrorKind(Cow::Borrowed("io"));
    /// The tool panicked; the panic was caught inside the plugin.
    pub const PANICKED: ErrorKind = ErrorKind(Cow::Borrowed("panicked"));
    /// The tool broke the plugin protocol or the host could not run it.
    pub const INTERNAL: ErrorKind = ErrorKind(Cow::Borrowed("internal"));
}

/// A tool's failure: the message is what the model reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolError {
    /// The class of failure.
    pub kind: ErrorKind,
    /// What went wrong, for the model: names only the model's own relative path.
    pub message: String,
}

impl ToolError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
        }
    }

    /// The arguments do not fit the tool's parameters.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        ToolError::new(ErrorKind::INVALID_ARGUMENTS, message)
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// Parses the model's arguments, which must be a JSON object, into the tool's own type, with
/// a message the model can act on (`invalid arguments: missing field `path``). A JSON array
/// is refused even though serde would map it onto a struct's fields by position.
///
/// # Errors
///
/// [`ErrorKind::INVALID_ARGUMENTS`] when the JSON is not an object or does not fit `T`.
pub fn parse_args<T: DeserializeOwned>(args: &str) -> Result<T, ToolError> {
    if !args
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return Err(ToolError::invalid_arguments(
            "invalid arguments: expected a JSON object of named arguments, like {\"path\": \"notes.txt\"}",
        ));
    }
    serde_json::from_str(args)
        .map_err(|e| ToolError::invalid_arguments(format!("invalid arguments: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_from_before_changes_paths_loads_as_changing_nothing() {
        // What a plugin built against JSON_API 1 before the field existed sends.
        let old = r#"{"name":"old_tool","description":"d","parameters":{"type":"object"},
            "destructive":true,"api":1,"plugin_api_version":"0.1.0","panic_unwind":true}"#;
        let manifest: Manifest = serde_json::from_str(old).expect("an old manifest loads");
        assert!(manifest.spec.changes_paths.is_empty());
        assert!(manifest.spec.creates_paths.is_empty());
        assert!(manifest.spec.destructive);
    }

    #[test]
    fn changes_paths_travels_in_the_manifest_and_is_left_out_when_empty() {
        let spec = ToolSpec::new("mover", "m").changes_paths(&["from", "to"]);
        let json = serde_json::to_value(&spec).expect("json");
        assert_eq!(json["changes_paths"], serde_json::json!(["from", "to"]));
        let plain = serde_json::to_value(ToolSpec::new("reader", "r")).expect("json");
        assert!(plain.get("changes_paths").is_none(), "{plain}");
        assert!(plain.get("creates_paths").is_none(), "{plain}");
        let maker = ToolSpec::new("maker", "m").creates_paths(&["path"]);
        let json = serde_json::to_value(&maker).expect("json");
        assert_eq!(json["creates_paths"], serde_json::json!(["path"]));
    }
}
