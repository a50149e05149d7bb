//! The drop-in folder and live configuration on a running host: a plugin moved in is offered
//! and called, a replaced one serves its new version, a removed one is gone; bad files leave
//! the host serving; a panicking or hanging drop-in gives an error result; an edit of
//! `rojos.toml` changes what the next message offers and allows.

use std::{future::Future, path::Path, time::Duration};

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    ndjson::Stream,
    plugin_lib,
    upstream::{ScriptedUpstream, Turn},
};

/// Polls `check` until it holds (the watcher needs a quiet period), or panics after 15 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..300 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

async fn tool_names(host: &TestHost) -> Vec<String> {
    let tools: Vec<Value> = host.get("/tools").await.json().await.unwrap();
    tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The tool names the host offered the model in its `i`-th request.
fn offered_names(upstream: &ScriptedUpstream, i: usize) -> Vec<String> {
    upstream.received()[i].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

const IMPOSTOR: &str = "An impostor (test plugin).";

/// The description of the `list_files` the host offers, if any.
async fn list_files_description(host: &TestHost) -> Option<String> {
    let tools: Vec<Value> = host.get("/tools").await.json().await.unwrap();
    tools
        .iter()
        .find(|t| t["function"]["name"] == "list_files")
        .map(|t| t["function"]["description"].as_str().unwrap().to_owned())
}

/// Deploys `lib` as the folder's `name` the way users are told to: copy under a dot-name,
/// then rename into place.
fn deploy(host: &TestHost, lib: &Path, name: &str) {
    let tmp = host.dropin_dir().join(format!(".{name}.tmp"));
    std::fs::copy(lib, &tmp).unwrap();
    std::fs::rename(&tmp, host.dropin_dir().join(name)).unwrap();
}

/// A host with four built-ins (no `list_files`) and a drop-in folder.
async fn host_without_list_files(upstream: &ScriptedUpstream) -> (TestHost, HostConfig) {
    host_without_list_files_timing_out_after(upstream, 2.0).await
}

async fn host_without_list_files_timing_out_after(
    upstream: &ScriptedUpstream,
    call_timeout_secs: f64,
) -> (TestHost, HostConfig) {
    let mut config = HostConfig::builtins().upstream(upstream);
    config.call_timeout_secs = call_timeout_secs;
    config
        .load
        .retain(|p| !p.ends_with("librojos_tool_list_files.so"));
    config.dropin = true;
    (TestHost::start(config.clone()).await, config)
}

fn chat_calling(tool: &str, args: Value) -> Vec<Turn> {
    vec![Turn::tool_calls(&[("d1", tool, args)]), Turn::text("done")]
}

#[tokio::test]
async fn a_plugin_moved_in_is_offered_and_called_then_replaced_then_removed() {
    let upstream = ScriptedUpstream::start(chat_calling("list_files", json!({"path": "."}))).await;
    let (host, _) = host_without_list_files(&upstream).await;
    assert!(!tool_names(&host).await.contains(&"list_files".to_owned()));

    deploy(&host, &plugin_lib("rojos_tool_list_files"), "liblist.so");
    eventually("list_files is offered", || async {
        tool_names(&host).await.contains(&"list_files".to_owned())
    })
    .await;
    std::fs::create_dir_all(host.project_root("demo")).unwrap();
    std::fs::write(host.project_root("demo").join("a.txt"), "a").unwrap();
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "list"}))
            .await,
    )
    .await;
    assert_eq!(
        stream.results()[0],
        (
            "list_files".to_owned(),
            true,
            r#"[{"name":"a.txt","type":"file"}]"#.to_owned()
        )
    );
    assert!(
        offered_names(&upstream, 0).contains(&"list_files".to_owned()),
        "offered to the model"
    );

    // Replaced by another version of the same tool name: the new behaviour is served.
    deploy(
        &host,
        &plugin_lib("rojos_test_dup_list_files"),
        "liblist.so",
    );
    upstream.push(chat_calling("list_files", json!({})));
    eventually("the new version is served", || async {
        let description = host.get("/tools").await.json::<Vec<Value>>().await.unwrap();
        description
            .iter()
            .any(|t| t["function"]["description"] == "An impostor (test plugin).")
    })
    .await;
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "list"}))
            .await,
    )
    .await;
    assert_eq!(stream.results()[0].2, r#"["impostor"]"#);

    // Removed: gone from the offer, and a call to it is an error result.
    std::fs::remove_file(host.dropin_dir().join("liblist.so")).unwrap();
    eventually("list_files is gone", || async {
        !tool_names(&host).await.contains(&"list_files".to_owned())
    })
    .await;
    upstream.push(chat_calling("list_files", json!({"path": "."})));
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "list"}))
            .await,
    )
    .await;
    let (_, ok, result) = &stream.results()[0];
    assert!(!ok);
    assert!(
        result.starts_with("error: unknown tool \"list_files\""),
        "{result}"
    );
}

#[tokio::test]
async fn bad_files_leave_the_host_serving_and_the_other_tools_working() {
    let upstream = ScriptedUpstream::start(vec![]).await;
    let (host, _) = host_without_list_files(&upstream).await;
    let dir = host.dropin_dir();
    let real = std::fs::read(plugin_lib("rojos_tool_list_files")).unwrap();
    std::fs::write(
        dir.join("libgarbage.so"),
        b"\x13\x37 definitely not a library",
    )
    .unwrap();
    std::fs::write(dir.join("libtruncated.so"), &real[..real.len() / 2]).unwrap();
    deploy(
        &host,
        &plugin_lib("rojos_test_other_version"),
        "libother.so",
    );
    // Two drop-ins with the same tool name: the first by file name wins.
    deploy(
        &host,
        &plugin_lib("rojos_test_dup_list_files"),
        "libzz_clash.so",
    );
    deploy(&host, &plugin_lib("rojos_tool_list_files"), "libaa_list.so");
    // libaa_list.so sorts before libzz_clash.so, so once both are loaded the real
    // list_files holds the name, whichever the watcher saw first.
    eventually("the real list_files holds the name", || async {
        list_files_description(&host)
            .await
            .is_some_and(|d| d != IMPOSTOR)
    })
    .await;
    assert_eq!(tool_names(&host).await.len(), 5);

    // A library copied over a loaded one in place: the half-written file is refused (the
    // impostor takes the name meanwhile) and the host keeps serving; the completed file is
    // loaded once it is quiet.
    std::fs::write(dir.join("libaa_list.so"), &real[..1000]).unwrap();
    eventually("the half-written file is refused", || async {
        list_files_description(&host).await.as_deref() == Some(IMPOSTOR)
    })
    .await;
    assert!(host.get("/healthz").await.status().is_success());
    std::fs::write(dir.join("libaa_list.so"), &real).unwrap();
    eventually("the completed file serves again", || async {
        list_files_description(&host)
            .await
            .is_some_and(|d| d != IMPOSTOR)
    })
    .await;
    std::fs::remove_file(dir.join("libzz_clash.so")).unwrap();

    // The folder deleted and recreated.
    std::fs::remove_dir_all(&dir).unwrap();
    eventually("drop-in tools are gone with the folder", || async {
        !tool_names(&host).await.contains(&"list_files".to_owned())
    })
    .await;
    std::fs::create_dir(&dir).unwrap();
    deploy(&host, &plugin_lib("rojos_tool_list_files"), "liblist.so");
    eventually("the recreated folder is watched", || async {
        tool_names(&host).await.contains(&"list_files".to_owned())
    })
    .await;
}

#[tokio::test]
async fn a_panicking_drop_in_gives_an_error_result_and_a_hanging_one_times_out_while_others_serve()
{
    let upstream = ScriptedUpstream::start(vec![]).await;
    // Long enough that the other chat surely ends first, even on a loaded machine.
    let (host, _) = host_without_list_files_timing_out_after(&upstream, 8.0).await;
    deploy(&host, &plugin_lib("rojos_test_panic_tool"), "libpanic.so");
    deploy(&host, &plugin_lib("rojos_test_hang_tool"), "libhang.so");
    eventually("both are offered", || async {
        let names = tool_names(&host).await;
        names.contains(&"panic_tool".to_owned()) && names.contains(&"hang_tool".to_owned())
    })
    .await;

    upstream.push(chat_calling("panic_tool", json!({})));
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "panic"}))
            .await,
    )
    .await;
    assert_eq!(
        stream.results()[0].2,
        "error: the tool panicked: deliberate test panic"
    );

    // hang_tool blocks past the 8 s call timeout; meanwhile another chat is served.
    // One queue serves both chats, in the order their requests arrive.
    upstream.push([Turn::tool_calls(&[(
        "h1",
        "hang_tool",
        json!({"seconds": 10}),
    )])]);
    let hung = host
        .chat(json!({"projectId": "demo", "message": "hang"}))
        .await;
    let hung = tokio::spawn(Stream::read(hung));
    eventually("the hanging chat reached the model", || async {
        upstream.received().len() >= 3
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    upstream.push(chat_calling(
        "create_directory",
        json!({"path": "meanwhile"}),
    ));
    upstream.push([Turn::text("gave up waiting")]);
    let other = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "mkdir"}))
            .await,
    )
    .await;
    assert!(other.results()[0].1, "{other:?}");
    assert!(
        !hung.is_finished(),
        "the other chat finished while the hung call was still running"
    );
    let hung = hung.await.unwrap();
    assert_eq!(
        hung.results()[0].2,
        "error: tool hang_tool did not finish within 8.0 s; its worker was stopped"
    );
}

#[tokio::test]
async fn a_tools_toggle_edited_in_the_config_applies_to_the_next_message() {
    let upstream = ScriptedUpstream::start(chat_calling(
        "write_text_content",
        json!({"path": "t.txt", "text": "x"}),
    ))
    .await;
    let config = HostConfig::builtins().upstream(&upstream);
    let host = TestHost::start(config.clone()).await;
    assert_eq!(tool_names(&host).await.len(), 5);

    let edited = config.clone().with("[rojos.default]\nprovider = \"scripted\"\ntools = [\"list_files\", \"get_text_content\"]\n");
    host.rewrite_config(&edited);
    eventually("the new toggle applies", || async {
        tool_names(&host).await.len() == 2
    })
    .await;
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "write"}))
            .await,
    )
    .await;
    assert!(
        !stream.results()[0].1,
        "a tool toggled off is not run: {stream:?}"
    );
    assert!(!host.project_root("demo").join("t.txt").exists());
    let offered = offered_names(&upstream, 0);
    assert_eq!(offered, ["get_text_content", "list_files"]);

    // A new rojo appears without a restart.
    let with_new_rojo = edited
        .clone()
        .with("[rojos.writer]\nprovider = \"scripted\"\ntools = [\"write_text_content\"]\n");
    host.rewrite_config(&with_new_rojo);
    eventually("the new rojo exists", || async {
        host.get("/tools?rojo=writer").await.status() == 200
    })
    .await;

    // An invalid edit is refused and the running configuration stays.
    host.rewrite_config(
        &with_new_rojo
            .clone()
            .with("[rojos.broken]\nprovider = \"nowhere\"\n"),
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(host.get("/tools?rojo=broken").await.status(), 400);
    assert_eq!(host.get("/tools?rojo=writer").await.status(), 200);
    assert_eq!(tool_names(&host).await.len(), 2);
}

#[tokio::test]
async fn a_drop_in_folder_other_users_may_write_to_is_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let dropin = dir.path().join("plugins.d");
    std::fs::create_dir(&dropin).unwrap();
    std::fs::set_permissions(&dropin, std::fs::Permissions::from_mode(0o777)).unwrap();
    let text = "[plugins]\ndir = \"plugins.d\"\n";
    let config =
        rojos::config::ConfigFile::parse(text, &dir.path().join("rojos.toml"), dir.path(), &|_| {
            None
        })
        .unwrap();
    let e = rojos::state::AppState::start(config)
        .expect_err("a world-writable folder must be refused")
        .to_string();
    assert!(
        e.contains("is writable by group or others (mode 777)"),
        "{e}"
    );
}

#[tokio::test]
async fn the_example_user_tool_is_loaded_from_the_drop_in_folder_and_called() {
    let upstream =
        ScriptedUpstream::start(chat_calling("search_text", json!({"query": "needle"}))).await;
    let (host, _) = host_without_list_files(&upstream).await;
    std::fs::create_dir_all(host.project_root("demo").join("notes")).unwrap();
    std::fs::write(
        host.project_root("demo").join("notes/a.txt"),
        "hay\nthe needle is here\nhay\n",
    )
    .unwrap();
    deploy(&host, &plugin_lib("search_text"), "libsearch_text.so");
    eventually("search_text is offered", || async {
        tool_names(&host).await.contains(&"search_text".to_owned())
    })
    .await;
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "find the needle"}))
            .await,
    )
    .await;
    let (name, ok, result) = &stream.results()[0];
    assert_eq!((name.as_str(), *ok), ("search_text", true), "{result}");
    let matches: Value = serde_json::from_str(result).unwrap();
    assert_eq!(
        matches,
        json!([{"path": "notes/a.txt", "line": 2, "text": "the needle is here"}])
    );
}

#[tokio::test]
async fn move_path_and_delete_path_work_through_a_chat_and_refuse_the_root() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[
            (
                "m1",
                "move_path",
                json!({"from": "a.txt", "to": "docs/a.txt"}),
            ),
            (
                "m2",
                "move_path",
                json!({"from": "b.txt", "to": "docs/a.txt"}),
            ),
            (
                "d1",
                "delete_path",
                json!({"path": "docs", "recursive": true}),
            ),
            ("d2", "delete_path", json!({"path": ".", "recursive": true})),
        ]),
        Turn::text("done"),
    ])
    .await;
    let mut config = HostConfig::builtins().upstream(&upstream);
    config.load.push(plugin_lib("rojos_tool_move_path"));
    config.load.push(plugin_lib("rojos_tool_delete_path"));
    let host = TestHost::start(config).await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("a.txt"), "a").unwrap();
    std::fs::write(root.join("b.txt"), "b").unwrap();
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "tidy up"}))
            .await,
    )
    .await;
    let results = stream.results();
    assert!(results[0].1, "{results:?}");
    assert!(
        !results[1].1 && results[1].2.contains("docs/a.txt"),
        "overwrite refused: {results:?}"
    );
    assert!(results[2].1, "{results:?}");
    assert!(
        !results[3].1 && results[3].2.contains("project root"),
        "{results:?}"
    );
    assert!(root.is_dir() && root.join("b.txt").is_file() && !root.join("docs").exists());
}

#[tokio::test]
async fn a_model_turn_keeps_its_tools_while_the_folder_changes_under_it() {
    let slow_call = Turn::tool_calls(&[("s1", "list_files", json!({"path": "."}))])
        .chunk_delay(Duration::from_millis(150));
    let upstream = ScriptedUpstream::start(vec![slow_call, Turn::text("done")]).await;
    let (host, _) = host_without_list_files(&upstream).await;
    deploy(&host, &plugin_lib("rojos_tool_list_files"), "liblist.so");
    eventually("list_files is offered", || async {
        tool_names(&host).await.contains(&"list_files".to_owned())
    })
    .await;
    let response = host
        .chat(json!({"projectId": "demo", "message": "list"}))
        .await;
    let chat = tokio::spawn(Stream::read(response));
    // While the model is still streaming its call, the plugin is removed.
    eventually("the model turn started", || async {
        !upstream.received().is_empty()
    })
    .await;
    std::fs::remove_file(host.dropin_dir().join("liblist.so")).unwrap();
    eventually("list_files is unregistered", || async {
        !tool_names(&host).await.contains(&"list_files".to_owned())
    })
    .await;
    assert!(
        !chat.is_finished(),
        "the turn was still streaming when the tool went away"
    );
    let stream = chat.await.unwrap();
    // The turn that offered the tool runs it; the next turn no longer offers it.
    assert!(stream.results()[0].1, "{stream:?}");
    assert!(offered_names(&upstream, 0).contains(&"list_files".to_owned()));
    assert!(!offered_names(&upstream, 1).contains(&"list_files".to_owned()));
}

#[tokio::test]
async fn a_call_running_on_a_removed_library_finishes() {
    let upstream = ScriptedUpstream::start(chat_calling("hang_tool", json!({"seconds": 3}))).await;
    let (host, _) = host_without_list_files_timing_out_after(&upstream, 8.0).await;
    deploy(&host, &plugin_lib("rojos_test_hang_tool"), "libhang.so");
    eventually("hang_tool is offered", || async {
        tool_names(&host).await.contains(&"hang_tool".to_owned())
    })
    .await;
    let response = host
        .chat(json!({"projectId": "demo", "message": "wait"}))
        .await;
    let chat = tokio::spawn(Stream::read(response));
    eventually("the call is running", || async {
        upstream.received().len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::remove_file(host.dropin_dir().join("libhang.so")).unwrap();
    eventually("hang_tool is unregistered", || async {
        !tool_names(&host).await.contains(&"hang_tool".to_owned())
    })
    .await;
    assert!(
        !chat.is_finished(),
        "the call was still running when its library went away"
    );
    let stream = chat.await.unwrap();
    assert_eq!(
        stream.results()[0],
        ("hang_tool".to_owned(), true, r#"{"slept":3.0}"#.to_owned())
    );
}
