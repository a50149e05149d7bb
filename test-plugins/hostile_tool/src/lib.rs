//! Test plugin `hostile_tool`: does one bad thing per call, chosen by the `act` argument, to
//! show what a crashing, hanging, leaking or prying plugin can and cannot do to the server
//! and to other projects: `segv` (writes through a null pointer), `abort`, `exit` (status
//! 3), `spin` (loops forever), `alloc` (3 GiB, touched), `read` (a file at an absolute
//! `path`), `write` (a file at an absolute `path`), `env` (the environment), `connect` (TCP
//! to 127.0.0.1:`port`), `fork`, `spawn` (runs `/bin/true`), `parent_environ` (reads
//! `/proc/<parent>/environ`), and `read_root` (a file at a relative `path` in the project,
//! through the root descriptor, as a well-behaved tool would), `pid` (the process it runs
//! in), `sleep` (`seconds`, then says in which process it slept; with a `path`, it first
//! creates that file in the project, to show it has begun) and `caps` (the process's
//! effective and permitted capabilities and how many are left in its bounding set), `ctor`
//! (what the library's constructor saw when the dynamic loader ran it: its process, and
//! whether it could open `/etc/passwd`, as an unconfined process can), `ids` (its real,
//! effective and saved uids and gids, and how many supplementary groups it has),
//! `setuid_root` (tries to become uid 0 again), `write_root` (creates a file at a relative
//! `path` in the project, through the root descriptor), `exhaust_files` (opens descriptors
//! until the process may open no more, and keeps them), `big_result` (a result of `bytes`
//! bytes), `stderr_line` (one line of `bytes` bytes on stderr, never ended),
//! `stderr_lines` (a line that is not UTF-8, then `bytes` short lines, on stderr), `thread`
//! (the name of the thread it runs on), `close_lane` (closes the worker's lane to the server,
//! descriptor 5, and its copy, without closing a descriptor under the worker) and
//! `garble_lane` (writes a frame that is not a message on it, before its answer). A call with
//! a `changes` path is one that changes that file, as far as the server knows
//! (`changes_paths`): undo's checkpoint work runs just before and after it.

use std::{
    ffi::CString,
    io::Read,
    os::fd::FromRawFd,
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
};

use rojos_plugin_api::{export_tool, parse_args, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// The process the constructor ran in (0: it has not run).
static CTOR_PID: AtomicU32 = AtomicU32::new(0);
/// Whether the constructor could open `/etc/passwd`.
static CTOR_OPENED: AtomicBool = AtomicBool::new(false);

#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = at_load;

/// Runs inside `dlopen`, before any symbol is looked up: notes where, and how confined, and
/// says so on stderr.
extern "C" fn at_load() {
    CTOR_OPENED.store(
        std::fs::File::open("/etc/passwd").is_ok(),
        Ordering::Relaxed,
    );
    CTOR_PID.store(std::process::id(), Ordering::Relaxed);
    // A "note: " line, which the server skips when it names a worker's death by its last
    // line (as it skips Rust's hint about backtraces), so the crash tests read their cause.
    eprintln!(
        "note: hostile_tool's constructor ran in process {}",
        std::process::id()
    );
}

/// The descriptor of a worker's lane to the server (`rojos_plugin_worker::protocol::LANE_FD`).
const LANE: i32 = 5;

/// The hostile tool.
#[derive(Debug)]
pub struct HostileTool;

#[derive(Deserialize)]
struct Args {
    act: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    port: u16,
    #[serde(default)]
    seconds: f64,
    #[serde(default)]
    bytes: usize,
}

impl Tool for HostileTool {
    fn spec() -> ToolSpec {
        ToolSpec::new("hostile_tool", "Misbehaves as asked (test plugin).")
            .changes_paths(&["changes"])
            .parameters(json!({
                "type": "object",
                "properties": {
                    "act": {"type": "string"},
                    "path": {"type": "string"},
                    "port": {"type": "integer"},
                    "seconds": {"type": "number"},
                    "bytes": {"type": "integer"},
                    "changes": {"type": "string"}
                },
                "required": ["act"],
                "additionalProperties": false
            }))
    }

    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let failed = |e: std::io::Error| {
            ToolError::new(rojos_plugin_api::ErrorKind::IO, format!("failed: {e}"))
        };
        match args.act.as_str() {
            // SAFETY: none; this is the crash under test.
            "segv" => unsafe {
                std::ptr::null_mut::<u8>().write_volatile(1);
                Ok("survived".to_owned())
            },
            "abort" => std::process::abort(),
            "exit" => std::process::exit(3),
            "spin" => loop {
                std::hint::black_box(0u64);
            },
            "alloc" => {
                let block = vec![1u8; 3 << 30];
                Ok(format!(
                    "allocated {} bytes",
                    std::hint::black_box(&block).len()
                ))
            }
            "read" => std::fs::read_to_string(&args.path).map_err(failed),
            "write" => std::fs::write(&args.path, "written by hostile_tool")
                .map(|()| "written".to_owned())
                .map_err(failed),
            "env" => Ok(json!(std::env::vars().collect::<Vec<_>>()).to_string()),
            "connect" => std::net::TcpStream::connect(("127.0.0.1", args.port))
                .map(|_| "connected".to_owned())
                .map_err(failed),
            "fork" => fork(),
            "spawn" => std::process::Command::new("/bin/true")
                .status()
                .map(|s| format!("ran: {s}"))
                .map_err(failed),
            "parent_environ" => {
                let path = format!("/proc/{}/environ", std::os::unix::process::parent_id());
                std::fs::read(path)
                    .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', "\n"))
                    .map_err(failed)
            }
            "pid" => Ok(std::process::id().to_string()),
            "thread" => Ok(thread_name()),
            // The lane and the worker's copy of it (every socket from descriptor 5 up) become
            // copies of the root descriptor: the lane is gone, yet no descriptor the worker
            // owns is closed under it.
            "close_lane" => {
                for fd in LANE..1024 {
                    // SAFETY: plain descriptor calls on a zeroed `stat`.
                    unsafe {
                        let mut stat: libc::stat = std::mem::zeroed();
                        if libc::fstat(fd, &mut stat) == 0
                            && stat.st_mode & libc::S_IFMT == libc::S_IFSOCK
                        {
                            libc::dup2(ctx.root_fd, fd);
                        }
                    }
                }
                Ok("closed".to_owned())
            }
            "garble_lane" => {
                let frame = b"\0\0\0\x05hello";
                // SAFETY: as above, writing from a live buffer.
                match unsafe { libc::write(LANE, frame.as_ptr().cast(), frame.len()) } {
                    9 => Ok("garbled".to_owned()),
                    _ => Err(failed(std::io::Error::last_os_error())),
                }
            }
            // One line of `bytes` bytes on stderr, with no end (at most 1 GiB).
            "stderr_line" => {
                use std::io::Write;
                let chunk = [b'e'; 1 << 16];
                let mut left = args.bytes.min(1 << 30);
                let mut stderr = std::io::stderr().lock();
                while left > 0 {
                    let n = left.min(chunk.len());
                    stderr.write_all(&chunk[..n]).map_err(failed)?;
                    left -= n;
                }
                Ok(format!("wrote {} bytes", args.bytes.min(1 << 30)))
            }
            // A line that is not UTF-8, then `bytes` short lines, on stderr.
            "stderr_lines" => {
                use std::io::Write;
                let mut stderr = std::io::stderr().lock();
                stderr.write_all(b"\xff\xfe not UTF-8\n").map_err(failed)?;
                for n in 0..args.bytes.min(1 << 20) {
                    writeln!(stderr, "hostile line {n}").map_err(failed)?;
                }
                Ok("written".to_owned())
            }
            // A result of `bytes` bytes (at most 1 GiB).
            "big_result" => Ok("x".repeat(args.bytes.min(1 << 30))),
            // Uses up the worker's descriptors (`worker_open_files`) and keeps them.
            "exhaust_files" => {
                let mut kept = 0u32;
                // SAFETY: `dup` of the call's root descriptor; the copies are leaked on purpose.
                while unsafe { libc::dup(ctx.root_fd) } >= 0 {
                    kept += 1;
                }
                Ok(format!("holding {kept} more descriptors"))
            }
            "sleep" => {
                if !args.path.is_empty() {
                    write_in_root(ctx.root_fd, &args.path).map_err(failed)?;
                }
                std::thread::sleep(std::time::Duration::from_secs_f64(
                    args.seconds.clamp(0.0, 60.0),
                ));
                Ok(format!("slept in {}", std::process::id()))
            }
            "caps" => Ok(capabilities()),
            "ctor" => Ok(json!({
                "ctor_pid": CTOR_PID.load(Ordering::Relaxed),
                "pid": std::process::id(),
                "ctor_opened_etc_passwd": CTOR_OPENED.load(Ordering::Relaxed),
            })
            .to_string()),
            "read_root" => read_in_root(ctx.root_fd, &args.path).map_err(failed),
            "write_root" => write_in_root(ctx.root_fd, &args.path).map_err(failed),
            "ids" => Ok(ids()),
            // SAFETY: plain system calls on integers.
            "setuid_root" => match unsafe { (libc::setresuid(0, 0, 0), libc::setuid(0)) } {
                (0, _) | (_, 0) => Ok(format!("became root again: {}", ids())),
                _ => Err(failed(std::io::Error::last_os_error())),
            },
            other => Err(ToolError::invalid_arguments(format!(
                "unknown act {other:?}"
            ))),
        }
    }
}

/// The calling thread's name as the kernel knows it (this library's own copy of the standard
/// library does not know the names the worker gave its threads).
fn thread_name() -> String {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into `name`.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..end]).into_owned()
}

fn fork() -> Result<String, ToolError> {
    // SAFETY: the child only calls `_exit`.
    let pid = unsafe { libc::fork() };
    match pid {
        0 => unsafe { libc::_exit(0) },
        -1 => Err(ToolError::new(
            rojos_plugin_api::ErrorKind::IO,
            format!("failed: {}", std::io::Error::last_os_error()),
        )),
        pid => Ok(format!("forked {pid}")),
    }
}

/// `effective=HEX permitted=HEX bounding=N ambient=N` of the calling thread.
fn capabilities() -> String {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget with a version-3 header writes two `Data` structs.
    let got = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if got != 0 {
        return format!("capget failed: {}", std::io::Error::last_os_error());
    }
    let wide = |f: fn(&Data) -> u32| (u64::from(f(&data[1])) << 32) | u64::from(f(&data[0]));
    let mut bounding = 0;
    let mut ambient = 0;
    for cap in 0..64 {
        // SAFETY: prctl reads only its integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) } == 1 {
            bounding += 1;
        }
        // SAFETY: as above.
        if unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_IS_SET, cap, 0, 0) } == 1
        {
            ambient += 1;
        }
    }
    format!(
        "effective={:x} permitted={:x} bounding={bounding} ambient={ambient}",
        wide(|d| d.effective),
        wide(|d| d.permitted)
    )
}

/// `uid=R E S gid=R E S groups=N`.
fn ids() -> String {
    let (mut ruid, mut euid, mut suid) = (0, 0, 0);
    let (mut rgid, mut egid, mut sgid) = (0, 0, 0);
    // SAFETY: each call writes three integers it is given.
    unsafe {
        libc::getresuid(&mut ruid, &mut euid, &mut suid);
        libc::getresgid(&mut rgid, &mut egid, &mut sgid);
    }
    // SAFETY: with a size of 0, getgroups only counts.
    let groups = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    format!("uid={ruid} {euid} {suid} gid={rgid} {egid} {sgid} groups={groups}")
}

fn write_in_root(root_fd: i32, path: &str) -> std::io::Result<String> {
    use std::io::Write;
    let name = CString::new(path).map_err(std::io::Error::other)?;
    // SAFETY: `root_fd` is the host's open root for the whole call; `openat` creates a file.
    let fd = unsafe {
        libc::openat(
            root_fd,
            name.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned here.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(b"written by hostile_tool")?;
    Ok(format!("wrote {path}"))
}

fn read_in_root(root_fd: i32, path: &str) -> std::io::Result<String> {
    let name = CString::new(path).map_err(std::io::Error::other)?;
    // SAFETY: `root_fd` is the host's open root for the whole call; `openat` only reads it.
    let fd = unsafe { libc::openat(root_fd, name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned here.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

export_tool!(HostileTool);
