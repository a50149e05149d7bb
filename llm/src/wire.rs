//! Tolerant serde types for what providers send: a stream chunk (or a whole non-streamed
//! completion, which has the same shape with `message` for `delta`), and the error objects
//! they use. Every field is optional and a field of an unexpected type reads as absent, so
//! one provider's oddity never fails the whole chunk; a list keeps its readable elements, at
//! most 256. Fields are read straight into these types ([`Lenient`]), never through a
//! `serde_json::Value` tree, which made decoding a chunk 2.7 times as costly. A key repeated
//! within one object (which JSON's RFC 8259 says should not happen, and no provider was seen
//! sending) fails the chunk, as it always did at the chunk's top level. Interpretation is
//! `assemble.rs`'s job.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Most elements of `choices` or `tool_calls` kept from one chunk; the rest are skipped
/// unread. We ask for one choice, and a turn's calls are far fewer, but an event of a few
/// MB could otherwise hold a million `{}` elements, each a struct of a few hundred bytes.
const MAX_LIST_ITEMS: usize = 256;

/// A type read leniently: a JSON value of another type reads as absent, consumed without
/// building a `serde_json::Value` (the chunks of a stream are the host's hottest parse).
pub(crate) trait Lenient: Sized {
    /// From a JSON string.
    fn from_string(_: String) -> Option<Self> {
        None
    }

    /// From a borrowed JSON string: [`Lenient::from_string`] of a copy, unless the type
    /// needs none.
    fn from_str(s: &str) -> Option<Self> {
        Self::from_string(s.to_owned())
    }

    /// From a non-negative JSON integer.
    fn from_u64(_: u64) -> Option<Self> {
        None
    }

    /// From a JSON object (the other fields types read the object as absent, skipping it).
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

impl Lenient for String {
    fn from_string(s: String) -> Option<Self> {
        Some(s)
    }
}

/// Whether a chunk's `object` is `"error"`, read without keeping its text: every chunk has
/// one (`"chat.completion.chunk"`), and nothing else of it is used.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IsError(pub(crate) bool);

impl Lenient for IsError {
    fn from_string(s: String) -> Option<Self> {
        Self::from_str(&s)
    }

    fn from_str(s: &str) -> Option<Self> {
        Some(IsError(s == "error"))
    }
}

impl Lenient for u64 {
    fn from_u64(n: u64) -> Option<Self> {
        Some(n)
    }
}

/// Structs whose every field is itself lenient (or a `Value`): read from an object, never
/// failing on a field's type.
macro_rules! lenient_struct {
    ($($name:ty),*) => {$(
        impl Lenient for $name {
            fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
                <$name>::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
            }
        }
    )*};
}

lenient_struct!(Choice, Delta, WireToolCall, WireFunction, WireUsage);

/// The [`Visitor`] of a [`Lenient`] type.
struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Lenient> Visitor<'de> for LenientVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(T::from_str(s))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(T::from_string(s))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(T::from_u64(n))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(u64::try_from(n).ok().and_then(T::from_u64))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::from_map(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// One list element read leniently.
struct LenientSeed<T>(PhantomData<T>);

impl<'de, T: Lenient> serde::de::DeserializeSeed<'de> for LenientSeed<T> {
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(LenientVisitor(PhantomData))
    }
}

/// Reads a value and keeps it only if it has the expected type.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Lenient,
{
    d.deserialize_any(LenientVisitor(PhantomData))
}

/// Reads a list one element at a time, each leniently (an element of an unexpected type is
/// skipped), keeping at most [`MAX_LIST_ITEMS`]; anything but a list reads as absent.
fn lenient_list<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Lenient,
{
    d.deserialize_any(ListVisitor(PhantomData))
}

struct ListVisitor<T>(PhantomData<T>);

impl<'de, T: Lenient> Visitor<'de> for ListVisitor<T> {
    type Value = Option<Vec<T>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while items.len() < MAX_LIST_ITEMS {
            match seq.next_element_seed(LenientSeed(PhantomData))? {
                Some(item) => items.extend(item),
                None => return Ok(Some(items)),
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Some(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Reads an id given as a string or a number (LM Studio sends numeric strings; a number is
/// one step further).
fn string_or_number<'de, D>(d: D) -> Result<Option<String>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// One `chat.completion.chunk` (or a whole `chat.completion`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Chunk {
    /// Usually one choice; `[]` on a trailing usage chunk.
    #[serde(deserialize_with = "lenient_list")]
    pub(crate) choices: Option<Vec<Choice>>,
    /// On the last chunk, or on every chunk (often `null`).
    #[serde(deserialize_with = "lenient")]
    pub(crate) usage: Option<WireUsage>,
    /// `{"error":{…}}` or `{"error":"…"}`: an error inside a 200 stream.
    pub(crate) error: Option<Value>,
    /// `"error"` for vLLM/Mistral-style `{"object":"error","message":…}`.
    #[serde(deserialize_with = "lenient")]
    pub(crate) object: Option<IsError>,
    /// The message of an `{"object":"error"}` chunk.
    pub(crate) message: Option<Value>,
    /// The code of an `{"object":"error"}` chunk.
    pub(crate) code: Option<Value>,
    /// The type of an `{"object":"error"}` chunk.
    #[serde(rename = "type")]
    pub(crate) kind: Option<Value>,
}

/// One choice of a chunk.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Choice {
    #[serde(deserialize_with = "lenient")]
    pub(crate) index: Option<u64>,
    /// Streamed form.
    #[serde(deserialize_with = "lenient")]
    pub(crate) delta: Option<Delta>,
    /// Non-streamed form (a server that ignored `"stream": true`).
    #[serde(deserialize_with = "lenient")]
    pub(crate) message: Option<Delta>,
    /// `null`, `""` (absent), or a reason.
    #[serde(deserialize_with = "lenient")]
    pub(crate) finish_reason: Option<String>,
    /// Some proxies put the error next to `finish_reason: "error"`.
    pub(crate) error: Option<Value>,
}

/// What a chunk adds to the message.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Delta {
    /// A string, `null`, or (Mistral's reasoning models) a list of typed parts.
    pub(crate) content: Option<Value>,
    /// OpenAI's refusal text: shown to the user like an answer.
    #[serde(deserialize_with = "lenient")]
    pub(crate) refusal: Option<String>,
    #[serde(deserialize_with = "lenient_list")]
    pub(crate) tool_calls: Option<Vec<WireToolCall>>,
    // `reasoning_content` / `reasoning` are deliberately not read: never answer text.
}

/// One fragment of a tool call.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireToolCall {
    /// Slot number; absent on Gemini and Mistral (whole calls).
    #[serde(deserialize_with = "lenient")]
    pub(crate) index: Option<u64>,
    #[serde(deserialize_with = "string_or_number")]
    pub(crate) id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub(crate) function: Option<WireFunction>,
    /// Gemini: `{"google":{"thought_signature":…}}`, to be echoed back.
    pub(crate) extra_content: Option<Value>,
}

/// The function part of a tool-call fragment.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireFunction {
    #[serde(deserialize_with = "lenient")]
    pub(crate) name: Option<String>,
    /// A text fragment, or (some servers) an already-parsed object.
    pub(crate) arguments: Option<Value>,
}

/// Usage as sent; missing counts read as absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireUsage {
    #[serde(deserialize_with = "lenient")]
    pub(crate) prompt_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub(crate) completion_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub(crate) total_tokens: Option<u64>,
}

/// A provider's error, from any of the shapes they use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorInfo {
    pub(crate) message: String,
    /// `code`, else `type`, else `status`, as text.
    pub(crate) code: Option<String>,
    /// Every code-like string (`code`, `type`, `status`), for quota detection.
    pub(crate) tags: Vec<String>,
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Reads `{"message","code","type"}`, `{"error":{…}}`, `{"error":"…"}`, a string, or
/// Gemini's `[{"error":{…}}]`.
pub(crate) fn describe_error(v: &Value) -> Option<ErrorInfo> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(ErrorInfo {
            message: s.trim().to_string(),
            code: None,
            tags: Vec::new(),
        }),
        Value::Array(list) => list.iter().find_map(describe_error),
        Value::Object(obj) => {
            if let Some(inner) = obj.get("error").filter(|e| !e.is_null()) {
                if let Some(info) = describe_error(inner) {
                    return Some(info);
                }
            }
            let tags: Vec<String> = ["code", "type", "status"]
                .iter()
                .filter_map(|k| obj.get(*k).and_then(as_text))
                .collect();
            let message = obj
                .get("message")
                .or_else(|| obj.get("detail"))
                .and_then(|m| match m {
                    Value::String(s) => Some(s.clone()),
                    Value::Null => None,
                    other => Some(other.to_string()),
                })
                .filter(|m| !m.trim().is_empty());
            if message.is_none() && tags.is_empty() {
                return None;
            }
            Some(ErrorInfo {
                message: message.unwrap_or_else(|| tags.join(": ")),
                code: tags.first().cloned(),
                tags,
            })
        }
        _ => None,
    }
}

/// An HTTP error answer's body as the provider's error: its JSON error in any shape, else
/// the start of the text (an HTML page, a proxy's plain text), else the status's reason.
pub(crate) fn describe_error_body(status: u16, body: &str) -> ErrorInfo {
    if let Some(info) = serde_json::from_str::<Value>(body)
        .ok()
        .as_ref()
        .and_then(describe_error)
    {
        return info;
    }
    let message = if body.trim().is_empty() {
        reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message")
            .to_lowercase()
    } else {
        crate::text::truncate(body.trim(), 500)
    };
    ErrorInfo {
        message,
        code: None,
        tags: Vec::new(),
    }
}

impl Chunk {
    /// An error carried by this chunk, in any of the shapes seen after HTTP 200.
    pub(crate) fn error_info(&self) -> Option<ErrorInfo> {
        if let Some(e) = self.error.as_ref().filter(|e| !e.is_null()) {
            return Some(describe_error(e).unwrap_or_else(|| ErrorInfo {
                message: e.to_string(),
                code: None,
                tags: Vec::new(),
            }));
        }
        if self.object == Some(IsError(true)) {
            let mut obj = serde_json::Map::new();
            for (k, v) in [
                ("message", &self.message),
                ("code", &self.code),
                ("type", &self.kind),
            ] {
                if let Some(v) = v {
                    obj.insert(k.to_string(), v.clone());
                }
            }
            return Some(
                describe_error(&Value::Object(obj)).unwrap_or_else(|| ErrorInfo {
                    message: "unspecified error".into(),
                    code: None,
                    tags: Vec::new(),
                }),
            );
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_needs_a_message_or_a_code_and_blank_ones_do_not_count() {
        let coded = describe_error(&json!({"code": "rate_limit_exceeded"})).expect("a code alone");
        assert_eq!(coded.message, "rate_limit_exceeded");
        assert_eq!(coded.code.as_deref(), Some("rate_limit_exceeded"));
        assert!(describe_error(&json!({"code": ""})).is_none());
        assert!(describe_error(&json!("   ")).is_none());
    }
    use serde_json::json;

    fn chunk(v: Value) -> Chunk {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn odd_field_types_read_as_absent() {
        let c = chunk(json!({
            "choices": [{"index": "zero", "delta": {"content": "hi", "tool_calls": "nope",
                          "reasoning_content": "secret"}, "finish_reason": 7}],
            "usage": "none", "unknown": {"deep": [1]}
        }));
        let choice = &c.choices.as_ref().unwrap()[0];
        assert_eq!(choice.index, None);
        assert_eq!(choice.finish_reason, None);
        let delta = choice.delta.as_ref().unwrap();
        assert_eq!(delta.content, Some(json!("hi")));
        assert!(delta.tool_calls.is_none());
        assert!(c.usage.is_none());
    }

    #[test]
    fn lists_keep_their_readable_elements_up_to_the_cap() {
        let c = chunk(
            json!({"choices": [7, {"delta": {"tool_calls": [{"id": "a"}, "x", {"id": "b"}]}}]}),
        );
        let choices = c.choices.unwrap();
        assert_eq!(choices.len(), 1, "the number is skipped");
        let calls = choices[0]
            .delta
            .as_ref()
            .unwrap()
            .tool_calls
            .as_ref()
            .unwrap();
        let ids: Vec<_> = calls.iter().map(|c| c.id.as_deref().unwrap()).collect();
        assert_eq!(ids, ["a", "b"]);
        let many = format!(
            "{{\"choices\":[{}{{}}],\"usage\":{{\"prompt_tokens\":1}}}}",
            "{},".repeat(100_000)
        );
        let c: Chunk = serde_json::from_str(&many).unwrap();
        assert_eq!(c.choices.unwrap().len(), MAX_LIST_ITEMS);
        assert_eq!(
            c.usage.unwrap().prompt_tokens,
            Some(1),
            "the rest is still read"
        );
        for odd in [
            json!({"choices": {"a": [1]}}),
            json!({"choices": "x"}),
            json!({"choices": null}),
        ] {
            assert!(chunk(odd.clone()).choices.is_none(), "{odd}");
        }
    }

    #[test]
    fn a_key_repeated_inside_a_choice_fails_the_chunk_as_at_the_top() {
        for text in [
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[],"choices":[]}"#,
        ] {
            assert!(serde_json::from_str::<Chunk>(text).is_err(), "{text}");
        }
    }

    #[test]
    fn negative_and_fractional_numbers_are_not_indexes() {
        let c =
            chunk(json!({"choices": [{"index": -1, "delta": {"tool_calls": [{"index": 1.5}]}}]}));
        let choice = &c.choices.as_ref().unwrap()[0];
        assert_eq!(choice.index, None);
        let call = &choice.delta.as_ref().unwrap().tool_calls.as_ref().unwrap()[0];
        assert_eq!(call.index, None);
    }

    #[test]
    fn ids_may_be_numbers() {
        let c = chunk(json!({"choices": [{"delta": {"tool_calls": [{"id": 193629320}]}}]}));
        let calls = c
            .choices
            .unwrap()
            .remove(0)
            .delta
            .unwrap()
            .tool_calls
            .unwrap();
        assert_eq!(calls[0].id.as_deref(), Some("193629320"));
    }

    #[test]
    fn errors_are_read_from_every_shape() {
        let shapes = [
            json!({"error": {"code": "api_error", "message": "Internal server error", "type": "x"}}),
            json!({"object": "error", "message": "Internal server error", "type": "api_error", "code": 500}),
            json!({"error": "Internal server error"}),
        ];
        for s in shapes {
            let info = chunk(s.clone()).error_info().unwrap();
            assert_eq!(info.message, "Internal server error", "{s}");
        }
        let gemini = json!([{"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}]);
        let info = describe_error(&gemini).unwrap();
        assert_eq!(info.message, "Quota exceeded");
        assert_eq!(info.code.as_deref(), Some("429"));
        assert!(info.tags.contains(&"RESOURCE_EXHAUSTED".to_string()));
        assert!(chunk(json!({"error": null, "choices": []}))
            .error_info()
            .is_none());
    }
}
