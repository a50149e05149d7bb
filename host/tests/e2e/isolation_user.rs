//! The user a plugin worker runs as when the server runs as root (as on this machine and in
//! CI): the owner of its project's root folder when that is not root, so the files a plugin
//! creates belong to the project's owner, and it cannot become root again; for a folder root
//! owns, `[plugins].worker_user` when it is set, else root with every capability dropped.

use std::os::unix::fs::MetadataExt;

use serde_json::json;

use crate::support::{
    host::{HostConfig, TestHost},
    hostile::call,
    plugin_lib,
    upstream::ScriptedUpstream,
};

/// A host whose `hostile_tool` runs in workers, on a loader of its own, with `plugins` in
/// `[plugins]`.
async fn host(upstream: &ScriptedUpstream, plugins: &str) -> TestHost {
    assert!(
        rustix::process::geteuid().is_root(),
        "these tests run the server as root, as this machine and CI do"
    );
    let mut config = HostConfig::builtins().upstream(upstream);
    config.load.push(plugin_lib("rojos_test_hostile_tool"));
    config.plugins.push_str("isolation = \"worker\"\n");
    config.plugins.push_str(plugins);
    config.own_loader = true;
    config.call_timeout_secs = 20.0;
    TestHost::start(config).await
}

#[tokio::test]
async fn a_worker_runs_as_the_owner_of_its_project_and_cannot_become_root_again() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, "").await;
    let owned = host.project_root("owned");
    std::fs::create_dir_all(&owned).unwrap();
    std::fs::write(owned.join("mine.txt"), "the owner's file").unwrap();
    std::os::unix::fs::chown(&owned, Some(1000), Some(1000)).unwrap();

    let (ok, ids) = call(&host, &upstream, "owned", json!({"act": "ids"})).await;
    assert!(ok, "{ids}");
    assert_eq!(ids, "uid=1000 1000 1000 gid=1000 1000 1000 groups=0");
    let (ok, read) = call(
        &host,
        &upstream,
        "owned",
        json!({"act": "read_root", "path": "mine.txt"}),
    )
    .await;
    assert!(ok && read == "the owner's file", "{read}");
    let (ok, wrote) = call(
        &host,
        &upstream,
        "owned",
        json!({"act": "write_root", "path": "made.txt"}),
    )
    .await;
    assert!(ok, "{wrote}");
    let made = std::fs::metadata(owned.join("made.txt")).unwrap();
    assert_eq!(
        (made.uid(), made.gid()),
        (1000, 1000),
        "the file belongs to the project's owner"
    );
    let (ok, again) = call(&host, &upstream, "owned", json!({"act": "setuid_root"})).await;
    assert!(
        !ok && again.contains("Operation not permitted"),
        "the plugin became root again: {again}"
    );

    // A folder root owns: root, with no capability (`worker_user` is not set).
    std::fs::create_dir_all(host.project_root("rooted")).unwrap();
    let (ok, ids) = call(&host, &upstream, "rooted", json!({"act": "ids"})).await;
    assert!(ok && ids.starts_with("uid=0 0 0 gid=0 0 0"), "{ids}");
    let (ok, caps) = call(&host, &upstream, "rooted", json!({"act": "caps"})).await;
    assert!(ok, "{caps}");
    assert_eq!(caps, "effective=0 permitted=0 bounding=0 ambient=0");
}

#[tokio::test]
async fn a_configured_worker_user_serves_the_folders_root_owns() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, "worker_user = \"65534:65534\"\n").await;
    std::fs::create_dir_all(host.project_root("rooted")).unwrap();
    let (ok, ids) = call(&host, &upstream, "rooted", json!({"act": "ids"})).await;
    assert!(ok, "{ids}");
    assert_eq!(ids, "uid=65534 65534 65534 gid=65534 65534 65534 groups=0");
    let (ok, caps) = call(&host, &upstream, "rooted", json!({"act": "caps"})).await;
    assert!(ok, "{caps}");
    assert_eq!(caps, "effective=0 permitted=0 bounding=0 ambient=0");
}
