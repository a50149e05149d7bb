//! Reading a plugin's manifest in a worker, for a plugin that never runs in the server: a
//! worker serving no project starts (sandboxed before it opens the library), reports the
//! manifest and is told to end. Blocking: plugins are loaded outside the async runtime.

use std::{
    os::{fd::AsFd, unix::net::UnixStream},
    path::Path,
    process::Stdio,
    time::Duration,
};

use crate::{
    protocol::{BlockingChannel, FromWorker, Refusal, Start, ToWorker},
    sandbox::SandboxSettings,
    spawn, status,
};

/// What a worker reported about a library.
#[derive(Debug, Clone)]
pub struct Probed {
    /// The manifest (JSON text), or the plugin's error.
    pub manifest: Result<String, String>,
    /// The parts of the sandbox this kernel lacks.
    pub missing: Vec<String>,
}

/// Why no manifest came back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProbeError {
    /// The worker could not be started.
    #[error("cannot start a plugin worker: {0}")]
    Start(String),
    /// The worker refused (not a plugin, no sandbox).
    #[error(transparent)]
    Refused(Refusal),
    /// The worker died or hung while opening the library.
    #[error("its worker {0} while opening it")]
    Died(String),
}

/// Starts `program` as a worker for `library`, with no project, and reads the manifest,
/// waiting at most `timeout`.
///
/// # Errors
///
/// [`ProbeError`].
pub fn manifest(
    program: &Path,
    library: &Path,
    sandbox: SandboxSettings,
    timeout: Duration,
) -> Result<Probed, ProbeError> {
    let start_failed = |e: std::io::Error| ProbeError::Start(e.to_string());
    let (ours, theirs) = UnixStream::pair().map_err(start_failed)?;
    let (mut command, inherited) =
        spawn::command(program, theirs.as_fd(), None).map_err(start_failed)?;
    // The manifest probe's messages go to the server's own stderr.
    command.stderr(Stdio::inherit());
    let mut child = command.spawn().map_err(start_failed)?;
    drop((inherited, theirs));
    let mut channel = BlockingChannel::new(ours).map_err(start_failed)?;
    let reply = channel
        .stream()
        .set_read_timeout(Some(timeout))
        .and_then(|()| {
            channel.send(&ToWorker::Start(Start {
                library: library.to_owned(),
                project_id: None,
                sandbox,
            }))
        })
        .and_then(|()| channel.recv::<FromWorker>());
    drop(channel);
    let outcome = match reply {
        Ok(FromWorker::Ready { manifest, missing }) => Ok(Probed { manifest, missing }),
        Ok(FromWorker::Refused(why)) => Err(ProbeError::Refused(why)),
        Ok(FromWorker::Done { .. }) => Err(ProbeError::Died("answered out of turn".to_owned())),
        Err(e)
            if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::TimedOut =>
        {
            let _ = child.kill();
            Err(ProbeError::Died(format!(
                "did not answer within {timeout:?}"
            )))
        }
        Err(_) => {
            let _ = child.kill();
            let status = child.wait().map_err(start_failed)?;
            return Err(ProbeError::Died(status::describe(status)));
        }
    };
    // It exits on its own once the socket closes.
    let _ = child.wait();
    outcome
}
