//! The conversation as the provider sees it: the request for one model turn (system prompt,
//! stored messages, tools, `tool_choice`), tool results capped before they enter the history,
//! and the rule that keeps a stored history acceptable to every provider.

use rojos_llm::{ChatRequest, ToolChoice};
use serde_json::{json, Value};

use crate::{config::RojoConfig, plugins::ToolOutcome};

/// The request for one model turn. The last allowed turn is made with `tool_choice: "none"`
/// so the model answers instead of being cut off.
pub(super) fn request(
    rojo: &RojoConfig,
    history: &[Value],
    tools: Vec<Value>,
    last: bool,
) -> ChatRequest {
    let mut messages = Vec::with_capacity(history.len() + 1);
    if let Some(prompt) = &rojo.system_prompt {
        messages.push(json!({"role": "system", "content": prompt}));
    }
    messages.extend_from_slice(history);
    ChatRequest {
        messages,
        tools,
        tool_choice: Some(if last {
            ToolChoice::None
        } else {
            ToolChoice::Auto
        }),
    }
}

/// The text the model (and the client) is given for a call: the result, or `error: why`,
/// cut to `max_bytes` with a marker saying how much was left out.
pub(super) fn model_text(outcome: &ToolOutcome, max_bytes: usize) -> String {
    let text = if outcome.ok {
        outcome.result.clone()
    } else {
        format!("error: {}", outcome.result)
    };
    cap(text, max_bytes)
}

fn cap(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let total = text.len();
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!(
        "\n[result truncated by rojos: {} of {total} bytes left out]",
        total - cut
    ));
    text
}

/// Whether the history ends on a message a provider would not accept as the end of a stored
/// conversation followed by a new user message (`user` or `tool`).
pub(super) fn needs_closing(history: &[Value]) -> bool {
    history.last().is_some_and(|m| m["role"] != "assistant")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_result_is_cut_at_a_char_boundary_with_a_marker() {
        let text = "é".repeat(10); // 20 bytes
        let capped = cap(text, 5);
        assert_eq!(
            capped,
            "éé\n[result truncated by rojos: 16 of 20 bytes left out]"
        );
        assert_eq!(cap("short".into(), 5), "short");
    }

    #[test]
    fn error_results_say_so() {
        let outcome = ToolOutcome::error("path 'x' not found");
        assert_eq!(model_text(&outcome, 100), "error: path 'x' not found");
    }

    #[test]
    fn histories_ending_on_user_or_tool_need_closing() {
        assert!(needs_closing(&[json!({"role": "user", "content": "hi"})]));
        assert!(needs_closing(&[
            json!({"role": "tool", "tool_call_id": "a", "content": "x"})
        ]));
        assert!(!needs_closing(&[
            json!({"role": "assistant", "content": "hi"})
        ]));
        assert!(!needs_closing(&[]));
    }

    #[test]
    fn the_last_turn_is_made_without_tools() {
        let rojo = RojoConfig {
            provider: "p".into(),
            system_prompt: Some("be brief".into()),
            tools: crate::config::ToolSelection::All,
            max_steps: 3,
        };
        let history = [json!({"role": "user", "content": "hi"})];
        let r = request(&rojo, &history, vec![], true);
        assert_eq!(r.tool_choice, Some(ToolChoice::None));
        assert_eq!(
            r.messages[0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            request(&rojo, &history, vec![], false).tool_choice,
            Some(ToolChoice::Auto)
        );
    }
}
