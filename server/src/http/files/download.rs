//! A download's body, read from its open file in pieces of [`TRANSFER_BUFFER_BYTES`] on the
//! blocking pool as the client takes them, so a download holds one piece at a time however
//! large the file. The transfer's permit travels with the body and is released when the body
//! ends or is dropped (a client that reads nothing is disconnected after `[server]
//! stream_write_timeout_secs`).

use std::io::Read;

use axum::body::{Body, Bytes};
use futures_util::stream;
use rojos_config::TRANSFER_BUFFER_BYTES;
use rojos_fs_guard::OpenedFile;

use crate::http::transfers::TransferPermit;

/// Where a download stands between two pieces.
struct Reading {
    opened: OpenedFile,
    /// Bytes sent so far.
    sent: u64,
    _permit: TransferPermit,
}

/// The body streaming `opened`: it fails (and the connection is closed) if the file grows
/// past its read limit while it is sent, or cannot be read.
pub(super) fn body(opened: OpenedFile, permit: TransferPermit) -> Body {
    let start = Reading {
        opened,
        sent: 0,
        _permit: permit,
    };
    Body::from_stream(stream::try_unfold(start, |reading| async move {
        tokio::task::spawn_blocking(move || next_piece(reading))
            .await
            .map_err(std::io::Error::other)?
    }))
}

/// The next piece of the file and the state after it, or `None` at its end.
fn next_piece(mut reading: Reading) -> std::io::Result<Option<(Bytes, Reading)>> {
    let mut piece = vec![0; TRANSFER_BUFFER_BYTES];
    let n = loop {
        match reading.opened.file.read(&mut piece) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => break other?,
        }
    };
    if n == 0 {
        return Ok(None);
    }
    reading.sent += n as u64;
    if reading.sent > reading.opened.limit {
        return Err(std::io::Error::other(
            "the file grew past the download limit while it was sent",
        ));
    }
    piece.truncate(n);
    Ok(Some((Bytes::from(piece), reading)))
}
