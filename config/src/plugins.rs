//! `[plugins]`: which plugin libraries load, from where, and how their calls run.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use super::{
    keys::{invalid, seconds_key, ConfigError},
    raw::RawPlugins,
    workers,
};

/// `[plugins]`.
#[derive(Debug, Clone)]
pub struct PluginsConfig {
    /// Built-in plugin libraries, loaded at start, in this order (first wins a name clash).
    pub load: Vec<PathBuf>,
    /// The drop-in folder.
    pub dir: Option<PathBuf>,
    /// How long one tool call may run.
    pub call_timeout: Duration,
    /// How many calls of one plugin may run at once.
    pub max_concurrent_calls: usize,
    /// Where the `load` plugins run (drop-ins always run in workers).
    pub isolation: rojos_plugin_host::Isolation,
    /// The workers' sandbox and limits.
    pub sandbox: rojos_plugin_worker::SandboxSettings,
    /// How long a worker with no calls stays.
    pub worker_idle: Duration,
    /// How a new worker is started (`worker_start`).
    pub worker_start: rojos_plugin_host::WorkerStart,
    /// When a plugin whose workers keep dying is quarantined (`None`: never).
    pub quarantine: Option<rojos_plugin_worker::QuarantineRule>,
}

pub(super) fn parse_plugins(
    raw: &RawPlugins,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> Result<PluginsConfig, ConfigError> {
    let call_timeout = seconds_key(
        "plugins.call_timeout_secs",
        raw.call_timeout_secs,
        Duration::from_secs(10),
        3600.0,
    )?;
    let max_concurrent_calls = raw.max_concurrent_calls.unwrap_or(8);
    if max_concurrent_calls == 0 {
        return Err(invalid(
            "plugins.max_concurrent_calls",
            "must be at least 1",
        ));
    }
    let workers = workers::parse(raw)?;
    Ok(PluginsConfig {
        load: raw.load.iter().map(|p| resolve(p)).collect(),
        dir: raw.dir.as_deref().map(resolve),
        call_timeout,
        max_concurrent_calls,
        isolation: workers.isolation,
        sandbox: workers.sandbox,
        worker_idle: workers.idle,
        worker_start: workers.start,
        quarantine: workers.quarantine,
    })
}
