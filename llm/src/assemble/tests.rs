//! Tool-call assembly and finish semantics, one provider quirk per test (synthetic chunks;
//! the real recorded streams are in `tests/llm/fixtures.rs`).

use serde_json::{json, Value};

use super::*;

fn run(chunks: &[Value]) -> Result<(Vec<String>, Turn), ErrorInfo> {
    run_capped(chunks, 1 << 20)
}

fn run_capped(chunks: &[Value], cap: usize) -> Result<(Vec<String>, Turn), ErrorInfo> {
    let mut a = Assembler::new(cap, 1 << 30);
    let mut deltas = Vec::new();
    for c in chunks {
        let chunk: Chunk = serde_json::from_value(c.clone()).expect("test chunk");
        match a.push(chunk) {
            Ok(Some(text)) => deltas.push(text),
            Ok(None) => {}
            Err(PushError::Provider(info)) => return Err(info),
            Err(PushError::TurnTooLarge) => panic!("no turn limit in these tests"),
        }
    }
    Ok((deltas, a.finish()))
}

/// Pushes `chunks` under a turn limit; returns the text handed out and whether the limit hit.
fn run_turn_limited(chunks: &[Value], max_turn_bytes: usize) -> (String, bool) {
    let mut a = Assembler::new(1 << 20, max_turn_bytes);
    let mut handed_out = String::new();
    for c in chunks {
        match a.push(serde_json::from_value(c.clone()).expect("test chunk")) {
            Ok(text) => handed_out.push_str(&text.unwrap_or_default()),
            Err(PushError::TurnTooLarge) => return (handed_out, true),
            Err(PushError::Provider(info)) => panic!("{info:?}"),
        }
    }
    (handed_out, false)
}

fn delta(d: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": d, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn call(index: Option<u64>, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut c = json!({"function": {"arguments": args}});
    if let Some(i) = index {
        c["index"] = json!(i);
    }
    if let Some(id) = id {
        c["id"] = json!(id);
    }
    if let Some(n) = name {
        c["function"]["name"] = json!(n);
    }
    delta(json!({"tool_calls": [c]}))
}

fn is_minted(id: &str) -> bool {
    id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric())
}

fn args(turn: &Turn, i: usize) -> Value {
    Value::Object(
        turn.tool_calls[i]
            .arguments
            .clone()
            .expect("valid arguments"),
    )
}

#[test]
fn ollama_reusing_index_zero_for_parallel_calls_gives_two_calls() {
    let (_, t) = run(&[
        call(
            Some(0),
            Some("call_a"),
            Some("create_directory"),
            "{\"path\":\"a\"}",
        ),
        call(
            Some(0),
            Some("call_b"),
            Some("create_directory"),
            "{\"path\":\"b\"}",
        ),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(t.tool_calls.len(), 2);
    assert_eq!(args(&t, 0), json!({"path": "a"}));
    assert_eq!(args(&t, 1), json!({"path": "b"}));
    assert_eq!(t.tool_calls[1].id, "call_b");
}

#[test]
fn lm_studio_empty_name_on_continuations_keeps_the_name() {
    let (_, t) = run(&[
        call(Some(0), Some("193629320"), Some("list_files"), ""),
        call(Some(0), None, Some(""), "{\"path\":"),
        call(Some(0), None, Some(""), "\"x\"}"),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(t.tool_calls.len(), 1);
    assert_eq!(t.tool_calls[0].name, "list_files");
    assert_eq!(args(&t, 0), json!({"path": "x"}));
}

#[test]
fn proxy_repeating_id_and_name_on_every_delta_is_one_call() {
    let (_, t) = run(&[
        call(Some(0), Some("call_1"), Some("list_files"), "{\"pa"),
        call(Some(0), Some("call_1"), Some("list_files"), "th\":\"x\"}"),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(t.tool_calls.len(), 1);
    assert_eq!(t.tool_calls[0].name, "list_files");
    assert_eq!(t.tool_calls[0].id, "call_1");
    assert_eq!(args(&t, 0), json!({"path": "x"}));
}

#[test]
fn proxy_repeating_id_and_name_without_index_is_one_call() {
    let (_, t) = run(&[
        call(None, Some("call_1"), Some("list_files"), "{\"pa"),
        call(None, Some("call_1"), Some("list_files"), "th\":\"x\"}"),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(t.tool_calls.len(), 1);
    assert_eq!(args(&t, 0), json!({"path": "x"}));
}

#[test]
fn anthropic_first_call_at_index_one_is_kept_in_order() {
    let (_, t) = run(&[
        delta(json!({"content": "Let me look."})),
        call(Some(1), Some("toolu_1"), Some("list_files"), ""),
        call(Some(1), None, None, "{\"path\":\".\"}"),
        call(
            Some(2),
            Some("toolu_2"),
            Some("read_path_meta"),
            "{\"path\":\"a\"}",
        ),
        finish("tool_calls"),
    ])
    .unwrap();
    let names: Vec<_> = t.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["list_files", "read_path_meta"]);
    assert_eq!(args(&t, 0), json!({"path": "."}));
    assert_eq!(t.text, "Let me look.");
}

#[test]
fn gemini_whole_calls_without_index_in_one_chunk_are_separate() {
    let chunk = json!({"choices": [{"delta": {"tool_calls": [
        {"id": "", "function": {"name": "create_directory", "arguments": "{\"path\":\"a\"}"}},
        {"function": {"name": "create_directory", "arguments": "{\"path\":\"b\"}"}}
    ]}, "finish_reason": "stop"}]});
    let (_, t) = run(&[chunk]).unwrap();
    assert_eq!(t.tool_calls.len(), 2);
    assert!(t.tool_calls.iter().all(|c| is_minted(&c.id)));
    assert_ne!(t.tool_calls[0].id, t.tool_calls[1].id);
    assert_eq!(t.finish_reason, FinishReason::ToolCalls);
    assert_eq!(t.finish_reason_raw.as_deref(), Some("stop"));
}

#[test]
fn index_less_call_with_arguments_over_several_chunks_is_one_call() {
    // Mistral/Gemini-style entries without `index`, the arguments split: continuations
    // carry neither id nor name, or repeat the id alone.
    let bare = [
        call(None, Some("Xb7kP2mQa"), Some("create_directory"), "{\"pa"),
        call(None, None, None, "th\": \"docs"),
        call(None, None, None, "/intro\"}"),
        finish("tool_calls"),
    ];
    let with_id = [
        call(None, Some("Xb7kP2mQa"), Some("create_directory"), "{\"pa"),
        call(None, Some("Xb7kP2mQa"), None, "th\": \"docs"),
        call(None, Some("Xb7kP2mQa"), None, "/intro\"}"),
        finish("tool_calls"),
    ];
    for chunks in [&bare, &with_id] {
        let (_, t) = run(chunks).unwrap();
        assert_eq!(t.tool_calls.len(), 1, "{:?}", t.tool_calls);
        assert_eq!(t.tool_calls[0].id, "Xb7kP2mQa");
        assert_eq!(t.tool_calls[0].name, "create_directory");
        assert_eq!(args(&t, 0), json!({"path": "docs/intro"}));
    }
}

#[test]
fn duplicate_ids_get_a_fresh_one() {
    let (_, t) = run(&[
        call(Some(0), Some("same"), Some("a"), "{}"),
        call(Some(1), Some("same"), Some("b"), "{}"),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(t.tool_calls[0].id, "same");
    assert!(is_minted(&t.tool_calls[1].id), "{}", t.tool_calls[1].id);
}

#[test]
fn empty_arguments_are_an_empty_object() {
    let (_, t) = run(&[
        call(Some(0), Some("c"), Some("list_files"), ""),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(args(&t, 0), json!({}));
}

#[test]
fn invalid_json_arguments_keep_the_call_with_a_reason() {
    let (_, t) = run(&[
        call(
            Some(0),
            Some("c"),
            Some("write_text_content"),
            "{\"path\": \"a\", ",
        ),
        call(Some(1), Some("d"), Some("list_files"), "[1]"),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(t.tool_calls.len(), 2);
    let why = t.tool_calls[0].arguments.clone().unwrap_err();
    assert!(
        why.starts_with("the arguments are not valid JSON ("),
        "{why}"
    );
    assert_eq!(t.tool_calls[0].raw_arguments, "{\"path\": \"a\", ");
    assert_eq!(
        t.tool_calls[1].arguments,
        Err("the arguments must be a JSON object, not an array".into())
    );
    assert_eq!(t.finish_reason, FinishReason::ToolCalls);
}

#[test]
fn double_encoded_arguments_are_unwrapped() {
    let (_, t) = run(&[
        call(Some(0), Some("c"), Some("a"), "\"{\\\"k\\\":1}\""),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(args(&t, 0), json!({"k": 1}));
}

#[test]
fn arguments_over_the_cap_are_an_error_for_that_call_only() {
    let (_, t) = run_capped(
        &[
            call(
                Some(0),
                Some("big"),
                Some("write_text_content"),
                "{\"text\":\"0123456789",
            ),
            call(Some(0), None, None, "0123456789\"}"),
            call(Some(1), Some("small"), Some("list_files"), "{}"),
            finish("tool_calls"),
        ],
        16,
    )
    .unwrap();
    assert_eq!(
        t.tool_calls[0].arguments,
        Err("the arguments of this call are longer than 16 bytes, so the tool was not run".into())
    );
    assert_eq!(t.tool_calls[0].raw_arguments.len(), 16);
    assert_eq!(args(&t, 1), json!({}));
}

#[test]
fn already_parsed_arguments_are_accepted() {
    let chunk = json!({"choices": [{"delta": {"tool_calls": [
        {"index": 0, "id": "c", "function": {"name": "a", "arguments": {"k": [1, 2]}}}
    ]}, "finish_reason": "tool_calls"}]});
    let (_, t) = run(&[chunk]).unwrap();
    assert_eq!(args(&t, 0), json!({"k": [1, 2]}));
}

#[test]
fn nameless_calls_are_dropped() {
    let (_, t) = run(&[call(Some(0), Some("c"), None, "{}"), finish("stop")]).unwrap();
    assert!(t.tool_calls.is_empty());
    assert_eq!(t.finish_reason, FinishReason::Stop);
}

#[test]
fn empty_finish_reason_is_absent_and_null_never_clears_it() {
    let mut a = Assembler::new(100, 1 << 20);
    let push = |a: &mut Assembler, v: Value| a.push(serde_json::from_value(v).unwrap()).unwrap();
    push(
        &mut a,
        json!({"choices": [{"delta": {"content": "x"}, "finish_reason": ""}]}),
    );
    assert!(!a.has_finish_reason());
    push(&mut a, finish("stop"));
    push(
        &mut a,
        json!({"choices": [{"delta": {}, "finish_reason": null}], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}),
    );
    assert!(a.has_finish_reason());
    let t = a.finish();
    assert_eq!(t.finish_reason, FinishReason::Stop);
    assert_eq!(
        t.usage,
        Some(Usage {
            prompt_tokens: 1,
            completion_tokens: 2,
            total_tokens: 3
        })
    );
}

#[test]
fn reasoning_is_never_text_but_text_parts_are() {
    let (deltas, t) = run(&[
        delta(json!({"reasoning_content": "hmm", "reasoning": "hmm", "content": null})),
        delta(
            json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "no"}]},
                                 {"type": "text", "text": "Hel"}]}),
        ),
        delta(json!({"content": "lo", "refusal": null})),
        finish("stop"),
    ])
    .unwrap();
    assert_eq!(deltas, ["Hel", "lo"]);
    assert_eq!(t.text, "Hello");
}

#[test]
fn finish_reason_error_is_a_provider_error() {
    let err = run(&[
        delta(json!({"content": "par"})),
        json!({"choices": [{"delta": {}, "finish_reason": "error", "error": {"message": "upstream overloaded", "code": 502}}]}),
    ])
    .unwrap_err();
    assert_eq!(err.message, "upstream overloaded");
    assert_eq!(err.code.as_deref(), Some("502"));
    let err = run(&[finish("error")]).unwrap_err();
    assert_eq!(err.message, "the turn ended with finish_reason \"error\"");
}

#[test]
fn error_chunks_in_every_shape_are_provider_errors() {
    for shape in [
        json!({"error": {"message": "Overloaded", "type": "overloaded_error"}}),
        json!({"object": "error", "message": "Overloaded", "type": "BadRequestError", "code": 400}),
    ] {
        let err = run(&[delta(json!({"content": "x"})), shape.clone()]).unwrap_err();
        assert_eq!(err.message, "Overloaded", "{shape}");
    }
}

#[test]
fn extra_choices_beyond_the_first_are_ignored() {
    let chunk = json!({"choices": [
        {"index": 0, "delta": {"content": "a"}},
        {"index": 1, "delta": {"content": "b"}}
    ]});
    let (_, t) = run(&[chunk, finish("stop")]).unwrap();
    assert_eq!(t.text, "a");
}

#[test]
fn text_past_the_turn_limit_ends_the_turn_and_is_not_handed_out() {
    let chunks: Vec<Value> = (0..10)
        .map(|_| delta(json!({"content": "0123456789"})))
        .collect();
    assert_eq!(
        run_turn_limited(&chunks, 100),
        ("0123456789".repeat(10), false)
    );
    let (text, hit) = run_turn_limited(&chunks, 95);
    assert!(hit);
    assert_eq!(
        text,
        "0123456789".repeat(9),
        "only text within the limit went out"
    );
}

#[test]
fn tool_calls_count_toward_the_turn_limit() {
    // Ten calls, each far below the per-call argument cap, together past the turn limit.
    let args = format!("{{\"text\":\"{}\"}}", "a".repeat(200));
    let calls: Vec<Value> = (0..10)
        .map(|i| call(Some(i), Some(&format!("c{i}")), Some("write"), &args))
        .collect();
    let (_, hit) = run_turn_limited(&calls, 10 * args.len());
    assert!(
        hit,
        "arguments, ids, names and per-call overhead are counted"
    );
    let (_, hit) = run_turn_limited(&calls, 10 * (args.len() + 2 + 5 + CALL_OVERHEAD_BYTES));
    assert!(!hit);
    // Calls with nothing in them still count their overhead.
    let empty: Vec<Value> = (0..1000)
        .map(|i| json!({"choices": [{"delta": {"tool_calls": [{"index": i}]}}]}))
        .collect();
    assert!(run_turn_limited(&empty, 64 * 1024).1);
}

#[test]
fn the_turn_limit_counts_text_ids_names_arguments_and_extra_content_exactly() {
    let extra = json!({"google": {"thought_signature": "sig"}});
    let chunk = json!({"choices": [{"index": 0, "delta": {
        "content": "hello",
        "tool_calls": [{"index": 0, "id": "call_1", "extra_content": extra,
            "function": {"name": "list_files", "arguments": "{\"path\":\".\"}"}}]
    }}]});
    let size = "hello".len()
        + CALL_OVERHEAD_BYTES
        + "call_1".len()
        + "list_files".len()
        + "{\"path\":\".\"}".len()
        + extra.to_string().len();
    assert!(!run_turn_limited(std::slice::from_ref(&chunk), size).1);
    assert!(run_turn_limited(&[chunk], size - 1).1);
}

#[test]
fn usage_with_only_completion_tokens_is_kept() {
    let (_, turn) = run(&[
        json!({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}),
        json!({"choices": [], "usage": {"completion_tokens": 7}}),
    ])
    .unwrap();
    let usage = turn.usage.expect("usage kept");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (0, 7));
    assert_eq!(usage.total_tokens, 7);
}

#[test]
fn an_empty_answer_says_what_came_for_each_ending() {
    let push = |chunks: &[Value]| {
        let mut a = Assembler::new(1 << 20, 1 << 30);
        for c in chunks {
            a.push(serde_json::from_value(c.clone()).expect("test chunk"))
                .expect("no error");
        }
        a
    };
    let no_choices = push(&[json!({"choices": []})]);
    assert_eq!(
        no_choices.received(Ending::Json),
        "a JSON answer with no choices"
    );
    let role_only = push(&[json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})]);
    assert_eq!(
        role_only.received(Ending::Json),
        "a JSON answer with no text or tool call"
    );
    assert_eq!(
        role_only.received(Ending::Done),
        "1 chunk with no text or tool call, then [DONE]"
    );
    // A second choice (ignored: one is asked for) is neither text nor a missing choice.
    let other_choice = push(&[json!({"choices": [
        {"index": 0, "delta": {}},
        {"index": 1, "delta": {"content": "ignored"}}
    ]})]);
    assert_eq!(
        other_choice.received(Ending::Eof),
        "1 chunk with no text or tool call, then the end of the stream"
    );
}

#[test]
fn a_call_fragment_with_no_name_is_nothing_usable() {
    let mut a = Assembler::new(1 << 20, 1 << 30);
    let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0}]}}]});
    a.push(serde_json::from_value(chunk).expect("test chunk"))
        .expect("no error");
    match a.finish_checked(Ending::Done) {
        Err(NoOutput::Empty { received }) => {
            assert_eq!(received, "1 chunk with nothing usable, then [DONE]");
        }
        other => panic!("expected an empty turn: {other:?}"),
    }
}

#[test]
fn a_new_id_with_a_name_on_a_reused_index_starts_a_call_even_before_its_arguments() {
    // Ollama-style parallel calls on `index: 0`, the second call's arguments in a later
    // fragment: the new id alone must open the new call.
    let (_, t) = run(&[
        call(
            Some(0),
            Some("call_a"),
            Some("create_directory"),
            "{\"path\":\"a\"}",
        ),
        call(Some(0), Some("call_b"), Some("create_directory"), ""),
        call(Some(0), None, None, "{\"path\":\"b\"}"),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(t.tool_calls.len(), 2, "{:?}", t.tool_calls);
    assert_eq!(args(&t, 0), json!({"path": "a"}));
    assert_eq!(args(&t, 1), json!({"path": "b"}));
}

#[test]
fn an_index_less_named_fragment_without_id_starts_a_call_even_before_its_arguments() {
    let (_, t) = run(&[
        call(None, None, Some("create_directory"), "{\"path\":\"a\"}"),
        call(None, None, Some("list_files"), ""),
        call(None, None, None, "{\"path\":\"b\"}"),
        finish("tool_calls"),
    ])
    .unwrap();
    let names: Vec<_> = t.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["create_directory", "list_files"]);
    assert_eq!(args(&t, 1), json!({"path": "b"}));
}

#[test]
fn a_proxy_repeating_id_and_name_on_every_delta_gives_one_call() {
    let (_, t) = run(&[
        call(Some(0), Some("call_1"), Some("create_directory"), "{\"pa"),
        call(
            Some(0),
            Some("call_1"),
            Some("create_directory"),
            "th\":\"a\"}",
        ),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(t.tool_calls.len(), 1, "{:?}", t.tool_calls);
    assert_eq!(args(&t, 0), json!({"path": "a"}));
}

#[test]
fn arguments_past_the_cap_are_cut_at_a_character_boundary_and_nothing_is_added_after() {
    // "ab€": the cap of 4 falls inside the 3-byte `€`, so 2 bytes are kept; a later
    // fragment that would fit in the room left is not appended to a cut call.
    let (_, t) = run_capped(
        &[
            call(Some(0), Some("call_1"), Some("write_text_content"), "ab€"),
            call(Some(0), None, None, "cd"),
            finish("tool_calls"),
        ],
        4,
    )
    .unwrap();
    assert_eq!(t.tool_calls[0].raw_arguments, "ab");
    assert!(t.tool_calls[0].arguments.is_err());
}
