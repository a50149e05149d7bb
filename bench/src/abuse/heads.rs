//! The partial-head attack: [`CONNECTIONS`] connections to the host, each sending the start of
//! a request head (no blank line to end it) and then nothing, held for [`HOLD`] after the last
//! one opened (past the bench config's `header_read_timeout_secs`). Then each connection is
//! asked, without waiting, whether the server answered or closed it, and all are closed.

use std::{
    io::ErrorKind,
    net::SocketAddr,
    time::{Duration, Instant},
};

use futures_util::StreamExt;
use tokio::{io::AsyncWriteExt, net::TcpStream};

/// Connections opened.
pub(crate) const CONNECTIONS: usize = 10_000;
/// What each connection sends: a request head without its final blank line.
pub(crate) const PARTIAL_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n";
/// How long the connections are held once all are open.
pub(crate) const HOLD: Duration = Duration::from_secs(4);
/// Connections being opened at once.
const OPENING_AT_ONCE: usize = 128;
/// The longest wait for one connect, and for one write.
const STEP_LIMIT: Duration = Duration::from_secs(2);
/// The longest time spent opening connections; those not open by then are counted as failed.
const OPENING_LIMIT: Duration = Duration::from_secs(60);

/// What became of the connections.
#[derive(Debug, Default)]
pub(crate) struct Heads {
    /// Connections that opened and took their partial head.
    pub(crate) opened: usize,
    /// Connections that did not (refused, reset, too slow), and the first reason.
    pub(crate) failed: (usize, Option<String>),
    /// How long opening took.
    pub(crate) opening: Duration,
    /// Of the opened ones, closed by the server by the end (end of stream or reset).
    pub(crate) closed: usize,
    /// Of the opened ones, those the server sent bytes on (a `408`, say), closed or not.
    pub(crate) answered: usize,
}

/// Opens the connections to the host at `url`, holds them, tallies them and closes them.
pub(crate) async fn hold(url: &str) -> Heads {
    let mut heads = Heads::default();
    let address: SocketAddr = match url.trim_start_matches("http://").parse() {
        Ok(address) => address,
        Err(e) => {
            heads.failed = (CONNECTIONS, Some(format!("bad host address {url}: {e}")));
            return heads;
        }
    };
    let started = Instant::now();
    let streams = open_all(address, &mut heads).await;
    heads.opening = started.elapsed();
    tokio::time::sleep(HOLD).await;
    for stream in &streams {
        let (answered, closed) = state(stream);
        heads.answered += usize::from(answered);
        heads.closed += usize::from(closed);
    }
    heads
}

/// Opens up to [`CONNECTIONS`] connections within [`OPENING_LIMIT`].
async fn open_all(address: SocketAddr, heads: &mut Heads) -> Vec<TcpStream> {
    let deadline = tokio::time::Instant::now() + OPENING_LIMIT;
    let mut opening = futures_util::stream::iter(0..CONNECTIONS)
        .map(|_| open_one(address))
        .buffer_unordered(OPENING_AT_ONCE);
    let mut streams = Vec::with_capacity(CONNECTIONS);
    while let Ok(Some(opened)) = tokio::time::timeout_at(deadline, opening.next()).await {
        match opened {
            Ok(stream) => streams.push(stream),
            Err(e) => {
                heads.failed.0 += 1;
                heads.failed.1.get_or_insert(e);
            }
        }
    }
    heads.opened = streams.len();
    let unfinished = CONNECTIONS - streams.len() - heads.failed.0;
    if unfinished > 0 {
        heads.failed.0 += unfinished;
        heads
            .failed
            .1
            .get_or_insert(format!("not open within {} s", OPENING_LIMIT.as_secs()));
    }
    streams
}

async fn open_one(address: SocketAddr) -> Result<TcpStream, String> {
    let mut stream = tokio::time::timeout(STEP_LIMIT, TcpStream::connect(address))
        .await
        .map_err(|_| "connect timed out".to_owned())?
        .map_err(|e| format!("connect: {e}"))?;
    tokio::time::timeout(STEP_LIMIT, stream.write_all(PARTIAL_HEAD))
        .await
        .map_err(|_| "write timed out".to_owned())?
        .map_err(|e| format!("write: {e}"))?;
    Ok(stream)
}

/// Whether the server sent anything on `stream`, and whether it closed it; never waits.
fn state(stream: &TcpStream) -> (bool, bool) {
    let mut buffer = [0u8; 4096];
    let mut answered = false;
    // A few reads drain any short answer; a server sending more is counted as answering.
    for _ in 0..16 {
        match stream.try_read(&mut buffer) {
            Ok(0) => return (answered, true),
            Ok(_) => answered = true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return (answered, false),
            Err(_) => return (answered, true),
        }
    }
    (answered, false)
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn held_answered_and_reset_connections_are_told_apart() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let accept = || async { listener.accept().await.unwrap().0 };
        let held = open_one(address).await.unwrap();
        let _kept = accept().await;
        // Read the head, answer, close: the client sees the answer, then the end of stream.
        let answered = open_one(address).await.unwrap();
        let mut server = accept().await;
        let mut head = vec![0; PARTIAL_HEAD.len()];
        server.read_exact(&mut head).await.unwrap();
        server
            .write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            .await
            .unwrap();
        drop(server);
        // Close with the head unread: the kernel resets the connection.
        let reset = open_one(address).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(accept().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(state(&held), (false, false));
        assert_eq!(state(&answered), (true, true));
        assert_eq!(state(&reset), (false, true));
    }
}
