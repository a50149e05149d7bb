//! What one model turn sends, planned from the stored history (which is never changed):
//!
//! 1. the history as it is, while it fits under the rojo's `compact_at_percent` of the
//!    window (less room for the answer);
//! 2. else, with the tool results older than the newest turn shortened to a stub that says
//!    what was left out and how to get it again;
//! 3. else [`Plan::Compact`]: the turns before a user message are to be summarised; the
//!    summary then travels in the system message and the turns after it word for word,
//!    every tool call with its results (a cut is only ever made before a user message);
//! 4. else the largest messages left are cut to fit, each with a marker (the run's user
//!    message too, but never dropped); when even that cannot fit, [`Plan::TooBig`].

use std::sync::Arc;

use rojos_conversations::Compaction;
use rojos_llm::MessageText;
use serde_json::Value;

use super::{Measure, Window};

/// Bytes a request carries besides its messages, system prompt and tools.
const OVERHEAD: usize = 256;

/// A tool result up to this size is kept even when older results are shortened.
const STUB_OVER: usize = 512;

/// The smallest part of a message kept when it is cut.
const MIN_KEPT: usize = 200;

/// The part of the window a compaction aims to leave the kept turns, in percent of the
/// compaction threshold, so the next compaction is some turns away.
const KEEP_PERCENT: u64 = 50;

/// What a turn sends.
#[derive(Debug)]
pub(crate) struct Planned {
    /// The messages (the history itself, shared, when nothing was changed).
    pub messages: Arc<Vec<MessageText>>,
    /// The system message: the rojo's prompt, and the summary when there is one.
    pub system: Option<Arc<str>>,
    /// The request's size, estimated in bytes.
    pub bytes: usize,
    /// Its size in tokens, as the measure counts them.
    pub tokens: u64,
    /// Whether the history was shortened or summarised for it.
    pub shortened: bool,
}

/// The plan for one turn.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Send this.
    Send(Planned),
    /// Summarise the messages before index `upto` (a user message) first.
    Compact {
        /// The first message kept word for word.
        upto: usize,
    },
    /// Nothing can make the request fit: it needs `needed` tokens where `limit` are free.
    TooBig {
        /// Tokens of what cannot be shortened (system prompt, tools, stubs, cut messages).
        needed: u64,
        /// The window less the room for the answer.
        limit: u64,
    },
}

/// What a plan is made from.
#[derive(Debug)]
pub(crate) struct Input<'a> {
    /// The run's history, as sent.
    pub history: &'a Arc<Vec<MessageText>>,
    /// The rojo's system prompt.
    pub system: Option<&'a Arc<str>>,
    /// The bytes of the tools' definitions.
    pub tools_bytes: usize,
    /// Their tokens, when the measure has a tokenizer (else 0).
    pub tools_tokens: u64,
    /// The newest stored summary.
    pub summary: Option<&'a Compaction>,
    /// The index of the run's user message in `history`.
    pub run_start: usize,
    /// How many stored messages come before `history` (the newest summary's, which the
    /// run was loaded with, covers them); `summary`'s `covers` counts from the first stored.
    pub offset: usize,
    /// The model's window.
    pub window: Window,
    /// The rojo's `compact_at_percent` (not 0).
    pub percent: u8,
    /// The run's measure.
    pub measure: Measure,
    /// Whether a compaction may be asked for (not when one was just made).
    pub may_compact: bool,
}

/// Plans one turn's request ([module docs](self)).
pub(crate) fn plan(input: &Input<'_>) -> Plan {
    let limit = input
        .window
        .tokens
        .saturating_sub(input.window.answer_room());
    let trigger = limit * u64::from(input.percent) / 100;
    let m = input.measure;
    // Where the summary ends in `history`, when it covers no part of the run.
    let covers = input
        .summary
        .and_then(|s| (s.covers as usize).checked_sub(input.offset))
        .filter(|&covers| covers <= input.run_start);
    let base = covers.unwrap_or(0);
    let summary = input
        .summary
        .filter(|_| covers.is_some_and(|covers| covers + input.offset > 0));
    let system = system_with(input.system, summary);
    let fixed = system.as_deref().map_or(0, str::len) + input.tools_bytes + OVERHEAD;
    let count = Count {
        measure: m,
        fixed: m
            .tokenizer()
            .map_or(0, |t| t.fixed(system.as_deref(), input.tools_tokens)),
    };
    let tail = &input.history[base..];
    let bytes = fixed + size(tail);
    let tokens = count.tokens(tail, bytes, 0);
    if tokens <= trigger {
        let messages = if base == 0 {
            Arc::clone(input.history)
        } else {
            Arc::new(tail.to_vec())
        };
        let shortened = summary.is_some();
        return Plan::Send(Planned {
            messages,
            system,
            bytes,
            tokens,
            shortened,
        });
    }
    let mut stubbed = stub_older_results(tail);
    let bytes = fixed + size(&stubbed);
    let tokens = count.tokens(&stubbed, bytes, 0);
    if tokens <= trigger {
        return Plan::Send(Planned {
            messages: Arc::new(stubbed),
            system,
            bytes,
            tokens,
            shortened: true,
        });
    }
    if input.may_compact {
        if let Some(upto) = cut_point(input, &count, base, fixed, trigger) {
            return Plan::Compact { upto };
        }
    }
    let room = m.bytes(limit).saturating_sub(fixed);
    if !cut_to_fit(&mut stubbed, room) {
        return Plan::TooBig {
            needed: m.tokens(fixed + least_size(&stubbed)),
            limit,
        };
    }
    let bytes = fixed + size(&stubbed);
    let tokens = count.tokens(&stubbed, bytes, 0);
    Plan::Send(Planned {
        messages: Arc::new(stubbed),
        system,
        bytes,
        tokens,
        shortened: true,
    })
}

/// The first user message after `base`, up to the run's, from which on the turns
/// (shortened) take at most [`KEEP_PERCENT`] of the threshold; the run's own when none
/// does. `None` when no user message is after `base`.
fn cut_point(
    input: &Input<'_>,
    count: &Count,
    base: usize,
    fixed: usize,
    trigger: u64,
) -> Option<usize> {
    let history = input.history;
    let aim = trigger * KEEP_PERCENT / 100;
    let candidates: Vec<usize> = (base + 1..=input.run_start.min(history.len().saturating_sub(1)))
        .filter(|&i| history[i].role() == "user")
        .collect();
    let last = *candidates.last()?;
    let summary_room = input.measure.bytes(trigger / 8);
    Some(
        candidates
            .into_iter()
            .find(|&i| {
                let kept = stub_older_results(&history[i..]);
                let bytes = fixed + summary_room + size(&kept);
                count.tokens(&kept, bytes, trigger / 8) <= aim
            })
            .unwrap_or(last),
    )
}

/// Tokens of a request: counted by the measure's tokenizer, else estimated from its bytes.
struct Count {
    measure: Measure,
    /// With a tokenizer: the tokens of the system message, the tools and the answer priming.
    fixed: u64,
}

impl Count {
    /// The tokens of a request of `messages` taking `bytes` in all, with `extra` tokens
    /// more (already in `bytes` for the estimate).
    fn tokens(&self, messages: &[MessageText], bytes: usize, extra: u64) -> u64 {
        match self.measure.tokenizer() {
            Some(t) => self.fixed + extra + t.messages(messages),
            None => self.measure.tokens(bytes),
        }
    }
}

/// The system message: the rojo's prompt, then the summary of the turns left out.
fn system_with(prompt: Option<&Arc<str>>, summary: Option<&Compaction>) -> Option<Arc<str>> {
    let Some(summary) = summary else {
        return prompt.cloned();
    };
    let mut text = String::new();
    if let Some(prompt) = prompt {
        text.push_str(prompt);
        text.push_str("\n\n");
    }
    text.push_str(
        "## The conversation so far\n\
         The earlier messages of this conversation were summarised to fit your context \
         window. Their summary:\n\n",
    );
    text.push_str(&summary.summary);
    Some(text.into())
}

/// The request bytes of `messages` once cut as far as [`cut_to_fit`] may: the model's own
/// messages whole, every other at most [`MIN_KEPT`] bytes.
fn least_size(messages: &[MessageText]) -> usize {
    messages
        .iter()
        .map(|m| match m.role() {
            "assistant" => m.as_str().len() + 1,
            _ => m.as_str().len().min(MIN_KEPT) + 1,
        })
        .sum()
}

/// The request bytes of `messages`.
fn size(messages: &[MessageText]) -> usize {
    messages.iter().map(|m| m.as_str().len() + 1).sum()
}

/// `messages` with every tool result before the newest assistant message's shortened to a
/// stub, when over [`STUB_OVER`] bytes.
fn stub_older_results(messages: &[MessageText]) -> Vec<MessageText> {
    let newest = messages
        .iter()
        .rposition(|m| m.role() == "assistant")
        .unwrap_or(messages.len());
    let mut calls = std::collections::HashMap::new();
    messages
        .iter()
        .enumerate()
        .map(|(i, message)| {
            if message.role() == "assistant" && message.as_str().contains("\"tool_calls\"") {
                remember_calls(message, &mut calls);
            }
            if i >= newest || message.role() != "tool" || message.as_str().len() <= STUB_OVER {
                return message.clone();
            }
            stub(message, &calls).unwrap_or_else(|| message.clone())
        })
        .collect()
}

/// Notes each call of an assistant message: its id, and its tool and arguments as text.
fn remember_calls(message: &MessageText, calls: &mut std::collections::HashMap<String, String>) {
    let Ok(value) = serde_json::from_str::<Value>(message.as_str()) else {
        return;
    };
    for call in value["tool_calls"].as_array().into_iter().flatten() {
        let name = call["function"]["name"].as_str().unwrap_or("a tool");
        let mut args = call["function"]["arguments"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        if args.len() > 200 {
            args.truncate(args.floor_char_boundary(200));
            args.push('…');
        }
        if let Some(id) = call["id"].as_str() {
            calls.insert(id.to_owned(), format!("{name} {args}"));
        }
    }
}

/// The stub of a tool result: what was left out, and how to get it again.
fn stub(
    message: &MessageText,
    calls: &std::collections::HashMap<String, String>,
) -> Option<MessageText> {
    let mut value: Value = serde_json::from_str(message.as_str()).ok()?;
    let content = value["content"].as_str()?;
    let call = value["tool_call_id"]
        .as_str()
        .and_then(|id| calls.get(id))
        .map_or("the tool", String::as_str);
    let text = format!(
        "[Rojos left out this result ({} bytes, from {call}) to fit the model's context \
         window. Call the tool again if you need it.]",
        content.len()
    );
    value["content"] = Value::String(text);
    Some(MessageText::new(&value))
}

/// Cuts the largest messages' text until `messages` take at most `room` bytes, each with a
/// marker; `false` when they cannot. A message that cannot be cut (no text, or nothing
/// left to take) leaves the next largest to be cut.
fn cut_to_fit(messages: &mut [MessageText], room: usize) -> bool {
    let mut uncuttable = vec![false; messages.len()];
    loop {
        let total = size(messages);
        if total <= room {
            return true;
        }
        let excess = total - room;
        let Some((i, len)) = messages
            .iter()
            .map(|m| m.as_str().len())
            .enumerate()
            .filter(|&(i, len)| {
                !uncuttable[i] && len > MIN_KEPT * 2 && messages[i].role() != "assistant"
            })
            .max_by_key(|&(_, len)| len)
        else {
            return false;
        };
        match cut(&messages[i], len.saturating_sub(excess + 200).max(MIN_KEPT)) {
            Some(cut) if cut.as_str().len() < len => messages[i] = cut,
            _ => uncuttable[i] = true,
        }
    }
}

/// `message` with its text cut to about `keep` bytes and a marker saying so.
fn cut(message: &MessageText, keep: usize) -> Option<MessageText> {
    let mut value: Value = serde_json::from_str(message.as_str()).ok()?;
    let content = value["content"].as_str()?;
    let total = content.len();
    // `keep` counts request bytes, in which the JSON text escapes some characters: keep
    // the same share of the text.
    let keep = keep.saturating_mul(total) / message.as_str().len().max(1);
    let keep = keep.min(total.saturating_sub(1));
    let at = content.floor_char_boundary(keep);
    let text = format!(
        "{}\n[Rojos cut this to fit the model's context window: {} of its {total} bytes \
         were left out.]",
        &content[..at],
        total - at
    );
    value["content"] = Value::String(text);
    Some(MessageText::new(&value))
}

#[cfg(test)]
mod tests;
