//! Who can get code into the server: a library is handed to the dynamic loader only when its
//! folder, every folder above it and the file itself belong to the server's user or root and
//! are not writable by others. Each case drops `librojos_test_ctor_marker.so` (not a plugin;
//! its constructor writes a marker file) where an attacker could have put it, and checks that
//! the marker is absent, the library was never opened and the log names the reason; a
//! positive control shows the same library in a safe folder is opened (drop-ins only in a
//! sandboxed worker, whose constructor can leave no marker: the "not a rojos tool plugin"
//! line is the proof it was opened).
//!
//! These run the real `rojos` binary as a child: the marker path travels in an environment
//! variable set for that child only (the environment is shared by the tests running in
//! parallel in this process), and a constructor runs once per process and content (the
//! in-process hosts share one loader, which never loads the same bytes twice).
//!
//! The cases with a file or folder owned by another user `chown` to uid 65534 and need root
//! (CI runs as root); run as another user they fail saying so.

use std::{
    io::BufRead,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::support::{
    host::{HostConfig, TOKEN},
    plugin_lib,
};

const MARKER_VAR: &str = "ROJOS_TEST_CTOR_MARKER";
const NOBODY: u32 = 65534;

/// A temp folder holding a config, a drop-in folder and the marker path.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    /// Writes `config` (its drop-in folder is `plugins.d`, created `0755`).
    fn new(config: &HostConfig) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rojos.toml"), config.render()).unwrap();
        std::fs::create_dir(dir.path().join("plugins.d")).unwrap();
        chmod(&dir.path().join("plugins.d"), 0o755);
        Setup { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The path of `name` with its folder resolved, as the host names it in its messages.
    fn real(&self, name: &str) -> String {
        let path = self.path(name);
        let folder = path.parent().unwrap().canonicalize().unwrap();
        folder.join(path.file_name().unwrap()).display().to_string()
    }

    fn marker(&self) -> PathBuf {
        self.path("constructor-ran")
    }

    fn rojos(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rojos"));
        command
            .arg("--config")
            .arg(self.path("rojos.toml"))
            .env(MARKER_VAR, self.marker())
            .env("RUST_LOG", "rojos=debug")
            // The loader's private copies go in this test's folder, removed with it (a killed
            // server cannot remove them itself).
            .env("TMPDIR", self.dir.path());
        command
    }

    /// `rojos check`: starts (loading `[plugins].load` and scanning the drop-in folder once),
    /// prints the tools and exits.
    fn check(&self) -> (Output, String) {
        let output = self.rojos().arg("check").output().expect("run rojos check");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output, stderr)
    }
}

/// A config with the built-ins, a drop-in folder, and no `list_files` among the built-ins (so
/// a drop-in may provide it).
fn config() -> HostConfig {
    let mut config = HostConfig::builtins();
    config
        .load
        .retain(|p| !p.ends_with("librojos_tool_list_files.so"));
    config.dropin = true;
    config
}

fn marker_lib() -> PathBuf {
    plugin_lib("rojos_test_ctor_marker")
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown_to_nobody(path: &Path) {
    require_root();
    std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
}

fn require_root() {
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "this test needs root: it gives a file or folder to another user (uid {NOBODY}) with chown; run the e2e tests as root, as CI does"
    );
}

/// Copies `lib` to `to` with `mode`, under a dot-name first, as users are told to deploy.
fn deploy(lib: &Path, to: &Path, mode: u32) {
    let tmp = to.with_file_name(format!(
        ".{}.tmp",
        to.file_name().unwrap().to_string_lossy()
    ));
    std::fs::copy(lib, &tmp).unwrap();
    chmod(&tmp, mode);
    std::fs::rename(&tmp, to).unwrap();
}

/// Neither the server nor a worker opened the library: no marker (the server's process) and
/// no "not a rojos tool plugin" (what opening it, in a worker too, reports).
fn assert_no_constructor_ran(setup: &Setup, log: &str) {
    assert!(
        !setup.marker().exists(),
        "the library's constructor ran inside the server\n{log}"
    );
    assert!(
        !log.contains("libctor.so': not a rojos tool plugin"),
        "the library was opened (in a worker)\n{log}"
    );
}

/// The log lines containing every one of `parts`.
fn lines_with<'a>(log: &'a str, parts: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|line| parts.iter().all(|part| line.contains(part)))
        .collect()
}

#[test]
fn a_symlink_in_the_drop_in_folder_to_a_world_writable_library_is_not_opened() {
    let setup = Setup::new(&config());
    std::fs::create_dir(setup.path("elsewhere")).unwrap();
    deploy(&marker_lib(), &setup.path("elsewhere/libctor.so"), 0o666);
    std::os::unix::fs::symlink(
        setup.path("elsewhere/libctor.so"),
        setup.path("plugins.d/libctor.so"),
    )
    .unwrap();
    let (output, log) = setup.check();
    assert!(output.status.success(), "{log}");
    let link = setup.real("plugins.d/libctor.so");
    let refusals = lines_with(
        &log,
        &[&format!(
            "untrusted: '{link}' is a symbolic link; fix: replace the symlink by the file it points to"
        )],
    );
    assert_eq!(refusals.len(), 1, "{log}");
    assert_no_constructor_ran(&setup, &log);
}

#[test]
fn a_drop_in_folder_owned_by_another_user_stops_the_start_and_nothing_is_opened() {
    let setup = Setup::new(&config());
    deploy(&marker_lib(), &setup.path("plugins.d/libctor.so"), 0o755);
    chown_to_nobody(&setup.path("plugins.d"));
    let (output, log) = setup.check();
    assert_eq!(output.status.code(), Some(2), "{log}");
    let folder = setup.real("plugins.d");
    assert!(
        log.contains(&format!(
            "is not trusted, no plugin is loaded from it (a plugin runs code in the server): '{folder}' is owned by uid {NOBODY}, not by the server's user (uid 0) or root; fix: chown root '{folder}'"
        )),
        "{log}"
    );
    assert_no_constructor_ran(&setup, &log);
}

#[test]
fn a_folder_above_the_drop_in_folder_owned_by_another_user_is_refused() {
    let setup = Setup::new(&config());
    // plugins.d moves under a folder of another user (its owner could swap plugins.d).
    std::fs::create_dir(setup.path("theirs")).unwrap();
    std::fs::rename(setup.path("plugins.d"), setup.path("theirs/plugins.d")).unwrap();
    std::os::unix::fs::symlink("theirs/plugins.d", setup.path("plugins.d")).unwrap();
    deploy(
        &marker_lib(),
        &setup.path("theirs/plugins.d/libctor.so"),
        0o755,
    );
    chown_to_nobody(&setup.path("theirs"));
    let (output, log) = setup.check();
    assert_eq!(output.status.code(), Some(2), "{log}");
    let theirs = setup.real("theirs");
    assert!(
        log.contains(&format!(
            "'{theirs}' is owned by uid {NOBODY}, not by the server's user (uid 0) or root; fix: chown root '{theirs}'"
        )),
        "the real path's components are checked, through the symlink\n{log}"
    );
    assert_no_constructor_ran(&setup, &log);
}

#[test]
fn a_group_writable_library_file_in_the_drop_in_folder_is_not_opened() {
    let setup = Setup::new(&config());
    deploy(&marker_lib(), &setup.path("plugins.d/libctor.so"), 0o775);
    let (output, log) = setup.check();
    assert!(output.status.success(), "{log}");
    let file = setup.real("plugins.d/libctor.so");
    let refusals = lines_with(
        &log,
        &[&format!(
            "plugin '{}': untrusted: '{file}' is writable by group or others (mode 775); fix: chmod go-w '{file}'",
            setup.path("plugins.d/libctor.so").display()
        )],
    );
    assert_eq!(refusals.len(), 1, "{log}");
    assert_no_constructor_ran(&setup, &log);
}

#[test]
fn a_library_file_owned_by_another_user_in_the_drop_in_folder_is_not_opened() {
    let setup = Setup::new(&config());
    deploy(&marker_lib(), &setup.path("plugins.d/libctor.so"), 0o755);
    chown_to_nobody(&setup.path("plugins.d/libctor.so"));
    let (output, log) = setup.check();
    assert!(output.status.success(), "{log}");
    let file = setup.real("plugins.d/libctor.so");
    assert_eq!(
        lines_with(
            &log,
            &[&format!(
                "untrusted: '{file}' is owned by uid {NOBODY}, not by the server's user (uid 0) or root; fix: chown root '{file}'"
            )]
        )
        .len(),
        1,
        "{log}"
    );
    assert_no_constructor_ran(&setup, &log);
}

#[test]
fn a_plugins_load_entry_under_a_world_writable_folder_stops_the_start_unopened() {
    let setup = Setup::new(&HostConfig::builtins());
    std::fs::create_dir(setup.path("shared")).unwrap();
    chmod(&setup.path("shared"), 0o777);
    deploy(&marker_lib(), &setup.path("shared/libctor.so"), 0o755);
    let mut config = HostConfig::builtins();
    config.load.push(setup.path("shared/libctor.so"));
    std::fs::write(setup.path("rojos.toml"), config.render()).unwrap();
    let (output, log) = setup.check();
    assert_eq!(output.status.code(), Some(2), "{log}");
    let shared = setup.real("shared");
    assert!(
        log.contains(&format!(
            "plugin '{}': untrusted: '{shared}' is writable by group or others (mode 777); fix: chmod go-w '{shared}'",
            setup.path("shared/libctor.so").display()
        )),
        "{log}"
    );
    assert_no_constructor_ran(&setup, &log);

    // The control: the same entry once the folder is fixed is opened (and then refused, as it
    // is no plugin) — its constructor ran, which is why the check must come first.
    chmod(&setup.path("shared"), 0o755);
    let (output, log) = setup.check();
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(
        log.contains("libctor.so': not a rojos tool plugin"),
        "{log}"
    );
    assert!(setup.marker().exists(), "{log}");
}

#[test]
fn control_a_library_in_a_safe_drop_in_folder_is_opened_in_a_confined_worker() {
    let setup = Setup::new(&config());
    deploy(&marker_lib(), &setup.path("plugins.d/libctor.so"), 0o755);
    let (output, log) = setup.check();
    assert!(output.status.success(), "{log}");
    assert!(
        log.contains("libctor.so': not a rojos tool plugin"),
        "opened (the marker library is not a plugin), so the other cases' missing line means something\n{log}"
    );
    // A drop-in is opened only in a sandboxed worker: its constructor ran with an empty
    // environment and no access outside the library, so it left no marker.
    assert!(!setup.marker().exists(), "{log}");
}

/// `rojos` serving in the background, its log going to a file.
struct Serving {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Serving {
    fn start(setup: &Setup) -> Serving {
        let log = setup.path("rojos.log");
        let mut child = setup
            .rojos()
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start rojos");
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let url = first
            .trim()
            .strip_prefix("rojos listening on ")
            .unwrap_or_else(|| panic!("rojos did not start: {first:?}"))
            .trim_end_matches('/')
            .to_owned();
        Serving { child, url, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    /// Waits (up to 30 s: the watcher rescans every 2 s) until `parts` share a log line. It
    /// blocks the test's own runtime, which has nothing else to do meanwhile.
    fn wait_for_log(&self, parts: &[&str]) {
        self.wait_for_any_log(&[parts]);
    }

    /// Waits until some log line has all the parts of one of `alternatives`.
    fn wait_for_any_log(&self, alternatives: &[&[&str]]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let log = || self.log();
        while !alternatives
            .iter()
            .any(|parts| !lines_with(&log(), parts).is_empty())
        {
            assert!(
                Instant::now() < deadline,
                "no log line with any of {alternatives:?}\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    async fn tool_names(&self) -> Vec<String> {
        let tools: Vec<Value> = reqwest::Client::new()
            .get(format!("{}/tools", self.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        tools
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_drop_in_folder_made_world_writable_after_start_loads_nothing_new_and_keeps_its_tools() {
    let setup = Setup::new(&config());
    deploy(
        &plugin_lib("rojos_tool_list_files"),
        &setup.path("plugins.d/liblist.so"),
        0o755,
    );
    let server = Serving::start(&setup);
    assert!(server.tool_names().await.contains(&"list_files".to_owned()));

    chmod(&setup.path("plugins.d"), 0o777);
    let folder = setup.real("plugins.d");
    let unsafe_line = format!(
        "is not trusted, no plugin is loaded from it (a plugin runs code in the server): '{folder}' is writable by group or others (mode 777); fix: chmod go-w '{folder}'"
    );
    server.wait_for_log(&[&unsafe_line]);
    deploy(&marker_lib(), &setup.path("plugins.d/libctor.so"), 0o755);
    // The watcher saw the new file and did not load it (a debug line at each scan), or (the
    // failure this test is for) it loaded it: then the marker is there.
    server.wait_for_any_log(&[
        &["not loaded: plugins.dir is not trusted", "libctor.so"],
        &["libctor.so': not a rojos tool plugin"],
    ]);
    let log = server.log();
    assert_no_constructor_ran(&setup, &log);
    assert_eq!(
        lines_with(&log, &[&unsafe_line]).len(),
        1,
        "one line, not one per rescan\n{log}"
    );
    assert!(
        server.tool_names().await.contains(&"list_files".to_owned()),
        "a tool loaded before stays (its code is a checked private copy)"
    );

    // Fixed: the waiting library is opened (in a confined worker) at the next scan.
    chmod(&setup.path("plugins.d"), 0o755);
    server.wait_for_log(&["libctor.so': not a rojos tool plugin"]);
    let log = server.log();
    assert!(log.contains("plugins.dir is trusted again"), "{log}");
}
