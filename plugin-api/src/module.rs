//! The root module every tool plugin exports, frozen at version 0.1.
//!
//! abi_stable accepts a plugin only if the host's root module has the same number of fields
//! or fewer than the plugin's, so this struct never changes: new abilities travel inside the
//! JSON of [`crate::Manifest`] and [`crate::CallContext`]. The crate version is the ABI
//! version (`package_version_strings!`); a plugin built against an incompatible version is
//! refused at load with both versions named.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    sabi_types::VersionStrings,
    std_types::{RResult, RStr, RString},
    StableAbi,
};

/// The functions a tool plugin exports. Build it with [`crate::export_tool!`].
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = ToolModuleRef)))]
#[sabi(missing_field(panic))]
#[allow(missing_debug_implementations)]
pub struct ToolModule {
    /// The tool's [`crate::Manifest`] as JSON text, or an error message.
    pub manifest: extern "C" fn() -> RResult<RString, RString>,

    /// Runs the tool: `(context JSON, arguments JSON)` to the result text, or a
    /// [`crate::ToolError`] as JSON text.
    #[sabi(last_prefix_field)]
    pub call: extern "C" fn(ctx: RStr<'_>, args: RStr<'_>) -> RResult<RString, RString>,
}

impl RootModule for ToolModuleRef {
    declare_root_module_statics! {ToolModuleRef}
    const BASE_NAME: &'static str = "rojos_tool";
    const NAME: &'static str = "rojos_tool";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

impl std::fmt::Debug for ToolModuleRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolModuleRef").finish_non_exhaustive()
    }
}
