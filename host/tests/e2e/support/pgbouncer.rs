//! `PgBouncer`: Debian's `pgbouncer` in front of a test PostgreSQL cluster, in
//! `pool_mode = transaction` (how managed services and large deployments pool), on a free
//! loopback port, with its ini and user list in a temp folder. It runs under a small shell
//! guardian whose input is a pipe from the test process, as the cluster does, so it stops when
//! the test process ends in any way. PgBouncer refuses to run as root: under root it runs as
//! the `postgres` user the PostgreSQL package creates.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use rojos_conversations::test_cluster::{PgCluster, CLUSTER_USER};

/// A running PgBouncer; stopped on drop.
pub struct PgBouncer {
    port: u16,
    _dir: tempfile::TempDir,
    input: Option<ChildStdin>,
    guardian: Child,
}

/// Starts pgbouncer with the ini given as `$1`, says `ready`, stops it when its input closes.
const GUARDIAN: &str = r#"
pgbouncer "$1" &
pid=$!
echo ready
cat >/dev/null || true
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"#;

impl PgBouncer {
    /// PgBouncer in transaction mode in front of `cluster`, at most `server_connections`
    /// connections to it per database.
    pub fn start(cluster: &PgCluster, server_connections: usize) -> PgBouncer {
        let binary = Path::new("/usr/sbin/pgbouncer");
        assert!(
            binary.is_file(),
            "pgbouncer not found at /usr/sbin/pgbouncer: install it: apt-get install -y pgbouncer"
        );
        let dir = tempfile::Builder::new()
            .prefix("rojos-pgbouncer-")
            .tempdir()
            .unwrap();
        let port = free_port();
        let folder = dir.path().display().to_string();
        let password = cluster.password();
        std::fs::write(
            dir.path().join("userlist.txt"),
            format!("\"{CLUSTER_USER}\" \"{password}\"\n"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("pgbouncer.ini"),
            format!(
                "[databases]\n* = host=127.0.0.1 port={pg}\n\n[pgbouncer]\n\
                 listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = scram-sha-256\nauth_file = {folder}/userlist.txt\n\
                 pool_mode = transaction\ndefault_pool_size = {server_connections}\n\
                 max_client_conn = 200\nlogfile = {folder}/pgbouncer.log\n\
                 ignore_startup_parameters = extra_float_digits\n",
                pg = cluster.port()
            ),
        )
        .unwrap();
        let as_root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        let ini = dir.path().join("pgbouncer.ini");
        let mut command = if as_root {
            let chown = Command::new("chown")
                .arg("-R")
                .arg("postgres:postgres")
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(chown.success(), "chown of the pgbouncer folder");
            let mut runuser = Command::new("runuser");
            runuser.args(["-u", "postgres", "--", "sh", "-c", GUARDIAN, "guardian"]);
            runuser
        } else {
            let mut sh = Command::new("sh");
            sh.args(["-c", GUARDIAN, "guardian"]);
            sh
        };
        let mut guardian = command
            .arg(&ini)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start pgbouncer's guardian");
        let input = guardian.stdin.take();
        let mut first = String::new();
        let _ = BufReader::new(guardian.stdout.take().unwrap()).read_line(&mut first);
        assert_eq!(first.trim(), "ready", "pgbouncer's guardian did not start");
        let bouncer = PgBouncer {
            port,
            _dir: dir,
            input,
            guardian,
        };
        bouncer.wait_until_listening();
        bouncer
    }

    /// A URL for `database` through PgBouncer, without the password.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{CLUSTER_USER}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    fn wait_until_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_err() {
            let log =
                std::fs::read_to_string(self._dir.path().join("pgbouncer.log")).unwrap_or_default();
            assert!(
                Instant::now() < deadline,
                "pgbouncer never listened on {}:\n{log}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        drop(self.input.take());
        let _ = self.guardian.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
