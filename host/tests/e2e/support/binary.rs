//! The real `rojos` binary as a child process with a known environment: none of the
//! variables that change what it logs or which config and keys it reads are inherited from
//! the test's own environment, so a developer's `RUST_LOG` or `OPENAI_API_KEY` cannot change
//! an outcome. [`run`] runs one command to its end; [`RunningBinary`] serves a config folder,
//! its stdout and stderr (the log) read into shared text as they come, killed when dropped,
//! or by its guardian when the test process dies without dropping it (see [`GUARDIAN`]).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Variables the binary reads that tests set themselves when they need them.
const CLEARED: [&str; 11] = [
    "RUST_LOG",
    "NO_COLOR",
    "ROJOS_CONFIG",
    "ROJOS_LOG_FORMAT",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "MISTRAL_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
];

/// `rojos ARGS`, with [`CLEARED`] removed from its environment.
pub fn rojos(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rojos"));
    command.args(args);
    for name in CLEARED {
        command.env_remove(name);
    }
    command
}

/// [`CLEARED`], for a pseudo-terminal's environment.
pub fn cleared() -> &'static [&'static str] {
    &CLEARED
}

/// What one run printed, and how it ended.
#[derive(Debug)]
pub struct Ran {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `command` to its end, stdin empty.
pub fn run(mut command: Command) -> Ran {
    let output = command
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run rojos");
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `rojos` serving the config in `dir`, its stdout and stderr read into shared text.
pub struct RunningBinary {
    child: Child,
    /// Everything it printed on stdout so far.
    pub stdout: Arc<Mutex<String>>,
    /// Everything it logged on stderr so far (nothing with [`RunningBinary::start_unread_log`]).
    pub stderr: Arc<Mutex<String>>,
    /// Its stderr pipe, held open and never read ([`RunningBinary::start_unread_log`]).
    _unread: Option<std::process::ChildStderr>,
    /// The [`GUARDIAN`] and its input, held open while the test process lives.
    guardian: Child,
    guardian_input: Option<ChildStdin>,
}

/// A `sh` that ends the server (`$1`, its pid; `$2`, its program's path) once its standard
/// input, a pipe from the test process, closes without a word: so a test binary killed with
/// SIGKILL (a harness's time limit), whose `Drop`s never run, leaves no server running. A
/// process that does not run that program is left alone: the server may have ended and its
/// pid been given to another. `PR_SET_PDEATHSIG` in the server would not do: it follows the
/// thread that started the server, which may end long before the test.
const GUARDIAN: &str = r#"cat >/dev/null
case "$(readlink "/proc/$1/exe")" in "$2"*) kill -KILL "$1" ;; esac"#;

impl RunningBinary {
    /// Starts `rojos --config DIR/rojos.toml` with `RUST_LOG=log` and the `env` variables.
    pub fn start(dir: &std::path::Path, log: &str, env: &[(&str, &str)]) -> RunningBinary {
        Self::spawn(dir, log, env, true)
    }

    /// As [`RunningBinary::start`], but nobody reads its stderr: the pipe stays open, and
    /// fills once the kernel's buffer (64 KiB on Linux) is full, as a stuck log reader's would.
    pub fn start_unread_log(dir: &std::path::Path, log: &str) -> RunningBinary {
        Self::spawn(dir, log, &[], false)
    }

    fn spawn(
        dir: &std::path::Path,
        log: &str,
        env: &[(&str, &str)],
        read_stderr: bool,
    ) -> RunningBinary {
        let config = dir.join("rojos.toml");
        let mut child = rojos(&["--config", &config.to_string_lossy()])
            .env("RUST_LOG", log)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rojos");
        let (guardian, guardian_input) = guard(&child);
        let stdout = collect(child.stdout.take().expect("piped stdout"));
        let pipe = child.stderr.take().expect("piped stderr");
        let (stderr, unread) = if read_stderr {
            (collect(pipe), None)
        } else {
            (Arc::default(), Some(pipe))
        };
        RunningBinary {
            child,
            stdout,
            stderr,
            _unread: unread,
            guardian,
            guardian_input,
        }
    }

    /// Closes the guardian's input as the death of the test process would, and waits for
    /// the guardian to end (for the guardian's own test).
    pub fn orphan(&mut self) {
        drop(self.guardian_input.take());
        let _ = self.guardian.wait();
    }

    /// Ends the guardian without a word from it, before the server is reaped: from then on
    /// the server's pid may be given to another process.
    fn dismiss_guardian(&mut self) {
        let _ = self.guardian.kill();
        let _ = self.guardian.wait();
        drop(self.guardian_input.take());
    }

    /// Waits (generously: thirty seconds) until `text` holds `needle`, then returns all of it.
    pub fn wait_for(text: &Mutex<String>, needle: &str, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen = text.lock().expect("log lock").clone();
            if seen.contains(needle) {
                return seen;
            }
            assert!(Instant::now() < deadline, "{what} never came:\n{seen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// How the process ended, waiting for it at most `limit`; `None` while it runs.
    pub fn ended_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            let ended = self.child.try_wait().expect("the server's state");
            if ended.is_some() || Instant::now() >= deadline {
                return ended;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process with SIGKILL (no shutdown, nothing flushed) and waits for it.
    pub fn kill(&mut self) {
        self.dismiss_guardian();
        self.child.kill().expect("kill rojos");
        let _ = self.child.wait();
    }

    /// Asks the process to stop gracefully (SIGTERM, as a service manager does) and waits
    /// for it to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.dismiss_guardian();
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIGTERM sent");
        self.child.wait().expect("rojos exits")
    }

    /// The address from `rojos listening on http://ADDR/`.
    pub fn url(&self) -> String {
        let out = Self::wait_for(&self.stdout, "rojos listening on ", "the listening line");
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("rojos listening on "))
            .expect("listening line");
        line.trim_end_matches('/').to_owned()
    }
}

impl Drop for RunningBinary {
    fn drop(&mut self) {
        self.dismiss_guardian();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the [`GUARDIAN`] of `server`; returns it and its input.
fn guard(server: &Child) -> (Child, Option<ChildStdin>) {
    let program = std::fs::canonicalize(env!("CARGO_BIN_EXE_rojos")).expect("the binary's path");
    let mut guardian = Command::new("sh")
        .arg("-c")
        .arg(GUARDIAN)
        .arg("guardian")
        .arg(server.id().to_string())
        .arg(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the server's guardian (sh)");
    let input = guardian.stdin.take();
    (guardian, input)
}

fn collect(stream: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&text);
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let mut text = sink.lock().expect("log lock");
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}
