//! The one piece of logic in this crate: running a tool behind `catch_unwind`.
//!
//! A panic that unwinds out of an `extern "C"` function aborts the host, and `catch_unwind`
//! in the host cannot stop it; only a catch inside the plugin works. [`crate::export_tool!`]
//! routes both exported functions through [`manifest_of`] and [`call_guarded`].

use std::panic::{catch_unwind, AssertUnwindSafe};

use abi_stable::std_types::{RResult, RString};

use crate::{CallContext, ErrorKind, Manifest, Tool, ToolError, JSON_API};

/// The manifest of `T` as JSON text; `panic_unwind` is the plugin crate's `cfg!(panic = "unwind")`.
pub fn manifest_of<T: Tool>(panic_unwind: bool) -> RResult<RString, RString> {
    let result = catch_unwind(|| {
        let manifest = Manifest {
            spec: T::spec(),
            api: JSON_API,
            plugin_api_version: env!("CARGO_PKG_VERSION").to_owned(),
            panic_unwind,
        };
        serde_json::to_string(&manifest).map_err(|e| format!("manifest is not serialisable: {e}"))
    });
    match result {
        Ok(Ok(json)) => RResult::ROk(json.into()),
        Ok(Err(message)) => RResult::RErr(message.into()),
        Err(panic) => {
            RResult::RErr(format!("manifest panicked: {}", panic_message(&*panic)).into())
        }
    }
}

/// Runs `T::call` on the context and arguments JSON; an error or a panic becomes a
/// [`ToolError`] as JSON text.
pub fn call_guarded<T: Tool>(ctx: &str, args: &str) -> RResult<RString, RString> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let ctx: CallContext = serde_json::from_str(ctx).map_err(|e| {
            ToolError::new(ErrorKind::INTERNAL, format!("invalid call context: {e}"))
        })?;
        T::call(&ctx, args)
    }));
    let error = match result {
        Ok(Ok(text)) => return RResult::ROk(text.into()),
        Ok(Err(error)) => error,
        Err(panic) => ToolError::new(
            ErrorKind::PANICKED,
            format!("the tool panicked: {}", panic_message(&*panic)),
        ),
    };
    let json = serde_json::to_string(&error)
        .unwrap_or_else(|_| r#"{"kind":"internal","message":"unserialisable error"}"#.to_owned());
    RResult::RErr(json.into())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "no message"
    }
}

/// Exports a [`crate::Tool`] as this library's root module. Use it once per plugin crate.
#[macro_export]
macro_rules! export_tool {
    ($tool:ident) => {
        /// The exported root module of this tool plugin (made by `rojos_plugin_api::export_tool!`).
        #[doc(hidden)]
        #[allow(missing_docs)]
        pub mod rojos_tool_export {
            use super::$tool;
            use $crate::abi_stable::{
                prefix_type::PrefixTypeTrait,
                std_types::{RResult, RStr, RString},
            };

            extern "C" fn manifest() -> RResult<RString, RString> {
                $crate::export::manifest_of::<$tool>(cfg!(panic = "unwind"))
            }

            extern "C" fn call(ctx: RStr<'_>, args: RStr<'_>) -> RResult<RString, RString> {
                $crate::export::call_guarded::<$tool>(ctx.as_str(), args.as_str())
            }

            #[$crate::abi_stable::export_root_module]
            pub fn root_module() -> $crate::ToolModuleRef {
                $crate::ToolModule { manifest, call }.leak_into_prefix()
            }
        }
    };
}
