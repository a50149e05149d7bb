//! Keeping a project's checkpoints within `[limits] checkpoint_bytes`, counted as what they
//! take on disk (docs/configuration.md): every log with its entries, names and content, and
//! the head beside it. Nothing here reads a record: the sizes come from the folder, the
//! order and state from the heads.

use std::io;

use cap_std::fs::Dir;

use super::{head, listing, shared::Checkpoints, stored};

impl Checkpoints {
    /// Drops the oldest checkpoints of the project (never the run `keep` of `conversation`)
    /// until `needed` more bytes fit the budget: first their content and entries (they stay
    /// listed, as no longer available), then, oldest first, those dropped runs themselves.
    /// Both go from the oldest end, so an undo, which goes from the newest, stops at a run it
    /// cannot undo before it would reach past one. Returns what the project's checkpoints
    /// take on disk then.
    pub(super) fn make_room(
        &self,
        checkpoints: &Dir,
        conversation: &str,
        keep: &str,
        needed: u64,
    ) -> io::Result<u64> {
        let mut total = head::disk_bytes(checkpoints)?;
        let fits = |total: u64| total.saturating_add(needed) <= self.budget;
        if fits(total) {
            return Ok(total);
        }
        let mut all = listing::scan(checkpoints, None, self.record_bytes)?;
        all.retain(|h| !(h.conversation == conversation && h.run == keep));
        for head in all
            .iter_mut()
            .filter(|h| !h.evicted && h.unreadable.is_none())
        {
            if fits(total) {
                return Ok(total);
            }
            let left = stored::evict(checkpoints, head)?;
            tracing::info!(run = %head.run, bytes = head.disk, "checkpoint dropped (limits.checkpoint_bytes)");
            total = total.saturating_sub(head.disk) + left;
            head.disk = left;
            head.evicted = true;
        }
        for head in &all {
            if fits(total) {
                break;
            }
            stored::remove(checkpoints, &head.conversation, &head.run)?;
            tracing::info!(run = %head.run, bytes = head.disk, "dropped checkpoint removed (limits.checkpoint_bytes)");
            total = total.saturating_sub(head.disk);
        }
        Ok(total)
    }
}
