//! How a worker ended, in words for the model and the log.

use std::{os::unix::process::ExitStatusExt, process::ExitStatus};

/// `crashed (SIGSEGV)`, `exited with status 3`, …
pub fn describe(status: ExitStatus) -> String {
    if let Some(signal) = status.signal() {
        return format!("crashed ({})", signal_name(signal));
    }
    match status.code() {
        Some(0) => "exited".to_owned(),
        Some(code) => format!("exited with status {code}"),
        None => "ended".to_owned(),
    }
}

/// The name of signal `number` (`SIGSEGV`), or `signal N`.
pub fn signal_name(number: i32) -> String {
    let name = match number {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTRAP => "SIGTRAP",
        _ => return format!("signal {number}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_and_codes_are_named() {
        assert_eq!(
            describe(ExitStatus::from_raw(libc::SIGSEGV)),
            "crashed (SIGSEGV)"
        );
        assert_eq!(
            describe(ExitStatus::from_raw(3 << 8)),
            "exited with status 3"
        );
        assert_eq!(signal_name(64), "signal 64");
    }
}
