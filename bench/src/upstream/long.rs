//! S4's upstream (`/long/v1`): one long conversation, turn after turn. To each user message
//! the model first asks for `get_text_content` of [`LONG_FILE`] (a tool result of about
//! [`LONG_FILE_BYTES`] joins the history), then, once that result is in the request, answers
//! with [`LONG_ANSWER_BYTES`] of text: each user turn adds about 4 KB to what every later
//! request carries. The step is chosen by the role of the request's last message, so the
//! upstream stays stateless. The host is told the model's window is [`LONG_WINDOW_TOKENS`]
//! (`host::Flavour::Long`), which the history passes after a few turns: a request asking for
//! a summary (its system message opens with the host's summary prompt) is answered with a
//! short one.

use axum::body::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::chunks::{text_in_pieces, tool_call};

/// The file every turn reads, in the project root.
pub(crate) const LONG_FILE: &str = "notes.txt";
/// Its size.
pub(crate) const LONG_FILE_BYTES: usize = 2_000;
/// Bytes of each text answer.
pub(crate) const LONG_ANSWER_BYTES: usize = 2_000;
/// Characters per content delta of the answer (a provider streaming tokens of a few words).
const ANSWER_PIECE: usize = 64;
/// The model's window S4's host is told: a local model's 16k, passed after about ten turns.
pub(crate) const LONG_WINDOW_TOKENS: u64 = 16_384;
/// How the host's request for a summary opens its system message.
const SUMMARY_PROMPT: &str = "You summarise";

/// The part of a request that picks the step.
#[derive(Debug, Deserialize)]
struct Request {
    messages: Vec<Message>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Option<serde_json::Value>,
}

/// The SSE events answering `body`: a summary when it asks for one (then `true`), a tool
/// call after a user message, the text after a tool result.
pub(super) fn answer(body: &[u8]) -> Result<(Vec<Bytes>, bool), String> {
    let request: Request =
        serde_json::from_slice(body).map_err(|e| format!("request is not JSON: {e}"))?;
    let summary = request.messages.first().is_some_and(|m| {
        m.role == "system"
            && m.content
                .as_ref()
                .and_then(|c| c.as_str())
                .is_some_and(|c| c.starts_with(SUMMARY_PROMPT))
    });
    if summary {
        let text = "The user asked, turn after turn, to read notes.txt; it was read each time \
                    and its numbered lines were reported. Nothing is left to do.";
        return Ok((text_in_pieces(text, ANSWER_PIECE), true));
    }
    let events = match request.messages.last().map(|m| m.role.as_str()) {
        Some("user") => {
            // Unique in the conversation: one call per user message.
            let id = format!("call_read_{}", request.messages.len());
            let args = json!({"path": LONG_FILE}).to_string();
            Ok(tool_call(&id, "get_text_content", &args))
        }
        Some("tool") => Ok(text_in_pieces(&long_answer(), ANSWER_PIECE)),
        other => Err(format!("unexpected last message role {other:?}")),
    };
    events.map(|e| (e, false))
}

/// [`LONG_ANSWER_BYTES`] of prose.
fn long_answer() -> String {
    const SENTENCE: &str = "The notes say the same thing again, and the answer repeats it. ";
    let mut text = SENTENCE.repeat(LONG_ANSWER_BYTES / SENTENCE.len() + 1);
    text.truncate(LONG_ANSWER_BYTES);
    text
}

/// The text of [`LONG_FILE`]: [`LONG_FILE_BYTES`] of numbered lines.
pub(crate) fn long_file() -> String {
    let mut text: String = (0..)
        .map(|i| format!("line {i:04}: a note that the long conversation reads again.\n"))
        .take_while({
            let mut total = 0;
            move |line| {
                total += line.len();
                total <= LONG_FILE_BYTES
            }
        })
        .collect();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(roles: &[&str]) -> Vec<u8> {
        let messages: Vec<_> = roles
            .iter()
            .map(|r| json!({"role": r, "content": "x"}))
            .collect();
        serde_json::to_vec(&json!({"model": "m", "messages": messages})).unwrap()
    }

    #[test]
    fn a_user_message_gets_a_read_and_a_tool_result_the_long_text() {
        let read = answer(&request(&["user"])).unwrap().0.concat();
        assert!(contains(&read, br#""name":"get_text_content""#));
        assert!(contains(&read, br#""finish_reason":"tool_calls""#));
        let text = answer(&request(&["user", "assistant", "tool"]))
            .unwrap()
            .0
            .concat();
        assert!(contains(&text, br#""finish_reason":"stop""#));
        assert!(text.len() > LONG_ANSWER_BYTES);
        assert!(answer(&request(&["user", "assistant"])).is_err());
    }

    #[test]
    fn a_request_for_a_summary_gets_one() {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "You summarise the earlier part of a conversation"},
            {"role": "user", "content": "The conversation: ..."},
        ]});
        let (events, summary) = answer(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert!(summary);
        assert!(contains(&events.concat(), br#""finish_reason":"stop""#));
        assert!(!answer(&request(&["system", "user"])).unwrap().1);
    }

    #[test]
    fn the_file_is_about_its_size() {
        let file = long_file();
        assert!(file.len() <= LONG_FILE_BYTES + 1 && file.len() > LONG_FILE_BYTES - 80);
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }
}
