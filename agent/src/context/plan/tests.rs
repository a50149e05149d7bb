use serde_json::json;

use super::*;
use crate::context::WindowSource;

fn text(v: Value) -> MessageText {
    MessageText::new(&v)
}

/// `turns` exchanges of a user message, a call, its large result and an answer.
fn history(turns: usize, result_bytes: usize) -> Arc<Vec<MessageText>> {
    let mut h = Vec::new();
    for n in 0..turns {
        h.push(text(json!({"role": "user", "content": format!("q{n}")})));
        h.push(text(
            json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{n}"), "type": "function",
             "function": {"name": "get_text_content", "arguments": "{\"path\":\"n.txt\"}"}}]}),
        ));
        h.push(text(json!({"role": "tool", "tool_call_id": format!("c{n}"), "content": "x".repeat(result_bytes)})));
        h.push(text(
            json!({"role": "assistant", "content": format!("a{n}")}),
        ));
    }
    Arc::new(h)
}

fn input<'a>(history: &'a Arc<Vec<MessageText>>, summary: Option<&'a Compaction>) -> Input<'a> {
    Input {
        history,
        system: None,
        tools_bytes: 1_000,
        tools_tokens: 0,
        summary,
        run_start: history.len().saturating_sub(4),
        offset: 0,
        window: Window {
            tokens: 8_192,
            source: WindowSource::Rojo,
        },
        percent: 80,
        measure: Measure::default(),
        may_compact: true,
    }
}

#[test]
fn a_history_that_fits_is_sent_as_it_is_shared() {
    let h = history(2, 1_000);
    let Plan::Send(p) = plan(&input(&h, None)) else {
        panic!("fits")
    };
    assert!(!p.shortened);
    assert!(Arc::ptr_eq(&p.messages, &h));
}

#[test]
fn older_results_are_stubbed_before_anything_is_summarised() {
    let h = history(5, 4_000);
    let Plan::Send(p) = plan(&input(&h, None)) else {
        panic!("stubs fit")
    };
    assert!(p.shortened);
    assert_eq!(p.messages.len(), h.len());
    assert!(p.messages[2]
        .as_str()
        .contains("left out this result (4000 bytes, from get_text_content"));
    assert_eq!(
        p.messages[19], h[19],
        "the newest answer is kept word for word"
    );
}

#[test]
fn too_many_turns_are_compacted_before_a_user_message_and_the_summary_reused() {
    let h = history(60, 3_000);
    let Plan::Compact { upto } = plan(&input(&h, None)) else {
        panic!("compacts")
    };
    assert_eq!(h[upto].role(), "user");
    let summary = Compaction {
        covers: upto as u64,
        summary: "S".into(),
    };
    let mut i = input(&h, Some(&summary));
    i.may_compact = false;
    let Plan::Send(p) = plan(&i) else {
        panic!("fits after")
    };
    assert_eq!(p.messages.len(), h.len() - upto);
    assert!(p.system.unwrap().contains("S"));
}

#[test]
fn a_single_result_too_large_is_cut_with_a_marker_and_nothing_fitting_is_an_error() {
    // The run's own turn: its result is the newest, not stubbed but cut.
    let mut whole = history(1, 60_000).to_vec();
    whole.pop();
    let h = Arc::new(whole);
    let Plan::Send(p) = plan(&input(&h, None)) else {
        panic!("cut to fit")
    };
    assert!(p.messages[2].as_str().contains("Rojos cut this"));
    assert_eq!(p.messages[0], h[0], "the user's message is kept");
    let mut i = input(&h, None);
    i.tools_bytes = 100_000;
    assert!(matches!(plan(&i), Plan::TooBig { .. }));
}

#[test]
fn an_openai_model_is_measured_by_its_tokenizer_not_the_estimate() {
    // About 18 KB of English: over the threshold at the estimate's three bytes a token,
    // well under it as o200k_base counts it (nearer five).
    let prose = "The kettle boils water for tea in the morning. ".repeat(47);
    let mut h = Vec::new();
    for n in 0..4 {
        h.push(text(
            json!({"role": "user", "content": format!("{n} {prose}")}),
        ));
        h.push(text(
            json!({"role": "assistant", "content": format!("{n} {prose}")}),
        ));
    }
    let h = Arc::new(h);
    let mut estimated = input(&h, None);
    estimated.run_start = h.len() - 2;
    estimated.tools_bytes = 0;
    assert!(
        !matches!(plan(&estimated), Plan::Send(ref p) if !p.shortened),
        "the estimate cannot send it whole"
    );
    let counted = Input {
        measure: Measure::for_model("gpt-4o"),
        ..estimated
    };
    let Plan::Send(p) = plan(&counted) else {
        panic!("the tokenizer's count fits")
    };
    assert!(!p.shortened);
}

#[test]
fn a_result_whose_text_is_mostly_escapes_is_still_cut_to_fit() {
    // Every `"` takes two bytes in the request: a cut measured on the text alone would
    // leave it over the window.
    let mut whole = history(1, 0).to_vec();
    whole.pop();
    whole[2] = text(json!({"role": "tool", "tool_call_id": "c0", "content": "\"".repeat(9_000)}));
    let h = Arc::new(whole);
    let mut i = input(&h, None);
    i.window.tokens = 4_096;
    let Plan::Send(p) = plan(&i) else {
        panic!("cut to fit")
    };
    assert!(p.messages[2].as_str().contains("Rojos cut this"));
}

#[test]
fn a_message_that_cannot_be_cut_leaves_the_others_to_be_cut() {
    // The largest message has no text to cut (its content is a list of parts): the next
    // largest is cut instead.
    let mut whole = history(1, 4_800).to_vec();
    whole.pop();
    let parts = json!([{"type": "text", "text": "p".repeat(5_000)}]);
    whole[0] = text(json!({"role": "user", "content": parts}));
    let h = Arc::new(whole);
    let mut i = input(&h, None);
    i.window.tokens = 4_096;
    let Plan::Send(p) = plan(&i) else {
        panic!("cut to fit")
    };
    assert_eq!(p.messages[0], h[0], "the user's message is kept");
    assert!(p.messages[2].as_str().contains("Rojos cut this"));
}
