//! What bounds undo over real HTTP (docs/security.md, the undo subsections): a checkpoint
//! record over `[limits] checkpoint_record_bytes` is refused before its change runs, and one
//! a host cannot read is listed as unreadable and stops the undo instead of letting it revert
//! an earlier run; an undo names the run it reverts; an upload, another run's tool call and
//! a tool call through MCP, made while an undo is held in the middle of its restore (a FUSE
//! folder, `held_fs.rs`), wait for it and are not removed by it; `checkpoint_bytes` counts names
//! and empty files (what the records take on disk), and listing reads the small heads, not
//! the records; `[limits] checkpoint_memory_bytes` bounds the names and entries held, while
//! content streams past it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::{
    approval_binding::HELD_NAME,
    support::{
        held_fs::HeldFs,
        host::{client, TestHost, TOKEN},
        upstream::{ScriptedUpstream, Turn},
    },
    undo::{calls, checkpoints, config_with, host_with, run, tree, undo, write},
};

fn delete(path: &str) -> (String, &'static str, Value) {
    (
        "d".to_owned() + path,
        "delete_path",
        json!({"path": path, "recursive": true}),
    )
}

fn moved(from: &str, to: &str) -> (String, &'static str, Value) {
    (
        "m".to_owned() + from,
        "move_path",
        json!({"from": from, "to": to}),
    )
}

/// Makes `folder` under `root` with `count` empty files of long names.
fn empty_files(root: &Path, folder: &str, count: usize) {
    let folder = root.join(folder);
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..count {
        std::fs::write(
            folder.join(format!("an-empty-file-with-a-long-name-{i:06}")),
            "",
        )
        .unwrap();
    }
}

/// The bytes every file of the project's `checkpoints` folder takes.
fn checkpoint_disk(root: &Path) -> u64 {
    let folder = root.parent().unwrap().join("checkpoints");
    std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

const SMALL_RECORDS: &str = "[limits]\ncheckpoint_record_bytes = 4096\n";
const LARGE_RECORDS: &str = "[limits]\ncheckpoint_record_bytes = 1048576\n";

#[tokio::test]
async fn a_record_over_the_limit_is_refused_before_its_change_and_an_unreadable_one_is_never_skipped(
) {
    let (host, upstream) = host_with(
        vec![
            calls(vec![write("a.txt", "first run")]),
            Turn::text("one"),
            calls(vec![delete("big")]),
            Turn::text("refused"),
            calls(vec![delete("big")]),
            Turn::text("deleted"),
        ],
        SMALL_RECORDS,
    )
    .await;
    let root = host.project_root("demo");
    empty_files(&root, "big", 200);
    let big = tree(&root.join("big"));

    let (conversation, _) = run(&host, None, "one").await;
    let (_, results) = run(&host, Some(&conversation), "two").await;
    let (_, ok, text) = &results[0];
    assert!(!ok, "{text}");
    assert!(
        text.contains("checkpoint_record_bytes") && text.contains("4096"),
        "the refusal names the limit: {text}"
    );
    assert_eq!(tree(&root.join("big")), big, "not run");
    let listed = checkpoints(&host, &conversation).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let first = listed[0]["run"].as_str().unwrap().to_owned();

    // A host with a larger limit records the delete.
    let host = host.restart(config_with(&upstream, LARGE_RECORDS)).await;
    let (_, results) = run(&host, Some(&conversation), "three").await;
    assert!(results[0].1, "{results:?}");
    assert!(!root.join("big").exists());
    let listed = checkpoints(&host, &conversation).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    let last = listed[1]["run"].as_str().unwrap().to_owned();

    // One with the smaller limit again cannot read that record: it is listed as unreadable
    // (not left out, the earlier run then taken for the last), and undo stops at it.
    let host = host.restart(config_with(&upstream, SMALL_RECORDS)).await;
    let listed = checkpoints(&host, &conversation).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[1]["run"], last.as_str());
    assert_eq!(listed[1]["available"], false, "{listed:?}");
    assert!(
        listed[1]["unreadable"]
            .as_str()
            .is_some_and(|why| why.contains("checkpoint_record_bytes")),
        "{listed:?}"
    );
    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 410, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no earlier run is undone"),
        "{body}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "first run",
        "the earlier run is left alone"
    );
    // An undo that names a run other than the last is refused, changing nothing.
    let (status, body) = undo(&host, &conversation, Some(json!({"run": first}))).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains(&last), "{body}");
    assert!(root.join("a.txt").exists() && !root.join("big").exists());

    // Back at the larger limit, the run named is undone.
    let host = host.restart(config_with(&upstream, LARGE_RECORDS)).await;
    let (status, body) = undo(&host, &conversation, Some(json!({"run": last}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["undone"]["run"], last.as_str());
    assert_eq!(tree(&root.join("big")), big);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "first run"
    );
}

#[tokio::test]
async fn an_upload_into_a_folder_while_its_deletion_is_undone_waits_and_is_not_removed() {
    let (host, upstream) = host_with(
        vec![
            calls(vec![delete("docs"), delete("big")]),
            Turn::text("deleted"),
        ],
        "",
    )
    .await;
    let host = patient(host, &upstream).await;
    let (root, mut fs, conversation) = deleted_on_a_held_folder(&host).await;
    assert!(!root.join("docs").exists() && !root.join("big").exists());

    let undoing = start_undo(&host, &conversation, &mut fs).await;
    // The undo is held in the middle of `big` (it puts entries back in reverse: `big`
    // first, `docs` last): past its check, `docs` not restored yet.
    let upload = client()
        .put(format!(
            "{}/projects/demo/files/content?path=docs/new.txt",
            host.url
        ))
        .bearer_auth(TOKEN)
        .body("uploaded during the undo")
        .send();
    let upload = tokio::spawn(upload);
    let upload = let_go_when_done_or_waiting(&fs, upload).await;
    let (status, body) = undoing.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(upload.unwrap().status().as_u16(), 201);
    assert_eq!(
        std::fs::read_to_string(root.join("docs/new.txt")).unwrap(),
        "uploaded during the undo",
        "an acknowledged upload is not lost"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("docs/keep.txt")).unwrap(),
        "kept"
    );
    assert_eq!(std::fs::read_dir(root.join("big")).unwrap().count(), 1000);
}

/// `docs/keep.txt` and 1,000 empty files in `big` on a held folder (`held_fs.rs`) of
/// `host`'s project, then a run that deletes both: the project's root, the folder and the
/// conversation. `host` must be [`patient`].
async fn deleted_on_a_held_folder(host: &TestHost) -> (PathBuf, HeldFs, String) {
    let root = host.project_root("demo");
    let fs = HeldFs::mount(&root, HELD_NAME);
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/keep.txt"), "kept").unwrap();
    empty_files(&root, "big", 1000);
    let (conversation, results) = run(host, None, "delete both").await;
    assert!(results.iter().all(|(_, ok, _)| *ok), "{results:?}");
    (root, fs, conversation)
}

/// `host` started again with a call allowed to take two minutes: deleting the thousand files
/// of [`deleted_on_a_held_folder`] through the FUSE folder takes seconds on a busy machine,
/// and a call waits for an undo within its own time limit.
async fn patient(host: TestHost, upstream: &ScriptedUpstream) -> TestHost {
    let mut config = config_with(upstream, "");
    config.call_timeout_secs = 120.0;
    host.restart(config).await
}

/// Arms `fs`, starts the undo of `conversation`'s last run and waits until its restore is
/// held; the task answers its status and body.
async fn start_undo(
    host: &TestHost,
    conversation: &str,
    fs: &mut HeldFs,
) -> tokio::task::JoinHandle<(u16, Value)> {
    fs.arm();
    let url = format!("{}/conversations/{conversation}/undo", host.url);
    let undoing = tokio::spawn(async move {
        let response = client().post(url).bearer_auth(TOKEN).send().await.unwrap();
        let status = response.status().as_u16();
        (
            status,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    });
    fs.held().await;
    undoing
}

/// Lets the held undo go on once `change` (a request made while it is held) has ended, or
/// has been given [`CHANGE_ROOM`] without ending: waiting for the undo, as it should. Without
/// the project's lock the change ends at once, before the undo's restore reaches its
/// folder. Returns what the change returned.
async fn let_go_when_done_or_waiting<T>(fs: &HeldFs, change: tokio::task::JoinHandle<T>) -> T {
    let mut change = change;
    let done = tokio::time::timeout(CHANGE_ROOM, &mut change).await;
    fs.release();
    match done {
        Ok(done) => done.unwrap(),
        Err(_) => change.await.unwrap(),
    }
}

/// How long a change made during a held undo is given to end before the undo goes on
/// (ample for a request on loopback that does not wait for the lock); no assertion is
/// timed by it: the outcome checked is the same either way.
const CHANGE_ROOM: std::time::Duration = std::time::Duration::from_secs(3);

#[tokio::test]
async fn another_runs_tool_call_during_an_undo_waits_for_it_and_lands_on_the_restored_files() {
    let (host, upstream) = host_with(
        vec![
            calls(vec![delete("docs"), delete("big")]),
            Turn::text("deleted"),
            calls(vec![write("docs/new.txt", "written during the undo")]),
            Turn::text("written"),
        ],
        "",
    )
    .await;
    let host = patient(host, &upstream).await;
    let (root, mut fs, conversation) = deleted_on_a_held_folder(&host).await;

    let undoing = start_undo(&host, &conversation, &mut fs).await;
    // Another conversation's run writes into `docs` now: its call waits for the undo.
    let writing = tokio::spawn({
        let url = host.url.clone();
        async move {
            let response = client()
                .post(format!("{url}/chat"))
                .bearer_auth(TOKEN)
                .json(&json!({"projectId": "demo", "message": "write into docs"}))
                .send()
                .await
                .unwrap();
            let stream = crate::support::ndjson::Stream::read(response).await;
            (stream.done().0, stream.results())
        }
    });
    let (other, results) = let_go_when_done_or_waiting(&fs, writing).await;
    assert_ne!(other, conversation);
    assert!(results[0].1, "{results:?}");
    let (status, body) = undoing.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        std::fs::read_to_string(root.join("docs/new.txt")).unwrap(),
        "written during the undo",
        "a tool call's write is not lost to the undo"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("docs/keep.txt")).unwrap(),
        "kept"
    );
}

#[tokio::test]
async fn a_tool_call_through_mcp_during_an_undo_waits_for_it_and_is_not_removed() {
    let (host, upstream) = host_with(
        vec![
            calls(vec![delete("docs"), delete("big")]),
            Turn::text("deleted"),
        ],
        "",
    )
    .await;
    let host = patient(host, &upstream).await;
    let (root, mut fs, conversation) = deleted_on_a_held_folder(&host).await;

    let undoing = start_undo(&host, &conversation, &mut fs).await;
    // A call outside any chat (no run, no checkpoint of its own) writes into `docs` now: it
    // takes the same project lock, so it waits for the undo.
    let url = format!("{}/mcp/demo", host.url);
    let writing = tokio::spawn(async move {
        let calls = json!([[
            "write_text_content",
            {"path": "docs/new.txt", "text": "written through MCP during the undo"}
        ]]);
        crate::mcp_server::sdk_session(&url, TOKEN, "legacy", calls).await
    });
    let session = let_go_when_done_or_waiting(&fs, writing).await;
    let results = crate::mcp_server::call_results(&session);
    assert_eq!(results, [(false, r#"{"ok":true}"#.to_owned())]);
    let (status, body) = undoing.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        std::fs::read_to_string(root.join("docs/new.txt")).unwrap(),
        "written through MCP during the undo",
        "an MCP call's write is not lost to the undo"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("docs/keep.txt")).unwrap(),
        "kept"
    );
}

#[tokio::test]
async fn names_and_empty_files_count_against_the_budget_and_listing_reads_the_heads() {
    let mut turns = Vec::new();
    for i in 0..8 {
        let (from, to) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
        turns.push(calls(vec![moved(from, to)]));
        turns.push(Turn::text("moved"));
    }
    let budget = 65536;
    let (host, _upstream) =
        host_with(turns, &format!("[limits]\ncheckpoint_bytes = {budget}\n")).await;
    let root = host.project_root("demo");
    empty_files(&root, "a", 300);
    let files = tree(&root.join("a"));

    let (conversation, _) = run(&host, None, "move 0").await;
    for i in 1..8 {
        let (_, results) = run(&host, Some(&conversation), &format!("move {i}")).await;
        assert!(results[0].1, "{results:?}");
        assert!(
            checkpoint_disk(&root) <= budget,
            "after move {i}: {} bytes of checkpoints under a budget of {budget}",
            checkpoint_disk(&root)
        );
    }
    assert_eq!(tree(&root.join("a")), files, "eight moves: back in `a`");
    let listed = checkpoints(&host, &conversation).await;
    let last = listed.last().unwrap();
    assert_eq!(last["available"], true, "{listed:?}");
    assert!(
        listed.iter().any(|run| run["available"] == false) || listed.len() < 8,
        "older runs were dropped: {listed:?}"
    );

    // Listing reads each run's head, not its record: an older log overwritten with other
    // bytes of the same length is listed as before.
    let older = &listed[listed.len() - 2];
    let run_id = older["run"].as_str().unwrap();
    let log = root
        .parent()
        .unwrap()
        .join(format!("checkpoints/{conversation}.{run_id}.log"));
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::write(&log, vec![b'x'; len as usize]).unwrap();
    assert_eq!(&checkpoints(&host, &conversation).await, &listed);

    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(tree(&root.join("b")), files, "the last move undone");
    assert!(!root.join("a").exists());
}

#[tokio::test]
async fn checkpoint_memory_bounds_names_and_entries_and_content_streams_past_it() {
    let (host, _upstream) = host_with(
        vec![
            calls(vec![delete("blob.bin"), delete("many")]),
            Turn::text("one of two"),
        ],
        "[limits]\ncheckpoint_memory_bytes = 65536\n",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    let blob: Vec<u8> = (0..400u32 << 10).map(|n| (n % 251) as u8).collect();
    std::fs::write(root.join("blob.bin"), &blob).unwrap();
    // A thousand long names: a record line of far more than 64 KiB.
    empty_files(&root, "many", 1000);
    let (conversation, results) = run(&host, None, "delete both").await;
    assert!(results[0].1, "content over the memory streams: {results:?}");
    let (_, ok, text) = &results[1];
    assert!(!ok && text.contains("checkpoint_memory_bytes"), "{text}");
    assert_eq!(std::fs::read_dir(root.join("many")).unwrap().count(), 1000);

    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(std::fs::read(root.join("blob.bin")).unwrap(), blob);
}
