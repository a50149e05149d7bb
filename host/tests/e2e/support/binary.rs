//! The real `rojos` binary as a child process with a known environment: none of the
//! variables that change what it logs or which config and keys it reads are inherited from
//! the test's own environment, so a developer's `RUST_LOG` or `OPENAI_API_KEY` cannot change
//! an outcome.

use std::process::Command;

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
