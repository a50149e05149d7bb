//! The worker's resource limits (`setrlimit`), soft and hard alike so the plugin cannot
//! raise them back.

use rustix::process::{setrlimit, Resource, Rlimit};

use super::settings::SandboxSettings;

/// Sets `RLIMIT_DATA`, `RLIMIT_CPU`, `RLIMIT_NOFILE` and, when asked, `RLIMIT_NPROC`.
pub(super) fn apply(settings: &SandboxSettings) -> Result<(), String> {
    let mut limits = vec![
        (Resource::Data, settings.memory_bytes, "memory"),
        (Resource::Cpu, settings.cpu_secs, "CPU time"),
        (Resource::Nofile, settings.open_files, "open files"),
    ];
    if let Some(processes) = settings.processes {
        limits.push((Resource::Nproc, processes, "processes"));
    }
    for (resource, value, what) in limits {
        let limit = Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        setrlimit(resource, limit).map_err(|e| format!("cannot limit {what} to {value}: {e}"))?;
    }
    Ok(())
}
