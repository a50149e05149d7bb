//! What we send: `ChatRequest`, the JSON body of `POST {base_url}/chat/completions`, tool
//! sanitising (names checked, parameter schemas cut to the subset every provider accepts)
//! and the endpoint URL. Messages pass through untouched: history is the caller's.
//!
//! The body is written straight from the caller's messages, each already JSON text
//! ([`MessageText`]), and the tools' shared definitions, each JSON text too: nothing is
//! serialised again per request (a turn's history is the largest thing a run handles, and
//! each model turn sends all of it).

use std::sync::Arc;

use reqwest::Url;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::endpoint::display_url;
use serde_json::{json, value::RawValue, Map, Value};

use crate::error::LlmError;
use crate::history::MessageText;
use crate::provider::Provider;

/// One model turn's input, borrowed from the caller.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest<'a> {
    /// Sent first, as a `system` message, when set.
    pub system: Option<&'a str>,
    /// OpenAI-format messages (`system`, `user`, `assistant` with `tool_calls`, `tool`).
    pub messages: &'a [MessageText],
    /// The OpenAI `tools` array.
    pub tools: Vec<ToolDefinition>,
    /// `tool_choice`; omitted when `None` or when there are no tools.
    pub tool_choice: Option<ToolChoice>,
}

/// One model turn's input, owned and shared with the caller: what [`Client::stream_shared`]
/// takes. The stream writes the request body from it for each attempt and keeps no body
/// between attempts, so a turn waiting for its provider holds no copy of the history as text;
/// the messages stay the caller's, shared, not copied.
///
/// [`Client::stream_shared`]: crate::Client::stream_shared
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SharedChatRequest {
    /// Sent first, as a `system` message, when set.
    pub system: Option<Arc<str>>,
    /// OpenAI-format messages, shared with the caller.
    pub messages: Arc<Vec<MessageText>>,
    /// The OpenAI `tools` array.
    pub tools: Vec<ToolDefinition>,
    /// `tool_choice`; omitted when `None` or when there are no tools.
    pub tool_choice: Option<ToolChoice>,
}

impl SharedChatRequest {
    /// The request as [`ChatRequest`] borrows it.
    pub fn as_request(&self) -> ChatRequest<'_> {
        ChatRequest {
            system: self.system.as_deref(),
            messages: &self.messages,
            tools: self.tools.clone(),
            tool_choice: self.tool_choice,
        }
    }
}

impl From<&ChatRequest<'_>> for SharedChatRequest {
    /// A shared request holding a copy of `request`'s messages.
    fn from(request: &ChatRequest<'_>) -> Self {
        SharedChatRequest {
            system: request.system.map(Arc::from),
            messages: Arc::new(request.messages.to_vec()),
            tools: request.tools.clone(),
            tool_choice: request.tool_choice,
        }
    }
}

/// A tool as every provider accepts it: checked and sanitised once by
/// [`ToolDefinition::new`] ([`sanitize_tool`]), then shared by every request offering it.
/// Its JSON text is written once, there too: a request copies that text instead of
/// serialising the schema again (the tools' schemas are most of a short conversation's
/// request bytes; serialising them for every request was 8 % of the host's instructions per
/// conversation, `bench/PROFILE.md`, ninth round).
#[derive(Debug, Clone)]
pub struct ToolDefinition(Arc<Sanitized>);

#[derive(Debug)]
struct Sanitized {
    value: Value,
    text: Box<RawValue>,
}

impl ToolDefinition {
    /// The canonical, sanitised form of `tool` (flat or nested OpenAI form).
    ///
    /// # Errors
    /// [`LlmError::InvalidRequest`] when the tool has no valid name.
    pub fn new(tool: &Value) -> Result<Self, LlmError> {
        let value = sanitize_tool(tool)?;
        // A `Value` always serialises: its keys are strings and its numbers finite.
        let text = serde_json::value::to_raw_value(&value).expect("a JSON value serialises");
        Ok(ToolDefinition(Arc::new(Sanitized { value, text })))
    }

    /// The definition as sent.
    pub fn as_value(&self) -> &Value {
        &self.0.value
    }
}

impl PartialEq for ToolDefinition {
    fn eq(&self, other: &Self) -> bool {
        self.0.value == other.0.value
    }
}

impl Serialize for ToolDefinition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.text.serialize(serializer)
    }
}

/// The `tool_choice` values every provider understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (`"auto"`).
    Auto,
    /// The model must answer in text (`"none"`), e.g. for the last allowed step.
    None,
}

impl ToolChoice {
    fn as_str(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
        }
    }
}

/// The schema keywords every provider accepts (Gemini rejects `additionalProperties`,
/// `$schema` and most others).
const KEPT_KEYWORDS: [&str; 6] = [
    "type",
    "properties",
    "required",
    "description",
    "enum",
    "items",
];

/// Checks a tool name against `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`, the intersection of what
/// OpenAI, Anthropic, Gemini and Mistral accept.
///
/// # Errors
/// [`LlmError::InvalidRequest`] naming the tool and the rule.
pub fn validate_tool_name(name: &str) -> Result<(), LlmError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if first_ok && rest_ok && name.len() <= 64 {
        Ok(())
    } else {
        Err(LlmError::InvalidRequest {
            detail: format!(
                "tool name {name:?} must start with a letter and have at most 64 letters, digits, '_' or '-'"
            ),
        })
    }
}

/// Reduces a JSON schema to `type/properties/required/description/enum/items`, recursively.
///
/// A `type` list such as `["string","null"]` becomes its first non-null entry, `required`
/// keeps only names present in `properties`, and a missing top-level `type` is not added
/// (see [`sanitize_tool`] for the parameters object).
pub fn sanitize_schema(schema: &Value) -> Value {
    let Some(obj) = schema.as_object() else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for key in KEPT_KEYWORDS {
        let Some(v) = obj.get(key) else { continue };
        let kept = match key {
            "type" => sanitize_type(v),
            "properties" => v.as_object().map(|props| {
                Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), sanitize_schema(s)))
                        .collect(),
                )
            }),
            "items" => Some(match v {
                Value::Array(list) => Value::Array(list.iter().map(sanitize_schema).collect()),
                other => sanitize_schema(other),
            }),
            "required" => v.as_array().map(|names| {
                let props = obj.get("properties").and_then(Value::as_object);
                Value::Array(
                    names
                        .iter()
                        .filter(|n| {
                            n.as_str()
                                .is_some_and(|n| props.is_none_or(|p| p.contains_key(n)))
                        })
                        .cloned()
                        .collect(),
                )
            }),
            "description" => v.is_string().then(|| v.clone()),
            "enum" => v.is_array().then(|| v.clone()),
            _ => None,
        };
        if let Some(kept) = kept {
            out.insert(key.to_string(), kept);
        }
    }
    Value::Object(out)
}

fn sanitize_type(v: &Value) -> Option<Value> {
    match v {
        Value::String(_) => Some(v.clone()),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .map(|t| Value::String(t.to_string())),
        _ => None,
    }
}

/// Returns the canonical `{"type":"function","function":{name, description, parameters}}`
/// form of a tool, with its name checked and its parameters sanitised. Accepts the flat
/// `{name, description, parameters}` form too.
///
/// # Errors
/// [`LlmError::InvalidRequest`] when the tool has no valid name.
pub fn sanitize_tool(tool: &Value) -> Result<Value, LlmError> {
    let function = tool.get("function").unwrap_or(tool);
    let name = function.get("name").and_then(Value::as_str).unwrap_or("");
    validate_tool_name(name)?;
    let mut parameters = match function.get("parameters") {
        Some(p) => sanitize_schema(p),
        None => Value::Object(Map::new()),
    };
    if let Value::Object(p) = &mut parameters {
        // OpenAI requires an object schema at the top, with `properties`.
        p.insert("type".into(), Value::String("object".into()));
        p.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    let mut out = Map::new();
    out.insert("name".into(), Value::String(name.to_string()));
    if let Some(d) = function.get("description").and_then(Value::as_str) {
        out.insert("description".into(), Value::String(d.to_string()));
    }
    out.insert("parameters".into(), parameters);
    Ok(json!({ "type": "function", "function": out }))
}

/// `{base_url}/chat/completions`, without a double slash, keeping any query string.
///
/// # Errors
/// [`LlmError::InvalidConfig`] when `base_url` is not an `http(s)` URL.
pub fn chat_completions_url(base_url: &str) -> Result<Url, LlmError> {
    let mut url = Url::parse(base_url.trim()).map_err(|e| LlmError::InvalidConfig {
        detail: format!("base_url {:?} is not a URL: {e}", display_url(base_url)),
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(LlmError::InvalidConfig {
            detail: format!(
                "base_url {:?} must be an http or https URL with a host",
                display_url(base_url)
            ),
        });
    }
    let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
    url.set_path(&path);
    Ok(url)
}

/// The request body for one streamed turn, as JSON text: the provider's `extra_body`, then
/// the fields every turn sets (which replace `extra_body`'s own of the same name).
///
/// Written into a buffer sized for the texts it copies (the messages, the tools, the system
/// prompt) and a little more, so it is not grown and copied again as it fills.
pub(crate) fn body_text(provider: &Provider, req: &ChatRequest<'_>) -> serde_json::Result<Vec<u8>> {
    let copied = req.messages.iter().map(|m| m.as_str().len()).sum::<usize>()
        + req
            .tools
            .iter()
            .map(|t| t.0.text.get().len())
            .sum::<usize>()
        + req.system.map_or(0, str::len);
    let mut body = Vec::with_capacity(copied + BODY_SLACK);
    serde_json::to_writer(&mut body, &Body { provider, req })?;
    Ok(body)
}

/// Room in a request body beyond the texts it copies: the separators, the model, the other
/// fields and `extra_body` (a few hundred bytes in the common case).
const BODY_SLACK: usize = 1024;

struct Body<'a> {
    provider: &'a Provider,
    req: &'a ChatRequest<'a>,
}

impl Body<'_> {
    /// Whether the turn sets (or, for the tool fields, drops) `key` itself.
    fn sets(&self, key: &str) -> bool {
        match key {
            "model" | "messages" | "stream" | "tools" | "tool_choice" => true,
            "stream_options" => self.provider.include_usage,
            _ => false,
        }
    }
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (provider, req) = (self.provider, self.req);
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in &provider.extra_body {
            if !self.sets(key) {
                map.serialize_entry(key, value)?;
            }
        }
        map.serialize_entry("model", &provider.model)?;
        map.serialize_entry("messages", &Messages(req))?;
        map.serialize_entry("stream", &true)?;
        if provider.include_usage {
            map.serialize_entry("stream_options", &json!({ "include_usage": true }))?;
        }
        if !req.tools.is_empty() {
            map.serialize_entry("tools", &req.tools)?;
            if let Some(choice) = req.tool_choice {
                map.serialize_entry("tool_choice", choice.as_str())?;
            }
        }
        map.end()
    }
}

/// The system prompt's message, then the caller's messages.
struct Messages<'a>(&'a ChatRequest<'a>);

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let req = self.0;
        let mut seq = serializer
            .serialize_seq(Some(req.messages.len() + usize::from(req.system.is_some())))?;
        if let Some(prompt) = req.system {
            seq.serialize_element(&SystemMessage(prompt))?;
        }
        for message in req.messages {
            seq.serialize_element(message)?;
        }
        seq.end()
    }
}

/// The system message of `prompt` ([`crate::system_message`]), written without building it.
struct SystemMessage<'a>(&'a str);

impl Serialize for SystemMessage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("content", self.0)?;
        map.serialize_entry("role", "system")?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_common_subset() {
        for ok in ["a", "list_files", "Read-Path2", &"x".repeat(64)] {
            assert!(validate_tool_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1abc",
            "_x",
            "has space",
            "dot.name",
            "ünï",
            &"x".repeat(65),
        ] {
            assert!(validate_tool_name(bad).is_err(), "{bad}");
        }
        let e = validate_tool_name("bad name").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid model request: tool name \"bad name\" must start with a letter and have at most 64 letters, digits, '_' or '-'"
        );
    }

    #[test]
    fn schema_keeps_only_the_portable_keywords_recursively() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "relative path", "minLength": 1},
                "mode": {"type": ["string", "null"], "enum": ["a", "b"], "default": "a"},
                "tags": {"type": "array", "items": {"type": "string", "format": "uri"}},
                "type": {"type": "object", "properties": {}, "additionalProperties": true}
            },
            "required": ["path", "ghost"]
        });
        assert_eq!(
            sanitize_schema(&schema),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative path"},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "type": {"type": "object", "properties": {}}
                },
                "required": ["path"]
            })
        );
    }

    #[test]
    fn tool_is_canonicalised_from_flat_or_nested_form() {
        let flat = json!({"name": "list_files", "description": "d", "parameters": {"type": "object", "$schema": "x"}});
        let nested = json!({"type": "function", "function": flat.clone(), "strict": true});
        let want = json!({"type": "function", "function": {
            "name": "list_files", "description": "d",
            "parameters": {"type": "object", "properties": {}}
        }});
        assert_eq!(sanitize_tool(&flat).unwrap(), want);
        assert_eq!(sanitize_tool(&nested).unwrap(), want);
        assert!(sanitize_tool(&json!({"function": {"name": "a b"}})).is_err());
    }

    #[test]
    fn url_join_never_doubles_the_slash_and_keeps_the_query() {
        for (base, want) in [
            (
                "http://127.0.0.1:11434/v1",
                "http://127.0.0.1:11434/v1/chat/completions",
            ),
            (
                "http://127.0.0.1:11434/v1/",
                "http://127.0.0.1:11434/v1/chat/completions",
            ),
            ("https://h.example/", "https://h.example/chat/completions"),
            ("https://h.example", "https://h.example/chat/completions"),
            (
                "https://h.example/openai/v1beta//?api-version=1",
                "https://h.example/openai/v1beta/chat/completions?api-version=1",
            ),
        ] {
            assert_eq!(chat_completions_url(base).unwrap().as_str(), want, "{base}");
        }
        assert!(chat_completions_url("ftp://h/").is_err());
        assert!(chat_completions_url("not a url").is_err());
    }

    fn body(p: &Provider, req: &ChatRequest<'_>) -> Value {
        serde_json::from_slice(&body_text(p, req).unwrap()).unwrap()
    }

    #[test]
    fn body_streams_and_omits_tool_fields_without_tools() {
        let mut p = Provider::new("http://h/v1", "m1");
        p.extra_body.insert("temperature".into(), json!(0.2));
        p.extra_body.insert("stream".into(), json!(false));
        p.extra_body.insert("tool_choice".into(), json!("required"));
        let messages = [MessageText::new(&json!({"role": "user", "content": "hi"}))];
        let req = ChatRequest {
            system: None,
            messages: &messages,
            tools: vec![],
            tool_choice: Some(ToolChoice::Auto),
        };
        assert_eq!(
            body(&p, &req),
            json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}],
                   "stream": true, "temperature": 0.2})
        );
        let tool = ToolDefinition::new(&json!({"type": "function", "function": {"name": "t"}}));
        let req = ChatRequest {
            system: Some("be brief"),
            tools: vec![tool.unwrap()],
            tool_choice: Some(ToolChoice::None),
            ..req
        };
        let text = body_text(&p, &req).unwrap();
        let sent = body(&p, &req);
        assert_eq!(sent["tool_choice"], "none");
        assert_eq!(sent["tools"][0]["function"]["name"], "t");
        assert_eq!(
            sent["messages"],
            json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
        );
        // Each key once: the turn's own fields replace `extra_body`'s.
        let text = String::from_utf8(text).unwrap();
        // The system message is written as `system_message` would be, in its key order.
        let system = crate::system_message("be brief").to_string();
        assert!(text.contains(&format!("\"messages\":[{system},")), "{text}");
        assert_eq!(text.matches("\"tool_choice\"").count(), 1, "{text}");
        assert_eq!(text.matches("\"stream\"").count(), 1, "{text}");
    }

    #[test]
    fn a_body_is_written_without_growing_its_buffer() {
        let messages: Vec<MessageText> = (0..20)
            .map(|i| MessageText::new(&json!({"role": "user", "content": "é\"x\n".repeat(i * 50)})))
            .collect();
        let tool = ToolDefinition::new(&json!({"name": "t", "description": "d".repeat(3000)}));
        let req = ChatRequest {
            system: Some("be brief"),
            messages: &messages,
            tools: vec![tool.unwrap()],
            tool_choice: Some(ToolChoice::Auto),
        };
        let body = body_text(&Provider::new("http://h/v1", "m1"), &req).unwrap();
        let copied: usize = messages.iter().map(|m| m.as_str().len()).sum::<usize>()
            + req.tools[0].0.text.get().len()
            + "be brief".len();
        assert!(body.len() > copied, "{} bytes", body.len());
        assert_eq!(body.capacity(), copied + BODY_SLACK, "grown while written");
    }

    #[test]
    fn usage_is_asked_for_when_the_provider_reports_it() {
        let mut p = Provider::new("http://h/v1", "m1");
        p.extra_body
            .insert("stream_options".into(), json!({"x": 1}));
        let req = ChatRequest::default();
        p.include_usage = false;
        assert_eq!(body(&p, &req)["stream_options"], json!({"x": 1}));
        p.include_usage = true;
        assert_eq!(
            body(&p, &req)["stream_options"],
            json!({"include_usage": true})
        );
    }

    #[test]
    fn a_tool_definition_is_sanitised_once_when_made() {
        let raw = json!({"name": "list_files", "parameters": {"type": "object", "$schema": "x"}});
        let tool = ToolDefinition::new(&raw).unwrap();
        assert_eq!(tool.as_value(), &sanitize_tool(&raw).unwrap());
        assert!(ToolDefinition::new(&json!({"name": "a b"})).is_err());
    }

    #[test]
    fn a_tool_is_sent_as_its_sanitised_definition_written_once() {
        let raw = json!({"type": "function", "function": {
            "name": "write",
            "description": "d \"q\" \u{e9}",
            "parameters": {
                "properties": {"path": {"type": ["string", "null"], "format": "x"}},
                "required": ["path", "gone"]
            }
        }});
        let tool = ToolDefinition::new(&raw).unwrap();
        let req = ChatRequest {
            tools: vec![tool.clone(), tool.clone()],
            ..ChatRequest::default()
        };
        let sent = body(&Provider::new("http://h/v1", "m1"), &req);
        assert_eq!(sent["tools"], json!([tool.as_value(), tool.as_value()]));
        // The same through serde_json's value serialiser (what `json!` and `to_value` use).
        assert_eq!(&serde_json::to_value(&tool).unwrap(), tool.as_value());
    }
}
