//! Rojos as an MCP server (`docs/mcp.md`): any MCP client lists a rojo's enabled tools and
//! calls them on one project, through the same confined path as a chat's tool calls.
//!
//! `tools` turns the registry's OpenAI tool definitions into MCP tools; `server` is the
//! protocol handler (rmcp's `ServerHandler`): `tools/list` and `tools/call` for the
//! [`McpTarget`] of each request; `stdio` serves one fixed target on stdin and stdout
//! (`rojos mcp`); `admission` is how a transport puts each `tools/call` under its caller's
//! limits. Streamable HTTP is mounted in `http::mcp`, behind the API's bearer tokens; its
//! sessions hold places of `sessions` (per token and in all, bound to the token that opened
//! them), through rmcp's session manager wrapped in `session_manager`.
//! `client` is the other direction, MCP servers as tool sources: the crate
//! `rojos-mcp-client` (`mcp-client/`), re-exported here.

mod admission;
mod server;
mod session_manager;
mod sessions;
mod stdio;
mod tools;

pub use rojos_mcp_client as client;

pub use admission::{AdmittedCall, CallAdmission, CallRefused, McpAdmission};
pub use server::{McpTarget, RojosMcpServer, TargetSource};
pub use session_manager::{opening, BoundSessionError, BoundSessionManager};
pub use sessions::{McpSessions, Reservation, SessionRefused};
pub use stdio::{serve_stdio, StdioError};
