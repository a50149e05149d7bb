//! The `[server]` connection protections against slow and idle clients, over raw sockets on
//! loopback: partial request heads are closed after `header_read_timeout_secs`, idle keep-alive
//! connections after `idle_timeout_secs`, a client that stops reading its chat after
//! `stream_write_timeout_secs` (its run cancelled as on a disconnect), and at
//! `max_connections` the connection that has waited longest makes room, so `/healthz` still
//! answers during a slowloris. Every response says `X-Content-Type-Options: nosniff`.
//!
//! Waits are generous bounds on outcomes, never timing assertions.

use std::time::Duration;

use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::support::{
    host::{HostConfig, TestHost, TOKEN},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// How long a test waits for something the server should do within a second or two.
const PATIENCE: Duration = Duration::from_secs(30);

/// The start of a request head that never ends.
const PARTIAL_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: ";

fn address(host: &TestHost) -> String {
    host.url.trim_start_matches("http://").to_owned()
}

/// A connection that has sent the start of a request head and nothing more. The server may
/// already have closed it (evicted it) before the bytes arrive.
async fn partial_head(host: &TestHost) -> TcpStream {
    let mut socket = TcpStream::connect(address(host)).await.unwrap();
    let _ = socket.write_all(PARTIAL_HEAD).await;
    socket
}

/// Whether the server closes `socket` (end of stream or reset) within [`PATIENCE`]; whatever
/// arrives before the end is skipped.
async fn closed_by_server(socket: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    let read_until_end = async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(PATIENCE, read_until_end).await.is_ok()
}

/// Whether `socket` is still open, with nothing to read, right now.
fn still_open(socket: &TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(socket.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// `GET /healthz` on a new connection (no pool), answered within [`PATIENCE`].
async fn healthz(host: &TestHost) -> reqwest::StatusCode {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(PATIENCE)
        .build()
        .unwrap();
    client
        .get(format!("{}/healthz", host.url))
        .send()
        .await
        .expect("healthz answers")
        .status()
}

/// The value of the metric line starting with `name` (`0` when absent).
async fn metric(host: &TestHost, name: &str) -> u64 {
    let text = host.get("/metrics").await.text().await.unwrap();
    crate::metrics::value(&text, name).map_or(0, |v| v as u64)
}

fn closed_for(reason: &str) -> String {
    format!("rojos_connections_closed_total{{reason=\"{reason}\"}}")
}

/// Reads a response head from a raw socket (and whatever body bytes came with it).
async fn read_head(socket: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(socket.read(&mut byte).await.unwrap(), 1, "head cut short");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test]
async fn a_slowloris_is_closed_and_healthz_keeps_answering() {
    rojos::raise_open_files_limit().unwrap();
    let host = TestHost::start(
        HostConfig::builtins()
            .server("header_read_timeout_secs = 1")
            .server("max_connections = 64"),
    )
    .await;
    let mut slow = Vec::new();
    for i in 0..400 {
        slow.push(partial_head(&host).await);
        if i % 50 == 49 {
            assert_eq!(
                healthz(&host).await,
                200,
                "after {} slow connections",
                i + 1
            );
        }
    }
    assert_eq!(healthz(&host).await, 200);
    for (i, socket) in slow.iter_mut().enumerate() {
        assert!(
            closed_by_server(socket).await,
            "slow connection {i} stays open"
        );
    }
    assert!(metric(&host, &closed_for("evicted")).await > 0);
    assert!(metric(&host, &closed_for("header_timeout")).await > 0);
}

#[tokio::test]
async fn at_the_connection_limit_the_connection_waiting_longest_makes_room() {
    // A long header timeout: only eviction can close these connections during the test.
    let host = TestHost::start(
        HostConfig::builtins()
            .server("header_read_timeout_secs = 600")
            .server("max_connections = 16"),
    )
    .await;
    let mut slow = Vec::new();
    for _ in 0..40 {
        slow.push(partial_head(&host).await);
    }
    // 40 slow connections evicted the first 24; /healthz's connection evicts the 25th.
    assert_eq!(healthz(&host).await, 200);
    for (i, socket) in slow[..25].iter_mut().enumerate() {
        assert!(
            closed_by_server(socket).await,
            "old connection {i} stays open"
        );
    }
    for (i, socket) in slow.iter().enumerate().skip(25) {
        assert!(
            still_open(socket),
            "connection {i} was not among the oldest"
        );
    }
    assert!(metric(&host, &closed_for("evicted")).await >= 25);
}

#[tokio::test]
async fn when_every_connection_is_in_a_request_a_new_one_is_refused_with_503() {
    let turns = (0..16)
        .map(|_| Turn::text("late").first_delay(Duration::from_secs(60)))
        .collect();
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .server("max_connections = 16"),
    )
    .await;
    let mut chats = Vec::new();
    for i in 0..16 {
        let response = host
            .chat(json!({"projectId": "demo", "message": format!("chat {i}")}))
            .await;
        assert_eq!(response.status(), 200);
        chats.push(response);
    }
    let mut refused = TcpStream::connect(address(&host)).await.unwrap();
    let mut answer = String::new();
    refused.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
    assert!(
        answer.ends_with(
            r#"{"error":"the server is at its limit of 16 connections; try again shortly"}"#
        ),
        "{answer}"
    );
    // A chat's connection closes: there is room again.
    drop(chats.pop());
    let mut admitted = false;
    for _ in 0..100 {
        let mut socket = TcpStream::connect(address(&host)).await.unwrap();
        socket
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        if read_head(&mut socket).await.starts_with("HTTP/1.1 200") {
            admitted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        admitted,
        "a connection is admitted once a chat's connection closed"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let host = TestHost::start(
        HostConfig::builtins()
            .server("header_read_timeout_secs = 1")
            .server("idle_timeout_secs = 4"),
    )
    .await;
    let mut socket = keep_alive_after_healthz(&host).await;
    // Past the header timeout, the idle connection is still there: it waits for a request.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(still_open(&socket), "closed before the idle timeout");
    assert!(
        closed_by_server(&mut socket).await,
        "idle connection stays open"
    );
    assert_eq!(metric(&host, &closed_for("idle")).await, 1);
    assert_eq!(metric(&host, &closed_for("header_timeout")).await, 0);
}

#[tokio::test]
async fn a_partial_head_after_a_keep_alive_request_is_closed_after_the_header_timeout() {
    let host = TestHost::start(
        HostConfig::builtins()
            .server("header_read_timeout_secs = 1")
            .server("idle_timeout_secs = 600"),
    )
    .await;
    let mut socket = keep_alive_after_healthz(&host).await;
    socket.write_all(PARTIAL_HEAD).await.unwrap();
    assert!(
        closed_by_server(&mut socket).await,
        "partial head stays open"
    );
    assert_eq!(metric(&host, &closed_for("header_timeout")).await, 1);
    assert_eq!(metric(&host, &closed_for("idle")).await, 0);
}

#[tokio::test]
async fn a_client_that_stops_reading_is_disconnected_and_its_run_cancelled() {
    // Far more text than the socket buffers hold, so writing the stream blocks.
    let long_text = "All work and no play makes Jack a dull boy. ".repeat(30_000);
    let upstream = ScriptedUpstream::start(vec![
        Turn::text_in_pieces(&long_text, 1024),
        Turn::text("the next chat is served"),
    ])
    .await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .server("stream_write_timeout_secs = 1")
            .server("max_concurrent_chats = 1")
            // Stopped as soon as its last client leaves.
            .with("[limits]\nunattended_run_secs = 0"),
    )
    .await;
    let mut socket = small_window_socket(&host).await;
    let body = json!({"projectId": "demo", "message": "talk a lot"}).to_string();
    let request = format!(
        "POST /chat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(&mut socket).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // From here on the client reads nothing.

    let conversation = host.only_conversation().await;
    let stored = host.closed_history(&conversation).await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    let answer = stored[1]["content"].as_str().unwrap();
    assert!(
        !answer.is_empty() && answer.len() < long_text.len() && long_text.starts_with(answer),
        "the stored answer is the partial text ({} of {} bytes)",
        answer.len(),
        long_text.len()
    );
    assert_eq!(metric(&host, &closed_for("write_timeout")).await, 1);
    assert_eq!(
        metric(
            &host,
            r#"rojos_chats_finished_total{stop_reason="cancelled"}"#
        )
        .await,
        1
    );

    // The chat's place is free.
    let next = host
        .chat(json!({"projectId": "demo", "message": "and now?"}))
        .await;
    let next = Stream::read(next).await;
    assert_eq!(next.text(), "the next chat is served");
    assert!(closed_by_server(&mut socket).await);
}

/// A connection whose receive buffer and segments are small. The server's send buffer grows
/// with the peer's segment size (on loopback, 64 kB segments let it absorb megabytes), so a
/// small one makes a client that reads nothing block the server's writes quickly.
async fn small_window_socket(host: &TestHost) -> TcpStream {
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.set_tcp_mss(536).unwrap();
    socket.set_nonblocking(true).unwrap();
    tokio::net::TcpSocket::from_std_stream(socket.into())
        .connect(address(host).parse().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn every_response_says_nosniff() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let json = host.get("/conversations?projectId=demo").await;
    assert_eq!(json.status(), 200);
    let unauthorized = reqwest::Client::new()
        .get(format!("{}/tools?rojo=default", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let missing = host.get("/no/such/route").await;
    assert_eq!(missing.status(), 404);
    for response in [json, unauthorized, missing] {
        assert_eq!(
            response.headers()["x-content-type-options"],
            "nosniff",
            "{}",
            response.url()
        );
    }
}

/// A connection that has been answered one `GET /healthz` and stays open (keep-alive).
async fn keep_alive_after_healthz(host: &TestHost) -> TcpStream {
    let mut socket = TcpStream::connect(address(host)).await.unwrap();
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut socket).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut body = [0u8; 3];
    socket.read_exact(&mut body).await.unwrap();
    assert_eq!(&body, b"ok\n");
    socket
}
