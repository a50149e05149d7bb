//! Undo of a run's file changes (docs/api.md, "Undo of file changes") over real HTTP, with
//! the built-in changing tools driven by the scripted model: a run that writes, replaces,
//! creates, moves and deletes is undone to the very bytes, modes, links and folders it found
//! (compared entry by entry), then the run before it; undo refused after later changes (by
//! another run, by hand) naming the files, and forced; the budget dropping the oldest
//! checkpoint (410) and refusing a change too large to record; hostile paths (a folder
//! swapped for a link out, `../checkpoints` named by a tool, ids with `..`).

use std::{
    collections::BTreeMap,
    os::unix::fs::{symlink, PermissionsExt},
    path::Path,
};

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::support::{
    host::{client, HostConfig, TestHost, DEMO_TOKEN, TOKEN},
    ndjson::Stream,
    plugin_lib,
    upstream::{ScriptedUpstream, Turn},
};

/// What stands at each path under a folder: type, permission bits, and bytes or link target.
type Tree = BTreeMap<String, (char, u32, Vec<u8>)>;

/// Every entry under `root`, links not followed.
pub(crate) fn tree(root: &Path) -> Tree {
    let mut entries = Tree::new();
    walk(root, root, &mut entries);
    entries
}

fn walk(root: &Path, folder: &Path, entries: &mut Tree) {
    for entry in std::fs::read_dir(folder).expect("read folder") {
        let path = entry.expect("entry").path();
        let rel = path
            .strip_prefix(root)
            .expect("under root")
            .display()
            .to_string();
        let meta = std::fs::symlink_metadata(&path).expect("stat");
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).expect("link");
            entries.insert(rel, ('l', 0, target.display().to_string().into_bytes()));
        } else if meta.is_dir() {
            entries.insert(rel, ('d', mode, Vec::new()));
            walk(root, &path, entries);
        } else {
            entries.insert(rel, ('f', mode, std::fs::read(&path).expect("read")));
        }
    }
}

/// The run logs of `conversation` beside the project `root` (docs/api.md: one file per run,
/// `checkpoints/<conversationId>.<run>.log`).
pub(crate) fn logs_of(root: &Path, conversation: &str) -> Vec<std::path::PathBuf> {
    let folder = root
        .parent()
        .expect("the project folder")
        .join("checkpoints");
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    entries
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(&format!("{conversation}.")) && name.ends_with(".log")
        })
        .collect()
}

/// A host with all seven built-in tools, `limits` added to its config.
pub(crate) async fn host_with(turns: Vec<Turn>, limits: &str) -> (TestHost, ScriptedUpstream) {
    let upstream = ScriptedUpstream::start(turns).await;
    let config = config_with(&upstream, limits);
    (TestHost::start(config).await, upstream)
}

/// The config of [`host_with`].
pub(crate) fn config_with(upstream: &ScriptedUpstream, limits: &str) -> HostConfig {
    let mut config = HostConfig::builtins().upstream(upstream).with(limits);
    config.load.push(plugin_lib("rojos_tool_move_path"));
    config.load.push(plugin_lib("rojos_tool_delete_path"));
    config
}

/// Sends `message` (in `conversation`, or a new one) and reads the run to its end; returns
/// the conversation id and the run's tool results.
pub(crate) async fn run(
    host: &TestHost,
    conversation: Option<&str>,
    message: &str,
) -> (String, Vec<(String, bool, String)>) {
    let mut body = json!({"projectId": "demo", "message": message});
    if let Some(id) = conversation {
        body["conversationId"] = json!(id);
    }
    let stream = Stream::read(host.chat(body).await).await;
    (stream.done().0, stream.results())
}

pub(crate) async fn call(
    host: &TestHost,
    method: Method,
    token: Option<&str>,
    path: &str,
    body: Option<Value>,
) -> Response {
    let mut request = client().request(method, format!("{}{path}", host.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.expect("request reaches the host")
}

pub(crate) async fn undo(host: &TestHost, conversation: &str, body: Option<Value>) -> (u16, Value) {
    let path = format!("/conversations/{conversation}/undo");
    let response = call(host, Method::POST, Some(TOKEN), &path, body).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn get(host: &TestHost, path: &str) -> (u16, Value) {
    let response = call(host, Method::GET, Some(TOKEN), path, None).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn checkpoints(host: &TestHost, conversation: &str) -> Vec<Value> {
    let path = format!("/conversations/{conversation}/checkpoints");
    let response = call(host, Method::GET, Some(TOKEN), &path, None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    body["checkpoints"].as_array().expect("a list").clone()
}

pub(crate) fn write(path: &str, text: &str) -> (String, &'static str, Value) {
    (
        "w".to_owned() + path,
        "write_text_content",
        json!({"path": path, "text": text}),
    )
}

/// Tool calls with ids made unique by their index.
pub(crate) fn calls(list: Vec<(String, &'static str, Value)>) -> Turn {
    let ids: Vec<String> = (0..list.len()).map(|i| format!("call_{i}")).collect();
    let calls: Vec<(&str, &str, Value)> = list
        .iter()
        .zip(&ids)
        .map(|((_, name, args), id)| (id.as_str(), *name, args.clone()))
        .collect();
    Turn::tool_calls(&calls)
}

#[tokio::test]
async fn undo_restores_every_byte_mode_link_and_folder_a_run_changed_then_the_run_before() {
    let big_run = calls(vec![
        write("new/dir/new.txt", "brand new\n"),
        write("keep.txt", "replaced\n"),
        (
            "mk".into(),
            "create_directory",
            json!({"path": "made/deep"}),
        ),
        (
            "mv".into(),
            "move_path",
            json!({"from": "move-me.txt", "to": "moved.txt"}),
        ),
        (
            "rm".into(),
            "delete_path",
            json!({"path": "doomed", "recursive": true}),
        ),
    ]);
    let (host, _upstream) = host_with(
        vec![
            big_run,
            Turn::text("done"),
            calls(vec![write("keep.txt", "second run\n")]),
            Turn::text("done again"),
        ],
        "",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(root.join("doomed/inner")).unwrap();
    std::fs::write(root.join("keep.txt"), "original\n").unwrap();
    std::fs::set_permissions(
        root.join("keep.txt"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    std::fs::write(root.join("move-me.txt"), "moving\n").unwrap();
    std::fs::write(root.join("doomed/inner/data.bin"), [0u8, 1, 2, 255]).unwrap();
    std::fs::set_permissions(
        root.join("doomed/inner"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    symlink("../keep.txt", root.join("doomed/to-keep")).unwrap();
    let before = tree(&root);

    let (conversation, results) = run(&host, None, "change everything").await;
    assert!(results.iter().all(|(_, ok, _)| *ok), "{results:?}");
    let after_first = tree(&root);
    assert!(!after_first.contains_key("doomed") && after_first.contains_key("moved.txt"));
    let (_, results) = run(&host, Some(&conversation), "once more").await;
    assert!(results[0].1, "{results:?}");

    let listed = checkpoints(&host, &conversation).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(
        listed[0]["paths"],
        json!([
            "new/dir/new.txt",
            "keep.txt",
            "made/deep",
            "move-me.txt",
            "moved.txt",
            "doomed"
        ])
    );
    assert_eq!(listed[1]["paths"], json!(["keep.txt"]));
    assert_eq!(listed[0]["message"], 0);
    // user, tool calls, five results, answer: the second message is the ninth.
    assert_eq!(listed[1]["message"], 8);

    // The text before a run, for the panel's diff: read from the checkpoint only.
    let first = listed[0]["run"].as_str().unwrap();
    let second = listed[1]["run"].as_str().unwrap();
    let before_of = |run: &str, path: &str| {
        format!("/conversations/{conversation}/checkpoints/{run}/before?path={path}")
    };
    let (status, body) = get(&host, &before_of(first, "keep.txt")).await;
    assert_eq!(
        (status, body),
        (200, json!({"existed": true, "text": "original\n"}))
    );
    let (status, body) = get(&host, &before_of(second, "./keep.txt")).await;
    assert_eq!(
        (status, body),
        (200, json!({"existed": true, "text": "replaced\n"}))
    );
    let (status, body) = get(&host, &before_of(first, "new/dir/new.txt")).await;
    assert_eq!((status, body), (200, json!({"existed": false})));
    let (status, body) = get(&host, &before_of(first, "doomed/inner/data.bin")).await;
    assert_eq!(status, 422, "{body}");
    for (path, expected) in [
        ("..%2Fkeep.txt", 400),
        ("%2Fetc%2Fpasswd", 400),
        ("other.txt", 404),
    ] {
        let (status, body) = get(&host, &before_of(first, path)).await;
        assert_eq!(status, expected, "{path}: {body}");
    }
    let (status, _) = get(&host, &before_of("no-such-run", "keep.txt")).await;
    assert_eq!(status, 404);

    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["undone"]["run"], listed[1]["run"]);
    assert_eq!(tree(&root), after_first);

    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(tree(&root), before, "the tree before the first run is back");

    let listed = checkpoints(&host, &conversation).await;
    assert!(
        listed
            .iter()
            .all(|c| c["undone"] == true && c["available"] == true),
        "{listed:?}"
    );
    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no run of this conversation"),
        "{body}"
    );
}

#[tokio::test]
async fn undo_is_refused_naming_files_changed_since_by_another_run_or_by_hand_unless_forced() {
    let (host, _upstream) = host_with(
        vec![
            calls(vec![
                write("notes.txt", "from A\n"),
                write("plan.txt", "plan A\n"),
            ]),
            Turn::text("A done"),
            calls(vec![write("notes.txt", "from B\n")]),
            Turn::text("B done"),
        ],
        "",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "mine\n").unwrap();
    let before = tree(&root);
    let (a, _) = run(&host, None, "A").await;
    let (b, _) = run(&host, None, "B").await;
    std::fs::write(root.join("plan.txt"), "edited by hand\n").unwrap();

    let (status, body) = undo(&host, &a, None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["changed"], json!(["notes.txt", "plan.txt"]));
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains("'notes.txt'") && message.contains("force"),
        "{message}"
    );
    assert_eq!(
        std::fs::read(root.join("notes.txt")).unwrap(),
        b"from B\n",
        "nothing restored"
    );

    let (status, body) = undo(&host, &a, Some(json!({"force": true}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(tree(&root), before);

    let (status, body) = undo(&host, &a, Some(json!({"force": "yes"}))).await;
    assert_eq!(status, 400, "{body}");

    // Deleting a conversation removes its checkpoints, and only its own.
    let checkpoints_of = |id: &str| logs_of(&root, id).len();
    assert!(checkpoints_of(&a) > 0 && checkpoints_of(&b) > 0);
    let path = format!("/conversations/{a}");
    assert_eq!(
        call(&host, Method::DELETE, Some(TOKEN), &path, None)
            .await
            .status(),
        204
    );
    assert_eq!(checkpoints_of(&a), 0);
    assert!(checkpoints_of(&b) > 0);
}

/// A call that writes through an in-root link changes what the link leads to, which an
/// earlier call of the run recorded under its own name: every recorded name is fingerprinted
/// again after such a call, so the run's own change is not taken for one made since.
#[tokio::test]
async fn a_write_through_a_link_is_not_taken_for_a_change_made_since_the_run() {
    let (host, _upstream) = host_with(
        vec![
            calls(vec![
                write("real/x.txt", "one\n"),
                write("link/x.txt", "two\n"),
            ]),
            Turn::text("done"),
        ],
        "",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(root.join("real")).unwrap();
    symlink("real", root.join("link")).unwrap();
    let before = tree(&root);
    let (conversation, results) = run(&host, None, "write twice").await;
    assert!(results.iter().all(|(_, ok, _)| *ok), "{results:?}");
    assert_eq!(std::fs::read(root.join("real/x.txt")).unwrap(), b"two\n");

    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(tree(&root), before);
}

#[tokio::test]
async fn with_a_budget_of_zero_nothing_is_recorded_and_there_is_nothing_to_undo() {
    let (host, _upstream) = host_with(
        vec![calls(vec![write("one.txt", "new")]), Turn::text("one")],
        "[limits]\ncheckpoint_bytes = 0\n",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("one.txt"), "old").unwrap();
    let (conversation, results) = run(&host, None, "one").await;
    assert!(
        results[0].1,
        "the write runs without a checkpoint: {results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("one.txt")).unwrap(),
        "new"
    );
    assert!(checkpoints(&host, &conversation).await.is_empty());
    assert!(!root.parent().unwrap().join("checkpoints").exists());
    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 404, "nothing to undo: {body}");
    assert_eq!(
        std::fs::read_to_string(root.join("one.txt")).unwrap(),
        "new"
    );
}

#[tokio::test]
async fn the_budget_drops_the_oldest_checkpoint_and_refuses_a_change_too_large_to_record() {
    let (host, _upstream) = host_with(
        vec![
            calls(vec![write("one.txt", "1")]),
            Turn::text("one"),
            calls(vec![write("two.txt", "2")]),
            Turn::text("two"),
            calls(vec![write("huge.txt", "3")]),
            Turn::text("three"),
        ],
        "[limits]\ncheckpoint_bytes = 6000\n",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("one.txt"), [b'a'; 3000]).unwrap();
    std::fs::write(root.join("two.txt"), [b'b'; 3000]).unwrap();
    std::fs::write(root.join("huge.txt"), [b'c'; 6001]).unwrap();

    let (conversation, _) = run(&host, None, "one").await;
    let (conversation2, _) = run(&host, Some(&conversation), "two").await;
    assert_eq!(conversation, conversation2);
    let listed = checkpoints(&host, &conversation).await;
    assert_eq!(listed[0]["available"], false, "{listed:?}");
    assert_eq!(listed[1]["available"], true, "{listed:?}");

    let (_, results) = run(&host, Some(&conversation), "three").await;
    let (_, ok, text) = &results[0];
    assert!(!ok && text.contains("could not be made undoable"), "{text}");
    assert!(text.contains("checkpoint_bytes"), "{text}");
    assert_eq!(
        std::fs::read(root.join("huge.txt")).unwrap(),
        [b'c'; 6001],
        "not written"
    );

    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(std::fs::read(root.join("two.txt")).unwrap(), [b'b'; 3000]);
    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 410, "{body}");
    let evicted = listed[0]["run"].as_str().unwrap();
    let path = format!("/conversations/{conversation}/checkpoints/{evicted}/before?path=one.txt");
    assert_eq!(get(&host, &path).await.0, 410);
    assert!(
        body["error"].as_str().unwrap().contains("checkpoint_bytes"),
        "{body}"
    );
    assert_eq!(
        std::fs::read(root.join("one.txt")).unwrap(),
        b"1",
        "left as the run left it"
    );
}

#[tokio::test]
async fn a_new_folder_in_a_folder_over_the_budget_is_undoable_and_the_big_folder_is_not_copied() {
    let mkdir = |path: &str| {
        (
            "m".to_owned() + path,
            "create_directory",
            json!({ "path": path }),
        )
    };
    let (host, _upstream) = host_with(
        vec![
            calls(vec![mkdir("big"), mkdir("big/new/deeper")]),
            Turn::text("made"),
        ],
        "[limits]\ncheckpoint_bytes = 3000\n",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(root.join("big")).unwrap();
    std::fs::write(root.join("big/content.bin"), [7u8; 4096]).unwrap();
    let before = tree(&root);

    let (conversation, results) = run(&host, None, "make folders").await;
    assert!(results.iter().all(|(_, ok, _)| *ok), "{results:?}");
    assert!(root.join("big/new/deeper").is_dir());
    let listed = checkpoints(&host, &conversation).await;
    assert_eq!(
        listed[0]["paths"],
        json!(["big", "big/new/deeper"]),
        "{listed:?}"
    );
    let stored: u64 = logs_of(&root, &conversation)
        .iter()
        .map(|log| log.metadata().unwrap().len())
        .sum();
    assert!(
        stored < 4096,
        "the existing folder's content was copied: {stored} bytes"
    );

    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(tree(&root), before);
}

#[tokio::test]
async fn a_damaged_checkpoint_stops_the_undo_before_anything_is_changed() {
    let (host, _upstream) = host_with(
        vec![calls(vec![write("notes.txt", "new")]), Turn::text("done")],
        "",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "the user's only copy").unwrap();
    let (conversation, _) = run(&host, None, "write").await;
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "new"
    );

    let log = logs_of(&root, &conversation).remove(0);
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes
        .windows(b"only copy".len())
        .position(|w| w == b"only copy")
        .expect("the earlier content is in the run's log");
    bytes[at] = b'X';
    std::fs::write(&log, bytes).unwrap();

    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 410, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("damaged"),
        "{body}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "new"
    );
}

#[tokio::test]
async fn hostile_paths_reach_nothing_outside_the_root_and_the_checkpoints_stay_out_of_reach() {
    let (host, _upstream) = host_with(
        vec![
            calls(vec![
                write("docs/x.txt", "new\n"),
                write("../checkpoints/planted.txt", "planted"),
                ("ls".into(), "list_files", json!({"path": "../checkpoints"})),
            ]),
            Turn::text("done"),
        ],
        "",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/x.txt"), "old\n").unwrap();
    let outside = host.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("x.txt"), "outside\n").unwrap();

    let (conversation, results) = run(&host, None, "go").await;
    assert!(results[0].1, "{results:?}");
    for (_, ok, text) in &results[1..] {
        assert!(!ok && text.contains("leads outside the project"), "{text}");
    }
    let checkpoints_dir = root.parent().unwrap().join("checkpoints");
    assert!(checkpoints_dir.is_dir());
    assert!(!checkpoints_dir.join("planted.txt").exists());

    // The folder is swapped for a link that leads out: even a forced undo writes nothing there.
    std::fs::remove_dir_all(root.join("docs")).unwrap();
    symlink(&outside, root.join("docs")).unwrap();
    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = undo(&host, &conversation, Some(json!({"force": true}))).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("leads outside the project"),
        "{body}"
    );
    assert_eq!(std::fs::read(outside.join("x.txt")).unwrap(), b"outside\n");

    for path in [
        "/conversations/..%2F..%2Fetc/undo",
        "/conversations/a.b/checkpoints",
    ] {
        let method = if path.ends_with("undo") {
            Method::POST
        } else {
            Method::GET
        };
        let response = call(&host, method, Some(TOKEN), path, None).await;
        assert_eq!(response.status(), 400, "{path}");
    }
    let path = format!("/conversations/{conversation}/undo");
    assert_eq!(
        call(&host, Method::POST, None, &path, None).await.status(),
        401
    );
    let unknown = call(
        &host,
        Method::POST,
        Some(TOKEN),
        "/conversations/nope/undo",
        None,
    )
    .await;
    assert_eq!(unknown.status(), 404);
}

#[tokio::test]
async fn a_token_of_another_project_can_neither_list_nor_undo() {
    let (host, _upstream) =
        host_with(vec![calls(vec![write("a.txt", "x")]), Turn::text("ok")], "").await;
    let body = json!({"projectId": "other", "message": "go"});
    let (conversation, _) = Stream::read(host.chat(body).await).await.done();
    for (method, path) in [
        (
            Method::GET,
            format!("/conversations/{conversation}/checkpoints"),
        ),
        (Method::POST, format!("/conversations/{conversation}/undo")),
    ] {
        let response = call(&host, method, Some(DEMO_TOKEN), &path, None).await;
        assert_eq!(response.status(), 403, "{path}");
    }
    assert_eq!(
        std::fs::read(host.project_root("other").join("a.txt")).unwrap(),
        b"x",
        "nothing undone"
    );
}

#[tokio::test]
async fn undo_waits_for_no_run_it_is_refused_while_a_reply_is_written_in_the_conversation() {
    let (host, upstream) = host_with(
        vec![
            calls(vec![write("a.txt", "written")]),
            Turn::text("first"),
            Turn::text("held answer").held(),
        ],
        "",
    )
    .await;
    let (conversation, _) = run(&host, None, "write").await;
    let body = json!({"projectId": "demo", "conversationId": conversation, "message": "again"});
    let response = host.chat(body).await;
    upstream.until_received(3).await;
    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("still being written"),
        "{body}"
    );
    assert_eq!(
        std::fs::read(host.project_root("demo").join("a.txt")).unwrap(),
        b"written"
    );
    upstream.release();
    Stream::read(response).await.done();
    let (status, body) = undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(!host.project_root("demo").join("a.txt").exists());
}
