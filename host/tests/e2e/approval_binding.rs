//! What an approval is bound to (`docs/api.md`, "Approvals"; `docs/security.md`): a
//! decision approves exactly the one call the user was shown, named by the server's
//! `approvalId` (a call id the model reused in a later turn names no call, and a decision
//! sent again changes nothing); a call id of any length can be decided; under
//! `approve = "destructive"` a write that replaces an existing file is asked about (one that
//! creates a file is not), as is any call of a tool its manifest marks destructive; and a call refused anyway (arguments that do not fit the tool's
//! schema) is never asked about. The same attack through two hosts on one PostgreSQL
//! database is in `hosts.rs`.

use std::path::Path;

use serde_json::{json, Value};

use crate::{
    approvals::{decide_at, OpenChat},
    support::{
        host::{HostConfig, TestHost, TOKEN},
        ndjson::{Event, Stream},
        plugin_lib,
        upstream::{ScriptedUpstream, Turn},
    },
};

/// The built-in tools, `delete_path` among them, and `toml`.
pub(crate) fn with_delete(upstream: &ScriptedUpstream, toml: &str) -> HostConfig {
    let mut config = HostConfig::builtins().upstream(upstream).with(toml);
    config.load.push(plugin_lib("rojos_tool_delete_path"));
    config
}

/// A rojo that asks before writes and deletes.
pub(crate) const WRITES_AND_DELETES_ASKED: &str = "[rojos.default]\nprovider = \"scripted\"\n\
     tools = \"*\"\napprove = [\"write_text_content\", \"delete_path\"]\n";

/// The model's turns of [`reused_call_id_attack`]: turn 1 writes `tmp.txt` with call id
/// `dup`, turn 3 deletes `precious.txt` with the same id.
pub(crate) fn reused_call_id_turns() -> Vec<Turn> {
    vec![
        Turn::tool_calls(&[(
            "dup",
            "write_text_content",
            json!({"path": "tmp.txt", "text": "scratch"}),
        )]),
        Turn::text("written"),
        Turn::tool_calls(&[("dup", "delete_path", json!({"path": "precious.txt"}))]),
        Turn::text("as you wish"),
    ]
}

/// The attack: the user approves turn 1's write (through `first`); the model's next turn
/// reuses its call id for a delete; the first approval sent again (a retrying client, a
/// double click), through `second`, must approve nothing. The delete is then denied by its
/// own approval id. `root` is the project `demo`'s folder, holding `precious.txt`.
pub(crate) async fn reused_call_id_attack(first: &str, second: &str, root: &Path) {
    assert!(root.join("precious.txt").exists(), "the test plants it");
    let approve = json!({"decision": "approve"});
    let mut write =
        OpenChat::start_at(first, json!({"projectId": "demo", "message": "write"})).await;
    let (call, name, _) = write.approval_required(1).await;
    assert_eq!(
        (call.as_str(), name.as_str()),
        ("dup", "write_text_content")
    );
    let conversation = write.conversation.clone().expect("named by the event");
    let write_approval = write.approval_id.clone();
    // An existing client deciding by call id: one call has it, so it is that one.
    let (status, write_decided) =
        decide_at(first, Some(TOKEN), &conversation, "dup", approve.clone()).await;
    assert_eq!(status, 200, "{write_decided}");
    assert_eq!(write.finish().await.done().1, "completed");
    assert_eq!(
        std::fs::read_to_string(root.join("tmp.txt")).unwrap(),
        "scratch"
    );

    let mut delete = OpenChat::start_at(
        first,
        json!({"projectId": "demo", "conversationId": conversation, "message": "tidy up"}),
    )
    .await;
    let (call, name, args) = delete.approval_required(1).await;
    assert_eq!((call.as_str(), name.as_str()), ("dup", "delete_path"));
    assert_eq!(args, json!({"path": "precious.txt"}));

    // Turn 1's approval sent again: it approves nothing.
    let (status, body) =
        decide_at(second, Some(TOKEN), &conversation, "dup", approve.clone()).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        root.join("precious.txt").exists(),
        "the delete was not approved"
    );
    let said = body["error"].as_str().unwrap_or_default();
    assert!(
        said.contains("more than one call") && said.contains("approvalId"),
        "{body}"
    );

    // Each request for approval has an id of its own; turn 1's, sent again, is refused too.
    let write_approval = write_approval.expect("an approval id");
    let delete_approval = delete.approval_id.clone().expect("an approval id");
    assert_ne!(delete_approval, write_approval);
    assert_eq!(write_decided["approvalId"], json!(write_approval));
    let (status, body) = decide_at(
        second,
        Some(TOKEN),
        &conversation,
        &write_approval,
        approve.clone(),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("already decided (approve)"),
        "{body}"
    );
    assert!(root.join("precious.txt").exists());

    // The user's own decision on what they were shown.
    let deny = json!({"decision": "deny", "reason": "keep it"});
    let (status, body) =
        decide_at(second, Some(TOKEN), &conversation, &delete_approval, deny).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"approvalId": delete_approval, "callId": "dup", "decision": "deny", "reason": "keep it"})
    );
    let stream = delete.finish().await;
    assert_eq!(
        stream.results(),
        vec![(
            "delete_path".to_owned(),
            false,
            "error: denied by the user: keep it".to_owned()
        )]
    );
    assert!(root.join("precious.txt").exists());
    // Sent again: refused, and the denial stands.
    let (status, _) = decide_at(first, Some(TOKEN), &conversation, &delete_approval, approve).await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn a_decision_sent_again_never_approves_a_later_call_that_reuses_its_call_id() {
    let upstream = ScriptedUpstream::start(reused_call_id_turns()).await;
    let host = TestHost::start(with_delete(&upstream, WRITES_AND_DELETES_ASKED)).await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("precious.txt"), "keep me").unwrap();
    reused_call_id_attack(&host.url, &host.url, &root).await;
    upstream.assert_consumed();
}

#[tokio::test]
async fn a_call_id_of_any_length_can_be_approved() {
    let long = format!("call_{}", "x".repeat(1_000));
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[(
            long.as_str(),
            "write_text_content",
            json!({"path": "a.txt", "text": "one"}),
        )]),
        Turn::tool_calls(&[(
            long.as_str(),
            "write_text_content",
            json!({"path": "b.txt", "text": "two"}),
        )]),
        Turn::text("done"),
    ])
    .await;
    let host = TestHost::start(with_delete(&upstream, WRITES_AND_DELETES_ASKED)).await;
    let mut chat =
        OpenChat::start_at(&host.url, json!({"projectId": "demo", "message": "go"})).await;
    assert_eq!(chat.approval_required(1).await.0, long);
    let conversation = chat.conversation.clone().expect("named by the event");
    let approve = json!({"decision": "approve"});
    // By the call id itself, as a client written before approval ids would.
    let (status, body) = decide_at(
        &host.url,
        Some(TOKEN),
        &conversation,
        &long,
        approve.clone(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["callId"], json!(long));
    // The next turn reuses it: by the approval id.
    assert_eq!(chat.approval_required(2).await.0, long);
    let approval = chat.approval_id.clone().expect("an approval id");
    let (status, body) = decide_at(&host.url, Some(TOKEN), &conversation, &approval, approve).await;
    assert_eq!(status, 200, "{body}");
    let stream = chat.finish().await;
    assert_eq!(stream.done().1, "completed");
    let root = host.project_root("demo");
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one");
    assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "two");
}

/// Whether `stream` asked about a call of `tool`.
fn asked(stream: &Stream, tool: &str) -> bool {
    stream
        .all
        .iter()
        .any(|e| matches!(e, Event::ApprovalRequired { name, .. } if name == tool))
}

#[tokio::test]
async fn approve_destructive_asks_before_a_write_replaces_a_file_not_before_one_creates_it() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[
            (
                "c1",
                "write_text_content",
                json!({"path": "new.txt", "text": "fresh"}),
            ),
            (
                "c2",
                "write_text_content",
                json!({"path": "keep.txt", "text": "overwritten"}),
            ),
        ]),
        Turn::text("done"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream).with(
        "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\napprove = \"destructive\"\n\
         [limits]\napproval_timeout_secs = 1\n",
    ))
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("keep.txt"), "original").unwrap();
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "go"}))
            .await,
    )
    .await;
    let asked_ids: Vec<&str> = stream
        .all
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalRequired { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked_ids,
        ["c2"],
        "only the write that replaces a file is asked about"
    );
    let results = stream.results();
    assert!(results[0].1, "{results:?}");
    assert!(!results[1].1, "{results:?}");
    assert!(results[1].2.contains("did not answer"), "{results:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).unwrap(),
        "fresh"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("keep.txt")).unwrap(),
        "original",
        "not replaced unasked"
    );
}

/// A tool its manifest marks destructive (`delete_path`) is asked about under
/// `approve = "destructive"` even when the call would remove nothing that exists.
#[tokio::test]
async fn approve_destructive_asks_before_a_destructive_tool_even_when_nothing_exists() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("c1", "delete_path", json!({"path": "missing.txt"}))]),
        Turn::text("done"),
    ])
    .await;
    let host = TestHost::start(with_delete(
        &upstream,
        "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\napprove = \"destructive\"\n\
         [limits]\napproval_timeout_secs = 1\n",
    ))
    .await;
    std::fs::create_dir_all(host.project_root("demo")).unwrap();
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "go"}))
            .await,
    )
    .await;
    assert!(asked(&stream, "delete_path"), "{:?}", stream.all);
    let results = stream.results();
    assert!(results[0].2.contains("did not answer"), "{results:?}");
}

#[tokio::test]
async fn a_call_that_does_not_fit_its_schema_is_refused_without_asking() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("c1", "delete_path", json!({"path": 5}))]),
        Turn::text("sorry"),
    ])
    .await;
    let host = TestHost::start(
        with_delete(&upstream, WRITES_AND_DELETES_ASKED)
            .with("[limits]\napproval_timeout_secs = 1\n"),
    )
    .await;
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "go"}))
            .await,
    )
    .await;
    assert!(!asked(&stream, "delete_path"), "{:?}", stream.all);
    let results = stream.results();
    assert_eq!(results.len(), 1);
    assert!(!results[0].1);
    assert!(
        results[0]
            .2
            .starts_with("error: invalid arguments for delete_path"),
        "{results:?}"
    );
    let conversation = stream.done().0;
    let stored: Vec<Value> = host
        .stored_messages(&conversation)
        .await
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert!(
        stored[0].get("rojos").is_none(),
        "no decision is recorded: {stored:?}"
    );
    let (status, body) = decide_at(
        &host.url,
        Some(TOKEN),
        &conversation,
        "c1",
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 409, "never asked: {body}");
}

/// The name the restore of `big` is held at in [`a_file_made_after_the_check_is_not_replaced_unasked`]
/// and the undo tests: the middle of a thousand files.
pub(crate) const HELD_NAME: &str = "an-empty-file-with-a-long-name-000500";

#[tokio::test]
async fn a_file_made_after_the_check_is_not_replaced_unasked() {
    use crate::undo::{calls, config_with, run, write};
    let delete = |path: &str| {
        (
            format!("d{path}"),
            "delete_path",
            json!({"path": path, "recursive": true}),
        )
    };
    let upstream = ScriptedUpstream::start(vec![
        calls(vec![delete("docs"), delete("big")]),
        Turn::text("deleted"),
        calls(vec![write("docs/new.txt", "the model's text")]),
        Turn::text("written"),
    ])
    .await;
    let mut config = config_with(
        &upstream,
        "[rojos.careful]\nprovider = \"scripted\"\ntools = \"*\"\napprove = \"destructive\"\n\
         [limits]\napproval_timeout_secs = 1\n",
    );
    // The write waits for the undo within its own time limit: room on a busy machine.
    config.call_timeout_secs = 120.0;
    let host = TestHost::start(config).await;
    let root = host.project_root("demo");
    let mut fs = crate::support::held_fs::HeldFs::mount(&root, HELD_NAME);
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/new.txt"), "put back by the undo").unwrap();
    std::fs::create_dir_all(root.join("big")).unwrap();
    for i in 0..1000 {
        std::fs::write(
            root.join(format!("big/an-empty-file-with-a-long-name-{i:06}")),
            "",
        )
        .unwrap();
    }
    let (conversation, results) = run(&host, None, "delete both").await;
    assert!(results.iter().all(|(_, ok, _)| *ok), "{results:?}");

    // The undo puts `big` back first and `docs` last: held in the middle of `big`, it is
    // past its check and holds the project's lock, and `docs/new.txt` is still missing.
    fs.arm();
    let url = format!("{}/conversations/{conversation}/undo", host.url);
    let undoing = tokio::spawn(async move {
        let response = crate::support::host::client()
            .post(url)
            .bearer_auth(crate::support::host::TOKEN)
            .send()
            .await
            .unwrap();
        response.status().as_u16()
    });
    fs.held().await;
    // A run under `approve = "destructive"` writes `docs/new.txt`: missing now, so the call
    // is not asked about; it then waits for the project's lock.
    let url = host.url.clone();
    let writing = tokio::spawn(async move {
        let response = crate::support::host::client()
            .post(format!("{url}/chat"))
            .bearer_auth(crate::support::host::TOKEN)
            .json(&json!({"projectId": "demo", "rojo": "careful", "message": "write it"}))
            .send()
            .await
            .unwrap();
        Stream::read(response).await
    });
    // Its check has looked for the path (nothing else looks while the undo is held).
    let mut waited = 0;
    while !fs.looked_up().iter().any(|p| p.starts_with("/docs")) {
        waited += 1;
        assert!(
            waited < 12_000,
            "the write's check never looked at docs/new.txt"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // The undo goes on and puts `docs/new.txt` back before the write runs.
    fs.release();
    assert_eq!(undoing.await.unwrap(), 200);
    let stream = writing.await.unwrap();
    assert!(
        !stream
            .all
            .iter()
            .any(|e| matches!(e, Event::ApprovalRequired { .. })),
        "the write looked like a creation when it was checked"
    );
    let results = stream.results();
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[0]
            .2
            .contains("did not exist when this call was checked")
            && results[0].2.contains("Call again to be asked"),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("docs/new.txt")).unwrap(),
        "put back by the undo",
        "a file that appeared after the check is not replaced unasked"
    );
}
