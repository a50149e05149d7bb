//! Stale-write protection through the real host and the built-in plugins (docs/tools.md,
//! "Stale writes"): the model reads a file with its version, the user edits it by hand, and
//! the model's write naming the old version is refused with a message telling it to read
//! again, leaving the user's text on disk; the model reads again and its write with the
//! fresh version goes through.

use rojos_fs_guard::ContentVersion;
use serde_json::{json, Value};

use crate::support::{
    builtins_host_with as host_with, demo_message as message, ndjson::Stream, upstream::Turn,
};

const ORIGINAL: &str = "# Notes\n\n- first point\n";
const BY_HAND: &str = "# Notes\n\n- first point\n- a point the user added by hand\n";

fn read_with_version(id: &str) -> Turn {
    Turn::tool_calls(&[(
        id,
        "get_text_content",
        json!({"path": "notes.md", "with_version": true}),
    )])
}

fn write_expecting(id: &str, text: &str, version: &str) -> Turn {
    Turn::tool_calls(&[(
        id,
        "write_text_content",
        json!({"path": "notes.md", "text": text, "expected_version": version}),
    )])
}

#[tokio::test]
async fn a_write_from_a_stale_read_is_refused_and_one_from_a_fresh_read_goes_through() {
    let (host, upstream) =
        host_with(vec![read_with_version("call_read"), Turn::text("Read.")]).await;
    let notes = host.project_root("demo").join("notes.md");
    std::fs::create_dir_all(notes.parent().unwrap()).unwrap();
    std::fs::write(&notes, ORIGINAL).unwrap();

    // The read gives the text with the version of its bytes.
    let stream = Stream::read(host.chat(message("read my notes")).await).await;
    let (name, ok, result) = &stream.results()[0];
    assert_eq!((name.as_str(), *ok), ("get_text_content", true), "{result}");
    let read: Value = serde_json::from_str(result).unwrap();
    assert_eq!(read["text"], ORIGINAL);
    let first = ContentVersion::of(ORIGINAL.as_bytes()).to_string();
    assert_eq!(read["version"], first.as_str());
    let conversation = stream.done().0;

    // The user edits the file by hand; the model writes from its old read, then reads again
    // and writes from the fresh one.
    std::fs::write(&notes, BY_HAND).unwrap();
    let fresh = ContentVersion::of(BY_HAND.as_bytes()).to_string();
    let model_text = format!("{BY_HAND}- the model's point\n");
    upstream.push([
        write_expecting("call_stale", "# Notes\n\n- the model's rewrite\n", &first),
        read_with_version("call_reread"),
        write_expecting("call_fresh", &model_text, &fresh),
        Turn::text("Added my point after yours."),
    ]);
    let body =
        json!({"projectId": "demo", "conversationId": conversation, "message": "add a point"});
    let stream = Stream::read(host.chat(body).await).await;
    let results = stream.results();
    assert_eq!(results.len(), 3, "{results:?}");

    let (_, ok, refusal) = &results[0];
    assert!(!ok, "the stale write was accepted: {refusal}");
    assert_eq!(
        refusal,
        &format!(
            "error: 'notes.md' was not written: it changed since you read it (expected version \
             {first}, it is now {fresh}); read it again with get_text_content (with_version: true) \
             and make your change to the current text"
        )
    );
    // The model is given that message as the call's result.
    let requests = upstream.received();
    let tool_message = requests
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["tool_call_id"] == "call_stale")
        .expect("the refused call's tool message went upstream");
    assert_eq!(tool_message["content"], refusal.as_str());

    let (_, ok, reread) = &results[1];
    assert!(ok, "{reread}");
    assert_eq!(
        serde_json::from_str::<Value>(reread).unwrap()["version"],
        fresh.as_str()
    );

    let (_, ok, written) = &results[2];
    assert!(ok, "the fresh write was refused: {written}");
    let written: Value = serde_json::from_str(written).unwrap();
    let after = ContentVersion::of(model_text.as_bytes()).to_string();
    assert_eq!(written, json!({"ok": true, "version": after}));
    // The user's line survived: the model's final text builds on it.
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), model_text);
}

#[tokio::test]
async fn a_write_expecting_a_file_that_was_deleted_creates_nothing() {
    let version = ContentVersion::of(ORIGINAL.as_bytes()).to_string();
    let (host, _upstream) = host_with(vec![
        write_expecting("call_gone", "text", &version),
        Turn::text("It is gone."),
    ])
    .await;
    let stream = Stream::read(host.chat(message("rewrite my notes")).await).await;
    let (_, ok, result) = &stream.results()[0];
    assert!(!ok, "{result}");
    assert!(
        result.contains("'notes.md' was not written: it no longer exists"),
        "{result}"
    );
    assert!(!host.project_root("demo").join("notes.md").exists());
}
