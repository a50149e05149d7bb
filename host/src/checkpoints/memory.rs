//! The memory all checkpoint work of this host holds at once: the earlier content a
//! recording reads before it is written to the log, the current content read to compare
//! fingerprints, and the earlier content an undo reads back and checks before it restores
//! anything. A semaphore on bytes, `[limits] checkpoint_memory_bytes` (docs/configuration.md):
//! a reading takes what is free without waiting, up to what it may need, and only when that
//! was not enough gives it back and waits (at most [`WAIT`]) for all it may need, so small
//! changes never wait for a large one and no reading holds a part while it waits for more
//! than it already has. One reading never holds more than the whole of it.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// How long a reading waits for memory before its call (or undo) is refused.
pub(super) const WAIT: Duration = Duration::from_secs(30);

/// The bytes of checkpoint content held in memory, host-wide.
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

    /// The most one reading may hold.
    pub(super) fn cap(&self) -> u64 {
        self.cap
    }

    /// As many of `want` bytes as are free now (maybe none), without waiting.
    pub(super) fn take_free(&self, want: u64) -> Held<'_> {
        let mut used = self.used.lock();
        let bytes = want.min(self.cap.saturating_sub(*used));
        *used += bytes;
        Held {
            memory: self,
            bytes,
        }
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

impl Held<'_> {
    /// The bytes held.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives back what is held beyond `bytes`.
    pub(super) fn shrink_to(&mut self, bytes: u64) {
        if bytes < self.bytes {
            self.memory.give_back(self.bytes - bytes);
            self.bytes = bytes;
        }
    }

    /// Adds what `other` holds to this.
    pub(super) fn absorb(&mut self, mut other: Held<'_>) {
        self.bytes += other.bytes;
        other.bytes = 0;
    }
}

impl Memory {
    fn give_back(&self, bytes: u64) {
        let mut used = self.used.lock();
        *used = used.saturating_sub(bytes);
        self.freed.notify_all();
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.memory.give_back(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_free_is_taken_at_once_and_given_back_when_dropped_or_shrunk() {
        let memory = Memory::new(100);
        let mut first = memory.take_free(70);
        assert_eq!(first.bytes(), 70);
        let second = memory.take_free(70);
        assert_eq!(second.bytes(), 30, "only what is free");
        assert_eq!(memory.take_free(1).bytes(), 0);
        first.shrink_to(10);
        let mut third = memory.take_free(60);
        assert_eq!(third.bytes(), 60);
        third.absorb(second);
        assert_eq!(third.bytes(), 90);
        drop((first, third));
        assert_eq!(memory.take(500).expect("all of it").bytes(), 100);
    }
}
