//! The project file endpoints (docs/api.md, "Project files") over real HTTP: listing,
//! reading, downloading and uploading, each status (200/201/400/401/403/404/409/413), and
//! the hostile paths (`..`, absolute, NUL, backslash, links that lead out), which get
//! fs-guard's own refusals and reach nothing outside the project root.

use std::os::unix::fs::symlink;

use reqwest::{Method, Response};
use serde_json::Value;

use crate::support::host::{client, HostConfig, TestHost, DEMO_TOKEN, TOKEN};

/// A request to `path` (with its query) as `token`, with `body` for a `PUT`.
async fn call(
    host: &TestHost,
    method: Method,
    token: Option<&str>,
    path: &str,
    body: Option<Vec<u8>>,
) -> Response {
    let mut request = client().request(method, format!("{}{path}", host.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    request.send().await.expect("request reaches the host")
}

async fn get(host: &TestHost, path: &str) -> Response {
    call(host, Method::GET, Some(TOKEN), path, None).await
}

async fn put(host: &TestHost, path: &str, body: &[u8]) -> Response {
    call(host, Method::PUT, Some(TOKEN), path, Some(body.to_vec())).await
}

/// Asserts the status and returns the JSON body.
async fn json(response: Response, status: u16) -> Value {
    let got = response.status().as_u16();
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(got, status, "{body}");
    body
}

/// A percent-encoded query value.
fn q(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A host whose project `p1` holds `docs/notes.md`, `docs/sub/`, `a.txt`, `logo.bin`
/// (binary), a link inside (`inner -> docs`) and links that lead out (`out -> /etc`,
/// `outfile -> ../../../secret.txt`), with a secret file outside the project.
async fn host_with_files() -> TestHost {
    let host =
        TestHost::start(HostConfig::builtins().with("[limits]\nmax_upload_bytes = 2048\n")).await;
    let root = host.project_root("p1");
    std::fs::create_dir_all(root.join("docs/sub")).unwrap();
    std::fs::write(root.join("docs/notes.md"), "# Notes\nline 2\n").unwrap();
    std::fs::write(root.join("a.txt"), "alpha").unwrap();
    std::fs::write(root.join("logo.bin"), b"\x89PNG\0\x01\x02").unwrap();
    std::fs::write(host.dir.path().join("secret.txt"), "OUTSIDE-SECRET").unwrap();
    symlink("docs", root.join("inner")).unwrap();
    symlink("/etc", root.join("out")).unwrap();
    symlink("../../../secret.txt", root.join("outfile")).unwrap();
    host
}

#[tokio::test]
async fn a_folder_lists_folders_first_with_type_size_and_time() {
    let host = host_with_files().await;
    let body = json(get(&host, "/projects/p1/files").await, 200).await;
    assert_eq!(body["path"], ".");
    let names: Vec<&str> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // Folders first (the in-root link to a folder counts as one), then files; links that
    // lead out are left out, as list_files leaves them out.
    assert_eq!(names, ["docs", "inner", "a.txt", "logo.bin"]);
    let a = &body["entries"][2];
    assert_eq!(a["type"], "file");
    assert_eq!(a["size"], 5);
    assert_eq!(a["symlink"], false);
    assert!(a["modifiedAt"].as_str().unwrap().ends_with('Z'), "{a}");
    assert_eq!(body["entries"][1]["symlink"], true);
    assert_eq!(body["truncated"], false);

    let docs = json(get(&host, "/projects/p1/files?path=docs").await, 200).await;
    assert_eq!(docs["entries"][0]["name"], "sub");
    assert_eq!(docs["entries"][0]["type"], "directory");
    assert_eq!(docs["entries"][1]["name"], "notes.md");
}

#[tokio::test]
async fn a_project_without_a_folder_lists_as_empty_and_is_not_created() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let body = json(get(&host, "/projects/fresh/files").await, 200).await;
    assert_eq!(body["entries"], serde_json::json!([]));
    assert!(!host.project_root("fresh").exists());
    let missing = json(get(&host, "/projects/fresh/files?path=docs").await, 404).await;
    assert_eq!(missing["error"], "'docs' does not exist");
    let file = json(
        get(&host, "/projects/fresh/files/content?path=a.txt").await,
        404,
    )
    .await;
    assert_eq!(file["error"], "'a.txt' does not exist");
    assert!(!host.project_root("fresh").exists());
}

#[tokio::test]
async fn a_text_file_is_returned_as_text_with_its_meta() {
    let host = host_with_files().await;
    let body = json(
        get(&host, "/projects/p1/files/content?path=docs/notes.md").await,
        200,
    )
    .await;
    assert_eq!(body["text"], "# Notes\nline 2\n");
    assert_eq!(body["size"], 15);
    assert_eq!(body["path"], "docs/notes.md");
    assert!(body.get("note").is_none());
    // Through an in-root link, as the tools follow it.
    let linked = json(
        get(&host, "/projects/p1/files/content?path=inner/notes.md").await,
        200,
    )
    .await;
    assert_eq!(linked["text"], "# Notes\nline 2\n");
}

#[tokio::test]
async fn a_binary_or_over_limit_file_answers_with_a_note_instead_of_bytes() {
    let host =
        TestHost::start(HostConfig::builtins().with("[limits]\nmax_read_bytes = 16\n")).await;
    let root = host.project_root("p1");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("logo.bin"), b"\x89PNG\0\x01\x02").unwrap();
    std::fs::write(root.join("big.txt"), "x".repeat(17)).unwrap();
    let binary = json(
        get(&host, "/projects/p1/files/content?path=logo.bin").await,
        200,
    )
    .await;
    assert_eq!(binary["reason"], "notText");
    assert!(binary.get("text").is_none());
    assert_eq!(
        binary["note"],
        "'logo.bin' contains a NUL byte at offset 4: it is binary (or UTF-16), not UTF-8 \
         text; download it to open it elsewhere"
    );
    let big = json(
        get(&host, "/projects/p1/files/content?path=big.txt").await,
        200,
    )
    .await;
    assert_eq!(big["reason"], "tooLarge");
    assert_eq!(big["size"], 17);
    assert!(
        big["note"]
            .as_str()
            .unwrap()
            .starts_with("'big.txt' is 17 bytes, over the read limit of 16 bytes"),
        "{big}"
    );
}

#[tokio::test]
async fn a_download_sends_the_raw_bytes_as_an_attachment() {
    let host = host_with_files().await;
    let response = get(&host, "/projects/p1/files/content?path=logo.bin&download=1").await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert_eq!(
        headers["content-disposition"],
        "attachment; filename=\"logo.bin\"; filename*=UTF-8''logo.bin"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(&response.bytes().await.unwrap()[..], b"\x89PNG\0\x01\x02");
}

#[tokio::test]
async fn a_download_over_the_transfer_limit_is_413() {
    let host = host_with_files().await;
    std::fs::write(host.project_root("p1").join("big.bin"), vec![7u8; 2049]).unwrap();
    let body = json(
        get(&host, "/projects/p1/files/content?path=big.bin&download=1").await,
        413,
    )
    .await;
    assert_eq!(
        body["error"],
        "'big.bin' is 2049 bytes, over the read limit of 2048 bytes"
    );
}

#[tokio::test]
async fn an_upload_creates_the_file_and_refuses_to_replace_one_unless_asked() {
    let host = host_with_files().await;
    let root = host.project_root("p1");
    let created = json(
        put(
            &host,
            "/projects/p1/files/content?path=up/new.bin",
            b"\0bytes\xff",
        )
        .await,
        201,
    )
    .await;
    assert_eq!(created["replaced"], false);
    assert_eq!(created["size"], 7);
    assert_eq!(
        std::fs::read(root.join("up/new.bin")).unwrap(),
        b"\0bytes\xff"
    );

    let refused = json(
        put(&host, "/projects/p1/files/content?path=a.txt", b"new").await,
        409,
    )
    .await;
    assert_eq!(
        refused["error"],
        "'a.txt' already exists: upload with overwrite=1 to replace it, or choose another name"
    );
    assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"alpha");

    let replaced = json(
        put(
            &host,
            "/projects/p1/files/content?path=a.txt&overwrite=1",
            b"new",
        )
        .await,
        200,
    )
    .await;
    assert_eq!(replaced["replaced"], true);
    assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"new");
    // No temporary name is left beside the files.
    let names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

#[tokio::test]
async fn an_upload_over_the_limit_is_413_and_writes_nothing() {
    let host = host_with_files().await;
    let body = json(
        put(
            &host,
            "/projects/p1/files/content?path=big.bin",
            &[1u8; 2049],
        )
        .await,
        413,
    )
    .await;
    assert_eq!(
        body["error"],
        "the file is over the upload limit of 2048 bytes ([limits] max_upload_bytes)"
    );
    assert!(!host.project_root("p1").join("big.bin").exists());
    // Exactly the limit is accepted.
    json(
        put(
            &host,
            "/projects/p1/files/content?path=ok.bin",
            &[1u8; 2048],
        )
        .await,
        201,
    )
    .await;
}

#[tokio::test]
async fn every_file_route_needs_a_token_in_scope_and_a_valid_project_id() {
    let host = host_with_files().await;
    let routes = [
        (Method::GET, "/projects/p1/files"),
        (Method::GET, "/projects/p1/files/content?path=a.txt"),
        (Method::PUT, "/projects/p1/files/content?path=x.txt"),
    ];
    for (method, path) in routes {
        let body = (method == Method::PUT).then(|| b"x".to_vec());
        let none = call(&host, method.clone(), None, path, body.clone()).await;
        assert_eq!(none.status(), 401, "{path}");
        let wrong = call(&host, method.clone(), Some("nope"), path, body.clone()).await;
        assert_eq!(wrong.status(), 401, "{path}");
        let other = call(&host, method.clone(), Some(DEMO_TOKEN), path, body.clone()).await;
        let other = json(other, 403).await;
        assert_eq!(other["error"], "this token is not allowed on project p1");
        let bad_id = path.replace("/p1/", "/..%2Fp2/");
        let bad = call(&host, method.clone(), Some(TOKEN), &bad_id, body).await;
        let bad = json(bad, 400).await;
        assert!(
            bad["error"]
                .as_str()
                .unwrap()
                .starts_with("invalid projectId"),
            "{bad}"
        );
    }
    assert!(!host.project_root("p1").join("x.txt").exists());
}

#[tokio::test]
async fn missing_paths_and_flags_are_explained() {
    let host = host_with_files().await;
    let body = json(get(&host, "/projects/p1/files/content").await, 400).await;
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("path is missing"),
        "{body}"
    );
    let body = json(
        get(&host, "/projects/p1/files/content?path=a.txt&download=yes").await,
        400,
    )
    .await;
    assert!(
        body["error"].as_str().unwrap().contains("download"),
        "{body}"
    );
    let body = json(
        get(&host, "/projects/p1/files/content?path=nope.txt").await,
        404,
    )
    .await;
    assert_eq!(body["error"], "'nope.txt' does not exist");
    let body = json(get(&host, "/projects/p1/files?path=a.txt").await, 400).await;
    assert_eq!(
        body["error"],
        "'a.txt' is not a folder, or one of the folders on the way is a file"
    );
    let body = json(
        get(&host, "/projects/p1/files/content?path=docs").await,
        400,
    )
    .await;
    assert_eq!(body["error"], "'docs' is a folder, not a file");
}

#[tokio::test]
async fn hostile_paths_get_fs_guard_refusals_and_reach_nothing_outside() {
    let host = host_with_files().await;
    let cases: [(&str, u16, &str); 8] = [
        (
            "../../../secret.txt",
            400,
            "leads outside the project: paths are relative to the project root",
        ),
        (
            "/etc/passwd",
            400,
            "leads outside the project: paths are relative to the project root",
        ),
        ("a\0b", 400, "contains a NUL character"),
        ("a\\b", 400, "contains a backslash"),
        (
            "out/passwd",
            400,
            "leads outside the project: paths are relative to the project root",
        ),
        (
            "outfile",
            400,
            "leads outside the project: paths are relative to the project root",
        ),
        ("", 400, "path is empty: use '.' for the project root"),
        ("C:/x", 400, "leads outside the project"),
    ];
    for (path, status, message) in cases {
        for route in [
            format!("/projects/p1/files/content?path={}", q(path)),
            format!("/projects/p1/files/content?path={}&download=1", q(path)),
            format!("/projects/p1/files?path={}", q(path)),
        ] {
            let body = json(get(&host, &route).await, status).await;
            let error = body["error"].as_str().unwrap();
            assert!(error.contains(message), "{route}: {error}");
            assert!(!error.contains("OUTSIDE-SECRET"), "{error}");
            assert!(path.contains("/etc") || !error.contains("/etc"), "{error}");
        }
        // A write to a link that leads out names no target (as write_text_content's does).
        let message = if path == "outfile" {
            "'outfile' is a symbolic link that does not lead to anything in the project"
        } else {
            message
        };
        let upload = format!("/projects/p1/files/content?path={}&overwrite=1", q(path));
        let body = json(put(&host, &upload, b"pwned").await, status).await;
        assert!(
            body["error"].as_str().unwrap().contains(message),
            "{upload}: {body}"
        );
    }
    // A new name with a control character is refused as the tools refuse it.
    let body = json(
        put(&host, "/projects/p1/files/content?path=a%0Ab.txt", b"x").await,
        400,
    )
    .await;
    assert_eq!(
        body["error"],
        "'a\\u{000a}b.txt': new names may not contain control, invisible or bidirectional \
         formatting characters (found U+000A); choose a name without it"
    );
    assert_eq!(
        std::fs::read_to_string(host.dir.path().join("secret.txt")).unwrap(),
        "OUTSIDE-SECRET"
    );
    assert!(!host.dir.path().join("storage/p1/secret.txt").exists());
}
