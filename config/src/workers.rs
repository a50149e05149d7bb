//! The `[plugins]` keys that say where plugins run and how their workers are confined
//! (docs/configuration.md, "Plugin workers").

use std::time::Duration;

use rojos_plugin_host::{Isolation, WorkerStart};
use rojos_plugin_worker::{QuarantineRule, SandboxSettings};

use super::{
    keys::{invalid, ConfigError},
    raw::RawPlugins,
};

/// The parsed keys.
pub(super) struct Workers {
    pub(super) isolation: Isolation,
    pub(super) sandbox: SandboxSettings,
    pub(super) idle: Duration,
    pub(super) start: WorkerStart,
    pub(super) quarantine: Option<QuarantineRule>,
}

/// Reads `isolation`, `sandbox`, `worker_start`, the `worker_*` limits and the `quarantine_*` rule, with
/// their defaults.
pub(super) fn parse(raw: &RawPlugins) -> Result<Workers, ConfigError> {
    let isolation = match raw.isolation.as_deref() {
        None | Some("in-process") => Isolation::InProcess,
        Some("worker") => Isolation::Worker,
        Some(other) => {
            return Err(invalid(
                "plugins.isolation",
                format!("{other:?} is not one of \"in-process\", \"worker\""),
            ))
        }
    };
    let required = match raw.sandbox.as_deref() {
        None | Some("required") => true,
        Some("best-effort") => false,
        Some(other) => {
            return Err(invalid(
                "plugins.sandbox",
                format!("{other:?} is not one of \"required\", \"best-effort\""),
            ))
        }
    };
    let defaults = SandboxSettings::default();
    let positive = |key: &str, value: Option<u64>, default: u64| match value {
        Some(0) => Err(invalid(format!("plugins.{key}"), "must be at least 1")),
        Some(value) => Ok(value),
        None => Ok(default),
    };
    let memory_mib = positive(
        "worker_memory_mib",
        raw.worker_memory_mib,
        defaults.memory_bytes >> 20,
    )?;
    let sandbox = SandboxSettings {
        required,
        memory_bytes: memory_mib.saturating_mul(1 << 20),
        cpu_secs: positive("worker_cpu_secs", raw.worker_cpu_secs, defaults.cpu_secs)?,
        open_files: positive(
            "worker_open_files",
            raw.worker_open_files,
            defaults.open_files,
        )?,
        processes: raw
            .worker_processes
            .map(|n| positive("worker_processes", Some(n), n))
            .transpose()?,
        user: raw
            .worker_user
            .as_deref()
            .map(rojos_plugin_worker::sandbox::identity::parse)
            .transpose()
            .map_err(|e| invalid("plugins.worker_user", e))?,
    };
    let idle = match raw.worker_idle_secs {
        None => Duration::from_secs(60),
        Some(s) if s > 0.0 && s <= 86_400.0 => Duration::from_secs_f64(s),
        Some(_) => {
            return Err(invalid(
                "plugins.worker_idle_secs",
                "must be between 0 and 86400 seconds",
            ))
        }
    };
    let start = match raw.worker_start.as_deref() {
        None | Some("zygote") => WorkerStart::Zygote,
        Some("exec") => WorkerStart::Exec,
        Some(other) => {
            return Err(invalid(
                "plugins.worker_start",
                format!("{other:?} is not one of \"zygote\", \"exec\""),
            ))
        }
    };
    Ok(Workers {
        isolation,
        sandbox,
        idle,
        start,
        quarantine: quarantine(raw)?,
    })
}

/// `quarantine_after` deaths (0: never) within `quarantine_window_secs`.
fn quarantine(raw: &RawPlugins) -> Result<Option<QuarantineRule>, ConfigError> {
    let defaults = QuarantineRule::default();
    let window = match raw.quarantine_window_secs {
        None => defaults.window,
        Some(s) if (1..=86_400 * 30).contains(&s) => Duration::from_secs(s),
        Some(_) => {
            return Err(invalid(
                "plugins.quarantine_window_secs",
                "must be between 1 and 2592000 seconds (30 days)",
            ))
        }
    };
    Ok(match raw.quarantine_after.unwrap_or(defaults.deaths) {
        0 => None,
        deaths => Some(QuarantineRule { deaths, window }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Workers, ConfigError> {
        parse(&toml::from_str::<RawPlugins>(text).expect("toml"))
    }

    #[test]
    fn defaults_keep_load_plugins_in_process_with_a_required_sandbox() {
        let w = parsed("").unwrap();
        assert_eq!(w.isolation, Isolation::InProcess);
        assert_eq!(w.sandbox, SandboxSettings::default());
        assert!(w.sandbox.required);
        assert_eq!(w.quarantine, Some(QuarantineRule::default()));
        assert_eq!(w.idle, Duration::from_secs(60));
        assert_eq!(w.start, WorkerStart::Zygote);
    }

    #[test]
    fn worker_user_is_read_and_an_unknown_user_named() {
        assert_eq!(parsed("").unwrap().sandbox.user, None);
        assert_eq!(
            parsed("worker_user = \"1000:100\"").unwrap().sandbox.user,
            Some(rojos_plugin_worker::sandbox::WorkerUser {
                uid: 1000,
                gid: 100
            })
        );
        let e = parsed("worker_user = \"no-such-user-here\"")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("plugins.worker_user") && e.contains("UID:GID"),
            "{e}"
        );
    }

    #[test]
    fn worker_start_is_read_and_a_bad_value_named() {
        assert_eq!(
            parsed("worker_start = \"exec\"").unwrap().start,
            WorkerStart::Exec
        );
        assert_eq!(
            parsed("worker_start = \"zygote\"").unwrap().start,
            WorkerStart::Zygote
        );
        let e = parsed("worker_start = \"spawn\"")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("plugins.worker_start") && e.contains("\"zygote\", \"exec\""),
            "{e}"
        );
    }

    #[test]
    fn the_keys_are_read_and_bad_values_named() {
        let w = parsed(
            "isolation = \"worker\"\nsandbox = \"best-effort\"\nworker_memory_mib = 64\nworker_processes = 100\nworker_idle_secs = 5",
        )
        .unwrap();
        assert_eq!(w.isolation, Isolation::Worker);
        assert!(!w.sandbox.required);
        assert_eq!(w.sandbox.memory_bytes, 64 << 20);
        assert_eq!(w.sandbox.processes, Some(100));
        assert_eq!(w.idle, Duration::from_secs(5));
        let q = parsed("quarantine_after = 3\nquarantine_window_secs = 60").unwrap();
        assert_eq!(
            q.quarantine,
            Some(QuarantineRule {
                deaths: 3,
                window: Duration::from_secs(60)
            })
        );
        assert_eq!(parsed("quarantine_after = 0").unwrap().quarantine, None);
        let e = parsed("quarantine_window_secs = 0")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("plugins.quarantine_window_secs"), "{e}");
        let e = parsed("isolation = \"thread\"").err().unwrap().to_string();
        assert!(
            e.contains("plugins.isolation") && e.contains("\"in-process\", \"worker\""),
            "{e}"
        );
        let e = parsed("sandbox = \"off\"").err().unwrap().to_string();
        assert!(e.contains("plugins.sandbox"), "{e}");
        let e = parsed("worker_open_files = 0").err().unwrap().to_string();
        assert!(
            e.contains("plugins.worker_open_files: must be at least 1")
                || e.contains("worker_open_files"),
            "{e}"
        );
    }
}
