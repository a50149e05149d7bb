//! The thread and runtime that own the MCP servers' child processes: their pipes, their
//! stderr forwarding and their reaping live here, independent of the runtime (or plain
//! thread) that started the host. Stopping it ends every session first.

use std::{sync::Arc, thread::JoinHandle};

use rmcp::model::Tool;
use tokio::{runtime::Handle, sync::oneshot};

use super::{
    lists::ListFeed,
    process::{Session, StartFailure},
    start, McpServer,
};
use crate::config::McpServerConfig;

/// The runtime's thread, until it is told to stop.
#[derive(Debug)]
pub(super) struct ClientRuntime {
    handle: Handle,
    stop: oneshot::Sender<Vec<Arc<McpServer>>>,
    thread: JoinHandle<()>,
}

impl ClientRuntime {
    /// Starts the thread.
    pub(super) fn start() -> std::io::Result<ClientRuntime> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<Vec<Arc<McpServer>>>();
        let thread = std::thread::Builder::new()
            .name("mcp-clients".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    if let Ok(servers) = stopped.await {
                        for server in servers {
                            server.shut_down().await;
                        }
                    }
                });
            })?;
        Ok(ClientRuntime {
            handle,
            stop,
            thread,
        })
    }

    /// A handle to spawn on it.
    pub(super) fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Starts every server of `configs` at once (each with its feed, in the same order),
    /// waiting (this thread blocks) until each has started or failed; results in the order
    /// of `configs`.
    pub(super) fn start_all(
        &self,
        configs: &[McpServerConfig],
        feeds: &[ListFeed],
    ) -> Vec<Result<(Session, Vec<Tool>), StartFailure>> {
        let receivers: Vec<_> = configs
            .iter()
            .zip(feeds)
            .map(|(config, feed)| {
                let (sender, receiver) = std::sync::mpsc::channel();
                let config = config.clone();
                let feed = feed.clone();
                self.handle.spawn(async move {
                    let _ = sender.send(start::start(&config, feed).await);
                });
                receiver
            })
            .collect();
        receivers
            .into_iter()
            .map(|receiver| {
                receiver.recv().unwrap_or_else(|_| {
                    Err(StartFailure::Handshake(
                        "the MCP client runtime stopped".to_owned(),
                    ))
                })
            })
            .collect()
    }

    /// Ends every session of `servers`, then the thread.
    pub(super) fn shut_down(self, servers: Vec<Arc<McpServer>>) {
        if self.stop.send(servers).is_ok() && self.thread.join().is_err() {
            tracing::warn!("the MCP client thread panicked while stopping");
        }
    }
}
