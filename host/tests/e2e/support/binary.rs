//! `RunningBinary`: the real `rojos` binary serving a config folder as a child process, with
//! its stdout and stderr (the log) read into shared text as they come, for tests that check
//! what the log says. Killed when dropped.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `rojos` serving the config in `dir`, its stdout and stderr read into shared text.
pub struct RunningBinary {
    child: Child,
    /// Everything it printed on stdout so far.
    pub stdout: Arc<Mutex<String>>,
    /// Everything it logged on stderr so far.
    pub stderr: Arc<Mutex<String>>,
}

impl RunningBinary {
    /// Starts `rojos --config DIR/rojos.toml` with `RUST_LOG=log` and the `env` variables.
    pub fn start(dir: &std::path::Path, log: &str, env: &[(&str, &str)]) -> RunningBinary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rojos"))
            .arg("--config")
            .arg(dir.join("rojos.toml"))
            .env("RUST_LOG", log)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rojos");
        let stdout = collect(child.stdout.take().expect("piped stdout"));
        let stderr = collect(child.stderr.take().expect("piped stderr"));
        RunningBinary {
            child,
            stdout,
            stderr,
        }
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
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
