//! Invisible characters in file names (docs/security.md, "Invisible characters in names"):
//! new names holding a zero-width, bidirectional or other format character are refused, by
//! the tools and by the files API alike, and names made outside Rojos are shown escaped in
//! the tools' results, the files API's listing and download names.

use serde_json::{json, Value};

use crate::support::{
    builtins_host_with as host_with, demo_message as message,
    host::{client, HostConfig, TestHost, TOKEN},
    ndjson::Stream,
    upstream::Turn,
};

/// The names planted outside Rojos: a right-to-left override that makes `exe` read as
/// `txt`, and a zero-width space.
const OVERRIDE: &str = "invoice\u{202e}txt.exe";
const ZERO_WIDTH: &str = "zero\u{200b}width.md";

#[tokio::test]
async fn the_files_api_refuses_new_names_with_invisible_characters() {
    let host = TestHost::start(HostConfig::builtins()).await;
    for (query, code) in [
        ("zero%E2%80%8Bwidth.txt", "U+200B"),
        ("word%E2%81%A0joiner.txt", "U+2060"),
        ("%EF%BB%BFbom.txt", "U+FEFF"),
        ("folder%E2%80%AE/x.txt", "U+202E"),
    ] {
        let response = client()
            .put(format!(
                "{}/projects/p1/files/content?path={query}",
                host.url
            ))
            .bearer_auth(TOKEN)
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{query}");
        let body: Value = response.json().await.unwrap();
        let error = body["error"].as_str().unwrap();
        assert!(
            error.contains(&format!(
                "new names may not contain control, invisible or bidirectional formatting \
                 characters (found {code}); choose a name without it"
            )),
            "{error}"
        );
        // The name in the message is escaped too.
        assert!(error.contains("\\u{"), "{error}");
    }
    let root = host.project_root("p1");
    let left: Vec<_> = std::fs::read_dir(&root)
        .map(|entries| entries.filter_map(Result::ok).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn the_tools_refuse_new_names_with_invisible_characters() {
    let (host, _upstream) = host_with(vec![
        Turn::tool_calls(&[
            (
                "call_write",
                "write_text_content",
                json!({"path": "notes\u{200b}.md", "text": "x"}),
            ),
            (
                "call_mkdir",
                "create_directory",
                json!({"path": "\u{2066}dir"}),
            ),
            (
                "call_tag",
                "write_text_content",
                json!({"path": "docs/tag\u{e0041}.md", "text": "x"}),
            ),
        ]),
        Turn::text("Refused."),
    ])
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("hello.txt"), "hi").unwrap();
    let stream = Stream::read(host.chat(message("make these")).await).await;
    let results = stream.results();
    assert_eq!(results.len(), 3, "{results:?}");
    for ((name, ok, result), code) in results.iter().zip(["U+200B", "U+2066", "U+E0041"]) {
        assert!(!ok, "{name} was run: {result}");
        assert!(
            result.contains(&format!(
                "new names may not contain control, invisible or bidirectional formatting \
                 characters (found {code})"
            )),
            "{name}: {result}"
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["hello.txt"]);
}

#[tokio::test]
async fn names_made_outside_are_shown_escaped_by_list_files() {
    let (host, upstream) = host_with(vec![
        Turn::tool_calls(&[("call_list", "list_files", json!({"path": "."}))]),
        Turn::text("Listed."),
    ])
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(OVERRIDE), "").unwrap();
    std::fs::write(root.join(ZERO_WIDTH), "").unwrap();
    let stream = Stream::read(host.chat(message("what is there?")).await).await;
    let (_, ok, result) = &stream.results()[0];
    assert!(ok, "{result}");
    assert_eq!(
        result,
        r#"[{"name":"invoice\u202etxt.exe","type":"file"},{"name":"zero\u200bwidth.md","type":"file"}]"#
    );
    // The model is given the same escaped text, which still parses to the exact names.
    let tool_message = upstream
        .received()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["tool_call_id"] == "call_list")
        .expect("the listing went upstream");
    assert_eq!(tool_message["content"], result.as_str());
    let parsed: Value = serde_json::from_str(result).unwrap();
    assert_eq!(parsed[0]["name"], OVERRIDE);
}

#[tokio::test]
async fn names_made_outside_are_shown_escaped_by_the_files_api_and_its_downloads() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let root = host.project_root("p1");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(OVERRIDE), "MZ").unwrap();
    std::fs::write(root.join(ZERO_WIDTH), "# z").unwrap();

    let listing = host.get("/projects/p1/files").await;
    assert_eq!(listing.status(), 200);
    let text = listing.text().await.unwrap();
    assert!(
        !text.contains('\u{202e}') && !text.contains('\u{200b}'),
        "invisible characters in the answer: {text:?}"
    );
    assert!(text.contains(r#""name":"invoice\u202etxt.exe""#), "{text}");
    assert!(text.contains(r#""name":"zero\u200bwidth.md""#), "{text}");
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["entries"][0]["name"], OVERRIDE);

    let download = client()
        .get(format!(
            "{}/projects/p1/files/content?path=invoice%E2%80%AEtxt.exe&download=1",
            host.url
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    let disposition = download.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        disposition,
        "attachment; filename=\"invoice_u_202e_txt.exe\"; \
         filename*=UTF-8''invoice%5Cu%7B202e%7Dtxt.exe"
    );
    assert_eq!(download.bytes().await.unwrap().as_ref(), b"MZ");
}
