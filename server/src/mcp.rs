//! The MCP server's view of the live `rojos.toml`: [`Live`] as its `Rojos`
//! (`rojos_mcp_server::Rojos`), so an edit applies from the next MCP request.

use rojos_config::{ApprovalRule, ToolSelection};
use rojos_mcp_server::Rojos;
use tokio::sync::watch;

use crate::live::Live;

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

    fn changes(&self) -> watch::Receiver<()> {
        Live::changes(self)
    }
}
