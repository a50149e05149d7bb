//! Where the host's threads are, for an off-CPU view without a profiler
//! (`--thread-states`): every few milliseconds a thread of this process reads, for each of the
//! host's threads, its state (`/proc/<pid>/task/<tid>/stat`), the system call it is blocked
//! in (`.../syscall`) and the kernel function it sleeps in (`.../wchan`), and tallies them;
//! the scheduler's own counters (`.../schedstat`: time on a CPU, time runnable but waiting for
//! one) are read at the start and the end. A thread in `R` is running or waiting for a CPU;
//! `S` sleeps until woken (a futex, `epoll_wait`, a socket); `D` waits for the disk (fsync).
//! tokio names its workers and its blocking pool's threads alike; the workers are started
//! first (`Runtime::new`: one per core), so the first that many threads of that name, by
//! thread id, are told apart as workers ([`WORKER`]) from the pool ([`BLOCKING`]): a parked
//! worker means the host had nothing to run, an idle pool thread means nothing.
//! [`on_cpu`] is the schedstat sum alone, at nanosecond resolution, for S4's per-turn CPU.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// The name tokio gives its threads (`comm`, cut at 15 bytes).
const TOKIO_THREAD: &str = "tokio-rt-worker";
/// What the first threads named [`TOKIO_THREAD`] are called in the report.
pub(crate) const WORKER: &str = "tokio worker";
/// What the later ones are called.
pub(crate) const BLOCKING: &str = "tokio blocking";

/// How often the threads are sampled.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// What the sampler saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadStates {
    /// Rounds of sampling.
    pub(crate) rounds: u64,
    /// Thread samples by where the thread was (`R`, or state + system call + wchan), and by
    /// thread name.
    pub(crate) places: BTreeMap<Place, u64>,
    /// Time on a CPU, all threads together, during the sampling.
    pub(crate) on_cpu: Duration,
    /// Time runnable but waiting for a CPU, all threads together.
    pub(crate) runqueue: Duration,
    /// Wall time sampled.
    pub(crate) wall: Duration,
}

/// Where one thread was at one sample.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Place {
    /// The thread's name (`comm`, at most 15 bytes).
    pub(crate) thread: String,
    /// `R`, `S`, `D`…
    pub(crate) state: char,
    /// The system call it is in, by name where known (none when running).
    pub(crate) syscall: String,
    /// The kernel function it sleeps in (`0` when running).
    pub(crate) wchan: String,
}

/// A running sampler; [`Sampler::finish`] stops it.
#[derive(Debug)]
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<ThreadStates>,
}

impl Sampler {
    /// Starts sampling the threads of process `pid`.
    pub(crate) fn start(pid: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || sample_until(pid, &stop)
        });
        Sampler { stop, thread }
    }

    /// Stops sampling; what it saw (nothing if the sampling thread panicked).
    pub(crate) fn finish(self) -> ThreadStates {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

fn sample_until(pid: u32, stop: &AtomicBool) -> ThreadStates {
    let started = Instant::now();
    let before = schedstats(pid);
    let mut states = ThreadStates::default();
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    while !stop.load(Ordering::Relaxed) {
        let mut tids = tasks(pid);
        tids.sort_by_key(|tid| tid.parse::<u64>().unwrap_or(u64::MAX));
        let mut tokio_threads = 0;
        for tid in tids {
            if let Some(mut place) = place(pid, &tid) {
                if place.thread == TOKIO_THREAD {
                    tokio_threads += 1;
                    place.thread = tokio_role(tokio_threads, workers).to_owned();
                }
                *states.places.entry(place).or_default() += 1;
            }
        }
        states.rounds += 1;
        std::thread::sleep(SAMPLE_EVERY);
    }
    let after = schedstats(pid);
    for (tid, (run, wait)) in &after {
        let (run0, wait0) = before.get(tid).copied().unwrap_or_default();
        states.on_cpu += run.saturating_sub(run0);
        states.runqueue += wait.saturating_sub(wait0);
    }
    states.wall = started.elapsed();
    states
}

/// [`WORKER`] for the first `workers` tokio threads (counted from 1), else [`BLOCKING`].
fn tokio_role(nth: usize, workers: usize) -> &'static str {
    if nth <= workers {
        WORKER
    } else {
        BLOCKING
    }
}

/// The thread ids of `pid`.
fn tasks(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Where thread `tid` is now; none when it has gone.
fn place(pid: u32, tid: &str) -> Option<Place> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let thread = head.split_once('(')?.1.to_owned();
    let state = rest.trim_start().chars().next()?;
    let (syscall, wchan) = if state == 'R' {
        (String::new(), String::new())
    } else {
        let syscall = std::fs::read_to_string(format!("{dir}/syscall")).unwrap_or_default();
        let wchan = std::fs::read_to_string(format!("{dir}/wchan")).unwrap_or_default();
        (syscall_name(&syscall), wchan.trim().to_owned())
    };
    Some(Place {
        thread,
        state,
        syscall,
        wchan,
    })
}

/// The name of the system call in a `/proc/.../syscall` line (its number where not known).
fn syscall_name(line: &str) -> String {
    let number = line.split_whitespace().next().unwrap_or("?");
    let name = match number.parse::<i64>() {
        Ok(n) if cfg!(target_arch = "x86_64") => x86_64_syscall(n),
        _ => None,
    };
    name.map_or_else(|| number.to_owned(), str::to_owned)
}

/// The x86-64 system calls a server thread blocks in.
fn x86_64_syscall(number: i64) -> Option<&'static str> {
    Some(match number {
        -1 => "none (in the kernel, not in a call)",
        0 => "read",
        1 => "write",
        7 => "poll",
        17 => "pread64",
        18 => "pwrite64",
        19 => "readv",
        20 => "writev",
        23 => "select",
        35 => "nanosleep",
        44 => "sendto",
        45 => "recvfrom",
        46 => "sendmsg",
        47 => "recvmsg",
        74 => "fsync",
        75 => "fdatasync",
        202 => "futex",
        230 => "clock_nanosleep",
        82 => "rename",
        232 => "epoll_wait",
        257 => "openat",
        263 => "unlinkat",
        264 => "renameat",
        271 => "ppoll",
        281 => "epoll_pwait",
        316 => "renameat2",
        441 => "epoll_pwait2",
        _ => return None,
    })
}

/// Time on a CPU and time waiting for one, per thread id (`schedstat`'s first two fields).
fn schedstats(pid: u32) -> BTreeMap<String, (Duration, Duration)> {
    tasks(pid)
        .into_iter()
        .filter_map(|tid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
            let mut fields = text.split_whitespace().map(str::parse::<u64>);
            let run = fields.next()?.ok()?;
            let wait = fields.next()?.ok()?;
            Some((tid, (Duration::from_nanos(run), Duration::from_nanos(wait))))
        })
        .collect()
}

/// The CPU time the threads of `pid` alive now have used, at nanosecond resolution; none
/// where the kernel keeps no schedstat. Threads that have ended are not counted, so compare
/// two readings close in time.
pub(crate) fn on_cpu(pid: u32) -> Option<Duration> {
    let stats = schedstats(pid);
    (!stats.is_empty()).then(|| stats.values().map(|(run, _)| *run).sum())
}

/// A thread's name with its number dropped (`tokio-runtime-w`, `rojos-store-3` → `rojos-store-#`),
/// so a pool's threads add up.
pub(crate) fn pool_name(thread: &str) -> String {
    let base = thread.trim_end_matches(|c: char| c.is_ascii_digit());
    if base.len() < thread.len() {
        format!("{base}#")
    } else {
        thread.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_calls_are_named_and_unknown_ones_kept_as_numbers() {
        if cfg!(target_arch = "x86_64") {
            assert_eq!(syscall_name("202 0x7f 0x80 0x0"), "futex");
            assert_eq!(syscall_name("74 0x3 0x0"), "fsync");
        }
        assert_eq!(syscall_name("9999 0x0"), "9999");
        assert_eq!(syscall_name("running"), "running");
    }

    #[test]
    fn this_process_has_a_thread_on_the_cpu_and_in_a_place() {
        let pid = std::process::id();
        let me = tasks(pid);
        assert!(!me.is_empty());
        assert!(me.iter().any(|tid| place(pid, tid).is_some()));
        // Kernels without schedstat give none; where there is one, time has been used.
        if let Some(cpu) = on_cpu(pid) {
            assert!(cpu > Duration::ZERO);
        }
    }

    #[test]
    fn the_first_tokio_threads_are_the_workers() {
        assert_eq!(tokio_role(1, 2), WORKER);
        assert_eq!(tokio_role(2, 2), WORKER);
        assert_eq!(tokio_role(3, 2), BLOCKING);
    }

    #[test]
    fn pool_threads_share_a_name() {
        assert_eq!(pool_name("rojos-store-12"), "rojos-store-#");
        assert_eq!(pool_name("tokio-runtime-w"), "tokio-runtime-w");
    }
}
