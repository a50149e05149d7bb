//! The host under test as a separate process, so its memory and CPU are its own: the release
//! `rojos` binary started with a generated config (a token, the five built-in plugins, storage
//! in a temp folder, the bench's upstream as provider, generous chat limits, no rate limit;
//! the other limits at their defaults; the conversation store SQLite unless a
//! [`StoreSetup`] says otherwise). Its address comes from its first line of output; memory and
//! CPU time from `/proc/<pid>`.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{bail, Context};
use rustix::process::Signal;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::procfs::{cpu_of, processes, stat_of, CpuTimes, Stat};
use crate::store::StoreSetup;

/// The bearer token of the generated config.
pub(crate) const TOKEN: &str = "bench-token-0123456789";

/// The five built-in tool libraries the reference conversation's host loads, by crate lib name.
pub(crate) const BUILTINS: [&str; 5] = [
    "rojos_tool_read_path_meta",
    "rojos_tool_get_text_content",
    "rojos_tool_write_text_content",
    "rojos_tool_list_files",
    "rojos_tool_create_directory",
];

/// Every built-in tool library: [`BUILTINS`] and the two the reference conversation does not use.
pub(crate) const ALL_BUILTINS: [&str; 7] = [
    "rojos_tool_read_path_meta",
    "rojos_tool_get_text_content",
    "rojos_tool_write_text_content",
    "rojos_tool_list_files",
    "rojos_tool_create_directory",
    "rojos_tool_delete_path",
    "rojos_tool_move_path",
];

/// Which host binary runs, with which plugin libraries.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// The `rojos` binary.
    pub(crate) binary: PathBuf,
    /// The folder with the `lib<name>.so` plugin files.
    pub(crate) plugin_dir: PathBuf,
    /// The libraries of `[plugins].load`, by crate lib name.
    pub(crate) load: Vec<&'static str>,
    /// The words of `$ROJOS_BENCH_WRAP` (a profiler the host runs under), when set.
    pub(crate) wrap: Option<String>,
    /// `[plugins].isolation`: `None` leaves the host's default; `worker-exec` is `worker` with
    /// `worker_start = "exec"`.
    pub(crate) isolation: Option<&'static str>,
    /// `[store] share_runs` on a PostgreSQL store: `None` leaves the host's default (on).
    pub(crate) share_runs: Option<bool>,
}

impl Launch {
    /// `<build>/rojos` with the five [`BUILTINS`] of `build`.
    pub(crate) fn of_build(build: &Path) -> Launch {
        Launch {
            binary: build.join("rojos"),
            plugin_dir: build.to_owned(),
            load: BUILTINS.to_vec(),
            wrap: wrapped_by(),
            isolation: None,
            share_runs: None,
        }
    }

    /// `binary` with the [`BUILTINS`]; the plugin files beside it when they are all there (a
    /// copied build folder), else those of `build`.
    pub(crate) fn of_binary(binary: &Path, build: &Path) -> anyhow::Result<Launch> {
        anyhow::ensure!(binary.is_file(), "no host binary at {}", binary.display());
        // Absolute: the host's config, in a temp folder, names the plugins by path.
        let binary = &std::path::absolute(binary)?;
        let beside = binary.parent().unwrap_or(Path::new("."));
        let own_plugins = ALL_BUILTINS
            .iter()
            .all(|name| beside.join(library_file(name)).is_file());
        Ok(Launch {
            binary: binary.to_owned(),
            plugin_dir: if own_plugins { beside } else { build }.to_owned(),
            load: BUILTINS.to_vec(),
            wrap: wrapped_by(),
            isolation: None,
            share_runs: None,
        })
    }

    /// The same binary and plugin folder, loading `load` instead.
    pub(crate) fn loading(&self, load: &[&'static str]) -> Launch {
        Launch {
            load: load.to_vec(),
            ..self.clone()
        }
    }

    /// The paths of `[plugins].load`.
    fn plugin_paths(&self) -> Vec<PathBuf> {
        self.load
            .iter()
            .map(|name| self.plugin_dir.join(library_file(name)))
            .collect()
    }
}

/// `lib<name>.so`.
fn library_file(name: &str) -> String {
    format!("lib{name}.so")
}

/// Where the release build puts the host and the plugins (`target/release`).
pub(crate) fn build_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the bench executable")?;
    let dir = exe
        .parent()
        .context("the bench executable has no folder")?
        .to_owned();
    let missing: Vec<String> = std::iter::once("rojos".to_owned())
        .chain(ALL_BUILTINS.iter().map(|name| library_file(name)))
        .filter(|f| !dir.join(f).exists())
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} missing from {}: run `cargo build --release --workspace` first",
            missing.join(", "),
            dir.display()
        );
    }
    Ok(dir)
}

/// What the generated config adds to the common one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// Nothing.
    Plain,
    /// A drop-in folder, `plugins.d` (`[plugins].dir`).
    DropIn,
    /// A request head must arrive within [`ABUSE_HEADER_READ_TIMEOUT_SECS`], so holding
    /// partial heads a few seconds outlasts it.
    Abuse,
    /// S4's: the rojo is told its model's window is [`crate::upstream::LONG_WINDOW_TOKENS`],
    /// so the long conversation outgrows it; with `tokenizer`, the model is named `gpt-4o`,
    /// so the host counts requests with OpenAI's `o200k_base` instead of estimating them.
    Long {
        /// Whether the host counts with a tokenizer.
        tokenizer: bool,
    },
}

/// `[server].header_read_timeout_secs` of the [`Flavour::Abuse`] config.
pub(crate) const ABUSE_HEADER_READ_TIMEOUT_SECS: u64 = 2;

/// Memory of the host process, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Memory {
    /// Resident now (`VmRSS`).
    pub(crate) rss: u64,
    /// Highest resident since start or the last reset (`VmHWM`).
    pub(crate) peak: u64,
    /// Resident and private (`RssAnon`: heap, stacks), without the mapped files that `rss`
    /// counts as far as the page cache has them (a binary just copied counts more).
    pub(crate) anon: u64,
}

/// A running host process; killed, with whatever its wrapper started, when dropped unstopped.
#[derive(Debug)]
pub(crate) struct HostProcess {
    child: Child,
    /// The host's, or its wrapper's.
    pid: u32,
    /// Whether it runs under a wrapper (`$ROJOS_BENCH_WRAP`).
    wrapped: bool,
    /// Whether [`HostProcess::stop`] has ended it.
    stopped: bool,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    dir: tempfile::TempDir,
}

impl HostProcess {
    /// Writes a config and starts `<build>/rojos` on it, with the default SQLite store.
    pub(crate) async fn start(
        build: &Path,
        provider_url: &str,
        flavour: Flavour,
    ) -> anyhow::Result<HostProcess> {
        Self::start_on(build, provider_url, flavour, &StoreSetup::default()).await
    }

    /// As [`HostProcess::start`], with the conversation store of `store`.
    pub(crate) async fn start_on(
        build: &Path,
        provider_url: &str,
        flavour: Flavour,
        store: &StoreSetup,
    ) -> anyhow::Result<HostProcess> {
        Self::launch(&Launch::of_build(build), provider_url, flavour, store).await
    }

    /// Writes a config loading `launch.plugins` and starts `launch.binary` on it.
    pub(crate) async fn launch(
        launch: &Launch,
        provider_url: &str,
        flavour: Flavour,
        store: &StoreSetup,
    ) -> anyhow::Result<HostProcess> {
        let dir = tempfile::tempdir().context("cannot make a temp folder")?;
        let config = dir.path().join("rojos.toml");
        let mut text = render_config(launch, provider_url, flavour) + &store.config;
        // `[store]` is the last table: a key set here lands in it (SQLite has none to take it).
        if let (Some(share), false) = (launch.share_runs, store.config.is_empty()) {
            text += &format!("share_runs = {share}\n");
        }
        std::fs::write(&config, text)?;
        if flavour == Flavour::DropIn {
            std::fs::create_dir(dir.path().join("plugins.d"))?;
        }
        std::fs::create_dir(dir.path().join(LOG_FOLDER))?;
        let log = std::fs::File::create(log_path(dir.path()))?;
        let mut command = wrapped(launch);
        let mut child = command
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::piped())
            .stderr(log)
            .stdin(Stdio::null())
            .envs(store.env.clone())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", launch.binary.display()))?;
        let pid = child.id().context("the host exited at once")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(rest) = line.strip_prefix("rojos listening on ") {
                    return Ok(rest.trim_end_matches('/').to_owned());
                }
            }
            bail!("the host ended before listening")
        })
        .await
        .context("the host did not start listening within 20 s")?
        .with_context(|| log_tail(dir.path()))?;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(HostProcess {
            child,
            pid,
            wrapped: launch.wrap.is_some(),
            stopped: false,
            url,
            dir,
        })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The folder with `rojos.toml`, `storage/` and the host's log.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The root folder of `project`.
    pub(crate) fn project_root(&self, project: &str) -> PathBuf {
        self.dir.path().join("storage").join(project).join("root")
    }

    /// The host's memory now.
    pub(crate) fn memory(&self) -> anyhow::Result<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024)
        };
        Ok(Memory {
            rss: field("VmRSS:"),
            peak: field("VmHWM:"),
            anon: field("RssAnon:"),
        })
    }

    /// Resets `VmHWM` to the current RSS (Linux `clear_refs` 5); false where not allowed.
    pub(crate) fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").is_ok()
    }

    /// CPU time the host has used (user + system).
    pub(crate) fn cpu(&self) -> anyhow::Result<Duration> {
        cpu_of(&format!("/proc/{}/stat", self.pid))
    }

    /// CPU time the host has used, user and system apart.
    pub(crate) fn cpu_times(&self) -> anyhow::Result<CpuTimes> {
        Ok(stat_of(&format!("/proc/{}/stat", self.pid))?.times)
    }

    /// Whether the process is still running.
    pub(crate) fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops the host as an operator would (SIGTERM: open streams end, history is stored),
    /// waiting up to a minute for it or its wrapper (a profiler writes its report then) and
    /// ten seconds more for what they started; what is left then is killed. A wrapper's
    /// children are sent SIGTERM too: `strace`, sent it, ends and leaves the host it runs as
    /// a child running. The host's own children (MCP servers) are the host's to stop.
    pub(crate) async fn stop(mut self) {
        let processes = processes().unwrap_or_default();
        let family = family_of(self.pid, &processes);
        let mut first = vec![self.pid];
        if self.wrapped {
            first.extend(children_of(self.pid, &processes));
        }
        signal(&first, Signal::TERM);
        let _ = tokio::time::timeout(Duration::from_secs(60), self.child.wait()).await;
        let ended = async {
            while family.iter().any(|&pid| running(pid)) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(10), ended).await;
        let left: Vec<u32> = family.into_iter().filter(|&pid| running(pid)).collect();
        signal(&left, Signal::KILL);
        self.stopped = true;
    }

    /// The last lines of the host's log, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        log_tail(self.dir.path())
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        if !self.stopped {
            signal(
                &family_of(self.pid, &processes().unwrap_or_default()),
                Signal::KILL,
            );
        }
    }
}

/// Process `pid` and its descendants among `processes`.
fn family_of(pid: u32, processes: &[(u32, Stat)]) -> Vec<u32> {
    let mut family = vec![pid];
    let mut next = 0;
    while let Some(&parent) = family.get(next) {
        family.extend(children_of(parent, processes));
        next += 1;
    }
    family
}

/// The children of process `parent` among `processes`.
fn children_of(parent: u32, processes: &[(u32, Stat)]) -> impl Iterator<Item = u32> + '_ {
    processes
        .iter()
        .filter(move |(_, stat)| stat.parent == parent)
        .map(|&(child, _)| child)
}

/// Sends `signal` to each of `pids`.
fn signal(pids: &[u32], signal: Signal) {
    for pid in pids {
        if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(*pid).unwrap_or(0)) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }
}

/// Whether process `pid` is running: one that has ended is not, reaped or not (a process
/// whose parent has ended may never be reaped).
fn running(pid: u32) -> bool {
    stat_of(&format!("/proc/{pid}/stat")).is_ok_and(|stat| stat.state != 'Z')
}

/// The host's command, run under the launch's wrapper when it has one (a profiler, e.g.
/// `valgrind --tool=massif`): its words come first, then the host binary. Memory and CPU are
/// then the wrapper's process, which runs the host.
fn wrapped(launch: &Launch) -> Command {
    let wrap = launch.wrap.as_deref().unwrap_or_default();
    let mut words = wrap.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(&launch.binary);
            command
        }
        None => Command::new(&launch.binary),
    }
}

/// `$ROJOS_BENCH_WRAP`, when it names a wrapper.
pub(crate) fn wrapped_by() -> Option<String> {
    std::env::var("ROJOS_BENCH_WRAP")
        .ok()
        .filter(|wrap| !wrap.trim().is_empty())
}

/// The folder of the host's log, below the config's: the host watches the config's folder
/// (not its subfolders) for changes, and a log written beside `rojos.toml` woke its watcher
/// threads on every line, a cost no deployment with logs elsewhere has.
const LOG_FOLDER: &str = "log";

/// Where the host's standard error goes.
fn log_path(dir: &Path) -> PathBuf {
    dir.join(LOG_FOLDER).join("rojos.log")
}

fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(log_path(dir)).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(15)..].join("\n");
    format!("host log ({}):\n{tail}", log_path(dir).display())
}

fn render_config(launch: &Launch, provider_url: &str, flavour: Flavour) -> String {
    let load: Vec<String> = launch
        .plugin_paths()
        .iter()
        .map(|lib| format!("{:?}", lib.display().to_string()))
        .collect();
    format!(
        r#"[server]
bind = "127.0.0.1:0"
storage = "storage"
max_concurrent_chats = 8192
max_chats_per_token = 8192
{header_timeout}
[[auth.tokens]]
token = "{TOKEN}"
projects = ["*"]

[plugins]
load = [{load}]
{dir}{isolation}call_timeout_secs = 60
max_concurrent_calls = 256

[providers.bench]
base_url = "{provider_url}"
model = "{model}"
idle_timeout_secs = 60
turn_timeout_secs = 300

[rojos.default]
provider = "bench"
tools = "*"
{window}"#,
        load = load.join(", "),
        isolation = launch
            .isolation
            .map(|i| match i {
                "worker-exec" => "isolation = \"worker\"\nworker_start = \"exec\"\n".to_owned(),
                i => format!("isolation = \"{i}\"\n"),
            })
            .unwrap_or_default(),
        dir = if flavour == Flavour::DropIn {
            "dir = \"plugins.d\"\n"
        } else {
            ""
        },
        header_timeout = if flavour == Flavour::Abuse {
            format!("header_read_timeout_secs = {ABUSE_HEADER_READ_TIMEOUT_SECS}\n")
        } else {
            String::new()
        },
        model = match flavour {
            Flavour::Long { tokenizer: true } => crate::upstream::TOKENIZED_MODEL,
            _ => crate::upstream::MODEL,
        },
        window = match flavour {
            Flavour::Long { .. } => {
                format!("context_tokens = {}\n", crate::upstream::LONG_WINDOW_TOKENS)
            }
            _ => String::new(),
        },
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A stand-in host, the shell script `host`, started as the bench starts one (under the
    /// shell script `wrapper` when given). The scripts get the host's arguments, `--config
    /// <folder>/rojos.toml`, so they can leave files in its folder.
    async fn a_stand_in_host(host: &str, wrapper: Option<&str>) -> HostProcess {
        let scripts = tempfile::tempdir().expect("a temp folder");
        let script = |name: &str, text: &str| {
            let path = scripts.path().join(name);
            std::fs::write(&path, text).expect("written");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .expect("made executable");
            path
        };
        let launch = Launch {
            binary: script("host.sh", host),
            plugin_dir: scripts.path().to_owned(),
            load: Vec::new(),
            wrap: wrapper.map(|text| script("wrapper.sh", text).display().to_string()),
            isolation: None,
            share_runs: None,
        };
        HostProcess::launch(
            &launch,
            "http://127.0.0.1:9",
            Flavour::Plain,
            &StoreSetup::default(),
        )
        .await
        .expect("the stand-in host starts")
    }

    /// The pid a stand-in wrote to `name` in its folder.
    fn pid_in(process: &HostProcess, name: &str) -> u32 {
        let pid = std::fs::read_to_string(process.dir().join(name))
            .expect("the stand-in wrote a pid")
            .trim()
            .parse()
            .expect("a pid");
        assert!(running(pid), "{name} runs");
        pid
    }

    /// A stand-in host that writes its pid, says it listens, and sleeps; under a stand-in for
    /// `strace`, which runs its command as a child and, sent SIGTERM, ends without passing it
    /// on.
    async fn a_host_under_a_wrapper_that_leaves_it_running() -> (HostProcess, u32) {
        let process = a_stand_in_host(
            "#!/bin/sh\necho $$ > \"$(dirname \"$2\")/host.pid\"\n\
             echo 'rojos listening on http://127.0.0.1:9/'\nexec sleep 600\n",
            Some("#!/bin/sh\n\"$@\" &\ntrap 'exit 0' TERM\nwait\n"),
        )
        .await;
        let pid = pid_in(&process, "host.pid");
        (process, pid)
    }

    /// Whether process `pid` has ended within five seconds.
    async fn ends(pid: u32) -> bool {
        for _ in 0..250 {
            if !running(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[tokio::test]
    async fn stopping_a_host_stops_it_when_its_wrapper_would_leave_it_running() {
        let (process, pid) = a_host_under_a_wrapper_that_leaves_it_running().await;
        process.stop().await;
        assert!(!running(pid), "the host outlived its stop");
    }

    #[tokio::test]
    async fn the_host_s_own_children_are_the_host_s_to_stop() {
        // Like a host with an MCP server: the child notes a SIGTERM at once (in a folder of
        // the test's: the host's goes with its stop); the host, sent one, kills the child
        // outright a little later and ends.
        let notes = tempfile::tempdir().expect("a temp folder");
        let term = notes.path().join("child.term");
        let process = a_stand_in_host(
            &format!(
                "#!/bin/sh\ndir=\"$(dirname \"$2\")\"\n\
                 sh -c 'trap \"echo > {term}; exit 0\" TERM; while :; do sleep 1 & wait $!; done' &\n\
                 child=$!\necho $child > \"$dir/child.pid\"\n\
                 trap 'sleep 0.3; kill -KILL $child; exit 0' TERM\n\
                 echo 'rojos listening on http://127.0.0.1:9/'\n\
                 while :; do sleep 0.02; done\n",
                term = term.display()
            ),
            None,
        )
        .await;
        let child = pid_in(&process, "child.pid");
        process.stop().await;
        assert!(!running(child), "the host's child outlived its stop");
        assert!(
            !term.exists(),
            "the bench sent SIGTERM to the host's child itself"
        );
    }

    #[tokio::test]
    async fn a_host_dropped_unstopped_is_killed_with_its_wrapper() {
        let (process, pid) = a_host_under_a_wrapper_that_leaves_it_running().await;
        drop(process);
        assert!(ends(pid).await, "the host outlived its handle");
    }

    #[test]
    fn a_binary_named_by_a_relative_path_is_launched_by_its_absolute_one() {
        // The host's config lives in a temp folder, so a relative path would name nothing
        // there. Tests run in the crate's folder, where `Cargo.toml` stands.
        let build = Path::new("/no/such/build");
        let launch = Launch::of_binary(Path::new("Cargo.toml"), build).expect("a file");
        assert!(launch.binary.is_absolute(), "{}", launch.binary.display());
        assert!(launch.binary.ends_with("Cargo.toml"));
        assert_eq!(
            launch.plugin_dir, build,
            "no plugins beside it: the build's"
        );
    }
}
