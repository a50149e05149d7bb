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
mod settings;
mod syscalls;

pub use identity::WorkerUser;
pub use settings::{Reach, Rule, SandboxSettings};

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
