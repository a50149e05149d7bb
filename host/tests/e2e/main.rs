//! End-to-end tests: the real `rojos` host, started on loopback with the real cdylib
//! plugins (build them first: `cargo build --workspace`), driven over real HTTP.
//!
//! One module per capability; `support` holds the harness.

// A test binary: its items are reachable only from within it.
#![allow(unreachable_pub)]

mod always_allowed;
mod approval_binding;
mod approvals;
mod auth;
mod backlog;
mod binary;
mod body_timeouts;
mod budgets;
mod busy_project;
mod capped_listings;
mod chat;
mod cli;
mod cli_output;
mod compactions_api;
mod connections;
mod context;
mod context_windows;
mod conversation_rojo;
mod conversations;
mod dropin;
mod error_bodies;
mod file_names;
mod files;
mod fleet_runs;
mod hosts;
mod init;
mod isolation;
mod isolation_lane;
mod isolation_life;
mod isolation_lifecycle;
mod isolation_quarantine;
mod isolation_user;
mod isolation_zygote;
mod limits;
mod live_status;
mod load;
mod log_pipe;
mod managing;
mod mcp_client;
mod mcp_conformance;
mod mcp_http;
mod mcp_server;
mod mcp_sessions;
mod metrics;
mod model_turns;
mod outage;
mod pgbouncer;
mod plugins;
mod postgres;
mod prometheus_rules;
mod provider_errors;
mod provider_status;
mod providers;
mod runs;
mod runtime;
mod search_bounds;
mod search_snippets;
mod secrets;
mod several_hosts;
mod stale_writes;
mod stored_steps;
mod support;
mod tools_api;
mod transfers;
mod trust;
mod undo;
mod undo_bounds;
mod undo_record;
mod undo_streaming;
mod worker_stderr;
