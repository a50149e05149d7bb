//! A folder listing cut at `[limits] max_list_entries` through the files API
//! (docs/api.md, "Project files"): it keeps the folders first, then the files with the
//! smallest names, and says how many entries were left out, even when every file's name sorts
//! before every folder's.

use serde_json::Value;

use crate::support::host::{HostConfig, TestHost};

#[tokio::test]
async fn a_capped_listing_keeps_every_folder_first_and_says_how_many_were_left_out() {
    let host =
        TestHost::start(HostConfig::builtins().with("[limits]\nmax_list_entries = 4\n")).await;
    let root = host.project_root("p1");
    for i in 0..30 {
        std::fs::create_dir_all(root.join("mixed")).unwrap();
        std::fs::write(root.join(format!("mixed/a{i:02}.txt")), "").unwrap();
    }
    for folder in ["src", "tests"] {
        std::fs::create_dir_all(root.join("mixed").join(folder)).unwrap();
    }
    let response = host.get("/projects/p1/files?path=mixed").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let shown: Vec<(&str, &str)> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shown,
        [
            ("src", "directory"),
            ("tests", "directory"),
            ("a00.txt", "file"),
            ("a01.txt", "file"),
        ]
    );
    assert_eq!(body["truncated"], true);
    assert_eq!(body["total"], 32);
    assert_eq!(body["omitted"], 28);
}
