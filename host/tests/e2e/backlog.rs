//! A burst of new clients while the server is not accepting (here stopped with `SIGSTOP`, as
//! a busy server's accept loop falls behind) is held by the kernel until the server takes
//! them, not dropped: the real binary listens with `rojos::LISTEN_BACKLOG`. With tokio's
//! `bind` (a backlog of 128), the 130th client's connection attempt was dropped and waited for
//! TCP's retries (1 s, then 3, 7, 15 s), as `rojos-bench` S3's 1,000 clients did.
//! An address another socket listens on is refused, the error naming it.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use rustix::process::{kill_process, Pid, Signal};

use crate::support::{
    binary::{rojos, run, RunningBinary},
    host::HostConfig,
};

/// Clients connecting at once: well over tokio's default backlog, under the test's open files.
const CLIENTS: usize = 600;

/// Sends `SIGCONT` when dropped, so the server runs again however the test ends.
struct Resume(Pid);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = kill_process(self.0, Signal::CONT);
    }
}

#[test]
fn a_burst_of_clients_while_the_server_is_not_accepting_is_held_and_served() {
    let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .unwrap_or(0);
    assert!(
        somaxconn > CLIENTS,
        "net.core.somaxconn is {somaxconn}: the kernel caps every listen backlog there; raise \
         it (sysctl -w net.core.somaxconn=4096, Linux's default since 5.4) to run this test"
    );
    let dir = HostConfig::builtins().in_temp_folder();
    let binary = RunningBinary::start(dir.path(), "warn", &[]);
    let address: SocketAddr = binary
        .url()
        .trim_start_matches("http://")
        .parse()
        .expect("the listening address");
    let pid = Pid::from_raw(i32::try_from(binary.id()).expect("a pid")).expect("a pid");
    kill_process(pid, Signal::STOP).expect("stop the server");
    let resume = Resume(pid);
    let mut clients = Vec::with_capacity(CLIENTS);
    for n in 1..=CLIENTS {
        // On loopback the kernel completes a connection it has room for at once.
        let mut client = TcpStream::connect_timeout(&address, Duration::from_millis(500))
            .unwrap_or_else(|e| {
                panic!(
                    "client {n} of {CLIENTS} was not connected within 500 ms while the server \
                     was not accepting ({e}): the kernel dropped its attempt, the listen \
                     backlog is too small"
                )
            });
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: rojos\r\nConnection: close\r\n\r\n")
            .expect("the request, buffered by the kernel");
        clients.push(client);
    }
    drop(resume);
    for (n, mut client) in clients.into_iter().enumerate() {
        client
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a read timeout");
        let mut answer = String::new();
        client
            .read_to_string(&mut answer)
            .unwrap_or_else(|e| panic!("client {} got no answer: {e}", n + 1));
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "client {} got: {answer}",
            n + 1
        );
    }
}

#[test]
fn an_address_already_listened_on_is_refused_with_its_name() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let address = taken.local_addr().expect("its address");
    let dir = HostConfig::builtins().in_temp_folder();
    let config = dir.path().join("rojos.toml");
    let text = std::fs::read_to_string(&config).expect("the config");
    assert!(text.contains("bind = \"127.0.0.1:0\""), "{text}");
    let text = text.replace("bind = \"127.0.0.1:0\"", &format!("bind = \"{address}\""));
    std::fs::write(&config, text).expect("the config");
    let ran = run(rojos(&["--config", &config.to_string_lossy()]));
    assert_eq!(ran.code, Some(2), "{ran}");
    assert!(
        ran.stderr.contains(&format!("cannot listen on {address}")),
        "{ran}"
    );
}
