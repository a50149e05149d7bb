//! The real `rojos` binary under a pseudo-terminal (portable-pty, wezterm's), so it sees a
//! terminal on stdin, stdout and stderr as a person's shell gives it: for `rojos init`'s
//! questions and the coloured log. Everything it writes is collected; tests wait for text,
//! answer, and read the exit code.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, PtySize};

/// `rojos` running on a pseudo-terminal.
pub struct OnTerminal {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<Vec<u8>>>,
    /// Reads the terminal until the child has closed it.
    reader: Option<std::thread::JoinHandle<()>>,
    /// Keeps the terminal open while the child runs.
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl OnTerminal {
    /// Starts `rojos ARGS` in `cwd`, with `unset` removed from the test's own environment,
    /// then `env` set.
    pub fn start(args: &[&str], cwd: &Path, env: &[(&str, &str)], unset: &[&str]) -> OnTerminal {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pseudo-terminal");
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_rojos"));
        command.args(args);
        command.cwd(cwd);
        for name in unset {
            command.env_remove(name);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let child = pair.slave.spawn_command(command).expect("start rojos");
        drop(pair.slave);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut reader = pair.master.try_clone_reader().expect("terminal reader");
        let sink = Arc::clone(&screen);
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // Linux answers EIO once the child has closed the terminal: that is the end.
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                sink.lock()
                    .expect("screen lock")
                    .extend_from_slice(&buffer[..n]);
            }
        });
        let writer = pair.master.take_writer().expect("terminal writer");
        OnTerminal {
            child,
            writer,
            screen,
            reader: Some(reader),
            _master: pair.master,
        }
    }

    /// Everything written so far, as text.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().expect("screen lock")).into_owned()
    }

    /// Waits (generously) until the terminal shows `needle`; returns all it showed.
    pub fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the terminal never showed {needle:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `text` and Enter.
    pub fn type_line(&mut self, text: &str) {
        self.writer
            .write_all(format!("{text}\r").as_bytes())
            .and_then(|()| self.writer.flush())
            .expect("type on the terminal");
    }

    /// Waits for the exit; its code and everything the terminal showed.
    pub fn finish(mut self) -> (u32, String) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let code = loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                break status.exit_code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("rojos did not exit:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader ends when the child's side of the terminal is closed: all it wrote is in.
        if let Some(reader) = self.reader.take() {
            reader.join().expect("terminal reader");
        }
        (code, self.screen())
    }
}

impl Drop for OnTerminal {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
    }
}
