//! OpenAI's own tokenizers (`tiktoken-rs`, whose BPE data is compiled in, loaded on first
//! use): `o200k_base` for gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and the o-series, `cl100k_base` for
//! gpt-4 and gpt-3.5, chosen by the model's name (a router's `openai/` prefix is dropped).
//!
//! A request is counted as OpenAI documents it: each message takes 3 tokens of framing plus
//! its role, text, name (and 1 more for a name), tool call id and each call's name and
//! arguments (3 more a call); the tool definitions are counted as the JSON text sent, a little
//! over what OpenAI renders them as; 3 tokens prime the answer.
//!
//! Counting is kept cheap on the hot path: each message's count is cached by a hash of its
//! text (and the encoding), so a turn hashes the history and tokenises only the messages it
//! has not seen before (the newest ones, a new stub); and text is encoded in pieces of at most
//! [`PIECE`] bytes cut before a space, so no input (a long line of base64) makes the
//! quadratic merge of byte-pair encoding slow. A cut inside a word counts one token more.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, OnceLock};

use rojos_llm::MessageText;
use serde_json::Value;
use tiktoken_rs::tokenizer::Tokenizer as Known;
use tiktoken_rs::CoreBPE;

/// Framing tokens of each message.
const PER_MESSAGE: u64 = 3;
/// The extra token of a message's `name`.
const PER_NAME: u64 = 1;
/// Framing tokens of each tool call.
const PER_CALL: u64 = 3;
/// Tokens priming the model's answer.
const REPLY_PRIMING: u64 = 3;
/// The longest piece of text encoded at once.
const PIECE: usize = 512;
/// Counts kept before the cache is emptied (a few MiB at most).
const CACHE_ENTRIES: usize = 100_000;

/// An OpenAI tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Tokenizer {
    /// `o200k_base`.
    O200k,
    /// `cl100k_base`.
    Cl100k,
}

impl Tokenizer {
    /// The tokenizer of `model`, when it is one of OpenAI's.
    pub(crate) fn for_model(model: &str) -> Option<Tokenizer> {
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        match tiktoken_rs::tokenizer::get_tokenizer(&name)? {
            Known::O200kBase | Known::O200kHarmony => Some(Tokenizer::O200k),
            Known::Cl100kBase => Some(Tokenizer::Cl100k),
            _ => None,
        }
    }

    /// The encoding's name, for the log.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tokenizer::O200k => "o200k_base",
            Tokenizer::Cl100k => "cl100k_base",
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        match self {
            Tokenizer::O200k => tiktoken_rs::o200k_base_singleton(),
            Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
        }
    }

    /// The tokens of `messages` as sent, framing included.
    pub(crate) fn messages(self, messages: &[MessageText]) -> u64 {
        messages.iter().map(|m| self.message(m)).sum()
    }

    /// The tokens of one message as sent, framing included (cached).
    pub(crate) fn message(self, message: &MessageText) -> u64 {
        self.cached(message.as_str(), || self.count_message(message.as_str()))
    }

    /// The tokens of the tool definitions, `json` being their JSON text as sent (cached).
    pub(crate) fn tools(self, json: &str) -> u64 {
        if json.is_empty() || json == "[]" {
            return 0;
        }
        self.cached(json, || self.encode_len(json))
    }

    /// The tokens of what a request carries besides its messages: the system message (cached),
    /// the tool definitions' `tools` tokens and the answer's priming.
    pub(crate) fn fixed(self, system: Option<&str>, tools: u64) -> u64 {
        let system = system.map_or(0, |text| {
            PER_MESSAGE + 1 + self.cached(text, || self.encode_len(text))
        });
        system + tools + REPLY_PRIMING
    }

    /// The count of `text` from the cache, else `count`'s, then kept.
    fn cached(self, text: &str, count: impl FnOnce() -> u64) -> u64 {
        static CACHE: OnceLock<Mutex<HashMap<u64, u32>>> = OnceLock::new();
        let mut hasher = DefaultHasher::new();
        (self, text).hash(&mut hasher);
        let key = hasher.finish();
        let cache = CACHE.get_or_init(Mutex::default);
        if let Some(&n) = lock(cache).get(&key) {
            return u64::from(n);
        }
        let n = count();
        let mut kept = lock(cache);
        if kept.len() >= CACHE_ENTRIES {
            kept.clear();
        }
        kept.insert(key, u32::try_from(n).unwrap_or(u32::MAX));
        n
    }

    /// One message's tokens: its framing and the text of each field the model reads.
    fn count_message(self, json: &str) -> u64 {
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(json) else {
            return PER_MESSAGE + self.encode_len(json);
        };
        let mut tokens = PER_MESSAGE;
        for (key, value) in &message {
            tokens += match (key.as_str(), value) {
                ("tool_calls", Value::Array(calls)) => calls.iter().map(|c| self.call(c)).sum(),
                ("content", Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .map(|t| self.encode_len(t))
                    .sum(),
                ("name", Value::String(text)) => PER_NAME + self.encode_len(text),
                (_, Value::String(text)) => self.encode_len(text),
                _ => 0,
            };
        }
        tokens
    }

    /// One tool call's tokens: its id, the function's name and its arguments.
    fn call(self, call: &Value) -> u64 {
        let text = |v: &Value| v.as_str().map_or(0, |t| self.encode_len(t));
        PER_CALL
            + text(&call["id"])
            + text(&call["function"]["name"])
            + text(&call["function"]["arguments"])
    }

    /// The tokens of `text`, encoded in pieces of at most [`PIECE`] bytes.
    fn encode_len(self, mut text: &str) -> u64 {
        let bpe = self.bpe();
        let mut tokens = 0;
        while !text.is_empty() {
            let piece = next_piece(text);
            tokens += bpe.encode_ordinary(&text[..piece]).len() as u64;
            text = &text[piece..];
        }
        tokens
    }
}

/// The length of the next piece of `text`: all of it when short, else up to the last
/// whitespace in its first [`PIECE`] bytes (kept for the next piece, where it belongs to the
/// word after it), else [`PIECE`] bytes at a character boundary.
fn next_piece(text: &str) -> usize {
    if text.len() <= PIECE {
        return text.len();
    }
    let end = text.floor_char_boundary(PIECE);
    match text[..end].rfind(char::is_whitespace) {
        Some(at) if at > 0 => at,
        _ => end.max(text.ceil_char_boundary(1)),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn openai_models_get_their_tokenizer_and_others_none() {
        for (model, want) in [
            ("gpt-4o", Some(Tokenizer::O200k)),
            ("gpt-4o-mini", Some(Tokenizer::O200k)),
            ("gpt-4.1-nano", Some(Tokenizer::O200k)),
            ("gpt-5", Some(Tokenizer::O200k)),
            ("o3-mini", Some(Tokenizer::O200k)),
            ("openai/gpt-4o", Some(Tokenizer::O200k)),
            ("gpt-4", Some(Tokenizer::Cl100k)),
            ("gpt-3.5-turbo", Some(Tokenizer::Cl100k)),
            ("llama3.1:8b", None),
            ("claude-sonnet-4-5", None),
            ("scripted-model", None),
        ] {
            assert_eq!(Tokenizer::for_model(model), want, "{model}");
        }
    }

    #[test]
    fn a_message_is_counted_as_openai_documents_it() {
        let t = Tokenizer::O200k;
        // "hello world" is two tokens, "user" one, and 3 of framing.
        let m = MessageText::new(&json!({"role": "user", "content": "hello world"}));
        assert_eq!(t.message(&m), 3 + 1 + 2);
        assert_eq!(t.message(&m), 6, "the cached count");
        let call = MessageText::new(&json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "read", "arguments": "{}"}}]}));
        // 3 + "assistant", then the call: 3 + "c1" + "read" + "{}".
        let n = t.message(&call);
        assert!((10..=16).contains(&n), "{n}");
    }

    #[test]
    fn long_text_is_counted_in_pieces_close_to_whole() {
        let t = Tokenizer::Cl100k;
        let prose = "The kettle boils water for tea in the morning. ".repeat(200);
        let whole = t.bpe().encode_ordinary(&prose).len() as u64;
        let pieces = t.encode_len(&prose);
        assert!(
            pieces >= whole && pieces <= whole + whole / 50,
            "{pieces} vs {whole}"
        );
        // A line with no space at all is cut in pieces too, and counted.
        let base64 = "QUJD".repeat(50_000);
        assert!(t.encode_len(&base64) > 10_000);
    }
}
