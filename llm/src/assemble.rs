//! Chunks → one `Turn`: answer text as it comes, tool-call fragments slotted into whole
//! calls (every provider quirk is commented at the line that handles it), in-stream errors,
//! finish reason and usage. Pure and synchronous: framing is `sse.rs`'s job, time `stream.rs`'s.

use std::collections::{HashSet, VecDeque};

use serde_json::{Map, Value};

use crate::json_type::json_type_name;
use crate::turn::{FinishReason, ToolCall, Turn, TurnEvent, Usage};
use crate::wire::{describe_error, Chunk, ErrorInfo, WireToolCall};

/// A tool call being assembled.
#[derive(Debug, Default)]
struct Slot {
    /// The wire `index` that opened this slot (`None` for Gemini/Mistral whole calls).
    wire_index: Option<u64>,
    id: String,
    name: String,
    args: String,
    /// The arguments passed the size limit; the rest was dropped.
    truncated: bool,
    extra: Option<Value>,
    /// `ToolCallStarted` was handed out for this call.
    announced: bool,
    /// The argument length the last `ToolCallProgress` reported.
    reported_bytes: usize,
}

/// Bytes a tool call counts for beyond its id, name and arguments (its bookkeeping), so a
/// stream of empty calls cannot grow a turn without counting against its limit.
const CALL_OVERHEAD_BYTES: usize = 128;

/// Why a chunk ends the turn.
#[derive(Debug)]
pub(crate) enum PushError {
    /// The provider reported an error.
    Provider(ErrorInfo),
    /// The turn's text and tool calls passed `max_turn_bytes`.
    TurnTooLarge,
}

/// How the stream of a turn ended, for saying what an empty turn received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// `data: [DONE]`.
    Done,
    /// The body ended (or went quiet) after its last event.
    Eof,
    /// The whole answer was one JSON completion.
    Json,
}

/// Why a finished stream is not a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoOutput {
    /// No text, no tool call, no finish reason: what was received instead.
    Empty { received: String },
    /// Only `finish_reason: "length"`: the token limit came before any output.
    LengthOnly,
}

/// What the chunks of a turn held, to say what an empty turn received.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    chunks: usize,
    /// Chunks without choices (`choices: []` or absent).
    without_choices: usize,
    /// Chunks whose choice held no text and no tool call (a role, `""`, reasoning only).
    without_content: usize,
}

impl Tally {
    fn describe(self, ending: Ending) -> String {
        let mut parts = Vec::new();
        if self.without_choices > 0 {
            parts.push(format!("{} with no choices", chunks(self.without_choices)));
        }
        if self.without_content > 0 {
            parts.push(format!(
                "{} with no text or tool call",
                chunks(self.without_content)
            ));
        }
        if parts.is_empty() && self.chunks > 0 {
            parts.push(format!("{} with nothing usable", chunks(self.chunks)));
        }
        let what = parts.join(" and ");
        match ending {
            Ending::Json if self.without_choices > 0 => "a JSON answer with no choices".into(),
            Ending::Json => "a JSON answer with no text or tool call".into(),
            Ending::Done if what.is_empty() => "only [DONE]".into(),
            Ending::Eof if what.is_empty() => "no data before the stream ended".into(),
            Ending::Done => format!("{what}, then [DONE]"),
            Ending::Eof => format!("{what}, then the end of the stream"),
        }
    }
}

fn chunks(n: usize) -> String {
    if n == 1 {
        "1 chunk".into()
    } else {
        format!("{n} chunks")
    }
}

/// Accumulates one turn from its chunks.
#[derive(Debug)]
pub(crate) struct Assembler {
    tally: Tally,
    text: String,
    slots: Vec<Slot>,
    finish_raw: Option<String>,
    usage: Option<Usage>,
    max_argument_bytes: usize,
    max_turn_bytes: usize,
    /// Text plus tool calls (ids, names, arguments, `extra_content`, overhead) kept so far.
    turn_bytes: usize,
}

impl Assembler {
    pub(crate) fn new(max_argument_bytes: usize, max_turn_bytes: usize) -> Self {
        Assembler {
            tally: Tally::default(),
            text: String::new(),
            slots: Vec::new(),
            finish_raw: None,
            usage: None,
            max_argument_bytes,
            max_turn_bytes,
            turn_bytes: 0,
        }
    }

    /// True once a non-empty `finish_reason` arrived.
    pub(crate) fn has_finish_reason(&self) -> bool {
        self.finish_raw.is_some()
    }

    /// True once any answer text was received.
    pub(crate) fn has_text(&self) -> bool {
        !self.text.is_empty()
    }

    /// True once any answer text or tool-call fragment was received.
    pub(crate) fn has_output(&self) -> bool {
        self.has_text() || !self.slots.is_empty()
    }

    /// What the stream held when it ended with nothing, at `ending`.
    pub(crate) fn received(&self, ending: Ending) -> String {
        self.tally.describe(ending)
    }

    /// Feeds one chunk; returns the answer text it added, if any.
    ///
    /// # Errors
    /// The provider's error when the chunk is an error (any shape) or ends the turn with
    /// `finish_reason: "error"`; `TurnTooLarge` when the chunk would take the turn past
    /// `max_turn_bytes` (its text is then not added, so text handed out stays within it).
    pub(crate) fn push(&mut self, chunk: Chunk) -> Result<Option<String>, PushError> {
        if let Some(info) = chunk.error_info() {
            return Err(PushError::Provider(info));
        }
        if let Some(u) = chunk.usage {
            // Some providers send usage on every chunk (cumulative): the last one wins.
            if u.prompt_tokens.is_some() || u.completion_tokens.is_some() {
                let prompt = u.prompt_tokens.unwrap_or(0);
                let completion = u.completion_tokens.unwrap_or(0);
                self.usage = Some(Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: u.total_tokens.unwrap_or(prompt + completion),
                });
            }
        }
        let choices = chunk.choices.unwrap_or_default(); // `choices: []` on usage chunks
        let single = choices.len() == 1;
        self.tally.chunks += 1;
        if choices.is_empty() {
            self.tally.without_choices += 1;
        }
        let had_choices = !choices.is_empty();
        let mut had_fragments = false;
        let mut added = String::new();
        for choice in choices {
            // We ask for one choice; if a server sends several, keep the first.
            if !single && choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta.or(choice.message) {
                if let Some(content) = delta.content {
                    push_content(&mut added, &content);
                }
                if let Some(refusal) = delta.refusal {
                    added.push_str(&refusal);
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    had_fragments = true;
                    let kept = self.add_fragment(fragment);
                    self.count(kept)?;
                }
            }
            match choice.finish_reason.as_deref() {
                // `""` means absent; a later `null` (OpenRouter's usage chunk) never clears it.
                None | Some("") => {}
                Some("error") => {
                    return Err(PushError::Provider(
                        choice
                            .error
                            .as_ref()
                            .and_then(describe_error)
                            .unwrap_or_else(|| ErrorInfo {
                                message: "the turn ended with finish_reason \"error\"".into(),
                                code: None,
                                tags: Vec::new(),
                            }),
                    ));
                }
                Some(reason) => self.finish_raw = Some(reason.to_string()),
            }
        }
        self.count(added.len())?;
        if added.is_empty() {
            if had_choices && !had_fragments {
                self.tally.without_content += 1;
            }
            return Ok(None);
        }
        self.text.push_str(&added);
        Ok(Some(added))
    }

    /// Queues the live status of the tool calls since the last call: `ToolCallStarted` for
    /// each call whose name just became known, then `ToolCallProgress` for each started call
    /// whose arguments grew (a call sent whole in one chunk gets both at once).
    pub(crate) fn drain_tool_events(&mut self, out: &mut VecDeque<TurnEvent>) {
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if !slot.announced && !slot.name.is_empty() {
                slot.announced = true;
                out.push_back(TurnEvent::ToolCallStarted {
                    index,
                    id: (!slot.id.is_empty()).then(|| slot.id.clone()),
                    name: slot.name.clone(),
                });
            }
            if slot.announced && slot.args.len() > slot.reported_bytes {
                slot.reported_bytes = slot.args.len();
                out.push_back(TurnEvent::ToolCallProgress {
                    index,
                    bytes: slot.args.len(),
                });
            }
        }
    }

    /// Counts `bytes` more against the turn limit.
    fn count(&mut self, bytes: usize) -> Result<(), PushError> {
        self.turn_bytes = self.turn_bytes.saturating_add(bytes);
        if self.turn_bytes > self.max_turn_bytes {
            return Err(PushError::TurnTooLarge);
        }
        Ok(())
    }

    /// Slots a fragment into its call; returns the bytes it added to the turn.
    fn add_fragment(&mut self, fragment: WireToolCall) -> usize {
        let id = fragment.id.filter(|id| !id.is_empty());
        let (name, arguments) = match fragment.function {
            // LM Studio sends `name: ""` on continuations: an empty name is no name.
            Some(f) => (f.name.filter(|n| !n.is_empty()), f.arguments),
            None => (None, None),
        };
        let args = match arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            // Some servers send the arguments already parsed.
            Some(other) => other.to_string(),
        };
        let target = self.slot_for(fragment.index, id.as_deref(), name.is_some(), &args);
        let mut added = 0;
        let slot = match target {
            Some(pos) => &mut self.slots[pos],
            None => {
                self.slots.push(Slot {
                    wire_index: fragment.index,
                    ..Slot::default()
                });
                added += CALL_OVERHEAD_BYTES;
                let last = self.slots.len() - 1;
                &mut self.slots[last]
            }
        };
        // Proxies repeat id and name on every delta: take the first, never append.
        if slot.id.is_empty() {
            if let Some(id) = id {
                added += id.len();
                slot.id = id;
            }
        }
        if slot.name.is_empty() {
            if let Some(name) = name {
                added += name.len();
                slot.name = name;
            }
        }
        if slot.extra.is_none() {
            // Gemini 3: `extra_content.google.thought_signature` must be echoed back.
            if let Some(extra) = fragment.extra_content.filter(|v| !v.is_null()) {
                added += serde_json::to_string(&extra).map_or(0, |text| text.len());
                let mut obj = Map::new();
                obj.insert("extra_content".into(), extra);
                slot.extra = Some(Value::Object(obj));
            }
        }
        added + append_capped(slot, &args, self.max_argument_bytes)
    }

    /// Which slot a fragment continues, or `None` for a new call.
    fn slot_for(
        &self,
        index: Option<u64>,
        id: Option<&str>,
        named: bool,
        args: &str,
    ) -> Option<usize> {
        let pos = match index {
            // Slot by index; Anthropic's first call may be `index: 1`, so indexes are keys,
            // not positions.
            Some(i) => self.slots.iter().rposition(|s| s.wire_index == Some(i))?,
            // Gemini and Mistral send whole calls without `index`: a fragment continues a
            // call only when it repeats that call's id, or carries neither id nor name.
            None => match id {
                Some(id) => self.slots.iter().rposition(|s| s.id == id)?,
                None if named => return None,
                None => self.slots.len().checked_sub(1)?,
            },
        };
        let slot = &self.slots[pos];
        // Ollama reuses `index: 0` for parallel calls: a new non-empty id with a name
        // starts a new call.
        if named && id.is_some_and(|id| !slot.id.is_empty() && slot.id != id) {
            return None;
        }
        // A named fragment opening a fresh object after a complete one is a new call too
        // (parallel whole calls that reuse an index or an id).
        if named
            && args.trim_start().starts_with('{')
            && serde_json::from_str::<Value>(&slot.args).is_ok()
        {
            return None;
        }
        Some(pos)
    }

    /// The finished turn, unless it holds nothing: no text, no tool call and no finish
    /// reason, or only a `length` finish. A `stop` with nothing else is a valid turn (the
    /// model chose to say nothing). Call only at the end of the stream.
    pub(crate) fn finish_checked(self, ending: Ending) -> Result<Turn, NoOutput> {
        let tally = self.tally;
        let turn = self.finish();
        if !turn.text.is_empty() || !turn.tool_calls.is_empty() {
            return Ok(turn);
        }
        match (&turn.finish_reason_raw, &turn.finish_reason) {
            (None, _) => Err(NoOutput::Empty {
                received: tally.describe(ending),
            }),
            (Some(_), FinishReason::Length) => Err(NoOutput::LengthOnly),
            (Some(_), _) => Ok(turn),
        }
    }

    /// The finished turn, whatever it holds. Call only at the end of the stream.
    pub(crate) fn finish(self) -> Turn {
        let max = self.max_argument_bytes;
        let mut seen = HashSet::new();
        let mut tool_calls = Vec::with_capacity(self.slots.len());
        for slot in self.slots {
            if slot.name.is_empty() {
                // Nothing can run it and providers reject a nameless call in history.
                tracing::warn!(id = %slot.id, "dropping a tool call without a name");
                continue;
            }
            // Empty, missing or duplicate ids get a fresh one in the only shape Mistral
            // accepts back (9 alphanumerics).
            let id = if slot.id.is_empty() || seen.contains(&slot.id) {
                mint_unique_id(&seen)
            } else {
                slot.id
            };
            seen.insert(id.clone());
            let arguments = parse_arguments(&slot.args, slot.truncated, max);
            tool_calls.push(ToolCall {
                id,
                name: slot.name,
                arguments,
                raw_arguments: slot.args,
                extra: slot.extra,
            });
        }
        let finish_reason =
            FinishReason::normalise(self.finish_raw.as_deref(), !tool_calls.is_empty());
        Turn {
            text: self.text,
            tool_calls,
            finish_reason,
            finish_reason_raw: self.finish_raw,
            usage: self.usage,
        }
    }
}

/// Answer text from `content`: a string, or a list of parts of which only `text` parts
/// count (Mistral's reasoning models put `thinking` parts there too).
fn push_content(out: &mut String, content: &Value) {
    match content {
        Value::String(s) => out.push_str(s),
        Value::Array(parts) => {
            for part in parts {
                let is_text = part
                    .get("type")
                    .and_then(Value::as_str)
                    .is_none_or(|t| t == "text");
                if let (true, Some(text)) = (is_text, part.get("text").and_then(Value::as_str)) {
                    out.push_str(text);
                }
            }
        }
        _ => {}
    }
}

/// Appends arguments up to the per-call cap; returns the bytes kept.
fn append_capped(slot: &mut Slot, args: &str, max: usize) -> usize {
    if slot.truncated || args.is_empty() {
        return 0;
    }
    let room = max.saturating_sub(slot.args.len());
    if args.len() <= room {
        slot.args.push_str(args);
        return args.len();
    }
    let mut cut = room;
    while !args.is_char_boundary(cut) {
        cut -= 1;
    }
    slot.args.push_str(&args[..cut]);
    slot.truncated = true;
    cut
}

/// Parses the arguments text into an object, or says why it can't, for the model.
fn parse_arguments(raw: &str, truncated: bool, max: usize) -> Result<Map<String, Value>, String> {
    if truncated {
        return Err(format!(
            "the arguments of this call are longer than {max} bytes, so the tool was not run"
        ));
    }
    let text = raw.trim();
    // xAI-style no-argument calls stream `""` from start to end: that is `{}`.
    if text.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        // Some models double-encode: a JSON string holding the object.
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err("the arguments must be a JSON object, not a string".into()),
        },
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, not {}",
            json_type_name(&other)
        )),
        Err(e) => Err(format!(
            "the arguments are not valid JSON ({e}), so the tool was not run"
        )),
    }
}

/// A fresh id in the only shape every provider accepts back: `[A-Za-z0-9]{9}`.
fn mint_id() -> String {
    (0..9).map(|_| fastrand::alphanumeric()).collect()
}

fn mint_unique_id(seen: &HashSet<String>) -> String {
    loop {
        let id = mint_id();
        if !seen.contains(&id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests;
