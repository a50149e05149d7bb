//! The sandbox a worker puts itself in before it opens a plugin library, so the library's
//! constructors are confined as much as its calls (docs/security.md, "Plugin workers"):
//!
//! - `PR_SET_NO_NEW_PRIVS` (nothing it runs gains privileges) and `PR_SET_DUMPABLE` off
//!   (other processes of the same user cannot read its memory through `/proc` or `ptrace`);
//! - when the server runs as root, another user where there is one ([`identity`]: the
//!   project root's owner, or `[plugins].worker_user`), and no capabilities
//!   ([`capabilities`]): a worker of a server running as root keeps none of root's powers;
//! - resource limits ([`limits`]): memory, CPU time, open files, and processes when asked;
//! - Landlock ([`files`]): read-only access to the library and the system's library folders,
//!   read and write access beneath the one project root the worker serves, nothing else; no
//!   TCP; no abstract Unix sockets or signals reaching outside the worker;
//! - seccomp ([`syscalls`]): no sockets but Unix ones, no new processes (threads only), no
//!   `execve`, no `ptrace` or `process_vm_*`, no kernel modules.
//!
//! The worker's environment is emptied by the server when it starts it. Each rule can be
//! applied alone ([`Rule`]), which is how the tests see each one stop what it is for.

mod capabilities;
mod files;
pub mod identity;
mod limits;
mod syscalls;

use std::{os::fd::BorrowedFd, path::Path};

use serde::{Deserialize, Serialize};

pub use identity::WorkerUser;

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
    /// worker's start, the user chosen for its project ([`identity::choose`]).
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

/// Applies `rules` to the calling thread and every thread and process it starts later.
/// Returns what the kernel lacks; with `settings.required`, anything lacking is an error.
///
/// # Errors
///
/// A part of the sandbox could not be applied (required mode), or failed outright.
pub fn apply(
    rules: &[Rule],
    settings: &SandboxSettings,
    reach: Reach<'_>,
) -> Result<Vec<String>, String> {
    let mut missing = Vec::new();
    if rules.contains(&Rule::NoNewPrivs) {
        rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))?;
    }
    if rules.contains(&Rule::NotDumpable) {
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
            .map_err(|e| format!("dumpable: {e}"))?;
    }
    if let Some(user) = settings.user {
        // The bounding set first, while CAP_SETPCAP is held; then the user (which needs
        // CAP_SETUID and CAP_SETGID, and clears the effective and permitted sets).
        capabilities::drop_bounding()?;
        identity::assume(user)?;
    }
    if rules.contains(&Rule::DropCapabilities) {
        capabilities::drop_all()?;
    }
    if rules.contains(&Rule::Limits) {
        limits::apply(settings)?;
    }
    if rules.contains(&Rule::Landlock) {
        if let Some(lacking) = files::restrict(reach)? {
            missing.push(lacking);
        }
    }
    let denied: Vec<Rule> = rules
        .iter()
        .copied()
        .filter(|r| syscalls::is_seccomp(*r))
        .collect();
    if !denied.is_empty() {
        if let Err(e) = syscalls::install(&denied) {
            missing.push(format!("seccomp ({e})"));
        }
    }
    if settings.required && !missing.is_empty() {
        return Err(format!(
            "missing on this kernel: {}; set [plugins].sandbox = \"best-effort\" to run plugins without it",
            missing.join(", ")
        ));
    }
    Ok(missing)
}

/// The rules a plugin zygote puts itself under before it forks any worker (docs/security.md,
/// "The plugin zygote"): every rule of a worker but the file system's part of Landlock (each
/// child adds its own, for its library and its project root), the resource limits (each
/// child sets its own) and the ban on new processes (forking children is the zygote's job).
/// They hold for every child too, under the child's own. Returns what could not be applied:
/// a child still applies its full sandbox, and refuses to serve without it when it is
/// required.
pub fn confine_zygote() -> Vec<String> {
    let mut missing = Vec::new();
    if let Err(e) = rustix::thread::set_no_new_privs(true) {
        missing.push(format!("no_new_privs ({e})"));
    }
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        missing.push(format!("not dumpable ({e})"));
    }
    // A zygote of a root server keeps CAP_SETUID and CAP_SETGID (nothing else) so that its
    // children can become their project's user; each child drops them before it opens a
    // library.
    let kept = if identity::is_root() {
        capabilities::SET_IDS
    } else {
        0
    };
    if let Err(e) = capabilities::drop_all_but(kept) {
        missing.push(e);
    }
    match files::restrict_network() {
        Ok(None) => {}
        Ok(Some(lacking)) => missing.push(lacking),
        Err(e) => missing.push(e),
    }
    let denied = [
        Rule::DenyNetwork,
        Rule::DenyExec,
        Rule::DenyPtrace,
        Rule::DenyModules,
    ];
    if let Err(e) = syscalls::install(&denied) {
        missing.push(format!("seccomp ({e})"));
    }
    missing
}

#[cfg(test)]
mod tests;
