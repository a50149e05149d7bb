//! The message for a `rojos.toml` that is not valid TOML, in the TOML parser's layout (line,
//! column, the source line with a caret, what is wrong) but without the config's secrets:
//! the live reload logs it, so a typo next to an inline `token = "..."` must not print the
//! token. Secrets are found by key name, in the text as written, since it did not parse.
//!
//! The rule (docs/configuration.md, "Secrets in error messages"):
//! - a key is secret when its name, lowercased, contains `token`, `secret`, `pass`, `key`,
//!   `auth`, `bearer`, `credential` or `cookie` (except the number `max_chats_per_token`),
//!   or is `url` (`[store]`'s database url);
//! - a line assigning a secret key (`token = ...`, also inside an inline table or as a dotted
//!   or quoted key) is shown up to that `=`, then `<redacted>`;
//! - a value that goes on past its line (a multi-line string, an array or inline table left
//!   open) makes every line up to its end show as `<redacted>`;
//! - every string and word of those values (4 characters or more) is replaced by
//!   `<redacted>` wherever it appears in the parser's message.
//!
//! Redacting too much is acceptable; showing a secret is not.

use std::ops::Range;

/// What stands for a hidden value.
const REDACTED: &str = "<redacted>";

/// Words that make a key secret when its lowercased name contains one.
const SECRET_WORDS: &[&str] = &[
    "token",
    "secret",
    "pass",
    "key",
    "auth",
    "bearer",
    "credential",
    "cookie",
];

/// Keys of `rojos.toml` that contain a secret word but hold no secret.
const NOT_SECRET: &[&str] = &["max_chats_per_token"];

/// Keys secret by their whole name: `[store]`'s database `url`, which a user may have written
/// with a password (refused once parsed, but a parse error shows the text as written).
const SECRET_KEYS: &[&str] = &["url"];

/// Fragments shorter than this are not searched for in messages: no secret is this short
/// (tokens need 8 characters), and scrubbing `*` or `a` would garble the message.
const MIN_SCRUBBED_CHARS: usize = 4;

/// The parser's error as the user sees it, with the secrets of `text` hidden.
pub(super) fn describe(text: &str, error: &toml::de::Error) -> String {
    let secrets = Secrets::find(text);
    let message = secrets.scrub(error.message().trim_end());
    let Some(span) = error.span() else {
        return message;
    };
    let excerpt = secrets.excerpt(text, span);
    format!("{excerpt}{message}")
}

/// Where the secrets of a config text are: which lines show them, and their values.
#[derive(Debug, Default)]
struct Secrets {
    /// Per line: `None` if it shows no secret, else how many leading bytes may be shown
    /// (0 for a line inside a secret value).
    lines: Vec<Option<usize>>,
    /// Strings and words of secret values, longest first.
    values: Vec<String>,
}

/// A secret value that goes on past the line it starts on.
#[derive(Debug, Clone, Copy, Default)]
struct Open {
    /// Arrays and inline tables still open.
    depth: usize,
    /// Inside a multi-line string closed by this delimiter.
    string: Option<&'static str>,
}

impl Open {
    fn is_open(&self) -> bool {
        self.depth > 0 || self.string.is_some()
    }
}

impl Secrets {
    fn find(text: &str) -> Secrets {
        let mut secrets = Secrets::default();
        let mut open = Open::default();
        for line in text.split('\n') {
            let value_start = if open.is_open() {
                Some(0)
            } else {
                first_secret_assignment(line).map(|eq| eq + 1)
            };
            let Some(start) = value_start else {
                secrets.lines.push(None);
                continue;
            };
            secrets.lines.push(Some(start));
            let value = &line[start..];
            open = scan_value(value, open, &mut secrets.values);
        }
        secrets
            .values
            .retain(|v| v.chars().count() >= MIN_SCRUBBED_CHARS);
        secrets.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        secrets.values.dedup();
        secrets
    }

    /// `text` with every secret value replaced by `<redacted>`.
    fn scrub(&self, text: &str) -> String {
        self.values.iter().fold(text.to_owned(), |shown, value| {
            shown.replace(value, REDACTED)
        })
    }

    /// The parser's excerpt: position, the line (redacted if it shows a secret), a caret.
    fn excerpt(&self, text: &str, span: Range<usize>) -> String {
        let (line_index, column) = position(text, span.start);
        let line = text.split('\n').nth(line_index).unwrap_or("");
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (shown, caret_column, caret_len) = match self.lines.get(line_index).copied().flatten() {
            None => (line.to_owned(), column, span.len()),
            Some(kept) => {
                let kept = line.get(..kept).unwrap_or("");
                let kept_chars = kept.chars().count();
                let shown = format!("{}{REDACTED}", with_space(kept));
                if column < kept_chars {
                    (shown, column, span.len().min(kept_chars - column))
                } else {
                    (shown, with_space(kept).chars().count(), 1)
                }
            }
        };
        let number = (line_index + 1).to_string();
        let gutter = " ".repeat(number.len() + 1);
        let caret_len = caret_len.clamp(1, shown.chars().count().saturating_sub(caret_column) + 1);
        format!(
            "TOML parse error at line {number}, column {}\n{gutter}|\n{number} | {shown}\n{gutter}| {}{}\n",
            column + 1,
            " ".repeat(caret_column),
            "^".repeat(caret_len),
        )
    }
}

/// `kept` followed by one space, unless it is empty or already ends in one.
fn with_space(kept: &str) -> String {
    if kept.is_empty() || kept.ends_with(' ') {
        kept.to_owned()
    } else {
        format!("{kept} ")
    }
}

/// The 0-based line and character column of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count())
}

/// The byte offset of the first `=` on `line` that assigns a secret key. The key is what
/// stands between the line start, or the last `{` or `,` before the `=`, and the `=`: so
/// `a.token = `, `"api_key" = ` and `{ token = ` all count. An `=` inside a string may be
/// taken for an assignment too, which only hides more.
fn first_secret_assignment(line: &str) -> Option<usize> {
    line.match_indices('=').map(|(i, _)| i).find(|&eq| {
        let before = &line[..eq];
        let key_start = before.rfind(['{', ',']).map_or(0, |i| i + 1);
        is_secret_key(&before[key_start..])
    })
}

/// Whether a key, as written (maybe dotted or quoted), names a secret.
fn is_secret_key(key: &str) -> bool {
    let key = key.trim().trim_matches(['"', '\'']).to_lowercase();
    SECRET_KEYS.contains(&key.as_str())
        || (!NOT_SECRET.contains(&key.as_str())
            && SECRET_WORDS.iter().any(|word| key.contains(word)))
}

/// Reads the part of a secret value on one line: collects its strings and words into
/// `values`, and says whether the value is still open at the end of the line.
fn scan_value(value: &str, mut open: Open, values: &mut Vec<String>) -> Open {
    let mut rest = value;
    loop {
        if let Some(delimiter) = open.string {
            let Some(end) = rest.find(delimiter) else {
                collect_words(rest, values);
                return open;
            };
            collect_words(&rest[..end], values);
            rest = &rest[end + delimiter.len()..];
            open.string = None;
        }
        let Some(c) = rest.chars().next() else {
            return open;
        };
        if let Some(delimiter) = ["\"\"\"", "'''"].into_iter().find(|d| rest.starts_with(d)) {
            open.string = Some(delimiter);
            rest = &rest[delimiter.len()..];
            continue;
        }
        rest = match c {
            '"' | '\'' => take_string(rest, c, values),
            '#' => return open,
            '[' | '{' => {
                open.depth += 1;
                &rest[1..]
            }
            ']' | '}' => {
                open.depth = open.depth.saturating_sub(1);
                &rest[1..]
            }
            // The secret value ended (`{ token = "x", projects = [...] }`): what follows is
            // another key, and only a secret one has a value to read.
            ',' if !open.is_open() => match first_secret_assignment(rest) {
                Some(eq) => &rest[eq + 1..],
                None => return open,
            },
            c if c.is_whitespace() || c == ',' || c == '=' => &rest[c.len_utf8()..],
            _ => take_word(rest, values),
        };
    }
}

/// Reads a bare word (an unquoted value, a number, a key) and pushes it unless it is a key.
fn take_word<'a>(rest: &'a str, values: &mut Vec<String>) -> &'a str {
    let end = rest
        .find(|c: char| c.is_whitespace() || "\"'[]{},=#".contains(c))
        .unwrap_or(rest.len())
        .max(rest.chars().next().map_or(0, char::len_utf8));
    let (word, after) = rest.split_at(end);
    if !after.trim_start().starts_with('=') {
        values.push(word.to_owned());
    }
    after
}

/// Reads a one-line string starting at `rest` (quote `quote`), pushes its text as written
/// and as the parser decodes it, and returns what follows it.
fn take_string<'a>(rest: &'a str, quote: char, values: &mut Vec<String>) -> &'a str {
    let body = &rest[1..];
    let mut escaped = false;
    let end = body.char_indices().find_map(|(i, c)| {
        let closes = c == quote && !escaped;
        escaped = quote == '"' && c == '\\' && !escaped;
        closes.then_some(i)
    });
    let end = end.unwrap_or(body.len());
    let raw = &body[..end];
    values.push(raw.to_owned());
    let literal = format!("v = {quote}{raw}{quote}");
    if let Some(decoded) = toml::from_str::<toml::Table>(&literal)
        .ok()
        .and_then(|t| t.get("v")?.as_str().map(str::to_owned))
    {
        // Serde quotes a value in its messages with Rust's escaping (`string "a\"b"`).
        let escaped = format!("{decoded:?}");
        values.push(escaped[1..escaped.len() - 1].to_owned());
        values.push(decoded);
    }
    body.get(end + 1..).unwrap_or("")
}

/// Pushes the words of a line of a multi-line secret string, and the line itself.
fn collect_words(text: &str, values: &mut Vec<String>) {
    values.push(text.trim().to_owned());
    values.extend(text.split_whitespace().map(str::to_owned));
}

#[cfg(test)]
mod tests;
