//! `rojos probe PROVIDER`: one small streaming tool-call exchange with a configured provider,
//! reporting whether streaming, tool calls and the follow-up turn work, and naming what
//! failed, then the context window each rojo on it plans for and where that figure came
//! from ([`windows`]). The first thing to run against a new endpoint.

use std::time::Instant;

use futures_util::StreamExt;
use rojos_llm::{
    system_message, tool_message, user_message, ChatRequest, Client, MessageText, ToolChoice,
    ToolDefinition, Turn, TurnEvent,
};
use serde_json::{json, Value};

use crate::{agent::context::Window, agent::error_chain, config::LiveConfig};

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Whether it worked.
    pub ok: bool,
    /// What was seen, or what failed.
    pub detail: String,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.ok { "ok" } else { "FAILED" };
        write!(f, "{:<14} {verdict}: {}", self.name, self.detail)
    }
}

fn probe_tool() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Returns the current time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string", "description": "an IANA time zone, e.g. UTC"}},
                "required": ["timezone"]
            }
        }
    })
}

/// What one streamed turn produced.
struct Streamed {
    turn: Result<Turn, rojos_llm::LlmError>,
    deltas: usize,
    first_event_ms: Option<u128>,
}

async fn stream(client: &Client, request: &ChatRequest<'_>) -> Streamed {
    let started = Instant::now();
    let mut events = client.stream_turn(request);
    let mut deltas = 0;
    let mut first_event_ms = None;
    while let Some(event) = events.next().await {
        first_event_ms.get_or_insert_with(|| started.elapsed().as_millis());
        match event {
            Ok(TurnEvent::TextDelta(_)) => deltas += 1,
            Ok(TurnEvent::ToolCallStarted { .. } | TurnEvent::ToolCallProgress { .. }) => {}
            Ok(TurnEvent::Finished(turn)) => {
                return Streamed {
                    turn: Ok(turn),
                    deltas,
                    first_event_ms,
                };
            }
            Err(e) => {
                return Streamed {
                    turn: Err(e),
                    deltas,
                    first_event_ms,
                }
            }
        }
    }
    Streamed {
        turn: Err(rojos_llm::LlmError::Malformed {
            provider: rojos_llm::display_url(client.endpoint().as_str()),
            detail: "the stream ended without a result".to_owned(),
        }),
        deltas,
        first_event_ms,
    }
}

/// Runs the probe and returns its checks, in order; it stops at the first failure.
pub async fn run(client: &Client) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut messages = vec![
        MessageText::new(&system_message(
            "You are being tested. Use the tools you are given.",
        )),
        MessageText::new(&user_message(
            "What time is it in UTC? Call get_time to find out, then answer in one short sentence.",
        )),
    ];
    let (check, turn) = streaming(client, &messages).await;
    checks.push(check);
    let Some(turn) = turn else {
        return checks;
    };
    let check = tool_call(&turn);
    let called = check.ok;
    checks.push(check);
    if !called {
        return checks;
    }
    messages.push(MessageText::new(&client.assistant_message(&turn)));
    for call in &turn.tool_calls {
        messages.push(MessageText::new(&tool_message(
            &call.id,
            r#"{"time":"12:00","timezone":"UTC"}"#,
        )));
    }
    checks.push(follow_up(client, messages).await);
    checks
}

/// The probe's request: `messages` with the `get_time` tool offered.
fn request(messages: &[MessageText]) -> ChatRequest<'_> {
    let tool = ToolDefinition::new(&probe_tool()).expect("the probe's tool name is valid");
    ChatRequest {
        system: None,
        messages,
        tools: vec![tool],
        tool_choice: Some(ToolChoice::Auto),
    }
}

/// Check 1: the first turn streams to its end; its turn when it did.
async fn streaming(client: &Client, messages: &[MessageText]) -> (Check, Option<Turn>) {
    let first = stream(client, &request(messages)).await;
    match first.turn {
        Ok(turn) => (
            Check {
                name: "streaming",
                ok: true,
                detail: format!(
                    "first event after {} ms",
                    first.first_event_ms.unwrap_or_default()
                ),
            },
            Some(turn),
        ),
        Err(e) => (
            Check {
                name: "streaming",
                ok: false,
                detail: error_chain(&e),
            },
            None,
        ),
    }
}

/// Check 2: the turn calls `get_time` with usable arguments.
fn tool_call(turn: &Turn) -> Check {
    let Some(call) = turn.tool_calls.first() else {
        return Check {
            name: "tool call",
            ok: false,
            detail: format!(
                "the model answered in text instead of calling get_time: {:?}",
                shorten(&turn.text)
            ),
        };
    };
    Check {
        name: "tool call",
        ok: call.name == "get_time" && call.arguments.is_ok(),
        detail: match &call.arguments {
            Ok(args) => format!(
                "{} {} (id {})",
                call.name,
                Value::Object(args.clone()),
                call.id
            ),
            Err(why) => format!("{} with unusable arguments: {why}", call.name),
        },
    }
}

/// Check 3: given the tool's result, the model answers in text.
async fn follow_up(client: &Client, messages: Vec<MessageText>) -> Check {
    let second = stream(client, &request(&messages)).await;
    match second.turn {
        Err(e) => Check {
            name: "follow-up",
            ok: false,
            detail: format!("the turn after the tool result failed: {}", error_chain(&e)),
        },
        Ok(turn) if turn.text.trim().is_empty() => Check {
            name: "follow-up",
            ok: false,
            detail: "the model gave no text answer after the tool result".to_owned(),
        },
        Ok(turn) => Check {
            name: "follow-up",
            ok: true,
            detail: format!(
                "{:?} in {} streamed chunk(s)",
                shorten(&turn.text),
                second.deltas
            ),
        },
    }
}

fn shorten(text: &str) -> String {
    let short: String = text.chars().take(80).collect();
    if short.len() < text.len() {
        format!("{short}…")
    } else {
        short
    }
}

/// The context window lines of the report: what provider `name` (of `live`) says of its
/// model's window, then the window each rojo that uses it plans for and where that came from
/// (`docs/configuration.md`, "Context window").
pub async fn windows(client: &Client, name: &str, live: &LiveConfig) -> Vec<String> {
    let Some(config) = live.providers.get(name) else {
        return Vec::new();
    };
    let model = &client.provider().model;
    let reported = crate::providers::window::ask(client, config.kind).await;
    let mut lines = vec![match &reported {
        Ok(Some(told)) => format!(
            "context window: the provider says {} tokens ({})",
            told.tokens, told.how
        ),
        Ok(None) => "context window: the provider does not say".to_owned(),
        Err(e) => format!(
            "context window: the provider did not say: {}",
            error_chain(e)
        ),
    }];
    let told = reported.ok().flatten().map(|r| (r.tokens, r.loaded));
    let ollama = config.kind == Some(rojos_llm::ProviderKind::Ollama);
    for (rojo_name, rojo) in &live.rojos {
        if !rojo.providers.iter().any(|p| p == name) {
            continue;
        }
        let window = Window::resolve(
            rojo.context_tokens,
            config.context_tokens,
            told,
            model,
            ollama,
        );
        lines.push(format!(
            "  rojo {rojo_name}: {} tokens ({})",
            window.tokens,
            window.source.name()
        ));
    }
    lines
}
