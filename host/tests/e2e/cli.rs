//! The `rojos` binary itself: `rojos tools` prints what `GET /tools` serves, and `rojos check`
//! refuses a bad config or plugin with a message naming it.

use std::process::Command;

use serde_json::Value;

use crate::support::host::{HostConfig, TestHost};

fn rojos(config_dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rojos"))
        .args([
            "--config",
            &config_dir.join("rojos.toml").display().to_string(),
        ])
        .args(args)
        .output()
        .expect("run rojos")
}

#[tokio::test]
async fn rojos_tools_prints_the_same_definitions_as_get_tools() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let served: Value = host.get("/tools?rojo=default").await.json().await.unwrap();
    let output = rojos(host.config_dir(), &["tools", "--rojo", "default"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed, served);
}

#[test]
fn rojos_check_names_the_bad_key_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rojos.toml"), "[server]\nbnid = \"x\"\n").unwrap();
    let output = rojos(dir.path(), &["check"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown field `bnid`"), "{stderr}");
}

#[test]
fn rojos_check_names_a_bad_plugin_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.so"), "junk").unwrap();
    std::fs::write(
        dir.path().join("rojos.toml"),
        "[plugins]\nload = [\"junk.so\"]\n",
    )
    .unwrap();
    let output = rojos(dir.path(), &["check"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("junk.so': not a plugin library: not an ELF file (4 bytes)"),
        "{stderr}"
    );
}
