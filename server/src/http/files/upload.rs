//! An upload's body, streamed into a [`StagedWrite`] with bounded memory and a time limit:
//! the body's pieces are gathered into one buffer of at most [`TRANSFER_BUFFER_BYTES`] and
//! written to the staged temporary file on the blocking pool whenever it fills; the whole
//! body must arrive by a deadline (`[limits] body_timeout_secs`). On any failure the staged
//! write is dropped, which removes its temporary file: nothing is half-written.

use std::time::Duration;

use axum::body::{Body, Bytes};
use futures_util::StreamExt;
use rojos_config::TRANSFER_BUFFER_BYTES;
use rojos_fs_guard::{PathError, StagedWrite};
use tokio::time::Instant;

use crate::http::error::ApiError;

/// Why a body could not be received whole.
#[derive(Debug)]
pub(super) enum Failed {
    /// fs-guard refused a piece (over `max_upload_bytes`, an I/O failure).
    Refused(PathError),
    /// The body had not arrived whole within its time limit.
    TimedOut(Duration),
    /// The body ended in an error (the client went away mid-way).
    CutOff(String),
    /// A blocking write could not be waited for.
    Internal(tokio::task::JoinError),
}

impl From<Failed> for ApiError {
    fn from(failed: Failed) -> ApiError {
        match failed {
            Failed::Refused(e) => ApiError::BadRequest(e.to_string()),
            Failed::TimedOut(limit) => ApiError::RequestTimeout(format!(
                "the upload did not arrive whole within {} s ([limits] body_timeout_secs): \
                 nothing was written; send it again over a faster connection, or ask the \
                 operator to raise the limit",
                limit.as_secs_f64()
            )),
            Failed::CutOff(e) => ApiError::BadRequest(format!(
                "the upload was cut off before its end ({e}): nothing was written"
            )),
            Failed::Internal(e) => ApiError::internal("writing an upload", e),
        }
    }
}

/// Receives `body` into `staged`, whole by `deadline` (`limit` is the time limit it stands
/// for, named in the error), and gives the staged write back, ready to commit.
pub(super) async fn receive(
    mut staged: StagedWrite,
    body: Body,
    deadline: Instant,
    limit: Duration,
) -> Result<StagedWrite, Failed> {
    let mut stream = body.into_data_stream();
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| Failed::TimedOut(limit))?;
        let chunk = match next {
            None => break,
            Some(Err(e)) => return Err(Failed::CutOff(e.to_string())),
            Some(Ok(chunk)) => chunk,
        };
        if buffer.len() + chunk.len() > TRANSFER_BUFFER_BYTES && !buffer.is_empty() {
            (staged, buffer) = write(staged, Piece::Buffer(buffer)).await?;
        }
        if chunk.len() >= TRANSFER_BUFFER_BYTES {
            // A piece as large as the buffer is written as it came, never copied.
            (staged, buffer) = write(staged, Piece::Chunk(chunk)).await?;
        } else {
            if buffer.capacity() == 0 {
                buffer.reserve_exact(TRANSFER_BUFFER_BYTES);
            }
            buffer.extend_from_slice(&chunk);
        }
    }
    if !buffer.is_empty() {
        (staged, _) = write(staged, Piece::Buffer(buffer)).await?;
    }
    Ok(staged)
}

/// What [`write`] writes: the gathered buffer (given back empty to be filled again), or one
/// large piece of the body.
enum Piece {
    Buffer(Vec<u8>),
    Chunk(Bytes),
}

/// Writes `piece` to `staged` on the blocking pool.
async fn write(mut staged: StagedWrite, piece: Piece) -> Result<(StagedWrite, Vec<u8>), Failed> {
    tokio::task::spawn_blocking(move || {
        let buffer = match piece {
            Piece::Buffer(mut buffer) => {
                staged.write(&buffer)?;
                buffer.clear();
                buffer
            }
            Piece::Chunk(chunk) => {
                staged.write(&chunk)?;
                Vec::new()
            }
        };
        Ok((staged, buffer))
    })
    .await
    .map_err(Failed::Internal)?
    .map_err(Failed::Refused)
}
