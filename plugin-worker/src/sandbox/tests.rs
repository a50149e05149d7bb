//! Each rule of the sandbox, applied alone in a forked child, stops what it is for, and the
//! same probe succeeds in a child without it (so the probe itself can succeed). A last test
//! applies every rule at once and checks that what plugins need still works.

use std::{
    io::Write,
    net::TcpListener,
    os::fd::{AsFd, AsRawFd},
    path::Path,
};

use super::*;

/// Forks; the child applies `rules` and exits 0 if `probe` says the action went through, 1
/// if it was stopped, 2 if the rules could not be applied.
fn in_child(
    rules: &[Rule],
    settings: SandboxSettings,
    reach: Reach<'_>,
    probe: impl Fn() -> bool,
) -> bool {
    // SAFETY: the child runs the sandbox and the probe, then `_exit`s; the C library keeps its
    // allocator usable in a child of a multi-threaded process.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = match apply(rules, &settings, reach) {
            Ok(_) => i32::from(!probe()),
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "sandbox: {e}");
                2
            }
        };
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status), "the child died: {status}");
    let code = libc::WEXITSTATUS(status);
    assert_ne!(code, 2, "the rules could not be applied");
    code == 0
}

/// `rule` stops `probe` and, without it (only `base`), `probe` goes through.
fn stops(
    base: &[Rule],
    rule: Rule,
    settings: SandboxSettings,
    reach: Reach<'_>,
    probe: impl Fn() -> bool,
) {
    let mut with = base.to_vec();
    with.push(rule);
    assert!(
        in_child(base, settings, reach, &probe),
        "{rule:?}: the probe fails even without the rule"
    );
    assert!(
        !in_child(&with, settings, reach, &probe),
        "{rule:?} did not stop the probe"
    );
}

fn settings() -> SandboxSettings {
    SandboxSettings {
        required: true,
        ..SandboxSettings::default()
    }
}

/// A project root with `inside.txt`, and `secret.txt` beside it.
struct Tree {
    dir: tempfile::TempDir,
    root: std::fs::File,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        std::fs::write(dir.path().join("root/inside.txt"), "in").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "out").unwrap();
        let root = std::fs::File::open(dir.path().join("root")).unwrap();
        Tree { dir, root }
    }

    fn reach(&self) -> Reach<'_> {
        Reach {
            library: Path::new("/nonexistent/libplugin.so"),
            library_fd: None,
            root: Some(self.root.as_fd()),
        }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
}

const NNP: &[Rule] = &[Rule::NoNewPrivs];

#[test]
fn landlock_stops_reading_outside_the_root_and_allows_inside() {
    let tree = Tree::new();
    let secret = tree.path("secret.txt");
    stops(&[], Rule::Landlock, settings(), tree.reach(), || {
        std::fs::read(&secret).is_ok()
    });
    stops(&[], Rule::Landlock, settings(), tree.reach(), || {
        std::fs::read("/etc/passwd").is_ok()
    });
    let inside = tree.path("root/inside.txt");
    assert!(in_child(
        &[Rule::Landlock],
        settings(),
        tree.reach(),
        || std::fs::read(&inside).is_ok()
    ));
}

#[test]
fn landlock_stops_writing_outside_the_root() {
    let tree = Tree::new();
    let outside = tree.path("planted.txt");
    stops(&[], Rule::Landlock, settings(), tree.reach(), || {
        std::fs::write(&outside, "x").is_ok()
    });
    let inside = tree.path("root/made.txt");
    assert!(in_child(
        &[Rule::Landlock],
        settings(),
        tree.reach(),
        || std::fs::write(&inside, "x").is_ok()
    ));
}

#[test]
fn landlock_stops_tcp_and_signals_to_the_parent() {
    let tree = Tree::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    stops(&[], Rule::Landlock, settings(), tree.reach(), || {
        std::net::TcpStream::connect(address).is_ok()
    });
    // Signal 0 only checks permission: the test process is not disturbed.
    stops(
        &[],
        Rule::Landlock,
        settings(),
        tree.reach(),
        || unsafe { libc::kill(libc::getppid(), 0) } == 0,
    );
}

#[test]
fn landlock_stops_reading_another_process_environment() {
    let tree = Tree::new();
    stops(&[], Rule::Landlock, settings(), tree.reach(), || {
        std::fs::read(format!(
            "/proc/{}/environ",
            std::os::unix::process::parent_id()
        ))
        .is_ok()
    });
}

#[test]
fn seccomp_stops_network_sockets_but_not_unix_ones() {
    let tree = Tree::new();
    stops(NNP, Rule::DenyNetwork, settings(), tree.reach(), || {
        std::net::UdpSocket::bind("127.0.0.1:0").is_ok()
    });
    assert!(in_child(
        &[Rule::NoNewPrivs, Rule::DenyNetwork],
        settings(),
        tree.reach(),
        || { std::os::unix::net::UnixStream::pair().is_ok() }
    ));
}

#[test]
fn seccomp_stops_new_processes_but_not_threads() {
    let tree = Tree::new();
    stops(NNP, Rule::DenyProcesses, settings(), tree.reach(), || {
        // SAFETY: the grandchild only `_exit`s.
        match unsafe { libc::fork() } {
            0 => unsafe { libc::_exit(0) },
            pid => pid > 0,
        }
    });
    stops(NNP, Rule::DenyProcesses, settings(), tree.reach(), || {
        std::process::Command::new("/bin/true").status().is_ok()
    });
    assert!(in_child(
        &[Rule::NoNewPrivs, Rule::DenyProcesses],
        settings(),
        tree.reach(),
        || { std::thread::spawn(|| 7).join().is_ok_and(|n| n == 7) }
    ));
}

#[test]
fn seccomp_stops_execve() {
    let tree = Tree::new();
    stops(NNP, Rule::DenyExec, settings(), tree.reach(), || {
        let path = c"/bin/true";
        let argv = [path.as_ptr(), std::ptr::null()];
        // SAFETY: on success the child becomes /bin/true, which exits 0: "went through".
        unsafe { libc::execv(path.as_ptr(), argv.as_ptr()) };
        false
    });
}

#[test]
fn seccomp_stops_reading_another_process_memory() {
    let tree = Tree::new();
    stops(NNP, Rule::DenyPtrace, settings(), tree.reach(), || {
        let source = [7u8; 16];
        let mut target = [0u8; 16];
        let local = libc::iovec {
            iov_base: target.as_mut_ptr().cast(),
            iov_len: 16,
        };
        let remote = libc::iovec {
            iov_base: source.as_ptr() as *mut _,
            iov_len: 16,
        };
        // SAFETY: reads this process's own `source` into `target`.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        n == 16
    });
    stops(NNP, Rule::DenyPtrace, settings(), tree.reach(), || {
        // SAFETY: asks to be traced by the parent, which never acts on it.
        (unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) }) == 0
    });
}

#[test]
fn seccomp_stops_module_calls_before_the_kernel_sees_them() {
    let tree = Tree::new();
    stops(NNP, Rule::DenyModules, settings(), tree.reach(), || {
        let name = c"rojos_no_such_module";
        // SAFETY: a module that does not exist: the kernel answers ENOENT (or EPERM for a
        // user without CAP_SYS_MODULE); the filter answers EPERM before it is asked.
        let r = unsafe { libc::syscall(libc::SYS_delete_module, name.as_ptr(), libc::O_NONBLOCK) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM)
    });
}

#[test]
fn no_new_privs_and_not_dumpable_are_set() {
    let tree = Tree::new();
    stops(&[], Rule::NoNewPrivs, settings(), tree.reach(), || {
        (unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) }) == 0
    });
    stops(&[], Rule::NotDumpable, settings(), tree.reach(), || {
        (unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) }) == 1
    });
}

#[test]
fn limits_stop_a_large_allocation_and_many_open_files() {
    let tree = Tree::new();
    let small = SandboxSettings {
        memory_bytes: 256 << 20,
        open_files: 32,
        ..settings()
    };
    stops(&[], Rule::Limits, small, tree.reach(), || {
        let mut block: Vec<u8> = Vec::new();
        block.try_reserve_exact(1 << 30).is_ok()
    });
    stops(&[], Rule::Limits, small, tree.reach(), || {
        let files: Vec<_> = (0..64)
            .map_while(|_| std::fs::File::open("/dev/null").ok())
            .collect();
        files.len() == 64
    });
}

#[test]
fn with_every_rule_a_plugin_still_works_in_its_root() {
    let tree = Tree::new();
    let inside = tree.path("root/inside.txt");
    let made = tree.path("root/sub");
    // The root's descriptor reaches the root, however it is named.
    let root_fd = tree.root.as_raw_fd();
    assert!(in_child(&Rule::ALL, settings(), tree.reach(), || {
        std::fs::read(&inside).is_ok()
            && std::fs::create_dir(&made).is_ok()
            && std::thread::spawn(|| 1).join().is_ok()
            && std::os::unix::net::UnixStream::pair().is_ok()
            && std::fs::read_dir(format!("/proc/self/fd/{root_fd}")).is_ok()
    }));
}
