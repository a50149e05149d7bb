//! Every shape a secret can take in a `rojos.toml` that does not parse: the message keeps the
//! parser's position and wording and never shows the secret.

use std::path::Path;

use super::*;
use crate::{ConfigError, ConfigFile};

const SECRET: &str = "sekrit-4f9a-77c1";

/// The parse error message for `text`, which must not parse.
fn message(text: &str) -> String {
    let error = ConfigFile::parse(
        text,
        Path::new("/etc/rojos/rojos.toml"),
        Path::new("/etc/rojos"),
        &|_| Some("from-env-123456".to_owned()),
    )
    .expect_err("the text should not parse");
    match error {
        ConfigError::Parse { message, .. } => message,
        other => panic!("not a parse error: {other}"),
    }
}

/// The message for `text`, checked to hide `secret` and each of `also_hidden`.
fn hidden(text: &str, secret: &str) -> String {
    let shown = message(text);
    assert!(!shown.contains(secret), "the secret shows:\n{shown}");
    // No piece of it either: the secret's halves are 8 characters each.
    for half in [&secret[..8], &secret[secret.len() - 8..]] {
        assert!(!shown.contains(half), "part of the secret shows:\n{shown}");
    }
    shown
}

#[test]
fn a_typo_after_an_inline_token_shows_the_line_with_the_value_redacted() {
    let shown = hidden(
        &format!("[[auth.tokens]]\ntoken = \"{SECRET}\" x\nprojects = [\"*\"]\n"),
        SECRET,
    );
    assert_eq!(
        shown,
        "TOML parse error at line 2, column 28\n  |\n2 | token = <redacted>\n  |         ^\n\
         unexpected key or value, expected newline, `#`"
    );
}

#[test]
fn an_unterminated_token_string_is_redacted() {
    let shown = hidden(
        &format!("[[auth.tokens]]\ntoken = \"{SECRET}\nprojects = [\"*\"]\n"),
        SECRET,
    );
    assert!(shown.contains("2 | token = <redacted>\n"), "{shown}");
    assert!(shown.contains("invalid basic string"), "{shown}");
}

#[test]
fn an_unquoted_token_is_redacted() {
    let shown = hidden(
        &format!("[[auth.tokens]]\ntoken = {SECRET}\nprojects = [\"*\"]\n"),
        SECRET,
    );
    assert!(shown.contains("2 | token = <redacted>\n"), "{shown}");
}

#[test]
fn quoted_dotted_and_other_secret_keys_are_redacted() {
    for (text, line) in [
        (
            format!("[[auth.tokens]]\n\"token\" = \"{SECRET}\" x\nprojects = []\n"),
            "2 | \"token\" = <redacted>\n",
        ),
        (
            format!("auth.tokens = [{{ token = \"{SECRET}\", projects = [] }}] x\n"),
            "1 | auth.tokens = <redacted>\n",
        ),
        (
            format!("[providers.x]\nbase_url = \"http://h/v1\"\nmodel = \"m\"\napi_key = \"{SECRET}\"\n"),
            "4 | api_key = <redacted>\n",
        ),
        (
            format!("[providers.x]\nheaders = {{ Authorization = \"Bearer {SECRET}\" }}\n"),
            "2 | headers = { Authorization = <redacted>\n",
        ),
        (
            format!("[server]\nadmin_password = '{SECRET}'\n"),
            "2 | admin_password = <redacted>\n",
        ),
    ] {
        let shown = hidden(&text, SECRET);
        assert!(shown.contains(line), "{text}\n---\n{shown}");
    }
}

#[test]
fn an_inline_table_holding_a_token_is_redacted_wherever_the_error_is() {
    let shown = hidden(
        &format!("auth = {{ tokens = [{{ token = \"{SECRET}\", projects = [\"*\"], x = 1 }}] }}\n"),
        SECRET,
    );
    // `auth` itself counts as a secret word: the whole table is hidden.
    assert!(shown.contains("1 | auth = <redacted>\n"), "{shown}");
    assert!(shown.contains("unknown field `x`"), "{shown}");
}

#[test]
fn lines_of_a_token_array_spread_over_lines_are_redacted() {
    let text =
        format!("[auth]\ntokens = [\n  {{ projects = [\"*\"], token = \"{SECRET}\" }} x,\n]\n");
    let shown = hidden(&text, SECRET);
    assert!(shown.contains("3 | <redacted>\n"), "{shown}");
    // Keys inside the hidden value are not taken for values: the message keeps them.
    let text = format!(
        "[auth]\ntokens = [\n  {{ projects = [\"*\"], token = \"{SECRET}\", x = 1 }},\n]\n"
    );
    let shown = hidden(&text, SECRET);
    assert!(
        shown.ends_with("unknown field `x`, expected one of `token`, `token_env`, `projects`"),
        "{shown}"
    );
}

#[test]
fn every_line_of_a_multi_line_token_string_is_redacted() {
    let first = "sekrit-line-one-1111";
    let second = "sekrit-line-two-2222";
    for quote in ["\"\"\"", "'''"] {
        // The error on the closing line, and then on a later line with the value quoted.
        let text = format!(
            "[[auth.tokens]]\ntoken = {quote}\n{first}\n{second}{quote} x\nprojects = []\n"
        );
        let shown = hidden(&text, second);
        assert!(shown.contains("4 | <redacted>\n"), "{shown}");
        let text = format!("[auth]\ntokens = {quote}\n{first}\n{second}{quote}\n");
        let shown = hidden(&text, first);
        assert!(!shown.contains(second), "{shown}");
    }
}

#[test]
fn a_secret_value_quoted_by_the_parser_is_redacted_in_the_message() {
    let shown = hidden(&format!("[auth]\ntokens = \"{SECRET}\"\n"), SECRET);
    assert!(
        shown.ends_with("invalid type: string \"<redacted>\", expected a sequence"),
        "{shown}"
    );
    // Written with an escape, quoted decoded (and escaped again) by the parser.
    let shown = hidden(
        "[auth]\ntokens = \"sekrit-\\u0041bcd-\\\"quoted\\\"-9\"\n",
        "sekrit-Abcd",
    );
    assert!(!shown.contains("quoted"), "{shown}");
}

#[test]
fn lines_without_secrets_are_shown_as_the_parser_shows_them() {
    for text in [
        format!("[[auth.tokens]]\ntoken = \"{SECRET}\"\nprojects = \"*\"\n"),
        "[server]\nmax_chats_per_token = \"four\"\n".to_owned(),
        "[server]\nbnd = \"127.0.0.1:1\"\n".to_owned(),
        "[rojos.x]\nprovider = \"p\" x\n".to_owned(),
    ] {
        let parser: toml::de::Error = toml::from_str::<toml::Table>(&text).map_or_else(
            |e| e,
            |_| {
                // Valid TOML, refused by the schema: take the schema's error.
                toml::from_str::<super::super::RawConfig>(&text).expect_err("refused")
            },
        );
        assert_eq!(message(&text), parser.to_string().trim_end(), "{text}");
        assert!(!message(&text).contains("<redacted>"), "{text}");
    }
}

#[test]
fn the_rule_names_secret_keys_and_spares_the_others() {
    for key in [
        "token",
        "token_env",
        "api_key",
        "apiKey",
        "x-api-key",
        "client_secret",
        "password",
        "auth",
        "Authorization",
        "\"my token\"",
        "auth.tokens",
        "url",
    ] {
        assert!(is_secret_key(key), "{key}");
    }
    for key in [
        "max_chats_per_token",
        "base_url",
        "model",
        "projects",
        "bind",
    ] {
        assert!(!is_secret_key(key), "{key}");
    }
}
