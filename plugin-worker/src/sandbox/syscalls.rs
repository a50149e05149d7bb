//! seccomp: the system calls a worker may not make. Everything else is allowed (a plugin is
//! ordinary Rust code); a denied call fails with `EPERM`, except `clone3`, which fails with
//! `ENOSYS` so the C library falls back to `clone`, whose flags the filter can read (threads
//! are allowed, new processes are not).

use std::collections::BTreeMap;

use seccompiler::{
    apply_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

use super::settings::Rule;

/// Whether `rule` is one of the filter's.
pub(super) fn is_seccomp(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::DenyNetwork
            | Rule::DenyProcesses
            | Rule::DenyExec
            | Rule::DenyPtrace
            | Rule::DenyModules
    )
}

/// Installs the filter for `rules` on the calling thread (inherited by what it starts).
pub(super) fn install(rules: &[Rule]) -> Result<(), String> {
    let arch: TargetArch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("{e:?}"))?;
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for rule in rules {
        for (call, conditions) in calls(*rule)? {
            denied.entry(call).or_default().extend(conditions);
        }
    }
    install_filter(denied, libc::EPERM, arch)?;
    if rules.contains(&Rule::DenyProcesses) {
        install_filter(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            libc::ENOSYS,
            arch,
        )?;
    }
    Ok(())
}

fn install_filter(
    denied: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<(), String> {
    let filter = SeccompFilter::new(
        denied,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    apply_filter(&program).map_err(|e| e.to_string())
}

/// The calls `rule` denies, each with the conditions under which it is denied (none: always).
fn calls(rule: Rule) -> Result<Vec<(i64, Vec<SeccompRule>)>, String> {
    let only_unix = || -> Result<Vec<SeccompRule>, String> {
        let not_unix = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| e.to_string())?;
        Ok(vec![
            SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?
        ])
    };
    Ok(match rule {
        Rule::DenyNetwork => vec![
            (libc::SYS_socket, only_unix()?),
            (libc::SYS_socketpair, only_unix()?),
            // io_uring can open and connect sockets without these calls.
            (libc::SYS_io_uring_setup, Vec::new()),
        ],
        Rule::DenyProcesses => {
            let process = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
                0,
            )
            .map_err(|e| e.to_string())?;
            let mut calls = vec![(
                libc::SYS_clone,
                vec![SeccompRule::new(vec![process]).map_err(|e| e.to_string())?],
            )];
            #[cfg(target_arch = "x86_64")]
            calls.extend([(libc::SYS_fork, Vec::new()), (libc::SYS_vfork, Vec::new())]);
            calls
        }
        Rule::DenyExec => vec![
            (libc::SYS_execve, Vec::new()),
            (libc::SYS_execveat, Vec::new()),
        ],
        Rule::DenyPtrace => vec![
            (libc::SYS_ptrace, Vec::new()),
            (libc::SYS_process_vm_readv, Vec::new()),
            (libc::SYS_process_vm_writev, Vec::new()),
        ],
        Rule::DenyModules => vec![
            (libc::SYS_init_module, Vec::new()),
            (libc::SYS_finit_module, Vec::new()),
            (libc::SYS_delete_module, Vec::new()),
        ],
        _ => Vec::new(),
    })
}
