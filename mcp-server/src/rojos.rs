//! [`Rojos`]: what the MCP server reads of the live `rojos.toml` at each request: a rojo's
//! enabled tools and approvals, and a tick at each reload. The server implements it on its
//! live settings (`rojos_server::live`), so an edit applies from the next request.

use rojos_agent::rojo::{ApprovalRule, ToolSelection};
use tokio::sync::watch;

/// The rojos as they are now.
pub trait Rojos: Send + Sync + std::fmt::Debug {
    /// The tools `rojo` enables now; the error says the rojo is unknown and names the known
    /// ones.
    ///
    /// # Errors
    ///
    /// `rojo` is not (or no longer) in `rojos.toml`.
    fn enabled_tools(&self, rojo: &str) -> Result<ToolSelection, String>;

    /// Which of `rojo`'s tools need the user's approval now (none for an unknown rojo).
    fn approval_rule(&self, rojo: &str) -> ApprovalRule;

    /// Changes at each reload of `rojos.toml`.
    fn changes(&self) -> watch::Receiver<()>;
}
