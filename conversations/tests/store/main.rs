//! Integration tests of the conversation store, one binary, one module per
//! capability. Each behaviour test runs on both backends (`on_sqlite::…` and
//! `on_postgres::…`, see `support::on_both_backends`): a `SqliteStore` in its own temp dir,
//! a `PostgresStore` on its own database of a throwaway PostgreSQL server. They check the
//! public `ConversationStore` API, plus raw SQL where the data itself is the point (a
//! forced mid-step failure, a corrupt row). `persistence` is about the SQLite file,
//! `migration` about the PostgreSQL schema. `leases` runs the run-lease tests on both
//! lease implementations; `approvals` the approvals of both stores; `unnamed` the
//! PostgreSQL store's statements sent unnamed (for transaction poolers).

mod approvals;
mod atomicity;
mod compactions;
mod concurrency;
mod leases;
mod listing;
mod managing;
mod migration;
mod paging;
mod persistence;
mod roundtrip;
mod shared_feeds;
mod silence;
mod size;
mod snippets;
mod support;
mod tls;
mod unnamed;
