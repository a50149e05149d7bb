//! File transfers under load (docs/configuration.md, "Transfers"; docs/security.md, "File
//! transfers are bounded"): many uploads held open just short of their end and many
//! downloads nobody reads leave the server's memory within the transfer bound (measured in
//! the real binary's own `/proc/<pid>/status`), the transfers past the caps are refused with
//! `503` and `Retry-After`, a stalled upload is cut by `[limits] body_timeout_secs` with
//! `408`, and an upload that fails midway leaves no file and no temporary file.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::binary::RunningBinary;
use crate::support::host::{HostConfig, TestHost, DEMO_TOKEN, TOKEN};
use crate::support::status_kib;

/// Uploads and downloads started at once, as the attack did.
const CLIENTS: usize = 50;
/// The size of each: 10 MiB, the default upload limit.
const SIZE: usize = 10 << 20;

/// A connection to `address` with the request head `head` sent, reads and writes given up
/// after 30 s (a guard against a test that would hang, not a measure).
fn connect(address: &str, head: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).expect("connect to the host");
    stream
        .set_write_timeout(Some(Duration::from_secs(30)))
        .expect("a write timeout");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a read timeout");
    stream.write_all(head.as_bytes()).expect("the request head");
    stream
}

/// The head of an upload of `length` bytes to `path` of `project`.
fn upload_head(project: &str, path: &str, token: &str, length: usize) -> String {
    format!(
        "PUT /projects/{project}/files/content?path={path} HTTP/1.1\r\nHost: rojos\r\n\
         Authorization: Bearer {token}\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// What the server answered on `stream`, up to the end of its first JSON body (or all it
/// sent before closing).
fn answer(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
        }
        let text = String::from_utf8_lossy(&seen);
        if text.contains("\r\n\r\n") && text.trim_end().ends_with('}') {
            break;
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// The names in `folder` that are temporary files of a write.
fn temporary_files(folder: &Path) -> Vec<String> {
    std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| name.starts_with(".rojos-new-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (up to 30 s) until `check` holds; `what` names it in the failure.
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn fifty_stalled_uploads_and_fifty_unread_downloads_stay_within_the_transfer_bound() {
    let config = HostConfig::builtins().with(
        "[limits]\nmax_transfers = 16\nmax_transfers_per_token = 8\nbody_timeout_secs = 600\n",
    );
    let dir = config.in_temp_folder();
    let demo = dir.path().join("storage/demo/root");
    std::fs::create_dir_all(&demo).unwrap();
    std::fs::write(demo.join("big.bin"), vec![7u8; SIZE]).unwrap();
    let binary = RunningBinary::start(dir.path(), "warn", &[]);
    let address = binary.url().trim_start_matches("http://").to_owned();
    let pid = binary.id();
    let before_kib = status_kib(pid, "VmRSS");

    // Each upload sends all but its last KiB, then holds its connection open.
    let body = Arc::new(vec![b'u'; SIZE - 1024]);
    let uploads: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (address, body) = (address.clone(), Arc::clone(&body));
            std::thread::spawn(move || {
                let head = upload_head("p1", &format!("up{n}.bin"), TOKEN, SIZE);
                let mut stream = connect(&address, &head);
                // A refused upload's connection is closed under it: the write fails.
                let _ = stream.write_all(&body);
                stream
            })
        })
        .collect();
    let mut uploads: Vec<TcpStream> = uploads.into_iter().map(|t| t.join().unwrap()).collect();
    // Each download asks for the 10 MiB file and never reads a byte of it.
    let downloads: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| {
            connect(
                &address,
                &format!(
                    "GET /projects/demo/files/content?path=big.bin&download=1 HTTP/1.1\r\n\
                     Host: rojos\r\nAuthorization: Bearer {DEMO_TOKEN}\r\n\r\n"
                ),
            )
        })
        .collect();
    // Every admitted upload has its bytes on disk (not in memory) while it is held open;
    // a server that holds bodies in memory is seen by its peak instead.
    let root = dir.path().join("storage/p1/root");
    let bound_mib = 64;
    let grown_mib = || status_kib(pid, "VmHWM").saturating_sub(before_kib) / 1024;
    let staged_whole = || {
        let staged: Vec<u64> = temporary_files(&root)
            .iter()
            .filter_map(|name| Some(std::fs::metadata(root.join(name)).ok()?.len()))
            .collect();
        // All but the last piece, which waits in the upload's one buffer.
        let written = (SIZE - 1024 - 64 * 1024) as u64;
        staged.len() == 8 && staged.iter().all(|&len| len >= written)
    };
    wait_until("eight staged uploads of all they sent", || {
        staged_whole() || grown_mib() >= bound_mib
    });
    // 16 transfers of one 64 KiB buffer each, the HTTP buffers of 100 connections and the
    // blocking threads are a few MiB; the bodies held whole were 500 MiB and more.
    let grown = grown_mib();
    eprintln!("peak memory grew by {grown} MiB");
    assert!(
        grown < bound_mib,
        "the server's peak memory grew by {grown} MiB under {CLIENTS} stalled uploads and \
         {CLIENTS} unread downloads"
    );
    assert!(staged_whole());

    // Past the caps, the others were refused at once, saying which limit and when to retry.
    let mut refused_downloads = 0;
    let mut started_downloads = 0;
    for mut stream in downloads {
        let mut head = [0u8; 512];
        let n = stream.read(&mut head).unwrap_or(0);
        let text = String::from_utf8_lossy(&head[..n]);
        if text.starts_with("HTTP/1.1 503") {
            assert!(text.contains("retry-after: 2"), "{text}");
            refused_downloads += 1;
        } else {
            assert!(text.starts_with("HTTP/1.1 200"), "{text}");
            started_downloads += 1;
        }
    }
    // Eight at a time for the token; a download the kernel's socket buffers took whole
    // (10 MiB fit in loopback's) has ended and freed its place for a later one.
    assert!(
        started_downloads >= 8,
        "{started_downloads} downloads started"
    );
    assert!(
        refused_downloads >= CLIENTS / 2,
        "{refused_downloads} refused"
    );
    let mut refused_uploads = 0;
    for stream in &mut uploads {
        // A held upload is answered only when its body ends: nothing comes within this.
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let text = answer(stream);
        if text.starts_with("HTTP/1.1 503") {
            assert!(text.contains("max_transfers_per_token"), "{text}");
            refused_uploads += 1;
        }
    }
    assert_eq!(refused_uploads, CLIENTS - 8);

    // The held uploads never finish: once their clients go, nothing of them is left.
    drop(uploads);
    wait_until("the staged uploads to be removed", || {
        temporary_files(&root).is_empty()
    });
    let names: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
    assert!(names.is_empty(), "{names:?}");
}

#[tokio::test]
async fn a_stalled_upload_body_is_cut_at_its_time_limit_and_nothing_is_written() {
    let host =
        TestHost::start(HostConfig::builtins().with("[limits]\nbody_timeout_secs = 1\n")).await;
    let address = host.url.trim_start_matches("http://").to_owned();
    let root = host.project_root("p1");
    let text = tokio::task::spawn_blocking(move || {
        let mut stream = connect(&address, &upload_head("p1", "stalled.txt", TOKEN, 100));
        stream.write_all(&[b's'; 50]).expect("half the body");
        // The rest never comes.
        answer(&mut stream)
    })
    .await
    .unwrap();
    assert!(
        text.starts_with("HTTP/1.1 408"),
        "a stalled body was not cut by its time limit: {text:?}"
    );
    assert!(
        text.contains(
            r#"{"error":"the upload did not arrive whole within 1 s ([limits] body_timeout_secs): nothing was written"#
        ),
        "{text}"
    );
    assert!(!root.join("stalled.txt").exists());
    assert_eq!(temporary_files(&root), Vec::<String>::new());
}

#[tokio::test]
async fn an_upload_cut_off_midway_leaves_no_file_and_no_temporary_file() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let address = host.url.trim_start_matches("http://").to_owned();
    let root = host.project_root("p1");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    let folder = root.join("docs");
    tokio::task::spawn_blocking(move || {
        let mut stream = connect(
            &address,
            &upload_head("p1", "docs/half.bin", TOKEN, 1 << 20),
        );
        stream
            .write_all(&vec![b'h'; 300_000])
            .expect("part of the body");
        // Staged beside its name while it streams in, not yet under it.
        wait_until("the upload to be staged", || {
            temporary_files(&folder).len() == 1
        });
        assert!(!folder.join("half.bin").exists());
        drop(stream);
        wait_until("the staged upload to be removed", || {
            temporary_files(&folder).is_empty()
        });
    })
    .await
    .unwrap();
    assert!(!root.join("docs/half.bin").exists());
    let left: Vec<_> = std::fs::read_dir(root.join("docs")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn an_upload_into_new_folders_creates_them_only_when_it_completes() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let address = host.url.trim_start_matches("http://").to_owned();
    let root = host.project_root("p1");
    let text = tokio::task::spawn_blocking(move || {
        let mut stream = connect(
            &address,
            &upload_head("p1", "new/deep/file.bin", TOKEN, 200_000),
        );
        stream.write_all(&vec![b'n'; 200_000]).expect("the body");
        answer(&mut stream)
    })
    .await
    .unwrap();
    assert!(text.starts_with("HTTP/1.1 201"), "{text}");
    assert!(text.contains(r#""size":200000"#), "{text}");
    assert_eq!(
        std::fs::read(root.join("new/deep/file.bin")).unwrap(),
        vec![b'n'; 200_000]
    );
    assert_eq!(temporary_files(&root), Vec::<String>::new());
}
