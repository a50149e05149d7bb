//! The names and entries all checkpoint work of this host holds at once, `[limits]
//! checkpoint_memory_bytes` (docs/configuration.md): a recording holds its record's line
//! (every recorded name, type, mode and size) while it copies the content into the log, an
//! undo the longest line of its log while it checks and restores. File content is never held
//! whole: it is copied and hashed in parts of a fixed size (`fingerprint::CHUNK`). A
//! semaphore on bytes: a holder waits (at most [`WAIT`]) for what it needs to be free.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// How long a recording or an undo waits for memory before it is refused.
pub(super) const WAIT: Duration = Duration::from_secs(30);

/// The bytes of names and entries held in memory, host-wide.
#[derive(Debug)]
pub(super) struct Memory {
    /// `[limits] checkpoint_memory_bytes`.
    cap: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

/// Bytes taken from [`Memory`], given back when dropped.
#[derive(Debug)]
pub(super) struct Held<'a> {
    memory: &'a Memory,
    bytes: u64,
}

impl Memory {
    /// A semaphore of `cap` bytes.
    pub(super) fn new(cap: u64) -> Memory {
        Memory {
            cap,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// The most one holder may hold.
    pub(super) fn cap(&self) -> u64 {
        self.cap
    }

    /// `want` bytes (at most the whole), waiting until [`WAIT`] has passed for them to be
    /// free; `None` when they were not.
    pub(super) fn take(&self, want: u64) -> Option<Held<'_>> {
        let want = want.min(self.cap);
        let until = Instant::now() + WAIT;
        let mut used = self.used.lock();
        while self.cap - *used < want {
            if self.freed.wait_until(&mut used, until).timed_out() && self.cap - *used < want {
                return None;
            }
        }
        *used += want;
        Some(Held {
            memory: self,
            bytes: want,
        })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            let mut used = self.memory.used.lock();
            *used = used.saturating_sub(self.bytes);
            self.memory.freed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_taken_is_given_back_when_dropped() {
        let memory = Memory::new(100);
        let first = memory.take(70).expect("free");
        let second = memory.take(30).expect("the rest");
        drop((first, second));
        assert_eq!(memory.take(500).expect("all of it").bytes, 100);
    }
}
