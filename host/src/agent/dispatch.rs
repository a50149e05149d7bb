//! What happens to one tool call the model made: malformed arguments, an unknown tool, a tool
//! the rojo does not enable, or a call repeated within the run become error results the model
//! sees; anything else runs through the plugin.

use std::collections::HashMap;

use rojos_llm::ToolCall;
use serde_json::Value;

use crate::{
    config::ToolSelection,
    plugins::{invoke, CallRequest, ToolOutcome},
    registry::Registry,
};

/// Runs `call`, or says why it was not run. `seen` remembers this run's calls.
pub(super) async fn run_call(
    registry: &Registry,
    enabled: &ToolSelection,
    seen: &mut HashMap<String, String>,
    call: &ToolCall,
    request: &CallRequest,
) -> ToolOutcome {
    let args = match &call.arguments {
        Ok(args) => args,
        Err(why) => return ToolOutcome::error(format!("the tool was not run: {why}")),
    };
    let Some(tool) = registry.enabled(enabled, &call.name) else {
        return ToolOutcome::error(unavailable(registry, enabled, &call.name));
    };
    let args = Value::Object(args.clone()).to_string();
    // serde_json's maps are sorted, so equal arguments give equal text.
    let key = format!("{}\n{args}", call.name);
    if let Some(earlier) = seen.get(&key) {
        return ToolOutcome::error(format!(
            "not run again: this exact call was already made in this run (call {earlier}); use its result above instead of repeating it"
        ));
    }
    seen.insert(key, call.id.clone());
    invoke(tool, &args, request).await
}

fn unavailable(registry: &Registry, enabled: &ToolSelection, name: &str) -> String {
    let available: Vec<&str> = registry
        .tools()
        .map(|t| t.name())
        .filter(|n| enabled.allows(n))
        .collect();
    let reason = if registry.get(name).is_some() {
        format!("tool {name} is not enabled for this assistant")
    } else {
        format!("unknown tool {name:?}")
    };
    format!("{reason}; available tools: {}", available.join(", "))
}
