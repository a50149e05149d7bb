//! MCP both ways: Rojos as an MCP server, the crate `rojos-mcp-server` (its map is at its
//! root), served on stdio (`rojos mcp`) and at `/mcp/{projectId}` (`http::mcp`), reading the
//! live `rojos.toml` as its `Rojos`; and [`client`], the MCP servers of `[mcp.servers.*]` as
//! tool sources, the crate `rojos-mcp-client`.

pub use rojos_mcp_client as client;
pub use rojos_mcp_server::*;
