//! The canonical form of a call's arguments, which the repeated-call check compares: path
//! arguments are normalised lexically, so `./a.txt`, `././a.txt`, `.//a.txt` and `a.txt` are
//! one call. Which arguments are paths, and what normalising does, is the rule documented in
//! `docs/plugins.md` ("Repeated calls"). Only the comparison uses this form: the plugin
//! always gets the arguments exactly as the model wrote them.

use std::borrow::Cow;

use serde_json::Value;

use rojos_plugin_host::ToolArgs;

/// Whether a top-level argument named `key` holds a path: `path`, `*_path`, `from`, `to`.
pub(super) fn is_path_key(key: &str) -> bool {
    matches!(key, "path" | "from" | "to") || key.ends_with("_path")
}

/// The arguments as one comparable text: path arguments (string values under a path key)
/// normalised, the rest untouched; serde_json's maps are sorted, so key order does not count.
/// Arguments whose paths are normal already are their own text ([`ToolArgs::text`]).
pub(super) fn canonical_args(args: &ToolArgs) -> Cow<'_, str> {
    let is_normal = |(key, value): (&String, &Value)| {
        !is_path_key(key)
            || value
                .as_str()
                .is_none_or(|path| normalise_path(path) == path)
    };
    match args.value() {
        Value::Object(fields) if !fields.iter().all(is_normal) => {
            let mut canonical = fields.clone();
            for (key, value) in &mut canonical {
                if let Value::String(path) = value {
                    if is_path_key(key) {
                        *path = normalise_path(path);
                    }
                }
            }
            Cow::Owned(Value::Object(canonical).to_string())
        }
        _ => Cow::Borrowed(args.text()),
    }
}

/// `path` with empty and `.` parts and trailing `/` removed, without touching the file
/// system: `./a//b/./c/` is `a/b/c`, `./` is `.`. `..` is kept (whether `a/../b` is `b`
/// depends on what `a` is), as are a leading `/` and an empty path, which the tools refuse.
pub(super) fn normalise_path(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    let joined = parts.join("/");
    match (path.starts_with('/'), joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dot_slash_double_slash_dot_parts_and_trailing_slashes_are_removed() {
        for (written, canonical) in [
            ("a.txt", "a.txt"),
            ("./a.txt", "a.txt"),
            ("././a.txt", "a.txt"),
            (".//a.txt", "a.txt"),
            ("docs//intro/./index.page", "docs/intro/index.page"),
            ("docs/", "docs"),
            ("docs/.", "docs"),
            ("docs///", "docs"),
            (".", "."),
            ("./", "."),
            (".//.", "."),
        ] {
            assert_eq!(normalise_path(written), canonical, "{written:?}");
        }
    }

    #[test]
    fn dot_dot_a_leading_slash_and_the_empty_path_are_kept() {
        assert_eq!(normalise_path("a/../b"), "a/../b");
        assert_eq!(normalise_path("./../x"), "../x");
        assert_eq!(normalise_path("/etc//passwd"), "/etc/passwd");
        assert_eq!(normalise_path("//"), "/");
        assert_eq!(normalise_path(""), "");
        assert_ne!(normalise_path("/a"), normalise_path("a"));
    }

    #[test]
    fn only_path_keys_are_normalised_and_free_text_is_left_alone() {
        let written = json!({
            "path": "./notes//a.txt",
            "text": "./keep//this/",
            "from": "./x/",
            "to": "y/./z",
            "source_path": ".//s",
            "query": "./q",
            "pathology": "./p",
            "max_results": 3
        });
        let written = ToolArgs::try_from(written).unwrap();
        let canonical: Value = serde_json::from_str(&canonical_args(&written)).unwrap();
        assert_eq!(
            canonical,
            json!({
                "path": "notes/a.txt",
                "text": "./keep//this/",
                "from": "x",
                "to": "y/z",
                "source_path": "s",
                "query": "./q",
                "pathology": "./p",
                "max_results": 3
            })
        );
    }

    #[test]
    fn a_path_key_holding_a_non_string_is_compared_as_written() {
        let args = ToolArgs::try_from(json!({"path": ["./a"]})).unwrap();
        assert_eq!(canonical_args(&args), r#"{"path":["./a"]}"#);
    }

    #[test]
    fn arguments_with_normal_paths_are_compared_as_their_own_text() {
        let args = ToolArgs::try_from(json!({"path": "docs/a.txt", "text": "./x"})).unwrap();
        let canonical = canonical_args(&args);
        assert!(matches!(canonical, Cow::Borrowed(_)), "{canonical:?}");
        assert_eq!(canonical, args.text());
        let args = ToolArgs::try_from(json!({"path": "./docs/a.txt"})).unwrap();
        assert_eq!(canonical_args(&args), r#"{"path":"docs/a.txt"}"#);
    }
}
