//! What the bench reads from `/proc`: a process's state, parent and CPU time, every process
//! now (for a host's family and a database server's processes), and the machine's time
//! stolen by its hypervisor.

use std::time::Duration;

use anyhow::Context;

/// Every process's id and [`Stat`] now (one that ends while `/proc` is read is left out).
pub(crate) fn processes() -> anyhow::Result<Vec<(u32, Stat)>> {
    let mut processes = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = stat_of(&format!("/proc/{pid}/stat")) {
            processes.push((pid, stat));
        }
    }
    Ok(processes)
}

/// The CPU time of process `pid`'s descendants (its plugin zygote and workers, say): what
/// the live ones used (and reaped), plus what `pid` reaped; and how many are alive now. The
/// difference of two readings is what they used in between, processes that ended meanwhile
/// included: an ended child's time moves from its own `stat` to its parent's `cutime`.
pub(crate) fn descendants_cpu(pid: u32) -> anyhow::Result<(Duration, usize)> {
    let reaped = stat_of(&format!("/proc/{pid}/stat"))?.reaped_children_cpu;
    let all = processes()?;
    let mut family = vec![pid];
    let mut next = 0;
    while let Some(&parent) = family.get(next) {
        family.extend(
            all.iter()
                .filter(|(_, stat)| stat.parent == parent)
                .map(|&(child, _)| child),
        );
        next += 1;
    }
    let live: Duration = all
        .iter()
        .filter(|(p, _)| *p != pid && family.contains(p))
        .map(|(_, stat)| stat.cpu + stat.reaped_children_cpu)
        .sum();
    Ok((reaped + live, family.len() - 1))
}

/// CPU time (user + system) of the process whose `stat` file is `path`.
pub(crate) fn cpu_of(path: &str) -> anyhow::Result<Duration> {
    Ok(stat_of(path)?.cpu)
}

/// CPU time in user space and in the kernel (`/proc/<pid>/stat`, clock-tick resolution).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    /// In user space (`utime`).
    pub(crate) user: Duration,
    /// In the kernel on the process's behalf (`stime`).
    pub(crate) system: Duration,
}

impl CpuTimes {
    /// User + system.
    pub(crate) fn total(self) -> Duration {
        self.user + self.system
    }

    /// The time used since `earlier`.
    pub(crate) fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// What the bench reads from a `/proc/<pid>/stat` file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    /// The state: `R` running, `S` asleep, `Z` ended but not reaped, ... (proc(5)).
    pub(crate) state: char,
    /// The parent's process id.
    pub(crate) parent: u32,
    /// CPU time used (user + system).
    pub(crate) cpu: Duration,
    /// The same, user and system apart.
    pub(crate) times: CpuTimes,
    /// CPU time of the children it waited for (user + system).
    pub(crate) reaped_children_cpu: Duration,
}

/// The [`Stat`] of the process whose `stat` file is `path`.
pub(crate) fn stat_of(path: &str) -> anyhow::Result<Stat> {
    let stat = std::fs::read_to_string(path)?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("unexpected /proc stat format")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let number = |i: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(i)
            .context("unexpected /proc stat format")?
            .parse()?)
    };
    let hz = rustix::param::clock_ticks_per_second();
    let time = |ticks: u64| Duration::from_secs_f64(ticks as f64 / hz as f64);
    // proc(5) numbers the fields from 1 (pid, name, state, ppid, ...); here state (3) is index
    // 0, so ppid (4) is 1, utime and stime (14, 15) are 11 and 12, cutime and cstime 13 and 14.
    let times = CpuTimes {
        user: time(number(11)?),
        system: time(number(12)?),
    };
    Ok(Stat {
        state: fields
            .first()
            .and_then(|state| state.chars().next())
            .context("unexpected /proc stat format")?,
        parent: u32::try_from(number(1)?)?,
        cpu: times.total(),
        times,
        reaped_children_cpu: time(number(13)? + number(14)?),
    })
}

/// The machine's CPU time since boot, in clock ticks of all its CPUs (`/proc/stat`'s `cpu`
/// line): all of it, and what the hypervisor gave to other guests while this one had work
/// (`steal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MachineTime {
    /// user + nice + system + idle + iowait + irq + softirq + steal.
    pub(crate) all: u64,
    /// steal.
    pub(crate) stolen: u64,
}

impl MachineTime {
    /// Now.
    pub(crate) fn now() -> anyhow::Result<MachineTime> {
        MachineTime::parse(&std::fs::read_to_string("/proc/stat")?)
    }

    /// From the text of `/proc/stat`.
    fn parse(stat: &str) -> anyhow::Result<MachineTime> {
        let line = stat
            .lines()
            .find(|line| line.starts_with("cpu "))
            .context("no cpu line in /proc/stat")?;
        let ticks = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(str::parse)
            .collect::<Result<Vec<u64>, _>>()?;
        anyhow::ensure!(ticks.len() == 8, "a short cpu line in /proc/stat: {line}");
        Ok(MachineTime {
            all: ticks.iter().sum(),
            stolen: ticks[7],
        })
    }

    /// The share of the machine's time stolen since `earlier` (0–1); `None` when no time
    /// passed.
    pub(crate) fn stolen_since(self, earlier: MachineTime) -> Option<f64> {
        let all = self.all.checked_sub(earlier.all).filter(|&all| all > 0)?;
        Some(self.stolen.saturating_sub(earlier.stolen) as f64 / all as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stolen_share_is_steal_over_all_eight_columns_between_two_readings() {
        let before = MachineTime::parse(
            "cpu  100 0 50 800 10 0 20 20 0 0\ncpu0 50 0 25 400 5 0 10 10 0 0\n",
        )
        .expect("parses");
        assert_eq!(
            before,
            MachineTime {
                all: 1000,
                stolen: 20
            }
        );
        let after = MachineTime::parse("cpu  400 0 150 1080 10 0 40 320 0 0\n").expect("parses");
        assert_eq!(after.stolen_since(before), Some(0.3));
        assert_eq!(before.stolen_since(before), None);
        assert!(MachineTime::parse("cpu  1 2 3\n").is_err());
        assert!(MachineTime::parse("intr 1\n").is_err());
    }
}
