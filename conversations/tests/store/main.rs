//! Integration tests of the conversation store, one binary, one module per
//! capability. Each test opens a `SqliteStore` in its own temp dir and checks it
//! through the public `ConversationStore` API, plus raw SQLite where the file
//! itself is the point (WAL, schema version, a forced mid-step failure).

mod atomicity;
mod concurrency;
mod listing;
mod paging;
mod persistence;
mod roundtrip;
mod size;
mod support;
