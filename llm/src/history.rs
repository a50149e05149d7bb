//! The OpenAI-format messages of a history, built here only: the system prompt, the user's
//! message, the assistant message of a turn (content, `tool_calls` with valid JSON-object
//! arguments, echoed provider extras) or of plain text, and one `tool` message per call.
//! Storing them, and what the tools answered, is the caller's job.
//!
//! A request sends its history as [`MessageText`]s: each message written as JSON text once,
//! when it joins the history, and copied into every later request's body from there.

use serde::{Serialize, Serializer};
use serde_json::{json, value::RawValue, Map, Value};

use crate::turn::{ToolCall, Turn};

/// One message of a request's history as the compact JSON text sent for it, written once
/// ([`MessageText::new`]). Each model turn sends the whole history again: a turn copies this
/// text instead of serialising the message's `Value` tree anew, so a long conversation costs
/// its bytes per turn, not their serialisation.
#[derive(Debug, Clone)]
pub struct MessageText {
    text: Box<RawValue>,
    role: Box<str>,
}

impl MessageText {
    /// `message` written as compact JSON (serde_json's key order, as `to_string` writes it).
    pub fn new(message: &Value) -> MessageText {
        // A `Value` always serialises: its keys are strings and its numbers finite.
        let text = serde_json::value::to_raw_value(message).expect("a JSON value serialises");
        let role = message["role"].as_str().unwrap_or_default().into();
        MessageText { text, role }
    }

    /// The message's JSON text.
    pub fn as_str(&self) -> &str {
        self.text.get()
    }

    /// The message's `role` (`""` when it has none).
    pub fn role(&self) -> &str {
        &self.role
    }
}

impl From<&Value> for MessageText {
    fn from(message: &Value) -> MessageText {
        MessageText::new(message)
    }
}

impl PartialEq for MessageText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Serialize for MessageText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.text.serialize(serializer)
    }
}

/// How an assistant message without text carries its `content`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EmptyContent {
    /// `"content": null` (OpenAI's form).
    #[default]
    Null,
    /// `"content": ""` (Gemini wants this).
    EmptyString,
}

/// The assistant message for `turn`.
///
/// `content` is the turn's text; without text it is `null` or `""` per `empty` when the turn
/// has tool calls, and `""` otherwise (a message needs content or calls). Each call's
/// `arguments` is always a valid JSON object string (`{}` for calls whose arguments were
/// unusable: their tool message carries the error), and its `extra` is merged in.
pub fn assistant_message(turn: &Turn, empty: EmptyContent) -> Value {
    let content = if !turn.text.is_empty() {
        Value::String(turn.text.clone())
    } else if turn.tool_calls.is_empty() || empty == EmptyContent::EmptyString {
        Value::String(String::new())
    } else {
        Value::Null
    };
    let mut message = Map::new();
    message.insert("role".into(), Value::String("assistant".into()));
    message.insert("content".into(), content);
    if !turn.tool_calls.is_empty() {
        let calls = turn.tool_calls.iter().map(tool_call_json).collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(message)
}

fn tool_call_json(call: &ToolCall) -> Value {
    let arguments = match &call.arguments {
        // Written from the map itself: the same text as the object's, without copying it.
        Ok(args) => serde_json::to_string(args).expect("a JSON object serialises"),
        Err(_) => String::from("{}"),
    };
    let mut out = json!({
        "id": call.id,
        "type": "function",
        "function": { "name": call.name, "arguments": arguments },
    });
    if let (Value::Object(out), Some(Value::Object(extra))) = (&mut out, &call.extra) {
        for (key, value) in extra {
            out.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    out
}

/// The system message carrying `prompt`.
pub fn system_message(prompt: &str) -> Value {
    json!({ "role": "system", "content": prompt })
}

/// The user's message `text`.
pub fn user_message(text: &str) -> Value {
    json!({ "role": "user", "content": text })
}

/// An assistant message of plain `text`, without tool calls (e.g. the note that closes a
/// history whose run ended without an answer).
pub fn assistant_text_message(text: &str) -> Value {
    json!({ "role": "assistant", "content": text })
}

/// The `tool` message answering the call `call_id` with `content` (the tool's result, or
/// the error text the model should see).
pub fn tool_message(call_id: &str, content: impl Into<String>) -> Value {
    json!({ "role": "tool", "tool_call_id": call_id, "content": content.into() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::FinishReason;

    fn call(
        id: &str,
        arguments: Result<Map<String, Value>, String>,
        extra: Option<Value>,
    ) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "create_directory".into(),
            raw_arguments: String::new(),
            arguments,
            extra,
        }
    }

    fn turn(text: &str, tool_calls: Vec<ToolCall>) -> Turn {
        Turn {
            text: text.into(),
            tool_calls,
            finish_reason: FinishReason::ToolCalls,
            finish_reason_raw: None,
            usage: None,
        }
    }

    #[test]
    fn assistant_message_echoes_calls_with_object_arguments_and_extras() {
        let mut args = Map::new();
        args.insert("path".into(), json!("docs/intro"));
        let extra = json!({"extra_content": {"google": {"thought_signature": "sig"}}});
        let t = turn(
            "",
            vec![
                call("a", Ok(args), Some(extra)),
                call("b", Err("the arguments are not valid JSON".into()), None),
            ],
        );
        assert_eq!(
            assistant_message(&t, EmptyContent::Null),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function",
                 "function": {"name": "create_directory", "arguments": "{\"path\":\"docs/intro\"}"},
                 "extra_content": {"google": {"thought_signature": "sig"}}},
                {"id": "b", "type": "function",
                 "function": {"name": "create_directory", "arguments": "{}"}}
            ]})
        );
        assert_eq!(
            assistant_message(&t, EmptyContent::EmptyString)["content"],
            json!("")
        );
    }

    #[test]
    fn assistant_message_keeps_text_and_tool_calls_of_the_same_turn() {
        // Claude-style turns: a sentence, then a call, in one message.
        let mut args = Map::new();
        args.insert("path".into(), json!("."));
        let t = turn("Let me look.", vec![call("toolu_1", Ok(args), None)]);
        for empty in [EmptyContent::Null, EmptyContent::EmptyString] {
            assert_eq!(
                assistant_message(&t, empty),
                json!({"role": "assistant", "content": "Let me look.", "tool_calls": [
                    {"id": "toolu_1", "type": "function",
                     "function": {"name": "create_directory", "arguments": "{\"path\":\".\"}"}}
                ]})
            );
        }
    }

    #[test]
    fn text_only_turn_never_has_null_content() {
        let t = turn("", vec![]);
        assert_eq!(
            assistant_message(&t, EmptyContent::Null),
            json!({"role": "assistant", "content": ""})
        );
        let t = turn("hello", vec![]);
        assert_eq!(
            assistant_message(&t, EmptyContent::Null)["content"],
            "hello"
        );
    }

    #[test]
    fn plain_messages_have_a_role_and_text_content() {
        assert_eq!(
            system_message("be brief"),
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            user_message("héllo \"you\""),
            json!({"role": "user", "content": "héllo \"you\""})
        );
        assert_eq!(
            assistant_text_message("(no answer: the run was cancelled)"),
            json!({"role": "assistant", "content": "(no answer: the run was cancelled)"})
        );
        // The stored text keeps the key order the host always wrote.
        assert_eq!(
            user_message("hi").to_string(),
            r#"{"content":"hi","role":"user"}"#
        );
    }

    #[test]
    fn a_message_text_is_the_message_as_to_string_writes_it() {
        let message = json!({"role": "tool", "tool_call_id": "c", "content": "a\n\"b\" \u{e9}"});
        let text = MessageText::new(&message);
        assert_eq!(text.as_str(), message.to_string());
        assert_eq!(text.role(), "tool");
        assert_eq!(MessageText::new(&json!({"content": "x"})).role(), "");
        // Sent as the message itself, through any serialiser.
        assert_eq!(serde_json::to_value(&text).unwrap(), message);
        assert_eq!(
            serde_json::to_string(&[&text, &text]).unwrap(),
            format!("[{message},{message}]")
        );
    }

    #[test]
    fn tool_message_pairs_by_id() {
        assert_eq!(
            tool_message("Xb7kP2mQa", "{\"ok\":true}"),
            json!({"role": "tool", "tool_call_id": "Xb7kP2mQa", "content": "{\"ok\":true}"})
        );
    }
}
