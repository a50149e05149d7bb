//! What a sandbox is made of: the settings the server sends ([`SandboxSettings`]), its parts
//! ([`Rule`]), and what a confined worker may still reach ([`Reach`]).

use std::{os::fd::BorrowedFd, path::Path};

use serde::{Deserialize, Serialize};

use super::identity::WorkerUser;

/// How a worker is confined: sent by the server in the worker's start message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSettings {
    /// Refuse to serve when a part of the sandbox is missing from the kernel (otherwise the
    /// worker serves and reports what is missing).
    pub required: bool,
    /// `RLIMIT_DATA`: the most heap and other private writable memory, in bytes.
    pub memory_bytes: u64,
    /// `RLIMIT_CPU`: the most CPU seconds over the worker's life.
    pub cpu_secs: u64,
    /// `RLIMIT_NOFILE`: the most open descriptors.
    pub open_files: u64,
    /// `RLIMIT_NPROC`, when set: the most processes and threads of the worker's user (the
    /// kernel counts every process of that user, the server's included).
    pub processes: Option<u64>,
    /// The user the worker becomes before anything else of its sandbox (only a worker of a
    /// server running as root can): in the server's settings, `[plugins].worker_user`; in a
    /// worker's start, the user chosen for its project ([`super::identity::choose`]).
    #[serde(default)]
    pub user: Option<WorkerUser>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            required: true,
            memory_bytes: 1 << 30,
            cpu_secs: 600,
            open_files: 256,
            processes: None,
            user: None,
        }
    }
}

/// One part of the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// `PR_SET_DUMPABLE` 0.
    NotDumpable,
    /// No capability in any set (bounding and ambient included).
    DropCapabilities,
    /// The resource limits.
    Limits,
    /// Landlock: files, TCP, abstract sockets and signals.
    Landlock,
    /// seccomp: sockets other than `AF_UNIX`.
    DenyNetwork,
    /// seccomp: `fork`, `vfork`, `clone` of a process, `clone3`.
    DenyProcesses,
    /// seccomp: `execve`, `execveat`.
    DenyExec,
    /// seccomp: `ptrace`, `process_vm_readv`, `process_vm_writev`.
    DenyPtrace,
    /// seccomp: `init_module`, `finit_module`, `delete_module`.
    DenyModules,
}

impl Rule {
    /// Every rule, in the order they are applied.
    pub const ALL: [Rule; 10] = [
        Rule::NoNewPrivs,
        Rule::NotDumpable,
        Rule::DropCapabilities,
        Rule::Limits,
        Rule::Landlock,
        Rule::DenyNetwork,
        Rule::DenyProcesses,
        Rule::DenyExec,
        Rule::DenyPtrace,
        Rule::DenyModules,
    ];
}

/// What the sandbox may reach: the library it loads and the root it serves.
#[derive(Debug, Clone, Copy)]
pub struct Reach<'a> {
    /// The plugin library (read-only).
    pub library: &'a Path,
    /// The library, opened before the worker changed its user (whose new user may not reach
    /// the server's private copy by its path): Landlock's rule for it is added from this.
    pub library_fd: Option<BorrowedFd<'a>>,
    /// The project root (read and write beneath it), if the worker serves one.
    pub root: Option<BorrowedFd<'a>>,
}
