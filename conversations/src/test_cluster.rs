//! `PgCluster`: a throwaway PostgreSQL server for tests (feature `test-cluster`), made with
//! Debian's `postgresql` package: `initdb` in a temp folder, started with `pg_ctl` on a free
//! loopback port, with password (SCRAM) logins over TCP and optionally TLS. Used by this
//! crate's store suite and the host's end-to-end tests; nothing here runs in production.
//!
//! The server is looked after by a small shell "guardian" process whose standard input is a
//! pipe from the test process: when the test process ends in any way (even killed), the pipe
//! closes and the guardian stops the server and removes its folder. So a cluster kept in a
//! `static` for a whole test binary does not outlive it.
//!
//! `initdb` refuses to run as root (as CI and the developers' machines run), so under root
//! every server command runs as the `postgres` user the package creates, with the folder
//! handed to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// Where Debian puts the server binaries: `<here>/<major version>/bin`.
const PACKAGE_ROOT: &str = "/usr/lib/postgresql";

/// The superuser every cluster has; its password is [`PgCluster::password`].
pub const CLUSTER_USER: &str = "rojos";

/// Why a cluster could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The package is not installed.
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl) not found under {PACKAGE_ROOT}/*/bin: \
         install it: apt-get install -y postgresql"
    )]
    NotInstalled,
    /// A command failed; its output is included.
    #[error("{what} failed: {output}")]
    Command {
        /// What was being done.
        what: String,
        /// The command's stderr and stdout.
        output: String,
    },
    /// A command could not be run at all.
    #[error("cannot run {what}")]
    Spawn {
        /// The command.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Options of [`PgCluster::start_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterOptions {
    /// Serve TLS only (`hostssl` logins), with a certificate for `127.0.0.1` signed by a
    /// test CA (see [`PgCluster::ca_file`]); plain connections are refused.
    pub tls: bool,
    /// Write to disk like a production server (`fsync`, full-page writes), committing as
    /// SQLite's WAL mode with `synchronous=NORMAL` does (`synchronous_commit = off`: a crash
    /// may lose the last commits, never the database). Off, the tests' default, nothing is
    /// synced: fast, and a crash may lose the cluster, which a test throws away anyway.
    pub durable: bool,
}

/// A running throwaway PostgreSQL server; stopped and deleted on drop.
#[derive(Debug)]
pub struct PgCluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    /// Closing it tells the guardian to stop the server.
    guardian_input: Mutex<Option<ChildStdin>>,
    guardian: Mutex<Child>,
    databases: AtomicU32,
}

impl PgCluster {
    /// A new cluster without TLS.
    ///
    /// # Errors
    ///
    /// [`ClusterError::NotInstalled`] when the package is missing; otherwise the failing
    /// command with its output.
    pub fn start() -> Result<Self, ClusterError> {
        Self::start_with(ClusterOptions::default())
    }

    /// A new cluster with `options`.
    ///
    /// # Errors
    ///
    /// As [`PgCluster::start`].
    pub fn start_with(options: ClusterOptions) -> Result<Self, ClusterError> {
        let bin = server_binaries()?;
        let as_postgres = running_as_root()?;
        let dir = tempfile::Builder::new()
            .prefix("rojos-pg-")
            .tempdir()
            .map_err(|source| spawn_error("a temp folder", source))?
            .keep();
        let port = free_port()?;
        write_file(&dir.join("pwfile"), &password_for(port))?;
        if options.tls {
            make_certificate(&dir)?;
        }
        if as_postgres {
            run(
                "chown",
                Command::new("chown")
                    .arg("-R")
                    .arg("postgres:postgres")
                    .arg(&dir),
            )?;
        }
        let mut guardian = Command::new("sh");
        guardian
            .arg("-c")
            .arg(GUARDIAN)
            .arg("guardian")
            .arg(&bin)
            .arg(&dir)
            .arg(port.to_string())
            .arg(if options.tls { "on" } else { "off" })
            .arg(if options.durable { "on" } else { "off" });
        let (input, child) = spawn_guardian(as_postgres, guardian)?;
        let cluster = Self {
            dir,
            bin,
            port,
            as_postgres,
            guardian_input: Mutex::new(Some(input)),
            guardian: Mutex::new(child),
            databases: AtomicU32::new(0),
        };
        Ok(cluster)
    }

    /// The TCP port on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's password (SCRAM over TCP).
    pub fn password(&self) -> String {
        password_for(self.port)
    }

    /// The CA certificate that signed a TLS cluster's server certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// A URL for `database` without the password, as `rojos.toml` takes it.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{CLUSTER_USER}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// Creates a new empty database and returns its name.
    ///
    /// # Errors
    ///
    /// The `psql` command failed.
    pub fn create_database(&self) -> Result<String, ClusterError> {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let name = format!("test_{n}");
        self.psql("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(name)
    }

    /// Runs `sql` in `database` as the superuser with `psql`, returning its unaligned output.
    ///
    /// # Errors
    ///
    /// `psql` failed (the SQL is wrong, or the server is stopped).
    pub fn psql(&self, database: &str, sql: &str) -> Result<String, ClusterError> {
        let mut psql = Command::new(self.bin.join("psql"));
        psql.arg("-h")
            .arg(&self.dir)
            .arg("-p")
            .arg(self.port.to_string())
            .args([
                "-U",
                CLUSTER_USER,
                "-d",
                database,
                "-XAtq",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ]);
        run("psql", &mut psql)
    }

    /// Stops the server (fast shutdown: open connections are closed), keeping its data.
    ///
    /// # Errors
    ///
    /// `pg_ctl stop` failed.
    pub fn stop_server(&self) -> Result<(), ClusterError> {
        self.pg_ctl(&["-m", "fast", "stop"]).map(drop)
    }

    /// Starts the stopped server again on the same port, waiting until it accepts
    /// connections.
    ///
    /// # Errors
    ///
    /// `pg_ctl start` failed.
    pub fn start_server(&self) -> Result<(), ClusterError> {
        let log = self.dir.join("server.log");
        let log = log.to_string_lossy();
        self.pg_ctl(&["-l", &log, "start"]).map(drop)
    }

    /// Freezes the server (`SIGSTOP` to the postmaster, then its backends and workers):
    /// connections stay open and nothing answers, as with a hung server or a machine lost
    /// without closing its connections.
    ///
    /// # Errors
    ///
    /// The postmaster's pid cannot be read, or `kill` failed.
    pub fn pause_server(&self) -> Result<(), ClusterError> {
        let postmaster = self.postmaster_pid()?;
        signal("-STOP", &[postmaster])?;
        signal("-STOP", &children_of(postmaster))
    }

    /// Lets a server frozen by [`PgCluster::pause_server`] go on.
    ///
    /// # Errors
    ///
    /// The postmaster's pid cannot be read, or `kill` failed.
    pub fn resume_server(&self) -> Result<(), ClusterError> {
        let postmaster = self.postmaster_pid()?;
        signal("-CONT", &children_of(postmaster))?;
        signal("-CONT", &[postmaster])
    }

    /// The postmaster's pid, the first line of `data/postmaster.pid`.
    fn postmaster_pid(&self) -> Result<u32, ClusterError> {
        let file = self.dir.join("data/postmaster.pid");
        let text = std::fs::read_to_string(&file)
            .map_err(|source| spawn_error("read postmaster.pid", source))?;
        text.lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .ok_or_else(|| ClusterError::Command {
                what: "read postmaster.pid".to_owned(),
                output: text.clone(),
            })
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<String, ClusterError> {
        let pg_ctl = self.bin.join("pg_ctl");
        let data = self.dir.join("data");
        let mut command = self.as_server_user(&pg_ctl);
        command.arg("-D").arg(&data).arg("-w").args(args);
        run("pg_ctl", &mut command)
    }

    fn as_server_user(&self, program: &Path) -> Command {
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // A test that failed while the server was paused: it must be able to stop.
        let _ = self.resume_server();
        let input = self
            .guardian_input
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(input);
        let guardian = self
            .guardian
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = guardian.wait();
    }
}

/// The guardian: makes the cluster, says `ready`, waits for its input to close, then stops
/// the server and removes the folder. Arguments: bin folder, cluster folder, port, ssl,
/// durable.
const GUARDIAN: &str = r#"
set -e
bin="$1"; dir="$2"; port="$3"; ssl="$4"; durable="$5"
"$bin/initdb" -D "$dir/data" -U rojos --pwfile="$dir/pwfile" -E UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
cat >>"$dir/data/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
fsync = $durable
synchronous_commit = off
full_page_writes = $durable
max_connections = 200
ssl = $ssl
ssl_cert_file = '$dir/server.crt'
ssl_key_file = '$dir/server.key'
EOF
if [ "$ssl" = on ]; then
    chmod 600 "$dir/server.key"
    sed -i 's/^host /hostssl /' "$dir/data/pg_hba.conf"
fi
"$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
echo ready
cat >/dev/null || true
"$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
rm -rf "$dir"
"#;

/// Runs the guardian (as `postgres` under root) and waits for its `ready`.
fn spawn_guardian(
    as_postgres: bool,
    guardian: Command,
) -> Result<(ChildStdin, Child), ClusterError> {
    let mut command = if as_postgres {
        let mut runuser = Command::new("runuser");
        runuser
            .args(["-u", "postgres", "--"])
            .arg(guardian.get_program())
            .args(guardian.get_args());
        runuser
    } else {
        guardian
    };
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| spawn_error("the cluster guardian (sh)", source))?;
    let input = child.stdin.take().expect("stdin was piped");
    let stdout = child.stdout.take().expect("stdout was piped");
    let mut first = String::new();
    let _ = BufReader::new(stdout).read_line(&mut first);
    if first.trim() == "ready" {
        return Ok((input, child));
    }
    let mut output = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut output);
    }
    let _ = child.wait();
    Err(ClusterError::Command {
        what: "making the test cluster (initdb, pg_ctl start)".to_owned(),
        output,
    })
}

/// The newest installed version's `bin` folder holding `initdb`.
fn server_binaries() -> Result<PathBuf, ClusterError> {
    let versions = std::fs::read_dir(PACKAGE_ROOT).map_err(|_| ClusterError::NotInstalled)?;
    let mut found: Vec<(u32, PathBuf)> = versions
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((major, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or(ClusterError::NotInstalled)
}

/// The processes whose parent is `parent` (from `/proc/<pid>/stat`; one that ends meanwhile
/// is left out).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid ...`: the name may hold spaces, so read after its `)`.
            let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after_name.split_whitespace().nth(1) == Some(parent.to_string().as_str())
        })
        .collect()
}

/// Sends `signal` (`-STOP`, `-CONT`) to `pids` with `kill`.
fn signal(signal: &str, pids: &[u32]) -> Result<(), ClusterError> {
    if pids.is_empty() {
        return Ok(());
    }
    let mut kill = Command::new("kill");
    kill.arg(signal).args(pids.iter().map(u32::to_string));
    run("kill", &mut kill).map(drop)
}

fn running_as_root() -> Result<bool, ClusterError> {
    Ok(run("id -u", Command::new("id").arg("-u"))?.trim() == "0")
}

/// A port nothing listens on now (the kernel's pick for a fresh socket).
fn free_port() -> Result<u16, ClusterError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|source| spawn_error("a free port", source))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|source| spawn_error("a free port", source))
}

fn password_for(port: u16) -> String {
    format!("test-password-{port}")
}

/// A test CA (`ca.crt`) and a server certificate it signed for `127.0.0.1` (`server.crt`,
/// `server.key`).
fn make_certificate(dir: &Path) -> Result<(), ClusterError> {
    const EC: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    write_file(
        &dir.join("server.ext"),
        "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n\
         keyUsage = digitalSignature\nextendedKeyUsage = serverAuth\n",
    )?;
    let mut ca = Command::new("openssl");
    ca.current_dir(dir)
        .args([
            "req",
            "-x509",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=rojos test CA",
        ])
        .args(EC)
        .args(["-keyout", "ca.key", "-out", "ca.crt"]);
    run("openssl req (CA)", &mut ca)?;
    let mut request = Command::new("openssl");
    request
        .current_dir(dir)
        .args(["req", "-nodes", "-subj", "/CN=127.0.0.1"])
        .args(EC)
        .args(["-keyout", "server.key", "-out", "server.csr"]);
    run("openssl req (server)", &mut request)?;
    let mut sign = Command::new("openssl");
    sign.current_dir(dir)
        .args([
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
        ])
        .args([
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ]);
    run("openssl x509 (sign)", &mut sign).map(drop)
}

fn write_file(path: &Path, text: &str) -> Result<(), ClusterError> {
    std::fs::File::create(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|source| spawn_error(&format!("writing {}", path.display()), source))
}

fn spawn_error(what: &str, source: std::io::Error) -> ClusterError {
    ClusterError::Spawn {
        what: what.to_owned(),
        source,
    }
}

/// Runs `command`, returning its stdout, or its output in the error when it fails.
fn run(what: &str, command: &mut Command) -> Result<String, ClusterError> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|source| spawn_error(what, source))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        return Ok(stdout);
    }
    Err(ClusterError::Command {
        what: what.to_owned(),
        output: format!("{}{stdout}", String::from_utf8_lossy(&output.stderr)),
    })
}
