//! The tool registry: an immutable snapshot of the loaded tools by name, behind an atomically
//! swapped `Arc`. Each model turn takes one snapshot, so a reload never changes the tools
//! under a running turn. Also builds the OpenAI `tools` array a rojo offers its model.

use std::{collections::BTreeMap, sync::Arc};

use arc_swap::ArcSwap;
use serde_json::{json, Map, Value};

use crate::{
    config::ToolSelection,
    plugins::{LoadError, LoadFailure, Tool},
};

/// One immutable set of tools.
#[derive(Debug, Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<Tool>>,
}

impl Registry {
    /// Builds a registry from tools in priority order: the first tool of a name wins, each
    /// later one is returned as a [`LoadFailure::DuplicateName`] error.
    pub fn build(tools: impl IntoIterator<Item = Arc<Tool>>) -> (Registry, Vec<LoadError>) {
        let mut map: BTreeMap<String, Arc<Tool>> = BTreeMap::new();
        let mut errors = Vec::new();
        for tool in tools {
            if let Some(kept) = map.get(tool.name()) {
                errors.push(LoadError {
                    path: tool.source.clone(),
                    reason: LoadFailure::DuplicateName {
                        name: tool.name().to_owned(),
                        other: kept.source.clone(),
                    },
                });
                continue;
            }
            map.insert(tool.name().to_owned(), tool);
        }
        (Registry { tools: map }, errors)
    }

    /// The tool called `name`, if loaded.
    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.get(name)
    }

    /// Every loaded tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.values()
    }

    /// The tool `name` if it is loaded and `selection` enables it.
    pub fn enabled(&self, selection: &ToolSelection, name: &str) -> Option<&Arc<Tool>> {
        self.get(name).filter(|_| selection.allows(name))
    }

    /// The OpenAI `tools` array for a rojo's selection, sorted by name.
    pub fn definitions(&self, selection: &ToolSelection) -> Vec<Value> {
        self.tools
            .values()
            .filter(|t| selection.allows(t.name()))
            .map(|t| definition(t))
            .collect()
    }
}

/// The OpenAI function definition of a tool, with a parameters schema every provider accepts.
pub fn definition(tool: &Tool) -> Value {
    let spec = &tool.library.manifest.spec;
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": portable_schema(&spec.parameters),
        }
    })
}

/// Keeps only the JSON-schema keywords every provider accepts (Gemini rejects
/// `additionalProperties` and `$schema`): `type`, `properties`, `required`, `description`,
/// `enum`, `items`. The full schema is still enforced by the host before a call runs.
fn portable_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let kept = match key.as_str() {
            "type" | "required" | "description" | "enum" => value.clone(),
            "items" => portable_schema(value),
            "properties" => match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), portable_schema(s)))
                        .collect(),
                ),
                other => other.clone(),
            },
            _ => continue,
        };
        out.insert(key.clone(), kept);
    }
    Value::Object(out)
}

/// The current registry, swapped atomically as a whole.
#[derive(Debug)]
pub struct RegistryHandle {
    current: ArcSwap<Registry>,
}

impl RegistryHandle {
    /// A handle holding `registry`.
    pub fn new(registry: Registry) -> Self {
        RegistryHandle {
            current: ArcSwap::from_pointee(registry),
        }
    }

    /// The current snapshot: hold it for one model turn.
    pub fn snapshot(&self) -> Arc<Registry> {
        self.current.load_full()
    }

    /// Replaces the registry; snapshots already taken are unaffected.
    pub fn replace(&self, registry: Registry) {
        self.current.store(Arc::new(registry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_schema_drops_what_providers_reject() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "a path", "minLength": 1},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "x"}},
                "mode": {"type": "string", "enum": ["a", "b"]}
            },
            "required": ["path"]
        });
        assert_eq!(
            portable_schema(&schema),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "a path"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "mode": {"type": "string", "enum": ["a", "b"]}
                },
                "required": ["path"]
            })
        );
    }
}
