//! The processes of a per-project server (`{project_root}` in its `args` or `env`;
//! `docs/mcp.md`, "Per-project servers"): one [`ServerInstance`] per project, started lazily on
//! the project's first call and reused after, each with its own restart and back-off. At
//! most `max_running` run at once: a new one stops the least recently used idle one, and
//! with none idle the call fails with an error result. One idle longer than
//! `idle_shutdown_secs` is stopped by a sweep on the client runtime.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use tokio::{runtime::Handle, sync::Mutex};

use super::{instance::ServerInstance, lists::ListFeed};
use rojos_plugin_host::{FailureKind, ToolFailure};

use crate::config::{McpServerConfig, PerProject};

/// One server's per-project instances.
#[derive(Debug)]
pub(super) struct ProjectInstances {
    config: McpServerConfig,
    limits: PerProject,
    runtime: Handle,
    running: Mutex<HashMap<String, Instance>>,
    /// The server's feed: an instance's lists (at its start, after `list_changed`) replace
    /// the server's offered tools (`docs/mcp.md`, "Live tool lists").
    feed: ListFeed,
}

/// One project's server and when it last had a call.
#[derive(Debug)]
struct Instance {
    server: Arc<ServerInstance>,
    last_used: Instant,
}

impl Instance {
    /// No call holds the server: the map's `Arc` is the only one ([`ProjectInstances::get`]
    /// hands out clones for the length of a call).
    fn idle(&self) -> bool {
        Arc::strong_count(&self.server) == 1
    }
}

impl ProjectInstances {
    /// The instances of `config`'s server, none running yet; starts the idle sweep on
    /// `runtime`, which ends when the instances are dropped.
    pub(super) fn new(
        config: McpServerConfig,
        limits: PerProject,
        runtime: Handle,
        feed: ListFeed,
    ) -> Arc<ProjectInstances> {
        let instances = Arc::new(ProjectInstances {
            config,
            limits,
            runtime: runtime.clone(),
            running: Mutex::new(HashMap::new()),
            feed,
        });
        runtime.spawn(sweep(Arc::downgrade(&instances), limits.idle_shutdown));
        instances
    }

    /// The server of `project` (whose root folder is `root`), created when it has none; it
    /// starts on its first call. Hold it only for one call: a held server is busy.
    ///
    /// # Errors
    ///
    /// Every one of the `max_running` servers is busy with a call.
    pub(super) async fn get(
        &self,
        project: &str,
        root: &Path,
    ) -> Result<Arc<ServerInstance>, ToolFailure> {
        let mut running = self.running.lock().await;
        if let Some(instance) = running.get_mut(project) {
            instance.last_used = Instant::now();
            return Ok(Arc::clone(&instance.server));
        }
        if running.len() >= self.limits.max_running {
            let oldest_idle = running
                .iter()
                .filter(|(_, instance)| instance.idle())
                .min_by_key(|(_, instance)| instance.last_used)
                .map(|(id, _)| id.clone());
            let Some(oldest_idle) = oldest_idle else {
                return Err(self.full());
            };
            if let Some(stopped) = running.remove(&oldest_idle) {
                tracing::info!(mcp_server = %self.config.name, project = %oldest_idle, "stopping the least recently used instance for another project");
                self.stop(stopped);
            }
        }
        let mut config = self.config.for_root(root);
        // The instance's name, in its log lines and error messages, says whose it is.
        config.name = format!("{} (project {project})", self.config.name);
        let server = Arc::new(ServerInstance::not_started(
            config,
            self.runtime.clone(),
            self.feed.clone(),
        ));
        running.insert(
            project.to_owned(),
            Instance {
                server: Arc::clone(&server),
                last_used: Instant::now(),
            },
        );
        Ok(server)
    }

    /// Notes the end of a call of `project`'s server: idleness counts from here.
    pub(super) async fn done(&self, project: &str) {
        if let Some(instance) = self.running.lock().await.get_mut(project) {
            instance.last_used = Instant::now();
        }
    }

    fn full(&self) -> ToolFailure {
        let name = &self.config.name;
        ToolFailure::new(
            FailureKind::Busy,
            format!(
                "MCP server {name} runs one process per project and already runs its limit of {} (max_running), all busy with calls of other projects; try again in a moment, or ask the operator to raise mcp.servers.{name}.max_running",
                self.limits.max_running
            ),
        )
    }

    /// Ends `instance`'s process on the client runtime.
    fn stop(&self, instance: Instance) {
        let server = instance.server;
        self.runtime
            .spawn(async move { server.stop_session().await });
    }

    /// Stops the instances idle for `idle_shutdown` or longer.
    async fn stop_idle(&self, idle_shutdown: Duration) {
        let mut running = self.running.lock().await;
        let expired: Vec<String> = running
            .iter()
            .filter(|(_, i)| i.idle() && i.last_used.elapsed() >= idle_shutdown)
            .map(|(id, _)| id.clone())
            .collect();
        for project in expired {
            if let Some(instance) = running.remove(&project) {
                tracing::info!(mcp_server = %self.config.name, %project, "stopping an idle instance");
                self.stop(instance);
            }
        }
    }

    /// Ends every instance; the host is stopping.
    pub(super) async fn shut_down(&self) {
        let running: Vec<Instance> = self.running.lock().await.drain().map(|(_, i)| i).collect();
        for instance in running {
            instance.server.stop_session().await;
        }
    }
}

/// Every few moments (a quarter of `idle_shutdown`, at most 10 s), stops the idle
/// instances, until the instances are dropped.
async fn sweep(instances: Weak<ProjectInstances>, idle_shutdown: Duration) {
    let period = (idle_shutdown / 4).clamp(Duration::from_millis(100), Duration::from_secs(10));
    loop {
        tokio::time::sleep(period).await;
        let Some(instances) = instances.upgrade() else {
            return;
        };
        instances.stop_idle(idle_shutdown).await;
    }
}
