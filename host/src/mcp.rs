//! MCP both ways: Rojos as an MCP server, the crate `rojos-mcp-server` (its map is at its
//! root), served on stdio (`rojos mcp`) and at `/mcp/{projectId}` (`http::mcp`); and
//! [`client`], the MCP servers of `[mcp.servers.*]` as tool sources, the crate
//! `rojos-mcp-client`. The server reads the live `rojos.toml` through [`Rojos`], implemented
//! here on [`Live`].

pub use rojos_mcp_client as client;
pub use rojos_mcp_server::*;

use tokio::sync::watch;

use crate::{
    config::{ApprovalRule, ToolSelection},
    live::Live,
};

impl Rojos for Live {
    fn enabled_tools(&self, rojo: &str) -> Result<ToolSelection, String> {
        let settings = self.settings();
        settings
            .rojo(rojo)
            .map(|config| config.tools.clone())
            .map_err(|unknown| unknown.to_string())
    }

    fn approval_rule(&self, rojo: &str) -> ApprovalRule {
        let settings = self.settings();
        settings
            .rojo(rojo)
            .map(|config| config.approve.clone())
            .unwrap_or_default()
    }

    fn changes(&self) -> watch::Receiver<u64> {
        Live::changes(self)
    }
}
