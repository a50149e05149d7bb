//! The reference conversation the upstream plays (docs/intro, 3 model turns, 2 tool calls):
//! its user message, folder, file, page and final answer ([`Answer`], cut into token-sized
//! deltas by `--answer-chunks`), its three turns as SSE events at a [`Pace`] ([`Script`]), and
//! the requests a host sends for each turn ([`deep_check`], [`direct_request`]).

use std::{
    sync::{LazyLock, OnceLock},
    time::Duration,
};

use axum::body::Bytes;
use serde_json::{json, Value};

use super::chunks::{text_in_pieces, tool_call, MODEL, TEXT_PIECE};

/// The reference conversation's user message.
pub(crate) const MESSAGE: &str = "Create a directory at docs/intro and write an index.page file there with a page header and a short intro paragraph.";
/// The folder the first turn creates.
pub(crate) const FOLDER: &str = "docs/intro";
/// The file the second turn writes.
pub(crate) const FILE: &str = "docs/intro/index.page";
/// What the second turn writes.
pub(crate) const PAGE: &str = "# Introduction\n\nWelcome to the documentation. This section gives a short overview of the project and where to start.";
/// The final text answer.
pub(crate) const ANSWER: &str = "Done! I created `docs/intro` and wrote `docs/intro/index.page`.";
/// Characters per content delta of an answer set by `--answer-chunks`: about one token, as a
/// provider streams them.
const TOKEN_PIECE: usize = 4;

/// The answer chosen by `--answer-chunks` ([`choose_answer`]).
static CHOSEN_ANSWER: OnceLock<Answer> = OnceLock::new();
/// The answer when none was chosen.
static SEED_ANSWER: LazyLock<Answer> = LazyLock::new(Answer::seed);

/// The final answer's text and how it is cut into content deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The whole text.
    pub(crate) text: String,
    /// Characters per content delta.
    pub(crate) piece: usize,
}

impl Answer {
    /// [`ANSWER`] in [`TEXT_PIECE`]s: the published scenarios' answer.
    pub(super) fn seed() -> Answer {
        Answer {
            text: ANSWER.to_owned(),
            piece: TEXT_PIECE,
        }
    }

    /// [`ANSWER`]'s words repeated to `chunks` token-sized content deltas ([`TOKEN_PIECE`]).
    pub(crate) fn in_tokens(chunks: usize) -> Answer {
        let length = chunks * TOKEN_PIECE;
        let text: String = format!("{ANSWER} ").chars().cycle().take(length).collect();
        Answer {
            text,
            piece: TOKEN_PIECE,
        }
    }

    /// How many content deltas it streams as.
    pub(crate) fn chunks(&self) -> usize {
        self.text.chars().count().div_ceil(self.piece)
    }
}

/// Sets the final answer of S1–S3's conversation for this process (`--answer-chunks`); the
/// first call wins. Unset, it is [`ANSWER`].
pub(crate) fn choose_answer(answer: Answer) {
    let _ = CHOSEN_ANSWER.set(answer);
}

/// The answer `--answer-chunks` chose, if it did.
pub(crate) fn chosen_answer() -> Option<&'static Answer> {
    CHOSEN_ANSWER.get()
}

/// The final answer the upstream streams and the clients check.
pub(crate) fn answer() -> &'static Answer {
    chosen_answer().unwrap_or(&SEED_ANSWER)
}

/// How fast the upstream answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pace {
    /// Before the first body byte of each turn (time to first token).
    pub(crate) first: Duration,
    /// Before each later chunk.
    pub(crate) between: Duration,
}

impl Pace {
    /// No delay at all.
    pub(crate) const FAST: Pace = Pace {
        first: Duration::ZERO,
        between: Duration::ZERO,
    };
}

/// The three turns as SSE events, one `Bytes` per event.
#[derive(Debug)]
pub(crate) struct Script {
    pub(super) turns: [Vec<Bytes>; 3],
}

impl Script {
    /// The three turns, the last streaming `answer`.
    pub(super) fn seed(answer: &Answer) -> Script {
        let page_args = json!({"path": FILE, "text": PAGE}).to_string();
        Script {
            turns: [
                tool_call(
                    "call_mkdir",
                    "create_directory",
                    &json!({"path": FOLDER}).to_string(),
                ),
                tool_call("call_write", "write_text_content", &page_args),
                text_in_pieces(&answer.text, answer.piece),
            ],
        }
    }

    /// What the upstream alone takes for one conversation at `pace`: the delays it sleeps.
    pub(crate) fn own_time(&self, pace: Pace) -> Duration {
        self.turns
            .iter()
            .map(|events| pace.first + pace.between * (events.len() as u32 - 1))
            .sum()
    }
}

/// The request a host should send for turn `tools`: the model, streaming, five tools, and the
/// history so far in order.
pub(super) fn deep_check(body: &[u8], tools: usize) -> Result<(), String> {
    let request: Value =
        serde_json::from_slice(body).map_err(|e| format!("request is not JSON: {e}"))?;
    if request["model"] != MODEL || request["stream"] != true {
        return Err("wrong model or not streaming".to_owned());
    }
    if request["tools"].as_array().map(Vec::len) != Some(5) {
        return Err("expected the five built-in tools".to_owned());
    }
    let roles: Vec<&str> = request["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["role"].as_str()).collect())
        .unwrap_or_default();
    let expected: &[&str] = match tools {
        0 => &["user"],
        1 => &["user", "assistant", "tool"],
        _ => &["user", "assistant", "tool", "assistant", "tool"],
    };
    if roles != expected {
        return Err(format!("unexpected history roles {roles:?}"));
    }
    Ok(())
}

/// A request body like the host's for turn `tools`, for timing the upstream alone.
pub(crate) fn direct_request(tools: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "content": MESSAGE})];
    for i in 0..tools {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": []}));
        messages.push(
            json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "{\"ok\":true}"}),
        );
    }
    let tools: Vec<Value> = (0..5)
        .map(|i| json!({"type": "function", "function": {"name": format!("tool{i}"), "parameters": {"type": "object"}}}))
        .collect();
    json!({"model": MODEL, "stream": true, "messages": messages, "tools": tools})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_takes_about_a_second_at_the_s3_pace() {
        let pace = Pace {
            first: Duration::from_millis(200),
            between: Duration::from_millis(20),
        };
        let own = Script::seed(&Answer::seed()).own_time(pace);
        assert!(
            own > Duration::from_millis(900) && own < Duration::from_millis(1200),
            "{own:?}"
        );
        assert_eq!(
            Script::seed(&Answer::seed()).own_time(Pace::FAST),
            Duration::ZERO
        );
    }

    /// `--answer-chunks 200`: the answer turn streams 200 content deltas of one token each,
    /// which together are the answer the clients expect, and each is paced.
    #[test]
    fn an_answer_in_tokens_streams_one_delta_per_token() {
        let answer = Answer::in_tokens(200);
        assert_eq!(answer.chunks(), 200);
        assert_eq!(answer.text.chars().count(), 200 * TOKEN_PIECE);
        assert!(answer.text.starts_with(ANSWER));
        let script = Script::seed(&answer);
        // The role delta, 200 content deltas, the stop delta and `[DONE]`.
        assert_eq!(script.turns[2].len(), 203);
        let streamed: String = script.turns[2]
            .iter()
            .filter_map(|event| {
                let data = std::str::from_utf8(event).ok()?.strip_prefix("data: ")?;
                let chunk: Value = serde_json::from_str(data.trim()).ok()?;
                chunk["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(streamed, answer.text);
        let pace = Pace {
            first: Duration::ZERO,
            between: Duration::from_millis(20),
        };
        let seed = Script::seed(&Answer::seed());
        let longer = script.own_time(pace) - seed.own_time(pace);
        let more = 203 - seed.turns[2].len();
        assert_eq!(longer, pace.between * u32::try_from(more).unwrap());
    }
}
