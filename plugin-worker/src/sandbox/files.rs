//! Landlock: what a worker may reach in the file system, over TCP, through abstract Unix
//! sockets and with signals. Landlock checks where a file is, not how it was reached, so an
//! inherited descriptor does not reach past these rules either.

use landlock::{
    Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, ABI,
};

use super::settings::Reach;

/// The newest Landlock ABI this code knows (Linux 6.12: scoped abstract sockets and signals).
const ABI_USED: ABI = ABI::V6;

/// Folders the dynamic loader may need to read to open a plugin: the system's libraries.
const SYSTEM_LIBRARIES: [&str; 5] = ["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"];
/// The loader's cache of library locations.
const LOADER_CACHE: &str = "/etc/ld.so.cache";

/// The zygote's own Landlock domain (docs/security.md, "The plugin zygote"): no TCP, no
/// abstract Unix sockets or signals reaching outside it; files are left to each child, which
/// adds its own rules for its library and its project root. `Ok(Some(what))`: the kernel
/// enforces only part of it, or none.
pub(super) fn restrict_network() -> Result<Option<String>, String> {
    let fail = |e: &dyn std::fmt::Display| format!("landlock: {e}");
    let status = Ruleset::default()
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
        .map_err(|e| fail(&e))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| fail(&e))?
        .create()
        .map_err(|e| fail(&e))?
        .restrict_self()
        .map_err(|e| fail(&e))?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => None,
        RulesetStatus::PartiallyEnforced => {
            Some("part of Landlock (the kernel's ABI is older than 6)".to_owned())
        }
        RulesetStatus::NotEnforced => Some("Landlock".to_owned()),
    })
}

/// Restricts the calling thread (and what it starts later). `Ok(Some(what))`: the kernel
/// enforces only part of it, or none.
pub(super) fn restrict(reach: Reach<'_>) -> Result<Option<String>, String> {
    let fail = |e: &dyn std::fmt::Display| format!("landlock: {e}");
    let read = AccessFs::from_read(ABI_USED);
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_USED))
        .map_err(|e| fail(&e))?
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
        .map_err(|e| fail(&e))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| fail(&e))?
        .create()
        .map_err(|e| fail(&e))?;
    for folder in SYSTEM_LIBRARIES {
        if let Ok(fd) = PathFd::new(folder) {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, read))
                .map_err(|e| fail(&e))?;
        }
    }
    let file_read = read & AccessFs::from_file(ABI_USED);
    if let Ok(fd) = PathFd::new(LOADER_CACHE) {
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, file_read))
            .map_err(|e| fail(&e))?;
    }
    match reach.library_fd {
        Some(library) => {
            ruleset = ruleset
                .add_rule(PathBeneath::new(library, file_read))
                .map_err(|e| fail(&e))?;
        }
        None => {
            if let Ok(fd) = PathFd::new(reach.library) {
                ruleset = ruleset
                    .add_rule(PathBeneath::new(fd, file_read))
                    .map_err(|e| fail(&e))?;
            }
        }
    }
    if let Some(root) = reach.root {
        ruleset = ruleset
            .add_rule(PathBeneath::new(root, AccessFs::from_all(ABI_USED)))
            .map_err(|e| fail(&e))?;
    }
    let status = ruleset.restrict_self().map_err(|e| fail(&e))?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => None,
        RulesetStatus::PartiallyEnforced => {
            Some("part of Landlock (the kernel's ABI is older than 6)".to_owned())
        }
        RulesetStatus::NotEnforced => Some("Landlock".to_owned()),
    })
}
