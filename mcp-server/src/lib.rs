//! Rojos as an MCP server (`docs/mcp.md`): any MCP client lists a rojo's enabled tools and
//! calls them on one project, through the same confined path as a chat's tool calls (the
//! agent's `Agent::call_tool`).
//!
//! `tools` turns the registry's OpenAI tool definitions into MCP tools; `server` is the
//! protocol handler (rmcp's `ServerHandler`): `tools/list` and `tools/call` for the
//! [`McpTarget`] of each request; `stdio` serves one fixed target on stdin and stdout
//! (`rojos mcp`); `admission` is how a transport puts each `tools/call` under its caller's
//! limits; `rojos`, what it reads of the live `rojos.toml` ([`Rojos`]). Streamable HTTP is
//! mounted by the server (`rojos_server::http::mcp`), behind the API's bearer tokens; its
//! sessions hold places of `sessions` (per token and in all, bound to the token that opened
//! them), through rmcp's session manager wrapped in `session_manager`. The other direction,
//! MCP servers as tool sources, is the crate `rojos-mcp-client`.

mod admission;
mod rojos;
mod server;
mod session_manager;
mod sessions;
mod stdio;
mod tools;

pub use admission::{AdmittedCall, CallAdmission, CallRefused, McpAdmission};
pub use rojos::Rojos;
pub use server::{McpTarget, RojosMcpServer, TargetSource};
pub use session_manager::{opening, BoundSessionError, BoundSessionManager};
pub use sessions::{McpSessionLimits, McpSessions, Reservation, SessionRefused};
pub use stdio::{serve_stdio, StdioError};
