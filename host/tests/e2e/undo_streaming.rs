//! Checkpoint records stream (docs/security.md, "Checkpoint records stream"): recording and
//! undoing the delete of a 100 MiB folder leaves the real binary's peak memory (its own
//! `VmHWM` in `/proc/<pid>/status`) far below the data, and the folder comes back byte for
//! byte.

use serde_json::{json, Value};

use crate::{
    support::{
        binary::RunningBinary,
        host::{chat_at, client, TOKEN},
        ndjson::Stream,
        status_kib,
        upstream::{ScriptedUpstream, Turn},
    },
    undo::{config_with, tree},
};

/// Files in the deleted folder, and the size of each: 100 MiB in all.
const FILES: usize = 100;
const SIZE: usize = 1 << 20;
/// How much the server's peak may grow over its resident memory before: far below the data.
const BOUND_MIB: u64 = 32;

#[tokio::test]
async fn recording_and_undoing_a_100_mib_delete_stays_far_below_the_data_in_memory() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[(
            "d",
            "delete_path",
            json!({"path": "big", "recursive": true}),
        )]),
        Turn::text("deleted"),
    ])
    .await;
    let mut config = config_with(&upstream, "[limits]\ncheckpoint_bytes = 1073741824\n");
    // Recording 100 MiB takes longer than a test's usual call limit on a busy machine.
    config.call_timeout_secs = 300.0;
    let dir = config.in_temp_folder();
    let big = dir.path().join("storage/demo/root/big");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..FILES {
        // Bytes that differ per file and per position, so nothing is shared or zero.
        let bytes: Vec<u8> = (0..SIZE).map(|n| (n * 31 + i * 7) as u8).collect();
        std::fs::write(big.join(format!("part-{i:03}.bin")), bytes).unwrap();
    }
    let files = tree(&big);
    let binary = RunningBinary::start(dir.path(), "warn", &[]);
    let url = binary.url();
    let pid = binary.id();
    let before_kib = status_kib(pid, "VmRSS");
    let grown_mib = || status_kib(pid, "VmHWM").saturating_sub(before_kib) / 1024;

    let body = json!({"projectId": "demo", "message": "delete big"});
    let stream = Stream::read(chat_at(&url, &body).await).await;
    let results = stream.results();
    assert!(results.iter().all(|(_, ok, _)| *ok), "{results:?}");
    assert!(!big.exists(), "the folder was deleted");
    let recorded = grown_mib();
    assert!(
        recorded < BOUND_MIB,
        "recording a {} MiB delete grew the server's peak by {recorded} MiB",
        (FILES * SIZE) >> 20
    );

    let conversation = stream.done().0;
    let response = client()
        .post(format!("{url}/conversations/{conversation}/undo"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(tree(&big), files, "every file back byte for byte");
    let undone = grown_mib();
    assert!(
        undone < BOUND_MIB,
        "recording and undoing a {} MiB delete grew the server's peak by {undone} MiB",
        (FILES * SIZE) >> 20
    );
}
