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

async fn probe(
    turns: Vec<crate::support::upstream::Turn>,
) -> (std::process::Output, Vec<serde_json::Value>) {
    let upstream = crate::support::upstream::ScriptedUpstream::start(turns).await;
    let dir = HostConfig::builtins().upstream(&upstream).in_temp_folder();
    let path = dir.path().to_owned();
    let output = tokio::task::spawn_blocking(move || rojos(&path, &["probe", "scripted"]))
        .await
        .unwrap();
    let bodies = upstream.received().into_iter().map(|r| r.body).collect();
    (output, bodies)
}

#[tokio::test]
async fn rojos_probe_reports_a_working_provider() {
    use crate::support::upstream::Turn;
    let (output, requests) = probe(vec![
        Turn::tool_calls(&[("p1", "get_time", serde_json::json!({"timezone": "UTC"}))]),
        Turn::text("It is 12:00 in UTC."),
    ])
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("streaming      ok"), "{stdout}");
    assert!(
        stdout.contains(r#"tool call      ok: get_time {"timezone":"UTC"} (id p1)"#),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"follow-up      ok: "It is 12:00 in UTC.""#),
        "{stdout}"
    );
    // The follow-up answered the call with one tool message.
    assert_eq!(requests[1]["messages"][3]["role"], "tool");
    assert_eq!(requests[1]["messages"][3]["tool_call_id"], "p1");
}

#[tokio::test]
async fn rojos_probe_names_what_failed() {
    use crate::support::upstream::Turn;
    let (output, _) = probe(vec![Turn::text("I do not use tools.")]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stdout.contains(r#"tool call      FAILED: the model answered in text instead of calling get_time: "I do not use tools.""#),
        "{stdout}"
    );
    let (output, _) = probe(vec![Turn::status(401, "invalid api key")]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("streaming      FAILED")
            && stdout.contains("HTTP 401")
            && stdout.contains("invalid api key"),
        "{stdout}"
    );
}

#[tokio::test]
async fn without_a_configured_token_the_server_prints_one_that_works() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let lib = crate::support::plugin_lib("rojos_tool_list_files")
        .display()
        .to_string();
    std::fs::write(
        dir.path().join("rojos.toml"),
        format!("[server]\nbind = \"127.0.0.1:0\"\n[plugins]\nload = [{lib:?}]\n[providers.p]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n[rojos.default]\nprovider = \"p\"\n"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rojos"))
        .args([
            "--config",
            &dir.path().join("rojos.toml").display().to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines: Vec<String> = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .take(3)
            .map(|l| l.unwrap())
            .collect()
    })
    .await
    .unwrap();
    let url = lines[0]
        .strip_prefix("rojos listening on ")
        .expect("the address line")
        .to_owned();
    let panel = lines[2].trim();
    let token = panel
        .split("#token=")
        .nth(1)
        .expect("the panel link carries the token");
    assert!(panel.starts_with(&url), "{lines:?}");
    let tools = reqwest::Client::new()
        .get(format!("{url}tools"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let unauthorized = reqwest::Client::new()
        .get(format!("{url}tools"))
        .send()
        .await
        .unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(tools.status(), 200);
    assert_eq!(unauthorized.status(), 401);
}
