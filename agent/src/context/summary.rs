//! The summary of older turns, made by the model: the turns are written out as a plain
//! transcript (long tool results shortened), in parts that fit the window, and each part is
//! summarised together with the summary of the parts before it.

use std::sync::Arc;

use futures_util::StreamExt;
use rojos_llm::{user_message, Client, LlmError, MessageText, SharedChatRequest, TurnEvent};
use serde_json::Value;

/// What the model is asked to do.
const PROMPT: &str = "You summarise the earlier part of a conversation between a user and \
an assistant that uses tools on the user's project files, so the assistant can go on \
without those messages. Keep what matters for going on: what the user asked for and wants; \
every file or folder read, created, changed, moved or deleted, by its path, with what \
matters of its content; decisions made and why; errors met; what is still to do. Write \
plain text, short sentences or a list, at most about 400 words. Only what happened: add \
nothing.";

/// The most of one tool result the transcript keeps.
const RESULT_BYTES: usize = 1_500;

/// The summary of `messages` (those after `previous`'s), in parts of at most `part_bytes`;
/// `host` names the provider in an error.
///
/// # Errors
/// The provider's failure.
pub(crate) async fn summarise(
    client: &Client,
    host: &str,
    previous: Option<&str>,
    messages: &[MessageText],
    part_bytes: usize,
) -> Result<String, LlmError> {
    let mut summary = previous.map(str::to_owned);
    for part in parts(messages, part_bytes.max(2_048)) {
        summary = Some(ask(client, host, summary.as_deref(), &part).await?);
    }
    Ok(summary.unwrap_or_default())
}

/// One request: the summary so far and the next part of the transcript.
async fn ask(
    client: &Client,
    host: &str,
    previous: Option<&str>,
    part: &str,
) -> Result<String, LlmError> {
    let mut text = String::new();
    if let Some(previous) = previous {
        text.push_str("The summary of what came before:\n\n");
        text.push_str(previous);
        text.push_str("\n\nWhat came after it:\n\n");
    } else {
        text.push_str("The conversation:\n\n");
    }
    text.push_str(part);
    text.push_str("\n\nWrite the summary of all of it.");
    let request = SharedChatRequest {
        system: Some(Arc::from(PROMPT)),
        messages: Arc::new(vec![MessageText::new(&user_message(&text))]),
        tools: Vec::new(),
        tool_choice: None,
    };
    let mut stream = client.stream_shared(request);
    while let Some(event) = stream.next().await {
        if let TurnEvent::Finished(turn) = event? {
            return Ok(turn.text);
        }
    }
    Err(LlmError::StreamCut {
        provider: host.to_owned(),
        source: None,
    })
}

/// The transcript of `messages`, in parts of at most about `bytes`.
fn parts(messages: &[MessageText], bytes: usize) -> Vec<String> {
    let mut parts = vec![String::new()];
    for message in messages {
        let line = transcript_line(message);
        let last = parts.last_mut().expect("parts start with one");
        if !last.is_empty() && last.len() + line.len() > bytes {
            parts.push(String::new());
        }
        let last = parts.last_mut().expect("parts start with one");
        let room = bytes.saturating_sub(last.len()).max(256);
        last.push_str(&shorten(&line, room));
        last.push('\n');
    }
    parts.retain(|p| !p.is_empty());
    parts
}

/// One message as a transcript line: its role, text, and calls or result.
fn transcript_line(message: &MessageText) -> String {
    let Ok(value) = serde_json::from_str::<Value>(message.as_str()) else {
        return String::new();
    };
    let content = value["content"].as_str().unwrap_or("");
    match message.role() {
        "tool" => format!("[tool result] {}", shorten(content, RESULT_BYTES)),
        "assistant" => {
            let mut line = format!("[assistant] {content}");
            for call in value["tool_calls"].as_array().into_iter().flatten() {
                let name = call["function"]["name"].as_str().unwrap_or("?");
                let args = call["function"]["arguments"].as_str().unwrap_or("");
                line.push_str(&format!(
                    "\n[assistant calls {name}] {}",
                    shorten(args, 500)
                ));
            }
            line
        }
        role => format!("[{role}] {content}"),
    }
}

/// `text`, cut to about `bytes` with a marker.
fn shorten(text: &str, bytes: usize) -> String {
    if text.len() <= bytes {
        return text.to_owned();
    }
    let at = text.floor_char_boundary(bytes);
    format!("{}… ({} bytes more)", &text[..at], text.len() - at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_transcript_is_cut_into_parts_that_fit() {
        let messages: Vec<MessageText> = (0..10)
            .map(|n| {
                MessageText::new(
                    &json!({"role": "user", "content": format!("{n} {}", "x".repeat(900))}),
                )
            })
            .collect();
        let parts = parts(&messages, 2_048);
        assert_eq!(parts.len(), 5);
        assert!(parts.iter().all(|p| p.len() <= 2_048 + 64));
        assert!(parts[0].starts_with("[user] 0 "));
        let tool = MessageText::new(
            &json!({"role": "tool", "tool_call_id": "a", "content": "y".repeat(5_000)}),
        );
        assert!(transcript_line(&tool).len() < RESULT_BYTES + 64);
    }
}
