//! An undo is part of the conversation: it leaves a record in the history (which run's file
//! changes were taken back, which paths are as they were before it) that the model reads on
//! its next turn (docs/api.md, "Undo of file changes").

use serde_json::{json, Value};

use crate::support::upstream::Turn;
use crate::undo::{host_with, run, undo};

#[tokio::test]
async fn the_next_model_turn_reads_which_changes_an_undo_took_back() {
    let delete = Turn::tool_calls(&[("d1", "delete_path", json!({"path": "notes/old-draft.md"}))]);
    let (host, upstream) = host_with(
        vec![
            delete,
            Turn::text("Deleted it."),
            Turn::text("It is there."),
        ],
        "",
    )
    .await;
    let notes = host.project_root("demo").join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("old-draft.md"), "draft").unwrap();

    let (conversation, results) = run(&host, None, "delete the old draft").await;
    assert!(results[0].1, "{results:?}");
    assert!(!notes.join("old-draft.md").exists());
    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["recorded"], true);
    assert_eq!(
        std::fs::read_to_string(notes.join("old-draft.md")).unwrap(),
        "draft"
    );

    run(&host, Some(&conversation), "is the draft there?").await;
    let asked = upstream.received()[2].body["messages"].clone();
    let messages: Vec<&Value> = asked
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .collect();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "user"
        ],
        "the record and its answer come between the undone run and the new message: {asked}"
    );
    let record = messages[4]["content"].as_str().unwrap();
    assert!(record.contains("undid the file changes"), "{record}");
    assert!(record.contains("\"delete the old draft\""), "{record}");
    assert!(record.contains("`notes/old-draft.md`"), "{record}");
    assert!(messages[4].get("rojos").is_none(), "notes are never sent");
    assert_eq!(messages[6]["content"], "is the draft there?");

    // Stored with its note, for the panel to mark the undone turn.
    let stored = host.stored_messages(&conversation).await;
    assert_eq!(
        stored[4]["rojos"]["undo"]["paths"],
        json!(["notes/old-draft.md"])
    );
    assert_eq!(stored[4]["rojos"]["undo"]["message"], 0);
    assert_eq!(stored[5]["rojos"]["noAnswer"], true);
}
