//! `Nginx`: a real nginx (Debian's `nginx` package) in front of test hosts, running the
//! repository's own reference configuration, `docs/nginx.conf`, with only its host lines and
//! its `listen` replaced. It runs as a child process with its own prefix, pid, logs and temp
//! folders in a temp folder, on a free loopback port, and stops when dropped. Missing nginx
//! fails the test with how to install it; it is never skipped.
//!
//! A small shell "guardian" starts nginx and stops it when its standard input (a pipe from
//! the test process) closes, so nginx does not outlive a test process that is killed (the
//! same idea as `rojos_conversations::test_cluster`).

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts the binary.
const NGINX: &str = "/usr/sbin/nginx";

/// The reference configuration the tests and docs/deploy.md share.
const REFERENCE: &str = include_str!("../../../../docs/nginx.conf");

/// The first host line of [`REFERENCE`]'s `upstream` block; the following ones start alike.
const HOST_LINE: &str = "server 10.0.0.";

/// [`REFERENCE`]'s `listen` line.
const LISTEN_LINE: &str = "listen 80;";

/// Starts nginx, then waits for `cat` to end (stdin closed), then stops nginx fast, waits
/// for it and removes its folder (`$2`).
const GUARDIAN: &str = r#""$1" -e "$2/error.log" -p "$2" -c "$2/nginx.conf" & pid=$!
cat >/dev/null; kill -TERM "$pid"; wait "$pid"; rm -rf "$2""#;

/// A running nginx; stopped when dropped.
#[derive(Debug)]
pub struct Nginx {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    prefix: tempfile::TempDir,
    guardian_input: Option<ChildStdin>,
    guardian: Child,
}

impl Nginx {
    /// nginx on a free loopback port, balancing over `hosts` (`http://127.0.0.1:PORT` each)
    /// with `docs/nginx.conf`; returns once it accepts connections.
    pub fn start(hosts: &[String]) -> Nginx {
        assert!(
            Path::new(NGINX).exists(),
            "{NGINX} not found: the several-hosts tests need Debian's nginx package: \
             apt-get install -y nginx (.ci/run installs it without starting its service)"
        );
        let prefix = tempfile::Builder::new()
            .prefix("rojos-nginx-")
            .tempdir()
            .expect("temp folder");
        // Under root, nginx's workers run as `nobody`: they must reach their temp folders.
        set_mode(prefix.path(), 0o755);
        let port = free_port();
        std::fs::write(prefix.path().join("rojos.conf"), site(hosts, port)).expect("write");
        std::fs::write(prefix.path().join("nginx.conf"), main_config(prefix.path()))
            .expect("write");
        check_config(prefix.path());
        let mut guardian = Command::new("sh")
            .arg("-c")
            .arg(GUARDIAN)
            .arg("guardian")
            .arg(NGINX)
            .arg(prefix.path())
            .stdin(Stdio::piped())
            .spawn()
            .expect("start the nginx guardian (sh)");
        let guardian_input = guardian.stdin.take();
        let nginx = Nginx {
            url: format!("http://127.0.0.1:{port}"),
            prefix,
            guardian_input,
            guardian,
        };
        nginx.wait_until_listening(port);
        nginx
    }

    /// nginx's error log so far (for failure messages).
    pub fn error_log(&self) -> String {
        read_lossy(&self.prefix.path().join("error.log"))
    }

    /// nginx's access log so far: one line a request, ending with the host that served it.
    pub fn access_log(&self) -> String {
        read_lossy(&self.prefix.path().join("access.log"))
    }

    fn wait_until_listening(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx never listened on port {port}:\n{}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // The guardian sees its input close, stops nginx and waits for it.
        drop(self.guardian_input.take());
        let _ = self.guardian.wait();
    }
}

/// `docs/nginx.conf` with its host lines replaced by `hosts` and its `listen` by `port`;
/// panics if the reference no longer has the lines this replaces.
pub fn site(hosts: &[String], port: u16) -> String {
    let mut out = String::new();
    let mut hosts_written = false;
    let mut listen_written = false;
    for line in REFERENCE.lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        if let Some(rest) = trimmed.strip_prefix(HOST_LINE) {
            // `server 10.0.0.11:8080 max_fails=...;`: keep the parameters after the address.
            let parameters = rest.split_once(' ').map_or(";", |(_, p)| p);
            if !hosts_written {
                for host in hosts {
                    let address = host.trim_start_matches("http://");
                    out.push_str(&format!("{indent}server {address} {parameters}\n"));
                }
                hosts_written = true;
            }
        } else if trimmed == LISTEN_LINE {
            out.push_str(&format!("{indent}listen 127.0.0.1:{port};\n"));
            listen_written = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(
        hosts_written && listen_written,
        "docs/nginx.conf no longer has `{HOST_LINE}...` host lines and `{LISTEN_LINE}`: \
         update support/nginx.rs with it"
    );
    out
}

/// The main configuration: everything nginx writes stays under `prefix`; the site is
/// included inside `http`, as a distribution's `conf.d` file is.
fn main_config(prefix: &Path) -> String {
    let p = prefix.display();
    format!(
        r#"daemon off;
worker_processes 1;
pid {p}/nginx.pid;
error_log {p}/error.log notice;
events {{ worker_connections 256; }}
http {{
    log_format upstreams '$request $status $upstream_addr';
    access_log {p}/access.log upstreams;
    client_body_temp_path {p}/client_body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    include {p}/rojos.conf;
}}
"#
    )
}

/// `nginx -t`: a configuration nginx refuses fails here, with nginx's own words.
fn check_config(prefix: &Path) {
    let output = Command::new(NGINX)
        .arg("-t")
        .arg("-e")
        .arg(prefix.join("error.log"))
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(prefix.join("nginx.conf"))
        .output()
        .expect("run nginx -t");
    assert!(
        output.status.success(),
        "nginx refused the configuration:\n{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        read_lossy(&prefix.join("rojos.conf"))
    );
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}
