//! S4's upstream (`/long/v1`): one long conversation, turn after turn. To each user message
//! the model first asks for `get_text_content` of [`LONG_FILE`] (a tool result of about
//! [`LONG_FILE_BYTES`] joins the history), then, once that result is in the request, answers
//! with [`LONG_ANSWER_BYTES`] of text: each user turn adds about 4 KB to what every later
//! request carries. The step is chosen by the role of the request's last message, so the
//! upstream stays stateless.

use axum::body::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::{text_in_pieces, tool_call};

/// The file every turn reads, in the project root.
pub(crate) const LONG_FILE: &str = "notes.txt";
/// Its size.
pub(crate) const LONG_FILE_BYTES: usize = 2_000;
/// Bytes of each text answer.
pub(crate) const LONG_ANSWER_BYTES: usize = 2_000;
/// Characters per content delta of the answer (a provider streaming tokens of a few words).
const ANSWER_PIECE: usize = 64;

/// The part of a request that picks the step.
#[derive(Debug, Deserialize)]
struct Request {
    messages: Vec<Message>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
}

/// The SSE events answering `body`: a tool call after a user message, the text after a tool
/// result.
pub(super) fn answer(body: &[u8]) -> Result<Vec<Bytes>, String> {
    let request: Request =
        serde_json::from_slice(body).map_err(|e| format!("request is not JSON: {e}"))?;
    match request.messages.last().map(|m| m.role.as_str()) {
        Some("user") => {
            // Unique in the conversation: one call per user message.
            let id = format!("call_read_{}", request.messages.len());
            let args = json!({"path": LONG_FILE}).to_string();
            Ok(tool_call(&id, "get_text_content", &args))
        }
        Some("tool") => Ok(text_in_pieces(&long_answer(), ANSWER_PIECE)),
        other => Err(format!("unexpected last message role {other:?}")),
    }
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
        let read = answer(&request(&["user"])).unwrap().concat();
        assert!(contains(&read, br#""name":"get_text_content""#));
        assert!(contains(&read, br#""finish_reason":"tool_calls""#));
        let text = answer(&request(&["user", "assistant", "tool"]))
            .unwrap()
            .concat();
        assert!(contains(&text, br#""finish_reason":"stop""#));
        assert!(text.len() > LONG_ANSWER_BYTES);
        assert!(answer(&request(&["user", "assistant"])).is_err());
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
