//! The abuse scenario's upstream (`/abuse/{misbehaviour}/v1`): a turn of [`FLOOD_CALLS`]
//! tool calls, or one SSE `data:` line of [`HUGE_LINE_BYTES`].

use axum::body::Bytes;
use serde_json::json;

use super::chunks::chunk;

/// `get_text_content` calls in the tool-flood turn.
pub(crate) const FLOOD_CALLS: usize = 1500;
/// The file the tool-flood turn reads, in the project root.
pub(crate) const FLOOD_FILE: &str = "big.txt";
/// Bytes of the huge-line turn's one `data:` line.
pub(crate) const HUGE_LINE_BYTES: usize = 60_000_000;
/// The huge line is written in pieces of this size, as a provider's server would.
const HUGE_LINE_WRITE: usize = 64 * 1024;

/// How the upstream misbehaves under `/abuse/{slug}/v1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Misbehaviour {
    /// The first turn asks for [`FLOOD_CALLS`] reads of [`FLOOD_FILE`], each path spelt
    /// differently; once the request carries tool results, a text answer.
    ToolFlood,
    /// Every turn is a single `data:` line of [`HUGE_LINE_BYTES`] (its `content`), then `stop`.
    HugeLine,
}

impl Misbehaviour {
    /// Its name in the route.
    pub(super) fn slug(self) -> &'static str {
        match self {
            Misbehaviour::ToolFlood => "tool-flood",
            Misbehaviour::HugeLine => "huge-line",
        }
    }

    /// The misbehaviour a route names.
    pub(super) fn from_slug(slug: &str) -> Option<Misbehaviour> {
        [Misbehaviour::ToolFlood, Misbehaviour::HugeLine]
            .into_iter()
            .find(|m| m.slug() == slug)
    }
}

/// The `i`-th spelling of [`FLOOD_FILE`]: 11 parts `./` or `.//` (the bits of `i`), so every
/// call's arguments differ while naming the same file.
pub(crate) fn flood_path(i: usize) -> String {
    let prefix: String = (0..11)
        .map(|bit| if i >> bit & 1 == 1 { ".//" } else { "./" })
        .collect();
    format!("{prefix}{FLOOD_FILE}")
}

/// One turn asking for [`FLOOD_CALLS`] reads, each call whole in one delta (as some providers
/// send them).
pub(super) fn tool_flood() -> Vec<Bytes> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    for i in 0..FLOOD_CALLS {
        let args = json!({"path": flood_path(i)}).to_string();
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call_flood_{i}"), "type": "function", "function": {"name": "get_text_content", "arguments": args}}]}),
            None,
        ));
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

/// One turn whose text is a single `data:` line of about [`HUGE_LINE_BYTES`], cut into
/// [`HUGE_LINE_WRITE`] writes.
pub(super) fn huge_line() -> Vec<Bytes> {
    const SENTENCE: &str = "All work and no play makes a very long answer. ";
    let mut text = SENTENCE.repeat(HUGE_LINE_BYTES / SENTENCE.len() + 1);
    // The chunk's JSON around the text takes the other 200 bytes (ASCII: any cut is a char
    // boundary).
    text.truncate(HUGE_LINE_BYTES - 200);
    let line = chunk(json!({"content": text}), None);
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    events.extend(
        (0..line.len())
            .step_by(HUGE_LINE_WRITE)
            .map(|at| line.slice(at..(at + HUGE_LINE_WRITE).min(line.len()))),
    );
    events.push(chunk(json!({}), Some("stop")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_paths_differ_and_all_name_the_file() {
        let paths: std::collections::HashSet<String> = (0..FLOOD_CALLS).map(flood_path).collect();
        assert_eq!(paths.len(), FLOOD_CALLS);
        for path in &paths {
            let parts: Vec<&str> = path
                .split('/')
                .filter(|p| !p.is_empty() && *p != ".")
                .collect();
            assert_eq!(parts, [FLOOD_FILE], "{path}");
        }
    }

    #[test]
    fn the_huge_line_is_one_data_line_in_64_kib_writes() {
        let events = huge_line();
        let line: Vec<u8> = events[1..events.len() - 2].concat();
        assert!(line.starts_with(b"data: {"));
        assert!(line.len() > HUGE_LINE_BYTES - 100 && line.len() <= HUGE_LINE_BYTES);
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 2);
        assert!(line.ends_with(b"}\n\n"));
        assert!(events[1..events.len() - 3]
            .iter()
            .all(|e| e.len() == HUGE_LINE_WRITE));
    }
}
